/* test_events.c -- events.c: append, last seq, since (order, limit, after), a seq used twice,
 * an unknown chat, and chats kept apart. */
#include "helpers.h"

#define CHAT "c0000000000000000000000000000001"
#define CHAT2 "c0000000000000000000000000000002"

START_TEST(test_events) {
  struct tctx t;
  struct done d = {0};
  t_open(&t);
  t_chat(&t, CHAT);
  t_chat(&t, CHAT2);
  int64_t last = -1;
  ck_assert_int_eq(store_event_last_seq(t.st, CHAT, &last), 0);
  ck_assert_int_eq(last, 0);
  for (int i = 1; i <= 10; i++) {
    char payload[64];
    snprintf(payload, sizeof payload, "{\"run_id\":\"r%d\"}", i);
    ck_assert_int_eq(store_event_append(t.st, CHAT, i, i % 2 ? "run" : "files", payload, on_done, &d),
                     0);
  }
  ck_assert_int_eq(store_event_append(t.st, CHAT2, 1, "cancel", NULL, on_done, &d), 0);
  t_wait(&t);
  ck_assert_int_eq(d.called, 11);
  ck_assert_int_eq(d.rc, 0);
  ck_assert_int_eq(store_event_last_seq(t.st, CHAT, &last), 0);
  ck_assert_int_eq(last, 10);
  struct store_event *v;
  size_t n;
  ck_assert_int_eq(store_event_since(t.st, CHAT, 4, 3, &v, &n), 0);
  ck_assert_uint_eq(n, 3);
  ck_assert_int_eq(v[0].seq, 5);
  ck_assert_str_eq(v[0].type, "run");
  ck_assert_str_eq(v[0].payload, "{\"run_id\":\"r5\"}");
  ck_assert_int_eq(v[2].seq, 7);
  store_event_list_free(v, n);
  ck_assert_int_eq(store_event_since(t.st, CHAT, 10, 100, &v, &n), 0);
  ck_assert_uint_eq(n, 0);
  store_event_list_free(v, n);
  ck_assert_int_eq(store_event_since(t.st, CHAT2, 0, 100, &v, &n), 0);
  ck_assert_uint_eq(n, 1);
  ck_assert_str_eq(v[0].payload, "{}");
  store_event_list_free(v, n);
  /* the same seq twice; an unknown chat; bad arguments */
  memset(&d, 0, sizeof d);
  ck_assert_int_eq(store_event_append(t.st, CHAT, 10, "run", "{}", on_done, &d), 0);
  t_wait(&t);
  ck_assert_int_eq(d.rc, SBX_ECONFLICT);
  ck_assert_int_eq(store_event_append(t.st, "c-none", 1, "run", "{}", on_done, &d), 0);
  t_wait(&t);
  ck_assert_int_eq(d.rc, SBX_ENOENT);
  ck_assert_int_eq(store_event_append(t.st, CHAT, 0, "run", "{}", on_done, &d), SBX_EINVAL);
  ck_assert_int_eq(store_event_append(t.st, CHAT, 11, NULL, "{}", on_done, &d), SBX_EINVAL);
  t_close(&t);
}
END_TEST

int main(void) {
  Suite *s = suite_create("events");
  TCase *tc = tcase_create("events");
  tcase_add_test(tc, test_events);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_set_fork_status(sr, CK_FORK);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
