/* test_llm.c -- llm.c's pure parts: the SSE parser (line ends LF, CRLF, CR, split anywhere,
 * comments, multi-line data, other fields, a last event without its blank line, the bound) and
 * one response assembled from its chunks (text deltas, tool_calls deltas by index, finish_reason,
 * [DONE], an error in the stream, malformed chunks, the bounds).  Table-driven where it can be. */
#include "assistant.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

struct got {
  char data[8][256];
  size_t n;
};

static int on_data(void *ud, const char *data, size_t len) {
  struct got *g = ud;
  ck_assert_uint_lt(g->n, 8);
  ck_assert_uint_lt(len, 256);
  memcpy(g->data[g->n], data, len);
  g->data[g->n][len] = 0;
  ck_assert_uint_eq(strlen(data), len); /* NUL-terminated for the reader */
  g->n++;
  return 0;
}

/* Feeds s in pieces of `step` bytes (0: whole), then ends the stream. */
static void feed(const char *s, size_t step, struct got *g) {
  struct orch_sse p;
  orch__sse_init(&p);
  size_t len = strlen(s);
  if (step == 0)
    step = len ? len : 1;
  for (size_t i = 0; i < len; i += step)
    ck_assert_int_eq(orch__sse_feed(&p, s + i, SBX_MIN(step, len - i), on_data, g), 0);
  ck_assert_int_eq(orch__sse_end(&p, on_data, g), 0);
  orch__sse_free(&p);
}

START_TEST(sse_cases) {
  static const struct {
    const char *in;
    size_t n;
    const char *want[3];
  } cases[] = {
      {"data: a\n\ndata: b\n\n", 2, {"a", "b"}},
      {"data: a\r\n\r\ndata: b\r\n\r\n", 2, {"a", "b"}},
      {"data: a\r\rdata: b\r\r", 2, {"a", "b"}},
      {"data:no-space\n\n", 1, {"no-space"}},
      {"data:  two spaces\n\n", 1, {" two spaces"}},
      {"data: one\ndata: two\n\n", 1, {"one\ntwo"}},
      {": keep-alive\n\nevent: x\nid: 3\nretry: 10\ndata: y\n\n", 1, {"y"}},
      {"event: only\n\n\n\n", 0, {NULL}},
      {"data\n\n", 1, {""}},
      {"data: [DONE]", 1, {"[DONE]"}}, /* the stream ended without the blank line */
      {"data: x\n", 1, {"x"}},
  };
  for (size_t i = 0; i < SBX_ARRAY_SIZE(cases); i++) {
    for (size_t step = 0; step <= 3; step++) { /* whole, then split at every byte, 2, 3 */
      struct got g = {0};
      feed(cases[i].in, step, &g);
      ck_assert_msg(g.n == cases[i].n, "case %zu step %zu: %zu events", i, step, g.n);
      for (size_t k = 0; k < g.n; k++)
        ck_assert_msg(strcmp(g.data[k], cases[i].want[k]) == 0, "case %zu step %zu: [%s]", i, step,
                      g.data[k]);
    }
  }
}
END_TEST

START_TEST(sse_bound) {
  struct orch_sse p;
  orch__sse_init(&p);
  struct got g = {0};
  size_t n = ORCH_LLM_EVENT_BYTES + 256 * 1024;
  char *big = malloc(n);
  memset(big, 'x', n);
  ck_assert_int_eq(orch__sse_feed(&p, "data: ", 6, on_data, &g), 0);
  ck_assert_int_eq(orch__sse_feed(&p, big, n, on_data, &g), SBX_ETOOBIG); /* one line too long */
  orch__sse_free(&p);
  orch__sse_init(&p); /* many data lines, each short, one event too long */
  size_t line = 64 * 1024;
  for (size_t i = 0; i + line <= n; i += line) {
    memcpy(big + i, "data: ", 6);
    big[i + line - 1] = '\n';
  }
  ck_assert_int_eq(orch__sse_feed(&p, big, n - n % line, on_data, &g), SBX_ETOOBIG);
  ck_assert_uint_eq(g.n, 0);
  orch__sse_free(&p);
  free(big);
}
END_TEST

static void chunk_ok(struct orch_llm_answer *a, const char *data, const char *want_delta) {
  const char *d;
  size_t dl;
  char why[256] = "";
  ck_assert_msg(orch__llm_chunk(a, data, strlen(data), &d, &dl, why, sizeof why) == 0, "%s: %s",
                data, why);
  if (want_delta) {
    ck_assert_uint_eq(dl, strlen(want_delta));
    ck_assert(memcmp(d, want_delta, dl) == 0);
  } else {
    ck_assert_uint_eq(dl, 0);
  }
}

START_TEST(chunks_text_and_tool_calls) {
  struct orch_llm_answer a;
  orch__llm_answer_init(&a);
  chunk_ok(&a, "{\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}", NULL);
  chunk_ok(&a, "{\"choices\":[{\"delta\":{\"content\":\"Let me \"}}]}", "Let me ");
  chunk_ok(&a, "{\"choices\":[{\"delta\":{\"content\":\"check. \xc3\xa9\"}}]}", "check. \xc3\xa9");
  /* two calls interleaved by index; id and name once, arguments appended */
  chunk_ok(&a,
           "{\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_a\",\"type\":"
           "\"function\",\"function\":{\"name\":\"run_python\",\"arguments\":\"{\\\"co\"}}]}}]}",
           NULL);
  chunk_ok(&a,
           "{\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"call_b\",\"function\":"
           "{\"name\":\"run_python\",\"arguments\":\"{}\"}}]}}]}",
           NULL);
  chunk_ok(&a,
           "{\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":"
           "\"de\\\": \\\"1\\\"}\"}}]}}]}",
           NULL);
  chunk_ok(&a, "{\"choices\":[{\"delta\":{},\"finish_reason\":\"tool_calls\"}]}", NULL);
  chunk_ok(&a, "{\"choices\":[],\"usage\":{\"completion_tokens\":5}}", NULL);
  chunk_ok(&a, "[DONE]", NULL);
  ck_assert_str_eq(a.content.data, "Let me check. \xc3\xa9");
  ck_assert_uint_eq(a.n_calls, 2);
  ck_assert_str_eq(a.calls[0].id, "call_a");
  ck_assert_str_eq(a.calls[0].name, "run_python");
  ck_assert_uint_eq(a.calls[0].args.len, strlen("{\"code\": \"1\"}"));
  ck_assert(memcmp(a.calls[0].args.data, "{\"code\": \"1\"}", a.calls[0].args.len) == 0);
  ck_assert_str_eq(a.calls[1].id, "call_b");
  ck_assert_str_eq(a.finish_reason, "tool_calls");
  ck_assert_int_eq(a.done, 1);
  ck_assert_str_eq(a.error, "");
  orch__llm_answer_free(&a);
}
END_TEST

START_TEST(chunks_errors_and_bounds) {
  static const char *const bad[] = {
      "not json",
      "[1, 2]",
      "{\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":16,\"function\":{}}]}}]}",
      "{\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":-1}]}}]}",
  };
  for (size_t i = 0; i < SBX_ARRAY_SIZE(bad); i++) {
    struct orch_llm_answer a;
    orch__llm_answer_init(&a);
    const char *d;
    size_t dl;
    char why[256] = "";
    ck_assert_int_eq(orch__llm_chunk(&a, bad[i], strlen(bad[i]), &d, &dl, why, sizeof why),
                     SBX_EPROTO);
    ck_assert_msg(why[0] != 0, "case %zu says why", i);
    orch__llm_answer_free(&a);
  }
  /* an error object in the stream: its message, kept to ORCH_LLM_ERROR_CHARS characters */
  struct orch_llm_answer a;
  orch__llm_answer_init(&a);
  chunk_ok(&a, "{\"error\":{\"message\":\"context length exceeded\",\"code\":400}}", NULL);
  ck_assert_str_eq(a.error, "context length exceeded");
  orch__llm_answer_free(&a);
  orch__llm_answer_init(&a);
  struct sbx_buf b;
  sbx_buf_init(&b, 1 << 20);
  sbx_buf_appendf(&b, "{\"error\":\"");
  for (int i = 0; i < 600; i++)
    sbx_buf_appendf(&b, "\xc3\xa9");
  sbx_buf_appendf(&b, "\"}");
  sbx_buf_append(&b, "", 1);
  chunk_ok(&a, b.data, NULL);
  ck_assert_uint_eq(strlen(a.error), 2 * ORCH_LLM_ERROR_CHARS); /* 500 characters, not cut mid */
  orch__llm_answer_free(&a);
  /* the answer's text past ORCH_ANSWER_BYTES is dropped at a character, and said */
  orch__llm_answer_init(&a);
  sbx_buf_reset(&b);
  sbx_buf_appendf(&b, "{\"choices\":[{\"delta\":{\"content\":\"");
  for (size_t i = 0; i < ORCH_ANSWER_BYTES / 2 + 10; i++)
    sbx_buf_appendf(&b, "\xc3\xa9");
  sbx_buf_appendf(&b, "\"}}]}");
  sbx_buf_append(&b, "", 1);
  const char *d;
  size_t dl;
  char why[64];
  ck_assert_int_eq(orch__llm_chunk(&a, b.data, strlen(b.data), &d, &dl, why, sizeof why), 0);
  ck_assert_int_eq(a.content_cut, 1);
  ck_assert_uint_lt(a.content.len, ORCH_ANSWER_BYTES);
  ck_assert_uint_eq(a.content.len % 2, 0);
  orch__llm_answer_free(&a);
  sbx_buf_free(&b);
  /* arguments past ORCH_LLM_ARGS_BYTES: refused */
  orch__llm_answer_init(&a);
  sbx_buf_init(&b, 4u << 20);
  sbx_buf_appendf(&b, "{\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{"
                      "\"arguments\":\"");
  for (size_t i = 0; i < ORCH_LLM_ARGS_BYTES + 1; i++)
    sbx_buf_append(&b, "x", 1);
  sbx_buf_appendf(&b, "\"}}]}}]}");
  sbx_buf_append(&b, "", 1);
  ck_assert_int_eq(orch__llm_chunk(&a, b.data, strlen(b.data), &d, &dl, why, sizeof why),
                   SBX_EPROTO);
  orch__llm_answer_free(&a);
  sbx_buf_free(&b);
}
END_TEST

/* The model's words with credentials in them: each case's input and what is left of it. */
START_TEST(scrub_cases) {
  static const char *key = "k3y-0nly-0perator-kn0ws-1234";
  static const struct {
    const char *in, *out;
  } cases[] = {
      {"model overloaded, try later", "model overloaded, try later"},
      {"Invalid API key provided: Bearer sk-abcdefghijklmnop1234",
       "Invalid API key provided: Bearer [redacted]"},
      {"Incorrect API key provided: sk-proj-ABCDEFGHIJKLMNOPQRST.",
       "Incorrect API key provided: [redacted]."},
      {"authorization: bearer eyJhbGciOi.J9xx failed", "authorization: bearer [redacted] failed"},
      {"key k3y-0nly-0perator-kn0ws-1234 refused", "key [redacted] refused"},
      {"x k3y-0nly-0perator-kn0ws-1234k3y-0nly-0perator-kn0ws-1234", "x [redacted][redacted]"},
      {"cut inside the key: k3y-0nly-0per", "cut inside the key: [redacted]"},
      {"k3y is a word", "k3y is a word"}, /* under ORCH_LLM_KEY_MIN of the key: a word */
      {"Bearer short", "Bearer short"},   /* too short for a token: a word */
      {"ask-me-anything-about-it-please", "ask-me-anything-about-it-please"}, /* not a word start */
      {"sk-short", "sk-short"},
      {"", ""},
  };
  for (size_t i = 0; i < SBX_ARRAY_SIZE(cases); i++) {
    char out[256];
    orch__llm_scrub(key, cases[i].in, out, sizeof out);
    ck_assert_msg(strcmp(out, cases[i].out) == 0, "case %zu: \"%s\" -> \"%s\"", i, cases[i].in,
                  out);
  }
  char out[256]; /* no key configured: the shapes still go */
  orch__llm_scrub(NULL, "Bearer abcdefgh12345678", out, sizeof out);
  ck_assert_str_eq(out, "Bearer [redacted]");
  char small[12]; /* cut to the room, never past it, never inside a character */
  orch__llm_scrub(key, "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", small, sizeof small);
  ck_assert_uint_eq(strlen(small), 10);
  orch__llm_scrub(key, "abc k3y-0nly-0perator-kn0ws-1234", small, sizeof small);
  ck_assert_str_eq(small, "abc [redact");
}
END_TEST

/* The answer's text as it streams in pieces: the key never shown, not even across pieces; the
 * rest shown as it comes, only a possible start of the key held. */
START_TEST(release_text) {
  static const char *key = "sk-secret-key-0123456789";
  static const char *pieces[] = {"Your key is sk-sec", "ret-key-01", "23456789 and s", "k-not it",
                                 " s"};
  struct sbx_buf b, shown;
  sbx_buf_init(&b, 4096);
  sbx_buf_init(&shown, 4096);
  size_t at = 0;
  const size_t want_at[] = {12, 12, 27, 36, 37}; /* held: "sk-sec", "sk-sec…01", "s", -, "s" */
  for (size_t i = 0; i < SBX_ARRAY_SIZE(pieces); i++) {
    ck_assert_int_eq(sbx_buf_append(&b, pieces[i], strlen(pieces[i])), 0);
    size_t safe = orch__llm_release(key, &b, at, 0);
    ck_assert_uint_ge(safe, at);
    sbx_buf_append(&shown, b.data + at, safe - at);
    ck_assert_msg(safe == want_at[i], "piece %zu: %zu shown", i, safe);
    at = safe;
  }
  size_t safe = orch__llm_release(key, &b, at, 1); /* the end: the rest */
  sbx_buf_append(&shown, b.data + at, safe - at);
  sbx_buf_append(&shown, "", 1);
  ck_assert_str_eq(shown.data, "Your key is [redacted] and sk-not it s");
  ck_assert_uint_eq(b.len, strlen(shown.data));
  /* a short key is masked in its place; no key: all shown at once */
  b.len = 0;
  sbx_buf_append(&b, "a abcd b", 8);
  ck_assert_uint_eq(orch__llm_release("abcd", &b, 0, 0), 8);
  ck_assert_int_eq(memcmp(b.data, "a **** b", 8), 0);
  ck_assert_uint_eq(orch__llm_release(NULL, &b, 0, 0), 8);
  sbx_buf_free(&b);
  sbx_buf_free(&shown);
}
END_TEST

START_TEST(end_codes) {
  ck_assert_str_eq(orch__llm_end_code(ORCH_LLM_OK), "");
  ck_assert_str_eq(orch__llm_end_code(ORCH_LLM_MODEL_ERROR), "model_error");
  ck_assert_str_eq(orch__llm_end_code(ORCH_LLM_UNREACHABLE), "model_unreachable");
  ck_assert_str_eq(orch__llm_end_code(ORCH_LLM_STALLED), "model_stalled");
}
END_TEST

int main(void) {
  Suite *s = suite_create("llm");
  TCase *tc = tcase_create("llm");
  tcase_add_test(tc, sse_cases);
  tcase_add_test(tc, sse_bound);
  tcase_add_test(tc, chunks_text_and_tool_calls);
  tcase_add_test(tc, chunks_errors_and_bounds);
  tcase_add_test(tc, scrub_cases);
  tcase_add_test(tc, release_text);
  tcase_add_test(tc, end_codes);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
