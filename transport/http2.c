/* http2.c -- the HTTP/2 protocol peer over nghttp2: one server session per connection (h2c with
 * prior knowledge, or h2 after TLS ALPN), each stream a struct tp_req served through the same
 * handler API as HTTP/1.1, Server-Sent Events included (one stream per event stream).
 *
 * Rules kept here (nghttp2's libevent example, and the field notes):
 *  - never call the session from its own callbacks: callbacks only record events (dispatch this
 *    stream, answer it with an error, tell this request its peer is gone, pump this file); the
 *    events run after nghttp2_session_mem_recv/mem_send returned (h2_run), and so does every
 *    handler;
 *  - per-stream data (struct h2s) is freed only in the stream-close callback (or with the session
 *    when the connection dies, since nghttp2_session_del calls no callback);
 *  - MAX_CONCURRENT_STREAMS (<= 100) advertised and counted here too; header bytes and count
 *    counted in the header callback (431 on the stream; past twice the limit the stream is
 *    reset); the reset-rate and CONTINUATION limits and the outbound ACK bound set as options;
 *    SETTINGS/PING floods end the connection with ENHANCE_YOUR_CALM;
 *  - output backpressure: frames are produced only while the socket has less than
 *    h2_outbound_queue_bytes unsent, reads pause while it is over (a client that sends but does
 *    not read stops being read), and a stream's own queue is bounded by tp_stream_write.
 *
 * What it does not do: server push, priorities, trailers, the HTTP/1.1 Upgrade to h2c.
 *
 *   connection life (struct h2.state)
 *
 *     OPEN --GOAWAY sent (shutdown, flood, idle, protocol error)--> DRAINING --flushed--> CLOSED
 *       \------------------------ conn closed under us ---------------------------------/
 *
 *   stream life is nghttp2's; ours is the tp_req state (req.c).
 */
#include "internal.h"

#include <assert.h>
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

enum h2_state { H2_OPEN = 0, H2_DRAINING, H2_CLOSED };

enum ev_type { EV_NONE = 0, EV_DISPATCH, EV_ERROR, EV_GONE, EV_DRAIN, EV_RST };

struct h2_ev {
  enum ev_type type;
  int32_t id;
  int status;         /* EV_ERROR: the HTTP status; EV_RST: the error code */
  struct tp_req *req; /* EV_GONE: a reference */
};

struct h2;

struct h2s {
  struct h2 *h;
  int32_t id;
  struct tp_req *req; /* the peer's reference; NULL once handed back */
  struct sbx_list node;
  size_t header_bytes, nheaders;
  char *pmethod, *ppath, *pauthority; /* in the request's arena */
  const char *clen; /* the content-length header's value (the request's copy), or NULL */
  int has_host;     /* a host header came */
  int error;        /* 431 / 413 / 400 decided while reading */
  int refused;      /* reset, ignore everything */
  int dispatched;   /* dispatch or error event queued */
  int arriving;     /* has a request whose head or body is still coming: counted in h->narriving */
  struct sbx_buf out;
  size_t out_off;
  int out_end, deferred, drain_queued;
  uint64_t begin; /* when its HEADERS began: the request must be complete by header_timeout */
};

struct h2 {
  struct tp_conn *c;
  nghttp2_session *ss;
  enum h2_state state;
  struct sbx_list streams; /* in the order their HEADERS began */
  size_t nstreams;
  size_t narriving; /* streams with arriving set: the header timeout runs while > 0 */
  struct h2_ev *evs;
  size_t nevs, evcap;
  int busy;  /* inside h2_run: kicks only mark want_send */
  int in_ng; /* inside an nghttp2 call */
  int want_send;
  struct tp_deferred flush;
  char *obuf; /* the write block h2_send is filling (NULL outside it) */
  size_t olen;
  uint64_t ctl_window_start;
  uint32_t ctl_frames;
};

#define CTL_FLOOD_PER_SEC 200 /* SETTINGS + PING frames a second before ENHANCE_YOUR_CALM */

static const struct tp_req_ops h2_req_ops;

static const char *h2_state_name(enum h2_state s) {
  static const char *n[] = {"OPEN", "DRAINING", "CLOSED"};
  return n[s];
}

static void h2_set_state(struct h2 *h, enum h2_state st) {
  assert(st > h->state || st == H2_CLOSED);
  if (SBX_LOG_ENABLED(SBX_LOG_TRACE)) {
    char id[24];
    snprintf(id, sizeof(id), "%llu", (unsigned long long)h->c->id);
    SBX_TRACE_STATE(TP_MOD, "h2", id, h2_state_name(h->state), h2_state_name(st));
  }
  h->state = st;
}

static const struct tp_limits *LIM(struct h2 *h) { return &h->c->srv->cfg.limits; }

static int push_ev(struct h2 *h, enum ev_type t, int32_t id, int status, struct tp_req *req) {
  if (h->nevs == h->evcap) {
    size_t cap = h->evcap ? h->evcap * 2 : 8;
    struct h2_ev *n = sbx_realloc(h->evs, cap * sizeof(*n));
    if (n == NULL)
      return -1;
    h->evs = n;
    h->evcap = cap;
  }
  h->evs[h->nevs++] = (struct h2_ev){t, id, status, req};
  return 0;
}

/* Streams' memory is kept on the server for the next streams (a stream is made per request;
 * the server outlives every connection's session). */
static struct h2s *h2s_new(struct tp_server *s) {
  struct h2s *st = sbx_freelist_take(&s->h2s_pool, sizeof(*st));
  if (st)
    memset(st, 0, sizeof(*st));
  return st;
}

static void h2s_free(struct h2s *st) {
  struct tp_server *s = st->h->c->srv;
  sbx_list_remove(&st->node);
  sbx_buf_free(&st->out);
  sbx_freelist_give(&s->h2s_pool, st);
}

/* The stream's request stopped arriving (complete, refused, answered with an error, or gone). */
static void st_arrived(struct h2 *h, struct h2s *st) {
  if (st->arriving) {
    st->arriving = 0;
    h->narriving--;
  }
}

/* ---- nghttp2 callbacks: they record, they never call the session nor user code --------------- */

static int on_begin_headers(nghttp2_session *ss, const nghttp2_frame *f, void *ud) {
  struct h2 *h = ud;
  if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
    return 0;
  struct h2s *st = h2s_new(h->c->srv);
  if (st == NULL)
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* nghttp2 resets the stream */
  st->h = h;
  st->id = f->hd.stream_id;
  st->begin = uv_now(h->c->srv->loop);
  SBX_LIST_INIT(&st->node);
  sbx_list_insert_tail(&h->streams, &st->node);
  sbx_buf_init(&st->out, SIZE_MAX / 2);
  h->nstreams++;
  nghttp2_session_set_stream_user_data(ss, st->id, st);
  if (h->nstreams > LIM(h)->h2_max_concurrent_streams || h->state != H2_OPEN) {
    st->refused = 1;
    push_ev(h, EV_RST, st->id, NGHTTP2_REFUSED_STREAM, NULL);
    return 0;
  }
  st->req = tp__req_new(h->c, &h2_req_ops, h->c->proto);
  if (st->req == NULL)
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  st->req->pstate = st;
  st->arriving = 1;
  h->narriving++;
  return 0;
}

static int on_header(nghttp2_session *ss, const nghttp2_frame *f, const uint8_t *name, size_t nl,
                     const uint8_t *value, size_t vl, uint8_t flags, void *ud) {
  struct h2 *h = ud;
  if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
    return 0;
  struct h2s *st = nghttp2_session_get_stream_user_data(ss, f->hd.stream_id);
  if (st == NULL || st->refused || st->req == NULL)
    return 0;
  /* Count what the client sends, not what it was told: nghttp2 does not enforce the advertised
   * SETTINGS_MAX_HEADER_LIST_SIZE. */
  st->header_bytes += nl + vl + 4;
  st->nheaders++;
  if (st->header_bytes > 2 * LIM(h)->max_header_bytes) {
    st->refused = 1; /* far past the limit: stop spending on it */
    st_arrived(h, st);
    push_ev(h, EV_RST, st->id, NGHTTP2_ENHANCE_YOUR_CALM, NULL);
    return 0;
  }
  if (st->error)
    return 0;
  if (st->header_bytes > LIM(h)->max_header_bytes || st->nheaders > LIM(h)->max_headers) {
    st->error = 431;
    return 0;
  }
  if (nl > 0 && name[0] == ':') {
    char **slot = NULL;
    if (nl == 7 && memcmp(name, ":method", 7) == 0)
      slot = &st->pmethod;
    else if (nl == 5 && memcmp(name, ":path", 5) == 0)
      slot = &st->ppath;
    else if (nl == 10 && memcmp(name, ":authority", 10) == 0)
      slot = &st->pauthority;
    if (slot && *slot == NULL) {
      if (slot == &st->ppath && vl > LIM(h)->max_request_line) {
        st->error = 414;
        return 0;
      }
      *slot = tp__req_strndup(st->req, (const char *)value, vl); /* lives with the request */
      if (*slot == NULL)
        st->error = 503;
    }
    return 0;
  }
  if (memchr(value, '\0', vl)) {
    st->error = 400;
    return 0;
  }
  if (tp__req_add_header(st->req, (const char *)name, nl, (const char *)value, vl) != 0) {
    st->error = 503;
    return 0;
  }
  /* Noted on the way (HTTP/2 names are lower case, nghttp2 refuses others): headers_done needs
   * these two and need not look them up. */
  if (nl == 4 && memcmp(name, "host", 4) == 0)
    st->has_host = 1;
  else if (nl == 14 && memcmp(name, "content-length", 14) == 0 && st->clen == NULL)
    st->clen = st->req->hdrs[st->req->nhdrs - 1].value;
  return 0;
}

/* The head of a request is complete: target, route, body limit. */
static void headers_done(struct h2 *h, struct h2s *st, int end_stream) {
  struct tp_req *r = st->req;
  if (!st->error) {
    if (!st->pmethod || !st->ppath)
      st->error = 400;
    else if (strcmp(st->pmethod, "CONNECT") == 0)
      st->error = 405;
  }
  if (!st->error) {
    int rc = tp__req_set_target(r, st->pmethod, st->ppath, strlen(st->ppath));
    if (rc != 0)
      st->error = rc == SBX_ENOMEM ? 503 : 400;
  }
  if (!st->error) {
    if (st->pauthority && !st->has_host)
      tp__req_add_header(r, "host", 4, st->pauthority, strlen(st->pauthority));
    tp__req_route(r);
    r->body.limit = r->body_limit;
    unsigned long long n = st->clen ? strtoull(st->clen, NULL, 10) : 0;
    if (n > r->body_limit)
      st->error = 413;
    else if (n > 0 && !(r->route && r->route->on_body)) /* one allocation for the body */
      sbx_buf_reserve(&r->body, (size_t)n);
  }
  tp__req_set_state(r, REQ_BODY_IN);
  if (st->error) {
    st->dispatched = 1;
    st_arrived(h, st);
    push_ev(h, EV_ERROR, st->id, st->error, NULL);
  } else if (end_stream) {
    st->dispatched = 1;
    st_arrived(h, st);
    push_ev(h, EV_DISPATCH, st->id, 0, NULL);
  }
}

static int on_frame_recv(nghttp2_session *ss, const nghttp2_frame *f, void *ud) {
  struct h2 *h = ud;
  if ((f->hd.type == NGHTTP2_PING || f->hd.type == NGHTTP2_SETTINGS) &&
      !(f->hd.flags & NGHTTP2_FLAG_ACK)) {
    uint64_t now = uv_now(h->c->srv->loop);
    if (now - h->ctl_window_start >= 1000) {
      h->ctl_window_start = now;
      h->ctl_frames = 0;
    }
    if (++h->ctl_frames > CTL_FLOOD_PER_SEC) {
      h->c->srv->stats.protocol_errors++;
      push_ev(h, EV_RST, 0, NGHTTP2_ENHANCE_YOUR_CALM, NULL); /* id 0: the whole session */
    }
    return 0;
  }
  struct h2s *st =
      f->hd.stream_id ? nghttp2_session_get_stream_user_data(ss, f->hd.stream_id) : NULL;
  if (st == NULL || st->refused || st->req == NULL)
    return 0;
  int end = (f->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
  if (f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_REQUEST) {
    headers_done(h, st, end);
  } else if (end && !st->dispatched &&
             (f->hd.type == NGHTTP2_DATA || f->hd.type == NGHTTP2_HEADERS)) {
    st->dispatched = 1;
    st_arrived(h, st);
    push_ev(h, st->error ? EV_ERROR : EV_DISPATCH, st->id, st->error, NULL);
  }
  return 0;
}

static int on_data_chunk(nghttp2_session *ss, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *ud) {
  struct h2 *h = ud;
  struct h2s *st = nghttp2_session_get_stream_user_data(ss, id);
  if (st == NULL || st->refused || st->req == NULL || st->error || st->dispatched)
    return 0;
  int status = tp__req_body_data(st->req, data, len); /* a sink runs here: it does not answer */
  if (status != 0) {
    st->error = status;
    st->dispatched = 1;
    st_arrived(h, st);
    push_ev(h, EV_ERROR, id, st->error, NULL);
  }
  return 0;
}

static int on_stream_close(nghttp2_session *ss, int32_t id, uint32_t code, void *ud) {
  struct h2 *h = ud;
  struct h2s *st = nghttp2_session_get_stream_user_data(ss, id);
  if (st == NULL)
    return 0;
  nghttp2_session_set_stream_user_data(ss, id, NULL);
  h->nstreams--;
  st_arrived(h, st);
  if (st->req) {
    /* The request outlives its stream when a handler holds it: hand the reference to an event
     * that tells it (outside this callback), then forget the stream. */
    st->req->pstate = NULL;
    if (push_ev(h, EV_GONE, id, 0, st->req) != 0) {
      st->req->conn = NULL;
      tp__req_unref(st->req);
    }
    st->req = NULL;
  }
  h2s_free(st);
  return 0;
}

/* Big DATA payloads are not copied into nghttp2's frame buffer: on_data_read only says how much
 * (NGHTTP2_DATA_FLAG_NO_COPY) and on_send_data, called right after within the same
 * nghttp2_session_mem_send, writes the frame header and the bytes from the stream's queue
 * straight into the write block: one copy fewer per byte of a file or a big answer.  Small
 * payloads (most answers, SSE events) are copied: nghttp2's no-copy path costs more per frame
 * than a copy of a few hundred bytes (callgrind, bench/runs). */
#define NO_COPY_MIN 4096
static ssize_t on_data_read(nghttp2_session *ss, int32_t id, uint8_t *buf, size_t len,
                            uint32_t *flags, nghttp2_data_source *src, void *ud) {
  struct h2 *h = ud;
  struct h2s *st = src->ptr;
  size_t avail = st->out.len - st->out_off;
  size_t n = SBX_MIN(avail, len);
  if (n >= NO_COPY_MIN) {
    *flags |= NGHTTP2_DATA_FLAG_NO_COPY; /* the bytes leave the queue in on_send_data */
  } else if (n > 0) {
    memcpy(buf, st->out.data + st->out_off, n);
    st->out_off += n;
    if (st->out_off == st->out.len) {
      st->out_off = 0;
      st->out.len = 0;
    }
  }
  avail -= n;
  if (avail == 0 && st->out_end) {
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
  }
  if (avail < TP_LOW_WATER && st->req && !st->drain_queued &&
      (st->req->file_fd >= 0 || st->req->blocked)) {
    st->drain_queued = 1;
    push_ev(h, EV_DRAIN, id, 0, NULL);
  }
  if (n == 0) {
    st->deferred = 1;
    return NGHTTP2_ERR_DEFERRED;
  }
  return (ssize_t)n;
}

static int out_put(struct h2 *h, const void *p, size_t n);

static int on_send_data(nghttp2_session *ss, nghttp2_frame *f, const uint8_t *framehd,
                        size_t length, nghttp2_data_source *src, void *ud) {
  struct h2 *h = ud;
  struct h2s *st = src->ptr;
  /* Backpressure as between frames in h2_send: nghttp2 offers this frame again later. */
  if (h->c->wpending + h->olen >= LIM(h)->h2_outbound_queue_bytes)
    return NGHTTP2_ERR_WOULDBLOCK;
  if (f->data.padlen > 0 || length > st->out.len - st->out_off)
    return NGHTTP2_ERR_CALLBACK_FAILURE; /* no padding is ever chosen; more than queued cannot be */
  if (out_put(h, framehd, 9) != 0 || out_put(h, st->out.data + st->out_off, length) != 0)
    return NGHTTP2_ERR_CALLBACK_FAILURE;
  st->out_off += length;
  if (st->out_off == st->out.len) {
    st->out_off = 0;
    st->out.len = 0;
  }
  return 0;
}

/* ---- running the session -------------------------------------------------------------------- */

static void h2_run(struct h2 *h);

static void h2_kick(struct h2 *h) {
  if (h->state == H2_CLOSED)
    return;
  if (h->busy)
    h->want_send = 1;
  else
    tp__defer(h->c->srv, &h->flush); /* coalesce: one write for what this loop turn answers */
}

static void on_deferred_flush(struct tp_deferred *d) {
  struct h2 *h = SBX_CONTAINER_OF(d, struct h2, flush);
  h2_run(h);
}

/* Appends to the write block being filled; a full block goes to the socket and another is
 * taken.  0, or -1 (no memory, or the write failed). */
static int out_put(struct h2 *h, const void *p, size_t n) {
  const char *q = p;
  while (n > 0) {
    if (h->obuf && h->olen == TP_WBUF) { /* full: to the socket, on to another */
      char *full = h->obuf;
      h->obuf = NULL;
      h->olen = 0;
      if (tp__conn_write_wbuf(h->c, full, TP_WBUF) != 0)
        return -1;
    }
    if (h->obuf == NULL && (h->obuf = tp__wbuf_get(h->c->srv)) == NULL)
      return -1;
    size_t take = SBX_MIN(n, TP_WBUF - h->olen);
    memcpy(h->obuf + h->olen, q, take);
    h->olen += take;
    q += take;
    n -= take;
  }
  return 0;
}

/* Produces frames into pooled write blocks (one write each), while the socket is not too far
 * behind.  nghttp2's output is valid until its next call: it is copied once, into the block
 * (DATA payloads go there from the stream's queue, on_send_data). */
static int h2_send(struct h2 *h) {
  struct tp_conn *c = h->c;
  int rc = 0;
  h->olen = 0;
  while (c->wpending + h->olen < LIM(h)->h2_outbound_queue_bytes) {
    const uint8_t *data;
    h->in_ng = 1;
    ssize_t n = nghttp2_session_mem_send(h->ss, &data);
    h->in_ng = 0;
    if (n <= 0) {
      rc = n < 0 ? -1 : 0;
      break;
    }
    if (out_put(h, data, (size_t)n) != 0) {
      rc = -1;
      break;
    }
  }
  char *buf = h->obuf;
  size_t len = h->olen;
  h->obuf = NULL;
  h->olen = 0;
  if (buf && rc == 0 && len > 0)
    return tp__conn_write_wbuf(c, buf, len) == 0 ? 0 : -1;
  if (buf)
    tp__wbuf_put(c->srv, buf);
  return rc == 0 ? 0 : -1;
}

static void h2_answer_error(struct tp_req *r, int status) {
  static const struct {
    int status;
    const char *code, *msg;
  } t[] = {{400, "bad_request", "malformed request"},
           {405, "method_not_allowed", "method not allowed"},
           {408, "timeout", "request not received in time"},
           {413, "body_too_large", "request body over the limit"},
           {414, "uri_too_long", "request path over the limit"},
           {431, "headers_too_large", "request headers over the limit"},
           {500, "io", "the request body could not be stored"},
           {503, "no_memory", "out of memory"}};
  for (size_t i = 0; i < SBX_ARRAY_SIZE(t); i++)
    if (t[i].status == status) {
      tp_respond_error(r, status, t[i].code, t[i].msg);
      return;
    }
  tp_respond_error(r, status, "error", "refused");
}

/* The connection's one timer: idle_timeout with no stream; with streams, the header timeout of
 * the oldest request still arriving (slowloris on a stream), else idle_timeout as a stall check
 * (h2_on_timeout closes a connection whose client stopped reading).  Called after every read and
 * write, so it must stay cheap: the count of arriving streams spares the walk when none is (the
 * usual case), the walk stops at the first arriving one (the list is in arrival order), and
 * tp__conn_timer moves the libuv timer only when the deadline comes earlier. */
static void h2_arm_timer(struct h2 *h) {
  struct tp_conn *c = h->c;
  if (c->state == CONN_CLOSING)
    return;
  if (h->narriving == 0) {
    tp__conn_timer(c, LIM(h)->idle_timeout_ms);
    return;
  }
  uint64_t now = uv_now(c->srv->loop), oldest = now;
  struct sbx_list *it;
  SBX_LIST_FOREACH(it, &h->streams) {
    struct h2s *st = SBX_CONTAINER_OF(it, struct h2s, node);
    if (st->arriving) {
      oldest = st->begin;
      break;
    }
  }
  uint64_t due = oldest + LIM(h)->header_timeout_ms;
  tp__conn_timer(c, due > now ? due - now : 1);
}

/* Runs recorded events (handlers, errors, gone notices, file pumps) and sends, until quiet. */
static void h2_run(struct h2 *h) {
  if (h->busy || h->state == H2_CLOSED)
    return;
  h->busy = 1;
  struct tp_conn *c = h->c;
  tp__defer_cancel(&h->flush);
  for (int round = 0; round < 64; round++) {
    size_t nround = h->nevs; /* events recorded during this round wait for the next one */
    for (size_t i = 0; i < nround && c->state != CONN_CLOSING; i++) {
      struct h2_ev ev = h->evs[i];
      h->evs[i].type = EV_NONE; /* taken: h2_on_close must not hand it out again */
      struct h2s *st = ev.id ? nghttp2_session_get_stream_user_data(h->ss, ev.id) : NULL;
      switch (ev.type) {
      case EV_NONE:
        break;
      case EV_DISPATCH:
        if (st && st->req && st->req->state < REQ_HANDLING)
          tp__req_dispatch(st->req);
        break;
      case EV_ERROR:
        if (st && st->req && st->req->state < REQ_RESPONDING) {
          c->srv->stats.protocol_errors++;
          tp__req_abandon(st->req); /* a body sink drops its state */
          h2_answer_error(st->req, ev.status);
          /* The client may still be sending a body we refused: end the stream after the answer
           * (the reset is submitted next round, after the answer's frames went out). */
          if (!nghttp2_session_get_stream_remote_close(h->ss, ev.id))
            push_ev(h, EV_RST, ev.id, NGHTTP2_NO_ERROR, NULL);
        }
        break;
      case EV_GONE:
        ev.req->conn = NULL;
        tp__req_peer_gone(ev.req);
        tp__req_unref(ev.req);
        break;
      case EV_DRAIN:
        if (st) {
          st->drain_queued = 0;
          if (st->req)
            tp__req_drained(st->req);
        }
        break;
      case EV_RST:
        if (ev.id == 0) {
          if (h->state == H2_OPEN)
            h2_set_state(h, H2_DRAINING);
          nghttp2_session_terminate_session(h->ss, (uint32_t)ev.status);
        } else {
          nghttp2_submit_rst_stream(h->ss, NGHTTP2_FLAG_NONE, ev.id, (uint32_t)ev.status);
        }
        break;
      }
    }
    if (c->state == CONN_CLOSING) {
      for (size_t i = 0; i < h->nevs; i++)
        if (h->evs[i].type == EV_GONE) {
          h->evs[i].req->conn = NULL;
          tp__req_peer_gone(h->evs[i].req);
          tp__req_unref(h->evs[i].req);
        }
      h->nevs = 0;
      break;
    }
    if (nround > h->nevs) /* h2_on_close emptied the list */
      nround = h->nevs;
    if (h->nevs > nround)
      memmove(h->evs, h->evs + nround, (h->nevs - nround) * sizeof(*h->evs));
    h->nevs -= nround;
    h->want_send = 0;
    if (h2_send(h) != 0) {
      tp__conn_close(c, "HTTP/2 send failed");
      continue; /* hand out the gone events */
    }
    if (h->nevs == 0)
      break;
  }
  h->busy = 0;
  if (c->state == CONN_CLOSING)
    return;
  if (h->nevs)
    tp__defer(c->srv, &h->flush); /* more than 64 rounds of work: go on next loop turn */
  if (!nghttp2_session_want_read(h->ss) && !nghttp2_session_want_write(h->ss)) {
    c->close_when_done = 1;
    if (c->wpending == 0)
      tp__conn_close(c, "HTTP/2 session over");
    return;
  }
  /* Backpressure: a client that does not read what it asked for is not read either. */
  if (c->wpending >= LIM(h)->h2_outbound_queue_bytes ||
      nghttp2_session_get_outbound_queue_size(h->ss) > 4096)
    tp__conn_read_stop(c);
  else
    tp__conn_read_start(c);
  h2_arm_timer(h);
}

/* ---- struct tp_req_ops ------------------------------------------------------------------------ */

/* Connection-specific headers have no place in HTTP/2 (RFC 9113 8.2.2): dropped from heads.
 * `n` is lower case already; compared by length first, as every answer's headers pass here. */
static int is_hop_header(const char *n, size_t l) {
  switch (l) {
  case 7:
    return memcmp(n, "upgrade", 7) == 0;
  case 10:
    return memcmp(n, "connection", 10) == 0 || memcmp(n, "keep-alive", 10) == 0;
  case 16:
    return memcmp(n, "proxy-connection", 16) == 0;
  case 17:
    return memcmp(n, "transfer-encoding", 17) == 0;
  default:
    return 0;
  }
}

static int h2_head(struct tp_req *r, int status, const char *hdrs, size_t hlen, int64_t clen,
                   int has_body) {
  struct h2s *st = r->pstate;
  if (st == NULL || r->conn == NULL)
    return SBX_ECLOSED;
  struct h2 *h = st->h;
  /* "Name: value\r\n" lines -> lower-case name/value pairs, in one pass: each name is lower-cased
   * into a copy while looking for its colon; values point into hdrs (nghttp2 copies both).  The
   * usual head fits on the stack; a big one is allocated. */
  nghttp2_nv nv_stack[32];
  char copy_stack[1024];
  nghttp2_nv *nv = nv_stack;
  size_t cap = SBX_ARRAY_SIZE(nv_stack);
  char *copy = hlen < sizeof(copy_stack) ? copy_stack : sbx_malloc(hlen + 1);
  if (!copy)
    return SBX_ENOMEM;
  char sbuf[4] = {(char)('0' + status / 100 % 10), (char)('0' + status / 10 % 10),
                  (char)('0' + status % 10), 0};
  size_t n = 0, used = 0;
  nv[n++] = (nghttp2_nv){(uint8_t *)":status", (uint8_t *)sbuf, 7, 3, NGHTTP2_NV_FLAG_NONE};
  const char *p = hdrs, *end = hdrs + hlen;
  while (p < end) {
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    if (!eol)
      break;
    const char *le = eol > p && eol[-1] == '\r' ? eol - 1 : eol;
    char *name = copy + used;
    size_t nl = 0;
    while (p + nl < le && p[nl] != ':') {
      char ch = p[nl];
      name[nl++] = (char)(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch);
    }
    if (p + nl < le && nl > 0 && !is_hop_header(name, nl)) {
      const char *v = p + nl + 1;
      while (v < le && (*v == ' ' || *v == '\t'))
        v++;
      if (n == cap) { /* a big head: move to the heap */
        nghttp2_nv *bigger = sbx_malloc(2 * cap * sizeof(*bigger));
        if (bigger == NULL) {
          if (nv != nv_stack)
            sbx_free(nv);
          if (copy != copy_stack)
            sbx_free(copy);
          return SBX_ENOMEM;
        }
        memcpy(bigger, nv, n * sizeof(*nv));
        if (nv != nv_stack)
          sbx_free(nv);
        nv = bigger;
        cap *= 2;
      }
      used += nl;
      nv[n++] =
          (nghttp2_nv){(uint8_t *)name, (uint8_t *)v, nl, (size_t)(le - v), NGHTTP2_NV_FLAG_NONE};
    }
    p = eol + 1;
  }
  nghttp2_data_provider prd;
  prd.source.ptr = st;
  prd.read_callback = on_data_read;
  int rv = nghttp2_submit_response(h->ss, st->id, nv, n, has_body ? &prd : NULL);
  if (nv != nv_stack)
    sbx_free(nv);
  if (copy != copy_stack)
    sbx_free(copy);
  if (!has_body)
    st->out_end = 1;
  h2_kick(h);
  return rv == 0 ? 0 : SBX_EPROTO;
}

static int h2_data(struct tp_req *r, const void *data, size_t len) {
  struct h2s *st = r->pstate;
  if (st == NULL || r->conn == NULL)
    return SBX_ECLOSED;
  if (st->out.len == 0 && sbx_buf_reserve(&st->out, len) != 0) /* one allocation, not doublings */
    return SBX_ENOMEM;
  if (sbx_buf_append(&st->out, data, len) != 0)
    return SBX_ENOMEM;
  if (st->deferred) {
    st->deferred = 0;
    nghttp2_session_resume_data(st->h->ss, st->id);
  }
  h2_kick(st->h);
  return 0;
}

static int h2_end(struct tp_req *r) {
  struct h2s *st = r->pstate;
  if (st == NULL || r->conn == NULL)
    return SBX_ECLOSED;
  st->out_end = 1;
  if (st->deferred) {
    st->deferred = 0;
    nghttp2_session_resume_data(st->h->ss, st->id);
  }
  h2_kick(st->h);
  return 0; /* the peer's reference goes with the stream, in on_stream_close */
}

static size_t h2_queued(const struct tp_req *r) {
  const struct h2s *st = r->pstate;
  return st ? st->out.len - st->out_off : 0;
}

static const struct tp_req_ops h2_req_ops = {h2_head, h2_data, h2_end, h2_queued};

/* ---- struct tp_proto_ops ---------------------------------------------------------------------- */

static int h2_feed(struct tp_conn *c, const char *data, size_t len) {
  struct h2 *h = c->pdata;
  if (h->state == H2_CLOSED)
    return 0;
  h->in_ng = 1;
  ssize_t n = nghttp2_session_mem_recv(h->ss, (const uint8_t *)data, len);
  h->in_ng = 0;
  if (n < 0) {
    if (SBX_LOG_ENABLED(SBX_LOG_DEBUG))
      sbx_log(SBX_LOG_DEBUG, TP_MOD, "conn %llu: nghttp2: %s", (unsigned long long)c->id,
              nghttp2_strerror((int)n));
    c->srv->stats.protocol_errors++;
    /* Fatal for the session (bad preface, CONTINUATION or other flood): say so with a GOAWAY
     * when the session still can, then close. */
    if (h->state == H2_OPEN)
      h2_set_state(h, H2_DRAINING);
    nghttp2_session_terminate_session(h->ss, n == NGHTTP2_ERR_BAD_CLIENT_MAGIC
                                                 ? NGHTTP2_PROTOCOL_ERROR
                                                 : NGHTTP2_ENHANCE_YOUR_CALM);
    h2_run(h);
    if (c->state != CONN_CLOSING) {
      c->close_when_done = 1;
      if (c->wpending == 0)
        tp__conn_close(c, "HTTP/2 protocol error");
    }
    return 0;
  }
  h2_run(h);
  return 0;
}

static void h2_on_written(struct tp_conn *c) {
  struct h2 *h = c->pdata;
  if (h->state == H2_CLOSED)
    return;
  if (nghttp2_session_want_write(h->ss) || h->nevs) {
    h2_run(h);
    return;
  }
  if (c->wpending < LIM(h)->h2_outbound_queue_bytes / 2)
    tp__conn_read_start(c);
  h2_arm_timer(h); /* progress */
}

static void h2_on_close(struct tp_conn *c) {
  struct h2 *h = c->pdata;
  tp__defer_cancel(&h->flush);
  h2_set_state(h, H2_CLOSED);
  /* nghttp2_session_del calls no stream-close callback: tell the requests here.  The streams'
   * memory goes with the session, in h2_destroy. */
  struct sbx_list *it;
  SBX_LIST_FOREACH(it, &h->streams) {
    struct h2s *st = SBX_CONTAINER_OF(it, struct h2s, node);
    st_arrived(h, st);
    if (st->req) {
      struct tp_req *r = st->req;
      st->req = NULL;
      r->pstate = NULL;
      r->conn = NULL;
      tp__req_peer_gone(r);
      tp__req_unref(r);
    }
  }
  for (size_t i = 0; i < h->nevs; i++)
    if (h->evs[i].type == EV_GONE) {
      h->evs[i].req->conn = NULL;
      tp__req_peer_gone(h->evs[i].req);
      tp__req_unref(h->evs[i].req);
    }
  h->nevs = 0;
}

static void h2_destroy(void *pdata) {
  struct h2 *h = pdata;
  if (h->ss)
    nghttp2_session_del(h->ss);
  while (!SBX_LIST_EMPTY(&h->streams))
    h2s_free(SBX_CONTAINER_OF(h->streams.next, struct h2s, node));
  sbx_free(h->evs);
  sbx_free(h);
}

static void h2_on_eof(struct tp_conn *c) { tp__conn_close(c, "eof"); }

static void h2_goaway(struct tp_conn *c, uint32_t code) {
  struct h2 *h = c->pdata;
  if (h->state == H2_OPEN) {
    h2_set_state(h, H2_DRAINING);
    push_ev(h, EV_RST, 0, (int)code, NULL);
  }
  h2_run(h);
}

static void h2_shutdown(struct tp_conn *c) {
  struct h2 *h = c->pdata;
  if (h->state != H2_OPEN)
    return;
  /* Graceful: GOAWAY with the last stream id; streams in flight finish. */
  h2_set_state(h, H2_DRAINING);
  nghttp2_submit_goaway(h->ss, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(h->ss),
                        NGHTTP2_NO_ERROR, NULL, 0);
  h2_run(h); /* once the streams in flight end, the session wants nothing more and closes */
}

static void h2_on_timeout(struct tp_conn *c) {
  struct h2 *h = c->pdata;
  /* Requests that did not arrive in time: 408 on their stream (then reset), not the connection. */
  uint64_t now = uv_now(c->srv->loop);
  int expired = 0;
  struct sbx_list *it;
  SBX_LIST_FOREACH(it, &h->streams) {
    struct h2s *st = SBX_CONTAINER_OF(it, struct h2s, node);
    if (st->arriving && now - st->begin >= LIM(h)->header_timeout_ms) {
      st->dispatched = 1;
      st_arrived(h, st);
      push_ev(h, EV_ERROR, st->id, 408, NULL);
      expired++;
    }
  }
  if (expired) {
    h2_run(h);
    return;
  }
  if (h->nstreams == 0) {
    h2_goaway(c, NGHTTP2_NO_ERROR);
    if (c->state != CONN_CLOSING) {
      c->close_when_done = 1;
      if (c->wpending == 0)
        tp__conn_close(c, "idle timeout");
    }
  } else if (c->wpending > 0) {
    tp__conn_close(c, "client stopped reading");
  } else {
    h2_arm_timer(h);
  }
}

static const struct tp_proto_ops h2_ops = {h2_feed,     h2_on_written, h2_on_close, h2_on_eof,
                                           h2_shutdown, h2_on_timeout, h2_destroy};

int tp__h2_start(struct tp_conn *c, const char *data, size_t len) {
  static nghttp2_session_callbacks *cbs;
  static nghttp2_option *opt;
  if (cbs == NULL) {
    if (nghttp2_session_callbacks_new(&cbs) != 0)
      return SBX_ENOMEM;
    nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
    nghttp2_session_callbacks_set_send_data_callback(cbs, on_send_data);
  }
  if (opt == NULL) {
    if (nghttp2_option_new(&opt) != 0)
      return SBX_ENOMEM;
    nghttp2_option_set_no_closed_streams(opt, 1);              /* no memory for closed streams */
    nghttp2_option_set_stream_reset_rate_limit(opt, 1000, 33); /* rapid reset */
    nghttp2_option_set_max_continuations(opt, 8);              /* CONTINUATION flood */
    nghttp2_option_set_max_outbound_ack(opt, 1000);            /* SETTINGS/PING ACKs not read */
    nghttp2_option_set_max_settings(opt, 32);
    nghttp2_option_set_max_deflate_dynamic_table_size(opt, 4096);
  }
  struct h2 *h = sbx_calloc(1, sizeof(*h));
  if (h == NULL)
    return SBX_ENOMEM;
  h->c = c;
  SBX_LIST_INIT(&h->streams);
  SBX_LIST_INIT(&h->flush.node);
  h->flush.fn = on_deferred_flush;
  if (nghttp2_session_server_new2(&h->ss, cbs, h, opt) != 0) {
    sbx_free(h);
    return SBX_ENOMEM;
  }
  c->pdata = h;
  c->ops = &h2_ops;
  const struct tp_limits *l = &c->srv->cfg.limits;
  nghttp2_settings_entry iv[] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, l->h2_max_concurrent_streams},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, (uint32_t)l->max_header_bytes},
      {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
  };
  nghttp2_submit_settings(h->ss, NGHTTP2_FLAG_NONE, iv, SBX_ARRAY_SIZE(iv));
  tp__conn_timer(c, l->handshake_timeout_ms);
  if (len > 0)
    return h2_feed(c, data, len);
  h2_run(h);
  return 0;
}
