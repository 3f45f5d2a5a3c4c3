/* api_mcp.c -- the tools over HTTP: MCP's Streamable HTTP transport, the same tools as
 * OpenAI-style functions for assistants without MCP, and chat keys.
 *
 *   POST   /mcp      one JSON-RPC message (mcp.c answers it); a tools/call that asked for
 *                    progress (and whose client accepts text/event-stream) is answered as an SSE
 *                    stream: `event: message` per notification, the response last, then the end;
 *                    any other answer is one JSON body.  Body limit ORCH_MCP_BODY_MAX (413).
 *   DELETE /mcp      ends the session named by Mcp-Session-Id (200; 404 unknown; 400 none).
 *   GET    /mcp      405 (Allow: POST, DELETE): no stream of server-initiated messages (the
 *                    server sends none); the SDKs take 405 as "no such stream".
 *   GET    /v1/tools          {tools: [OpenAI function definitions]}: the MCP tools' words and
 *                             schemas.
 *   POST   /v1/tools/call     {name, arguments (an object, or a JSON string of one)} -> 200 the
 *                             CallToolResult plus `text`, the text a model reads; held until a
 *                             run ends.
 *   POST   /v1/chats/{chat}/chat_key     (API key or the chat's page token) -> 201 {chat_id,
 *                                        key, mcp_url}: the chat's one-chat credential.
 *   POST   /v1/admin/chat_keys/rotate    (API key) a new chat-key secret: every key stops.
 *
 * Credentials (MCP and /v1/tools): the API key reaches every chat; a chat key (auth.c) reaches
 * its chat only; no credential or a wrong one -> 401 (with WWW-Authenticate: Bearer); a page
 * token or the host key -> 403 (those belong to pages and hosts, not assistants).  A request
 * with an Origin header (a browser's) is refused with 403 unless the origin is ours (same host
 * and port as the request's Host): a web page elsewhere, even one whose name resolves to us
 * (DNS rebinding), never drives the tools with a browser's help; the bearer credential, never a
 * cookie, is the other half of that defence.
 *
 * A held answer (a tools/call, a /v1/tools/call) whose client goes away abandons its call: a
 * run it started is cancelled (MCP's spec says a disconnect SHOULD NOT mean cancel, but this
 * server offers no stream to resume, so a result nobody can receive would only hold the chat's
 * queue; see docs/mcp.md).  An SSE answer is written in pieces under the transport's
 * backpressure; a progress notification that finds the stream's queue full is dropped (the next
 * one says where the run is).
 *
 * What it does not do: JSON-RPC (mcp.c), the tools (tools.c).
 */
#include "api.h"
#include "mcp.h"
#include "nodes.h"
#include "transport.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SSE_HEARTBEAT_MS 15000
#define SSE_PIECE        (64 * 1024)

static const char JSON_HEADERS[] = "Content-Type: application/json\r\nCache-Control: no-store\r\n";

/* ---- who is calling, from where ----------------------------------------------------------- */

/* A browser's Origin that is not ours (scheme://host[:port] with the request's own Host). */
static int foreign_origin(struct tp_req *req) {
  const char *origin = tp_req_header(req, "origin");
  if (origin == NULL)
    return 0;
  const char *host = tp_req_header(req, "host");
  if (host == NULL)
    host = tp_req_header(req, ":authority");
  const char *rest = strncasecmp(origin, "http://", 7) == 0    ? origin + 7
                     : strncasecmp(origin, "https://", 8) == 0 ? origin + 8
                                                               : NULL;
  return rest == NULL || host == NULL || strcasecmp(rest, host) != 0;
}

/* "HOST[:PORT]" split: the name (brackets kept for IPv6) into name, the port (-1: none; -2: not
 * a port).  0, or -1 when it is not of that shape. */
static int split_host(const char *h, char *name, size_t cap, int *port) {
  const char *end = h[0] == '[' ? strchr(h, ']') : strchr(h, ':');
  if (h[0] == '[' && end == NULL)
    return -1;
  size_t n = end ? (size_t)(end - h) + (h[0] == '[') : strlen(h);
  if (n == 0 || n >= cap)
    return -1;
  memcpy(name, h, n);
  name[n] = '\0';
  const char *rest = h + n;
  *port = -1;
  if (*rest == ':') {
    char *e = NULL;
    long p = strtol(rest + 1, &e, 10);
    *port = rest[1] != '\0' && *e == '\0' && p > 0 && p < 65536 ? (int)p : -2;
  } else if (*rest != '\0') {
    return -1;
  }
  return 0;
}

/* The host of an http(s):// URL matches name (and its port, when both say one). */
static int url_host_is(const char *url, const char *name, int port) {
  const char *h = url == NULL                            ? NULL
                  : strncasecmp(url, "http://", 7) == 0  ? url + 7
                  : strncasecmp(url, "https://", 8) == 0 ? url + 8
                                                         : NULL;
  char un[256], hb[256];
  int up;
  if (h == NULL)
    return 0;
  snprintf(hb, sizeof(hb), "%.*s", (int)strcspn(h, "/"), h);
  if (split_host(hb, un, sizeof(un), &up) != 0 || strcasecmp(un, name) != 0)
    return 0;
  return port < 0 || up < 0 || up == port;
}

/* A Host this server answers to, so that a page whose name was rebound to this address (DNS
 * rebinding: its requests carry its own name) is refused: an IP literal (a page at an IP is that
 * IP's own origin; a wildcard listener is reached by any of them), localhost, or the host of
 * CEREA_PUBLIC_URL or CEREA_NODE_URL.  The name is what tells a rebound page; the port is not
 * checked (it tells none: a page elsewhere on this machine has its own Origin, refused below),
 * and a request another node forwards keeps the Host its client used there. */
static int host_ours(struct orch *o, const char *host) {
  char name[256], inner[256];
  unsigned char addr[16];
  int port;
  if (host == NULL || split_host(host, name, sizeof(name), &port) != 0 || port == -2)
    return 0;
  if (url_host_is(o->cfg->public_url, name, -1) || url_host_is(o->cfg->node_url, name, -1))
    return 1;
  snprintf(inner, sizeof(inner), "%.*s", (int)strlen(name) - 2, name + 1);
  return strcasecmp(name, "localhost") == 0 || inet_pton(AF_INET, name, addr) == 1 ||
         (name[0] == '[' && inet_pton(AF_INET6, inner, addr) == 1);
}

/* Answers a refusal of the MCP endpoint: the JSON-RPC error shape, with our code for the status. */
static void mcp_refuse(struct tp_req *req, int status, int code, const char *msg) {
  size_t len = 0;
  char *text = orch__mcp_error_text(NULL, code, msg, &len);
  tp_respond(req, status,
             status == 401 ? "Content-Type: application/json\r\nCache-Control: no-store\r\n"
                             "WWW-Authenticate: Bearer realm=\"cerea-sandbox\"\r\n"
                           : JSON_HEADERS,
             text ? text : "", text ? len : 0);
  sbx_free(text);
}

/* The caller's scope and credential hash; answers (401/403, in the endpoint's shape) and returns
 * nonzero when it may not call tools. */
static int tool_caller(struct orch *o, struct tp_req *req, int mcp, struct orch_tool_scope *scope,
                       char cred_hash[65]) {
  const char *host = tp_req_header(req, "host");
  if (host == NULL)
    host = tp_req_header(req, ":authority");
  if (mcp && !host_ours(o, host)) {
    char msg[400];
    snprintf(msg, sizeof(msg),
             "the Host %.200s is not one this server answers to (an IP address, localhost, "
             "or CEREA_PUBLIC_URL's host)",
             host ? host : "(none)");
    mcp_refuse(req, 403, ORCH_RPC_FORBIDDEN, msg);
    return 1;
  }
  if (foreign_origin(req)) {
    const char *msg = "requests from another origin are refused (Origin is not this server)";
    if (mcp)
      mcp_refuse(req, 403, ORCH_RPC_FORBIDDEN, msg);
    else
      orch__api_error(req, 403, "forbidden", "%s", msg);
    return 1;
  }
  const char *hdr = tp_req_header(req, "authorization");
  struct orch_auth a;
  orch__auth_read(hdr, NULL, o->api_key_hash, o->host_key_hash, &a);
  orch__auth_chat_key(&a, hdr, NULL, o->chat_secret);
  memset(scope, 0, sizeof(*scope));
  if (a.kind == ORCH_CRED_API || a.kind == ORCH_CRED_CHAT) {
    if (a.kind == ORCH_CRED_CHAT)
      memcpy(scope->chat_id, a.chat_id, sizeof(scope->chat_id));
    memcpy(cred_hash, a.token_hash, 65);
    return 0;
  }
  /* A real page token or the host key: 403 (they belong to pages); anything else, a forged
   * page token's shape included, is a wrong credential (as the API answers, api.c). */
  struct orch_chat *c = NULL;
  int status = a.kind == ORCH_CRED_HOST ||
                       (a.kind == ORCH_CRED_PAGE && orch__chat_get(o, a.chat_id, &c) == 0 &&
                        orch__auth_allows_chat(&a, c))
                   ? 403
                   : 401;
  const char *msg = status == 403 ? "the tools take the API key or a chat key, not a page token"
                    : a.kind == ORCH_CRED_NONE ? "missing credential (Authorization: Bearer ...)"
                                               : "wrong credential";
  if (mcp)
    mcp_refuse(req, status, status == 403 ? ORCH_RPC_FORBIDDEN : ORCH_RPC_UNAUTHORIZED, msg);
  else
    orch__api_error(req, status, status == 403 ? "forbidden" : "unauthorized", "%s", msg);
  return 1;
}

/* ---- the domain side of the tools (mcp.c's tools, the HTTP calls) -------------------------- */

static void tools_env(void *ud, struct orch_tool_env *env, json_t **keep) {
  orch__tool_env(ud, env, keep);
}

static int tools_start(void *ud, enum orch_tool t, struct orch_tool_args *args, json_t *args_json,
                       const char *base, const struct orch_tool_ops *ops, void *call_ud,
                       struct orch_tool_call **out, json_t **now, char *why, size_t cap) {
  return orch__tool_start(ud, t, args, args_json, base, ops, call_ud, out, now, why, cap);
}

static void tools_abandon(void *ud, struct orch_tool_call *tc) {
  (void)ud;
  orch__tool_abandon(tc);
}

static void tools_tell(void *ud, const char *what) { orch__node_tell(ud, what); }

/* ---- an answer that waits (a tools/call, a /v1/tools/call) --------------------------------- */

struct held {
  struct orch *o;
  struct tp_req *req;         /* held until answered or gone */
  struct orch_mcp_call *call; /* MCP: the call, until it ended */
  struct orch_tool_call *tc;  /* /v1/tools/call: the tool call, until it ended */
  int stream;                 /* answered as SSE */
  char *rest;                 /* SSE: the last message's frame, written piece by piece */
  size_t rest_len, rest_off;
};

static void held_free(struct held *h) {
  sbx_free(h->rest);
  sbx_free(h);
}

/* The answer is complete: the request goes. */
static void held_done(struct held *h) {
  tp_req_on_close(h->req, NULL, NULL);
  tp_req_release(h->req);
  held_free(h);
}

/* The client went away: what it waited for is abandoned. */
static void on_held_gone(struct tp_req *req, void *ud) {
  (void)req;
  struct held *h = ud;
  if (h->call)
    orch__mcp_call_gone(h->call);
  if (h->tc)
    orch__tool_abandon(h->tc);
  h->call = NULL;
  h->tc = NULL;
  tp_req_release(h->req);
  held_free(h);
}

/* "event: message\ndata: <json>\n\n" (the JSON is compact: one line). */
static char *sse_frame(const char *text, size_t len, size_t *out_len) {
  static const char head[] = "event: message\ndata: ";
  char *f = sbx_malloc(sizeof(head) - 1 + len + 2);
  if (f == NULL)
    return NULL;
  memcpy(f, head, sizeof(head) - 1);
  memcpy(f + sizeof(head) - 1, text, len);
  memcpy(f + sizeof(head) - 1 + len, "\n\n", 2);
  *out_len = sizeof(head) - 1 + len + 2;
  return f;
}

/* Writes what is left of the last frame while the stream takes it, then ends the stream. */
static void on_stream_drain(struct tp_req *req, void *ud);
static void write_rest(struct held *h) {
  while (h->rest_off < h->rest_len) {
    size_t n = SBX_MIN((size_t)SSE_PIECE, h->rest_len - h->rest_off);
    int rc = tp_stream_write(h->req, h->rest + h->rest_off, n);
    if (rc == SBX_EAGAIN) {
      tp_stream_on_drain(h->req, on_stream_drain, h);
      return;
    }
    if (rc != 0)
      break; /* the client is gone: the answer ends here */
    h->rest_off += n;
  }
  tp_stream_end(h->req);
  held_done(h);
}

static void on_stream_drain(struct tp_req *req, void *ud) {
  tp_stream_on_drain(req, NULL, NULL);
  write_rest(ud);
}

static void sink_send(void *ud, const char *text, size_t len) {
  struct held *h = ud;
  if (!h->stream)
    return; /* a JSON answer has no place for notifications */
  size_t flen = 0;
  char *f = sse_frame(text, len, &flen);
  if (f != NULL)
    tp_stream_write(h->req, f, flen); /* SBX_EAGAIN: dropped, the next one supersedes it */
  sbx_free(f);
}

static void sink_end(void *ud, const char *text, size_t len) {
  struct held *h = ud;
  h->call = NULL;
  if (!h->stream) {
    if (text != NULL) {
      tp_respond(h->req, 200, JSON_HEADERS, text, len);
    } else { /* cancelled: the HTTP answer must carry something; the client ignores it */
      size_t n = 0;
      char *e = orch__mcp_error_text(NULL, ORCH_RPC_CANCELLED, "the request was cancelled", &n);
      tp_respond(h->req, 200, JSON_HEADERS, e ? e : "", e ? n : 0);
      sbx_free(e);
    }
    held_done(h);
    return;
  }
  if (text == NULL) { /* cancelled: the stream ends with no response */
    tp_stream_end(h->req);
    held_done(h);
    return;
  }
  if ((h->rest = sse_frame(text, len, &h->rest_len)) == NULL) {
    tp_stream_end(h->req);
    held_done(h);
    return;
  }
  write_rest(h);
}

static const struct orch_mcp_sink mcp_sink = {sink_send, sink_end};

/* ---- /mcp --------------------------------------------------------------------------------- */

static int accepts(struct tp_req *req, const char *type) {
  const char *accept = tp_req_header(req, "accept");
  return accept == NULL || strstr(accept, type) != NULL || strstr(accept, "*/*") != NULL;
}

static void on_mcp_post(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  struct orch_tool_scope scope;
  char cred_hash[65], base[320];
  if (tool_caller(o, req, 1, &scope, cred_hash) != 0)
    return;
  if (o->mcp == NULL) {
    mcp_refuse(req, 503, ORCH_RPC_BUSY, "the MCP server is not available (out of memory)");
    return;
  }
  if (!accepts(req, "application/json") && !accepts(req, "text/event-stream")) {
    mcp_refuse(req, 406, ORCH_RPC_INVALID_REQUEST,
               "Not acceptable: the client must accept application/json and text/event-stream");
    return;
  }
  orch__api_base_url(o, req, base, sizeof(base));
  size_t len = 0;
  const char *body = tp_req_body(req, &len);
  struct orch_mcp_request rq = {
      .body = body,
      .len = len,
      .session_id = tp_req_header(req, "mcp-session-id"),
      .version = tp_req_header(req, "mcp-protocol-version"),
      .method = tp_req_header(req, "mcp-method"),
      .name = tp_req_header(req, "mcp-name"),
      .scope = &scope,
      .cred_hash = cred_hash,
      .sse_ok = tp_req_header(req, "accept") != NULL && accepts(req, "text/event-stream"),
      .base_url = base,
  };
  struct orch_mcp_reply rp;
  if (orch__mcp_handle(o->mcp, &rq, &rp) != 0) {
    mcp_refuse(req, 500, ORCH_RPC_INTERNAL, "out of memory");
    return;
  }
  if (rp.forward_chat[0]) { /* nodes: the chat's node carries the call out, answering through us */
    orch__node_forward(o, req, rp.forward_chat, NULL);
    orch__mcp_reply_free(&rp);
    return;
  }
  if (rp.call == NULL) {
    char headers[300];
    snprintf(headers, sizeof(headers), "%s%s%s%s", JSON_HEADERS,
             rp.session_id[0] ? "Mcp-Session-Id: " : "", rp.session_id,
             rp.session_id[0] ? "\r\n" : "");
    tp_respond(req, rp.status, rp.body ? headers : "Cache-Control: no-store\r\n",
               rp.body ? rp.body : "", rp.body ? rp.len : 0);
    orch__mcp_reply_free(&rp);
    return;
  }
  struct held *h = sbx_calloc(1, sizeof(*h));
  if (h == NULL ||
      (rp.stream && tp_sse_start(req, "Cache-Control: no-store\r\n", SSE_HEARTBEAT_MS) != 0)) {
    sbx_free(h);
    orch__mcp_call_gone(rp.call);
    mcp_refuse(req, 500, ORCH_RPC_INTERNAL, "out of memory");
    return;
  }
  *h = (struct held){.o = o, .req = req, .call = rp.call, .stream = rp.stream};
  if (!rp.stream)
    tp_req_hold(req); /* tp_sse_start holds a stream itself */
  tp_req_on_close(req, on_held_gone, h);
  orch__mcp_call_attach(rp.call, &mcp_sink, h);
}

static void on_mcp_delete(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  struct orch_tool_scope scope;
  char cred_hash[65];
  if (tool_caller(o, req, 1, &scope, cred_hash) != 0)
    return;
  int status =
      o->mcp ? orch__mcp_end_session(o->mcp, tp_req_header(req, "mcp-session-id"), cred_hash) : 404;
  if (status == 200)
    tp_respond(req, 200, "Cache-Control: no-store\r\n", "", 0);
  else
    mcp_refuse(req, status, status == 404 ? ORCH_RPC_NO_SESSION : ORCH_RPC_INVALID_REQUEST,
               status == 404 ? "Session not found" : "no Mcp-Session-Id header");
}

/* ---- /v1/tools ---------------------------------------------------------------------------- */

static void on_tools(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  struct orch_tool_scope scope;
  char cred_hash[65];
  if (tool_caller(o, req, 0, &scope, cred_hash) != 0)
    return;
  struct orch_tool_env env;
  json_t *keep = NULL;
  orch__tool_env(o, &env, &keep);
  json_t *list = orch__tools_json(&env, &scope, ORCH_TOOLS_OPENAI);
  json_decref(keep);
  orch__api_json(req, 200, json_pack("{s:o}", "tools", list));
}

/* The CallToolResult with `text` beside it: the text item a model reads as the tool message. */
static void answer_tool_result(struct tp_req *req, json_t *result) {
  json_t *text = json_object_get(json_array_get(json_object_get(result, "content"), 0), "text");
  json_object_set_new(result, "text", text ? json_incref(text) : json_string(""));
  orch__api_json(req, 200, result);
}

static void on_call_done(void *ud, json_t *result) {
  struct held *h = ud;
  h->tc = NULL;
  answer_tool_result(h->req, result);
  held_done(h);
}

static const struct orch_tool_ops http_ops = {NULL, on_call_done};

static void refused(struct tp_req *req, const char *why) {
  char text[700];
  snprintf(text, sizeof(text), "The call was refused: %s.", why);
  answer_tool_result(req, orch__tool_error_result(text));
}

static void on_tools_call(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  struct orch_tool_scope scope;
  char cred_hash[65], base[320], why[600];
  if (tool_caller(o, req, 0, &scope, cred_hash) != 0)
    return;
  json_t *body = orch__api_body_object(req), *args = NULL;
  if (body == NULL)
    return;
  const char *name = NULL;
  json_t *given = NULL;
  struct orch_field f[] = {ORCH_FIELD_REQUIRED("name", "s", &name),
                           ORCH_FIELD("arguments", "o", &given)};
  if (orch__api_unpack(req, body, NULL, f, SBX_ARRAY_SIZE(f)) != 0)
    goto out;
  int t = orch__tool_find(name);
  if (t < 0) {
    char names[200] = "";
    for (int i = 0; i < ORCH_TOOL__COUNT; i++)
      snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s", i ? ", " : "",
               orch__tool_name(i));
    orch__api_error(req, 404, "not_found", "no tool %.200s (the tools: %s)", name, names);
    goto out;
  }
  /* OpenAI's tool calls carry their arguments as a JSON string. */
  if (json_is_string(given))
    args = json_loads(json_string_value(given), JSON_REJECT_DUPLICATES, NULL);
  else
    args = json_incref(given);
  if (given != NULL && !json_is_object(args)) {
    orch__api_error(req, 400, "invalid_field", "arguments: an object, or a JSON string of one");
    goto out;
  }
  struct orch_tool_env env;
  json_t *keep = NULL;
  orch__tool_env(o, &env, &keep);
  struct orch_tool_args a;
  int rc = orch__tool_check(t, args, &scope, env.time_limit_s, &a, why, sizeof(why));
  json_decref(keep);
  if (rc != 0) {
    refused(req, why);
    goto out;
  }
  struct orch_chat *oc = NULL; /* (wait_for_run, cancel_run: their run says the chat) */
  if (a.chat_id && orch__chat_get(o, a.chat_id, &oc) == SBX_EREMOTE) { /* nodes: its node answers */
    orch__node_forward(o, req, a.chat_id, NULL);
    goto out;
  }
  struct held *h = sbx_calloc(1, sizeof(*h));
  if (h == NULL) {
    orch__api_error(req, 500, "internal", "out of memory");
    goto out;
  }
  *h = (struct held){.o = o, .req = req};
  orch__api_base_url(o, req, base, sizeof(base));
  json_t *now = NULL;
  rc = orch__tool_start(o, t, &a, args, base, &http_ops, h, &h->tc, &now, why, sizeof(why));
  if (rc != 0 || now != NULL) {
    sbx_free(h);
    if (rc == SBX_EREMOTE && a.chat_id) /* nodes: the run's chat is another node's */
      orch__node_forward(o, req, a.chat_id, NULL);
    else if (rc == SBX_EINVAL)
      refused(req, why);
    else if (rc != 0)
      orch__api_fail(req, rc, ORCH_OP_ANY, "the call could not start: %s", sbx_strerror(rc));
    else
      answer_tool_result(req, now);
    goto out;
  }
  tp_req_hold(req);
  tp_req_on_close(req, on_held_gone, h);
out:
  json_decref(args);
  json_decref(body);
}

/* ---- chat keys ---------------------------------------------------------------------------- */

static void on_chat_key(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  struct orch_chat *c = orch__api_chat(o, req, tp_req_param(req, "chat"), ORCH_API_PERSON, 0);
  if (c == NULL)
    return;
  char key[ORCH_CHAT_KEY_LEN + 1], base[320], url[400];
  if (orch__chat_key_make(o->chat_secret, c->id, key, sizeof(key)) != 0) {
    orch__api_error(req, 500, "internal", "the chat key could not be made");
    return;
  }
  orch__api_base_url(o, req, base, sizeof(base));
  snprintf(url, sizeof(url), "%s/mcp", base);
  orch__api_json(req, 201,
                 json_pack("{s:s, s:s, s:s}", "chat_id", c->id, "key", key, "mcp_url", url));
}

static void on_rotate(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  if (orch__api_admin_only(o, req, "rotating the chat-key secret", NULL) != 0)
    return;
  struct sbx_error err;
  sbx_error_clear(&err);
  if (orch__chat_secret_load(o->cfg->data_dir, 1, o->chat_secret, &err) != 0) {
    orch__api_error(req, 500, "storage", "the new secret could not be written: %s", err.msg);
    return;
  }
  sbx_log(SBX_LOG_INFO, "mcp", "chat-key secret rotated: every chat key made before is revoked");
  orch__api_json(req, 200, json_pack("{s:b}", "rotated", 1));
}

/* input() answered by an MCP client (elicitation): as POST /v1/runs/{run}/input. */
static int tools_give_input(void *ud, const char *run_id, const char *text) {
  struct orch *o = ud;
  struct orch_run *run = orch__map_get(&o->runs, run_id);
  if (run == NULL || strlen(text) > ORCH_INPUT_BYTES)
    return SBX_ESTATE;
  int rc = orch__run_give_input(o, run, text);
  if (rc == 0)
    o->m.inputs_given++;
  return rc;
}

static int tools_input_asked(void *ud, const char *run_id, char *prompt, size_t cap,
                             char key[ORCH_TOOL_INPUT_KEY]) {
  return orch__tool_input_asked(ud, run_id, prompt, cap, key);
}

void orch__routes_mcp(struct orch *o) {
  struct orch_mcp_tools t = {
      .ud = o,
      .env = tools_env,
      .start = tools_start,
      .abandon = tools_abandon,
      .give_input = tools_give_input,
      .input_asked = tools_input_asked,
      .fixtures = o->cfg->mcp_fixtures};
  if (t.fixtures)
    sbx_log(SBX_LOG_WARN, "mcp",
            "CEREA_MCP_CONFORMANCE_FIXTURES: /mcp offers the conformance suite's fixtures");
  if (o->cfg->node_url != NULL) { /* several nodes: a session is good on each (mcp.c) */
    t.secret = o->chat_secret;
    t.tell = tools_tell;
  }
  if (o->mcp == NULL && (o->mcp = orch__mcp_new(&t)) == NULL)
    sbx_log(SBX_LOG_ERROR, "mcp", "no memory for the MCP sessions: /mcp answers 503");
  tp_route(o->tp, "POST", "/mcp", ORCH_MCP_BODY_MAX, on_mcp_post, o);
  tp_route(o->tp, "DELETE", "/mcp", 0, on_mcp_delete, o);
  tp_route(o->tp, "GET", "/v1/tools", 0, on_tools, o);
  tp_route(o->tp, "POST", "/v1/tools/call", ORCH_MCP_BODY_MAX, on_tools_call, o);
  tp_route(o->tp, "POST", "/v1/chats/{chat}/chat_key", 0, on_chat_key, o);
  tp_route(o->tp, "POST", "/v1/admin/chat_keys/rotate", 0, on_rotate, o);
}
