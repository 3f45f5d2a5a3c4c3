/* test_settings.c -- settings.c: put, overwrite, get, unset, survive a reopen, bad arguments. */
#include "helpers.h"

START_TEST(test_settings) {
  struct tctx t;
  struct done d = {0};
  char *v = (char *)1;
  t_open(&t);
  ck_assert_int_eq(store_setting_get(t.st, "ARTIFACT_RETENTION_DAYS", &v), SBX_ENOENT);
  ck_assert_ptr_null(v);
  ck_assert_int_eq(store_setting_put(t.st, "ARTIFACT_RETENTION_DAYS", "30", on_done, &d), 0);
  ck_assert_int_eq(store_setting_put(t.st, "ARTIFACT_RETENTION_DAYS", "7", on_done, &d), 0);
  ck_assert_int_eq(store_setting_put(t.st, "CHAT_CODE_EXECUTION", "browser", on_done, &d), 0);
  t_wait(&t);
  ck_assert_int_eq(d.called, 3);
  ck_assert_int_eq(d.rc, 0);
  t_close_keep(&t);
  t_reopen(&t);
  ck_assert_int_eq(store_setting_get(t.st, "ARTIFACT_RETENTION_DAYS", &v), 0);
  ck_assert_str_eq(v, "7");
  sbx_free(v);
  ck_assert_int_eq(store_setting_get(t.st, "CHAT_CODE_EXECUTION", &v), 0);
  ck_assert_str_eq(v, "browser");
  sbx_free(v);
  ck_assert_int_eq(store_setting_put(t.st, "", "x", on_done, &d), SBX_EINVAL);
  ck_assert_int_eq(store_setting_put(t.st, "k", NULL, on_done, &d), SBX_EINVAL);
  t_close(&t);
}
END_TEST

int main(void) {
  Suite *s = suite_create("settings");
  TCase *tc = tcase_create("settings");
  tcase_add_test(tc, test_settings);
  return t_run_suite(s, tc);
}
