/* test_json.c -- the API's JSON shapes (json.c): the run object has exactly docs/api.md's fields
 * (its code included) with the right nulls and defaults; stored JSON parts come back as JSON, bad
 * ones as defaults; the file object gives a path and code note only when mounted (and the note
 * only with execution on); the `run` event's payload; the UTF-8 walker. */
#include "internal.h"

#include <check.h>
#include <string.h>

static const char *run_fields[] = {
    "run_id",      "chat_id",     "turn_id",        "origin",           "state",
    "status",      "stdout",      "stderr",         "stdout_truncated", "stderr_truncated",
    "error",       "files",       "files_unlisted", "figures_dropped",  "notes",
    "restarted",   "remounted",   "attempts",       "created_at",       "started_at",
    "finished_at", "duration_ms", "value",          "displays",         "code"};

START_TEST(test_run_fields) {
  struct store_run r;
  memset(&r, 0, sizeof(r));
  strcpy(r.id, "r1");
  strcpy(r.chat_id, "c1");
  r.origin = "tool";
  r.state = "queued";
  r.code = "print(1)";
  r.created_at = 1000;
  json_t *j = orch__run_json(NULL, &r);
  ck_assert_uint_eq(json_object_size(j), SBX_ARRAY_SIZE(run_fields));
  ck_assert_str_eq(json_string_value(json_object_get(j, "code")), "print(1)");
  for (size_t i = 0; i < SBX_ARRAY_SIZE(run_fields); i++)
    ck_assert_msg(json_object_get(j, run_fields[i]) != NULL, "missing %s", run_fields[i]);
  ck_assert(json_is_null(json_object_get(j, "turn_id")));
  ck_assert(json_is_null(json_object_get(j, "status")));
  ck_assert(json_is_null(json_object_get(j, "error")));
  ck_assert(json_is_null(json_object_get(j, "started_at")));
  ck_assert(json_is_null(json_object_get(j, "duration_ms")));
  ck_assert_str_eq(json_string_value(json_object_get(j, "stdout")), "");
  ck_assert_uint_eq(json_array_size(json_object_get(j, "notes")), 0);
  ck_assert(json_is_null(json_object_get(j, "value")));
  ck_assert_uint_eq(json_array_size(json_object_get(j, "displays")), 0);
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
  r.value_json = "{\"text/plain\":\"42\",\"application/json\":42}";
  r.displays_json = "{\"not\":\"an array\"}";
  r.started_at = 1000;
  r.finished_at = 1250;
  strcpy(r.turn_id, "t1");
  json_t *j = orch__run_json(NULL, &r);
  ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "error"), "type")),
                   "ValueError");
  ck_assert_str_eq(json_string_value(json_array_get(json_object_get(j, "notes"), 0)),
                   "figure capture could not start");
  ck_assert(json_is_array(json_object_get(j, "remounted")));
  ck_assert_int_eq(json_integer_value(json_object_get(j, "duration_ms")), 250);
  ck_assert_str_eq(json_string_value(json_object_get(j, "turn_id")), "t1");
  json_t *value = json_object_get(j, "value");
  ck_assert_str_eq(json_string_value(json_object_get(value, "text/plain")), "42");
  ck_assert_int_eq(json_integer_value(json_object_get(value, "application/json")), 42);
  ck_assert(json_is_array(json_object_get(j, "displays")));
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
  json_t *on = orch__file_json(&f, 1), *off = orch__file_json(&f, 0);
  ck_assert_str_eq(json_string_value(json_object_get(on, "path")), "/mnt/data/report.pdf");
  ck_assert_str_eq(json_string_value(json_object_get(on, "code_note")),
                   "The file is available to code at /mnt/data/report.pdf (its latest version, if "
                   "it has been edited).");
  ck_assert(json_is_null(json_object_get(off, "code_note")));
  ck_assert_str_eq(json_string_value(json_object_get(off, "path")), "/mnt/data/report.pdf");
  json_decref(on);
  json_decref(off);
  f.mounted = 0;
  f.left_out_reason = (char *)ORCH_REASON_FILE_CAP;
  json_t *left = orch__file_json(&f, 1);
  ck_assert(json_is_null(json_object_get(left, "path")));
  ck_assert(json_is_null(json_object_get(left, "code_note")));
  ck_assert_str_eq(json_string_value(json_object_get(left, "left_out_reason")),
                   ORCH_REASON_FILE_CAP);
  json_decref(left);
}
END_TEST

/* A string field that is not UTF-8 is left out of the run object (json_string refuses it). */
START_TEST(test_run_not_utf8) {
  struct store_run r;
  memset(&r, 0, sizeof(r));
  r.state = "done";
  r.stdout_text = "bad \xc3\x28 utf8";
  json_t *j = orch__run_json(NULL, &r);
  ck_assert_ptr_null(json_object_get(j, "stdout"));
  ck_assert_str_eq(json_string_value(json_object_get(j, "state")), "done");
  char *text = orch__json_dump(j, NULL);
  ck_assert_ptr_nonnull(text);
  sbx_free(text);
  json_decref(j);
}
END_TEST

/* The `run` event: its fields in the order pages have always seen, each mount entry and each
 * left-out entry, a name that is not UTF-8 left out of its entry, no manifest as [] and []. */
START_TEST(test_dispatch_payload) {
  struct store_file files[3];
  memset(files, 0, sizeof(files));
  char *names[3] = {"sales.csv", "caf\xc3\xa9/\xe2\x98\x83.xlsx", "bad \xff name"};
  for (int i = 0; i < 3; i++) {
    snprintf(files[i].id, sizeof(files[i].id), "%032x", i + 1);
    files[i].name = names[i];
    files[i].version = i + 1;
    memset(files[i].sha256, 'a' + i, 64);
    files[i].size = (uint64_t)(i + 1) << 40;
  }
  struct orch_mount_entry me[3] = {{&files[0]}, {&files[1]}, {&files[2]}};
  struct orch_left_out lo[1] = {{&files[1], ORCH_REASON_FILE_CAP}};
  struct orch_manifest m = {.mounts = me, .n_mounts = 3, .left_out = lo, .n_left_out = 1};
  struct orch_runtime rt = {.input_wait_s = 300, .page_heartbeat_ms = 2000};
  json_t *j = orch__dispatch_json("r1", "c1", "pg", "print(1)", "tool", 30, 2, &m, 1, &rt);
  char *text = orch__json_dump(j, NULL);
  ck_assert_ptr_nonnull(text);
  ck_assert_str_eq(
      text,
      "{\"run_id\":\"r1\",\"chat_id\":\"c1\",\"page_id\":\"pg\",\"code\":\"print(1)\","
      "\"origin\":\"tool\",\"timeout_s\":30,\"attempt\":2,\"mounts\":["
      "{\"name\":\"sales.csv\",\"file_id\":\"00000000000000000000000000000001\",\"version\":1,"
      "\"sha256\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\",\"size\":"
      "1099511627776,"
      "\"url\":\"/v1/files/00000000000000000000000000000001\"},"
      "{\"name\":\"caf\xc3\xa9/"
      "\xe2\x98\x83.xlsx\",\"file_id\":\"00000000000000000000000000000002\",\"version\":2,"
      "\"sha256\":\"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\",\"size\":"
      "2199023255552,"
      "\"url\":\"/v1/files/00000000000000000000000000000002\"},"
      "{\"file_id\":\"00000000000000000000000000000003\",\"version\":3,"
      "\"sha256\":\"cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc\",\"size\":"
      "3298534883328,"
      "\"url\":\"/v1/files/00000000000000000000000000000003\"}],"
      "\"left_out\":[{\"name\":\"caf\xc3\xa9/\xe2\x98\x83.xlsx\",\"reason\":\"over the 20 MB "
      "per-file limit for mounted files\"}],"
      "\"limits\":{\"out_chars\":8000,\"files_listed\":200,\"figures\":20,\"file_load_bytes\":"
      "52428800,\"displays\":20,\"input_wait_s\":300},"
      "\"pypi\":true,\"heartbeat_ms\":2000}");
  sbx_free(text);
  json_decref(j);
  j = orch__dispatch_json("r1", "c1", "pg", "", "auto", 5, 1, NULL, 0, &rt);
  text = orch__json_dump(j, NULL);
  ck_assert_ptr_nonnull(strstr(text, "\"mounts\":[],\"left_out\":[]"));
  ck_assert_ptr_nonnull(strstr(text, "\"pypi\":false,"));
  sbx_free(text);
  json_decref(j);
}
END_TEST

/* The one UTF-8 walker: each length of character, its code point, a string's characters. */
START_TEST(test_utf8_next) {
  static const struct {
    const char *s;
    size_t len;
    uint32_t cp;
  } one[] = {
      {"a", 1, 'a'},
      {"\x7f", 1, 0x7F},
      {"\xc2\x80", 2, 0x80},
      {"\xc3\xa9", 2, 0xE9},
      {"\xe2\x80\xa8", 3, 0x2028},
      {"\xe6\xbc\xa2", 3, 0x6F22},
      {"\xf0\x9f\x98\x80", 4, 0x1F600},
      {"\xf4\x8f\xbf\xbf", 4, 0x10FFFF},
  };
  for (size_t i = 0; i < SBX_ARRAY_SIZE(one); i++) {
    uint32_t cp = 0;
    ck_assert_uint_eq(orch__utf8_next(one[i].s, strlen(one[i].s), &cp), one[i].len);
    ck_assert_uint_eq(cp, one[i].cp);
    ck_assert_uint_eq(orch__utf8_next(one[i].s, strlen(one[i].s), NULL), one[i].len);
  }
  const char *text = "x\xc3\xa9\xe2\x98\x83\xf0\x9f\x98\x80y";
  size_t len = strlen(text), chars = 0;
  for (size_t i = 0; i < len; chars++)
    i += orch__utf8_next(text + i, len - i, NULL);
  ck_assert_uint_eq(chars, 5);
  ck_assert_uint_eq(orch__utf8_next("\xe2\x98", 2, NULL), 2); /* cut short: never past the end */
}
END_TEST

int main(void) {
  Suite *s = suite_create("json");
  TCase *tc = tcase_create("shapes");
  tcase_add_test(tc, test_run_fields);
  tcase_add_test(tc, test_run_stored_parts);
  tcase_add_test(tc, test_file_json);
  tcase_add_test(tc, test_run_not_utf8);
  tcase_add_test(tc, test_dispatch_payload);
  tcase_add_test(tc, test_utf8_next);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
