/* writer.c -- the one writer: a thread that owns the write connection and commits queued writes
 * in groups.
 *
 * Loop thread: st__submit() corks a write: what one turn of the loop submits (a run's row and its
 * event, say) is handed to the writer together when the loop goes idle (a uv_idle_t: it runs
 * before the loop polls again, and keeps the poll from sleeping while a write is corked), so it
 * commits as one group instead of one commit each, as the writer happened to wake.  Nothing is
 * acknowledged sooner: each callback still follows the commit of its write.
 * Writer thread: takes everything queued (at most group_max), BEGIN IMMEDIATE, then for each
 * write SAVEPOINT / exec / RELEASE (or ROLLBACK TO + RELEASE when that write failed, so it rolls
 * back alone) -- the transaction's first write needs no savepoint: when it fails the transaction
 * holds nothing else, and it is rolled back whole (the rest go on in a new one) -- makes the group's new blob files durable (blobs.c: parallel fsync, rename,
 * directory fsync), COMMIT (fsync of the WAL: synchronous=FULL), runs after_commit hooks, moves the
 * group to the done list and pokes the loop through a uv_async_t, then (checkpoint.c) may run a
 * checkpoint before taking the next group.  Loop thread (on_async): runs
 * each write's callback, then frees it.  So a callback with rc == 0 always follows a durable
 * commit.  If SQLite abandons the whole transaction (an I/O error can do that), the writes of the
 * group that had succeeded fail too, with that error, and the rest go on in a new transaction.
 *
 * The async handle is referenced only while writes are in flight, so a loop with nothing else to
 * do returns from uv_run once every callback has run.  Writes must be submitted from the loop
 * thread.  What this file does not do: know what any write means (the ops do).
 *
 * The writer's state machine (enum st_writer_state) is drawn in internal.h, above its enum.
 */
#include "internal.h"

#include <string.h>

static const char *const writer_names[] = {"start", "waiting", "committing", "checkpointing",
                                           "stopped"};
static const uint32_t writer_from[] = {
    [ST_WS_START] = 0,
    [ST_WS_WAITING] =
        SBX_FSM_BIT(ST_WS_START) | SBX_FSM_BIT(ST_WS_COMMITTING) | SBX_FSM_BIT(ST_WS_CHECKPOINTING),
    [ST_WS_COMMITTING] = SBX_FSM_BIT(ST_WS_WAITING),
    [ST_WS_CHECKPOINTING] = SBX_FSM_BIT(ST_WS_COMMITTING),
    [ST_WS_STOPPED] = SBX_FSM_BIT(ST_WS_WAITING),
};
static const struct sbx_fsm writer_fsm = SBX_FSM(ST_MOD, "writer", writer_names, writer_from, NULL);

#define set_state(st, to) set_state_((st), (to), __FILE__, __LINE__)
/* The only writer of st->wstate (writer thread, under st->mu; tests read it under st->mu). */
static void set_state_(struct store *st, enum st_writer_state to, const char *file, int line) {
  if (sbx_fsm_step(&writer_fsm, st->wstate, to, st->dir, file, line) == 0)
    st->wstate = to;
}

static void on_async_close(uv_handle_t *h) { sbx_free(h); } /* the async and the idle handle */

static void run_completions(struct store *st) {
  struct sbx_list local, *it, *tmp;
  SBX_LIST_INIT(&local);
  pthread_mutex_lock(&st->mu);
  SBX_LIST_FOREACH_SAFE(it, tmp, &st->done) {
    sbx_list_remove(it);
    sbx_list_insert_tail(&local, it);
  }
  pthread_mutex_unlock(&st->mu);
  SBX_LIST_FOREACH_SAFE(it, tmp, &local) {
    struct st_write *w = SBX_CONTAINER_OF(it, struct st_write, link);
    sbx_list_remove(it);
    st__fence_count(st, w, 0); /* through the writer: a released fence may be forgotten */
    if (w->rc == SBX_EFENCED && st->on_fenced)
      st->on_fenced(w->fence, st->on_fenced_ud);
    w->done(st, w);
    w->release(st, w);
    if (--st->inflight == 0 && st->async)
      uv_unref((uv_handle_t *)st->async);
  }
}

static void on_async(uv_async_t *h) { run_completions(h->data); }

/* The corked writes go to the writer's queue, in the order they were submitted. */
void st__uncork(struct store *st) {
  if (SBX_LIST_EMPTY(&st->corked))
    return;
  pthread_mutex_lock(&st->mu);
  while (!SBX_LIST_EMPTY(&st->corked)) {
    struct sbx_list *it = st->corked.next;
    sbx_list_remove(it);
    sbx_list_insert_tail(&st->queue, it);
  }
  pthread_cond_signal(&st->cv);
  pthread_mutex_unlock(&st->mu);
}

static void on_cork(uv_idle_t *h) {
  st__uncork(h->data);
  uv_idle_stop(h);
}

static int step_ctl(struct store *st, enum st_stmt_id id, struct sbx_error *err) {
  return st__step_done(st__q(&st->w, id), st__stmt_names[id], err);
}

static void fail_all(struct sbx_list *l, int rc, const struct sbx_error *err) {
  struct sbx_list *it;
  SBX_LIST_FOREACH(it, l) {
    struct st_write *w = SBX_CONTAINER_OF(it, struct st_write, link);
    if (w->rc == 0) {
      w->rc = rc;
      w->err = *err;
    }
  }
}

static void move_all(struct sbx_list *to, struct sbx_list *from) {
  struct sbx_list *it, *tmp;
  SBX_LIST_FOREACH_SAFE(it, tmp, from) {
    sbx_list_remove(it);
    sbx_list_insert_tail(to, it);
  }
}

/* A transaction ended (committed or rolled back): if it touched the files table, readers' kept
 * file lists are out of date from now on (store_files_generation). */
static void files_txn_ended(struct store *st) {
  if (st->files_dirty) {
    __atomic_add_fetch(&st->files_gen, 1, __ATOMIC_RELEASE);
    st->files_dirty = 0;
  }
}

/* Several nodes (a lease was taken): the writer's session set for fencing before a BEGIN. */
static int fence_session(struct store *st, struct sbx_error *err) {
  pthread_mutex_lock(&st->mu);
  int nodes = st->fence_node[0] != 0;
  pthread_mutex_unlock(&st->mu);
  return nodes ? st__pg_fence_session(&st->w, err) : 0;
}

/* Runs one group; every write ends with rc and err set, and the committed ones had their
 * after_commit hook run.  Returns the number of commits made. */
static int run_group(struct store *st, struct sbx_list *group, struct sbx_list *finished) {
  struct sbx_list txn; /* writes of the open transaction */
  struct sbx_error e;
  int commits = 0, open = 0, rc;
  store_id fenced[ST_PG_GROUP_MAX]; /* chats whose lease this transaction checked and locked */
  size_t nfenced = 0;
  SBX_LIST_INIT(&txn);
  while (!SBX_LIST_EMPTY(group) || open) {
    if (!open && !SBX_LIST_EMPTY(group)) {
      /* a connection that was lost (PostgreSQL) is opened again first, never inside a
       * transaction: what the group wrote before it was lost is rolled back and failed below */
      if ((rc = st__db_ready(&st->w, &e)) != 0 || (rc = fence_session(st, &e)) != 0 ||
          (rc = step_ctl(st, ST_BEGIN, &e)) != 0) {
        fail_all(group, rc, &e);
        move_all(finished, group);
        break;
      }
      open = 1;
      nfenced = 0;
    }
    if (SBX_LIST_EMPTY(group)) {
      /* commit what the transaction holds: its blob files made durable first */
      rc = st__blob_prepare_commit(st, &txn, &e);
      if (rc == 0)
        rc = step_ctl(st, ST_COMMIT, &e);
      if (rc != 0) {
        if (st__in_txn(&st->w)) {
          struct sbx_error ignored;
          step_ctl(st, ST_ROLLBACK, &ignored);
        }
        fail_all(&txn, rc, &e);
      } else {
        commits++;
        struct sbx_list *it;
        SBX_LIST_FOREACH(it, &txn) {
          struct st_write *w = SBX_CONTAINER_OF(it, struct st_write, link);
          if (w->rc == 0 && w->after_commit)
            w->after_commit(st, w);
        }
      }
      move_all(finished, &txn);
      files_txn_ended(st);
      open = 0;
      continue;
    }
    struct st_write *w = SBX_CONTAINER_OF(group->next, struct st_write, link);
    int first = SBX_LIST_EMPTY(&txn); /* alone in the transaction: it is its own savepoint */
    sbx_list_remove(&w->link);
    sbx_list_insert_tail(&txn, &w->link);
    if (first) {
      rc = st__fence_check(st, w, fenced, nfenced, &w->err);
      if (rc == 0)
        rc = w->exec(st, w, &w->err);
      if (rc != 0 && st__in_txn(&st->w)) {
        struct sbx_error ignored;
        step_ctl(st, ST_ROLLBACK, &ignored);
      }
    } else if ((rc = step_ctl(st, ST_SAVEPOINT, &w->err)) == 0) {
      rc = st__fence_check(st, w, fenced, nfenced, &w->err);
      if (rc == 0)
        rc = w->exec(st, w, &w->err);
      if (rc != 0 && st__in_txn(&st->w)) {
        struct sbx_error ignored;
        if (step_ctl(st, ST_ROLLBACK_TO, &ignored) != 0 || step_ctl(st, ST_RELEASE, &ignored) != 0)
          /* the savepoint could not be undone: give the whole transaction up */
          step_ctl(st, ST_ROLLBACK, &ignored);
      } else if (rc == 0 && (rc = step_ctl(st, ST_RELEASE, &w->err)) != 0) {
        struct sbx_error ignored;
        step_ctl(st, ST_ROLLBACK, &ignored);
      }
    }
    w->rc = rc;
    if (rc == 0 && w->fence[0] && nfenced < ST_PG_GROUP_MAX) /* its lock held until the end */
      snprintf(fenced[nfenced++], sizeof(store_id), "%s", w->fence);
    if (rc != 0 && w->err.code == 0)
      sbx_error_set(&w->err, rc, "%s", sbx_strerror(rc));
    if (!st__in_txn(&st->w)) {
      /* the database rolled the whole transaction back (or we had to): every earlier write of it is
       * lost; they fail with this write's error and the rest of the group starts afresh. */
      e = w->err;
      if (e.code == 0)
        sbx_error_set(&e, SBX_EDB, "transaction rolled back");
      fail_all(&txn, rc ? rc : SBX_EDB, &e);
      move_all(finished, &txn);
      files_txn_ended(st);
      open = 0;
    }
  }
  return commits;
}

static void *writer_main(void *arg) {
  struct store *st = arg;
  struct sbx_list group, finished;
  SBX_LIST_INIT(&group);
  SBX_LIST_INIT(&finished);
  pthread_mutex_lock(&st->mu);
  set_state(st, ST_WS_WAITING);
  for (;;) {
    while (SBX_LIST_EMPTY(&st->queue) && !st->stopping)
      pthread_cond_wait(&st->cv, &st->mu);
    if (SBX_LIST_EMPTY(&st->queue))
      break; /* stopping, nothing left */
    set_state(st, ST_WS_COMMITTING);
    size_t n = 0, max = st->kind == ST_PG ? SBX_MIN(st->group_max, ST_PG_GROUP_MAX) : st->group_max;
    while (!SBX_LIST_EMPTY(&st->queue) && n < max) {
      struct sbx_list *it = st->queue.next;
      sbx_list_remove(it);
      sbx_list_insert_tail(&group, it);
      n++;
    }
    pthread_mutex_unlock(&st->mu);

    int commits = run_group(st, &group, &finished);
    struct sbx_list *it;
    SBX_LIST_FOREACH(it, &finished) { /* temp files of writes that did not commit go */
      st__blob_pending_drop(SBX_CONTAINER_OF(it, struct st_write, link));
    }

    enum st_ckpt_job ckpt = st__ckpt_writer_due(st);
    pthread_mutex_lock(&st->mu);
    uint64_t errors = 0;
    int64_t delta = 0;
    SBX_LIST_FOREACH(it, &finished) {
      struct st_write *w = SBX_CONTAINER_OF(it, struct st_write, link);
      if (w->rc != 0)
        errors++;
      else
        delta += w->blob_delta;
      st__health_note_held(st, w->rc, &w->err);
    }
    st->stats.commits += (uint64_t)commits;
    st->stats.writes += n;
    st->stats.write_errors += errors;
    if (n > st->stats.max_group)
      st->stats.max_group = n;
    st->stats.blob_bytes = (uint64_t)((int64_t)st->stats.blob_bytes + delta);
    move_all(&st->done, &finished);
    set_state(st, ckpt != ST_CKPT_NONE ? ST_WS_CHECKPOINTING : ST_WS_WAITING);
    pthread_mutex_unlock(&st->mu);
    uv_async_send(st->async);
    if (ckpt != ST_CKPT_NONE) {
      /* the callbacks are the loop's now: the checkpoint delays no one's, only the next group */
      st__ckpt_writer_run(st, ckpt);
      pthread_mutex_lock(&st->mu);
      set_state(st, ST_WS_WAITING);
    } else {
      pthread_mutex_lock(&st->mu);
    }
  }
  set_state(st, ST_WS_STOPPED);
  pthread_mutex_unlock(&st->mu);
  return NULL;
}

int st__writer_start(struct store *st, struct sbx_error *err) {
  st->async = sbx_malloc(sizeof *st->async);
  if (st->async == NULL)
    return sbx_error_set(err, SBX_ENOMEM, "writer: out of memory");
  int rc = uv_async_init(st->loop, st->async, on_async);
  if (rc != 0) {
    sbx_free(st->async);
    st->async = NULL;
    return sbx_error_set(err, sbx_from_uv(rc), "writer: uv_async_init: %s", uv_strerror(rc));
  }
  st->async->data = st;
  uv_unref((uv_handle_t *)st->async);
  if ((st->cork = sbx_malloc(sizeof *st->cork)) == NULL) {
    uv_close((uv_handle_t *)st->async, on_async_close);
    st->async = NULL;
    return sbx_error_set(err, SBX_ENOMEM, "writer: out of memory");
  }
  uv_idle_init(st->loop, st->cork);
  st->cork->data = st;
  uv_unref((uv_handle_t *)st->cork); /* the async's reference keeps the loop while writes fly */
  pthread_mutex_init(&st->mu, NULL);
  pthread_cond_init(&st->cv, NULL);
  if ((rc = pthread_create(&st->thread, NULL, writer_main, st)) != 0) {
    pthread_cond_destroy(&st->cv);
    pthread_mutex_destroy(&st->mu);
    uv_close((uv_handle_t *)st->async, on_async_close);
    st->async = NULL;
    uv_close((uv_handle_t *)st->cork, on_async_close);
    st->cork = NULL;
    return sbx_error_set(err, SBX_EIO, "writer: pthread_create: %s", strerror(rc));
  }
  st->thread_started = 1;
  return 0;
}

void st__writer_stop(struct store *st) {
  if (!st->thread_started)
    return;
  st__uncork(st); /* the writer drains its queue before it stops */
  pthread_mutex_lock(&st->mu);
  st->stopping = 1;
  pthread_cond_signal(&st->cv);
  pthread_mutex_unlock(&st->mu);
  pthread_join(st->thread, NULL);
  st->thread_started = 0;
  run_completions(st);
  pthread_cond_destroy(&st->cv);
  pthread_mutex_destroy(&st->mu);
  st__fences_free(st);
  uv_close((uv_handle_t *)st->async, on_async_close);
  st->async = NULL;
  uv_close((uv_handle_t *)st->cork, on_async_close);
  st->cork = NULL;
}

int st__submit_fenced(struct store *st, struct st_write *w, const char *chat_id) {
  snprintf(w->fence, sizeof w->fence, "%s", chat_id ? chat_id : "");
  if (st->life == ST_LIFE_OPEN)
    st__fence_count(st, w, 1);
  return st__submit(st, w);
}

int st__submit(struct store *st, struct st_write *w) {
  if (st->life != ST_LIFE_OPEN) {
    w->release(st, w);
    return SBX_ECLOSED;
  }
  w->rc = 0;
  sbx_error_clear(&w->err);
  if (st->inflight++ == 0)
    uv_ref((uv_handle_t *)st->async);
  if (SBX_LIST_EMPTY(&st->corked))
    uv_idle_start(st->cork, on_cork);
  sbx_list_insert_tail(&st->corked, &w->link);
  return 0;
}

void store_set_group_max(struct store *st, size_t n) {
  pthread_mutex_lock(&st->mu);
  st->group_max = n ? n : 1;
  pthread_mutex_unlock(&st->mu);
}

void store_get_stats(struct store *st, struct store_stats *out) {
  pthread_mutex_lock(&st->mu);
  *out = st->stats;
  pthread_mutex_unlock(&st->mu);
}

uint64_t store_blob_bytes(struct store *st) {
  struct store_stats s;
  store_get_stats(st, &s);
  return s.blob_bytes;
}

/* ---- simple ops -------------------------------------------------------------------------- */

static void simple_done(struct store *st, struct st_write *w) {
  struct st_simple *op = (struct st_simple *)w;
  if (op->cb)
    op->cb(w->rc, w->rc ? &w->err : NULL, op->ud);
}

static void simple_release(struct store *st, struct st_write *w) {
  st__simple_discard((struct st_simple *)w);
}

void st__write_init(struct st_write *w, st_exec_fn exec, st_op_fn after_commit, st_op_fn done,
                    st_op_fn release) {
  SBX_LIST_INIT(&w->link);
  w->exec = exec;
  w->after_commit = after_commit;
  w->done = done;
  w->release = release;
}

struct st_simple *st__simple_new(st_exec_fn exec, store_done_cb cb, void *ud) {
  struct st_simple *op = sbx_calloc(1, sizeof *op);
  if (op == NULL)
    return NULL;
  st__write_init(&op->w, exec, NULL, simple_done, simple_release);
  op->cb = cb;
  op->ud = ud;
  return op;
}

int st__simple_str(struct st_simple *op, int idx, const char *v) {
  if (v == NULL)
    return 0;
  op->s[idx] = sbx_strdup(v);
  return op->s[idx] ? 0 : SBX_ENOMEM;
}

void st__simple_discard(struct st_simple *op) {
  if (op == NULL)
    return;
  for (size_t i = 0; i < SBX_ARRAY_SIZE(op->s); i++)
    sbx_free(op->s[i]);
  sbx_free(op);
}
