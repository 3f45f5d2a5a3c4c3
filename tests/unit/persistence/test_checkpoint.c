/* test_checkpoint.c -- checkpoint.c: the writer connection never auto-checkpoints and the
 * checkpointer has its own connection; under continuous writes (a few hundred in flight, always
 * refilled, ~4 times the hard bound of WAL frames in all) the -wal file stays under the bound,
 * the WAL restarts from its beginning again and again without a close, checkpoints run on the
 * checkpointer and finish on the writer, none fails; a reader holding an old snapshot keeps the
 * WAL from restarting (no error, every write still durable) until it lets go; one held past the
 * hard bound makes the writer's blocking checkpoint wait for it, then the WAL restarts and is
 * cut back to journal_size_limit; close joins the
 * thread (state STOPPED) and leaves nothing open (ASan in stage 10 checks the leaks). */
#include <pthread.h>
#include <sys/stat.h>
#include <time.h>

#include <semaphore.h>

#include "helpers.h"

#include "walpump.h"

#define KEYS      200 /* rewritten over and over: the hot pages a checkpoint copies once */
#define WAL_BOUND WP_WAL_BOUND

/* write i rewrites key i % KEYS; every page of the value changes (SQLite skips rewriting an
 * overflow page that did not) */
static void make_hot(int i, char *key, size_t n, char *value) {
  snprintf(key, n, "k%03d", i % KEYS);
  memset(value, 'a' + i % 26, WP_VALUE_LEN);
  value[WP_VALUE_LEN] = '\0';
}

START_TEST(test_connections) {
  T_SQLITE_ONLY("SQLite's WAL checkpoints (PostgreSQL checkpoints by itself)");
  struct tctx t;
  t_open(&t);
  ck_assert_ptr_nonnull(t.st->cdb);
  ck_assert_int_eq(t.st->ckpt_started, 1);
  sqlite3_stmt *s;
  ck_assert_int_eq(sqlite3_prepare_v2(t.st->w.lite, "PRAGMA wal_autocheckpoint", -1, &s, NULL), 0);
  ck_assert_int_eq(sqlite3_step(s), SQLITE_ROW);
  ck_assert_int_eq(sqlite3_column_int(s, 0), 0); /* the hook replaced the auto-checkpoint */
  sqlite3_finalize(s);
  /* a few writes: far below the wake threshold, no checkpoint at all */
  struct pump p;
  pump_init(&p, &t, make_hot);
  pump_more(&p, 50, 8);
  struct st_ckpt c;
  st__ckpt_get(t.st, &c);
  ck_assert_int_gt(c.frames, 0);
  ck_assert_int_lt(c.frames, ST_CKPT_WAKE_FRAMES);
  ck_assert_uint_eq(c.passes + c.writer_passes, 0);
  ck_assert_uint_eq(c.gen, 0);
  /* stopping joins the thread; store_close does it once more, harmlessly */
  st__ckpt_stop(t.st);
  ck_assert_int_eq(t.st->cstate, ST_CS_STOPPED);
  ck_assert_ptr_null(t.st->cdb);
  st__ckpt_stop(t.st);
  pump_free(&p);
  t_close(&t);
}
END_TEST

START_TEST(test_wal_bounded_under_load) {
  T_SQLITE_ONLY("SQLite's WAL checkpoints (PostgreSQL checkpoints by itself)");
  struct tctx t;
  t_open(&t);
  struct pump p;
  /* ~2-3 frames per write (leaf + 2 overflow pages; fewer when a group rewrites a key twice):
   * 24000 writes commit ~55000 frames, more than 3 times the hard bound */
  pump_init(&p, &t, make_hot);
  pump_more(&p, 24000, 256);
  ck_assert_int_eq(p.errors, 0);
  struct st_ckpt c = pump_report(&p, "checkpoint");
  ck_assert_int_gt(p.max_wal, (off_t)ST_CKPT_WAKE_FRAMES * 4096); /* it did reach the window */
  ck_assert_int_le(p.max_wal, WAL_BOUND);
  ck_assert_uint_le(c.max_frames, ST_CKPT_HARD_FRAMES + 2048);
  ck_assert_uint_ge(c.gen, 3);    /* the WAL restarted from its beginning, repeatedly */
  ck_assert_uint_ge(c.passes, 1); /* the checkpointer copied */
  ck_assert_uint_ge(c.complete, 3);
  ck_assert_uint_eq(c.errors, 0);
  /* and every write is there */
  char *v;
  ck_assert_int_eq(store_setting_get(t.st, "k199", &v), 0);
  ck_assert_uint_eq(strlen(v), WP_VALUE_LEN);
  sbx_free(v);
  pump_free(&p);
  t_close(&t);
}
END_TEST

/* The failure side: a reader on an old snapshot.  PASSIVE copies only what that reader does not
 * need, the WAL cannot restart, and yet every write succeeds; once the reader ends, the next
 * checkpoint copies everything and the WAL restarts. */
START_TEST(test_reader_holds_snapshot) {
  T_SQLITE_ONLY("SQLite's WAL checkpoints (PostgreSQL checkpoints by itself)");
  struct tctx t;
  t_open(&t);
  struct pump p;
  pump_init(&p, &t, make_hot);
  pump_more(&p, 200, 64);
  sqlite3 *r;
  ck_assert_int_eq(sqlite3_open_v2(t.st->db_path, &r, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  ck_assert_int_eq(sqlite3_exec(r, "BEGIN; SELECT count(*) FROM settings;", NULL, NULL, NULL),
                   SQLITE_OK);
  /* past the wake threshold, below the hard bound (whose blocking checkpoint would wait 5 s) */
  pump_more(&p, 5000, 256);
  ck_assert_int_eq(p.errors, 0);
  struct st_ckpt c;
  st__ckpt_get(t.st, &c);
  ck_assert_uint_eq(c.gen, 0); /* no restart while the snapshot is held */
  ck_assert_int_ge(c.frames, ST_CKPT_WAKE_FRAMES);
  ck_assert_uint_ge(c.passes, 1); /* it tried */
  ck_assert_uint_eq(c.complete, 0);
  ck_assert_uint_eq(c.blocking, 0);
  ck_assert_uint_eq(c.errors, 0);
  ck_assert_int_eq(sqlite3_exec(r, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
  ck_assert_int_eq(sqlite3_close(r), SQLITE_OK);
  pump_more(&p, 3000, 256);
  ck_assert_int_eq(p.errors, 0);
  st__ckpt_get(t.st, &c);
  ck_assert_uint_ge(c.complete, 1);
  ck_assert_uint_ge(c.gen, 1); /* let go: the WAL restarted */
  ck_assert_uint_eq(c.errors, 0);
  pump_free(&p);
  t_close(&t);
}
END_TEST

/* A reader holding its snapshot until the WAL passed the hard bound, and 300 ms more: the
 * writer's blocking checkpoint (busy timeout 5 s) waits for it, then copies all; the WAL
 * restarts and the file, grown past journal_size_limit, is truncated to it. */
struct holder {
  struct store *st;
  const char *path;
  pthread_t th;
  sem_t holding;
  int rc;
};

static void *hold_snapshot(void *arg) {
  struct holder *h = arg;
  sqlite3 *r;
  h->rc = sqlite3_open_v2(h->path, &r, SQLITE_OPEN_READONLY, NULL);
  if (h->rc == SQLITE_OK)
    h->rc = sqlite3_exec(r, "BEGIN; SELECT count(*) FROM settings;", NULL, NULL, NULL);
  sem_post(&h->holding);
  for (int i = 0; i < 3000; i++) { /* at most 30 s */
    struct st_ckpt c;
    st__ckpt_get(h->st, &c);
    if (c.max_frames >= ST_CKPT_HARD_FRAMES)
      break;
    nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
  }
  nanosleep(&(struct timespec){0, 300 * 1000 * 1000}, NULL);
  sqlite3_exec(r, "COMMIT", NULL, NULL, NULL);
  sqlite3_close(r);
  return NULL;
}

START_TEST(test_hard_bound) {
  T_SQLITE_ONLY("SQLite's WAL checkpoints (PostgreSQL checkpoints by itself)");
  struct tctx t;
  t_open(&t);
  struct pump p;
  pump_init(&p, &t, make_hot);
  pump_more(&p, 200, 64);
  struct holder h = {.st = t.st, .path = t.st->db_path};
  sem_init(&h.holding, 0, 0);
  ck_assert_int_eq(pthread_create(&h.th, NULL, hold_snapshot, &h), 0);
  sem_wait(&h.holding);
  ck_assert_int_eq(h.rc, SQLITE_OK);
  pump_more(&p, 9500, 256); /* ~22000 frames: past the hard bound while the snapshot is held */
  ck_assert_int_eq(pthread_join(h.th, NULL), 0);
  ck_assert_int_eq(p.errors, 0);
  struct st_ckpt c;
  st__ckpt_get(t.st, &c);
  ck_assert_uint_ge(c.blocking, 1);
  ck_assert_uint_ge(c.gen, 1); /* it restarted */
  ck_assert_uint_eq(c.errors, 0);
  ck_assert_int_gt(p.max_wal, (off_t)64 << 20); /* it did grow past the size limit */
  /* a few more writes: the WAL is in a new generation, its file cut back to the limit */
  pump_more(&p, 100, 16);
  ck_assert_int_le(wal_size(p.wal), (off_t)64 << 20);
  sem_destroy(&h.holding);
  pump_free(&p);
  t_close(&t);
}
END_TEST

int main(void) {
  Suite *s = suite_create("checkpoint");
  TCase *tc = tcase_create("checkpoint");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_connections);
  tcase_add_test(tc, test_wal_bounded_under_load);
  tcase_add_test(tc, test_reader_holds_snapshot);
  tcase_add_test(tc, test_hard_bound);
  return t_run_suite(s, tc);
}
