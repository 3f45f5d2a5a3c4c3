/* http1.c -- the HTTP/1.1 protocol peer, over Debian's http-parser (2.9).  It turns bytes into
 * requests (request line and header limits -> 414/431, bodies buffered up to the route's limit ->
 * 413, chunked request bodies decoded by the parser, Expect: 100-continue), answers one request
 * at a time in order (pipelined requests wait, unparsed, in a bounded buffer), frames responses
 * (Content-Length or chunked, keep-alive or close) and runs the connection's timers: header
 * timeout (slowloris) -> 408, idle keep-alive timeout, and a stall timeout while a response does
 * not move.  Malformed input gets 400 and closes this connection only.
 *
 * What it does not do: `Upgrade` of any kind (a request carrying one is answered, then the
 * connection closes: no h2c upgrade, no WebSocket), trailers, streaming request bodies to a sink.
 *
 *   state diagram (struct h1.state)
 *
 *     IDLE --first byte--> HEAD --headers ok--> BODY --complete--> WAIT --answer ended--> IDLE
 *       ^                    |                   |                  |
 *       |                    \-------limit/parse error-------------->+--close_after--> CLOSED
 *       \---------------- (pipelined bytes already buffered are parsed at once) ------/
 *
 *   transition        by
 *   IDLE -> HEAD      on_message_begin
 *   HEAD -> BODY      on_headers_complete
 *   BODY -> WAIT      on_message_complete (parser paused; dispatch after execute returns)
 *   WAIT -> IDLE      h1_answer_done
 *   * -> CLOSED       h1_fail / h1_on_close
 */
#include "internal.h"

#include <assert.h>
#include <http_parser.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

enum h1_state { H1_IDLE = 0, H1_HEAD, H1_BODY, H1_WAIT, H1_CLOSED };

struct h1 {
  struct tp_conn *c;
  http_parser parser;
  enum h1_state state;
  struct tp_req *req; /* the request being read or answered; one reference */
  struct sbx_buf url, field, value;
  int in_value;
  size_t header_bytes, nheaders;
  int error_status; /* set by a callback that refused the request */
  const char *error_code;
  int keep_alive, close_after, chunked_out, http10;
  int dispatch_pending, running, eof;
  struct sbx_buf pending; /* bytes read while a request is answered (pipelining) */
  struct sbx_buf head;    /* an answer's head, held until its first body bytes or its end */
};

static const char *h1_state_name(enum h1_state s) {
  static const char *n[] = {"IDLE", "HEAD", "BODY", "WAIT", "CLOSED"};
  return n[s];
}

static void h1_set_state(struct h1 *h, enum h1_state st) {
  switch (st) {
  case H1_HEAD:
    assert(h->state == H1_IDLE);
    break;
  case H1_BODY:
    assert(h->state == H1_HEAD);
    break;
  case H1_WAIT:
    assert(h->state == H1_BODY || h->state == H1_HEAD);
    break;
  case H1_IDLE:
    assert(h->state == H1_WAIT);
    break;
  case H1_CLOSED:
    break;
  }
  if (SBX_LOG_ENABLED(SBX_LOG_TRACE)) {
    char id[24];
    snprintf(id, sizeof(id), "%llu", (unsigned long long)h->c->id);
    SBX_TRACE_STATE(TP_MOD, "h1", id, h1_state_name(h->state), h1_state_name(st));
  }
  h->state = st;
}

static http_parser_settings settings;
static const struct tp_req_ops h1_req_ops;

static struct h1 *H(http_parser *p) { return p->data; }
static const struct tp_limits *LIM(struct h1 *h) { return &h->c->srv->cfg.limits; }

static int refuse(struct h1 *h, int status, const char *code) {
  if (!h->error_status) {
    h->error_status = status;
    h->error_code = code;
  }
  return -1;
}

/* ---- parser callbacks (they never answer: answering happens after execute returns) ----------- */

static int on_message_begin(http_parser *p) {
  struct h1 *h = H(p);
  if (h->state != H1_IDLE)
    return refuse(h, 400, "bad_request");
  h->req = tp__req_new(h->c, &h1_req_ops, TP_PROTO_HTTP1);
  if (h->req == NULL)
    return refuse(h, 503, "no_memory");
  h1_set_state(h, H1_HEAD);
  sbx_buf_reset(&h->url);
  sbx_buf_reset(&h->field);
  sbx_buf_reset(&h->value);
  h->in_value = 0;
  h->header_bytes = h->nheaders = 0;
  tp__conn_timer(h->c, LIM(h)->header_timeout_ms);
  return 0;
}

static int on_url(http_parser *p, const char *at, size_t n) {
  struct h1 *h = H(p);
  if (h->url.len + n > LIM(h)->max_request_line)
    return refuse(h, 414, "uri_too_long");
  return sbx_buf_append(&h->url, at, n) ? refuse(h, 503, "no_memory") : 0;
}

static int commit_header(struct h1 *h) {
  if (h->field.len == 0)
    return 0;
  if (++h->nheaders > LIM(h)->max_headers)
    return refuse(h, 431, "too_many_headers");
  if (memchr(h->value.data ? h->value.data : "", '\0', h->value.len) ||
      memchr(h->field.data, '\0', h->field.len))
    return refuse(h, 400, "bad_header");
  /* Trim trailing spaces of the value (the parser leaves them). */
  size_t vl = h->value.len;
  while (vl > 0 && (h->value.data[vl - 1] == ' ' || h->value.data[vl - 1] == '\t'))
    vl--;
  if (tp__req_add_header(h->req, h->field.data, h->field.len, vl ? h->value.data : "", vl) != 0)
    return refuse(h, 503, "no_memory");
  sbx_buf_reset(&h->field);
  sbx_buf_reset(&h->value);
  return 0;
}

static int count_header_bytes(struct h1 *h, size_t n) {
  h->header_bytes += n;
  return h->header_bytes > LIM(h)->max_header_bytes ? refuse(h, 431, "headers_too_large") : 0;
}

static int on_header_field(http_parser *p, const char *at, size_t n) {
  struct h1 *h = H(p);
  if (h->in_value) {
    if (commit_header(h) != 0)
      return -1;
    h->in_value = 0;
  }
  if (count_header_bytes(h, n) != 0)
    return -1;
  return sbx_buf_append(&h->field, at, n) ? refuse(h, 431, "headers_too_large") : 0;
}

static int on_header_value(http_parser *p, const char *at, size_t n) {
  struct h1 *h = H(p);
  h->in_value = 1;
  if (count_header_bytes(h, n) != 0)
    return -1;
  return sbx_buf_append(&h->value, at, n) ? refuse(h, 431, "headers_too_large") : 0;
}

static int on_headers_complete(http_parser *p) {
  struct h1 *h = H(p);
  struct tp_req *r = h->req;
  if (commit_header(h) != 0)
    return -1;
  h->in_value = 0;
  if (p->method == HTTP_CONNECT)
    return refuse(h, 405, "method_not_allowed");
  int rc = tp__req_set_target(r, http_method_str((enum http_method)p->method),
                              h->url.data ? h->url.data : "", h->url.len);
  if (rc != 0)
    return refuse(h, rc == SBX_ENOMEM ? 503 : 400, rc == SBX_ENOMEM ? "no_memory" : "bad_target");
  h->keep_alive = http_should_keep_alive(p);
  h->http10 = p->http_major == 1 && p->http_minor == 0;
  tp__req_route(r);
  r->body.limit = r->body_limit;
  /* The parser frames "gzip, chunked" as chunked and hands the gzip bytes on as if they were the
   * body: a transfer coding we do not decode is refused instead (RFC 9112 6.1: 501). */
  const char *te = tp_req_header(r, "Transfer-Encoding");
  if (te && strcasecmp(te, "chunked") != 0)
    return refuse(h, 501, "unsupported_transfer_coding");
  if (!(p->flags & F_CHUNKED) && p->content_length != ULLONG_MAX) {
    if (p->content_length > r->body_limit)
      return refuse(h, 413, "body_too_large");
    if (p->content_length > 0 && !(r->route && r->route->on_body)) /* one allocation */
      sbx_buf_reserve(&r->body, (size_t)p->content_length);
  }
  const char *expect = tp_req_header(r, "Expect");
  if (expect && strcasecmp(expect, "100-continue") == 0 && !h->http10) {
    static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
    uv_buf_t b = uv_buf_init((char *)cont, sizeof(cont) - 1);
    tp__conn_write(h->c, &b, 1);
  }
  h1_set_state(h, H1_BODY);
  tp__req_set_state(r, REQ_BODY_IN);
  tp__conn_timer(h->c, LIM(h)->idle_timeout_ms); /* body: each read re-arms it */
  return 0;
}

static int on_body(http_parser *p, const char *at, size_t n) {
  struct h1 *h = H(p);
  int st = tp__req_body_data(h->req, at, n);
  switch (st) {
  case 0:
    return 0;
  case 413:
    return refuse(h, 413, "body_too_large");
  case 503:
    return refuse(h, 503, "no_memory");
  case 500:
    return refuse(h, 500, "io");
  default:
    return refuse(h, 400, "bad_body");
  }
}

/* A chunk announces its size first: one past the limit is refused before its bytes come. */
static int on_chunk_header(http_parser *p) {
  struct h1 *h = H(p);
  struct tp_req *r = h->req;
  uint64_t have = r->route && r->route->on_body ? r->body_seen : r->body.len;
  if (p->content_length > r->body_limit || have + p->content_length > r->body_limit)
    return refuse(h, 413, "body_too_large");
  return 0;
}

static int on_message_complete(http_parser *p) {
  struct h1 *h = H(p);
  if (h->state == H1_HEAD) /* cannot happen: headers complete comes first */
    return refuse(h, 400, "bad_request");
  h1_set_state(h, H1_WAIT);
  h->dispatch_pending = 1;
  if (p->upgrade)
    h->close_after = 1; /* no upgrades: answer, then close */
  tp__conn_timer(h->c, 0);
  http_parser_pause(p, 1);
  return 0;
}

/* ---- answering ------------------------------------------------------------------------------- */

static void h1_run(struct h1 *h);

/* A request the parser refused: answer it with the error and close after. */
static void h1_fail(struct h1 *h, int status, const char *code, const char *msg) {
  struct tp_conn *c = h->c;
  if (h->state == H1_CLOSED)
    return;
  c->srv->stats.protocol_errors++;
  h->close_after = 1;
  h->dispatch_pending = 0;
  sbx_buf_reset(&h->pending);
  if (h->req == NULL)
    h->req = tp__req_new(c, &h1_req_ops, TP_PROTO_HTTP1);
  if (h->req == NULL || h->req->state >= REQ_RESPONDING) {
    tp__conn_close(c, msg);
    return;
  }
  if (h->state == H1_IDLE)
    h1_set_state(h, H1_HEAD);
  if (h->state != H1_WAIT)
    h1_set_state(h, H1_WAIT);
  tp__req_ref(h->req);
  struct tp_req *r = h->req;
  tp__req_abandon(r);                     /* a body sink drops its state */
  tp_respond_error(r, status, code, msg); /* ends the request; closes after the write */
  tp__req_unref(r);
}

static const char *err_msg(int status) {
  switch (status) {
  case 413:
    return "request body over the limit";
  case 414:
    return "request line over the limit";
  case 431:
    return "request headers over the limit";
  case 405:
    return "method not allowed";
  case 503:
    return "out of memory";
  case 500:
    return "the request body could not be stored";
  default:
    return "malformed request";
  }
}

/* Parses [data, data+len); returns bytes consumed, or -1 after failing the request. */
static ssize_t h1_parse(struct h1 *h, const char *data, size_t len) {
  size_t n = http_parser_execute(&h->parser, &settings, data, len);
  enum http_errno e = HTTP_PARSER_ERRNO(&h->parser);
  if (e == HPE_OK || e == HPE_PAUSED) {
    if (h->parser.upgrade && h->state != H1_WAIT) {
      h1_fail(h, 400, "bad_request", "upgrade is not supported");
      return -1;
    }
    return (ssize_t)n;
  }
  int status = h->error_status;
  const char *code = h->error_code;
  if (!status) {
    status = e == HPE_HEADER_OVERFLOW ? 431 : 400;
    code = status == 431 ? "headers_too_large" : "bad_request";
  }
  if (SBX_LOG_ENABLED(SBX_LOG_DEBUG))
    sbx_log(SBX_LOG_DEBUG, TP_MOD, "conn %llu: %d (%s)", (unsigned long long)h->c->id, status,
            http_errno_name(e));
  h1_fail(h, status, code, err_msg(status));
  return -1;
}

/* Runs the connection forward: dispatches a complete request, then parses buffered pipelined
 * bytes, until it has to wait for an answer or for more bytes.  Never re-entered. */
static void h1_run(struct h1 *h) {
  if (h->running)
    return;
  h->running = 1;
  while (h->state != H1_CLOSED && h->c->state != CONN_CLOSING) {
    if (h->state == H1_WAIT) {
      if (!h->dispatch_pending)
        break; /* the answer is on its way */
      h->dispatch_pending = 0;
      tp__req_dispatch(h->req);
      continue;
    }
    if (h->pending.len == 0)
      break;
    ssize_t n = h1_parse(h, h->pending.data, h->pending.len);
    if (n < 0)
      break;
    memmove(h->pending.data, h->pending.data + n, h->pending.len - (size_t)n);
    h->pending.len -= (size_t)n;
  }
  h->running = 0;
  if (h->state != H1_CLOSED && h->c->state != CONN_CLOSING) {
    if (h->pending.len < h->pending.limit / 2)
      tp__conn_read_start(h->c);
    if (h->eof && h->state == H1_IDLE && h->pending.len == 0)
      tp__conn_close(h->c, "eof");
  }
}

static int h1_feed(struct tp_conn *c, const char *data, size_t len) {
  struct h1 *h = c->pdata;
  if (h->state == H1_CLOSED)
    return 0; /* answered and closing: what else comes is not read */
  if (h->state == H1_BODY)
    tp__conn_timer(c, LIM(h)->idle_timeout_ms);
  if (h->state != H1_WAIT && h->pending.len == 0 && !h->running) {
    ssize_t n = h1_parse(h, data, len);
    if (n < 0)
      return 0; /* answered with an error; the connection closes after it */
    data += n;
    len -= (size_t)n;
  }
  if (len > 0 && h->c->state != CONN_CLOSING) {
    if (sbx_buf_append(&h->pending, data, len) != 0) {
      /* More pipelined input than we buffer: a client that does not wait for answers. */
      tp__conn_close(c, "pipelined input over the limit");
      return 0;
    }
    if (h->pending.len >= h->pending.limit / 2)
      tp__conn_read_stop(c);
  }
  h1_run(h);
  return 0;
}

/* The current answer ended (all bytes queued).  Next request, or close. */
static void h1_answer_done(struct h1 *h) {
  struct tp_req *r = h->req;
  h->req = NULL;
  r->conn = NULL;
  tp__req_unref(r);
  if (h->close_after || h->c->srv->state != SRV_RUNNING) {
    h1_set_state(h, H1_CLOSED);
    h->c->close_when_done = 1;
    if (h->c->wpending == 0)
      tp__conn_close(h->c, "done");
    return;
  }
  h1_set_state(h, H1_IDLE);
  http_parser_pause(&h->parser, 0);
  tp__conn_timer(h->c, LIM(h)->idle_timeout_ms);
  h1_run(h);
}

/* ---- response framing (struct tp_req_ops) ---------------------------------------------------- */

static int h1_head(struct tp_req *r, int status, const char *hdrs, size_t hlen, int64_t clen,
                   int has_body) {
  struct h1 *h = r->conn->pdata;
  struct sbx_buf *bp = &h->head, b;
  b = *bp; /* built in place, in the connection's kept head buffer */
  b.limit = SBX_MAX(b.limit, hlen + 256);
  sbx_buf_reset(&b);
  h->chunked_out = 0;
  if (clen == -1 && has_body && !r->is_head) {
    if (h->http10)
      h->close_after = 1; /* the body ends with the connection */
    else
      h->chunked_out = 1;
  }
  if (!h->keep_alive || r->srv->state != SRV_RUNNING || status == 400 || status == 408)
    h->close_after = 1;
  char sl[16] = "HTTP/1.1 000 ";
  sl[9] = (char)('0' + status / 100 % 10);
  sl[10] = (char)('0' + status / 10 % 10);
  sl[11] = (char)('0' + status % 10);
  const char *text = tp__status_text(status);
  int rc = sbx_buf_append(&b, sl, 13);
  rc |= sbx_buf_append(&b, text, strlen(text));
  rc |= sbx_buf_append(&b, "\r\n", 2);
  rc |= sbx_buf_append(&b, hdrs, hlen);
  if (h->chunked_out)
    rc |= sbx_buf_appendf(&b, "Transfer-Encoding: chunked\r\n");
  if (h->close_after)
    rc |= sbx_buf_appendf(&b, "Connection: close\r\n");
  else if (h->http10)
    rc |= sbx_buf_appendf(&b, "Connection: keep-alive\r\n");
  rc |= sbx_buf_append(&b, "\r\n", 2);
  /* The head waits for the first body bytes (or the end): one write for a whole small answer. */
  *bp = b;
  /* A stalled reader is caught by the timer: armed while the answer is being written. */
  tp__conn_timer(r->conn, LIM(h)->idle_timeout_ms);
  return rc ? SBX_ENOMEM : 0;
}

/* Writes the held head (if any) followed by bufs, in one write. */
static int h1_write(struct h1 *h, uv_buf_t *bufs, unsigned n) {
  uv_buf_t all[4];
  unsigned k = 0;
  if (h->head.len)
    all[k++] = uv_buf_init(h->head.data, (unsigned)h->head.len);
  for (unsigned i = 0; i < n && k < 4; i++)
    all[k++] = bufs[i];
  int rc = k ? tp__conn_write(h->c, all, k) : 0;
  if (h->head.cap > 4096)
    sbx_buf_free(&h->head);
  else
    sbx_buf_reset(&h->head); /* kept for the next answer: no allocation per answer */
  return rc;
}

static int h1_data(struct tp_req *r, const void *p, size_t n) {
  struct h1 *h = r->conn->pdata;
  if (n == 0) /* a streamed answer starts: the head goes now (event streams need it) */
    return h1_write(h, NULL, 0);
  if (!h->chunked_out) {
    uv_buf_t b = uv_buf_init((char *)p, (unsigned)n);
    return h1_write(h, &b, 1);
  }
  char size[24];
  int sl = snprintf(size, sizeof(size), "%zx\r\n", n);
  uv_buf_t b[3] = {uv_buf_init(size, (unsigned)sl), uv_buf_init((char *)p, (unsigned)n),
                   uv_buf_init("\r\n", 2)};
  return h1_write(h, b, 3); /* one event, one write */
}

static int h1_end(struct tp_req *r) {
  if (r->conn == NULL)
    return SBX_ECLOSED;
  struct h1 *h = r->conn->pdata;
  uv_buf_t last = uv_buf_init("0\r\n\r\n", 5);
  int rc = h1_write(h, &last, h->chunked_out ? 1 : 0);
  assert(h->req == r);
  h1_answer_done(h);
  return rc;
}

static size_t h1_queued(const struct tp_req *r) { return r->conn ? r->conn->wpending : 0; }

static const struct tp_req_ops h1_req_ops = {h1_head, h1_data, h1_end, h1_queued};

/* ---- socket-layer hooks (struct tp_proto_ops) ------------------------------------------------ */

static void h1_on_written(struct tp_conn *c) {
  struct h1 *h = c->pdata;
  if (h->req && h->req->state == REQ_RESPONDING) {
    tp__conn_timer(c, LIM(h)->idle_timeout_ms); /* progress */
    if (c->wpending < TP_LOW_WATER)
      tp__req_drained(h->req);
  }
}

static void h1_on_close(struct tp_conn *c) {
  struct h1 *h = c->pdata;
  h1_set_state(h, H1_CLOSED);
  if (h->req) {
    struct tp_req *r = h->req;
    h->req = NULL;
    tp__req_peer_gone(r);
    tp__req_unref(r);
  }
  sbx_buf_free(&h->pending);
}

static void h1_destroy(void *pdata) {
  struct h1 *h = pdata;
  sbx_buf_free(&h->head);
  sbx_buf_free(&h->url);
  sbx_buf_free(&h->field);
  sbx_buf_free(&h->value);
  sbx_buf_free(&h->pending);
  sbx_free(h);
}

static void h1_on_eof(struct tp_conn *c) {
  struct h1 *h = c->pdata;
  h->eof = 1;
  /* A request being handled (a long poll) has lost its client: close now so its on_close runs.
   * A response being written is let finish; then the connection closes. */
  if (h->state == H1_WAIT && h->req && h->req->state == REQ_RESPONDING && !h->req->sse) {
    h->close_after = 1;
    sbx_buf_reset(&h->pending);
    return;
  }
  tp__conn_close(c, "eof");
}

static void h1_shutdown(struct tp_conn *c) {
  struct h1 *h = c->pdata;
  if (h->state == H1_IDLE && c->wpending == 0)
    tp__conn_close(c, "server closing");
  else
    h->close_after = 1; /* the current answer carries Connection: close or ends the conn */
}

static void h1_on_timeout(struct tp_conn *c) {
  struct h1 *h = c->pdata;
  switch (h->state) {
  case H1_IDLE:
    tp__conn_close(c, "idle timeout");
    break;
  case H1_HEAD:
  case H1_BODY:
    h->error_status = 408;
    h1_fail(h, 408, "timeout", "request not received in time");
    break;
  case H1_WAIT:
    if (c->wpending > 0)
      tp__conn_close(c, "client stopped reading");
    else
      tp__conn_timer(c, LIM(h)->idle_timeout_ms);
    break;
  case H1_CLOSED:
    tp__conn_close(c, "timeout");
    break;
  }
}

static const struct tp_proto_ops h1_ops = {h1_feed,     h1_on_written, h1_on_close, h1_on_eof,
                                           h1_shutdown, h1_on_timeout, h1_destroy};

int tp__h1_start(struct tp_conn *c, const char *data, size_t len) {
  static int settings_ready;
  if (!settings_ready) {
    http_parser_settings_init(&settings);
    settings.on_message_begin = on_message_begin;
    settings.on_url = on_url;
    settings.on_header_field = on_header_field;
    settings.on_header_value = on_header_value;
    settings.on_headers_complete = on_headers_complete;
    settings.on_body = on_body;
    settings.on_chunk_header = on_chunk_header;
    settings.on_message_complete = on_message_complete;
    settings_ready = 1;
  }
  struct h1 *h = sbx_calloc(1, sizeof(*h));
  if (h == NULL)
    return SBX_ENOMEM;
  h->c = c;
  http_parser_init(&h->parser, HTTP_REQUEST);
  h->parser.data = h;
  const struct tp_limits *l = &c->srv->cfg.limits;
  sbx_buf_init(&h->url, l->max_request_line + 1);
  sbx_buf_init(&h->field, l->max_header_bytes + 1);
  sbx_buf_init(&h->value, l->max_header_bytes + 1);
  sbx_buf_init(&h->pending, 2 * (64 * 1024 + l->max_header_bytes + l->max_request_line));
  c->pdata = h;
  c->ops = &h1_ops;
  tp__conn_timer(c, l->header_timeout_ms); /* the first request's head must come in time */
  if (len > 0)
    return h1_feed(c, data, len);
  return 0;
}
