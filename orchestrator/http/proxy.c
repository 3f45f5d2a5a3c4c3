/* proxy.c -- an HTTP client on the orchestrator's loop, for nodes (nodes.c): a request for a chat
 * another node serves is forwarded to that node and its answer streamed back as it comes; and a
 * node's check, at start, that its CEREA_NODE_URL reaches it.  The HTTP is the transport's client
 * (transport/http_client.c: libcurl on the loop); this file connects its transfers to the
 * requests they answer.
 *
 * Forwarding: the method, the target (path and query as received), the headers that carry meaning
 * (Authorization, Content-Type, Last-Event-ID, Accept, Range, If-None-Match, If-Range,
 * User-Agent, MCP's Mcp-Session-Id, MCP-Protocol-Version, Mcp-Method and Mcp-Name, and the
 * client's Host, which the owner's links name) and the body (the buffered one, or a streamed
 * upload's stage read back from its temp file) go to the owner with X-Cerea-Node naming this node, so that the owner never
 * forwards it again.  The owner's status and headers (not the hop-by-hop ones, nor Date and
 * Server, which the transport sets) start the client's answer; its body follows piece by piece:
 * an event stream's events as the owner sends them, a download's bytes.  Backpressure: when the
 * client's queue is full (tp_stream_write: SBX_EAGAIN) the transfer is paused (the piece stays
 * with the client) until the client drained (tp_stream_on_drain), so a slow client costs one queue, not the whole answer.
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
#include "http_client.h"
#include "proxy.h"
#include "transport.h"

#include <fcntl.h>
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
  struct tp_http_client *hc;
  struct sbx_list xfers;
};

struct px_xfer {
  struct sbx_list link;
  struct orch_proxy *px;
  struct tp_http_xfer *hx; /* NULL once it ended */
  struct tp_req *req;      /* forwarded: held until the answer ended; NULL for an internal GET */
  int fd;                  /* a staged body's temp file, or -1 */
  struct store_blob_stage *stage; /* its stage, aborted when the transfer ends */
  int status;                     /* the owner's, once its head came */
  int64_t clen;                   /* the owner's Content-Length, or -1 */
  struct sbx_buf head;            /* the owner's headers to pass on (Content-Length aside) */
  int started;                    /* the client's answer has begun */
  int paused;
  int in_body;      /* inside on_body: a client that leaves now is let go by on_body's refusal */
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

static void on_closed_free(uv_handle_t *h) { sbx_free(h); }

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
  tp_http_cancel(x->hx); /* (NULL: it ended, and the client freed it) */
  if (x->fd >= 0)
    close(x->fd);
  store_blob_stage_abort(x->stage);
  sbx_buf_free(&x->head);
  sbx_buf_free(&x->body);
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

/* A transfer ended (the client's on_done; it frees its transfer after). */
static void on_done(void *ud, enum tp_http_end end, int status, const char *why) {
  struct px_xfer *x = ud;
  x->hx = NULL;
  if (x->get_cb) { /* an internal GET */
    x->get_cb(x->get_ud, end == TP_HTTP_OK ? status : 0, why, x->body.data ? x->body.data : "",
              x->body.len);
  } else if (x->gone) {
    /* nobody to answer */
  } else if (!x->started && end != TP_HTTP_OK) {
    answer_unavailable(x, why);
  } else if (!x->started && sbx_buf_append(&x->head, "", 1) == 0) { /* no body: its head alone */
    tp_respond(x->req, x->status ? x->status : 502, x->head.data, NULL, 0);
  } else if (!x->started) {
    tp_respond_error(x->req, 502, "internal", "out of memory");
  } else {
    tp_stream_end(x->req);
  }
  if (x->req)
    forget_client(x);
  xfer_free(x);
}

/* Each line of the owner's final head: kept, or dropped when hop-by-hop or the transport's. */
static int on_header(void *ud, const char *p, size_t len) {
  struct px_xfer *x = ud;
  if (len > 15 && strncasecmp(p, "content-length:", 15) == 0) { /* the transport writes it */
    x->clen = strtoll(p + 15, NULL, 10);
    return 0;
  }
  static const char *const drop[] = {"connection:", "keep-alive:", "transfer-encoding:",
                                     "date:",       "server:",     "proxy-",
                                     "upgrade:",    "te:",         "trailer:"};
  for (size_t i = 0; i < SBX_ARRAY_SIZE(drop); i++)
    if (strncasecmp(p, drop[i], strlen(drop[i])) == 0)
      return 0;
  if (x->head.len + len > PX_HEAD_MAX || sbx_buf_append(&x->head, p, len) != 0)
    return SBX_ETOOBIG; /* too big: the transfer fails */
  return 0;
}

static int on_head(void *ud, int status, const char *content_type) {
  (void)content_type; /* among the header lines kept */
  struct px_xfer *x = ud;
  x->status = status;
  return 0;
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

static int on_body(void *ud, const char *p, size_t len) {
  struct px_xfer *x = ud;
  if (x->get_cb) { /* an internal GET: a little of it kept */
    if (x->body.len + len <= PX_GET_BODY)
      sbx_buf_append(&x->body, p, len);
    return 0;
  }
  if (x->gone)
    return SBX_ECLOSED;
  x->in_body = 1;
  int rc = start_answer(x);
  if (rc == 0 && (rc = tp_stream_write(x->req, p, len)) == SBX_EAGAIN)
    x->paused = 1; /* the piece stays with the client until ours drains */
  x->in_body = 0;
  return x->gone ? SBX_ECLOSED : rc;
}

static const struct tp_http_cbs px_cbs = {
    .on_head = on_head, .on_body = on_body, .on_done = on_done, .on_header = on_header};

static void on_client_drain(struct tp_req *req, void *ud) {
  (void)req;
  struct px_xfer *x = ud;
  if (x->paused) {
    x->paused = 0;
    tp_http_resume(x->hx);
  }
}

/* The client left: the transfer ends with it (cancelled here, or refused by on_body when it left
 * while on_body wrote to it). */
static void on_client_gone(struct tp_req *req, void *ud) {
  (void)req;
  struct px_xfer *x = ud;
  x->gone = 1;
  forget_client(x);
  if (!x->in_body)
    xfer_free(x);
}

static long on_read_body(void *ud, char *p, size_t cap) {
  struct px_xfer *x = ud;
  ssize_t r = read(x->fd, p, cap);
  return r < 0 ? -1 : (long)r;
}

static struct px_xfer *xfer_new(struct orch_proxy *px) {
  struct px_xfer *x = sbx_calloc(1, sizeof *x);
  if (x == NULL)
    return NULL;
  SBX_LIST_INIT(&x->link);
  x->px = px;
  x->fd = -1;
  x->clen = -1;
  sbx_buf_init(&x->head, PX_HEAD_MAX + 1);
  sbx_buf_init(&x->body, PX_GET_BODY + 1);
  sbx_list_insert_tail(&px->xfers, &x->link);
  return x;
}

static int xfer_start(struct px_xfer *x, struct tp_http_request *rq) {
  rq->connect_ms = PX_CONNECT_MS;
  x->hx = tp_http_start(x->px->hc, rq, &px_cbs, x);
  return x->hx ? 0 : SBX_ENOMEM;
}

/* An internal GET of url within timeout_ms (the check of CEREA_NODE_URL, the owner's probe). */
static struct px_xfer *get_start(struct orch_proxy *px, const char *url, uint64_t timeout_ms,
                                 orch_proxy_get_cb cb, void *ud) {
  struct px_xfer *x = xfer_new(px);
  if (x == NULL)
    return NULL;
  x->get_cb = cb;
  x->get_ud = ud;
  struct tp_http_request rq = {.method = "GET", .url = url, .total_ms = timeout_ms};
  if (xfer_start(x, &rq) != 0) {
    xfer_free(x);
    return NULL;
  }
  return x;
}

/* ---- the owner's liveness while a forward waits for its head ------------------------------- */

static uint64_t probe_ms(const struct orch_proxy *px) {
  return SBX_MAX(px->o->cfg->lease_ms / 2, 1000);
}

static void on_probe_timer(uv_timer_t *t);

/* The owner's answer to GET /v1/node (the probe's on_done): alive, the forward waits on and is
 * checked again later; silent, the forward ends 503 now. */
static void on_probe(void *ud, int status, const char *error, const char *body, size_t len) {
  (void)body;
  (void)len;
  struct px_xfer *p = ud, *x = p->probe_of;
  if (x == NULL)
    return; /* the forward ended meanwhile */
  x->probe = NULL;
  p->probe_of = NULL;
  if (x->status != 0 || x->gone)
    return;          /* its head came meanwhile, or its client left */
  if (status != 0) { /* it answers (whatever it says): the call may rightly take long */
    uv_timer_start(x->probe_timer, on_probe_timer, PX_PROBE_EVERY_MS, 0);
    return;
  }
  char why[300];
  snprintf(why, sizeof why, "its node did not answer GET /v1/node within %llu ms: %s",
           (unsigned long long)probe_ms(x->px), error);
  sbx_log(SBX_LOG_WARN, "proxy", "forward for chat %s given up: %s", x->chat_id, why);
  answer_unavailable(x, why);
  forget_client(x);
  xfer_free(x); /* its transfer is cancelled */
}

static void on_probe_timer(uv_timer_t *t) {
  struct px_xfer *x = t->data, *p;
  char url[2100];
  if (x->status != 0 || x->probe != NULL)
    return;
  snprintf(url, sizeof url, "%s/v1/node", x->base_url);
  if ((p = get_start(x->px, url, probe_ms(x->px), on_probe, NULL)) == NULL) {
    uv_timer_start(t, on_probe_timer, PX_PROBE_EVERY_MS, 0); /* out of memory: later */
    return;
  }
  p->get_ud = p;
  p->probe_of = x;
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

/* The request's headers that carry meaning, as lines for the owner, into lines[] (each of
 * size cap); how many, or -1 when one does not fit. */
#define PX_PASS_MAX 16 /* the 12 passed on, Host, X-Cerea-Node */
static int pass_headers(struct tp_req *req, const char *node_id, char lines[][9000], size_t cap) {
  static const char *const pass[] = {
      "authorization", "content-type", "last-event-id", "accept",         "range",
      "if-none-match", "if-range",     "user-agent",    "mcp-session-id", "mcp-protocol-version",
      "mcp-method",    "mcp-name"};
  int n = 0;
  for (size_t i = 0; i < SBX_ARRAY_SIZE(pass); i++) {
    const char *v = tp_req_header(req, pass[i]);
    if (v != NULL && (size_t)snprintf(lines[n++], cap, "%s: %s", pass[i], v) >= cap)
      return -1;
  }
  /* the client's Host, so that the links the owner makes (a result's files, a chat key's
   * mcp_url) name the host the client reached, not the owner's node URL */
  const char *host = tp_req_header(req, "host");
  if (host == NULL)
    host = tp_req_header(req, ":authority");
  if (orch__host_ok(host))
    snprintf(lines[n++], cap, "Host: %s", host);
  snprintf(lines[n++], cap, "X-Cerea-Node: %s", node_id);
  return n;
}

int orch__proxy_forward(struct orch_proxy *px, struct tp_req *req, const char *base_url,
                        const char *chat_id, const char *node_id, uint64_t retry_ms,
                        struct store_blob_stage **stage) {
  char url[2048];
  snprintf(url, sizeof url, "%s%s", base_url, tp_req_target(req));
  static char lines[PX_PASS_MAX][9000]; /* the loop's thread only; copied by tp_http_start */
  const char *hdrs[PX_PASS_MAX];
  int nh = pass_headers(req, node_id, lines, sizeof lines[0]);
  if (nh < 0)
    return SBX_ETOOBIG;
  for (int i = 0; i < nh; i++)
    hdrs[i] = lines[i];
  struct px_xfer *x = xfer_new(px);
  if (x == NULL)
    return SBX_ENOMEM;
  x->req = req;
  x->retry_s = (retry_ms + 999) / 1000;
  snprintf(x->chat_id, sizeof x->chat_id, "%s", chat_id);
  struct tp_http_request rq = {
      .method = tp_req_method(req), .url = url, .headers = hdrs, .n_headers = (size_t)nh};
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
    rq.read_body = on_read_body;
    rq.body_len = (size_t)store_blob_stage_size(x->stage);
  } else if (strcmp(rq.method, "GET") != 0 && strcmp(rq.method, "HEAD") != 0) {
    rq.body = tp_req_body(req, &rq.body_len); /* POST, PUT, PATCH, DELETE: the buffered body */
    if (rq.body == NULL)
      rq.body = "";
  }
  if (probe_owner(x, base_url) != 0 || xfer_start(x, &rq) != 0) {
    xfer_free(x);
    return SBX_ENOMEM;
  }
  tp_req_hold(req);
  tp_req_on_close(req, on_client_gone, x);
  tp_stream_on_drain(req, on_client_drain, x);
  return 0;
}

int orch__proxy_get(struct orch_proxy *px, const char *url, uint64_t timeout_ms,
                    orch_proxy_get_cb cb, void *ud) {
  return get_start(px, url, timeout_ms, cb, ud) ? 0 : SBX_ENOMEM;
}

int orch__proxy_new(struct orch *o, struct orch_proxy **out, struct sbx_error *err) {
  struct orch_proxy *px = sbx_calloc(1, sizeof *px);
  if (px == NULL)
    return sbx_error_set(err, SBX_ENOMEM, "proxy: out of memory");
  int rc = tp_http_client_new(o->loop, &px->hc, err);
  if (rc != 0) {
    sbx_free(px);
    return rc;
  }
  px->o = o;
  SBX_LIST_INIT(&px->xfers);
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
      if (x->started)
        tp_stream_end(x->req);
      else
        tp_respond_error(x->req, 503, "unavailable", "the node is shutting down");
      forget_client(x);
    }
    xfer_free(x);
  }
  tp_http_client_free(px->hc); /* its handles close on the loop */
  sbx_free(px);
}
