/* checkpoint.c -- WAL checkpoints off the commit path: a checkpointer thread with its own
 * connection, woken by the writer connection's WAL hook, and a short finishing step the writer
 * thread runs between groups.
 *
 * Why: SQLite's auto-checkpoint copies the WAL into the database inside a COMMIT's sqlite3_step
 * on the writer thread, before that group's callbacks run, so each window of WAL would stall one
 * group for the whole copy.  So the writer connection has wal_autocheckpoint = 0 (open.c) and:
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
 *   - a hard bound: past ST_CKPT_HARD_FRAMES (the passes fell behind the commits, or a reader
 *     held an old snapshot) the writer runs a blocking SQLITE_CHECKPOINT_TRUNCATE between groups
 *     before it takes the next one: it first waits for a pass of the checkpointer to end (the
 *     checkpoint lock is one, and a pass always ends: PASSIVE waits for nobody), then copies the
 *     rest, waits for readers (busy timeout 5 s) and restarts the WAL, cutting its file to zero
 *     bytes.  So without a reader holding an old snapshot and without an I/O error, the WAL never
 *     holds more than ST_CKPT_HARD_FRAMES plus the frames of the one group that crossed it, however
 *     slowly the checkpointer runs.  When it cannot finish it is retried after ST_CKPT_STEP_FRAMES
 *     more frames.  journal_size_limit (open.c) truncates a WAL file that grew past it when the WAL
 *     restarts otherwise.
 *   - one checkpoint at a time: the writer's checkpoints take the checkpointer's state (WRITER) for
 *     their length, so a pass never starts beside one of them and neither is refused SQLITE_BUSY.
 *   - after a failed checkpoint (a disk error), of either thread, no passive one is tried again
 *     before ST_CKPT_STEP_FRAMES more frames: a lasting error is logged once per STEP, not per
 *     group.
 * A checkpoint error is logged (warn) and counted, never fatal: the WAL keeps the data durable.
 * Why a thread and not only a PASSIVE checkpoint on the writer after each window (callbacks
 * already handed off): that delays the NEXT group by the whole copy and its fsyncs.  What the
 * writer still pays, once per window, is the finishing step, mostly one fdatasync of the
 * database: SQLite restarts the WAL only for a write transaction begun when every frame is
 * copied, so some connection must copy the last frames while the writer does not commit.
 * (Figures: docs/benchmarks.md, the store section.)
 * What this file does not do: checkpoint at close (the last connection to close does that: open.c
 * closes the checkpointer's connection first), or touch the read connection.
 *
 * The checkpointer's state machine (enum st_ckpt_state, also the state of the one checkpoint
 * lock) is drawn in internal.h, above its enum.
 */
#include "internal.h"

#include <string.h>

static const char *const ckpt_names[] = {"start", "idle", "checkpointing", "writer", "stopped"};
static const uint32_t ckpt_from[] = {
    [ST_CS_START] = 0,
    [ST_CS_IDLE] =
        SBX_FSM_BIT(ST_CS_START) | SBX_FSM_BIT(ST_CS_CHECKPOINTING) | SBX_FSM_BIT(ST_CS_WRITER),
    [ST_CS_CHECKPOINTING] = SBX_FSM_BIT(ST_CS_IDLE),
    [ST_CS_WRITER] = SBX_FSM_BIT(ST_CS_IDLE),
    [ST_CS_STOPPED] = SBX_FSM_BIT(ST_CS_IDLE),
};
static const struct sbx_fsm ckpt_fsm = SBX_FSM(ST_MOD, "checkpointer", ckpt_names, ckpt_from, NULL);

#define set_state(st, to) set_state_((st), (to), __FILE__, __LINE__)
/* The only writer of st->cstate (either thread, under ckpt_mu). */
static void set_state_(struct store *st, enum st_ckpt_state to, const char *file, int line) {
  if (sbx_fsm_step(&ckpt_fsm, st->cstate, to, st->dir, file, line) == 0)
    st->cstate = to;
}

/* Under ckpt_mu: does an earlier failure still hold passive checkpoints back?  After a failed
 * checkpoint (either thread's), none before STEP more frames of that WAL generation. */
static int backing_off(const struct st_ckpt *c) {
  return c->tried_failed && c->tried_gen == c->gen &&
         c->frames - c->tried_frames < ST_CKPT_STEP_FRAMES;
}

/* Under ckpt_mu: is a pass of the checkpointer worth running now?  Only while it holds the
 * checkpoint (IDLE), past the wake threshold, and either nothing of this WAL generation was
 * copied yet or STEP more frames were committed since; at most one attempt per commit (a pass
 * that could copy nothing, a reader holding an old snapshot, is not repeated until the writer
 * commits again); not while backing off after a failure. */
static int want_pass(const struct store *st) {
  const struct st_ckpt *c = &st->ckpt;
  if (st->cstate != ST_CS_IDLE || c->frames < ST_CKPT_WAKE_FRAMES)
    return 0;
  if (c->tried_gen == c->gen && c->tried_frames == c->frames)
    return 0;
  if (backing_off(c))
    return 0;
  return c->done_gen != c->gen || c->frames - c->done >= ST_CKPT_STEP_FRAMES;
}

/* Under ckpt_mu: an attempt (either thread) begins at the WAL's current size. */
static void begin_attempt(struct st_ckpt *c) {
  c->tried_gen = c->gen;
  c->tried_frames = c->frames;
}

/* Under ckpt_mu: the result of a checkpoint (either thread) of WAL generation gen.  rc
 * SQLITE_BUSY with log >= 0 is a blocking checkpoint that gave up waiting for a reader, having
 * copied what it could: counted as done so far, not as an error; with log < 0 nothing ran. */
static void record(struct store *st, uint64_t gen, int rc, int log, int copied, int by_writer) {
  struct st_ckpt *c = &st->ckpt;
  if (rc == SQLITE_BUSY && log < 0)
    return;
  if (rc != SQLITE_OK && rc != SQLITE_BUSY) {
    c->errors++;
    c->tried_failed = 1;
    return;
  }
  c->tried_failed = 0;
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
    if (st->ckpt_stopping) /* after st__writer_stop: the writer holds nothing of it */
      break;
    uint64_t gen = st->ckpt.gen;
    begin_attempt(&st->ckpt);
    set_state(st, ST_CS_CHECKPOINTING);
    pthread_mutex_unlock(&st->ckpt_mu);

    int log = -1, copied = -1;
    int rc = sqlite3_wal_checkpoint_v2(st->cdb, NULL, SQLITE_CHECKPOINT_PASSIVE, &log, &copied);
    if (rc != SQLITE_OK && rc != SQLITE_BUSY)
      sbx_log(SBX_LOG_WARN, ST_MOD, "%s: checkpoint failed (the WAL keeps the data): %s",
              st->db_path, sqlite3_errmsg(st->cdb));

    pthread_mutex_lock(&st->ckpt_mu);
    record(st, gen, rc, log, copied, 0);
    set_state(st, ST_CS_IDLE);
    pthread_cond_broadcast(&st->ckpt_idle_cv); /* a writer waiting at the hard bound */
  }
  set_state(st, ST_CS_STOPPED);
  pthread_mutex_unlock(&st->ckpt_mu);
  return NULL;
}

/* Under ckpt_mu: the checkpoint the writer should run between groups.  HARD past the hard bound
 * (once per generation, then again every STEP frames while it cannot finish); FINISH when the
 * last copy of this generation left at most FINISH frames and the checkpointer is not in a pass. */
static enum st_ckpt_job writer_job(const struct store *st) {
  const struct st_ckpt *c = &st->ckpt;
  if (c->frames >= ST_CKPT_HARD_FRAMES && (c->hard_gen != c->gen || c->frames >= c->hard_next))
    return ST_CKPT_HARD;
  if (st->cstate == ST_CS_IDLE && c->frames >= ST_CKPT_WAKE_FRAMES && c->done_gen == c->gen &&
      c->frames > c->done && c->frames - c->done <= ST_CKPT_FINISH_FRAMES && !backing_off(c))
    return ST_CKPT_FINISH;
  return ST_CKPT_NONE;
}

enum st_ckpt_job st__ckpt_writer_due(struct store *st) {
  if (!st->ckpt_started)
    return ST_CKPT_NONE;
  pthread_mutex_lock(&st->ckpt_mu);
  enum st_ckpt_job job = writer_job(st);
  pthread_mutex_unlock(&st->ckpt_mu);
  return job;
}

void st__ckpt_writer_run(struct store *st, enum st_ckpt_job job) {
  if (!st->ckpt_started || job == ST_CKPT_NONE)
    return;
  pthread_mutex_lock(&st->ckpt_mu);
  struct st_ckpt *c = &st->ckpt;
  if (job == ST_CKPT_HARD) /* the hard bound waits for the checkpointer's pass to end */
    while (st->cstate == ST_CS_CHECKPOINTING)
      pthread_cond_wait(&st->ckpt_idle_cv, &st->ckpt_mu);
  job = writer_job(st); /* again: a pass may have ended, or begun, meanwhile */
  if (job == ST_CKPT_NONE || st->cstate != ST_CS_IDLE) {
    pthread_mutex_unlock(&st->ckpt_mu);
    return;
  }
  int hard = job == ST_CKPT_HARD;
  uint64_t gen = c->gen;
  begin_attempt(c);
  if (hard) {
    c->hard_gen = gen;
    c->hard_next = c->frames + ST_CKPT_STEP_FRAMES;
  }
  set_state(st, ST_CS_WRITER);
  pthread_mutex_unlock(&st->ckpt_mu);

  int log = -1, copied = -1;
  int rc = sqlite3_wal_checkpoint_v2(st->w.lite, NULL,
                                     hard ? SQLITE_CHECKPOINT_TRUNCATE : SQLITE_CHECKPOINT_PASSIVE,
                                     &log, &copied);
  if (rc != SQLITE_OK && rc != SQLITE_BUSY)
    sbx_log(SBX_LOG_WARN, ST_MOD, "%s: writer's checkpoint failed (the WAL keeps the data): %s",
            st->db_path, sqlite3_errmsg(st->w.lite));
  else if (hard && rc != SQLITE_OK)
    sbx_log(SBX_LOG_WARN, ST_MOD,
            "%s: WAL at %d frames and a blocking checkpoint copied %d "
            "(a reader holds an old snapshot?)",
            st->db_path, log, copied);

  pthread_mutex_lock(&st->ckpt_mu);
  if (hard)
    c->blocking++;
  if (hard && rc == SQLITE_OK) {
    /* every frame copied, no reader left in the WAL, and the WAL restarted: it is empty now (the
     * next commit writes from its beginning; the WAL hook sees no shrink, so count it here) */
    c->gen++;
    c->frames = 0;
    record(st, c->gen, rc, 0, 0, 1);
  } else {
    record(st, gen, rc, log, copied, 1);
  }
  set_state(st, ST_CS_IDLE);
  if (want_pass(st))
    pthread_cond_signal(&st->ckpt_cv);
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
  pthread_cond_init(&st->ckpt_idle_cv, NULL);
  /* after PRAGMA wal_autocheckpoint = 0 on the writer (open.c): that pragma replaces the hook */
  sqlite3_wal_hook(st->w.lite, on_wal, st);
  if ((rc = pthread_create(&st->ckpt_thread, NULL, ckpt_main, st)) != 0) {
    sqlite3_wal_hook(st->w.lite, NULL, NULL);
    pthread_cond_destroy(&st->ckpt_idle_cv);
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
  if (st->w.lite)
    sqlite3_wal_hook(st->w.lite, NULL, NULL);
  pthread_cond_destroy(&st->ckpt_idle_cv);
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
