/* api_nodes.c -- the HTTP side of nodes (nodes.c keeps the leases): GET /v1/node, the check at
 * start that CEREA_NODE_URL reaches this node, and forwarding a request for a chat another node
 * holds to it (proxy.c, libcurl on the loop; why not a redirect: docs/scale.md).
 *
 * Forwarding: a request that was forwarded already (X-Cerea-Node) is not forwarded again but
 * answered 503, and so is one whose owner is this node's own URL under an older id (its previous
 * life, dead: its leases expire within CEREA_LEASE_MS; Retry-After says when).
 *
 * What it does not do: take or renew leases (nodes.c), or HTTP itself (proxy.c, the transport).
 */
#include "api.h"
#include "nodes.h"
#include "transport.h"

#include <string.h>

#define NODES_CHECK_MS 5000 /* the start's check of CEREA_NODE_URL */

void orch__node_forward(struct orch *o, struct tp_req *req, const char *chat_id,
                        struct store_blob_stage **stage) {
  struct orch_nodes *ns = o->nodes;
  if (ns == NULL || !ns->ready) {
    orch__api_error(req, 503, "unavailable", "this node is starting; try again");
    return;
  }
  if (strcmp(ns->refused_chat, chat_id) != 0) { /* not the chat last refused: look again */
    struct orch_chat *c;
    if (orch__chat_get(o, chat_id, &c) != SBX_EAGAIN) {
      orch__api_error(req, 503, "unavailable", "chat %s changed nodes; try again", chat_id);
      return;
    }
  }
  const char *from = tp_req_header(req, "x-cerea-node");
  if (from != NULL || strcmp(ns->refused_url, ns->url) == 0) {
    /* forwarded here already by a node that thinks this one holds the chat, or held by this
     * node's previous life: the lease has to expire first */
    orch__api_unavailable(req, (ns->refused_left_ms + 999) / 1000,
                          "chat %s is held by a node that does not answer; its lease expires "
                          "first",
                          chat_id);
    return;
  }
  if (orch__proxy_forward(ns->px, req, ns->refused_url, chat_id, ns->id, ns->refused_left_ms,
                          stage) != 0)
    orch__api_error(req, 503, "unavailable", "chat %s could not be forwarded to its node", chat_id);
}

static void on_checked(void *ud, int status, const char *error, const char *body, size_t len) {
  struct orch_nodes *ns = ud;
  char want[64];
  snprintf(want, sizeof want, "\"node_id\":\"%s\"", ns->id);
  if (status != 200 || memmem(body, len, want, strlen(want)) == NULL)
    orch__node_fail_stop(
        ns,
        "CEREA_NODE_URL does not reach this node (GET %s/v1/node: %s): other nodes "
        "could not forward requests to it",
        ns->url,
        status ? (status == 200 ? "another node answered" : "an HTTP error answered") : error);
  orch__node_ready(ns);
}

static void on_node(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  json_t *j = json_pack("{s:s,s:s,s:b,s:I}", "node_id", o->nodes->id, "url", o->nodes->url, "ready",
                        o->nodes->ready, "chats", (json_int_t)o->chats.len);
  orch__api_json(req, 200, j);
}

int orch__routes_nodes(struct orch *o, struct sbx_error *err) {
  int rc = orch__nodes_start(o, err);
  struct orch_nodes *ns = o->nodes;
  if (rc != 0 || ns == NULL)
    return rc;
  if ((rc = orch__proxy_new(o, &ns->px, err)) != 0)
    return rc;
  tp_route(o->tp, "GET", "/v1/node", 0, on_node, o);
  char url[400];
  snprintf(url, sizeof url, "%s/v1/node", ns->url);
  if ((rc = orch__proxy_get(ns->px, url, NODES_CHECK_MS, on_checked, ns)) != 0)
    return sbx_error_set(err, rc, "nodes: the check of CEREA_NODE_URL could not start");
  return 0;
}

void orch__api_nodes_stop(struct orch *o) {
  struct orch_nodes *ns = o->nodes;
  if (ns == NULL)
    return;
  orch__proxy_free(ns->px); /* forwarded requests end here */
  ns->px = NULL;
  orch__nodes_stop(o);
}
