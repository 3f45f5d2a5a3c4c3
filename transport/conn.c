/* conn.c -- the socket layer: accepts a connection, sets TCP_NODELAY, sniffs its first bytes
 * (0x16 -> TLS, the 24-byte HTTP/2 preface -> h2c, else HTTP/1.1), runs TLS through memory BIOs,
 * owns the connection's one timer and its write path, and closes it.  It knows no HTTP: the
 * protocol peers (http1.c, http2.c) plug in through struct tp_proto_ops.
 */
#include "internal.h"

#include <arpa/inet.h>
#include <assert.h>
#include <stdio.h>
#include <string.h>

static const char H2_PREFACE[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

static const char *const conn_names[] = {"SNIFF",    "TLS_HANDSHAKE", "HTTP1",  "H2",
                                         "FLUSHING", "LINGERING",     "CLOSING"};
#define B(s) SBX_FSM_BIT(CONN_##s)
static const uint32_t conn_from[] = {
    [CONN_SNIFF] = 0,
    [CONN_TLS_HANDSHAKE] = B(SNIFF),
    [CONN_HTTP1] = B(SNIFF) | B(TLS_HANDSHAKE),
    [CONN_H2] = B(SNIFF) | B(TLS_HANDSHAKE),
    [CONN_FLUSHING] = B(HTTP1) | B(H2),
    [CONN_LINGERING] = B(HTTP1) | B(H2) | B(FLUSHING),
    [CONN_CLOSING] = B(SNIFF) | B(TLS_HANDSHAKE) | B(HTTP1) | B(H2) | B(FLUSHING) | B(LINGERING),
};
#undef B
static const struct sbx_fsm conn_fsm = SBX_FSM(TP_MOD, "conn", conn_names, conn_from, NULL);

#define conn_set_state(c, st) conn_set_state_((c), (st), __FILE__, __LINE__)
static void conn_set_state_(struct tp_conn *c, enum conn_state st, const char *file, int line) {
  if (sbx_fsm_step(&conn_fsm, c->state, st, c->id_text, file, line) == 0)
    c->state = st;
}

/* Not fed to the protocol any more: the connection is closing, flushing or lingering. */
static int conn_done(const struct tp_conn *c) {
  return c->state == CONN_CLOSING || c->state == CONN_FLUSHING || c->state == CONN_LINGERING;
}

/* Lingering: 1 s, or 20 ms past the descriptor budget (long enough to read and drop what a
 * client sent before its answer, short enough not to hold the descriptors a crowd needs). */
#define LINGER_MS       1000
#define LINGER_SHORT_MS 20
#define LINGER_BYTES    (256 * 1024)

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
  struct tp_conn *c = h->data;
  struct tp_server *s = c->srv;
  if (s->rbuf_busy) { /* cannot happen with one loop thread; be safe anyway */
    buf->base = NULL;
    buf->len = 0;
    return;
  }
  s->rbuf_busy = 1;
  buf->base = s->rbuf;
  buf->len = TP_READ_BUF;
}

static void on_timer(uv_timer_t *t) {
  struct tp_conn *c = t->data;
  if (c->timer_want == 0)
    return; /* stopped since it was armed */
  uint64_t now = uv_now(c->srv->loop);
  if (now < c->timer_want) { /* moved later since it was armed: sleep the rest */
    c->timer_due = c->timer_want;
    uv_timer_start(&c->timer, on_timer, c->timer_want - now, 0);
    return;
  }
  c->timer_want = 0;
  if (c->state == CONN_SNIFF || c->state == CONN_TLS_HANDSHAKE) {
    tp__conn_close(c, "handshake timeout");
    return;
  }
  if (c->state == CONN_FLUSHING) {
    tp__conn_close(c, "client stopped reading");
    return;
  }
  if (c->state == CONN_LINGERING) {
    tp__conn_close(c, "done");
    return;
  }
  if (c->ops && c->ops->on_timeout)
    c->ops->on_timeout(c);
  else
    tp__conn_close(c, "timeout");
}

/* Sets (replaces) the connection's deadline.  The protocols call this after every read and
 * write, mostly pushing the deadline later: the libuv timer (a heap) is moved only when the new
 * deadline is earlier than the armed one; a later one is taken up when the armed one fires
 * (on_timer sleeps the rest).  A stop only forgets the deadline. */
void tp__conn_timer(struct tp_conn *c, uint64_t ms) {
  if (c->state == CONN_CLOSING)
    return;
  if (ms == 0) {
    c->timer_want = 0;
    return;
  }
  uint64_t want = uv_now(c->srv->loop) + ms;
  c->timer_want = want;
  if (uv_is_active((uv_handle_t *)&c->timer) && c->timer_due <= want)
    return;
  c->timer_due = want;
  uv_timer_start(&c->timer, on_timer, ms, 0);
}

void tp__conn_read_stop(struct tp_conn *c) {
  if (c->reading && c->state != CONN_CLOSING) {
    uv_read_stop(&c->h.stream);
    c->reading = 0;
  }
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf);
static void conn_linger(struct tp_conn *c);

void tp__conn_read_start(struct tp_conn *c) {
  if (!c->reading && !conn_done(c)) {
    if (uv_read_start(&c->h.stream, on_alloc, on_read) == 0)
      c->reading = 1;
  }
}

void tp__conn_set_proto(struct tp_conn *c, enum conn_state st) {
  conn_set_state(c, st);
  struct tp_stats *stats = &c->srv->stats;
  if (st == CONN_HTTP1)
    c->proto = TP_PROTO_HTTP1;
  else
    c->proto = c->tls ? TP_PROTO_H2 : TP_PROTO_H2C;
  stats->connections_total[c->proto]++;
  stats->connections_open_by_proto[c->proto]++;
}

/* Plain bytes, after TLS if any: sniff them first, then hand them to the protocol peer. */
static int conn_plain(struct tp_conn *c, const char *p, size_t n) {
  if (conn_done(c))
    return 0;
  if (c->ops)
    return c->ops->feed(c, p, n);
  /* Sniff for the h2 preface (plain, or inside TLS without ALPN h2). */
  size_t take = SBX_MIN(n, sizeof(c->sniff) - c->sniff_len);
  memcpy(c->sniff + c->sniff_len, p, take);
  c->sniff_len += take;
  if (memcmp(c->sniff, H2_PREFACE, c->sniff_len) == 0 && c->sniff_len < 24) {
    return 0; /* so far it is a preface: wait for the rest */
  }
  /* Decide; hand the sniffed bytes plus the rest of this read to the peer. */
  int h2 = c->sniff_len == 24 && memcmp(c->sniff, H2_PREFACE, 24) == 0;
  char tmp[24];
  size_t sl = c->sniff_len;
  memcpy(tmp, c->sniff, sl);
  c->sniff_len = 0;
  int rc;
  if (h2) {
    tp__conn_set_proto(c, CONN_H2);
    rc = tp__h2_start(c, tmp, sl);
  } else {
    tp__conn_set_proto(c, CONN_HTTP1);
    rc = tp__h1_start(c, tmp, sl);
  }
  if (rc == 0 && n > take && !conn_done(c))
    rc = c->ops->feed(c, p + take, n - take);
  return rc;
}

static int conn_tls_plain(struct tp_conn *c, const char *p, size_t n) {
  if (c->state == CONN_TLS_HANDSHAKE) {
    /* First plaintext after the handshake: choose by ALPN. */
    if (tp__tls_alpn_h2(c->tls)) {
      tp__conn_set_proto(c, CONN_H2);
      int rc = tp__h2_start(c, NULL, 0);
      if (rc != 0)
        return rc;
    } else {
      tp__conn_set_proto(c, CONN_HTTP1);
      int rc = tp__h1_start(c, NULL, 0);
      if (rc != 0)
        return rc;
    }
  }
  if (n == 0 || conn_done(c))
    return 0;
  return c->ops->feed(c, p, n);
}

static int conn_flush_tls_output(struct tp_conn *c);

static void conn_data(struct tp_conn *c, const char *p, size_t n) {
  int rc = 0;
  c->srv->stats.bytes_in += n;
  if (c->state == CONN_LINGERING && (c->lingered += n) > LINGER_BYTES)
    tp__conn_close(c, "done (the client kept sending)");
  if (conn_done(c))
    return; /* what else comes is dropped */
  if (c->state == CONN_SNIFF && c->sniff_len == 0 && n > 0 && (unsigned char)p[0] == 0x16) {
    if (c->srv->ssl_ctx == NULL) {
      tp__conn_close(c, "TLS client on a plain listener");
      return;
    }
    c->tls = tp__tls_new(c->srv->ssl_ctx);
    if (c->tls == NULL) {
      tp__conn_close(c, "out of memory");
      return;
    }
    conn_set_state(c, CONN_TLS_HANDSHAKE);
  }
  if (c->tls) {
    rc = tp__tls_feed(c, p, n, conn_tls_plain);
    if (rc >= 0 && c->state != CONN_CLOSING)
      rc = conn_flush_tls_output(c) < 0 ? -1 : 0;
    if (rc == 0 && c->state == CONN_TLS_HANDSHAKE && tp__tls_handshake_done(c->tls))
      rc = conn_tls_plain(c, NULL, 0); /* handshake finished without app data yet */
  } else {
    rc = conn_plain(c, p, n);
  }
  if (rc != 0 && !conn_done(c)) {
    c->srv->stats.protocol_errors++;
    tp__conn_close(c, c->tls && c->state == CONN_TLS_HANDSHAKE ? "TLS handshake failed"
                                                               : "protocol error");
  }
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf) {
  struct tp_conn *c = st->data;
  if (buf->base == c->srv->rbuf)
    c->srv->rbuf_busy = 0;
  if (nread > 0) {
    conn_data(c, buf->base, (size_t)nread);
    return;
  }
  if (nread == 0 || c->state == CONN_CLOSING)
    return;
  if (nread == UV_EOF && c->state == CONN_FLUSHING)
    return; /* the peer is done sending; our writes may still go */
  if (nread == UV_EOF && c->state == CONN_LINGERING) {
    tp__conn_close(c, "done");
    return;
  }
  if (nread == UV_EOF && c->ops && c->ops->on_eof) {
    c->ops->on_eof(c);
    return;
  }
  tp__conn_close(c, nread == UV_EOF ? "eof" : uv_strerror((int)nread));
}

/* ---- writes ---------------------------------------------------------------------------------- */

/* One uv_write: the request, then its bytes (copied), or a pointer to a buffer it took. */
struct tp_wreq {
  uv_write_t w; /* first: the free list links through it while the block is kept */
  struct tp_conn *c;
  size_t len;
  char *owned; /* a buffer taken from the caller, or NULL when the bytes follow */
  int pooled;  /* a TP_WBUF block of the server's pool (tp__wbuf_get): goes back there */
  char data[];
};

/* The server's pool of write blocks: HTTP/2 produces its frames straight into one, which then
 * goes to the socket as its own write request; no allocation per write once warm. */
char *tp__wbuf_get(struct tp_server *s) {
  struct tp_wreq *wr = sbx_freelist_take(&s->wpool, sizeof(*wr) + TP_WBUF);
  if (wr == NULL)
    return NULL;
  wr->pooled = 1;
  wr->owned = NULL;
  return wr->data;
}

static void wreq_release(struct tp_server *s, struct tp_wreq *wr) {
  if (wr->pooled) {
    if (s->wpool.n >= s->wpool.max)
      tp__freed(s, TP_WBUF); /* the pool is full: the block goes back to the heap */
    sbx_freelist_give(&s->wpool, wr);
    return;
  }
  if (wr->len >= TP_WBUF)
    tp__freed(s, wr->len);
  sbx_free(wr->owned);
  sbx_free(wr);
}

void tp__wbuf_put(struct tp_server *s, char *data) {
  wreq_release(s, SBX_CONTAINER_OF(data, struct tp_wreq, data));
}

static void on_write(uv_write_t *w, int status) {
  struct tp_wreq *wr = (struct tp_wreq *)w;
  struct tp_conn *c = wr->c;
  c->wpending -= wr->len;
  wreq_release(c->srv, wr);
  if (c->state == CONN_CLOSING)
    return;
  if (status < 0) {
    tp__conn_close(c, "write failed");
    return;
  }
  if (c->state == CONN_FLUSHING) {
    if (c->wpending == 0)
      conn_linger(c);
    return;
  }
  if (c->ops && c->ops->on_written)
    c->ops->on_written(c);
}

/* Hands a filled request to libuv ("steals" it: released even on failure). */
static int wreq_submit(struct tp_conn *c, struct tp_wreq *wr, char *base, size_t total) {
  wr->c = c;
  wr->len = total;
  uv_buf_t b = uv_buf_init(base, (unsigned)total);
  int rc = uv_write(&wr->w, &c->h.stream, &b, 1, on_write);
  if (rc != 0) {
    wreq_release(c->srv, wr);
    return sbx_from_uv(rc);
  }
  c->wpending += total;
  c->srv->stats.bytes_out += total;
  return 0;
}

/* Queues bytes on the socket: copies bufs, or (owned != NULL) takes `owned`, which holds the
 * bytes of bufs[0] alone ("steals": freed even on failure). */
static int conn_write_raw(struct tp_conn *c, char *owned, const uv_buf_t *bufs, unsigned n) {
  size_t total = 0;
  for (unsigned i = 0; i < n; i++)
    total += bufs[i].len;
  if (total == 0) {
    sbx_free(owned);
    return 0;
  }
  struct tp_wreq *wr = sbx_malloc(sizeof(*wr) + (owned ? 0 : total));
  if (wr == NULL) {
    sbx_free(owned);
    return SBX_ENOMEM;
  }
  wr->owned = owned;
  wr->pooled = 0;
  if (!owned) {
    size_t off = 0;
    for (unsigned i = 0; i < n; i++) {
      memcpy(wr->data + off, bufs[i].base, bufs[i].len);
      off += bufs[i].len;
    }
  }
  return wreq_submit(c, wr, owned ? owned : wr->data, total);
}

/* Writes the bytes TLS made (out, len, from a TLS call that returned rc; conn_write_raw takes
 * out). */
static int conn_write_sealed(struct tp_conn *c, int rc, char *out, size_t len) {
  if (rc != 0)
    return rc;
  if (len == 0)
    return 0;
  uv_buf_t b = uv_buf_init(out, (unsigned)len);
  return conn_write_raw(c, out, &b, 1);
}

static int conn_flush_tls_output(struct tp_conn *c) {
  char *out;
  size_t len;
  int rc = tp__tls_take_output(c->tls, &out, &len);
  return conn_write_sealed(c, rc, out, len);
}

int tp__conn_write(struct tp_conn *c, const uv_buf_t *bufs, unsigned n) {
  if (c->state == CONN_CLOSING)
    return SBX_ECLOSED;
  if (c->tls == NULL)
    return conn_write_raw(c, NULL, bufs, n);
  char *out;
  size_t len;
  int rc = tp__tls_encrypt(c->tls, bufs, n, &out, &len);
  return conn_write_sealed(c, rc, out, len);
}

int tp__conn_write_take(struct tp_conn *c, char *data, size_t len) {
  if (c->state == CONN_CLOSING) {
    sbx_free(data);
    return SBX_ECLOSED;
  }
  uv_buf_t b = uv_buf_init(data, (unsigned)len);
  if (c->tls == NULL)
    return conn_write_raw(c, data, &b, 1);
  int rc = tp__conn_write(c, &b, 1);
  sbx_free(data);
  return rc;
}

int tp__conn_write_wbuf(struct tp_conn *c, char *data, size_t len) {
  struct tp_wreq *wr = SBX_CONTAINER_OF(data, struct tp_wreq, data);
  if (c->state != CONN_CLOSING && len > 0 && c->tls == NULL) {
    /* Straight to the socket when it takes it all (the usual case: nothing queued, a small
     * answer): no write request, no completion pass, and none of the epoll_ctl libuv's POLLOUT
     * stop costs after each completed write.  libuv refuses (EAGAIN) while writes are queued,
     * so the order of bytes is kept; what the socket does not take is queued as before. */
    uv_buf_t b = uv_buf_init(data, (unsigned)len);
    int n = uv_try_write(&c->h.stream, &b, 1);
    if (n < 0 && n != UV_EAGAIN) {
      wreq_release(c->srv, wr);
      return sbx_from_uv(n);
    }
    size_t done = n > 0 ? (size_t)n : 0;
    c->srv->stats.bytes_out += done;
    if (done == len) {
      wreq_release(c->srv, wr);
      return 0;
    }
    return wreq_submit(c, wr, data + done, len - done);
  }
  int rc = 0;
  if (c->state == CONN_CLOSING) {
    rc = SBX_ECLOSED;
  } else if (len > 0) { /* TLS: encrypted into a buffer of its own; the block goes back */
    uv_buf_t b = uv_buf_init(data, (unsigned)len);
    rc = tp__conn_write(c, &b, 1);
  }
  wreq_release(c->srv, wr);
  return rc;
}

/* ---- accept, close --------------------------------------------------------------------------- */

static void on_conn_handle_closed(uv_handle_t *h) {
  struct tp_conn *c = h->data;
  if (--c->closing_handles > 0)
    return;
  struct tp_server *s = c->srv;
  if (c->pdata && c->destroy)
    c->destroy(c->pdata);
  if (c->user && c->user_free)
    c->user_free(c->user);
  if (c->tls)
    tp__tls_free(c->tls);
  sbx_free(c);
  tp__fd_add(s, -1);
  s->handles_open--;
  tp__server_conn_gone(s);
}

void tp__conn_close(struct tp_conn *c, const char *why) {
  if (c->state == CONN_CLOSING)
    return;
  if (SBX_LOG_ENABLED(SBX_LOG_DEBUG))
    sbx_log(SBX_LOG_DEBUG, TP_MOD, "conn %llu %s closed: %s", (unsigned long long)c->id, c->peer,
            why);
  int had_proto = c->state == CONN_HTTP1 || c->state == CONN_H2 || c->state == CONN_FLUSHING ||
                  c->state == CONN_LINGERING;
  conn_set_state(c, CONN_CLOSING);
  struct tp_server *s = c->srv;
  if (had_proto)
    s->stats.connections_open_by_proto[c->proto]--;
  s->stats.connections_open--;
  if (c->ops) {
    c->destroy = c->ops->destroy;
    if (c->ops->on_close)
      c->ops->on_close(c);
  }
  c->ops = NULL;
  sbx_list_remove(&c->node);
  s->handles_open++; /* the server is freed only after this connection's close callbacks */
  uv_timer_stop(&c->timer);
  c->closing_handles = 2;
  uv_close((uv_handle_t *)&c->timer, on_conn_handle_closed);
  uv_close(&c->h.handle, on_conn_handle_closed);
}

static void on_shutdown(uv_shutdown_t *req, int status) { (void)req, (void)status; }

/* Every answer went out: shut the write side, drop what the client still sends for a while. */
static void conn_linger(struct tp_conn *c) {
  conn_set_state(c, CONN_LINGERING);
  if (uv_shutdown(&c->shutdown, &c->h.stream, on_shutdown) != 0) {
    tp__conn_close(c, "done");
    return;
  }
  if (!c->reading && uv_read_start(&c->h.stream, on_alloc, on_read) == 0)
    c->reading = 1; /* for the bytes dropped (tp__conn_read_start refuses once done) */
  uint64_t ms = tp__fd_room(c->srv, 0) ? LINGER_MS : LINGER_SHORT_MS;
  tp__conn_timer(c, SBX_MIN(ms, c->srv->cfg.limits.idle_timeout_ms));
}

void tp__conn_close_after_writes(struct tp_conn *c, const char *why) {
  if (c->state != CONN_HTTP1 && c->state != CONN_H2)
    return;
  if (c->wpending == 0) {
    conn_linger(c);
    return;
  }
  conn_set_state(c, CONN_FLUSHING);
  tp__conn_read_stop(c);
  /* The writes must complete within the idle timeout, like any answer's. */
  tp__conn_timer(c, c->srv->cfg.limits.idle_timeout_ms);
}

void tp__conn_accept(struct tp_listener *l) {
  struct tp_server *s = l->srv;
  struct tp_conn *c = sbx_calloc(1, sizeof(*c));
  if (c == NULL) {
    tp__listener_reject(l); /* take it and close it: an untaken one would stop the listener */
    return;
  }
  c->srv = s;
  c->id = ++s->next_id;
  snprintf(c->id_text, sizeof(c->id_text), "%llu", (unsigned long long)c->id);
  if (l->is_unix)
    uv_pipe_init(s->loop, &c->h.pipe, 0);
  else
    uv_tcp_init(s->loop, &c->h.tcp);
  c->h.handle.data = c;
  uv_timer_init(s->loop, &c->timer);
  c->timer.data = c;
  SBX_LIST_INIT(&c->node);
  sbx_list_insert_tail(&s->conns, &c->node);
  s->stats.connections_open++;
  tp__fd_add(s, 1); /* libuv accepted its descriptor already */
  if (uv_accept(&l->h.stream, &c->h.stream) != 0) {
    tp__conn_close(c, "accept failed");
    return;
  }
  if (s->state != SRV_RUNNING || s->stats.connections_open > s->cfg.limits.max_connections) {
    tp__conn_close(c, "over the connection limit");
    return;
  }
  /* Past the descriptor budget the reserve pays for answering 503; past most of the reserve
   * too, there is nothing to do but close. */
  if (!tp__fd_room(s, 0)) {
    if (s->fd_base + s->fds + 8 > s->fd_limit) {
      tp__conn_close(c, "no descriptors left");
      return;
    }
    c->shed = 1;
    s->stats.shed_total++;
  }
  if (l->is_unix) {
    snprintf(c->peer, sizeof(c->peer), "unix");
  } else {
    uv_tcp_nodelay(&c->h.tcp, 1);
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    char ip[64] = "?";
    int port = 0;
    if (uv_tcp_getpeername(&c->h.tcp, (struct sockaddr *)&ss, &len) == 0) {
      if (ss.ss_family == AF_INET6) {
        uv_ip6_name((struct sockaddr_in6 *)&ss, ip, sizeof(ip));
        port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
      } else {
        uv_ip4_name((struct sockaddr_in *)&ss, ip, sizeof(ip));
        port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
      }
    }
    snprintf(c->peer, sizeof(c->peer), ss.ss_family == AF_INET6 ? "[%s]:%d" : "%s:%d", ip, port);
  }
  tp__conn_timer(c, c->shed ? SBX_MIN(s->cfg.limits.handshake_timeout_ms, 1000)
                            : s->cfg.limits.handshake_timeout_ms);
  tp__conn_read_start(c);
}
