/* fuzz_tools.c -- a tool call's arguments (tools.c: orch__tool_check, then orch__tool_start
 * carrying the call out) against a real orchestrator: orch_new on a temporary data directory
 * (under /dev/shm when there is one), its real store, chats, runs and files.  This is what MCP's
 * tools/call, POST /v1/tools/call and the assistant hand their arguments to; fuzz_mcp covers the
 * JSON-RPC envelope in front with the execution a test double, this target the execution.
 *
 * One input: byte 0 picks the tool (bits 0-2, modulo the tools), the caller's scope (bits 3-4: the
 * API key's, chat A's key, chat X's key, the API key's) and how the caller leaves a call that goes
 * on (bits 5-6: 0 and 3 wait until it ends or nothing more can happen, 1 abandon it at once, 2
 * abandon it after a few loop turns); the rest is the arguments, JSON as MCP reads it (duplicate
 * keys refused, any value).  "@A" and "@X" in it become the ids of chats A and X, "@D" of an ended
 * run of A, "@L" of a live (queued) run of A, so the arguments can name them.
 *
 * Before each input: A has its live run L (queued: no page is attached, nothing runs) and nothing
 * else live, X nothing live.  Checked for every input:
 * - the check answers 0 or SBX_EINVAL; a refusal's reason is non-empty UTF-8 that makes a tool
 *   result (the reason is what a model reads);
 * - the start answers 0 with exactly one of a result now or a call that goes on, or SBX_EINVAL
 *   with a reason as above; a call that goes on ends once at most, never from inside its start,
 *   never after it was abandoned; every result is {content: [{type: "text", text}, ...], isError}
 *   with UTF-8 text; each progress report names the call's run, a state, and text of its length;
 * - a refused call (the check's or the start's SBX_EINVAL) changed nothing: no file, no run, L
 *   still queued; a call in chat X's scope changed nothing in A, and one in A's nothing in X.
 * The state checks of the build (SBX_DEBUG) abort on a refused transition; a hang aborts.  Chats
 * A and X are made again (with D and L) once either holds more than CHAT_FILES_MAX files: each
 * input lists both chats' files four times, and with the files added piling up over thousands of
 * inputs those lists were most of an input's time.  Every 5,000 inputs the server is made again
 * on a fresh data directory.
 *
 * What it does not do: run code (no page attaches; fuzz_api drives pages and results), nodes.
 */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools.h"

#define FUZZ_NAME "tools"
#include "fuzz_server.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define API_KEY        "fuzz-tools-api-key-0123456789abcdef"
#define RESTART_EVERY  5000
#define CHAT_FILES_MAX 16

static struct orch_config cfg;
static struct orch *o;
static unsigned generation;
static uint64_t inputs;
static char chat_a[STORE_ID_LEN + 1], chat_x[STORE_ID_LEN + 1];
static char run_d[STORE_ID_LEN + 1], run_l[STORE_ID_LEN + 1];

static void settle(void) {
  for (int i = 0, quiet = 0; quiet < 8; i++) {
    loop_turn();
    quiet = store_busy() ? 0 : quiet + 1;
    if (i > SPIN_MAX)
      die("the store never came to rest", NULL);
  }
}

/* ---- what is checked ------------------------------------------------------------------------ */

static int utf8_ok(const char *s) {
  json_t *j = s ? json_string(s) : NULL; /* jansson refuses what is not UTF-8 */
  json_decref(j);
  return j != NULL;
}

static void check_why(int rc, const char *why, const char *where) {
  if (rc != SBX_EINVAL)
    return;
  json_t *r = orch__tool_error_result(why);
  if (why[0] == '\0' || !utf8_ok(why) || r == NULL)
    die("a refusal's reason is empty or not UTF-8 (no result can carry it)", where);
  json_decref(r);
}

static void check_result(const json_t *r) {
  const json_t *content = json_object_get(r, "content");
  const json_t *first = json_array_get(content, 0);
  const json_t *err = json_object_get(r, "isError");
  const char *type = json_string_value(json_object_get(first, "type"));
  if (!json_is_object(r) || !json_is_array(content) ||
      !json_is_string(json_object_get(first, "text")) || type == NULL ||
      strcmp(type, "text") != 0 || (err != NULL && !json_is_boolean(err)))
    die("a result not of the tool result's shape", NULL);
  size_t i;
  const json_t *item;
  json_array_foreach(content, i, item) {
    if (!json_is_object(item) || !json_is_string(json_object_get(item, "type")))
      die("a content item without its type", NULL);
  }
}

struct snapshot {
  size_t files, runs, live; /* runs: 0 or 1, with newest its newest run (a new run changes it) */
  char newest[STORE_ID_LEN + 1];
  int l_queued;
};

static void snap(const char *chat_id, struct snapshot *s) {
  memset(s, 0, sizeof(*s));
  struct store_file *f = NULL;
  struct store_run *r = NULL;
  if (store_file_list(o->st, chat_id, 1, &f, &s->files) != 0 ||
      store_run_list(o->st, chat_id, 1, &r, &s->runs) != 0)
    die("the store cannot be read", chat_id);
  if (s->runs == 1)
    snprintf(s->newest, sizeof(s->newest), "%s", r[0].id);
  store_file_list_free(f, s->files);
  store_run_list_free(r, s->runs);
  struct orch_chat *c = NULL;
  if (orch__chat_get(o, chat_id, &c) != 0)
    die("a chat is gone", chat_id);
  for (struct sbx_list *l = c->runs.next; l != &c->runs; l = l->next)
    s->live++;
  struct orch_run *lr = orch__map_get(&o->runs, run_l);
  s->l_queued = strcmp(chat_id, chat_a) == 0 && lr != NULL && lr->state == ORCH_RUN_QUEUED;
}

static void same(const struct snapshot *a, const struct snapshot *b, const char *what) {
  if (a->files != b->files || a->runs != b->runs || strcmp(a->newest, b->newest) != 0 ||
      a->live != b->live || a->l_queued != b->l_queued)
    die(what, NULL);
}

/* ---- a call and its callbacks --------------------------------------------------------------- */

struct call {
  const char *run_id; /* the call's run once known (progress names it) */
  int in_start, done, abandoned;
};

static void on_progress(void *ud, const struct orch_tool_progress *p) {
  struct call *c = ud;
  if (c->abandoned || c->done)
    die("progress after the call ended or was abandoned", NULL);
  if (p->run_id == NULL || !orch__valid_id(p->run_id) || p->state == NULL ||
      (p->text_len > 0 && p->text == NULL))
    die("a progress report without its run, state or text", NULL);
}

static void on_done(void *ud, json_t *result) {
  struct call *c = ud;
  if (c->in_start)
    die("a call ended from inside its start", NULL);
  if (c->abandoned || c->done++)
    die("a call ended twice, or after it was abandoned", NULL);
  check_result(result);
  json_decref(result);
}

static const struct orch_tool_ops ops = {on_progress, on_done};

/* ---- the server and its chats --------------------------------------------------------------- */

static void on_stored(int rc, const struct sbx_error *err, void *ud) {
  if (rc != 0)
    die("a setup write failed", err ? err->msg : NULL);
  *(int *)ud = 1;
}

static void chat_make(char id[STORE_ID_LEN + 1]) {
  struct store_chat chat = {0};
  char token[STORE_ID_LEN + 70];
  store_new_id(chat.id);
  chat.created_at = sbx_now_wall_ms();
  volatile int stored = 0;
  if (orch__token_new(chat.id, token, sizeof(token), chat.token_hash) != 0 ||
      store_chat_create(o->st, &chat, on_stored, (void *)&stored) != 0)
    die("no chat", NULL);
  for (int i = 0; !stored; i++)
    if (i > SPIN_MAX)
      die("a chat was never stored", NULL);
    else
      loop_turn();
  if (orch__chat_add(o, chat.id, chat.token_hash, 0) == NULL)
    die("no live chat", chat.id);
  memcpy(id, chat.id, STORE_ID_LEN + 1);
}

struct made {
  int done;
  char id[STORE_ID_LEN + 1];
};

static void on_run_made(void *ud, int rc, const struct sbx_error *err, struct orch_run *run) {
  struct made *m = ud;
  if (rc != 0 || run == NULL)
    die("a setup run was not made", err ? err->msg : NULL);
  snprintf(m->id, sizeof(m->id), "%s", run->id);
  m->done = 1;
}

/* A new queued run of chat A. */
static struct orch_run *run_make(char id[STORE_ID_LEN + 1]) {
  struct orch_chat *c = NULL;
  if (orch__chat_get(o, chat_a, &c) != 0)
    die("chat A is gone", NULL);
  struct orch_run *r = orch__run_new(o, c, "print(1)", "tool", NULL, o->rt.time_limit_s, NULL);
  struct made m = {0};
  if (r == NULL || orch__run_create(o, c, r, on_run_made, &m) != 0)
    die("no run", NULL);
  for (int i = 0; !m.done; i++)
    if (i > SPIN_MAX)
      die("a run was never made", NULL);
    else
      loop_turn();
  memcpy(id, m.id, STORE_ID_LEN + 1);
  settle();
  return orch__map_get(&o->runs, id);
}

/* Every live run of chat_id ended (queued: a cancel; none is ever dispatched, no page attaches). */
static void runs_end(const char *chat_id, const char *keep) {
  struct orch_chat *c = NULL;
  for (int round = 0;; round++) {
    settle();
    if (orch__chat_get(o, chat_id, &c) != 0)
      die("a chat is gone", chat_id);
    struct orch_run *r = NULL;
    for (struct sbx_list *l = c->runs.next; l != &c->runs && r == NULL; l = l->next) {
      struct orch_run *x = SBX_CONTAINER_OF(l, struct orch_run, chat_link);
      if (keep == NULL || strcmp(x->id, keep) != 0)
        r = x;
    }
    if (r == NULL)
      return;
    if (round > 10000)
      die("the runs of a chat never ended", chat_id);
    if (r->state == ORCH_RUN_QUEUED || r->state == ORCH_RUN_PAUSED)
      orch__run_cancel(o, r, NULL, NULL);
  }
}

static size_t files_seen; /* the most files chat A or X held after the last input */

/* Chats A and X new: A with its ended run D and its live (queued) run L. */
static void chats_make(void) {
  chat_make(chat_a);
  chat_make(chat_x);
  struct orch_run *d = run_make(run_d);
  if (d == NULL || orch__run_cancel(o, d, NULL, NULL) != 0)
    die("the ended run could not be made", run_d);
  settle();
  run_make(run_l);
  files_seen = 0;
}

/* Before each input: A's live run is L (queued) alone, X has nothing live; neither holds more
 * than CHAT_FILES_MAX files. */
static void ready(void) {
  if (files_seen > CHAT_FILES_MAX) { /* the old chats' live runs end first */
    runs_end(chat_a, NULL);
    runs_end(chat_x, NULL);
    chats_make();
    return;
  }
  struct orch_run *l = orch__map_get(&o->runs, run_l);
  runs_end(chat_a, l && l->state == ORCH_RUN_QUEUED ? run_l : NULL);
  runs_end(chat_x, NULL);
  l = orch__map_get(&o->runs, run_l);
  if (l == NULL || l->state != ORCH_RUN_QUEUED)
    run_make(run_l);
}

static void start(void) {
  char dir[160], www[160], listen[160];
  snprintf(dir, sizeof(dir), "%s/data-%u", root, ++generation);
  snprintf(www, sizeof(www), "%s/www", root);
  mkdir(www, 0700);
  snprintf(listen, sizeof(listen), "unix:%s/s-%u", root, generation);
  struct sbx_error err;
  orch_config_free(&cfg);
  if (orch_config_defaults(&cfg) != 0 || orch_config_set(&cfg, "CEREA_DATA_DIR", dir, &err) ||
      orch_config_set(&cfg, "CEREA_STATIC_DIR", www, &err) ||
      orch_config_set(&cfg, "CEREA_LISTEN", listen, &err) ||
      orch_config_set(&cfg, "CEREA_API_KEY", API_KEY, &err) || orch_new(&loop, &cfg, &o, &err))
    die("no server", err.msg);
  chats_make();
}

static void stop(void) {
  close_server(o);
  o = NULL;
  char dir[160], sock[160];
  snprintf(dir, sizeof(dir), "%s/data-%u", root, generation);
  snprintf(sock, sizeof(sock), "%s/s-%u", root, generation);
  rm_tree(dir);
  unlink(sock);
}

static void setup(void) {
  setup_root();
  start();
}

/* libFuzzer's leak check after each input off (fuzz_server.h says why). */
int LLVMFuzzerInitialize(int *argc, char ***argv) { return leak_check_off(argc, argv); }

/* ---- one input ------------------------------------------------------------------------------ */

/* The arguments with "@A", "@X", "@D", "@L" replaced by the ids they name. */
static void prepare(struct sbx_buf *out, const uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++) {
    const char *id = NULL;
    if (p[i] == '@' && i + 1 < n)
      id = p[i + 1] == 'A'   ? chat_a
           : p[i + 1] == 'X' ? chat_x
           : p[i + 1] == 'D' ? run_d
           : p[i + 1] == 'L' ? run_l
                             : NULL;
    if (id) {
      sbx_buf_append(out, id, STORE_ID_LEN);
      i++;
    } else {
      sbx_buf_append(out, p + i, 1);
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  if (o == NULL)
    setup();
  if (n < 1)
    return 0;
  if (++inputs % RESTART_EVERY == 0) {
    stop();
    start();
  }
  ready();
  enum orch_tool t = (enum orch_tool)((data[0] & 7) % ORCH_TOOL__COUNT);
  int who = (data[0] >> 3) & 3, leave = (data[0] >> 5) & 3;
  struct orch_tool_scope scope = {{0}};
  if (who == 1 || who == 2)
    snprintf(scope.chat_id, sizeof(scope.chat_id), "%s", who == 1 ? chat_a : chat_x);
  struct sbx_buf text;
  sbx_buf_init(&text, 1u << 30);
  prepare(&text, data + 1, n - 1);
  json_error_t je;
  json_t *args = json_loadb(text.data ? text.data : "", text.len,
                            JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
  sbx_buf_free(&text);
  if (args == NULL)
    return 0; /* MCP refuses it before any tool sees it */

  struct snapshot a0, x0, a1, x1;
  snap(chat_a, &a0);
  snap(chat_x, &x0);
  struct orch_tool_args a;
  char why[600] = "";
  int rc = orch__tool_check(t, args, &scope, o->rt.time_limit_s, &a, why, sizeof(why));
  if (rc != 0 && rc != SBX_EINVAL)
    die("the check answered neither 0 nor SBX_EINVAL", sbx_strerror(rc));
  check_why(rc, why, "orch__tool_check");
  struct call c = {0};
  if (rc == 0) {
    struct orch_tool_call *tc = NULL;
    json_t *now = NULL;
    a.keepalive_ms = 10000;
    why[0] = '\0';
    c.in_start = 1;
    rc = orch__tool_start(o, t, &a, args, "http://fuzz", &ops, &c, &tc, &now, why, sizeof(why));
    c.in_start = 0;
    if (rc != 0 && rc != SBX_EINVAL)
      die("the start answered neither 0 nor SBX_EINVAL", sbx_strerror(rc));
    check_why(rc, why, "orch__tool_start");
    if (rc == 0 && (now == NULL) == (tc == NULL))
      die("a start that gave both or neither of a result and a call", NULL);
    if (now) {
      check_result(now);
      json_decref(now);
    }
    /* A call that goes on: waited for while anything can still happen (the store's writes),
     * abandoned when the input says so, or once nothing is left to wait for (a run with no page). */
    for (int i = 0, idle = 0; tc != NULL && !c.done; i++) {
      int gone = idle > 50 || (idle > 8 && loop_quiet()); /* nothing more can happen */
      if (leave == 1 || (leave == 2 && i == 3) || gone) {
        c.abandoned = 1;
        orch__tool_abandon(tc);
        break;
      }
      loop_turn();
      idle = store_busy() ? 0 : idle + 1;
      if (i > SPIN_MAX)
        die("a call never ended", NULL);
    }
    settle();
  }
  snap(chat_a, &a1);
  snap(chat_x, &x1);
  if (rc == SBX_EINVAL) {
    same(&a0, &a1, "a refused call changed chat A");
    same(&x0, &x1, "a refused call changed chat X");
  }
  if (who == 2)
    same(&a0, &a1, "a call in chat X's scope changed chat A");
  if (who == 1)
    same(&x0, &x1, "a call in chat A's scope changed chat X");
  files_seen = SBX_MAX(a1.files, x1.files);
  json_decref(args);
  return 0;
}
