/* bench_store.c -- durable small writes per second: group commit against one transaction per
 * write, in the same run, on the same machine and data directory.
 *
 * Each write is a run result (store_run_put of a finished run: code, ~1 KB of stdout, notes,
 * remounted list, result hash), i.e. what the orchestrator persists when a page reports a result.
 * A client keeps `inflight` writes queued; each callback (= the write is durable: WAL +
 * synchronous=FULL, fsync before the callback) submits the next.  Latency is submit -> callback.
 *
 * A last mode adds new 4 KB attachments (a blob file written and fsynced + a row each).  At the
 * end (SQLite): the WAL's largest size in frames and what the checkpoints did
 * (persistence/checkpoint.c).  With --database URL the same on PostgreSQL (store_open_url: the
 * writer's COMMIT waits for the server's WAL flush; blobs also go into the database, chunked).
 *
 *   bench_store [--dir DIR] [--database URL] [--group N] [--single N] [--files N] [--inflight W]
 * What it does not do: measure reads or HTTP.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h" /* the checkpoint counters (st__ckpt_get) */
#include "store.h"

struct bench {
  struct store *st;
  const char *mode;
  size_t total, submitted, done, errors;
  uint64_t *lat_ns;
  uint64_t *start_ns;
  char stdout_text[1025];
};

struct wctx {
  struct bench *b;
  size_t idx;
};

static void submit(struct bench *b);

static void on_written(int rc, const struct sbx_error *err, void *ud) {
  struct wctx *w = ud;
  struct bench *b = w->b;
  b->lat_ns[w->idx] = uv_hrtime() - b->start_ns[w->idx];
  if (rc != 0) {
    b->errors++;
    fprintf(stderr, "write failed: %s\n", err ? err->msg : "?");
  }
  b->done++;
  free(w);
  if (b->submitted < b->total)
    submit(b);
}

static void submit(struct bench *b) {
  struct wctx *w = malloc(sizeof *w);
  w->b = b;
  w->idx = b->submitted++;
  struct store_run r = {0};
  store_new_id(r.id);
  snprintf(r.chat_id, sizeof r.chat_id, "c0000000000000000000000000000001");
  r.code = "import pandas as pd\ndf = pd.read_csv('/mnt/data/sales.csv')\n"
           "summary = df.groupby('region')['revenue'].sum().sort_values()\nprint(summary)\n"
           "summary.plot(kind='barh')\nimport matplotlib.pyplot as plt\nplt.show()\n";
  r.origin = "tool";
  r.state = "done";
  r.status = "ok";
  r.timeout_s = 60;
  r.attempts = 1;
  r.stdout_text = b->stdout_text;
  r.stderr_text = "";
  r.notes_json = "[]";
  r.remounted_json = "[]";
  r.result_hash = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
  r.created_at = sbx_now_wall_ms();
  r.started_at = r.created_at;
  r.finished_at = r.created_at + 840;
  b->start_ns[w->idx] = uv_hrtime();
  if (store_run_put(b->st, &r, on_written, w) != 0) {
    fprintf(stderr, "cannot queue\n");
    exit(1);
  }
}

/* ---- file adds: new 4 KB attachments (blob file + row each) ------------------------------- */

struct fctx {
  struct bench *b;
  size_t idx;
  char data[4096];
};

static void submit_file(struct bench *b);

static void on_file(int rc, const struct sbx_error *err, const struct store_file_added *res,
                    void *ud) {
  struct fctx *w = ud;
  struct bench *b = w->b;
  b->lat_ns[w->idx] = uv_hrtime() - b->start_ns[w->idx];
  if (rc != 0) {
    b->errors++;
    fprintf(stderr, "file add failed: %s\n", err ? err->msg : "?");
  }
  b->done++;
  free(w);
  if (b->submitted < b->total)
    submit_file(b);
}

static void submit_file(struct bench *b) {
  struct fctx *w = malloc(sizeof *w);
  w->b = b;
  w->idx = b->submitted++;
  for (size_t i = 0; i < sizeof w->data; i++)
    w->data[i] = (char)(rand() & 0xff);
  struct store_file_in in = {.chat_id = "c0000000000000000000000000000001",
                             .name = "upload.bin",
                             .source = STORE_SRC_ATTACHMENT,
                             .mounted = 1,
                             .data = w->data,
                             .size = sizeof w->data};
  b->start_ns[w->idx] = uv_hrtime();
  if (store_file_add(b->st, &in, on_file, w) != 0) {
    fprintf(stderr, "cannot queue\n");
    exit(1);
  }
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static void run_mode(uv_loop_t *loop, struct store *st, const char *mode, size_t total,
                     size_t inflight, size_t group_max, int files) {
  struct bench b = {0};
  b.st = st;
  b.mode = mode;
  b.total = total;
  b.lat_ns = calloc(total, sizeof *b.lat_ns);
  b.start_ns = calloc(total, sizeof *b.start_ns);
  memset(b.stdout_text, 'x', 1024);
  for (size_t i = 63; i < 1024; i += 64)
    b.stdout_text[i] = '\n';
  store_set_group_max(st, group_max);
  struct store_stats s0, s1;
  store_get_stats(st, &s0);
  uint64_t t0 = uv_hrtime();
  for (size_t i = 0; i < inflight && b.submitted < total; i++)
    files ? submit_file(&b) : submit(&b);
  uv_run(loop, UV_RUN_DEFAULT);
  double secs = (double)(uv_hrtime() - t0) / 1e9;
  store_get_stats(st, &s1);
  qsort(b.lat_ns, total, sizeof *b.lat_ns, cmp_u64);
  uint64_t commits = s1.commits - s0.commits;
  printf("%-22s writes=%zu errors=%zu time=%.2fs  %.0f durable writes/s  commits=%llu "
         "(%.1f writes/commit)  latency ms: p50=%.2f p99=%.2f max=%.2f\n",
         mode, b.done, b.errors, secs, (double)b.done / secs, (unsigned long long)commits,
         commits ? (double)b.done / (double)commits : 0.0, (double)b.lat_ns[total / 2] / 1e6,
         (double)b.lat_ns[(size_t)((double)total * 0.99)] / 1e6, (double)b.lat_ns[total - 1] / 1e6);
  fflush(stdout);
  free(b.lat_ns);
  free(b.start_ns);
}

static void on_chat(int rc, const struct sbx_error *err, void *ud) {
  if (rc != 0) {
    fprintf(stderr, "chat: %s\n", err->msg);
    exit(1);
  }
}

int main(int argc, char **argv) {
  const char *dir = NULL, *url = NULL;
  size_t group_n = 100000, single_n = 3000, inflight = 256, files_n = 2000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--dir"))
      dir = argv[i + 1];
    else if (!strcmp(argv[i], "--database"))
      url = argv[i + 1];
    else if (!strcmp(argv[i], "--group"))
      group_n = strtoul(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--single"))
      single_n = strtoul(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--files"))
      files_n = strtoul(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--inflight"))
      inflight = strtoul(argv[i + 1], NULL, 10);
  }
  char tmp[] = "/tmp/sbx-bench-store-XXXXXX";
  if (dir == NULL && (dir = mkdtemp(tmp)) == NULL) {
    perror("mkdtemp");
    return 1;
  }
  uv_loop_t loop;
  uv_loop_init(&loop);
  struct store *st;
  struct sbx_error err = {0};
  if (store_open_url(&loop, dir, url, &st, &err) != 0) {
    fprintf(stderr, "store_open: %s\n", err.msg);
    return 1;
  }
  struct store_chat c = {0};
  snprintf(c.id, sizeof c.id, "c0000000000000000000000000000001");
  store_sha256_hex("t", 1, c.token_hash);
  c.created_at = sbx_now_wall_ms();
  store_chat_create(st, &c, on_chat, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  if (url)
    printf("PostgreSQL (synchronous_commit on), data dir %s, %zu writes in flight, run-result rows "
           "(~1.5 KB)\n",
           dir, inflight);
  else
    printf("SQLite, data dir %s, %zu writes in flight, run-result rows (~1.5 KB), WAL + "
           "synchronous=FULL\n",
           dir, inflight);
  run_mode(&loop, st, "one tx per write", single_n, inflight, 1, 0);
  run_mode(&loop, st, "group commit", group_n, inflight, 4096, 0);
  run_mode(&loop, st, "group commit, 1 in flight", single_n / 3, 1, 4096, 0);
  if (files_n)
    run_mode(&loop, st, "4 KB file adds, grouped", files_n, inflight, 4096, 1);
  struct st_ckpt ck;
  st__ckpt_get(st, &ck);
  if (!url)
    printf("WAL: max %llu frames, restarted %llu times; checkpoints: %llu checkpointer passes, "
           "%llu by the writer between groups (%llu blocking), %llu errors\n",
           (unsigned long long)ck.max_frames, (unsigned long long)ck.gen,
           (unsigned long long)ck.passes, (unsigned long long)ck.writer_passes,
           (unsigned long long)ck.blocking, (unsigned long long)ck.errors);
  store_close(st);
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
  if (dir == tmp) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    if (system(cmd) != 0)
      return 1;
  }
  return 0;
}
