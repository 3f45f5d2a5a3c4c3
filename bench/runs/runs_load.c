/* runs_load.c -- the runs benchmark's load generator in C: N pages and M assistants over HTTP/2
 * (h2c, prior knowledge) against a running orchestrator, using as little CPU as it can so the
 * figure is the server's, not the client's (the Node generator, run_bench.mjs, needed more CPU
 * per run than the server on this 2-core machine).
 *
 *   runs_load --port P --key K --server-pid PID [--chats 1000] [--assistants 64]
 *             [--duration 10] [--low 2000]
 *
 * Same protocol and output as run_bench.mjs: creates the chats, attaches one page per chat (an
 * event stream; on `run` it POSTs {attempt, status: ok} at once), then a low-load phase (one
 * assistant, sequential) and a loaded phase (M assistants, each on its own chats, for --duration
 * s).  One JSON line per phase: runs/s, p50/p99/max round trip, the server's CPU per run (from
 * /proc/PID/stat) and this client's own CPU per run (getrusage), then {"result": {...}}.
 *
 * Single-threaded: plain non-blocking sockets, poll(), one nghttp2 client session per connection
 * (pages: 50 streams a session; assistants: 50 a session).  What it does not do: TLS, HTTP/1,
 * retries -- any unexpected answer ends it with exit status 1.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <nghttp2/nghttp2.h>
#include <jansson.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define PER_SESSION 50
#define MAX_SESS 256

enum req_kind { REQ_CHAT, REQ_EVENTS, REQ_RESULT, REQ_RUN };

struct sess;
struct req {
  enum req_kind kind;
  struct sess *s;
  int chat;          /* index into chats */
  int assistant;     /* REQ_RUN */
  int status;
  char *body;        /* request body (owned) */
  size_t body_len, body_off;
  char *resp;        /* response body (REQ_CHAT, REQ_RUN, REQ_RESULT) or SSE buffer (REQ_EVENTS) */
  size_t resp_len, resp_cap;
  uint64_t t0;
};

struct sess {
  int fd;
  nghttp2_session *h2;
};

struct chat {
  char id[64];
  char token[128];
  char auth[160];
  struct sess *page;
};

static struct sess sessions[MAX_SESS];
static int n_sess;
static struct chat *chats;
static int n_chats, port, server_pid;
static char key_auth[256];
static int chats_made, pages_attached;
static int runs_inflight, runs_done;
static double *lat;
static size_t lat_n, lat_cap;
static int loaded_active; /* loaded phase: assistants keep going while now < end */
static uint64_t loaded_end;
static int assist_next[1024];
static int n_assist;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *m) {
  fprintf(stderr, "runs_load: %s\n", m);
  exit(1);
}

static void append(struct req *r, const uint8_t *d, size_t n) {
  if (r->resp_len + n + 1 > r->resp_cap) {
    size_t cap = r->resp_cap ? r->resp_cap : 512;
    while (cap < r->resp_len + n + 1)
      cap *= 2;
    r->resp = realloc(r->resp, cap);
    if (r->resp == NULL)
      die("out of memory");
    r->resp_cap = cap;
  }
  memcpy(r->resp + r->resp_len, d, n);
  r->resp_len += n;
  r->resp[r->resp_len] = '\0';
}

/* ---- requests ---------------------------------------------------------------------------- */

static ssize_t read_body(nghttp2_session *h2, int32_t sid, uint8_t *buf, size_t len, uint32_t *flags,
                         nghttp2_data_source *src, void *ud) {
  (void)h2, (void)sid, (void)ud;
  struct req *r = src->ptr;
  size_t n = r->body_len - r->body_off;
  if (n > len)
    n = len;
  memcpy(buf, r->body + r->body_off, n);
  r->body_off += n;
  if (r->body_off == r->body_len)
    *flags |= NGHTTP2_DATA_FLAG_EOF;
  return (ssize_t)n;
}

static void submit(struct sess *s, struct req *r, const char *method, const char *path, const char *auth) {
  nghttp2_nv nv[] = {
      {(uint8_t *)":method", (uint8_t *)method, 7, strlen(method), NGHTTP2_NV_FLAG_NONE},
      {(uint8_t *)":scheme", (uint8_t *)"http", 7, 4, NGHTTP2_NV_FLAG_NONE},
      {(uint8_t *)":authority", (uint8_t *)"127.0.0.1", 10, 9, NGHTTP2_NV_FLAG_NONE},
      {(uint8_t *)":path", (uint8_t *)path, 5, strlen(path), NGHTTP2_NV_FLAG_NONE},
      {(uint8_t *)"authorization", (uint8_t *)auth, 13, strlen(auth), NGHTTP2_NV_FLAG_NONE},
      {(uint8_t *)"content-type", (uint8_t *)"application/json", 12, 16, NGHTTP2_NV_FLAG_NONE},
  };
  r->s = s;
  nghttp2_data_provider dp = {.source.ptr = r, .read_callback = read_body};
  if (nghttp2_submit_request(s->h2, NULL, nv, 6, r->body ? &dp : NULL, r) < 0)
    die("submit_request failed");
}

static struct req *new_req(enum req_kind k, int chat, const char *body) {
  struct req *r = calloc(1, sizeof(*r));
  if (r == NULL)
    die("out of memory");
  r->kind = k;
  r->chat = chat;
  if (body) {
    r->body = strdup(body);
    r->body_len = strlen(body);
  }
  return r;
}

static void start_run(int assistant) {
  int ci = assist_next[assistant] % n_chats;
  assist_next[assistant] += n_assist;
  struct req *r = new_req(REQ_RUN, ci, "{\"code\":\"pass\",\"wait_s\":30}");
  r->assistant = assistant;
  char path[128];
  snprintf(path, sizeof(path), "/v1/chats/%s/runs", chats[ci].id);
  r->t0 = now_ns();
  /* assistants spread over the sessions after the page sessions */
  struct sess *s = &sessions[n_sess - 1 - (assistant / PER_SESSION)];
  runs_inflight++;
  submit(s, r, "POST", path, key_auth);
}

/* An SSE block arrived on a page's stream: answer a `run` event with an instant result. */
static void on_sse_block(struct req *ev, const char *block, size_t n) {
  if (n < 10 || memcmp(block, "event: run\n", 11) != 0) {
    /* the type line may follow an id line */
    const char *t = memmem(block, n, "\nevent: run\n", 12);
    if (t == NULL)
      return;
  }
  const char *d = memmem(block, n, "data: ", 6);
  if (d == NULL)
    die("run event without data");
  json_error_t je;
  json_t *j = json_loadb(d + 6, n - (size_t)(d + 6 - block), JSON_DISABLE_EOF_CHECK, &je);
  if (j == NULL)
    die("run event: bad JSON");
  const char *run_id = json_string_value(json_object_get(j, "run_id"));
  json_int_t attempt = json_integer_value(json_object_get(j, "attempt"));
  char body[160], path[128];
  snprintf(body, sizeof(body),
           "{\"attempt\":%lld,\"status\":\"ok\",\"stdout\":\"\",\"stderr\":\"\",\"files\":[]}",
           (long long)attempt);
  snprintf(path, sizeof(path), "/v1/runs/%s/result", run_id ? run_id : "x");
  json_decref(j);
  struct req *r = new_req(REQ_RESULT, ev->chat, body);
  submit(ev->s, r, "POST", path, chats[ev->chat].auth);
}

static void on_events_data(struct req *r, const uint8_t *d, size_t n) {
  append(r, d, n);
  size_t off = 0;
  for (;;) {
    char *k = memmem(r->resp + off, r->resp_len - off, "\n\n", 2);
    if (k == NULL)
      break;
    on_sse_block(r, r->resp + off, (size_t)(k - (r->resp + off)));
    off = (size_t)(k - r->resp) + 2;
  }
  memmove(r->resp, r->resp + off, r->resp_len - off);
  r->resp_len -= off;
}

static void req_done(struct req *r) {
  switch (r->kind) {
  case REQ_CHAT: {
    if (r->status != 201)
      die("chat create failed");
    json_error_t je;
    json_t *j = json_loads(r->resp ? r->resp : "", 0, &je);
    const char *id = json_string_value(json_object_get(j, "chat_id"));
    const char *tok = json_string_value(json_object_get(j, "page_token"));
    if (!id || !tok)
      die("chat create: no chat_id/page_token");
    struct chat *c = &chats[r->chat];
    snprintf(c->id, sizeof(c->id), "%s", id);
    snprintf(c->token, sizeof(c->token), "%s", tok);
    snprintf(c->auth, sizeof(c->auth), "Bearer %s", tok);
    json_decref(j);
    chats_made++;
    break;
  }
  case REQ_EVENTS:
    die("an event stream ended");
    break;
  case REQ_RESULT:
    if (r->status != 200) {
      fprintf(stderr, "result %d %s\n", r->status, r->resp ? r->resp : "");
      exit(1);
    }
    break;
  case REQ_RUN: {
    double ms = (double)(now_ns() - r->t0) / 1e6;
    if (r->status != 201 || r->resp == NULL || strstr(r->resp, "\"status\":\"ok\"") == NULL) {
      fprintf(stderr, "run: %d %.200s\n", r->status, r->resp ? r->resp : "");
      exit(1);
    }
    if (lat_n == lat_cap) {
      lat_cap = lat_cap ? lat_cap * 2 : 4096;
      lat = realloc(lat, lat_cap * sizeof(*lat));
      if (lat == NULL)
        die("out of memory");
    }
    lat[lat_n++] = ms;
    runs_inflight--;
    runs_done++;
    if (loaded_active && now_ns() < loaded_end)
      start_run(r->assistant);
    break;
  }
  }
  free(r->body);
  free(r->resp);
  free(r);
}

/* ---- nghttp2 callbacks ------------------------------------------------------------------- */

static ssize_t on_send(nghttp2_session *h2, const uint8_t *data, size_t len, int flags, void *ud) {
  (void)h2, (void)flags;
  struct sess *s = ud;
  ssize_t n = send(s->fd, data, len, MSG_NOSIGNAL);
  if (n < 0)
    return errno == EAGAIN || errno == EWOULDBLOCK ? NGHTTP2_ERR_WOULDBLOCK : NGHTTP2_ERR_CALLBACK_FAILURE;
  return n;
}

static int on_header(nghttp2_session *h2, const nghttp2_frame *f, const uint8_t *name, size_t nl,
                     const uint8_t *value, size_t vl, uint8_t flags, void *ud) {
  (void)flags, (void)ud, (void)vl;
  if (f->hd.type != NGHTTP2_HEADERS || nl != 7 || memcmp(name, ":status", 7) != 0)
    return 0;
  struct req *r = nghttp2_session_get_stream_user_data(h2, f->hd.stream_id);
  if (r) {
    r->status = atoi((const char *)value);
    if (r->kind == REQ_EVENTS) {
      if (r->status != 200)
        die("event stream refused");
      pages_attached++;
    }
  }
  return 0;
}

static int on_data(nghttp2_session *h2, uint8_t flags, int32_t sid, const uint8_t *d, size_t n, void *ud) {
  (void)flags, (void)ud;
  struct req *r = nghttp2_session_get_stream_user_data(h2, sid);
  if (r == NULL)
    return 0;
  if (r->kind == REQ_EVENTS)
    on_events_data(r, d, n);
  else
    append(r, d, n);
  return 0;
}

static int on_close(nghttp2_session *h2, int32_t sid, uint32_t code, void *ud) {
  (void)ud;
  struct req *r = nghttp2_session_get_stream_user_data(h2, sid);
  if (r == NULL)
    return 0;
  if (code != 0) {
    fprintf(stderr, "runs_load: stream reset (code %u) kind %d\n", code, r->kind);
    exit(1);
  }
  req_done(r);
  return 0;
}

static void sess_open(struct sess *s) {
  s->fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (s->fd < 0 || connect(s->fd, (struct sockaddr *)&a, sizeof(a)) != 0)
    die("connect failed");
  int one = 1;
  setsockopt(s->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  fcntl(s->fd, F_SETFL, fcntl(s->fd, F_GETFL) | O_NONBLOCK);
  nghttp2_session_callbacks *cb;
  nghttp2_session_callbacks_new(&cb);
  nghttp2_session_callbacks_set_send_callback(cb, on_send);
  nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_close);
  nghttp2_session_client_new(&s->h2, cb, s);
  nghttp2_session_callbacks_del(cb);
  nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 100},
                                 {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 24}};
  nghttp2_submit_settings(s->h2, NGHTTP2_FLAG_NONE, iv, 2);
  nghttp2_session_set_local_window_size(s->h2, NGHTTP2_FLAG_NONE, 0, 1 << 26);
}

/* One round of the loop: send what is pending, wait up to timeout_ms, receive. */
static void pump(int timeout_ms) {
  struct pollfd pf[MAX_SESS];
  for (int i = 0; i < n_sess; i++) {
    if (nghttp2_session_send(sessions[i].h2) != 0)
      die("session send failed");
    pf[i].fd = sessions[i].fd;
    pf[i].events = POLLIN | (nghttp2_session_want_write(sessions[i].h2) ? POLLOUT : 0);
    pf[i].revents = 0;
  }
  int n = poll(pf, (nfds_t)n_sess, timeout_ms);
  if (n < 0 && errno != EINTR)
    die("poll failed");
  static uint8_t buf[256 * 1024];
  for (int i = 0; i < n_sess && n > 0; i++) {
    if (!(pf[i].revents & (POLLIN | POLLERR | POLLHUP)))
      continue;
    for (;;) {
      ssize_t r = recv(pf[i].fd, buf, sizeof(buf), 0);
      if (r == 0)
        die("server closed a connection");
      if (r < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK)
          break;
        die("recv failed");
      }
      if (nghttp2_session_mem_recv(sessions[i].h2, buf, (size_t)r) < 0)
        die("h2 protocol error");
      if ((size_t)r < sizeof(buf))
        break;
    }
  }
}

/* ---- measurement ------------------------------------------------------------------------- */

static long cpu_ticks(void) {
  char path[64], b[2048];
  snprintf(path, sizeof(path), "/proc/%d/stat", server_pid);
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return 0;
  size_t n = fread(b, 1, sizeof(b) - 1, f);
  fclose(f);
  b[n] = '\0';
  char *p = strrchr(b, ')');
  long ut = 0, st = 0;
  if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %ld %ld", &ut, &st) == 2)
    return ut + st;
  return 0;
}

static double self_cpu_us(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec * 1e6 + (double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_sec * 1e6 +
         (double)ru.ru_stime.tv_usec;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static char *summary(const char *name, double ms, long t0, long t1, double self0, double self1) {
  qsort(lat, lat_n, sizeof(*lat), cmp_d);
  size_t n = lat_n ? lat_n : 1;
  long hz = sysconf(_SC_CLK_TCK);
  double cpu_us = (double)(t1 - t0) * 1e6 / (double)hz / (double)n;
  size_t i50 = (size_t)(lat_n * 0.5), i99 = (size_t)(lat_n * 0.99);
  if (i50 >= n) i50 = n - 1;
  if (i99 >= n) i99 = n - 1;
  char *line = NULL;
  if (asprintf(&line,
               "{\"phase\":\"%s\",\"runs\":%zu,\"runs_per_s\":%.1f,\"p50_ms\":%.3f,\"p99_ms\":%.3f,"
               "\"max_ms\":%.3f,\"server_cpu_us_per_run\":%.1f,\"client_cpu_us_per_run\":%.1f}",
               name, lat_n, (double)lat_n / (ms / 1000), lat_n ? lat[i50] : 0, lat_n ? lat[i99] : 0,
               lat_n ? lat[lat_n - 1] : 0, cpu_us, (self1 - self0) / (double)n) < 0)
    die("out of memory");
  puts(line);
  fflush(stdout);
  return line;
}

int main(int argc, char **argv) {
  const char *key = NULL;
  int assistants = 64, low = 2000;
  double duration = 10;
  n_chats = 1000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--port")) port = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--key")) key = argv[i + 1];
    else if (!strcmp(argv[i], "--server-pid")) server_pid = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--chats")) n_chats = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--assistants")) assistants = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--duration")) duration = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--low")) low = atoi(argv[i + 1]);
    else { fprintf(stderr, "unknown option %s\n", argv[i]); return 2; }
  }
  if (!port || !key || n_chats < 1 || assistants < 1 || assistants > 1024)
    die("usage: runs_load --port P --key K --server-pid PID [--chats N] [--assistants M] [--duration S] [--low N]");
  snprintf(key_auth, sizeof(key_auth), "Bearer %s", key);
  chats = calloc((size_t)n_chats, sizeof(*chats));
  int page_sess = (n_chats + PER_SESSION - 1) / PER_SESSION;
  int as_sess = (assistants + PER_SESSION - 1) / PER_SESSION;
  n_sess = page_sess + as_sess;
  if (chats == NULL || n_sess > MAX_SESS)
    die("too many chats or assistants");
  for (int i = 0; i < n_sess; i++)
    sess_open(&sessions[i]);
  /* chats, 50 at a time on the first assistant session */
  struct sess *admin = &sessions[n_sess - 1];
  for (int i = 0; i < n_chats; i += PER_SESSION) {
    int want = i + PER_SESSION < n_chats ? i + PER_SESSION : n_chats;
    for (int k = i; k < want; k++)
      submit(admin, new_req(REQ_CHAT, k, "{}"), "POST", "/v1/chats", key_auth);
    while (chats_made < want)
      pump(1000);
  }
  /* pages */
  for (int i = 0; i < n_chats; i++) {
    char path[160];
    snprintf(path, sizeof(path), "/v1/chats/%s/events?page_id=bench", chats[i].id);
    chats[i].page = &sessions[i / PER_SESSION];
    submit(chats[i].page, new_req(REQ_EVENTS, i, NULL), "GET", path, chats[i].auth);
  }
  while (pages_attached < n_chats)
    pump(1000);
  printf("{\"chats\":%d,\"pages_attached\":%d,\"page_sessions\":%d,\"client\":\"c\"}\n", n_chats,
         pages_attached, page_sess);
  fflush(stdout);
  /* warm-up, then low load: one assistant, sequential */
  n_assist = 1;
  for (int i = 0; i < 50; i++) {
    start_run(0);
    while (runs_inflight)
      pump(1000);
  }
  lat_n = 0;
  long c0 = cpu_ticks();
  double s0 = self_cpu_us();
  uint64_t t0 = now_ns();
  for (int i = 0; i < low; i++) {
    start_run(0);
    while (runs_inflight)
      pump(1000);
  }
  char *lo = summary("low_load_1_assistant", (double)(now_ns() - t0) / 1e6, c0, cpu_ticks(), s0, self_cpu_us());
  /* loaded: M assistants, each on its own chats (runs of one chat are sequential by design) */
  n_assist = assistants;
  for (int a = 0; a < assistants; a++)
    assist_next[a] = a;
  lat_n = 0;
  c0 = cpu_ticks();
  s0 = self_cpu_us();
  t0 = now_ns();
  loaded_end = t0 + (uint64_t)(duration * 1e9);
  loaded_active = 1;
  for (int a = 0; a < assistants; a++)
    start_run(a);
  while (runs_inflight)
    pump(1000);
  char name[64];
  snprintf(name, sizeof(name), "loaded_%d_assistants", assistants);
  char *ld = summary(name, (double)(now_ns() - t0) / 1e6, c0, cpu_ticks(), s0, self_cpu_us());
  printf("{\"result\":{\"low\":%s,\"loaded\":%s}}\n", lo, ld);
  free(lo);
  free(ld);
  return 0;
}
