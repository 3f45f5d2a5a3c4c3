/* http2.c -- the HTTP/2 protocol peer over nghttp2: one server session per connection (h2c with
 * prior knowledge, or h2 after TLS ALPN), each stream a struct tp_req served through the same
 * handler API as HTTP/1.1, Server-Sent Events included (one stream per event stream).
 *
 * Rules kept here (nghttp2's libevent example, and the field notes):
 *  - never call the session from its own callbacks: callbacks only record events (dispatch this
 *    stream, answer it with an error, tell this request its peer is gone, reset this stream); the
 *    events run after nghttp2_session_mem_recv/mem_send returned (h2_run), and so does every
 *    handler;
 *  - per-stream data (struct h2s) is freed only in the stream-close callback (or with the session
 *    when the connection dies, since nghttp2_session_del calls no callback);
 *  - MAX_CONCURRENT_STREAMS (<= 100) advertised and counted here too; header bytes and count
 *    counted in the header callback, request and trailer blocks alike (431 on the stream up to
 *    twice the limit; past it the callback refuses, so nghttp2 stops decoding at once, and the
 *    connection ends: an HPACK block of a few bytes can decode to megabytes); decoded header bytes
 *    per connection and second bounded the same way (h2_header_bytes_per_sec); the reset-rate and
 *    CONTINUATION limits and the outbound ACK bound set as options; floods of frames that cost
 *    work and carry nothing (SETTINGS, PING, PRIORITY, empty DATA: FLOOD_PER_SEC each; WINDOW_UPDATE
 *    beyond WU_PER_DATA per DATA frame sent) end the connection with ENHANCE_YOUR_CALM, logged once
 *    (tp__log_abuse);
 *  - output backpressure: frames are produced only while the socket has less than
 *    h2_outbound_queue_bytes unsent, reads pause while it is over (a client that sends but does
 *    not read stops being read); what waits for flow-control windows in the streams' queues is
 *    bounded per connection and server-wide (new streams are refused past either), files are read
 *    no further ahead than the window (h2_room), and a connection whose bytes do not move for
 *    idle_timeout is closed;
 *  - the header timeout covers a request's head only; its body has its own deadline
 *    (tp__body_due), so a slow but steady upload is never cut.
 *
 * What it does not do: server push, priorities, trailers (counted, then dropped), the HTTP/1.1
 * Upgrade to h2c.
 *
 *   connection life (struct h2.state)
 *
 *     OPEN --GOAWAY sent (shutdown, abuse, idle, protocol error)--> DRAINING --flushed--> CLOSED
 *       \------------------------ conn closed under us ---------------------------------/
 *
 *   stream life (struct h2s.state; st_set_state is its one writer)
 *
 *     HEAD --END_HEADERS, body follows--> BODY --END_STREAM--> READY --dispatch--> HANDLING
 *      |  \------END_HEADERS+END_STREAM-------------------------^                   |
 *      |                                                                       answer's head
 *      +--over a limit--> HEAD_BAD --END_HEADERS--+                                 v
 *      |                                          v                      SENDING <--> WAITING
 *      +--(HEAD|BODY) refused, 413, 408---------> FAILED --error answer-->   |            |
 *      |                                                                     +--> ENDED <-+
 *      +--refused at its first frame (streams, bounds)--> RESET     answer's end queued
 *   any state --nghttp2 closed the stream, or the connection went--> CLOSED (then freed)
 *
 *   state     what holds                                   transition into it by
 *   HEAD      HEADERS arriving (header timeout)            on_begin_headers (the first state)
 *   HEAD_BAD  the same, refused already: only counted      on_header
 *   BODY      body arriving (its deadline; max_bodies)     headers_done
 *   READY     complete; its dispatch event is queued       headers_done, on_frame_recv
 *   FAILED    refused while arriving; error event queued   headers_done, on_data_chunk, timeout
 *   RESET     refused with RST_STREAM; all input ignored   on_begin_headers
 *   HANDLING  the handler has it, no answer yet            h2_run (EV_DISPATCH)
 *   SENDING   answer submitted; bytes leave st->out        h2_head, h2_data/h2_end (resume)
 *   WAITING   st->out empty: nghttp2 holds the stream      on_data_read (NGHTTP2_ERR_DEFERRED)
 *   ENDED     the answer's end is queued (EOF when drained) h2_head (no body), h2_end
 *   CLOSED    gone from nghttp2; freed right after         on_stream_close, h2_on_close
 *
 * HEAD, HEAD_BAD and BODY are "arriving" (counted in h->narriving: the connection's timer watches
 * them); BODY is counted server-wide in max_bodies (tp__body_enter/leave).  A stream whose answer
 * pumps a file or has a writer waiting on SBX_EAGAIN is drained after each send (h2_drains).
 */
#include "internal.h"

#include <assert.h>
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

enum h2_state { H2_OPEN = 0, H2_DRAINING, H2_CLOSED };

enum h2s_state {
  H2S_HEAD = 0,
  H2S_HEAD_BAD,
  H2S_BODY,
  H2S_READY,
  H2S_FAILED,
  H2S_RESET,
  H2S_HANDLING,
  H2S_SENDING,
  H2S_WAITING,
  H2S_ENDED,
  H2S_CLOSED,
};

enum ev_type { EV_NONE = 0, EV_DISPATCH, EV_ERROR, EV_GONE, EV_RST };

struct h2_ev {
  enum ev_type type;
  int32_t id;
  int code;           /* EV_RST: the error code */
  struct tp_req *req; /* EV_GONE: a reference */
};

struct h2;

struct h2s {
  struct h2 *h;
  int32_t id;
  enum h2s_state state;
  enum tp_refusal why; /* HEAD_BAD, FAILED: the answer it gets */
  struct tp_req *req;  /* the peer's reference; NULL once handed back */
  struct sbx_list node;
  size_t header_bytes, nheaders;
  char *pmethod, *ppath, *pauthority; /* in the request's arena */
  const char *clen; /* the content-length header's value (the request's copy), or NULL */
  int has_host;     /* a host header came */
  struct sbx_buf out;
  size_t out_off;
  uint64_t begin; /* when its HEADERS began: the head must be complete by header_timeout */
};

/* Frames of one kind a peer may send at most FLOOD_PER_SEC a second. */
struct flood {
  uint64_t start;
  uint32_t n;
};

struct h2 {
  struct tp_conn *c;
  nghttp2_session *ss;
  enum h2_state state;
  struct sbx_list streams; /* in the order their HEADERS began */
  size_t nstreams;
  size_t narriving; /* streams in HEAD, HEAD_BAD or BODY: the connection's timer watches them */
  size_t queued;    /* bytes in the streams' queues (st->out), not yet framed */
  struct h2_ev *evs;
  size_t nevs, evcap;
  int busy; /* inside h2_run: kicks only mark want_send */
  int want_send;
  int throttled; /* a file waits on the connection's or the server's buffer bound */
  struct tp_deferred flush;
  char *obuf; /* the write block h2_send is filling (NULL outside it) */
  size_t olen;
  uint64_t progress; /* when bytes last went out (loop ms): a stalled reader is closed */
  struct flood ctl, priority, empty_data;
  uint64_t wu_frames, data_frames; /* WINDOW_UPDATEs received, DATA frames sent */
  uint64_t hdr_window;             /* the second the decoded header bytes are counted in */
  size_t hdr_bytes;
  const char *abuse; /* why the connection is being ended for abuse (logged once) */
};

#define FLOOD_PER_SEC 200 /* SETTINGS, PING, PRIORITY, empty DATA frames: each, a second */
#define WU_PER_DATA   10  /* WINDOW_UPDATE frames per DATA frame sent (beyond FLOOD_PER_SEC) */

static const struct tp_req_ops h2_req_ops;

static const struct tp_limits *LIM(struct h2 *h) { return &h->c->srv->cfg.limits; }

/* ---- the two state machines ------------------------------------------------------------------ */

static const char *const h2_names[] = {"OPEN", "DRAINING", "CLOSED"};
static const uint32_t h2_from[] = {
    [H2_OPEN] = 0,
    [H2_DRAINING] = SBX_FSM_BIT(H2_OPEN),
    [H2_CLOSED] = SBX_FSM_BIT(H2_OPEN) | SBX_FSM_BIT(H2_DRAINING),
};
static const struct sbx_fsm h2_fsm = SBX_FSM(TP_MOD, "h2", h2_names, h2_from, NULL);

#define h2_set_state(h, st) h2_set_state_((h), (st), __FILE__, __LINE__)
static void h2_set_state_(struct h2 *h, enum h2_state st, const char *file, int line) {
  if (sbx_fsm_step(&h2_fsm, h->state, st, h->c->id_text, file, line) == 0)
    h->state = st;
}

static const char *const st_names[] = {"HEAD",    "HEAD_BAD", "BODY",     "READY",
                                       "FAILED",  "RESET",    "HANDLING", "SENDING",
                                       "WAITING", "ENDED",    "CLOSED"};
#define B(s)     SBX_FSM_BIT(H2S_##s)
#define ARRIVING (B(HEAD) | B(HEAD_BAD) | B(BODY))
static const uint32_t st_from[] = {
    [H2S_HEAD] = 0,
    [H2S_HEAD_BAD] = B(HEAD),
    [H2S_BODY] = B(HEAD),
    [H2S_READY] = B(HEAD) | B(BODY),
    [H2S_FAILED] = ARRIVING,
    [H2S_RESET] = B(HEAD),
    [H2S_HANDLING] = B(READY),
    [H2S_SENDING] = B(HANDLING) | B(FAILED) | B(WAITING),
    [H2S_WAITING] = B(SENDING),
    [H2S_ENDED] = B(HANDLING) | B(FAILED) | B(SENDING) | B(WAITING),
    [H2S_CLOSED] = (1u << H2S_CLOSED) - 1, /* from every state before it */
};

/* Debug builds check, after each step, that the stream's record matches its state. */
static int st_invariant(const void *obj, unsigned state) {
  const struct h2s *st = obj;
  switch (state) {
  case H2S_HEAD_BAD:
  case H2S_FAILED:
    return st->why != TP_OK;
  case H2S_BODY:
  case H2S_READY:
  case H2S_HANDLING:
    return st->req != NULL;
  case H2S_RESET:
    return st->req == NULL;
  default:
    return 1;
  }
}
static const struct sbx_fsm st_fsm = SBX_FSM(TP_MOD, "h2 stream", st_names, st_from, st_invariant);

static int st_arriving(const struct h2s *st) { return (ARRIVING & SBX_FSM_BIT(st->state)) != 0; }
#undef B

/* The one writer of st->state, and of what follows from it: the connection's count of arriving
 * streams and the server's of bodies arriving. */
#define st_set_state(st, to) st_set_state_((st), (to), __FILE__, __LINE__)
static void st_set_state_(struct h2s *st, enum h2s_state to, const char *file, int line) {
  if (st->state == to)
    return;
  if (sbx_fsm_step(&st_fsm, st->state, to, st->h->c->id_text, file, line) != 0)
    return;
  int was = st_arriving(st);
  if (st->state == H2S_BODY)
    tp__body_leave(st->req);
  st->state = to;
  if (to == H2S_BODY)
    tp__body_enter(st->req);
  int is = st_arriving(st);
  if (was && !is)
    st->h->narriving--;
  else if (is && !was)
    st->h->narriving++;
  SBX_FSM_CHECK(&st_fsm, st, to, st->h->c->id_text);
}

static int push_ev(struct h2 *h, enum ev_type t, int32_t id, int code, struct tp_req *req) {
  if (h->nevs == h->evcap) {
    size_t cap = h->evcap ? h->evcap * 2 : 8;
    struct h2_ev *n = sbx_realloc(h->evs, cap * sizeof(*n));
    if (n == NULL)
      return -1;
    h->evs = n;
    h->evcap = cap;
  }
  h->evs[h->nevs++] = (struct h2_ev){t, id, code, req};
  return 0;
}

/* The stream is refused while arriving: its error answer is queued. */
static void st_fail(struct h2s *st, enum tp_refusal why) {
  st->why = why;
  st_set_state(st, H2S_FAILED);
  push_ev(st->h, EV_ERROR, st->id, 0, NULL);
}

/* The connection ends for abuse: the callback returns this, nghttp2 stops where it is (no more
 * decoding), and h2_feed sends GOAWAY ENHANCE_YOUR_CALM and logs `what` once. */
static int h2_abuse(struct h2 *h, const char *what) {
  if (h->abuse == NULL)
    h->abuse = what;
  return NGHTTP2_ERR_CALLBACK_FAILURE;
}

static int flood(struct h2 *h, struct flood *f, const char *what) {
  uint64_t now = uv_now(h->c->srv->loop);
  if (now - f->start >= 1000) {
    f->start = now;
    f->n = 0;
  }
  return ++f->n > FLOOD_PER_SEC ? h2_abuse(h, what) : 0;
}

/* Bytes queued in a stream (counted in its connection and in the server). */
static void queued_add(struct h2s *st, size_t n) {
  st->h->queued += n;
  st->h->c->srv->queued += n;
}
static void queued_sub(struct h2s *st, size_t n) {
  st->h->queued -= n;
  st->h->c->srv->queued -= n;
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
  if (st->state != H2S_CLOSED)
    st_set_state(st, H2S_CLOSED);
  queued_sub(st, st->out.len - st->out_off);
  if (st->out.cap >= TP_LOW_WATER)
    tp__freed(s, st->out.cap);
  sbx_list_remove(&st->node);
  sbx_buf_free(&st->out);
  sbx_freelist_give(&s->h2s_pool, st);
}

/* ---- nghttp2 callbacks: they record, they never call the session nor user code --------------- */

static int on_begin_headers(nghttp2_session *ss, const nghttp2_frame *f, void *ud) {
  struct h2 *h = ud;
  if (f->hd.type != NGHTTP2_HEADERS)
    return 0;
  uint64_t now = uv_now(h->c->srv->loop);
  if (now - h->hdr_window >= 1000) { /* the decoded header bytes are counted by the second */
    h->hdr_window = now;
    h->hdr_bytes = 0;
  }
  if (f->headers.cat != NGHTTP2_HCAT_REQUEST)
    return 0; /* trailers: their stream is known */
  struct h2s *st = h2s_new(h->c->srv);
  if (st == NULL)
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* nghttp2 resets the stream */
  st->h = h;
  st->id = f->hd.stream_id;
  st->begin = now;
  SBX_LIST_INIT(&st->node);
  sbx_list_insert_tail(&h->streams, &st->node);
  sbx_buf_init(&st->out, SIZE_MAX / 2);
  h->nstreams++;
  h->narriving++; /* HEAD is arriving */
  nghttp2_session_set_stream_user_data(ss, st->id, st);
  /* Refused at once: too many streams, a connection going away, or too many bytes already
   * waiting for this client (or for all) to read. */
  if (h->nstreams > LIM(h)->h2_max_concurrent_streams || h->state != H2_OPEN ||
      h->queued >= LIM(h)->h2_conn_buffer_bytes || h->c->srv->queued >= LIM(h)->buffer_bytes) {
    st_set_state(st, H2S_RESET);
    push_ev(h, EV_RST, st->id, NGHTTP2_REFUSED_STREAM, NULL);
    return 0;
  }
  st->req = tp__req_new(h->c, &h2_req_ops, h->c->proto);
  if (st->req == NULL)
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  st->req->pstate = st;
  return 0;
}

/* Counts a decoded header against the block's and the connection's bounds: 0, or the refusal
 * that ends the connection (returned to nghttp2, which then stops decoding). */
static int count_header(struct h2 *h, struct h2s *st, size_t n) {
  h->hdr_bytes += n;
  if (h->hdr_bytes > LIM(h)->h2_header_bytes_per_sec)
    return h2_abuse(h, "decoded header bytes over the limit a second (HPACK)");
  if (st && (st->header_bytes += n) > 2 * LIM(h)->max_header_bytes)
    return h2_abuse(h, "header block over twice the limit (HPACK bomb?)");
  return 0;
}

static int on_header(nghttp2_session *ss, const nghttp2_frame *f, const uint8_t *name, size_t nl,
                     const uint8_t *value, size_t vl, uint8_t flags, void *ud) {
  struct h2 *h = ud;
  if (f->hd.type != NGHTTP2_HEADERS)
    return 0;
  struct h2s *st = nghttp2_session_get_stream_user_data(ss, f->hd.stream_id);
  /* Count what the client sends, not what it was told: nghttp2 does not enforce the advertised
   * SETTINGS_MAX_HEADER_LIST_SIZE.  Trailers and refused streams are counted too. */
  if (count_header(h, st, nl + vl + 4) != 0)
    return NGHTTP2_ERR_CALLBACK_FAILURE;
  if (st == NULL || st->state != H2S_HEAD || f->headers.cat != NGHTTP2_HCAT_REQUEST)
    return 0;
  st->nheaders++;
  if (st->header_bytes > LIM(h)->max_header_bytes || st->nheaders > LIM(h)->max_headers) {
    st->why = st->header_bytes > LIM(h)->max_header_bytes ? TP_R_HEADERS_TOO_LARGE
                                                          : TP_R_TOO_MANY_HEADERS;
    st_set_state(st, H2S_HEAD_BAD);
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
      enum tp_refusal why = TP_OK;
      if (slot == &st->ppath && vl > LIM(h)->max_request_line)
        why = TP_R_URI_TOO_LONG;
      else if ((*slot = tp__req_strndup(st->req, (const char *)value, vl)) == NULL)
        why = TP_R_NO_MEMORY; /* the copy lives with the request */
      if (why) {
        st->why = why;
        st_set_state(st, H2S_HEAD_BAD);
      }
    }
    return 0;
  }
  enum tp_refusal why = TP_OK;
  if (memchr(value, '\0', vl))
    why = TP_R_BAD_HEADER;
  else if (tp__req_add_header(st->req, (const char *)name, nl, (const char *)value, vl) != 0)
    why = TP_R_NO_MEMORY;
  if (why) {
    st->why = why;
    st_set_state(st, H2S_HEAD_BAD);
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

/* The head of a request is complete: target, route, body limit, and what comes next. */
static void headers_done(struct h2 *h, struct h2s *st, int end_stream) {
  struct tp_req *r = st->req;
  enum tp_refusal why = st->state == H2S_HEAD_BAD ? st->why : TP_OK;
  if (!why) {
    if (!st->pmethod || !st->ppath)
      why = TP_R_BAD_REQUEST;
    else if (strcmp(st->pmethod, "CONNECT") == 0)
      why = TP_R_METHOD;
  }
  if (!why) {
    int rc = tp__req_set_target(r, st->pmethod, st->ppath, strlen(st->ppath));
    if (rc != 0)
      why = rc == SBX_ENOMEM ? TP_R_NO_MEMORY : TP_R_BAD_TARGET;
  }
  if (!why) {
    if (st->pauthority && !st->has_host)
      tp__req_add_header(r, "host", 4, st->pauthority, strlen(st->pauthority));
    tp__req_route(r);
    r->body.limit = r->body_limit;
    unsigned long long n = st->clen ? strtoull(st->clen, NULL, 10) : 0;
    if (n > r->body_limit)
      why = TP_R_BODY_TOO_LARGE;
    else if (!end_stream)
      why = tp__body_admit(r);
    if (!why && n > 0 && !(r->route && r->route->on_body)) /* one allocation for the body */
      sbx_buf_reserve(&r->body, (size_t)n);
  }
  tp__req_set_state(r, REQ_BODY_IN);
  if (why) {
    st_fail(st, why);
  } else if (end_stream) {
    st_set_state(st, H2S_READY);
    push_ev(h, EV_DISPATCH, st->id, 0, NULL);
  } else {
    st_set_state(st, H2S_BODY);
  }
}

static int on_frame_recv(nghttp2_session *ss, const nghttp2_frame *f, void *ud) {
  struct h2 *h = ud;
  int end = (f->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
  switch (f->hd.type) {
  case NGHTTP2_PING:
  case NGHTTP2_SETTINGS:
    if (!(f->hd.flags & NGHTTP2_FLAG_ACK))
      return flood(h, &h->ctl, "SETTINGS/PING flood");
    return 0;
  case NGHTTP2_PRIORITY:
    return flood(h, &h->priority, "PRIORITY flood");
  case NGHTTP2_WINDOW_UPDATE:
    /* A client opens windows as it reads what we sent: beyond that it only costs us. */
    if (++h->wu_frames > FLOOD_PER_SEC + WU_PER_DATA * h->data_frames)
      return h2_abuse(h, "WINDOW_UPDATE flood");
    return 0;
  case NGHTTP2_DATA:
    if (f->hd.length <= f->data.padlen && !end && flood(h, &h->empty_data, "empty DATA flood"))
      return NGHTTP2_ERR_CALLBACK_FAILURE;
    break;
  case NGHTTP2_HEADERS:
    break;
  default:
    return 0;
  }
  struct h2s *st =
      f->hd.stream_id ? nghttp2_session_get_stream_user_data(ss, f->hd.stream_id) : NULL;
  if (st == NULL)
    return 0;
  if (f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_REQUEST &&
      (st->state == H2S_HEAD || st->state == H2S_HEAD_BAD)) {
    headers_done(h, st, end);
  } else if (end && st->state == H2S_BODY) { /* the last DATA, or trailers */
    st_set_state(st, H2S_READY);
    push_ev(h, EV_DISPATCH, st->id, 0, NULL);
  }
  return 0;
}

static int on_data_chunk(nghttp2_session *ss, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *ud) {
  struct h2s *st = nghttp2_session_get_stream_user_data(ss, id);
  if (st == NULL || st->state != H2S_BODY)
    return 0;
  enum tp_refusal why = tp__req_body_data(st->req, data, len); /* a sink runs here, never answers */
  if (why != TP_OK)
    st_fail(st, why);
  return 0;
}

static int on_stream_close(nghttp2_session *ss, int32_t id, uint32_t code, void *ud) {
  struct h2 *h = ud;
  struct h2s *st = nghttp2_session_get_stream_user_data(ss, id);
  if (st == NULL)
    return 0;
  nghttp2_session_set_stream_user_data(ss, id, NULL);
  h->nstreams--;
  st_set_state(st, H2S_CLOSED);
  if (st->req) {
    /* The request outlives its stream when a handler holds it: hand the reference to an event
     * that tells it (outside this callback), then forget the stream. */
    st->req->pstate = NULL;
    if (push_ev(h, EV_GONE, id, 0, st->req) != 0) {
      tp__req_detach(st->req);
      tp__req_unref(st->req);
    }
    st->req = NULL;
  }
  h2s_free(st);
  return 0;
}

/* Takes n bytes off the front of the stream's queue. */
static void out_consume(struct h2s *st, size_t n) {
  st->out_off += n;
  queued_sub(st, n);
  if (st->out_off == st->out.len) {
    st->out_off = 0;
    st->out.len = 0;
  }
}

/* Big DATA payloads are not copied into nghttp2's frame buffer: on_data_read only says how much
 * (NGHTTP2_DATA_FLAG_NO_COPY) and on_send_data, called right after within the same
 * nghttp2_session_mem_send, writes the frame header and the bytes from the stream's queue
 * straight into the write block: one copy fewer per byte of a file or a big answer.  Small
 * payloads (most answers, SSE events) are copied: nghttp2's no-copy path costs more per frame
 * than a copy of a few hundred bytes. */
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
    out_consume(st, n);
  }
  if (avail == n && st->state == H2S_ENDED) {
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    h->data_frames++;
    return (ssize_t)n;
  }
  if (n == 0) {
    st_set_state(st, H2S_WAITING);
    return NGHTTP2_ERR_DEFERRED;
  }
  h->data_frames++;
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
  out_consume(st, length);
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
  size_t sent = 0;
  h->olen = 0;
  while (c->wpending + h->olen < LIM(h)->h2_outbound_queue_bytes) {
    const uint8_t *data;
    ssize_t n = nghttp2_session_mem_send(h->ss, &data);
    if (n <= 0) {
      rc = n < 0 ? -1 : 0;
      break;
    }
    sent += (size_t)n;
    if (out_put(h, data, (size_t)n) != 0) {
      rc = -1;
      break;
    }
  }
  if (sent > 0)
    h->progress = uv_now(c->srv->loop);
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

/* After a send: every answer that waits on drains (a file pumped as the peer takes it, a writer
 * told SBX_EAGAIN) and whose queue fell below the low-water mark goes on.  A file held back only
 * by the connection's or the server's buffer bound marks the connection throttled: its timer
 * then comes back soon (another connection may have drained meanwhile). */
static void h2_drains(struct h2 *h) {
  struct sbx_list *it, *tmp;
  h->throttled = 0;
  SBX_LIST_FOREACH_SAFE(it, tmp, &h->streams) {
    struct h2s *st = SBX_CONTAINER_OF(it, struct h2s, node);
    if ((st->state != H2S_SENDING && st->state != H2S_WAITING) || st->req == NULL ||
        !tp__req_wants_drain(st->req) || st->out.len - st->out_off >= TP_LOW_WATER)
      continue;
    tp__req_drained(st->req); /* may end the answer or even the connection */
    if (h->c->state == CONN_CLOSING)
      return;
    if (st->req && st->req->file && st->out.len == st->out_off &&
        (h->queued >= LIM(h)->h2_conn_buffer_bytes || h->c->srv->queued >= LIM(h)->buffer_bytes))
      h->throttled = 1;
  }
}

/* The connection's one timer: idle_timeout with no stream; with streams, the nearest deadline of
 * a request still arriving (the header timeout of a head, the body's own deadline), else
 * idle_timeout from the last bytes that went out while some wait to (h2_on_timeout closes a
 * connection whose client stopped reading), and soon when throttled.  Called after every read
 * and write, so it must stay cheap: the count of arriving streams spares the walk when none is
 * (the usual case), and tp__conn_timer moves the libuv timer only when the deadline comes
 * earlier. */
static void h2_arm_timer(struct h2 *h) {
  struct tp_conn *c = h->c;
  if (c->state != CONN_H2)
    return;
  uint64_t now = uv_now(c->srv->loop);
  uint64_t due = ((h->queued > 0 || c->wpending > 0) ? h->progress : now) + LIM(h)->idle_timeout_ms;
  if (h->throttled)
    due = SBX_MIN(due, now + 200);
  if (h->narriving > 0) {
    struct sbx_list *it;
    SBX_LIST_FOREACH(it, &h->streams) {
      struct h2s *st = SBX_CONTAINER_OF(it, struct h2s, node);
      if (st->state == H2S_HEAD || st->state == H2S_HEAD_BAD)
        due = SBX_MIN(due, st->begin + LIM(h)->header_timeout_ms);
      else if (st->state == H2S_BODY)
        due = SBX_MIN(due, tp__body_due(st->req, now));
    }
  }
  tp__conn_timer(c, due > now ? due - now : 1);
}

/* Runs recorded events (handlers, errors, gone notices), sends, and drains, until quiet. */
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
        if (st && st->state == H2S_READY) {
          st_set_state(st, H2S_HANDLING);
          tp__req_dispatch(st->req);
        }
        break;
      case EV_ERROR:
        if (st && st->state == H2S_FAILED && st->req && st->req->state < REQ_RESPONDING) {
          c->srv->stats.protocol_errors++;
          tp__req_abandon(st->req); /* a body sink drops its state */
          tp__refuse(st->req, st->why);
          /* The client may still be sending a body we refused: end the stream after the answer
           * (the reset is submitted next round, after the answer's frames went out). */
          if (!nghttp2_session_get_stream_remote_close(h->ss, ev.id))
            push_ev(h, EV_RST, ev.id, NGHTTP2_NO_ERROR, NULL);
        }
        break;
      case EV_GONE:
        tp__req_peer_gone(ev.req);
        tp__req_unref(ev.req);
        break;
      case EV_RST:
        if (ev.id == 0) {
          if (h->state == H2_OPEN)
            h2_set_state(h, H2_DRAINING);
          nghttp2_session_terminate_session(h->ss, (uint32_t)ev.code);
        } else {
          nghttp2_submit_rst_stream(h->ss, NGHTTP2_FLAG_NONE, ev.id, (uint32_t)ev.code);
        }
        break;
      }
    }
    if (c->state == CONN_CLOSING) {
      for (size_t i = 0; i < h->nevs; i++)
        if (h->evs[i].type == EV_GONE) {
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
    h2_drains(h);
    if (c->state == CONN_CLOSING)
      continue;
    if (h->nevs == 0 && !h->want_send)
      break;
  }
  h->busy = 0;
  if (c->state == CONN_CLOSING)
    return;
  if (h->nevs || h->want_send)
    tp__defer(c->srv, &h->flush); /* more than 64 rounds of work: go on next loop turn */
  if (!nghttp2_session_want_read(h->ss) && !nghttp2_session_want_write(h->ss)) {
    tp__conn_close_after_writes(c, "HTTP/2 session over");
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
  if (rv == 0)
    st_set_state(st, has_body ? H2S_SENDING : H2S_ENDED);
  h2_kick(h);
  return rv == 0 ? 0 : SBX_EPROTO;
}

/* The stream's data provider was deferred (its queue ran empty): nghttp2 takes it up again. */
static void st_resume(struct h2s *st) {
  if (st->state == H2S_WAITING) {
    st_set_state(st, H2S_SENDING);
    nghttp2_session_resume_data(st->h->ss, st->id);
  }
}

static int h2_data(struct tp_req *r, const void *data, size_t len) {
  struct h2s *st = r->pstate;
  if (st == NULL || r->conn == NULL)
    return SBX_ECLOSED;
  if (st->out.len == 0 && sbx_buf_reserve(&st->out, len) != 0) /* one allocation, not doublings */
    return SBX_ENOMEM;
  if (sbx_buf_append(&st->out, data, len) != 0)
    return SBX_ENOMEM;
  queued_add(st, len);
  st_resume(st);
  h2_kick(st->h);
  return 0;
}

static int h2_end(struct tp_req *r) {
  struct h2s *st = r->pstate;
  if (st == NULL || r->conn == NULL)
    return SBX_ECLOSED;
  st_resume(st);
  st_set_state(st, H2S_ENDED);
  h2_kick(st->h);
  return 0; /* the peer's reference goes with the stream, in on_stream_close */
}

static size_t h2_queued(const struct tp_req *r) {
  const struct h2s *st = r->pstate;
  return st ? st->out.len - st->out_off : 0;
}

/* What a file may add to the stream's queue now: no more than the peer's flow-control windows
 * let out (the connection's shared by every stream's queue), below the low-water mark, and
 * within the connection's and the server's buffer bounds.  A peer with a closed window costs no
 * buffer and no read. */
static size_t h2_room(const struct tp_req *r) {
  const struct h2s *st = r->pstate;
  if (st == NULL || r->conn == NULL)
    return 0;
  struct h2 *h = st->h;
  const struct tp_limits *l = LIM(h);
  size_t q = st->out.len - st->out_off;
  int32_t sw = nghttp2_session_get_stream_remote_window_size(h->ss, st->id);
  int32_t cw = nghttp2_session_get_remote_window_size(h->ss);
  if (sw <= 0 || cw <= 0 || q >= TP_LOW_WATER || (size_t)sw <= q || (size_t)cw <= h->queued ||
      h->queued >= l->h2_conn_buffer_bytes || h->c->srv->queued >= l->buffer_bytes)
    return 0;
  size_t room = SBX_MIN((size_t)sw - q, (size_t)cw - h->queued);
  room = SBX_MIN(room, TP_LOW_WATER - q);
  room = SBX_MIN(room, l->h2_conn_buffer_bytes - h->queued);
  return SBX_MIN(room, l->buffer_bytes - h->c->srv->queued);
}

static const struct tp_req_ops h2_req_ops = {h2_head, h2_data, h2_end, h2_queued, h2_room};

/* ---- struct tp_proto_ops ---------------------------------------------------------------------- */

static int h2_feed(struct tp_conn *c, const char *data, size_t len) {
  struct h2 *h = c->pdata;
  if (h->state == H2_CLOSED)
    return 0;
  ssize_t n = nghttp2_session_mem_recv(h->ss, (const uint8_t *)data, len);
  if (n < 0) {
    if (SBX_LOG_ENABLED(SBX_LOG_DEBUG))
      sbx_log(SBX_LOG_DEBUG, TP_MOD, "conn %llu: nghttp2: %s", (unsigned long long)c->id,
              nghttp2_strerror((int)n));
    c->srv->stats.protocol_errors++;
    if (h->abuse)
      tp__log_abuse(c->srv, c, h->abuse);
    /* Fatal for the session (bad preface, a flood, abuse our callbacks refused): say so with a
     * GOAWAY when the session still can, then close. */
    if (h->state == H2_OPEN)
      h2_set_state(h, H2_DRAINING);
    nghttp2_session_terminate_session(h->ss, n == NGHTTP2_ERR_BAD_CLIENT_MAGIC
                                                 ? NGHTTP2_PROTOCOL_ERROR
                                                 : NGHTTP2_ENHANCE_YOUR_CALM);
    h2_run(h);
    tp__conn_close_after_writes(c, "HTTP/2 protocol error");
    return 0;
  }
  h2_run(h);
  return 0;
}

static void h2_on_written(struct tp_conn *c) {
  struct h2 *h = c->pdata;
  if (h->state == H2_CLOSED)
    return;
  h->progress = uv_now(c->srv->loop);
  if (nghttp2_session_want_write(h->ss) || h->nevs || h->queued) {
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
    st_set_state(st, H2S_CLOSED);
    if (st->req) {
      struct tp_req *r = st->req;
      st->req = NULL;
      r->pstate = NULL;
      tp__req_peer_gone(r);
      tp__req_unref(r);
    }
  }
  for (size_t i = 0; i < h->nevs; i++)
    if (h->evs[i].type == EV_GONE) {
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
    int late = ((st->state == H2S_HEAD || st->state == H2S_HEAD_BAD) &&
                now - st->begin >= LIM(h)->header_timeout_ms) ||
               (st->state == H2S_BODY && now >= tp__body_due(st->req, now));
    if (late) {
      if (st->state == H2S_HEAD_BAD)
        st->why = TP_OK; /* 408 replaces the head's own refusal */
      st_fail(st, TP_R_TIMEOUT);
      expired++;
    }
  }
  if (expired || h->throttled) {
    h2_run(h);
    return;
  }
  if (h->nstreams == 0) {
    h2_goaway(c, NGHTTP2_NO_ERROR);
    tp__conn_close_after_writes(c, "idle timeout");
  } else if ((c->wpending > 0 || h->queued > 0) && now - h->progress >= LIM(h)->idle_timeout_ms) {
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
  h->progress = uv_now(c->srv->loop);
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
