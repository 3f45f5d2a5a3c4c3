/* test_sse.c -- Server-Sent Events (transport/req.c's SSE part): the encoding table (id, event,
 * one data: line per line of data, CR/LF/CRLF, empty data, refused line breaks in fields), and a
 * live stream over HTTP/1.1: headers, the opening comment, events in one chunk each, heartbeats,
 * and the bounded queue (SBX_EAGAIN) while the client does not read. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "handlers.h"
#include "harness.h"
#include "internal.h"

struct scase {
  const char *event, *id, *data;
  size_t len;
  int rc;
  const char *out;
};

static const struct scase scases[] = {
    {"run", "1", "{\"a\":1}", 7, 0, "id: 1\nevent: run\ndata: {\"a\":1}\n\n"},
    {NULL, NULL, "x", 1, 0, "data: x\n\n"},
    {"m", NULL, "a\nb\nc", 5, 0, "event: m\ndata: a\ndata: b\ndata: c\n\n"},
    {NULL, NULL, "a\r\nb\rc", 6, 0, "data: a\ndata: b\ndata: c\n\n"},
    {NULL, NULL, "a\n", 2, 0, "data: a\ndata: \n\n"},
    {NULL, NULL, "", 0, 0, "data: \n\n"},
    {NULL, NULL, "a\rb\nc\r\nd", 8, 0, "data: a\ndata: b\ndata: c\ndata: d\n\n"},
    {NULL, NULL, "\r\r\n\n", 4, 0, "data: \ndata: \ndata: \ndata: \n\n"},
    {NULL, NULL, "a\r", 2, 0, "data: a\ndata: \n\n"},
    {"bad\nevent", NULL, "x", 1, SBX_EINVAL, ""},
    {NULL, "1\r2", "x", 1, SBX_EINVAL, ""},
};

START_TEST(test_sse_encode) {
  const struct scase *c = &scases[_i];
  struct sbx_buf b;
  sbx_buf_init(&b, 4096);
  ck_assert_int_eq(tp__sse_encode(&b, c->event, c->id, c->data, c->len), c->rc);
  ck_assert_str_eq(b.data ? b.data : "", c->out);
  sbx_buf_free(&b);
}
END_TEST

START_TEST(test_sse_encode_limit) {
  struct sbx_buf b;
  sbx_buf_init(&b, 10);
  ck_assert_int_eq(tp__sse_encode(&b, "event", NULL, "data", 4), SBX_ETOOBIG);
  ck_assert_uint_eq(b.len, 0); /* nothing half-written */
  sbx_buf_free(&b);
}
END_TEST

static void client_sse(struct th *t) {
  int fd = th_connect(t->port);
  th_sends(fd, "GET /sse HTTP/1.1\r\n\r\n");
  int st;
  char *r = th_read_response(fd, &st);
  ck_assert_int_eq(st, 200);
  ck_assert_ptr_nonnull(strstr(r, "Content-Type: text/event-stream"));
  ck_assert_ptr_nonnull(strstr(r, "Cache-Control: no-cache"));
  ck_assert_ptr_nonnull(strstr(r, "X-Accel-Buffering: no"));
  ck_assert_ptr_nonnull(
      strstr(r, "\r\n\r\n: open\n\nid: 1\nevent: run\ndata: line1\ndata: line2\n\ndata: x\n\n"));
  free(r);
  close(fd);
  /* Heartbeats on an idle stream. */
  fd = th_connect(t->port);
  th_sends(fd, "GET /sse-open HTTP/1.1\r\n\r\n");
  char buf[8192] = "";
  size_t got = 0;
  for (int i = 0; i < 100 && !strstr(buf, ": hb\n\n"); i++) { /* up to 5 s on a busy machine */
    ssize_t n = recv(fd, buf + got, sizeof(buf) - 1 - got, 0);
    ck_assert_int_gt(n, 0);
    got += (size_t)n;
    buf[got] = '\0';
  }
  ck_assert_ptr_nonnull(strstr(buf, "id: 7\nevent: hello\ndata: {}\n\n"));
  ck_assert_ptr_nonnull(strstr(buf, ": hb\n\n"));
  close(fd);
}

START_TEST(test_sse_live) { th_run_routes(NULL, client_sse); }
END_TEST

/* The bounded queue: a client that never reads; sends fail with EAGAIN, the drain callback is
 * not called while nothing drains, and after the client goes, sends fail with ECLOSED. */
static struct tp_req *flood_req;
static int flood_eagain, flood_closed_rc, flood_sent;

static void on_flood_close(struct tp_req *r, void *ud) {
  flood_closed_rc = tp_sse_send(r, NULL, NULL, "x", 1);
  tp_req_release(r);
  flood_req = NULL;
}

static void h_flood(struct tp_req *r, void *ud) {
  static char chunk[16384];
  memset(chunk, 'z', sizeof(chunk));
  tp_sse_start(r, NULL, 0);
  tp_req_on_close(r, on_flood_close, NULL);
  flood_req = r;
  for (int i = 0; i < 10000; i++) {
    int rc = tp_sse_send(r, "e", NULL, chunk, sizeof(chunk));
    if (rc == SBX_EAGAIN) {
      flood_eagain = 1;
      break;
    }
    ck_assert_int_eq(rc, 0);
    flood_sent++;
  }
}

static void client_flood(struct th *t) {
  int fd = th_connect(t->port);
  int small = 4096;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  th_sends(fd, "GET /flood HTTP/1.1\r\n\r\n");
  usleep(300 * 1000);
  close(fd);
  usleep(200 * 1000);
}

START_TEST(test_sse_backpressure) {
  struct tp_limits l;
  tp_limits_default(&l);
  l.sse_queue_bytes = 64 * 1024;
  struct th t;
  th_init(&t, &l);
  tp_route(t.srv, "GET", "/flood", 0, h_flood, NULL);
  flood_eagain = flood_sent = 0;
  flood_closed_rc = 0;
  th_run(&t, client_flood);
  ck_assert_int_eq(flood_eagain, 1);
  ck_assert_int_lt(flood_sent, 100); /* bounded: far less than 10000 * 16 KiB queued */
  ck_assert_int_eq(flood_closed_rc, SBX_ECLOSED);
}
END_TEST

/* The event stream's head carries Cache-Control once: the caller's when it gives one (the
 * orchestrator says no-store), no-cache when it does not (issue 21, item 9). */
static void h_cc(struct tp_req *r, void *ud) {
  if (tp_sse_start(r, ud, 0) == 0) { /* it holds the request: ended and released here */
    tp_stream_end(r);
    tp_req_release(r);
  }
}

static int count_of(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = hay; (p = strcasestr(p, needle)) != NULL; p++)
    n++;
  return n;
}

static void client_cc(struct th *t) {
  int st;
  char *r = th_request(t->port, "GET /own HTTP/1.1\r\n\r\n", &st);
  ck_assert_int_eq(st, 200);
  ck_assert_msg(count_of(r, "\r\nCache-Control:") == 1 && strstr(r, "Cache-Control: no-store\r\n"),
                "%s", r);
  free(r);
  r = th_request(t->port, "GET /default HTTP/1.1\r\n\r\n", &st);
  ck_assert_msg(count_of(r, "\r\nCache-Control:") == 1 && strstr(r, "Cache-Control: no-cache\r\n"),
                "%s", r);
  free(r);
}

START_TEST(test_sse_cache_control_once) {
  struct th t;
  th_init(&t, NULL);
  tp_route(t.srv, "GET", "/own", 0, h_cc, "Cache-Control: no-store\r\n");
  tp_route(t.srv, "GET", "/default", 0, h_cc, NULL);
  th_run(&t, client_cc);
}
END_TEST

Suite *sse_suite(void);
Suite *sse_suite(void) {
  Suite *s = suite_create("sse");
  TCase *tc = tcase_create("sse");
  tcase_set_timeout(tc, 20);
  tcase_add_loop_test(tc, test_sse_encode, 0, (int)(sizeof(scases) / sizeof(scases[0])));
  tcase_add_test(tc, test_sse_encode_limit);
  tcase_add_test(tc, test_sse_live);
  tcase_add_test(tc, test_sse_backpressure);
  tcase_add_test(tc, test_sse_cache_control_once);
  suite_add_tcase(s, tc);
  return s;
}
