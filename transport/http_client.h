/* http_client.h -- an HTTP client on a libuv loop: libcurl's multi interface driven by the loop
 * (one uv_poll_t per socket curl opens, one uv_timer_t for curl's timeouts), for whoever in the
 * process talks to another HTTP server (the assistant's model connector; node forwarding).
 *
 * A request: method, URL, header lines, a body (copied, or read as it goes out), and its bounds:
 * connect timeout, stall (no byte received for that long: the transfer ends), total time.  The
 * answer comes back as it arrives: its header lines one by one when asked (on_header), the status
 * and head once (on_head), then the body piece by piece (on_body, which may pause the transfer
 * until tp_http_resume), then on_done exactly once, unless the transfer was cancelled first
 * (tp_http_cancel: no callback after it).  TLS is verified (libcurl's defaults:
 * peer and host name against the system's CA store).  Nothing of the request's headers or body is
 * logged here: a header may carry a credential.
 *
 * What it does not do: parse bodies (JSON, SSE: the caller does), follow redirects, retry, or
 * keep anything of a finished transfer.
 */
#ifndef TP_HTTP_CLIENT_H
#define TP_HTTP_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "common.h"

struct tp_http_client;
struct tp_http_xfer;

/* How a transfer ended: TP_HTTP_OK (an answer came whole, whatever its status), or
 * TP_HTTP_UNREACHABLE (DNS, refused, connect timeout, TLS handshake or verification: no answer),
 * TP_HTTP_STALLED (no byte for stall_ms), TP_HTTP_TIMEDOUT (total_ms), TP_HTTP_BROKEN (the
 * connection failed mid-answer, a malformed answer), TP_HTTP_ABORTED (a callback asked to stop). */
enum tp_http_end {
  TP_HTTP_OK = 0,
  TP_HTTP_UNREACHABLE,
  TP_HTTP_STALLED,
  TP_HTTP_TIMEDOUT,
  TP_HTTP_BROKEN,
  TP_HTTP_ABORTED,
};
const char *tp_http_end_name(enum tp_http_end e); /* "ok", "unreachable", ... */

struct tp_http_cbs {
  /* The answer's status line and headers came (after any 1xx).  Nonzero stops the transfer
   * (on_done with TP_HTTP_ABORTED).  May be NULL. */
  int (*on_head)(void *ud, int status, const char *content_type);
  /* A piece of the body.  0: taken; SBX_EAGAIN: not taken, the transfer pauses until
   * tp_http_resume (the piece is handed again then); anything else stops it (TP_HTTP_ABORTED). */
  int (*on_body)(void *ud, const char *p, size_t len);
  /* Once, at the end (not after tp_http_cancel).  status: the answer's (0 when none came); why:
   * curl's words for a failure ("" when end is TP_HTTP_OK), borrowed for the call.  The
   * transfer is freed after the call. */
  void (*on_done)(void *ud, enum tp_http_end end, int status, const char *why);
  /* Each header line of the final head (not a 1xx's, not the status line nor the blank one), as
   * received ("Name: value\r\n"), before on_head.  Nonzero stops the transfer (TP_HTTP_ABORTED).
   * May be NULL. */
  int (*on_header)(void *ud, const char *line, size_t len);
};

struct tp_http_request {
  const char *method;         /* "GET", "HEAD" (no body comes), "POST", ... */
  const char *url;            /* http:// or https:// only */
  const char *const *headers; /* "Name: value" lines, n_headers of them (copied) */
  size_t n_headers;
  const char *body; /* copied; NULL: none */
  size_t body_len;  /* the body's bytes, read_body's too */
  /* A body read as it goes out instead of copied (a file): up to cap bytes into p, the count (0
   * at its end), or -1 to stop the transfer (TP_HTTP_ABORTED).  Not after tp_http_cancel. */
  long (*read_body)(void *ud, char *p, size_t cap);
  uint64_t connect_ms; /* 0: 10 s */
  uint64_t stall_ms;   /* no byte received for this long ends it; 0: never */
  uint64_t total_ms;   /* 0: no total bound */
  const char *ca_file; /* a CA bundle to verify against instead of the system's (tests) */
};

/* A client on loop (its timer is a handle of the loop).  SBX_ENOMEM, SBX_EIO (libcurl could not
 * be initialised). */
int tp_http_client_new(uv_loop_t *loop, struct tp_http_client **out, struct sbx_error *err);
/* Cancels every transfer (no callback) and frees the client; its handles close on the loop, so
 * run the loop once more before uv_loop_close. */
void tp_http_client_free(struct tp_http_client *hc);

/* Starts a transfer.  NULL when out of memory or the request is malformed (no callback then). */
struct tp_http_xfer *tp_http_start(struct tp_http_client *hc, const struct tp_http_request *rq,
                                   const struct tp_http_cbs *cbs, void *ud);
/* Ends the transfer at once; its callbacks are not called again.  Safe from its own callbacks. */
void tp_http_cancel(struct tp_http_xfer *x);
/* A transfer paused by on_body's SBX_EAGAIN goes on. */
void tp_http_resume(struct tp_http_xfer *x);
/* Transfers in progress (tests check a client ends with none). */
size_t tp_http_active(const struct tp_http_client *hc);

#endif
