/* proxy.c -- an HTTP client on the orchestrator's loop, for nodes (nodes.c): a request for a chat
 * another node serves is forwarded to that node and its answer streamed back as it comes; and a
 * node's check, at start, that its CEREA_NODE_URL reaches it.  libcurl's multi interface does the
 * HTTP; this file only connects it to libuv (a uv_poll_t per socket curl opens, one uv_timer_t for
 * curl's timeouts) and to the transport.
 *
 * Forwarding: the method, the target (path and query as received), the headers that carry meaning
 * (Authorization, Content-Type, Last-Event-ID, Accept, Range, If-None-Match, If-Range,
 * User-Agent, MCP's Mcp-Session-Id and MCP-Protocol-Version, and the client's Host, which the
 * owner's links name) and the body (the buffered one, or a streamed upload's stage read back from
 * its temp file) go to the owner with X-Cerea-Node naming this node, so that the owner never
 * forwards it again.  The owner's status and headers (not the hop-by-hop ones, nor Date and
 * Server, which the transport sets) start the client's answer; its body follows piece by piece:
 * an event stream's events as the owner sends them, a download's bytes.  Backpressure: when the client's queue is
 * full (tp_stream_write: SBX_EAGAIN) the transfer is paused (the piece stays with curl) until the
 * client drained (tp_stream_on_drain), so a slow client costs one queue, not the whole answer.
 * The owner not answering before its head came (refused, timed out, reset) is answered 503
 * `unavailable` with Retry-After (the client tries again; the chat's lease expires meanwhile and
 * another node takes it over); a failure after the head ends the answer where it is (an event
 * stream's client reconnects with Last-Event-ID).  The client leaving ends the transfer.
 *
 * An owner that is there but does not answer (stopped, wedged: its kernel still accepts the
 * connection and takes the request) must not hold the client for as long as TCP would: a call
 * may rightly wait long for its head (`wait_s` up to 600 s, a tool call), so there is no bound
 * on the head itself; instead, while the head has not begun, the owner is asked `GET /v1/node`
 * every PX_PROBE_EVERY_MS, and one that does not answer that within PX_PROBE_MS (half the lease,
 * at least 1 s: a node that cannot answer that long is about to lose its leases anyway) ends the
 * forward 503 with Retry-After.  So a stopped owner is answered for within about
 * PX_PROBE_EVERY_MS + lease/2 (6.5 s by default), a live one waits as long as the call does.
 *
 * What it does not do: decide where a request goes (nodes.c), or look inside the answers.
 */
#include "api_reply.h"
#include "proxy.h"
#include "transport.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define PX_HEAD_MAX       (16u * 1024) /* the owner's response head, at most */
#define PX_CONNECT_MS     3000
#define PX_GET_BODY       4096 /* an internal GET's body, at most */
#define PX_PROBE_EVERY_MS 1500 /* while a forward waits for its head: the owner asked this often */

struct orch_proxy {
  struct orch *o;
  CURLM *multi;
  uv_timer_t *timer; /* freed in its close callback */
  struct sbx_list xfers;
  int in_curl; /* inside curl_multi_socket_action: transfers are not removed there */
};

struct px_sock {
  uv_poll_t poll;
  curl_socket_t fd;
  struct orch_proxy *px;
};

struct px_xfer {
  struct sbx_list link;
  struct orch_proxy *px;
  CURL *easy;
  struct curl_slist *headers;
  struct tp_req *req; /* forwarded: held until the answer ended; NULL for an internal GET */
  char *url;
  int fd;                         /* a staged body's temp file, or -1 */
  struct store_blob_stage *stage; /* its stage, aborted when the transfer ends */
  int status;
  int64_t clen;        /* the owner's Content-Length, or -1 */
  struct sbx_buf head; /* the owner's headers to pass on (Content-Length aside) */
  int started;         /* the client's answer has begun */
  int paused;
  int gone;         /* the client left */
  uint64_t retry_s; /* Retry-After of a 503 */
  char chat_id[STORE_ID_LEN + 1];
  /* internal GET */
  orch_proxy_get_cb get_cb;
  void *get_ud;
  struct sbx_buf body;
  /* a forward: the owner's liveness while its head has not begun (probe_owner) */
  char *base_url;
  uv_timer_t *probe_timer;  /* freed in its close callback */
  struct px_xfer *probe;    /* the GET /v1/node out now, or NULL */
  struct px_xfer *probe_of; /* on that GET: the forward it checks for (NULL once it left) */
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static int curl_ok;
static void curl_init(void) { curl_ok = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK; }

static void on_closed_free(uv_handle_t *h) { sbx_free(h); }

/* ---- libuv <-> curl -------------------------------------------------------------------------- */

static void check_done(struct orch_proxy *px);

static void socket_action(struct orch_proxy *px, curl_socket_t fd, int flags) {
  int running = 0;
  px->in_curl++;
  curl_multi_socket_action(px->multi, fd, flags, &running);
  px->in_curl--;
  check_done(px);
}

static void on_poll(uv_poll_t *h, int status, int events) {
  struct px_sock *ps = h->data;
  int flags = status < 0 ? CURL_CSELECT_ERR : 0;
  if (events & UV_READABLE)
    flags |= CURL_CSELECT_IN;
  if (events & UV_WRITABLE)
    flags |= CURL_CSELECT_OUT;
  socket_action(ps->px, ps->fd, flags);
}

static int on_curl_socket(CURL *e, curl_socket_t s, int what, void *userp, void *socketp) {
  (void)e;
  struct orch_proxy *px = userp;
  struct px_sock *ps = socketp;
  if (what == CURL_POLL_REMOVE) {
    if (ps) {
      uv_poll_stop(&ps->poll);
      curl_multi_assign(px->multi, s, NULL);
      uv_close((uv_handle_t *)&ps->poll, on_closed_free);
    }
    return 0;
  }
  if (ps == NULL) {
    if ((ps = sbx_calloc(1, sizeof *ps)) == NULL)
      return -1;
    if (uv_poll_init_socket(px->o->loop, &ps->poll, s) != 0) {
      sbx_free(ps);
      return -1;
    }
    ps->fd = s;
    ps->px = px;
    ps->poll.data = ps;
    curl_multi_assign(px->multi, s, ps);
  }
  int ev = (what & CURL_POLL_IN ? UV_READABLE : 0) | (what & CURL_POLL_OUT ? UV_WRITABLE : 0);
  uv_poll_start(&ps->poll, ev, on_poll);
  return 0;
}

static void on_timer(uv_timer_t *t) { socket_action(t->data, CURL_SOCKET_TIMEOUT, 0); }

static int on_curl_timer(CURLM *m, long timeout_ms, void *userp) {
  (void)m;
  struct orch_proxy *px = userp;
  if (timeout_ms < 0)
    uv_timer_stop(px->timer);
  else
    uv_timer_start(px->timer, on_timer, (uint64_t)timeout_ms, 0);
  return 0;
}

/* ---- transfers ------------------------------------------------------------------------------- */

static void xfer_free(struct px_xfer *x) {
  if (x->probe)
    x->probe->probe_of = NULL; /* its answer comes for nobody */
  if (x->probe_of)
    x->probe_of->probe = NULL;
  if (x->probe_timer) {
    uv_timer_stop(x->probe_timer);
    uv_close((uv_handle_t *)x->probe_timer, on_closed_free);
  }
  sbx_free(x->base_url);
  if (x->easy) {
    curl_multi_remove_handle(x->px->multi, x->easy);
    curl_easy_cleanup(x->easy);
  }
  curl_slist_free_all(x->headers);
  if (x->fd >= 0)
    close(x->fd);
  store_blob_stage_abort(x->stage);
  sbx_buf_free(&x->head);
  sbx_buf_free(&x->body);
  sbx_free(x->url);
  sbx_list_remove(&x->link);
  sbx_free(x);
}

/* The client's answer for a transfer that failed before the owner's head came: 503 with
 * Retry-After (when the chat's lease will have expired, at the latest). */
static void answer_unavailable(struct px_xfer *x, const char *why) {
  char h[128], msg[600];
  snprintf(h, sizeof h, "Content-Type: application/json\r\nRetry-After: %llu\r\n",
           (unsigned long long)SBX_MAX(x->retry_s, 1));
  snprintf(msg, sizeof msg,
           "chat %s is served by another node, which does not answer (%s); "
           "try again",
           x->chat_id, why);
  json_t *j = json_pack("{s:{s:s,s:s}}", "error", "code", "unavailable", "message", msg);
  size_t len = 0;
  char *text = j ? orch__json_dump(j, &len) : NULL;
  json_decref(j);
  if (text)
    tp_respond(x->req, 503, h, text, len);
  else
    tp_respond_error(x->req, 503, "unavailable", "another node serves this chat");
  sbx_free(text);
}

static void forget_client(struct px_xfer *x) {
  tp_req_on_close(x->req, NULL, NULL);
  tp_stream_on_drain(x->req, NULL, NULL);
  tp_req_release(x->req);
  x->req = NULL;
}

/* A transfer ended (its result from curl). */
static void xfer_done(struct px_xfer *x, CURLcode res) {
  if (x->req == NULL) { /* an internal GET */
    long code = 0;
    curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &code);
    x->get_cb(x->get_ud, res == CURLE_OK ? (int)code : 0,
              res == CURLE_OK ? "" : curl_easy_strerror(res), x->body.data ? x->body.data : "",
              x->body.len);
  } else if (!x->gone) {
    if (!x->started && res != CURLE_OK)
      answer_unavailable(x, curl_easy_strerror(res));
    else if (!x->started && sbx_buf_append(&x->head, "", 1) == 0) /* no body: its head alone */
      tp_respond(x->req, x->status ? x->status : 502, x->head.data, NULL, 0);
    else if (!x->started)
      tp_respond_error(x->req, 502, "internal", "out of memory");
    else
      tp_stream_end(x->req);
  }
  if (x->req)
    forget_client(x);
  xfer_free(x);
}

static void check_done(struct orch_proxy *px) {
  if (px->in_curl)
    return;
  CURLMsg *m;
  int left;
  while ((m = curl_multi_info_read(px->multi, &left)) != NULL) {
    if (m->msg != CURLMSG_DONE)
      continue;
    struct px_xfer *x = NULL;
    curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&x);
    xfer_done(x, m->data.result);
  }
}

/* Each line of the owner's head: the status line, then headers kept or dropped. */
static size_t on_header(char *p, size_t size, size_t n, void *ud) {
  struct px_xfer *x = ud;
  size_t len = size * n;
  if (len >= 5 && strncmp(p, "HTTP/", 5) == 0) { /* a new head (after a 100 Continue, too) */
    sbx_buf_reset(&x->head);
    const char *sp = memchr(p, ' ', len);
    x->status = sp ? atoi(sp + 1) : 0;
    x->clen = -1;
    return len;
  }
  if (len > 15 && strncasecmp(p, "content-length:", 15) == 0) { /* the transport writes it */
    x->clen = strtoll(p + 15, NULL, 10);
    return len;
  }
  static const char *const drop[] = {"connection:", "keep-alive:", "transfer-encoding:",
                                     "date:",       "server:",     "proxy-",
                                     "upgrade:",    "te:",         "trailer:"};
  for (size_t i = 0; i < SBX_ARRAY_SIZE(drop); i++)
    if (strncasecmp(p, drop[i], strlen(drop[i])) == 0)
      return len;
  if (len <= 2) /* the blank line that ends the head */
    return len;
  if (x->head.len + len > PX_HEAD_MAX || sbx_buf_append(&x->head, p, len) != 0)
    return 0; /* too big: the transfer fails */
  return len;
}

/* Starts the client's answer with the owner's status and headers (once). */
static int start_answer(struct px_xfer *x) {
  if (x->started)
    return 0;
  x->started = 1;
  if ((x->clen >= 0 && sbx_buf_appendf(&x->head, "Content-Length: %lld\r\n", (long long)x->clen)) ||
      sbx_buf_append(&x->head, "", 1) != 0) /* NUL-terminated for the transport */
    return SBX_ENOMEM;
  x->head.len--;
  return tp_stream_start(x->req, x->status ? x->status : 502, x->head.data);
}

static size_t on_body(char *p, size_t size, size_t n, void *ud) {
  struct px_xfer *x = ud;
  size_t len = size * n;
  if (x->req == NULL) { /* an internal GET: a little of it kept */
    if (x->body.len + len <= PX_GET_BODY)
      sbx_buf_append(&x->body, p, len);
    return len;
  }
  if (x->gone || start_answer(x) != 0)
    return 0; /* ends the transfer */
  int rc = tp_stream_write(x->req, p, len);
  if (rc == SBX_EAGAIN) {
    x->paused = 1;
    return CURL_WRITEFUNC_PAUSE; /* the piece stays with curl until the client drains */
  }
  return rc == 0 ? len : 0;
}

static void on_client_drain(struct tp_req *req, void *ud) {
  (void)req;
  struct px_xfer *x = ud;
  if (x->paused) {
    x->paused = 0;
    curl_easy_pause(x->easy, CURLPAUSE_CONT);
  }
}

static void on_client_gone(struct tp_req *req, void *ud) {
  (void)req;
  struct px_xfer *x = ud;
  x->gone = 1;
  if (x->paused) { /* a paused transfer makes no progress by itself: let it fail now */
    x->paused = 0;
    curl_easy_pause(x->easy, CURLPAUSE_CONT);
  }
}

static size_t on_read_body(char *p, size_t size, size_t n, void *ud) {
  struct px_xfer *x = ud;
  ssize_t r = read(x->fd, p, size * n);
  return r < 0 ? CURL_READFUNC_ABORT : (size_t)r;
}

static struct px_xfer *xfer_new(struct orch_proxy *px, const char *url) {
  struct px_xfer *x = sbx_calloc(1, sizeof *x);
  if (x == NULL)
    return NULL;
  SBX_LIST_INIT(&x->link);
  x->px = px;
  x->fd = -1;
  x->clen = -1;
  sbx_buf_init(&x->head, PX_HEAD_MAX + 1);
  sbx_buf_init(&x->body, PX_GET_BODY + 1);
  if ((x->url = sbx_strdup(url)) == NULL || (x->easy = curl_easy_init()) == NULL) {
    xfer_free(x);
    return NULL;
  }
  curl_easy_setopt(x->easy, CURLOPT_URL, x->url);
  curl_easy_setopt(x->easy, CURLOPT_PRIVATE, x);
  curl_easy_setopt(x->easy, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(x->easy, CURLOPT_CONNECTTIMEOUT_MS, (long)PX_CONNECT_MS);
  curl_easy_setopt(x->easy, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(x->easy, CURLOPT_HEADERDATA, x);
  curl_easy_setopt(x->easy, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(x->easy, CURLOPT_WRITEDATA, x);
  curl_easy_setopt(x->easy, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(x->easy, CURLOPT_FOLLOWLOCATION, 0L);
  sbx_list_insert_tail(&px->xfers, &x->link);
  return x;
}

static int xfer_start(struct px_xfer *x) {
  curl_easy_setopt(x->easy, CURLOPT_HTTPHEADER, x->headers);
  return curl_multi_add_handle(x->px->multi, x->easy) == CURLM_OK ? 0 : SBX_ENOMEM;
}

/* ---- the owner's liveness while a forward waits for its head ------------------------------- */

static uint64_t probe_ms(const struct orch_proxy *px) {
  return SBX_MAX(px->o->cfg->lease_ms / 2, 1000);
}

static void on_probe_timer(uv_timer_t *t);

/* The owner's answer to GET /v1/node (from xfer_done, outside curl): alive, the forward waits on
 * and is checked again later; silent, the forward ends 503 now. */
static void on_probe(void *ud, int status, const char *error, const char *body, size_t len) {
  (void)body;
  (void)len;
  struct px_xfer *p = ud, *x = p->probe_of;
  if (x == NULL)
    return; /* the forward ended meanwhile */
  x->probe = NULL;
  p->probe_of = NULL;
  if (x->status != 0)
    return;          /* its head began meanwhile */
  if (status != 0) { /* it answers (whatever it says): the call may rightly take long */
    uv_timer_start(x->probe_timer, on_probe_timer, PX_PROBE_EVERY_MS, 0);
    return;
  }
  char why[300];
  snprintf(why, sizeof why, "its node did not answer GET /v1/node within %llu ms: %s",
           (unsigned long long)probe_ms(x->px), error);
  sbx_log(SBX_LOG_WARN, "proxy", "forward for chat %s given up: %s", x->chat_id, why);
  if (!x->gone)
    answer_unavailable(x, why);
  forget_client(x);
  xfer_free(x); /* its transfer leaves the multi handle */
}

static void on_probe_timer(uv_timer_t *t) {
  struct px_xfer *x = t->data, *p;
  char url[2100];
  if (x->status != 0 || x->probe != NULL)
    return;
  snprintf(url, sizeof url, "%s/v1/node", x->base_url);
  if ((p = xfer_new(x->px, url)) == NULL) {
    uv_timer_start(t, on_probe_timer, PX_PROBE_EVERY_MS, 0); /* out of memory: later */
    return;
  }
  p->get_cb = on_probe;
  p->get_ud = p;
  p->probe_of = x;
  curl_easy_setopt(p->easy, CURLOPT_TIMEOUT_MS, (long)probe_ms(x->px));
  if (xfer_start(p) != 0) {
    p->probe_of = NULL;
    xfer_free(p);
    uv_timer_start(t, on_probe_timer, PX_PROBE_EVERY_MS, 0);
    return;
  }
  x->probe = p;
}

/* Starts checking on the owner of forward x, PX_PROBE_EVERY_MS from now. */
static int probe_owner(struct px_xfer *x, const char *base_url) {
  if ((x->base_url = sbx_strdup(base_url)) == NULL ||
      (x->probe_timer = sbx_malloc(sizeof *x->probe_timer)) == NULL)
    return SBX_ENOMEM;
  uv_timer_init(x->px->o->loop, x->probe_timer);
  x->probe_timer->data = x;
  uv_timer_start(x->probe_timer, on_probe_timer, PX_PROBE_EVERY_MS, 0);
  return 0;
}

int orch__proxy_forward(struct orch_proxy *px, struct tp_req *req, const char *base_url,
                        const char *chat_id, const char *node_id, uint64_t retry_ms,
                        struct store_blob_stage **stage) {
  char url[2048];
  snprintf(url, sizeof url, "%s%s", base_url, tp_req_target(req));
  struct px_xfer *x = xfer_new(px, url);
  if (x == NULL)
    return SBX_ENOMEM;
  x->req = req;
  x->retry_s = (retry_ms + 999) / 1000;
  snprintf(x->chat_id, sizeof x->chat_id, "%s", chat_id);
  static const char *const pass[] = {
      "authorization", "content-type", "last-event-id", "accept",         "range",
      "if-none-match", "if-range",     "user-agent",    "mcp-session-id", "mcp-protocol-version",
      "mcp-method",    "mcp-name"};
  char line[9000];
  int ok = 1;
  for (size_t i = 0; ok && i < SBX_ARRAY_SIZE(pass); i++) {
    const char *v = tp_req_header(req, pass[i]);
    if (v == NULL)
      continue;
    snprintf(line, sizeof line, "%s: %s", pass[i], v);
    struct curl_slist *l = curl_slist_append(x->headers, line);
    ok = l != NULL;
    x->headers = l ? l : x->headers;
  }
  /* the client's Host, so that the links the owner makes (a result's files, a chat key's
   * mcp_url) name the host the client reached, not the owner's node URL */
  const char *host = tp_req_header(req, "host");
  if (host == NULL)
    host = tp_req_header(req, ":authority");
  if (ok && orch__host_ok(host)) {
    snprintf(line, sizeof line, "Host: %s", host);
    struct curl_slist *l = curl_slist_append(x->headers, line);
    ok = l != NULL;
    x->headers = l ? l : x->headers;
  }
  snprintf(line, sizeof line, "X-Cerea-Node: %s", node_id);
  struct curl_slist *l = ok ? curl_slist_append(x->headers, line) : NULL;
  l = l ? curl_slist_append(l, "Expect:") : NULL; /* no 100-continue round trip */
  if (l == NULL) {
    xfer_free(x);
    return SBX_ENOMEM;
  }
  x->headers = l;
  const char *method = tp_req_method(req);
  size_t blen = 0;
  const char *body = tp_req_body(req, &blen);
  if (stage && *stage) { /* a streamed upload, read back from its stage */
    struct sbx_error err;
    char sha[65];
    int fd = store_blob_stage_finish(*stage, sha, &err) == 0
                 ? open(store_blob_stage_path(*stage), O_RDONLY | O_CLOEXEC)
                 : -1;
    if (fd < 0) {
      xfer_free(x);
      return SBX_EIO;
    }
    x->fd = fd;
    x->stage = *stage;
    *stage = NULL;
    curl_easy_setopt(x->easy, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(x->easy, CURLOPT_READFUNCTION, on_read_body);
    curl_easy_setopt(x->easy, CURLOPT_READDATA, x);
    curl_easy_setopt(x->easy, CURLOPT_INFILESIZE_LARGE,
                     (curl_off_t)store_blob_stage_size(x->stage));
    curl_easy_setopt(x->easy, CURLOPT_CUSTOMREQUEST, method);
  } else if (strcmp(method, "GET") == 0) {
    curl_easy_setopt(x->easy, CURLOPT_HTTPGET, 1L);
  } else if (strcmp(method, "HEAD") == 0) {
    curl_easy_setopt(x->easy, CURLOPT_NOBODY, 1L);
  } else { /* POST, PUT, PATCH, DELETE with the buffered body (kept by the held request) */
    curl_easy_setopt(x->easy, CURLOPT_POSTFIELDS, body ? body : "");
    curl_easy_setopt(x->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)blen);
    curl_easy_setopt(x->easy, CURLOPT_CUSTOMREQUEST, method);
  }
  if (probe_owner(x, base_url) != 0) {
    xfer_free(x);
    return SBX_ENOMEM;
  }
  tp_req_hold(req);
  tp_req_on_close(req, on_client_gone, x);
  tp_stream_on_drain(req, on_client_drain, x);
  if (xfer_start(x) != 0) {
    forget_client(x);
    xfer_free(x);
    return SBX_ENOMEM;
  }
  return 0;
}

int orch__proxy_get(struct orch_proxy *px, const char *url, uint64_t timeout_ms,
                    orch_proxy_get_cb cb, void *ud) {
  struct px_xfer *x = xfer_new(px, url);
  if (x == NULL)
    return SBX_ENOMEM;
  x->get_cb = cb;
  x->get_ud = ud;
  curl_easy_setopt(x->easy, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
  if (xfer_start(x) != 0) {
    xfer_free(x);
    return SBX_ENOMEM;
  }
  return 0;
}

int orch__proxy_new(struct orch *o, struct orch_proxy **out, struct sbx_error *err) {
  pthread_once(&curl_once, curl_init);
  if (!curl_ok)
    return sbx_error_set(err, SBX_EIO, "libcurl could not be initialised");
  struct orch_proxy *px = sbx_calloc(1, sizeof *px);
  if (px == NULL || (px->timer = sbx_malloc(sizeof *px->timer)) == NULL ||
      (px->multi = curl_multi_init()) == NULL) {
    if (px)
      sbx_free(px->timer);
    sbx_free(px);
    return sbx_error_set(err, SBX_ENOMEM, "proxy: out of memory");
  }
  px->o = o;
  SBX_LIST_INIT(&px->xfers);
  uv_timer_init(o->loop, px->timer);
  px->timer->data = px;
  curl_multi_setopt(px->multi, CURLMOPT_SOCKETFUNCTION, on_curl_socket);
  curl_multi_setopt(px->multi, CURLMOPT_SOCKETDATA, px);
  curl_multi_setopt(px->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer);
  curl_multi_setopt(px->multi, CURLMOPT_TIMERDATA, px);
  *out = px;
  return 0;
}

void orch__proxy_free(struct orch_proxy *px) {
  if (px == NULL)
    return;
  struct sbx_list *it, *tmp;
  SBX_LIST_FOREACH_SAFE(it, tmp, &px->xfers) {
    struct px_xfer *x = SBX_CONTAINER_OF(it, struct px_xfer, link);
    if (x->req) { /* the server is closing: the client's answer ends here */
      if (!x->gone && x->started)
        tp_stream_end(x->req);
      else if (!x->gone)
        tp_respond_error(x->req, 503, "unavailable", "the node is shutting down");
      forget_client(x);
    }
    xfer_free(x);
  }
  curl_multi_cleanup(px->multi); /* its sockets' REMOVE callbacks close their polls */
  uv_close((uv_handle_t *)px->timer, on_closed_free);
  sbx_free(px);
}
