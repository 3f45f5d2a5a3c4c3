/* fuzz_llm.c -- the model's stream as llm.c reads it, under libFuzzer: one input is what an
 * OpenAI-compatible server sends after its head.  Its first byte picks the size of the pieces the
 * rest is fed in (1 to 256 bytes: reads split anywhere); each SSE event's data goes through
 * orch__llm_chunk, as the connector does, and the stream's end through orch__sse_end.  An error
 * (SBX_ETOOBIG, SBX_EPROTO, an error object) stops the feed, as it ends the connector's request.
 *
 * Checked after every event: the answer's text is valid UTF-8 (json_stringn takes it) within
 * ORCH_ANSWER_BYTES, each delta lies inside it and ends it, the calls stay within ORCH_LLM_CALLS
 * and their arguments within ORCH_LLM_ARGS_BYTES, ids and names are terminated; an error object's
 * message is at most ORCH_LLM_ERROR_CHARS characters.  The credentials' scrubbing as the connector
 * does it: the error's words through orch__llm_scrub (within their room, terminated, UTF-8, the
 * key gone), and the text as it streams through orch__llm_release on a copy (the key never in
 * what may be shown, what is shown never taken back).  LeakSanitizer checks nothing is left.
 *
 * What it does not do: HTTP (transport/http_client.c is tested over real sockets) or the turn.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "assistant.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

#define KEY "sk-fuzz-0123456789abcdef"

struct ctx {
  struct orch_llm_answer a;
  struct sbx_buf text; /* the answer's text as the connector releases it */
  size_t shown;
  int failed;
};

static int utf8_ok(const char *s, size_t n) {
  json_t *j = json_stringn(s, n);
  json_decref(j);
  return j != NULL;
}

static void check_scrub(struct ctx *c, const char *delta, size_t dlen) {
  char out[ORCH_LLM_ERROR_CHARS * 4 + 1];
  orch__llm_scrub(KEY, c->a.error, out, sizeof out);
  size_t ol = strlen(out);
  if (ol >= sizeof out || strstr(out, KEY) ||
      (utf8_ok(c->a.error, strlen(c->a.error)) && !utf8_ok(out, ol)))
    abort();
  if (dlen == 0)
    return;
  if (sbx_buf_append(&c->text, delta, dlen) != 0)
    return;
  size_t safe = orch__llm_release(KEY, &c->text, c->shown, 0);
  if (safe < c->shown || safe > c->text.len ||
      (safe && memmem(c->text.data, safe, KEY, strlen(KEY))))
    abort();
  c->shown = safe;
}

static void check(const struct orch_llm_answer *a, const char *delta, size_t dlen) {
  if (a->content.len > ORCH_ANSWER_BYTES || a->n_calls > ORCH_LLM_CALLS)
    abort();
  json_t *s = json_stringn(a->content.data ? a->content.data : "", a->content.len);
  if (s == NULL) /* not UTF-8: the text was cut inside a character */
    abort();
  json_decref(s);
  if (dlen && (delta < a->content.data || delta + dlen != a->content.data + a->content.len))
    abort();
  for (size_t i = 0; i < a->n_calls; i++)
    if (a->calls[i].args.len > ORCH_LLM_ARGS_BYTES ||
        memchr(a->calls[i].id, 0, sizeof a->calls[i].id) == NULL ||
        memchr(a->calls[i].name, 0, sizeof a->calls[i].name) == NULL)
      abort();
  size_t chars = 0, len = strlen(a->error);
  for (size_t i = 0; i < len; chars++)
    i += orch__utf8_next(a->error + i, len - i, NULL);
  if (chars > ORCH_LLM_ERROR_CHARS)
    abort();
}

static int on_event(void *ud, const char *d, size_t len) {
  struct ctx *c = ud;
  const char *delta;
  size_t dlen;
  char why[256];
  if (orch__llm_chunk(&c->a, d, len, &delta, &dlen, why, sizeof why) != 0) {
    if (why[0] == 0) /* a refusal always says why */
      abort();
    return SBX_EPROTO;
  }
  check(&c->a, delta, dlen);
  check_scrub(c, delta, dlen);
  return c->a.error[0] ? SBX_EPROTO : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  if (n < 1)
    return 0;
  size_t step = (size_t)data[0] + 1;
  struct ctx c;
  struct orch_sse p;
  orch__llm_answer_init(&c.a);
  sbx_buf_init(&c.text, ORCH_ANSWER_BYTES);
  c.shown = 0;
  orch__sse_init(&p);
  int rc = 0;
  for (size_t i = 1; i < n && rc == 0; i += step)
    rc = orch__sse_feed(&p, (const char *)data + i, SBX_MIN(step, n - i), on_event, &c);
  if (rc == 0)
    orch__sse_end(&p, on_event, &c);
  size_t all = orch__llm_release(KEY, &c.text, c.shown, 1);
  if (all != c.text.len || (all && memmem(c.text.data, c.text.len, KEY, strlen(KEY))))
    abort();
  sbx_buf_free(&c.text);
  orch__sse_free(&p);
  orch__llm_answer_free(&c.a);
  return 0;
}
