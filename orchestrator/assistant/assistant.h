/* assistant.h -- what the assistant's files share: the model connector (llm.h, which it includes),
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

#include "llm.h"

#define ORCH_MSG_TEXT_MAX      32000             /* characters of a user's message */
#define ORCH_MSG_FILES_MAX     20                /* file_ids of one message */
#define ORCH_CONVERSATION_MAX  200               /* earlier messages sent to the model, newest */
#define ORCH_DELTA_MS          50                /* live text deltas: at most this often ... */
#define ORCH_DELTA_BYTES       4096              /* ... or when this much is waiting */
#define ORCH_KEEP_MS           1000              /* the streaming text kept in its row: this often */
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
  "written, so it was cut here; ask again.\"}"
/* The outcome of marking answers left streaming (store_message_interrupt*), logged. */
void orch__on_interrupted(int rc, const struct sbx_error *err, void *ud);
/* Whether an unfinished run being reloaded (a start, a node taking its chat over) is a tool run
 * of a conversation turn that no turn here answers any more: its turn ended with its server
 * (`interrupted`), so nobody waits for its result and it must not run again (chat.c abandons
 * it, with the message returned; NULL: it runs).  The core's hook orch.run_orphaned. */
const char *orch__asst_run_orphaned(struct orch *o, const struct store_run *rec);
/* The error message of such a run. */
#define ORCH_ORPHANED_RUN_MSG                                                                      \
  "The server restarted while the assistant's turn was running this code; that turn was ended "    \
  "(interrupted), so the code was not run again. Ask again to run it."

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
