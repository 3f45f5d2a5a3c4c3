/* test_map.c -- the string-keyed hash map (map.c): put/get/replace/delete, growth past many
 * entries, tombstones reused, iteration visits each live entry once, allocation failure. */
#include "internal.h"

#include <check.h>
#include <stdio.h>
#include <string.h>

START_TEST(test_basic) {
  struct orch_map m;
  orch__map_init(&m);
  ck_assert_ptr_null(orch__map_get(&m, "x"));
  orch__map_del(&m, "x"); /* empty: no-op */
  int a = 1, b = 2;
  ck_assert_int_eq(orch__map_put(&m, "a", &a), 0);
  ck_assert_int_eq(orch__map_put(&m, "b", &b), 0);
  ck_assert_ptr_eq(orch__map_get(&m, "a"), &a);
  ck_assert_int_eq(orch__map_put(&m, "a", &b), 0); /* replace */
  ck_assert_ptr_eq(orch__map_get(&m, "a"), &b);
  ck_assert_uint_eq(m.len, 2);
  orch__map_del(&m, "a");
  ck_assert_ptr_null(orch__map_get(&m, "a"));
  ck_assert_ptr_eq(orch__map_get(&m, "b"), &b);
  ck_assert_uint_eq(m.len, 1);
  orch__map_free(&m);
}
END_TEST

START_TEST(test_many) {
  enum { N = 5000 };
  static char keys[N][16];
  struct orch_map m;
  orch__map_init(&m);
  for (int i = 0; i < N; i++) {
    snprintf(keys[i], sizeof(keys[i]), "k%d", i);
    ck_assert_int_eq(orch__map_put(&m, keys[i], keys[i]), 0);
  }
  for (int i = 0; i < N; i += 2)
    orch__map_del(&m, keys[i]);
  for (int i = 0; i < N; i++)
    ck_assert_ptr_eq(orch__map_get(&m, keys[i]), i % 2 ? keys[i] : NULL);
  /* churn: delete and re-add many times without unbounded growth */
  size_t cap = m.cap;
  for (int r = 0; r < 20; r++)
    for (int i = 0; i < N; i += 2) {
      ck_assert_int_eq(orch__map_put(&m, keys[i], keys[i]), 0);
      orch__map_del(&m, keys[i]);
    }
  ck_assert_uint_le(m.cap, cap * 2);
  size_t it = 0, seen = 0;
  const char *k;
  void *v;
  while (orch__map_next(&m, &it, &k, &v)) {
    ck_assert_ptr_eq(k, v);
    seen++;
  }
  ck_assert_uint_eq(seen, N / 2);
  orch__map_free(&m);
}
END_TEST

START_TEST(test_oom) {
  struct orch_map m;
  orch__map_init(&m);
  sbx_alloc_fail_at(1, 0);
  ck_assert_int_eq(orch__map_put(&m, "a", &m), SBX_ENOMEM);
  sbx_alloc_fail_at(0, 0);
  ck_assert_ptr_null(orch__map_get(&m, "a"));
  ck_assert_int_eq(orch__map_put(&m, "a", &m), 0);
  orch__map_free(&m);
}
END_TEST

int main(void) {
  Suite *s = suite_create("map");
  TCase *tc = tcase_create("map");
  tcase_add_test(tc, test_basic);
  tcase_add_test(tc, test_many);
  tcase_add_test(tc, test_oom);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
