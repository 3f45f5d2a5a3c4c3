/* test_run.c -- the run state machine (run.c) under a fake clock: every allowed and every
 * forbidden transition of the table through the steps, each step's effect (attempts, deadlines),
 * stale attempts, finishing a result (and going back when its files were not stored), the pause
 * wait, the watchdog and the cancel grace, and input(): the watchdog stopped while the run waits
 * for input and re-armed with the time it had left, the input wait; lost attempts. */
#include "internal.h"

#include <check.h>
#include <string.h>

static uint64_t fake_now = 1000000;
static uint64_t fake_mono(void *ud) {
  (void)ud;
  return fake_now;
}
static uint64_t fake_wall(void *ud) {
  (void)ud;
  return 1700000000000ull + fake_now;
}

static void setup(void) {
  fake_now = 1000000;
  sbx_clock_set_fake(fake_mono, fake_wall, NULL);
  sbx_log_set_level(SBX_LOG_ERROR);
}
static void teardown(void) { sbx_clock_set_fake(NULL, NULL, NULL); }

/* Drives a fresh run into `s` through the public steps. */
static void reach(struct orch_run *r, enum orch_run_state s) {
  orch__run_init(r, "r1", 60);
  switch (s) {
  case ORCH_RUN_QUEUED:
    break;
  case ORCH_RUN_DISPATCHED:
    ck_assert_int_eq(orch__run_dispatch(r, "p", 1000), 0);
    break;
  case ORCH_RUN_RUNNING:
    ck_assert_int_eq(orch__run_dispatch(r, "p", 1000), 0);
    ck_assert_int_eq(orch__run_started(r, 1, 1000), 0);
    break;
  case ORCH_RUN_WAITING_INPUT:
    ck_assert_int_eq(orch__run_dispatch(r, "p", 1000), 0);
    ck_assert_int_eq(orch__run_started(r, 1, 1000), 0);
    ck_assert_int_eq(orch__run_wait_input(r, 1, 300000, 1000), 0);
    break;
  case ORCH_RUN_PAUSED:
    ck_assert_int_eq(orch__run_pause(r, 5000), 0);
    break;
  case ORCH_RUN_FINISHING:
    ck_assert_int_eq(orch__run_dispatch(r, "p", 1000), 0);
    ck_assert_int_eq(orch__run_started(r, 1, 1000), 0);
    ck_assert_int_eq(orch__run_take_result(r, 1, "h1"), 0);
    break;
  case ORCH_RUN_DONE:
    ck_assert_int_eq(orch__run_finish(r, ORCH_RUN_STATUS_OK), 0);
    break;
  default:
    ck_abort();
  }
  ck_assert_int_eq(r->state, s);
}

/* Performs the step that leads to `to` (the one the table names); returns its rc. */
static int step_to(struct orch_run *r, enum orch_run_state to) {
  switch (to) {
  case ORCH_RUN_DISPATCHED:
    return r->state == ORCH_RUN_FINISHING ? SBX_ESTATE /* it came from RUNNING */
                                          : orch__run_dispatch(r, "p2", 1000);
  case ORCH_RUN_RUNNING:
    return r->state == ORCH_RUN_FINISHING       ? orch__run_result_failed(r)
           : r->state == ORCH_RUN_WAITING_INPUT ? orch__run_input_over(r)
                                                : orch__run_started(r, r->attempts, 1000);
  case ORCH_RUN_WAITING_INPUT:
    return orch__run_wait_input(r, r->attempts, 300000, 1000);
  case ORCH_RUN_PAUSED:
    return orch__run_pause(r, 5000);
  case ORCH_RUN_FINISHING:
    return orch__run_take_result(r, r->attempts, "h2");
  case ORCH_RUN_DONE:
    return orch__run_finish(r, ORCH_RUN_STATUS_ERROR);
  default:
    return SBX_ESTATE; /* nothing leads back to QUEUED */
  }
}

static const int expected[ORCH_RUN__COUNT][ORCH_RUN__COUNT] = {
    /* to:          Q  D  R  W  P  F  X */
    /* QUEUED    */ {0, 1, 0, 0, 1, 0, 1},
    /* DISPATCHED*/ {0, 0, 1, 0, 1, 1, 1},
    /* RUNNING   */ {0, 0, 0, 1, 1, 1, 1},
    /* WAITING   */ {0, 0, 1, 0, 1, 1, 1}, /* a result: through RUNNING to FINISHING */
    /* PAUSED    */ {0, 1, 0, 0, 0, 0, 1},
    /* FINISHING */ {0, 0, 1, 0, 0, 0, 1}, /* back to RUNNING, where reach() finishes from */
    /* DONE      */ {0, 0, 0, 0, 0, 0, 0},
};

/* Every (from, to) pair through the steps: allowed ones land in `to`, forbidden ones change
 * nothing and fail.  (A step that repeats its own state, like pause on PAUSED, is idempotent; a
 * `started` that the result overtook changes nothing either.) */
START_TEST(test_every_step_pair) {
  for (int f = 0; f < ORCH_RUN__COUNT; f++)
    for (int t = 0; t < ORCH_RUN__COUNT; t++) {
      struct orch_run r;
      reach(&r, f);
      int attempts = r.attempts;
      int rc = step_to(&r, t);
      if (expected[f][t]) {
        ck_assert_msg(rc == 0, "%s -> %s rc %d", orch__run_state_name(f), orch__run_state_name(t),
                      rc);
        ck_assert_int_eq(r.state, t);
      } else if (f == t &&
                 (t == ORCH_RUN_PAUSED || t == ORCH_RUN_RUNNING || t == ORCH_RUN_WAITING_INPUT)) {
        ck_assert_int_eq(rc, 0); /* same report twice */
        ck_assert_int_eq(r.state, f);
      } else {
        ck_assert_msg(rc != 0, "%s -> %s should fail", orch__run_state_name(f),
                      orch__run_state_name(t));
        ck_assert_int_eq(r.state, f);
        ck_assert_int_eq(r.attempts, attempts);
      }
    }
}
END_TEST

START_TEST(test_attempts_and_stale) {
  struct orch_run r;
  orch__run_init(&r, "r1", 10);
  ck_assert_int_eq(r.attempts, 0);
  ck_assert_int_eq(orch__run_dispatch(&r, "pageA", 1000), 0);
  ck_assert_int_eq(r.attempts, 1);
  ck_assert_str_eq(r.page_id, "pageA");
  ck_assert_int_eq(orch__run_started(&r, 2, 1000), SBX_ECONFLICT); /* no such attempt yet */
  ck_assert_int_eq(orch__run_started(&r, 1, 1000), 0);
  ck_assert_int_eq(orch__run_pause(&r, 5000), 0);
  ck_assert_str_eq(r.page_id, "");
  ck_assert_int_eq(orch__run_take_result(&r, 1, "h"), SBX_ECONFLICT); /* paused: nobody runs it */
  ck_assert_int_eq(orch__run_dispatch(&r, "pageB", 1000), 0);
  ck_assert_int_eq(r.attempts, 2);
  ck_assert_int_eq(orch__run_take_result(&r, 1, "h"), SBX_ECONFLICT); /* the stale attempt */
  ck_assert_int_eq(orch__run_started(&r, 1, 1000), SBX_ECONFLICT);
  ck_assert_int_eq(r.state, ORCH_RUN_DISPATCHED);
  ck_assert_int_eq(orch__run_take_result(&r, 2, "h2"), 0);
  ck_assert_int_eq(r.state, ORCH_RUN_FINISHING);
  ck_assert_str_eq(r.finishing_hash, "h2");
  ck_assert_int_eq(orch__run_take_result(&r, 2, "h3"), SBX_ECONFLICT); /* one result at a time */
  ck_assert_int_eq(orch__run_started(&r, 2, 1000), 0); /* overtaken by its result: nothing */
  ck_assert_int_eq(r.state, ORCH_RUN_FINISHING);
  ck_assert_int_eq(orch__run_finish(&r, ORCH_RUN_STATUS_OK), 0);
  ck_assert_str_eq(orch__run_status_name(r.status), "ok");
  ck_assert_int_eq(orch__run_take_result(&r, 2, "h2"), SBX_ECONFLICT); /* done: hashes decide */
  ck_assert_int_eq(orch__run_finish(&r, ORCH_RUN_STATUS_OK), SBX_ESTATE);
  ck_assert_int_eq(orch__run_finish(&r, ORCH_RUN_STATUS_NONE), SBX_EINVAL);
}
END_TEST

/* A result whose files were not stored: back to where it finished from, deadlines intact; while
 * finishing nothing pauses, cancels or times it out. */
START_TEST(test_finishing_goes_back) {
  struct orch_run r;
  orch__run_init(&r, "r1", 10);
  ck_assert_int_eq(orch__run_dispatch(&r, "p", 2000), 0);
  uint64_t watchdog = r.watchdog_deadline_ms;
  ck_assert_int_eq(orch__run_request_cancel(&r, 5000), SBX_EINPROGRESS);
  uint64_t cancel = r.cancel_deadline_ms;
  ck_assert_int_eq(orch__run_take_result(&r, 1, "h"), 0);
  ck_assert_int_eq(orch__run_pause(&r, 1000), SBX_ESTATE);
  ck_assert_int_eq(orch__run_request_cancel(&r, 5000), SBX_ESTATE);
  fake_now += 60000; /* past both deadlines */
  ck_assert_int_eq(orch__run_tick(&r), ORCH_RUN_DUE_NONE);
  ck_assert_int_eq(orch__run_result_failed(&r), 0);
  ck_assert_int_eq(r.state, ORCH_RUN_DISPATCHED); /* where it came from, not RUNNING */
  ck_assert_uint_eq(r.watchdog_deadline_ms, watchdog);
  ck_assert_uint_eq(r.cancel_deadline_ms, cancel);
  ck_assert_str_eq(r.finishing_hash, "");
  ck_assert_int_eq(orch__run_result_failed(&r), SBX_ESTATE);
  ck_assert_int_eq(orch__run_tick(&r), ORCH_RUN_DUE_CANCELLED); /* the deadlines fire again */
}
END_TEST

START_TEST(test_pause_wait_abandons) {
  struct orch_run r;
  orch__run_init(&r, "r1", 60);
  ck_assert_int_eq(orch__run_dispatch(&r, "p", 1000), 0);
  ck_assert_int_eq(orch__run_pause(&r, 120000), 0);
  fake_now += 119999;
  ck_assert_int_eq(orch__run_tick(&r), ORCH_RUN_DUE_NONE);
  ck_assert_int_eq(r.state, ORCH_RUN_PAUSED);
  fake_now += 1;
  ck_assert_int_eq(orch__run_tick(&r), ORCH_RUN_DUE_ABANDONED);
  ck_assert_int_eq(r.state, ORCH_RUN_DONE);
  ck_assert_int_eq(r.status, ORCH_RUN_STATUS_ABANDONED);
  ck_assert_int_eq(orch__run_tick(&r), ORCH_RUN_DUE_NONE);
}
END_TEST

START_TEST(test_resume_clears_wait) {
  struct orch_run r;
  orch__run_init(&r, "r1", 60);
  ck_assert_int_eq(orch__run_pause(&r, 1000), 0);
  ck_assert_int_eq(orch__run_dispatch(&r, "p", 1000), 0);
  fake_now += 5000; /* past the old wait, within the watchdog */
  ck_assert_int_eq(orch__run_tick(&r), ORCH_RUN_DUE_NONE);
  ck_assert_int_eq(r.state, ORCH_RUN_DISPATCHED);
}
END_TEST

START_TEST(test_watchdog) {
  struct orch_run r;
  /* Never started: crashed (the kernel never answered). */
  orch__run_init(&r, "r1", 10);
  ck_assert_int_eq(orch__run_dispatch(&r, "p", 2000), 0);
  fake_now += 11999;
  ck_assert_int_eq(orch__run_tick(&r), ORCH_RUN_DUE_NONE);
  fake_now += 1;
  ck_assert_int_eq(orch__run_tick(&r), ORCH_RUN_DUE_WATCHDOG);
  ck_assert_int_eq(r.status, ORCH_RUN_STATUS_CRASHED);
  /* Started and silent: timeout, counted from `started`. */
  orch__run_init(&r, "r2", 10);
  ck_assert_int_eq(orch__run_dispatch(&r, "p", 2000), 0);
  fake_now += 5000;
  ck_assert_int_eq(orch__run_started(&r, 1, 2000), 0);
  fake_now += 11999;
  ck_assert_int_eq(orch__run_tick(&r), ORCH_RUN_DUE_NONE);
  fake_now += 1;
  ck_assert_int_eq(orch__run_tick(&r), ORCH_RUN_DUE_WATCHDOG);
  ck_assert_int_eq(r.status, ORCH_RUN_STATUS_TIMEOUT);
}
END_TEST

START_TEST(test_cancel) {
  struct orch_run r;
  orch__run_init(&r, "r1", 60);
  ck_assert_int_eq(orch__run_request_cancel(&r, 5000), 0); /* queued: at once */
  ck_assert_int_eq(r.status, ORCH_RUN_STATUS_CANCELLED);
  ck_assert_int_eq(orch__run_request_cancel(&r, 5000), SBX_ESTATE);
  orch__run_init(&r, "r2", 60);
  ck_assert_int_eq(orch__run_dispatch(&r, "p", 1000), 0);
  ck_assert_int_eq(orch__run_started(&r, 1, 1000), 0);
  ck_assert_int_eq(orch__run_request_cancel(&r, 5000), SBX_EINPROGRESS);
  ck_assert_int_eq(r.state, ORCH_RUN_RUNNING);
  fake_now += 4999;
  ck_assert_int_eq(orch__run_tick(&r), ORCH_RUN_DUE_NONE);
  fake_now += 1;
  ck_assert_int_eq(orch__run_tick(&r), ORCH_RUN_DUE_CANCELLED);
  ck_assert_int_eq(r.status, ORCH_RUN_STATUS_CANCELLED);
  /* Paused: at once too. */
  orch__run_init(&r, "r3", 60);
  ck_assert_int_eq(orch__run_pause(&r, 1000), 0);
  ck_assert_int_eq(orch__run_request_cancel(&r, 5000), 0);
  ck_assert_int_eq(r.state, ORCH_RUN_DONE);
}
END_TEST

/* input(): the watchdog stops while the run waits (however long), and runs again with what it had
 * left once input() is over; the input wait takes input() as over when the page said nothing. */
START_TEST(test_input_wait) {
  struct orch_run r;
  orch__run_init(&r, "r1", 10);
  ck_assert_int_eq(orch__run_dispatch(&r, "p", 2000), 0);
  ck_assert_int_eq(orch__run_wait_input(&r, 1, 300000, 2000), SBX_ESTATE); /* not started */
  ck_assert_int_eq(orch__run_started(&r, 1, 2000), 0);                     /* 12 s of watchdog */
  fake_now += 4000;
  ck_assert_int_eq(orch__run_wait_input(&r, 2, 300000, 2000), SBX_ECONFLICT);
  ck_assert_int_eq(orch__run_wait_input(&r, 1, 300000, 2000), 0);
  ck_assert_int_eq(r.state, ORCH_RUN_WAITING_INPUT);
  ck_assert_uint_eq(r.watchdog_deadline_ms, 0);
  ck_assert_uint_eq(r.watch_left_ms, 8000);
  ck_assert_int_eq(orch__run_wait_input(&r, 1, 300000, 2000), 0); /* the same request again */
  ck_assert_uint_eq(r.watch_left_ms, 8000);
  fake_now += 200000; /* far past the time limit: waiting is not the code's time */
  ck_assert_int_eq(orch__run_tick(&r), ORCH_RUN_DUE_NONE);
  ck_assert_int_eq(orch__run_started(&r, 1, 2000), 0); /* a late `started` changes nothing */
  ck_assert_int_eq(r.state, ORCH_RUN_WAITING_INPUT);
  ck_assert_int_eq(orch__run_input_over(&r), 0);
  ck_assert_int_eq(r.state, ORCH_RUN_RUNNING);
  ck_assert_uint_eq(r.watchdog_deadline_ms, fake_now + 8000);
  ck_assert_int_eq(orch__run_input_over(&r), SBX_ESTATE);
  fake_now += 7999;
  ck_assert_int_eq(orch__run_tick(&r), ORCH_RUN_DUE_NONE);
  fake_now += 1;
  ck_assert_int_eq(orch__run_tick(&r), ORCH_RUN_DUE_WATCHDOG);
  ck_assert_int_eq(r.status, ORCH_RUN_STATUS_TIMEOUT);
  /* No word from the page: past the input wait plus the grace, input() is over. */
  orch__run_init(&r, "r2", 10);
  ck_assert_int_eq(orch__run_dispatch(&r, "p", 2000), 0);
  ck_assert_int_eq(orch__run_started(&r, 1, 2000), 0);
  ck_assert_int_eq(orch__run_wait_input(&r, 1, 300000, 2000), 0);
  fake_now += 301999;
  ck_assert_int_eq(orch__run_tick(&r), ORCH_RUN_DUE_NONE);
  fake_now += 1;
  ck_assert_int_eq(orch__run_tick(&r), ORCH_RUN_DUE_INPUT_OVER);
  ck_assert_int_eq(r.state, ORCH_RUN_RUNNING);
  ck_assert_uint_eq(r.watchdog_deadline_ms, fake_now + 12000);
  /* Cancelled while it waits: the cancel grace runs through the wait. */
  ck_assert_int_eq(orch__run_wait_input(&r, 1, 300000, 2000), 0);
  ck_assert_int_eq(orch__run_request_cancel(&r, 5000), SBX_EINPROGRESS);
  fake_now += 5000;
  ck_assert_int_eq(orch__run_tick(&r), ORCH_RUN_DUE_CANCELLED);
  ck_assert_int_eq(r.status, ORCH_RUN_STATUS_CANCELLED);
  /* Paused while it waits (its page hidden): the wait is over with it. */
  orch__run_init(&r, "r3", 10);
  ck_assert_int_eq(orch__run_dispatch(&r, "p", 2000), 0);
  ck_assert_int_eq(orch__run_started(&r, 1, 2000), 0);
  ck_assert_int_eq(orch__run_wait_input(&r, 1, 300000, 2000), 0);
  ck_assert_int_eq(orch__run_pause(&r, 1000), 0);
  ck_assert_uint_eq(r.input_deadline_ms, 0);
  ck_assert_str_eq(r.last_page_id, "p"); /* kept through the pause */
  ck_assert_str_eq(r.page_id, "");
}
END_TEST

/* Lost attempts: only started ones count; the max_lost-th ends the run crashed; a state not on a
 * page is refused; max_lost 0 bounds nothing. */
START_TEST(test_lost_attempts) {
  struct orch_run r;
  reach(&r, ORCH_RUN_DISPATCHED);
  ck_assert_int_eq(orch__run_lost(&r, 2, 1000), 0); /* never started: paused, not counted */
  ck_assert_int_eq(r.state, ORCH_RUN_PAUSED);
  ck_assert_int_eq(r.lost, 0);
  ck_assert_int_eq(orch__run_lost(&r, 2, 1000), SBX_ESTATE);
  for (int i = 1; i <= 2; i++) {
    ck_assert_int_eq(orch__run_dispatch(&r, "p", 1000), 0);
    ck_assert_int_eq(orch__run_started(&r, r.attempts, 1000), 0);
    if (i == 2) /* waiting in input() is running code too */
      ck_assert_int_eq(orch__run_wait_input(&r, r.attempts, 300000, 1000), 0);
    ck_assert_int_eq(orch__run_lost(&r, 2, 1000), i == 2);
    ck_assert_int_eq(r.lost, i);
  }
  ck_assert_int_eq(r.state, ORCH_RUN_DONE);
  ck_assert_int_eq(r.status, ORCH_RUN_STATUS_CRASHED);
  ck_assert_int_eq(r.attempts, 3);
  reach(&r, ORCH_RUN_RUNNING);
  for (int i = 0; i < 5; i++) { /* no bound */
    ck_assert_int_eq(orch__run_lost(&r, 0, 1000), 0);
    ck_assert_int_eq(orch__run_dispatch(&r, "p", 1000), 0);
    ck_assert_int_eq(orch__run_started(&r, r.attempts, 1000), 0);
  }
  ck_assert_int_eq(r.state, ORCH_RUN_RUNNING);
}
END_TEST

START_TEST(test_names) {
  enum orch_run_status st;
  ck_assert_int_eq(orch__run_status_parse("abandoned", &st), 0);
  ck_assert_int_eq(st, ORCH_RUN_STATUS_ABANDONED);
  ck_assert_int_eq(orch__run_status_parse("none", &st), SBX_EINVAL);
  ck_assert_int_eq(orch__run_status_parse("OK", &st), SBX_EINVAL);
  ck_assert_str_eq(orch__run_state_name(ORCH_RUN_FINISHING), "finishing");
  ck_assert_str_eq(orch__run_state_name(ORCH_RUN_WAITING_INPUT), "waiting_input");
  ck_assert_str_eq(orch__run_state_name(99), "?");
}
END_TEST

int main(void) {
  Suite *s = suite_create("run");
  TCase *tc = tcase_create("state machine");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_every_step_pair);
  tcase_add_test(tc, test_attempts_and_stale);
  tcase_add_test(tc, test_finishing_goes_back);
  tcase_add_test(tc, test_pause_wait_abandons);
  tcase_add_test(tc, test_resume_clears_wait);
  tcase_add_test(tc, test_watchdog);
  tcase_add_test(tc, test_cancel);
  tcase_add_test(tc, test_input_wait);
  tcase_add_test(tc, test_lost_attempts);
  tcase_add_test(tc, test_names);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
