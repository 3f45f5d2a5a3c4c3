/* test_page.c -- the page state machine (page.c) under a fake clock: the transition table through
 * each step from every state, the active-page ordering counter, the grace period, and silence: a
 * page holding a run that shows no sign of life for PAGE_SILENT_MS, and its next sign of life. */
#include "internal.h"

#include <check.h>

static uint64_t fake_now = 5000;
static uint64_t fake_mono(void *ud) {
  (void)ud;
  return fake_now;
}
static void setup(void) {
  fake_now = 5000;
  sbx_clock_set_fake(fake_mono, NULL, NULL);
  sbx_log_set_level(SBX_LOG_ERROR);
}
static void teardown(void) { sbx_clock_set_fake(NULL, NULL, NULL); }

static const int expected[ORCH_PAGE__COUNT][ORCH_PAGE__COUNT] = {
    /* to:       N  V  H  S  G  X */
    /* NEW    */ {0, 1, 1, 0, 0, 0},
    /* VISIBLE*/ {0, 1, 1, 1, 1, 0},
    /* HIDDEN */ {0, 1, 1, 0, 1, 0},
    /* SILENT */ {0, 1, 1, 0, 1, 0},
    /* GRACE  */ {0, 1, 1, 0, 0, 1},
    /* GONE   */ {0, 0, 0, 0, 0, 0},
};

static void reach(struct orch_page *p, enum orch_page_state s, uint64_t *ctr) {
  orch__page_init(p, "pg");
  if (s == ORCH_PAGE_NEW)
    return;
  ck_assert_int_eq(orch__page_attach(p, s != ORCH_PAGE_HIDDEN, ctr), 0);
  if (s == ORCH_PAGE_SILENT) {
    fake_now += 6000;
    ck_assert_int_eq(orch__page_check_silent(p, 0, 6000), 1);
  }
  if (s == ORCH_PAGE_GRACE || s == ORCH_PAGE_GONE)
    ck_assert_int_eq(orch__page_drop(p, 100), 0);
  if (s == ORCH_PAGE_GONE) {
    fake_now += 100;
    ck_assert_int_eq(orch__page_tick(p), 1);
  }
  ck_assert_int_eq(p->state, s);
}

START_TEST(test_steps_from_every_state) {
  uint64_t ctr = 0;
  for (int f = 0; f < ORCH_PAGE__COUNT; f++) {
    struct orch_page p;
    /* attach visible */
    reach(&p, f, &ctr);
    int rc = orch__page_attach(&p, 1, &ctr);
    ck_assert_int_eq(rc == 0, expected[f][ORCH_PAGE_VISIBLE]);
    /* drop */
    reach(&p, f, &ctr);
    rc = orch__page_drop(&p, 100);
    ck_assert_int_eq(rc == 0, expected[f][ORCH_PAGE_GRACE]);
    if (rc != 0)
      ck_assert_int_eq(p.state, f);
    /* silence: only a visible page goes silent */
    reach(&p, f, &ctr);
    fake_now += 6000;
    rc = orch__page_check_silent(&p, 0, 6000);
    ck_assert_int_eq(rc, expected[f][ORCH_PAGE_SILENT]);
    ck_assert_int_eq(p.state, rc ? ORCH_PAGE_SILENT : (enum orch_page_state)f);
    /* a sign of life: only a silent page changes (visible again) */
    reach(&p, f, &ctr);
    rc = orch__page_alive(&p, &ctr);
    ck_assert_int_eq(rc, f == ORCH_PAGE_SILENT);
    ck_assert_int_eq(p.state, f == ORCH_PAGE_SILENT ? ORCH_PAGE_VISIBLE : (enum orch_page_state)f);
    /* presence: only attached pages change; GRACE remembers */
    reach(&p, f, &ctr);
    rc = orch__page_presence(&p, 0, &ctr);
    if (f == ORCH_PAGE_VISIBLE || f == ORCH_PAGE_HIDDEN || f == ORCH_PAGE_SILENT) {
      ck_assert_int_eq(rc, 0);
      ck_assert_int_eq(p.state, ORCH_PAGE_HIDDEN);
    } else if (f == ORCH_PAGE_GRACE) {
      ck_assert_int_eq(rc, 0);
      ck_assert_int_eq(p.state, ORCH_PAGE_GRACE);
      ck_assert_int_eq(p.visible, 0);
    } else {
      ck_assert_int_eq(rc, SBX_ESTATE);
      ck_assert_int_eq(p.state, f);
    }
  }
}
END_TEST

START_TEST(test_active_order) {
  uint64_t ctr = 0;
  struct orch_page a, b;
  orch__page_init(&a, "a");
  orch__page_init(&b, "b");
  ck_assert_int_eq(orch__page_attach(&a, 1, &ctr), 0);
  ck_assert_int_eq(orch__page_attach(&b, 1, &ctr), 0);
  ck_assert_uint_gt(b.visible_seq, a.visible_seq);
  ck_assert_int_eq(orch__page_presence(&a, 0, &ctr), 0);
  ck_assert_int_eq(orch__page_can_run(&a), 0);
  ck_assert_int_eq(orch__page_presence(&a, 1, &ctr), 0);
  ck_assert_uint_gt(a.visible_seq, b.visible_seq); /* most recently visible wins */
  uint64_t seq = a.visible_seq;
  ck_assert_int_eq(orch__page_presence(&a, 1, &ctr), 0); /* same report: no reorder */
  ck_assert_uint_eq(a.visible_seq, seq);
  ck_assert_int_eq(orch__page_can_run(&a), 1);
}
END_TEST

START_TEST(test_grace) {
  uint64_t ctr = 0;
  struct orch_page p;
  orch__page_init(&p, "p");
  ck_assert_int_eq(orch__page_attach(&p, 1, &ctr), 0);
  ck_assert_int_eq(orch__page_drop(&p, 10000), 0);
  ck_assert_int_eq(orch__page_can_run(&p), 0);
  fake_now += 9999;
  ck_assert_int_eq(orch__page_tick(&p), 0);
  ck_assert_int_eq(orch__page_attach(&p, 1, &ctr), 0); /* back within the grace */
  ck_assert_int_eq(p.state, ORCH_PAGE_VISIBLE);
  ck_assert_int_eq(orch__page_drop(&p, 10000), 0);
  fake_now += 10000;
  ck_assert_int_eq(orch__page_tick(&p), 1);
  ck_assert_int_eq(p.state, ORCH_PAGE_GONE);
  ck_assert_int_eq(orch__page_attach(&p, 1, &ctr), SBX_ESTATE);
  ck_assert_int_eq(orch__page_tick(&p), 0);
}
END_TEST

/* Silence is counted from the later of the page's latest sign of life and the run's dispatch: a
 * page that idled before it got a run is not silent at once; a sign of life (or presence) brings
 * a silent page back as the most recently visible one; 0 turns silence off. */
START_TEST(test_silence) {
  uint64_t ctr = 0;
  struct orch_page p, q;
  orch__page_init(&p, "p");
  orch__page_init(&q, "q");
  ck_assert_int_eq(orch__page_attach(&p, 1, &ctr), 0);
  fake_now += 60000; /* idle: no run, no calls */
  uint64_t dispatched = fake_now;
  ck_assert_int_eq(orch__page_check_silent(&p, dispatched, 6000), 0);
  fake_now += 5999;
  ck_assert_int_eq(orch__page_check_silent(&p, dispatched, 6000), 0);
  fake_now += 1;
  ck_assert_int_eq(orch__page_check_silent(&p, dispatched, 0), 0); /* off */
  ck_assert_int_eq(orch__page_check_silent(&p, dispatched, 6000), 1);
  ck_assert_int_eq(p.state, ORCH_PAGE_SILENT);
  ck_assert_int_eq(orch__page_can_run(&p), 0);                        /* as hidden */
  ck_assert_int_eq(orch__page_check_silent(&p, dispatched, 6000), 0); /* once */
  ck_assert_int_eq(orch__page_attach(&q, 1, &ctr), 0); /* another page, made visible after p */
  ck_assert_int_eq(orch__page_alive(&p, &ctr), 1);
  ck_assert_int_eq(p.state, ORCH_PAGE_VISIBLE);
  ck_assert_uint_gt(p.visible_seq, q.visible_seq); /* back as the active page */
  ck_assert_int_eq(orch__page_alive(&p, &ctr), 0);
  /* heartbeats every 2 s keep a page holding a run visible however long it runs */
  dispatched = fake_now;
  for (int i = 0; i < 100; i++) {
    fake_now += 2000;
    ck_assert_int_eq(orch__page_presence(&p, 1, &ctr), 0);
    ck_assert_int_eq(orch__page_check_silent(&p, dispatched, 6000), 0);
  }
  /* silent again, then a presence that says hidden: hidden */
  fake_now += 6000;
  ck_assert_int_eq(orch__page_check_silent(&p, dispatched, 6000), 1);
  ck_assert_int_eq(orch__page_presence(&p, 0, &ctr), 0);
  ck_assert_int_eq(p.state, ORCH_PAGE_HIDDEN);
  /* a silent page whose stream drops enters its grace */
  ck_assert_int_eq(orch__page_presence(&p, 1, &ctr), 0);
  fake_now += 6000;
  ck_assert_int_eq(orch__page_check_silent(&p, dispatched, 6000), 1);
  ck_assert_int_eq(orch__page_drop(&p, 1000), 0);
  ck_assert_int_eq(p.state, ORCH_PAGE_GRACE);
}
END_TEST

START_TEST(test_kernel_names) {
  enum orch_kernel_state k;
  ck_assert_int_eq(orch__kernel_state_parse("busy", &k), 0);
  ck_assert_int_eq(k, ORCH_KERNEL_BUSY);
  ck_assert_int_eq(orch__kernel_state_parse("unknown", &k), SBX_EINVAL);
  ck_assert_int_eq(orch__kernel_state_parse("zombie", &k), SBX_EINVAL);
}
END_TEST

int main(void) {
  Suite *s = suite_create("page");
  TCase *tc = tcase_create("state machine");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_steps_from_every_state);
  tcase_add_test(tc, test_active_order);
  tcase_add_test(tc, test_grace);
  tcase_add_test(tc, test_silence);
  tcase_add_test(tc, test_kernel_names);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
