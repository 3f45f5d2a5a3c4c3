/* llm.h -- the assistant's model connector (llm.c): an OpenAI-compatible Chat Completions API
 * (llama.cpp's server, Ollama, vLLM, a hosted one), asked with `stream: true` on
 * transport/http_client; its SSE and its chunks parsed within bounds.  It knows the model's wire
 * format and nothing of chats: the conversation (assistant.h) asks it for a completion and hears
 * text and an end.
 *
 * Internal to the orchestrator, like internal.h (which it includes).
 */
#ifndef ORCH_LLM_H
#define ORCH_LLM_H

#include "../internal.h"

#define ORCH_ANSWER_BYTES    (256u * 1024u)    /* an answer's text; past it the rest is dropped */
#define ORCH_LLM_EVENT_BYTES (2u * ORCH_MIB)   /* one SSE line or event from the model */
#define ORCH_LLM_CALLS       16                /* tool calls of one model response */
#define ORCH_LLM_ARGS_BYTES  (ORCH_MIB + 4096) /* one tool call's arguments (code <= 1 MiB) */
#define ORCH_LLM_ERROR_CHARS 500               /* of the model's own error text, shown */

/* ---- SSE, as the model sends it (llm.c) -------------------------------------------------------
 * The WHATWG event-stream rules: lines end with LF, CRLF or CR; `data:` lines (one leading space
 * dropped) joined with LF; a blank line dispatches; comments and other fields are ignored.  A line
 * or an event over ORCH_LLM_EVENT_BYTES is an error (SBX_ETOOBIG), never a silent cut. */
struct orch_sse {
  struct sbx_buf line, data;
  int has_data;
  int cr; /* the last byte was CR: an LF right after it ends nothing more */
};
typedef int (*orch_sse_cb)(void *ud, const char *data, size_t len); /* nonzero stops the feed */
void orch__sse_init(struct orch_sse *p);
void orch__sse_free(struct orch_sse *p);
/* Feeds bytes; cb for each event's data (borrowed for the call).  0, SBX_ETOOBIG, or cb's code. */
int orch__sse_feed(struct orch_sse *p, const char *buf, size_t len, orch_sse_cb cb, void *ud);
/* The stream ended: a last line or event not closed by a blank line is taken as if it were. */
int orch__sse_end(struct orch_sse *p, orch_sse_cb cb, void *ud);

/* ---- one response of the model, assembled from its chunks (llm.c) ---------------------------- */
struct orch_llm_call {
  char id[128];
  char name[64];
  struct sbx_buf args; /* the arguments' JSON text as streamed, at most ORCH_LLM_ARGS_BYTES */
};
struct orch_llm_answer {
  struct sbx_buf content; /* the text of this response, at most ORCH_ANSWER_BYTES */
  int content_cut;        /* text past that was dropped */
  struct orch_llm_call calls[ORCH_LLM_CALLS];
  size_t n_calls;
  char finish_reason[32];                   /* "" until the model said */
  int done;                                 /* `data: [DONE]` came */
  char error[ORCH_LLM_ERROR_CHARS * 4 + 1]; /* an error object in the stream: its message */
};
void orch__llm_answer_init(struct orch_llm_answer *a);
void orch__llm_answer_free(struct orch_llm_answer *a);
/* One event's data: a chunk {choices: [{delta: {content?, tool_calls?: [{index, id?, function:
 * {name?, arguments?}}]}, finish_reason?}]}, `[DONE]`, or {error: {message}}.  *delta, *delta_len:
 * the new text of this chunk (inside a->content; 0 when none).  0, or SBX_EPROTO with why
 * (malformed JSON, a tool call index past ORCH_LLM_CALLS, arguments past their bound). */
int orch__llm_chunk(struct orch_llm_answer *a, const char *data, size_t len, const char **delta,
                    size_t *delta_len, char *why, size_t cap);

/* ---- the connector (llm.c) -------------------------------------------------------------------- */
/* How a request ended, as the chat shows it. */
enum orch_llm_end {
  ORCH_LLM_OK = 0,      /* an answer (text and/or tool calls) */
  ORCH_LLM_MODEL_ERROR, /* an HTTP error, an error in the stream, a malformed stream */
  ORCH_LLM_UNREACHABLE, /* connect, DNS, TLS */
  ORCH_LLM_STALLED,     /* CEREA_LLM_STALL_S without a byte */
};
const char *orch__llm_end_code(enum orch_llm_end e); /* "model_error", ... ("" for OK) */
struct orch_llm;
struct orch_llm_req;
struct orch_llm_cbs {
  /* New text of the answer (borrowed). */
  void (*text)(void *ud, const char *p, size_t len);
  /* Once, at the end (not after orch__llm_cancel): the answer (borrowed; valid on OK, and what
   * came before a failure otherwise), and on failure the words for the chat (never a header,
   * never the key).  The request is freed after the call. */
  void (*end)(void *ud, enum orch_llm_end end, const struct orch_llm_answer *a, const char *why);
};
/* The connector for cfg's CEREA_LLM_* (NULL in *out when no model is configured).  SBX_ENOMEM,
 * SBX_EIO. */
int orch__llm_new(uv_loop_t *loop, const struct orch_config *cfg, struct orch_llm **out,
                  struct sbx_error *err);
void orch__llm_free(struct orch_llm *l); /* requests in flight end without a callback */
const char *orch__llm_model(const struct orch_llm *l);
/* POSTs <url>/chat/completions {model, messages, tools? (NULL: none), stream: true, max_tokens}.
 * messages and tools are borrowed for the call.  NULL when out of memory (no callback). */
struct orch_llm_req *orch__llm_start(struct orch_llm *l, const json_t *messages,
                                     const json_t *tools, const struct orch_llm_cbs *cbs, void *ud);
void orch__llm_cancel(struct orch_llm_req *r); /* no callback after it */

#endif
