/* test_server.c -- transport/server.c and conn.c: a unix:PATH listener beside TCP (HTTP/1.1
 * and h2c on it, peer "unix", the socket file removed on close), graceful close that lets an
 * answer in flight finish, the connection limit, closing twice, and the sniffing of the first
 * bytes (a preface that arrives a byte at a time, a near-preface that is HTTP/1.1). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "h2client.h"
#include "handlers.h"
#include "harness.h"

static char sock_path[108];

static void h_peer(struct tp_req *r, void *ud) {
  const char *p = tp_req_peer(r);
  tp_respond(r, 200, NULL, p, strlen(p));
}

static int unix_connect(void) {
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un sa = {0};
  sa.sun_family = AF_UNIX;
  snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
  ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  struct timeval tv = {5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

static void client_unix(struct th *t) {
  int fd = unix_connect();
  th_sends(fd, "GET /peer HTTP/1.1\r\n\r\n");
  int st;
  char *r = th_read_response(fd, &st);
  ck_assert_int_eq(st, 200);
  ck_assert_ptr_nonnull(strstr(r, "\r\n\r\nunix"));
  free(r);
  close(fd);
  /* h2c over the unix socket: the preface, then one request by raw frames is enough to see a
   * SETTINGS frame come back. */
  fd = unix_connect();
  th_send(fd, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0", 33);
  unsigned char hdr[9];
  ck_assert_int_eq(recv(fd, hdr, 9, MSG_WAITALL), 9);
  ck_assert_int_eq(hdr[3], NGHTTP2_SETTINGS);
  close(fd);
  /* TCP still answers, and tells its peer as ip:port. */
  r = th_request(t->port, "GET /peer HTTP/1.1\r\n\r\n", &st);
  ck_assert_ptr_nonnull(strstr(r, "\r\n\r\n127.0.0.1:"));
  free(r);
}

START_TEST(test_server_unix) {
  snprintf(sock_path, sizeof(sock_path), "/tmp/tp-unix-%d.sock", (int)getpid());
  struct th t;
  th_init(&t, NULL);
  tp_route(t.srv, "GET", "/peer", 0, h_peer, NULL);
  char addr[128];
  snprintf(addr, sizeof(addr), "unix:%s", sock_path);
  struct sbx_error err;
  ck_assert_int_eq(tp_server_listen(t.srv, addr, &err), 0);
  ck_assert_int_eq(tp_server_listen(t.srv, "unix:", &err), SBX_EINVAL);
  th_run(&t, client_unix);
  struct stat st;
  ck_assert_int_ne(stat(sock_path, &st), 0); /* removed on close */
}
END_TEST

/* Graceful close: the server is closed while an answer is in flight (held, answered 50 ms
 * later); the answer is delivered (with Connection: close) within the drain time. */
static struct tp_server *drain_srv;
static int drain_done;
static char drain_reply[4096];

static void on_drain_closed(struct tp_server *s, void *ud) { drain_done = 1; }

static void *drain_client(void *arg) {
  int port = *(int *)arg;
  int fd = th_connect(port);
  th_sends(fd, "GET /slow HTTP/1.1\r\n\r\n");
  size_t n;
  char *all = th_read_all(fd, &n);
  snprintf(drain_reply, sizeof(drain_reply), "%s", all);
  free(all);
  close(fd);
  return NULL;
}

static void on_slow_timer(uv_timer_t *t) {
  struct tp_req *r = t->data;
  tp_respond(r, 200, NULL, "late", 4);
  tp_req_release(r);
  uv_close((uv_handle_t *)t, NULL);
}

static uv_timer_t slow_timer;
static void h_slow(struct tp_req *r, void *ud) {
  tp_req_hold(r);
  uv_timer_init(ud, &slow_timer);
  slow_timer.data = r;
  uv_timer_start(&slow_timer, on_slow_timer, 50, 0);
  tp_server_close(drain_srv, 5000, on_drain_closed, NULL); /* while this answer is in flight */
  tp_server_close(drain_srv, 5000, on_drain_closed, NULL); /* twice: ignored */
}

START_TEST(test_server_graceful_close) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  struct sbx_error err;
  ck_assert_int_eq(tp_server_new(&loop, NULL, &drain_srv, &err), 0);
  tp_route(drain_srv, "GET", "/slow", 0, h_slow, &loop);
  ck_assert_int_eq(tp_server_listen(drain_srv, "127.0.0.1:0", &err), 0);
  int port = tp_server_port(drain_srv);
  pthread_t th;
  pthread_create(&th, NULL, drain_client, &port);
  uv_run(&loop, UV_RUN_DEFAULT);
  pthread_join(th, NULL);
  ck_assert_int_eq(drain_done, 1);
  ck_assert_ptr_nonnull(strstr(drain_reply, "HTTP/1.1 200"));
  ck_assert_ptr_nonnull(strstr(drain_reply, "Connection: close"));
  ck_assert_ptr_nonnull(strstr(drain_reply, "\r\n\r\nlate"));
  ck_assert_int_eq(uv_loop_close(&loop), 0);
}
END_TEST

/* The connection limit: past it, new connections are closed at once. */
static void client_limit(struct th *t) {
  int a = th_connect(t->port), b = th_connect(t->port);
  th_sends(a, "GET /hello HTTP/1.1\r\n\r\n");
  int st;
  char *r = th_read_response(a, &st);
  ck_assert_int_eq(st, 200);
  free(r);
  int c = th_connect(t->port);
  ck_assert(th_wait_closed(c, 2000));
  close(c);
  close(a);
  close(b);
}

START_TEST(test_server_conn_limit) {
  struct tp_limits l;
  tp_limits_default(&l);
  l.max_connections = 2;
  th_run_routes(&l, client_limit);
}
END_TEST

/* Sniffing: the preface a byte at a time is still HTTP/2; "PRI" then something else is HTTP/1.1
 * (and a malformed one: 400). */
static void client_sniff(struct th *t) {
  int fd = th_connect(t->port);
  const char *pre = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  for (int i = 0; i < 24; i++) {
    th_send(fd, pre + i, 1);
    usleep(2000);
  }
  th_send(fd, "\0\0\0\x04\0\0\0\0\0", 9);
  unsigned char hdr[9];
  ck_assert_int_eq(recv(fd, hdr, 9, MSG_WAITALL), 9);
  ck_assert_int_eq(hdr[3], NGHTTP2_SETTINGS);
  close(fd);
  int st;
  char *r = th_request(t->port, "PRI * HTTP/1.1\r\n\r\n", &st);
  ck_assert_int_eq(st, 400);
  free(r);
  r = th_request(t->port, "PRX /hello HTTP/1.1\r\n\r\n", &st);
  ck_assert_int_eq(st, 400);
  free(r);
}

START_TEST(test_server_sniff) { th_run_routes(NULL, client_sniff); }
END_TEST

Suite *server_suite(void);
Suite *server_suite(void) {
  Suite *s = suite_create("server");
  TCase *tc = tcase_create("server");
  tcase_set_timeout(tc, 20);
  tcase_add_test(tc, test_server_unix);
  tcase_add_test(tc, test_server_graceful_close);
  tcase_add_test(tc, test_server_conn_limit);
  tcase_add_test(tc, test_server_sniff);
  suite_add_tcase(s, tc);
  return s;
}
