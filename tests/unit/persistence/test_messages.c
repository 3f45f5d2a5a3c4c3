/* test_messages.c -- messages.c: a message put (insert, then updates of its state, text, error,
 * runs and calls; its chat, turn, role and creation time kept; an update without calls keeps
 * them), the chat's messages in creation order with a limit, its pages (the newest, before and
 * after a cursor, the far side told, a cursor of no message of the chat), an unknown chat, bad
 * input, and the list's query plan. */
#include "helpers.h"

static void put(struct tctx *t, const struct store_message *m, int want) {
  struct done d = {0};
  ck_assert_int_eq(store_message_put(t->st, m, on_done, &d), 0);
  t_wait(t);
  ck_assert_int_eq(d.called, 1);
  ck_assert_msg(d.rc == want, "message put: %d %s", d.rc, d.msg);
}

START_TEST(test_put_update_list) {
  struct tctx t;
  t_open(&t);
  t_chat(&t, "c1");
  t_chat(&t, "c2");
  /* ids not in creation order: the list follows creation, not ids */
  struct store_message u = {.id = "m9",
                            .chat_id = "c1",
                            .turn_id = "t1",
                            .role = "user",
                            .state = "done",
                            .text = "hello",
                            .created_at = 10,
                            .updated_at = 10};
  struct store_message a = {.id = "m1",
                            .chat_id = "c1",
                            .turn_id = "t1",
                            .role = "assistant",
                            .state = "streaming",
                            .text = "",
                            .created_at = 11,
                            .updated_at = 11};
  struct store_message o = {.id = "m5",
                            .chat_id = "c2",
                            .turn_id = "t2",
                            .role = "user",
                            .state = "done",
                            .text = "other chat",
                            .created_at = 12};
  put(&t, &u, 0);
  put(&t, &a, 0);
  put(&t, &o, 0);
  /* the answer ends: state, text, error, runs and calls change; role and created_at do not */
  snprintf(a.state, sizeof a.state, "error");
  snprintf(a.role, sizeof a.role, "user");
  a.text = "partial";
  a.error_json = "{\"code\":\"model_error\"}";
  a.run_ids_json = "[\"r1\",\"r2\"]";
  a.calls_json = "[{\"id\":\"call_1\"}]";
  a.parts_json = "[{\"at\":3,\"run_id\":\"r1\"}]";
  a.created_at = 99;
  a.updated_at = 20;
  put(&t, &a, 0);
  struct store_message *v = NULL;
  size_t n = 0;
  ck_assert_int_eq(store_message_list(t.st, "c1", 100, &v, &n), 0);
  ck_assert_uint_eq(n, 2);
  ck_assert_str_eq(v[0].id, "m9");
  ck_assert_str_eq(v[0].role, "user");
  ck_assert_str_eq(v[0].text, "hello");
  ck_assert_str_eq(v[0].run_ids_json, "[]"); /* none given: an empty list */
  ck_assert_ptr_null(v[0].error_json);
  ck_assert_ptr_null(v[0].calls_json);
  ck_assert_str_eq(v[1].id, "m1");
  ck_assert_str_eq(v[1].role, "assistant");
  ck_assert_str_eq(v[1].state, "error");
  ck_assert_str_eq(v[1].text, "partial");
  ck_assert_str_eq(v[1].error_json, "{\"code\":\"model_error\"}");
  ck_assert_str_eq(v[1].run_ids_json, "[\"r1\",\"r2\"]");
  ck_assert_str_eq(v[1].calls_json, "[{\"id\":\"call_1\"}]");
  ck_assert_str_eq(v[1].parts_json, "[{\"at\":3,\"run_id\":\"r1\"}]");
  ck_assert_ptr_null(v[0].parts_json);
  ck_assert_str_eq(v[1].turn_id, "t1");
  ck_assert_int_eq(v[1].created_at, 11);
  ck_assert_int_eq(v[1].updated_at, 20);
  store_message_list_free(v, n);
  /* an update without calls: the rest changes, the calls stay as stored */
  a.text = "partial and more";
  a.calls_json = NULL;
  a.parts_json = "[{\"at\":3,\"run_id\":\"r1\"},{\"at\":7,\"run_id\":\"r2\"}]";
  a.updated_at = 21;
  put(&t, &a, 0);
  ck_assert_int_eq(store_message_list(t.st, "c1", 100, &v, &n), 0);
  ck_assert_str_eq(v[1].text, "partial and more");
  ck_assert_str_eq(v[1].parts_json, "[{\"at\":3,\"run_id\":\"r1\"},{\"at\":7,\"run_id\":\"r2\"}]");
  ck_assert_str_eq(v[1].calls_json, "[{\"id\":\"call_1\"}]");
  ck_assert_int_eq(v[1].updated_at, 21);
  store_message_list_free(v, n);
  ck_assert_int_eq(store_message_list(t.st, "c1", 1, &v, &n), 0);
  ck_assert_uint_eq(n, 1);
  ck_assert_str_eq(v[0].id, "m9");
  store_message_list_free(v, n);
  ck_assert_int_eq(store_message_list(t.st, "nope", 10, &v, &n), 0);
  ck_assert_uint_eq(n, 0);
  store_message_list_free(v, n);
  t_close(&t);
}
END_TEST

/* ids of a page, joined with spaces */
static void page_ids(struct store_message *v, size_t n, char *out, size_t cap) {
  out[0] = 0;
  for (size_t i = 0; i < n; i++)
    snprintf(out + strlen(out), cap - strlen(out), "%s%s", i ? " " : "", v[i].id);
}

START_TEST(test_page) {
  struct tctx t;
  t_open(&t);
  t_chat(&t, "c1");
  t_chat(&t, "c2");
  /* seven messages of c1 (ids not in creation order), one of c2 between them */
  const char *ids[] = {"m7", "m2", "m5", "m1", "m6", "m3", "m4"};
  for (size_t i = 0; i < SBX_ARRAY_SIZE(ids); i++) {
    struct store_message m = {.chat_id = "c1",
                              .turn_id = "t1",
                              .role = "user",
                              .state = "done",
                              .text = "x",
                              .created_at = 10, /* equal times: creation order still holds */
                              .updated_at = 10};
    snprintf(m.id, sizeof m.id, "%s", ids[i]);
    put(&t, &m, 0);
    if (i == 3) {
      struct store_message o = {.id = "o1",
                                .chat_id = "c2",
                                .turn_id = "t2",
                                .role = "user",
                                .state = "done",
                                .text = "y"};
      put(&t, &o, 0);
    }
  }
  static const struct {
    const char *before, *after;
    size_t limit;
    const char *want;
    int more;
  } cases[] = {
      {NULL, NULL, 3, "m6 m3 m4", 1},             /* the newest page */
      {NULL, NULL, 7, "m7 m2 m5 m1 m6 m3 m4", 0}, /* all of it: nothing older */
      {NULL, NULL, 100, "m7 m2 m5 m1 m6 m3 m4", 0},
      {"m6", NULL, 3, "m2 m5 m1", 1},
      {"m2", NULL, 3, "m7", 0},
      {"m7", NULL, 3, "", 0}, /* before the first: empty */
      {NULL, "m7", 2, "m2 m5", 1},
      {NULL, "m1", 3, "m6 m3 m4", 0},
      {NULL, "m4", 3, "", 0}, /* after the last: empty */
  };
  for (size_t i = 0; i < SBX_ARRAY_SIZE(cases); i++) {
    struct store_message *v = NULL;
    size_t n = 0;
    int more = -1;
    ck_assert_int_eq(store_message_page(t.st, "c1", cases[i].before, cases[i].after, cases[i].limit,
                                        i % 2, &v, &n, &more),
                     0);
    char got[256];
    page_ids(v, n, got, sizeof got);
    ck_assert_msg(strcmp(got, cases[i].want) == 0, "case %zu: \"%s\"", i, got);
    ck_assert_int_eq(more, cases[i].more);
    store_message_list_free(v, n);
  }
  struct store_message *v = NULL;
  size_t n = 0;
  int more;
  /* the calls are read only when asked for */
  struct store_message m4 = {.id = "m4",
                             .chat_id = "c1",
                             .turn_id = "t1",
                             .role = "user",
                             .state = "done",
                             .text = "x",
                             .calls_json = "[1]"};
  put(&t, &m4, 0);
  ck_assert_int_eq(store_message_page(t.st, "c1", NULL, NULL, 1, 0, &v, &n, &more), 0);
  ck_assert_uint_eq(n, 1);
  ck_assert_ptr_null(v[0].calls_json);
  store_message_list_free(v, n);
  ck_assert_int_eq(store_message_page(t.st, "c1", NULL, NULL, 1, 1, &v, &n, &more), 0);
  ck_assert_str_eq(v[0].calls_json, "[1]");
  store_message_list_free(v, n);
  /* a conversation turn: one with an assistant message */
  ck_assert_int_eq(store_message_turn_answered(t.st, "c1", "t1"), 0);
  struct store_message ans = {.id = "a1",
                              .chat_id = "c1",
                              .turn_id = "t1",
                              .role = "assistant",
                              .state = "streaming",
                              .text = ""};
  put(&t, &ans, 0);
  ck_assert_int_eq(store_message_turn_answered(t.st, "c1", "t1"), 1);
  ck_assert_int_eq(store_message_turn_answered(t.st, "c2", "t1"), 0);
  ck_assert_int_eq(store_message_turn_answered(t.st, "c1", "t9"), 0);
  ck_assert_int_eq(store_message_turn_answered(t.st, "c1", ""), 0);
  /* a cursor of another chat, or of none: SBX_ENOENT */
  ck_assert_int_eq(store_message_page(t.st, "c1", "o1", NULL, 3, 0, &v, &n, &more), SBX_ENOENT);
  ck_assert_int_eq(store_message_page(t.st, "c1", NULL, "zz", 3, 0, &v, &n, &more), SBX_ENOENT);
  ck_assert_int_eq(store_message_page(t.st, "c1", "m1", "m2", 3, 0, &v, &n, &more), SBX_EINVAL);
  ck_assert_int_eq(store_message_page(t.st, "c1", NULL, NULL, 0, 0, &v, &n, &more), SBX_EINVAL);
  ck_assert_int_eq(
      store_message_page(t.st, "c1", NULL, NULL, STORE_MESSAGE_PAGE_MAX + 1, 0, &v, &n, &more),
      SBX_EINVAL);
  ck_assert_int_eq(store_message_page(t.st, "nope", NULL, NULL, 3, 0, &v, &n, &more), 0);
  ck_assert_uint_eq(n, 0);
  t_close(&t);
}
END_TEST

START_TEST(test_refusals) {
  struct tctx t;
  t_open(&t);
  struct store_message m = {
      .id = "m1", .chat_id = "nochat", .role = "user", .state = "done", .text = "x"};
  put(&t, &m, SBX_ENOENT);
  struct store_message bad = {.id = "m2", .chat_id = "c1", .role = "user"}; /* no state */
  struct done d = {0};
  ck_assert_int_eq(store_message_put(t.st, &bad, on_done, &d), SBX_EINVAL);
  ck_assert_int_eq(store_message_put(t.st, NULL, on_done, &d), SBX_EINVAL);
  struct store_message *v = NULL;
  size_t n = 0;
  ck_assert_int_eq(store_message_list(t.st, "c1", 0, &v, &n), SBX_EINVAL);
  ck_assert_int_eq(store_message_list(t.st, "c1", 100001, &v, &n), SBX_EINVAL);
  ck_assert_int_eq(d.called, 0);
  t_close(&t);
}
END_TEST

START_TEST(test_list_plan) {
  struct tctx t;
  t_open(&t);
  if (t_sqlite_part(__func__, "SQLite's query plan (test_pg.c checks PostgreSQL's)")) {
    char plan[1024];
    plan_of(t.st->r.lite, sqlite3_sql(t.st->r.q[ST_MESSAGE_LIST].lite), plan, sizeof plan);
    ck_assert_msg(strstr(plan, "messages_chat") && !strstr(plan, "TEMP B-TREE"), "%s", plan);
  }
  t_close(&t);
}
END_TEST

START_TEST(test_interrupt) {
  struct tctx t;
  t_open(&t);
  t_chat(&t, "c1");
  struct store_turn tu = {.id = "t1", .chat_id = "c1", .state = STORE_TURN_OPEN, .created_at = 1};
  struct done d = {0};
  ck_assert_int_eq(store_turn_put(t.st, &tu, on_done, &d), 0);
  t_wait(&t);
  struct store_message a = {.id = "m1",
                            .chat_id = "c1",
                            .turn_id = "t1",
                            .role = "assistant",
                            .state = "streaming",
                            .text = "half an ans",
                            .created_at = 2};
  struct store_message b = {.id = "m2",
                            .chat_id = "c1",
                            .turn_id = "t0",
                            .role = "assistant",
                            .state = "done",
                            .text = "whole",
                            .created_at = 1};
  put(&t, &a, 0);
  put(&t, &b, 0);
  memset(&d, 0, sizeof d);
  ck_assert_int_eq(store_message_interrupt(t.st, "{\"code\":\"interrupted\"}", 50, on_done, &d), 0);
  t_wait(&t);
  ck_assert_int_eq(d.rc, 0);
  struct store_message *v = NULL;
  size_t n = 0;
  ck_assert_int_eq(store_message_list(t.st, "c1", 10, &v, &n), 0);
  ck_assert_uint_eq(n, 2);
  ck_assert_str_eq(v[0].state, "error");
  ck_assert_str_eq(v[0].error_json, "{\"code\":\"interrupted\"}");
  ck_assert_int_eq(v[0].updated_at, 50);
  ck_assert_str_eq(v[1].state, "done"); /* an ended one is left as it was */
  ck_assert_ptr_null(v[1].error_json);
  store_message_list_free(v, n);
  struct store_turn g;
  ck_assert_int_eq(store_turn_get(t.st, "t1", &g), 0);
  ck_assert_int_eq(g.state, STORE_TURN_FINISHED);
  ck_assert_str_eq(g.answer, "half an ans");
  ck_assert_int_eq(g.finished_at, 50);
  store_turn_free(&g);
  if (t_sqlite_part(__func__, "SQLite's query plan (test_pg.c checks PostgreSQL's)")) {
    char plan[1024];
    plan_of(t.st->w.lite, sqlite3_sql(t.st->w.q[ST_MESSAGE_INTERRUPT].lite), plan, sizeof plan);
    ck_assert_msg(strstr(plan, "messages_streaming") != NULL, "%s", plan);
  }
  t_close(&t);
}
END_TEST

/* One chat's streaming answers interrupted (a node taking it over): the other chat's untouched. */
START_TEST(test_interrupt_chat) {
  struct tctx t;
  t_open(&t);
  t_chat(&t, "c1");
  t_chat(&t, "c2");
  struct store_message a = {.id = "m1",
                            .chat_id = "c1",
                            .turn_id = "t1",
                            .role = "assistant",
                            .state = "streaming",
                            .text = "half",
                            .created_at = 2};
  struct store_message b = {.id = "m2",
                            .chat_id = "c2",
                            .turn_id = "t2",
                            .role = "assistant",
                            .state = "streaming",
                            .text = "live",
                            .created_at = 3};
  put(&t, &a, 0);
  put(&t, &b, 0);
  struct done d = {0};
  ck_assert_int_eq(store_message_interrupt_chat(t.st, "", "{}", 50, on_done, &d), SBX_EINVAL);
  ck_assert_int_eq(
      store_message_interrupt_chat(t.st, "c1", "{\"code\":\"interrupted\"}", 50, on_done, &d), 0);
  t_wait(&t);
  ck_assert_int_eq(d.rc, 0);
  struct store_message *v = NULL;
  size_t n = 0;
  ck_assert_int_eq(store_message_list(t.st, "c1", 10, &v, &n), 0);
  ck_assert_uint_eq(n, 1);
  ck_assert_str_eq(v[0].state, "error");
  store_message_list_free(v, n);
  ck_assert_int_eq(store_message_list(t.st, "c2", 10, &v, &n), 0);
  ck_assert_uint_eq(n, 1);
  ck_assert_str_eq(v[0].state, "streaming");
  ck_assert_ptr_null(v[0].error_json);
  store_message_list_free(v, n);
  t_close(&t);
}
END_TEST

int main(void) {
  Suite *s = suite_create("messages");
  TCase *tc = tcase_create("messages");
  tcase_add_test(tc, test_put_update_list);
  tcase_add_test(tc, test_page);
  tcase_add_test(tc, test_refusals);
  tcase_add_test(tc, test_list_plan);
  tcase_add_test(tc, test_interrupt);
  tcase_add_test(tc, test_interrupt_chat);
  return t_run_suite(s, tc);
}
