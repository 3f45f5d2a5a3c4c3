/* fuzz_tp.h -- what the transport's fuzz targets share (fuzz_tp.c): a real server in the fuzzer's
 * own process, fed one input per connection. */
#ifndef SBX_FUZZ_TP_H
#define SBX_FUZZ_TP_H

#include <stddef.h>
#include <stdint.h>

/* Sends `prefix` (may be empty) and then the input on a fresh connection to the server, reads
 * what it answers, half-closes, runs the loop until the server closed the connection, and aborts
 * when the server's counts (connections, bodies arriving, bytes queued) are not back at rest.
 * The input's first byte chooses the size of the pieces it is written in (0: all at once), so
 * reads split anywhere. */
void fuzz_tp_run(const uint8_t *data, size_t n, const char *prefix, size_t prefix_len);

#endif
