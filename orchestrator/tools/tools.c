/* tools.c -- the tools an assistant calls, whoever carries the call (MCP's tools/call, the plain
 * HTTP POST /v1/tools/call, and later the assistant connector): their definitions (the words
 * that teach a model the sandbox's rules, read from the deployment: its time limit, its pause
 * wait, the packages it serves and lacks, PyPI), their arguments, the result text written for a
 * model, and carrying a call out in the domain.
 *
 *   run_python {code, chat_id, timeout_s?}  a `tool` run of the chat, exactly as POST
 *       /v1/chats/{chat}/runs makes one, waited for until it ends (through a pause while the
 *       chat's page is in the background, up to the pause wait); its state reported as it moves.
 *   list_files {chat_id}                    the chat's files: name, size, where code sees it, or
 *       left out and why.
 *   add_file {chat_id, name, text | base64} an attachment of the chat, as an upload makes one
 *       (at most ORCH_TOOL_FILE_MAX bytes; larger files go through POST /v1/chats/{chat}/files).
 * With a chat key (scope.chat_id set) chat_id may be left out and no other chat is reachable.
 *
 * A call's life (run_python and add_file wait for the store or the run; list_files answers at
 * once and has none):
 *
 *   start ──▶ CREATING ──run durable, live──▶ WAITING ──run ended──▶ CLOSING (freed)
 *   start ──▶ STORING  ──file durable─────────────────────────────▶ CLOSING
 *   CREATING/STORING ──abandon──▶ ABANDONED ──the store's callback──▶ CLOSING (a new run cancelled)
 *   WAITING ──abandon (the run cancelled)──▶ CLOSING
 *
 *   from                 to         step
 *   (start)              CREATING   tool_start: run_python, its run's first put queued
 *   (start)              STORING    tool_start: add_file, its write queued
 *   CREATING             WAITING    on_created, the run live
 *   CREATING, STORING    ABANDONED  orch__tool_abandon
 *   any but CLOSING      CLOSING    call_close (a result handed over, or abandoned)
 *
 * A WAITING call with a progress callback watches its run (live.c's run events, what the run
 * stream GET /v1/runs/{run}/events sends): each change of the run's state is reported in words
 * (queued behind n runs, waiting for the page, paused because the page is in the background or
 * silent, starting, running, waiting for input; storing a result's files is still `running`, as
 * the run object says), and each piece of live output (stdout/stderr chunks, display() bundles,
 * input() prompts) as it arrives.  Nothing is polled.
 *
 * What it does not do: JSON-RPC or HTTP (mcp.c, api_mcp.c), or decide anything about runs and
 * files (chat.c, files.c, manifest.c do; a tool run is an ordinary run).
 */
#include "tools.h"
#include "orch_notes.h" /* the sentences a user reads, from worker/notes.js */

#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "fsm.h"

/* ---- the tools: names, words, schemas ------------------------------------------------------ */

static const struct {
  const char *name, *title;
  int read_only, idempotent;
} tools[ORCH_TOOL__COUNT] = {
    [ORCH_TOOL_RUN_PYTHON] = {"run_python", "Run Python", 0, 0},
    [ORCH_TOOL_LIST_FILES] = {"list_files", "List the chat's files", 1, 1},
    [ORCH_TOOL_ADD_FILE] = {"add_file", "Add a file to the chat", 0, 1},
    [ORCH_TOOL_WAIT_FOR_RUN] = {"wait_for_run", "Wait for a run", 1, 1},
    [ORCH_TOOL_CANCEL_RUN] = {"cancel_run", "Cancel a run", 0, 1},
};

int orch__tool_find(const char *name) {
  for (int i = 0; name && i < ORCH_TOOL__COUNT; i++)
    if (strcmp(tools[i].name, name) == 0)
      return i;
  return -1;
}

const char *orch__tool_name(enum orch_tool t) { return tools[t].name; }

/* The names of a package list ([{name, ...}]) joined with ", " ("" when none). */
static void names_of(struct sbx_buf *b, const json_t *list) {
  size_t i, k = 0;
  json_t *v;
  json_array_foreach(list, i, v) {
    const char *name = json_string_value(json_object_get(v, "name"));
    if (name != NULL)
      sbx_buf_appendf(b, "%s%s", k++ ? ", " : "", name);
  }
}

static int offered(const struct orch_tool_env *env, enum orch_tool t) {
  return env->offered == 0 || (env->offered & ORCH_TOOL_BIT(t)) != 0;
}

/* A served package of that name (the deployment's list; none when it does not say). */
static int serves(const struct orch_tool_env *env, const char *name) {
  size_t i;
  json_t *v;
  json_array_foreach(json_object_get(env->packages, "has"), i, v) {
    const char *n = json_string_value(json_object_get(v, "name"));
    if (n && strcmp(n, name) == 0)
      return 1;
  }
  return 0;
}

/* The words are built from what this deployment serves and what the caller is offered: a
 * model is never told of a package it lacks or a tool it cannot call. */
static void run_python_words(struct sbx_buf *b, const struct orch_tool_env *env) {
  int browser = env->exec_mode == ORCH_EXEC_BROWSER;
  sbx_buf_appendf(b,
                  "Runs Python%s%s code in a chat's sandbox (Pyodide: CPython compiled to "
                  "WebAssembly, in a Web Worker %s) and returns what it printed, its error with "
                  "the traceback, and the files it saved.\n",
                  env->python ? " " : "", env->python ? env->python : "",
                  browser ? "in the user's own browser tab" : "on the server's sandboxed hosts");
  if (env->exec_mode == ORCH_EXEC_OFF)
    sbx_buf_appendf(b, "Code execution is turned off on this deployment: every run is refused.\n");
  if (browser)
    sbx_buf_appendf(b,
                    "The chat's page must be open in the user's browser. While it is in the "
                    "background the run waits (up to %llu s) and starts again when the page is "
                    "back; with no page it ends abandoned.\n",
                    (unsigned long long)(env->paused_wait_ms / 1000));
  int list = offered(env, ORCH_TOOL_LIST_FILES), add = offered(env, ORCH_TOOL_ADD_FILE);
  sbx_buf_appendf(b,
                  "- Files: the chat's files are at /mnt/data/<name>%s%s%s%s. To give the user a "
                  "file, save it under /mnt/output/ (for example /mnt/output/report.xlsx); "
                  "files written anywhere else are scratch. Files a run saved are at "
                  "/mnt/data/<name> in later runs.\n",
                  list || add ? " (" : "", list ? "list_files shows them" : "",
                  list && add ? ", " : "",
                  add    ? "add_file adds one)"
                  : list ? ")"
                         : "");
  if (serves(env, "matplotlib"))
    sbx_buf_appendf(b, "- Charts: plt.show() saves each open figure as /mnt/output/figure-<n>.png; "
                       "figures still open at the end are saved too; savefig under /mnt/output "
                       "chooses the name.\n");
  if (offered(env, ORCH_TOOL_WAIT_FOR_RUN) && env->handoff_s > 0)
    sbx_buf_appendf(b,
                    "- Long runs: a call that waits more than %d s without progress "
                    "notifications returns with the run still going and its run_id; wait_for_run "
                    "gets its result%s.\n",
                    env->handoff_s,
                    offered(env, ORCH_TOOL_CANCEL_RUN) ? ", cancel_run stops it" : "");
  sbx_buf_appendf(
      b,
      "- State: variables and imports persist between runs of the same chat until the sandbox "
      "restarts. Runs of one chat go one at a time, in order.\n"
      "- Time limit: %d s per run (timeout_s can lower it). Past it the sandbox restarts: "
      "variables are lost, the chat's files are mounted again. Split long work into steps, or "
      "work on a sample.\n"
      "- Output: stdout and stderr are kept up to %d,%03d characters each: print summaries, not "
      "whole tables.\n"
      "- Network: none (no HTTP, sockets or downloads)%s.\n"
      "- Packages load by themselves on import, no install needed: the standard library",
      env->time_limit_s, ORCH_OUT_CHARS / 1000, ORCH_OUT_CHARS % 1000,
      env->pypi ? ", except installing pure-Python packages from PyPI with micropip" : "");
  const json_t *has = json_object_get(env->packages, "has");
  if (json_array_size(has) > 0) {
    sbx_buf_appendf(b, ", ");
    names_of(b, has);
  }
  sbx_buf_appendf(b, ".");
  const json_t *lacks = json_object_get(env->packages, "lacks");
  if (json_array_size(lacks) > 0) {
    sbx_buf_appendf(b, " Not available here (importing them raises ModuleNotFoundError): ");
    names_of(b, lacks);
    sbx_buf_appendf(b, ".");
  } else {
    sbx_buf_appendf(b, " Other imports raise ModuleNotFoundError.");
  }
  sbx_buf_appendf(b, "\n- Memory: the WebAssembly heap; running out raises MemoryError.");
  if (env->input_wait_s > 0)
    sbx_buf_appendf(b,
                    "\n- input(): asks the person at the chat's page and waits for the answer "
                    "(up to %d s, not counted against the time limit; then it raises EOFError). "
                    "Ask in your reply instead unless the code must wait for them.",
                    env->input_wait_s);
}

static void tool_words(struct sbx_buf *b, enum orch_tool t, const struct orch_tool_env *env) {
  switch (t) {
  case ORCH_TOOL_RUN_PYTHON:
    run_python_words(b, env);
    break;
  case ORCH_TOOL_LIST_FILES:
    sbx_buf_appendf(b,
                    "Lists a chat's files (the latest version of each name): name, size, where "
                    "code sees it (/mnt/data/<name>), or why it is left out (over %llu MB, or "
                    "past %llu MB mounted in all: code cannot open those).",
                    (unsigned long long)(ORCH_MOUNT_FILE_MAX / ORCH_MIB),
                    (unsigned long long)(ORCH_MOUNT_TOTAL_MAX / ORCH_MIB));
    break;
  case ORCH_TOOL_ADD_FILE:
    sbx_buf_appendf(b,
                    "Adds a file to a chat, as an attachment the code then reads at "
                    "/mnt/data/<name> (from the next run on). Give the content as text, or as "
                    "base64 for binary files; at most %u MB. The same content again adds no "
                    "copy; another file under a taken name gets the next free name (\"report "
                    "(2).pdf\"), and the result says which.",
                    ORCH_TOOL_FILE_MAX / ORCH_MIB);
    break;
  case ORCH_TOOL_WAIT_FOR_RUN:
    sbx_buf_appendf(b,
                    "Waits for a run that a run_python call handed back still going (its "
                    "run_id), up to wait_s seconds (at most %d), and returns its result as "
                    "run_python does once it has ended, or says it is still going: then call "
                    "wait_for_run again.",
                    env->handoff_s);
    break;
  case ORCH_TOOL_CANCEL_RUN:
    sbx_buf_appendf(b, "Stops a run that is still going (its run_id, from run_python or "
                       "wait_for_run) and returns its result once it has ended (status cancelled; "
                       "what it printed so far is kept). A run that had already ended is left as "
                       "it was.");
    break;
  default:
    break;
  }
}

static json_t *prop(const char *type, const char *description) {
  return json_pack("{s:s, s:s}", "type", type, "description", description);
}

/* The input schema of tool t (new reference). */
static json_t *tool_schema(enum orch_tool t, const struct orch_tool_env *env,
                           const struct orch_tool_scope *scope) {
  json_t *props = json_object(), *req = json_array();
  if (t == ORCH_TOOL_RUN_PYTHON) {
    json_object_set_new(props, "code",
                        prop("string", "The Python source to run, as one cell: the value of a "
                                       "last expression is shown (its repr, as in a "
                                       "notebook); print anything else you need."));
    json_array_append_new(req, json_string("code"));
  }
  int by_run = t == ORCH_TOOL_WAIT_FOR_RUN || t == ORCH_TOOL_CANCEL_RUN;
  if (by_run) {
    json_object_set_new(props, "run_id",
                        prop("string", "The run's id (run_id in the run_python result)."));
    json_array_append_new(req, json_string("run_id"));
  }
  if (t == ORCH_TOOL_WAIT_FOR_RUN) {
    char d[160];
    snprintf(d, sizeof(d), "Seconds to wait at most, 0 to %d (default %d).", env->handoff_s,
             env->handoff_s);
    json_t *p = prop("integer", d);
    json_object_set_new(p, "minimum", json_integer(0));
    json_object_set_new(p, "maximum", json_integer(env->handoff_s));
    json_object_set_new(props, "wait_s", p);
  }
  if (scope->chat_id[0] == '\0' && !by_run) {
    json_object_set_new(props, "chat_id",
                        prop("string", "The chat whose sandbox and files to use (its id)."));
    json_array_append_new(req, json_string("chat_id"));
  }
  if (t == ORCH_TOOL_RUN_PYTHON) {
    char d[160];
    snprintf(d, sizeof(d),
             "Seconds the run may take, 1 to %d (default %d, the deployment's limit).",
             env->time_limit_s, env->time_limit_s);
    json_t *p = prop("integer", d);
    json_object_set_new(p, "minimum", json_integer(1));
    json_object_set_new(p, "maximum", json_integer(env->time_limit_s));
    json_object_set_new(props, "timeout_s", p);
  }
  if (t == ORCH_TOOL_ADD_FILE) {
    json_object_set_new(props, "name",
                        prop("string", "The file's name, one path segment (report.csv)."));
    json_object_set_new(props, "text", prop("string", "The content as text (UTF-8)."));
    json_object_set_new(props, "base64",
                        prop("string", "The content as base64, for binary files "
                                       "(give text or base64, not both)."));
    json_array_append_new(req, json_string("name"));
  }
  return json_pack("{s:s, s:o, s:o}", "type", "object", "properties", props, "required", req);
}

json_t *orch__tools_json(const struct orch_tool_env *env, const struct orch_tool_scope *scope,
                         enum orch_tool_style style) {
  json_t *list = json_array();
  for (int t = 0; t < ORCH_TOOL__COUNT; t++) {
    if (!offered(env, t))
      continue;
    struct sbx_buf words;
    sbx_buf_init(&words, 64 * 1024);
    tool_words(&words, t, env);
    if (scope->chat_id[0])
      sbx_buf_appendf(&words, "\nThis connection reaches chat %s only: leave chat_id out.",
                      scope->chat_id);
    json_t *desc = json_stringn(words.data ? words.data : "", words.len);
    sbx_buf_free(&words);
    json_t *schema = tool_schema(t, env, scope), *j;
    if (style == ORCH_TOOLS_OPENAI)
      j = json_pack("{s:s, s:{s:s, s:o, s:o}}", "type", "function", "function", "name",
                    tools[t].name, "description", desc, "parameters", schema);
    else
      j = json_pack("{s:s, s:s, s:o, s:o, s:{s:s, s:b, s:b, s:b, s:b}}", "name", tools[t].name,
                    "title", tools[t].title, "description", desc, "inputSchema", schema,
                    "annotations", "title", tools[t].title, "readOnlyHint", tools[t].read_only,
                    "destructiveHint", 0, "idempotentHint", tools[t].idempotent, "openWorldHint",
                    0);
    json_array_append_new(list, j);
  }
  return list;
}

/* ---- arguments ------------------------------------------------------------------------------ */

/* The bytes of s, at most max, that a reason quotes: cut before a character, never inside one
 * (the reason becomes a JSON string, which must stay UTF-8; s is, jansson checked it). */
static int quoted_len(const char *s, int max) {
  int n = (int)strnlen(s, (size_t)max + 1);
  if (n <= max)
    return n;
  for (n = max; n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80; n--)
    ;
  return n;
}

/* The string argument key: 0 (absent: *out NULL, or set), or SBX_EINVAL with why. */
static int arg_str(const json_t *args, const char *key, const char **out, char *why, size_t cap) {
  const json_t *v = json_object_get(args, key);
  *out = NULL;
  if (v == NULL || json_is_null(v))
    return 0;
  if (!json_is_string(v)) {
    snprintf(why, cap, "%s: must be a string", key);
    return SBX_EINVAL;
  }
  *out = json_string_value(v);
  return 0;
}

/* A number argument as a double (a model may write 30 as 30.0); -1 when it is not a number. */
static double arg_number(const json_t *v) {
  return json_is_integer(v) ? (double)json_integer_value(v)
         : json_is_real(v)  ? json_real_value(v)
                            : -1;
}

/* wait_for_run's and cancel_run's arguments: the run (it says its chat), wait_s. */
static int check_run_ref(enum orch_tool t, const json_t *args, const struct orch_tool_scope *scope,
                         struct orch_tool_args *out, char *why, size_t cap) {
  out->chat_id = scope->chat_id[0] ? scope->chat_id : NULL;
  if (arg_str(args, "run_id", &out->run_id, why, cap) != 0)
    return SBX_EINVAL;
  if (out->run_id == NULL) {
    snprintf(why, cap, "run_id: required, the id of the run (run_id in the run_python result)");
    return SBX_EINVAL;
  }
  if (!orch__valid_id(out->run_id)) {
    snprintf(why, cap, "run_id: no run %.*s (a run id is %d hex digits)",
             quoted_len(out->run_id, 80), out->run_id, STORE_ID_LEN);
    return SBX_EINVAL;
  }
  const json_t *v = json_object_get(args, "wait_s");
  if (t == ORCH_TOOL_WAIT_FOR_RUN && v != NULL && !json_is_null(v)) {
    double d = arg_number(v);
    if (!(d >= 0 && d <= 86400 && d == (double)(int)d)) {
      snprintf(why, cap, "wait_s: whole seconds from 0");
      return SBX_EINVAL;
    }
    out->wait_s = (int)d; /* past the most a wait may take: that most (orch__tool_start) */
  }
  return 0;
}

/* The chat the call acts on: the connection's own when it reaches one chat only, else chat_id. */
static int check_chat(const struct orch_tool_scope *scope, struct orch_tool_args *out, char *why,
                      size_t cap) {
  if (scope->chat_id[0] && out->chat_id && strcmp(out->chat_id, scope->chat_id) != 0) {
    snprintf(why, cap, "chat_id: this connection reaches chat %s only; leave chat_id out",
             scope->chat_id);
    return SBX_EINVAL;
  }
  if (scope->chat_id[0])
    out->chat_id = scope->chat_id;
  if (out->chat_id == NULL) {
    snprintf(why, cap, "chat_id: required, the id of the chat to use");
    return SBX_EINVAL;
  }
  if (!orch__valid_id(out->chat_id)) {
    snprintf(why, cap, "chat_id: no chat %.*s (a chat id is %d hex digits)",
             quoted_len(out->chat_id, 80), out->chat_id, STORE_ID_LEN);
    return SBX_EINVAL;
  }
  return 0;
}

/* run_python's: code, timeout_s within the deployment's limit. */
static int check_run_python(const json_t *args, int time_limit_s, struct orch_tool_args *out,
                            char *why, size_t cap) {
  if (arg_str(args, "code", &out->code, why, cap) != 0)
    return SBX_EINVAL;
  if (out->code == NULL) {
    snprintf(why, cap, "code: required, a string of Python source");
    return SBX_EINVAL;
  }
  if (strlen(out->code) > ORCH_TOOL_CODE_MAX) {
    snprintf(why, cap, "code: at most %u MB of source", ORCH_TOOL_CODE_MAX / ORCH_MIB);
    return SBX_EINVAL;
  }
  const json_t *v = json_object_get(args, "timeout_s");
  if (v != NULL && !json_is_null(v)) {
    double d = arg_number(v);
    if (!(d >= 1 && d <= time_limit_s && d == (double)(int)d)) {
      snprintf(why, cap, "timeout_s: whole seconds from 1 to %d (the deployment's limit)",
               time_limit_s);
      return SBX_EINVAL;
    }
    out->timeout_s = (int)d;
  }
  return 0;
}

/* add_file's: a name, the content as text or as base64, within add_file's size. */
static int check_add_file(const json_t *args, struct orch_tool_args *out, char *why, size_t cap) {
  if (arg_str(args, "name", &out->name, why, cap) != 0 ||
      arg_str(args, "text", &out->text, why, cap) != 0 ||
      arg_str(args, "base64", &out->base64, why, cap) != 0)
    return SBX_EINVAL;
  if (out->name == NULL || *out->name == '\0') {
    snprintf(why, cap, "name: required, the file's name");
    return SBX_EINVAL;
  }
  if ((out->text == NULL) == (out->base64 == NULL)) {
    snprintf(why, cap, "give the content as text or as base64 (one of them)");
    return SBX_EINVAL;
  }
  size_t len = out->text ? strlen(out->text) : strlen(out->base64) / 4 * 3;
  if (len > ORCH_TOOL_FILE_MAX) {
    snprintf(why, cap,
             "the content is over %u MB: add_file takes at most that; larger files are "
             "uploaded with POST /v1/chats/{chat}/files (up to 50 MB)",
             ORCH_TOOL_FILE_MAX / ORCH_MIB);
    return SBX_EINVAL;
  }
  return 0;
}

int orch__tool_check(enum orch_tool t, const json_t *args, const struct orch_tool_scope *scope,
                     int time_limit_s, struct orch_tool_args *out, char *why, size_t cap) {
  memset(out, 0, sizeof(*out));
  if (args != NULL && !json_is_object(args)) {
    snprintf(why, cap, "the arguments must be an object");
    return SBX_EINVAL;
  }
  if (arg_str(args, "chat_id", &out->chat_id, why, cap) != 0)
    return SBX_EINVAL;
  out->wait_s = -1;
  if (t == ORCH_TOOL_WAIT_FOR_RUN || t == ORCH_TOOL_CANCEL_RUN)
    return check_run_ref(t, args, scope, out, why, cap);
  if (check_chat(scope, out, why, cap) != 0)
    return SBX_EINVAL;
  if (t == ORCH_TOOL_RUN_PYTHON)
    return check_run_python(args, time_limit_s, out, why, cap);
  if (t == ORCH_TOOL_ADD_FILE)
    return check_add_file(args, out, why, cap);
  return 0;
}

/* ---- results for a model -------------------------------------------------------------------- */

json_t *orch__tool_error_result(const char *text) {
  return json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text", text, "isError", 1);
}

static void human_size(uint64_t n, char *buf, size_t cap) {
  if (n < 10 * 1024)
    snprintf(buf, cap, "%llu bytes", (unsigned long long)n);
  else if (n / 1024.0 < 1023.95) /* (what would print as 1024.0 KB is 1.0 MB) */
    snprintf(buf, cap, "%.1f KB", n / 1024.0);
  else
    snprintf(buf, cap, "%.1f MB", n / (double)ORCH_MIB);
}

static const char *str_of(const json_t *obj, const char *key) {
  return json_string_value(json_object_get(obj, key));
}

/* The first line: what happened to the code, by its status. */
static void status_line(struct sbx_buf *b, const json_t *run) {
  const char *st = str_of(run, "status");
  static const struct {
    const char *status, *words;
  } lines[] = {
      {"ok", "The code ran to the end"},
      {"error", "The code raised an exception (status error)"},
      {"timeout", "The code was stopped by the time limit (status timeout)"},
      {"crashed", "The sandbox crashed while running the code (status crashed)"},
      {"cancelled", "The run was cancelled (status cancelled)"},
      {"abandoned", "The code did not run (status abandoned)"},
      {"rejected", "The code was not run (status rejected)"},
  };
  const char *words = NULL;
  for (size_t i = 0; st && i < SBX_ARRAY_SIZE(lines); i++)
    if (strcmp(st, lines[i].status) == 0)
      words = lines[i].words;
  if (words)
    sbx_buf_appendf(b, "%s", words);
  else
    sbx_buf_appendf(b, "The run ended with status %s", st ? st : "unknown");
  json_t *dur = json_object_get(run, "duration_ms");
  if (json_is_integer(dur) && st && strcmp(st, "ok") == 0)
    sbx_buf_appendf(b, " in %.2f s", json_integer_value(dur) / 1000.0);
  sbx_buf_appendf(b, ".\n");
}

/* "\ntitle:\ntext\n" (text not empty), ending in one line break. */
static void text_block(struct sbx_buf *b, const char *title, const char *text) {
  size_t n = strlen(text);
  sbx_buf_appendf(b, "\n%s:\n%s%s", title, text, text[n - 1] == '\n' ? "" : "\n");
}

static void stream_part(struct sbx_buf *b, const json_t *run, const char *key) {
  const char *s = str_of(run, key);
  if (s != NULL && *s != '\0')
    text_block(b, key, s);
}

/* A MIME bundle's text/plain, or NULL. */
static const char *plain_of(const json_t *bundle) {
  const char *t = str_of(bundle, "text/plain");
  return t && *t ? t : NULL;
}

/* The cell's value (the last expression's repr, as a notebook shows it) and what display()
 * showed, as text; their images follow the text as image items. */
static void value_part(struct sbx_buf *b, const json_t *run) {
  const json_t *displays = json_object_get(run, "displays");
  size_t i;
  json_t *d;
  json_array_foreach(displays, i, d) {
    const char *t = plain_of(d);
    char title[48];
    snprintf(title, sizeof(title), "display() %zu of %zu", i + 1, json_array_size(displays));
    if (t)
      text_block(b, title, t);
  }
  const char *v = plain_of(json_object_get(run, "value"));
  if (v)
    text_block(b, "Value of the last expression", v);
}

static void error_part(struct sbx_buf *b, const json_t *run) {
  const json_t *e = json_object_get(run, "error");
  if (!json_is_object(e))
    return;
  const char *type = str_of(e, "type"), *msg = str_of(e, "message"), *tb = str_of(e, "traceback");
  if (tb && *tb) /* it ends with the exception's own line */
    sbx_buf_appendf(b, "\n%s%s", tb, tb[strlen(tb) - 1] == '\n' ? "" : "\n");
  else
    sbx_buf_appendf(b, "\n%s%s%s\n", type ? type : "Error", msg && *msg ? ": " : "",
                    msg ? msg : "");
  const char *st = str_of(run, "status");
  if (st && strcmp(st, "timeout") == 0)
    sbx_buf_appendf(b, "Split the work into smaller steps, or work on a sample of the data.\n");
}

/* The restart, in the card's words (worker/notes.js NOTE.restarted, through orch_notes.h), so a
 * model and a user read the same sentence about the same run. */
static void restart_part(struct sbx_buf *b, const json_t *run) {
  if (!json_is_true(json_object_get(run, "restarted")))
    return;
  const json_t *rem = json_object_get(run, "remounted");
  if (json_array_size(rem) == 0) {
    sbx_buf_appendf(b, "\n%s\n", ORCH_NOTE_RESTARTED);
    return;
  }
  struct sbx_buf names;
  sbx_buf_init(&names, 1u << 20);
  size_t i;
  json_t *v;
  json_array_foreach(rem, i, v)
      sbx_buf_appendf(&names, "%s%s", i ? ", " : "", json_is_string(v) ? json_string_value(v) : "?");
  sbx_buf_appendf(b, "\n" ORCH_NOTE_RESTARTED_FILES "\n", names.data ? names.data : "");
  sbx_buf_free(&names);
}

static void notes_part(struct sbx_buf *b, const json_t *run) {
  const json_t *notes = json_object_get(run, "notes");
  json_int_t unlisted = json_integer_value(json_object_get(run, "files_unlisted"));
  json_int_t dropped = json_integer_value(json_object_get(run, "figures_dropped"));
  if (json_array_size(notes) == 0 && unlisted <= 0 && dropped <= 0)
    return;
  sbx_buf_appendf(b, "\nNotes:\n");
  size_t i;
  json_t *v;
  json_array_foreach(notes, i, v) {
    if (json_is_string(v))
      sbx_buf_appendf(b, "- %s\n", json_string_value(v));
  }
  if (unlisted > 0)
    sbx_buf_appendf(b,
                    "- %lld more changed files in /mnt/output were not listed (at most %d per "
                    "run).\n",
                    (long long)unlisted, ORCH_FILES_LISTED);
  if (dropped > 0)
    sbx_buf_appendf(b, "- %lld figures were dropped (at most %d per run).\n", (long long)dropped,
                    ORCH_FIGURES);
}

static void files_part(struct sbx_buf *b, const struct orch_tool_file *files, size_t n) {
  if (n == 0)
    return;
  sbx_buf_appendf(b, "\nFiles this run saved in /mnt/output:\n");
  for (size_t i = 0; i < n; i++) {
    const struct orch_tool_file *f = &files[i];
    const char *name = str_of(f->file, "name"), *kind = str_of(f->file, "kind");
    char size[32], where[STORE_NAME_MAX + 200];
    human_size((uint64_t)json_integer_value(json_object_get(f->file, "size")), size, sizeof(size));
    snprintf(where, sizeof(where), "/mnt/data/%s", name ? name : "");
    sbx_buf_appendf(b, "- %s (%s%s): ", name ? name : "?", size,
                    kind && strcmp(kind, "figure") == 0 ? ", a figure" : "");
    if (f->image_type)
      sbx_buf_appendf(b, "shown below as an image. ");
    else if (f->not_shown)
      sbx_buf_appendf(b, "not shown here (%s). ", f->not_shown);
    if (!f->mounted) {
      sbx_buf_appendf(b, "Not mounted for later runs: %s.\n",
                      f->left_out_reason ? f->left_out_reason : "left out");
    } else if (f->named_only) {
      sbx_buf_appendf(b, "A later run gets it at %s when its code names it.\n", where);
    } else {
      char note[STORE_NAME_MAX + 200];
      orch__code_note(where, note, sizeof(note));
      sbx_buf_appendf(b, "%s\n", note);
    }
  }
}

char *orch__tool_run_text(const json_t *run, const struct orch_tool_file *files, size_t n) {
  struct sbx_buf b;
  sbx_buf_init(&b, 1u << 20);
  status_line(&b, run);
  stream_part(&b, run, "stdout");
  stream_part(&b, run, "stderr");
  const char *out = str_of(run, "stdout"), *err = str_of(run, "stderr");
  const char *st = str_of(run, "status");
  if ((!out || !*out) && (!err || !*err) && st && strcmp(st, "ok") == 0)
    sbx_buf_appendf(&b, "It printed nothing.\n");
  value_part(&b, run);
  error_part(&b, run);
  restart_part(&b, run);
  notes_part(&b, run);
  files_part(&b, files, n);
  char *text = sbx_buf_steal(&b, NULL);
  return text ? text : sbx_strdup("");
}

/* Base64 of len bytes (new JSON string). */
static json_t *base64_json(const unsigned char *p, size_t len) {
  size_t cap = 4 * ((len + 2) / 3) + 1;
  unsigned char *out = sbx_malloc(cap);
  if (out == NULL)
    return NULL;
  int n = EVP_EncodeBlock(out, p, (int)len);
  json_t *j = n >= 0 ? json_stringn((const char *)out, (size_t)n) : NULL;
  sbx_free(out);
  return j;
}

/* The PNG images of the run's display() bundles and value, as image items (the bundles hold them
 * as base64 already, within the run's budget for shown bytes). */
static void bundle_images(json_t *content, const json_t *run) {
  const json_t *displays = json_object_get(run, "displays");
  size_t n = json_array_size(displays);
  for (size_t i = 0; i <= n; i++) {
    const json_t *b = i < n ? json_array_get(displays, i) : json_object_get(run, "value");
    const json_t *png = json_object_get(b, "image/png");
    if (json_is_string(png) && json_string_length(png) > 0)
      json_array_append_new(content, json_pack("{s:s, s:O, s:s}", "type", "image", "data", png,
                                               "mimeType", "image/png"));
  }
}

json_t *orch__tool_run_result(const json_t *run, const struct orch_tool_file *files, size_t n,
                              const char *base_url) {
  char *text = orch__tool_run_text(run, files, n);
  json_t *content = json_array();
  json_array_append_new(content, json_pack("{s:s, s:s}", "type", "text", "text", text ? text : ""));
  sbx_free(text);
  for (size_t i = 0; i < n; i++) {
    const struct orch_tool_file *f = &files[i];
    if (f->image_type == NULL)
      continue;
    json_t *data = base64_json(f->image, f->image_len);
    if (data)
      json_array_append_new(content, json_pack("{s:s, s:o, s:s}", "type", "image", "data", data,
                                               "mimeType", f->image_type));
  }
  bundle_images(content, run);
  for (size_t i = 0; i < n; i++) {
    const struct orch_tool_file *f = &files[i];
    if (f->image_type != NULL)
      continue;
    const char *name = str_of(f->file, "name"), *id = str_of(f->file, "artifact_id");
    int active;
    char uri[600], desc[STORE_NAME_MAX + 120];
    snprintf(uri, sizeof(uri), "%s/v1/files/%s", base_url, id ? id : "");
    snprintf(desc, sizeof(desc),
             "Saved by the run at /mnt/output/%s; the link downloads it with the credential of "
             "this call.",
             name ? name : "");
    json_array_append_new(content,
                          json_pack("{s:s, s:s, s:s, s:s, s:s, s:O}", "type", "resource_link",
                                    "uri", uri, "name", name ? name : "", "description", desc,
                                    "mimeType", orch__file_type(name ? name : "", &active), "size",
                                    json_object_get(f->file, "size")));
  }
  const char *st = str_of(run, "status");
  return json_pack("{s:o, s:O, s:b}", "content", content, "structuredContent", run, "isError",
                   !(st && strcmp(st, "ok") == 0));
}

static const char *source_words(const struct store_file *f) {
  switch (f->source) {
  case STORE_SRC_KNOWLEDGE:
    return "knowledge-base text";
  case STORE_SRC_TOOL:
    return "saved by a document tool";
  case STORE_SRC_OUTPUT:
    return "saved by a run";
  default:
    return f->text_of[0] ? "extracted text of an attachment" : "attachment";
  }
}

/* list_files' result (new). */
static json_t *files_result(const char *chat_id, const struct store_file *files, size_t n,
                            int exec_on) {
  struct sbx_buf b;
  sbx_buf_init(&b, 1u << 20);
  if (n == 0)
    sbx_buf_appendf(&b,
                    "Chat %s has no files yet. add_file adds one; files a run saves under "
                    "/mnt/output appear here.\n",
                    chat_id);
  else
    sbx_buf_appendf(&b, "Chat %s has %zu file%s (the latest version of each name):\n", chat_id, n,
                    n == 1 ? "" : "s");
  json_t *arr = json_array();
  for (size_t i = 0; i < n; i++) {
    const struct store_file *f = &files[i];
    char size[32];
    human_size(f->size, size, sizeof(size));
    sbx_buf_appendf(&b, "- %s (%s, %s%s): ", f->name, size, source_words(f),
                    f->kind && strcmp(f->kind, "figure") == 0 ? ", a figure" : "");
    if (!f->mounted)
      sbx_buf_appendf(&b, "left out (%s): code cannot open it\n",
                      f->left_out_reason ? f->left_out_reason : "not mounted");
    else if (orch__manifest_named_only(f))
      sbx_buf_appendf(&b, "at /mnt/data/%s when the run's code names it\n", f->name);
    else
      sbx_buf_appendf(&b, "at /mnt/data/%s\n", f->name);
    json_array_append_new(arr, orch__file_json(f, exec_on));
  }
  char *text = sbx_buf_steal(&b, NULL);
  json_t *j = json_pack("{s:[{s:s, s:s}], s:{s:s, s:o}, s:b}", "content", "type", "text", "text",
                        text ? text : "", "structuredContent", "chat_id", chat_id, "files", arr,
                        "isError", 0);
  sbx_free(text);
  return j;
}

/* add_file's result (new). */
static json_t *added_result(const struct store_file_added *res, const char *asked, int exec_on) {
  const struct store_file *f = &res->file;
  struct sbx_buf b;
  sbx_buf_init(&b, 64 * 1024);
  char size[32];
  human_size(f->size, size, sizeof(size));
  if (!res->created)
    sbx_buf_appendf(&b, "The chat already has this content as %s (%s): nothing was added. ",
                    f->name, size);
  else if (strcmp(f->name, asked) != 0)
    sbx_buf_appendf(&b,
                    "Added %s (%s): the chat already had another file named %s, so this one is "
                    "%s. ",
                    f->name, size, asked, f->name);
  else
    sbx_buf_appendf(&b, "Added %s (%s). ", f->name, size);
  if (f->mounted) {
    char path[STORE_NAME_MAX + 32], note[STORE_NAME_MAX + 200];
    snprintf(path, sizeof(path), "/mnt/data/%s", f->name);
    orch__code_note(path, note, sizeof(note));
    sbx_buf_appendf(&b, "%s\n", note);
  } else {
    sbx_buf_appendf(&b, "It is stored but not mounted (%s): code cannot open it.\n",
                    f->left_out_reason ? f->left_out_reason : "left out");
  }
  char *text = sbx_buf_steal(&b, NULL);
  json_t *j =
      json_pack("{s:[{s:s, s:s}], s:o, s:b}", "content", "type", "text", "text", text ? text : "",
                "structuredContent", orch__file_json(f, exec_on), "isError", 0);
  sbx_free(text);
  return j;
}

/* ---- carrying a call out -------------------------------------------------------------------- */

enum call_state {
  CALL_CREATING = 0,
  CALL_STORING,
  CALL_WAITING,
  CALL_ABANDONED,
  CALL_CLOSING,
  CALL__COUNT
};
static const char *const call_state_names[CALL__COUNT] = {"creating", "storing", "waiting",
                                                          "abandoned", "closing"};
static const uint32_t call_from[CALL__COUNT] = {
    [CALL_CREATING] = 0, /* initial states only */
    [CALL_STORING] = 0,
    [CALL_WAITING] = SBX_FSM_BIT(CALL_CREATING),
    [CALL_ABANDONED] = SBX_FSM_BIT(CALL_CREATING) | SBX_FSM_BIT(CALL_STORING),
    [CALL_CLOSING] = SBX_FSM_BIT(CALL_CREATING) | SBX_FSM_BIT(CALL_STORING) |
                     SBX_FSM_BIT(CALL_WAITING) | SBX_FSM_BIT(CALL_ABANDONED),
};

struct orch_tool_call {
  enum call_state state; /* written by set_state only */
  enum orch_tool tool;
  struct orch *o;
  struct orch_tool_ops ops;
  void *ud;
  json_t *args_json; /* what the checked arguments borrow from */
  char base_url[320];
  char run_id[STORE_ID_LEN + 1];
  struct orch_run *run;       /* WAITING: the live run (our registration keeps it in memory) */
  struct orch_settle *settle; /* WAITING: that registration */
  struct orch_watch *watch;   /* WAITING with a progress callback: its run's events, until `end` */
  char last_state[24];        /* the state last reported ("" before the first) */
  int last_attempt;
  uint64_t started_ms, reported_ms;  /* the call's start; its last progress report */
  uint64_t keepalive_ms, handoff_ms; /* from the arguments (0: none) */
  int handoff_on_input;              /* from the arguments */
  int input_asked;                   /* the run asked input(): the timer looks at once */
  uint64_t wait_max_ms;              /* what one wait_for_run waits at most (its words) */
  uv_timer_t timer;                  /* WAITING: the next keepalive or the hand-off */
  int has_timer;                     /* initialized: the call is freed in its close callback */
  unsigned char *content;            /* STORING: add_file's bytes, until the store's callback */
  char *asked_name;
};

/* WAITING: a run and its registration; no content held but while STORING. */
static int call_invariant(const void *obj, unsigned state) {
  const struct orch_tool_call *tc = obj;
  if (state == CALL_WAITING)
    return tc->run != NULL && tc->settle != NULL;
  return tc->settle == NULL && (state == CALL_STORING || state == CALL_ABANDONED ||
                                state == CALL_CLOSING || tc->content == NULL);
}

static const struct sbx_fsm call_fsm =
    SBX_FSM("tools", "tool call", call_state_names, call_from, call_invariant);

#define set_state(tc, to) set_state_((tc), (to), __FILE__, __LINE__)

/* The one writer of tc->state. */
static void set_state_(struct orch_tool_call *tc, enum call_state to, const char *file, int line) {
  if (sbx_fsm_step(&call_fsm, tc->state, to, tools[tc->tool].name, file, line) == 0) {
    tc->state = to;
    SBX_FSM_CHECK(&call_fsm, tc, to, tools[tc->tool].name);
  }
}

static void on_timer_closed(uv_handle_t *h) { sbx_free(h->data); }

/* The call is over: its registration, watch and timer go, then the call itself (in the timer's
 * close callback when it has one). */
static void call_close(struct orch_tool_call *tc) {
  if (tc->settle)
    orch__settle_cancel(tc->settle);
  orch__run_unwatch(tc->watch);
  tc->settle = NULL;
  tc->watch = NULL;
  tc->run = NULL;
  set_state(tc, CALL_CLOSING);
  json_decref(tc->args_json);
  sbx_free(tc->content);
  sbx_free(tc->asked_name);
  tc->args_json = NULL;
  tc->content = NULL;
  tc->asked_name = NULL;
  if (tc->has_timer) {
    uv_timer_stop(&tc->timer);
    uv_close((uv_handle_t *)&tc->timer, on_timer_closed);
  } else {
    sbx_free(tc);
  }
}

static void deliver(struct orch_tool_call *tc, json_t *result) {
  if (result == NULL)
    result = orch__tool_error_result("The tool could not build its result (out of memory).");
  tc->ops.done(tc->ud, result);
  call_close(tc);
}

/* The run's result: its object with its files, the figures and images it saved read back to be
 * shown (within ORCH_TOOL_IMAGE_MAX each and ORCH_TOOL_IMAGES_MAX in all), the rest as links.
 * The run's files are read from the store once: the run object lists them, and its files[i] is
 * sf[i]. */
static json_t *run_result(struct orch *o, const struct store_run *rec, int has_files,
                          const char *base_url) {
  struct store_file *sf = NULL;
  size_t n = 0;
  if (has_files && rec->status != NULL && store_run_files(o->st, rec->id, &sf, &n) != 0)
    n = 0;
  json_t *run = orch__run_json_files(rec, sf, n);
  const json_t *list = json_object_get(run, "files");
  struct orch_tool_file *files = n ? sbx_calloc(n, sizeof(*files)) : NULL;
  char **bytes = n ? sbx_calloc(n, sizeof(*bytes)) : NULL;
  size_t shown = 0;
  for (size_t i = 0; files && bytes && i < n; i++) {
    struct orch_tool_file *f = &files[i];
    const struct store_file *rf = &sf[i];
    f->file = json_array_get(list, i);
    f->mounted = rf->mounted;
    f->left_out_reason = rf->left_out_reason;
    f->named_only = orch__manifest_named_only(rf);
    int active;
    const char *type = orch__file_type(rf->name, &active);
    int is_figure = rf->kind && strcmp(rf->kind, "figure") == 0;
    if (!is_figure && strncmp(type, "image/", 6) != 0)
      continue;
    if (active) /* SVG: could carry script; a link, served with a sandbox CSP */
      continue;
    if (rf->size > ORCH_TOOL_IMAGE_MAX || shown + rf->size > ORCH_TOOL_IMAGES_MAX) {
      f->not_shown = "too large to show; download it from its link";
      continue;
    }
    size_t len = 0;
    if (store_blob_read(o->st, rf->sha256, &bytes[i], &len) != 0)
      continue;
    /* The bytes say what it is, whatever its name says. */
    const unsigned char *p = (const unsigned char *)bytes[i];
    f->image_type = len >= 8 && memcmp(p, "\x89PNG\r\n\x1a\n", 8) == 0 ? "image/png"
                    : len >= 3 && memcmp(p, "\xff\xd8\xff", 3) == 0    ? "image/jpeg"
                    : len >= 6 && memcmp(p, "GIF8", 4) == 0            ? "image/gif"
                    : len >= 12 && memcmp(p, "RIFF", 4) == 0 && memcmp(p + 8, "WEBP", 4) == 0
                        ? "image/webp"
                        : NULL;
    if (f->image_type == NULL) {
      f->not_shown = "not an image its name says it is";
      continue;
    }
    f->image = p;
    f->image_len = len;
    shown += len;
  }
  json_t *result = files || n == 0 ? orch__tool_run_result(run, files, n, base_url) : NULL;
  for (size_t i = 0; bytes && i < n; i++)
    sbx_free(bytes[i]);
  sbx_free(bytes);
  sbx_free(files);
  store_file_list_free(sf, n);
  json_decref(run);
  return result;
}

/* What the run is doing, in a word and in words. */
static void describe(struct orch *o, struct orch_run *run, char *state, size_t scap, char *msg,
                     size_t mcap) {
  uint64_t now = sbx_now_mono_ms();
  unsigned long long left =
      run->wait_deadline_ms > now ? (unsigned long long)((run->wait_deadline_ms - now) / 1000) : 0;
  *state = *msg = '\0';
  switch (run->state) {
  case ORCH_RUN_QUEUED: {
    int ahead = 0;
    struct sbx_list *it;
    if (run->chat)
      SBX_LIST_FOREACH(it, &run->chat->runs) {
        if (SBX_CONTAINER_OF(it, struct orch_run, chat_link) == run)
          break;
        ahead++;
      }
    snprintf(state, scap, "queued");
    if (ahead > 0)
      snprintf(msg, mcap, "Queued behind %d earlier run%s of this chat.", ahead,
               ahead == 1 ? "" : "s");
    else
      snprintf(msg, mcap, "Queued.");
    break;
  }
  case ORCH_RUN_PAUSED: {
    int hidden = 0, silent = 0;
    struct sbx_list *it;
    if (run->chat)
      SBX_LIST_FOREACH(it, &run->chat->pages) {
        struct orch_page *p = SBX_CONTAINER_OF(it, struct orch_page, chat_link);
        hidden |= p->state == ORCH_PAGE_HIDDEN;
        silent |= p->state == ORCH_PAGE_SILENT;
      }
    if (hidden) {
      snprintf(state, scap, "paused");
      snprintf(msg, mcap,
               "Paused: the chat's page is in the background. The run starts again when the "
               "page is back in the foreground (waiting up to %llu s more).",
               left);
    } else if (silent) {
      snprintf(state, scap, "paused");
      snprintf(msg, mcap,
               "Paused: the chat's page stopped answering (a phone's browser froze it, or it "
               "lost the network). The run starts again when the page answers (waiting up to "
               "%llu s more).",
               left);
    } else {
      snprintf(state, scap, "waiting_for_page");
      snprintf(msg, mcap,
               o->cfg->exec_mode == ORCH_EXEC_SERVER
                   ? "Waiting for a kernel host to take the chat (up to %llu s more)."
                   : "Waiting for the chat's page to be open in the user's browser (up to %llu s "
                     "more).",
               left);
    }
    break;
  }
  case ORCH_RUN_DISPATCHED:
    snprintf(state, scap, "starting");
    if (run->attempts > 1)
      snprintf(msg, mcap, "Starting again on the chat's page (attempt %d).", run->attempts);
    else
      snprintf(msg, mcap, "Sent to the chat's page; starting.");
    break;
  case ORCH_RUN_RUNNING:
    snprintf(state, scap, "running");
    snprintf(msg, mcap, "Running.");
    break;
  case ORCH_RUN_WAITING_INPUT:
    snprintf(state, scap, "waiting_input");
    snprintf(msg, mcap,
             "Waiting in input() for an answer from the person at the chat's page (up to %d s; "
             "the time limit does not run meanwhile).",
             o->rt.input_wait_s);
    break;
  default:
    break;
  }
}

/* Reports the run's state when it changed since the last report. */
static void report_state(struct orch_tool_call *tc) {
  char state[24], msg[300];
  describe(tc->o, tc->run, state, sizeof(state), msg, sizeof(msg));
  if (*state == '\0' ||
      (strcmp(state, tc->last_state) == 0 && tc->last_attempt == tc->run->attempts))
    return;
  snprintf(tc->last_state, sizeof(tc->last_state), "%s", state);
  tc->last_attempt = tc->run->attempts;
  struct orch_tool_progress p = {
      .run_id = tc->run_id, .state = state, .attempt = tc->run->attempts, .message = msg};
  tc->reported_ms = sbx_now_mono_ms();
  tc->ops.progress(tc->ud, &p);
}

/* Nothing reported for the keepalive interval: the state again, with the time so far, so a
 * client whose timeout progress resets keeps waiting through a quiet run. */
static void report_keepalive(struct orch_tool_call *tc) {
  char state[24], msg[300], words[400];
  describe(tc->o, tc->run, state, sizeof(state), msg, sizeof(msg));
  if (*state == '\0') /* storing its result: still `running`, as the run object says */
    snprintf(state, sizeof(state), "%s", tc->last_state[0] ? tc->last_state : "running");
  uint64_t now = sbx_now_mono_ms(), elapsed = now - tc->started_ms;
  snprintf(words, sizeof(words), "%s%s%llu s since the call began.", msg, *msg ? " " : "",
           (unsigned long long)(elapsed / 1000));
  snprintf(tc->last_state, sizeof(tc->last_state), "%s", state);
  tc->last_attempt = tc->run->attempts;
  struct orch_tool_progress p = {.run_id = tc->run_id,
                                 .state = state,
                                 .attempt = tc->run->attempts,
                                 .message = words,
                                 .keepalive = 1,
                                 .elapsed_ms = elapsed};
  tc->reported_ms = now;
  tc->ops.progress(tc->ud, &p);
}

/* A piece of live output, in words for the progress message. */
static void report_live(struct orch_tool_call *tc, const struct orch_run_event *ev) {
  struct orch_tool_progress p = {.run_id = tc->run_id,
                                 .state = tc->last_state[0] ? tc->last_state : "running",
                                 .attempt = ev->attempt,
                                 .text = ev->text,
                                 .text_len = ev->text_len};
  struct sbx_buf msg;
  sbx_buf_init(&msg, 4 * ORCH_OUT_CHARS + 64);
  if (ev->kind == ORCH_RUN_EV_OUTPUT) {
    p.kind = ORCH_TOOL_PROGRESS_OUTPUT;
    p.stream = ev->stream;
    p.offset = ev->offset;
    if (strcmp(ev->stream, "stderr") == 0)
      sbx_buf_appendf(&msg, "[stderr] ");
    sbx_buf_append(&msg, ev->text, ev->text_len);
  } else if (ev->kind == ORCH_RUN_EV_DISPLAY) {
    p.kind = ORCH_TOOL_PROGRESS_DISPLAY;
    p.index = ev->index;
    const char *plain = json_string_value(json_object_get(ev->bundle, "text/plain"));
    p.text = plain ? plain : "";
    p.text_len = strlen(p.text);
    sbx_buf_appendf(&msg, "display(): ");
    sbx_buf_append(&msg, p.text, p.text_len);
  } else {
    p.kind = ORCH_TOOL_PROGRESS_INPUT;
    sbx_buf_appendf(&msg, "input() asks: ");
    sbx_buf_append(&msg, ev->text, ev->text_len);
  }
  char *text = sbx_buf_steal(&msg, NULL);
  p.message = text ? text : "";
  tc->reported_ms = sbx_now_mono_ms();
  tc->ops.progress(tc->ud, &p);
  sbx_free(text);
}

static void arm_timer(struct orch_tool_call *tc);
static void on_tick(uv_timer_t *t);

/* The run's events (live.c), for progress: its state in words, its live output as it comes. */
static void on_run_event(void *ud, const struct orch_run_event *ev) {
  struct orch_tool_call *tc = ud;
  switch (ev->kind) {
  case ORCH_RUN_EV_STATE:
    report_state(tc);
    break;
  case ORCH_RUN_EV_OUTPUT:
  case ORCH_RUN_EV_DISPLAY:
  case ORCH_RUN_EV_INPUT_REQUEST:
    report_live(tc, ev);
    if (ev->kind == ORCH_RUN_EV_INPUT_REQUEST && tc->handoff_on_input) {
      tc->input_asked = 1; /* answered from the timer, never from inside the run's event */
      arm_timer(tc);
    }
    break;
  case ORCH_RUN_EV_END: /* the watch is over (live.c frees it); the result follows (on_end) */
    tc->watch = NULL;
    break;
  }
}

/* A result that says the run goes on (new): its id, its state, and the tools that wait for it
 * or stop it; the run object as it is now. */
static json_t *still_running_result(struct orch_tool_call *tc) {
  char state[24], msg[300], text[1400];
  describe(tc->o, tc->run, state, sizeof(state), msg, sizeof(msg));
  int64_t since = tc->run->rec.created_at, wall = sbx_now_wall_ms();
  unsigned long long elapsed = since > 0 && wall > since
                                   ? (unsigned long long)(wall - since) / 1000
                                   : (sbx_now_mono_ms() - tc->started_ms) / 1000;
  snprintf(text, sizeof(text),
           "The run %s is still going, %llu s after it was made (state %s%s%s), and it keeps "
           "going: this answer only ends the wait. Call wait_for_run with {\"run_id\": \"%s\"} to "
           "wait for "
           "its result (up to %llu s a call; call it again while it says the run is still "
           "going), or cancel_run with {\"run_id\": \"%s\"} to stop it.",
           tc->run_id, elapsed, *state ? state : "running", *msg ? ": " : "", msg, tc->run_id,
           (unsigned long long)(tc->wait_max_ms / 1000), tc->run_id);
  json_t *run = orch__run_json(tc->o, &tc->run->rec);
  return json_pack("{s:[{s:s, s:s}], s:o, s:b}", "content", "type", "text", "text", text,
                   "structuredContent", run ? run : json_object(), "isError", 0);
}

/* The next keepalive or the hand-off, whichever comes first (nothing when neither is asked);
 * at once when the run asked input() of a call handed off on input. */
static void arm_timer(struct orch_tool_call *tc) {
  if (tc->keepalive_ms == 0 && tc->handoff_ms == 0 && !tc->input_asked)
    return;
  if (!tc->has_timer) {
    uv_timer_init(tc->o->loop, &tc->timer);
    tc->timer.data = tc;
    tc->has_timer = 1;
  }
  uint64_t due = UINT64_MAX, now = sbx_now_mono_ms();
  if (tc->keepalive_ms)
    due = tc->reported_ms + tc->keepalive_ms;
  if (tc->handoff_ms)
    due = SBX_MIN(due, tc->started_ms + tc->handoff_ms);
  if (tc->input_asked)
    due = now;
  uv_timer_start(&tc->timer, on_tick, due > now ? due - now : 0, 0);
}

static void on_tick(uv_timer_t *t) {
  struct orch_tool_call *tc = t->data;
  if (tc->state != CALL_WAITING)
    return;
  if (tc->run->state == ORCH_RUN_DONE)
    return; /* ended, its result being stored: that result comes (on_end), never "still going" */
  uint64_t now = sbx_now_mono_ms();
  int asked = tc->input_asked;
  tc->input_asked = 0;
  if ((asked && tc->run->state == ORCH_RUN_WAITING_INPUT) || /* still waiting: answered since? */
      (tc->handoff_ms && now >= tc->started_ms + tc->handoff_ms)) {
    deliver(tc, still_running_result(tc)); /* the run goes on: only our wait ends */
    return;
  }
  if (tc->keepalive_ms && now + 5 >= tc->reported_ms + tc->keepalive_ms)
    report_keepalive(tc);
  arm_timer(tc);
}

static void on_end(void *ud, struct orch *o, struct orch_run *run, int rc,
                   const struct sbx_error *err) {
  struct orch_tool_call *tc = ud;
  tc->settle = NULL;
  tc->run = NULL;
  if (rc != 0) {
    char msg[700];
    snprintf(msg, sizeof(msg), "The run %s ended, but its end could not be stored: %s", tc->run_id,
             err ? err->msg : sbx_strerror(rc));
    deliver(tc, orch__tool_error_result(msg));
    return;
  }
  deliver(tc, run_result(o, &run->rec, run->files_recorded, tc->base_url));
}

/* CREATING -> WAITING on a live run: its end, its events (with a progress callback; without a
 * watch, for want of memory, the result still comes) and the timer.  SBX_ENOMEM: nothing done. */
static int watch_run(struct orch_tool_call *tc, struct orch_run *run) {
  if ((tc->settle = orch__run_on_end(run, on_end, tc)) == NULL)
    return SBX_ENOMEM;
  tc->run = run;
  set_state(tc, CALL_WAITING);
  if (tc->ops.progress)
    tc->watch = orch__run_watch(run, -1, on_run_event, tc); /* the run as it is now, first */
  arm_timer(tc);
  return 0;
}

static void on_created(void *ud, int rc, const struct sbx_error *err, struct orch_run *run) {
  struct orch_tool_call *tc = ud;
  struct orch *o = tc->o;
  if (tc->state == CALL_ABANDONED) { /* nobody waits: a run that went live is cancelled */
    if (rc == 0 && run != NULL && run->state != ORCH_RUN_DONE && !o->closing)
      orch__run_cancel(o, run, NULL, NULL);
    call_close(tc);
    return;
  }
  if (rc != 0) {
    char msg[700];
    snprintf(msg, sizeof(msg), "The run could not be stored, so it did not run: %s",
             err ? err->msg : sbx_strerror(rc));
    deliver(tc, orch__tool_error_result(msg));
    return;
  }
  if (run == NULL) { /* it ended already and left memory: the store has it */
    struct store_run rec;
    if (store_run_get(o->st, tc->run_id, &rec) != 0) {
      deliver(tc, orch__tool_error_result("The run ended, but it could not be read back."));
      return;
    }
    json_t *result = run_result(o, &rec, 1, tc->base_url);
    store_run_free(&rec);
    deliver(tc, result);
    return;
  }
  if (run->state == ORCH_RUN_DONE) { /* rejected: freed after this callback */
    deliver(tc, run_result(o, &run->rec, 0, tc->base_url));
    return;
  }
  if (watch_run(tc, run) != 0)
    deliver(tc, orch__tool_error_result("The run started, but the server is out of memory to "
                                        "wait for it."));
}

static void on_file_stored(int rc, const struct sbx_error *err, const struct store_file_added *res,
                           void *ud) {
  struct orch_tool_call *tc = ud;
  sbx_free(tc->content);
  tc->content = NULL;
  if (tc->state == CALL_ABANDONED) {
    call_close(tc);
    return;
  }
  if (rc != 0) {
    char msg[700];
    snprintf(msg, sizeof(msg), "The file was not added: %s",
             err && err->msg[0] ? err->msg : sbx_strerror(rc));
    deliver(tc, orch__tool_error_result(msg));
    return;
  }
  deliver(tc, added_result(res, tc->asked_name, tc->o->cfg->exec_mode != ORCH_EXEC_OFF));
}

/* base64 text decoded with OpenSSL (line breaks and padding as in MIME); NULL when it is not. */
static unsigned char *base64_decode(const char *s, size_t *len) {
  size_t n = strlen(s);
  unsigned char *out = sbx_malloc(n / 4 * 3 + 3);
  EVP_ENCODE_CTX *ctx = EVP_ENCODE_CTX_new();
  int a = 0, b = 0, ok = out && ctx;
  if (ok) {
    EVP_DecodeInit(ctx);
    ok = EVP_DecodeUpdate(ctx, out, &a, (const unsigned char *)s, (int)n) >= 0 &&
         EVP_DecodeFinal(ctx, out + a, &b) == 1;
  }
  EVP_ENCODE_CTX_free(ctx);
  if (!ok) {
    sbx_free(out);
    return NULL;
  }
  *len = (size_t)a + (size_t)b;
  return out;
}

static struct orch_tool_call *call_new(struct orch *o, enum orch_tool t,
                                       const struct orch_tool_args *args, json_t *args_json,
                                       const char *base_url, const struct orch_tool_ops *ops,
                                       void *ud) {
  struct orch_tool_call *tc = sbx_calloc(1, sizeof(*tc));
  if (tc == NULL)
    return NULL;
  tc->tool = t;
  tc->o = o;
  tc->ops = *ops;
  tc->ud = ud;
  tc->started_ms = tc->reported_ms = sbx_now_mono_ms();
  tc->keepalive_ms = ops->progress ? args->keepalive_ms : 0;
  tc->handoff_ms = args->handoff_ms;
  tc->handoff_on_input = ops->progress ? args->handoff_on_input : 0;
  tc->wait_max_ms = (uint64_t)o->cfg->mcp_handoff_s * 1000;
  tc->args_json = json_incref(args_json);
  snprintf(tc->base_url, sizeof(tc->base_url), "%s", base_url ? base_url : "");
  return tc;
}

/* A result with a line before its text (new; steals result). */
static json_t *prefixed(json_t *result, const char *line) {
  json_t *item = json_array_get(json_object_get(result, "content"), 0);
  const char *text = json_string_value(json_object_get(item, "text"));
  if (text == NULL)
    return result;
  struct sbx_buf b;
  sbx_buf_init(&b, 2u << 20);
  sbx_buf_appendf(&b, "%s\n\n%s", line, text);
  json_object_set_new(item, "text", json_stringn(b.data ? b.data : "", b.len));
  sbx_buf_free(&b);
  return result;
}

/* wait_for_run and cancel_run: the run by its id, in a chat the caller reaches (args->chat_id:
 * a chat key's; NULL: any).  Ended: its result at once.  Live: waited for (cancel_run cancels it
 * first) up to wait_s or the hand-off, then "still going". */
static int run_tool_start(struct orch *o, enum orch_tool t, struct orch_tool_args *args,
                          json_t *args_json, const char *base_url, const struct orch_tool_ops *ops,
                          void *ud, struct orch_tool_call **out, json_t **now, char *why,
                          size_t cap) {
  struct orch_run *run = orch__map_get(&o->runs, args->run_id);
  struct store_run rec;
  int have_rec = 0, rc = 0;
  if (run != NULL) {
    snprintf(args->run_chat, sizeof(args->run_chat), "%s", run->rec.chat_id);
  } else if ((rc = store_run_get(o->st, args->run_id, &rec)) == 0) {
    have_rec = 1;
    snprintf(args->run_chat, sizeof(args->run_chat), "%s", rec.chat_id);
  } else if (rc != SBX_ENOENT) {
    snprintf(why, cap, "The run %s cannot be read now: %s", args->run_id, sbx_strerror(rc));
    *now = orch__tool_error_result(why);
    return *now ? 0 : SBX_ENOMEM;
  }
  if (rc == SBX_ENOENT || (args->chat_id && strcmp(args->run_chat, args->chat_id) != 0)) {
    if (args->chat_id)
      snprintf(why, cap, "run_id: no run %s in chat %s (this connection reaches that chat only)",
               args->run_id, args->chat_id);
    else
      snprintf(why, cap, "run_id: no run %s", args->run_id);
    if (have_rec)
      store_run_free(&rec);
    return SBX_EINVAL;
  }
  args->chat_id = args->run_chat;
  struct orch_chat *c = NULL;
  if ((rc = orch__chat_get(o, args->run_chat, &c)) != 0) {
    if (have_rec)
      store_run_free(&rec);
    if (rc == SBX_EREMOTE) { /* nodes: the chat's node answers */
      snprintf(why, cap, "the chat is served by another node");
      return rc;
    }
    snprintf(why, cap, "the run's chat cannot be loaded now: %s", sbx_strerror(rc));
    *now = orch__tool_error_result(why);
    return *now ? 0 : SBX_ENOMEM;
  }
  if (run == NULL) /* maybe live now, its chat loaded (a node that took it over) */
    run = orch__map_get(&o->runs, args->run_id);
  if (run == NULL || run->state == ORCH_RUN_DONE) {
    *now = run ? run_result(o, &run->rec, run->files_recorded, base_url)
               : run_result(o, &rec, 1, base_url);
    if (*now && t == ORCH_TOOL_CANCEL_RUN)
      *now = prefixed(*now, "The run had already ended: nothing was cancelled.");
    if (have_rec)
      store_run_free(&rec);
    return *now ? 0 : SBX_ENOMEM;
  }
  if (have_rec)
    store_run_free(&rec);
  struct orch_tool_call *tc = call_new(o, t, args, args_json, base_url, ops, ud);
  if (tc == NULL)
    return SBX_ENOMEM;
  snprintf(tc->run_id, sizeof(tc->run_id), "%s", run->id);
  uint64_t most = (uint64_t)o->cfg->mcp_handoff_s * 1000;
  tc->handoff_ms = args->wait_s < 0 ? most : SBX_MIN(most, (uint64_t)args->wait_s * 1000);
  if (tc->handoff_ms == 0)
    tc->handoff_ms = 1; /* wait_s 0: just look (answered from the timer, never from here) */
  if (watch_run(tc, run) != 0) {
    call_close(tc);
    return SBX_ENOMEM;
  }
  if (t == ORCH_TOOL_CANCEL_RUN && !o->closing)
    orch__run_cancel(o, run, NULL, NULL); /* its end comes to on_end (never from inside) */
  *out = tc;
  return 0;
}

int orch__tool_start(struct orch *o, enum orch_tool t, struct orch_tool_args *args,
                     json_t *args_json, const char *base_url, const struct orch_tool_ops *ops,
                     void *ud, struct orch_tool_call **out, json_t **now, char *why, size_t cap) {
  *out = NULL;
  *now = NULL;
  if (t == ORCH_TOOL_WAIT_FOR_RUN || t == ORCH_TOOL_CANCEL_RUN)
    return run_tool_start(o, t, args, args_json, base_url, ops, ud, out, now, why, cap);
  struct orch_chat *c = NULL;
  int rc = orch__chat_get(o, args->chat_id, &c);
  if (rc == SBX_ENOENT) {
    snprintf(why, cap, "chat_id: no chat %s", args->chat_id);
    return SBX_EINVAL;
  }
  if (rc == SBX_EREMOTE) { /* nodes: another node serves the chat, and carries the call out */
    snprintf(why, cap, "the chat is served by another node");
    return rc;
  }
  if (rc != 0) {
    snprintf(why, cap, "the chat cannot be loaded now: %s", sbx_strerror(rc));
    *now = orch__tool_error_result(why);
    return *now ? 0 : SBX_ENOMEM;
  }
  int exec_on = o->cfg->exec_mode != ORCH_EXEC_OFF;
  if (t == ORCH_TOOL_LIST_FILES) {
    struct store_file *files = NULL;
    size_t n = 0;
    if (store_file_list(o->st, c->id, 0, &files, &n) != 0)
      *now = orch__tool_error_result("The chat's files could not be read now.");
    else
      *now = files_result(c->id, files, n, exec_on);
    store_file_list_free(files, n);
    return *now ? 0 : SBX_ENOMEM;
  }
  struct orch_tool_call *tc = call_new(o, t, args, args_json, base_url, ops, ud);
  if (tc == NULL)
    return SBX_ENOMEM;
  if (t == ORCH_TOOL_ADD_FILE) {
    size_t len = 0;
    char *norm = NULL;
    struct sbx_error err;
    sbx_error_clear(&err);
    if (args->text) {
      len = strlen(args->text);
      tc->content = (unsigned char *)sbx_strndup(args->text, len);
    } else if ((tc->content = base64_decode(args->base64, &len)) == NULL) {
      snprintf(why, cap, "base64: not valid base64");
      rc = SBX_EINVAL;
    }
    if (rc == 0 && len > ORCH_TOOL_FILE_MAX) {
      snprintf(why, cap, "the content is over %u MB: add_file takes at most that",
               ORCH_TOOL_FILE_MAX / ORCH_MIB);
      rc = SBX_EINVAL;
    }
    if (rc == 0 && store_name_normalize(args->name, STORE_SRC_ATTACHMENT, &norm, &err) != 0) {
      snprintf(why, cap, "name: %s", err.msg[0] ? err.msg : "not a valid file name");
      rc = SBX_EINVAL;
    }
    if (rc == 0 && (tc->content == NULL || (tc->asked_name = sbx_strdup(norm)) == NULL))
      rc = SBX_ENOMEM;
    tc->state = CALL_STORING;
    struct store_file_in in = {
        .name = norm, .source = STORE_SRC_ATTACHMENT, .data = tc->content, .size = len};
    if (rc == 0)
      rc = orch__file_add(o, c, &in, NULL, len, on_file_stored, tc);
    sbx_free(norm);
    if (rc != 0) {
      call_close(tc);
      return rc;
    }
    *out = tc;
    return 0;
  }
  struct orch_run *run = orch__run_new(
      o, c, args->code, "tool", args->turn_id,
      args->timeout_s ? args->timeout_s : o->rt.time_limit_s, NULL);
  if (run == NULL) {
    tc->state = CALL_CREATING;
    call_close(tc);
    return SBX_ENOMEM;
  }
  snprintf(tc->run_id, sizeof(tc->run_id), "%s", run->id);
  tc->state = CALL_CREATING;
  if ((rc = orch__run_create(o, c, run, on_created, tc)) != 0) { /* run freed */
    call_close(tc);
    return rc;
  }
  *out = tc;
  return 0;
}

void orch__tool_abandon(struct orch_tool_call *tc) {
  struct orch *o = tc->o;
  if (tc->state == CALL_CREATING || tc->state == CALL_STORING) {
    set_state(tc, CALL_ABANDONED); /* the store's callback closes it */
    return;
  }
  if (tc->state != CALL_WAITING)
    return;
  struct orch_run *run = tc->run;
  orch__settle_cancel(tc->settle);
  orch__run_unwatch(tc->watch); /* the cancel's own events are nobody's now */
  tc->settle = NULL;
  tc->watch = NULL;
  if (!o->closing) /* at shutdown the run stays, for the next start */
    orch__run_cancel(o, run, NULL, NULL);
  call_close(tc);
}

int orch__tool_input_asked(struct orch *o, const char *run_id, char *prompt, size_t cap,
                           char key[ORCH_TOOL_INPUT_KEY]) {
  struct orch_run *run = orch__map_get(&o->runs, run_id);
  if (run == NULL || run->state != ORCH_RUN_WAITING_INPUT || run->live.prompt == NULL)
    return 0;
  snprintf(prompt, cap, "%s", run->live.prompt);
  snprintf(key, ORCH_TOOL_INPUT_KEY, "input-%d-%lld", run->attempts,
           (long long)run->live.prompt_seq);
  return 1;
}

void orch__tool_env(struct orch *o, struct orch_tool_env *env, json_t **keep) {
  int micropip = 0;
  *keep = orch__packages_json(o, &micropip);
  *env = (struct orch_tool_env){
      .exec_mode = o->cfg->exec_mode,
      .time_limit_s = o->rt.time_limit_s,
      .paused_wait_ms = o->rt.paused_wait_ms,
      .input_wait_s = o->rt.input_wait_s,
      .pypi = !o->cfg->pypi_disabled && micropip,
      .python = json_string_value(json_object_get(*keep, "python")),
      .handoff_s = o->cfg->mcp_handoff_s,
      .packages = json_is_object(*keep) ? *keep : NULL,
  };
}
