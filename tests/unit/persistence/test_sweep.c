/* test_sweep.c -- sweep.c: bounded steps (budget respected, repeated until done), expired files
 * and their run_files rows removed, kept and unexpired ones untouched, a blob still referenced
 * kept, unreferenced blob files unlinked; a sweep whose commit fails (injected fsync error)
 * unlinks nothing; retention changes recompute expiry from creation time. */
#include <sys/stat.h>

#include "faultvfs.h"
#include "helpers.h"

#define CHAT "c0000000000000000000000000000001"

struct swept {
  int called, rc;
  size_t removed;
};
static void on_swept(int rc, const struct sbx_error *err, size_t removed, void *ud) {
  struct swept *s = ud;
  s->called++;
  s->rc = rc;
  s->removed = removed;
}

static size_t sweep(struct tctx *t, int64_t now, size_t budget, int *rc) {
  struct swept s = {0};
  ck_assert_int_eq(store_sweep(t->st, now, budget, on_swept, &s), 0);
  t_wait(t);
  ck_assert_int_eq(s.called, 1);
  *rc = s.rc;
  return s.removed;
}

static struct store_file add_exp(struct tctx *t, const char *name, const char *data, int64_t exp,
                                 enum store_source src) {
  struct added a = {0};
  struct store_file_in in = {.chat_id = CHAT,
                             .name = name,
                             .source = src,
                             .data = data,
                             .size = strlen(data),
                             .expires_at = exp,
                             .kind = "file"};
  ck_assert_int_eq(t_add_in(t, &in, &a), 0);
  return a.f;
}

static int blob_exists(struct tctx *t, const char *sha) {
  char *p = store_blob_path(t->st, sha);
  struct stat sb;
  int ok = stat(p, &sb) == 0;
  sbx_free(p);
  return ok;
}

START_TEST(test_sweep_steps) {
  struct tctx t;
  int rc;
  t_open(&t);
  t_chat(&t, CHAT);
  struct store_file e1 = add_exp(&t, "a.png", "expired one", 100, STORE_SRC_OUTPUT);
  struct store_file e2 = add_exp(&t, "b.png", "expired two", 200, STORE_SRC_OUTPUT);
  struct store_file e3 = add_exp(&t, "c.png", "shared", 300, STORE_SRC_OUTPUT);
  struct store_file keep = add_exp(&t, "c.csv", "shared", 0, STORE_SRC_ATTACHMENT);
  struct store_file later = add_exp(&t, "d.png", "later", 5000, STORE_SRC_OUTPUT);
  struct store_run r = {0};
  snprintf(r.id, sizeof r.id, "r0000000000000000000000000000001");
  snprintf(r.chat_id, sizeof r.chat_id, CHAT);
  r.code = "x";
  r.origin = "tool";
  r.state = "done";
  struct done d = {0};
  ck_assert_int_eq(store_run_put(t.st, &r, on_done, &d), 0);
  ck_assert_int_eq(store_run_file_put(t.st, r.id, 0, e1.id, on_done, &d), 0);
  ck_assert_int_eq(store_run_file_put(t.st, r.id, 1, later.id, on_done, &d), 0);
  t_wait(&t);
  ck_assert_int_eq(d.rc, 0);
  uint64_t bytes = store_blob_bytes(t.st);
  ck_assert_uint_eq(bytes, 11 + 11 + 6 + 5);
  ck_assert(blob_exists(&t, e1.sha256));

  ck_assert_uint_eq(sweep(&t, 1000, 2, &rc), 2); /* budget */
  ck_assert_int_eq(rc, 0);
  ck_assert_uint_eq(sweep(&t, 1000, 2, &rc), 1);
  ck_assert_uint_eq(sweep(&t, 1000, 2, &rc), 0);
  struct store_file f;
  ck_assert_int_eq(store_file_get(t.st, e1.id, &f), SBX_ENOENT);
  ck_assert_int_eq(store_file_get(t.st, e3.id, &f), SBX_ENOENT);
  ck_assert_int_eq(store_file_get(t.st, keep.id, &f), 0);
  store_file_free(&f);
  ck_assert_int_eq(store_file_get(t.st, later.id, &f), 0);
  store_file_free(&f);
  ck_assert(!blob_exists(&t, e1.sha256));
  ck_assert(!blob_exists(&t, e2.sha256));
  ck_assert(blob_exists(&t, keep.sha256)); /* still referenced by the attachment */
  ck_assert_uint_eq(store_blob_bytes(t.st), 6 + 5);
  struct store_file *v;
  size_t n;
  ck_assert_int_eq(store_run_files(t.st, r.id, &v, &n), 0);
  ck_assert_uint_eq(n, 1); /* the swept file's run_files row went with it */
  ck_assert_str_eq(v[0].id, later.id);
  store_file_list_free(v, n);
  struct swept s;
  ck_assert_int_eq(store_sweep(t.st, 1000, 0, on_swept, &s), SBX_EINVAL);

  /* retention change: expiry recomputed from creation time, for every file */
  ck_assert_int_eq(store_retention_apply(t.st, 1000, on_done, &d), 0);
  t_wait(&t);
  ck_assert_int_eq(d.rc, 0);
  ck_assert_int_eq(store_file_get(t.st, later.id, &f), 0);
  ck_assert_int_eq(f.expires_at, f.created_at + 1000);
  store_file_free(&f);
  ck_assert_int_eq(store_file_get(t.st, keep.id, &f), 0);
  ck_assert_int_eq(f.expires_at, f.created_at + 1000); /* the attachment too */
  store_file_free(&f);
  ck_assert_int_eq(store_retention_apply(t.st, 0, on_done, &d), 0);
  t_wait(&t);
  ck_assert_int_eq(store_file_get(t.st, later.id, &f), 0);
  ck_assert_int_eq(f.expires_at, 0); /* 0: kept */
  store_file_free(&f);
  ck_assert_int_eq(store_file_get(t.st, keep.id, &f), 0);
  ck_assert_int_eq(f.expires_at, 0);
  store_file_free(&f);
  store_file_free(&e1);
  store_file_free(&e2);
  store_file_free(&e3);
  store_file_free(&keep);
  store_file_free(&later);
  t_close(&t);
}
END_TEST

START_TEST(test_sweep_commit_fails) {
  T_SQLITE_ONLY("a commit failed through SQLite's VFS");
  fault_register();
  struct tctx t;
  int rc;
  t_open(&t);
  t_chat(&t, CHAT);
  struct store_file e1 = add_exp(&t, "a.png", "expired one", 100, STORE_SRC_OUTPUT);
  fault_arm(0, 1); /* the commit's fsync fails */
  size_t removed = sweep(&t, 1000, 10, &rc);
  ck_assert_int_gt(fv_fired, 0);
  fault_arm(0, 0);
  ck_assert_int_eq(rc, SBX_EIO);
  ck_assert_uint_eq(removed, 0);
  ck_assert(blob_exists(&t, e1.sha256)); /* nothing unlinked without a commit */
  ck_assert_uint_eq(sweep(&t, 1000, 10, &rc), 1);
  ck_assert_int_eq(rc, 0);
  ck_assert(!blob_exists(&t, e1.sha256));
  store_file_free(&e1);
  t_close(&t);
}
END_TEST

START_TEST(test_sweep_alloc_fail_at_n) {
  struct tctx t;
  t_open(&t);
  t_chat(&t, CHAT);
  uint64_t n;
  int total = 0;
  for (n = 1; n < 200; n++) {
    char data[32];
    snprintf(data, sizeof data, "expiring %llu", (unsigned long long)n);
    struct store_file e = add_exp(&t, "x.png", data, 10, STORE_SRC_OUTPUT);
    store_file_free(&e);
    total++;
    struct swept s = {0};
    sbx_alloc_fail_at(n, 0);
    int rc = store_sweep(t.st, 1000, 10, on_swept, &s);
    if (rc == 0)
      t_wait(&t);
    uint64_t used = sbx_alloc_count();
    sbx_alloc_fail_at(0, 0);
    if (rc != 0) {
      ck_assert_int_eq(rc, SBX_ENOMEM);
      continue;
    }
    ck_assert_msg(s.rc == 0 || s.rc == SBX_ENOMEM, "rc %d", s.rc);
    if (s.rc == 0)
      total -= (int)s.removed;
    if (s.rc == 0 && used < n)
      break;
  }
  ck_assert_uint_lt(n, 200);
  /* consistent: what is left is exactly what was not reported removed; no row without a blob */
  struct store_file *v;
  size_t cnt;
  ck_assert_int_eq(store_file_list(t.st, CHAT, 1, &v, &cnt), 0);
  ck_assert_int_eq((int)cnt, total);
  for (size_t i = 0; i < cnt; i++)
    ck_assert(blob_exists(&t, v[i].sha256));
  store_file_list_free(v, cnt);
  int rc;
  sweep(&t, 1000, 1000, &rc);
  ck_assert_int_eq(rc, 0);
  ck_assert_uint_eq(store_blob_bytes(t.st), 0);
  t_close(&t);
}
END_TEST

int main(void) {
  Suite *s = suite_create("sweep");
  TCase *tc = tcase_create("sweep");
  tcase_add_test(tc, test_sweep_steps);
  tcase_add_test(tc, test_sweep_commit_fails);
  tcase_add_test(tc, test_sweep_alloc_fail_at_n);
  return t_run_suite(s, tc);
}
