/* alloc.c -- allocation wrappers with fail-at-N injection for tests.
 *
 * Every allocation of the C modules goes through sbx_malloc & co. so a test can make the N-th one
 * fail and check that the code under test reports SBX_ENOMEM and leaks nothing.  The counters are
 * process-global and not thread-safe by design: injection is for single-threaded unit tests (the
 * persistence writer thread counts too, which is what its tests want). */
#include "common.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static _Atomic uint64_t alloc_count;
static _Atomic uint64_t fail_at;
static _Atomic int fail_sticky;

void sbx_alloc_fail_at(uint64_t n, int sticky) {
  alloc_count = 0;
  fail_at = n;
  fail_sticky = sticky;
}

uint64_t sbx_alloc_count(void) { return alloc_count; }

static int should_fail(void) {
  uint64_t n = ++alloc_count;
  uint64_t f = fail_at;
  if (f == 0)
    return 0;
  return n == f || (fail_sticky && n > f);
}

void *sbx_freelist_take(struct sbx_freelist *fl, size_t size) {
  void *p = fl->head;
  if (p == NULL)
    return sbx_malloc(size);
  if (should_fail())
    return NULL;
  memcpy(&fl->head, p, sizeof(void *));
  fl->n--;
  return p;
}

void sbx_freelist_give(struct sbx_freelist *fl, void *p) {
  if (p == NULL)
    return;
  if (fl->n >= fl->max) {
    sbx_free(p);
    return;
  }
  memcpy(p, &fl->head, sizeof(void *));
  fl->head = p;
  fl->n++;
}

void sbx_freelist_clear(struct sbx_freelist *fl) {
  while (fl->head) {
    void *p = fl->head;
    memcpy(&fl->head, p, sizeof(void *));
    sbx_free(p);
  }
  fl->n = 0;
}

void *sbx_malloc(size_t n) { return should_fail() ? NULL : malloc(n ? n : 1); }

void *sbx_calloc(size_t count, size_t n) {
  return should_fail() ? NULL : calloc(count ? count : 1, n ? n : 1);
}

void *sbx_realloc(void *p, size_t n) { return should_fail() ? NULL : realloc(p, n ? n : 1); }

char *sbx_strndup(const char *s, size_t n) {
  char *d = sbx_malloc(n + 1);
  if (d == NULL)
    return NULL;
  memcpy(d, s, n);
  d[n] = '\0';
  return d;
}

char *sbx_strdup(const char *s) { return s == NULL ? NULL : sbx_strndup(s, strlen(s)); }

void sbx_free(void *p) { free(p); }
