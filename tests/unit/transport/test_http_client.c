/* test_http_client.c -- transport/http_client.c against real HTTP servers on 127.0.0.1: a scripted
 * one in a thread (blocking sockets: it answers in pieces, stalls, breaks off mid-answer), and the
 * transport's own TLS server for verification.  Every test ends with no transfer and
 * uv_loop_close() == 0. */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "handlers.h"
#include "http_client.h"
#include "transport.h"

/* ---- the scripted server --------------------------------------------------------------------- */

enum mode { M_PIECES, M_STALL, M_BROKEN, M_SLOW, M_CONTINUE };
struct srv {
  int lfd, port;
  enum mode mode;
  pthread_t th;
  char req[8192]; /* the request as received (head and body) */
  size_t req_len;
};

static void send_s(int fd, const char *s) {
  ssize_t n = send(fd, s, strlen(s), MSG_NOSIGNAL);
  (void)n;
}

static void *srv_main(void *arg) {
  struct srv *s = arg;
  int fd = accept(s->lfd, NULL, NULL);
  if (fd < 0)
    return NULL;
  size_t want = 0;
  for (;;) { /* the head, then Content-Length bytes of body */
    ssize_t n = recv(fd, s->req + s->req_len, sizeof s->req - 1 - s->req_len, 0);
    if (n <= 0)
      break;
    s->req_len += (size_t)n;
    s->req[s->req_len] = 0;
    char *end = strstr(s->req, "\r\n\r\n");
    if (end && want == 0) {
      char *cl = strcasestr(s->req, "content-length:");
      want = (size_t)(end + 4 - s->req) + (cl ? (size_t)atoi(cl + 15) : 0);
    }
    if (want && s->req_len >= want)
      break;
  }
  switch (s->mode) {
  case M_PIECES:
    send_s(fd, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
               "Transfer-Encoding: chunked\r\n\r\n");
    for (int i = 0; i < 3; i++) {
      usleep(30000);
      send_s(fd, "6\r\npiece\n\r\n");
    }
    send_s(fd, "0\r\n\r\n");
    break;
  case M_STALL:
    send_s(fd, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 10\r\n\r\nab");
    usleep(1500000);
    break;
  case M_BROKEN:
    send_s(fd, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789");
    usleep(50000);
    break;
  case M_SLOW:
    send_s(fd, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nfirst");
    usleep(1000000);
    break;
  case M_CONTINUE: /* a 1xx head of its own before the final one */
    send_s(fd, "HTTP/1.1 103 Early Hints\r\nLink: </early>\r\n\r\n"
               "HTTP/1.1 201 Created\r\nX-One: 1\r\nContent-Type: text/plain\r\n"
               "Content-Length: 2\r\n\r\nok");
    break;
  }
  close(fd);
  return NULL;
}

static void srv_start(struct srv *s, enum mode mode) {
  memset(s, 0, sizeof *s);
  s->mode = mode;
  s->lfd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  ck_assert_int_eq(bind(s->lfd, (struct sockaddr *)&a, sizeof a), 0);
  ck_assert_int_eq(listen(s->lfd, 4), 0);
  socklen_t al = sizeof a;
  getsockname(s->lfd, (struct sockaddr *)&a, &al);
  s->port = ntohs(a.sin_port);
  ck_assert_int_eq(pthread_create(&s->th, NULL, srv_main, s), 0);
}

static void srv_join(struct srv *s) {
  pthread_join(s->th, NULL);
  close(s->lfd);
}

/* ---- the client side ------------------------------------------------------------------------- */

struct got {
  int head_status, done, done_status, pause_once, cancel_in_body, headers_after_head;
  char headers[1024];
  size_t headers_len;
  enum tp_http_end end;
  char ctype[64], body[4096], why[256];
  size_t body_len;
  struct tp_http_xfer *x;
  uv_timer_t resume;
  uint64_t done_ms;
};

static int on_head(void *ud, int status, const char *ct) {
  struct got *g = ud;
  g->head_status = status;
  snprintf(g->ctype, sizeof g->ctype, "%s", ct ? ct : "");
  return 0;
}

static void on_resume(uv_timer_t *t) {
  struct got *g = t->data;
  tp_http_resume(g->x);
}

static int on_body(void *ud, const char *p, size_t len) {
  struct got *g = ud;
  if (g->pause_once) {
    g->pause_once = 0;
    uv_timer_start(&g->resume, on_resume, 50, 0);
    return SBX_EAGAIN;
  }
  if (g->cancel_in_body) {
    tp_http_cancel(g->x);
    g->done = 1;
    return 0;
  }
  ck_assert_uint_lt(g->body_len + len, sizeof g->body);
  memcpy(g->body + g->body_len, p, len);
  g->body_len += len;
  return 0;
}

static void on_done(void *ud, enum tp_http_end end, int status, const char *why) {
  struct got *g = ud;
  ck_assert_int_eq(g->done, 0);
  g->done = 1;
  g->end = end;
  g->done_status = status;
  g->done_ms = sbx_now_mono_ms();
  snprintf(g->why, sizeof g->why, "%s", why);
}

static int on_header(void *ud, const char *line, size_t len) {
  struct got *g = ud;
  g->headers_after_head |= g->head_status != 0;
  ck_assert_uint_lt(g->headers_len + len, sizeof g->headers);
  memcpy(g->headers + g->headers_len, line, len);
  g->headers_len += len;
  return 0;
}

static const struct tp_http_cbs cbs = {
    .on_head = on_head, .on_body = on_body, .on_done = on_done, .on_header = on_header};

/* Runs one request to its end on a fresh loop and client; *g holds what came back. */
static void fetch(struct tp_http_request *rq, struct got *g) {
  uv_loop_t loop;
  ck_assert_int_eq(uv_loop_init(&loop), 0);
  struct tp_http_client *hc = NULL;
  struct sbx_error err;
  ck_assert_int_eq(tp_http_client_new(&loop, &hc, &err), 0);
  uv_timer_init(&loop, &g->resume);
  g->resume.data = g;
  g->x = tp_http_start(hc, rq, &cbs, g);
  ck_assert_ptr_nonnull(g->x);
  while (!g->done)
    uv_run(&loop, UV_RUN_ONCE);
  ck_assert_uint_eq(tp_http_active(hc), 0);
  tp_http_client_free(hc);
  uv_close((uv_handle_t *)&g->resume, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  ck_assert_int_eq(uv_loop_close(&loop), 0);
}

static char url[128];
static const char *url_of(int port, const char *path) {
  snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
  return url;
}

START_TEST(post_headers_body_streamed) {
  struct srv s;
  srv_start(&s, M_PIECES);
  const char *hdr[] = {"Authorization: Bearer sekrit", "Content-Type: application/json"};
  struct tp_http_request rq = {.method = "POST",
                               .url = url_of(s.port, "/v1/chat/completions"),
                               .headers = hdr,
                               .n_headers = 2,
                               .body = "{\"a\":1}",
                               .body_len = 7,
                               .stall_ms = 2000};
  struct got g = {0};
  fetch(&rq, &g);
  srv_join(&s);
  ck_assert_int_eq(g.end, TP_HTTP_OK);
  ck_assert_int_eq(g.head_status, 200);
  ck_assert_int_eq(g.done_status, 200);
  ck_assert_str_eq(g.ctype, "text/event-stream");
  ck_assert_str_eq(g.body, "piece\npiece\npiece\n");
  ck_assert_str_eq(g.why, "");
  ck_assert_ptr_nonnull(strstr(s.req, "POST /v1/chat/completions HTTP/1.1\r\n"));
  ck_assert_ptr_nonnull(strstr(s.req, "Authorization: Bearer sekrit\r\n"));
  ck_assert_ptr_null(strcasestr(s.req, "Expect:"));
  ck_assert_ptr_nonnull(strstr(s.req, "\r\n\r\n{\"a\":1}"));
}
END_TEST

/* The final head's lines, one by one before on_head; a 1xx head's are not among them. */
START_TEST(header_lines_of_the_final_head) {
  struct srv s;
  srv_start(&s, M_CONTINUE);
  struct tp_http_request rq = {.method = "GET", .url = url_of(s.port, "/"), .stall_ms = 2000};
  struct got g = {0};
  fetch(&rq, &g);
  srv_join(&s);
  ck_assert_int_eq(g.end, TP_HTTP_OK);
  ck_assert_int_eq(g.head_status, 201);
  ck_assert_str_eq(g.headers, "X-One: 1\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n");
  ck_assert_int_eq(g.headers_after_head, 0);
  ck_assert_str_eq(g.body, "ok");
}
END_TEST

/* A body read as it goes out (read_body), at most 10 bytes a call. */
static const char streamed[] = "streamed body, three pieces";
static size_t streamed_off, streamed_calls;
static long read_piece(void *ud, char *p, size_t cap) {
  (void)ud;
  size_t n = SBX_MIN(SBX_MIN(cap, (size_t)10), sizeof streamed - 1 - streamed_off);
  memcpy(p, streamed + streamed_off, n);
  streamed_off += n;
  streamed_calls++;
  return (long)n;
}

START_TEST(body_read_as_it_goes_out) {
  struct srv s;
  srv_start(&s, M_PIECES);
  struct tp_http_request rq = {.method = "PUT",
                               .url = url_of(s.port, "/up"),
                               .read_body = read_piece,
                               .body_len = 27,
                               .stall_ms = 2000};
  struct got g = {0};
  streamed_off = streamed_calls = 0;
  fetch(&rq, &g);
  srv_join(&s);
  ck_assert_int_eq(g.end, TP_HTTP_OK);
  ck_assert_uint_ge(streamed_calls, 3);
  ck_assert_ptr_nonnull(strstr(s.req, "PUT /up HTTP/1.1\r\n"));
  ck_assert_ptr_nonnull(strcasestr(s.req, "Content-Length: 27\r\n"));
  ck_assert_ptr_nonnull(strstr(s.req, "\r\n\r\nstreamed body, three pieces"));
}
END_TEST

START_TEST(pause_and_resume_keep_every_byte) {
  struct srv s;
  srv_start(&s, M_PIECES);
  struct tp_http_request rq = {.method = "GET", .url = url_of(s.port, "/"), .stall_ms = 2000};
  struct got g = {.pause_once = 1};
  fetch(&rq, &g);
  srv_join(&s);
  ck_assert_int_eq(g.end, TP_HTTP_OK);
  ck_assert_str_eq(g.body, "piece\npiece\npiece\n");
}
END_TEST

START_TEST(refused_is_unreachable) {
  int fd = socket(AF_INET, SOCK_STREAM, 0); /* a free port, bound and closed: nothing listens */
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  socklen_t al = sizeof a;
  getsockname(fd, (struct sockaddr *)&a, &al);
  int port = ntohs(a.sin_port);
  close(fd);
  struct tp_http_request rq = {.method = "GET", .url = url_of(port, "/")};
  struct got g = {0};
  fetch(&rq, &g);
  ck_assert_int_eq(g.end, TP_HTTP_UNREACHABLE);
  ck_assert_int_eq(g.done_status, 0);
  ck_assert_str_ne(g.why, "");
}
END_TEST

START_TEST(no_byte_for_stall_ms_is_stalled) {
  struct srv s;
  srv_start(&s, M_STALL);
  struct tp_http_request rq = {.method = "GET", .url = url_of(s.port, "/"), .stall_ms = 300};
  struct got g = {0};
  uint64_t t0 = sbx_now_mono_ms();
  fetch(&rq, &g);
  uint64_t took = g.done_ms - t0;
  srv_join(&s);
  ck_assert_int_eq(g.end, TP_HTTP_STALLED);
  ck_assert_int_eq(g.head_status, 200);
  ck_assert_str_eq(g.body, "ab");
  ck_assert_uint_ge(took, 300);
  ck_assert_uint_lt(took, 1400); /* before the server's 1.5 s silence ends */
  ck_assert_ptr_nonnull(strstr(g.why, "300 ms"));
}
END_TEST

START_TEST(total_bound_is_timed_out) {
  struct srv s;
  srv_start(&s, M_STALL);
  struct tp_http_request rq = {.method = "GET", .url = url_of(s.port, "/"), .total_ms = 300};
  struct got g = {0};
  fetch(&rq, &g);
  srv_join(&s);
  ck_assert_int_eq(g.end, TP_HTTP_TIMEDOUT);
}
END_TEST

START_TEST(cut_off_mid_answer_is_broken) {
  struct srv s;
  srv_start(&s, M_BROKEN);
  struct tp_http_request rq = {.method = "GET", .url = url_of(s.port, "/")};
  struct got g = {0};
  fetch(&rq, &g);
  srv_join(&s);
  ck_assert_int_eq(g.end, TP_HTTP_BROKEN);
  ck_assert_str_eq(g.body, "0123456789");
}
END_TEST

START_TEST(cancel_in_a_callback_calls_nothing_after) {
  struct srv s;
  srv_start(&s, M_SLOW);
  struct tp_http_request rq = {.method = "GET", .url = url_of(s.port, "/"), .stall_ms = 5000};
  struct got g = {.cancel_in_body = 1};
  fetch(&rq, &g); /* on_done would assert done == 0 */
  srv_join(&s);
  ck_assert_int_eq(g.end, TP_HTTP_OK);
  ck_assert_uint_eq(g.body_len, 0);
}
END_TEST

START_TEST(cancel_outside_and_free_with_transfers) {
  struct srv s;
  srv_start(&s, M_SLOW);
  uv_loop_t loop;
  ck_assert_int_eq(uv_loop_init(&loop), 0);
  struct tp_http_client *hc = NULL;
  ck_assert_int_eq(tp_http_client_new(&loop, &hc, NULL), 0);
  struct got g = {0}, g2 = {0};
  struct tp_http_request rq = {.method = "GET", .url = url_of(s.port, "/"), .stall_ms = 5000};
  g.x = tp_http_start(hc, &rq, &cbs, &g);
  g2.x = tp_http_start(hc, &rq, &cbs, &g2); /* waits in the backlog: freed with the client */
  ck_assert_uint_eq(tp_http_active(hc), 2);
  while (g.body_len == 0)
    uv_run(&loop, UV_RUN_ONCE);
  tp_http_cancel(g.x);
  ck_assert_uint_eq(tp_http_active(hc), 1);
  tp_http_client_free(hc);
  uv_run(&loop, UV_RUN_DEFAULT);
  ck_assert_int_eq(uv_loop_close(&loop), 0);
  ck_assert_int_eq(g.done + g2.done, 0);
  srv_join(&s);
}
END_TEST

/* ---- TLS against the transport's server ------------------------------------------------------ */

static char tdir[64], cert[128], key[128];

static void make_cert(void) {
  snprintf(tdir, sizeof tdir, "/tmp/tp-hc-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(tdir));
  snprintf(cert, sizeof cert, "%s/cert.pem", tdir);
  snprintf(key, sizeof key, "%s/key.pem", tdir);
  char cmd[512];
  snprintf(cmd, sizeof cmd,
           "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 "
           "-subj /CN=localhost -addext subjectAltName=DNS:localhost -keyout %s -out %s "
           ">/dev/null 2>&1",
           key, cert);
  ck_assert_int_eq(system(cmd), 0);
}

static void tls_closed(struct tp_server *s, void *ud) {
  (void)s;
  *(int *)ud = 1;
}

/* GET /hello over TLS from the transport's server on the same loop, verified against ca (NULL:
 * the system's CA store). */
static void tls_fetch(const char *ca, struct got *g) {
  uv_loop_t loop;
  ck_assert_int_eq(uv_loop_init(&loop), 0);
  struct tp_config cfg = {0};
  tp_limits_default(&cfg.limits);
  cfg.tls_cert_file = cert;
  cfg.tls_key_file = key;
  struct tp_server *srv = NULL;
  struct sbx_error err;
  ck_assert_int_eq(tp_server_new(&loop, &cfg, &srv, &err), 0);
  th_add_routes(srv);
  ck_assert_int_eq(tp_server_listen(srv, "127.0.0.1:0", &err), 0);
  struct tp_http_client *hc = NULL;
  ck_assert_int_eq(tp_http_client_new(&loop, &hc, NULL), 0);
  char u[128];
  snprintf(u, sizeof u, "https://localhost:%d/hello", tp_server_port(srv));
  struct tp_http_request rq = {.method = "GET", .url = u, .ca_file = ca, .stall_ms = 5000};
  uv_timer_init(&loop, &g->resume);
  ck_assert_ptr_nonnull(tp_http_start(hc, &rq, &cbs, g));
  while (!g->done)
    uv_run(&loop, UV_RUN_ONCE);
  tp_http_client_free(hc);
  uv_close((uv_handle_t *)&g->resume, NULL);
  int closed = 0;
  tp_server_close(srv, 100, tls_closed, &closed);
  uv_run(&loop, UV_RUN_DEFAULT);
  ck_assert_int_eq(closed, 1);
  ck_assert_int_eq(uv_loop_close(&loop), 0);
}

START_TEST(tls_is_verified) {
  make_cert();
  struct got g = {0};
  tls_fetch(NULL, &g); /* self-signed: not in the system's store */
  ck_assert_int_eq(g.end, TP_HTTP_UNREACHABLE);
  ck_assert_int_eq(g.head_status, 0);
  struct got g2 = {0};
  tls_fetch(cert, &g2);
  ck_assert_int_eq(g2.end, TP_HTTP_OK);
  ck_assert_int_eq(g2.done_status, 200);
  char cmd[160];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tdir);
  ck_assert_int_eq(system(cmd), 0);
}
END_TEST

Suite *http_client_suite(void);
Suite *http_client_suite(void) {
  Suite *s = suite_create("http_client");
  TCase *tc = tcase_create("client");
  tcase_set_timeout(tc, 20);
  tcase_add_test(tc, post_headers_body_streamed);
  tcase_add_test(tc, header_lines_of_the_final_head);
  tcase_add_test(tc, body_read_as_it_goes_out);
  tcase_add_test(tc, pause_and_resume_keep_every_byte);
  tcase_add_test(tc, refused_is_unreachable);
  tcase_add_test(tc, no_byte_for_stall_ms_is_stalled);
  tcase_add_test(tc, total_bound_is_timed_out);
  tcase_add_test(tc, cut_off_mid_answer_is_broken);
  tcase_add_test(tc, cancel_in_a_callback_calls_nothing_after);
  tcase_add_test(tc, cancel_outside_and_free_with_transfers);
  tcase_add_test(tc, tls_is_verified);
  suite_add_tcase(s, tc);
  return s;
}
