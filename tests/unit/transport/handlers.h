/* handlers.h -- the routes every transport test server carries (see handlers.c). */
#ifndef TP_TEST_HANDLERS_H
#define TP_TEST_HANDLERS_H
#include "transport.h"
/* GET /hello, POST /echo (limit 16), GET /items/{id}, GET /files/{name*}, GET /chunks,
 * GET /hold (answers after 30 ms), GET /poll (held until the client goes: counts on_close),
 * GET /sse (two events then end), GET /sse-open (stays open, heartbeats every 50 ms),
 * GET /nodelay (answers "1" when TCP_NODELAY is set on the socket), GET /big-head (44 response
 * headers, hop-by-hop ones among them: for HTTP/2 only), GET /large (TH_LARGE_LEN patterned
 * bytes). */
#define TH_LARGE_LEN 300007
static inline char th_large_byte(size_t i) { return (char)(i * 7 + i / 251); }
/* A client's copy of GET /large: its length and every byte (the first wrong one named). */
#define TH_CHECK_LARGE(body, len)                                                                  \
  do {                                                                                             \
    ck_assert_uint_eq((len), TH_LARGE_LEN);                                                        \
    for (size_t i_ = 0; i_ < TH_LARGE_LEN; i_++)                                                   \
      if ((body)[i_] != th_large_byte(i_))                                                         \
        ck_abort_msg("large body: byte %zu differs", i_);                                          \
  } while (0)
void th_add_routes(struct tp_server *s);
extern int th_poll_closed; /* on_close calls seen by /poll */
extern int th_sink_live;   /* body sink states not freed (POST /sink, /sink-refuse) */
#endif
