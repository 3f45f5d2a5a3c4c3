/* test_api_reply.c -- the error map (http/api_reply.c): what each sbx code answers with, per
 * operation where the API words a code its own way, and every code it can answer is one
 * docs/openapi.yaml lists (the integration tests validate the answers they meet; this checks the
 * ones they cannot provoke, a store that fails, memory that runs out). */
#include "http/api_reply.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

START_TEST(test_rows) {
  static const struct {
    int rc;
    enum orch_api_op op;
    int status;
    const char *code;
  } want[] = {
      {SBX_ENOENT, ORCH_OP_ANY, 404, "not_found"},
      {SBX_ENOENT, ORCH_OP_STORE, 404, "not_found"},
      {SBX_ENOENT, ORCH_OP_MSG_CURSOR, 400, "invalid_field"},
      {SBX_ENAME, ORCH_OP_STORE, 400, "invalid_name"},
      {SBX_EINVAL, ORCH_OP_ANY, 400, "invalid_field"},
      {SBX_ESTATE, ORCH_OP_ANY, 409, "conflict"},
      {SBX_ESTATE, ORCH_OP_INPUT, 409, "not_waiting"},
      {SBX_ESTATE, ORCH_OP_TURN_STOP, 409, "turn_finished"},
      {SBX_EEXIST, ORCH_OP_STORE, 409, "conflict"},
      {SBX_EBUSY, ORCH_OP_ANY, 503, "unavailable"},
      {SBX_EBUSY, ORCH_OP_ASK, 409, "turn_open"},
      {SBX_EBUSY, ORCH_OP_PAGE_FILE, 503, "busy"},
      {SBX_EFULL, ORCH_OP_STORE, 413, "over_quota"},
      {SBX_EFULL, ORCH_OP_PAGE_FILE, 413, "too_many_files"},
      {SBX_EREMOTE, ORCH_OP_ANY, 503, "unavailable"},
      {SBX_EAGAIN, ORCH_OP_ANY, 503, "unavailable"},
      /* the server's faults: where the store failed, and anything else */
      {SBX_EIO, ORCH_OP_STORE, 500, "storage"},
      {SBX_EDB, ORCH_OP_STORE, 500, "storage"},
      {SBX_ENOMEM, ORCH_OP_STORE, 500, "storage"},
      {SBX_ENOMEM, ORCH_OP_ANY, 500, "internal"},
      {SBX_EDB, ORCH_OP_INPUT, 500, "internal"},
      {SBX_EINPROGRESS, ORCH_OP_ANY, 500, "internal"}, /* not a failure: no caller answers it */
  };
  for (size_t i = 0; i < SBX_ARRAY_SIZE(want); i++) {
    struct orch_api_fault f = orch__api_fault(want[i].rc, want[i].op);
    ck_assert_msg(f.status == want[i].status && strcmp(f.code, want[i].code) == 0,
                  "%s in op %d: %d %s, not %d %s", sbx_errname(want[i].rc), (int)want[i].op,
                  f.status, f.code, want[i].status, want[i].code);
  }
}
END_TEST

/* Every code of every operation is among docs/openapi.yaml's ErrorCode. */
START_TEST(test_codes_documented) {
  FILE *f = fopen(SBX_SOURCE_DIR "/docs/openapi.yaml", "r");
  ck_assert_ptr_nonnull(f);
  static char doc[1 << 20];
  size_t n = fread(doc, 1, sizeof(doc) - 1, f);
  fclose(f);
  doc[n] = '\0';
  const char *codes = strstr(doc, "ErrorCode:");
  ck_assert_ptr_nonnull(codes);
  codes = strstr(codes, "enum: [");
  ck_assert_ptr_nonnull(codes);
  const char *end = strchr(codes, ']');
  ck_assert_ptr_nonnull(end);
  for (int rc = -1; strcmp(sbx_errname(rc), "EUNKNOWN") != 0; rc--)
    for (int op = 0; op < ORCH_OP__COUNT; op++) {
      const char *code = orch__api_fault(rc, (enum orch_api_op)op).code;
      char word[64];
      int found = 0;
      for (const char *p = codes + 7; p < end;) {
        size_t l = strcspn(p, ", \n]");
        if (l > 0 && l < sizeof(word)) {
          memcpy(word, p, l);
          word[l] = '\0';
          found |= strcmp(word, code) == 0;
        }
        p += l ? l : 1;
      }
      ck_assert_msg(found, "%s (%s in op %d) is not in openapi.yaml's ErrorCode", code,
                    sbx_errname(rc), op);
    }
}
END_TEST

int main(void) {
  Suite *s = suite_create("api_reply");
  TCase *tc = tcase_create("map");
  tcase_add_test(tc, test_rows);
  tcase_add_test(tc, test_codes_documented);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
