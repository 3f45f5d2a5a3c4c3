/* handlers.c -- test routes shared by the transport suites. */
#include "handlers.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int th_poll_closed;
int th_sink_live; /* sink states allocated and not yet freed */

/* POST /sink (streamed, limit 1 MiB): counts bytes and pieces; POST /sink-refuse refuses past
 * 10 bytes with SBX_EIO.  Their state lives in tp_req_set_data and is freed by the handler or by
 * the close callback. */
struct sink {
  size_t bytes, pieces;
  unsigned sum;
};
static void sink_drop(struct tp_req *r, void *ud) {
  free(tp_req_get_data(r));
  tp_req_set_data(r, NULL);
  th_sink_live--;
}
static int sink_data(struct tp_req *r, const void *p, size_t n, void *ud) {
  struct sink *k = tp_req_get_data(r);
  if (k == NULL) {
    k = calloc(1, sizeof(*k));
    tp_req_set_data(r, k);
    tp_req_on_close(r, sink_drop, NULL);
    th_sink_live++;
  }
  k->bytes += n;
  k->pieces++;
  for (size_t i = 0; i < n; i++)
    k->sum += ((const unsigned char *)p)[i];
  if (ud != NULL && k->bytes > 10)
    return SBX_EIO;
  return 0;
}
static void h_sink(struct tp_req *r, void *ud) {
  struct sink *k = tp_req_get_data(r);
  size_t blen;
  tp_req_body(r, &blen);
  char out[128];
  int n = snprintf(out, sizeof(out), "bytes=%zu sum=%u buffered=%zu", k ? k->bytes : 0,
                   k ? k->sum : 0, blen);
  if (k) {
    tp_req_on_close(r, NULL, NULL);
    sink_drop(r, NULL);
  }
  tp_respond(r, 200, NULL, out, (size_t)n);
}

static void h_hello(struct tp_req *r, void *ud) {
  tp_respond(r, 200, "Content-Type: text/plain\r\n", "hello", 5);
}

/* A head past the 32 pairs HTTP/2 converts on the stack, with connection-specific headers among
 * them (HTTP/2 drops those) and mixed-case names (sent lower-cased). */
static void h_big_head(struct tp_req *r, void *ud) {
  char hdrs[2048];
  size_t n = 0;
  n += (size_t)snprintf(hdrs + n, sizeof(hdrs) - n,
                        "Connection: keep-alive\r\nKeep-Alive: timeout=5\r\nUpgrade: h2c\r\n");
  for (int i = 0; i < 40; i++)
    n += (size_t)snprintf(hdrs + n, sizeof(hdrs) - n, "X-Head-%02d: v%02d\r\n", i, i);
  n += (size_t)snprintf(
      hdrs + n, sizeof(hdrs) - n,
      "Proxy-Connection: x\r\nno-colon-line\r\n: empty-name\r\nX-Last:\t Mixed Value\r\n");
  tp_respond(r, 200, hdrs, "big", 3);
}

/* A body of TH_LARGE_LEN bytes, byte i = th_large_byte(i): over HTTP/2 it goes out in frames
 * taken without a copy, and a last short one copied (http2.c's NO_COPY_MIN). */
static void h_large(struct tp_req *r, void *ud) {
  char *b = malloc(TH_LARGE_LEN);
  if (b == NULL) {
    tp_respond_error(r, 503, "no_memory", "out of memory");
    return;
  }
  for (size_t i = 0; i < TH_LARGE_LEN; i++)
    b[i] = th_large_byte(i);
  tp_respond(r, 200, "Content-Type: application/octet-stream\r\n", b, TH_LARGE_LEN);
  free(b);
}

static void h_echo(struct tp_req *r, void *ud) {
  size_t n;
  const char *b = tp_req_body(r, &n);
  tp_respond(r, 200, "Content-Type: application/octet-stream\r\n", b, n);
}

static void h_item(struct tp_req *r, void *ud) {
  char out[256];
  const char *q = tp_req_query(r, "q");
  int n = snprintf(out, sizeof(out), "id=%s q=%s", tp_req_param(r, "id"), q ? q : "-");
  tp_respond(r, 200, NULL, out, SBX_MIN((size_t)n, sizeof(out) - 1)); /* a long id is cut */
}

static void h_files(struct tp_req *r, void *ud) {
  const char *name = tp_req_param(r, "name");
  tp_respond(r, 200, NULL, name, strlen(name));
}

static void h_chunks(struct tp_req *r, void *ud) {
  tp_stream_start(r, 200, "Content-Type: text/plain\r\n");
  tp_stream_write(r, "one,", 4);
  tp_stream_write(r, "two,", 4);
  tp_stream_write(r, "three", 5);
  tp_stream_end(r);
}

static void on_hold_timer(uv_timer_t *t) {
  struct tp_req *r = t->data;
  tp_respond(r, 200, NULL, "late", 4);
  tp_req_release(r);
  uv_close((uv_handle_t *)t, (uv_close_cb)free);
}

static void h_hold(struct tp_req *r, void *ud) {
  struct tp_server *s = ud;
  uv_timer_t *t = malloc(sizeof(*t));
  uv_timer_init(s->loop, t);
  t->data = r;
  tp_req_hold(r);
  uv_timer_start(t, on_hold_timer, 30, 0);
}

static void on_poll_close(struct tp_req *r, void *ud) {
  th_poll_closed++;
  tp_req_release(r);
}

static void h_poll(struct tp_req *r, void *ud) {
  tp_req_hold(r);
  tp_req_on_close(r, on_poll_close, NULL);
}

static void h_sse(struct tp_req *r, void *ud) {
  if (tp_sse_start(r, NULL, 0) != 0)
    return; /* not held: nothing to release */
  tp_sse_send(r, "run", "1", "line1\nline2", 11);
  tp_sse_send(r, NULL, NULL, "x", 1);
  tp_stream_end(r);
  tp_req_release(r);
}

static void on_sse_close(struct tp_req *r, void *ud) { tp_req_release(r); }

static void h_sse_open(struct tp_req *r, void *ud) {
  if (tp_sse_start(r, NULL, 50) != 0)
    return;
  tp_req_on_close(r, on_sse_close, NULL);
  tp_sse_send(r, "hello", "7", "{}", 2);
}

static void h_nodelay(struct tp_req *r, void *ud) {
  int fd = -1, v = 0;
  socklen_t l = sizeof(v);
  uv_fileno((uv_handle_t *)&r->conn->h.handle, &fd);
  getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &v, &l);
  tp_respond(r, 200, NULL, v ? "1" : "0", 1);
}

static void h_hdr(struct tp_req *r, void *ud) {
  const char *v = tp_req_header(r, "x-last");
  const char *q = tp_req_query(r, "k");
  char out[512];
  int n = snprintf(out, sizeof(out), "%s|%s", v ? v : "-", q ? q : "-");
  tp_respond(r, 200, NULL, out, SBX_MIN((size_t)n, sizeof(out) - 1));
}

void th_add_routes(struct tp_server *s) {
  tp_route_streamed(s, "POST", "/sink", 1 << 20, sink_data, h_sink, NULL);
  tp_route_streamed(s, "POST", "/sink-refuse", 1 << 20, sink_data, h_sink, (void *)1);
  tp_route(s, "GET", "/hdr", 0, h_hdr, NULL);
  tp_route(s, "GET", "/hello", 0, h_hello, NULL);
  tp_route(s, "GET", "/big-head", 0, h_big_head, NULL);
  tp_route(s, "GET", "/large", 0, h_large, NULL);
  tp_route(s, "POST", "/echo", 16, h_echo, NULL);
  tp_route(s, "GET", "/items/{id}", 0, h_item, NULL);
  tp_route(s, "GET", "/files/{name*}", 0, h_files, NULL);
  tp_route(s, "GET", "/chunks", 0, h_chunks, NULL);
  tp_route(s, "GET", "/hold", 0, h_hold, s);
  tp_route(s, "GET", "/poll", 0, h_poll, NULL);
  tp_route(s, "GET", "/sse", 0, h_sse, NULL);
  tp_route(s, "GET", "/sse-open", 0, h_sse_open, NULL);
  tp_route(s, "GET", "/nodelay", 0, h_nodelay, NULL);
}
