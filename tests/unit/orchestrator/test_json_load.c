/* test_json_load.c -- the request-body fast path (json_load.c) against jansson's json_loadb.
 *
 * The one property: for any bytes, orch_json_load_fast either declines (NULL) or returns exactly
 * the tree json_loadb gives with the flags the API uses (JSON_REJECT_DUPLICATES, with and without
 * JSON_ALLOW_NUL): same types, same string bytes and lengths, same integers, same key order.  So
 * whatever jansson refuses, the fast path refuses too.  Checked on: the bodies the API sees every
 * run (which must NOT be declined: otherwise the fast path is dead code), a table of hostile
 * bodies, every UTF-8 lead byte with every second byte and the boundary values of the rest,
 * every \u escape, integers around the limits, nesting around the depth limit, and 30,000 seeded
 * mutations of real bodies (bytes flipped, inserted, deleted, truncated).
 */
#include "internal.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Strict equality: json_equal plus what it does not look at (key order; integer vs real). */
static int same(json_t *a, json_t *b) {
  if (json_typeof(a) != json_typeof(b))
    return 0;
  switch (json_typeof(a)) {
  case JSON_OBJECT: {
    if (json_object_size(a) != json_object_size(b))
      return 0;
    void *ia = json_object_iter(a), *ib = json_object_iter(b);
    while (ia && ib) {
      size_t la = json_object_iter_key_len(ia), lb = json_object_iter_key_len(ib);
      if (la != lb || memcmp(json_object_iter_key(ia), json_object_iter_key(ib), la) != 0 ||
          !same(json_object_iter_value(ia), json_object_iter_value(ib)))
        return 0;
      ia = json_object_iter_next(a, ia);
      ib = json_object_iter_next(b, ib);
    }
    return ia == NULL && ib == NULL;
  }
  case JSON_ARRAY:
    if (json_array_size(a) != json_array_size(b))
      return 0;
    for (size_t i = 0; i < json_array_size(a); i++)
      if (!same(json_array_get(a, i), json_array_get(b, i)))
        return 0;
    return 1;
  case JSON_STRING:
    return json_string_length(a) == json_string_length(b) &&
           memcmp(json_string_value(a), json_string_value(b), json_string_length(a)) == 0;
  case JSON_INTEGER:
    return json_integer_value(a) == json_integer_value(b);
  case JSON_REAL:
    return json_real_value(a) == json_real_value(b);
  default:
    return 1;
  }
}

static size_t n_taken, n_declined;

/* Checks the property on buf; returns 1 when the fast path took it. */
static int check_one(const void *buf, size_t len) {
  json_t *fast = orch_json_load_fast(buf, len);
  size_t flags[] = {JSON_REJECT_DUPLICATES, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL};
  for (size_t f = 0; f < 2 && fast; f++) {
    json_error_t e;
    json_t *ref = json_loadb(buf, len, flags[f], &e);
    if (ref == NULL || !same(fast, ref)) {
      fprintf(stderr, "fast path took %zu bytes jansson %s: ", len, ref ? "reads otherwise" : "refuses");
      fwrite(buf, 1, len < 200 ? len : 200, stderr);
      fprintf(stderr, "\n");
      ck_abort_msg("fast path differs from json_loadb");
    }
    json_decref(ref);
  }
  int took = fast != NULL;
  json_decref(fast);
  took ? n_taken++ : n_declined++;
  return took;
}

static int check_str(const char *s) { return check_one(s, strlen(s)); }

/* What the API sees every run, and what real pages send: all taken, all the same as jansson. */
static const char *common_bodies[] = {
    "{\"code\":\"pass\",\"wait_s\":30}",
    "{\"attempt\":1,\"status\":\"ok\",\"stdout\":\"\",\"stderr\":\"\",\"files\":[]}",
    "{\"attempt\":2,\"status\":\"error\",\"stdout\":\"hi\\n\",\"stderr\":\"Traceback (most recent call last):\\n  File \\\"<exec>\\\", line 1\\n\","
    "\"stdout_truncated\":false,\"stderr_truncated\":false,\"error\":{\"type\":\"ValueError\",\"message\":\"bad \\u00e9 \\ud83d\\ude00\","
    "\"traceback\":null},\"files\":[{\"name\":\"out/a b.csv\",\"size\":12,\"sha256\":\"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\","
    "\"kind\":\"file\"}],\"files_unlisted\":0,\"figures_dropped\":0,\"notes\":[\"x\"],\"restarted\":false,\"remounted\":[]}",
    "{\"code\":\"print('h\\u00e9llo \\u2603 \xe2\x98\x83 \xf0\x9f\x98\x80')\\r\\n\\tx = \\\"q\\\" \\\\ \\/ \\b\\f\",\"origin\":\"tool\","
    "\"turn_id\":null,\"timeout_s\":5,\"wait_s\":0,\"idempotency_key\":\"k-1\"}",
    " \t\r\n{ \"a\" : [ 1 , -2 , 0 , -0 , true , false , null , { } , [ ] , \"\" ] , \"b\" : { \"c\" : { \"d\" : [ [ ] ] } } } \n",
    "{\"\":\"\",\"\\u00e9\\n\":\"k\",\"big\":123456789012345678,\"neg\":-123456789012345678,\"del\":\"\x7f\"}",
    "{\"attempt\":1,\"page_id\":\"0123456789abcdef0123456789abcdef\"}",
    "{\"title\":\"\xef\xbf\xbd \xf4\x8f\xbf\xbf \xed\x9f\xbf \xee\x80\x80 \xc2\x80 \xdf\xbf \xe0\xa0\x80 \xf0\x90\x80\x80\"}",
};

START_TEST(test_common_bodies_taken) {
  for (size_t i = 0; i < SBX_ARRAY_SIZE(common_bodies); i++)
    ck_assert_msg(check_str(common_bodies[i]), "declined: %s", common_bodies[i]);
  /* long strings and keys with escapes (the key copy past the stack buffer) */
  static char big[20000];
  char *p = big;
  p += sprintf(p, "{\"");
  for (int i = 0; i < 300; i++)
    p += sprintf(p, "k\\n");
  p += sprintf(p, "\":\"");
  for (int i = 0; i < 2000; i++)
    p += sprintf(p, "v\\u00e9");
  p += sprintf(p, "\",\"");
  for (int i = 0; i < 300; i++)
    p += sprintf(p, "k\\t");
  sprintf(p, "\":1}");
  ck_assert(check_str(big));
}
END_TEST

/* Not JSON, or JSON jansson refuses with these flags, or JSON the fast path leaves to jansson:
 * each either declined or the same (check_one aborts otherwise).  The ones jansson refuses are
 * declined by construction: the reference load fails. */
static const char *hostile[] = {
    "", " ", "{", "}", "{}", "{} ", " {}", "{}x", "{},", "{}{}", "[]", "[1]", "\"s\"", "1", "null",
    "{\"a\"}", "{\"a\":}", "{\"a\":1,}", "{,}", "{\"a\":1 \"b\":2}", "{\"a\":[1,]}", "{\"a\":[,1]}",
    "{\"a\":[1 2]}", "{\"a\":1,\"a\":2}", "{\"a\":1,\"\\u0061\":2}", "{\"\\u0000\":1}", "{\"a\":\"\\u0000\"}",
    "{\"a\":\"x\\u0000y\"}", "{'a':1}", "{a:1}", "{\"a\":01}", "{\"a\":-01}", "{\"a\":-}", "{\"a\":--1}",
    "{\"a\":+1}", "{\"a\":1.}", "{\"a\":.5}", "{\"a\":1.5}", "{\"a\":1e5}", "{\"a\":1E5}", "{\"a\":0x10}",
    "{\"a\":1234567890123456789}", "{\"a\":9223372036854775807}", "{\"a\":-9223372036854775808}",
    "{\"a\":9223372036854775808}", "{\"a\":-9223372036854775809}", "{\"a\":99999999999999999999999}",
    "{\"a\":tru}", "{\"a\":truE}", "{\"a\":True}", "{\"a\":nul}", "{\"a\":nulll}", "{\"a\":fals}",
    "{\"a\":true1}", "{\"a\":1x}", "{\"a\":NaN}", "{\"a\":Infinity}", "{\"a\":-Infinity}",
    "{\"a\":\"\\x41\"}", "{\"a\":\"\\'\"}", "{\"a\":\"\\U0041\"}", "{\"a\":\"\\u004\"}", "{\"a\":\"\\u00G1\"}",
    "{\"a\":\"\\ud800\"}", "{\"a\":\"\\udc00\"}", "{\"a\":\"\\ud800\\u0041\"}", "{\"a\":\"\\ud800\\ud800\"}",
    "{\"a\":\"\\udbff\\udfff\"}", "{\"a\":\"\\ud800\\udc00\"}", "{\"a\":\"\\ud800x\"}", "{\"a\":\"\\ud800\\",
    "{\"a\":\"\\", "{\"a\":\"", "{\"a\":\"abc", "{\"a\":\"\t\"}", "{\"a\":\"\n\"}", "{\"a\":\"\x1f\"}",
    "\xef\xbb\xbf{}", "{\"a\":1}\n\n", "{\"a\":1}\f", "\f{}", "{\"a\":1}\v", "{\"a\" :\t1\r}",
    "{\"a\":[[[[[[[[[[]]]]]]]]]]}", "{\"a\":{\"b\":{\"c\":1}}}}", "{\"a\":{\"b\":1}", "{\"a\":[}", "{\"a\":]}",
    "{\"a\":\"\xc0\x80\"}", "{\"a\":\"\xc1\xbf\"}", "{\"a\":\"\xe0\x80\x80\"}", "{\"a\":\"\xed\xa0\x80\"}",
    "{\"a\":\"\xf4\x90\x80\x80\"}", "{\"a\":\"\xf5\x80\x80\x80\"}", "{\"a\":\"\xff\"}", "{\"a\":\"\x80\"}",
    "{\"a\":\"\xe2\x82\"}", "{\"a\":\"\xf0\x9f\x98\"}", "{\"\xff\":1}", "{\"a\":1,\xc3\xa9:2}",
};

START_TEST(test_hostile) {
  for (size_t i = 0; i < SBX_ARRAY_SIZE(hostile); i++)
    check_str(hostile[i]);
  /* embedded NUL bytes, in and out of strings */
  check_one("{\"a\":\"x\0y\"}", 11);
  check_one("{\"a\":1}\0", 8);
  check_one("{\0\"a\":1}", 8);
  /* these are JSON jansson reads, declined by design (left to jansson): prove they are declined */
  const char *left[] = {"[]", "{\"a\":1.5}", "{\"a\":1e5}", "{\"a\":\"\\u0000\"}", "{\"a\":1234567890123456789}"};
  for (size_t i = 0; i < SBX_ARRAY_SIZE(left); i++)
    ck_assert_ptr_null(orch_json_load_fast(left[i], strlen(left[i])));
  /* a valid surrogate pair is taken (and decoded as jansson does) */
  ck_assert(check_str("{\"a\":\"\\ud83d\\ude00\"}"));
}
END_TEST

START_TEST(test_utf8_bytes) {
  static const unsigned char edge[] = {0x00, 0x22, 0x41, 0x5c, 0x7f, 0x80, 0x81, 0x8f, 0x90,
                                       0x9f, 0xa0, 0xbf, 0xc0, 0xc2, 0xe0, 0xf0, 0xff};
  unsigned char b[16];
  /* every lead byte with every second byte (the rest continuation bytes), in a value and a key */
  for (int x = 0; x < 256; x++)
    for (int y = 0; y < 256; y++)
      for (int key = 0; key < 2; key++) {
        size_t n = 0;
        memcpy(b, key ? "{\"" : "{\"k\":\"", key ? 2 : 6);
        n = key ? 2 : 6;
        b[n++] = (unsigned char)x;
        b[n++] = (unsigned char)y;
        b[n++] = 0x80;
        b[n++] = 0x80;
        memcpy(b + n, key ? "\":1}" : "\"}", key ? 4 : 2);
        n += key ? 4 : 2;
        check_one(b, n);
      }
  /* three- and four-byte leads with the boundary values of bytes 2 to 4 */
  for (int x = 0xe0; x < 0x100; x++)
    for (size_t i = 0; i < sizeof(edge); i++)
      for (size_t j = 0; j < sizeof(edge); j++)
        for (size_t k = 0; k < sizeof(edge); k++) {
          unsigned char s[] = {'{', '"', 'k', '"', ':', '"', (unsigned char)x, edge[i], edge[j], edge[k], '"', '}'};
          check_one(s, sizeof(s));
          check_one(s, sizeof(s) - 3); /* cut inside the sequence */
        }
  ck_assert_uint_gt(n_taken, 1000); /* the well-formed ones were taken */
}
END_TEST

START_TEST(test_escapes) {
  char b[64];
  for (unsigned cp = 0; cp <= 0xFFFF; cp++) {
    snprintf(b, sizeof(b), "{\"k\":\"a\\u%04x\",\"\\u%04Xb\":1}", cp, cp);
    int took = check_str(b);
    if (cp != 0 && (cp < 0xD800 || cp > 0xDFFF))
      ck_assert_msg(took, "\\u%04x declined", cp);
  }
  static const unsigned hi[] = {0xd800, 0xd83d, 0xdbff}, lo[] = {0xdc00, 0xde00, 0xdfff, 0xdbff, 0xe000, 0x0041};
  for (size_t i = 0; i < SBX_ARRAY_SIZE(hi); i++)
    for (size_t j = 0; j < SBX_ARRAY_SIZE(lo); j++) {
      snprintf(b, sizeof(b), "{\"k\":\"\\u%04x\\u%04x\"}", hi[i], lo[j]);
      check_str(b);
    }
  for (int c = 0; c < 256; c++) {
    int n = snprintf(b, sizeof(b), "{\"k\":\"\\");
    b[n++] = (char)c;
    memcpy(b + n, "\"}", 3);
    check_one(b, (size_t)n + 2);
  }
}
END_TEST

START_TEST(test_numbers_depth) {
  char b[8300];
  const char *nums[] = {"0", "-0", "7", "-7", "10", "999999999999999999", "-999999999999999999",
                        "1000000000000000000", "00", "-", "1-", "--0"};
  for (size_t i = 0; i < SBX_ARRAY_SIZE(nums); i++) {
    snprintf(b, sizeof(b), "{\"n\":%s}", nums[i]);
    check_str(b);
    snprintf(b, sizeof(b), "{\"n\":[%s,%s]}", nums[i], nums[i]);
    check_str(b);
  }
  /* nesting: taken up to the fast path's limit, declined past it, jansson's own limit beyond */
  for (int depth = 1; depth <= 2100; depth += depth < 40 ? 1 : 1000) {
    size_t n = 0;
    b[n++] = '{';
    b[n++] = '"';
    b[n++] = 'a';
    b[n++] = '"';
    b[n++] = ':';
    for (int i = 1; i < depth; i++)
      b[n++] = '[';
    b[n++] = '1';
    for (int i = 1; i < depth; i++)
      b[n++] = ']';
    b[n++] = '}';
    int took = check_one(b, n);
    if (depth <= 32)
      ck_assert_msg(took, "depth %d declined", depth);
    else
      ck_assert_msg(!took, "depth %d taken", depth);
  }
}
END_TEST

START_TEST(test_mutations) {
  static const unsigned char pool[] = {'{', '}', '[', ']', '"', '\\', ':', ',', ' ', '\n', '0', '1', '-',
                                       '.', 'e', 't', 'n', 'u', 0x00, 0x1f, 0x7f, 0x80, 0xbf, 0xc3,
                                       0xe2, 0xed, 0xf0, 0xf4, 0xff};
  unsigned seed = 12345;
  char buf[1200];
  for (int iter = 0; iter < 30000; iter++) {
    const char *src = common_bodies[iter % SBX_ARRAY_SIZE(common_bodies)];
    size_t n = strlen(src);
    if (n >= sizeof(buf) - 8)
      n = sizeof(buf) - 8;
    memcpy(buf, src, n);
    int edits = 1 + (int)((seed = seed * 1103515245u + 12345u) >> 16) % 3;
    for (int e = 0; e < edits && n > 0; e++) {
      seed = seed * 1103515245u + 12345u;
      size_t at = (seed >> 8) % n;
      unsigned char c = pool[(seed >> 20) % sizeof(pool)];
      switch ((seed >> 28) % 4) {
      case 0: buf[at] = (char)c; break; /* replace */
      case 1: memmove(buf + at + 1, buf + at, n - at); buf[at] = (char)c; n++; break; /* insert */
      case 2: memmove(buf + at, buf + at + 1, n - at - 1); n--; break; /* delete */
      default: n = at; break; /* truncate */
      }
    }
    check_one(buf, n);
  }
  ck_assert_uint_gt(n_declined, 1000);
}
END_TEST

int main(void) {
  Suite *s = suite_create("json_load");
  TCase *tc = tcase_create("against jansson");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_common_bodies_taken);
  tcase_add_test(tc, test_hostile);
  tcase_add_test(tc, test_utf8_bytes);
  tcase_add_test(tc, test_escapes);
  tcase_add_test(tc, test_numbers_depth);
  tcase_add_test(tc, test_mutations);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
