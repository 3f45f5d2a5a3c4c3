/* runs.c -- runs (the whole run object, one row, replaced on every change the orchestrator
 * persists) and run files (which files a run produced, in the order they were written).
 *
 * A put is an UPDATE of the columns that change after creation, and an INSERT only when it
 * changed nothing: the identity columns (chat, seq, idempotency key, created_at) are never named
 * in the UPDATE, so a result rewrites the run's row and its runs_unfinished entry but not its
 * entries in the chat-keyed indexes, which are one random page each (test_runs checks it on the
 * statement's bytecode; bench/runs/wal_pages.py counts the pages).
 *
 * Idempotency: a run put with an idempotency key another run of the chat already holds fails
 * with SBX_EEXIST and that run's id as the error detail (err->msg is exactly the 32-char id).
 * What it does not do: know the run state machine; `state` and `status` are the orchestrator's
 * names, stored as given.  JSON-shaped fields are stored as the text the orchestrator made.
 */
#include "internal.h"

#include <stddef.h>
#include <string.h>

/* The string members of a store_run, each owned by it: what store_run_copy duplicates and
 * store_run_free frees. */
static const size_t run_strs[] = {
    offsetof(struct store_run, code),
    offsetof(struct store_run, origin),
    offsetof(struct store_run, state),
    offsetof(struct store_run, status),
    offsetof(struct store_run, stdout_text),
    offsetof(struct store_run, stderr_text),
    offsetof(struct store_run, error_json),
    offsetof(struct store_run, notes_json),
    offsetof(struct store_run, remounted_json),
    offsetof(struct store_run, result_hash),
    offsetof(struct store_run, idempotency_key),
    offsetof(struct store_run, value_json),
    offsetof(struct store_run, displays_json),
};

static char **run_str(struct store_run *r, size_t i) {
  return (char **)(void *)((char *)r + run_strs[i]);
}

void store_run_free(struct store_run *r) {
  if (r == NULL)
    return;
  for (size_t i = 0; i < SBX_ARRAY_SIZE(run_strs); i++)
    sbx_free(*run_str(r, i));
  memset(r, 0, sizeof *r);
}

void store_run_list_free(struct store_run *v, size_t n) {
  for (size_t i = 0; v && i < n; i++)
    store_run_free(&v[i]);
  sbx_free(v);
}

int store_run_copy(struct store_run *dst, const struct store_run *src) {
  *dst = *src;
  int oom = 0;
  for (size_t i = 0; i < SBX_ARRAY_SIZE(run_strs); i++) {
    char **slot = run_str(dst, i);
    if (*slot != NULL && (oom || (*slot = sbx_strdup(*slot)) == NULL)) {
      *slot = NULL;
      oom = 1;
    }
  }
  if (oom) {
    store_run_free(dst);
    return SBX_ENOMEM;
  }
  return 0;
}

static int run_from_row(struct st_stmt *s, struct store_run *r) {
  int oom = 0;
  memset(r, 0, sizeof *r);
  st__col_id(s, 0, r->id);
  st__col_id(s, 1, r->chat_id);
  st__col_id(s, 2, r->turn_id);
  r->code = st__col_dup(s, 3, &oom);
  r->origin = st__col_dup(s, 4, &oom);
  r->state = st__col_dup(s, 5, &oom);
  r->status = st__col_dup(s, 6, &oom);
  r->timeout_s = st__col_int(s, 7);
  r->attempts = st__col_int(s, 8);
  r->stdout_text = st__col_dup(s, 9, &oom);
  r->stderr_text = st__col_dup(s, 10, &oom);
  r->stdout_truncated = st__col_int(s, 11);
  r->stderr_truncated = st__col_int(s, 12);
  r->error_json = st__col_dup(s, 13, &oom);
  r->notes_json = st__col_dup(s, 14, &oom);
  r->remounted_json = st__col_dup(s, 15, &oom);
  r->restarted = st__col_int(s, 16);
  r->files_unlisted = st__col_int(s, 17);
  r->figures_dropped = st__col_int(s, 18);
  r->result_hash = st__col_dup(s, 19, &oom);
  r->idempotency_key = st__col_dup(s, 20, &oom);
  r->seq = st__col_int64(s, 21);
  r->created_at = st__col_int64(s, 22);
  r->started_at = st__col_int64(s, 23);
  r->finished_at = st__col_int64(s, 24);
  r->value_json = st__col_dup(s, 25, &oom);
  r->displays_json = st__col_dup(s, 26, &oom);
  if (oom) {
    store_run_free(r);
    return SBX_ENOMEM;
  }
  return 0;
}

/* ---- store_run_put ------------------------------------------------------------------------- */

struct run_op {
  struct st_write w;
  store_done_cb cb;
  void *ud;
  int create; /* store_run_create: the run is new, no UPDATE is tried first */
  struct store_run r;
};

static void run_bind(struct st_stmt *s, const struct store_run *r) {
  st__bind_text(s, 1, r->id);
  st__bind_text(s, 2, r->chat_id);
  st__bind_text(s, 3, r->turn_id);
  st__bind_text(s, 4, r->code ? r->code : "");
  st__bind_text(s, 5, r->origin ? r->origin : "");
  st__bind_text(s, 6, r->state ? r->state : "");
  st__bind_text(s, 7, r->status);
  st__bind_int64(s, 8, r->timeout_s);
  st__bind_int64(s, 9, r->attempts);
  st__bind_text(s, 10, r->stdout_text);
  st__bind_text(s, 11, r->stderr_text);
  st__bind_int64(s, 12, r->stdout_truncated);
  st__bind_int64(s, 13, r->stderr_truncated);
  st__bind_text(s, 14, r->error_json);
  st__bind_text(s, 15, r->notes_json);
  st__bind_text(s, 16, r->remounted_json);
  st__bind_int64(s, 17, r->restarted);
  st__bind_int64(s, 18, r->files_unlisted);
  st__bind_int64(s, 19, r->figures_dropped);
  st__bind_text(s, 20, r->result_hash);
  st__bind_text(s, 21, r->idempotency_key);
  st__bind_int64(s, 22, r->seq);
  st__bind_int64(s, 23, r->created_at);
  st__bind_int64(s, 24, r->started_at);
  st__bind_int64(s, 25, r->finished_at);
  st__bind_text(s, 26, r->value_json);
  st__bind_text(s, 27, r->displays_json);
}

static int run_put_exec(struct store *st, struct st_write *w, struct sbx_error *err) {
  struct run_op *op = (struct run_op *)w;
  const struct store_run *r = &op->r;
  struct st_stmt *s;
  int rc;
  /* Update first: a put of a run that exists rewrites its row and, of the indexes, only
   * runs_unfinished (state); its chat, seq, idempotency key and creation time stay as created, so
   * neither the chat nor the idempotency key needs checking again. */
  if (!op->create) {
    s = st__q(&st->w, ST_RUN_UPDATE);
    run_bind(s, r);
    if ((rc = st__step_done(s, "run update", err)) != 0)
      return rc;
    if (st__changes(&st->w) > 0)
      return 0;
  }
  /* A new run (or an id of another chat, refused below). */
  if (r->idempotency_key) {
    s = st__q(&st->w, ST_RUN_BY_IDEM);
    st__bind_text(s, 1, r->chat_id);
    st__bind_text(s, 2, r->idempotency_key);
    rc = st__step(s, "idempotency lookup", err);
    if (rc == ST_ROW && strcmp(st__col_text(s, 0), r->id) != 0) {
      rc = sbx_error_set(err, SBX_EEXIST, "%s", st__col_text(s, 0));
      st__reset(s);
      return rc;
    }
    st__reset(s);
    if (rc < 0)
      return rc;
  }
  if ((rc = st__known(st, ST_CHAT_EXISTS, r->chat_id, "chat", err)) != 0)
    return rc;
  s = st__q(&st->w, ST_RUN_INSERT);
  run_bind(s, r);
  rc = st__step_done(s, "run insert", err);
  if (rc == 0 && st__changes(&st->w) == 0) /* PostgreSQL: the id exists (DO NOTHING) */
    rc = sbx_error_set(err, SBX_ECONFLICT, "run insert: run %s exists", r->id);
  if (rc == SBX_ECONFLICT) { /* the insert hit an existing id: a run never moves to another chat */
    s = st__q(&st->w, ST_RUN_CHAT_OF);
    st__bind_text(s, 1, r->id);
    int found =
        st__step(s, "run lookup", NULL) == ST_ROW && strcmp(st__col_text(s, 0), r->chat_id) != 0;
    st__reset(s);
    if (found)
      return sbx_error_set(err, SBX_ECONFLICT, "run %s belongs to another chat", r->id);
  }
  return rc;
}

static void run_put_done(struct store *st, struct st_write *w) {
  struct run_op *op = (struct run_op *)w;
  if (op->cb)
    op->cb(w->rc, w->rc ? &w->err : NULL, op->ud);
}

static void run_put_release(struct store *st, struct st_write *w) {
  struct run_op *op = (struct run_op *)w;
  store_run_free(&op->r);
  sbx_free(op);
}

static int run_submit(struct store *st, const struct store_run *r, int create, store_done_cb cb,
                      void *ud) {
  if (r == NULL || !r->id[0] || !r->chat_id[0])
    return SBX_EINVAL;
  struct run_op *op = sbx_calloc(1, sizeof *op);
  if (op == NULL)
    return SBX_ENOMEM;
  if (store_run_copy(&op->r, r) != 0) {
    sbx_free(op);
    return SBX_ENOMEM;
  }
  st__write_init(&op->w, run_put_exec, NULL, run_put_done, run_put_release);
  op->cb = cb;
  op->ud = ud;
  op->create = create;
  return st__submit_fenced(st, &op->w, r->chat_id);
}

int store_run_put(struct store *st, const struct store_run *r, store_done_cb cb, void *ud) {
  return run_submit(st, r, 0, cb, ud);
}

int store_run_create(struct store *st, const struct store_run *r, store_done_cb cb, void *ud) {
  return run_submit(st, r, 1, cb, ud);
}

/* ---- reads --------------------------------------------------------------------------------- */

int store_run_get(struct store *st, const char *run_id, struct store_run *out) {
  struct st_stmt *s = st__q(&st->r, ST_RUN_GET);
  st__bind_text(s, 1, run_id);
  int rc = st__step(s, "run get", NULL);
  int r = rc == ST_ROW ? run_from_row(s, out) : rc == ST_DONE ? SBX_ENOENT : rc;
  st__reset(s);
  return r;
}

int store_run_by_idempotency(struct store *st, const char *chat_id, const char *key,
                             store_id out_run_id) {
  struct st_stmt *s = st__q(&st->r, ST_RUN_BY_IDEM);
  st__bind_text(s, 1, chat_id);
  st__bind_text(s, 2, key);
  int rc = st__step(s, "idempotency", NULL), r = 0;
  if (rc == ST_ROW)
    st__col_id(s, 0, out_run_id);
  else
    r = rc == ST_DONE ? SBX_ENOENT : rc;
  st__reset(s);
  return r;
}

static int run_row(struct st_stmt *s, void *item) { return run_from_row(s, item); }
static void run_list_free(void *v, size_t n) { store_run_list_free(v, n); }

static int run_rows(struct st_stmt *s, struct store_run **out, size_t *n) {
  void *v;
  int r = st__rows(s, "runs", sizeof **out, run_row, run_list_free, &v, n);
  *out = v;
  return r;
}

int store_run_list_unfinished(struct store *st, struct store_run **out, size_t *n) {
  return run_rows(st__q(&st->r, ST_RUN_UNFINISHED), out, n);
}

int store_run_list_unfinished_chat(struct store *st, const char *chat_id, struct store_run **out,
                                   size_t *n) {
  struct st_stmt *s = st__q(&st->r, ST_RUN_UNFINISHED_CHAT);
  st__bind_text(s, 1, chat_id);
  return run_rows(s, out, n);
}

int store_run_list(struct store *st, const char *chat_id, size_t limit, struct store_run **out,
                   size_t *n) {
  struct st_stmt *s = st__q(&st->r, chat_id ? ST_RUN_LIST_CHAT : ST_RUN_LIST_ALL);
  st__bind_int64(s, 1, (int64_t)SBX_MIN(limit, (size_t)INT64_MAX));
  if (chat_id)
    st__bind_text(s, 2, chat_id);
  return run_rows(s, out, n);
}

/* ---- run files ----------------------------------------------------------------------------- */

static int run_file_exec(struct store *st, struct st_write *w, struct sbx_error *err) {
  struct st_simple *op = (struct st_simple *)w;
  int rc;
  if ((rc = st__known(st, ST_RUN_CHAT_OF, op->s[0], "run", err)) != 0 ||
      (rc = st__known(st, ST_FILE_EXISTS, op->s[1], "file", err)) != 0)
    return rc;
  struct st_stmt *s = st__q(&st->w, ST_RUN_FILE_PUT);
  st__bind_text(s, 1, op->s[0]);
  st__bind_int64(s, 2, op->i[0]);
  st__bind_text(s, 3, op->s[1]);
  return st__step_done(s, "run file put", err);
}

int store_run_file_put(struct store *st, const char *run_id, int position, const char *file_id,
                       store_done_cb cb, void *ud) {
  if (run_id == NULL || file_id == NULL || position < 0)
    return SBX_EINVAL;
  struct st_simple *op = st__simple_new(run_file_exec, cb, ud);
  if (op == NULL || st__simple_str(op, 0, run_id) || st__simple_str(op, 1, file_id)) {
    st__simple_discard(op);
    return SBX_ENOMEM;
  }
  op->i[0] = position;
  return st__submit(st, &op->w);
}

int store_run_files(struct store *st, const char *run_id, struct store_file **out, size_t *n) {
  struct st_stmt *s = st__q(&st->r, ST_RUN_FILES);
  st__bind_text(s, 1, run_id);
  return st__file_rows(s, out, n);
}
