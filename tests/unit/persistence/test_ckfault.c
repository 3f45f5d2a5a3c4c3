/* test_ckfault.c -- checkpoint.c when checkpoints FAIL: a test VFS (below) makes every xWrite or
 * every xSync of the database file fail with SQLITE_IOERR_WRITE / SQLITE_IOERR_FSYNC while armed,
 * and leaves the -wal file alone.  In WAL mode only a checkpoint writes or syncs the database
 * file, so commits keep succeeding and the checkpoints fail: under a write fault every one (the
 * checkpointer's PASSIVE pass, the writer's finishing step, the writer's blocking TRUNCATE past
 * the hard bound, the close-time checkpoint); under an fsync fault those that reach the WAL's end
 * (SQLite syncs the database only then), so the WAL never restarts either way.  What is asserted
 * is what a user relies on:
 *   - a failing checkpoint is counted (st_ckpt.errors) and logged (warn on stderr, captured),
 *     never fatal: every write submitted before, during and after the fault is acknowledged with
 *     rc 0, every acknowledged write reads back (in the store, and after close and reopen), and
 *     PRAGMA integrity_check says ok;
 *   - once the fault clears, checkpoints succeed again, the WAL restarts from its beginning again
 *     and again, and the -wal file stays bounded;
 *   - the hard bound's blocking checkpoint (writer thread) failing does not wedge the writer;
 *   - store_close while the checkpointer is inside a failing pass joins it (ASan: no leak).
 * What this file does not test: a fault of the -wal file itself (a commit failing: test_crash.c
 * and test_writer.c) or checkpoints that succeed (test_checkpoint.c). */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <time.h>

#include "helpers.h"
#include "walpump.h"

/* ---- the fault VFS: fails the main database file's writes or syncs while armed ---- */

static sqlite3_vfs *cf_real;
static sqlite3_vfs cf_vfs;
static sqlite3_io_methods cf_methods;
static _Atomic int cf_fail_write, cf_fail_sync; /* armed: every such call on a main db fails */
static _Atomic int cf_delay_ms;                 /* a failing call first sleeps this long */
static _Atomic int cf_failed;                   /* failures returned since cf_arm */
static _Atomic int cf_failed_writer;            /* of which on the writer thread */
static _Atomic(pthread_t *) cf_writer;          /* the store's writer thread (st->thread) */
static _Atomic(pthread_t *) cf_ckpt;            /* the checkpointer thread (st->ckpt_thread) */
static _Atomic int cf_slow_us;                  /* main db writes of cf_ckpt sleep this long... */
static _Atomic int cf_slow_writes;              /* ...this many of them */
static char cf_gate_wal[300];                   /* "": no gate; else the -wal file whose size... */
static _Atomic long long cf_gate_bytes;         /* ...the first write of cf_ckpt waits for */

struct cf_file {
  sqlite3_file base;
  int main_db;
  sqlite3_file *real; /* follows this struct */
};
#define CF_REAL(f) (((struct cf_file *)(f))->real)

static void cf_arm(int fail_write, int fail_sync) {
  cf_failed = 0;
  cf_failed_writer = 0;
  cf_fail_write = fail_write;
  cf_fail_sync = fail_sync;
}

static int cf_fail(void) {
  int ms = cf_delay_ms;
  if (ms > 0)
    nanosleep(&(struct timespec){ms / 1000, (long)(ms % 1000) * 1000000L}, NULL);
  cf_failed++;
  pthread_t *w = cf_writer;
  if (w != NULL && pthread_equal(*w, pthread_self()))
    cf_failed_writer++;
  return 1;
}

/* The checkpointer's database writes: the first one waits (at most 120 s) until the -wal file
 * has grown to cf_gate_bytes, then the next cf_slow_writes sleep cf_slow_us each. */
static void cf_slow_write(void) {
  long long gate = cf_gate_bytes;
  for (int i = 0; gate > 0 && i < 120000; i++) {
    struct stat sb;
    if (stat(cf_gate_wal, &sb) == 0 && sb.st_size >= gate)
      break;
    nanosleep(&(struct timespec){0, 1000 * 1000}, NULL);
  }
  cf_gate_bytes = 0;
  if (cf_slow_writes > 0) {
    cf_slow_writes--;
    nanosleep(&(struct timespec){0, (long)cf_slow_us * 1000L}, NULL);
  }
}

static int cf_close(sqlite3_file *f) { return CF_REAL(f)->pMethods->xClose(CF_REAL(f)); }
static int cf_read(sqlite3_file *f, void *b, int n, sqlite3_int64 o) {
  return CF_REAL(f)->pMethods->xRead(CF_REAL(f), b, n, o);
}
static int cf_write(sqlite3_file *f, const void *b, int n, sqlite3_int64 o) {
  if (((struct cf_file *)f)->main_db && cf_fail_write && cf_fail())
    return SQLITE_IOERR_WRITE;
  pthread_t *ck = cf_ckpt;
  if (((struct cf_file *)f)->main_db && ck != NULL && pthread_equal(*ck, pthread_self()))
    cf_slow_write();
  return CF_REAL(f)->pMethods->xWrite(CF_REAL(f), b, n, o);
}
static int cf_truncate(sqlite3_file *f, sqlite3_int64 s) {
  return CF_REAL(f)->pMethods->xTruncate(CF_REAL(f), s);
}
static int cf_sync(sqlite3_file *f, int flags) {
  if (((struct cf_file *)f)->main_db && cf_fail_sync && cf_fail())
    return SQLITE_IOERR_FSYNC;
  return CF_REAL(f)->pMethods->xSync(CF_REAL(f), flags);
}
static int cf_size(sqlite3_file *f, sqlite3_int64 *s) {
  return CF_REAL(f)->pMethods->xFileSize(CF_REAL(f), s);
}
static int cf_lock(sqlite3_file *f, int l) { return CF_REAL(f)->pMethods->xLock(CF_REAL(f), l); }
static int cf_unlock(sqlite3_file *f, int l) {
  return CF_REAL(f)->pMethods->xUnlock(CF_REAL(f), l);
}
static int cf_check(sqlite3_file *f, int *o) {
  return CF_REAL(f)->pMethods->xCheckReservedLock(CF_REAL(f), o);
}
static int cf_fctl(sqlite3_file *f, int op, void *a) {
  return CF_REAL(f)->pMethods->xFileControl(CF_REAL(f), op, a);
}
static int cf_sector(sqlite3_file *f) { return CF_REAL(f)->pMethods->xSectorSize(CF_REAL(f)); }
static int cf_devchar(sqlite3_file *f) {
  return CF_REAL(f)->pMethods->xDeviceCharacteristics(CF_REAL(f));
}
static int cf_shmmap(sqlite3_file *f, int i, int sz, int ext, void volatile **pp) {
  return CF_REAL(f)->pMethods->xShmMap(CF_REAL(f), i, sz, ext, pp);
}
static int cf_shmlock(sqlite3_file *f, int off, int n, int fl) {
  return CF_REAL(f)->pMethods->xShmLock(CF_REAL(f), off, n, fl);
}
static void cf_shmbarrier(sqlite3_file *f) { CF_REAL(f)->pMethods->xShmBarrier(CF_REAL(f)); }
static int cf_shmunmap(sqlite3_file *f, int del) {
  return CF_REAL(f)->pMethods->xShmUnmap(CF_REAL(f), del);
}
static int cf_fetch(sqlite3_file *f, sqlite3_int64 o, int n, void **pp) {
  return CF_REAL(f)->pMethods->xFetch(CF_REAL(f), o, n, pp);
}
static int cf_unfetch(sqlite3_file *f, sqlite3_int64 o, void *p) {
  return CF_REAL(f)->pMethods->xUnfetch(CF_REAL(f), o, p);
}

static int cf_open(sqlite3_vfs *v, const char *name, sqlite3_file *f, int flags, int *out) {
  (void)v;
  struct cf_file *ff = (struct cf_file *)f;
  ff->real = (sqlite3_file *)(ff + 1);
  ff->main_db = (flags & SQLITE_OPEN_MAIN_DB) != 0;
  int rc = cf_real->xOpen(cf_real, name, ff->real, flags, out);
  if (rc != SQLITE_OK || ff->real->pMethods == NULL) {
    f->pMethods = NULL;
    return rc;
  }
  cf_methods.iVersion = ff->real->pMethods->iVersion;
  f->pMethods = &cf_methods;
  return rc;
}
static int cf_delete(sqlite3_vfs *v, const char *n, int s) {
  (void)v;
  return cf_real->xDelete(cf_real, n, s);
}
static int cf_access(sqlite3_vfs *v, const char *n, int fl, int *o) {
  (void)v;
  return cf_real->xAccess(cf_real, n, fl, o);
}
static int cf_full(sqlite3_vfs *v, const char *n, int sz, char *o) {
  (void)v;
  return cf_real->xFullPathname(cf_real, n, sz, o);
}
static int cf_rand(sqlite3_vfs *v, int n, char *o) {
  (void)v;
  return cf_real->xRandomness(cf_real, n, o);
}
static int cf_sleep(sqlite3_vfs *v, int us) {
  (void)v;
  return cf_real->xSleep(cf_real, us);
}
static int cf_time(sqlite3_vfs *v, double *t) {
  (void)v;
  return cf_real->xCurrentTime(cf_real, t);
}
static int cf_lasterr(sqlite3_vfs *v, int n, char *o) {
  (void)v;
  return cf_real->xGetLastError(cf_real, n, o);
}
static int cf_time64(sqlite3_vfs *v, sqlite3_int64 *t) {
  (void)v;
  return cf_real->xCurrentTimeInt64(cf_real, t);
}

static void cf_register(void) {
  cf_real = sqlite3_vfs_find(NULL);
  cf_methods = (sqlite3_io_methods){
      3,          cf_close,      cf_read,     cf_write, cf_truncate, cf_sync,    cf_size,
      cf_lock,    cf_unlock,     cf_check,    cf_fctl,  cf_sector,   cf_devchar, cf_shmmap,
      cf_shmlock, cf_shmbarrier, cf_shmunmap, cf_fetch, cf_unfetch};
  memset(&cf_vfs, 0, sizeof cf_vfs);
  cf_vfs.iVersion = 2;
  cf_vfs.szOsFile = (int)sizeof(struct cf_file) + cf_real->szOsFile;
  cf_vfs.mxPathname = cf_real->mxPathname;
  cf_vfs.zName = "ckfaultvfs";
  cf_vfs.xOpen = cf_open;
  cf_vfs.xDelete = cf_delete;
  cf_vfs.xAccess = cf_access;
  cf_vfs.xFullPathname = cf_full;
  cf_vfs.xRandomness = cf_rand;
  cf_vfs.xSleep = cf_sleep;
  cf_vfs.xCurrentTime = cf_time;
  cf_vfs.xGetLastError = cf_lasterr;
  cf_vfs.xCurrentTimeInt64 = cf_time64;
  sqlite3_vfs_register(&cf_vfs, 1);
}

/* ---- stderr capture: the warn lines a failing checkpoint logs ---- */

struct capture {
  char path[300];
  int saved;
};

static void capture_start(struct capture *c, const char *dir) {
  snprintf(c->path, sizeof c->path, "%s/stderr.log", dir);
  fflush(stderr);
  c->saved = dup(2);
  ck_assert_int_ge(c->saved, 0);
  int fd = open(c->path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(dup2(fd, 2), 2);
  close(fd);
}

/* Restores stderr, returns how many captured lines contain `needle` (and echoes them, at most 3,
 * so a failing run shows what was logged). */
static int capture_stop(struct capture *c, const char *needle) {
  fflush(stderr);
  ck_assert_int_eq(dup2(c->saved, 2), 2);
  close(c->saved);
  FILE *f = fopen(c->path, "r");
  ck_assert_ptr_nonnull(f);
  char line[4096];
  int n = 0;
  while (fgets(line, sizeof line, f) != NULL)
    if (strstr(line, needle) != NULL && n++ < 3)
      fprintf(stderr, "captured: %s", line);
  fclose(f);
  remove(c->path);
  return n;
}

/* ---- the load: unique keys, each write's value names it, so each one can be read back ---- */

#define VALUE_LEN WP_VALUE_LEN
#define WAL_BOUND WP_WAL_BOUND

static void key_of(int i, char *key, size_t n) { snprintf(key, n, "u%06d", i); }

static void fill_value(char *v, int i) {
  memset(v, 'a' + i % 26, VALUE_LEN);
  char head[16];
  int n = snprintf(head, sizeof head, "%06d", i);
  memcpy(v, head, (size_t)n);
  v[VALUE_LEN] = '\0';
}

static void make_unique(int i, char *key, size_t n, char *value) {
  key_of(i, key, n);
  fill_value(value, i);
}

static void check_one(struct store *st, int i, char *want) {
  char key[32];
  key_of(i, key, sizeof key);
  char *v = NULL;
  int rc = store_setting_get(st, key, &v);
  ck_assert_msg(rc == 0, "write %d (%s) not readable: rc %d", i, key, rc);
  fill_value(want, i);
  ck_assert_msg(strcmp(v, want) == 0, "write %d (%s) reads back different", i, key);
  sbx_free(v);
}

/* Every write acknowledged so far reads back with its own value (`step` > 1: a sample, and the
 * last one). */
static void check_all(struct store *st, int count, int step) {
  char *want = sbx_malloc(VALUE_LEN + 1);
  ck_assert_ptr_nonnull(want);
  for (int i = 0; i < count; i += step)
    check_one(st, i, want);
  if (count > 0)
    check_one(st, count - 1, want);
  sbx_free(want);
}

static void integrity_ok(const char *db_path) {
  sqlite3 *db;
  ck_assert_int_eq(sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  sqlite3_stmt *s;
  ck_assert_int_eq(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &s, NULL), SQLITE_OK);
  ck_assert_int_eq(sqlite3_step(s), SQLITE_ROW);
  ck_assert_str_eq((const char *)sqlite3_column_text(s, 0), "ok");
  ck_assert_int_eq(sqlite3_step(s), SQLITE_DONE);
  sqlite3_finalize(s);
  ck_assert_int_eq(sqlite3_close(db), SQLITE_OK);
}

static void t_setup(struct tctx *t) {
  cf_arm(0, 0);
  cf_delay_ms = 0;
  cf_writer = NULL;
  cf_ckpt = NULL;
  cf_slow_us = 0;
  cf_slow_writes = 0;
  cf_gate_bytes = 0;
  t_open(t); /* unarmed: creating the database writes its file before WAL mode */
  cf_writer = &t->st->thread;
}

/* Closes with the fault still armed (the close-time checkpoint fails too), reopens unarmed:
 * everything acknowledged is there, and the database is sound. */
static void reopen_and_check(struct tctx *t, int count) {
  cf_writer = NULL;
  cf_ckpt = NULL;
  t_close_keep(t);
  cf_arm(0, 0);
  t_reopen(t);
  check_all(t->st, count, 1);
  integrity_ok(t->st->db_path);
}

/* Every test's start: a store (t_setup), a pump of unique writes, 200 of them written. */
static void pump_start(struct tctx *t, struct pump *p) {
  t_setup(t);
  pump_init(p, t, make_unique);
  pump_more(p, 200, 64);
}

/* The first two tests: a fault of the database file's writes (or syncs) through a window past
 * the wake threshold and below the hard bound, then cleared. */
static void fault_then_recover(int fail_write, int fail_sync) {
  struct tctx t;
  struct pump p;
  pump_start(&t, &p); /* before */
  struct st_ckpt c0;
  st__ckpt_get(t.st, &c0);
  ck_assert_uint_eq(c0.errors, 0);

  struct capture cap;
  capture_start(&cap, t.dir);
  cf_arm(fail_write, fail_sync);
  pump_more(&p, 5000, 256);    /* during: ~12000 frames, past the wake threshold, under the bound */
  integrity_ok(t.st->db_path); /* a reader beside the store, the fault still on */
  int logged = capture_stop(&cap, "checkpoint failed");
  ck_assert_int_eq(p.errors, 0);
  struct st_ckpt c;
  st__ckpt_get(t.st, &c);
  fprintf(stderr,
          "fault %s: vfs failures %d, ckpt errors %llu, passes %llu, writer %llu, gen %llu, "
          "frames %d, logged %d\n",
          fail_write ? "write" : "fsync", (int)cf_failed, (unsigned long long)c.errors,
          (unsigned long long)c.passes, (unsigned long long)c.writer_passes,
          (unsigned long long)c.gen, c.frames, logged);
  ck_assert_int_ge(c.frames, ST_CKPT_WAKE_FRAMES);
  ck_assert_int_lt(c.frames, ST_CKPT_HARD_FRAMES); /* this test stays off the hard path */
  ck_assert_int_gt(cf_failed, 0);                  /* the fault did hit checkpoints */
  ck_assert_uint_ge(c.errors, 1);                  /* counted */
  /* a lasting error is retried once per STEP frames, not after every group (one warning each) */
  ck_assert_uint_le(c.errors,
                    (uint64_t)((c.frames - ST_CKPT_WAKE_FRAMES) / ST_CKPT_STEP_FRAMES + 2));
  /* a failing write fails every pass; a failing fsync only the passes that reach the WAL's end
   * (SQLite syncs the database only then: a pass overtaken by commits copies without a sync and
   * reports all it saw as copied, which st_ckpt counts as complete) */
  if (fail_write)
    ck_assert_uint_eq(c.complete, 0);
  ck_assert_uint_eq(c.gen, 0); /* no checkpoint reached the end: the WAL could not restart */
  ck_assert_uint_eq(c.blocking, 0);
  ck_assert_int_ge(logged, 1);     /* logged */
  check_all(t.st, p.submitted, 1); /* every acknowledged write is there */

  /* the fault clears: checkpoints succeed, the WAL restarts again and again, its file bounded */
  cf_arm(0, 0);
  pump_more(&p, 12000, 256); /* ~30000 frames */
  ck_assert_int_eq(p.errors, 0);
  struct st_ckpt c2;
  st__ckpt_get(t.st, &c2);
  fprintf(stderr, "recovered: ckpt errors %llu, complete %llu, gen %llu, frames %d, wal max %lld\n",
          (unsigned long long)c2.errors, (unsigned long long)c2.complete,
          (unsigned long long)c2.gen, c2.frames, (long long)p.max_wal);
  ck_assert_uint_le(c2.errors, c.errors + 2); /* at most the passes begun before the clear */
  ck_assert_uint_ge(c2.complete, 2);
  ck_assert_uint_ge(c2.gen, 2);
  ck_assert_int_lt(c2.frames, ST_CKPT_HARD_FRAMES);
  ck_assert_int_le(p.max_wal, WAL_BOUND);
  /* steady again: the WAL keeps restarting, its file within the bound */
  uint64_t gen_settled = c2.gen;
  pump_more(&p, 6000, 256);
  ck_assert_int_eq(p.errors, 0);
  st__ckpt_get(t.st, &c2);
  ck_assert_uint_ge(c2.gen, gen_settled + 1);
  ck_assert_int_le(p.max_wal, WAL_BOUND);
  check_all(t.st, p.submitted, 7);

  /* and once more under the fault, then closed with it on (the close's checkpoint fails) */
  cf_arm(fail_write, fail_sync);
  pump_more(&p, 300, 64);
  ck_assert_int_eq(p.errors, 0);
  reopen_and_check(&t, p.submitted);
  pump_free(&p);
  t_close(&t);
}

START_TEST(test_db_write_fails) {
  T_SQLITE_ONLY("faults injected through SQLite's VFS into its WAL checkpoints");
  fault_then_recover(1, 0);
}
END_TEST

START_TEST(test_db_fsync_fails) {
  T_SQLITE_ONLY("faults injected through SQLite's VFS into its WAL checkpoints");
  fault_then_recover(0, 1);
}
END_TEST

/* The hard bound under the fault: the writer's blocking TRUNCATE checkpoint fails (on the writer
 * thread, counted, logged) again and again as the WAL grows past the bound, and every write still
 * completes; once the fault clears the next blocking checkpoint succeeds, the WAL restarts and
 * its file is cut back to journal_size_limit. */
START_TEST(test_hard_bound_fails) {
  T_SQLITE_ONLY("faults injected through SQLite's VFS into its WAL checkpoints");
  struct tctx t;
  struct pump p;
  pump_start(&t, &p);
  struct capture cap;
  capture_start(&cap, t.dir);
  cf_arm(1, 0);
  pump_more(&p, 9000, 256); /* ~22000 frames: past the hard bound (16384) */
  int logged = capture_stop(&cap, "writer's checkpoint failed");
  ck_assert_int_eq(p.errors, 0);
  struct st_ckpt c;
  st__ckpt_get(t.st, &c);
  fprintf(stderr,
          "hard bound, fault: vfs failures %d (writer thread %d), ckpt errors %llu, blocking %llu, "
          "frames %d, wal max %lld, logged %d\n",
          (int)cf_failed, (int)cf_failed_writer, (unsigned long long)c.errors,
          (unsigned long long)c.blocking, c.frames, (long long)p.max_wal, logged);
  ck_assert_int_ge(c.frames, ST_CKPT_HARD_FRAMES + ST_CKPT_STEP_FRAMES);
  ck_assert_uint_ge(c.blocking, 2);      /* tried, failed, tried again STEP frames later */
  ck_assert_int_gt(cf_failed_writer, 0); /* the writer thread's own checkpoint hit the fault */
  ck_assert_uint_ge(c.errors, 2);
  ck_assert_uint_eq(c.gen, 0);
  ck_assert_int_ge(logged, 1);
  ck_assert_int_gt(p.max_wal, (off_t)64 << 20);

  /* the writer is not wedged: more writes complete, quickly, the fault still on */
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  pump_more(&p, 500, 64);
  clock_gettime(CLOCK_MONOTONIC, &b);
  ck_assert_int_eq(p.errors, 0);
  ck_assert_int_lt(b.tv_sec - a.tv_sec, 30);
  check_all(t.st, p.submitted, 1);

  /* cleared: the next blocking checkpoint (STEP frames on) copies all, the WAL restarts and its
   * file is truncated to the limit */
  st__ckpt_get(t.st, &c);
  uint64_t errors_at_clear = c.errors;
  cf_arm(0, 0);
  pump_more(&p, 4000, 256); /* ~10000 frames: the first full copy takes a while under load */
  ck_assert_int_eq(p.errors, 0);
  struct st_ckpt c2;
  st__ckpt_get(t.st, &c2);
  ck_assert_uint_ge(c2.gen, 1);
  ck_assert_uint_ge(c2.complete, 1);
  ck_assert_uint_le(c2.errors, errors_at_clear + 2); /* a pass begun before the clear, at most */
  pump_more(&p, 100, 16);
  ck_assert_int_le(wal_size(p.wal), (off_t)64 << 20);
  integrity_ok(t.st->db_path);
  reopen_and_check(&t, p.submitted);
  pump_free(&p);
  t_close(&t);
}
END_TEST

/* store_close while the checkpointer is inside a failing pass (each failing write first sleeps
 * 300 ms, so the pass is still running when close is called): close joins it, every
 * acknowledged write is there after reopening; ASan's leak check at exit covers the rest. */
START_TEST(test_close_mid_failure) {
  T_SQLITE_ONLY("faults injected through SQLite's VFS into its WAL checkpoints");
  struct tctx t;
  struct pump p;
  pump_start(&t, &p);
  struct capture cap;
  capture_start(&cap, t.dir);
  cf_delay_ms = 300;
  cf_arm(1, 0);
  pump_more(&p, 2000, 256); /* ~5000 frames: past the wake threshold, the checkpointer runs */
  ck_assert_int_eq(p.errors, 0);
  /* each commit past the wake threshold starts another (failing, slow) pass: one more write
   * whenever the checkpointer is found idle */
  int inside = 0;
  for (int i = 0; i < 500 && !inside; i++) { /* at most ~5 s */
    pthread_mutex_lock(&t.st->ckpt_mu);
    inside = t.st->cstate == ST_CS_CHECKPOINTING;
    pthread_mutex_unlock(&t.st->ckpt_mu);
    if (inside)
      break;
    if (i % 50 == 49)
      pump_more(&p, 1, 1);
    nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
  }
  ck_assert_msg(inside, "the checkpointer never began a pass");
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  cf_writer = NULL;
  t_close_keep(&t); /* joins the checkpointer mid-pass; the close-time checkpoint fails too */
  clock_gettime(CLOCK_MONOTONIC, &b);
  capture_stop(&cap, "checkpoint failed");
  ck_assert_int_gt(cf_failed, 0);
  ck_assert_int_lt(b.tv_sec - a.tv_sec, 10);
  cf_delay_ms = 0;
  cf_arm(0, 0);
  t_reopen(&t);
  check_all(t.st, p.submitted, 1);
  integrity_ok(t.st->db_path);
  pump_free(&p);
  t_close(&t);
}
END_TEST

/* No failure, a slow checkpointer (what CPU or disk contention does to that thread): its first
 * pass is held at its first database write until the WAL has reached the hard bound, and every
 * write of its passes sleeps, so a pass lasts far longer than the commits beside it.  The hard
 * bound still holds: the writer waits for the pass to end and runs its blocking checkpoint before
 * the next group, so the WAL never holds more than the bound plus the group that crossed it, and
 * it restarts. */
START_TEST(test_slow_checkpointer) {
  T_SQLITE_ONLY("faults injected through SQLite's VFS into its WAL checkpoints");
  struct tctx t;
  struct pump p;
  pump_start(&t, &p);
  snprintf(cf_gate_wal, sizeof cf_gate_wal, "%s", p.wal);
  cf_gate_bytes = (long long)ST_CKPT_HARD_FRAMES * (4096 + 24) + 32;
  cf_slow_us = 300;
  cf_slow_writes = 4096; /* about the held pass: >= 1.2 s, while the writer could commit on */
  cf_ckpt = &t.st->ckpt_thread;
  pump_more(&p, 9000, 256); /* ~22000 frames: past the hard bound */
  cf_ckpt = NULL;
  ck_assert_int_eq(p.errors, 0);
  struct st_ckpt c = pump_report(&p, "slow checkpointer");
  ck_assert_int_le(p.max_wal, WAL_BOUND);
  ck_assert_uint_le(c.max_frames, ST_CKPT_HARD_FRAMES + 2048);
  ck_assert_uint_ge(c.passes, 1);   /* the held pass ended... */
  ck_assert_uint_ge(c.blocking, 1); /* ...and the writer's blocking checkpoint followed it */
  ck_assert_uint_ge(c.gen, 1);
  ck_assert_uint_eq(c.errors, 0);
  ck_assert_int_lt(c.frames, ST_CKPT_HARD_FRAMES);
  check_all(t.st, p.submitted, 7);
  pump_free(&p);
  t_close(&t);
}
END_TEST

int main(void) {
  cf_register();
  Suite *s = suite_create("checkpoint_fault");
  TCase *tc = tcase_create("checkpoint_fault");
  tcase_set_timeout(tc, 240);
  tcase_add_test(tc, test_db_write_fails);
  tcase_add_test(tc, test_db_fsync_fails);
  tcase_add_test(tc, test_hard_bound_fails);
  tcase_add_test(tc, test_close_mid_failure);
  tcase_add_test(tc, test_slow_checkpointer);
  return t_run_suite(s, tc);
}
