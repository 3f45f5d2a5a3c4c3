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
#include <sys/stat.h>
#include <sys/types.h>

#include "fsm.h"
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
struct tp_file;
struct h2s;

enum tp_protocol { TP_PROTO_HTTP1 = 0, TP_PROTO_H2C, TP_PROTO_H2 /* over TLS */ };

struct tp_stats {
  uint64_t connections_open;
  uint64_t connections_total[3]; /* by enum tp_protocol */
  uint64_t connections_open_by_proto[3];
  uint64_t requests_total;
  uint64_t responses_by_class[6]; /* [1]..[5]: 1xx..5xx */
  uint64_t bytes_in, bytes_out;
  uint64_t sse_streams_open;
  uint64_t protocol_errors;
  uint64_t shed_total; /* connections answered 503 at the descriptor budget */
  uint64_t busy_total; /* requests answered 503 at a bound (bodies, files, descriptors) */
};

/* ---- server ----------------------------------------------------------------------------------
 *
 *   RUNNING --tp_server_close--> DRAINING --(no conns | drain_ms)--> CLOSING --(handles)--> freed
 *      \--------------------tp_server_close(drain_ms 0)-----------------^
 *
 *   transition              by
 *   RUNNING -> DRAINING     tp_server_close()
 *   * -> CLOSING            server_close_all()
 */
enum srv_state { SRV_RUNNING = 0, SRV_DRAINING, SRV_CLOSING };

/* A listener's or a connection's stream: TCP or a Unix socket, as libuv's handle types. */
union tp_stream_handle {
  uv_tcp_t tcp;
  uv_pipe_t pipe;
  uv_handle_t handle;
  uv_stream_t stream;
};

struct tp_listener {
  union tp_stream_handle h;
  /* A handle to accept into and close at once when there is no memory for a connection: a
   * connection libuv accepted must be taken, or the listener stops. */
  union tp_stream_handle reject;
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
  uv_timer_t trim_timer; /* gives freed heap back to the system after a wave (tp__freed) */
  size_t freed;          /* bytes of big buffers freed since the last trim */
  int handles_open;      /* our own handles still waiting for their close callback */
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
  /* Bounds over every connection (see tp_limits). */
  unsigned fd_limit, fd_budget; /* RLIMIT_NOFILE when made; the limit less the reserve */
  unsigned fd_base;             /* descriptors open when the server was made */
  unsigned fds;                 /* descriptors held since: tp__fd_add */
  unsigned bodies;              /* request bodies arriving (tp__body_enter / _leave) */
  size_t queued;                /* response bytes queued in HTTP/2 streams, all connections */
  uint64_t abuse_window;        /* tp__log_abuse's rate limit: the second it counts, */
  unsigned abuse_lines, abuse_dropped; /* lines logged in it, lines not logged since */
};

void tp__server_conn_gone(struct tp_server *s);             /* a connection finished closing */
void tp__defer(struct tp_server *s, struct tp_deferred *d); /* no-op when already queued */
void tp__defer_cancel(struct tp_deferred *d);
void tp__server_maybe_finish(struct tp_server *s);
const char *tp__http_date(struct tp_server *s);
void tp__cron_want(struct tp_server *s, uint64_t period_ms);
/* Big buffers (write blocks, stream queues) were freed: past TP_TRIM_AFTER bytes, the heap's free
 * memory goes back to the system within a second (malloc_trim; glibc keeps it otherwise). */
void tp__freed(struct tp_server *s, size_t n);
/* Descriptors: 1 when n more fit in the budget (ordinary work keeps the reserve free). */
int tp__fd_room(const struct tp_server *s, unsigned n);
/* Counts descriptors taken (+) or given back (-), where they are opened and closed. */
void tp__fd_add(struct tp_server *s, int n);
/* One warning about an abusive peer ("conn 7 127.0.0.1:5000: <what>: connection closed"), at most
 * a few a second server-wide; lines over that are counted and the count goes with the next. */
void tp__log_abuse(struct tp_server *s, const struct tp_conn *c, const char *what);

/* ---- connection (socket layer) ---------------------------------------------------------------
 *
 *            accept
 *              |
 *              v
 *            SNIFF --0x16--> TLS_HANDSHAKE --ALPN h2--> H2 -----+
 *              |                   \--else--------> HTTP1 ---+--protocol done--> FLUSHING
 *              |--"PRI * ..."--> H2                           |                    |
 *              \--else---------> HTTP1                        |            writes completed
 *                                                             |                    v
 *                                                             |     LINGERING (write side shut,
 *                                                             |      reads dropped)|
 *                                                             |       EOF, 1 s, 256 KiB, error
 *   any state --error / EOF / timeout-------------------------+-----> CLOSING <----+
 *                                                                        |
 *                                                             close callbacks --> (freed)
 *
 *   transition                         by
 *   SNIFF -> TLS_HANDSHAKE             conn_data()
 *   SNIFF|TLS_HANDSHAKE -> HTTP1|H2    tp__conn_set_proto()
 *   HTTP1|H2 -> FLUSHING               tp__conn_close_after_writes()
 *   HTTP1|H2|FLUSHING -> LINGERING     conn_linger() (the writes completed)
 *   * -> CLOSING                       tp__conn_close()
 *
 * In FLUSHING nothing more is fed to the peer; once its queued writes completed the connection
 * lingers: its write side is shut (the client sees the end of the answer) and what the client
 * still sends is read and dropped for a while before the close, so that a client still sending
 * a refused body reads its 503 or 413 instead of a reset (closing with unread bytes makes the
 * kernel send RST, and the client's kernel then drops the answer it had not read yet).  A connection accepted past the descriptor budget is `shed`: it goes through
 * the same states, but each request it carries is answered 503 and the connection then closes.
 */
enum conn_state {
  CONN_SNIFF = 0,
  CONN_TLS_HANDSHAKE,
  CONN_HTTP1,
  CONN_H2,
  CONN_FLUSHING,
  CONN_LINGERING,
  CONN_CLOSING
};

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
  union tp_stream_handle h;
  uv_timer_t timer;
  uv_shutdown_t shutdown; /* LINGERING's half-close */
  size_t lingered;        /* bytes dropped while lingering */
  uint64_t timer_due;     /* when the libuv timer fires (loop ms) */
  uint64_t timer_want;    /* the deadline asked for last; 0 none (tp__conn_timer) */
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
  int reading;         /* uv_read_start is on */
  int closing_handles; /* 2 -> 0: stream and timer */
  int shed;            /* accepted past the descriptor budget (see above) */
  char id_text[24];    /* `id` as text, for traces */
  char sniff[24];
  size_t sniff_len;
  char peer[64];
  void *user; /* tp_req_set_conn_data's, freed with user_free */
  void (*user_free)(void *);
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
/* The protocol is done: close once the queued writes completed (at once when none are). */
void tp__conn_close_after_writes(struct tp_conn *c, const char *why);
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
 *      |                    |                     |                                  |
 *      +--------------------+-- refused: error ---+------------respond---------------+-> DONE
 *   (the peer going away sets `gone` at any point and leaves the state alone: the handler that
 *   holds the request still answers, into nothing, and releases it)
 *
 *   transition                    by
 *   HEAD_IN -> BODY_IN            the protocol, once the head is complete
 *   HEAD_IN|BODY_IN -> HANDLING   tp__req_dispatch()
 *   *(not DONE) -> RESPONDING     tp_respond(), tp_stream_start(), tp__respond_file_at()
 *   *(not DONE) -> DONE           finish(), or an answer to a request whose peer is gone
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
  /* How many more bytes of a file the peer would take now (0: wait for the next drain): the
   * file pump reads no further ahead than this. */
  size_t (*room)(const struct tp_req *r);
};

/* Why the transport itself refuses a request (one table in req.c: status, error code, message,
 * and Retry-After for the 503s of a bound). */
enum tp_refusal {
  TP_OK = 0,
  TP_R_BAD_REQUEST,
  TP_R_BAD_HEADER,
  TP_R_BAD_TARGET,
  TP_R_BAD_BODY,
  TP_R_BAD_VERSION,
  TP_R_UPGRADE,
  TP_R_METHOD,
  TP_R_TIMEOUT,
  TP_R_BODY_TOO_LARGE,
  TP_R_URI_TOO_LONG,
  TP_R_HEADERS_TOO_LARGE,
  TP_R_TOO_MANY_HEADERS,
  TP_R_TRANSFER_CODING,
  TP_R_IO,
  TP_R_NO_MEMORY,
  TP_R_BUSY_BODIES, /* max_bodies */
  TP_R_BUSY_FILES,  /* the descriptor budget */
  TP_R_BUSY_SINK,   /* a body sink said SBX_EBUSY */
  TP_R_SHED,        /* the connection came past the descriptor budget */
};
int tp__refusal_status(enum tp_refusal why);
/* Answers the refusal (JSON error body; Retry-After for the bounds). */
int tp__refuse(struct tp_req *r, enum tp_refusal why);

/* An open file shared by the file cache and every answer that reads it (static.c): closed when
 * the last of them lets go.  Each open one takes a descriptor of the budget. */
struct tp_file {
  int fd;
  int refs;
  struct tp_server *srv;
};
void tp__file_ref(struct tp_file *f);
void tp__file_unref(struct tp_file *f);

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
  uint64_t body_seen; /* body bytes received (buffered or given to the sink) */
  const struct tp_route *route;
  int route_status; /* 0 matched a route; 404/405; 1 static */
  const struct tp_mount *mount;
  char allow[64];
  void *data;
  tp_req_close_cb close_cb;
  void *close_ud;
  tp_drain_cb drain_cb;
  void *drain_ud;
  /* file body: a reference on the file, read at file_off for file_left more bytes */
  struct tp_file *file;
  uint64_t file_off, file_left;
  /* body timing (tp__body_due): when its head ended, when its last bytes came (loop ms) */
  uint64_t body_start, body_last;
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
/* A piece of the request body: buffered, or given to the route's sink.  0, or the refusal. */
enum tp_refusal tp__req_body_data(struct tp_req *r, const void *p, size_t n);
/* The request ends without its handler (refused while arriving): its close callback runs, so a
 * body sink can drop its state. */
void tp__req_abandon(struct tp_req *r);
/* The peer is gone: fires on_close once (the caller then drops the peer's reference). */
void tp__req_peer_gone(struct tp_req *r);
/* Forgets the connection (and lets go of a file being sent) without telling the handler. */
void tp__req_detach(struct tp_req *r);
/* The protocol's queue for this request drained below the low-water mark. */
void tp__req_drained(struct tp_req *r);
/* 1 when the answer waits on drains (a file being pumped, or a writer told SBX_EAGAIN). */
int tp__req_wants_drain(const struct tp_req *r);
void tp__req_set_state_(struct tp_req *r, enum req_state st, const char *file, int line);
#define tp__req_set_state(r, st) tp__req_set_state_((r), (st), __FILE__, __LINE__)

/* Bodies (the protocols call these from their own state setters).  A body about to be read is
 * admitted or refused (max_bodies; a descriptor for a sink); while one arrives it is counted
 * (and its sink's descriptor).  tp__body_due: the loop time past which it has been too slow. */
enum tp_refusal tp__body_admit(struct tp_req *r);
void tp__body_enter(struct tp_req *r);
void tp__body_leave(struct tp_req *r);
uint64_t tp__body_due(const struct tp_req *r, uint64_t now);

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
/* A regular file through the cache: 0 with a new reference in *f and its stat in *st; SBX_ENOENT,
 * SBX_EIO, or SBX_EBUSY at the descriptor budget.  `etag` (64 bytes) gets its strong tag. */
int tp__file_open(struct tp_server *s, const char *path, struct tp_file **f, struct stat *st,
                  char *etag, const char **small);
/* Answers with [off, off+len) of a referenced file (stolen: released even on failure). */
int tp__respond_file_at(struct tp_req *r, struct tp_file *f, int status, const char *headers,
                        uint64_t off, uint64_t len);
/* Parses "bytes=a-b" against `size`: 1 one range (start/len set), 0 no usable range (serve all),
 * -1 unsatisfiable (416). */
int tp__parse_range(const char *h, uint64_t size, uint64_t *start, uint64_t *len);
int tp__sse_encode(struct sbx_buf *buf, const char *event, const char *id, const char *data,
                   size_t len);
/* The value of the first `name:` line of a "Name: value\r\n" block, or NULL. */
const char *tp__headers_find(const char *headers, const char *name);
const char *tp__mime_type(const char *path);
const char *tp__status_text(int status);
void tp__count_status(struct tp_server *s, int status);

#endif
