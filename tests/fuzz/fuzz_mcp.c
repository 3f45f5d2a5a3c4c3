/* fuzz_mcp.c -- the MCP envelope (mcp.c) and the tools' argument checks and words (tools.c) under
 * libFuzzer: one input is one client's conversation, a line per step.  A line's first byte says
 * what the step is and how it is sent, the rest is the body:
 *
 *   bits 0-1  Mcp-Session-Id: 0 the session the last initialize made, 1 none, 2 a bogus one,
 *             3 the session of the other credential
 *   bits 2-3  MCP-Protocol-Version: 0 none, 1 2025-11-25, 2 2025-06-18, 3 "2024-11-05"
 *   bit  4    the client accepts text/event-stream
 *   bit  5    the credential: 0 the API key's (every chat), 1 a chat key's (one chat)
 *   bits 6-7  0 post the body; 1 the oldest pending call ends with a result (or progress first
 *             when the body's first byte is odd); 2 its HTTP side goes away; 3 DELETE the session
 *
 * The tools' execution is a test double (fake_*): run_python stays pending until a step ends it,
 * list_files and add_file answer at once.  Checked on every step: a reply has a status of the
 * transport's set and a body (JSON-RPC 2.0, an id or null) unless 202 or pending; a sink ends at
 * most once; nothing is called back after the HTTP side went away.  At the end every pending call
 * goes away, the server is freed, and LeakSanitizer checks nothing is left.
 *
 * What it does not do: HTTP (api_mcp.c's part is small and tested over real sockets), running code.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mcp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

#define PENDING_MAX 64

struct pending {
  struct orch_mcp_call *call; /* the MCP side, until it ends or goes */
  const struct orch_tool_ops *ops;
  void *ud;
  int tool_live, ended, gone;
};
static struct pending pend[PENDING_MAX];
static int n_pend;
static char tool_tokens[PENDING_MAX];

static void fake_env(void *ud, struct orch_tool_env *env, json_t **keep) {
  (void)ud;
  *keep = json_pack("{s:s, s:[{s:s, s:s}], s:[{s:s, s:s}]}", "python", "3.14.2", "has", "name",
                    "openpyxl", "version", "3", "lacks", "name", "numpy", "reason", "compiled");
  *env = (struct orch_tool_env){.exec_mode = ORCH_EXEC_BROWSER,
                                .time_limit_s = 60,
                                .paused_wait_ms = 120000,
                                .python = "3.14.2",
                                .packages = *keep};
}

static int fake_start(void *ud, enum orch_tool t, struct orch_tool_args *a, json_t *args_json,
                      const char *base, const struct orch_tool_ops *ops, void *call_ud,
                      struct orch_tool_call **out, json_t **now, char *why, size_t cap) {
  (void)ud, (void)args_json, (void)base, (void)a;
  *out = NULL;
  *now = NULL;
  if (t == ORCH_TOOL_ADD_FILE && a->base64 && strlen(a->base64) % 4 != 0) {
    snprintf(why, cap, "base64: not valid base64");
    return SBX_EINVAL;
  }
  if (t != ORCH_TOOL_RUN_PYTHON || n_pend == PENDING_MAX) {
    json_t *run = json_pack("{s:s, s:s}", "status", "ok", "stdout", a->code ? a->code : "");
    *now = orch__tool_run_result(run, NULL, 0, base);
    json_decref(run);
    return *now ? 0 : SBX_ENOMEM;
  }
  struct pending *p = &pend[n_pend];
  *p = (struct pending){.ops = ops, .ud = call_ud, .tool_live = 1};
  *out = (struct orch_tool_call *)&tool_tokens[n_pend++];
  return 0;
}

static void fake_abandon(void *ud, struct orch_tool_call *tc) {
  (void)ud;
  struct pending *p = &pend[(char *)tc - tool_tokens];
  if (!p->tool_live)
    abort(); /* abandoned twice, or after its result */
  p->tool_live = 0;
}

/* The pending entry whose MCP call is c. */
static struct pending *of_call(const struct orch_mcp_call *c) {
  for (int i = 0; i < n_pend; i++)
    if (pend[i].call == c)
      return &pend[i];
  return NULL;
}

static void check_message(const char *text, size_t len) {
  /* (live output may hold U+0000, which JSON carries as \u0000) */
  json_t *j = json_loadb(text, len, JSON_ALLOW_NUL, NULL);
  const char *v = json_string_value(json_object_get(j, "jsonrpc"));
  if (!json_is_object(j) || v == NULL || strcmp(v, "2.0") != 0)
    abort();
  json_decref(j);
}

static void sink_send(void *ud, const char *text, size_t len) {
  struct pending *p = ud;
  if (p->ended || p->gone)
    abort();
  check_message(text, len);
}

static void sink_end(void *ud, const char *text, size_t len) {
  struct pending *p = ud;
  if (p->ended || p->gone)
    abort();
  p->ended = 1;
  p->call = NULL;
  if (text)
    check_message(text, len);
}

static const struct orch_mcp_sink sink = {sink_send, sink_end};

/* The oldest pending call whose MCP side is still there. */
static struct pending *oldest(void) {
  for (int i = 0; i < n_pend; i++)
    if (pend[i].call && !pend[i].ended && !pend[i].gone)
      return &pend[i];
  return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  static int quiet;
  if (!quiet) {
    sbx_log_set_level(SBX_LOG_ERROR);
    quiet = 1;
  }
  struct orch_mcp_tools tools = {.env = fake_env, .start = fake_start, .abandon = fake_abandon};
  struct orch_mcp *m = orch__mcp_new(&tools);
  if (m == NULL)
    return 0;
  n_pend = 0;
  memset(pend, 0, sizeof(pend));
  struct orch_tool_scope scopes[2] = {{""}, {"0123456789abcdef0123456789abcdef"}};
  static const char *const creds[2] = {"api-key-hash", "chat-key-hash"};
  static const char *const versions[4] = {NULL, "2025-11-25", "2025-06-18", "2024-11-05"};
  char sessions[2][65] = {"", ""};
  size_t i = 0;
  while (i < n) {
    const uint8_t *end = memchr(data + i, '\n', n - i);
    size_t line = end ? (size_t)(end - (data + i)) : n - i;
    if (line == 0) {
      i++;
      continue;
    }
    uint8_t ctl = data[i];
    const char *body = (const char *)data + i + 1;
    size_t blen = line - 1;
    i += line + 1;
    int who = (ctl >> 5) & 1, action = ctl >> 6;
    const char *sid = NULL;
    switch (ctl & 3) {
    case 0:
      sid = sessions[who][0] ? sessions[who] : NULL;
      break;
    case 2:
      sid = "0000000000000000000000000000000000000000000000000000000000000000";
      break;
    case 3:
      sid = sessions[!who][0] ? sessions[!who] : NULL;
      break;
    }
    if (action == 1 || action == 2) {
      struct pending *p = oldest();
      if (p == NULL)
        continue;
      if (action == 2) {
        p->gone = 1;
        struct orch_mcp_call *c = p->call;
        p->call = NULL;
        orch__mcp_call_gone(c);
      } else if (blen > 0 && (body[0] & 1) && p->tool_live && p->ops->progress) {
        /* a state, or a chunk of live output whose text comes from the input (any bytes) */
        struct orch_tool_progress pr = {.kind = (body[0] & 2) ? ORCH_TOOL_PROGRESS_OUTPUT
                                                              : ORCH_TOOL_PROGRESS_STATE,
                                        .run_id = "r1",
                                        .state = "running",
                                        .attempt = 1,
                                        .message = "Running.",
                                        .stream = "stdout",
                                        .text = (const char *)body,
                                        .text_len = blen};
        p->ops->progress(p->ud, &pr);
      } else if (p->tool_live) {
        p->tool_live = 0;
        json_t *run = json_pack("{s:s, s:s}", "status", blen ? "error" : "ok", "stdout", "x");
        p->ops->done(p->ud, orch__tool_run_result(run, NULL, 0, "http://h"));
        json_decref(run);
      }
      continue;
    }
    if (action == 3) {
      int st = orch__mcp_end_session(m, sid, creds[who]);
      if (st != 200 && st != 400 && st != 404)
        abort();
      continue;
    }
    /* method, name: NULL (no Mcp-Method / Mcp-Name headers: the stateless revision refuses it) */
    struct orch_mcp_request rq = {.body = body,
                                  .len = blen,
                                  .session_id = sid,
                                  .version = versions[(ctl >> 2) & 3],
                                  .scope = &scopes[who],
                                  .cred_hash = creds[who],
                                  .sse_ok = (ctl >> 4) & 1,
                                  .base_url = "http://127.0.0.1:8080"};
    struct orch_mcp_reply r;
    if (orch__mcp_handle(m, &rq, &r) != 0)
      continue;
    if (r.status != 200 && r.status != 202 && r.status != 400 && r.status != 404 && r.status != 503)
      abort();
    if (r.session_id[0])
      memcpy(sessions[who], r.session_id, sizeof(sessions[who]));
    if (r.call) {
      if (r.body || r.status != 200)
        abort();
      struct pending *p = NULL;
      for (int k = n_pend - 1; k >= 0 && p == NULL; k--)
        if (pend[k].call == NULL && !pend[k].ended && !pend[k].gone && pend[k].tool_live)
          p = &pend[k];
      if (p == NULL || of_call(r.call))
        abort();
      p->call = r.call;
      orch__mcp_call_attach(r.call, &sink, p);
    } else if ((r.status == 202) != (r.body == NULL)) {
      abort();
    } else if (r.body) {
      check_message(r.body, r.len);
    }
    orch__mcp_reply_free(&r);
  }
  /* Every HTTP side goes away; then the server goes. */
  for (struct pending *p; (p = oldest()) != NULL;) {
    p->gone = 1;
    struct orch_mcp_call *c = p->call;
    p->call = NULL;
    orch__mcp_call_gone(c);
  }
  orch__mcp_free(m);
  for (int k = 0; k < n_pend; k++)
    if (pend[k].tool_live && !pend[k].ended && !pend[k].gone)
      abort(); /* a tool call nobody abandoned nor finished */
  return 0;
}
