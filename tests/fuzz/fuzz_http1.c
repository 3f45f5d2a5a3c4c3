/* fuzz_http1.c -- HTTP/1.1 requests through the transport (pipelining, chunked bodies, streamed
 * sinks, static files): every input is the bytes of one client connection. */
#include "fuzz_tp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  fuzz_tp_run(data, n, "", 0);
  return 0;
}
