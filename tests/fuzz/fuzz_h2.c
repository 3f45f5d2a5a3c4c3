/* fuzz_h2.c -- HTTP/2 frame sequences into the server session (h2c with prior knowledge): every
 * input is what follows the connection preface on one connection. */
#include "fuzz_tp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  fuzz_tp_run(data, n, preface, sizeof(preface) - 1);
  return 0;
}
