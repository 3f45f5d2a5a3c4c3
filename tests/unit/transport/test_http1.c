/* test_http1.c -- transport/http1.c over a real loop, a real server and a client socket:
 * table-driven request/response cases (pipelining, chunked bodies, bad chunk sizes, header and
 * request-line limits, NUL in a header, bad request lines, body limits), then keep-alive,
 * timeouts, early close, held requests and malformed input that must close only its own
 * connection. */
#include <check.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "handlers.h"
#include "harness.h"

struct h1case {
  const char *name;
  const char *req;
  int status;         /* of the first response */
  const char *expect; /* substring of the first response (head or body) */
  int closes;         /* the server closes the connection after it */
  int status2;        /* a second pipelined response, 0 when none */
  const char *expect2;
};

static char big_header[20000];
static char many_headers[150 * 12 + 64];
static char long_uri[10000];
static char forty_headers[8192];

static const struct h1case cases[] = {
    {"get", "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n", 200, "\r\n\r\nhello", 0, 0, NULL},
    {"head", "HEAD /hello HTTP/1.1\r\nHost: x\r\n\r\n", 200, "Content-Length: 5", 0, 0, NULL},
    {"pipelined",
     "GET /hello HTTP/1.1\r\nHost: x\r\n\r\nGET /items/42?q=a+b HTTP/1.1\r\nHost: x\r\n\r\n", 200,
     "hello", 0, 200, "id=42 q=a b"},
    {"param decoded", "GET /items/a%20b HTTP/1.1\r\n\r\n", 200, "id=a b q=-", 0, 0, NULL},
    {"rest param", "GET /files/plots/a%2Fb.png HTTP/1.1\r\n\r\n", 200, "plots/a/b.png", 0, 0, NULL},
    {"chunked body",
     "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n "
     "world\r\n0\r\n\r\n",
     200, "hello world", 0, 0, NULL},
    {"chunked then pipelined",
     "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n0\r\n\r\nGET /hello "
     "HTTP/1.1\r\n\r\n",
     200, "ab", 0, 200, "hello"},
    {"content-length body", "POST /echo HTTP/1.1\r\nContent-Length: 3\r\n\r\nxyz", 200, "xyz", 0, 0,
     NULL},
    {"bad chunk size",
     "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n", 400,
     "bad_request", 1, 0, NULL},
    {"chunk size overflow",
     "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffffff\r\nx\r\n", 400,
     "bad_request", 1, 0, NULL},
    {"body over limit (length)",
     "POST /echo HTTP/1.1\r\nContent-Length: 17\r\n\r\n12345678901234567", 413, "body_too_large", 1,
     0, NULL},
    {"body over limit (chunked)",
     "POST /echo HTTP/1.1\r\nTransfer-Encoding: "
     "chunked\r\n\r\n10\r\n1234567890123456\r\n1\r\nx\r\n0\r\n\r\n",
     413, "body_too_large", 1, 0, NULL},
    {"header overflow", big_header, 431, "headers_too_large", 1, 0, NULL},
    {"too many headers", many_headers, 431, "too_many_headers", 1, 0, NULL},
    {"NUL in a header", "GET /hello HTTP/1.1\r\nX-A: a\0b\r\n\r\n", 400, "bad_request", 1, 0, NULL},
    {"request line too long", long_uri, 414, "uri_too_long", 1, 0, NULL},
    {"garbage request line", "GARBAGE\r\n\r\n", 400, "bad_request", 1, 0, NULL},
    {"bad version", "GET /hello HTTP/9.x\r\n\r\n", 400, "bad_request", 1, 0, NULL},
    {"absolute-form target", "GET http://evil/ HTTP/1.1\r\n\r\n", 400, "bad_target", 1, 0, NULL},
    {"bad percent escape", "GET /items/%zz HTTP/1.1\r\n\r\n", 400, "bad_target", 1, 0, NULL},
    {"CONNECT refused", "CONNECT a:443 HTTP/1.1\r\n\r\n", 405, "method_not_allowed", 1, 0, NULL},
    {"unknown path", "GET /nope HTTP/1.1\r\n\r\n", 404, "not_found", 0, 0, NULL},
    {"wrong method", "DELETE /hello HTTP/1.1\r\n\r\n", 405, "Allow: GET", 0, 0, NULL},
    {"http/1.0 closes", "GET /hello HTTP/1.0\r\n\r\n", 200, "Connection: close", 1, 0, NULL},
    {"connection close", "GET /hello HTTP/1.1\r\nConnection: close\r\n\r\n", 200, "hello", 1, 0,
     NULL},
    {"chunked response", "GET /chunks HTTP/1.1\r\n\r\n", 200, "one,two,three", 0, 0, NULL},
    {"held answer", "GET /hold HTTP/1.1\r\n\r\nGET /hello HTTP/1.1\r\n\r\n", 200, "late", 0, 200,
     "hello"},
    {"upgrade h2c ignored",
     "GET /hello HTTP/1.1\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: "
     "h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n",
     200, "hello", 1, 0, NULL},
    {"expect continue",
     "POST /echo HTTP/1.1\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\nok", 200, "ok", 0, 0,
     NULL},
    {"tcp nodelay", "GET /nodelay HTTP/1.1\r\n\r\n", 200, "\r\n\r\n1", 0, 0, NULL},
    {"many headers past the arena", forty_headers, 200, "\r\n\r\nthe end|v w", 0, 0, NULL},
    /* RFC 9112 lets a server refuse these, and we do (issue 21, item 9). */
    {"version 9.9", "GET /hello HTTP/9.9\r\n\r\n", 400, "bad_request", 1, 0, NULL},
    {"obs-fold", "GET /hello HTTP/1.1\r\nX-A: a\r\n b\r\n\r\n", 400, "bad_request", 1, 0, NULL},
    {"bare LF line endings", "GET /hello HTTP/1.1\nHost: x\n\n", 400, "bad_request", 1, 0, NULL},
    {"one bare LF", "GET /hello HTTP/1.1\r\nX-A: 1\nX-B: 2\r\n\r\n", 400, "bad_request", 1, 0,
     NULL},
    {"bare LF ending the head", "GET /hello HTTP/1.1\r\nX-A: 1\r\n\n", 400, "bad_request", 1, 0,
     NULL},
    {"405 is the JSON error", "DELETE /hello HTTP/1.1\r\n\r\n", 405,
     "Content-Type: application/json\r\n", 0, 0, NULL},
    {"empty lines before the request line", "\r\n\r\nGET /hello HTTP/1.1\r\n\r\n", 200,
     "\r\n\r\nhello", 0, 0, NULL},
    {"trailer fields are not headers",
     "GET /hdr HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-Last: forged\r\nX-More: "
     "1\r\n\r\n",
     200, "\r\n\r\n-|-", 0, 0, NULL},
};

static void build_big(void) {
  strcpy(forty_headers, "GET /hdr?a=1&k=v%20w&z HTTP/1.1\r\n");
  for (int i = 0; i < 40; i++)
    sprintf(forty_headers + strlen(forty_headers), "X-H%02d: %0100d\r\n", i, i);
  strcat(forty_headers, "X-Last: the end\r\n\r\n");
  strcpy(big_header, "GET /hello HTTP/1.1\r\nX-Big: ");
  size_t l = strlen(big_header);
  memset(big_header + l, 'a', 17000);
  strcpy(big_header + l + 17000, "\r\n\r\n");
  strcpy(many_headers, "GET /hello HTTP/1.1\r\n");
  for (int i = 0; i < 150; i++)
    sprintf(many_headers + strlen(many_headers), "X%03d: 1\r\n", i);
  strcat(many_headers, "\r\n");
  strcpy(long_uri, "GET /");
  memset(long_uri + 5, 'a', 9000);
  strcpy(long_uri + 9005, " HTTP/1.1\r\n\r\n");
}

static const struct h1case *cur;
static size_t cur_len;

static void client_case(struct th *t) {
  int fd = th_connect(t->port);
  th_send(fd, cur->req, cur_len);
  int st = 0;
  th_head_response = strncmp(cur->req, "HEAD ", 5) == 0;
  char *r = th_read_response(fd, &st);
  th_head_response = 0;
  ck_assert_msg(r != NULL, "%s: no response", cur->name);
  ck_assert_msg(st == cur->status, "%s: status %d, want %d: %s", cur->name, st, cur->status, r);
  ck_assert_msg(strstr(r, cur->expect) != NULL, "%s: '%s' not in %s", cur->name, cur->expect, r);
  free(r);
  if (cur->status2) {
    r = th_read_response(fd, &st);
    ck_assert_msg(r != NULL, "%s: no second response", cur->name);
    ck_assert_int_eq(st, cur->status2);
    ck_assert_msg(strstr(r, cur->expect2) != NULL, "%s: '%s' not in %s", cur->name, cur->expect2,
                  r);
    free(r);
  }
  if (cur->closes) {
    ck_assert_msg(th_wait_closed(fd, 2000), "%s: connection stayed open", cur->name);
  } else {
    /* Still usable: keep-alive. */
    th_sends(fd, "GET /hello HTTP/1.1\r\n\r\n");
    r = th_read_response(fd, &st);
    ck_assert_msg(r != NULL && st == 200, "%s: connection not reusable", cur->name);
    free(r);
  }
  close(fd);
}

START_TEST(test_h1_table) {
  build_big();
  cur = &cases[_i];
  cur_len = strlen(cur->req);
  if (strcmp(cur->name, "NUL in a header") == 0)
    cur_len = sizeof("GET /hello HTTP/1.1\r\nX-A: a\0b\r\n\r\n") - 1;
  th_run_routes(NULL, client_case);
}
END_TEST

/* Malformed input on one connection leaves another, open one, working. */
static void client_isolation(struct th *t) {
  int good = th_connect(t->port);
  int st;
  th_sends(good, "GET /hello HTTP/1.1\r\n\r\n");
  free(th_read_response(good, &st));
  int bad = th_connect(t->port);
  th_sends(bad, "\x01\x02garbage\r\n\r\n");
  ck_assert(th_wait_closed(bad, 2000));
  close(bad);
  th_sends(good, "GET /items/7 HTTP/1.1\r\n\r\n");
  char *r = th_read_response(good, &st);
  ck_assert_int_eq(st, 200);
  ck_assert_ptr_nonnull(strstr(r, "id=7"));
  free(r);
  close(good);
}

START_TEST(test_h1_malformed_isolated) { th_run_routes(NULL, client_isolation); }
END_TEST

/* Slowloris: a head that never completes gets 408 and the connection closes. */
static void client_header_timeout(struct th *t) {
  int fd = th_connect(t->port);
  th_sends(fd, "GET /hello HTTP/1.1\r\nX-Slow: ");
  int st;
  char *r = th_read_response(fd, &st);
  ck_assert_ptr_nonnull(r);
  ck_assert_int_eq(st, 408);
  free(r);
  ck_assert(th_wait_closed(fd, 2000));
  close(fd);
  /* And an idle keep-alive connection is closed after idle_timeout. */
  fd = th_connect(t->port);
  th_sends(fd, "GET /hello HTTP/1.1\r\n\r\n");
  free(th_read_response(fd, &st));
  ck_assert_int_eq(st, 200);
  ck_assert(th_wait_closed(fd, 3000));
  close(fd);
}

START_TEST(test_h1_timeouts) {
  struct tp_limits l;
  tp_limits_default(&l);
  l.header_timeout_ms = 200;
  l.idle_timeout_ms = 300;
  th_run_routes(&l, client_header_timeout);
}
END_TEST

/* Early close: a client that goes away mid-request or during a long poll; the server carries on
 * and the held request's on_close runs. */
static void client_early_close(struct th *t) {
  int fd = th_connect(t->port);
  th_sends(fd, "POST /echo HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc");
  close(fd);
  fd = th_connect(t->port);
  th_sends(fd, "GET /poll HTTP/1.1\r\n\r\n");
  usleep(100 * 1000);
  close(fd);
  usleep(100 * 1000);
  int st;
  char *r = th_request(t->port, "GET /hello HTTP/1.1\r\n\r\n", &st);
  ck_assert_int_eq(st, 200);
  free(r);
}

START_TEST(test_h1_early_close) {
  th_poll_closed = 0;
  th_run_routes(NULL, client_early_close);
  ck_assert_int_eq(th_poll_closed, 1);
}
END_TEST

/* A body has its own clock (issue 21, items 3 and 4): past the head it may take body_grace_ms,
 * then must average body_min_rate; a slow but steady body taking three times the header timeout
 * is read whole, a trickle is ended with 408 soon after the grace, and a body that stops is
 * ended too. */
static void client_body_clock(struct th *t) {
  int fd = th_connect(t->port);
  th_sends(fd, "POST /sink HTTP/1.1\r\nContent-Length: 6000\r\n\r\n");
  static char piece[200];
  memset(piece, 'b', sizeof(piece));
  uint64_t t0 = uv_hrtime();
  for (int i = 0; i < 30; i++) { /* 200 bytes every 20 ms: 10 KB/s for 0.6 s */
    th_send(fd, piece, sizeof(piece));
    usleep(20 * 1000);
  }
  int st;
  char *r = th_read_response(fd, &st);
  ck_assert_ptr_nonnull(r);
  ck_assert_msg(st == 200 && strstr(r, "bytes=6000"), "steady body after %.0f ms: %d %s",
                (uv_hrtime() - t0) / 1e6, st, r);
  free(r);
  close(fd);
  /* A trickle: a byte every 50 ms (20 B/s against 1000). */
  fd = th_connect(t->port);
  th_sends(fd, "POST /sink HTTP/1.1\r\nContent-Length: 6000\r\n\r\n");
  t0 = uv_hrtime();
  struct pollfd p = {fd, POLLIN, 0};
  for (int i = 0; i < 100 && poll(&p, 1, 50) == 0; i++)
    th_send(fd, "c", 1);
  r = th_read_response(fd, &st);
  double ms = (uv_hrtime() - t0) / 1e6;
  ck_assert_msg(r != NULL && st == 408, "trickle: %d after %.0f ms", st, ms);
  ck_assert_msg(ms < 2000, "trickle ended after %.0f ms", ms);
  free(r);
  close(fd);
  /* A body that stops. */
  fd = th_connect(t->port);
  th_sends(fd, "POST /sink HTTP/1.1\r\nContent-Length: 6000\r\n\r\nabc");
  r = th_read_response(fd, &st);
  ck_assert_msg(r != NULL && st == 408, "stalled: %d", st);
  free(r);
  close(fd);
}

START_TEST(test_h1_body_clock) {
  struct tp_limits l;
  th_body_clock_limits(&l);
  th_run_sinks(&l, client_body_clock);
}
END_TEST

/* max_bodies: bodies arriving at once past it get 503 with Retry-After before any byte is read;
 * a request without a body is served all the same; once a body ends there is room again. */
static void client_max_bodies(struct th *t) {
  int a = th_connect(t->port), b = th_connect(t->port);
  th_sends(a, "POST /sink HTTP/1.1\r\nContent-Length: 10\r\n\r\nab");
  th_sends(b, "POST /echo HTTP/1.1\r\nContent-Length: 10\r\n\r\ncd");
  usleep(100 * 1000);
  int st;
  char *r = th_request(t->port, "POST /sink HTTP/1.1\r\nContent-Length: 4\r\n\r\nwxyz", &st);
  ck_assert_msg(st == 503 && strstr(r, "Retry-After: 1\r\n") && strstr(r, "\"busy\""), "%d %s", st,
                r);
  free(r);
  r = th_request(t->port, "GET /hello HTTP/1.1\r\n\r\n", &st);
  ck_assert_int_eq(st, 200);
  free(r);
  th_sends(a, "cdefghij");
  r = th_read_response(a, &st);
  ck_assert_msg(st == 200 && strstr(r, "bytes=10"), "%d %s", st, r);
  free(r);
  r = th_request(t->port, "POST /sink HTTP/1.1\r\nContent-Length: 4\r\n\r\nwxyz", &st);
  ck_assert_msg(st == 200 && strstr(r, "bytes=4"), "%d %s", st, r);
  free(r);
  close(a);
  close(b);
}

START_TEST(test_h1_max_bodies) {
  struct tp_limits l;
  tp_limits_default(&l);
  l.max_bodies = 2;
  th_run_sinks(&l, client_max_bodies);
}
END_TEST

static struct sbx_buf metrics_text;
static void h_metrics(struct tp_req *r, void *ud) {
  sbx_buf_reset(&metrics_text);
  tp_metrics_write(ud, &metrics_text);
  tp_respond(r, 200, "Content-Type: text/plain\r\n", metrics_text.data, metrics_text.len);
}

/* Streamed bodies: a sink sees every byte (chunked and with a length), the buffer stays empty;
 * a sink that refuses gets its 500 and its state dropped; over the limit, 413. */
static void client_sink(struct th *t) {
  static char big[300000];
  for (size_t i = 0; i < sizeof(big); i++)
    big[i] = (char)(i % 251);
  unsigned sum = 0;
  for (size_t i = 0; i < sizeof(big); i++)
    sum += (unsigned char)big[i];
  int fd = th_connect(t->port);
  char head[128];
  snprintf(head, sizeof(head), "POST /sink HTTP/1.1\r\nContent-Length: %zu\r\n\r\n", sizeof(big));
  th_sends(fd, head);
  th_send(fd, big, sizeof(big));
  int st;
  char *r = th_read_response(fd, &st);
  char want[128];
  snprintf(want, sizeof(want), "bytes=300000 sum=%u buffered=0", sum);
  ck_assert_int_eq(st, 200);
  ck_assert_msg(strstr(r, want), "%s", r);
  free(r);
  th_sends(
      fd,
      "POST /sink HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n");
  r = th_read_response(fd, &st);
  ck_assert_ptr_nonnull(strstr(r, "bytes=5 sum=495 buffered=0"));
  free(r);
  close(fd);
  r = th_request(
      t->port, "POST /sink-refuse HTTP/1.1\r\nContent-Length: 20\r\n\r\n01234567890123456789", &st);
  ck_assert_int_eq(st, 500);
  free(r);
  r = th_request(t->port, "POST /sink HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n100001\r\n",
                 &st);
  ck_assert_msg(st == 413, "%d %s", st, r); /* 1 MiB + 1 in one chunk: refused as it arrives */
  free(r);
  /* A client that leaves in the middle: the sink's state is dropped through on_close. */
  fd = th_connect(t->port);
  th_sends(fd, "POST /sink HTTP/1.1\r\nContent-Length: 100\r\n\r\nhalf");
  usleep(100 * 1000);
  close(fd);
  usleep(100 * 1000);
}

START_TEST(test_h1_body_sink) { th_run_sinks(NULL, client_sink); }
END_TEST

static void client_metrics2(struct th *t) {
  int st;
  free(th_request(t->port, "GET /hello HTTP/1.1\r\n\r\n", &st));
  free(th_request(t->port, "GET /nope HTTP/1.1\r\n\r\n", &st));
  char *r = th_request(t->port, "GET /metrics HTTP/1.1\r\n\r\n", &st);
  ck_assert_int_eq(st, 200);
  ck_assert_msg(strstr(r, "cerea_http_responses_total{code=\"404\"} 1"), "%s", r);
  ck_assert_msg(strstr(r, "cerea_http_responses_total{code=\"200\"} 1"), "%s", r);
  ck_assert_msg(strstr(r, "cerea_http_connections_total{protocol=\"http/1.1\"} 3"), "%s", r);
  ck_assert_msg(strstr(r, "cerea_http_requests_total 3"), "%s", r);
  free(r);
}

START_TEST(test_h1_metrics_live) {
  struct th t;
  th_init(&t, NULL);
  sbx_buf_init(&metrics_text, 1 << 20);
  tp_route(t.srv, "GET", "/metrics", 0, h_metrics, t.srv);
  th_add_routes(t.srv);
  th_run(&t, client_metrics2);
  sbx_buf_free(&metrics_text);
}
END_TEST

/* Listen errors: a bad address and a port in use. */
START_TEST(test_h1_listen_errors) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  struct tp_server *a, *b;
  struct sbx_error err;
  ck_assert_int_eq(tp_server_new(&loop, NULL, &a, &err), 0);
  ck_assert_int_eq(tp_server_new(&loop, NULL, &b, &err), 0);
  ck_assert_int_eq(tp_server_listen(a, "127.0.0.1:0", &err), 0);
  char addr[64];
  snprintf(addr, sizeof(addr), "127.0.0.1:%d", tp_server_port(a));
  ck_assert_int_eq(tp_server_listen(b, addr, &err), SBX_EADDRINUSE);
  ck_assert_int_eq(tp_server_listen(b, "nonsense", &err), SBX_EINVAL);
  ck_assert_int_eq(tp_server_listen(b, "1.2.3:80", &err), SBX_EINVAL);
  ck_assert_int_eq(tp_server_port(b), -1);
  tp_server_close(a, 0, NULL, NULL);
  tp_server_close(b, 0, NULL, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  ck_assert_int_eq(uv_loop_close(&loop), 0);
}
END_TEST

Suite *http1_suite(void);
Suite *http1_suite(void) {
  Suite *s = suite_create("http1");
  TCase *tc = tcase_create("http1");
  tcase_set_timeout(tc, 20);
  tcase_add_loop_test(tc, test_h1_table, 0, (int)(sizeof(cases) / sizeof(cases[0])));
  tcase_add_test(tc, test_h1_malformed_isolated);
  tcase_add_test(tc, test_h1_timeouts);
  tcase_add_test(tc, test_h1_early_close);
  tcase_add_test(tc, test_h1_metrics_live);
  tcase_add_test(tc, test_h1_body_sink);
  tcase_add_test(tc, test_h1_listen_errors);
  tcase_add_test(tc, test_h1_body_clock);
  tcase_add_test(tc, test_h1_max_bodies);
  suite_add_tcase(s, tc);
  return s;
}
