/* test_health.c -- health.c: store_ping, and store_health through real failures: the
 * fault-injecting VFS (faultvfs.h) fails a commit's fsync (an I/O error) or its WAL write with
 * SQLITE_FULL (a full disk), a staged upload's write(2) fails with ENOSPC; a write refused for its
 * input does not count; a stored write ends a run of failures. */
#include <errno.h>

#include "helpers.h"

#include "faultvfs.h"

static int put(struct tctx *t, const char *key) {
  struct done d = {0};
  ck_assert_int_eq(store_setting_put(t->st, key, "v", on_done, &d), 0);
  t_wait(t);
  ck_assert_int_eq(d.called, 1);
  return d.rc;
}

static struct store_health health(struct tctx *t) {
  struct store_health h;
  ck_assert_int_eq(store_health(t->st, &h), 0);
  return h;
}

START_TEST(test_ping) {
  struct tctx t;
  t_open(&t);
  ck_assert_int_eq(store_ping(t.st, NULL), 0);
  struct sbx_error err = {0};
  ck_assert_int_eq(store_ping(t.st, &err), 0);
  ck_assert_int_eq(err.code, 0);
  t_close(&t);
}
END_TEST

START_TEST(test_fresh_and_input_errors) {
  struct tctx t;
  t_open(&t);
  struct store_health h = health(&t);
  ck_assert_int_eq(h.ok, 1);
  ck_assert_uint_eq(h.consecutive_failures, 0);
  ck_assert_uint_eq(h.failures, 0);
  ck_assert_int_eq(h.failing_since, 0);
  ck_assert_int_eq(h.last_error.code, 0);
  ck_assert_int_eq(h.last_error_at, 0);
  ck_assert_int_eq(h.last_ok_at, 0);
  int64_t before = sbx_now_wall_ms();
  ck_assert_int_eq(put(&t, "a"), 0);
  h = health(&t);
  ck_assert_int_eq(h.ok, 1);
  ck_assert_int_ge(h.last_ok_at, before);
  /* refused for their input: no chat, a bad name; the store is healthy all the same */
  struct done d = {0};
  ck_assert_int_eq(store_chat_set_title(t.st, "nochat", "x", on_done, &d), 0);
  t_wait(&t);
  ck_assert_int_eq(d.rc, SBX_ENOENT);
  struct added a;
  t_chat(&t, "c1");
  ck_assert_int_eq(t_add(&t, "c1", "\xe2\x80\x8b", STORE_SRC_ATTACHMENT, "x", &a), SBX_ENAME);
  h = health(&t);
  ck_assert_int_eq(h.ok, 1);
  ck_assert_uint_eq(h.failures, 0);
  ck_assert_int_eq(h.last_error.code, 0);
  ck_assert_int_eq(store_health(NULL, &h), SBX_EINVAL);
  ck_assert_int_eq(store_health(t.st, NULL), SBX_EINVAL);
  t_close(&t);
}
END_TEST

/* Writes whose commit fails (the VFS), one after the other, then one that is stored. */
static void failing_then_ok(int sync_fault, int want_code, const char *want_detail) {
  struct tctx t;
  t_open(&t);
  ck_assert_int_eq(put(&t, "ok0"), 0);
  int64_t t0 = sbx_now_wall_ms();
  for (int i = 1; i <= 3; i++) {
    if (sync_fault)
      fault_arm(0, 1); /* the commit's fsync of the WAL */
    else
      fault_arm(1, 0); /* the commit's first write to the WAL */
    char key[16];
    snprintf(key, sizeof key, "bad%d", i);
    int rc = put(&t, key);
    ck_assert_int_ge(fv_fired, 1);
    fault_arm(0, 0);
    ck_assert_int_eq(rc, want_code);
    struct store_health h = health(&t);
    ck_assert_int_eq(h.ok, 0);
    ck_assert_uint_eq(h.consecutive_failures, (uint64_t)i);
    ck_assert_uint_eq(h.failures, (uint64_t)i);
    ck_assert_int_eq(h.last_error.code, want_code);
    ck_assert_msg(strstr(h.last_error.msg, want_detail) != NULL, "detail: %s", h.last_error.msg);
    ck_assert_int_ge(h.failing_since, t0); /* since the first of the run, not the latest */
    ck_assert_int_ge(h.last_error_at, h.failing_since);
    ck_assert_int_le(h.last_ok_at, h.failing_since);
    if (i == 1)
      t0 = h.failing_since;
    else
      ck_assert_int_eq(h.failing_since, t0);
  }
  /* the fault is gone: the next write is stored, the run of failures ends, the last error stays */
  ck_assert_int_eq(put(&t, "ok1"), 0);
  struct store_health h = health(&t);
  ck_assert_int_eq(h.ok, 1);
  ck_assert_uint_eq(h.consecutive_failures, 0);
  ck_assert_int_eq(h.failing_since, 0);
  ck_assert_uint_eq(h.failures, 3);
  ck_assert_int_eq(h.last_error.code, want_code);
  ck_assert_int_ge(h.last_ok_at, h.last_error_at);
  /* and nothing of the failed writes was stored */
  char *v = NULL;
  ck_assert_int_eq(store_setting_get(t.st, "bad1", &v), SBX_ENOENT);
  ck_assert_int_eq(store_setting_get(t.st, "ok1", &v), 0);
  sbx_free(v);
  t_close(&t);
}

START_TEST(test_io_error) {
  T_SQLITE_ONLY("commit failures injected through SQLite's VFS (test_pg.c fails PostgreSQL's by "
                "cutting its connection)");
  failing_then_ok(1, SBX_EIO, "disk I/O error");
}
END_TEST

START_TEST(test_disk_full) {
  T_SQLITE_ONLY("commit failures injected through SQLite's VFS (test_pg.c fails PostgreSQL's by "
                "cutting its connection)");
  fv_write_error = SQLITE_FULL;
  failing_then_ok(0, SBX_EFULL, "full");
  fv_write_error = SQLITE_IOERR_WRITE;
}
END_TEST

static int enospc_calls;
static ssize_t write_enospc(int fd, const void *p, size_t n) {
  (void)fd, (void)p, (void)n;
  enospc_calls++;
  errno = ENOSPC;
  return -1;
}

/* A streamed upload filling the disk: its write fails on the loop thread, before any commit. */
START_TEST(test_stage_disk_full) {
  struct tctx t;
  t_open(&t);
  struct store_blob_stage *sg = NULL;
  struct sbx_error err = {0};
  ck_assert_int_eq(store_blob_stage_begin(t.st, &sg, &err), 0);
  st__stage_write_fn = write_enospc;
  int rc = store_blob_stage_write(sg, "abc", 3, NULL); /* no error struct: health still hears */
  st__stage_write_fn = write;
  ck_assert_int_eq(rc, SBX_EFULL);
  ck_assert_int_eq(enospc_calls, 1);
  store_blob_stage_abort(sg);
  struct store_health h = health(&t);
  ck_assert_int_eq(h.ok, 0);
  ck_assert_uint_eq(h.consecutive_failures, 1);
  ck_assert_int_eq(h.last_error.code, SBX_EFULL);
  ck_assert_ptr_nonnull(strstr(h.last_error.msg, "write "));
  ck_assert_ptr_nonnull(strstr(h.last_error.msg, "No space left on device"));
  ck_assert_int_gt(h.failing_since, 0);
  ck_assert_int_eq(put(&t, "after"), 0);
  h = health(&t);
  ck_assert_int_eq(h.ok, 1);
  ck_assert_uint_eq(h.failures, 1);
  t_close(&t);
}
END_TEST

int main(void) {
  fault_register();
  Suite *s = suite_create("health");
  TCase *tc = tcase_create("health");
  tcase_add_test(tc, test_ping);
  tcase_add_test(tc, test_fresh_and_input_errors);
  tcase_add_test(tc, test_io_error);
  tcase_add_test(tc, test_disk_full);
  tcase_add_test(tc, test_stage_disk_full);
  return t_run_suite(s, tc);
}
