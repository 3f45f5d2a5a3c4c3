/* assistant.h -- what the assistant's files share: the model connector (llm.c: an OpenAI-compatible
 * Chat Completions stream, its SSE and its chunks parsed within bounds, on transport/http_client),
 * the conversation turn (assistant.c: the turn loop, its messages and their events) and the
 * handlers (api_messages.c: POST/GET /v1/chats/{chat}/messages, POST /v1/turns/{turn}/cancel,
 * POST /v1/chats/{chat}/page_link).
 *
 * Layers: assistant.c is domain: it holds no request and knows no HTTP, neither the API's nor the
 * model's (it asks llm.c for a completion and hears text and an end); llm.c knows the model's wire
 * format and nothing of chats; api_messages.c reads requests and answers.
 *
 * Internal to the orchestrator, like internal.h (which it includes).
 */
#ifndef ORCH_ASSISTANT_H
#define ORCH_ASSISTANT_H

#include "internal.h"

#define ORCH_MSG_TEXT_MAX      32000             /* characters of a user's message */
#define ORCH_MSG_FILES_MAX     20                /* file_ids of one message */
#define ORCH_ANSWER_BYTES      (256u * 1024u)    /* an answer's text; past it the rest is dropped */
#define ORCH_LLM_EVENT_BYTES   (2u * ORCH_MIB)   /* one SSE line or event from the model */
#define ORCH_LLM_CALLS         16                /* tool calls of one model response */
#define ORCH_LLM_ARGS_BYTES    (ORCH_MIB + 4096) /* one tool call's arguments (code <= 1 MiB) */
#define ORCH_LLM_ERROR_CHARS   500               /* of the model's own error text, shown */
#define ORCH_CONVERSATION_MAX  200               /* earlier messages sent to the model, newest */
#define ORCH_DELTA_MS          50                /* live text deltas: at most this often ... */
#define ORCH_DELTA_BYTES       4096              /* ... or when this much is waiting */
#define ORCH_RESULT_TEXT_BYTES (64u * 1024u)     /* a tool result's text for the model */

/* What is replayed of earlier turns (assistant.c's rule, docs/api.md "The assistant"). */
#define ORCH_REPLAY_BYTES      (1024u * 1024u) /* the earlier conversation, JSON bytes at most */
#define ORCH_REPLAY_ITEM_CHARS 4000 /* a tool argument string or result past this: shortened */
#define ORCH_REPLAY_KEEP_CHARS 1500 /* ... to this many characters at each end */
#define ORCH_REPLAY_PAGE       25   /* earlier messages read at a time */
/* GET /v1/chats/{chat}/messages: a page's messages by default, and at most (?limit=). */
#define ORCH_MESSAGES_PAGE_DEFAULT 100
#define ORCH_MESSAGES_PAGE_MAX     500

/* The error of an answer that was streaming when its server stopped (marked at the next start). */
#define ORCH_INTERRUPTED_JSON                                                                      \
  "{\"code\":\"interrupted\",\"message\":\"The server restarted while this answer was being "      \
  "written; ask again.\"}"
/* The outcome of marking answers left streaming (store_message_interrupt*), logged. */
void orch__on_interrupted(int rc, const struct sbx_error *err, void *ud);
/* Whether an unfinished run being reloaded (a start, a node taking its chat over) is a tool run
 * of a conversation turn that no turn here answers any more: its turn ended with its server
 * (`interrupted`), so nobody waits for its result and it must not run again (chat.c abandons
 * it).  1 or 0. */
int orch__asst_run_orphaned(struct orch *o, const struct store_run *rec);
/* The error message of such a run. */
#define ORCH_ORPHANED_RUN_MSG                                                                      \
  "The server restarted while the assistant's turn was running this code; that turn was ended "    \
  "(interrupted), so the code was not run again. Ask again to run it."

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

/* ---- the model's words, scrubbed (llm.c) -------------------------------------------------------
 * in, copied to out (cap bytes, NUL-terminated, cut at a character) with every credential the
 * model or a proxy might echo replaced by "[redacted]": the configured key wherever it stands
 * (one of at least ORCH_LLM_KEY_MIN bytes), the token after "Bearer " (ORCH_LLM_BEARER_MIN
 * token characters or more, any case), and an API key's shape: a word starting sk- or sk_ with
 * ORCH_LLM_SK_MIN or more token characters after it.  Token characters: A-Z a-z 0-9 - _ . ~ + / =.
 * The start of the key (ORCH_LLM_KEY_MIN bytes or more) at the very end of in goes too: words cut
 * to their bound may end inside it.  in and out may not overlap. */
#define ORCH_LLM_KEY_MIN    4
#define ORCH_LLM_BEARER_MIN 8
#define ORCH_LLM_SK_MIN     16
void orch__llm_scrub(const char *key, const char *in, char *out, size_t cap);
/* The answer's text b as it streams: the key (of at least ORCH_LLM_KEY_MIN bytes) wherever it
 * stands from byte `from` on is replaced by "[redacted]" (a key shorter than that word: masked
 * with '*'), in place.  Returns how much of b may be shown: all of it when `all` (the answer
 * ended), else up to the longest end of b that the key starts with (held for what follows). */
size_t orch__llm_release(const char *key, struct sbx_buf *b, size_t from, int all);

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

/* ---- the conversation (assistant.c) ----------------------------------------------------------- */
struct orch_asst; /* a chat's conversation turn in progress (chat->asst) */

/* What a POST /v1/chats/{chat}/messages asks (checked by the handler; borrowed). */
struct orch_ask {
  const char *text;
  const struct store_file *files; /* the attachments named by file_ids, of this chat */
  size_t n_files;
};
/* The ask is durable (rc 0: the user message, the assistant message and the turn are stored,
 * the model asked) or not (rc, err).  message_id: the user's message; answer_id: the
 * assistant's. */
typedef void (*orch_ask_cb)(void *ud, int rc, const struct sbx_error *err, const char *message_id,
                            const char *answer_id, const char *turn_id);
/* Opens a conversation turn in chat c: SBX_ENOENT without a model, SBX_EBUSY when the chat has
 * one open (one at a time), SBX_ENOMEM; else 0 and cb follows (never from inside this call). */
int orch__asst_ask(struct orch *o, struct orch_chat *c, const struct orch_ask *ask, orch_ask_cb cb,
                   void *ud);
/* Stops the turn: the model request ends, the turn's live runs are cancelled, the answer ends
 * `stopped` with its text so far; cb (ud, 0 or the write's failure) once that is durable.
 * SBX_ENOENT: no such turn open in memory (finished, or not a conversation turn); SBX_ESTATE: it
 * is finishing (its answer is complete); SBX_ENOMEM. */
typedef void (*orch_stop_cb)(void *ud, int rc, const char *message_id);
int orch__asst_stop(struct orch *o, const char *turn_id, orch_stop_cb cb, void *ud);
/* The message object (new reference) of a stored message; a message of the turn in progress is
 * shown as it is now (its text so far, its runs). */
json_t *orch__message_json(struct orch *o, const struct store_message *m);
/* The chat's streaming assistant message as one `message` event's data (whole object, JSON text,
 * sbx-owned), for a page that attaches; NULL when none streams. */
char *orch__asst_held(struct orch_chat *c, size_t *len);
/* The server is closing: every turn's model request and tool call end (no callback; a tool run
 * stays for the next start).  _free_all, once the store is closed, frees what is left. */
void orch__asst_close_all(struct orch *o);
void orch__asst_free_all(struct orch *o);

void orch__routes_messages(struct orch *o);

#endif
