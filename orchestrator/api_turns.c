/* api_turns.c -- turns: open one, finish it with the answer (scheduling its python blocks).
 *
 * POST /v1/chats/{chat}/turns -> 201 {turn_id} once durable (backend only).
 * POST /v1/turns/{turn}/finish {answer} -> 200 {turn_id, runs: [run_id, ...]}: each fenced python
 *   block of the answer becomes an `auto` run with the turn's id, in order (turn.c); answered
 *   once the turn and every run are durable.  A second finish -> 409.
 * What it does not do: wait on the turn's tool runs (the backend does, with wait_s).
 */
#include "internal.h"
#include "transport.h"

#include <string.h>

static int backend_only(struct orch *o, struct tp_req *req) {
  return orch__api_backend_only(o, req, "turns");
}

struct turn_ctx {
  struct orch *o;
  struct tp_req *req;
  char chat_id[STORE_ID_LEN + 1];
  struct store_turn turn;
  struct orch_run **runs;
  size_t n_runs, pending;
  int failed;
};

static void turn_ctx_free(struct turn_ctx *t) {
  for (size_t i = 0; i < t->n_runs; i++)
    if (t->runs[i])
      orch__run_free(t->runs[i]);
  sbx_free(t->runs);
  sbx_free(t->turn.answer);
  sbx_free(t);
}

static void on_turn_opened(int rc, const struct sbx_error *err, void *ud) {
  struct turn_ctx *t = ud;
  if (rc != 0) {
    orch__api_error(t->req, 500, "storage", "turn not stored: %s", err ? err->msg : sbx_strerror(rc));
  } else {
    json_t *j = json_object();
    json_object_set_new(j, "turn_id", json_string(t->turn.id));
    json_object_set_new(j, "chat_id", json_string(t->turn.chat_id));
    json_object_set_new(j, "state", json_string("open"));
    orch__api_json(t->req, 201, j);
  }
  tp_req_release(t->req);
  turn_ctx_free(t);
}

static void on_open_turn(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  if (backend_only(o, req))
    return;
  struct orch_chat *c = orch__api_chat(o, req, tp_req_param(req, "chat"), 0, 0);
  if (c == NULL)
    return;
  struct turn_ctx *t = sbx_calloc(1, sizeof(*t));
  if (t == NULL) {
    orch__api_error(req, 500, "internal", "out of memory");
    return;
  }
  t->o = o;
  t->req = req;
  store_new_id(t->turn.id);
  snprintf(t->turn.chat_id, sizeof(t->turn.chat_id), "%s", c->id);
  t->turn.state = STORE_TURN_OPEN;
  t->turn.created_at = sbx_now_wall_ms();
  tp_req_hold(req);
  if (store_turn_put(o->st, &t->turn, on_turn_opened, t) != 0) {
    tp_req_release(req);
    turn_ctx_free(t);
    orch__api_error(req, 500, "internal", "turn could not be queued");
  }
}

/* Each write of a finish (the turn, then every run) completes here; the last one answers. */
static void on_finish_part(int rc, const struct sbx_error *err, void *ud) {
  struct turn_ctx *t = ud;
  if (rc != 0 && !t->failed) {
    t->failed = rc;
    sbx_log(SBX_LOG_ERROR, "turns", "turn %s: write failed: %s", t->turn.id, err ? err->msg : sbx_strerror(rc));
  }
  if (--t->pending > 0)
    return;
  struct orch *o = t->o;
  orch__map_del(&o->finishing_turns, t->turn.id);
  if (t->failed) {
    orch__api_error(t->req, 500, "storage", "the turn's runs could not be stored");
  } else {
    struct orch_chat *c = NULL;
    json_t *ids = json_array();
    orch__chat_get(o, t->chat_id, &c);
    for (size_t i = 0; i < t->n_runs; i++) {
      json_array_append_new(ids, json_string(t->runs[i]->id));
      if (c)
        orch__run_accept(o, c, t->runs[i]); /* in order: queued behind each other */
      else
        orch__run_free(t->runs[i]);
      t->runs[i] = NULL;
    }
    json_t *j = json_object();
    json_object_set_new(j, "turn_id", json_string(t->turn.id));
    json_object_set_new(j, "runs", ids);
    orch__api_json(t->req, 200, j);
  }
  tp_req_release(t->req);
  turn_ctx_free(t);
}

static void on_finish_turn(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  if (backend_only(o, req))
    return;
  const char *id = tp_req_param(req, "turn");
  struct store_turn st;
  if (!orch__api_valid_id(id) || store_turn_get(o->st, id, &st) != 0) {
    orch__api_error(req, 404, "not_found", "no turn %s", id ? id : "");
    return;
  }
  json_t *body = orch__api_body_object(req);
  struct turn_ctx *t = NULL;
  char **blocks = NULL;
  size_t nb = 0;
  if (body == NULL)
    goto out;
  json_t *ja = json_object_get(body, "answer");
  if (!json_is_string(ja)) {
    orch__api_error(req, 400, "invalid_field", "answer: the answer text is required");
    goto out;
  }
  struct orch_turn turn = {.state = st.state == STORE_TURN_FINISHED ? ORCH_TURN_FINISHED : ORCH_TURN_OPEN};
  snprintf(turn.id, sizeof(turn.id), "%s", st.id);
  /* The stored state says open until this finish is durable: a second finish arriving in the
   * meantime must not schedule the answer's blocks again. */
  if (orch__turn_finish(&turn) != 0 || orch__map_get(&o->finishing_turns, st.id) != NULL) {
    orch__api_error(req, 409, "conflict", "the turn is already finished");
    goto out;
  }
  struct orch_chat *c = NULL;
  if (orch__chat_get(o, st.chat_id, &c) != 0) {
    orch__api_error(req, 404, "not_found", "the turn's chat is gone");
    goto out;
  }
  if (orch__python_blocks(json_string_value(ja), &blocks, &nb) != 0 ||
      (t = sbx_calloc(1, sizeof(*t))) == NULL || (nb && (t->runs = sbx_calloc(nb, sizeof(*t->runs))) == NULL)) {
    orch__api_error(req, 500, "internal", "out of memory");
    goto out;
  }
  t->o = o;
  t->req = req;
  snprintf(t->chat_id, sizeof(t->chat_id), "%s", c->id);
  t->turn = st;
  st.answer = NULL; /* moved */
  t->turn.state = STORE_TURN_FINISHED;
  sbx_free(t->turn.answer);
  t->turn.answer = sbx_strdup(json_string_value(ja));
  t->turn.finished_at = sbx_now_wall_ms();
  for (size_t i = 0; i < nb; i++) {
    t->runs[i] = orch__run_new(o, c, blocks[i], "auto", t->turn.id, o->rt.time_limit_s, NULL);
    if (t->runs[i] == NULL) {
      orch__api_error(req, 500, "internal", "out of memory");
      goto out;
    }
    t->n_runs++;
  }
  /* Queue every write; one callback each; the answer goes once all are durable. */
  t->pending = 1 + t->n_runs;
  if (orch__map_put(&o->finishing_turns, t->turn.id, t) != 0) {
    orch__api_error(req, 500, "internal", "out of memory");
    goto out;
  }
  tp_req_hold(req);
  if (store_turn_put(o->st, &t->turn, on_finish_part, t) != 0) {
    tp_req_release(req);
    orch__map_del(&o->finishing_turns, t->turn.id);
    orch__api_error(req, 500, "internal", "writes could not be queued");
    goto out;
  }
  for (size_t i = 0; i < t->n_runs; i++)
    if (store_run_put(o->st, &t->runs[i]->rec, on_finish_part, t) != 0) {
      t->failed = SBX_ENOMEM;
      t->pending -= t->n_runs - i; /* the queued ones still call back */
      break;
    }
  t = NULL;
out:
  if (t)
    turn_ctx_free(t);
  orch__python_blocks_free(blocks, nb);
  json_decref(body);
  store_turn_free(&st);
}

void orch__routes_turns(struct orch *o) {
  tp_route(o->tp, "POST", "/v1/chats/{chat}/turns", 64 * 1024, on_open_turn, o);
  tp_route(o->tp, "POST", "/v1/turns/{turn}/finish", 4u << 20, on_finish_turn, o);
}
