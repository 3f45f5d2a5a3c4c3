/* tls.c -- TLS with OpenSSL through memory BIOs: the socket layer (conn.c) feeds ciphertext in
 * and takes ciphertext out; this file never touches a socket.  ALPN chooses "h2" when the client
 * offers it, else "http/1.1".  The server context is made once from PEM files, with clear errors
 * for an unreadable certificate or key and for a key that does not match the certificate.
 *
 * What it does not do: client certificates, session tickets tuning, SNI-based certificate choice,
 * OCSP.  TLS 1.2 is the minimum.
 */
#include "internal.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <string.h>

struct tp_tls {
  SSL *ssl;
  BIO *rbio, *wbio; /* owned by ssl */
  int done;
  int h2;
};

static void ossl_detail(char *buf, size_t n) {
  unsigned long e = ERR_get_error();
  if (e == 0)
    snprintf(buf, n, "unknown OpenSSL error");
  else
    ERR_error_string_n(e, buf, n);
  ERR_clear_error();
}

static int on_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                   const unsigned char *in, unsigned int inlen, void *arg) {
  struct tp_tls *t = SSL_get_app_data(ssl);
  /* Prefer h2, then http/1.1, whatever the client's order. */
  static const char *want[] = {"h2", "http/1.1"};
  for (size_t w = 0; w < 2; w++) {
    size_t wl = strlen(want[w]);
    for (unsigned i = 0; i < inlen;) {
      unsigned l = in[i];
      if (i + 1 + l > inlen)
        break;
      if (l == wl && memcmp(in + i + 1, want[w], wl) == 0) {
        *out = in + i + 1;
        *outlen = (unsigned char)l;
        if (t)
          t->h2 = w == 0;
        return SSL_TLSEXT_ERR_OK;
      }
      i += 1 + l;
    }
  }
  return SSL_TLSEXT_ERR_NOACK; /* no ALPN agreement: HTTP/1.1 */
}

int tp__tls_ctx_new(const char *cert, const char *key, SSL_CTX **out, struct sbx_error *err) {
  char detail[256];
  FILE *f = fopen(cert, "r");
  if (f == NULL)
    return sbx_error_set(err, SBX_ETLS, "cannot read TLS certificate %s: %s", cert,
                         strerror(errno));
  fclose(f);
  f = fopen(key, "r");
  if (f == NULL)
    return sbx_error_set(err, SBX_ETLS, "cannot read TLS key %s: %s", key, strerror(errno));
  fclose(f);
  SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == NULL)
    return sbx_error_set(err, SBX_ENOMEM, "SSL_CTX_new failed");
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
                               SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS); /* idle connections keep no TLS buffers */
  if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
    ossl_detail(detail, sizeof(detail));
    SSL_CTX_free(ctx);
    return sbx_error_set(err, SBX_ETLS, "bad TLS certificate %s: %s", cert, detail);
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
    int reason = ERR_GET_REASON(ERR_peek_last_error());
    if (reason == X509_R_KEY_VALUES_MISMATCH || reason == X509_R_KEY_TYPE_MISMATCH) {
      ERR_clear_error();
      SSL_CTX_free(ctx);
      return sbx_error_set(err, SBX_ETLS, "TLS key %s does not match certificate %s", key, cert);
    }
    ossl_detail(detail, sizeof(detail));
    SSL_CTX_free(ctx);
    return sbx_error_set(err, SBX_ETLS, "bad TLS key %s: %s", key, detail);
  }
  if (SSL_CTX_check_private_key(ctx) != 1) {
    ossl_detail(detail, sizeof(detail));
    SSL_CTX_free(ctx);
    return sbx_error_set(err, SBX_ETLS, "TLS key %s does not match certificate %s", key, cert);
  }
  SSL_CTX_set_alpn_select_cb(ctx, on_alpn, NULL);
  *out = ctx;
  return 0;
}

struct tp_tls *tp__tls_new(SSL_CTX *ctx) {
  struct tp_tls *t = sbx_calloc(1, sizeof(*t));
  if (t == NULL)
    return NULL;
  t->ssl = SSL_new(ctx);
  t->rbio = BIO_new(BIO_s_mem());
  t->wbio = BIO_new(BIO_s_mem());
  if (!t->ssl || !t->rbio || !t->wbio) {
    if (t->ssl)
      SSL_free(t->ssl);
    if (t->rbio)
      BIO_free(t->rbio);
    if (t->wbio)
      BIO_free(t->wbio);
    sbx_free(t);
    return NULL;
  }
  BIO_set_mem_eof_return(t->rbio, -1);
  SSL_set_bio(t->ssl, t->rbio, t->wbio);
  SSL_set_app_data(t->ssl, t);
  SSL_set_accept_state(t->ssl);
  return t;
}

void tp__tls_free(struct tp_tls *t) {
  if (t == NULL)
    return;
  SSL_free(t->ssl);
  sbx_free(t);
}

int tp__tls_handshake_done(const struct tp_tls *t) { return t->done; }
int tp__tls_alpn_h2(const struct tp_tls *t) { return t->h2; }

int tp__tls_feed(struct tp_conn *c, const char *data, size_t len, tp_tls_plain_cb out) {
  struct tp_tls *t = c->tls;
  if (len > 0 && BIO_write(t->rbio, data, (int)len) != (int)len)
    return -1;
  if (!t->done) {
    int r = SSL_do_handshake(t->ssl);
    if (r != 1) {
      int e = SSL_get_error(t->ssl, r);
      if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
        return 1;
      if (SBX_LOG_ENABLED(SBX_LOG_DEBUG)) {
        char d[256];
        ossl_detail(d, sizeof(d));
        sbx_log(SBX_LOG_DEBUG, TP_MOD, "TLS handshake failed: %s", d);
      }
      ERR_clear_error();
      return -1;
    }
    t->done = 1;
  }
  char buf[16384];
  for (;;) {
    int n = SSL_read(t->ssl, buf, sizeof(buf));
    if (n > 0) {
      int rc = out(c, buf, (size_t)n);
      if (rc != 0)
        return rc;
      if (c->state == CONN_CLOSING)
        return 0;
      continue;
    }
    int e = SSL_get_error(t->ssl, n);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
      return 0;
    if (e == SSL_ERROR_ZERO_RETURN)
      return 0; /* close_notify: the socket EOF follows */
    ERR_clear_error();
    return -1;
  }
}

int tp__tls_take_output(struct tp_tls *t, char **out, size_t *outlen) {
  size_t pend = BIO_ctrl_pending(t->wbio);
  *out = NULL;
  *outlen = 0;
  if (pend == 0)
    return 0;
  char *p = sbx_malloc(pend);
  if (p == NULL)
    return SBX_ENOMEM;
  int n = BIO_read(t->wbio, p, (int)pend);
  if (n <= 0) {
    sbx_free(p);
    return 0;
  }
  *out = p;
  *outlen = (size_t)n;
  return 0;
}

int tp__tls_encrypt(struct tp_tls *t, const uv_buf_t *bufs, unsigned n, char **out,
                    size_t *outlen) {
  for (unsigned i = 0; i < n; i++) {
    if (bufs[i].len == 0)
      continue;
    int w = SSL_write(t->ssl, bufs[i].base, (int)bufs[i].len);
    if (w != (int)bufs[i].len) {
      ERR_clear_error();
      return SBX_ETLS;
    }
  }
  return tp__tls_take_output(t, out, outlen);
}
