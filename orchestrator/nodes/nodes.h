/* nodes.h -- what nodes.c (a node's leases, renewals, takeover: the domain) and its HTTP side
 * (api_nodes.c: GET /v1/node, the check of CEREA_NODE_URL; api.c: forwarding with proxy.c)
 * share.  Internal to the orchestrator, like internal.h (which it includes). */
#ifndef ORCH_NODES_H
#define ORCH_NODES_H

#include "internal.h"

struct orch_nodes {
  struct orch *o;
  store_id id;
  char url[256];
  uint64_t lease_ms, margin_ms;
  struct orch_proxy *px; /* the HTTP side's (forwarding, the URL check); never used here */
  uv_timer_t *timer;     /* freed in its close callback */
  uint64_t renewed_at;   /* mono ms: the last renewal that succeeded was sent then */
  uint64_t next_renew;
  uint64_t failures; /* renewals failed in a row */
  int ready;         /* CEREA_NODE_URL reached this node */
  int stopped;       /* orch__nodes_stop ran */
  /* the last refusal: who holds that chat, so that forwarding needs no second look-up */
  store_id refused_chat;
  char refused_url[256];
  uint64_t refused_left_ms;
};

/* Exits now, saying why (one line on stderr, status 1): nodes.c's fail-stop. */
__attribute__((noreturn)) void orch__node_fail_stop(struct orch_nodes *ns, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* CEREA_NODE_URL was found to reach this node: it serves from now on (leases counted from now),
 * and takes over the chats with unfinished runs whose lease is free. */
void orch__node_ready(struct orch_nodes *ns);

#endif
