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
  json_t *j = orch__run_json(NULL, &r);
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
  json_t *j = orch__run_json(NULL, &r);
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
  json_t *on = orch__file_json(&f, 1), *off = orch__file_json(&f, 0);
  ck_assert_str_eq(json_string_value(json_object_get(on, "path")), "/mnt/data/report.pdf");
  ck_assert_str_eq(json_string_value(json_object_get(on, "code_note")),
                   "The file is available to code at /mnt/data/report.pdf (its latest version, if it has been edited).");
  ck_assert(json_is_null(json_object_get(off, "code_note")));
  ck_assert_str_eq(json_string_value(json_object_get(off, "path")), "/mnt/data/report.pdf");
  json_decref(on);
  json_decref(off);
  f.mounted = 0;
  f.left_out_reason = (char *)ORCH_REASON_FILE_CAP;
  json_t *left = orch__file_json(&f, 1);
  ck_assert(json_is_null(json_object_get(left, "path")));
  ck_assert(json_is_null(json_object_get(left, "code_note")));
  ck_assert_str_eq(json_string_value(json_object_get(left, "left_out_reason")), ORCH_REASON_FILE_CAP);
  json_decref(left);
}
END_TEST

/* orch__json_dump writes byte for byte what json_dumps(COMPACT | ENCODE_ANY) writes: a table of
 * values (escapes, every control character, UTF-8 of each length, embedded NUL, integers at the
 * limits, reals, nesting, empty containers, insertion order); a string that is not UTF-8 gives
 * NULL from both. */
START_TEST(test_dump_matches_jansson) {
  static const char *texts[] = {
      "null", "true", "false", "0", "-1", "9223372036854775807", "-9223372036854775808", "1.5",
      "-0.25", "1e300", "3.0", "\"\"", "\"plain\"", "\"q\\\"uote\\\\back/slash\"",
      "\"\\b\\f\\n\\r\\t\\u0001\\u001f\\u007f\"", "\"caf\\u00e9 \\u6f22 \\ud83d\\ude00\"",
      "\"nul\\u0000inside\"", "[]", "{}", "[[],{},[1,[2,[3]]]]",
      "{\"z\":1,\"a\":[true,null,\"x\"],\"m\":{\"k\":\"v\",\"\\n\":\"\\u2028\"}}",
      "{\"run_id\":\"abc\",\"limits\":{\"out_chars\":200000,\"figures\":20},\"mounts\":[]}",
      "{\"b\":1,\"ab\":2,\"a\":{\"z\":[{\"y\":1,\"x\":2}],\"\":0,\"A\":1},\"\u00e9\":3,\"e\":4,\"a b\":5}",
      "{\"status\":\"ok\",\"attempt\":1,\"stdout\":\"\",\"stderr\":\"\",\"files\":[],\"notes\":[\"n\"]}",
  };
  for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
    json_error_t e;
    json_t *j = json_loads(texts[i], JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
    ck_assert_msg(j != NULL, "parse %s: %s", texts[i], e.text);
    char *want = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
    size_t len = 0;
    char *got = orch__json_dump(j, &len);
    ck_assert_ptr_nonnull(want);
    ck_assert_ptr_nonnull(got);
    ck_assert_str_eq(got, want);
    ck_assert_uint_eq(len, strlen(want));
    free(want);
    sbx_free(got);
    /* sorted keys: the canonical form the result hash is taken over */
    want = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    got = orch__json_dump_sorted(j, &len);
    ck_assert_str_eq(got, want);
    ck_assert_uint_eq(len, strlen(want));
    free(want);
    sbx_free(got);
    json_decref(j);
  }
  /* every byte value as a one-character string (all controls escaped the same way) */
  for (int c = 1; c < 0x80; c++) {
    char one[2] = {(char)c, 0};
    json_t *j = json_string(one);
    char *want = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
    char *got = orch__json_dump(j, NULL);
    ck_assert_str_eq(got, want);
    free(want);
    sbx_free(got);
    json_decref(j);
  }
  /* not UTF-8 (overlong, surrogate, truncated, stray continuation): NULL like jansson */
  static const char *bad[] = {"\xc0\xaf", "\xed\xa0\x80", "\xe6\x8a", "\x80x", "\xf5\x80\x80\x80"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    json_t *j = json_stringn_nocheck(bad[i], strlen(bad[i]));
    char *want = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
    ck_assert_ptr_null(want);
    ck_assert_ptr_null(orch__json_dump(j, NULL));
    json_decref(j);
  }
  ck_assert_ptr_null(orch__json_dump(NULL, NULL));
  /* 2,000 random strings of random code points (controls, ASCII, 2-, 3- and 4-byte UTF-8) */
  unsigned seed = 12345;
  for (int k = 0; k < 2000; k++) {
    char buf[256];
    size_t n = 0;
    for (int m = 0; m < 40; m++) {
      seed = seed * 1103515245u + 12345u;
      unsigned r = (seed >> 8) % 5, cp;
      seed = seed * 1103515245u + 12345u;
      unsigned x = seed >> 4;
      cp = r == 0 ? 1 + x % 0x1f : r == 1 ? 0x20 + x % 0x60 : r == 2 ? 0x80 + x % 0x780
         : r == 3 ? 0x800 + x % 0xF7FF : 0x10000 + x % 0x100000;
      if (cp >= 0xD800 && cp <= 0xDFFF)
        cp = 'x';
      if (cp < 0x80) buf[n++] = (char)cp;
      else if (cp < 0x800) { buf[n++] = (char)(0xC0 | cp >> 6); buf[n++] = (char)(0x80 | (cp & 63)); }
      else if (cp < 0x10000) { buf[n++] = (char)(0xE0 | cp >> 12); buf[n++] = (char)(0x80 | ((cp >> 6) & 63)); buf[n++] = (char)(0x80 | (cp & 63)); }
      else { buf[n++] = (char)(0xF0 | cp >> 18); buf[n++] = (char)(0x80 | ((cp >> 12) & 63)); buf[n++] = (char)(0x80 | ((cp >> 6) & 63)); buf[n++] = (char)(0x80 | (cp & 63)); }
    }
    json_t *j = json_pack("{s:s%, s:[i]}", "k", buf, n, "n", k - 1000);
    ck_assert_ptr_nonnull(j);
    char *want = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
    char *got = orch__json_dump(j, NULL);
    ck_assert_str_eq(got, want);
    free(want);
    sbx_free(got);
    json_decref(j);
  }
}
END_TEST

/* orch__run_text is orch__json_dump(orch__run_json()) byte for byte: nulls and defaults, escapes,
 * stored parts valid / invalid / of the wrong type, timestamps, a string that is not UTF-8
 * (left out by both). */
START_TEST(test_run_text_matches_tree) {
  struct { const char *turn, *origin, *state, *status, *out, *err_json, *notes, *rem; int64_t c, s, f; int flags; } rows[] = {
      {"", NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, 0, 0, 0},
      {"t1", "tool", "queued", NULL, "", NULL, NULL, NULL, 1700000000000, 0, 0, 0},
      {"", "auto", "done", "ok", "hi \"there\"\n\t\x01 caf\xc3\xa9 \xf0\x9f\x98\x80", "null", "[\"a\",\"b\\n\"]",
       "[\"x.csv\"]", 1, 2, 5, 7},
      {"", "user", "done", "error", "x", "{\"type\":\"ZeroDivisionError\",\"message\":\"m\",\"traceback\":null}",
       "{\"not\":\"an array\"}", "not json", 10, 20, 30, 1},
      {"", "tool", "done", "timeout", "bad \xc3\x28 utf8", "42", "[]", "[1.5, true]", -5, 0, 9, 2},
      {"", "tool", "done", "crashed", "\\back\\slash/", "{ \"spaced\" : [ 1 , 2 ] }", "", "[{\"k\":null}]", 3, 4, 0, 4},
      {"", "tool", "done", "ok", "", "[]", "[]", "[]", 1, 2, 3, 0},
      {"t2", "bad \xff origin", "done", "\xc3", "x\xed\xa0\x80y", "[] ", " []", "[ ]", 1, 2, 3, 0},
      {"", "tool\xf0", "queued\xc0\xaf", NULL, "\xf4\x90\x80\x80", "[]x", "[", "[]]", 0, 0, 0, 7},
  };
  for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
    struct store_run r;
    memset(&r, 0, sizeof(r));
    snprintf(r.id, sizeof(r.id), "r%031zu", i);
    snprintf(r.chat_id, sizeof(r.chat_id), "c%031zu", i);
    snprintf(r.turn_id, sizeof(r.turn_id), "%s", rows[i].turn);
    r.origin = (char *)rows[i].origin;
    r.state = (char *)rows[i].state;
    r.status = (char *)rows[i].status;
    r.stdout_text = (char *)rows[i].out;
    r.stderr_text = (char *)(i % 2 ? "err" : NULL);
    r.error_json = (char *)rows[i].err_json;
    r.notes_json = (char *)rows[i].notes;
    r.remounted_json = (char *)rows[i].rem;
    r.created_at = rows[i].c;
    r.started_at = rows[i].s;
    r.finished_at = rows[i].f;
    r.stdout_truncated = rows[i].flags & 1;
    r.stderr_truncated = (rows[i].flags >> 1) & 1;
    r.restarted = (rows[i].flags >> 2) & 1;
    r.files_unlisted = (int)i;
    r.figures_dropped = (int)(i * 3);
    r.attempts = (int)i + 1;
    json_t *j = orch__run_json(NULL, &r);
    size_t wl = 0, gl = 0;
    char *want = orch__json_dump(j, &wl);
    char *got = orch__run_text(NULL, &r, &gl);
    ck_assert_ptr_nonnull(want);
    ck_assert_ptr_nonnull(got);
    ck_assert_str_eq(got, want);
    ck_assert_uint_eq(gl, wl);
    if (i == 4)
      ck_assert_ptr_null(strstr(got, "\"stdout\"")); /* not UTF-8: left out, as by the tree */
    sbx_free(want);
    sbx_free(got);
    json_decref(j);
  }
}
END_TEST

/* The `run` event's payload as the jansson tree it used to be, dumped by jansson itself: the
 * reference orch__dispatch_text must equal byte for byte.  Steals mounts and left (NULL: []). */
static char *dispatch_want(const char *code, const char *origin, int timeout_s, int attempt,
                           json_t *mounts, json_t *left, int pypi, size_t *len) {
  json_t *j = json_object();
  json_object_set_new(j, "run_id", json_string("r1"));
  json_object_set_new(j, "chat_id", json_string("c1"));
  json_object_set_new(j, "page_id", json_string("pg"));
  json_object_set_new(j, "code", json_string(code));
  json_object_set_new(j, "origin", json_string(origin));
  json_object_set_new(j, "timeout_s", json_integer(timeout_s));
  json_object_set_new(j, "attempt", json_integer(attempt));
  json_object_set_new(j, "mounts", mounts ? mounts : json_array());
  json_object_set_new(j, "left_out", left ? left : json_array());
  json_t *lim = json_object();
  json_object_set_new(lim, "out_chars", json_integer(ORCH_OUT_CHARS));
  json_object_set_new(lim, "files_listed", json_integer(ORCH_FILES_LISTED));
  json_object_set_new(lim, "figures", json_integer(ORCH_FIGURES));
  json_object_set_new(lim, "file_load_bytes", json_integer(ORCH_UPLOAD_MAX));
  json_object_set_new(j, "limits", lim);
  json_object_set_new(j, "pypi", json_boolean(pypi));
  char *text = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
  json_decref(j);
  ck_assert_ptr_nonnull(text);
  *len = strlen(text);
  return text;
}

/* Without files: codes with escapes, non-ASCII and invalid UTF-8 (json_string refuses it: the
 * field is left out, as the tree did), pypi on and off. */
START_TEST(test_dispatch_text_matches_tree) {
  const char *codes[] = {"pass", "print(\"a\\tb\")\n# caf\xc3\xa9", "", "bad \xff code"};
  for (size_t i = 0; i < 4; i++) {
    size_t wl = 0, gl = 0;
    char *want = dispatch_want(codes[i], "auto", 30, (int)i + 1, NULL, NULL, i != 2, &wl);
    char *got = orch__dispatch_text("r1", "c1", "pg", codes[i], "auto", 30, (int)i + 1, NULL,
                                   i != 2, &gl);
    ck_assert_str_eq(got, want);
    ck_assert_uint_eq(gl, wl);
    free(want);
    sbx_free(got);
  }
}
END_TEST

/* The manifest trees chat.c built for the `run` event before it was rendered straight to text
 * (the reference), for names with quotes, controls and non-ASCII, a name that is not UTF-8 and a
 * NULL name (both left out of the entry, as json_string makes them), sizes past 2^53 and 2^63,
 * empty manifests. */
static void manifest_trees(const struct orch_manifest *m, json_t **mounts, json_t **left) {
  *mounts = json_array();
  *left = json_array();
  for (size_t i = 0; i < m->n_mounts; i++) {
    const struct store_file *f = m->mounts[i].file;
    char url[80];
    snprintf(url, sizeof(url), "/v1/files/%s", f->id);
    json_t *e = json_object();
    json_object_set_new(e, "name", json_string(f->name));
    json_object_set_new(e, "file_id", json_string(f->id));
    json_object_set_new(e, "version", json_integer(f->version));
    json_object_set_new(e, "sha256", json_string(f->sha256));
    json_object_set_new(e, "size", json_integer((json_int_t)f->size));
    json_object_set_new(e, "url", json_string(url));
    json_array_append_new(*mounts, e);
  }
  for (size_t i = 0; i < m->n_left_out; i++) {
    json_t *e = json_object();
    json_object_set_new(e, "name", json_string(m->left_out[i].file->name));
    json_object_set_new(e, "reason", json_string(m->left_out[i].reason));
    json_array_append_new(*left, e);
  }
}

START_TEST(test_dispatch_manifest_matches_tree) {
  static struct store_file files[6];
  char *names[6] = {"sales.csv", "a \"quoted\"\\name\t.txt", "caf\xc3\xa9/\xe2\x98\x83.xlsx",
                    "bad \xff name", NULL, "x"};
  uint64_t sizes[6] = {0, 12345, (1ull << 53) + 1, 1ull << 63, 7, UINT64_MAX};
  for (int i = 0; i < 6; i++) {
    memset(&files[i], 0, sizeof(files[i]));
    snprintf(files[i].id, sizeof(files[i].id), "%032x", i * 7919);
    files[i].name = names[i];
    files[i].version = i == 5 ? 2147483647 : i + 1;
    memset(files[i].sha256, 'a' + i, 64);
    files[i].size = sizes[i];
  }
  struct orch_mount_entry me[6];
  struct orch_left_out lo[6];
  for (int i = 0; i < 6; i++) {
    me[i].file = &files[i];
    lo[i].file = &files[5 - i];
    lo[i].reason = i % 2 ? ORCH_REASON_FILE_CAP : ORCH_REASON_TOTAL_CAP;
  }
  for (size_t nm = 0; nm <= 6; nm += 2)
    for (size_t nl = 0; nl <= 6; nl += 3) {
      struct orch_manifest m = {.mounts = me, .n_mounts = nm, .left_out = lo, .n_left_out = nl};
      json_t *mounts, *left;
      manifest_trees(&m, &mounts, &left);
      size_t wl = 0, gl = 0;
      char *want = dispatch_want("print(1)", "tool", 30, 2, mounts, left, 1, &wl);
      char *got = orch__dispatch_text("r1", "c1", "pg", "print(1)", "tool", 30, 2, &m, 1, &gl);
      ck_assert_str_eq(got, want);
      ck_assert_uint_eq(gl, wl);
      free(want);
      sbx_free(got);
    }
  /* no manifest at all: [] and [] as before */
  size_t wl = 0, gl = 0;
  char *want = dispatch_want("", "auto", 5, 1, NULL, NULL, 0, &wl);
  char *got = orch__dispatch_text("r1", "c1", "pg", "", "auto", 5, 1, NULL, 0, &gl);
  ck_assert_str_eq(got, want);
  ck_assert_uint_eq(gl, wl);
  ck_assert_ptr_nonnull(strstr(got, "\"mounts\":[],\"left_out\":[]"));
  free(want);
  sbx_free(got);
}
END_TEST

/* The printf-free helpers of internal.h write exactly what snprintf writes. */
START_TEST(test_text_helpers) {
  const long long nums[] = {0, 1, -1, 9, 10, -10, 123456789, 4294967296LL, -4294967297LL,
                            9223372036854775807LL, -9223372036854775807LL - 1};
  for (size_t i = 0; i < SBX_ARRAY_SIZE(nums); i++) {
    char a[24], b[24];
    size_t n = orch__fmt_i64(a, nums[i]);
    int m = snprintf(b, sizeof(b), "%lld", nums[i]);
    ck_assert_str_eq(a, b);
    ck_assert_uint_eq(n, (size_t)m);
  }
  const char *strs[] = {"", "a", "0123456789abcdef0123456789abcdef", "0123456789abcdef0123456789abcdef0",
                        "cancel", "a-type-name-longer-than-16"};
  for (size_t i = 0; i < SBX_ARRAY_SIZE(strs); i++)
    for (size_t cap = 1; cap <= 40; cap++) {
      char a[48], b[48];
      memset(a, 'x', sizeof(a));
      memset(b, 'x', sizeof(b));
      orch__strcpy_cap(a, cap, strs[i]);
      snprintf(b, cap, "%s", strs[i]);
      ck_assert_int_eq(memcmp(a, b, sizeof(a)), 0); /* nothing written past cap either */
    }
}
END_TEST

/* orch__api_fields finds what json_object_get finds, name by name: absent names, names that are
 * prefixes of keys or keys of them, the empty key, and keys with an embedded NUL (set with
 * json_object_setn: never equal to the name before the NUL). */
START_TEST(test_api_fields) {
  json_t *o = json_object();
  json_object_set_new(o, "codex", json_string("1"));
  json_object_set_new(o, "cod", json_string("2"));
  json_object_set_new(o, "", json_string("3"));
  json_object_setn_new(o, "wait_s\0x", 8, json_string("4"));
  json_object_set_new(o, "origin", json_string("5"));
  json_object_set_new(o, "turn_id", json_null());
  const char *const names[] = {"code", "codex", "cod", "", "wait_s", "origin", "turn_id", "absent", "co"};
  json_t *out[SBX_ARRAY_SIZE(names)];
  orch__api_fields(o, names, out, SBX_ARRAY_SIZE(names));
  for (size_t i = 0; i < SBX_ARRAY_SIZE(names); i++)
    ck_assert_msg(out[i] == json_object_get(o, names[i]), "%s", names[i]);
  ck_assert_ptr_null(out[0]);
  ck_assert_ptr_null(out[4]); /* "wait_s\0x" is not wait_s */
  ck_assert_str_eq(json_string_value(out[1]), "1");
  ck_assert_str_eq(json_string_value(out[3]), "3");
  ck_assert(json_is_null(out[6]));
  json_t *empty = json_object();
  orch__api_fields(empty, names, out, SBX_ARRAY_SIZE(names));
  for (size_t i = 0; i < SBX_ARRAY_SIZE(names); i++)
    ck_assert_ptr_null(out[i]);
  json_decref(empty);
  json_decref(o);
}
END_TEST

int main(void) {
  Suite *s = suite_create("json");
  TCase *tc = tcase_create("shapes");
  tcase_add_test(tc, test_run_fields);
  tcase_add_test(tc, test_run_stored_parts);
  tcase_add_test(tc, test_file_json);
  tcase_add_test(tc, test_dump_matches_jansson);
  tcase_add_test(tc, test_run_text_matches_tree);
  tcase_add_test(tc, test_dispatch_text_matches_tree);
  tcase_add_test(tc, test_dispatch_manifest_matches_tree);
  tcase_add_test(tc, test_text_helpers);
  tcase_add_test(tc, test_api_fields);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
