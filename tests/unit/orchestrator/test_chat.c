/* test_chat.c -- the chat scheduler's pure parts (chat.c) under a fake clock: the active page is
 * the most recently visible attached one; idle chats leave memory only when nothing is live. */
#include "internal.h"

#include <check.h>
#include <string.h>

static uint64_t fake_now = 1000;
static uint64_t fake_mono(void *ud) { (void)ud; return fake_now; }
static void setup(void) { fake_now = 1000; sbx_clock_set_fake(fake_mono, NULL, NULL); sbx_log_set_level(SBX_LOG_ERROR); }
static void teardown(void) { sbx_clock_set_fake(NULL, NULL, NULL); }

static struct orch *new_orch(void) {
  struct orch *o = sbx_calloc(1, sizeof(*o));
  orch__map_init(&o->chats);
  orch__map_init(&o->runs);
  return o;
}

static void free_orch(struct orch *o) {
  size_t i = 0;
  const char *k;
  void *v;
  while (orch__map_next(&o->chats, &i, &k, &v))
    sbx_free(v);
  orch__map_free(&o->chats);
  orch__map_free(&o->runs);
  sbx_free(o);
}

START_TEST(test_active_page) {
  struct orch *o = new_orch();
  struct orch_chat *c = orch__chat_add(o, "c1", "h", 0);
  ck_assert_ptr_null(orch__chat_active_page(c));
  struct orch_page a, b;
  orch__page_init(&a, "a");
  orch__page_init(&b, "b");
  sbx_list_insert_tail(&c->pages, &a.chat_link);
  sbx_list_insert_tail(&c->pages, &b.chat_link);
  ck_assert_ptr_eq(orch__chat_page(c, "b"), &b);
  ck_assert_ptr_null(orch__chat_page(c, "zz"));
  ck_assert_int_eq(orch__page_attach(&a, 1, &c->visible_counter), 0);
  ck_assert_int_eq(orch__page_attach(&b, 0, &c->visible_counter), 0);
  ck_assert_ptr_eq(orch__chat_active_page(c), &a); /* b is hidden */
  ck_assert_int_eq(orch__page_presence(&b, 1, &c->visible_counter), 0);
  ck_assert_ptr_eq(orch__chat_active_page(c), &b); /* most recently visible */
  ck_assert_int_eq(orch__page_drop(&b, 100), 0);
  ck_assert_ptr_eq(orch__chat_active_page(c), &a); /* in its grace b runs nothing */
  ck_assert_int_eq(orch__page_presence(&a, 0, &c->visible_counter), 0);
  ck_assert_ptr_null(orch__chat_active_page(c));
  sbx_list_remove(&a.chat_link);
  sbx_list_remove(&b.chat_link);
  free_orch(o);
}
END_TEST

START_TEST(test_evict_idle_only) {
  struct orch *o = new_orch();
  struct orch_chat *idle = orch__chat_add(o, "idle", "h", 0);
  struct orch_chat *paged = orch__chat_add(o, "paged", "h", 0);
  struct orch_chat *busy = orch__chat_add(o, "busy", "h", 0);
  struct orch_page p;
  orch__page_init(&p, "p");
  sbx_list_insert_tail(&paged->pages, &p.chat_link);
  busy->events_inflight = 1;
  fake_now += 299999;
  ck_assert_uint_eq(orch__chats_evict(o, 300000), 0); /* not idle long enough */
  fake_now += 1;
  struct orch_chat *fresh = orch__chat_add(o, "fresh", "h", 0); /* used just now */
  ck_assert_uint_eq(orch__chats_evict(o, 300000), 1);
  ck_assert_ptr_null(orch__map_get(&o->chats, "idle"));
  ck_assert_ptr_eq(orch__map_get(&o->chats, "paged"), paged);
  ck_assert_ptr_eq(orch__map_get(&o->chats, "busy"), busy);
  ck_assert_ptr_eq(orch__map_get(&o->chats, "fresh"), fresh);
  busy->events_inflight = 0;
  ck_assert_uint_eq(orch__chats_evict(o, 300000), 1);
  ck_assert_ptr_null(orch__map_get(&o->chats, "busy"));
  sbx_list_remove(&p.chat_link);
  (void)idle;
  free_orch(o);
}
END_TEST

int main(void) {
  Suite *s = suite_create("chat");
  TCase *tc = tcase_create("scheduler");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_active_page);
  tcase_add_test(tc, test_evict_idle_only);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
