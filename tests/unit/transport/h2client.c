/* h2client.c -- see h2client.h. */
#include "h2client.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

static struct h2resp *find(struct h2c *c, int32_t id) {
  for (int i = 0; i < c->nr; i++)
    if (c->r[i].id == id)
      return &c->r[i];
  return NULL;
}

static ssize_t io_write(struct h2c *c, const void *p, size_t n) {
  if (c->ssl) {
    int w = SSL_write(c->ssl, p, (int)n);
    return w > 0 ? w : -1;
  }
  return send(c->fd, p, n, MSG_NOSIGNAL);
}

static ssize_t io_read(struct h2c *c, void *p, size_t n) {
  if (c->ssl) {
    int r = SSL_read(c->ssl, p, (int)n);
    if (r > 0)
      return r;
    int e = SSL_get_error(c->ssl, r);
    if (e == SSL_ERROR_WANT_READ)
      return -2;
    return 0;
  }
  ssize_t r = recv(c->fd, p, n, MSG_DONTWAIT);
  if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
    return -2;
  return r < 0 ? 0 : r;
}

static ssize_t on_send(nghttp2_session *ss, const uint8_t *data, size_t len, int flags, void *ud) {
  struct h2c *c = ud;
  size_t off = 0;
  while (off < len) {
    ssize_t w = io_write(c, data + off, len - off);
    if (w <= 0)
      return NGHTTP2_ERR_CALLBACK_FAILURE;
    off += (size_t)w;
  }
  return (ssize_t)len;
}

static int on_header(nghttp2_session *ss, const nghttp2_frame *f, const uint8_t *name, size_t nl,
                     const uint8_t *value, size_t vl, uint8_t flags, void *ud) {
  struct h2c *c = ud;
  struct h2resp *r = find(c, f->hd.stream_id);
  if (!r)
    return 0;
  if (nl == 7 && memcmp(name, ":status", 7) == 0)
    r->status = atoi((const char *)value);
  size_t hl = strlen(r->headers);
  if (hl + nl + vl + 4 < sizeof(r->headers)) {
    memcpy(r->headers + hl, name, nl);
    hl += nl;
    r->headers[hl++] = ':';
    r->headers[hl++] = ' ';
    memcpy(r->headers + hl, value, vl);
    hl += vl;
    r->headers[hl++] = '\n';
    r->headers[hl] = '\0';
  }
  return 0;
}

static int on_data(nghttp2_session *ss, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
                   void *ud) {
  struct h2c *c = ud;
  struct h2resp *r = find(c, id);
  if (!r)
    return 0;
  r->body = realloc(r->body, r->len + len + 1);
  memcpy(r->body + r->len, data, len);
  r->len += len;
  r->body[r->len] = '\0';
  return 0;
}

static int on_close(nghttp2_session *ss, int32_t id, uint32_t code, void *ud) {
  struct h2c *c = ud;
  struct h2resp *r = find(c, id);
  if (r) {
    r->closed = 1;
    r->code = code;
  }
  return 0;
}

static int on_frame(nghttp2_session *ss, const nghttp2_frame *f, void *ud) {
  struct h2c *c = ud;
  if (f->hd.type == NGHTTP2_GOAWAY) {
    c->goaway = 1;
    c->goaway_code = f->goaway.error_code;
  }
  return 0;
}

void h2c_open(struct h2c *c, int port, int tls, const unsigned char *alpn, size_t alpn_len) {
  memset(c, 0, sizeof(*c));
  c->fd = th_connect(port);
  if (tls) {
    c->ctx = SSL_CTX_new(TLS_client_method());
    c->ssl = SSL_new(c->ctx);
    if (alpn)
      SSL_set_alpn_protos(c->ssl, alpn, (unsigned)alpn_len);
    SSL_set_fd(c->ssl, c->fd);
    ck_assert_int_eq(SSL_connect(c->ssl), 1);
  }
  nghttp2_session_callbacks *cb;
  nghttp2_session_callbacks_new(&cb);
  nghttp2_session_callbacks_set_send_callback(cb, on_send);
  nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_close);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame);
  nghttp2_session_client_new(&c->ss, cb, c);
  nghttp2_session_callbacks_del(cb);
  nghttp2_submit_settings(c->ss, NGHTTP2_FLAG_NONE, NULL, 0);
  nghttp2_session_send(c->ss);
}

void h2c_close(struct h2c *c) {
  for (int i = 0; i < c->nr; i++)
    free(c->r[i].body);
  nghttp2_session_del(c->ss);
  if (c->ssl) {
    SSL_free(c->ssl);
    SSL_CTX_free(c->ctx);
  }
  close(c->fd);
}

struct body_src {
  const char *p;
  size_t n, off;
};

static ssize_t body_read(nghttp2_session *ss, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
                         nghttp2_data_source *src, void *ud) {
  struct body_src *b = src->ptr;
  size_t n = b->n - b->off < len ? b->n - b->off : len;
  memcpy(buf, b->p + b->off, n);
  b->off += n;
  if (b->off == b->n) {
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    free(b);
  }
  return (ssize_t)n;
}

struct h2resp *h2c_request(struct h2c *c, const char *method, const char *path, const char **extra,
                           const char *body, size_t blen) {
  nghttp2_nv nv[32];
  size_t n = 0;
#define NV(a, b) (nghttp2_nv){(uint8_t *)(a), (uint8_t *)(b), strlen(a), strlen(b), 0}
  nv[n++] = NV(":method", method);
  nv[n++] = NV(":path", path);
  nv[n++] = NV(":scheme", c->ssl ? "https" : "http");
  nv[n++] = NV(":authority", "localhost");
  for (int i = 0; extra && extra[i]; i += 2)
    nv[n++] = NV(extra[i], extra[i + 1]);
  nghttp2_data_provider prd, *pp = NULL;
  if (body) {
    struct body_src *b = calloc(1, sizeof(*b));
    b->p = body;
    b->n = blen;
    prd.source.ptr = b;
    prd.read_callback = body_read;
    pp = &prd;
  }
  int32_t id = nghttp2_submit_request(c->ss, NULL, nv, n, pp, NULL);
  ck_assert_int_gt(id, 0);
  struct h2resp *r = &c->r[c->nr++];
  memset(r, 0, sizeof(*r));
  r->id = id;
  nghttp2_session_send(c->ss);
  return r;
}

int h2c_wait(struct h2c *c, struct h2resp *r, int ms) {
  int waited = 0;
  for (;;) {
    if (r && r->closed)
      return 1;
    if (c->eof)
      return r == NULL;
    nghttp2_session_send(c->ss);
    int pending = c->ssl ? SSL_pending(c->ssl) : 0;
    struct pollfd p = {c->fd, POLLIN, 0};
    if (!pending && poll(&p, 1, 20) == 0) {
      waited += 20;
      if (waited >= ms)
        return 0;
      continue;
    }
    unsigned char buf[16384];
    ssize_t n = io_read(c, buf, sizeof(buf));
    if (n == -2)
      continue;
    if (n <= 0) {
      c->eof = 1;
      continue;
    }
    if (nghttp2_session_mem_recv(c->ss, buf, (size_t)n) < 0) {
      c->eof = 1;
      continue;
    }
  }
}

void h2c_raw(struct h2c *c, const void *p, size_t n) {
  size_t off = 0;
  while (off < n) {
    ssize_t w = io_write(c, (const char *)p + off, n - off);
    if (w <= 0)
      return;
    off += (size_t)w;
  }
}

size_t h2_frame(unsigned char *out, uint8_t type, uint8_t flags, uint32_t sid, const void *pl,
                size_t n) {
  out[0] = (unsigned char)(n >> 16);
  out[1] = (unsigned char)(n >> 8);
  out[2] = (unsigned char)n;
  out[3] = type;
  out[4] = flags;
  out[5] = (unsigned char)(sid >> 24) & 0x7f;
  out[6] = (unsigned char)(sid >> 16);
  out[7] = (unsigned char)(sid >> 8);
  out[8] = (unsigned char)sid;
  if (n)
    memcpy(out + 9, pl, n);
  return 9 + n;
}
