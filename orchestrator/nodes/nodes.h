/* nodes.h -- the nodes wing (nodes.c: several orchestrators on one PostgreSQL store,
 * CEREA_NODE_URL; a node's leases, renewals, takeover): its entry points, which the HTTP side
 * calls (server.c starts and closes it; api_nodes.c: GET /v1/node, the check of CEREA_NODE_URL;
 * api.c: forwarding with proxy.c), and what they share.  Internal to the orchestrator, like
 * internal.h (which it includes). */
#ifndef ORCH_NODES_H
#define ORCH_NODES_H

#include "internal.h"

/* Each entry point is a no-op (or 0) when the server is not a node.
 * start: the node's id, lease renewal, the notifications of other nodes (api_nodes.c's
 * orch__routes_nodes starts it).  Chats are not served until orch__node_ready (below). */
int orch__nodes_start(struct orch *o, struct sbx_error *err);
void orch__nodes_stop(struct orch *o);  /* closing: renewals stop */
void orch__nodes_close(struct orch *o); /* closed: every lease let go; before store_close */
const char *orch__node_id(const struct orch *o); /* this node's id; NULL when not a node */
/* The lease of a chat about to be loaded: 0 held (taken now, or already), SBX_EREMOTE another
 * node holds it (orch__node_forward knows which), SBX_EBUSY the node is not ready yet, or the
 * store's error. */
int orch__node_take(struct orch *o, const char *chat_id);
void orch__node_release(struct orch *o, const char *chat_id); /* an evicted chat's */
/* A chat just loaded: its unfinished runs go live (taken over from a node that died). */
void orch__node_loaded(struct orch *o, struct orch_chat *c);
/* A retention sweep removed files: the other nodes read their kept file lists again.  An operator
 * changed runtime settings: the other nodes read them again. */
void orch__node_files_changed(struct orch *o);
void orch__node_settings_changed(struct orch *o);
/* Tells every node (this one too) what (ids only, at most 200 bytes; nodes.c's on_notify
 * dispatches it), once the writes queued before it are durable. */
void orch__node_tell(struct orch *o, const char *what);

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
