/* h2client.h -- a small blocking HTTP/2 client on a real nghttp2 client session, for the tests
 * (runs in the harness's client thread).  Optionally over TLS (OpenSSL, ALPN). */
#ifndef TP_TEST_H2CLIENT_H
#define TP_TEST_H2CLIENT_H
#include <nghttp2/nghttp2.h>
#include <openssl/ssl.h>
#include <stddef.h>
#include <stdint.h>

struct h2resp {
  int32_t id;
  int status;
  char *body;
  size_t len;
  int closed;
  uint32_t code; /* RST_STREAM / close error code */
  char headers[2048];
};

struct h2c {
  int fd;
  SSL_CTX *ctx;
  SSL *ssl;
  nghttp2_session *ss;
  struct h2resp r[256];
  int nr;
  int goaway;
  uint32_t goaway_code;
  int eof;
};

/* Connects (and with tls: handshakes offering `alpn`, e.g. "\x02h2"), sends the preface. */
void h2c_open(struct h2c *c, int port, int tls, const unsigned char *alpn, size_t alpn_len);
void h2c_close(struct h2c *c);
/* Submits a request; extra headers as name,value pairs (NULL-terminated list). */
struct h2resp *h2c_request(struct h2c *c, const char *method, const char *path, const char **extra,
                           const char *body, size_t blen);
/* Exchanges frames until `r` closed (r NULL: until the connection ends), or ms passed.
 * Returns 1 when the condition was met. */
int h2c_wait(struct h2c *c, struct h2resp *r, int ms);
/* Raw bytes straight onto the socket (abusive frames). */
void h2c_raw(struct h2c *c, const void *p, size_t n);
/* Builds a frame header + payload into out; returns its length. */
size_t h2_frame(unsigned char *out, uint8_t type, uint8_t flags, uint32_t sid, const void *pl,
                size_t n);
#endif
