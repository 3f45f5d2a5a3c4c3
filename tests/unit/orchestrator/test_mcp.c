/* test_mcp.c -- the MCP envelope and methods (mcp.c) with plain strings, no HTTP: classification
 * of messages and the spec's codes (table-driven), version negotiation, sessions (bound to their
 * credential, ended by DELETE, the idle end with the fake clock, the cap), tools/call answered at
 * once or pending, progress and the response through a sink, notifications/cancelled, a session
 * that ends with a call in flight, argument errors by version; with several nodes, sessions any
 * node sharing the secret takes in, and the cancels and ends told to the other nodes.  The tools'
 * execution is a named test double (fake_*); their arguments and words are tools.c's own. */
#include "mcp.h"

#include <check.h>
#include <stdarg.h>
#include <string.h>

/* ---- a test double of the tools' execution ----------------------------------------------- */

#define FAKE_MAX 80
static struct {
  int n_started, n_abandoned;
  const struct orch_tool_ops *ops[FAKE_MAX];
  void *ud[FAKE_MAX];
  int live[FAKE_MAX];
  char code[FAKE_MAX][64];
  uint64_t keepalive_ms[FAKE_MAX], handoff_ms[FAKE_MAX];
} fake;
static char fake_calls[FAKE_MAX]; /* their addresses stand for struct orch_tool_call */

static void fake_env(void *ud, struct orch_tool_env *env, json_t **keep) {
  (void)ud;
  memset(env, 0, sizeof(*env));
  env->time_limit_s = 60;
  env->paused_wait_ms = 120000;
  env->handoff_s = 50;
  *keep = NULL;
}

/* run_python goes on (code "now" answers at once, "nochat" is a bad argument found late,
 * "elsewhere" a chat another node serves); list_files answers at once. */
static int fake_start(void *ud, enum orch_tool t, struct orch_tool_args *a, json_t *args_json,
                      const char *base, const struct orch_tool_ops *ops, void *call_ud,
                      struct orch_tool_call **out, json_t **now, char *why, size_t cap) {
  (void)ud, (void)args_json, (void)base;
  *out = NULL;
  *now = NULL;
  if (t != ORCH_TOOL_RUN_PYTHON || strcmp(a->code, "now") == 0) {
    *now = json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text", "at once",
                     "isError", 0);
    return 0;
  }
  if (strcmp(a->code, "nochat") == 0) {
    snprintf(why, cap, "chat_id: no chat %s", a->chat_id);
    return SBX_EINVAL;
  }
  if (strcmp(a->code, "elsewhere") == 0)
    return SBX_EREMOTE;
  int i = fake.n_started++;
  ck_assert_int_lt(i, FAKE_MAX);
  fake.ops[i] = ops;
  fake.ud[i] = call_ud;
  fake.live[i] = 1;
  snprintf(fake.code[i], sizeof(fake.code[i]), "%s", a->code);
  fake.keepalive_ms[i] = a->keepalive_ms;
  fake.handoff_ms[i] = a->handoff_ms;
  *out = (struct orch_tool_call *)&fake_calls[i];
  return 0;
}

static void fake_abandon(void *ud, struct orch_tool_call *tc) {
  (void)ud;
  int i = (int)((char *)tc - fake_calls);
  ck_assert(fake.live[i]);
  fake.live[i] = 0;
  fake.n_abandoned++;
}

/* The tool call i ends with a text result. */
static void fake_finish(int i, const char *text) {
  ck_assert(fake.live[i]);
  fake.live[i] = 0;
  fake.ops[i]->done(fake.ud[i], json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text",
                                          "text", text, "isError", 0));
}

static void fake_progress(int i, const char *state) {
  struct orch_tool_progress p = {.run_id = "r1", .state = state, .attempt = 1, .message = state};
  fake.ops[i]->progress(fake.ud[i], &p);
}

/* ---- a sink that records ------------------------------------------------------------------ */

static struct {
  char sent[8][2048];
  int n_sent, ended;
  char last[4096];
  int last_null;
} rec;

static void rec_send(void *ud, const char *text, size_t len) {
  (void)ud;
  ck_assert_int_lt(rec.n_sent, 8);
  snprintf(rec.sent[rec.n_sent++], sizeof(rec.sent[0]), "%.*s", (int)len, text);
}
static void rec_end(void *ud, const char *text, size_t len) {
  (void)ud;
  rec.ended++;
  rec.last_null = text == NULL;
  snprintf(rec.last, sizeof(rec.last), "%.*s", (int)len, text ? text : "");
}
static const struct orch_mcp_sink rec_sink = {rec_send, rec_end};

/* ---- helpers ------------------------------------------------------------------------------ */

static struct orch_mcp *m;
static struct orch_tool_scope scope_all, scope_chat;
static const char *const CHAT = "0123456789abcdef0123456789abcdef";

static void setup(void) {
  memset(&fake, 0, sizeof(fake));
  memset(&rec, 0, sizeof(rec));
  struct orch_mcp_tools t = {.env = fake_env, .start = fake_start, .abandon = fake_abandon};
  m = orch__mcp_new(&t);
  ck_assert_ptr_nonnull(m);
  memset(&scope_all, 0, sizeof(scope_all));
  memset(&scope_chat, 0, sizeof(scope_chat));
  strcpy(scope_chat.chat_id, CHAT);
}

static void teardown(void) {
  orch__mcp_free(m);
  sbx_clock_set_fake(NULL, NULL, NULL);
}

/* One message; the reply is kept in *out (free with orch__mcp_reply_free). */
static void post(const char *session, const char *version, const struct orch_tool_scope *scope,
                 const char *cred, int sse_ok, struct orch_mcp_reply *out, const char *fmt, ...) {
  char body[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(body, sizeof(body), fmt, ap);
  va_end(ap);
  struct orch_mcp_request rq = {body,  strlen(body), session, version,
                                scope, cred,         sse_ok,  "http://127.0.0.1:1", NULL, NULL};
  ck_assert_int_eq(orch__mcp_handle(m, &rq, out), 0);
}

/* The reply body as JSON (new). */
static json_t *body_of(const struct orch_mcp_reply *r) {
  ck_assert_ptr_nonnull(r->body);
  json_t *j = json_loadb(r->body, r->len, 0, NULL);
  ck_assert_ptr_nonnull(j);
  ck_assert_str_eq(json_string_value(json_object_get(j, "jsonrpc")), "2.0");
  return j;
}

static int error_code(const struct orch_mcp_reply *r) {
  json_t *j = body_of(r);
  int code = (int)json_integer_value(json_object_get(json_object_get(j, "error"), "code"));
  json_decref(j);
  return code;
}

/* A new session for cred (its id copied into sid), asking for version. */
static void init_session(const char *version, const struct orch_tool_scope *scope, const char *cred,
                         char sid[65]) {
  struct orch_mcp_reply r;
  post(NULL, NULL, scope, cred, 1, &r,
       "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
       "\"%s\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}",
       version);
  ck_assert_int_eq(r.status, 200);
  ck_assert_uint_eq(strlen(r.session_id), 64);
  strcpy(sid, r.session_id);
  orch__mcp_reply_free(&r);
}

/* A run_python call of session sid (the "cred" credential, every chat) that goes on, attached to
 * the recording sink. */
static struct orch_mcp_call *pending_call(const char *sid, int id, const char *code) {
  struct orch_mcp_reply r;
  post(sid, NULL, &scope_all, "cred", 1, &r,
       "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\",\"params\":{\"name\":"
       "\"run_python\",\"arguments\":{\"chat_id\":\"%s\",\"code\":\"%s\"}}}",
       id, CHAT, code);
  ck_assert_ptr_nonnull(r.call);
  ck_assert_ptr_null(r.body);
  orch__mcp_call_attach(r.call, &rec_sink, NULL);
  struct orch_mcp_call *c = r.call;
  orch__mcp_reply_free(&r);
  return c;
}

/* ---- tests -------------------------------------------------------------------------------- */

START_TEST(test_classify) {
  char sid[65];
  init_session("2025-11-25", &scope_all, "cred", sid);
  static const struct {
    const char *body;
    int status, code; /* code 0: a result; -1: 202, no body */
  } cases[] = {
      {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":", 400, ORCH_RPC_PARSE_ERROR},
      {"", 400, ORCH_RPC_PARSE_ERROR},
      {"{\"jsonrpc\":\"2.0\",\"id\":1,\"id\":2,\"method\":\"ping\"}", 400, ORCH_RPC_PARSE_ERROR},
      {"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", 400, ORCH_RPC_INVALID_REQUEST},
      {"[]", 400, ORCH_RPC_INVALID_REQUEST},
      {"42", 400, ORCH_RPC_INVALID_REQUEST},
      {"{\"jsonrpc\":\"2.1\",\"id\":1,\"method\":\"ping\"}", 400, ORCH_RPC_INVALID_REQUEST},
      {"{\"jsonrpc\":2,\"id\":1,\"method\":\"ping\"}", 400, ORCH_RPC_INVALID_REQUEST},
      {"{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}", 400, ORCH_RPC_INVALID_REQUEST},
      {"{\"jsonrpc\":\"2.0\",\"id\":true,\"method\":\"ping\"}", 400, ORCH_RPC_INVALID_REQUEST},
      {"{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"ping\"}", 400, ORCH_RPC_INVALID_REQUEST},
      {"{\"jsonrpc\":\"2.0\",\"id\":2.5,\"method\":\"ping\"}", 400, ORCH_RPC_INVALID_REQUEST},
      {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":[]}", 400, ORCH_RPC_INVALID_REQUEST},
      {"{\"jsonrpc\":\"2.0\",\"id\":1}", 400, ORCH_RPC_INVALID_REQUEST},
      {"{\"jsonrpc\":\"2.0\"}", 400, ORCH_RPC_INVALID_REQUEST},
      {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", 200, 0},
      {"{\"jsonrpc\":\"2.0\",\"id\":\"s\",\"method\":\"ping\",\"params\":{}}", 200, 0},
      {"{\"jsonrpc\":\"2.0\",\"id\":-7,\"method\":\"tools/list\"}", 200, 0},
      {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":[]}", 200,
       ORCH_RPC_INVALID_PARAMS},
      {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"resources/list\"}", 200,
       ORCH_RPC_METHOD_NOT_FOUND},
      {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\"}", 200, ORCH_RPC_METHOD_NOT_FOUND},
      {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\"}", 200, ORCH_RPC_INVALID_PARAMS},
      {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":3}}", 200,
       ORCH_RPC_INVALID_PARAMS},
      {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"x\"}}", 200,
       ORCH_RPC_INVALID_PARAMS},
      {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
       "\"list_files\",\"arguments\":\"{}\"}}",
       200, ORCH_RPC_INVALID_PARAMS},
      {"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", 202, -1},
      {"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":9}}",
       202, -1},
      {"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\"}", 202, -1},
      {"{\"jsonrpc\":\"2.0\",\"method\":\"whatever\",\"params\":[1]}", 202, -1},
      {"{\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{}}", 202, -1},
      {"{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"error\":{\"code\":1,\"message\":\"m\"}}", 202, -1},
  };
  for (size_t i = 0; i < SBX_ARRAY_SIZE(cases); i++) {
    struct orch_mcp_reply r;
    post(sid, NULL, &scope_all, "cred", 1, &r, "%s", cases[i].body);
    ck_assert_msg(r.status == cases[i].status, "%s: status %d", cases[i].body, r.status);
    if (cases[i].code == -1) {
      ck_assert_ptr_null(r.body);
    } else {
      json_t *j = body_of(&r);
      int code = (int)json_integer_value(json_object_get(json_object_get(j, "error"), "code"));
      ck_assert_msg(code == cases[i].code, "%s: code %d", cases[i].body, code);
      ck_assert(cases[i].code != 0 || json_object_get(j, "result") != NULL);
      json_decref(j);
    }
    ck_assert_ptr_null(r.call);
    orch__mcp_reply_free(&r);
  }
}
END_TEST

START_TEST(test_versions) {
  static const struct {
    const char *asked, *got;
  } cases[] = {{"2025-11-25", "2025-11-25"},
               {"2025-06-18", "2025-06-18"},
               {"2025-03-26", "2025-11-25"},
               {"2099-12-31", "2025-11-25"},
               {"", "2025-11-25"}};
  for (size_t i = 0; i < SBX_ARRAY_SIZE(cases); i++) {
    struct orch_mcp_reply r;
    post(NULL, NULL, &scope_all, "cred", 1, &r,
         "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
         "\"%s\"}}",
         cases[i].asked);
    json_t *j = body_of(&r);
    json_t *res = json_object_get(j, "result");
    ck_assert_str_eq(json_string_value(json_object_get(res, "protocolVersion")), cases[i].got);
    ck_assert(json_is_false(json_object_get(
        json_object_get(json_object_get(res, "capabilities"), "tools"), "listChanged")));
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(res, "serverInfo"), "name")),
                     "cerea-sandbox");
    json_decref(j);
    orch__mcp_reply_free(&r);
  }
  /* A later request names a version: one we speak, or 400. */
  char sid[65];
  init_session("2025-06-18", &scope_all, "cred", sid);
  const char *ping = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}";
  static const struct {
    const char *v;
    int status;
  } hdr[] = {{NULL, 200},         {"2025-06-18", 200}, {"2025-11-25", 200},
             {"2025-03-26", 400}, {"junk", 400},       {"", 400}};
  for (size_t i = 0; i < SBX_ARRAY_SIZE(hdr); i++) {
    struct orch_mcp_reply r;
    post(sid, hdr[i].v, &scope_all, "cred", 1, &r, "%s", ping);
    ck_assert_int_eq(r.status, hdr[i].status);
    if (r.status == 400)
      ck_assert_int_eq(error_code(&r), ORCH_RPC_INVALID_REQUEST);
    orch__mcp_reply_free(&r);
  }
  /* initialize without a version string: invalid params */
  struct orch_mcp_reply r;
  post(NULL, NULL, &scope_all, "cred", 1, &r,
       "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":7}"
       "}");
  ck_assert_int_eq(error_code(&r), ORCH_RPC_INVALID_PARAMS);
  ck_assert_str_eq(r.session_id, "");
  orch__mcp_reply_free(&r);
  ck_assert_uint_eq(orch__mcp_sessions(m), SBX_ARRAY_SIZE(cases) + 1);
}
END_TEST

static uint64_t fake_now;
static uint64_t fake_mono(void *ud) {
  (void)ud;
  return fake_now;
}

START_TEST(test_sessions) {
  sbx_clock_set_fake(fake_mono, NULL, NULL);
  fake_now = 1000;
  char a[65], b[65];
  init_session("2025-11-25", &scope_all, "cred-a", a);
  init_session("2025-11-25", &scope_all, "cred-b", b);
  ck_assert_str_ne(a, b);
  const char *ping = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}";
  struct orch_mcp_reply r;
  post(NULL, NULL, &scope_all, "cred-a", 1, &r, "%s", ping);
  ck_assert_int_eq(r.status, 400); /* no session id */
  orch__mcp_reply_free(&r);
  post(b, NULL, &scope_all, "cred-a", 1, &r, "%s", ping);
  ck_assert_int_eq(r.status, 404); /* another credential's session */
  ck_assert_int_eq(error_code(&r), ORCH_RPC_NO_SESSION);
  orch__mcp_reply_free(&r);
  post("short", NULL, &scope_all, "cred-a", 1, &r, "%s", ping);
  ck_assert_int_eq(r.status, 404);
  orch__mcp_reply_free(&r);
  ck_assert_int_eq(orch__mcp_end_session(m, b, "cred-a"), 404);
  ck_assert_int_eq(orch__mcp_end_session(m, NULL, "cred-b"), 400);
  ck_assert_int_eq(orch__mcp_end_session(m, b, "cred-b"), 200);
  ck_assert_int_eq(orch__mcp_end_session(m, b, "cred-b"), 404);
  /* Idle past the limit: ended (a is used just before, so only b's neighbour goes). */
  char c[65];
  init_session("2025-11-25", &scope_all, "cred-c", c);
  fake_now += ORCH_MCP_SESSION_IDLE_MS - 10;
  post(a, NULL, &scope_all, "cred-a", 1, &r, "%s", ping);
  ck_assert_int_eq(r.status, 200);
  orch__mcp_reply_free(&r);
  fake_now += 20;
  post(c, NULL, &scope_all, "cred-c", 1, &r, "%s", ping);
  ck_assert_int_eq(r.status, 404);
  orch__mcp_reply_free(&r);
  post(a, NULL, &scope_all, "cred-a", 1, &r, "%s", ping);
  ck_assert_int_eq(r.status, 200);
  orch__mcp_reply_free(&r);
  ck_assert_uint_eq(orch__mcp_sessions(m), 1);
}
END_TEST

START_TEST(test_session_cap) {
  char first[65], sid[65];
  init_session("2025-11-25", &scope_all, "cred", first);
  /* A call in flight keeps the first session past the cap; the least recently used idle one
   * makes room instead. */
  pending_call(first, 5, "wait");
  char second[65];
  init_session("2025-11-25", &scope_all, "cred", second);
  for (int i = 2; i < ORCH_MCP_SESSIONS_MAX; i++)
    init_session("2025-11-25", &scope_all, "cred", sid);
  ck_assert_uint_eq(orch__mcp_sessions(m), ORCH_MCP_SESSIONS_MAX);
  init_session("2025-11-25", &scope_all, "cred", sid);
  ck_assert_uint_eq(orch__mcp_sessions(m), ORCH_MCP_SESSIONS_MAX);
  ck_assert_int_eq(orch__mcp_end_session(m, second, "cred"), 404); /* it made room */
  ck_assert_int_eq(fake.n_abandoned, 0);
  fake_finish(0, "done");
  ck_assert_int_eq(rec.ended, 1);
}
END_TEST

/* A ping of session sid as cred: its HTTP status. */
static int ping_status(const char *sid, const struct orch_tool_scope *scope, const char *cred) {
  struct orch_mcp_reply r;
  post(sid, NULL, scope, cred, 1, &r, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}");
  int status = r.status;
  orch__mcp_reply_free(&r);
  return status;
}

START_TEST(test_session_cap_per_credential) {
  /* One chat key floods initialize: it ends its own sessions only; the API key's and another
   * chat key's stay. */
  struct orch_tool_scope other = scope_chat;
  other.chat_id[0] = 'f';
  char api[65], mine[65], first_flood[65], sid[65];
  init_session("2025-11-25", &scope_all, "api", api);
  init_session("2025-11-25", &other, "chat-other", mine);
  init_session("2025-11-25", &scope_chat, "chat-flood", first_flood);
  for (int i = 0; i < 4200; i++)
    init_session("2025-11-25", &scope_chat, "chat-flood", sid);
  ck_assert_uint_eq(orch__mcp_sessions(m), 2 + ORCH_MCP_CHAT_KEY_SESSIONS);
  ck_assert_int_eq(ping_status(api, &scope_all, "api"), 200);
  ck_assert_int_eq(ping_status(mine, &other, "chat-other"), 200);
  ck_assert_int_eq(ping_status(first_flood, &scope_chat, "chat-flood"), 404); /* its own went */
  ck_assert_int_eq(ping_status(sid, &scope_chat, "chat-flood"), 200);
  /* Every session of a chat key busy: the next initialize is refused (503), nothing else ends. */
  struct orch_mcp_reply r;
  for (int i = 0; i < ORCH_MCP_CHAT_KEY_SESSIONS; i++) {
    init_session("2025-11-25", &other, "chat-busy", sid);
    post(sid, NULL, &other, "chat-busy", 1, &r,
         "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
         "\"run_python\",\"arguments\":{\"code\":\"wait\"}}}");
    ck_assert_ptr_nonnull(r.call);
    orch__mcp_call_attach(r.call, &rec_sink, NULL);
    orch__mcp_reply_free(&r);
  }
  post(NULL, NULL, &other, "chat-busy", 1, &r,
       "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
       "\"2025-11-25\"}}");
  ck_assert_int_eq(r.status, 503);
  ck_assert_int_eq(error_code(&r), ORCH_RPC_BUSY);
  orch__mcp_reply_free(&r);
  ck_assert_int_eq(fake.n_abandoned, 0);
  ck_assert_int_eq(ping_status(mine, &other, "chat-other"), 200);
  ck_assert_int_eq(ping_status(api, &scope_all, "api"), 200);
}
END_TEST

START_TEST(test_session_cap_chat_keys_total) {
  /* Many chat keys fill the chat keys' total: a newcomer's session ends one of a key holding the
   * most, never the API key's. */
  char api[65], sid[65], cred[32];
  init_session("2025-11-25", &scope_all, "api", api);
  int keys = ORCH_MCP_SESSIONS_MAX / ORCH_MCP_CHAT_KEY_SESSIONS;
  for (int k = 0; k < keys; k++) {
    snprintf(cred, sizeof(cred), "chat-%d", k);
    for (int i = 0; i < ORCH_MCP_CHAT_KEY_SESSIONS; i++)
      init_session("2025-11-25", &scope_chat, cred, sid);
  }
  ck_assert_uint_eq(orch__mcp_sessions(m), 1 + ORCH_MCP_SESSIONS_MAX);
  char late[65];
  init_session("2025-11-25", &scope_chat, "chat-late", late);
  ck_assert_uint_eq(orch__mcp_sessions(m), 1 + ORCH_MCP_SESSIONS_MAX);
  ck_assert_int_eq(ping_status(late, &scope_chat, "chat-late"), 200);
  ck_assert_int_eq(ping_status(api, &scope_all, "api"), 200);
}
END_TEST

START_TEST(test_call_pending) {
  char sid[65];
  init_session("2025-11-25", &scope_all, "cred", sid);
  struct orch_mcp_reply r;
  /* At once: list_files. */
  post(sid, NULL, &scope_all, "cred", 1, &r,
       "{\"jsonrpc\":\"2.0\",\"id\":\"L\",\"method\":\"tools/call\",\"params\":{\"name\":"
       "\"list_files\",\"arguments\":{\"chat_id\":\"%s\"}}}",
       CHAT);
  ck_assert_ptr_null(r.call);
  json_t *j = body_of(&r);
  ck_assert_str_eq(json_string_value(json_object_get(j, "id")), "L");
  ck_assert(json_is_false(json_object_get(json_object_get(j, "result"), "isError")));
  json_decref(j);
  orch__mcp_reply_free(&r);
  /* Pending, with progress asked and SSE accepted: a stream. */
  post(sid, NULL, &scope_all, "cred", 1, &r,
       "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":"
       "\"run_python\",\"arguments\":{\"chat_id\":\"%s\",\"code\":\"print(1)\"},\"_meta\":"
       "{\"progressToken\":\"tok\"}}}",
       CHAT);
  ck_assert_ptr_nonnull(r.call);
  ck_assert_ptr_null(r.body);
  ck_assert_int_eq(r.stream, 1);
  orch__mcp_call_attach(r.call, &rec_sink, NULL);
  fake_progress(0, "queued");
  fake_progress(0, "running");
  ck_assert_int_eq(rec.n_sent, 2);
  json_t *n = json_loads(rec.sent[1], 0, NULL);
  ck_assert_str_eq(json_string_value(json_object_get(n, "method")), "notifications/progress");
  json_t *p = json_object_get(n, "params");
  ck_assert_str_eq(json_string_value(json_object_get(p, "progressToken")), "tok");
  ck_assert_int_eq(json_integer_value(json_object_get(p, "progress")), 2);
  ck_assert_str_eq(json_string_value(json_object_get(
                       json_object_get(json_object_get(p, "_meta"), "cerea-sandbox/run"), "state")),
                   "running");
  json_decref(n);
  /* Live output: the chunk in _meta (stream, offset, text) and as the message. */
  struct orch_tool_progress out = {.kind = ORCH_TOOL_PROGRESS_OUTPUT,
                                   .run_id = "r1",
                                   .state = "running",
                                   .attempt = 1,
                                   .message = "[stderr] caf\xc3\xa9\n",
                                   .stream = "stderr",
                                   .offset = 12,
                                   .text = "caf\xc3\xa9\nmore",
                                   .text_len = 6};
  fake.ops[0]->progress(fake.ud[0], &out);
  ck_assert_int_eq(rec.n_sent, 3);
  n = json_loads(rec.sent[2], 0, NULL);
  p = json_object_get(n, "params");
  json_t *meta = json_object_get(json_object_get(p, "_meta"), "cerea-sandbox/run");
  ck_assert_int_eq(json_integer_value(json_object_get(p, "progress")), 3);
  ck_assert_str_eq(json_string_value(json_object_get(p, "message")), "[stderr] caf\xc3\xa9\n");
  ck_assert_str_eq(json_string_value(json_object_get(meta, "stream")), "stderr");
  ck_assert_int_eq(json_integer_value(json_object_get(meta, "offset")), 12);
  ck_assert_str_eq(json_string_value(json_object_get(meta, "text")), "caf\xc3\xa9\n");
  ck_assert_str_eq(json_string_value(json_object_get(meta, "state")), "running");
  json_decref(n);
  fake_finish(0, "42");
  ck_assert_int_eq(rec.ended, 1);
  j = json_loads(rec.last, 0, NULL);
  ck_assert_int_eq(json_integer_value(json_object_get(j, "id")), 7);
  ck_assert_str_eq(
      json_string_value(json_object_get(
          json_array_get(json_object_get(json_object_get(j, "result"), "content"), 0), "text")),
      "42");
  json_decref(j);
  orch__mcp_reply_free(&r);
  /* No progress token (or SSE not accepted): a JSON answer, progress dropped. */
  post(sid, NULL, &scope_all, "cred", 0, &r,
       "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/call\",\"params\":{\"name\":"
       "\"run_python\",\"arguments\":{\"chat_id\":\"%s\",\"code\":\"x\"},\"_meta\":"
       "{\"progressToken\":3}}}",
       CHAT);
  ck_assert_int_eq(r.stream, 0);
  orch__mcp_call_attach(r.call, &rec_sink, NULL);
  orch__mcp_reply_free(&r);
  post(sid, NULL, &scope_all, "cred", 1, &r,
       "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":{\"name\":"
       "\"run_python\",\"arguments\":{\"chat_id\":\"%s\",\"code\":\"x\"},\"_meta\":"
       "{\"progressToken\":null}}}",
       CHAT);
  ck_assert_int_eq(r.stream, 0);
  orch__mcp_call_attach(r.call, &rec_sink, NULL);
  ck_assert_ptr_null(fake.ops[2]->progress); /* no token: the tool is not asked for progress */
  ck_assert_int_eq(rec.n_sent, 3);           /* nothing more was sent */
  struct orch_mcp_call *third = r.call;
  orch__mcp_reply_free(&r);
  fake_finish(1, "one");
  ck_assert_int_eq(rec.ended, 2);
  /* The HTTP side goes away: abandoned, no sink callback. */
  orch__mcp_call_gone(third);
  ck_assert_int_eq(fake.n_abandoned, 1);
  ck_assert_int_eq(rec.ended, 2);
}
END_TEST

START_TEST(test_cancel) {
  char sid[65];
  init_session("2025-11-25", &scope_all, "cred", sid);
  struct orch_mcp_reply c;
  pending_call(sid, 10, "c0");
  pending_call(sid, 11, "c1");
  /* The id as a string does not name the integer id 11; an unknown id changes nothing. */
  post(sid, NULL, &scope_all, "cred", 1, &c,
       "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":"
       "\"11\"}}");
  ck_assert_int_eq(c.status, 202);
  ck_assert_int_eq(fake.n_abandoned, 0);
  post(sid, NULL, &scope_all, "cred", 1, &c,
       "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":11,"
       "\"reason\":\"stop\"}}");
  ck_assert_int_eq(c.status, 202);
  ck_assert_int_eq(fake.n_abandoned, 1);
  ck_assert(fake.live[0] && !fake.live[1]);
  ck_assert_int_eq(rec.ended, 1);
  ck_assert(rec.last_null); /* no response for a cancelled request */
  /* Another credential's session cannot cancel it (404), and a cancel twice is a no-op. */
  post(
      sid, NULL, &scope_all, "other", 1, &c,
      "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":10}}");
  ck_assert_int_eq(c.status, 404);
  orch__mcp_reply_free(&c);
  /* The session ends with the first call in flight: abandoned, its sink ended. */
  ck_assert_int_eq(orch__mcp_end_session(m, sid, "cred"), 200);
  ck_assert_int_eq(fake.n_abandoned, 2);
  ck_assert_int_eq(rec.ended, 2);
  ck_assert(rec.last_null);
}
END_TEST

START_TEST(test_gone_and_free) {
  char sid[65];
  init_session("2025-11-25", &scope_all, "cred", sid);
  orch__mcp_call_gone(pending_call(sid, 1, "x"));
  ck_assert_int_eq(fake.n_abandoned, 1);
  ck_assert_int_eq(rec.ended, 0);
  /* Calls in flight at free: abandoned, sinks told nothing (teardown frees m). */
  pending_call(sid, 2, "y");
  orch__mcp_free(m);
  m = NULL;
  ck_assert_int_eq(fake.n_abandoned, 2);
  ck_assert_int_eq(rec.ended, 0);
  struct orch_mcp_tools t = {.env = fake_env, .start = fake_start, .abandon = fake_abandon};
  m = orch__mcp_new(&t);
}
END_TEST

START_TEST(test_calls_cap) {
  char sid[65];
  init_session("2025-11-25", &scope_all, "cred", sid);
  for (int i = 0; i < ORCH_MCP_CALLS_MAX; i++)
    pending_call(sid, i, "x");
  struct orch_mcp_reply r;
  post(sid, NULL, &scope_all, "cred", 1, &r,
       "{\"jsonrpc\":\"2.0\",\"id\":99,\"method\":\"tools/call\",\"params\":{\"name\":"
       "\"run_python\",\"arguments\":{\"chat_id\":\"%s\",\"code\":\"x\"}}}",
       CHAT);
  ck_assert_ptr_null(r.call);
  ck_assert_int_eq(error_code(&r), ORCH_RPC_BUSY);
  orch__mcp_reply_free(&r);
}
END_TEST

START_TEST(test_progress_token_bound) {
  /* A progressToken is copied into every notification: past ORCH_MCP_PROGRESS_TOKEN_MAX bytes
   * the call is refused (-32602) and nothing starts; at the bound it is taken. */
  char sid[65], tok[ORCH_MCP_PROGRESS_TOKEN_MAX + 2];
  init_session("2025-11-25", &scope_all, "cred", sid);
  for (int len = ORCH_MCP_PROGRESS_TOKEN_MAX + 1; len >= ORCH_MCP_PROGRESS_TOKEN_MAX; len--) {
    memset(tok, 'a', (size_t)len);
    tok[len] = '\0';
    struct orch_mcp_reply r;
    post(sid, NULL, &scope_all, "cred", 1, &r,
         "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":"
         "\"run_python\",\"arguments\":{\"chat_id\":\"%s\",\"code\":\"x\"},\"_meta\":"
         "{\"progressToken\":\"%s\"}}}",
         CHAT, tok);
    if (len > ORCH_MCP_PROGRESS_TOKEN_MAX) {
      ck_assert_ptr_null(r.call);
      ck_assert_int_eq(r.status, 200);
      ck_assert_int_eq(error_code(&r), ORCH_RPC_INVALID_PARAMS);
      ck_assert_ptr_nonnull(strstr(r.body, "progressToken is 257 bytes; at most 256"));
      ck_assert_int_eq(fake.n_started, 0);
    } else {
      ck_assert_ptr_nonnull(r.call);
      ck_assert_int_eq(r.stream, 1);
      orch__mcp_call_attach(r.call, &rec_sink, NULL);
      fake_progress(0, "running");
      ck_assert_int_eq(rec.n_sent, 1);
      ck_assert_ptr_nonnull(strstr(rec.sent[0], tok));
      fake_finish(0, "done");
    }
    orch__mcp_reply_free(&r);
  }
}
END_TEST

START_TEST(test_keepalive) {
  /* A call that streams asks the tool for keepalives; a keepalive says so in _meta, with the
   * time so far.  A call with no stream asks for none, but for the hand-off. */
  char sid[65];
  init_session("2025-11-25", &scope_all, "cred", sid);
  struct orch_mcp_reply r;
  post(sid, NULL, &scope_all, "cred", 1, &r,
       "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":"
       "\"run_python\",\"arguments\":{\"chat_id\":\"%s\",\"code\":\"x\"},\"_meta\":"
       "{\"progressToken\":\"k\"}}}",
       CHAT);
  ck_assert_int_eq(r.stream, 1);
  ck_assert_uint_eq(fake.keepalive_ms[0], ORCH_MCP_KEEPALIVE_MS);
  ck_assert_uint_eq(fake.handoff_ms[0], 0); /* progress resets the client's timeout */
  orch__mcp_call_attach(r.call, &rec_sink, NULL);
  orch__mcp_reply_free(&r);
  struct orch_tool_progress p = {.run_id = "r1",
                                 .state = "running",
                                 .attempt = 1,
                                 .message = "Running. 20 s since the call began.",
                                 .keepalive = 1,
                                 .elapsed_ms = 20400};
  fake.ops[0]->progress(fake.ud[0], &p);
  ck_assert_int_eq(rec.n_sent, 1);
  json_t *n = json_loads(rec.sent[0], 0, NULL);
  json_t *meta =
      json_object_get(json_object_get(json_object_get(n, "params"), "_meta"), "cerea-sandbox/run");
  ck_assert(json_is_true(json_object_get(meta, "keepalive")));
  ck_assert_int_eq(json_integer_value(json_object_get(meta, "elapsed_s")), 20);
  ck_assert_str_eq(json_string_value(json_object_get(meta, "state")), "running");
  json_decref(n);
  fake_finish(0, "done");
  post(sid, NULL, &scope_all, "cred", 0, &r,
       "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":"
       "\"run_python\",\"arguments\":{\"chat_id\":\"%s\",\"code\":\"x\"},\"_meta\":"
       "{\"progressToken\":\"k\"}}}",
       CHAT);
  ck_assert_int_eq(r.stream, 0);
  ck_assert_uint_eq(fake.keepalive_ms[1], 0);
  ck_assert_uint_eq(fake.handoff_ms[1], 50000); /* nothing does: the run is handed back */
  orch__mcp_call_attach(r.call, &rec_sink, NULL);
  orch__mcp_reply_free(&r);
  fake_finish(1, "done");
}
END_TEST

START_TEST(test_bad_args_by_version) {
  char v1[65], v2[65];
  init_session("2025-06-18", &scope_chat, "k", v1);
  init_session("2025-11-25", &scope_chat, "k", v2);
  static const char *const args[] = {
      "{}",                                                                /* code missing */
      "{\"code\":1}",                                                      /* not a string */
      "{\"code\":\"x\",\"chat_id\":\"fedcba9876543210fedcba9876543210\"}", /* another chat */
      "{\"code\":\"x\",\"timeout_s\":61}",                                 /* over the limit */
      "{\"code\":\"nochat\"}", /* refused by the start */
  };
  for (size_t i = 0; i < SBX_ARRAY_SIZE(args); i++) {
    struct orch_mcp_reply r;
    post(v1, NULL, &scope_chat, "k", 1, &r,
         "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
         "\"run_python\",\"arguments\":%s}}",
         args[i]);
    ck_assert_msg(error_code(&r) == ORCH_RPC_INVALID_PARAMS, "2025-06-18 %s", args[i]);
    orch__mcp_reply_free(&r);
    post(v2, NULL, &scope_chat, "k", 1, &r,
         "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
         "\"run_python\",\"arguments\":%s}}",
         args[i]);
    json_t *j = body_of(&r);
    ck_assert_msg(json_is_true(json_object_get(json_object_get(j, "result"), "isError")),
                  "2025-11-25 %s", args[i]);
    json_decref(j);
    orch__mcp_reply_free(&r);
  }
  /* With a chat key the chat is the key's: no chat_id needed. */
  struct orch_mcp_reply r;
  post(v2, NULL, &scope_chat, "k", 1, &r,
       "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
       "\"run_python\",\"arguments\":{\"code\":\"now\"}}}");
  json_t *j = body_of(&r);
  ck_assert(json_is_false(json_object_get(json_object_get(j, "result"), "isError")));
  json_decref(j);
  orch__mcp_reply_free(&r);
}
END_TEST

START_TEST(test_tools_list) {
  char sid[65];
  init_session("2025-11-25", &scope_chat, "k", sid);
  struct orch_mcp_reply r;
  post(sid, NULL, &scope_chat, "k", 1, &r,
       "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}");
  json_t *j = body_of(&r);
  json_t *tools = json_object_get(json_object_get(j, "result"), "tools");
  ck_assert_uint_eq(json_array_size(tools), ORCH_TOOL__COUNT);
  for (size_t i = 0; i < json_array_size(tools); i++) {
    json_t *t = json_array_get(tools, i);
    ck_assert_str_eq(json_string_value(json_object_get(t, "name")), orch__tool_name(i));
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(t, "inputSchema"), "type")),
                     "object");
    ck_assert_ptr_null(json_object_get(
        json_object_get(json_object_get(t, "inputSchema"), "properties"), "chat_id"));
  }
  json_decref(j);
  orch__mcp_reply_free(&r);
}
END_TEST

/* ---- several nodes ------------------------------------------------------------------------- */

static struct {
  char what[8][200];
  int n;
} told;
static void rec_tell(void *ud, const char *what) {
  (void)ud;
  ck_assert_int_lt(told.n, 8);
  snprintf(told.what[told.n++], sizeof(told.what[0]), "%s", what);
}

static struct orch_mcp *node_new(const unsigned char *secret) {
  struct orch_mcp_tools t = {.env = fake_env,
                             .start = fake_start,
                             .abandon = fake_abandon,
                             .secret = secret,
                             .tell = rec_tell};
  struct orch_mcp *n = orch__mcp_new(&t);
  ck_assert_ptr_nonnull(n);
  return n;
}

/* The status of a ping of session sid with cred on the current m. */
static int ping(const char *sid, const char *cred) {
  struct orch_mcp_reply r;
  post(sid, NULL, &scope_all, cred, 1, &r, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\"}");
  int status = r.status;
  orch__mcp_reply_free(&r);
  return status;
}

START_TEST(test_nodes_sessions) {
  static const unsigned char secret[32] = {1, 2, 3}, other[32] = {9};
  struct orch_mcp *single = m, *a = node_new(secret), *b = node_new(secret), *c = node_new(other);
  memset(&told, 0, sizeof(told));
  char sid[65], old[65];
  m = a;
  init_session("2025-06-18", &scope_all, "cred", sid);
  init_session("2025-11-25", &scope_all, "cred", old);
  /* Node b takes it in (its version, 2025-06-18, from the id: a bad argument is -32602), for
   * the credential that opened it only; not another secret's node, nor one node alone. */
  m = b;
  ck_assert_int_eq(ping(sid, "cred"), 200);
  struct orch_mcp_reply r;
  post(sid, NULL, &scope_all, "cred", 1, &r,
       "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
       "\"run_python\",\"arguments\":{\"chat_id\":\"%s\"}}}",
       CHAT);
  ck_assert_int_eq(error_code(&r), ORCH_RPC_INVALID_PARAMS);
  orch__mcp_reply_free(&r);
  ck_assert_int_eq(ping(old, "cred"), 200);
  ck_assert_int_eq(ping(sid, "other"), 404);
  char forged[65];
  strcpy(forged, sid);
  forged[63] = forged[63] == '0' ? '1' : '0';
  ck_assert_int_eq(ping(forged, "cred"), 404);
  m = c;
  ck_assert_int_eq(ping(sid, "cred"), 404);
  m = single;
  ck_assert_int_eq(ping(sid, "cred"), 404);
  ck_assert_uint_eq(orch__mcp_sessions(b), 2);
  /* A call for another node's chat is handed back for forwarding: no call, nothing started. */
  m = a;
  post(sid, NULL, &scope_all, "cred", 1, &r,
       "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":"
       "\"run_python\",\"arguments\":{\"chat_id\":\"%s\",\"code\":\"elsewhere\"}}}",
       CHAT);
  ck_assert_int_eq(r.status, 200);
  ck_assert_str_eq(r.forward_chat, CHAT);
  ck_assert_ptr_null(r.call);
  ck_assert_ptr_null(r.body);
  orch__mcp_reply_free(&r);
  /* The call runs on b; its cancel reaches a, which has no such call: told to every node, and
   * b, told, cancels it (no response on its sink). */
  m = b;
  pending_call(sid, 3, "x");
  pending_call(sid, 4, "y");
  m = a;
  post(sid, NULL, &scope_all, "cred", 1, &r,
       "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":3}}");
  ck_assert_int_eq(r.status, 202);
  orch__mcp_reply_free(&r);
  ck_assert_int_eq(told.n, 1);
  ck_assert_msg(strncmp(told.what[0], "mcp-cancel ", 11) == 0 && strstr(told.what[0], sid), "%s",
                told.what[0]);
  ck_assert_int_eq(fake.n_abandoned, 0);
  orch__mcp_notified(a, told.what[0]); /* its own notice comes back too: nothing to cancel */
  orch__mcp_notified(b, told.what[0]);
  ck_assert_int_eq(fake.n_abandoned, 1);
  ck_assert(!fake.live[0] && fake.live[1]);
  ck_assert_int_eq(rec.ended, 1);
  ck_assert(rec.last_null);
  /* DELETE on a ends it on b too (its call abandoned, its sink ended) and on every node after. */
  ck_assert_int_eq(orch__mcp_end_session(a, sid, "other"), 404);
  ck_assert_int_eq(orch__mcp_end_session(a, sid, "cred"), 200);
  ck_assert_int_eq(told.n, 2);
  ck_assert_str_eq(told.what[1] + 8, sid);
  orch__mcp_notified(b, told.what[1]);
  orch__mcp_notified(c, told.what[1]);
  ck_assert_int_eq(fake.n_abandoned, 2);
  ck_assert_int_eq(rec.ended, 2);
  ck_assert_int_eq(ping(sid, "cred"), 404);
  m = b;
  ck_assert_int_eq(ping(sid, "cred"), 404);
  ck_assert_int_eq(orch__mcp_end_session(b, sid, "cred"), 404);
  ck_assert_int_eq(ping(old, "cred"), 200); /* the other session goes on */
  orch__mcp_notified(b, "mcp-cancel nonsense");
  orch__mcp_notified(b, "files");
  m = single;
  orch__mcp_free(a);
  orch__mcp_free(b);
  orch__mcp_free(c);
}
END_TEST

int main(void) {
  Suite *s = suite_create("mcp");
  TCase *tc = tcase_create("envelope");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, test_classify);
  tcase_add_test(tc, test_versions);
  tcase_add_test(tc, test_sessions);
  tcase_add_test(tc, test_session_cap);
  tcase_add_test(tc, test_session_cap_per_credential);
  tcase_add_test(tc, test_session_cap_chat_keys_total);
  tcase_add_test(tc, test_call_pending);
  tcase_add_test(tc, test_cancel);
  tcase_add_test(tc, test_gone_and_free);
  tcase_add_test(tc, test_calls_cap);
  tcase_add_test(tc, test_progress_token_bound);
  tcase_add_test(tc, test_keepalive);
  tcase_add_test(tc, test_bad_args_by_version);
  tcase_add_test(tc, test_tools_list);
  tcase_add_test(tc, test_nodes_sessions);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
