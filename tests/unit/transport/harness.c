/* harness.c -- see harness.h. */
#include "harness.h"
#include "handlers.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

int th_head_response;

static void on_closed(struct tp_server *s, void *ud) {
  struct th *t = ud;
  t->closed = 1;
}

static void on_done(uv_async_t *a) {
  struct th *t = a->data;
  uv_close((uv_handle_t *)&t->done, NULL);
  tp_server_close(t->srv, 100, on_closed, t);
}

void th_init_tls(struct th *t, const struct tp_limits *lim, const char *cert, const char *key) {
  memset(t, 0, sizeof(*t));
  ck_assert_int_eq(uv_loop_init(&t->loop), 0);
  if (lim)
    t->cfg.limits = *lim;
  else
    tp_limits_default(&t->cfg.limits);
  t->cfg.tls_cert_file = cert;
  t->cfg.tls_key_file = key;
  struct sbx_error err;
  int rc = tp_server_new(&t->loop, &t->cfg, &t->srv, &err);
  ck_assert_msg(rc == 0, "tp_server_new: %s", err.msg);
}

void th_init(struct th *t, const struct tp_limits *lim) { th_init_tls(t, lim, NULL, NULL); }

static void *client_main(void *arg) {
  struct th *t = arg;
  t->client(t);
  uv_async_send(&t->done);
  return NULL;
}

void th_run(struct th *t, void (*client)(struct th *t)) {
  struct sbx_error err;
  ck_assert_msg(tp_server_listen(t->srv, "127.0.0.1:0", &err) == 0, "listen: %s", err.msg);
  t->port = tp_server_port(t->srv);
  ck_assert_int_gt(t->port, 0);
  uv_async_init(&t->loop, &t->done, on_done);
  t->done.data = t;
  t->client = client;
  ck_assert_int_eq(pthread_create(&t->thread, NULL, client_main, t), 0);
  uv_run(&t->loop, UV_RUN_DEFAULT);
  pthread_join(t->thread, NULL);
  ck_assert_int_eq(t->closed, 1);
  ck_assert_int_eq(uv_loop_close(&t->loop), 0);
}

void th_run_routes(const struct tp_limits *lim, void (*client)(struct th *t)) {
  struct th t;
  th_init(&t, lim);
  th_add_routes(t.srv);
  th_run(&t, client);
}

void th_run_sinks(const struct tp_limits *lim, void (*client)(struct th *t)) {
  th_sink_live = 0;
  th_run_routes(lim, client);
  ck_assert_int_eq(th_sink_live, 0);
}

void th_body_clock_limits(struct tp_limits *l) {
  tp_limits_default(l);
  l->header_timeout_ms = 200;
  l->body_grace_ms = 300;
  l->body_min_rate = 1000;
}

int th_connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ck_assert_int_ge(fd, 0);
  struct sockaddr_in sa = {0};
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  struct timeval tv = {5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  return fd;
}

void th_send(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n > 0) {
    ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return; /* the server may have closed: the test reads the outcome */
    c += w;
    n -= (size_t)w;
  }
}

void th_sends(int fd, const char *s) { th_send(fd, s, strlen(s)); }

/* Reads into a growing buffer until `need` returns a complete length. */
static int read_more(int fd, char **buf, size_t *len, size_t *cap) {
  if (*len + 4096 + 1 > *cap) {
    *cap = (*cap + 4096) * 2;
    *buf = realloc(*buf, *cap);
  }
  ssize_t n;
  do
    n = recv(fd, *buf + *len, *cap - *len - 1, 0);
  while (n < 0 && errno == EINTR);
  if (n <= 0)
    return 0;
  *len += (size_t)n;
  (*buf)[*len] = '\0';
  return 1;
}

/* Per-fd leftover bytes between responses (pipelining): a small table keyed by fd. */
static struct {
  int fd;
  char *data;
  size_t len;
} leftover[64];

char *th_read_response(int fd, int *status) {
  char *buf = NULL;
  size_t len = 0, cap = 0;
  for (size_t i = 0; i < 64; i++)
    if (leftover[i].data && leftover[i].fd == fd) {
      buf = leftover[i].data;
      len = leftover[i].len;
      cap = len + 1;
      leftover[i].data = NULL;
    }
  if (buf == NULL) {
    cap = 8192;
    buf = malloc(cap);
    buf[0] = '\0';
  }
  char *eoh;
  for (;;) {
    /* skip 1xx interim responses */
    eoh = len ? strstr(buf, "\r\n\r\n") : NULL;
    if (eoh && strncmp(buf, "HTTP/1.1 1", 10) == 0) {
      size_t hl = (size_t)(eoh + 4 - buf);
      memmove(buf, buf + hl, len - hl + 1);
      len -= hl;
      continue;
    }
    if (eoh)
      break;
    if (!read_more(fd, &buf, &len, &cap)) {
      free(buf);
      return NULL;
    }
  }
  size_t hl = (size_t)(eoh + 4 - buf);
  *status = atoi(buf + 9);
  char *out = malloc(hl + 1);
  memcpy(out, buf, hl);
  out[hl] = '\0';
  size_t olen = hl;
  size_t pos = hl;
  char *cl = strcasestr(out, "\r\nContent-Length:");
  int chunked = strcasestr(out, "\r\nTransfer-Encoding: chunked") != NULL;
  int head_like = *status == 304 || *status == 204;
  if (cl && !head_like) {
    size_t want = (size_t)strtoull(cl + 17, NULL, 10);
    if (th_head_response) /* the answer to a HEAD: no body follows */
      want = 0;
    while (len - pos < want)
      if (!read_more(fd, &buf, &len, &cap))
        break;
    size_t take = SBX_MIN(want, len - pos);
    out = realloc(out, olen + take + 1);
    memcpy(out + olen, buf + pos, take);
    olen += take;
    pos += take;
  } else if (chunked) {
    for (;;) {
      char *crlf;
      while ((crlf = strstr(buf + pos, "\r\n")) == NULL)
        if (!read_more(fd, &buf, &len, &cap))
          goto done;
      size_t csz = (size_t)strtoull(buf + pos, NULL, 16);
      size_t start = (size_t)(crlf + 2 - buf);
      while (len < start + csz + 2)
        if (!read_more(fd, &buf, &len, &cap))
          goto done;
      out = realloc(out, olen + csz + 1);
      memcpy(out + olen, buf + start, csz);
      olen += csz;
      pos = start + csz + 2;
      if (csz == 0)
        break;
    }
  } else if (!head_like && strcasestr(out, "\r\nConnection: close")) {
    while (read_more(fd, &buf, &len, &cap))
      ;
    out = realloc(out, olen + (len - pos) + 1);
    memcpy(out + olen, buf + pos, len - pos);
    olen += len - pos;
    pos = len;
  }
done:
  out[olen] = '\0';
  if (pos < len) {
    for (size_t i = 0; i < 64; i++)
      if (!leftover[i].data) {
        leftover[i].fd = fd;
        leftover[i].len = len - pos;
        leftover[i].data = malloc(len - pos + 1);
        memcpy(leftover[i].data, buf + pos, len - pos);
        leftover[i].data[len - pos] = '\0';
        break;
      }
  }
  free(buf);
  return out;
}

char *th_read_all(int fd, size_t *n) {
  char *buf = NULL;
  size_t len = 0, cap = 0;
  cap = 8192;
  buf = malloc(cap);
  buf[0] = '\0';
  while (read_more(fd, &buf, &len, &cap))
    ;
  if (n)
    *n = len;
  return buf;
}

int th_wait_closed(int fd, int ms) {
  struct pollfd p = {fd, POLLIN, 0};
  char b[4096];
  for (;;) {
    int r = poll(&p, 1, ms);
    if (r <= 0)
      return 0;
    ssize_t n = recv(fd, b, sizeof(b), MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
      return 1;
  }
}

char *th_request(int port, const char *req, int *status) {
  int fd = th_connect(port);
  th_sends(fd, req);
  char *r = th_read_response(fd, status);
  close(fd);
  return r;
}
