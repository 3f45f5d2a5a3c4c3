/* test_events.c -- events.c: append, last seq, since (order, limit, after), a seq used twice,
 * an unknown chat, and chats kept apart; trimming: the age rule (a prefix, up to the first young
 * event), keep_per_chat (0 keeps 1: the last seq survives and is never reused), the budget and
 * the round robin over chats, refusals, a trim whose commit fails (injected fsync error: nothing
 * deleted, the next step does it) and fail-at-N allocation. */
#include "faultvfs.h"
#include "helpers.h"

#define CHAT  "c0000000000000000000000000000001"
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
    ck_assert_int_eq(
        store_event_append(t.st, CHAT, i, i % 2 ? "run" : "files", payload, on_done, &d), 0);
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

#define CHAT3 "c0000000000000000000000000000003"

/* Appends seqs from..to to chat, then sets created_at of those to `at` (when at >= 0) through a
 * connection of its own (the store's writer is idle between t_wait calls). */
static void add_events(struct tctx *t, const char *chat, int from, int to, int64_t at) {
  struct done d = {0};
  for (int i = from; i <= to; i++)
    ck_assert_int_eq(store_event_append(t->st, chat, i, "files", "{}", on_done, &d), 0);
  t_wait(t);
  ck_assert_int_eq(d.called, to - from + 1);
  ck_assert_int_eq(d.rc, 0);
  if (at < 0)
    return;
  char sql[256];
  snprintf(sql, sizeof sql,
           "UPDATE events SET created_at = %lld WHERE chat_id = '%s' AND seq "
           "BETWEEN %d AND %d",
           (long long)at, chat, from, to);
  ck_assert_int_eq(t_sql_exec(t->dir, sql), to - from + 1);
}

struct trimmed {
  int called, rc;
  size_t removed;
};
static void on_trimmed(int rc, const struct sbx_error *err, size_t removed, void *ud) {
  struct trimmed *r = ud;
  r->called++;
  r->rc = rc;
  r->removed = removed;
  if (rc != 0)
    ck_assert_ptr_nonnull(err);
}

static size_t trim(struct tctx *t, int64_t older_than, size_t keep, size_t budget, int *rc) {
  struct trimmed r = {0};
  ck_assert_int_eq(store_event_trim(t->st, older_than, keep, budget, on_trimmed, &r), 0);
  t_wait(t);
  ck_assert_int_eq(r.called, 1);
  *rc = r.rc;
  return r.removed;
}

/* Oldest remaining seq of a chat (0: none) and how many remain. */
static int64_t oldest(struct tctx *t, const char *chat, size_t *count) {
  struct store_event *v;
  size_t n;
  ck_assert_int_eq(store_event_since(t->st, chat, 0, 100000, &v, &n), 0);
  int64_t first = n ? v[0].seq : 0;
  for (size_t i = 1; i < n; i++)
    ck_assert_int_eq(v[i].seq, v[i - 1].seq + 1); /* what remains is a contiguous tail */
  store_event_list_free(v, n);
  *count = n;
  return first;
}

START_TEST(test_trim_age_and_keep) {
  struct tctx t;
  int rc;
  size_t n;
  int64_t last;
  t_open(&t);
  t_chat(&t, CHAT);
  t_chat(&t, CHAT2);
  t_chat(&t, CHAT3);
  /* CHAT: 1..10 old, 11 young, 12 old again (clock stepped back), 13..20 young */
  add_events(&t, CHAT, 1, 10, 100);
  add_events(&t, CHAT, 11, 11, -1);
  add_events(&t, CHAT, 12, 12, 100);
  add_events(&t, CHAT, 13, 20, -1);
  /* CHAT2: 20 old */
  add_events(&t, CHAT2, 1, 20, 100);
  /* CHAT3: 3 old */
  add_events(&t, CHAT3, 1, 3, 200);
  /* nothing older than 50 */
  ck_assert_uint_eq(trim(&t, 50, 5, 100, &rc), 0);
  ck_assert_int_eq(rc, 0);
  ck_assert_int_eq(oldest(&t, CHAT, &n), 1);
  ck_assert_uint_eq(n, 20);
  /* older than 1000 (CHAT3's are not, < 1000 but keep 0 -> 1 below); keep 5:
   * CHAT loses 1..10 (11 is young: the prefix stops there, 12 stays);
   * CHAT2 loses 1..15; CHAT3 (3 events, keep 5) nothing */
  ck_assert_uint_eq(trim(&t, 150, 5, 100, &rc), 10 + 15);
  ck_assert_int_eq(rc, 0);
  ck_assert_int_eq(oldest(&t, CHAT, &n), 11);
  ck_assert_uint_eq(n, 10);
  ck_assert_int_eq(oldest(&t, CHAT2, &n), 16);
  ck_assert_uint_eq(n, 5);
  ck_assert_int_eq(oldest(&t, CHAT3, &n), 1);
  ck_assert_uint_eq(n, 3);
  /* again: nothing more to do */
  ck_assert_uint_eq(trim(&t, 150, 5, 100, &rc), 0);
  ck_assert_int_eq(rc, 0);
  /* keep 0 counts as 1: every chat keeps its newest, so the seq counter survives */
  ck_assert_uint_eq(trim(&t, sbx_now_wall_ms() + 60000, 0, 100, &rc), 9 + 4 + 2);
  ck_assert_int_eq(rc, 0);
  const char *chats[] = {CHAT, CHAT2, CHAT3};
  const int64_t lasts[] = {20, 20, 3};
  for (int i = 0; i < 3; i++) {
    ck_assert_int_eq(oldest(&t, chats[i], &n), lasts[i]);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(store_event_last_seq(t.st, chats[i], &last), 0);
    ck_assert_int_eq(last, lasts[i]);
  }
  /* the last seq is still taken: never reused */
  struct done d = {0};
  ck_assert_int_eq(store_event_append(t.st, CHAT3, 3, "run", "{}", on_done, &d), 0);
  t_wait(&t);
  ck_assert_int_eq(d.rc, SBX_ECONFLICT);
  /* survives a reopen too */
  t_close_keep(&t);
  t_reopen(&t);
  ck_assert_int_eq(store_event_last_seq(t.st, CHAT3, &last), 0);
  ck_assert_int_eq(last, 3);
  /* refusals */
  ck_assert_int_eq(store_event_trim(t.st, 0, 1, 0, on_trimmed, NULL), SBX_EINVAL);
  ck_assert_int_eq(store_event_trim(t.st, 0, 1, 100001, on_trimmed, NULL), SBX_EINVAL);
  t_close(&t);
}
END_TEST

START_TEST(test_trim_budget) {
  struct tctx t;
  int rc;
  size_t n, total = 0, calls = 0, got;
  t_open(&t);
  t_chat(&t, CHAT);
  t_chat(&t, CHAT2);
  t_chat(&t, CHAT3);
  add_events(&t, CHAT, 1, 30, 100);
  add_events(&t, CHAT2, 1, 30, 100);
  add_events(&t, CHAT3, 1, 4, -1); /* young: never touched */
  do {
    got = trim(&t, 1000, 1, 7, &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert_uint_le(got, 7);
    total += got;
    calls++;
    ck_assert_uint_lt(calls, 20);
  } while (got == 7);
  ck_assert_uint_eq(total, 58);
  ck_assert_uint_eq(calls, 9); /* 8 full steps of 7 = 56, then 2 */
  ck_assert_int_eq(oldest(&t, CHAT, &n), 30);
  ck_assert_int_eq(oldest(&t, CHAT2, &n), 30);
  ck_assert_int_eq(oldest(&t, CHAT3, &n), 1);
  ck_assert_uint_eq(n, 4);
  /* the round robin: a step that filled its budget stops inside the key order and the next one
   * goes on from there (10 chats with one trimmable event each: one per step of budget 1) */
  char ids[10][STORE_ID_LEN + 1];
  for (int i = 0; i < 10; i++) {
    snprintf(ids[i], sizeof ids[i], "d%031d", i);
    t_chat(&t, ids[i]);
    add_events(&t, ids[i], 1, 1, 100);
    add_events(&t, ids[i], 2, 2, 100);
  }
  total = 0;
  for (int i = 0; i < 10; i++) {
    got = trim(&t, 1000, 1, 1, &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert_uint_eq(got, 1);
    total += got;
  }
  ck_assert_uint_eq(total, 10);
  for (int i = 0; i < 10; i++) {
    ck_assert_int_eq(oldest(&t, ids[i], &n), 2);
    ck_assert_uint_eq(n, 1);
  }
  ck_assert_uint_eq(trim(&t, 1000, 1, 1, &rc), 0); /* reaches the end: starts over next time */
  /* chats looked at per step are bounded (8 x budget): with budget 1 the first step sees CHAT..
   * CHAT3 and d0..d4, finds nothing, the next one goes on to d9 */
  add_events(&t, ids[9], 3, 3, 100);
  ck_assert_uint_eq(trim(&t, 1000, 1, 1, &rc), 0);
  ck_assert_int_eq(oldest(&t, ids[9], &n), 2);
  ck_assert_uint_eq(trim(&t, 1000, 1, 1, &rc), 1);
  ck_assert_int_eq(oldest(&t, ids[9], &n), 3);
  t_close(&t);
}
END_TEST

START_TEST(test_trim_commit_fails) {
  T_SQLITE_ONLY("a commit failed through SQLite's VFS");
  fault_register();
  struct tctx t;
  int rc;
  size_t n;
  t_open(&t);
  t_chat(&t, CHAT);
  add_events(&t, CHAT, 1, 10, 100);
  fault_arm(0, 1); /* the commit's fsync fails */
  ck_assert_uint_eq(trim(&t, 1000, 2, 100, &rc), 0);
  ck_assert_int_gt(fv_fired, 0);
  fault_arm(0, 0);
  ck_assert_int_eq(rc, SBX_EIO);
  ck_assert_int_eq(oldest(&t, CHAT, &n), 1); /* nothing deleted */
  ck_assert_uint_eq(n, 10);
  ck_assert_uint_eq(trim(&t, 1000, 2, 100, &rc), 8);
  ck_assert_int_eq(rc, 0);
  ck_assert_int_eq(oldest(&t, CHAT, &n), 9);
  t_close(&t);
}
END_TEST

START_TEST(test_trim_alloc_fail_at_n) {
  struct tctx t;
  size_t n, left = 40;
  uint64_t k;
  t_open(&t);
  t_chat(&t, CHAT);
  add_events(&t, CHAT, 1, 40, 100);
  for (k = 1; k < 50; k++) {
    struct trimmed r = {0};
    sbx_alloc_fail_at(k, 0);
    int rc = store_event_trim(t.st, 1000, 1, 3, on_trimmed, &r);
    if (rc == 0)
      t_wait(&t);
    uint64_t used = sbx_alloc_count();
    sbx_alloc_fail_at(0, 0);
    if (rc != 0) {
      ck_assert_int_eq(rc, SBX_ENOMEM);
      ck_assert_int_eq(r.called, 0); /* an error returned never also calls back */
      continue;
    }
    ck_assert_int_eq(r.called, 1);
    ck_assert_msg(r.rc == 0 || r.rc == SBX_ENOMEM, "rc %d", r.rc);
    if (r.rc == 0)
      left -= r.removed;
    ck_assert_int_eq(oldest(&t, CHAT, &n), 41 - (int64_t)left); /* removed == what is gone */
    ck_assert_uint_eq(n, left);
    if (r.rc == 0 && used < k)
      break;
  }
  ck_assert_uint_lt(k, 50);
  t_close(&t);
}
END_TEST

int main(void) {
  Suite *s = suite_create("events");
  TCase *tc = tcase_create("events");
  tcase_add_test(tc, test_events);
  tcase_add_test(tc, test_trim_age_and_keep);
  tcase_add_test(tc, test_trim_budget);
  tcase_add_test(tc, test_trim_commit_fails);
  tcase_add_test(tc, test_trim_alloc_fail_at_n);
  return t_run_suite(s, tc);
}
