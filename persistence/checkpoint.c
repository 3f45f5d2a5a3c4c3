/* checkpoint.c -- WAL checkpoints off the commit path: a checkpointer thread with its own
 * connection, woken by the writer connection's WAL hook, and a short finishing step the writer
 * thread runs between groups.
 *
 * Why: with SQLite's auto-checkpoint the copy of the WAL into the database ran inside a COMMIT's
 * sqlite3_step on the writer thread, before that group's callbacks fired, so a 64 MiB window
 * (db.c: it copies each hot page once per window) stalled one group for ~100 ms.  Now the writer
 * connection has wal_autocheckpoint = 0 and:
 *   - the WAL hook (writer thread, after each commit) records the WAL's frame count and, past
 *     ST_CKPT_WAKE_FRAMES, signals the checkpointer.  It never checkpoints itself.
 *   - the checkpointer thread runs SQLITE_CHECKPOINT_PASSIVE on its own connection: it copies the
 *     committed frames no reader still needs while the writer keeps committing (PASSIVE takes no
 *     lock the writer or the readers wait for).  It runs again when ST_CKPT_STEP_FRAMES more
 *     frames were committed since its last pass.
 *   - the WAL restarts from its beginning only when a transaction of the writer starts while every
 *     frame is copied; under continuous load the checkpointer never quite catches up (the writer
 *     commits during its pass), so the writer, between groups (its callbacks already handed to the
 *     loop thread) and when at most ST_CKPT_FINISH_FRAMES are left, runs a PASSIVE checkpoint of
 *     that remainder itself: nobody appends while it runs, so it copies everything, and its next
 *     BEGIN restarts the WAL.  Cost: a few pages and one fsync of the database, once per window.
 *   - a hard bound: past ST_CKPT_HARD_FRAMES (PASSIVE kept failing to finish, e.g. a reader held
 *     an old snapshot) the writer runs a blocking SQLITE_CHECKPOINT_RESTART between groups (busy
 *     timeout 5 s), retried after ST_CKPT_STEP_FRAMES more frames if it did not finish.
 *     journal_size_limit (db.c) truncates a WAL file that grew past it when the WAL restarts.
 * A checkpoint error is logged (warn) and counted, never fatal: the WAL keeps the data durable.
 * Why a thread and not only a PASSIVE checkpoint on the writer after each window (callbacks
 * already handed off): that delays the NEXT group by the whole copy and its fsyncs instead;
 * bench/store (1024 in flight, 16 MiB windows) measured group-commit p99 56-71 ms that way
 * against 44 ms with the thread, on a loaded machine.  What the writer still pays, once per
 * window, is the finishing step, mostly one fdatasync of the database (~6-17 ms here): SQLite
 * restarts the WAL only for a write transaction begun when every frame is copied, so some
 * connection must copy the last frames while the writer does not commit.
 * What this file does not do: checkpoint at close (the last connection to close does that: db.c
 * closes the checkpointer's connection first), or touch the read connection.
 *
 * Checkpointer state, one per store:
 *
 *    start ──▶ IDLE ──(woken: enough new frames)──▶ CHECKPOINTING ──(pass done)──▶ IDLE
 *                │
 *                └──(stopping)──▶ STOPPED (thread exits; st__ckpt_stop joins)
 *
 *   transition                performed by
 *   start -> IDLE             ckpt_main, on entry
 *   IDLE -> CHECKPOINTING     ckpt_main, when want_pass() holds
 *   CHECKPOINTING -> IDLE     ckpt_main, after the pass's result is recorded
 *   IDLE -> STOPPED           ckpt_main, when stopping
 */
#include "internal.h"

#include <assert.h>
#include <string.h>

static const char *const ckpt_state_names[] = {"start", "idle", "checkpointing", "stopped"};

/* The only writer of st->cstate (checkpointer thread, under ckpt_mu). */
static void set_state(struct store *st, enum st_ckpt_state to) {
  enum st_ckpt_state from = st->cstate;
  assert((from == ST_CS_START && to == ST_CS_IDLE) ||
         (from == ST_CS_IDLE && (to == ST_CS_CHECKPOINTING || to == ST_CS_STOPPED)) ||
         (from == ST_CS_CHECKPOINTING && to == ST_CS_IDLE));
  SBX_TRACE_STATE(ST_MOD, "checkpointer", st->dir, ckpt_state_names[from], ckpt_state_names[to]);
  st->cstate = to;
}

/* Under ckpt_mu: is a pass of the checkpointer worth running now?  Past the wake threshold, and
 * either nothing of this WAL generation was copied yet or STEP more frames were committed since
 * the last pass; at most one pass per commit (a pass that could copy nothing, a reader holding an
 * old snapshot, is not repeated until the writer commits again); after a failed pass (a disk
 * error), not before STEP more frames, so a lasting error logs once per STEP, not per group. */
static int want_pass(const struct store *st) {
  const struct st_ckpt *c = &st->ckpt;
  if (c->frames < ST_CKPT_WAKE_FRAMES)
    return 0;
  if (c->tried_gen == c->gen && c->tried_frames == c->frames)
    return 0;
  if (c->tried_failed && c->tried_gen == c->gen && c->frames - c->tried_frames < ST_CKPT_STEP_FRAMES)
    return 0;
  return c->done_gen != c->gen || c->frames - c->done >= ST_CKPT_STEP_FRAMES;
}

/* Under ckpt_mu: the result of a checkpoint (either thread) of WAL generation gen. */
static void record(struct store *st, uint64_t gen, int rc, int log, int copied, int by_writer) {
  struct st_ckpt *c = &st->ckpt;
  if (rc != SQLITE_OK) {
    c->errors++;
    return;
  }
  if (gen == c->gen) {
    c->done_gen = gen;
    c->done = copied;
  }
  if (by_writer)
    c->writer_passes++;
  else
    c->passes++;
  if (copied >= log)
    c->complete++;
}

static int on_wal(void *arg, sqlite3 *db, const char *name, int frames) {
  (void)db;
  (void)name;
  struct store *st = arg;
  pthread_mutex_lock(&st->ckpt_mu);
  struct st_ckpt *c = &st->ckpt;
  if (frames < c->frames)
    c->gen++; /* the WAL restarted from its beginning */
  c->frames = frames;
  if ((uint64_t)frames > c->max_frames)
    c->max_frames = (uint64_t)frames;
  if (want_pass(st))
    pthread_cond_signal(&st->ckpt_cv);
  pthread_mutex_unlock(&st->ckpt_mu);
  return SQLITE_OK;
}

static void *ckpt_main(void *arg) {
  struct store *st = arg;
  pthread_mutex_lock(&st->ckpt_mu);
  set_state(st, ST_CS_IDLE);
  for (;;) {
    while (!st->ckpt_stopping && !want_pass(st))
      pthread_cond_wait(&st->ckpt_cv, &st->ckpt_mu);
    if (st->ckpt_stopping)
      break;
    uint64_t gen = st->ckpt.gen;
    st->ckpt.tried_gen = gen;
    st->ckpt.tried_frames = st->ckpt.frames;
    set_state(st, ST_CS_CHECKPOINTING);
    pthread_mutex_unlock(&st->ckpt_mu);

    int log = -1, copied = -1;
    int rc = sqlite3_wal_checkpoint_v2(st->cdb, NULL, SQLITE_CHECKPOINT_PASSIVE, &log, &copied);
    if (rc != SQLITE_OK && rc != SQLITE_BUSY) /* BUSY: the writer's own checkpoint is running */
      sbx_log(SBX_LOG_WARN, ST_MOD, "%s: checkpoint failed (the WAL keeps the data): %s",
              st->db_path, sqlite3_errmsg(st->cdb));

    pthread_mutex_lock(&st->ckpt_mu);
    if (rc != SQLITE_BUSY)
      record(st, gen, rc, log, copied, 0);
    st->ckpt.tried_failed = rc != SQLITE_OK && rc != SQLITE_BUSY;
    set_state(st, ST_CS_IDLE);
  }
  set_state(st, ST_CS_STOPPED);
  pthread_mutex_unlock(&st->ckpt_mu);
  return NULL;
}

void st__ckpt_after_group(struct store *st) {
  if (!st->ckpt_started)
    return;
  pthread_mutex_lock(&st->ckpt_mu);
  struct st_ckpt *c = &st->ckpt;
  int frames = c->frames, mode = -1;
  uint64_t gen = c->gen;
  if (frames >= ST_CKPT_HARD_FRAMES && (c->hard_gen != gen || frames >= c->hard_next) &&
      st->cstate == ST_CS_IDLE) {
    mode = SQLITE_CHECKPOINT_RESTART;
    c->hard_gen = gen;
    c->hard_next = frames + ST_CKPT_STEP_FRAMES;
  } else if (frames >= ST_CKPT_WAKE_FRAMES && c->done_gen == gen && frames > c->done &&
             frames - c->done <= ST_CKPT_FINISH_FRAMES && st->cstate == ST_CS_IDLE) {
    mode = SQLITE_CHECKPOINT_PASSIVE;
  }
  pthread_mutex_unlock(&st->ckpt_mu);
  if (mode < 0)
    return;
  int log = -1, copied = -1;
  int rc = sqlite3_wal_checkpoint_v2(st->wdb, NULL, mode, &log, &copied);
  if (rc != SQLITE_OK && rc != SQLITE_BUSY)
    sbx_log(SBX_LOG_WARN, ST_MOD, "%s: writer's checkpoint failed (the WAL keeps the data): %s",
            st->db_path, sqlite3_errmsg(st->wdb));
  else if (mode == SQLITE_CHECKPOINT_RESTART && log >= 0 && (rc != SQLITE_OK || copied < log))
    sbx_log(SBX_LOG_WARN, ST_MOD, "%s: WAL at %d frames and a blocking checkpoint copied %d "
            "(a reader holds an old snapshot?)", st->db_path, log, copied);
  pthread_mutex_lock(&st->ckpt_mu);
  if (rc == SQLITE_BUSY && log < 0 && mode == SQLITE_CHECKPOINT_RESTART)
    c->hard_gen = gen - 1; /* the checkpointer had just begun a pass: try again after the next group */
  else if (mode == SQLITE_CHECKPOINT_RESTART)
    c->blocking++;
  /* BUSY and log < 0: the checkpointer had just begun a pass; not an error, nothing recorded.
   * BUSY with log >= 0: a blocking checkpoint that gave up waiting for a reader, having copied
   * what it could (counted as done so far, not as an error) */
  if (rc == SQLITE_BUSY && log >= 0)
    record(st, gen, SQLITE_OK, log, copied, 1);
  else if (rc != SQLITE_BUSY)
    record(st, gen, rc, log, copied, 1);
  pthread_mutex_unlock(&st->ckpt_mu);
}

int st__ckpt_start(struct store *st, struct sbx_error *err) {
  int rc;
  if ((rc = st__open_conn(st->db_path, &st->cdb, err)) != 0)
    return rc;
  if ((rc = st__exec(st->cdb, "PRAGMA wal_autocheckpoint = 0", err)) != 0)
    goto fail;
  pthread_mutex_init(&st->ckpt_mu, NULL);
  pthread_cond_init(&st->ckpt_cv, NULL);
  /* after PRAGMA wal_autocheckpoint = 0 on the writer (db.c): that pragma replaces the hook */
  sqlite3_wal_hook(st->wdb, on_wal, st);
  if ((rc = pthread_create(&st->ckpt_thread, NULL, ckpt_main, st)) != 0) {
    sqlite3_wal_hook(st->wdb, NULL, NULL);
    pthread_cond_destroy(&st->ckpt_cv);
    pthread_mutex_destroy(&st->ckpt_mu);
    rc = sbx_error_set(err, SBX_EIO, "checkpointer: pthread_create: %s", strerror(rc));
    goto fail;
  }
  st->ckpt_started = 1;
  return 0;
fail:
  sqlite3_close(st->cdb);
  st->cdb = NULL;
  return rc;
}

void st__ckpt_stop(struct store *st) {
  if (!st->ckpt_started)
    return;
  pthread_mutex_lock(&st->ckpt_mu);
  st->ckpt_stopping = 1;
  pthread_cond_signal(&st->ckpt_cv);
  pthread_mutex_unlock(&st->ckpt_mu);
  pthread_join(st->ckpt_thread, NULL);
  st->ckpt_started = 0;
  if (st->wdb)
    sqlite3_wal_hook(st->wdb, NULL, NULL);
  pthread_cond_destroy(&st->ckpt_cv);
  pthread_mutex_destroy(&st->ckpt_mu);
  if (sqlite3_close(st->cdb) != SQLITE_OK)
    sbx_log(SBX_LOG_ERROR, ST_MOD, "checkpoint connection did not close: %s",
            sqlite3_errmsg(st->cdb));
  st->cdb = NULL;
}

void st__ckpt_get(struct store *st, struct st_ckpt *out) {
  if (!st->ckpt_started) { /* not started, or stopped: no other thread touches it */
    *out = st->ckpt;
    return;
  }
  pthread_mutex_lock(&st->ckpt_mu);
  *out = st->ckpt;
  pthread_mutex_unlock(&st->ckpt_mu);
}
