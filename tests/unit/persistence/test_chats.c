/* test_chats.c -- chats.c: chats (create, duplicate id, title, get, list newest first with a
 * limit) and turns (put = insert or update, unknown chat, get). */
#include "helpers.h"

START_TEST(test_chats) {
  struct tctx t;
  t_open(&t);
  struct store_chat c = {0};
  struct done d = {0};
  for (int i = 0; i < 3; i++) {
    snprintf(c.id, sizeof c.id, "c%031d", i);
    store_sha256_hex("tok", 3, c.token_hash);
    c.title = i == 1 ? "second" : NULL;
    c.created_at = 1000 + i;
    ck_assert_int_eq(store_chat_create(t.st, &c, on_done, &d), 0);
  }
  t_wait(&t);
  ck_assert_int_eq(d.called, 3);
  ck_assert_int_eq(d.rc, 0);
  /* same id again: a conflict, reported through the callback */
  memset(&d, 0, sizeof d);
  ck_assert_int_eq(store_chat_create(t.st, &c, on_done, &d), 0);
  t_wait(&t);
  ck_assert_int_eq(d.rc, SBX_ECONFLICT);
  ck_assert_msg(strstr(d.msg, t_pg() ? "unique constraint" : "UNIQUE") != NULL, "%s", d.msg);
  /* bad input refused before queueing */
  struct store_chat bad = {0};
  ck_assert_int_eq(store_chat_create(t.st, &bad, on_done, &d), SBX_EINVAL);
  struct store_chat g;
  ck_assert_int_eq(store_chat_get(t.st, "c0000000000000000000000000000001", &g), 0);
  ck_assert_str_eq(g.title, "second");
  ck_assert_int_eq(g.created_at, 1001);
  store_sha256_hex("tok", 3, c.token_hash);
  ck_assert_str_eq(g.token_hash, c.token_hash);
  store_chat_free(&g);
  ck_assert_int_eq(store_chat_get(t.st, "nope", &g), SBX_ENOENT);
  memset(&d, 0, sizeof d);
  ck_assert_int_eq(
      store_chat_set_title(t.st, "c0000000000000000000000000000000", "renamed", on_done, &d), 0);
  t_wait(&t);
  ck_assert_int_eq(d.rc, 0);
  ck_assert_int_eq(store_chat_get(t.st, "c0000000000000000000000000000000", &g), 0);
  ck_assert_str_eq(g.title, "renamed");
  store_chat_free(&g);
  memset(&d, 0, sizeof d);
  ck_assert_int_eq(store_chat_set_title(t.st, "nope", "x", on_done, &d), 0);
  t_wait(&t);
  ck_assert_int_eq(d.rc, SBX_ENOENT);
  struct store_chat *v;
  size_t n;
  ck_assert_int_eq(store_chat_list(t.st, 2, &v, &n), 0);
  ck_assert_uint_eq(n, 2);
  ck_assert_str_eq(v[0].id, "c0000000000000000000000000000002"); /* newest first */
  ck_assert_str_eq(v[1].id, "c0000000000000000000000000000001");
  store_chat_list_free(v, n);
  ck_assert_int_eq(store_chat_list(t.st, 100, &v, &n), 0);
  ck_assert_uint_eq(n, 3);
  store_chat_list_free(v, n);
  ck_assert_int_eq(store_chat_list(t.st, 0, &v, &n), 0);
  ck_assert_uint_eq(n, 0);
  t_close(&t);
}
END_TEST

START_TEST(test_turns) {
  struct tctx t;
  t_open(&t);
  t_chat(&t, "c0000000000000000000000000000001");
  struct store_turn tu = {0};
  struct done d = {0};
  snprintf(tu.id, sizeof tu.id, "t0000000000000000000000000000001");
  snprintf(tu.chat_id, sizeof tu.chat_id, "c0000000000000000000000000000001");
  tu.state = STORE_TURN_OPEN;
  tu.created_at = 5;
  ck_assert_int_eq(store_turn_put(t.st, &tu, on_done, &d), 0);
  t_wait(&t);
  ck_assert_int_eq(d.rc, 0);
  struct store_turn g;
  ck_assert_int_eq(store_turn_get(t.st, tu.id, &g), 0);
  ck_assert_int_eq(g.state, STORE_TURN_OPEN);
  ck_assert_ptr_null(g.answer);
  store_turn_free(&g);
  tu.state = STORE_TURN_FINISHED;
  tu.answer = "```python\nprint(1)\n```";
  tu.finished_at = 9;
  ck_assert_int_eq(store_turn_put(t.st, &tu, on_done, &d), 0);
  t_wait(&t);
  ck_assert_int_eq(d.rc, 0);
  ck_assert_int_eq(store_turn_get(t.st, tu.id, &g), 0);
  ck_assert_int_eq(g.state, STORE_TURN_FINISHED);
  ck_assert_str_eq(g.answer, tu.answer);
  ck_assert_int_eq(g.created_at, 5);
  ck_assert_int_eq(g.finished_at, 9);
  store_turn_free(&g);
  ck_assert_int_eq(store_turn_get(t.st, "nope", &g), SBX_ENOENT);
  snprintf(tu.id, sizeof tu.id, "t0000000000000000000000000000002");
  snprintf(tu.chat_id, sizeof tu.chat_id, "c-none");
  ck_assert_int_eq(store_turn_put(t.st, &tu, on_done, &d), 0);
  t_wait(&t);
  ck_assert_int_eq(d.rc, SBX_ENOENT);
  struct store_turn empty = {0};
  ck_assert_int_eq(store_turn_put(t.st, &empty, on_done, &d), SBX_EINVAL);
  t_close(&t);
}
END_TEST

int main(void) {
  Suite *s = suite_create("chats");
  TCase *tc = tcase_create("chats");
  tcase_add_test(tc, test_chats);
  tcase_add_test(tc, test_turns);
  return t_run_suite(s, tc);
}
