/* test_files.c -- files.c: the naming rules against the stored set (same content, "name (N).ext"
 * with N from one query, 1,000 duplicates, versions of tool/output names), the per-chat quota of
 * added files, refusals through the callback, reads, and fail-at-N allocation leaving the store
 * consistent. */
#include "helpers.h"

#define CHAT "c0000000000000000000000000000001"

START_TEST(test_attachment_duplicates) {
  struct tctx t;
  struct added a, b, c, d;
  t_open(&t);
  t_chat(&t, CHAT);
  ck_assert_int_eq(t_add(&t, CHAT, "report.pdf", STORE_SRC_ATTACHMENT, "AAA", &a), 0);
  ck_assert_int_eq(a.created, 1);
  ck_assert_str_eq(a.f.name, "report.pdf");
  ck_assert_int_eq(a.f.version, 1);
  /* same name, same content: the same file, no copy */
  ck_assert_int_eq(t_add(&t, CHAT, "report.pdf", STORE_SRC_ATTACHMENT, "AAA", &b), 0);
  ck_assert_int_eq(b.created, 0);
  ck_assert_str_eq(b.f.id, a.f.id);
  store_file_free(&b.f);
  /* other content: the next free name */
  ck_assert_int_eq(t_add(&t, CHAT, "report.pdf", STORE_SRC_ATTACHMENT, "BBB", &b), 0);
  ck_assert_int_eq(b.created, 1);
  ck_assert_str_eq(b.f.name, "report (2).pdf");
  ck_assert_int_eq(t_add(&t, CHAT, "report.pdf", STORE_SRC_ATTACHMENT, "CCC", &c), 0);
  ck_assert_str_eq(c.f.name, "report (3).pdf");
  /* the content of "report (2).pdf" uploaded as report.pdf again: that file */
  ck_assert_int_eq(t_add(&t, CHAT, "report.pdf", STORE_SRC_ATTACHMENT, "BBB", &d), 0);
  ck_assert_int_eq(d.created, 0);
  ck_assert_str_eq(d.f.id, b.f.id);
  store_file_free(&d.f);
  /* an explicit "report (3).pdf" with new content is numbered past the family */
  ck_assert_int_eq(t_add(&t, CHAT, "report (3).pdf", STORE_SRC_ATTACHMENT, "DDD", &d), 0);
  ck_assert_str_eq(d.f.name, "report (4).pdf");
  store_file_free(&d.f);
  /* an unused name in the family is taken as given */
  ck_assert_int_eq(t_add(&t, CHAT, "report (9).pdf", STORE_SRC_ATTACHMENT, "EEE", &d), 0);
  ck_assert_str_eq(d.f.name, "report (9).pdf");
  store_file_free(&d.f);
  ck_assert_int_eq(t_add(&t, CHAT, "report.pdf", STORE_SRC_ATTACHMENT, "FFF", &d), 0);
  ck_assert_str_eq(d.f.name, "report (10).pdf");
  store_file_free(&d.f);
  /* several dots, no extension, hidden files, double extensions */
  static const struct {
    const char *in, *second;
  } names[] = {
      {"my.data.v2.csv", "my.data.v2 (2).csv"},
      {"Makefile", "Makefile (2)"},
      {".bashrc", ".bashrc (2)"},
      {"logs.tar.gz", "logs (2).tar.gz"},
      {"\xe6\x8a\xa5\xe5\x91\x8a.pdf", "\xe6\x8a\xa5\xe5\x91\x8a (2).pdf"},
  };
  for (size_t i = 0; i < SBX_ARRAY_SIZE(names); i++) {
    ck_assert_int_eq(t_add(&t, CHAT, names[i].in, STORE_SRC_ATTACHMENT, "one", &d), 0);
    ck_assert_str_eq(d.f.name, names[i].in);
    store_file_free(&d.f);
    ck_assert_int_eq(t_add(&t, CHAT, names[i].in, STORE_SRC_ATTACHMENT, "two", &d), 0);
    ck_assert_str_eq(d.f.name, names[i].second);
    store_file_free(&d.f);
  }
  /* unicode: a decomposed name is the same name as its NFC form */
  ck_assert_int_eq(t_add(&t, CHAT, "caf\xc3\xa9.txt", STORE_SRC_ATTACHMENT, "x", &d), 0);
  struct added e;
  ck_assert_int_eq(t_add(&t, CHAT, "cafe\xcc\x81.txt", STORE_SRC_ATTACHMENT, "x", &e), 0);
  ck_assert_int_eq(e.created, 0);
  ck_assert_str_eq(e.f.id, d.f.id);
  store_file_free(&d.f);
  store_file_free(&e.f);
  store_file_free(&a.f);
  store_file_free(&b.f);
  store_file_free(&c.f);
  t_close(&t);
}
END_TEST

/* store_files_generation: moves after a committed write that changed the files table (add,
 * retention, sweep delete), stays for writes that did not (chat, run), and a list read after a
 * move sees the change. */
START_TEST(test_files_generation) {
  struct tctx t;
  struct added a;
  struct done d = {0};
  t_open(&t);
  uint64_t g0 = store_files_generation(t.st);
  t_chat(&t, CHAT);
  ck_assert_uint_eq(store_files_generation(t.st), g0); /* a chat is not a file */
  struct store_run r = {0};
  snprintf(r.id, sizeof r.id, "r0000000000000000000000000000001");
  snprintf(r.chat_id, sizeof r.chat_id, CHAT);
  r.code = "x";
  r.origin = "tool";
  r.state = "queued";
  ck_assert_int_eq(store_run_put(t.st, &r, on_done, &d), 0);
  t_wait(&t);
  ck_assert_int_eq(d.rc, 0);
  ck_assert_uint_eq(store_files_generation(t.st), g0); /* nor is a run */
  struct store_file *v = NULL;
  size_t n = 9;
  ck_assert_int_eq(store_file_list(t.st, CHAT, 0, &v, &n), 0);
  ck_assert_uint_eq(n, 0);
  store_file_list_free(v, n);
  ck_assert_int_eq(t_add(&t, CHAT, "data.csv", STORE_SRC_ATTACHMENT, "1,2", &a), 0);
  uint64_t g1 = store_files_generation(t.st);
  ck_assert_uint_ne(g1, g0);
  ck_assert_int_eq(store_file_list(t.st, CHAT, 0, &v, &n), 0);
  ck_assert_uint_eq(n, 1);
  ck_assert_str_eq(v[0].name, "data.csv");
  store_file_list_free(v, n);
  store_file_free(&a.f);
  /* retention rewrites expires_at of files */
  memset(&d, 0, sizeof d);
  ck_assert_int_eq(store_retention_apply(t.st, 1000, on_done, &d), 0);
  t_wait(&t);
  ck_assert_int_eq(d.rc, 0);
  uint64_t g2 = store_files_generation(t.st);
  ck_assert_uint_ne(g2, g1);
  /* a sweep that deletes a file (an output expired at 100) */
  struct store_file_in in = {.chat_id = CHAT,
                             .name = "fig.png",
                             .source = STORE_SRC_OUTPUT,
                             .mounted = 1,
                             .expires_at = 100,
                             .data = "png",
                             .size = 3};
  ck_assert_int_eq(t_add_in(&t, &in, &a), 0);
  store_file_free(&a.f);
  uint64_t g3 = store_files_generation(t.st);
  ck_assert_uint_ne(g3, g2);
  memset(&d, 0, sizeof d);
  ck_assert_int_eq(store_sweep(t.st, 1000, 10, NULL, NULL), 0);
  t_wait(&t);
  ck_assert_uint_ne(store_files_generation(t.st), g3);
  ck_assert_int_eq(store_file_list(t.st, CHAT, 0, &v, &n), 0);
  ck_assert_uint_eq(n, 1); /* fig.png swept, data.csv (attachment) kept */
  store_file_list_free(v, n);
  t_close(&t);
}
END_TEST

#define NDUP 1000
struct many {
  int called, failed;
  char last[64];
};
static void on_many(int rc, const struct sbx_error *err, const struct store_file_added *res,
                    void *ud) {
  struct many *m = ud;
  m->called++;
  if (rc != 0) {
    m->failed++;
    return;
  }
  snprintf(m->last, sizeof m->last, "%s", res->file.name);
}

START_TEST(test_thousand_duplicates) {
  struct tctx t;
  t_open(&t);
  t_chat(&t, CHAT);
  static char data[NDUP][16];
  struct many m = {0};
  for (int i = 0; i < NDUP; i++) {
    snprintf(data[i], sizeof data[i], "content %d", i);
    struct store_file_in in = {.chat_id = CHAT,
                               .name = "data.csv",
                               .data = data[i],
                               .size = strlen(data[i]),
                               .mounted = 1};
    ck_assert_int_eq(store_file_add(t.st, &in, on_many, &m), 0);
  }
  t_wait(&t);
  ck_assert_int_eq(m.called, NDUP);
  ck_assert_int_eq(m.failed, 0);
  ck_assert_str_eq(m.last, "data (1000).csv");
  /* the next one costs exactly one run of the numbering query, however many exist */
  int sqlite = t_sqlite_part(__func__, "the numbering query's SQLite step counters");
  sqlite3_stmt *q = t.st->w.q[ST_FILE_DUP_MAX].lite;
  int before = sqlite ? sqlite3_stmt_status(q, SQLITE_STMTSTATUS_RUN, 0) : 0;
  int steps_before = sqlite ? sqlite3_stmt_status(q, SQLITE_STMTSTATUS_FULLSCAN_STEP, 0) : 0;
  int vm_before = sqlite ? sqlite3_stmt_status(q, SQLITE_STMTSTATUS_VM_STEP, 0) : 0;
  struct added a;
  ck_assert_int_eq(t_add(&t, CHAT, "data.csv", STORE_SRC_ATTACHMENT, "one more", &a), 0);
  ck_assert_str_eq(a.f.name, "data (1001).csv");
  if (sqlite) {
    ck_assert_int_eq(sqlite3_stmt_status(q, SQLITE_STMTSTATUS_RUN, 0) - before, 1);
    ck_assert_int_eq(sqlite3_stmt_status(q, SQLITE_STMTSTATUS_FULLSCAN_STEP, 0) - steps_before, 0);
    /* and that run is an index seek (the largest N, the exact name), not a walk of the family */
    int vm = sqlite3_stmt_status(q, SQLITE_STMTSTATUS_VM_STEP, 0) - vm_before;
    ck_assert_msg(vm < 100, "numbering query took %d VM steps with %d duplicates", vm, NDUP);
  }
  store_file_free(&a.f);
  struct store_file *v;
  size_t n;
  ck_assert_int_eq(store_file_list(t.st, CHAT, 0, &v, &n), 0);
  ck_assert_uint_eq(n, NDUP + 1);
  ck_assert_str_eq(v[0].name, "data.csv");
  ck_assert_str_eq(v[1].name, "data (2).csv");
  store_file_list_free(v, n);
  t_close(&t);
}
END_TEST

START_TEST(test_versions) {
  struct tctx t;
  struct added a, b, c;
  t_open(&t);
  t_chat(&t, CHAT);
  ck_assert_int_eq(t_add(&t, CHAT, "figure-1.png", STORE_SRC_OUTPUT, "v1", &a), 0);
  ck_assert_int_eq(a.f.version, 1);
  ck_assert_int_eq(t_add(&t, CHAT, "figure-1.png", STORE_SRC_OUTPUT, "v2", &b), 0);
  ck_assert_int_eq(b.created, 1);
  ck_assert_int_eq(b.f.version, 2);
  ck_assert_str_eq(b.f.name, "figure-1.png");
  ck_assert_str_ne(b.f.id, a.f.id);
  /* same content as the latest: the latest */
  ck_assert_int_eq(t_add(&t, CHAT, "figure-1.png", STORE_SRC_OUTPUT, "v2", &c), 0);
  ck_assert_int_eq(c.created, 0);
  ck_assert_str_eq(c.f.id, b.f.id);
  store_file_free(&c.f);
  /* same content as an OLDER version: a new version (the latest is what mounts) */
  ck_assert_int_eq(t_add(&t, CHAT, "figure-1.png", STORE_SRC_OUTPUT, "v1", &c), 0);
  ck_assert_int_eq(c.created, 1);
  ck_assert_int_eq(c.f.version, 3);
  store_file_free(&c.f);
  ck_assert_int_eq(t_add(&t, CHAT, "plots/sub/a.png", STORE_SRC_OUTPUT, "p", &c), 0);
  ck_assert_str_eq(c.f.name, "plots/sub/a.png");
  store_file_free(&c.f);
  ck_assert_int_eq(t_add(&t, CHAT, "summary.docx", STORE_SRC_TOOL, "t1", &c), 0);
  store_file_free(&c.f);
  ck_assert_int_eq(t_add(&t, CHAT, "summary.docx", STORE_SRC_TOOL, "t2", &c), 0);
  ck_assert_int_eq(c.f.version, 2);
  store_file_free(&c.f);
  /* latest of each name, oldest first; all versions */
  struct store_file *v;
  size_t n;
  ck_assert_int_eq(store_file_list(t.st, CHAT, 0, &v, &n), 0);
  ck_assert_uint_eq(n, 3);
  ck_assert_str_eq(v[0].name, "figure-1.png");
  ck_assert_int_eq(v[0].version, 3);
  ck_assert_str_eq(v[1].name, "plots/sub/a.png");
  ck_assert_str_eq(v[2].name, "summary.docx");
  store_file_list_free(v, n);
  ck_assert_int_eq(store_file_list(t.st, CHAT, 1, &v, &n), 0);
  ck_assert_uint_eq(n, 6);
  store_file_list_free(v, n);
  ck_assert_int_eq(store_file_list(t.st, "nochat", 1, &v, &n), 0);
  ck_assert_uint_eq(n, 0);
  store_file_free(&a.f);
  store_file_free(&b.f);
  t_close(&t);
}
END_TEST

/* store_chat_output_bytes: the sizes of the chat's output files, every stored version, and
 * nothing else (attachments, tool files, another chat's outputs); read through the covering
 * partial index alone (EXPLAIN QUERY PLAN), not a scan of the chat's files; it drops when the
 * sweep deletes an expired artifact. */
static uint64_t output_bytes(struct tctx *t, const char *chat) {
  uint64_t b = 12345;
  ck_assert_int_eq(store_chat_output_bytes(t->st, chat, &b), 0);
  return b;
}

static void on_sweep_done(int rc, const struct sbx_error *err, size_t removed, void *ud) {
  (void)err;
  ck_assert_int_eq(rc, 0);
  *(size_t *)ud = removed;
}

START_TEST(test_output_bytes) {
  struct tctx t;
  struct added a;
  t_open(&t);
  t_chat(&t, CHAT);
  t_chat(&t, "c2");
  ck_assert_uint_eq(output_bytes(&t, CHAT), 0);
  ck_assert_uint_eq(output_bytes(&t, "nochat"), 0);
  uint64_t b = 0;
  ck_assert_int_eq(store_chat_output_bytes(t.st, NULL, &b), SBX_EINVAL);
  static const struct {
    const char *chat, *name;
    enum store_source src;
    const char *data;
    uint64_t counted; /* bytes it adds to CHAT's output */
  } adds[] = {
      {CHAT, "figure-1.png", STORE_SRC_OUTPUT, "0123456789", 10},
      {CHAT, "figure-1.png", STORE_SRC_OUTPUT, "abcdefghijklmnopqrst", 20}, /* version 2 */
      {CHAT, "figure-1.png", STORE_SRC_OUTPUT, "abcdefghijklmnopqrst", 0},  /* the same: no row */
      {CHAT, "plots/a.csv", STORE_SRC_OUTPUT, "0123456789", 10}, /* same content, other name */
      {CHAT, "report.pdf", STORE_SRC_ATTACHMENT, "a much longer attachment body", 0},
      {CHAT, "notes.md", STORE_SRC_KNOWLEDGE, "knowledge", 0},
      {CHAT, "summary.docx", STORE_SRC_TOOL, "tool output", 0},
      {"c2", "figure-1.png", STORE_SRC_OUTPUT, "another chat's figure", 0},
  };
  uint64_t want = 0;
  for (size_t i = 0; i < SBX_ARRAY_SIZE(adds); i++) {
    ck_assert_int_eq(t_add(&t, adds[i].chat, adds[i].name, adds[i].src, adds[i].data, &a), 0);
    store_file_free(&a.f);
    want += adds[i].counted;
    ck_assert_msg(output_bytes(&t, CHAT) == want, "after add %zu: %llu, want %llu", i,
                  (unsigned long long)output_bytes(&t, CHAT), (unsigned long long)want);
  }
  ck_assert_uint_eq(output_bytes(&t, "c2"), strlen("another chat's figure"));
  /* one index read: the covering partial index, searched by chat; no scan, no table row read
   * (PostgreSQL's plans: test_pg.c) */
  if (t_sqlite_part(__func__, "SQLite's query plan (test_pg.c checks PostgreSQL's)")) {
    char plan[1024];
    plan_of(t.st->r.lite, sqlite3_sql(t.st->r.q[ST_CHAT_OUTPUT_BYTES].lite), plan, sizeof plan);
    ck_assert_msg(
        strstr(plan, "SEARCH files USING COVERING INDEX files_output (chat_id=? AND source=?)") !=
            NULL,
        "plan: %s", plan);
    ck_assert_msg(strstr(plan, "SCAN") == NULL, "plan: %s", plan);
  }
  /* an expired artifact swept: its bytes are no longer held */
  struct store_file_in in = {.chat_id = CHAT,
                             .name = "old.bin",
                             .source = STORE_SRC_OUTPUT,
                             .data = "12345",
                             .size = 5,
                             .expires_at = 1};
  ck_assert_int_eq(t_add_in(&t, &in, &a), 0);
  store_file_free(&a.f);
  ck_assert_uint_eq(output_bytes(&t, CHAT), want + 5);
  size_t removed = 0;
  ck_assert_int_eq(store_sweep(t.st, 2, 100, on_sweep_done, &removed), 0);
  t_wait(&t);
  ck_assert_uint_ge(removed, 1);
  ck_assert_uint_eq(output_bytes(&t, CHAT), want);
  t_close(&t);
}
END_TEST

/* in->quota: a new file or version of a non-output source that would take the chat's files of
 * those sources past it is refused (SBX_EFULL, no row, the other files kept); the same content
 * again is not; outputs and other chats are not bounded by it; store_chat_added_bytes counts the
 * chat's non-output files alone. */
START_TEST(test_added_quota) {
  struct tctx t;
  struct added a;
  t_open(&t);
  t_chat(&t, CHAT);
  t_chat(&t, "c2");
  static const struct {
    const char *chat, *name;
    enum store_source src;
    const char *data;
    int rc, created;
  } adds[] = {
      {CHAT, "a.txt", STORE_SRC_ATTACHMENT, "0123456789", 0, 1},
      {CHAT, "b.txt", STORE_SRC_ATTACHMENT, "abcdefghij", SBX_EFULL, 0}, /* 20 > 15 */
      {CHAT, "a.txt", STORE_SRC_ATTACHMENT, "0123456789", 0, 0},         /* the same: kept */
      {CHAT, "t.txt", STORE_SRC_TOOL, "12345", 0, 1},                    /* 15: at the quota */
      {CHAT, "t.txt", STORE_SRC_TOOL, "67890", SBX_EFULL, 0},            /* a new version */
      {CHAT, "k.md", STORE_SRC_KNOWLEDGE, "x", SBX_EFULL, 0},
      {CHAT, "o.bin", STORE_SRC_OUTPUT, "outputs are not counted", 0, 1},
      {"c2", "a.txt", STORE_SRC_ATTACHMENT, "abcdefghij", 0, 1}, /* another chat's own quota */
  };
  for (size_t i = 0; i < SBX_ARRAY_SIZE(adds); i++) {
    struct store_file_in in = {.chat_id = adds[i].chat,
                               .name = adds[i].name,
                               .source = adds[i].src,
                               .data = adds[i].data,
                               .size = strlen(adds[i].data),
                               .quota = 15};
    ck_assert_msg(t_add_in(&t, &in, &a) == adds[i].rc, "add %zu: rc %d (%s)", i, a.rc, a.msg);
    if (adds[i].rc == 0)
      ck_assert_int_eq(a.created, adds[i].created);
    else
      ck_assert_ptr_nonnull(strstr(a.msg, "quota"));
    store_file_free(&a.f);
  }
  uint64_t b = 0;
  ck_assert_int_eq(store_chat_added_bytes(t.st, CHAT, &b), 0);
  ck_assert_uint_eq(b, 15);
  ck_assert_int_eq(store_chat_added_bytes(t.st, "c2", &b), 0);
  ck_assert_uint_eq(b, 10);
  ck_assert_int_eq(store_chat_added_bytes(t.st, NULL, &b), SBX_EINVAL);
  struct store_file *fv = NULL;
  size_t n = 0;
  ck_assert_int_eq(store_file_list(t.st, CHAT, 1, &fv, &n), 0);
  ck_assert_uint_eq(n, 3); /* a.txt, t.txt, o.bin */
  store_file_list_free(fv, n);
  t_close(&t);
}
END_TEST

START_TEST(test_refusals_and_fields) {
  struct tctx t;
  struct added a;
  t_open(&t);
  t_chat(&t, CHAT);
  ck_assert_int_eq(t_add(&t, CHAT, "a/b.txt", STORE_SRC_ATTACHMENT, "x", &a), SBX_ENAME);
  ck_assert_ptr_nonnull(strstr(a.msg, "one path segment"));
  ck_assert_int_eq(t_add(&t, CHAT, "../etc/passwd", STORE_SRC_OUTPUT, "x", &a), SBX_ENAME);
  ck_assert_int_eq(
      t_add(&t, "c0000000000000000000000000000009", "x.txt", STORE_SRC_ATTACHMENT, "x", &a),
      SBX_ENOENT);
  ck_assert_ptr_nonnull(strstr(a.msg, "no chat"));
  struct store_file_in bad = {0};
  ck_assert_int_eq(store_file_add(t.st, &bad, on_added, &a), SBX_EINVAL);
  /* every field round-trips */
  struct store_file_in in = {.chat_id = CHAT,
                             .name = "big.bin",
                             .source = STORE_SRC_OUTPUT,
                             .mounted = 0,
                             .left_out_reason = "over 20 MB",
                             .text_of = "f0000000000000000000000000000001",
                             .run_id = "r0000000000000000000000000000001",
                             .kind = "figure",
                             .expires_at = 12345,
                             .data = "payload",
                             .size = 7};
  ck_assert_int_eq(t_add_in(&t, &in, &a), 0);
  struct store_file f;
  ck_assert_int_eq(store_file_get(t.st, a.f.id, &f), 0);
  ck_assert_str_eq(f.name, "big.bin");
  ck_assert_str_eq(f.chat_id, CHAT);
  ck_assert_int_eq(f.source, STORE_SRC_OUTPUT);
  ck_assert_int_eq(f.mounted, 0);
  ck_assert_str_eq(f.left_out_reason, "over 20 MB");
  ck_assert_str_eq(f.text_of, "f0000000000000000000000000000001");
  ck_assert_str_eq(f.run_id, "r0000000000000000000000000000001");
  ck_assert_str_eq(f.kind, "figure");
  ck_assert_int_eq(f.expires_at, 12345);
  ck_assert_uint_eq(f.size, 7);
  char sha[65];
  store_sha256_hex("payload", 7, sha);
  ck_assert_str_eq(f.sha256, sha);
  ck_assert_int_gt(f.created_at, 0);
  store_file_free(&f);
  store_file_free(&a.f);
  ck_assert_int_eq(store_file_get(t.st, "nope", &f), SBX_ENOENT);
  /* an empty file is a file */
  ck_assert_int_eq(t_add(&t, CHAT, "empty.txt", STORE_SRC_ATTACHMENT, "", &a), 0);
  ck_assert_uint_eq(a.f.size, 0);
  store_file_free(&a.f);
  t_close(&t);
}
END_TEST

START_TEST(test_alloc_fail_at_n) {
  struct tctx t;
  t_open(&t);
  t_chat(&t, CHAT);
  int ok = 0;
  uint64_t n;
  for (n = 1; n < 200; n++) {
    char data[32];
    snprintf(data, sizeof data, "data %llu", (unsigned long long)n);
    struct added a = {0};
    struct store_file_in in = {.chat_id = CHAT,
                               .name = "oom.txt",
                               .data = data,
                               .size = strlen(data),
                               .kind = "file",
                               .left_out_reason = "r"};
    sbx_alloc_fail_at(n, 0);
    int rc = store_file_add(t.st, &in, on_added, &a);
    if (rc == 0)
      t_wait(&t);
    uint64_t used = sbx_alloc_count();
    sbx_alloc_fail_at(0, 0);
    if (!t_add_outcome(rc, &a, &ok))
      continue;
    if (used < n)
      break; /* the whole write ran without reaching the injected failure */
  }
  ck_assert_uint_lt(n, 200);
  /* consistent: exactly the acknowledged files exist, each with its blob */
  struct store_file *v;
  size_t cnt;
  ck_assert_int_eq(store_file_list(t.st, CHAT, 1, &v, &cnt), 0);
  ck_assert_uint_eq(cnt, (size_t)ok);
  for (size_t i = 0; i < cnt; i++) {
    char *data;
    size_t len;
    ck_assert_int_eq(store_blob_read(t.st, v[i].sha256, &data, &len), 0);
    ck_assert_uint_eq(len, v[i].size);
    sbx_free(data);
  }
  store_file_list_free(v, cnt);
  t_close(&t);
}
END_TEST

int main(void) {
  Suite *s = suite_create("files");
  TCase *tc = tcase_create("files");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_attachment_duplicates);
  tcase_add_test(tc, test_thousand_duplicates);
  tcase_add_test(tc, test_versions);
  tcase_add_test(tc, test_output_bytes);
  tcase_add_test(tc, test_added_quota);
  tcase_add_test(tc, test_files_generation);
  tcase_add_test(tc, test_refusals_and_fields);
  tcase_add_test(tc, test_alloc_fail_at_n);
  return t_run_suite(s, tc);
}
