/* test_faults.c -- allocation failure injection across the transport (sbx_alloc_fail_at): the
 * N-th allocation after a request starts fails, for every N over the allocations that request
 * makes, over HTTP/1.1 (route with parameters and query, static file, SSE) and h2c.  Each time
 * the request is answered (any status) or its connection closed, nothing crashes, ASan sees no
 * leak, and the next request on a fresh connection gets its 200. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "h2client.h"
#include "handlers.h"
#include "harness.h"

static char dir[64];

static const char *where = "";
static uint64_t where_n;

static void healthy(struct th *t) {
  int st = 0;
  char *r = th_request(t->port, "GET /hello HTTP/1.1\r\n\r\n", &st);
  ck_assert_msg(r != NULL && st == 200, "server unhealthy after a failure at %llu in %s (%d)",
                (unsigned long long)where_n, where, st);
  free(r);
}

static void client_faults(struct th *t) {
  static const char *reqs[] = {
      "GET /items/5?q=a%20b HTTP/1.1\r\nX-A: 1\r\n\r\n",
      "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
      "GET /static/a.txt HTTP/1.1\r\nAccept-Encoding: gzip\r\n\r\n",
      "GET /sse HTTP/1.1\r\n\r\n",
      "GET /files/x/y HTTP/1.1\r\n\r\n",
  };
  for (size_t k = 0; k < sizeof(reqs) / sizeof(reqs[0]); k++) {
    for (uint64_t n = 1; n <= 25; n++) {
      int fd = th_connect(t->port);
      where = reqs[k];
      where_n = n;
      sbx_alloc_fail_at(n, 0);
      th_sends(fd, reqs[k]);
      int st = 0;
      char *r = th_read_response(fd, &st); /* an answer, or NULL when the connection closed */
      sbx_alloc_fail_at(0, 0);
      free(r);
      close(fd);
      healthy(t);
    }
  }
  /* h2c: failures while the session and the stream are made. */
  for (uint64_t n = 1; n <= 25; n++) {
    struct h2c c;
    where = "h2c";
    where_n = n;
    sbx_alloc_fail_at(n, 0);
    h2c_open(&c, t->port, 0, NULL, 0);
    struct h2resp *a = h2c_request(&c, "GET", "/items/7?q=z", NULL, NULL, 0);
    h2c_wait(&c, a, 1000);
    sbx_alloc_fail_at(0, 0);
    h2c_close(&c);
    healthy(t);
  }
  /* Sticky failure (no memory at all for a while), then recovery. */
  int fd = th_connect(t->port);
  sbx_alloc_fail_at(1, 1);
  th_sends(fd, "GET /hello HTTP/1.1\r\n\r\n");
  int st;
  free(th_read_response(fd, &st));
  sbx_alloc_fail_at(0, 0);
  close(fd);
  healthy(t);
}

START_TEST(test_faults_alloc) {
  snprintf(dir, sizeof(dir), "/tmp/tp-faults-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(dir));
  char p[128];
  snprintf(p, sizeof(p), "%s/a.txt", dir);
  FILE *f = fopen(p, "w");
  fputs("content", f);
  fclose(f);
  struct th t;
  th_init(&t, NULL);
  th_add_routes(t.srv);
  ck_assert_int_eq(tp_static_mount(t.srv, "/static/", dir, NULL), 0);
  th_run(&t, client_faults);
  unlink(p);
  rmdir(dir);
}
END_TEST

Suite *faults_suite(void);
Suite *faults_suite(void) {
  Suite *s = suite_create("faults");
  TCase *tc = tcase_create("faults");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_faults_alloc);
  suite_add_tcase(s, tc);
  return s;
}
