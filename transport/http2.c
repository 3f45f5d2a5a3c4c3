/* http2.c -- the HTTP/2 protocol peer over nghttp2 (in progress: h2c connections are refused
 * until this lands). */
#include "internal.h"

int tp__h2_start(struct tp_conn *c, const char *data, size_t len) {
  (void)c;
  (void)data;
  (void)len;
  return SBX_EPROTO;
}
