/* api_reply.h -- the answers every handler writes (api_reply.c): JSON, the error answer in the
 * API's one shape, 503 `unavailable` with Retry-After; and what a Host header may be.  The bottom
 * of the HTTP side (api.h includes it).
 *
 * Internal to the orchestrator, like internal.h (which it includes).
 */
#ifndef ORCH_API_REPLY_H
#define ORCH_API_REPLY_H

#include "../internal.h"

struct tp_req;

/* api_reply.c: the answers */
void orch__api_json(struct tp_req *req, int status, json_t *body); /* steals body */
void orch__api_text(struct tp_req *req, int status, const char *json_text, size_t len);
void orch__api_error(struct tp_req *req, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* 503 `unavailable` with Retry-After: retry_s (at least 1): what frees itself soon. */
void orch__api_unavailable(struct tp_req *req, uint64_t retry_s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A plain Host header value (host[:port], no path or spaces). */
int orch__host_ok(const char *h);

#endif
