/* test_fsm.c -- the state-machine helper: table lookups, names, refusals, the trace line with the
 * caller's place, and the invariant check. */
#include "fsm.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum tstate { T_NEW, T_OPEN, T_DONE };
static const char *const names[] = {"new", "open", "done"};
static const uint32_t from[] = {
    [T_NEW] = 0,
    [T_OPEN] = SBX_FSM_BIT(T_NEW) | SBX_FSM_BIT(T_OPEN),
    [T_DONE] = SBX_FSM_BIT(T_NEW) | SBX_FSM_BIT(T_OPEN),
};
struct obj {
  enum tstate state;
  int result; /* set in DONE only */
};
static int invariant(const void *p, unsigned s) {
  const struct obj *o = p;
  return s == T_DONE ? o->result != 0 : o->result == 0;
}
static const struct sbx_fsm fsm = SBX_FSM("test", "thing", names, from, invariant);

START_TEST(test_table) {
  ck_assert_uint_eq(fsm.n_states, 3);
  ck_assert(sbx_fsm_allowed(&fsm, T_NEW, T_OPEN));
  ck_assert(sbx_fsm_allowed(&fsm, T_OPEN, T_OPEN));
  ck_assert(!sbx_fsm_allowed(&fsm, T_DONE, T_OPEN));
  ck_assert(!sbx_fsm_allowed(&fsm, T_NEW, T_NEW));
  ck_assert(!sbx_fsm_allowed(&fsm, 7, T_OPEN));
  ck_assert(!sbx_fsm_allowed(&fsm, T_NEW, 40));
  ck_assert_str_eq(sbx_fsm_name(&fsm, T_DONE), "done");
  ck_assert_str_eq(sbx_fsm_name(&fsm, 9), "?");
  unsigned s = 99;
  ck_assert_int_eq(sbx_fsm_parse(&fsm, "open", &s), 0);
  ck_assert_uint_eq(s, T_OPEN);
  ck_assert_int_eq(sbx_fsm_parse(&fsm, "opened", &s), SBX_EINVAL);
  ck_assert_int_eq(sbx_fsm_parse(&fsm, NULL, &s), SBX_EINVAL);
}
END_TEST

START_TEST(test_step_and_refusal) {
  sbx_fsm_set_strict(0);
  ck_assert_int_eq(sbx_fsm_step(&fsm, T_NEW, T_OPEN, "a", __FILE__, __LINE__), 0);
  ck_assert_int_eq(sbx_fsm_step(&fsm, T_DONE, T_OPEN, "a", __FILE__, __LINE__), SBX_ESTATE);
  sbx_fsm_set_strict(1);
}
END_TEST

/* Strict mode: a refused step aborts (the forked test dies by SIGABRT). */
START_TEST(test_strict_aborts) {
  sbx_fsm_set_strict(1);
  sbx_fsm_step(&fsm, T_DONE, T_NEW, "b", __FILE__, __LINE__);
}
END_TEST

/* The trace names the transition and the caller's file and line. */
START_TEST(test_trace_line) {
  char path[] = "/tmp/sbx-fsm-XXXXXX";
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  ck_assert_ptr_nonnull(freopen(path, "w", stderr));
  sbx_log_set_level(SBX_LOG_TRACE);
  int line = __LINE__ + 1;
  ck_assert_int_eq(sbx_fsm_step(&fsm, T_NEW, T_OPEN, "c7", __FILE__, line), 0);
  sbx_fsm_step(&fsm, T_OPEN, T_OPEN, "c7", __FILE__, line); /* no change: not traced */
  fflush(stderr);
  FILE *f = fopen(path, "r");
  char buf[4096] = {0};
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  unlink(path);
  buf[n] = '\0';
  char want[128];
  snprintf(want, sizeof(want), "thing c7: new -> open (test_fsm.c:%d)", line);
  ck_assert_ptr_nonnull(strstr(buf, want));
  ck_assert_ptr_null(strstr(buf, "open -> open"));
}
END_TEST

START_TEST(test_invariant_holds) {
  struct obj o = {T_OPEN, 0};
  sbx_fsm_check_(&fsm, &o, o.state, "d", __FILE__, __LINE__); /* returns */
  o.state = T_DONE;
  o.result = 1;
  sbx_fsm_check_(&fsm, &o, o.state, "d", __FILE__, __LINE__);
}
END_TEST

START_TEST(test_invariant_broken_aborts) {
  struct obj o = {T_DONE, 0};
  sbx_fsm_check_(&fsm, &o, o.state, "e", __FILE__, __LINE__);
}
END_TEST

int main(void) {
  Suite *s = suite_create("fsm");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_table);
  tcase_add_test(tc, test_step_and_refusal);
  tcase_add_test_raise_signal(tc, test_strict_aborts, SIGABRT);
  tcase_add_test(tc, test_trace_line);
  tcase_add_test(tc, test_invariant_holds);
  tcase_add_test_raise_signal(tc, test_invariant_broken_aborts, SIGABRT);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
