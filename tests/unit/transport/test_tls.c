/* test_tls.c -- transport/tls.c: certificate/key loading errors (unreadable, garbage,
 * mismatched, one without the other), the handshake through memory BIOs with ALPN choosing h2
 * or http/1.1 (and no ALPN), plain HTTP/1.1 and h2c beside TLS on the same listener, a TLS client
 * on a plain listener, a stalled handshake.  The certificate is made here with the OpenSSL API. */
#include <check.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "h2client.h"
#include "handlers.h"
#include "harness.h"
#include "internal.h"

static char cert[256], key[256], key2[256], garbage[256], tdir[64];

static void write_key(EVP_PKEY *pk, const char *path) {
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  PEM_write_PrivateKey(f, pk, NULL, NULL, 0, NULL, NULL);
  fclose(f);
}

static void make_cert(void) {
  snprintf(tdir, sizeof(tdir), "/tmp/tp-tls-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(tdir));
  snprintf(cert, sizeof(cert), "%s/cert.pem", tdir);
  snprintf(key, sizeof(key), "%s/key.pem", tdir);
  snprintf(key2, sizeof(key2), "%s/other.pem", tdir);
  snprintf(garbage, sizeof(garbage), "%s/garbage.pem", tdir);
  EVP_PKEY *pk = EVP_EC_gen("P-256");
  EVP_PKEY *pk2 = EVP_EC_gen("P-256");
  ck_assert_ptr_nonnull(pk);
  X509 *x = X509_new();
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
  X509_gmtime_adj(X509_getm_notBefore(x), 0);
  X509_gmtime_adj(X509_getm_notAfter(x), 86400);
  X509_set_pubkey(x, pk);
  X509_NAME *n = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)"localhost", -1, -1, 0);
  X509_set_issuer_name(x, n);
  ck_assert_int_gt(X509_sign(x, pk, EVP_sha256()), 0);
  FILE *f = fopen(cert, "w");
  PEM_write_X509(f, x);
  fclose(f);
  write_key(pk, key);
  write_key(pk2, key2);
  f = fopen(garbage, "w");
  fputs("-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n", f);
  fclose(f);
  X509_free(x);
  EVP_PKEY_free(pk);
  EVP_PKEY_free(pk2);
}

static void rm_cert(void) {
  char cmd[300];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tdir);
  ck_assert_int_eq(system(cmd), 0);
}

static int new_err(const char *c, const char *k, struct sbx_error *err) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  struct tp_config cfg = {0};
  tp_limits_default(&cfg.limits);
  cfg.tls_cert_file = c;
  cfg.tls_key_file = k;
  struct tp_server *s = NULL;
  int rc = tp_server_new(&loop, &cfg, &s, err);
  if (rc == 0)
    tp_server_close(s, 0, NULL, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  ck_assert_int_eq(uv_loop_close(&loop), 0);
  return rc;
}

START_TEST(test_tls_config_errors) {
  make_cert();
  struct sbx_error err;
  ck_assert_int_eq(new_err(cert, key, &err), 0);
  ck_assert_int_eq(new_err("/nonexistent/cert.pem", key, &err), SBX_ETLS);
  ck_assert_ptr_nonnull(strstr(err.msg, "cannot read TLS certificate /nonexistent/cert.pem"));
  ck_assert_int_eq(new_err(cert, "/nonexistent/key.pem", &err), SBX_ETLS);
  ck_assert_ptr_nonnull(strstr(err.msg, "cannot read TLS key"));
  ck_assert_int_eq(new_err(garbage, key, &err), SBX_ETLS);
  ck_assert_ptr_nonnull(strstr(err.msg, "bad TLS certificate"));
  ck_assert_int_eq(new_err(cert, garbage, &err), SBX_ETLS);
  ck_assert_ptr_nonnull(strstr(err.msg, "bad TLS key"));
  ck_assert_int_eq(new_err(cert, key2, &err), SBX_ETLS);
  ck_assert_ptr_nonnull(strstr(err.msg, "does not match"));
  ck_assert_int_eq(new_err(cert, NULL, &err), SBX_ETLS);
  ck_assert_ptr_nonnull(strstr(err.msg, "both"));
  rm_cert();
}
END_TEST

static char stats_line[256];
static void h_stats(struct tp_req *r, void *ud) {
  struct tp_stats st = ((struct tp_server *)ud)->stats;
  int n = snprintf(stats_line, sizeof(stats_line), "h1=%llu h2c=%llu h2=%llu proto=%d",
                   (unsigned long long)st.connections_total[TP_PROTO_HTTP1],
                   (unsigned long long)st.connections_total[TP_PROTO_H2C],
                   (unsigned long long)st.connections_total[TP_PROTO_H2], (int)r->proto);
  tp_respond(r, 200, NULL, stats_line, (size_t)n);
}

static char *tls_h1(int port, const unsigned char *alpn, size_t alen, char *proto, size_t plen) {
  struct h2c c; /* only its TLS connection is used */
  memset(&c, 0, sizeof(c));
  c.fd = th_connect(port);
  c.ctx = SSL_CTX_new(TLS_client_method());
  c.ssl = SSL_new(c.ctx);
  if (alpn)
    SSL_set_alpn_protos(c.ssl, alpn, (unsigned)alen);
  SSL_set_fd(c.ssl, c.fd);
  ck_assert_int_eq(SSL_connect(c.ssl), 1);
  const unsigned char *sel;
  unsigned sl;
  SSL_get0_alpn_selected(c.ssl, &sel, &sl);
  snprintf(proto, plen, "%.*s", (int)sl, sel ? (const char *)sel : "");
  const char req[] = "GET /stats HTTP/1.1\r\nConnection: close\r\n\r\n";
  ck_assert_int_eq(SSL_write(c.ssl, req, sizeof(req) - 1), (int)sizeof(req) - 1);
  static char out[4096];
  size_t n = 0;
  int r;
  while ((r = SSL_read(c.ssl, out + n, (int)(sizeof(out) - 1 - n))) > 0)
    n += (size_t)r;
  out[n] = '\0';
  SSL_free(c.ssl);
  SSL_CTX_free(c.ctx);
  close(c.fd);
  return out;
}

static void client_tls(struct th *t) {
  /* ALPN h2 (offered second: the server prefers it). */
  struct h2c c;
  h2c_open(&c, t->port, 1, (const unsigned char *)"\x08http/1.1\x02h2", 12);
  const unsigned char *sel;
  unsigned sl;
  SSL_get0_alpn_selected(c.ssl, &sel, &sl);
  ck_assert_uint_eq(sl, 2);
  ck_assert(memcmp(sel, "h2", 2) == 0);
  struct h2resp *a = h2c_request(&c, "GET", "/hello", NULL, NULL, 0);
  struct h2resp *s = h2c_request(&c, "GET", "/sse", NULL, NULL, 0);
  struct h2resp *lg = h2c_request(&c, "GET", "/large", NULL, NULL, 0);
  ck_assert(h2c_wait(&c, a, 3000));
  ck_assert(h2c_wait(&c, s, 3000));
  ck_assert(h2c_wait(&c, lg, 5000));
  /* A large body (frames sent without a copy, then a short copied one): every byte in place. */
  ck_assert_int_eq(lg->status, 200);
  TH_CHECK_LARGE(lg->body, lg->len);
  ck_assert_int_eq(a->status, 200);
  ck_assert_str_eq(a->body, "hello");
  ck_assert_ptr_nonnull(strstr(s->body, "event: run"));
  h2c_close(&c);
  /* ALPN http/1.1 only, and no ALPN at all: HTTP/1.1 over TLS. */
  char proto[32];
  char *r = tls_h1(t->port, (const unsigned char *)"\x08http/1.1", 9, proto, sizeof(proto));
  ck_assert_str_eq(proto, "http/1.1");
  ck_assert_ptr_nonnull(strstr(r, "HTTP/1.1 200"));
  ck_assert_ptr_nonnull(strstr(r, "proto=0"));
  r = tls_h1(t->port, NULL, 0, proto, sizeof(proto));
  ck_assert_str_eq(proto, "");
  ck_assert_ptr_nonnull(strstr(r, "HTTP/1.1 200"));
  /* Plain HTTP/1.1 and h2c on the same listener. */
  int st;
  char *p = th_request(t->port, "GET /hello HTTP/1.1\r\n\r\n", &st);
  ck_assert_int_eq(st, 200);
  free(p);
  h2c_open(&c, t->port, 0, NULL, 0);
  a = h2c_request(&c, "GET", "/stats", NULL, NULL, 0);
  ck_assert(h2c_wait(&c, a, 3000));
  ck_assert_str_eq(a->body, "h1=3 h2c=1 h2=1 proto=1");
  h2c_close(&c);
  /* Garbage after the TLS record byte: that connection closes, the server goes on. */
  int fd = th_connect(t->port);
  th_send(fd, "\x16\x03\x01\x00\x05hello-not-tls", 18);
  ck_assert(th_wait_closed(fd, 2000));
  close(fd);
  /* A handshake that stalls: closed after handshake_timeout. */
  fd = th_connect(t->port);
  th_send(fd, "\x16\x03\x01", 3);
  ck_assert(th_wait_closed(fd, 3000));
  close(fd);
  p = th_request(t->port, "GET /hello HTTP/1.1\r\n\r\n", &st);
  ck_assert_int_eq(st, 200);
  free(p);
}

START_TEST(test_tls_alpn) {
  make_cert();
  struct tp_limits l;
  tp_limits_default(&l);
  l.handshake_timeout_ms = 300;
  struct th t;
  th_init_tls(&t, &l, cert, key);
  th_add_routes(t.srv);
  tp_route(t.srv, "GET", "/stats", 0, h_stats, t.srv);
  th_run(&t, client_tls);
  rm_cert();
}
END_TEST

/* A TLS client on a listener without a certificate is closed, not answered. */
static void client_tls_on_plain(struct th *t) {
  int fd = th_connect(t->port);
  SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
  SSL *ssl = SSL_new(ctx);
  SSL_set_fd(ssl, fd);
  ck_assert_int_ne(SSL_connect(ssl), 1);
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  close(fd);
}

START_TEST(test_tls_on_plain_listener) { th_run_routes(NULL, client_tls_on_plain); }
END_TEST

Suite *tls_suite(void);
Suite *tls_suite(void) {
  Suite *s = suite_create("tls");
  TCase *tc = tcase_create("tls");
  tcase_set_timeout(tc, 20);
  tcase_add_test(tc, test_tls_config_errors);
  tcase_add_test(tc, test_tls_alpn);
  tcase_add_test(tc, test_tls_on_plain_listener);
  suite_add_tcase(s, tc);
  return s;
}
