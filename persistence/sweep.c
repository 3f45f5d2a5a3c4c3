/* sweep.c -- retention: bounded sweep steps and retention changes.
 *
 * store_sweep is one step of bounded work, queued to the writer like any write: it deletes at
 * most `budget` files whose expires_at is in (0, now] (their run_files rows go with them by
 * cascade), then at most `budget` blob rows nothing references any more.  The blob FILES are
 * unlinked only in after_commit, i.e. after the commit that dropped their last reference is
 * durable: a crash before it leaves an orphan file (harmless, reused if the content comes back),
 * never a row pointing at a missing file.  The orchestrator calls it from a timer, again while
 * it reports a full budget.
 * What it does not do: own the timer or the retention setting (the orchestrator does).
 */
#include "internal.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

struct sweep_op {
  struct st_write w;
  store_sweep_cb cb;
  void *ud;
  int64_t now_ms;
  size_t budget;
  size_t removed;
  char **paths; /* blob files to unlink after commit */
  size_t npaths;
};

static void free_paths(struct sweep_op *op) {
  for (size_t i = 0; i < op->npaths; i++)
    sbx_free(op->paths[i]);
  sbx_free(op->paths);
  op->paths = NULL;
  op->npaths = 0;
}

/* Collects up to op->budget text values of column 0 (and int64 of column 1 into sizes). */
static int collect(struct store *st, struct st_stmt *s, struct sweep_op *op, char ***vals,
                   int64_t **sizes, size_t *n, struct sbx_error *err) {
  int rc = ST_DONE;
  *vals = sbx_calloc(op->budget, sizeof **vals);
  *sizes = sbx_calloc(op->budget, sizeof **sizes);
  *n = 0;
  if (*vals == NULL || *sizes == NULL) {
    st__reset(s);
    return sbx_error_set(err, SBX_ENOMEM, "sweep: out of memory");
  }
  while (*n < op->budget && (rc = st__step(s, "sweep", err)) == ST_ROW) {
    int oom = 0;
    (*vals)[*n] = st__col_dup(s, 0, &oom);
    (*sizes)[*n] = st__col_int64(s, 1);
    if (oom || (*vals)[*n] == NULL) {
      st__reset(s);
      return sbx_error_set(err, SBX_ENOMEM, "sweep: out of memory");
    }
    (*n)++;
  }
  int r = rc < 0 ? rc : 0;
  st__reset(s);
  return r;
}

static void free_vals(char **vals, int64_t *sizes, size_t n) {
  for (size_t i = 0; vals && i < n; i++)
    sbx_free(vals[i]);
  sbx_free(vals);
  sbx_free(sizes);
}

static int sweep_exec(struct store *st, struct st_write *w, struct sbx_error *err) {
  struct sweep_op *op = (struct sweep_op *)w;
  char **vals = NULL;
  int64_t *sizes = NULL;
  size_t n = 0;
  int rc;
  op->removed = 0;
  free_paths(op);
  struct st_stmt *s = st__q(&st->w, ST_SWEEP_EXPIRED);
  st__bind_int64(s, 1, op->now_ms);
  st__bind_int64(s, 2, (int64_t)op->budget);
  if ((rc = collect(st, s, op, &vals, &sizes, &n, err)) != 0)
    goto out;
  for (size_t i = 0; i < n; i++) {
    s = st__q(&st->w, ST_FILE_DELETE);
    st->files_dirty = 1;
    st__bind_text(s, 1, vals[i]);
    if ((rc = st__step_done(s, "sweep file delete", err)) != 0)
      goto out;
    op->removed++;
  }
  free_vals(vals, sizes, n);
  vals = NULL;
  sizes = NULL;
  s = st__q(&st->w, ST_SWEEP_UNREFERENCED);
  st__bind_int64(s, 1, (int64_t)op->budget);
  if ((rc = collect(st, s, op, &vals, &sizes, &n, err)) != 0)
    goto out;
  if (n && (op->paths = sbx_calloc(n, sizeof *op->paths)) == NULL) {
    rc = sbx_error_set(err, SBX_ENOMEM, "sweep: out of memory");
    goto out;
  }
  for (size_t i = 0; i < n; i++) {
    s = st__q(&st->w, ST_BLOB_DELETE);
    st__bind_text(s, 1, vals[i]);
    if ((rc = st__step_done(s, "sweep blob delete", err)) != 0)
      goto out;
    if ((op->paths[op->npaths] = st__blob_path(st, vals[i])) == NULL) {
      rc = sbx_error_set(err, SBX_ENOMEM, "sweep: out of memory");
      goto out;
    }
    op->npaths++;
    w->blob_delta -= sizes[i];
  }
out:
  free_vals(vals, sizes, n);
  if (rc != 0) {
    free_paths(op);
    w->blob_delta = 0;
    op->removed = 0;
  }
  return rc;
}

static void sweep_after_commit(struct store *st, struct st_write *w) {
  struct sweep_op *op = (struct sweep_op *)w;
  for (size_t i = 0; i < op->npaths; i++)
    if (unlink(op->paths[i]) != 0 && errno != ENOENT)
      sbx_log(SBX_LOG_WARN, ST_MOD, "sweep: unlink %s: %s", op->paths[i], strerror(errno));
}

static void sweep_done(struct store *st, struct st_write *w) {
  struct sweep_op *op = (struct sweep_op *)w;
  if (op->cb)
    op->cb(w->rc, w->rc ? &w->err : NULL, w->rc ? 0 : op->removed, op->ud);
}

static void sweep_release(struct store *st, struct st_write *w) {
  struct sweep_op *op = (struct sweep_op *)w;
  free_paths(op);
  sbx_free(op);
}

int store_sweep(struct store *st, int64_t now_ms, size_t budget, store_sweep_cb cb, void *ud) {
  if (budget == 0 || budget > 100000)
    return SBX_EINVAL;
  struct sweep_op *op = sbx_calloc(1, sizeof *op);
  if (op == NULL)
    return SBX_ENOMEM;
  st__write_init(&op->w, sweep_exec, sweep_after_commit, sweep_done, sweep_release);
  op->cb = cb;
  op->ud = ud;
  op->now_ms = now_ms;
  op->budget = budget;
  return st__submit(st, &op->w);
}

static int retention_exec(struct store *st, struct st_write *w, struct sbx_error *err) {
  struct st_simple *op = (struct st_simple *)w;
  struct st_stmt *s = st__q(&st->w, ST_RETENTION_APPLY);
  st->files_dirty = 1;
  st__bind_int64(s, 1, op->i[0]);
  return st__step_done(s, "retention apply", err);
}

int store_retention_apply(struct store *st, int64_t retention_ms, store_done_cb cb, void *ud) {
  struct st_simple *op = st__simple_new(retention_exec, cb, ud);
  if (op == NULL)
    return SBX_ENOMEM;
  op->i[0] = retention_ms;
  return st__submit(st, &op->w);
}
