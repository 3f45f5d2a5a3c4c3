/* proxy.h -- an HTTP client on the orchestrator's loop (proxy.c), for nodes: forwarding a request
 * to the node that holds its chat, and the check at start that CEREA_NODE_URL reaches this node.
 * Below the handlers' helpers (api.h includes it); it needs only the answers (api_reply.h).
 *
 * Internal to the orchestrator, like internal.h (which it includes).
 */
#ifndef ORCH_PROXY_H
#define ORCH_PROXY_H

#include "../internal.h"

struct tp_req;

/* proxy.c: an HTTP client on the loop (libcurl) for nodes.c. */
struct orch_proxy;
int orch__proxy_new(struct orch *o, struct orch_proxy **out, struct sbx_error *err);
void orch__proxy_free(struct orch_proxy *px); /* ends every transfer; answers what it held */
/* Forwards req to base_url (the same target), node_id naming this node; retry_ms: the
 * Retry-After of a 503 when the other node does not answer.  *stage (may be NULL) is a streamed
 * body, taken.  0: req is the proxy's (held) until it answered; else nothing was done. */
int orch__proxy_forward(struct orch_proxy *px, struct tp_req *req, const char *base_url,
                        const char *chat_id, const char *node_id, uint64_t retry_ms,
                        struct store_blob_stage **stage);
/* GET url within timeout_ms: cb(ud, HTTP status or 0, curl's error, up to 4 KiB of the body). */
typedef void (*orch_proxy_get_cb)(void *ud, int status, const char *error, const char *body,
                                  size_t len);
int orch__proxy_get(struct orch_proxy *px, const char *url, uint64_t timeout_ms,
                    orch_proxy_get_cb cb, void *ud);

#endif
