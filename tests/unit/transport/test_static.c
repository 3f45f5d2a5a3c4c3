/* test_static.c -- transport/static.c: MIME types (application/wasm), ETag and If-None-Match
 * (304), Range (206, suffix, open-ended, 416, If-Range), precompressed .br/.gz chosen by
 * Accept-Encoding, index.html for a directory without a redirect, per-path headers, refusals of
 * `..` and encoded traversal, 405 for other methods; and the shared descriptors of the file cache
 * under a thousand HTTP/2 streams that never open their window, with RLIMIT_NOFILE lowered. */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "h2client.h"
#include "handlers.h"
#include "harness.h"

static char dir[256];

static void put(const char *name, const char *content) {
  char p[512];
  snprintf(p, sizeof(p), "%s/%s", dir, name);
  FILE *f = fopen(p, "w");
  ck_assert_ptr_nonnull(f);
  fputs(content, f);
  fclose(f);
}

static void make_tree(void) {
  snprintf(dir, sizeof(dir), "/tmp/tp-static-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(dir));
  put("a.txt", "0123456789");
  put("m.wasm", "\0asm");
  put("app.js", "console.log(1)");
  put("app.js.gz", "GZ");
  put("app.js.br", "BR");
  put("only.css", "body{}");
  put("only.css.gz", "GZCSS");
  char p[512];
  snprintf(p, sizeof(p), "%s/sub", dir);
  mkdir(p, 0755);
  put("sub/index.html", "<p>index</p>");
  put("../tp-secret.txt", "secret");
  /* a file past the in-memory size: served from its descriptor */
  static char big[100001];
  for (size_t i = 0; i < sizeof(big) - 1; i++)
    big[i] = (char)('a' + i % 26);
  put("big.txt", big);
}

static char etag[128];

static char *get(struct th *t, const char *req, int *st) { return th_request(t->port, req, st); }

static void client_static(struct th *t) {
  int st;
  char *r = get(t, "GET /static/a.txt HTTP/1.1\r\n\r\n", &st);
  ck_assert_int_eq(st, 200);
  ck_assert_ptr_nonnull(strstr(r, "Content-Type: text/plain"));
  ck_assert_ptr_nonnull(strstr(r, "Cache-Control: public, max-age=31536000, immutable"));
  ck_assert_ptr_nonnull(strstr(r, "Accept-Ranges: bytes"));
  ck_assert_ptr_nonnull(strstr(r, "Cross-Origin-Embedder-Policy: require-corp"));
  ck_assert_ptr_nonnull(strstr(r, "\r\n\r\n0123456789"));
  char *e = strstr(r, "ETag: ");
  ck_assert_ptr_nonnull(e);
  sscanf(e + 6, "%127[^\r]", etag);
  free(r);

  char req[512];
  snprintf(req, sizeof(req), "GET /static/a.txt HTTP/1.1\r\nIf-None-Match: \"x\", %s\r\n\r\n",
           etag);
  r = get(t, req, &st);
  ck_assert_int_eq(st, 304);
  ck_assert_ptr_nonnull(strstr(r, etag));
  free(r);
  r = get(t, "GET /static/a.txt HTTP/1.1\r\nIf-None-Match: \"other\"\r\n\r\n", &st);
  ck_assert_int_eq(st, 200);
  free(r);

  struct {
    const char *range;
    int status;
    const char *body, *cr;
  } ranges[] = {
      {"bytes=2-4", 206, "\r\n\r\n234", "Content-Range: bytes 2-4/10"},
      {"bytes=7-", 206, "\r\n\r\n789", "Content-Range: bytes 7-9/10"},
      {"bytes=-2", 206, "\r\n\r\n89", "Content-Range: bytes 8-9/10"},
      {"bytes=5-100", 206, "\r\n\r\n56789", "Content-Range: bytes 5-9/10"},
      {"bytes=10-", 416, "", "Content-Range: bytes */10"},
      {"bytes=4-2", 200, "\r\n\r\n0123456789", "Content-Length: 10"},
      {"bytes=0-1,3-4", 200, "\r\n\r\n0123456789", "Content-Length: 10"},
      {"items=0-1", 200, "\r\n\r\n0123456789", "Content-Length: 10"},
  };
  for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++) {
    snprintf(req, sizeof(req), "GET /static/a.txt HTTP/1.1\r\nRange: %s\r\n\r\n", ranges[i].range);
    r = get(t, req, &st);
    ck_assert_msg(st == ranges[i].status, "%s: %d", ranges[i].range, st);
    ck_assert_msg(strstr(r, ranges[i].body) && strstr(r, ranges[i].cr), "%s: %s", ranges[i].range,
                  r);
    free(r);
  }
  /* If-Range with a stale validator: the whole file. */
  r = get(t, "GET /static/a.txt HTTP/1.1\r\nRange: bytes=0-1\r\nIf-Range: \"old\"\r\n\r\n", &st);
  ck_assert_int_eq(st, 200);
  free(r);

  r = get(t, "GET /static/m.wasm HTTP/1.1\r\n\r\n", &st);
  ck_assert_ptr_nonnull(strstr(r, "Content-Type: application/wasm"));
  free(r);

  /* Precompressed variants. */
  r = get(t, "GET /static/app.js HTTP/1.1\r\nAccept-Encoding: gzip, deflate, br\r\n\r\n", &st);
  ck_assert_ptr_nonnull(strstr(r, "Content-Encoding: br"));
  ck_assert_ptr_nonnull(strstr(r, "Vary: Accept-Encoding"));
  ck_assert_ptr_nonnull(strstr(r, "\r\n\r\nBR"));
  free(r);
  r = get(t, "GET /static/app.js HTTP/1.1\r\nAccept-Encoding: gzip\r\n\r\n", &st);
  ck_assert_ptr_nonnull(strstr(r, "Content-Encoding: gzip"));
  ck_assert_ptr_nonnull(strstr(r, "\r\n\r\nGZ"));
  free(r);
  r = get(t, "GET /static/app.js HTTP/1.1\r\nAccept-Encoding: br;q=0, gzip\r\n\r\n", &st);
  ck_assert_ptr_nonnull(strstr(r, "\r\n\r\nGZ"));
  free(r);
  r = get(t, "GET /static/app.js HTTP/1.1\r\n\r\n", &st);
  ck_assert_ptr_null(strstr(r, "Content-Encoding"));
  ck_assert_ptr_nonnull(strstr(r, "Vary: Accept-Encoding"));
  ck_assert_ptr_nonnull(strstr(r, "\r\n\r\nconsole.log(1)"));
  free(r);
  r = get(t, "GET /static/only.css HTTP/1.1\r\nAccept-Encoding: br\r\n\r\n", &st);
  ck_assert_ptr_null(strstr(r, "Content-Encoding"));
  free(r);

  /* Directory: index.html, never a redirect. */
  r = get(t, "GET /static/sub HTTP/1.1\r\n\r\n", &st);
  ck_assert_int_eq(st, 200);
  ck_assert_ptr_nonnull(strstr(r, "<p>index</p>"));
  free(r);
  r = get(t, "GET /static/sub/ HTTP/1.1\r\n\r\n", &st);
  ck_assert_int_eq(st, 200);
  free(r);

  /* Refusals. */
  const char *bad[] = {"GET /static/../tp-secret.txt HTTP/1.1\r\n\r\n",
                       "GET /static/%2e%2e/tp-secret.txt HTTP/1.1\r\n\r\n",
                       "GET /static/sub/..%2f..%2ftp-secret.txt HTTP/1.1\r\n\r\n",
                       "GET /static/a.txt%5c HTTP/1.1\r\n\r\n",
                       "GET /static/missing.txt HTTP/1.1\r\n\r\n"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    r = get(t, bad[i], &st);
    ck_assert_msg(st == 404, "%s: %d", bad[i], st);
    ck_assert_ptr_null(strstr(r, "secret"));
    free(r);
  }
  r = get(t, "GET /static/a%00.txt HTTP/1.1\r\n\r\n", &st);
  ck_assert_int_eq(st, 400);
  free(r);
  r = get(t, "POST /static/a.txt HTTP/1.1\r\nContent-Length: 0\r\n\r\n", &st);
  ck_assert_int_eq(st, 405);
  ck_assert_ptr_nonnull(strstr(r, "Allow: GET, HEAD"));
  free(r);
  /* Large file, whole and a range near its end. */
  r = get(t, "GET /static/big.txt HTTP/1.1\r\n\r\n", &st);
  ck_assert_int_eq(st, 200);
  ck_assert_ptr_nonnull(strstr(r, "Content-Length: 100000"));
  ck_assert_uint_eq(strlen(strstr(r, "\r\n\r\n") + 4), 100000);
  free(r);
  r = get(t, "GET /static/big.txt HTTP/1.1\r\nRange: bytes=99990-\r\n\r\n", &st);
  ck_assert_int_eq(st, 206);
  ck_assert_ptr_nonnull(strstr(r, "\r\n\r\nuvwxyzabcd")); /* 99990 % 26 = 20: u */
  free(r);
  /* A file replaced on disk is served new within a second (the open-file cache revalidates). */
  r = get(t, "GET /static/a.txt HTTP/1.1\r\n\r\n", &st);
  free(r);
  char p1[512], p2[512];
  snprintf(p1, sizeof(p1), "%s/a.txt.new", dir);
  snprintf(p2, sizeof(p2), "%s/a.txt", dir);
  put("a.txt.new", "NEWCONTENT");
  ck_assert_int_eq(rename(p1, p2), 0);
  usleep(1100 * 1000);
  r = get(t, "GET /static/a.txt HTTP/1.1\r\n\r\n", &st);
  ck_assert_ptr_nonnull(strstr(r, "\r\n\r\nNEWCONTENT"));
  free(r);
  /* and a file removed is gone */
  unlink(p2);
  usleep(1100 * 1000);
  r = get(t, "GET /static/a.txt HTTP/1.1\r\n\r\n", &st);
  ck_assert_int_eq(st, 404);
  free(r);
  th_head_response = 1;
  r = get(t, "HEAD /static/app.js HTTP/1.1\r\n\r\n", &st);
  th_head_response = 0;
  ck_assert_ptr_null(strstr(r, "console"));
  ck_assert_int_eq(st, 200);
  ck_assert_ptr_nonnull(strstr(r, "Content-Length: 14"));
  free(r);
}

START_TEST(test_static_files) {
  make_tree();
  struct th t;
  th_init(&t, NULL);
  ck_assert_int_eq(tp_static_mount(t.srv, "/static/", dir, "public, max-age=31536000, immutable"),
                   0);
  ck_assert_int_eq(
      tp_path_headers(t.srv, "/static/", "Cross-Origin-Embedder-Policy: require-corp\r\n"), 0);
  ck_assert_int_eq(tp_path_headers(t.srv, "/static/", "no-crlf"), SBX_EINVAL);
  th_run(&t, client_static);
  char cmd[600];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s' /tmp/tp-secret.txt", dir);
  ck_assert_int_eq(system(cmd), 0);
}
END_TEST

static int fds_open(void) {
  DIR *d = opendir("/proc/self/fd");
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d)) != NULL;)
    n += e->d_name[0] != '.';
  if (d)
    closedir(d);
  return n - 1;
}

/* Issue 21, item 2: ten h2c connections set their window to 0 and ask for a file past the
 * in-memory size on 100 streams each.  Every answer shares the cache's one descriptor and reads
 * nothing ahead of the window: the process's descriptors stay few (RLIMIT_NOFILE is 160 here),
 * another client is served, and the same file comes whole to a client that reads. */
static void client_zero_window(struct th *t) {
  int before = fds_open();
  struct h2c bad[10];
  static unsigned char buf[100 * 64];
  static const unsigned char zero_window[] = {0x00, 0x04, 0, 0, 0, 0};
  static const unsigned char get[] = {0x82, 0x86, 0x04, 15,  '/', 's', 't', 'a', 't',  'i',  'c',
                                      '/',  'b',  'i',  'g', '.', 't', 'x', 't', 0x01, 0x01, 'x'};
  for (int k = 0; k < 10; k++) {
    h2c_open(&bad[k], t->port, 0, NULL, 0);
    size_t n = h2_frame(buf, NGHTTP2_SETTINGS, 0, 0, zero_window, sizeof(zero_window));
    for (uint32_t i = 0; i < 100; i++)
      n += h2_frame(buf + n, NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS | NGHTTP2_FLAG_END_STREAM,
                    2 * i + 1, get, sizeof(get));
    h2c_raw(&bad[k], buf, n);
  }
  usleep(300 * 1000);
  int during = fds_open();
  int st;
  char *r = th_request(t->port, "GET /hello HTTP/1.1\r\n\r\n", &st);
  ck_assert_msg(r != NULL && st == 200, "another client during the attack: %d", st);
  free(r);
  ck_assert_msg(during - before < 40, "descriptors %d -> %d for 1,000 streams", before, during);
  struct h2c good;
  h2c_open(&good, t->port, 0, NULL, 0);
  struct h2resp *a = h2c_request(&good, "GET", "/static/big.txt", NULL, NULL, 0);
  ck_assert(h2c_wait(&good, a, 3000));
  ck_assert_int_eq(a->status, 200);
  ck_assert_uint_eq(a->len, 100000);
  h2c_close(&good);
  for (int k = 0; k < 10; k++)
    h2c_close(&bad[k]);
}

START_TEST(test_static_zero_window) {
  struct rlimit rl = {160, 160};
  ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0); /* this test's own process (fork mode) */
  make_tree();
  struct th t;
  th_init(&t, NULL);
  ck_assert_int_eq(tp_static_mount(t.srv, "/static/", dir, NULL), 0);
  th_add_routes(t.srv);
  th_run(&t, client_zero_window);
  char cmd[600];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s' /tmp/tp-secret.txt", dir);
  ck_assert_int_eq(system(cmd), 0);
}
END_TEST

Suite *static_suite(void);
Suite *static_suite(void) {
  Suite *s = suite_create("static");
  TCase *tc = tcase_create("static");
  tcase_set_timeout(tc, 20);
  tcase_add_test(tc, test_static_files);
  tcase_add_test(tc, test_static_zero_window);
  suite_add_tcase(s, tc);
  return s;
}
