/* transport.h -- the one public header of the transport module.
 *
 * What it is: the HTTP server the orchestrator stands on.  One libuv listener per address (TCP
 * 127.0.0.1:PORT or unix:PATH); each accepted connection is sniffed (0x16 -> TLS, the HTTP/2
 * preface -> h2c, else HTTP/1.1) and handed to a protocol peer (HTTP/1.1 over http-parser,
 * HTTP/2 over nghttp2).  Every protocol delivers requests through the same handler API below, so
 * a handler never knows whether it answers an HTTP/1.1 request or an HTTP/2 stream.  Static files
 * (with precompressed variants, ranges, ETags) and Server-Sent Events are served here too.
 *
 * What it is not: it knows nothing of chats, runs or JSON bodies (the orchestrator parses them),
 * and nothing of SQLite.
 *
 * Ownership: a struct tp_req is owned by the transport.  A handler either answers before
 * returning, or calls tp_req_hold() and answers later (long polls, `wait_s`); a held request must
 * be released with tp_req_release() exactly once, after answering or after its on_close callback
 * ran.  (A handler that returns without answering and without holding gets a 500 answered for
 * it, and a warning in the log.)  Every string a tp_req_* accessor returns lives as long as the
 * request.  When the peer goes away, the request's close callback (tp_req_on_close) runs; after it the
 * request may still be answered (the answer is dropped) but must still be released.
 *
 * Errors: functions return 0 or a negative SBX_* code (common.h), with detail in struct sbx_error
 * where one is taken.
 */
#ifndef SBX_TRANSPORT_H
#define SBX_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "common.h"

struct tp_server;
struct tp_req;

/* ---- server -------------------------------------------------------------------------------- */

struct tp_limits {
  size_t max_header_bytes;            /* all header lines together; 431 past it (default 16 KiB) */
  size_t max_headers;                 /* header count; 431 past it (default 100) */
  size_t max_request_line;            /* method + target + version; 414 past it (default 8 KiB) */
  size_t default_body_limit;          /* body limit of routes that set none (default 1 MiB) */
  uint64_t header_timeout_ms;         /* whole request head must arrive within (default 10 s) */
  uint64_t idle_timeout_ms;           /* keep-alive connection with no request (default 60 s) */
  uint64_t handshake_timeout_ms;      /* TLS handshake / protocol sniff (default 10 s) */
  uint32_t h2_max_concurrent_streams; /* advertised and enforced, <= 100 (default 100) */
  size_t sse_queue_bytes; /* per event stream; past it sends fail with SBX_EAGAIN (256 KiB) */
  size_t h2_outbound_queue_bytes; /* per HTTP/2 session before reads pause (default 1 MiB) */
  uint32_t max_connections; /* accepted at once; past it new ones are closed (default 50000) */
  /* Request bodies, HTTP/1.1 and HTTP/2 alike.  The head has header_timeout_ms; the body then
   * has its own clock: body_grace_ms from the end of its head, and one second more for every
   * body_min_rate bytes that arrived, but never more than idle_timeout_ms without a byte.  Past
   * it: 408.  (A steady upload at 16 KB/s of 50 MB is never cut; a byte a second is, after the
   * grace.) */
  uint64_t body_grace_ms; /* 0 (the default): header_timeout_ms */
  size_t body_min_rate;   /* bytes a second a body must average past the grace (default 1024) */
  uint32_t max_bodies;    /* request bodies arriving at once, server-wide; past it 503 with
                             Retry-After before any body byte is read (default 1024) */
  /* Response bytes queued in HTTP/2 streams that wait for the peer's flow-control window: per
   * connection and over all of them.  Past either, the connection's new streams are refused
   * (REFUSED_STREAM); files are read no further ahead than the window and these bounds. */
  size_t h2_conn_buffer_bytes; /* default 256 KiB */
  size_t buffer_bytes;         /* default 64 MiB */
  /* Decoded header bytes one HTTP/2 connection may cost a second (HPACK makes a few bytes on the
   * wire decode to many): past it, and past twice max_header_bytes in one header block, the
   * connection ends with GOAWAY ENHANCE_YOUR_CALM, logged once (default 8 MiB). */
  size_t h2_header_bytes_per_sec;
  /* Descriptors: the server counts what it holds (listeners, connections, open files, and one
   * for each body streamed to a sink) beside what was open when it was made, against
   * RLIMIT_NOFILE less fd_reserve.  Past that budget a new connection is still accepted, answered
   * 503 with Retry-After and closed (past the reserve too, it is closed at once); a file answer
   * or a streamed body that would need a descriptor gets 503 with Retry-After.  Files are shared
   * (one descriptor per file however many answers read it), so one connection holds at most a
   * descriptor per stream, for distinct files. */
  uint32_t fd_reserve; /* 0: RLIMIT_NOFILE / 16, at least 32 */
};
/* Fills every field with its default. */
void tp_limits_default(struct tp_limits *l);

struct tp_config {
  struct tp_limits limits;
  const char *tls_cert_file; /* PEM; both or neither */
  const char *tls_key_file;
  const char *server_name; /* "Server:" header value; NULL: "cerea-sandbox" */
};

/* Creates a server on `loop` (borrowed; must outlive the server).  Copies cfg.  Sets SIGPIPE to
 * ignored when it still has its default disposition (a closed peer must not kill the process). 
 * Errors: SBX_ENOMEM; SBX_ETLS with detail when the certificate or key cannot be read or do not
 * match. */
int tp_server_new(uv_loop_t *loop, const struct tp_config *cfg, struct tp_server **out,
                  struct sbx_error *err);

/* Starts listening on "ADDR:PORT" (IPv4, IPv6 in brackets) or "unix:PATH".  May be called several
 * times for several listeners.  Port 0 picks a free port: tp_server_port() tells which.
 * Errors: SBX_EINVAL (bad address), SBX_EADDRINUSE, SBX_EPERM, SBX_EIO, with detail. */
int tp_server_listen(struct tp_server *s, const char *addr, struct sbx_error *err);
int tp_server_port(const struct tp_server *s); /* the first TCP listener's port, or -1 */

/* Stops accepting, lets in-flight responses finish up to `drain_ms`, closes every connection and
 * handle, then calls `cb` (may be NULL).  After cb the server is freed; the loop has no handle of
 * ours left.  Safe once; later calls are ignored. */
typedef void (*tp_closed_cb)(struct tp_server *s, void *ud);
void tp_server_close(struct tp_server *s, uint64_t drain_ms, tp_closed_cb cb, void *ud);

/* ---- routing ---------------------------------------------------------------------------------
 * Patterns are paths with `{name}` segments ("/v1/chats/{chat}/files") and an optional trailing
 * `{name*}` that takes the rest of the path, slashes included ("/v1/runs/{run}/files/{name*}").
 * Parameters are percent-decoded.  Exact literal routes win over parametrised ones; a path that
 * matches a pattern with another method gets 405 with Allow.  Unmatched paths get 404 (JSON error
 * body).  body_limit 0 means the server default; a body past it is refused with 413 before the
 * handler runs. */
typedef void (*tp_handler_cb)(struct tp_req *req, void *ud);
int tp_route(struct tp_server *s, const char *method, const char *pattern, size_t body_limit,
             tp_handler_cb cb, void *ud);

/* The handler for requests that match no route and no static mount, in place of the JSON 404
 * (the orchestrator answers browsers with an HTML page).  One per server; NULL restores the
 * JSON 404.  A path that matches a route with another method still gets 405. */
void tp_not_found(struct tp_server *s, tp_handler_cb cb, void *ud);

/* Request bodies streamed to a sink instead of buffered (large uploads): like tp_route, but each
 * piece of the body goes to on_body as it arrives (data borrowed for the call), and the handler
 * runs once the body is complete, with tp_req_body() empty.  body_limit still applies (413).
 * on_body returns 0, or a negative SBX_* code to refuse the request: SBX_ETOOBIG -> 413,
 * SBX_ENOMEM -> 503, SBX_EBUSY -> 503 with Retry-After (a cap of the caller's, such as uploads
 * per chat), SBX_EIO -> 500, any other -> 400.  on_body must not answer the request (it runs
 * inside the protocol parser); state it keeps goes in tp_req_set_data(), and the close callback
 * it sets with tp_req_on_close() runs when the request ends without its handler (refused, client
 * gone), so the state can be dropped.  A streamed body counts against max_bodies and takes one
 * descriptor of the budget (for the sink's file) while it arrives: past either, 503 with
 * Retry-After before on_body is called at all.  tp_req_body_arriving() tells a sink (or any
 * handler) whether the body is still coming. */
typedef int (*tp_body_cb)(struct tp_req *req, const void *data, size_t len, void *ud);
int tp_route_streamed(struct tp_server *s, const char *method, const char *pattern,
                      size_t body_limit, tp_body_cb on_body, tp_handler_cb cb, void *ud);

/* Serves files under `dir` at URL prefix `prefix` ("/pyodide/").  Content types by extension
 * (.wasm application/wasm, .mjs text/javascript, ...); ETag + If-None-Match; Range; when
 * FILE.br / FILE.gz exist and the client accepts them, they are sent with Content-Encoding.
 * `cache_control` for every response of the mount (NULL: "no-cache").  Never redirects.  Paths
 * with `..`, NUL or backslashes are refused (404).  A directory request serves index.html. */
int tp_static_mount(struct tp_server *s, const char *prefix, const char *dir,
                    const char *cache_control);

/* Extra response headers for every response whose path starts with `prefix` (static or not), in
 * registration order: e.g. COOP/COEP for the app, a CSP for the kernel worker script.  `headers`
 * is "Name: value\r\n"-joined text, copied. */
int tp_path_headers(struct tp_server *s, const char *prefix, const char *headers);

/* ---- requests -------------------------------------------------------------------------------- */

const char *tp_req_path(const struct tp_req *r); /* decoded path, no query */
/* The method, and the target as received (path and query, undecoded): what a proxy forwards. */
const char *tp_req_method(const struct tp_req *r);
const char *tp_req_target(const struct tp_req *r);
/* Route parameter by name, percent-decoded; NULL when absent. */
const char *tp_req_param(const struct tp_req *r, const char *name);
/* First query parameter by name, percent-decoded ('+' is a space); NULL when absent. */
const char *tp_req_query(const struct tp_req *r, const char *name);
/* Header by case-insensitive name; NULL when absent. */
const char *tp_req_header(const struct tp_req *r, const char *name);
/* The buffered body (NUL-terminated for convenience; may hold NULs: use len). */
const char *tp_req_body(const struct tp_req *r, size_t *len);
/* Peer address text ("127.0.0.1:53122" or "unix"), for logs. */
const char *tp_req_peer(const struct tp_req *r);
/* 1 while the request's body is still arriving (from the end of its head to its last byte). */
int tp_req_body_arriving(const struct tp_req *r);

/* Keeps the request alive past the handler's return (see ownership above). */
void tp_req_hold(struct tp_req *r);
void tp_req_release(struct tp_req *r);
/* Called once when the peer is gone (connection closed, stream reset) before an answer ended. */
typedef void (*tp_req_close_cb)(struct tp_req *r, void *ud);
void tp_req_on_close(struct tp_req *r, tp_req_close_cb cb, void *ud);
/* Per-request user pointer, for handlers. */
void tp_req_set_data(struct tp_req *r, void *data);
void *tp_req_get_data(const struct tp_req *r);
/* One user pointer per connection, shared by the requests it carries (HTTP/1.1 keep-alive, HTTP/2
 * streams): set once, freed with free_fn when the connection is freed.  NULL when none was set or
 * the peer is gone; setting it on a request whose peer is gone frees data at once. */
void *tp_req_conn_data(const struct tp_req *r);
void tp_req_set_conn_data(struct tp_req *r, void *data, void (*free_fn)(void *));

/* ---- responses ------------------------------------------------------------------------------
 * `headers` is NULL or "Name: value\r\n"-joined text; Content-Length / Date / Server are added.
 * One answer per request: a second one fails with SBX_ESTATE. */
int tp_respond(struct tp_req *r, int status, const char *headers, const void *body, size_t len);
/* {"error":{"code":code,"message":message}} with Content-Type application/json. */
int tp_respond_error(struct tp_req *r, int status, const char *code, const char *message);
/* The same with extra header lines (Allow, Retry-After: "Name: value\r\n"-joined) before its
 * Content-Type. */
int tp_respond_error_h(struct tp_req *r, int status, const char *headers, const char *code,
                       const char *message);

/* Streamed answer: start (headers; no Content-Length unless given in headers -> chunked on
 * HTTP/1.1), write pieces, end.  tp_stream_write copies the data; it fails with SBX_EAGAIN when
 * more than the SSE queue limit is pending: wait for the drain callback. */
typedef void (*tp_drain_cb)(struct tp_req *r, void *ud);
int tp_stream_start(struct tp_req *r, int status, const char *headers);
int tp_stream_write(struct tp_req *r, const void *data, size_t len);
int tp_stream_end(struct tp_req *r);
void tp_stream_on_drain(struct tp_req *r, tp_drain_cb cb, void *ud);

/* Is `etag` in the If-None-Match list `inm` (NULL: no)?  The weak comparison of RFC 9110
 * 13.1.2; `*` matches.  tp_respond_file uses it; a handler with its own validator may too. */
int tp_etag_listed(const char *inm, const char *etag);
/* Sends a file from disk as the answer (streamed, Range honoured when `allow_range`).  The
 * orchestrator uses it for blobs.  The file is opened through the server's file cache (one
 * descriptor shared by every answer of the same file, revalidated within a second), and read no
 * further ahead than the peer takes.  Errors: SBX_ENOENT, SBX_EIO (then nothing was sent).  At
 * the descriptor budget it answers 503 with Retry-After itself and returns 0. */
int tp_respond_file(struct tp_req *r, const char *path, const char *content_type,
                    const char *extra_headers, int allow_range);

/* ---- Server-Sent Events ----------------------------------------------------------------------
 * tp_sse_start answers 200 text/event-stream (Cache-Control: no-cache unless extra_headers
 * carries its own, X-Accel-Buffering: no) with the comment ": open" as the body's first bytes
 * (a client that waits for body bytes sees the stream open at once), and holds the request.  tp_sse_send encodes one event in one write: "id: ID\nevent: EVENT\ndata: ..." with a
 * `data:` line per line of data.  Heartbeat comments (": hb") go out every heartbeat_ms while the
 * stream is idle.  Sends fail with SBX_EAGAIN when the stream's queue is over the limit and with
 * SBX_ECLOSED once the peer is gone.  End with tp_stream_end(). */
int tp_sse_start(struct tp_req *r, const char *extra_headers, uint64_t heartbeat_ms);
int tp_sse_send(struct tp_req *r, const char *event, const char *id, const char *data, size_t len);

/* ---- metrics --------------------------------------------------------------------------------- */
/* Appends the transport's metrics in Prometheus text format. */
int tp_metrics_write(const struct tp_server *s, struct sbx_buf *out);

#endif
