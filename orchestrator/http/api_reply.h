/* api_reply.h -- the answers every handler writes (api_reply.c): JSON, the error answer in the
 * API's one shape, 503 `unavailable` with Retry-After, the error map (an sbx code's status and
 * API code); and what a Host header may be.  The bottom of the HTTP side (api.h includes it).
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
/* ---- the error map ----------------------------------------------------------------------------
 * How an sbx error code answers over HTTP: one table (api_reply.c) from the code, and what the
 * call was doing when it failed, to status and API error code.  The common rows hold for any call;
 * an operation named here has rows of its own where the API words the same code its own way (a
 * run's ESTATE on input is `not_waiting`, on cancel `conflict`).  A code no row names is the
 * server's fault: 500, `storage` for a store operation and `internal` otherwise. */
enum orch_api_op {
  ORCH_OP_ANY = 0,    /* the common rows only */
  ORCH_OP_STORE,      /* a store read or write: its faults are `storage` */
  ORCH_OP_INPUT,      /* input for a waiting run */
  ORCH_OP_ASK,        /* a message for the assistant */
  ORCH_OP_TURN_STOP,  /* a turn stopped */
  ORCH_OP_PAGE_FILE,  /* an output file a page uploads for its run */
  ORCH_OP_MSG_CURSOR, /* a message page from a cursor (before/after) */
  ORCH_OP__COUNT      /* not an operation: how many there are */
};
struct orch_api_fault {
  int status;       /* 400..503 */
  const char *code; /* the API's error code (docs/openapi.yaml's ErrorCode) */
};
struct orch_api_fault orch__api_fault(int rc, enum orch_api_op op);
/* Answers the failure rc of op with its row; `unavailable` says Retry-After: 1. */
void orch__api_fail(struct tp_req *req, int rc, enum orch_api_op op, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* A plain Host header value (host[:port], no path or spaces). */
int orch__host_ok(const char *h);

#endif
