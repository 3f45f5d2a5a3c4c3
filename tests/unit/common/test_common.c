/* test_common.c -- the error table, the bounded buffer, fail-at-N allocation, list, hex, ct-compare. */
#include "common.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

START_TEST(test_error_table) {
  ck_assert_str_eq(sbx_strerror(SBX_ENOMEM), "out of memory");
  ck_assert_str_eq(sbx_errname(SBX_ETOOBIG), "ETOOBIG");
  ck_assert_str_eq(sbx_strerror(-9999), "unknown error");
  struct sbx_error e;
  ck_assert_int_eq(sbx_error_set(&e, SBX_EIO, "disk %d", 3), SBX_EIO);
  ck_assert_str_eq(e.msg, "disk 3");
  ck_assert_int_eq(sbx_error_set(NULL, SBX_EIO, "x"), SBX_EIO);
}
END_TEST

START_TEST(test_buf_limit) {
  struct sbx_buf b;
  sbx_buf_init(&b, 8);
  ck_assert_int_eq(sbx_buf_append(&b, "12345", 5), 0);
  ck_assert_int_eq(sbx_buf_append(&b, "6789", 4), SBX_ETOOBIG);
  ck_assert_uint_eq(b.len, 5); /* unchanged on failure */
  ck_assert_int_eq(sbx_buf_appendf(&b, "%d", 678), 0);
  ck_assert_str_eq(b.data, "12345678");
  ck_assert_int_eq(sbx_buf_appendf(&b, "x"), SBX_ETOOBIG);
  size_t n;
  char *s = sbx_buf_steal(&b, &n);
  ck_assert_uint_eq(n, 8);
  ck_assert_ptr_null(b.data);
  sbx_free(s);
  sbx_buf_free(&b);
}
END_TEST

START_TEST(test_fail_at_n) {
  sbx_alloc_fail_at(2, 0);
  void *a = sbx_malloc(10);
  void *b = sbx_malloc(10);
  void *c = sbx_malloc(10);
  ck_assert_ptr_nonnull(a);
  ck_assert_ptr_null(b);
  ck_assert_ptr_nonnull(c);
  sbx_free(a);
  sbx_free(c);
  sbx_alloc_fail_at(1, 1);
  ck_assert_ptr_null(sbx_strdup("x"));
  ck_assert_ptr_null(sbx_malloc(1));
  sbx_alloc_fail_at(0, 0);
  struct sbx_buf buf;
  sbx_buf_init(&buf, 100);
  sbx_alloc_fail_at(1, 0);
  ck_assert_int_eq(sbx_buf_append(&buf, "abc", 3), SBX_ENOMEM);
  ck_assert_uint_eq(buf.len, 0);
  sbx_alloc_fail_at(0, 0);
  sbx_buf_free(&buf);
}
END_TEST

struct item {
  int v;
  struct sbx_list link;
};

START_TEST(test_list) {
  struct sbx_list head, *it, *tmp;
  struct item items[3] = {{1, {0}}, {2, {0}}, {3, {0}}};
  SBX_LIST_INIT(&head);
  ck_assert(SBX_LIST_EMPTY(&head));
  for (int i = 0; i < 3; i++)
    sbx_list_insert_tail(&head, &items[i].link);
  int sum = 0, order = 0;
  SBX_LIST_FOREACH(it, &head) {
    struct item *x = SBX_CONTAINER_OF(it, struct item, link);
    order = order * 10 + x->v;
    sum += x->v;
  }
  ck_assert_int_eq(order, 123);
  SBX_LIST_FOREACH_SAFE(it, tmp, &head) sbx_list_remove(it);
  ck_assert(SBX_LIST_EMPTY(&head));
  ck_assert_int_eq(sum, 6);
}
END_TEST

START_TEST(test_hex_random) {
  unsigned char in[3] = {0x00, 0xab, 0xff};
  char out[7];
  sbx_hex(in, 3, out);
  ck_assert_str_eq(out, "00abff");
  unsigned char r1[16], r2[16];
  ck_assert_int_eq(sbx_random(r1, sizeof r1), 0);
  ck_assert_int_eq(sbx_random(r2, sizeof r2), 0);
  ck_assert_int_ne(memcmp(r1, r2, 16), 0);
}
END_TEST

static uint64_t fake_ms(void *ud) { return *(uint64_t *)ud; }

START_TEST(test_fake_clock) {
  uint64_t t = 1234;
  sbx_clock_set_fake(fake_ms, fake_ms, &t);
  ck_assert_uint_eq(sbx_now_mono_ms(), 1234);
  t += 10;
  ck_assert_int_eq(sbx_now_wall_ms(), 1244);
  sbx_clock_set_fake(NULL, NULL, NULL);
  ck_assert_uint_gt(sbx_now_mono_ms(), 0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("common");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_error_table);
  tcase_add_test(tc, test_buf_limit);
  tcase_add_test(tc, test_fail_at_n);
  tcase_add_test(tc, test_list);
  tcase_add_test(tc, test_hex_random);
  tcase_add_test(tc, test_fake_clock);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
