/* walpump.h -- the write pump of the checkpoint tests (test_checkpoint.c, test_ckfault.c): store
 * settings of WP_VALUE_LEN bytes (two overflow pages each, so WAL frames add up fast) put through
 * the real writer with `inflight` writes queued, recording the -wal file's largest size seen at an
 * acknowledgement.  Each test says what write i's key and value are.  Needs helpers.h first. */
#ifndef SBX_TEST_WALPUMP_H
#define SBX_TEST_WALPUMP_H

#include <pthread.h>
#include <sys/stat.h>
#include <time.h>

#define WP_VALUE_LEN 6000
/* The -wal file holds at most the hard bound plus the one group that crossed it (checkpoint.c:
 * the writer's blocking checkpoint runs before the next group; a group of 256 writes is ~800
 * frames); frames are 4 KiB + 24 bytes. */
#define WP_WAL_BOUND ((off_t)(ST_CKPT_HARD_FRAMES + 2048) * (4096 + 24) + 32)

/* write i: its key (NUL-terminated, < n bytes) and its value (WP_VALUE_LEN bytes + NUL) */
typedef void (*wp_make_fn)(int i, char *key, size_t n, char *value);

struct pump {
  struct tctx *t;
  wp_make_fn make;
  char wal[300];
  char *value;
  int submitted, finished, errors, total;
  off_t max_wal; /* since the last pump_more */
};

static off_t wal_size(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0 ? sb.st_size : 0;
}

static void pump_one(struct pump *p);

static void on_pumped(int rc, const struct sbx_error *err, void *ud) {
  struct pump *p = ud;
  p->finished++;
  if (rc != 0) {
    p->errors++;
    fprintf(stderr, "write failed: rc %d %s\n", rc, err ? err->msg : "");
  }
  off_t w = wal_size(p->wal);
  if (w > p->max_wal)
    p->max_wal = w;
  if (p->submitted < p->total)
    pump_one(p);
}

static void pump_one(struct pump *p) {
  char key[32];
  p->make(p->submitted, key, sizeof key, p->value);
  p->submitted++;
  ck_assert_int_eq(store_setting_put(p->t->st, key, p->value, on_pumped, p), 0);
}

static void pump_init(struct pump *p, struct tctx *t, wp_make_fn make) {
  memset(p, 0, sizeof *p);
  p->t = t;
  p->make = make;
  snprintf(p->wal, sizeof p->wal, "%s/cerea.db-wal", t->dir);
  p->value = sbx_malloc(WP_VALUE_LEN + 1);
  ck_assert_ptr_nonnull(p->value);
}

/* Waits until the writer is WAITING with nothing queued: the step it runs between groups after
 * handing their callbacks to the loop (a checkpoint, writer.c) is over, so st__ckpt_get sees its
 * outcome.  A wait for a state, not for a time: the 120 s are only there to fail, not hang. */
static void pump_settle(struct pump *p) {
  struct store *st = p->t->st;
  for (int i = 0;; i++) {
    pthread_mutex_lock(&st->mu);
    int idle = st->wstate == ST_WS_WAITING && SBX_LIST_EMPTY(&st->queue);
    pthread_mutex_unlock(&st->mu);
    if (idle)
      return;
    ck_assert_msg(i < 120000, "the writer is still %d after 120 s", (int)st->wstate);
    nanosleep(&(struct timespec){0, 1000 * 1000}, NULL);
  }
}

/* Submits `more` writes, keeping `inflight` queued, and waits for every acknowledgement and for
 * the writer to settle. */
static void pump_more(struct pump *p, int more, int inflight) {
  p->total += more;
  p->max_wal = 0;
  for (int i = 0; i < inflight && p->submitted < p->total; i++)
    pump_one(p);
  t_wait(p->t);
  ck_assert_int_eq(p->finished, p->submitted);
  ck_assert_int_eq(p->submitted, p->total);
  pump_settle(p);
}

static void pump_free(struct pump *p) { sbx_free(p->value); }

/* Prints what the checkpoints did by now (a test's figures in its log) and returns them. */
static struct st_ckpt pump_report(const struct pump *p, const char *what) {
  struct st_ckpt c;
  st__ckpt_get(p->t->st, &c);
  fprintf(stderr,
          "%s: wal max %lld bytes (bound %lld), max frames %llu, generations %llu, passes %llu, "
          "writer %llu (blocking %llu), complete %llu, errors %llu\n",
          what, (long long)p->max_wal, (long long)WP_WAL_BOUND, (unsigned long long)c.max_frames,
          (unsigned long long)c.gen, (unsigned long long)c.passes,
          (unsigned long long)c.writer_passes, (unsigned long long)c.blocking,
          (unsigned long long)c.complete, (unsigned long long)c.errors);
  return c;
}

#endif
