/* errors.c -- the error table's strings and the out-of-band detail struct.  The table itself is
 * the SBX_ERRORS X-macro in common.h; this file only expands it. */
#include "common.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <uv.h>

const char *sbx_strerror(int code) {
  switch (code) {
#define SBX_STR_GEN(name, val, msg)                                                                \
  case (val):                                                                                      \
    return msg;
    SBX_ERRORS(SBX_STR_GEN)
#undef SBX_STR_GEN
  }
  return "unknown error";
}

const char *sbx_errname(int code) {
  switch (code) {
#define SBX_NAME_GEN(name, val, msg)                                                               \
  case (val):                                                                                      \
    return #name;
    SBX_ERRORS(SBX_NAME_GEN)
#undef SBX_NAME_GEN
  }
  return "EUNKNOWN";
}

int sbx_error_set(struct sbx_error *err, int code, const char *fmt, ...) {
  if (err != NULL) {
    va_list ap;
    err->code = code;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
    va_end(ap);
  }
  return code;
}

void sbx_error_clear(struct sbx_error *err) {
  if (err != NULL) {
    err->code = 0;
    err->msg[0] = '\0';
  }
}

int sbx_from_uv(int e) {
  if (e >= 0)
    return SBX_OK;
  switch (e) {
  case UV_ENOMEM:
    return SBX_ENOMEM;
  case UV_EINVAL:
    return SBX_EINVAL;
  case UV_ENOENT:
    return SBX_ENOENT;
  case UV_EEXIST:
    return SBX_EEXIST;
  case UV_EAGAIN:
    return SBX_EAGAIN;
  case UV_EADDRINUSE:
    return SBX_EADDRINUSE;
  case UV_EACCES:
  case UV_EPERM:
  case UV_EROFS:
    return SBX_EPERM;
  case UV_ETIMEDOUT:
    return SBX_ETIMEDOUT;
  case UV_ECANCELED:
    return SBX_ECANCELED;
  case UV_EOF:
  case UV_ECONNRESET:
  case UV_EPIPE:
  case UV_ENOTCONN:
    return SBX_ECLOSED;
  case UV_EBUSY:
    return SBX_EBUSY;
  default:
    return SBX_EIO;
  }
}
