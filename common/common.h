/* common.h -- the plumbing every C module of cerea-sandbox may use, and nothing else.
 *
 * What lives here: the one error table (codes, names, messages), the error-detail struct that
 * carries text out of band, the allocation wrappers (with a fail-at-N hook for tests), logging
 * and state tracing, a monotonic/wall clock that tests can replace, a bounded byte buffer and an
 * intrusive doubly-linked list.  What does not: anything that knows of HTTP, SQLite, runs or
 * pages.  Dependencies point orchestrator -> transport, persistence -> common.
 */
#ifndef SBX_COMMON_H
#define SBX_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* ---- errors -------------------------------------------------------------------------------
 * One table.  0 is success, every error is negative.  Foreign codes (libuv, nghttp2, SQLite,
 * OpenSSL, jansson) are translated once at the module boundary into one of these; the foreign
 * detail text goes into a struct sbx_error, never into the code.  Modules add rows here. */
#define SBX_ERRORS(X)                                                                              \
  X(OK, 0, "ok")                                                                                   \
  X(ENOMEM, -1, "out of memory")                                                                   \
  X(EINVAL, -2, "invalid argument")                                                                \
  X(EIO, -3, "input/output error")                                                                 \
  X(ENOENT, -4, "not found")                                                                       \
  X(EEXIST, -5, "already exists")                                                                  \
  X(EAGAIN, -6, "resource temporarily unavailable")                                                \
  X(ETOOBIG, -7, "too large")                                                                      \
  X(EPROTO, -8, "protocol error")                                                                  \
  X(ECLOSED, -9, "closed")                                                                         \
  X(ECONFLICT, -10, "conflict")                                                                    \
  X(EPERM, -11, "permission denied")                                                               \
  X(EADDRINUSE, -12, "address already in use")                                                     \
  X(ETIMEDOUT, -13, "timed out")                                                                   \
  X(ECORRUPT, -14, "data corrupt")                                                                 \
  X(EBUSY, -15, "busy")                                                                            \
  X(ECANCELED, -16, "canceled")                                                                    \
  X(ETLS, -17, "TLS error")                                                                        \
  X(ESTATE, -18, "invalid state transition")                                                       \
  X(EFULL, -19, "limit reached")                                                                   \
  X(EDB, -20, "database error")                                                                    \
  X(EUNAUTH, -21, "unauthorized")                                                                  \
  X(ENAME, -22, "invalid name")                                                                   \
  X(EFENCED, -23, "refused: another node holds the chat's lease")                                 \
  X(EREMOTE, -24, "another node serves it")                                                       \
  X(EINPROGRESS, -25, "under way; the end follows")

enum sbx_errno {
#define SBX_ERRNO_GEN(name, val, msg) SBX_##name = (val),
  SBX_ERRORS(SBX_ERRNO_GEN)
#undef SBX_ERRNO_GEN
};

/* A short human message for a code ("out of memory"); never NULL. */
const char *sbx_strerror(int code);
/* The code's symbolic name without prefix ("ENOMEM"); never NULL. */
const char *sbx_errname(int code);

/* Detail text travels out of band.  Functions that can fail with something worth saying take an
 * optional `struct sbx_error *` (may be NULL) and fill it on failure. */
struct sbx_error {
  int code;
  char msg[512];
};

/* Sets err (when not NULL) and returns `code`, so `return sbx_error_set(err, SBX_EIO, ...)`. */
int sbx_error_set(struct sbx_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void sbx_error_clear(struct sbx_error *err);

/* Translate a libuv error (negative errno) into the table; keeps nothing else. */
int sbx_from_uv(int uv_err);

/* ---- allocation ---------------------------------------------------------------------------
 * All project allocations go through these so tests can inject failure: after
 * sbx_alloc_fail_at(n), the n-th allocation from now (1-based) returns NULL, and every one after
 * it too when `sticky` is set.  sbx_alloc_fail_at(0, 0) turns injection off. */
void *sbx_malloc(size_t n);
void *sbx_calloc(size_t count, size_t n);
void *sbx_realloc(void *p, size_t n);
char *sbx_strdup(const char *s);
char *sbx_strndup(const char *s, size_t n);
void sbx_free(void *p);
void sbx_alloc_fail_at(uint64_t n, int sticky);
uint64_t sbx_alloc_count(void); /* allocations attempted since the last sbx_alloc_fail_at */
/* A bounded free list of same-sized blocks, for objects a hot path makes and drops once per
 * request.  While a block is on the list its first pointer links it; a block taken is
 * uninitialised.  A reuse counts as an allocation for failure injection (so fault tests still
 * reach every out-of-memory path).  Not thread-safe: one list per loop (or per thread). */
struct sbx_freelist {
  void *head;
  unsigned n, max; /* blocks kept, and at most */
};
void *sbx_freelist_take(struct sbx_freelist *fl, size_t size); /* kept or sbx_malloc(size) */
void sbx_freelist_give(struct sbx_freelist *fl, void *p);      /* kept, or freed when full */
void sbx_freelist_clear(struct sbx_freelist *fl);              /* frees every kept block */

/* ---- logging ------------------------------------------------------------------------------ */
enum sbx_log_level { SBX_LOG_TRACE = 0, SBX_LOG_DEBUG, SBX_LOG_INFO, SBX_LOG_WARN, SBX_LOG_ERROR };
void sbx_log_set_level(enum sbx_log_level level);
enum sbx_log_level sbx_log_get_level(void);
void sbx_log(enum sbx_log_level level, const char *module, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define SBX_LOG_ENABLED(level) ((level) >= sbx_log_get_level())

/* Every state change of an object with a life is traced through this one macro, so
 * `CEREA_LOG=trace` shows every transition of every connection, stream, page, run and turn. */
#define SBX_TRACE_STATE(module, kind, id, from, to)                                                \
  do {                                                                                             \
    if (SBX_LOG_ENABLED(SBX_LOG_TRACE))                                                            \
      sbx_log(SBX_LOG_TRACE, (module), "%s %s: %s -> %s", (kind), (id), (from), (to));             \
  } while (0)

/* ---- clock --------------------------------------------------------------------------------
 * Milliseconds.  Tests install a fake clock; production reads CLOCK_MONOTONIC / CLOCK_REALTIME. */
typedef uint64_t (*sbx_clock_fn)(void *ud);
uint64_t sbx_now_mono_ms(void);
int64_t sbx_now_wall_ms(void);
void sbx_clock_set_fake(sbx_clock_fn mono, sbx_clock_fn wall, void *ud); /* NULL, NULL: real */

/* ---- bounded byte buffer ------------------------------------------------------------------
 * Grows up to `limit` bytes (set when made); appending past it fails with SBX_ETOOBIG and leaves
 * the buffer unchanged. */
struct sbx_buf {
  char *data;
  size_t len;
  size_t cap;
  size_t limit;
};
void sbx_buf_init(struct sbx_buf *b, size_t limit);
int sbx_buf_append(struct sbx_buf *b, const void *p, size_t n);
int sbx_buf_appendf(struct sbx_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int sbx_buf_reserve(struct sbx_buf *b, size_t n);
void sbx_buf_reset(struct sbx_buf *b); /* len = 0, memory kept */
void sbx_buf_free(struct sbx_buf *b);
/* Hands the bytes to the caller (NUL-terminated, sbx_free them); the buffer becomes empty. */
char *sbx_buf_steal(struct sbx_buf *b, size_t *len);

/* ---- intrusive list (circular, with a sentinel head) --------------------------------------- */
struct sbx_list {
  struct sbx_list *prev, *next;
};
#define SBX_LIST_INIT(h)                   ((h)->prev = (h)->next = (h))
#define SBX_LIST_EMPTY(h)                  ((h)->next == (h))
#define SBX_CONTAINER_OF(ptr, type, field) ((type *)((char *)(ptr)-offsetof(type, field)))
#define SBX_LIST_FOREACH(it, h)            for ((it) = (h)->next; (it) != (h); (it) = (it)->next)
#define SBX_LIST_FOREACH_SAFE(it, tmp, h)                                                          \
  for ((it) = (h)->next, (tmp) = (it)->next; (it) != (h); (it) = (tmp), (tmp) = (it)->next)
static inline void sbx_list_insert_tail(struct sbx_list *h, struct sbx_list *n) {
  n->next = h;
  n->prev = h->prev;
  h->prev->next = n;
  h->prev = n;
}
static inline void sbx_list_remove(struct sbx_list *n) {
  n->prev->next = n->next;
  n->next->prev = n->prev;
  n->prev = n->next = n;
}

/* ---- small helpers ------------------------------------------------------------------------ */
/* Lower-case hex of n bytes into out (2n+1 bytes). */
void sbx_hex(const unsigned char *in, size_t n, char *out);
/* Fill with cryptographically secure random bytes (getrandom). */
int sbx_random(void *out, size_t n);
/* write(2) of all n bytes, EINTR retried: 0 or -errno (a write of 0 bytes counts as -EIO). */
int sbx_write_all(int fd, const void *p, size_t n);

#define SBX_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define SBX_MIN(a, b)     ((a) < (b) ? (a) : (b))
#define SBX_MAX(a, b)     ((a) > (b) ? (a) : (b))

#endif
