/* test_json.c -- the API's JSON shapes (json.c): the run object has exactly DESIGN's fields with
 * the right nulls and defaults; stored JSON parts come back as JSON, bad ones as defaults; the
 * file object gives a path and code note only when mounted (and the note only with execution on). */
#include "internal.h"

#include <check.h>
#include <string.h>

static const char *run_fields[] = {
    "run_id", "chat_id", "turn_id", "origin", "state", "status", "stdout", "stderr",
    "stdout_truncated", "stderr_truncated", "error", "files", "files_unlisted", "figures_dropped",
    "notes", "restarted", "remounted", "attempts", "created_at", "started_at", "finished_at",
    "duration_ms"};

START_TEST(test_run_fields) {
  struct store_run r;
  memset(&r, 0, sizeof(r));
  strcpy(r.id, "r1");
  strcpy(r.chat_id, "c1");
  r.origin = "tool";
  r.state = "queued";
  r.created_at = 1000;
  json_t *j = orch_run_json(NULL, &r);
  ck_assert_uint_eq(json_object_size(j), SBX_ARRAY_SIZE(run_fields));
  for (size_t i = 0; i < SBX_ARRAY_SIZE(run_fields); i++)
    ck_assert_msg(json_object_get(j, run_fields[i]) != NULL, "missing %s", run_fields[i]);
  ck_assert(json_is_null(json_object_get(j, "turn_id")));
  ck_assert(json_is_null(json_object_get(j, "status")));
  ck_assert(json_is_null(json_object_get(j, "error")));
  ck_assert(json_is_null(json_object_get(j, "started_at")));
  ck_assert(json_is_null(json_object_get(j, "duration_ms")));
  ck_assert_str_eq(json_string_value(json_object_get(j, "stdout")), "");
  ck_assert_uint_eq(json_array_size(json_object_get(j, "notes")), 0);
  json_decref(j);
}
END_TEST

START_TEST(test_run_stored_parts) {
  struct store_run r;
  memset(&r, 0, sizeof(r));
  r.state = "done";
  r.status = "error";
  r.error_json = "{\"type\":\"ValueError\",\"message\":\"bad\",\"traceback\":\"tb\"}";
  r.notes_json = "[\"figure capture could not start\"]";
  r.remounted_json = "not json"; /* a damaged part falls back to the default */
  r.started_at = 1000;
  r.finished_at = 1250;
  strcpy(r.turn_id, "t1");
  json_t *j = orch_run_json(NULL, &r);
  ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "error"), "type")), "ValueError");
  ck_assert_str_eq(json_string_value(json_array_get(json_object_get(j, "notes"), 0)), "figure capture could not start");
  ck_assert(json_is_array(json_object_get(j, "remounted")));
  ck_assert_int_eq(json_integer_value(json_object_get(j, "duration_ms")), 250);
  ck_assert_str_eq(json_string_value(json_object_get(j, "turn_id")), "t1");
  json_decref(j);
}
END_TEST

START_TEST(test_file_json) {
  struct store_file f;
  memset(&f, 0, sizeof(f));
  strcpy(f.id, "f1");
  f.name = "report.pdf";
  f.version = 1;
  f.mounted = 1;
  json_t *on = orch_file_json(&f, 1), *off = orch_file_json(&f, 0);
  ck_assert_str_eq(json_string_value(json_object_get(on, "path")), "/mnt/data/report.pdf");
  ck_assert_str_eq(json_string_value(json_object_get(on, "code_note")),
                   "The file is available to code at /mnt/data/report.pdf (its latest version, if it has been edited).");
  ck_assert(json_is_null(json_object_get(off, "code_note")));
  ck_assert_str_eq(json_string_value(json_object_get(off, "path")), "/mnt/data/report.pdf");
  json_decref(on);
  json_decref(off);
  f.mounted = 0;
  f.left_out_reason = (char *)ORCH_REASON_FILE_CAP;
  json_t *left = orch_file_json(&f, 1);
  ck_assert(json_is_null(json_object_get(left, "path")));
  ck_assert(json_is_null(json_object_get(left, "code_note")));
  ck_assert_str_eq(json_string_value(json_object_get(left, "left_out_reason")), ORCH_REASON_FILE_CAP);
  json_decref(left);
}
END_TEST

int main(void) {
  Suite *s = suite_create("json");
  TCase *tc = tcase_create("shapes");
  tcase_add_test(tc, test_run_fields);
  tcase_add_test(tc, test_run_stored_parts);
  tcase_add_test(tc, test_file_json);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
