/* mcp.c -- the Model Context Protocol server over the tools (tools.c): JSON-RPC 2.0 messages,
 * the MCP methods, sessions, cancellation and progress.  One message in (the body of a POST to
 * the MCP endpoint, with the session and version headers), one answer out; a tools/call that
 * waits goes on as a call whose messages go to a sink the HTTP side gives.  No HTTP here
 * (api_mcp.c), so tests and the fuzzer drive it with plain strings.
 *
 * Messages: a request {jsonrpc: "2.0", id: string | integer, method, params?: object}, a
 * notification (no id), or a response (result or error, to a request of ours: we send none, so
 * it is accepted and dropped).  A batch (an array: MCP 2025-06-18 removed them) and anything else
 * is an invalid request.  Answers: a request's JSON-RPC response (200, errors included), 202 for
 * a notification or a response, 400 for what is not JSON-RPC, a missing session id or an
 * unsupported MCP-Protocol-Version, 404 for an unknown or ended session, 503 when no session of
 * the credential can make room for a new one.
 *
 * Sessions: initialize makes one (its id is 32 random bytes in hex), negotiates the version (the
 * client's when we speak it, else our newest) and binds it to the credential that made it (a
 * request of another credential gets 404, as for none).  Later requests name it in
 * Mcp-Session-Id.  Sessions live in memory: a restart ends them all and clients start again with
 * initialize, as the spec tells them on a 404.  One unused for ORCH_MCP_SESSION_IDLE_MS ends;
 * DELETE ends one.  Each credential has a budget of its own (mcp.h): past it, the least recently
 * used of its own sessions with nothing in flight ends, so one chat key that floods initialize
 * ends its own sessions, never the API key's or another chat key's.
 *
 * Several nodes (tools.secret set): a session is good on every node.  Its id is signed (15 random
 * bytes and the version's index, then an HMAC of them and of the credential's hash under the
 * secret every node shares), so a node that does not know an id checks it and takes the session
 * in (the version from the id, the scope from the credential, which the HMAC binds).  A tools/call
 * whose chat another node serves is handed back to the HTTP side to forward there (that node
 * takes the session in as well and runs the call).  What must reach the node running a call goes
 * to every node (tools.tell): notifications/cancelled that matched no call here, and the
 * session's end (DELETE), after which every node refuses the id (the ended ids are kept, the
 * newest ORCH_MCP_SESSIONS_MAX of them, in each node's memory).
 *
 * The stateless revision (2026-07-28) beside the session ones, chosen per request: a request
 * with no Mcp-Session-Id whose MCP-Protocol-Version header, or params._meta's
 * io.modelcontextprotocol/protocolVersion, names anything but a session revision is stateless
 * (an initialize without either, the legacy handshake, is not).  It carries its revision and the
 * client's capabilities in _meta (missing: 400 -32602); the headers must say what the body says
 * (MCP-Protocol-Version, Mcp-Method, and Mcp-Name for tools/call, Base64 sentinel decoded:
 * 400 -32020); a revision not spoken is 400 -32022 naming the ones that are.  It speaks
 * server/discover, tools/list (with ttlMs and cacheScope), tools/call (multi-round for a client
 * that declares elicitation: see "multi-round tool calls" below), and, with the Tasks extension
 * negotiated, tasks/get, tasks/update and tasks/cancel (see "the Tasks extension" below); the methods
 * it removed (initialize, ping, logging/setLevel, ...) and unknown ones are 404 -32601.  Its calls
 * belong to no session: the HTTP request is the call, and closing it cancels it.  Every result
 * says its resultType ("complete", or "task" for a task made) and names this server in _meta.
 *
 * Our own requests (sessions): a call whose answer is a stream may carry a request of ours to
 * the client (elicitation/create for a run's input() when the client declared elicitation at
 * initialize; a fixture's sampling or elicitation), its id "cerea-<n>"; the client's response,
 * a POST in the same session, goes to the call awaiting that id (an accepted answer becomes the
 * run's input through tools.give_input) and gets 202.  One that matches nothing is dropped.
 *
 * Arguments a tool refuses are protocol errors (-32602) in 2025-06-18 and tool results with
 * isError in 2025-11-25, as each version's spec says, so a model can read why and try again.
 *
 * A pending call's life: tools/call -> (attached to a sink) -> progress notifications ->
 * response (sink->end) -> freed; notifications/cancelled for its id, or its session's end,
 * abandons the tool call (its run is cancelled) and ends the sink with no response; the HTTP side
 * going away abandons it with no sink callback.
 *
 * What it does not do: read HTTP headers, check credentials or origins (api_mcp.c), run tools.
 */
#include "mcp.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <utf8proc.h>

const char *const orch__mcp_versions[ORCH_MCP_N_VERSIONS] = {"2025-11-25", "2025-06-18"};
#define V_2025_06_18 1                   /* its index */
#define V_STATELESS  ORCH_MCP_N_VERSIONS /* ORCH_MCP_STATELESS: no session has it */
#define SERVER_NAME    "cerea-sandbox"
#define SERVER_VERSION "0.1.0"

#define TASKS_EXT    ORCH_MCP_TASKS_EXT
#define TASK_POLL_MS 2000                            /* the pollIntervalMs a task suggests */

/* The sessions of one credential: each credential has a budget of its own, so what one does
 * with its sessions (a flood of initializes) ends only its own. */
struct mcp_cred {
  char hash[65];
  int every_chat;      /* the API key (budget ORCH_MCP_SESSIONS_MAX); else a chat key */
  size_t n;            /* its sessions */
  struct sbx_list lru; /* struct orch_mcp_session.cred_lru, least recently used first */
};

struct orch_mcp_session {
  char id[65];
  int version; /* index in orch__mcp_versions */
  struct orch_tool_scope scope;
  char cred_hash[65];
  struct mcp_cred *cred;
  uint64_t used_ms;
  struct sbx_list lru;      /* in m->lru, least recently used first */
  struct sbx_list cred_lru; /* in cred->lru, likewise */
  struct sbx_list calls;    /* struct orch_mcp_call in flight */
  size_t n_calls;
  int elicitation; /* its client declared elicitation at initialize: input() asks it */
};

struct orch_mcp {
  struct orch_mcp_tools tools;
  struct orch_map sessions; /* id -> session (the key lives in the session) */
  struct sbx_list lru;
  struct orch_map creds;    /* credential hash -> struct mcp_cred with sessions */
  size_t chat_key_sessions; /* of every chat key together (at most ORCH_MCP_SESSIONS_MAX) */
  struct orch_map ended;    /* several nodes: id -> struct mcp_ended, sessions ended anywhere */
  struct sbx_list ended_fifo;
  /* The calls of stateless requests (2026-07-28): in no map, never expiring, version
   * V_STATELESS; each call's scope is its own request's. */
  struct orch_mcp_session stateless;
  unsigned long long asked; /* ids of our own requests to clients: "cerea-<n>" */
  /* What signs a multi-round call's requestState with one node (with several, tools.secret,
   * so any node checks it): random per process. */
  unsigned char state_key[ORCH_CHAT_SECRET_LEN];
};

struct mcp_ended {
  char id[65];
  struct sbx_list link; /* in m->ended_fifo, oldest first */
};

struct orch_mcp_call {
  struct sbx_list link; /* in s->calls */
  struct orch_mcp *m;
  struct orch_mcp_session *s;
  json_t *id;             /* the request's id */
  json_t *progress_token; /* NULL: no progress wanted */
  int progress;           /* the last progress value sent */
  struct orch_tool_call *tc;
  const struct orch_mcp_sink *sink; /* NULL until attached */
  void *sink_ud;
  /* A call answered already (a fixture's): its notifications and response, sent on attach. */
  json_t *queued;
  char *answer;
  size_t answer_len;
  int stream; /* its answer is an SSE stream: it can carry our own requests too */
  /* Our request on the stream awaiting the client's response (elicitation/create, or a
   * fixture's), or NULL; what it is for: the run waiting in input() (run_id), else the fixture
   * tool named. */
  json_t *asked_id;
  char asked_run[STORE_ID_LEN + 1];
  char asked_tool[64];
  /* The Tasks extension (stateless, negotiated): what the tool call's result is made into (a
   * CreateTaskResult, a DetailedTask, a cancel's ack), and the arguments it borrows from. */
  enum { TASK_NONE, TASK_CREATE, TASK_GET, TASK_CANCEL, TASK_UPDATE } task;
  json_t *task_args;
  json_t *responses; /* TASK_UPDATE: the inputResponses to give once the run is looked at */
  /* Stateless: the request declared elicitation, so a run's input() is asked of the client (an
   * input_required task; with mrtr, an InputRequiredResult that ends this round). */
  int elicit, mrtr;
  char cred_hash[65]; /* mrtr: the credential its requestState is bound to */
};

/* ---- JSON-RPC messages ------------------------------------------------------------------- */

static char *dump(json_t *j, size_t *len) { /* steals j */
  char *s = orch__json_dump(j, len);
  json_decref(j);
  return s;
}

char *orch__mcp_error_text(const json_t *id, int code, const char *message, size_t *len) {
  return dump(json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id ? id : json_null(),
                        "error", "code", code, "message", message),
              len);
}

static void reply_error(struct orch_mcp_reply *out, int status, const json_t *id, int code,
                        const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* A message quoting what a client sent, cut by a "%.200s" or by its buffer's size, can hold part
 * of a character, and a JSON string must be UTF-8 (jansson refuses it, and the answer was a 500):
 * every byte that starts no whole character goes. */
static void utf8_mend(char *s) {
  const utf8proc_uint8_t *r = (const utf8proc_uint8_t *)s;
  char *w = s;
  utf8proc_ssize_t n = (utf8proc_ssize_t)strlen(s);
  while (n > 0) {
    utf8proc_int32_t c;
    utf8proc_ssize_t k = utf8proc_iterate(r, n, &c);
    if (k <= 0) { /* not a character: dropped */
      r++;
      n--;
      continue;
    }
    memmove(w, r, (size_t)k);
    w += k;
    r += k;
    n -= k;
  }
  *w = '\0';
}

static void reply_error(struct orch_mcp_reply *out, int status, const json_t *id, int code,
                        const char *fmt, ...) {
  char msg[600];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  utf8_mend(msg);
  out->status = status;
  out->body = orch__mcp_error_text(id, code, msg, &out->len);
}

static void reply_error_data(struct orch_mcp_reply *out, int status, const json_t *id, int code,
                             const char *message, json_t *data) { /* steals data */
  out->status = status;
  out->body = dump(json_pack("{s:s, s:O, s:{s:i, s:s, s:o}}", "jsonrpc", "2.0", "id", id, "error",
                             "code", code, "message", message, "data", data),
                   &out->len);
}

static char *result_text(const json_t *id, json_t *result, size_t *len) { /* steals result */
  return dump(json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result", result), len);
}

static void reply_result(struct orch_mcp_reply *out, const json_t *id, json_t *result) {
  out->status = 200;
  out->body = result_text(id, result, &out->len);
}

void orch__mcp_reply_free(struct orch_mcp_reply *r) {
  sbx_free(r->body);
  r->body = NULL;
}

/* An id MCP allows: a string or an integer (never null). */
static int id_ok(const json_t *id) { return json_is_string(id) || json_is_integer(id); }

/* ---- sessions ----------------------------------------------------------------------------- */

struct orch_mcp *orch__mcp_new(const struct orch_mcp_tools *tools) {
  struct orch_mcp *m = sbx_calloc(1, sizeof(*m));
  if (m == NULL)
    return NULL;
  m->tools = *tools;
  orch__map_init(&m->sessions);
  SBX_LIST_INIT(&m->lru);
  orch__map_init(&m->creds);
  orch__map_init(&m->ended);
  SBX_LIST_INIT(&m->ended_fifo);
  m->stateless.version = V_STATELESS;
  if (sbx_random(m->state_key, sizeof(m->state_key)) != 0) {
    sbx_free(m);
    return NULL;
  }
  SBX_LIST_INIT(&m->stateless.calls);
  SBX_LIST_INIT(&m->stateless.lru);
  SBX_LIST_INIT(&m->stateless.cred_lru);
  return m;
}

size_t orch__mcp_sessions(const struct orch_mcp *m) { return m->sessions.len; }

static void call_free(struct orch_mcp_call *c) {
  sbx_list_remove(&c->link);
  c->s->n_calls--;
  json_decref(c->id);
  json_decref(c->progress_token);
  json_decref(c->queued);
  json_decref(c->asked_id);
  json_decref(c->task_args);
  json_decref(c->responses);
  sbx_free(c->answer);
  sbx_free(c);
}

/* The client no longer waits for c (cancelled, its session ended): its tool call is abandoned
 * and the sink, when told, ends with no response. */
static void call_drop(struct orch_mcp_call *c, int tell_sink) {
  if (c->tc)
    c->m->tools.abandon(c->m->tools.ud, c->tc);
  c->tc = NULL;
  const struct orch_mcp_sink *sink = c->sink;
  void *ud = c->sink_ud;
  call_free(c);
  if (tell_sink && sink)
    sink->end(ud, NULL, 0);
}

/* A credential record with no session left goes. */
static void cred_unused(struct orch_mcp *m, struct mcp_cred *cr) {
  if (cr->n == 0) {
    orch__map_del(&m->creds, cr->hash);
    sbx_free(cr);
  }
}

static void session_end(struct orch_mcp *m, struct orch_mcp_session *s, int tell_sinks) {
  while (!SBX_LIST_EMPTY(&s->calls))
    call_drop(SBX_CONTAINER_OF(s->calls.next, struct orch_mcp_call, link), tell_sinks);
  orch__map_del(&m->sessions, s->id);
  sbx_list_remove(&s->lru);
  sbx_list_remove(&s->cred_lru);
  struct mcp_cred *cr = s->cred;
  if (!cr->every_chat)
    m->chat_key_sessions--;
  cr->n--;
  cred_unused(m, cr);
  sbx_free(s);
}

void orch__mcp_free(struct orch_mcp *m) {
  if (m == NULL)
    return;
  while (!SBX_LIST_EMPTY(&m->lru))
    session_end(m, SBX_CONTAINER_OF(m->lru.next, struct orch_mcp_session, lru), 0);
  while (!SBX_LIST_EMPTY(&m->stateless.calls))
    call_drop(SBX_CONTAINER_OF(m->stateless.calls.next, struct orch_mcp_call, link), 0);
  orch__map_free(&m->sessions);
  orch__map_free(&m->creds);
  while (!SBX_LIST_EMPTY(&m->ended_fifo)) {
    struct mcp_ended *e = SBX_CONTAINER_OF(m->ended_fifo.next, struct mcp_ended, link);
    sbx_list_remove(&e->link);
    sbx_free(e);
  }
  orch__map_free(&m->ended);
  sbx_free(m);
}

/* Sessions unused for ORCH_MCP_SESSION_IDLE_MS with nothing in flight end (oldest first). */
static void expire(struct orch_mcp *m) {
  uint64_t now = sbx_now_mono_ms();
  struct sbx_list *it, *tmp;
  SBX_LIST_FOREACH_SAFE(it, tmp, &m->lru) {
    struct orch_mcp_session *s = SBX_CONTAINER_OF(it, struct orch_mcp_session, lru);
    if (now - s->used_ms < ORCH_MCP_SESSION_IDLE_MS)
      break;
    if (s->n_calls == 0)
      session_end(m, s, 1);
  }
}

static void touch(struct orch_mcp *m, struct orch_mcp_session *s) {
  s->used_ms = sbx_now_mono_ms();
  sbx_list_remove(&s->lru);
  sbx_list_insert_tail(&m->lru, &s->lru);
  sbx_list_remove(&s->cred_lru);
  sbx_list_insert_tail(&s->cred->lru, &s->cred_lru);
}

/* ---- session ids any node checks (several nodes) ----------------------------------------- */

#define SESSION_HEAD 32 /* hex: 15 random bytes and the version's index */

/* The id's second half: the first 32 hex of HMAC(secret, "cerea mcp session v1:<head>:<cred>"). */
static int session_mac(const struct orch_mcp *m, const char *head, const char *cred_hash,
                       char out[SESSION_HEAD + 1]) {
  char text[SESSION_HEAD + 1 + 65], mac[65];
  int n = snprintf(text, sizeof(text), "%.*s:%s", SESSION_HEAD, head, cred_hash ? cred_hash : "");
  if (n < 0 || (size_t)n >= sizeof(text) ||
      orch__secret_mac(m->tools.secret, "cerea mcp session v1", text, (size_t)n, mac) != 0)
    return SBX_EINVAL;
  memcpy(out, mac, SESSION_HEAD);
  out[SESSION_HEAD] = '\0';
  return 0;
}

/* A new id into out (65): signed when the nodes share a secret, else 32 random bytes. */
static int session_id_new(const struct orch_mcp *m, int version, const char *cred_hash,
                          char out[65]) {
  unsigned char r[32];
  if (sbx_random(r, sizeof(r)) != 0)
    return SBX_EIO;
  if (m->tools.secret == NULL) {
    sbx_hex(r, sizeof(r), out);
    return 0;
  }
  r[15] = (unsigned char)version;
  sbx_hex(r, 16, out);
  return session_mac(m, out, cred_hash, out + SESSION_HEAD);
}

static int is_lower_hex(const char *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
      return 0;
  return 1;
}

/* A signed id made for this credential and not ended: 1 and its version's index. */
static int session_id_good(const struct orch_mcp *m, const char *id, const char *cred_hash,
                           int *version) {
  char mac[SESSION_HEAD + 1];
  if (m->tools.secret == NULL || id == NULL || strlen(id) != 64 || !is_lower_hex(id, 64) ||
      orch__map_get(&m->ended, id) != NULL || session_mac(m, id, cred_hash, mac) != 0)
    return 0;
  unsigned diff = 0; /* in constant time */
  for (size_t i = 0; i < SESSION_HEAD; i++)
    diff |= (unsigned)(mac[i] ^ id[SESSION_HEAD + i]);
  int v = (int)strtol((char[]){id[30], id[31], '\0'}, NULL, 16);
  if (diff != 0 || v >= ORCH_MCP_N_VERSIONS)
    return 0;
  *version = v;
  return 1;
}

/* An id ended on some node: refused here from now on (the newest ORCH_MCP_SESSIONS_MAX kept). */
static void ended_add(struct orch_mcp *m, const char *id) {
  if (orch__map_get(&m->ended, id) != NULL)
    return;
  if (m->ended.len >= ORCH_MCP_SESSIONS_MAX) {
    struct mcp_ended *old = SBX_CONTAINER_OF(m->ended_fifo.next, struct mcp_ended, link);
    orch__map_del(&m->ended, old->id);
    sbx_list_remove(&old->link);
    sbx_free(old);
  }
  struct mcp_ended *e = sbx_calloc(1, sizeof(*e));
  if (e == NULL)
    return;
  snprintf(e->id, sizeof(e->id), "%s", id);
  if (orch__map_put(&m->ended, e->id, e) != 0) {
    sbx_free(e);
    return;
  }
  sbx_list_insert_tail(&m->ended_fifo, &e->link);
}

/* A request id as the other nodes know it: the first 32 hex of an HMAC of its JSON. */
static int request_tag(const struct orch_mcp *m, const json_t *id, char out[SESSION_HEAD + 1]) {
  char mac[65];
  size_t len = 0;
  char *text = orch__json_dump((json_t *)id, &len);
  int rc =
      text ? orch__secret_mac(m->tools.secret, "cerea mcp request v1", text, len, mac) : SBX_ENOMEM;
  sbx_free(text);
  if (rc == 0) {
    memcpy(out, mac, SESSION_HEAD);
    out[SESSION_HEAD] = '\0';
  }
  return rc;
}

/* The least recently used session of cr with no call in flight, or NULL. */
static struct orch_mcp_session *oldest_idle(struct mcp_cred *cr) {
  struct sbx_list *it;
  SBX_LIST_FOREACH(it, &cr->lru) {
    struct orch_mcp_session *s = SBX_CONTAINER_OF(it, struct orch_mcp_session, cred_lru);
    if (s->n_calls == 0)
      return s;
  }
  return NULL;
}

/* Room for one more session of cr, or 0 when there is none (SBX_EBUSY: every session that could
 * make room has a call in flight).  Past its own budget a credential's least recently used idle
 * session ends; past the chat keys' total, one of the chat key holding the most sessions (so a
 * flood ends the flooder's own first). */
static int make_room(struct orch_mcp *m, struct mcp_cred *cr) {
  size_t budget = cr->every_chat ? ORCH_MCP_SESSIONS_MAX : ORCH_MCP_CHAT_KEY_SESSIONS;
  struct orch_mcp_session *victim = NULL;
  if (cr->n >= budget) {
    if ((victim = oldest_idle(cr)) == NULL)
      return SBX_EBUSY;
  } else if (!cr->every_chat && m->chat_key_sessions >= ORCH_MCP_SESSIONS_MAX) {
    size_t i = 0, most = 0;
    const char *k;
    void *v;
    while (orch__map_next(&m->creds, &i, &k, &v)) {
      struct mcp_cred *o = v;
      struct orch_mcp_session *idle;
      if (!o->every_chat && o->n > most && (idle = oldest_idle(o)) != NULL) {
        most = o->n;
        victim = idle;
      }
    }
    if (victim == NULL)
      return SBX_EBUSY;
  }
  if (victim)
    session_end(m, victim, 1);
  return 0;
}

/* The credential's record, made on its first session (NULL: no memory). */
static struct mcp_cred *cred_of(struct orch_mcp *m, const struct orch_mcp_request *rq) {
  const char *hash = rq->cred_hash ? rq->cred_hash : "";
  struct mcp_cred *cr = orch__map_get(&m->creds, hash);
  if (cr != NULL)
    return cr;
  if ((cr = sbx_calloc(1, sizeof(*cr))) == NULL)
    return NULL;
  snprintf(cr->hash, sizeof(cr->hash), "%s", hash);
  cr->every_chat = rq->scope->chat_id[0] == '\0';
  SBX_LIST_INIT(&cr->lru);
  if (orch__map_put(&m->creds, cr->hash, cr) != 0) {
    sbx_free(cr);
    return NULL;
  }
  return cr;
}

/* A new session (id NULL: a new id; else one a node made and signed), making room in its
 * credential's budget when full; NULL when no session of that credential can make room
 * (*busy set) or out of memory. */
static struct orch_mcp_session *session_new(struct orch_mcp *m, const struct orch_mcp_request *rq,
                                            int version, const char *id, int *busy) {
  *busy = 0;
  struct mcp_cred *cr = cred_of(m, rq);
  if (cr == NULL)
    return NULL;
  if (make_room(m, cr) != 0) {
    *busy = 1;
    cred_unused(m, cr);
    return NULL;
  }
  struct orch_mcp_session *s = sbx_calloc(1, sizeof(*s));
  if (s == NULL || (id ? snprintf(s->id, sizeof(s->id), "%s", id) < 0
                       : session_id_new(m, version, rq->cred_hash, s->id) != 0)) {
    sbx_free(s);
    cred_unused(m, cr);
    return NULL;
  }
  s->version = version;
  s->scope = *rq->scope;
  snprintf(s->cred_hash, sizeof(s->cred_hash), "%s", rq->cred_hash ? rq->cred_hash : "");
  SBX_LIST_INIT(&s->calls);
  SBX_LIST_INIT(&s->lru);
  SBX_LIST_INIT(&s->cred_lru);
  if (orch__map_put(&m->sessions, s->id, s) != 0) {
    sbx_free(s);
    cred_unused(m, cr);
    return NULL;
  }
  s->cred = cr;
  cr->n++;
  if (!cr->every_chat)
    m->chat_key_sessions++;
  touch(m, s);
  return s;
}

/* The session a request names, for the credential that made it; NULL otherwise.  With several
 * nodes, one made by another node (or by this one before it let it go) is taken in (rq: the
 * request, whose scope it gets) when its id checks. */
static struct orch_mcp_session *session_get(struct orch_mcp *m, const char *id,
                                            const char *cred_hash,
                                            const struct orch_mcp_request *rq) {
  struct orch_mcp_session *s = id && strlen(id) == 64 ? orch__map_get(&m->sessions, id) : NULL;
  int version;
  int busy;
  if (s == NULL && rq != NULL && session_id_good(m, id, cred_hash, &version))
    return session_new(m, rq, version, id, &busy);
  if (s == NULL || strcmp(s->cred_hash, cred_hash ? cred_hash : "") != 0)
    return NULL;
  return s;
}

int orch__mcp_end_session(struct orch_mcp *m, const char *session_id, const char *cred_hash) {
  if (session_id == NULL)
    return 400;
  struct orch_mcp_session *s = session_get(m, session_id, cred_hash, NULL);
  int version;
  if (s == NULL && !session_id_good(m, session_id, cred_hash, &version))
    return 404;
  if (m->tools.tell) { /* every node ends it, and refuses it from now on */
    char what[80];
    snprintf(what, sizeof(what), "mcp-end %s", session_id);
    ended_add(m, session_id);
    m->tools.tell(m->tools.ud, what);
  }
  if (s)
    session_end(m, s, 1);
  return 200;
}

void orch__mcp_notified(struct orch_mcp *m, const char *what) {
  char sid[65], tag[SESSION_HEAD + 1], mine[SESSION_HEAD + 1];
  if (m == NULL || m->tools.secret == NULL)
    return;
  if (sscanf(what, "mcp-end %64[0-9a-f]", sid) == 1 && strlen(sid) == 64) {
    ended_add(m, sid);
    struct orch_mcp_session *s = orch__map_get(&m->sessions, sid);
    if (s)
      session_end(m, s, 1);
    return;
  }
  if (sscanf(what, "mcp-cancel %64[0-9a-f] %32[0-9a-f]", sid, tag) != 2 || strlen(tag) != 32)
    return;
  struct orch_mcp_session *s = orch__map_get(&m->sessions, sid);
  if (s == NULL)
    return;
  struct sbx_list *it;
  SBX_LIST_FOREACH(it, &s->calls) {
    struct orch_mcp_call *c = SBX_CONTAINER_OF(it, struct orch_mcp_call, link);
    if (request_tag(m, c->id, mine) == 0 && strcmp(mine, tag) == 0) {
      call_drop(c, 1);
      return;
    }
  }
}

static int version_index(const char *v) {
  for (int i = 0; v && i < ORCH_MCP_N_VERSIONS; i++)
    if (strcmp(v, orch__mcp_versions[i]) == 0)
      return i;
  return -1;
}

/* ---- methods ------------------------------------------------------------------------------ */

/* Our capabilities, and the fixtures' beside them in conformance-fixtures mode. */
static json_t *capabilities(const struct orch_mcp *m, int stateless) {
  json_t *caps = json_pack("{s:{s:b}}", "tools", "listChanged", 0);
  if (m->tools.fixtures) {
    json_t *more = orch__mcp_fixture_capabilities(stateless);
    json_object_update(caps, more);
    json_decref(more);
  }
  if (stateless) { /* the Tasks extension, beside any the fixtures name */
    json_t *ext = json_object_get(caps, "extensions");
    if (!json_is_object(ext))
      json_object_set_new(caps, "extensions", ext = json_object());
    json_object_set_new(ext, TASKS_EXT, json_object());
  }
  return caps;
}

/* What the server tells a client about itself (initialize, server/discover). */
static void instructions_of(const struct orch_mcp_request *rq, char *out, size_t cap) {
  snprintf(out, cap,
           "Cerea sandbox: run_python runs Python in a chat's sandbox (in browser mode, in the "
           "user's own browser tab, so the chat's page must be open); list_files and add_file "
           "handle the chat's files under /mnt/data. Files saved under /mnt/output come back "
           "with the result. A run_python call that would wait long without progress "
           "notifications returns with the run still going and its run_id: wait_for_run gets "
           "its result, cancel_run stops it.%s%s%s",
           rq->scope->chat_id[0] ? " This connection reaches chat " : "", rq->scope->chat_id,
           rq->scope->chat_id[0] ? " only: leave chat_id out." : "");
}

static void on_initialize(struct orch_mcp *m, const struct orch_mcp_request *rq, const json_t *id,
                          const json_t *params, struct orch_mcp_reply *out) {
  const char *asked = json_string_value(json_object_get(params, "protocolVersion"));
  if (asked == NULL) {
    reply_error(out, 200, id, ORCH_RPC_INVALID_PARAMS,
                "initialize: params.protocolVersion (a string) is required");
    return;
  }
  int v = version_index(asked);
  int busy;
  struct orch_mcp_session *s = session_new(m, rq, v < 0 ? 0 : v, NULL, &busy);
  if (s == NULL && busy) {
    reply_error(out, 503, id, ORCH_RPC_BUSY,
                "no MCP session slot is free for this credential: its %d sessions all have "
                "calls in flight; end one (DELETE /mcp) or try again later",
                rq->scope->chat_id[0] ? ORCH_MCP_CHAT_KEY_SESSIONS : ORCH_MCP_SESSIONS_MAX);
    return;
  }
  if (s == NULL) {
    reply_error(out, 500, id, ORCH_RPC_INTERNAL, "out of memory");
    return;
  }
  s->elicitation = json_is_object(
      json_object_get(json_object_get(params, "capabilities"), "elicitation"));
  char instructions[900];
  instructions_of(rq, instructions, sizeof(instructions));
  json_t *result = json_pack("{s:s, s:o, s:{s:s, s:s, s:s}, s:s}", "protocolVersion",
                             orch__mcp_versions[s->version], "capabilities", capabilities(m, 0),
                             "serverInfo", "name", SERVER_NAME, "title", "Cerea sandbox",
                             "version", SERVER_VERSION, "instructions", instructions);
  reply_result(out, id, result);
  if (out->body == NULL) {
    session_end(m, s, 0);
    return;
  }
  snprintf(out->session_id, sizeof(out->session_id), "%s", s->id);
}

/* A stateless result (2026-07-28): resultType "complete" and this server named in _meta. */
static json_t *stateless_result(json_t *result) {
  if (result == NULL)
    return NULL;
  if (json_object_get(result, "resultType") == NULL)
    json_object_set_new(result, "resultType", json_string("complete"));
  json_t *meta = json_object_get(result, "_meta");
  if (!json_is_object(meta))
    json_object_set_new(result, "_meta", meta = json_object());
  json_object_set_new(meta, "io.modelcontextprotocol/serverInfo",
                      json_pack("{s:s, s:s, s:s}", "name", SERVER_NAME, "title", "Cerea sandbox",
                                "version", SERVER_VERSION));
  return result;
}

/* A list a stateless client may keep for a while (it depends on the credential: private). */
static json_t *cacheable(json_t *result) {
  if (result != NULL) {
    json_object_set_new(result, "ttlMs", json_integer(ORCH_MCP_LIST_TTL_MS));
    json_object_set_new(result, "cacheScope", json_string("private"));
  }
  return result;
}

static void on_tools_list(struct orch_mcp *m, const struct orch_tool_scope *scope, int version,
                          const json_t *id, struct orch_mcp_reply *out) {
  struct orch_tool_env env;
  json_t *keep = NULL;
  m->tools.env(m->tools.ud, &env, &keep);
  json_t *list = orch__tools_json(&env, scope, ORCH_TOOLS_MCP);
  json_decref(keep);
  size_t i;
  json_t *tool;
  json_array_foreach(list, i, tool) { /* the Tasks extension: run_python may be a task */
    const char *name = json_string_value(json_object_get(tool, "name"));
    if (version == V_STATELESS && name && strcmp(name, "run_python") == 0)
      json_object_set_new(tool, "execution", json_pack("{s:s}", "taskSupport", "optional"));
  }
  if (m->tools.fixtures)
    orch__mcp_fixture_tools(list, version == V_STATELESS);
  json_t *result = json_pack("{s:o}", "tools", list);
  reply_result(out, id, version == V_STATELESS ? stateless_result(cacheable(result)) : result);
}

/* A tool refused its arguments: a protocol error in 2025-06-18, a tool result in 2025-11-25. */
static void reply_bad_args(struct orch_mcp_reply *out, int version, const json_t *id,
                           const char *tool, const char *why) {
  if (version == V_2025_06_18) {
    reply_error(out, 200, id, ORCH_RPC_INVALID_PARAMS, "%s: %s", tool, why);
    return;
  }
  char text[700];
  snprintf(text, sizeof(text), "The call was refused: %s.", why);
  reply_result(out, id, orch__tool_error_result(text));
}

/* Our own request to the client on c's stream (method, params stolen), answered by a later POST
 * with its id (on_response); 0, or nonzero when it could not be sent. */
static int ask(struct orch_mcp_call *c, const char *method, json_t *params) {
  char id[40];
  snprintf(id, sizeof(id), "cerea-%llu", ++c->m->asked);
  json_t *msg = json_pack("{s:s, s:s, s:s, s:o}", "jsonrpc", "2.0", "id", id, "method", method,
                          "params", params);
  size_t len = 0;
  char *text = msg ? orch__json_dump(msg, &len) : NULL;
  json_decref(msg);
  if (text == NULL)
    return SBX_ENOMEM;
  json_decref(c->asked_id);
  c->asked_id = json_string(id);
  if (c->sink)
    c->sink->send(c->sink_ud, text, len);
  else if (c->queued || (c->queued = json_array()))
    json_array_append_new(c->queued, json_loads(text, 0, NULL));
  sbx_free(text);
  return 0;
}

/* elicitation/create's params for input(prompt) (len bytes; new): one string, `answer`. */
static json_t *input_elicitation(const char *prompt, size_t len) {
  char message[700];
  snprintf(message, sizeof(message), "The code asks (input()): %.*s",
           (int)SBX_MIN(len, (size_t)600), len ? prompt : "(no prompt)");
  utf8_mend(message);
  return json_pack("{s:s, s:{s:s, s:{s:{s:s, s:s, s:s}}, s:[s]}}", "message", message,
                   "requestedSchema", "type", "object", "properties", "answer", "type", "string",
                   "title", "Answer", "description", "What input() returns (one line)",
                   "required", "answer");
}

/* input(prompt) in a run of an elicitation client's call: the prompt as elicitation/create
 * (the answer, when accepted, is the run's input; otherwise the page may still answer, and the
 * run's input wait applies). */
static void ask_input(struct orch_mcp_call *c, const struct orch_tool_progress *p) {
  if (!c->s->elicitation || !c->stream || c->sink == NULL || c->m->tools.give_input == NULL)
    return;
  json_t *params = input_elicitation(p->text ? p->text : "", p->text ? p->text_len : 0);
  if (params && ask(c, "elicitation/create", params) == 0)
    snprintf(c->asked_run, sizeof(c->asked_run), "%s", p->run_id);
}

/* The input() run_id waits in on this node as a stateless client is asked it: {key:
 * {method: "elicitation/create", params}} (new), key set; NULL when it waits in none. */
static json_t *input_requests(struct orch_mcp *m, const char *run_id,
                              char key[ORCH_TOOL_INPUT_KEY]) {
  char prompt[700];
  if (m->tools.input_asked == NULL || m->tools.give_input == NULL ||
      !m->tools.input_asked(m->tools.ud, run_id, prompt, sizeof(prompt), key))
    return NULL;
  json_t *params = input_elicitation(prompt, strlen(prompt));
  return params ? json_pack("{s:{s:s, s:o}}", key, "method", "elicitation/create", "params", params)
                : NULL;
}

/* A stateless client's answers ({key: ElicitResult}) to the input() run_id waits in: the one for
 * the question it waits on now, accepted with a string `answer`, is its input (1).  Any other
 * (an earlier question's, a decline, no answer) gives nothing, so the page may still answer and
 * the run's input wait applies (0). */
static int give_answer(struct orch_mcp *m, const char *run_id, const json_t *responses) {
  char key[ORCH_TOOL_INPUT_KEY], prompt[8];
  if (m->tools.input_asked == NULL || m->tools.give_input == NULL ||
      !m->tools.input_asked(m->tools.ud, run_id, prompt, sizeof(prompt), key))
    return 0;
  const json_t *r = json_object_get(responses, key);
  const char *action = json_string_value(json_object_get(r, "action"));
  const char *answer = json_string_value(json_object_get(json_object_get(r, "content"), "answer"));
  if (action == NULL || strcmp(action, "accept") != 0 || answer == NULL)
    return 0;
  return m->tools.give_input(m->tools.ud, run_id, answer) == 0;
}

/* ---- multi-round tool calls (2026-07-28's InputRequiredResult, SEP-2322) ---------------------
 * A stateless run_python call from a client that declared elicitation (and not the Tasks
 * extension) ends its round when the run waits in input(): an InputRequiredResult asks the
 * prompt, and its requestState ("<mac>:<run_id>:<key>", the MAC under the nodes' secret or this
 * process's key, bound to the credential) names the run.  The client calls run_python again with
 * the same arguments, that requestState and its inputResponses: the answer is the run's input,
 * and the call waits for the same run (as wait_for_run does, to its end or its next input()). */

static int state_mac(const struct orch_mcp *m, const char *cred_hash, const char *body,
                     char mac[65]) {
  char text[200];
  int n = snprintf(text, sizeof(text), "%s|%s", cred_hash ? cred_hash : "", body);
  if (n < 0 || (size_t)n >= sizeof(text))
    return SBX_EINVAL;
  return orch__secret_mac(m->tools.secret ? m->tools.secret : m->state_key, "mcp request state",
                          text, (size_t)n, mac);
}

/* The run a requestState names (run_id: STORE_ID_LEN + 1 bytes): 0, or SBX_EINVAL when it is
 * not one this server signed for this credential. */
static int state_run(const struct orch_mcp *m, const char *cred_hash, const char *state,
                     char *run_id) {
  const char *body = state && strlen(state) > 65 && state[64] == ':' ? state + 65 : NULL;
  const char *colon = body ? strchr(body, ':') : NULL;
  char mac[65];
  if (colon == NULL || colon - body != STORE_ID_LEN || strlen(colon + 1) >= ORCH_TOOL_INPUT_KEY ||
      state_mac(m, cred_hash, body, mac) != 0 || CRYPTO_memcmp(mac, state, 64) != 0)
    return SBX_EINVAL;
  snprintf(run_id, STORE_ID_LEN + 1, "%.*s", STORE_ID_LEN, body);
  return 0;
}

/* A round's result (steals result): an InputRequiredResult when the run waits in input() here,
 * else the result as it is (the run's end, or "still going" past the hand-off). */
static json_t *mrtr_result(const struct orch_mcp_call *c, json_t *result) {
  const char *run_id =
      json_string_value(json_object_get(json_object_get(result, "structuredContent"), "run_id"));
  const char *state =
      json_string_value(json_object_get(json_object_get(result, "structuredContent"), "state"));
  char key[ORCH_TOOL_INPUT_KEY], body[STORE_ID_LEN + 2 + ORCH_TOOL_INPUT_KEY], mac[65];
  char state_text[sizeof(mac) + sizeof(body)];
  json_t *asks = run_id && state && strcmp(state, "waiting_input") == 0
                     ? input_requests(c->m, run_id, key)
                     : NULL;
  if (asks == NULL)
    return result;
  snprintf(body, sizeof(body), "%s:%s", run_id, key);
  if (state_mac(c->m, c->cred_hash, body, mac) != 0) {
    json_decref(asks);
    return result;
  }
  json_decref(result);
  snprintf(state_text, sizeof(state_text), "%s:%s", mac, body);
  return json_pack("{s:s, s:o, s:s}", "resultType", "input_required", "inputRequests", asks,
                   "requestState", state_text);
}

/* A progress notification: the run in _meta["cerea-sandbox/run"] ({run_id, state, attempt}, and
 * for live output {stream, offset, text}, {display, text} or {prompt}), in words in message. */
static void on_progress(void *ud, const struct orch_tool_progress *p) {
  struct orch_mcp_call *c = ud;
  if (p->kind == ORCH_TOOL_PROGRESS_INPUT)
    ask_input(c, p);
  if (c->progress_token == NULL || c->sink == NULL)
    return;
  json_t *run =
      json_pack("{s:s, s:s, s:i}", "run_id", p->run_id, "state", p->state, "attempt", p->attempt);
  json_t *text = p->text ? json_stringn(p->text, p->text_len) : NULL;
  switch (p->kind) {
  case ORCH_TOOL_PROGRESS_OUTPUT:
    json_object_set_new(run, "stream", json_string(p->stream));
    json_object_set_new(run, "offset", json_integer((json_int_t)p->offset));
    json_object_set(run, "text", text);
    break;
  case ORCH_TOOL_PROGRESS_DISPLAY:
    json_object_set_new(run, "display", json_integer(p->index));
    json_object_set(run, "text", text);
    break;
  case ORCH_TOOL_PROGRESS_INPUT:
    json_object_set(run, "prompt", text);
    break;
  case ORCH_TOOL_PROGRESS_STATE:
    if (p->keepalive) {
      json_object_set_new(run, "keepalive", json_true());
      json_object_set_new(run, "elapsed_s", json_integer((json_int_t)(p->elapsed_ms / 1000)));
    }
    break;
  }
  json_decref(text);
  size_t len = 0;
  char *msg = dump(json_pack("{s:s, s:s, s:{s:O, s:i, s:s, s:{s:o}}}", "jsonrpc", "2.0", "method",
                             "notifications/progress", "params", "progressToken", c->progress_token,
                             "progress", ++c->progress, "message", p->message, "_meta",
                             "cerea-sandbox/run", run),
                   &len);
  if (msg)
    c->sink->send(c->sink_ud, msg, len);
  sbx_free(msg);
}

static json_t *task_result(const struct orch_mcp_call *c, json_t *result);

static void on_done(void *ud, json_t *result) {
  struct orch_mcp_call *c = ud;
  c->tc = NULL;
  if (c->mrtr)
    result = mrtr_result(c, result);
  result = task_result(c, result);
  if (c->s == &c->m->stateless)
    result = stateless_result(result);
  size_t len = 0;
  char *text = result_text(c->id, result, &len);
  if (text == NULL)
    text = orch__mcp_error_text(c->id, ORCH_RPC_INTERNAL, "out of memory", &len);
  const struct orch_mcp_sink *sink = c->sink;
  void *sud = c->sink_ud;
  call_free(c);
  if (sink)
    sink->end(sud, text, len);
  sbx_free(text);
}

static const struct orch_tool_ops call_ops = {on_progress, on_done};
static const struct orch_tool_ops call_ops_quiet = {NULL, on_done}; /* no progress token */

/* ---- the Tasks extension (SEP-2663, stateless) ----------------------------------------------
 * A client that names TASKS_EXT in a request's clientCapabilities.extensions gets run_python
 * answered as a task at once: the task is the run (its id the run id, its state the run row's,
 * so it outlives the call, a restart, and the node that made it: tasks/get and tasks/cancel are
 * wait_for_run (not waiting) and cancel_run, and go to the run's node as tools/call does).
 * A run that ended, whatever its status, is a completed task with the tool's result (isError
 * when the run failed), but a cancelled one; only a result that is no run (it could not be read)
 * is a failed task.  A run waiting in input() is an input_required task for a request that
 * declared elicitation (its prompt in inputRequests); tasks/update is wait_for_run not waiting
 * too, whose answer, under the key of the question the run waits on, becomes its input. */

/* The task's own fields from a run object (NULL: the result is no run's). */
static json_t *task_of_run(const json_t *run, const char **status) {
  const char *id = json_string_value(json_object_get(run, "run_id"));
  if (id == NULL)
    return NULL;
  const char *st = json_string_value(json_object_get(run, "status"));
  *status = st == NULL || strcmp(st, "none") == 0 ? "working"
            : strcmp(st, "cancelled") == 0        ? "cancelled"
                                                  : "completed";
  long long made = json_integer_value(json_object_get(run, "created_at"));
  long long last = json_integer_value(json_object_get(run, "finished_at"));
  if (last == 0)
    last = json_integer_value(json_object_get(run, "started_at"));
  if (last == 0)
    last = made;
  return orch__mcp_task_json(id, *status, made, last, TASK_POLL_MS);
}

/* The tool call's result as the task request's (steals result). */
static json_t *task_result(const struct orch_mcp_call *c, json_t *result) {
  if (c->task == TASK_NONE || result == NULL)
    return result;
  if (c->task == TASK_CANCEL || c->task == TASK_UPDATE) { /* an ack: what it did shows in the
                                                            next tasks/get */
    const char *run_id = json_string_value(json_object_get(c->task_args, "run_id"));
    if (c->task == TASK_UPDATE && run_id)
      give_answer(c->m, run_id, c->responses);
    json_decref(result);
    return json_object();
  }
  const char *status = NULL;
  json_t *task = task_of_run(json_object_get(result, "structuredContent"), &status);
  if (task == NULL) {
    if (c->task == TASK_CREATE) /* refused before there was a run: a plain result */
      return result;
    const char *why = json_string_value(
        json_object_get(json_array_get(json_object_get(result, "content"), 0), "text"));
    task = json_pack("{s:s, s:s, s:{s:i, s:s}}", "taskId",
                     json_string_value(json_object_get(c->task_args, "run_id")), "status", "failed",
                     "error", "code", ORCH_RPC_INTERNAL, "message",
                     why ? why : "the run could not be read");
    json_decref(result);
    return task;
  }
  char key[ORCH_TOOL_INPUT_KEY];
  json_t *asks = NULL;
  if (c->task == TASK_CREATE) {
    json_object_set_new(task, "resultType", json_string("task"));
    json_decref(result);
  } else if (strcmp(status, "working") == 0 && c->elicit &&
             (asks = input_requests(c->m, json_string_value(json_object_get(task, "taskId")),
                                    key)) != NULL) { /* its input() asks the client */
    json_object_set_new(task, "status", json_string("input_required"));
    json_object_set_new(task, "inputRequests", asks);
    json_decref(result);
  } else if (strcmp(status, "completed") == 0)
    json_object_set_new(task, "result", result);
  else
    json_decref(result);
  return task;
}

/* Whether the stateless request declared elicitation in its clientCapabilities. */
static int elicitation_declared(const json_t *params) {
  const json_t *caps = json_object_get(json_object_get(params, "_meta"),
                                       "io.modelcontextprotocol/clientCapabilities");
  return json_is_object(json_object_get(caps, "elicitation"));
}

/* tasks/get, tasks/update and tasks/cancel (negotiated): wait_for_run not waiting, or cancel_run,
 * on the run the task is; tasks/update gives the answer to its input() once the run is looked
 * at (on this node: the run's chat's). */
static void on_task_method(struct orch_mcp *m, const struct orch_mcp_request *rq, const json_t *id,
                           const char *method, const json_t *params, struct orch_mcp_reply *out) {
  int get = strcmp(method, "tasks/get") == 0, update = strcmp(method, "tasks/update") == 0;
  if (!get && !update && strcmp(method, "tasks/cancel") != 0) {
    reply_error(out, 404, id, ORCH_RPC_METHOD_NOT_FOUND,
                "Method not found: %.100s (tasks/get, tasks/update and tasks/cancel are answered; "
                "a task's result is in tasks/get's once it has ended)",
                method);
    return;
  }
  const char *task_id = json_string_value(json_object_get(params, "taskId"));
  if (task_id == NULL) {
    reply_error(out, 200, id, ORCH_RPC_INVALID_PARAMS, "%s: params.taskId (a string) is required",
                method);
    return;
  }
  const json_t *responses = json_object_get(params, "inputResponses");
  if (update && !json_is_object(responses)) {
    reply_error(out, 200, id, ORCH_RPC_INVALID_PARAMS,
                "tasks/update: params.inputResponses (an object: each input request's key and "
                "its answer) is required");
    return;
  }
  struct orch_mcp_session *s = &m->stateless;
  if (s->n_calls >= ORCH_MCP_STATELESS_CALLS_MAX) {
    reply_error(out, 200, id, ORCH_RPC_BUSY,
                "%d tool calls are in flight without a session already; wait for one to end",
                ORCH_MCP_STATELESS_CALLS_MAX);
    return;
  }
  enum orch_tool t = get || update ? ORCH_TOOL_WAIT_FOR_RUN : ORCH_TOOL_CANCEL_RUN;
  json_t *args = json_pack("{s:s}", "run_id", task_id);
  struct orch_tool_env env;
  json_t *keep = NULL;
  m->tools.env(m->tools.ud, &env, &keep);
  struct orch_tool_args a;
  char why[600];
  int rc = args ? orch__tool_check(t, args, rq->scope, env.time_limit_s, &a, why, sizeof(why))
                : SBX_ENOMEM;
  json_decref(keep);
  struct orch_mcp_call *c = rc == 0 ? sbx_calloc(1, sizeof(*c)) : NULL;
  if (c == NULL) {
    if (rc == SBX_EINVAL)
      reply_error(out, 200, id, ORCH_RPC_INVALID_PARAMS, "Task not found: %.100s", task_id);
    else
      reply_error(out, 200, id, ORCH_RPC_INTERNAL, "out of memory");
    json_decref(args);
    return;
  }
  a.wait_s = 0; /* look, never wait: a task is polled */
  *c = (struct orch_mcp_call){.m = m,
                              .s = s,
                              .id = json_incref((json_t *)id),
                              .task = get ? TASK_GET : update ? TASK_UPDATE : TASK_CANCEL,
                              .task_args = args,
                              .responses = update ? json_incref((json_t *)responses) : NULL,
                              .elicit = elicitation_declared(params)};
  sbx_list_insert_tail(&s->calls, &c->link);
  s->n_calls++;
  json_t *now = NULL;
  rc = m->tools.start(m->tools.ud, t, &a, args, rq->base_url, &call_ops_quiet, c, &c->tc, &now, why,
                      sizeof(why));
  if (rc != 0 || now != NULL) {
    now = task_result(c, now);
    call_free(c);
    if (rc == SBX_EREMOTE) { /* the run's chat is another node's: that node answers */
      out->status = 200;
      snprintf(out->forward_chat, sizeof(out->forward_chat), "%s", a.chat_id);
    } else if (rc == SBX_EINVAL) /* no such run, or one of a chat this credential cannot reach */
      reply_error(out, 200, id, ORCH_RPC_INVALID_PARAMS, "Task not found: %.100s", task_id);
    else if (rc != 0)
      reply_error(out, 200, id, ORCH_RPC_INTERNAL, "%s could not start: %s", method,
                  sbx_strerror(rc));
    else
      reply_result(out, id, stateless_result(now));
    return;
  }
  out->status = 200;
  out->call = c;
}

/* s: the call's session, or m->stateless (scope: the request's); version: the request's. */
/* tools/call's params checked: the tool (its index, or -1 answered in out), its arguments and
 * progress token (borrowed), and room in the session for another call. */
static int call_params(struct orch_mcp *m, struct orch_mcp_session *s, const json_t *id,
                       const json_t *params, json_t **args, json_t **tok,
                       struct orch_mcp_reply *out) {
  const char *name = json_string_value(json_object_get(params, "name"));
  if (name == NULL) {
    reply_error(out, 200, id, ORCH_RPC_INVALID_PARAMS,
                "tools/call: params.name (the tool's name, a string) is required");
    return -1;
  }
  int t = orch__tool_find(name);
  if (t < 0) {
    reply_error(out, 200, id, ORCH_RPC_INVALID_PARAMS, "Unknown tool: %.200s", name);
    return -1;
  }
  *args = json_object_get(params, "arguments");
  if (*args != NULL && !json_is_object(*args)) {
    reply_error(out, 200, id, ORCH_RPC_INVALID_PARAMS,
                "tools/call: params.arguments must be an object");
    return -1;
  }
  /* The token is copied into every notification of the call: its size is bounded. */
  *tok = json_object_get(json_object_get(params, "_meta"), "progressToken");
  if (json_is_string(*tok) && json_string_length(*tok) > ORCH_MCP_PROGRESS_TOKEN_MAX) {
    reply_error(out, 200, id, ORCH_RPC_INVALID_PARAMS,
                "tools/call: params._meta.progressToken is %zu bytes; at most %d (a string or "
                "an integer)",
                json_string_length(*tok), ORCH_MCP_PROGRESS_TOKEN_MAX);
    return -1;
  }
  if (s == &m->stateless ? s->n_calls >= ORCH_MCP_STATELESS_CALLS_MAX
                         : s->n_calls >= ORCH_MCP_CALLS_MAX) {
    reply_error(out, 200, id, ORCH_RPC_BUSY,
                "%d tool calls are in flight %s already; wait for one to end",
                s == &m->stateless ? ORCH_MCP_STATELESS_CALLS_MAX : ORCH_MCP_CALLS_MAX,
                s == &m->stateless ? "without a session" : "in this session");
    return -1;
  }
  return t;
}

/* A later round of a multi-round call (params.requestState, only where mrtr): the run the state
 * names, for this credential, checked as wait_for_run's arguments into a; *again is {run_id}
 * (new), again_run its id.  0, or -1 answered in out. */
static int call_later_round(struct orch_mcp *m, const struct orch_tool_scope *scope,
                            const struct orch_mcp_request *rq, const json_t *id,
                            const json_t *params, int mrtr, int time_limit_s,
                            struct orch_tool_args *a, json_t **again,
                            char again_run[STORE_ID_LEN + 1], struct orch_mcp_reply *out) {
  if (!mrtr ||
      state_run(m, rq->cred_hash, json_string_value(json_object_get(params, "requestState")),
                again_run) != 0) {
    reply_error(out, 200, id, ORCH_RPC_INVALID_PARAMS,
                "tools/call: params.requestState is not one this server gave this credential "
                "(send back the one an InputRequiredResult of run_python gave, unchanged, with "
                "elicitation in the client's capabilities)");
    return -1;
  }
  char why[600];
  *again = json_pack("{s:s}", "run_id", again_run);
  int rc = *again ? orch__tool_check(ORCH_TOOL_WAIT_FOR_RUN, *again, scope, time_limit_s, a, why,
                                     sizeof(why))
                  : SBX_ENOMEM;
  if (rc != 0) {
    json_decref(*again);
    *again = NULL;
    reply_error(out, 200, id, rc == SBX_ENOMEM ? ORCH_RPC_INTERNAL : ORCH_RPC_INVALID_PARAMS,
                "tools/call: %s", rc == SBX_ENOMEM ? "out of memory" : why);
    return -1;
  }
  return 0;
}

/* How the call keeps its client: a task answered once the run is made (stateless, the Tasks
 * extension), keepalives on a stream, or a handoff before a client's timeout. */
static void call_mode(struct orch_mcp_call *c, int version, int t, const json_t *params,
                      const struct orch_mcp_request *rq, int handoff_s, struct orch_tool_args *a) {
  if (version == V_STATELESS && t == ORCH_TOOL_RUN_PYTHON && orch__mcp_tasks_negotiated(params)) {
    c->task = TASK_CREATE; /* answered once the run is made: the task is the run */
    a->handoff_ms = 1;
    json_decref(c->progress_token);
    c->progress_token = NULL;
  } else if (c->progress_token && rq->sse_ok) /* a stream to send on: never quiet for long */
    a->keepalive_ms = ORCH_MCP_KEEPALIVE_MS;
  else if (t == ORCH_TOOL_RUN_PYTHON && handoff_s > 0) /* nothing to reset a client's timeout */
    a->handoff_ms = (uint64_t)handoff_s * 1000;
}

/* A call that ended as it started (rc, or its result now, stolen): answered in out, c freed. */
static void call_answer_now(struct orch_mcp *m, struct orch_mcp_session *s, struct orch_mcp_call *c,
                            int version, const json_t *id, const char *name, int rc, json_t *now,
                            const char *chat_id, const char *why, struct orch_mcp_reply *out) {
  now = task_result(c, now);
  call_free(c);
  if (rc == SBX_EREMOTE) { /* another node's chat: that node carries the call out */
    out->status = 200;
    snprintf(out->forward_chat, sizeof(out->forward_chat), "%s", chat_id);
  } else if (rc == SBX_EINVAL)
    reply_bad_args(out, version, id, name, why);
  else if (rc != 0)
    reply_error(out, 200, id, ORCH_RPC_INTERNAL, "the call could not start: %s", sbx_strerror(rc));
  else
    reply_result(out, id, s == &m->stateless ? stateless_result(now) : now);
}

static void on_tools_call(struct orch_mcp *m, struct orch_mcp_session *s,
                          const struct orch_tool_scope *scope, int version,
                          const struct orch_mcp_request *rq, const json_t *id, const json_t *params,
                          struct orch_mcp_reply *out) {
  json_t *args, *tok;
  int t = call_params(m, s, id, params, &args, &tok, out);
  if (t < 0)
    return;
  const char *name = json_string_value(json_object_get(params, "name"));
  struct orch_tool_env env;
  json_t *keep = NULL;
  m->tools.env(m->tools.ud, &env, &keep);
  struct orch_tool_args a;
  char why[600];
  int rc = orch__tool_check(t, args, scope, env.time_limit_s, &a, why, sizeof(why));
  int handoff_s = env.handoff_s;
  json_decref(keep);
  if (rc != 0) {
    reply_bad_args(out, version, id, name, why);
    return;
  }
  /* Multi-round (stateless, elicitation declared, not a task): the run's input() ends a round;
   * a later round names the run in its requestState and waits for it again. */
  int mrtr = version == V_STATELESS && t == ORCH_TOOL_RUN_PYTHON &&
             !orch__mcp_tasks_negotiated(params) && elicitation_declared(params);
  json_t *again = NULL; /* a later round: {run_id} for wait_for_run */
  char again_run[STORE_ID_LEN + 1] = "";
  if (version == V_STATELESS && t == ORCH_TOOL_RUN_PYTHON &&
      json_object_get(params, "requestState") != NULL) {
    if (call_later_round(m, scope, rq, id, params, mrtr, env.time_limit_s, &a, &again, again_run,
                         out) != 0)
      return;
    t = ORCH_TOOL_WAIT_FOR_RUN;
  }
  struct orch_mcp_call *c = sbx_calloc(1, sizeof(*c));
  if (c == NULL) {
    json_decref(again);
    reply_error(out, 200, id, ORCH_RPC_INTERNAL, "out of memory");
    return;
  }
  c->task_args = again; /* what a borrows */
  c->mrtr = mrtr;
  a.handoff_on_input = mrtr;
  snprintf(c->cred_hash, sizeof(c->cred_hash), "%s", rq->cred_hash ? rq->cred_hash : "");
  c->m = m;
  c->s = s;
  c->id = json_incref((json_t *)id);
  c->progress_token = id_ok(tok) ? json_incref(tok) : NULL;
  call_mode(c, version, t, params, rq, handoff_s, &a);
  sbx_list_insert_tail(&s->calls, &c->link);
  s->n_calls++;
  json_t *now = NULL;
  c->stream = rq->sse_ok && (c->progress_token != NULL ||
                             (s->elicitation && t == ORCH_TOOL_RUN_PYTHON));
  rc = m->tools.start(m->tools.ud, t, &a, again ? again : args, rq->base_url,
                      c->progress_token || c->stream || c->mrtr ? &call_ops : &call_ops_quiet, c,
                      &c->tc, &now, why, sizeof(why));
  if (rc == 0 && now == NULL && again) /* the run waits for this round's answer: given now */
    give_answer(m, again_run, json_object_get(params, "inputResponses"));
  if (rc != 0 || now != NULL) {
    call_answer_now(m, s, c, version, id, name, rc, now, a.chat_id, why, out);
    return;
  }
  out->status = 200;
  out->call = c;
  out->stream = c->stream;
}

/* A fixture's answer (conformance-fixtures mode): 1 when it had the method.  Its notifications
 * go first on a stream when the client takes one (a call answered already, sent on attach). */
static int fixture(struct orch_mcp *m, struct orch_mcp_session *s,
                   const struct orch_mcp_request *rq, const json_t *id, const char *method,
                   const json_t *params, struct orch_mcp_reply *out) {
  struct orch_mcp_fixture_reply fr;
  int stateless = s == &m->stateless;
  if (!m->tools.fixtures || !orch__mcp_fixture_method(method, params, stateless, &fr))
    return 0;
  if (fr.ask != NULL) {
    struct orch_mcp_call *c = rq->sse_ok ? sbx_calloc(1, sizeof(*c)) : NULL;
    if (c == NULL) {
      json_decref(fr.ask);
      reply_result(out, id,
                   orch__tool_error_result("This tool asks the client first: accept "
                                           "text/event-stream."));
      return 1;
    }
    *c = (struct orch_mcp_call){.m = m, .s = s, .id = json_incref((json_t *)id), .stream = 1};
    snprintf(c->asked_tool, sizeof(c->asked_tool), "%s",
             json_string_value(json_object_get(params, "name")));
    sbx_list_insert_tail(&s->calls, &c->link);
    s->n_calls++;
    ask(c, json_string_value(json_object_get(fr.ask, "method")),
        json_incref(json_object_get(fr.ask, "params")));
    json_decref(fr.ask);
    out->status = 200;
    out->call = c;
    out->stream = 1;
    return 1;
  }
  if (fr.result == NULL) {
    if (fr.data)
      reply_error_data(out, fr.status, id, fr.code, fr.message, fr.data);
    else
      reply_error(out, fr.status, id, fr.code, "%s", fr.message);
    json_decref(fr.notes);
    return 1;
  }
  json_t *result = fr.result;
  if (stateless && strcmp(method, "tools/call") != 0 && strcmp(method, "prompts/get") != 0 &&
      strcmp(method, "completion/complete") != 0 && strncmp(method, "tasks/", 6) != 0)
    result = cacheable(result);
  reply_result(out, id, stateless ? stateless_result(result) : result);
  struct orch_mcp_call *c;
  if (json_array_size(fr.notes) == 0 || !rq->sse_ok || out->body == NULL ||
      (c = sbx_calloc(1, sizeof(*c))) == NULL) {
    json_decref(fr.notes);
    return 1;
  }
  *c = (struct orch_mcp_call){.m = m, .s = s, .id = json_incref((json_t *)id), .queued = fr.notes,
                              .answer = out->body, .answer_len = out->len};
  sbx_list_insert_tail(&s->calls, &c->link);
  s->n_calls++;
  out->body = NULL;
  out->len = 0;
  out->call = c;
  out->stream = 1;
  return 1;
}

/* The client's response to a request of ours (ask): a fixture's result, or input() answered. */
static void on_response(struct orch_mcp *m, struct orch_mcp_session *s, const json_t *msg) {
  const json_t *rid = json_object_get(msg, "id");
  struct sbx_list *it;
  SBX_LIST_FOREACH(it, &s->calls) {
    struct orch_mcp_call *c = SBX_CONTAINER_OF(it, struct orch_mcp_call, link);
    if (c->asked_id == NULL || !json_equal(c->asked_id, rid))
      continue;
    json_decref(c->asked_id);
    c->asked_id = NULL;
    const json_t *result = json_object_get(msg, "result"), *error = json_object_get(msg, "error");
    if (c->asked_tool[0]) {
      on_done(c, orch__mcp_fixture_answered(c->asked_tool, result, error));
      return;
    }
    const char *action = json_string_value(json_object_get(result, "action"));
    const char *answer =
        json_string_value(json_object_get(json_object_get(result, "content"), "answer"));
    if (action && strcmp(action, "accept") == 0 && answer && c->asked_run[0])
      m->tools.give_input(m->tools.ud, c->asked_run, answer); /* not waiting: it ended, or the
                                                                  page answered first */
    return;
  }
}

static void on_notification(struct orch_mcp *m, struct orch_mcp_session *s, const char *method,
                            const json_t *params) {
  if (strcmp(method, "notifications/cancelled") != 0)
    return; /* initialized, and notifications we have no use for */
  const json_t *rid = json_object_get(params, "requestId");
  struct sbx_list *it;
  SBX_LIST_FOREACH(it, &s->calls) {
    struct orch_mcp_call *c = SBX_CONTAINER_OF(it, struct orch_mcp_call, link);
    if (rid != NULL && json_equal(c->id, rid)) {
      call_drop(c, 1);
      return;
    }
  }
  char tag[SESSION_HEAD + 1], what[120];
  if (m->tools.tell && id_ok(rid) && request_tag(m, rid, tag) == 0) { /* maybe another node's */
    snprintf(what, sizeof(what), "mcp-cancel %s %s", s->id, tag);
    m->tools.tell(m->tools.ud, what);
  }
}

/* ---- the stateless revision (2026-07-28) --------------------------------------------------- */

/* A request of the stateless revision: no session, and a revision named (header or _meta) that
 * is not a session one.  An initialize naming none is the legacy handshake. */
static int is_stateless(const struct orch_mcp_request *rq, const json_t *params) {
  if (rq->session_id != NULL)
    return 0;
  const char *v = rq->version;
  if (v == NULL)
    v = json_string_value(
        json_object_get(json_object_get(params, "_meta"), "io.modelcontextprotocol/protocolVersion"));
  return v != NULL && version_index(v) < 0;
}

/* A header value as the body's text: plain, or the Base64 sentinel "=?base64?...?=" decoded
 * (into buf); NULL when the sentinel holds no Base64. */
static const char *header_text(const char *h, char *buf, size_t cap) {
  size_t n = strlen(h);
  if (n < 11 || strncmp(h, "=?base64?", 9) != 0 || strcmp(h + n - 2, "?=") != 0)
    return h;
  size_t b64 = n - 11;
  if (b64 % 4 != 0 || b64 / 4 * 3 + 1 > cap)
    return NULL;
  int got = EVP_DecodeBlock((unsigned char *)buf, (const unsigned char *)h + 9, (int)b64);
  if (got < 0)
    return NULL;
  size_t len = (size_t)got;
  for (size_t i = n - 3; i >= 9 && h[i] == '=' && len > 0; i--)
    len--; /* EVP_DecodeBlock counts the padding as bytes */
  buf[len] = '\0';
  return memchr(buf, '\0', len) ? NULL : buf;
}

/* The stateless request's headers against its body: 0, or the refusal answered. */
static int stateless_headers(const struct orch_mcp_request *rq, const json_t *id,
                             const char *method, const json_t *params, const char *version,
                             struct orch_mcp_reply *out) {
  if (rq->version == NULL || strcmp(rq->version, version) != 0) {
    reply_error(out, 400, id, ORCH_RPC_HEADER_MISMATCH,
                "Header mismatch: MCP-Protocol-Version %.40s does not match "
                "params._meta[\"io.modelcontextprotocol/protocolVersion\"] %.40s",
                rq->version ? rq->version : "(missing)", version);
    return 1;
  }
  if (rq->method == NULL || strcmp(rq->method, method) != 0) {
    reply_error(out, 400, id, ORCH_RPC_HEADER_MISMATCH,
                "Header mismatch: Mcp-Method %.100s does not match the body's method %.100s",
                rq->method ? rq->method : "(missing)", method);
    return 1;
  }
  const char *key = strcmp(method, "tools/call") == 0 || strcmp(method, "prompts/get") == 0 ? "name"
                    : strcmp(method, "resources/read") == 0                                  ? "uri"
                                                                                             : NULL;
  const char *body = key ? json_string_value(json_object_get(params, key)) : NULL;
  char buf[1024];
  const char *h = key && rq->name ? header_text(rq->name, buf, sizeof(buf)) : NULL;
  if (key == NULL && rq->name != NULL && strncmp(method, "tasks/", 6) == 0) {
    key = "taskId"; /* the Tasks extension's Mcp-Name is optional; when sent, it says the id */
    body = json_string_value(json_object_get(params, key));
    h = header_text(rq->name, buf, sizeof(buf));
  }
  if (key && (h == NULL || body == NULL || strcmp(h, body) != 0)) {
    reply_error(out, 400, id, ORCH_RPC_HEADER_MISMATCH,
                "Header mismatch: Mcp-Name %.200s does not match the body's params.%s %.200s",
                rq->name ? rq->name : "(missing)", key, body ? body : "(missing)");
    return 1;
  }
  return 0;
}

static void on_discover(struct orch_mcp *m, const struct orch_mcp_request *rq, const json_t *id,
                        struct orch_mcp_reply *out) {
  char instructions[900];
  instructions_of(rq, instructions, sizeof(instructions));
  json_t *result =
      json_pack("{s:[s, s, s], s:o, s:s}", "supportedVersions", ORCH_MCP_STATELESS,
                orch__mcp_versions[0], orch__mcp_versions[1], "capabilities",
                capabilities(m, 1), "instructions", instructions);
  reply_result(out, id, stateless_result(cacheable(result)));
}

static void on_stateless(struct orch_mcp *m, const struct orch_mcp_request *rq, const json_t *id,
                         const char *method, const json_t *params, struct orch_mcp_reply *out) {
  if (id == NULL) { /* a notification or a response: nothing in this revision needs one */
    out->status = 202;
    return;
  }
  const json_t *meta = json_object_get(params, "_meta");
  const char *version =
      json_string_value(json_object_get(meta, "io.modelcontextprotocol/protocolVersion"));
  const json_t *caps = json_object_get(meta, "io.modelcontextprotocol/clientCapabilities");
  if (!json_is_object(meta) || version == NULL || !json_is_object(caps)) {
    reply_error(out, 400, id, ORCH_RPC_INVALID_PARAMS,
                "Invalid params: a request without a session carries params._meta with "
                "\"io.modelcontextprotocol/protocolVersion\" (a string) and "
                "\"io.modelcontextprotocol/clientCapabilities\" (an object); %s",
                !json_is_object(meta) ? "params._meta is missing"
                : version == NULL     ? "its protocolVersion is missing"
                                      : "its clientCapabilities is missing");
    return;
  }
  if (stateless_headers(rq, id, method, params, version, out) != 0)
    return;
  if (strcmp(version, ORCH_MCP_STATELESS) != 0) {
    char msg[200];
    snprintf(msg, sizeof(msg),
             "Unsupported protocol version %.40s: this server speaks %s (stateless), and %s and "
             "%s (initialize first)",
             version, ORCH_MCP_STATELESS, orch__mcp_versions[0], orch__mcp_versions[1]);
    reply_error_data(out, 400, id, ORCH_RPC_UNSUPPORTED_VERSION, msg,
                     json_pack("{s:[s, s, s], s:s}", "supported", ORCH_MCP_STATELESS,
                               orch__mcp_versions[0], orch__mcp_versions[1], "requested",
                               version));
    return;
  }
  if (strcmp(method, "server/discover") == 0)
    on_discover(m, rq, id, out);
  else if (strcmp(method, "tools/list") == 0)
    on_tools_list(m, rq->scope, V_STATELESS, id, out);
  else if (strncmp(method, "tasks/", 6) == 0 && !orch__mcp_tasks_negotiated(params))
    reply_error_data(out, 400, id, ORCH_RPC_MISSING_CAPABILITY,
                     "Missing required client capability: tasks/* needs the extension " TASKS_EXT
                     " in params._meta[\"io.modelcontextprotocol/clientCapabilities\"].extensions",
                     json_pack("{s:{s:{s:{}}}}", "requiredCapabilities", "extensions", TASKS_EXT));
  else if (strncmp(method, "tasks/", 6) == 0) {
    if (!fixture(m, &m->stateless, rq, id, method, params, out)) /* a fixture task's, or ours */
      on_task_method(m, rq, id, method, params, out);
  } else if (fixture(m, &m->stateless, rq, id, method, params, out))
    ;
  else if (strcmp(method, "tools/call") == 0)
    on_tools_call(m, &m->stateless, rq->scope, V_STATELESS, rq, id, params, out);
  else
    reply_error(out, 404, id, ORCH_RPC_METHOD_NOT_FOUND,
                "Method not found: %.200s%s", method,
                strcmp(method, "initialize") == 0 || strcmp(method, "ping") == 0 ||
                        strcmp(method, "logging/setLevel") == 0 ||
                        strcmp(method, "resources/subscribe") == 0 ||
                        strcmp(method, "resources/unsubscribe") == 0
                    ? " (2026-07-28 has no session: server/discover, tools/list and tools/call "
                      "need none; initialize without MCP-Protocol-Version for 2025-11-25)"
                    : "");
}

int orch__mcp_handle(struct orch_mcp *m, const struct orch_mcp_request *rq,
                     struct orch_mcp_reply *out) {
  memset(out, 0, sizeof(*out));
  expire(m);
  json_error_t je;
  json_t *msg = rq->body && rq->len
                    ? json_loadb(rq->body, rq->len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je)
                    : NULL;
  if (msg == NULL) {
    if (rq->body && rq->len)
      reply_error(out, 400, NULL, ORCH_RPC_PARSE_ERROR, "Parse error: %s (line %d column %d)",
                  je.text, je.line, je.column);
    else
      reply_error(out, 400, NULL, ORCH_RPC_PARSE_ERROR, "Parse error: the body is empty");
    goto out;
  }
  if (json_is_array(msg)) {
    reply_error(out, 400, NULL, ORCH_RPC_INVALID_REQUEST,
                "Invalid request: batches are not supported; send one message per POST");
    goto out;
  }
  const json_t *id = json_object_get(msg, "id"), *params = json_object_get(msg, "params");
  const char *method = json_string_value(json_object_get(msg, "method"));
  const char *jsonrpc = json_string_value(json_object_get(msg, "jsonrpc"));
  int is_request = method && id != NULL, is_note = method && id == NULL;
  int is_response = !json_object_get(msg, "method") && id_ok(id) &&
                    (json_object_get(msg, "result") || json_object_get(msg, "error"));
  if (!json_is_object(msg) || jsonrpc == NULL || strcmp(jsonrpc, "2.0") != 0 ||
      (!is_request && !is_note && !is_response) || (is_request && !id_ok(id))) {
    reply_error(out, 400, id_ok(id) ? id : NULL, ORCH_RPC_INVALID_REQUEST,
                "Invalid request: not a JSON-RPC 2.0 request, notification or response (a "
                "request has a string or integer id)");
    goto out;
  }
  if (is_request && params != NULL && !json_is_object(params)) {
    reply_error(out, 200, id, ORCH_RPC_INVALID_PARAMS, "Invalid params: params must be an object");
    goto out;
  }
  if ((is_request || is_note) && is_stateless(rq, params)) {
    on_stateless(m, rq, is_request ? id : NULL, method, params, out);
    goto out;
  }
  if (is_request && strcmp(method, "initialize") == 0) {
    on_initialize(m, rq, id, params, out);
    goto out;
  }
  if (rq->session_id == NULL) {
    reply_error(out, 400, is_request ? id : NULL, ORCH_RPC_INVALID_REQUEST,
                "Bad request: no Mcp-Session-Id header (send initialize first)");
    goto out;
  }
  struct orch_mcp_session *s = session_get(m, rq->session_id, rq->cred_hash, rq);
  if (s == NULL) {
    reply_error(out, 404, is_request ? id : NULL, ORCH_RPC_NO_SESSION,
                "Session not found: it ended or never was (send initialize for a new one)");
    goto out;
  }
  int version = s->version;
  if (rq->version != NULL && (version = version_index(rq->version)) < 0) {
    reply_error(out, 400, is_request ? id : NULL, ORCH_RPC_INVALID_REQUEST,
                "Bad request: MCP-Protocol-Version %.40s is not supported (this server speaks "
                "%s and %s)",
                rq->version, orch__mcp_versions[0], orch__mcp_versions[1]);
    goto out;
  }
  touch(m, s);
  if (!is_request) {
    if (is_note)
      on_notification(m, s, method, params);
    else
      on_response(m, s, msg);
    out->status = 202;
  } else if (strcmp(method, "ping") == 0) {
    reply_result(out, id, json_object());
  } else if (strcmp(method, "tools/list") == 0) {
    on_tools_list(m, &s->scope, version, id, out);
  } else if (fixture(m, s, rq, id, method, params, out)) {
  } else if (strcmp(method, "tools/call") == 0) {
    on_tools_call(m, s, &s->scope, version, rq, id, params, out);
  } else {
    reply_error(out, 200, id, ORCH_RPC_METHOD_NOT_FOUND, "Method not found: %.200s", method);
  }
out:
  json_decref(msg);
  if (out->status == 0 ||
      (out->status != 202 && out->body == NULL && out->call == NULL && !out->forward_chat[0])) {
    orch__mcp_reply_free(out);
    return SBX_ENOMEM;
  }
  return 0;
}

void orch__mcp_call_attach(struct orch_mcp_call *c, const struct orch_mcp_sink *sink, void *ud) {
  c->sink = sink;
  c->sink_ud = ud;
  size_t i, len = 0;
  json_t *note;
  json_array_foreach(c->queued, i, note) {
    char *text = orch__json_dump(note, &len);
    if (text)
      sink->send(ud, text, len);
    sbx_free(text);
  }
  json_decref(c->queued);
  c->queued = NULL;
  if (c->answer == NULL)
    return;
  char *answer = c->answer;
  len = c->answer_len;
  c->answer = NULL;
  call_free(c);
  sink->end(ud, answer, len);
  sbx_free(answer);
}

void orch__mcp_call_gone(struct orch_mcp_call *c) { call_drop(c, 0); }
