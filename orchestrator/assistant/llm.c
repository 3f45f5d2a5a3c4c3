/* llm.c -- the assistant's model connector: an OpenAI-compatible Chat Completions API (llama.cpp's
 * server, Ollama, vLLM, a hosted one), asked with `stream: true` and read as it streams.
 *
 * Three parts, each alone: the SSE parser (the event-stream rules, bounded); the assembly of one
 * response from its chunks (text deltas, tool_calls deltas by index: id and name once, arguments
 * appended, bounded); and the request on transport/http_client (libcurl on the loop): POST
 * <CEREA_LLM_URL>/chat/completions with the key as a bearer header, no byte for CEREA_LLM_STALL_S
 * ends it, TLS verified (CEREA_LLM_CA_FILE, or the system's store).  How it ended is told in the
 * chat's words: the model's HTTP error with its own error text (cut), unreachable, stalled, a
 * stream that broke off or ended before its answer did.
 *
 * The key lives in one header line of the connector and goes nowhere else: not in a log line, an
 * error, an event.  What the model (or a proxy in front of it) says about a failure may echo it
 * ("Invalid API key provided: Bearer sk-…"): every error's words are scrubbed here, on their way
 * out of the connector, of the key and of anything shaped like a bearer credential
 * (orch__llm_scrub), so no answer, event, page or stored row can hold one.  The answer's text is
 * taken out of the key alone (orch__llm_release: a text may rightly show a token's shape), the
 * end of it that could be the key's start held back until what follows decides.
 *
 * `data: [DONE]` ends the answer there and then: the transfer is stopped at once, whether or not
 * the server closes its end (some keep the connection open after it).
 *
 * What it does not do: build the conversation or run tools (assistant.c), or retry.
 */
#include "llm.h"
#include "http_client.h"

#include <openssl/crypto.h>

#include <string.h>
#include <strings.h>

/* ---- SSE ------------------------------------------------------------------------------------- */

void orch__sse_init(struct orch_sse *p) {
  memset(p, 0, sizeof *p);
  sbx_buf_init(&p->line, ORCH_LLM_EVENT_BYTES);
  sbx_buf_init(&p->data, ORCH_LLM_EVENT_BYTES);
}

void orch__sse_free(struct orch_sse *p) {
  sbx_buf_free(&p->line);
  sbx_buf_free(&p->data);
}

static int dispatch(struct orch_sse *p, orch_sse_cb cb, void *ud) {
  if (!p->has_data)
    return 0;
  p->has_data = 0;
  if (sbx_buf_append(&p->data, "", 1) != 0) /* NUL-terminated for the reader */
    return SBX_ETOOBIG;
  size_t len = p->data.len - 1;
  p->data.len = 0;
  return cb(ud, p->data.data, len);
}

/* One complete line (without its end). */
static int line_done(struct orch_sse *p, orch_sse_cb cb, void *ud) {
  const char *s = p->line.data;
  size_t n = p->line.len;
  p->line.len = 0;
  if (n == 0)
    return dispatch(p, cb, ud);
  if (s[0] == ':')
    return 0; /* a comment (keep-alive) */
  const char *colon = memchr(s, ':', n);
  size_t flen = colon ? (size_t)(colon - s) : n;
  if (flen != 4 || memcmp(s, "data", 4) != 0)
    return 0; /* event, id, retry: nothing the completion stream needs */
  const char *v = colon ? colon + 1 : s + n;
  if (v < s + n && *v == ' ')
    v++;
  if (p->has_data && sbx_buf_append(&p->data, "\n", 1) != 0)
    return SBX_ETOOBIG;
  if (sbx_buf_append(&p->data, v, (size_t)(s + n - v)) != 0)
    return SBX_ETOOBIG;
  p->has_data = 1;
  return 0;
}

int orch__sse_feed(struct orch_sse *p, const char *buf, size_t len, orch_sse_cb cb, void *ud) {
  size_t i = 0;
  while (i < len) {
    if (p->cr && buf[i] == '\n') { /* the LF of a CRLF */
      p->cr = 0;
      i++;
      continue;
    }
    p->cr = 0;
    size_t j = i;
    while (j < len && buf[j] != '\n' && buf[j] != '\r')
      j++;
    if (j > i && sbx_buf_append(&p->line, buf + i, j - i) != 0)
      return SBX_ETOOBIG;
    if (j == len)
      break;
    p->cr = buf[j] == '\r';
    int rc = line_done(p, cb, ud);
    if (rc != 0)
      return rc;
    i = j + 1;
  }
  return 0;
}

int orch__sse_end(struct orch_sse *p, orch_sse_cb cb, void *ud) {
  int rc = p->line.len ? line_done(p, cb, ud) : 0;
  return rc ? rc : dispatch(p, cb, ud); /* an event the stream did not close with a blank line */
}

/* ---- one response from its chunks ------------------------------------------------------------ */

void orch__llm_answer_init(struct orch_llm_answer *a) {
  memset(a, 0, sizeof *a);
  sbx_buf_init(&a->content, ORCH_ANSWER_BYTES);
  for (size_t i = 0; i < ORCH_LLM_CALLS; i++)
    sbx_buf_init(&a->calls[i].args, ORCH_LLM_ARGS_BYTES);
}

void orch__llm_answer_free(struct orch_llm_answer *a) {
  sbx_buf_free(&a->content);
  for (size_t i = 0; i < ORCH_LLM_CALLS; i++)
    sbx_buf_free(&a->calls[i].args);
}

/* The first bytes of s (len) holding at most max characters, not splitting one. */
static size_t utf8_cut(const char *s, size_t len, size_t max) {
  size_t i = 0, chars = 0;
  while (i < len && chars < max) {
    i += orch__utf8_next(s + i, len - i, NULL);
    chars++;
  }
  return i;
}

/* Text s, cut to what fits the buffer's limit at a character boundary (1 when cut). */
static int append_cut(struct sbx_buf *b, const char *s, size_t n) {
  if (sbx_buf_append(b, s, n) == 0)
    return 0;
  size_t room = b->limit > b->len + 1 ? b->limit - b->len - 1 : 0, k = 0;
  while (k < n && k < room) {
    size_t c = orch__utf8_next(s + k, n - k, NULL);
    if (k + c > room)
      break;
    k += c;
  }
  if (k)
    sbx_buf_append(b, s, k);
  return 1;
}

static void set_error(struct orch_llm_answer *a, const json_t *err) {
  const char *msg = json_is_string(err) ? json_string_value(err)
                                        : json_string_value(json_object_get(err, "message"));
  if (msg == NULL)
    msg = "an error without a message";
  size_t n = utf8_cut(msg, strlen(msg), ORCH_LLM_ERROR_CHARS);
  snprintf(a->error, sizeof a->error, "%.*s", (int)n, msg);
}

static int call_delta(struct orch_llm_answer *a, const json_t *tc, size_t pos, char *why,
                      size_t cap) {
  json_t *ix = json_object_get(tc, "index");
  json_int_t i = json_is_integer(ix) ? json_integer_value(ix) : (json_int_t)pos;
  if (i < 0 || i >= ORCH_LLM_CALLS) {
    snprintf(why, cap, "the model asked for more than %d tool calls at once", ORCH_LLM_CALLS);
    return SBX_EPROTO;
  }
  struct orch_llm_call *c = &a->calls[i];
  if ((size_t)i >= a->n_calls)
    a->n_calls = (size_t)i + 1;
  const char *id = json_string_value(json_object_get(tc, "id"));
  if (id && !c->id[0])
    snprintf(c->id, sizeof c->id, "%s", id);
  const json_t *fn = json_object_get(tc, "function");
  const char *name = json_string_value(json_object_get(fn, "name"));
  if (name && !c->name[0])
    snprintf(c->name, sizeof c->name, "%s", name);
  const json_t *args = json_object_get(fn, "arguments");
  if (json_is_string(args) &&
      sbx_buf_append(&c->args, json_string_value(args), json_string_length(args)) != 0) {
    snprintf(why, cap, "a tool call's arguments were over %u bytes", ORCH_LLM_ARGS_BYTES);
    return SBX_EPROTO;
  }
  return 0;
}

int orch__llm_chunk(struct orch_llm_answer *a, const char *data, size_t len, const char **delta,
                    size_t *delta_len, char *why, size_t cap) {
  *delta = NULL;
  *delta_len = 0;
  if (len == 6 && memcmp(data, "[DONE]", 6) == 0) {
    a->done = 1;
    return 0;
  }
  json_error_t jerr;
  json_t *j = json_loadb(data, len, 0, &jerr);
  int rc = 0;
  if (!json_is_object(j)) {
    snprintf(why, cap, "the model sent a chunk that is not a JSON object (%s)", jerr.text);
    rc = SBX_EPROTO;
    goto out;
  }
  const json_t *err = json_object_get(j, "error");
  if (err && !json_is_null(err)) {
    set_error(a, err);
    goto out;
  }
  const json_t *ch = json_array_get(json_object_get(j, "choices"), 0);
  if (ch == NULL)
    goto out; /* a usage-only chunk, or one with no choice */
  const json_t *d = json_object_get(ch, "delta");
  const json_t *content = json_object_get(d, "content");
  if (json_is_string(content) && json_string_length(content) > 0 && !a->content_cut) {
    size_t before = a->content.len;
    a->content_cut =
        append_cut(&a->content, json_string_value(content), json_string_length(content));
    *delta = a->content.data + before;
    *delta_len = a->content.len - before;
  }
  const json_t *tcs = json_object_get(d, "tool_calls");
  size_t i;
  json_t *tc;
  json_array_foreach(tcs, i, tc) {
    if ((rc = call_delta(a, tc, i, why, cap)) != 0)
      goto out;
  }
  const char *fr = json_string_value(json_object_get(ch, "finish_reason"));
  if (fr)
    snprintf(a->finish_reason, sizeof a->finish_reason, "%s", fr);
out:
  json_decref(j);
  return rc;
}

/* ---- credentials out of the model's words ---------------------------------------------------- */

#define REDACTED "[redacted]"

static int token_char(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.' || c == '~' || c == '+' || c == '/' || c == '=';
}

/* Bytes of the token starting at s (at most n). */
static size_t token_len(const char *s, size_t n) {
  size_t k = 0;
  while (k < n && token_char((unsigned char)s[k]))
    k++;
  while (k > 0 && s[k - 1] == '.')
    k--; /* the end of a sentence, not of the token */
  return k;
}

void orch__llm_scrub(const char *key, const char *in, char *out, size_t cap) {
  if (cap == 0)
    return;
  size_t n = strlen(in), kl = key ? strlen(key) : 0, o = 0;
  if (kl < ORCH_LLM_KEY_MIN)
    kl = 0;
#define PUT(p, len)                                                                                \
  do {                                                                                             \
    size_t len_ = SBX_MIN((size_t)(len), cap - 1 - o);                                             \
    memcpy(out + o, (p), len_);                                                                    \
    o += len_;                                                                                     \
  } while (0)
  for (size_t i = 0; i < n && o < cap - 1;) {
    const char *s = in + i;
    size_t left = n - i;
    int starts = i == 0 || !token_char((unsigned char)in[i - 1]);
    if (kl && left >= kl && memcmp(s, key, kl) == 0) { /* the key itself, wherever it stands */
      PUT(REDACTED, sizeof REDACTED - 1);
      i += kl;
      continue;
    }
    if (kl && left < kl && left >= ORCH_LLM_KEY_MIN && memcmp(s, key, left) == 0) {
      PUT(REDACTED, sizeof REDACTED - 1); /* the words were cut inside the key: its start */
      break;
    }
    if (starts && left > 7 && strncasecmp(s, "bearer", 6) == 0 && (s[6] == ' ' || s[6] == '\t')) {
      size_t sp = 6;
      while (sp < left && (s[sp] == ' ' || s[sp] == '\t'))
        sp++;
      size_t tl = token_len(s + sp, left - sp);
      if (tl >= ORCH_LLM_BEARER_MIN) { /* "Bearer <token>": the word kept, the token not */
        PUT(s, sp);
        PUT(REDACTED, sizeof REDACTED - 1);
        i += sp + tl;
        continue;
      }
    }
    if (starts && left > 3 && s[0] == 's' && s[1] == 'k' && (s[2] == '-' || s[2] == '_')) {
      size_t tl = token_len(s, left); /* sk-…, sk-proj-…, sk_live_…: an API key's shape */
      if (tl >= 3 + ORCH_LLM_SK_MIN) {
        PUT(REDACTED, sizeof REDACTED - 1);
        i += tl;
        continue;
      }
    }
    PUT(s, 1);
    i++;
  }
#undef PUT
  if (o == cap - 1 && o > 0) { /* perhaps cut: not inside a character */
    size_t lead = o - 1;
    while (lead > 0 && ((unsigned char)out[lead] & 0xC0) == 0x80)
      lead--;
    unsigned char c = (unsigned char)out[lead];
    size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (o - lead < need)
      o = lead;
  }
  out[o] = 0;
}

size_t orch__llm_release(const char *key, struct sbx_buf *b, size_t from, int all) {
  size_t kl = key ? strlen(key) : 0;
  if (kl < ORCH_LLM_KEY_MIN)
    return b->len;
  size_t rl = kl >= sizeof REDACTED - 1 ? sizeof REDACTED - 1 : kl;
  for (size_t i = from; i + kl <= b->len;) {
    if (memcmp(b->data + i, key, kl) != 0) {
      i++;
      continue;
    }
    if (rl == kl && kl < sizeof REDACTED - 1)
      memset(b->data + i, '*', kl); /* a key shorter than the word: masked in its place */
    else {
      memcpy(b->data + i, REDACTED, rl);
      memmove(b->data + i + rl, b->data + i + kl, b->len - i - kl);
      b->len -= kl - rl;
    }
    i += rl;
  }
  if (all)
    return b->len;
  /* the longest end of the text that the key starts with waits for what follows it */
  for (size_t k = SBX_MIN(kl - 1, b->len - from); k > 0; k--)
    if (memcmp(b->data + b->len - k, key, k) == 0)
      return b->len - k;
  return b->len;
}

/* ---- the connector --------------------------------------------------------------------------- */

#define ERR_BODY_BYTES 8192

struct orch_llm {
  struct tp_http_client *hc;
  char *endpoint; /* <url>/chat/completions */
  char *model;
  char *auth; /* "Authorization: Bearer <key>", or NULL */
  char *key;  /* the key alone, for scrubbing the model's words (orch__llm_scrub), or NULL */
  char *ca_file;
  int max_tokens;
  uint64_t stall_ms;
  struct sbx_list reqs;
};

struct orch_llm_req {
  struct sbx_list link;
  struct orch_llm *l;
  struct tp_http_xfer *x;
  struct orch_llm_cbs cbs;
  void *ud;
  struct orch_sse sse;
  struct orch_llm_answer a;
  size_t shown; /* bytes of a.content given to the text callback (orch__llm_release) */
  int status;
  struct sbx_buf err_body; /* an HTTP error's body, the start of it */
  char why[1024];          /* a malformed stream: what was wrong */
  int in_cb, cancelled;
};

const char *orch__llm_end_code(enum orch_llm_end e) {
  static const char *const codes[] = {"", "model_error", "model_unreachable", "model_stalled"};
  return (unsigned)e < SBX_ARRAY_SIZE(codes) ? codes[e] : "model_error";
}

const char *orch__llm_model(const struct orch_llm *l) { return l->model; }

static void req_free(struct orch_llm_req *r) {
  sbx_list_remove(&r->link);
  orch__sse_free(&r->sse);
  orch__llm_answer_free(&r->a);
  sbx_buf_free(&r->err_body);
  sbx_free(r);
}

static int on_head(void *ud, int status, const char *content_type) {
  (void)content_type;
  struct orch_llm_req *r = ud;
  r->status = status;
  return 0;
}

/* The answer's new text to the caller, the key taken out of it (all: the answer ended, nothing
 * waits for what follows).  Nonzero when the caller stopped the request meanwhile. */
static int release_text(struct orch_llm_req *r, int all) {
  size_t safe = orch__llm_release(r->l->key, &r->a.content, r->shown, all);
  if (safe > r->shown && r->cbs.text) {
    r->in_cb++;
    r->cbs.text(r->ud, r->a.content.data + r->shown, safe - r->shown);
    r->in_cb--;
  }
  if (safe > r->shown)
    r->shown = safe;
  return r->cancelled;
}

/* One SSE event of the stream: a chunk taken in, its new text to the caller. */
static int on_event(void *ud, const char *data, size_t len) {
  struct orch_llm_req *r = ud;
  const char *delta;
  size_t dlen;
  if (orch__llm_chunk(&r->a, data, len, &delta, &dlen, r->why, sizeof r->why) != 0)
    return SBX_EPROTO;
  if (r->a.error[0])
    return SBX_EPROTO; /* the model said it failed: nothing after it counts */
  if (r->a.done)
    return SBX_ECANCELED; /* the answer is complete: the transfer stops, open or not */
  if (dlen)
    release_text(r, 0);
  return r->cancelled ? SBX_ECANCELED : 0;
}

static int on_body(void *ud, const char *p, size_t len) {
  struct orch_llm_req *r = ud;
  if (r->status >= 300) { /* an error's body: its start is kept for its words */
    size_t room = ERR_BODY_BYTES - r->err_body.len;
    sbx_buf_append(&r->err_body, p, SBX_MIN(room, len));
    return 0;
  }
  int rc = orch__sse_feed(&r->sse, p, len, on_event, r);
  if (rc == SBX_ETOOBIG)
    snprintf(r->why, sizeof r->why, "the model sent an event over %u bytes", ORCH_LLM_EVENT_BYTES);
  if (r->cancelled) { /* stopped from the text callback: the transfer is cancelled already */
    req_free(r);
    return SBX_ECANCELED;
  }
  return rc;
}

/* The model's own words for an HTTP error: error.message of a JSON body, or the body's text. */
static void http_error_words(struct orch_llm_req *r, char *out, size_t cap) {
  struct orch_llm_answer tmp;
  memset(tmp.error, 0, sizeof tmp.error);
  json_t *j = json_loadb(r->err_body.data ? r->err_body.data : "", r->err_body.len, 0, NULL);
  const json_t *e = json_object_get(j, "error");
  if (e)
    set_error(&tmp, e);
  else if (json_is_string(json_object_get(j, "message")))
    set_error(&tmp, json_object_get(j, "message"));
  json_decref(j);
  const char *text = tmp.error;
  size_t n = strlen(text);
  if (n == 0 && r->err_body.len) { /* not JSON: its text, cut at a character */
    text = r->err_body.data;
    n = r->err_body.len;
    json_t *s = json_stringn(text, n); /* NULL when not UTF-8: then nothing of it is shown */
    n = s ? utf8_cut(text, n, ORCH_LLM_ERROR_CHARS) : 0;
    json_decref(s);
  }
  if (n)
    snprintf(out, cap, "the model answered HTTP %d: %.*s", r->status, (int)n, text);
  else
    snprintf(out, cap, "the model answered HTTP %d", r->status);
}

static void on_done(void *ud, enum tp_http_end end, int status, const char *why) {
  struct orch_llm_req *r = ud;
  char words[ORCH_LLM_ERROR_CHARS * 4 + 160];
  enum orch_llm_end e = ORCH_LLM_OK;
  words[0] = 0;
  if (end == TP_HTTP_OK && status >= 300) {
    e = ORCH_LLM_MODEL_ERROR;
    http_error_words(r, words, sizeof words);
  } else if (end == TP_HTTP_OK || end == TP_HTTP_ABORTED) {
    if (end == TP_HTTP_OK && orch__sse_end(&r->sse, on_event, r) != 0 && !r->why[0] &&
        !r->a.error[0])
      snprintf(r->why, sizeof r->why, "the model's last event could not be read");
    if (r->cancelled) { /* stopped from the text callback of that last event */
      req_free(r);
      return;
    }
    if (r->a.error[0]) {
      e = ORCH_LLM_MODEL_ERROR;
      snprintf(words, sizeof words, "the model reported an error: %s", r->a.error);
    } else if (r->why[0]) {
      e = ORCH_LLM_MODEL_ERROR;
      snprintf(words, sizeof words, "%s", r->why);
    } else if (!r->a.done && !r->a.finish_reason[0]) {
      e = ORCH_LLM_MODEL_ERROR;
      snprintf(words, sizeof words, "the model's stream ended before its answer was complete");
    }
  } else if (end == TP_HTTP_UNREACHABLE) {
    e = ORCH_LLM_UNREACHABLE;
    snprintf(words, sizeof words, "the model could not be reached: %s", why);
  } else if (end == TP_HTTP_STALLED || end == TP_HTTP_TIMEDOUT) {
    e = ORCH_LLM_STALLED;
    snprintf(words, sizeof words, "the model sent nothing for %llu s",
             (unsigned long long)(r->l->stall_ms / 1000));
  } else {
    e = ORCH_LLM_MODEL_ERROR;
    snprintf(words, sizeof words, "the model's answer broke off: %s", why);
  }
  if (release_text(r, 1)) { /* the text held back for a key that did not come */
    req_free(r);
    return;
  }
  char clean[sizeof words];
  orch__llm_scrub(r->l->key, words, clean, sizeof clean);
  char raw[sizeof r->a.error];
  memcpy(raw, r->a.error, sizeof raw);
  orch__llm_scrub(r->l->key, raw, r->a.error, sizeof r->a.error);
  r->cbs.end(r->ud, e, &r->a, clean);
  req_free(r);
}

static const struct tp_http_cbs http_cbs = {
    .on_head = on_head, .on_body = on_body, .on_done = on_done};

struct orch_llm_req *orch__llm_start(struct orch_llm *l, const json_t *messages,
                                     const json_t *tools, const struct orch_llm_cbs *cbs,
                                     void *ud) {
  json_t *body = json_pack("{s:s, s:O, s:b, s:i}", "model", l->model, "messages", messages,
                           "stream", 1, "max_tokens", l->max_tokens);
  if (body && tools && json_array_size(tools) > 0)
    json_object_set(body, "tools", (json_t *)tools);
  size_t len = 0;
  char *text = body ? orch__json_dump(body, &len) : NULL;
  json_decref(body);
  struct orch_llm_req *r = text ? sbx_calloc(1, sizeof *r) : NULL;
  if (r == NULL) {
    sbx_free(text);
    return NULL;
  }
  SBX_LIST_INIT(&r->link);
  r->l = l;
  r->cbs = *cbs;
  r->ud = ud;
  orch__sse_init(&r->sse);
  orch__llm_answer_init(&r->a);
  sbx_buf_init(&r->err_body, ERR_BODY_BYTES + 1);
  const char *headers[3] = {"Content-Type: application/json", "Accept: text/event-stream", l->auth};
  struct tp_http_request rq = {.method = "POST",
                               .url = l->endpoint,
                               .headers = headers,
                               .n_headers = l->auth ? 3 : 2,
                               .body = text,
                               .body_len = len,
                               .stall_ms = l->stall_ms,
                               .ca_file = l->ca_file};
  r->x = tp_http_start(l->hc, &rq, &http_cbs, r);
  sbx_free(text);
  if (r->x == NULL) {
    req_free(r);
    return NULL;
  }
  sbx_list_insert_tail(&l->reqs, &r->link);
  return r;
}

void orch__llm_cancel(struct orch_llm_req *r) {
  if (r == NULL || r->cancelled)
    return;
  r->cancelled = 1;
  tp_http_cancel(r->x);
  if (!r->in_cb)
    req_free(r); /* else on_body frees it once the text callback returned */
}

int orch__llm_new(uv_loop_t *loop, const struct orch_config *cfg, struct orch_llm **out,
                  struct sbx_error *err) {
  *out = NULL;
  if (cfg->llm_url == NULL || cfg->llm_model == NULL)
    return 0;
  struct orch_llm *l = sbx_calloc(1, sizeof *l);
  if (l == NULL)
    return sbx_error_set(err, SBX_ENOMEM, "assistant: out of memory");
  SBX_LIST_INIT(&l->reqs);
  size_t ul = strlen(cfg->llm_url);
  while (ul > 0 && cfg->llm_url[ul - 1] == '/')
    ul--;
  struct sbx_buf b;
  sbx_buf_init(&b, 64 * 1024);
  int rc = sbx_buf_appendf(&b, "%.*s/chat/completions", (int)ul, cfg->llm_url);
  l->endpoint = rc == 0 ? sbx_buf_steal(&b, NULL) : NULL;
  sbx_buf_free(&b);
  if (cfg->llm_api_key) {
    sbx_buf_init(&b, 64 * 1024);
    if (sbx_buf_appendf(&b, "Authorization: Bearer %s", cfg->llm_api_key) == 0)
      l->auth = sbx_buf_steal(&b, NULL);
    sbx_buf_free(&b);
    l->key = sbx_strdup(cfg->llm_api_key);
  }
  l->model = sbx_strdup(cfg->llm_model);
  l->ca_file = cfg->llm_ca_file ? sbx_strdup(cfg->llm_ca_file) : NULL;
  l->max_tokens = cfg->llm_max_tokens;
  l->stall_ms = (uint64_t)cfg->llm_stall_s * 1000;
  if (l->endpoint == NULL || l->model == NULL ||
      (cfg->llm_api_key && (l->auth == NULL || l->key == NULL)) ||
      (cfg->llm_ca_file && l->ca_file == NULL)) {
    orch__llm_free(l);
    return sbx_error_set(err, SBX_ENOMEM, "assistant: out of memory");
  }
  if ((rc = tp_http_client_new(loop, &l->hc, err)) != 0) {
    orch__llm_free(l);
    return rc;
  }
  *out = l;
  return 0;
}

void orch__llm_free(struct orch_llm *l) {
  if (l == NULL)
    return;
  struct sbx_list *it, *tmp;
  SBX_LIST_FOREACH_SAFE(it, tmp, &l->reqs) {
    struct orch_llm_req *r = SBX_CONTAINER_OF(it, struct orch_llm_req, link);
    req_free(r);
  }
  tp_http_client_free(l->hc); /* cancels the transfers: no callback */
  if (l->auth)                /* the key is not left in freed memory */
    OPENSSL_cleanse(l->auth, strlen(l->auth));
  if (l->key)
    OPENSSL_cleanse(l->key, strlen(l->key));
  sbx_free(l->auth);
  sbx_free(l->key);
  sbx_free(l->endpoint);
  sbx_free(l->model);
  sbx_free(l->ca_file);
  sbx_free(l);
}
