/* test_crash.c -- crash safety.  A child process opens the store and writes without pause (runs
 * of result size, events, attachments with their blobs), reporting each write over a pipe only
 * when its callback says it is durable.  The parent SIGKILLs it at a random moment, 50 rounds
 * (at least 20 when 180 s run out first) on the same data directory (and, on PostgreSQL,
 * database).  After each kill: (SQLite) PRAGMA
 * integrity_check is "ok", every acknowledged run, event and file is there, and each acknowledged
 * file's blob is stored with exactly its content (sha256 checked: the file on disk, or on
 * PostgreSQL its chunks, hashed by the server).  The next round's child reopens what the last one left
 * (WAL recovery, leftover temp and orphan blob files).  Retention sweeps run among the writes,
 * over expiring files that share blobs with kept ones. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "helpers.h"

#define CHAT     "c0000000000000000000000000000001"
#define ROUNDS     50
#define MIN_ROUNDS 20
#define INFLIGHT   48

/* ---- the child ----------------------------------------------------------------------------- */

struct child {
  struct store *st;
  int fd;
  int round;
  uint64_t n;
  unsigned seed;
  char last[4096]; /* content of the last kept file: an expiring copy shares its blob */
  size_t last_len;
};

struct cw {
  struct child *c;
  char line[128];
  char *data; /* file content, borrowed by the store until the callback */
};

static void submit_next(struct child *c);

static void report(struct cw *w, int rc) {
  if (rc == 0) {
    size_t len = strlen(w->line);
    if (write(w->c->fd, w->line, len) != (ssize_t)len)
      _exit(3);
  }
}

static void on_child_done(int rc, const struct sbx_error *err, void *ud) {
  struct cw *w = ud;
  struct child *c = w->c;
  report(w, rc);
  sbx_free(w);
  submit_next(c);
}

static void on_child_file(int rc, const struct sbx_error *err, const struct store_file_added *res,
                          void *ud) {
  struct cw *w = ud;
  struct child *c = w->c;
  if (rc == 0)
    snprintf(w->line, sizeof w->line, "F%s %s\n", res->file.id, res->file.sha256);
  report(w, rc);
  sbx_free(w->data);
  sbx_free(w);
  submit_next(c);
}

static void on_child_swept(int rc, const struct sbx_error *err, size_t removed, void *ud) {
  struct cw *w = ud;
  struct child *c = w->c;
  sbx_free(w);
  submit_next(c);
}

static void on_child_expiring(int rc, const struct sbx_error *err,
                              const struct store_file_added *res, void *ud) {
  struct cw *w = ud;
  struct child *c = w->c;
  sbx_free(w->data);
  sbx_free(w);
  submit_next(c); /* not reported: the sweep may take it */
}

static void submit_next(struct child *c) {
  struct cw *w = sbx_calloc(1, sizeof *w);
  if (w == NULL)
    _exit(4);
  w->c = c;
  uint64_t k = c->n++;
  int rc;
  if (k % 32 == 31) {
    /* retention sweeps run between the writes: blob files are unlinked only after the commit
     * that dropped their last reference, so a kept file sharing a blob never loses it */
    rc = store_sweep(c->st, sbx_now_wall_ms(), 16, on_child_swept, w);
  } else if (k % 16 == 15) {
    /* an expiring output file, half the time with the content of the last kept file */
    size_t len = c->last_len && (k / 16) % 2 ? c->last_len : 100;
    w->data = sbx_malloc(len);
    if (len == c->last_len)
      memcpy(w->data, c->last, len);
    else
      for (size_t i = 0; i < len; i++)
        w->data[i] = (char)rand_r(&c->seed);
    struct store_file_in in = {.chat_id = CHAT,
                               .name = "plots/old.png",
                               .data = w->data,
                               .size = len,
                               .source = STORE_SRC_OUTPUT,
                               .expires_at = 1,
                               .kind = "figure"};
    rc = store_file_add(c->st, &in, on_child_expiring, w);
  } else if (k % 8 == 7) {
    size_t len = 512 + (size_t)(rand_r(&c->seed) % 3000);
    w->data = sbx_malloc(len);
    for (size_t i = 0; i < len; i++)
      w->data[i] = (char)rand_r(&c->seed);
    memcpy(c->last, w->data, len);
    c->last_len = len;
    struct store_file_in in = {
        .chat_id = CHAT, .name = "upload.bin", .data = w->data, .size = len, .mounted = 1};
    rc = store_file_add(c->st, &in, on_child_file, w);
  } else if (k % 8 == 3) {
    int64_t seq = (int64_t)c->round * 10000000 + (int64_t)k + 1;
    snprintf(w->line, sizeof w->line, "E%lld\n", (long long)seq);
    rc = store_event_append(c->st, CHAT, seq, "run", "{\"run_id\":\"x\",\"attempt\":1}",
                            on_child_done, w);
  } else {
    static char out[700];
    memset(out, 'o', sizeof out - 1);
    struct store_run r = {0};
    store_new_id(r.id);
    snprintf(r.chat_id, sizeof r.chat_id, CHAT);
    r.code = "import math\nprint(math.pi)\n";
    r.origin = "tool";
    r.state = "done";
    r.status = "ok";
    r.stdout_text = out;
    r.stderr_text = "";
    r.notes_json = "[]";
    r.remounted_json = "[]";
    r.attempts = 1;
    r.timeout_s = 60;
    r.created_at = sbx_now_wall_ms();
    snprintf(w->line, sizeof w->line, "R%s\n", r.id);
    rc = store_run_put(c->st, &r, on_child_done, w);
  }
  if (rc != 0)
    _exit(5);
}

static void child_main(const char *dir, int fd, int round) {
  uv_loop_t loop;
  struct child c = {0};
  uv_loop_init(&loop);
  if (t_store_open(&loop, dir, &c.st, NULL) != 0)
    _exit(2);
  c.fd = fd;
  c.round = round;
  c.seed = (unsigned)getpid();
  for (int i = 0; i < INFLIGHT; i++)
    submit_next(&c);
  uv_run(&loop, UV_RUN_DEFAULT); /* never returns: the writes chain forever */
  _exit(6);
}

/* ---- the parent ---------------------------------------------------------------------------- */

/* Is the blob of an acknowledged file there with exactly its content?  SQLite: the file in the
 * blob store; PostgreSQL: its chunks in the database, hashed by the server. */
static void verify_blob(struct t_raw *db, const char *dir, const char *id, const char *sha,
                        long long size, int round) {
  if (t_pg()) {
    char q[400];
    snprintf(q, sizeof q,
             "SELECT (encode(sha256(COALESCE(string_agg(data, ''::bytea ORDER BY n), "
             "''::bytea)), 'hex') = '%s' AND COALESCE(sum(length(data)), 0) = %lld)::int "
             "FROM blob_chunks WHERE sha256 = '%s'",
             sha, size, sha);
    ck_assert_msg(t_raw_int(db, q) == 1, "round %d: blob %s of acked file %s differs", round, sha,
                  id);
    return;
  }
  char bpath[600];
  snprintf(bpath, sizeof bpath, "%s/blobs/%.2s/%s", dir, sha, sha);
  FILE *f = fopen(bpath, "rb");
  ck_assert_msg(f != NULL, "round %d: blob of acked file %s missing", round, id);
  char *buf = malloc((size_t)size + 1);
  size_t got = fread(buf, 1, (size_t)size + 1, f);
  fclose(f);
  ck_assert_int_eq((long long)got, size);
  char h[65];
  store_sha256_hex(buf, got, h);
  free(buf);
  ck_assert_msg(strcmp(h, sha) == 0, "round %d: blob %s content differs", round, sha);
}

static void verify(const char *dir, const char *acked, size_t len, int round, size_t *counts) {
  struct t_raw db = t_raw_open(dir);
  if (!t_pg()) {
    sqlite3_stmt *q;
    ck_assert_int_eq(sqlite3_prepare_v2(db.lite, "PRAGMA integrity_check", -1, &q, NULL),
                     SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(q), SQLITE_ROW);
    ck_assert_msg(strcmp((const char *)sqlite3_column_text(q, 0), "ok") == 0,
                  "round %d: integrity_check: %s", round, sqlite3_column_text(q, 0));
    sqlite3_finalize(q);
  }
  const char *p = acked, *end = acked + len;
  char q[400];
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    if (nl == NULL)
      break; /* a torn last line cannot happen (one write() each) but would not be an ack */
    char line[160];
    snprintf(line, sizeof line, "%.*s", (int)(nl - p), p);
    p = nl + 1;
    if (line[0] == 'R') {
      snprintf(q, sizeof q, "SELECT count(*) FROM runs WHERE id = '%s' AND status = 'ok'",
               line + 1);
      ck_assert_msg(t_raw_int(&db, q) == 1, "round %d: acked run %s lost", round, line + 1);
      counts[0]++;
    } else if (line[0] == 'E') {
      snprintf(q, sizeof q, "SELECT count(*) FROM events WHERE chat_id = '" CHAT "' AND seq = %lld",
               atoll(line + 1));
      ck_assert_msg(t_raw_int(&db, q) == 1, "round %d: acked event %s lost", round, line + 1);
      counts[1]++;
    } else if (line[0] == 'F') {
      char id[40], sha[70];
      ck_assert_int_eq(sscanf(line + 1, "%39s %69s", id, sha), 2);
      snprintf(q, sizeof q,
               "SELECT f.size FROM files f JOIN blobs b ON b.sha256 = f.sha256 WHERE f.id = '%s' "
               "AND f.sha256 = '%s'",
               id, sha);
      long long size = (long long)t_raw_sql(&db, q, -1);
      ck_assert_msg(size >= 0, "round %d: acked file %s lost", round, id);
      verify_blob(&db, dir, id, sha, size, round);
      counts[2]++;
    }
  }
  t_raw_close(&db);
}

START_TEST(test_sigkill_rounds) {
  struct tctx t;
  t_open(&t);
  t_chat(&t, CHAT);
  t_close_keep(&t);
  unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();
  fprintf(stderr, "crash test: seed %u, up to %d rounds\n", seed, ROUNDS);
  size_t counts[3] = {0, 0, 0};
  size_t cap = 1 << 20;
  char *acked = malloc(cap);
  /* ROUNDS, or as many as 180 s hold (at least MIN_ROUNDS): on a loaded machine a child takes
   * seconds to open a PostgreSQL store under ASan, and 50 of them overran the case's timeout. */
  uint64_t began = sbx_now_mono_ms();
  int rounds = 0;
  for (int round = 0; round < ROUNDS; round++, rounds++) {
    if (round >= MIN_ROUNDS && sbx_now_mono_ms() - began > 180000)
      break;
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
      close(fds[0]);
      child_main(t.dir, fds[1], round);
    }
    close(fds[1]);
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    /* The kill comes at a random moment after the child's first acknowledged write, when it is
     * open and writing: counted from the fork, a loaded machine (PostgreSQL's connections under
     * ASan, two CPU burners) had every child killed while it was still opening the store, in
     * all 50 rounds.  Every fifth round still counts from the fork, to kill it while it opens. */
    int kill_after_ms = 20 + (int)(rand_r(&seed) % 180), from_fork = round % 5 == 4;
    uint64_t start = sbx_now_mono_ms(), forked = start;
    size_t len = 0;
    int killed = 0, writing = from_fork;
    for (;;) {
      uint64_t now = sbx_now_mono_ms();
      if (!writing && len > 0) {
        writing = 1;
        start = now;
      }
      ck_assert_msg(writing || now - forked < 60000,
                    "round %d: the child acknowledged nothing in 60 s", round);
      if (writing && !killed && now - start >= (uint64_t)kill_after_ms) {
        ck_assert_int_eq(kill(pid, SIGKILL), 0);
        killed = 1;
      }
      struct pollfd pfd = {fds[0], POLLIN, 0};
      poll(&pfd, 1, killed ? 1000 : 5);
      if (len == cap) {
        cap *= 2;
        acked = realloc(acked, cap);
      }
      ssize_t r = read(fds[0], acked + len, cap - len);
      if (r > 0) {
        len += (size_t)r;
        continue;
      }
      if (r == 0)
        break; /* the child is gone and the pipe drained */
      ck_assert_int_eq(errno, EAGAIN);
    }
    close(fds[0]);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
                  "round %d: child ended otherwise (status %d)", round, status);
    verify(t.dir, acked, len, round, counts);
  }
  fprintf(stderr, "crash test: %d rounds, verified %zu runs, %zu events, %zu files acknowledged\n",
          rounds, counts[0], counts[1], counts[2]);
  ck_assert_uint_gt(counts[0], (size_t)rounds); /* the children did get writes through */
  ck_assert_uint_gt(counts[2], 0);
  free(acked);
  /* and the store itself opens what the last kill left */
  t_reopen(&t);
  ck_assert_int_eq(store_ping(t.st, NULL), 0);
  t_close(&t);
}
END_TEST

int main(void) {
  Suite *s = suite_create("crash");
  TCase *tc = tcase_create("crash");
  tcase_set_timeout(tc, 290); /* ctest gives it 300 */
  tcase_add_test(tc, test_sigkill_rounds);
  return t_run_suite(s, tc);
}
