/* api_turns.c -- turns: open one, finish it with the answer (scheduling its python blocks).
 *
 * POST /v1/chats/{chat}/turns -> 201 {turn_id} once durable (backend only).
 * POST /v1/turns/{turn}/finish {answer} -> 200 {turn_id, runs: [run_id, ...]}: each fenced python
 *   block of the answer becomes an `auto` run with the turn's id, in order (turn.c); answered
 *   once the turn and every run are durable.  A second finish -> 409.
 * What it does not do: finish the turn (turn.c does), or wait on its tool runs (the backend does,
 * with wait_s).
 */
#include "api.h"
#include "transport.h"

#include <string.h>

static int backend_only(struct orch *o, struct tp_req *req) {
  return orch__api_backend_only(o, req, "turns");
}

struct open_ctx {
  struct tp_req *req;
  struct store_turn turn;
};

static void on_turn_opened(int rc, const struct sbx_error *err, void *ud) {
  struct open_ctx *t = ud;
  if (rc != 0) {
    orch__api_error(t->req, 500, "storage", "turn not stored: %s",
                    err ? err->msg : sbx_strerror(rc));
  } else {
    json_t *j = json_object();
    json_object_set_new(j, "turn_id", json_string(t->turn.id));
    json_object_set_new(j, "chat_id", json_string(t->turn.chat_id));
    json_object_set_new(j, "state", json_string("open"));
    orch__api_json(t->req, 201, j);
  }
  tp_req_release(t->req);
  sbx_free(t);
}

static void on_open_turn(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  if (backend_only(o, req))
    return;
  struct orch_chat *c = orch__api_chat(o, req, tp_req_param(req, "chat"), ORCH_API_BACKEND, 0);
  if (c == NULL)
    return;
  struct open_ctx *t = sbx_calloc(1, sizeof(*t));
  if (t == NULL) {
    orch__api_error(req, 500, "internal", "out of memory");
    return;
  }
  t->req = req;
  store_new_id(t->turn.id);
  snprintf(t->turn.chat_id, sizeof(t->turn.chat_id), "%s", c->id);
  t->turn.state = STORE_TURN_OPEN;
  t->turn.created_at = sbx_now_wall_ms();
  tp_req_hold(req);
  if (store_turn_put(o->st, &t->turn, on_turn_opened, t) != 0) {
    tp_req_release(req);
    sbx_free(t);
    orch__api_error(req, 500, "internal", "turn could not be queued");
  }
}

static void on_finished(void *ud, int rc, const struct orch_turn *t) {
  struct tp_req *req = ud;
  if (rc != 0) {
    orch__api_error(req, 500, "storage", "the turn's runs could not be stored");
  } else {
    json_t *ids = json_array();
    for (size_t i = 0; i < t->n_runs; i++)
      json_array_append_new(ids, json_string(t->run_ids[i]));
    json_t *j = json_object();
    json_object_set_new(j, "turn_id", json_string(t->rec.id));
    json_object_set_new(j, "runs", ids);
    orch__api_json(req, 200, j);
  }
  tp_req_release(req);
}

static void on_finish_turn(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  if (backend_only(o, req))
    return;
  const char *id = tp_req_param(req, "turn");
  struct store_turn st;
  if (!orch__valid_id(id) || store_turn_get(o->st, id, &st) != 0) {
    orch__api_error(req, 404, "not_found", "no turn %s", id ? id : "");
    return;
  }
  struct orch_chat *c;
  json_t *body = NULL;
  if (orch__chat_get(o, st.chat_id, &c) == SBX_EREMOTE) { /* nodes: another node's chat */
    orch__node_forward(o, req, st.chat_id, NULL);
    goto out;
  }
  body = orch__api_body_object(req);
  if (body == NULL)
    goto out;
  const char *answer = NULL;
  struct orch_field f[] = {ORCH_FIELD_REQUIRED("answer", "s", &answer)};
  if (orch__api_unpack(req, body, NULL, f, 1) != 0)
    goto out;
  tp_req_hold(req); /* answered once the turn and its runs are durable */
  int rc = orch__turn_finish(o, &st, answer, on_finished, req);
  if (rc != 0)
    tp_req_release(req);
  if (rc != 0)
    orch__api_fail(req, rc, ORCH_OP_ANY, "%s",
                   rc == SBX_ESTATE   ? "the turn is already finished"
                   : rc == SBX_ENOENT ? "the turn's chat is gone"
                                      : "the turn's writes could not be queued");
out:
  json_decref(body);
  store_turn_free(&st);
}

void orch__routes_turns(struct orch *o) {
  tp_route(o->tp, "POST", "/v1/chats/{chat}/turns", 64 * 1024, on_open_turn, o);
  tp_route(o->tp, "POST", "/v1/turns/{turn}/finish", 4u << 20, on_finish_turn, o);
}
