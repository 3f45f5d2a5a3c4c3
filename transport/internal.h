/* internal.h -- what the transport's own files share, and nothing another module may include.
 *
 * The shape is h2o's: one socket layer (conn.c) that accepts, sniffs the first bytes, runs TLS
 * through memory BIOs (tls.c) and owns the timers and the write path; protocol peers on top
 * (http1.c over http-parser, http2.c over nghttp2) that turn bytes into struct tp_req and
 * responses back into bytes; and one request/response layer (req.c) that every handler talks to,
 * so a handler never knows which protocol carries it.  router.c matches paths, static.c serves
 * files, sse.c encodes events, server.c holds listeners, configuration and metrics.
 *
 * Memory rule (libuv's): a handle's memory is freed only in its close callback.  A tp_req is
 * reference counted: one reference belongs to the protocol peer until the response ended or the
 * peer went away, one per tp_req_hold() by a handler.
 */
#ifndef SBX_TRANSPORT_INTERNAL_H
#define SBX_TRANSPORT_INTERNAL_H

#include <openssl/ssl.h>
#include <sys/types.h>

#include "transport.h"

#define TP_MOD          "transport"
#define TP_READ_BUF     (64 * 1024)
#define TP_FILE_CHUNK   (64 * 1024)
#define TP_LOW_WATER    (64 * 1024) /* bytes queued below which a file is pumped / drain fires */
#define TP_WBUF         (64 * 1024) /* a pooled write block (conn.c) */
#define TP_WPOOL_MAX    8           /* write blocks the server keeps for reuse */
#define TP_H2S_POOL_MAX 128         /* HTTP/2 stream records the server keeps for reuse */

struct tp_conn;
struct tp_wreq;
struct h2s;

/* ---- server ----------------------------------------------------------------------------------
 *
 *   RUNNING --tp_server_close--> DRAINING --(no conns | drain_ms)--> CLOSING --(handles)--> freed
 */
enum srv_state { SRV_RUNNING = 0, SRV_DRAINING, SRV_CLOSING };

struct tp_listener {
  union {
    uv_tcp_t tcp;
    uv_pipe_t pipe;
    uv_handle_t handle;
    uv_stream_t stream;
  } h;
  /* A handle to accept into and close at once when there is no memory for a connection: a
   * connection libuv accepted must be taken, or the listener stops. */
  union {
    uv_tcp_t tcp;
    uv_pipe_t pipe;
    uv_handle_t handle;
    uv_stream_t stream;
  } reject;
  int reject_busy, reject_pending, listener_closed;
  struct tp_server *srv;
  struct sbx_list node;
  int is_unix;
  int port;
  char *unix_path;
};
void tp__listener_reject(struct tp_listener *l);

#define TP_ROUTE_MAX_SEGS 32 /* segments in a route pattern */

struct tp_route {
  char *method;
  char *pattern;
  char **segs;              /* pattern split on '/'; "{x}" param, "{x*}" rest */
  unsigned char *seg_param; /* per segment: 1 when a parameter */
  size_t *seg_len;          /* per segment: its length */
  size_t nsegs;
  int literal; /* no parameter at all */
  int rest;    /* last segment is {name*} */
  size_t body_limit;
  tp_handler_cb cb;
  tp_body_cb on_body; /* NULL: the body is buffered */
  void *ud;
};

struct tp_mount {
  char *prefix;
  char *dir;
  char *cache_control;
};

struct tp_path_hdr {
  char *prefix;
  char *headers;
  size_t prefix_len, headers_len;
};

/* A piece of work run once from the server's idle handle, outside every library callback (used
 * by HTTP/2 to coalesce the frames of several answers into one write). */
struct tp_deferred {
  struct sbx_list node;
  void (*fn)(struct tp_deferred *d);
  int queued;
};

struct tp_server {
  uv_loop_t *loop;
  uv_idle_t defer_idle;
  struct sbx_list deferred;
  enum srv_state state;
  struct tp_config cfg;
  char *tls_cert_file, *tls_key_file, *server_name; /* owned copies behind cfg's pointers */
  size_t server_name_len;
  SSL_CTX *ssl_ctx;
  struct sbx_list listeners;
  struct sbx_list conns;
  struct tp_route *routes;
  size_t nroutes;
  struct tp_mount *mounts;
  size_t nmounts;
  struct tp_path_hdr *phdrs;
  size_t nphdrs;
  tp_handler_cb not_found_cb; /* tp_not_found: unmatched paths, instead of the JSON 404 */
  void *not_found_ud;
  struct tp_stats stats;
  uint64_t by_status[600];
  struct sbx_list sse_reqs; /* requests with an open event stream (heartbeats) */
  uv_timer_t cron;          /* SSE heartbeats; runs only while event streams are open */
  uint64_t cron_period;
  int cron_running;
  uv_timer_t drain_timer;
  int handles_open; /* our own handles still waiting for their close callback */
  tp_closed_cb closed_cb;
  void *closed_ud;
  struct tp_fcache *fcache;     /* static.c: open files and misses, revalidated every second */
  struct sbx_buf scratch;       /* req.c: response heads are built here, one at a time */
  char *rbuf;                   /* one read buffer: every read is consumed before the next alloc */
  struct sbx_freelist wpool;    /* free write blocks (conn.c), at most TP_WPOOL_MAX */
  struct sbx_freelist h2s_pool; /* free HTTP/2 stream records (http2.c), at most TP_H2S_POOL_MAX */
  int rbuf_busy;
  char date[40];
  int64_t date_sec;
  uint64_t next_id;
};

void tp__server_conn_gone(struct tp_server *s);             /* a connection finished closing */
void tp__defer(struct tp_server *s, struct tp_deferred *d); /* no-op when already queued */
void tp__defer_cancel(struct tp_deferred *d);
void tp__server_maybe_finish(struct tp_server *s);
const char *tp__http_date(struct tp_server *s);
void tp__cron_want(struct tp_server *s, uint64_t period_ms);

/* ---- connection (socket layer) ---------------------------------------------------------------
 *
 *            accept
 *              |
 *              v
 *   +------> SNIFF --0x16--> TLS_HANDSHAKE --ALPN h2--> H2
 *   |          |                   |   \--else--------> HTTP1
 *   |          |--"PRI * ..."--> H2
 *   |          \--else---------> HTTP1
 *   |  any state --error / EOF / timeout / done--> CLOSING --close cb--> (freed)
 *
 *   transition                     by
 *   SNIFF -> TLS_HANDSHAKE         conn_sniff()
 *   SNIFF|TLS_HANDSHAKE -> HTTP1   conn_start_proto()
 *   SNIFF|TLS_HANDSHAKE -> H2      conn_start_proto()
 *   * -> CLOSING                   tp__conn_close()
 */
enum conn_state { CONN_SNIFF = 0, CONN_TLS_HANDSHAKE, CONN_HTTP1, CONN_H2, CONN_CLOSING };

/* What a protocol peer provides to the socket layer. */
struct tp_proto_ops {
  /* Plain bytes from the peer; non-zero return closes the connection. */
  int (*feed)(struct tp_conn *c, const char *data, size_t len);
  /* Bytes queued on the socket fell (writes completed): flush more, fire drains. */
  void (*on_written)(struct tp_conn *c);
  /* The connection is going away: tell requests (on_close), free protocol state. */
  void (*on_close)(struct tp_conn *c);
  /* The peer sent EOF. */
  void (*on_eof)(struct tp_conn *c);
  /* Graceful shutdown: finish what is in flight, take nothing new. */
  void (*shutdown)(struct tp_conn *c);
  /* The conn timer fired. */
  void (*on_timeout)(struct tp_conn *c);
  /* Frees the peer's state: called from the handle's close callback, never earlier, so a peer
   * function that closed its own connection can still look at its state on the way out. */
  void (*destroy)(void *pdata);
};

struct tp_tls; /* tls.c */

struct tp_conn {
  union {
    uv_tcp_t tcp;
    uv_pipe_t pipe;
    uv_handle_t handle;
    uv_stream_t stream;
  } h;
  uv_timer_t timer;
  uint64_t timer_due;  /* when the libuv timer fires (loop ms) */
  uint64_t timer_want; /* the deadline asked for last; 0 none (tp__conn_timer) */
  struct tp_server *srv;
  struct sbx_list node;
  enum conn_state state;
  enum tp_protocol proto;
  const struct tp_proto_ops *ops;
  void *pdata; /* the protocol peer's state */
  void (*destroy)(void *pdata);
  struct tp_tls *tls;
  uint64_t id;
  size_t wpending;     /* bytes handed to uv_write and not completed */
  int close_when_done; /* close once wpending reaches 0 */
  int reading;
  int closing_handles; /* 2 -> 0: stream and timer */
  int in_feed;         /* inside the protocol's feed */
  char sniff[24];
  size_t sniff_len;
  char peer[64];
};

void tp__conn_accept(struct tp_listener *l);
/* Queues bytes (copied) on the connection, through TLS when on. */
int tp__conn_write(struct tp_conn *c, const uv_buf_t *bufs, unsigned n);
/* The same for one heap buffer (sbx_malloc'd), which it steals: no copy on plain sockets. */
int tp__conn_write_take(struct tp_conn *c, char *data, size_t len);
/* A write block of TP_WBUF bytes from the server's pool (NULL: no memory); give it back with
 * tp__wbuf_put, or write its first `len` bytes with tp__conn_write_wbuf, which steals it (on
 * plain sockets the block itself is the write request: no allocation, no copy). */
char *tp__wbuf_get(struct tp_server *s);
void tp__wbuf_put(struct tp_server *s, char *data);
int tp__conn_write_wbuf(struct tp_conn *c, char *data, size_t len);
void tp__conn_close(struct tp_conn *c, const char *why);
/* Replaces the connection's deadline with now + ms (0 clears it): ops->on_timeout runs then. */
void tp__conn_timer(struct tp_conn *c, uint64_t ms);
void tp__conn_read_stop(struct tp_conn *c);
void tp__conn_read_start(struct tp_conn *c);
void tp__conn_set_proto(struct tp_conn *c, enum conn_state st); /* HTTP1 or H2 */

/* ---- TLS (tls.c) ---------------------------------------------------------------------------- */
int tp__tls_ctx_new(const char *cert, const char *key, SSL_CTX **out, struct sbx_error *err);
struct tp_tls *tp__tls_new(SSL_CTX *ctx);
void tp__tls_free(struct tp_tls *t);
/* Feeds ciphertext; plaintext is passed to `out`; returns <0 on TLS error, 1 while the handshake
 * goes on, 0 once it is done (alpn set). */
typedef int (*tp_tls_plain_cb)(struct tp_conn *c, const char *p, size_t n);
int tp__tls_feed(struct tp_conn *c, const char *data, size_t len, tp_tls_plain_cb out);
int tp__tls_handshake_done(const struct tp_tls *t);
int tp__tls_alpn_h2(const struct tp_tls *t);
/* Encrypts plaintext into one heap buffer for the socket (sbx_free it). */
int tp__tls_encrypt(struct tp_tls *t, const uv_buf_t *bufs, unsigned n, char **out, size_t *outlen);
/* Pending handshake output (sbx_free it); 0 bytes when none. */
int tp__tls_take_output(struct tp_tls *t, char **out, size_t *outlen);

/* ---- protocol peers ------------------------------------------------------------------------- */
int tp__h1_start(struct tp_conn *c, const char *data, size_t len);
int tp__h2_start(struct tp_conn *c, const char *data, size_t len);

/* ---- requests (req.c) ------------------------------------------------------------------------
 *
 *   HEAD_IN --headers--> BODY_IN --complete--> HANDLING --respond/stream_start--> RESPONDING
 *                                                 |                                  |
 *                                                 \------------respond---------------+-> DONE
 *   (peer gone at any point sets `gone`; the state is not changed by it)
 */
enum req_state { REQ_HEAD_IN = 0, REQ_BODY_IN, REQ_HANDLING, REQ_RESPONDING, REQ_DONE };

/* What a protocol peer does with a response. */
struct tp_req_ops {
  /* Status + header block ("Name: value\r\n" lines, no status line); `clen` -1 when unknown,
   * `has_body` 0 when nothing follows (HEAD, 204, 304, empty). */
  int (*head)(struct tp_req *r, int status, const char *hdrs, size_t hlen, int64_t clen,
              int has_body);
  int (*data)(struct tp_req *r, const void *p, size_t n); /* copies */
  int (*end)(struct tp_req *r);
  size_t (*queued)(const struct tp_req *r);
};

struct tp_kv {
  char *name, *value;
};

struct tp_req {
  struct tp_server *srv;
  struct tp_conn *conn; /* NULL once the peer is gone */
  const struct tp_req_ops *ops;
  void *pstate; /* protocol peer's per-request state (h2 stream) */
  enum req_state state;
  enum tp_protocol proto;
  int refs;
  int gone;
  int is_head;
  int blocked; /* a write failed with EAGAIN: fire drain when it empties */
  int auto_answered;
  char *method, *target, *path, *query;
  struct tp_kv *hdrs;
  size_t nhdrs, hcap;
  struct tp_kv params[8];
  size_t nparams;
  struct sbx_buf body;
  size_t body_limit;
  uint64_t body_seen; /* bytes given to a body sink */
  const struct tp_route *route;
  int route_status; /* 0 matched a route; 404/405; 1 static */
  const struct tp_mount *mount;
  char allow[64];
  void *data;
  tp_req_close_cb close_cb;
  void *close_ud;
  tp_drain_cb drain_cb;
  void *drain_ud;
  /* file body */
  int file_fd;
  uint64_t file_off, file_left;
  /* SSE */
  int sse;
  struct sbx_list sse_node;
  uint64_t hb_ms, last_write_ms;
  int status;
  char peer[64];
  /* Strings of the request (method, target, path, query, headers, parameters) come from this
   * arena, then from chunks on the heap when it is full: one allocation for a usual request. */
  struct tp_req_chunk *chunks;
  size_t arena_used;
  struct tp_kv hdrs_inline[16];
  char arena[768];
};

struct tp_req_chunk {
  struct tp_req_chunk *next;
  char data[];
};
/* Request-lifetime copies (freed with the request); NULL when out of memory. */
char *tp__req_strndup(struct tp_req *r, const char *s, size_t n);
/* Percent-decodes into request-lifetime memory; NULL on bad escapes, NUL or no memory. */
char *tp__req_decode(struct tp_req *r, const char *s, size_t n, int plus);
void tp__req_strings_free(struct tp_req *r);

struct tp_req *tp__req_new(struct tp_conn *c, const struct tp_req_ops *ops, enum tp_protocol p);
/* A server of this thread starts (+1) or is freed (-1): freed requests are kept for reuse while
 * one is alive, and the kept ones are freed with the thread's last server. */
void tp__req_pool_use(int delta);
void tp__req_ref(struct tp_req *r);
void tp__req_unref(struct tp_req *r);
int tp__req_add_header(struct tp_req *r, const char *n, size_t nl, const char *v, size_t vl);
int tp__req_set_target(struct tp_req *r, const char *m, const char *target, size_t tl);
/* Routes the request (after headers): sets route/mount/route_status and body_limit. */
void tp__req_route(struct tp_req *r);
/* The whole request arrived: runs the handler (or static, 404, 405). */
void tp__req_dispatch(struct tp_req *r);
/* A piece of the request body: buffered, or given to the route's sink.  0, or the HTTP status
 * that refuses the request (413, 503, 500, 400). */
int tp__req_body_data(struct tp_req *r, const void *p, size_t n);
/* The request ends without its handler (refused while arriving): its close callback runs, so a
 * body sink can drop its state. */
void tp__req_abandon(struct tp_req *r);
/* The peer is gone: fires on_close once, drops the peer's reference. */
void tp__req_peer_gone(struct tp_req *r);
/* The protocol's queue for this request drained below the low-water mark. */
void tp__req_drained(struct tp_req *r);
void tp__req_set_state(struct tp_req *r, enum req_state st);
/* Answers with a small error from inside the transport (413, 431, ...). */
int tp__respond_simple(struct tp_req *r, int status, const char *code, const char *msg,
                       int close_conn);

/* ---- router / static / util ----------------------------------------------------------------- */
/* Matches `path` (raw, undecoded, no query) for `method`: returns the route and fills params. */
const struct tp_route *tp__route_match(const struct tp_server *s, const char *method,
                                       const char *path, struct tp_req *r, char *allow,
                                       size_t allow_len, int *status);
int tp__route_compile(struct tp_route *rt);
void tp__route_free(struct tp_route *rt);
/* Percent-decodes [s, s+n) into a new string; '+' as space when `plus`; NULL on bad escapes/NUL. */
char *tp__pct_decode(const char *s, size_t n, int plus);
/* The same into out (n + 1 bytes): the decoded length, or -1. */
long tp__pct_decode_to(char *out, const char *s, size_t n, int plus);
void tp__static_serve(struct tp_req *r, const struct tp_mount *m);
struct tp_fcache;
void tp__fcache_free(struct tp_fcache *fc);
const char *tp__mime_type(const char *path);
const char *tp__status_text(int status);
void tp__count_status(struct tp_server *s, int status);

#endif
