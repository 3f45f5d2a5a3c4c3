/* util.c -- clock (replaceable by tests), bounded buffer, constant-time compare, hex, random,
 * write of a whole buffer. */
#include "common.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static sbx_clock_fn fake_mono, fake_wall;
static void *fake_ud;

void sbx_clock_set_fake(sbx_clock_fn mono, sbx_clock_fn wall, void *ud) {
  fake_mono = mono;
  fake_wall = wall;
  fake_ud = ud;
}

uint64_t sbx_now_mono_ms(void) {
  if (fake_mono != NULL)
    return fake_mono(fake_ud);
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int64_t sbx_now_wall_ms(void) {
  if (fake_wall != NULL)
    return (int64_t)fake_wall(fake_ud);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void sbx_buf_init(struct sbx_buf *b, size_t limit) {
  b->data = NULL;
  b->len = b->cap = 0;
  b->limit = limit;
}

int sbx_buf_reserve(struct sbx_buf *b, size_t n) {
  if (n > b->limit)
    return SBX_ETOOBIG;
  if (n + 1 <= b->cap)
    return SBX_OK;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < n + 1)
    cap *= 2;
  if (cap > b->limit + 1)
    cap = b->limit + 1;
  char *p = sbx_realloc(b->data, cap);
  if (p == NULL)
    return SBX_ENOMEM;
  b->data = p;
  b->cap = cap;
  return SBX_OK;
}

int sbx_buf_append(struct sbx_buf *b, const void *p, size_t n) {
  if (n > b->limit - b->len)
    return SBX_ETOOBIG;
  int rc = sbx_buf_reserve(b, b->len + n);
  if (rc != 0)
    return rc;
  if (n)
    memcpy(b->data + b->len, p, n);
  b->len += n;
  b->data[b->len] = '\0';
  return SBX_OK;
}

int sbx_buf_appendf(struct sbx_buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0)
    return SBX_EINVAL;
  if ((size_t)n > b->limit - b->len)
    return SBX_ETOOBIG;
  int rc = sbx_buf_reserve(b, b->len + (size_t)n);
  if (rc != 0)
    return rc;
  va_start(ap, fmt);
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
  return SBX_OK;
}

void sbx_buf_reset(struct sbx_buf *b) {
  b->len = 0;
  if (b->data)
    b->data[0] = '\0';
}

void sbx_buf_free(struct sbx_buf *b) {
  sbx_free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
}

char *sbx_buf_steal(struct sbx_buf *b, size_t *len) {
  char *p = b->data;
  if (p == NULL) {
    p = sbx_malloc(1);
    if (p == NULL)
      return NULL;
    p[0] = '\0';
  }
  if (len)
    *len = b->len;
  b->data = NULL;
  b->len = b->cap = 0;
  return p;
}

void sbx_hex(const unsigned char *in, size_t n, char *out) {
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = digits[in[i] >> 4];
    out[2 * i + 1] = digits[in[i] & 15];
  }
  out[2 * n] = '\0';
}

int sbx_random(void *out, size_t n) {
  unsigned char *p = out;
  while (n > 0) {
    ssize_t r = getrandom(p, n, 0);
    if (r < 0) {
      if (errno == EINTR)
        continue;
      return SBX_EIO;
    }
    p += r;
    n -= (size_t)r;
  }
  return SBX_OK;
}

int sbx_write_all(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n > 0) {
    ssize_t w = write(fd, c, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return w < 0 ? -errno : -EIO;
    c += w;
    n -= (size_t)w;
  }
  return 0;
}
