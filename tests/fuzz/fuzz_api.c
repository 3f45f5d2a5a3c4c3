/* fuzz_api.c -- the JSON bodies of the orchestrator's handlers, and the queries of its uploads,
 * through the real server: a struct orch made by orch_new (a real store on a temporary data
 * directory, every route, the real transport) listening on a unix socket in the fuzzer's own
 * process.  Each input is one HTTP/1.1 request the harness builds around the fuzzed bytes and
 * writes on a fresh connection, the way a client would: routing, credentials, body limits, the
 * handler's reading of its body (orch__api_unpack and the checks after it), the domain and the
 * store all run as they do in production.  (The handlers read their bodies from a struct tp_req,
 * which only the transport makes; calling the readers directly would skip the routing and auth
 * in front of them and everything a valid body does after them.)
 *
 * One input: byte 0 picks the handler, byte 1 the credential (bits 0-1: the API key, the page
 * token of the handler's chat, another chat's token, none) and whether the client half-closes
 * right after its request (bit 2: the handler's answer is then written to a client gone), byte
 * 2 the size of the pieces the request is written in (0: at once), the rest is the body.  For
 * the two uploads the rest is the query (chat files: name, source, text_of) or the path after
 * .../files/ (a run's output file: its name, then ?attempt=), up to the first newline, then the
 * body; bytes a URL cannot hold are percent-encoded, the rest is sent as given.  "@T" in what is
 * sent becomes the id of the open turn, "@F" the id of the chat file, so a body can name them.
 *
 *   0 POST  /v1/chats                 {title}                       chat A (runs, turns)
 *   1 PATCH /v1/chats/A               {title}
 *   2 POST  /v1/chats/A/runs          {code, origin, turn_id, timeout_s, wait_s, idempotency_key}
 *   3 POST  /v1/turns/T/finish        {answer}                      T: an open turn of A
 *   4 POST  /v1/chats/B/presence      {page_id, visible, kernel}    chat B (its page "pb")
 *   5 POST  /v1/runs/R/started        {attempt, page_id}            R: B's run, dispatched to pb
 *   6 POST  /v1/runs/R/result         {attempt, status, ...}        with out.txt uploaded for R
 *   7 PUT   /v1/admin/settings        {retention_days, time_limit_s, ...}
 *   8 POST  /v1/chats/F/files?QUERY   raw body                      chat F (one file, @F)
 *   9 PUT   /v1/runs/R/files/NAME     raw body
 *
 * Each input starts from the same state: before it, what it needs is checked (chat A has no live
 * run and T is open; B's page is visible and ready and R is dispatched to it, attempt 1, with
 * out.txt uploaded; F holds its one file) and put back when an input before changed it (runs
 * ended as a page would end them, a new turn, run or chat); after it the loop runs until the
 * store has nothing in flight and the server closed the connection.  Every 20,000 inputs the
 * server is closed and made again on a fresh data directory, which bounds what accumulates.
 *
 * Checked for every answer read whole: a status below 500 (503 with Retry-After is a bound, not
 * a failure), Content-Type application/json, a JSON body, and for 4xx the error shape
 * {"error": {"code", "message"}}; after a 4xx, nothing the request could reach changed (runs
 * made, uploads, the open turn, chat B's run and page, chat F's files, the runtime settings,
 * chat A's title): bad input loses nothing and makes nothing.  After every input: the server's
 * connections back to the page streams alone, no request body still arriving.  The state checks
 * of the build (SBX_DEBUG) abort on a refused transition.  A hang aborts like a crash.
 *
 * What it does not do: TLS or HTTP/2 (fuzz_http1 and fuzz_h2 drive the transport), nor timers
 * (no input waits for a deadline: a held request is let go by the client's end of stream). */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "../../orchestrator/internal.h"
#include "../../transport/internal.h"

#define FUZZ_NAME "api"
#include "fuzz_server.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define API_KEY       "fuzz-api-key-0123456789abcdef"
#define RESTART_EVERY 20000
#define ANSWER_MAX    (8u << 20)
#define OUT_TXT       "hi\n"

static struct orch_config cfg;
static struct orch *o;
static struct orch_runtime rt0; /* the runtime settings as the server starts with them */
static char sock_path[128];
static unsigned generation;
static uint64_t inputs;
static uint64_t conns_at_rest; /* the page streams */

struct fixture {
  char id[STORE_ID_LEN + 1];
  char token[STORE_ID_LEN + 70];
  const char *page_id; /* NULL: no page */
  int page_fd;         /* its event stream, read and dropped; -1: none */
};
static struct fixture fx_a, fx_b, fx_f, fx_x; /* runs and turns; page reports; files; another */
static char turn_id[STORE_ID_LEN + 1], run_id[STORE_ID_LEN + 1], file_id[STORE_ID_LEN + 1];

/* ---- the loop and the client's sockets ------------------------------------------------------ */

/* Reads what is there on fd into b (dropped when b is NULL or full): 1 once the peer closed. */
static int take(int fd, struct sbx_buf *b, int *progress) {
  char buf[16384];
  for (;;) {
    ssize_t r = recv(fd, buf, sizeof(buf), 0);
    if (r > 0) {
      *progress = 1;
      if (b)
        sbx_buf_append(b, buf, (size_t)r);
      continue;
    }
    return r == 0 || (errno != EAGAIN && errno != EINTR);
  }
}

/* One turn of the loop without waiting; the pages' event streams are read and dropped. */
static void turn(void) {
  loop_turn();
  struct fixture *pages[] = {&fx_a, &fx_b};
  int progress;
  for (size_t i = 0; i < SBX_ARRAY_SIZE(pages); i++)
    if (pages[i]->page_fd >= 0 && take(pages[i]->page_fd, NULL, &progress))
      die("a page's event stream was closed", pages[i]->page_id);
}

/* Until the store has nothing in flight and the server's connections are back at rest. */
static void settle(void) {
  for (int i = 0, quiet = 0; quiet < 8; i++) {
    turn();
    quiet = store_busy() || o->tp->stats.connections_open > conns_at_rest ? 0 : quiet + 1;
    if (i > SPIN_MAX)
      die("the server never came to rest", NULL);
  }
}

static int dial(void) {
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  snprintf(a.sun_path, sizeof(a.sun_path), "%s", sock_path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0)
    die("connect", strerror(errno));
  return fd;
}

/* Writes msg in pieces on a fresh connection (a loop turn after each), half-closes at once when
 * eof_early, then reads the answer into ans until the server closed the connection.  A request
 * the server holds with nothing left to do (a wait_s, a run waiting for its page) is let go the
 * way a client gives up: its end of stream once the store is idle and nothing came for a while. */
static void exchange(const char *msg, size_t len, size_t piece, int eof_early,
                     struct sbx_buf *ans) {
  int fd = dial(), shut = 0, closed = 0, progress = 0;
  for (size_t off = 0; off < len && !closed;) {
    ssize_t w = send(fd, msg + off, SBX_MIN(len - off, piece), MSG_NOSIGNAL);
    if (w > 0)
      off += (size_t)w;
    else if (errno != EAGAIN && errno != EINTR)
      break; /* the server closed: the rest is not for it */
    turn();
    closed = take(fd, ans, &progress);
  }
  for (int i = 0, idle = 0; !closed; i++) {
    if ((eof_early || idle > 200 || (idle > 8 && loop_quiet())) && !shut)
      shut = shutdown(fd, SHUT_WR) == 0;
    progress = 0;
    turn();
    closed = take(fd, ans, &progress);
    idle = progress || store_busy() ? 0 : idle + 1;
    if (i > SPIN_MAX)
      die("the server never closed the connection", msg);
  }
  close(fd);
  settle();
  if (o->tp->bodies != 0)
    die("a request body is still arriving after its connection closed", msg);
}

/* ---- requests and answers ---------------------------------------------------------------- */

struct answer {
  int status; /* 0: no whole answer (the client left first) */
  json_t *body;
  char text[200]; /* its beginning, for messages */
};

/* The answer's checks (see the header); 0 or the first thing wrong. */
static const char *check_answer(const char *a, size_t len, struct answer *out) {
  memset(out, 0, sizeof(*out));
  snprintf(out->text, sizeof(out->text), "%.*s", (int)SBX_MIN(len, sizeof(out->text) - 1), a);
  const char *end = memmem(a, len, "\r\n\r\n", 4);
  if (len == 0 || end == NULL)
    return NULL; /* nothing whole was read: the client left first */
  int status = 0;
  if (sscanf(a, "HTTP/1.1 %d ", &status) != 1)
    return "no status line";
  const char *cl = strcasestr(a, "\r\ncontent-length: ");
  if (cl == NULL || cl > end)
    return "no Content-Length";
  size_t blen = strtoul(cl + 18, NULL, 10), head = (size_t)(end + 4 - a);
  if (len < head + blen)
    return NULL; /* cut short: the client left first */
  out->status = status;
  if (status >= 500 && status != 503)
    return "a 5xx answer";
  if (status == 503 &&
      (strcasestr(a, "\r\nretry-after: ") == NULL || strcasestr(a, "\r\nretry-after: ") > end))
    return "503 without Retry-After";
  const char *ct = strcasestr(a, "\r\ncontent-type: application/json");
  if (ct == NULL || ct > end)
    return "not application/json";
  json_error_t je;
  out->body = json_loadb(end + 4, blen, 0, &je);
  if (out->body == NULL)
    return "a body that is not JSON";
  if (status >= 400) {
    json_t *e = json_object_get(out->body, "error");
    if (!json_is_string(json_object_get(e, "code")) ||
        !json_is_string(json_object_get(e, "message")))
      return "an error without {\"error\": {\"code\", \"message\"}}";
  }
  return NULL;
}

static const char *cred(int which, const struct fixture *own) {
  return which == 0 ? API_KEY : which == 1 ? own->token : which == 2 ? fx_x.token : NULL;
}

/* Sends one request and reads its answer (a new reference in ans->body). */
static void request(const char *method, const char *target, const char *token, const void *body,
                    size_t blen, size_t piece, int eof_early, struct answer *ans) {
  struct sbx_buf msg, got;
  sbx_buf_init(&msg, blen + strlen(target) + 8192); /* the head: target, credential, fields */
  sbx_buf_init(&got, ANSWER_MAX);
  if (sbx_buf_appendf(&msg,
                      "%s %s HTTP/1.1\r\nHost: fuzz\r\nConnection: close\r\n%s%s%s"
                      "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                      method, target, token ? "Authorization: Bearer " : "", token ? token : "",
                      token ? "\r\n" : "", blen) != 0 ||
      sbx_buf_append(&msg, body, blen) != 0)
    die("request too large", target);
  exchange(msg.data, msg.len, piece ? piece : msg.len, eof_early, &got);
  const char *bad = check_answer(got.data ? got.data : "", got.len, ans);
  if (bad != NULL) {
    fprintf(stderr, "fuzz_api: %s %s: %s\n%.*s\n", method, target, bad, (int)SBX_MIN(got.len, 2000),
            got.data);
    abort();
  }
  sbx_buf_free(&msg);
  sbx_buf_free(&got);
}

/* The harness's own requests: the API key, at once; anything but `want` aborts.  Returns the
 * answer's string field `field` copied to out (when given). */
static void setup_call(const char *method, const char *target, const char *body, int want,
                       const char *field, char *out, size_t cap) {
  struct answer a;
  request(method, target, API_KEY, body, strlen(body), 0, 0, &a);
  const char *v = field ? json_string_value(json_object_get(a.body, field)) : "";
  if (a.status != want || v == NULL)
    die("a setup request failed", a.text);
  if (out)
    snprintf(out, cap, "%s", v);
  json_decref(a.body);
}

/* ---- the chats the inputs go to ----------------------------------------------------------- */

static struct orch_chat *chat_of(const struct fixture *f) {
  struct orch_chat *c = NULL;
  if (orch__chat_get(o, f->id, &c) != 0)
    die("a fixture's chat is gone", f->id);
  return c;
}

static void page_attach(struct fixture *f) {
  char msg[400];
  int n = snprintf(msg, sizeof(msg),
                   "GET /v1/chats/%s/events?page_id=%s HTTP/1.1\r\nHost: fuzz\r\n"
                   "Authorization: Bearer %s\r\n\r\n",
                   f->id, f->page_id, f->token);
  f->page_fd = dial();
  if (send(f->page_fd, msg, (size_t)n, MSG_NOSIGNAL) != n)
    die("page", strerror(errno));
  for (int i = 0; orch__chat_page(chat_of(f), f->page_id) == NULL; i++)
    if (i > SPIN_MAX)
      die("a page never attached", f->page_id);
    else
      turn();
  conns_at_rest = o->tp->stats.connections_open;
}

/* A fresh chat for f (its page, when it has one, attached); the page f had before leaves. */
static void chat_new(struct fixture *f, const char *page_id) {
  if (f->page_fd >= 0) {
    close(f->page_fd);
    f->page_fd = -1;
    for (int i = 0; o->tp->stats.connections_open >= conns_at_rest; i++)
      if (i > SPIN_MAX)
        die("a page's stream never closed", f->page_id);
      else
        turn();
    conns_at_rest = o->tp->stats.connections_open;
  }
  struct answer a;
  request("POST", "/v1/chats", API_KEY, "", 0, 0, 0, &a);
  const char *id = json_string_value(json_object_get(a.body, "chat_id"));
  const char *tok = json_string_value(json_object_get(a.body, "page_token"));
  if (a.status != 201 || id == NULL || tok == NULL)
    die("a chat was not created", a.text);
  snprintf(f->id, sizeof(f->id), "%s", id);
  snprintf(f->token, sizeof(f->token), "%s", tok);
  json_decref(a.body);
  f->page_id = page_id;
  if (page_id)
    page_attach(f);
}

/* Ends every live run of the chat, newest first, as the page and the backend would: a queued or
 * paused one by a cancel, the one a page holds by the page's report of a cancelled attempt.
 * Returns 1 when one of them had an idempotency key (the chat then remembers it). */
static int end_runs(struct fixture *f) {
  int keyed = 0;
  for (int round = 0;; round++) {
    settle();
    struct orch_chat *c = chat_of(f);
    if (SBX_LIST_EMPTY(&c->runs))
      return keyed;
    if (round > 10000)
      die("the runs of a chat never ended", f->id);
    struct orch_run *r = SBX_CONTAINER_OF(c->runs.prev, struct orch_run, chat_link);
    keyed |= r->rec.idempotency_key != NULL;
    if (r->state == ORCH_RUN_QUEUED || r->state == ORCH_RUN_PAUSED) {
      if (orch__run_cancel(o, r, NULL, NULL) != 0)
        die("a queued run could not be cancelled", r->id);
    } else if (r->state == ORCH_RUN_DISPATCHED || r->state == ORCH_RUN_RUNNING) {
      char target[128], body[80];
      snprintf(target, sizeof(target), "/v1/runs/%s/result", r->id);
      snprintf(body, sizeof(body), "{\"attempt\":%d,\"status\":\"cancelled\"}", r->attempts);
      setup_call("POST", target, body, 200, NULL, NULL, 0);
    } /* FINISHING: its result's writes are in flight */
  }
}

static void turn_open(void) {
  char target[128];
  snprintf(target, sizeof(target), "/v1/chats/%s/turns", fx_a.id);
  setup_call("POST", target, "", 201, "turn_id", turn_id, sizeof(turn_id));
}

/* Chat A at rest: no live run, its page attached, turn T open. */
static void ready_a(int after_runs) {
  if (after_runs && end_runs(&fx_a)) { /* an idempotency key stays with its chat: a fresh one */
    chat_new(&fx_a, "pa");
    turn_open();
  }
  struct store_turn t;
  if (store_turn_get(o->st, turn_id, &t) != 0)
    die("the open turn is gone", turn_id);
  int open = t.state == STORE_TURN_OPEN && orch__map_get(&o->turns, turn_id) == NULL;
  store_turn_free(&t);
  if (!open)
    turn_open();
}

/* far: its watchdog far enough not to fire during an input (not part of a state snapshot) */
static int b_at_rest(int far) {
  struct orch_chat *c = chat_of(&fx_b);
  struct orch_page *p = orch__chat_page(c, "pb");
  struct orch_run *r = orch__map_get(&o->runs, run_id);
  if (p == NULL || p->state != ORCH_PAGE_VISIBLE || p->kernel != ORCH_KERNEL_READY ||
      p->events == NULL || r == NULL || c->runs.next != &r->chat_link ||
      c->runs.prev != &r->chat_link || r->state != ORCH_RUN_DISPATCHED || r->attempts != 1 ||
      r->cancel_deadline_ms != 0 || r->rec.started_at != 0 ||
      (far && r->watchdog_deadline_ms < sbx_now_mono_ms() + 30000) ||
      r->uploads.next == &r->uploads || r->uploads.next != r->uploads.prev)
    return 0;
  struct orch_upload *u = SBX_CONTAINER_OF(r->uploads.next, struct orch_upload, link);
  return strcmp(u->name, "out.txt") == 0 && u->attempt == 1 && u->stage != NULL;
}

/* Chat B at rest: page pb visible with a ready kernel, R dispatched to it (attempt 1, not
 * started, its watchdog far) with out.txt uploaded, nothing else live. */
static void ready_b(void) {
  if (b_at_rest(1))
    return;
  char target[128];
  snprintf(target, sizeof(target), "/v1/chats/%s/presence", fx_b.id);
  setup_call("POST", target, "{\"page_id\":\"pb\",\"visible\":true,\"kernel\":\"ready\"}", 200,
             NULL, NULL, 0);
  end_runs(&fx_b);
  snprintf(target, sizeof(target), "/v1/chats/%s/runs", fx_b.id);
  setup_call("POST", target, "{\"code\":\"print(1)\"}", 201, "run_id", run_id, sizeof(run_id));
  snprintf(target, sizeof(target), "/v1/runs/%s/files/out.txt", run_id);
  setup_call("PUT", target, OUT_TXT, 201, NULL, NULL, 0);
  if (!b_at_rest(1))
    die("chat B could not be put back at rest", run_id);
}

/* Chat F at rest: its one file. */
static void ready_f(int fresh) {
  struct store_file *v = NULL;
  size_t n = 0;
  if (!fresh && store_file_list(o->st, fx_f.id, 1, &v, &n) == 0 && n == 1) {
    store_file_list_free(v, n);
    return;
  }
  store_file_list_free(v, n);
  chat_new(&fx_f, NULL);
  char target[160];
  snprintf(target, sizeof(target), "/v1/chats/%s/files?name=report.pdf", fx_f.id);
  setup_call("POST", target, "%PDF-1.4 fuzz\n", 201, "file_id", file_id, sizeof(file_id));
}

/* ---- the server's life ------------------------------------------------------------------- */

static void start(void) {
  char dir[160], www[160];
  snprintf(dir, sizeof(dir), "%s/data-%u", root, ++generation);
  snprintf(www, sizeof(www), "%s/www", root);
  mkdir(www, 0700);
  snprintf(sock_path, sizeof(sock_path), "%s/s-%u", root, generation);
  char listen[160];
  snprintf(listen, sizeof(listen), "unix:%s", sock_path);
  struct sbx_error err;
  orch_config_free(&cfg);
  if (orch_config_defaults(&cfg) != 0 || orch_config_set(&cfg, "CEREA_DATA_DIR", dir, &err) ||
      orch_config_set(&cfg, "CEREA_STATIC_DIR", www, &err) ||
      orch_config_set(&cfg, "CEREA_LISTEN", listen, &err) ||
      orch_config_set(&cfg, "CEREA_API_KEY", API_KEY, &err) ||
      /* B's page sends no heartbeat: silent after PAGE_SILENT_MS without a page call, its run
       * would be paused by the clock in the middle of an input (seen at 64 inputs a second under
       * load: a 401 "changed what it reached"); only requests may change what an input reaches */
      orch_config_set(&cfg, "PAGE_SILENT_MS", "0", &err) || orch_new(&loop, &cfg, &o, &err))
    die("no server", err.msg);
  rt0 = o->rt;
  struct fixture *all[] = {&fx_a, &fx_b, &fx_f, &fx_x};
  for (size_t i = 0; i < SBX_ARRAY_SIZE(all); i++)
    all[i]->page_fd = -1;
  conns_at_rest = 0;
  chat_new(&fx_x, NULL);
  chat_new(&fx_a, "pa");
  turn_open();
  chat_new(&fx_b, "pb");
  ready_b();
  ready_f(1);
}

static void stop(void) {
  struct fixture *all[] = {&fx_a, &fx_b};
  for (size_t i = 0; i < SBX_ARRAY_SIZE(all); i++) {
    close(all[i]->page_fd);
    all[i]->page_fd = -1;
  }
  close_server(o);
  o = NULL;
  char dir[160];
  snprintf(dir, sizeof(dir), "%s/data-%u", root, generation);
  rm_tree(dir);
  unlink(sock_path);
}

static void setup(void) {
  setup_root();
  start();
}

/* ---- one input --------------------------------------------------------------------------- */

/* What is sent: "@T" and "@F" replaced by the open turn's and the chat file's ids, and, for a
 * URL (url 1: a query, 2: a path and its query), the bytes a URL cannot hold percent-encoded. */
static void prepare(struct sbx_buf *out, const uint8_t *p, size_t n, int url) {
  size_t plain = 0; /* bytes before i sent as they are, not appended yet */
  for (size_t i = 0; i < n; i++) {
    int id = p[i] == '@' && i + 1 < n && (p[i + 1] == 'T' || p[i + 1] == 'F');
    int esc = url && (p[i] <= 0x20 || p[i] >= 0x7f || p[i] == '#' || (url == 1 && p[i] == '?'));
    if (!id && !esc) {
      plain++;
      continue;
    }
    sbx_buf_append(out, p + i - plain, plain);
    plain = 0;
    if (id)
      sbx_buf_appendf(out, "%s", p[++i] == 'T' ? turn_id : file_id);
    else
      sbx_buf_appendf(out, "%%%02X", p[i]);
  }
  sbx_buf_append(out, p + n - plain, plain);
}

/* libFuzzer's leak check after each input off (fuzz_server.h says why). */
int LLVMFuzzerInitialize(int *argc, char ***argv) { return leak_check_off(argc, argv); }

enum handler {
  H_CHAT_NEW,
  H_RENAME,
  H_RUN,
  H_FINISH,
  H_PRESENCE,
  H_STARTED,
  H_RESULT,
  H_SETTINGS,
  H_UPLOAD,
  H_OUTPUT,
  H__N
};
enum id_of { ID_NONE, ID_A, ID_B, ID_F, ID_T, ID_R };
enum path_tail { TAIL_NONE, TAIL_QUERY, TAIL_PATH }; /* where the upload's URL bytes go */
static const struct route {
  const char *method, *before, *after; /* the path: before, the id, after */
  enum id_of id;
  enum path_tail tail;
  char own; /* whose page token is "the handler's chat's": 'a', 'b' or 'f' */
} routes[H__N] = {
    [H_CHAT_NEW] = {"POST", "/v1/chats", "", ID_NONE, TAIL_NONE, 'a'},
    [H_RENAME] = {"PATCH", "/v1/chats/", "", ID_A, TAIL_NONE, 'a'},
    [H_RUN] = {"POST", "/v1/chats/", "/runs", ID_A, TAIL_NONE, 'a'},
    [H_FINISH] = {"POST", "/v1/turns/", "/finish", ID_T, TAIL_NONE, 'a'},
    [H_PRESENCE] = {"POST", "/v1/chats/", "/presence", ID_B, TAIL_NONE, 'b'},
    [H_STARTED] = {"POST", "/v1/runs/", "/started", ID_R, TAIL_NONE, 'b'},
    [H_RESULT] = {"POST", "/v1/runs/", "/result", ID_R, TAIL_NONE, 'b'},
    [H_SETTINGS] = {"PUT", "/v1/admin/settings", "", ID_NONE, TAIL_NONE, 'a'},
    [H_UPLOAD] = {"POST", "/v1/chats/", "/files?", ID_F, TAIL_QUERY, 'f'},
    [H_OUTPUT] = {"PUT", "/v1/runs/", "/files/", ID_R, TAIL_PATH, 'b'},
};

static const char *id_of(enum id_of id) {
  const char *const ids[] = {"", fx_a.id, fx_b.id, fx_f.id, turn_id, run_id};
  return ids[id];
}

/* What a refused request (4xx) must leave as it was: the runs made, the open turn, chat B at rest,
 * chat F's one file, the runtime settings, chat A's title. */
struct state {
  uint64_t runs_created, uploads;
  int turn_open, b_rest;
  size_t f_files;
  struct orch_runtime rt;
  char *title;
};

/* b: the input is one of chat B's (only then is R's watchdog sure not to fire during it). */
static void state_read(struct state *s, int b) {
  memset(s, 0, sizeof(*s));
  s->runs_created = o->m.runs_created;
  s->uploads = o->m.uploads;
  struct store_turn t;
  if (store_turn_get(o->st, turn_id, &t) == 0) {
    s->turn_open = t.state == STORE_TURN_OPEN;
    store_turn_free(&t);
  }
  s->b_rest = b && b_at_rest(0);
  struct store_file *v = NULL;
  if (store_file_list(o->st, fx_f.id, 1, &v, &s->f_files) == 0)
    store_file_list_free(v, s->f_files);
  s->rt = o->rt;
  struct store_chat c;
  if (store_chat_get(o->st, fx_a.id, &c) == 0) {
    s->title = c.title ? sbx_strdup(c.title) : NULL;
    store_chat_free(&c);
  }
}

static int state_same(const struct state *x, const struct state *y) {
  return x->runs_created == y->runs_created && x->uploads == y->uploads &&
         x->turn_open == y->turn_open && x->b_rest == y->b_rest && x->f_files == y->f_files &&
         memcmp(&x->rt, &y->rt, sizeof(x->rt)) == 0 &&
         (x->title == NULL ? y->title == NULL : y->title && strcmp(x->title, y->title) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  if (o == NULL)
    setup();
  if (n < 3)
    return 0;
  if (++inputs % RESTART_EVERY == 0) {
    stop();
    start();
  }
  enum handler h = data[0] % H__N;
  const struct route *r = &routes[h];
  int which = data[1] & 3, eof_early = (data[1] >> 2) & 1;
  size_t piece = data[2] == 0 ? 0 : (size_t)data[2] * 7 % 509 + 1;
  data += 3;
  n -= 3;
  const struct fixture *own = r->own == 'a' ? &fx_a : r->own == 'b' ? &fx_b : &fx_f;
  if (h == H_RENAME || h == H_RUN || h == H_FINISH)
    ready_a(0);
  else if (r->own == 'b')
    ready_b();
  else if (h == H_UPLOAD)
    ready_f(0);
  struct state before, after;
  state_read(&before, r->own == 'b');

  struct sbx_buf target, body;
  sbx_buf_init(&target, 64 * 1024);
  sbx_buf_init(&body, 4 * n + 1024);
  const uint8_t *nl = r->tail ? memchr(data, '\n', n) : NULL;
  size_t ul = r->tail ? (nl ? (size_t)(nl - data) : n) : 0, skip = ul + (nl != NULL);
  sbx_buf_appendf(&target, "%s%s%s", r->before, id_of(r->id), r->after);
  prepare(&target, data, ul, r->tail == TAIL_QUERY ? 1 : 2);
  prepare(&body, data + skip, n - skip, 0);
  struct answer a;
  request(r->method, target.data, cred(which, own), body.data ? body.data : "", body.len, piece,
          eof_early, &a);
  const char *msg = json_string_value(json_object_get(json_object_get(a.body, "error"), "message"));
  if (getenv("FUZZ_API_TRACE")) /* replaying an input: what it was answered */
    fprintf(stderr, "fuzz_api: %s %s -> %d %s\n", r->method, target.data, a.status, msg ? msg : "");
  if (a.status >= 400 && a.status < 500) {
    state_read(&after, r->own == 'b');
    if (!state_same(&before, &after)) {
      fprintf(stderr, "fuzz_api: %s %s was refused (%d %s) but changed what it reached\n",
              r->method, target.data, a.status, msg ? msg : "");
      abort();
    }
    sbx_free(after.title);
  }
  sbx_free(before.title);
  json_decref(a.body);
  sbx_buf_free(&target);
  sbx_buf_free(&body);

  if (h == H_RUN || h == H_FINISH)
    ready_a(1);
  else if (h == H_SETTINGS && memcmp(&o->rt, &rt0, sizeof(rt0)) != 0)
    o->rt = rt0; /* stored too: the next data directory starts without it */
  return 0;
}
