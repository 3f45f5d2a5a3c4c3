/* api_nodes.c -- the HTTP side of nodes (nodes.c keeps the leases): GET /v1/node, and the check
 * at start that CEREA_NODE_URL reaches this node (over proxy.c, libcurl on the loop).
 *
 * What it does not do: take or renew leases (nodes.c), forward a request for a chat another node
 * holds (api.c's orch__node_forward), or HTTP itself (proxy.c, the transport).
 */
#include "api.h"
#include "nodes.h"
#include "transport.h"

#include <string.h>

#define NODES_CHECK_MS 5000 /* the start's check of CEREA_NODE_URL */

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
