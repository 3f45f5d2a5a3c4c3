/* mcp.h -- what the orchestrator's tool surface shares: the tools an assistant calls (tools.h,
 * which it includes), the Model Context Protocol over them (mcp.c: JSON-RPC 2.0 and the MCP
 * methods, sessions, cancellation, progress; no HTTP, so it can be fuzzed), and the HTTP side
 * (api_mcp.c: POST/DELETE /mcp, GET /v1/tools, POST /v1/tools/call, chat keys).
 *
 * Internal to the orchestrator, like internal.h (which it includes); a header of its own so the
 * three files and their tests share these names without every other file seeing them.
 *
 * Ownership: a tool call (struct orch_tool_call) belongs to tools.c from its start until its
 * result is handed over (ops->done) or its caller abandons it; an MCP call (struct orch_mcp_call)
 * belongs to mcp.c from tools/call until its response is handed to the sink (sink->end) or the
 * HTTP side reports it gone.  Neither calls back from inside the function that started it.
 */
#ifndef ORCH_MCP_H
#define ORCH_MCP_H

#include "tools.h"

/* ---- MCP (mcp.c) ---------------------------------------------------------------------------- */

#define ORCH_MCP_BODY_MAX (12u * ORCH_MIB) /* 413 beyond (transport) */
/* Sessions are budgeted per credential: the API key may hold ORCH_MCP_SESSIONS_MAX, each chat
 * key ORCH_MCP_CHAT_KEY_SESSIONS and every chat key together ORCH_MCP_SESSIONS_MAX.  Past its
 * budget a credential's own least recently used idle session goes (past the chat keys' total,
 * one of the chat key holding the most); none idle: 503. */
#define ORCH_MCP_SESSIONS_MAX       4096
#define ORCH_MCP_CHAT_KEY_SESSIONS  64
#define ORCH_MCP_SESSION_IDLE_MS    (24ull * 3600 * 1000) /* a session unused this long ends */
#define ORCH_MCP_CALLS_MAX          16                    /* tool calls in flight per session */
#define ORCH_MCP_PROGRESS_TOKEN_MAX 256 /* bytes of a string progressToken; longer: -32602 */
/* A call that streams progress hears of its run at least this often: the state again (with the
 * time so far) when nothing else was sent, so a quiet run never outlasts a client's timeout that
 * progress resets (the spec's 15 s is met with room for a loaded machine). */
#define ORCH_MCP_KEEPALIVE_MS 10000
#define ORCH_MCP_N_VERSIONS      2
/* The session revisions spoken (initialize and Mcp-Session-Id), newest first ("2025-11-25",
 * "2025-06-18"); an index names one in a session id, so the order is kept. */
extern const char *const orch__mcp_versions[ORCH_MCP_N_VERSIONS];
/* The stateless revision spoken beside them, negotiated per request: no initialize and no
 * session, every request's params._meta names the revision and the client's capabilities, and
 * the headers mirror the body (MCP-Protocol-Version, Mcp-Method, Mcp-Name). */
#define ORCH_MCP_STATELESS "2026-07-28"
#define ORCH_MCP_TASKS_EXT "io.modelcontextprotocol/tasks" /* SEP-2663, stateless only */
/* Stateless tool calls in flight together (each has its own HTTP request; past it -32000). */
#define ORCH_MCP_STATELESS_CALLS_MAX 1024
/* How long a stateless client may keep tools/list and server/discover (the list changes only
 * with the server's settings; "private": it depends on the credential). */
#define ORCH_MCP_LIST_TTL_MS 300000

/* How tools/call is carried out: tools.c's execution (api_mcp.c), or a test double. */
struct orch_mcp_tools {
  void *ud;
  void (*env)(void *ud, struct orch_tool_env *env, json_t **keep);
  int (*start)(void *ud, enum orch_tool t, struct orch_tool_args *args, json_t *args_json,
               const char *base_url, const struct orch_tool_ops *ops, void *call_ud,
               struct orch_tool_call **out, json_t **now, char *why, size_t cap);
  void (*abandon)(void *ud, struct orch_tool_call *tc);
  /* Several nodes (both NULL with one): the secret every node shares, which makes session ids
   * any node checks (an HMAC over the id's own bytes and its credential), and how the other
   * nodes hear what concerns a session they may be running calls of (a cancel, the session's
   * end): `what` is "mcp-cancel <session> <request>" or "mcp-end <session>", ids only (the
   * request id as an HMAC of its JSON), for orch__mcp_notified on every node. */
  const unsigned char *secret;
  void (*tell)(void *ud, const char *what);
  int fixtures; /* CEREA_MCP_CONFORMANCE_FIXTURES: the suite's fixtures beside our tools */
  /* The answer to a run's input() that a client gave through elicitation (NULL: none). */
  int (*give_input)(void *ud, const char *run_id, const char *text);
  /* The input() a live run of this node waits in (orch__tool_input_asked): 1 with its prompt and
   * the key naming that one question, 0 when none (NULL: never asked). */
  int (*input_asked)(void *ud, const char *run_id, char *prompt, size_t cap,
                     char key[ORCH_TOOL_INPUT_KEY]);
};

struct orch_mcp;
struct orch_mcp_call;
struct orch_mcp *orch__mcp_new(const struct orch_mcp_tools *tools); /* copied; NULL: no memory */
/* What another node told (orch_mcp_tools.tell's text): a call of ours it cancelled, a session it
 * ended (ended here too, its calls abandoned, its sinks ended with no response; its id refused
 * from then on).  Anything else is ignored. */
void orch__mcp_notified(struct orch_mcp *m, const char *what);
/* Ends every session (their calls abandoned, their sinks told nothing) and frees m. */
void orch__mcp_free(struct orch_mcp *m);
size_t orch__mcp_sessions(const struct orch_mcp *m);

/* One POST of the MCP endpoint, as the HTTP side read it (borrowed for the call). */
struct orch_mcp_request {
  const char *body;
  size_t len;
  const char *session_id; /* Mcp-Session-Id, or NULL */
  const char *version;    /* MCP-Protocol-Version, or NULL */
  const struct orch_tool_scope *scope;
  const char *cred_hash; /* sha256 hex of the credential: a session answers to its own only */
  int sse_ok;            /* the client accepts text/event-stream */
  const char *base_url;  /* for the result's links */
  const char *method;    /* Mcp-Method, or NULL (the stateless revision requires it) */
  const char *name;      /* Mcp-Name, or NULL (likewise, for tools/call) */
};
/* What to answer. */
struct orch_mcp_reply {
  int status; /* 200, 202, 400, 404 (also an unknown method, stateless), 503 */
  char *body; /* JSON text (sbx-owned), or NULL: no body */
  size_t len;
  char session_id[65];        /* "": none; else send Mcp-Session-Id (initialize) */
  struct orch_mcp_call *call; /* a tools/call that goes on (body NULL): the HTTP side holds the
                                 request and attaches a sink at once (orch__mcp_call_attach) */
  int stream;                 /* with call: answer as an SSE stream (progress asked, accepted) */
  /* a tools/call for a chat another node serves (tools.start said SBX_EREMOTE; body NULL, call
   * NULL): the HTTP side forwards the request to that node, which carries it out */
  char forward_chat[STORE_ID_LEN + 1];
};
/* Classifies one message (a request, a notification, a response; a batch or anything else is
 * refused) and answers what can be answered now: initialize (a new session), ping, tools/list,
 * tools/call (checked, started), server/discover (stateless), notifications and responses to
 * our own requests (202).  0, or SBX_ENOMEM (nothing changed). */
int orch__mcp_handle(struct orch_mcp *m, const struct orch_mcp_request *rq,
                     struct orch_mcp_reply *out);
void orch__mcp_reply_free(struct orch_mcp_reply *r);
/* DELETE: ends the session (its calls abandoned, their sinks ended with no response).  200 when
 * it ended, 404 when there was none for this credential, 400 without a session id. */
int orch__mcp_end_session(struct orch_mcp *m, const char *session_id, const char *cred_hash);

/* Where a pending call's messages go (the HTTP side). */
struct orch_mcp_sink {
  /* A notification (progress) for the client; text borrowed. */
  void (*send)(void *ud, const char *text, size_t len);
  /* The last message: the response, or text NULL when none is due (cancelled by the client, or
   * its session ended; in JSON mode answer_cancelled says what the HTTP answer may carry).  The
   * call is freed after the callback returns. */
  void (*end)(void *ud, const char *text, size_t len);
};
void orch__mcp_call_attach(struct orch_mcp_call *c, const struct orch_mcp_sink *sink, void *ud);
/* The HTTP side went away (client gone, server closing): the tool call is abandoned and the MCP
 * call freed; no sink callback follows. */
void orch__mcp_call_gone(struct orch_mcp_call *c);
/* A JSON-RPC error response for id (NULL: null) as JSON text (sbx-owned), for answers the HTTP
 * side makes itself (401, 403, a cancelled call in JSON mode). */
char *orch__mcp_error_text(const json_t *id, int code, const char *message, size_t *len);

/* JSON-RPC error codes: the spec's, and ours (-32000 - HTTP status, for refusals by HTTP). */
enum {
  ORCH_RPC_PARSE_ERROR = -32700,
  ORCH_RPC_INVALID_REQUEST = -32600,
  ORCH_RPC_METHOD_NOT_FOUND = -32601,
  ORCH_RPC_INVALID_PARAMS = -32602,
  ORCH_RPC_INTERNAL = -32603,
  ORCH_RPC_CANCELLED = -32800, /* the answer a cancelled call's held JSON request gets */
  ORCH_RPC_BUSY = -32000,
  ORCH_RPC_UNAUTHORIZED = -32001,
  ORCH_RPC_FORBIDDEN = -32003,
  ORCH_RPC_NO_SESSION = -32004,
  /* The stateless revision's (2026-07-28), from the range it reserves: */
  ORCH_RPC_HEADER_MISMATCH = -32020,
  ORCH_RPC_MISSING_CAPABILITY = -32021,
  ORCH_RPC_UNSUPPORTED_VERSION = -32022,
};

/* ---- the conformance suite's fixtures (mcp_fixtures.c; orch_mcp_tools.fixtures) ---------- */

/* A fixture's answer: a result (status 200), or an error (status, code, message, data), after
 * the notifications in notes (progress, log messages) for a client that takes a stream. */
struct orch_mcp_fixture_reply {
  int status;
  json_t *result, *data, *notes; /* owned by the caller once answered */
  json_t *ask; /* instead of a result: the server's own request ({method, params}) to send on
                  the call's stream; orch__mcp_fixture_answered makes the result of its answer */
  int code;
  char message[200];
};
/* 1 when the request's clientCapabilities name the Tasks extension (mcp_task.c). */
int orch__mcp_tasks_negotiated(const json_t *params);
/* A task's own fields {taskId, status, createdAt, lastUpdatedAt (ISO 8601), ttlMs, pollIntervalMs}
 * (new reference; mcp_task.c). */
json_t *orch__mcp_task_json(const char *id, const char *status, long long made, long long last,
                            int poll_ms);
/* Answers method when a fixture has it (1), else 0 (ours, or not found). */
int orch__mcp_fixture_method(const char *method, const json_t *params, int stateless,
                             struct orch_mcp_fixture_reply *r);
void orch__mcp_fixture_tools(json_t *tools, int stateless);  /* appended to tools/list */
/* The result of a fixture tool whose request (ask) the client answered: its result or error. */
json_t *orch__mcp_fixture_answered(const char *tool, const json_t *result, const json_t *error);
json_t *orch__mcp_fixture_capabilities(int stateless);        /* merged into ours (new) */

void orch__routes_mcp(struct orch *o);

#endif
