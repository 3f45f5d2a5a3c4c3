/* test_bundle.c -- the MIME bundles of a value or display() (bundle.c): which objects are bundles
 * (table-driven, each refusal with its reason), and how one is kept: text/plain cut at 8,000
 * characters, rich parts kept within a bundle's bound and the run's budget, else text only with a
 * note naming the bundle. */
#include "internal.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

START_TEST(test_valid) {
  static const struct {
    const char *json;
    int ok;
    const char *why; /* part of the reason */
  } cases[] = {
      {"{\"text/plain\": \"42\"}", 1, NULL},
      {"{\"text/plain\": \"x\", \"text/html\": \"<b>x</b>\", \"image/png\": \"iVBOR\"}", 1, NULL},
      {"{\"text/plain\": \"{}\", \"application/json\": {\"a\": [1, 2]}}", 1, NULL},
      {"{\"text/plain\": \"1\", \"application/json\": 1}", 1, NULL},
      {"{\"text/plain\": \"\", \"application/vnd.custom+json\": \"x\"}", 1, NULL},
      {"[\"text/plain\"]", 0, "an object"},
      {"\"42\"", 0, "an object"},
      {"{}", 0, "text/plain"},
      {"{\"text/html\": \"<b>\"}", 0, "text/plain"},
      {"{\"text/plain\": 42}", 0, "text/plain"},
      {"{\"text/plain\": \"x\", \"text/html\": 1}", 0, "strings"},
      {"{\"text/plain\": \"x\", \"image/png\": null}", 0, "strings"},
      {"{\"text/plain\": \"x\", \"not a type\": \"y\"}", 0, "MIME types"},
      {"{\"text/plain\": \"x\", \"text/\": \"y\"}", 0, "MIME types"},
      {"{\"text/plain\": \"x\", \"/html\": \"y\"}", 0, "MIME types"},
      {"{\"text/plain\": \"x\", \"texthtml\": \"y\"}", 0, "MIME types"},
  };
  for (size_t i = 0; i < SBX_ARRAY_SIZE(cases); i++) {
    json_t *b = json_loads(cases[i].json, JSON_DECODE_ANY, NULL);
    ck_assert_ptr_nonnull(b);
    char why[160] = "";
    int rc = orch__bundle_valid(b, why, sizeof(why));
    ck_assert_msg((rc == 0) == cases[i].ok, "%s: rc %d (%s)", cases[i].json, rc, why);
    if (!cases[i].ok) {
      ck_assert_int_eq(rc, SBX_EINVAL);
      ck_assert_msg(strstr(why, cases[i].why) != NULL, "%s: %s", cases[i].json, why);
    }
    json_decref(b);
  }
  json_t *many = json_object(); /* at most 16 MIME types */
  json_object_set_new(many, "text/plain", json_string("x"));
  for (int i = 0; i < 16; i++) {
    char k[32];
    snprintf(k, sizeof(k), "text/x-%d", i);
    json_object_set_new(many, k, json_string("y"));
  }
  char why[160];
  ck_assert_int_eq(orch__bundle_valid(many, why, sizeof(why)), SBX_EINVAL);
  json_decref(many);
}
END_TEST

/* A string of n copies of c (n bytes). */
static json_t *str_n(char c, size_t n) {
  char *s = malloc(n + 1);
  memset(s, c, n);
  s[n] = '\0';
  json_t *j = json_stringn(s, n);
  free(s);
  return j;
}

START_TEST(test_keep) {
  json_t *notes = json_array();
  size_t budget = ORCH_SHOWN_BYTES;
  /* within the bounds: kept whole, the budget taken */
  json_t *b = json_pack("{s:s, s:s, s:{s:i}}", "text/plain", "df", "text/html", "<table/>",
                        "application/json", "a", 1);
  json_t *k = orch__bundle_keep(b, &budget, "display 1", notes);
  ck_assert(json_equal(k, b));
  ck_assert_uint_eq(budget, ORCH_SHOWN_BYTES - strlen("<table/>") - strlen("{\"a\":1}"));
  ck_assert_uint_eq(json_array_size(notes), 0);
  json_decref(k);
  json_decref(b);
  /* text/plain past 8,000 characters (code points): cut, noted */
  size_t before = budget;
  b = json_object();
  json_object_set_new(b, "text/plain", str_n('x', 9000));
  k = orch__bundle_keep(b, &budget, "the value", notes);
  ck_assert_uint_eq(json_string_length(json_object_get(k, "text/plain")), ORCH_OUT_CHARS);
  ck_assert_uint_eq(budget, before); /* text/plain takes nothing of the budget */
  ck_assert_ptr_nonnull(strstr(json_string_value(json_array_get(notes, 0)), "the value"));
  json_decref(k);
  json_decref(b);
  /* a rich part past ORCH_BUNDLE_BYTES: text only, noted */
  b = json_pack("{s:s}", "text/plain", "<Figure>");
  json_object_set_new(b, "image/png", str_n('A', ORCH_BUNDLE_BYTES + 1));
  k = orch__bundle_keep(b, &budget, "display 2", notes);
  ck_assert_uint_eq(json_object_size(k), 1);
  ck_assert_str_eq(json_string_value(json_object_get(k, "text/plain")), "<Figure>");
  ck_assert_uint_eq(budget, before);
  const char *n = json_string_value(json_array_get(notes, 1));
  ck_assert_msg(strstr(n, "display 2: shown as text only") && strstr(n, "256 KiB"), "%s", n);
  json_decref(k);
  json_decref(b);
  /* within a bundle's bound but past what the run has left: text only too */
  budget = 1000;
  b = json_pack("{s:s}", "text/plain", "p");
  json_object_set_new(b, "text/html", str_n('h', 1001));
  k = orch__bundle_keep(b, &budget, "display 3", notes);
  ck_assert_ptr_null(json_object_get(k, "text/html"));
  ck_assert_uint_eq(budget, 1000);
  ck_assert_ptr_nonnull(strstr(json_string_value(json_array_get(notes, 2)), "1024 KiB"));
  json_decref(k);
  /* ... and one that fits what is left takes it */
  json_object_set_new(b, "text/html", str_n('h', 1000));
  k = orch__bundle_keep(b, &budget, "display 4", NULL); /* notes not wanted */
  ck_assert_ptr_nonnull(json_object_get(k, "text/html"));
  ck_assert_uint_eq(budget, 0);
  json_decref(k);
  json_decref(b);
  ck_assert_uint_eq(json_array_size(notes), 3);
  json_decref(notes);
}
END_TEST

int main(void) {
  Suite *s = suite_create("bundle");
  TCase *tc = tcase_create("bundles");
  tcase_add_test(tc, test_valid);
  tcase_add_test(tc, test_keep);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
