/* http1.c -- the HTTP/1.1 protocol peer, over Debian's http-parser (2.9).  It turns bytes into
 * requests (request line and header limits -> 414/431, bodies buffered up to the route's limit or
 * given to its sink -> 413, chunked request bodies decoded by the parser, Expect: 100-continue),
 * answers one request at a time in order (pipelined requests wait, unparsed, in a bounded
 * buffer), frames responses (Content-Length or chunked, keep-alive or close) and runs the
 * connection's timers: header timeout (slowloris) -> 408, the body's own deadline (req.c's
 * tp__body_due) -> 408, idle keep-alive timeout, and a stall timeout while a response does not
 * move.  Malformed input gets 400 and closes this connection only.  Stricter than the parser
 * where RFC 9112 lets a server refuse: only HTTP/1.x, no line ending in a bare LF and no obs-fold
 * in a head (head_scan), no header fields from a chunked body's trailer section.
 *
 * What it does not do: `Upgrade` of any kind (a request carrying one is answered, then the
 * connection closes: no h2c upgrade, no WebSocket), trailers (read and dropped).
 *
 *   state diagram (struct h1.state)
 *
 *     IDLE --first byte--> HEAD --head, a body follows--> BODY --complete--> READY --dispatch--> WAIT
 *       ^                    \------head, no body---------------------------/                  |
 *       |                     (any of HEAD, BODY: limit / parse error / timeout --> WAIT, answered)
 *       \------------------------- answer ended, keep-alive -------------------------------------+
 *                                                                       answer ended, close --> CLOSED
 *   (pipelined bytes already buffered are parsed at once; * -> CLOSED when the connection goes)
 *
 *   transition             by
 *   IDLE -> HEAD           on_message_begin
 *   HEAD -> BODY           on_headers_complete (the body counts against max_bodies)
 *   HEAD|BODY -> READY     on_message_complete (parser paused; dispatch after execute returns)
 *   READY -> WAIT          h1_run
 *   HEAD|BODY -> WAIT      h1_fail
 *   WAIT -> IDLE|CLOSED    h1_answer_done
 *   * -> CLOSED            h1_on_close
 */
#include "internal.h"

#include <assert.h>
#include <http_parser.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

enum h1_state { H1_IDLE = 0, H1_HEAD, H1_BODY, H1_READY, H1_WAIT, H1_CLOSED };

/* head_scan's states: where in a request head the last byte left us. */
enum scan_state {
  SCAN_START = 0,
  SCAN_START_CR,
  SCAN_LINE,
  SCAN_CR,
  SCAN_BOL,
  SCAN_END_CR,
  SCAN_DONE
};

struct h1 {
  struct tp_conn *c;
  http_parser parser;
  enum h1_state state;
  struct tp_req *req; /* the request being read or answered; one reference */
  struct sbx_buf url, field, value;
  int in_value;
  size_t header_bytes, nheaders;
  enum tp_refusal error; /* set by a callback that refused the request */
  enum scan_state scan;
  int keep_alive, close_after, chunked_out, http10;
  int running, eof;
  struct sbx_buf pending; /* bytes read while a request is answered (pipelining) */
  struct sbx_buf head;    /* an answer's head, held until its first body bytes or its end */
};

static const char *const h1_names[] = {"IDLE", "HEAD", "BODY", "READY", "WAIT", "CLOSED"};
#define B(s) SBX_FSM_BIT(H1_##s)
static const uint32_t h1_from[] = {
    [H1_IDLE] = B(WAIT),
    [H1_HEAD] = B(IDLE),
    [H1_BODY] = B(HEAD),
    [H1_READY] = B(HEAD) | B(BODY),
    [H1_WAIT] = B(HEAD) | B(BODY) | B(READY),
    [H1_CLOSED] = B(IDLE) | B(HEAD) | B(BODY) | B(READY) | B(WAIT),
};
#undef B
static const struct sbx_fsm h1_fsm = SBX_FSM(TP_MOD, "h1", h1_names, h1_from, NULL);

/* The one writer of h->state; a body arriving is counted while in BODY. */
#define h1_set_state(h, st) h1_set_state_((h), (st), __FILE__, __LINE__)
static void h1_set_state_(struct h1 *h, enum h1_state st, const char *file, int line) {
  if (sbx_fsm_step(&h1_fsm, h->state, st, h->c->id_text, file, line) != 0)
    return;
  if (h->state == H1_BODY)
    tp__body_leave(h->req);
  h->state = st;
  if (st == H1_BODY)
    tp__body_enter(h->req);
}

static http_parser_settings settings;
static const struct tp_req_ops h1_req_ops;

static struct h1 *H(http_parser *p) { return p->data; }
static const struct tp_limits *LIM(struct h1 *h) { return &h->c->srv->cfg.limits; }

static int refuse(struct h1 *h, enum tp_refusal why) {
  if (!h->error)
    h->error = why;
  return -1;
}

/* What http-parser accepts and RFC 9112 lets a server refuse, refused here before the parser
 * sees the bytes of a head: a line ended by a bare LF (or a CR without LF), and obs-fold (a
 * header line starting with SP or HT).  Empty lines before the request line are skipped, as the
 * parser does.  Returns the bytes of [p, p+n) that belong to the head (all of them while it goes
 * on), or -1 to refuse. */
static ssize_t head_scan(struct h1 *h, const char *p, size_t n) {
  enum scan_state s = h->scan;
  size_t i = 0;
  for (; i < n && s != SCAN_DONE; i++) {
    char ch = p[i];
    switch (s) {
    case SCAN_START:
      if (ch == '\n')
        return -1;
      s = ch == '\r' ? SCAN_START_CR : SCAN_LINE;
      break;
    case SCAN_START_CR:
      if (ch != '\n')
        return -1;
      s = SCAN_START;
      break;
    case SCAN_LINE:
      if (ch == '\n')
        return -1;
      if (ch == '\r')
        s = SCAN_CR;
      break;
    case SCAN_CR:
      if (ch != '\n')
        return -1;
      s = SCAN_BOL;
      break;
    case SCAN_BOL:
      if (ch == '\n' || ch == ' ' || ch == '\t')
        return -1;
      s = ch == '\r' ? SCAN_END_CR : SCAN_LINE;
      break;
    case SCAN_END_CR:
      if (ch != '\n')
        return -1;
      s = SCAN_DONE;
      break;
    case SCAN_DONE:
      break;
    }
  }
  h->scan = s;
  return (ssize_t)i;
}

/* ---- parser callbacks (they never answer: answering happens after execute returns) ----------- */

static int on_message_begin(http_parser *p) {
  struct h1 *h = H(p);
  if (h->state != H1_IDLE)
    return refuse(h, TP_R_BAD_REQUEST);
  h->req = tp__req_new(h->c, &h1_req_ops, TP_PROTO_HTTP1);
  if (h->req == NULL)
    return refuse(h, TP_R_NO_MEMORY);
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
    return refuse(h, TP_R_URI_TOO_LONG);
  return sbx_buf_append(&h->url, at, n) ? refuse(h, TP_R_NO_MEMORY) : 0;
}

static int commit_header(struct h1 *h) {
  if (h->field.len == 0)
    return 0;
  if (h->state == H1_BODY) { /* a trailer field: counted (count_header_bytes), never kept */
    sbx_buf_reset(&h->field);
    sbx_buf_reset(&h->value);
    return 0;
  }
  if (++h->nheaders > LIM(h)->max_headers)
    return refuse(h, TP_R_TOO_MANY_HEADERS);
  if (memchr(h->value.data ? h->value.data : "", '\0', h->value.len) ||
      memchr(h->field.data, '\0', h->field.len))
    return refuse(h, TP_R_BAD_HEADER);
  /* Trim trailing spaces of the value (the parser leaves them). */
  size_t vl = h->value.len;
  while (vl > 0 && (h->value.data[vl - 1] == ' ' || h->value.data[vl - 1] == '\t'))
    vl--;
  if (tp__req_add_header(h->req, h->field.data, h->field.len, vl ? h->value.data : "", vl) != 0)
    return refuse(h, TP_R_NO_MEMORY);
  sbx_buf_reset(&h->field);
  sbx_buf_reset(&h->value);
  return 0;
}

static int count_header_bytes(struct h1 *h, size_t n) {
  h->header_bytes += n;
  return h->header_bytes > LIM(h)->max_header_bytes ? refuse(h, TP_R_HEADERS_TOO_LARGE) : 0;
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
  return sbx_buf_append(&h->field, at, n) ? refuse(h, TP_R_HEADERS_TOO_LARGE) : 0;
}

static int on_header_value(http_parser *p, const char *at, size_t n) {
  struct h1 *h = H(p);
  h->in_value = 1;
  if (count_header_bytes(h, n) != 0)
    return -1;
  return sbx_buf_append(&h->value, at, n) ? refuse(h, TP_R_HEADERS_TOO_LARGE) : 0;
}

static int on_headers_complete(http_parser *p) {
  struct h1 *h = H(p);
  struct tp_req *r = h->req;
  if (commit_header(h) != 0)
    return -1;
  h->in_value = 0;
  if (p->http_major != 1) /* "HTTP/9.9" parses; only 1.x is ours to serve */
    return refuse(h, TP_R_BAD_VERSION);
  if (p->method == HTTP_CONNECT)
    return refuse(h, TP_R_METHOD);
  int rc = tp__req_set_target(r, http_method_str((enum http_method)p->method),
                              h->url.data ? h->url.data : "", h->url.len);
  if (rc != 0)
    return refuse(h, rc == SBX_ENOMEM ? TP_R_NO_MEMORY : TP_R_BAD_TARGET);
  h->keep_alive = http_should_keep_alive(p);
  h->http10 = p->http_major == 1 && p->http_minor == 0;
  tp__req_route(r);
  r->body.limit = r->body_limit;
  /* The parser frames "gzip, chunked" as chunked and hands the gzip bytes on as if they were the
   * body: a transfer coding we do not decode is refused instead (RFC 9112 6.1: 501). */
  const char *te = tp_req_header(r, "Transfer-Encoding");
  if (te && strcasecmp(te, "chunked") != 0)
    return refuse(h, TP_R_TRANSFER_CODING);
  int body = (p->flags & F_CHUNKED) != 0;
  if (!(p->flags & F_CHUNKED) && p->content_length != ULLONG_MAX) {
    if (p->content_length > r->body_limit)
      return refuse(h, TP_R_BODY_TOO_LARGE);
    if (p->content_length > 0 && !(r->route && r->route->on_body)) /* one allocation */
      sbx_buf_reserve(&r->body, (size_t)p->content_length);
    body = p->content_length > 0;
  }
  if (body) {
    enum tp_refusal why = tp__body_admit(r);
    if (why != TP_OK)
      return refuse(h, why);
  }
  const char *expect = tp_req_header(r, "Expect");
  if (body && expect && strcasecmp(expect, "100-continue") == 0 && !h->http10) {
    static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
    uv_buf_t b = uv_buf_init((char *)cont, sizeof(cont) - 1);
    tp__conn_write(h->c, &b, 1);
  }
  tp__req_set_state(r, REQ_BODY_IN);
  if (body) {
    h1_set_state(h, H1_BODY);
    tp__conn_timer(h->c, tp__body_due(r, uv_now(h->c->srv->loop)) - uv_now(h->c->srv->loop));
  }
  return 0;
}

static int on_body(http_parser *p, const char *at, size_t n) {
  struct h1 *h = H(p);
  enum tp_refusal why = tp__req_body_data(h->req, at, n);
  return why == TP_OK ? 0 : refuse(h, why);
}

/* A chunk announces its size first: one past the limit is refused before its bytes come. */
static int on_chunk_header(http_parser *p) {
  struct h1 *h = H(p);
  struct tp_req *r = h->req;
  if (p->content_length > r->body_limit || r->body_seen + p->content_length > r->body_limit)
    return refuse(h, TP_R_BODY_TOO_LARGE);
  return 0;
}

static int on_message_complete(http_parser *p) {
  struct h1 *h = H(p);
  h1_set_state(h, H1_READY);
  if (p->upgrade)
    h->close_after = 1; /* no upgrades: answer, then close */
  tp__conn_timer(h->c, 0);
  http_parser_pause(p, 1);
  return 0;
}

/* ---- answering ------------------------------------------------------------------------------- */

static void h1_run(struct h1 *h);

/* A request the parser refused: answer it with the error and close after. */
static void h1_fail(struct h1 *h, enum tp_refusal why) {
  struct tp_conn *c = h->c;
  if (h->state == H1_CLOSED)
    return;
  c->srv->stats.protocol_errors++;
  h->close_after = 1;
  sbx_buf_reset(&h->pending);
  if (h->req == NULL)
    h->req = tp__req_new(c, &h1_req_ops, TP_PROTO_HTTP1);
  if (h->req == NULL || h->req->state >= REQ_RESPONDING) {
    tp__conn_close(c, "refused, and no way to answer");
    return;
  }
  if (h->state == H1_IDLE)
    h1_set_state(h, H1_HEAD);
  if (h->state != H1_WAIT)
    h1_set_state(h, H1_WAIT);
  tp__req_ref(h->req);
  struct tp_req *r = h->req;
  tp__req_abandon(r); /* a body sink drops its state */
  tp__refuse(r, why); /* ends the request; closes after the write */
  tp__req_unref(r);
}

/* Parses [data, data+len); returns bytes consumed, or -1 after failing the request. */
static ssize_t h1_parse(struct h1 *h, const char *data, size_t len) {
  if (h->scan != SCAN_DONE && (h->state == H1_IDLE || h->state == H1_HEAD) &&
      head_scan(h, data, len) < 0) {
    h1_fail(h, TP_R_BAD_REQUEST);
    return -1;
  }
  size_t n = http_parser_execute(&h->parser, &settings, data, len);
  enum http_errno e = HTTP_PARSER_ERRNO(&h->parser);
  if (e == HPE_OK || e == HPE_PAUSED) {
    if (h->parser.upgrade && h->state != H1_READY) {
      h1_fail(h, TP_R_UPGRADE);
      return -1;
    }
    return (ssize_t)n;
  }
  enum tp_refusal why = h->error;
  if (!why)
    why = e == HPE_HEADER_OVERFLOW ? TP_R_HEADERS_TOO_LARGE : TP_R_BAD_REQUEST;
  if (SBX_LOG_ENABLED(SBX_LOG_DEBUG))
    sbx_log(SBX_LOG_DEBUG, TP_MOD, "conn %llu: %d (%s)", (unsigned long long)h->c->id,
            tp__refusal_status(why), http_errno_name(e));
  h1_fail(h, why);
  return -1;
}

/* Runs the connection forward: dispatches a complete request, then parses buffered pipelined
 * bytes, until it has to wait for an answer or for more bytes.  Never re-entered. */
static void h1_run(struct h1 *h) {
  if (h->running)
    return;
  h->running = 1;
  while (h->state != H1_CLOSED && h->c->state != CONN_CLOSING) {
    if (h->state == H1_WAIT)
      break; /* the answer is on its way */
    if (h->state == H1_READY) {
      h1_set_state(h, H1_WAIT);
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
  if (h->state != H1_WAIT && h->state != H1_READY && h->pending.len == 0 && !h->running) {
    ssize_t n = h1_parse(h, data, len);
    if (n < 0)
      return 0; /* answered with an error; the connection closes after it */
    data += n;
    len -= (size_t)n;
    if (h->state == H1_BODY) { /* the body's deadline moves with what came */
      uint64_t now = uv_now(c->srv->loop), due = tp__body_due(h->req, now);
      tp__conn_timer(c, due > now ? due - now : 1);
    }
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
  tp__req_detach(r);
  tp__req_unref(r);
  if (h->close_after || h->c->srv->state != SRV_RUNNING) {
    h1_set_state(h, H1_CLOSED);
    tp__conn_close_after_writes(h->c, "done");
    return;
  }
  h1_set_state(h, H1_IDLE);
  h->scan = SCAN_START;
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
  if (!h->keep_alive || r->srv->state != SRV_RUNNING || status == 400 || status == 408 ||
      r->conn->shed)
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

/* One answer at a time on the socket: a file chunk whenever little is queued. */
static size_t h1_room(const struct tp_req *r) {
  return r->conn && r->conn->wpending < TP_LOW_WATER ? TP_FILE_CHUNK : 0;
}

static const struct tp_req_ops h1_req_ops = {h1_head, h1_data, h1_end, h1_queued, h1_room};

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
  if (h->state != H1_CLOSED)
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
    h1_fail(h, TP_R_TIMEOUT);
    break;
  case H1_READY: /* dispatched on this turn: nothing is late */
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
