/* api_runs.c -- runs as the backend sees them: create (answered once durable), read, cancel, and
 * the wait_s long poll.
 *
 * POST /v1/chats/{chat}/runs {code, origin, turn_id?, timeout_s?, wait_s?, idempotency_key?}
 *   -> 201 the run object once the run is durable (or, with wait_s, once it ended or wait_s
 *   passed); the same idempotency_key again -> 200 the first run.  With CHAT_CODE_EXECUTION=off
 *   the run is recorded `rejected` with an error saying so.
 * GET /v1/runs/{run}?wait_s=N -> the run object (waiting for its end up to N s).
 * POST /v1/runs/{run}/cancel -> queued/paused: cancelled at once; dispatched/running: the page is
 *   sent `cancel`, and the run ends when the page answers or after a grace.
 * POST /v1/runs/{run}/input {text} -> 200 {delivered: true} while the run waits in input() (its
 *   page is sent `input`), 409 not_waiting otherwise; text at most ORCH_INPUT_BYTES.
 * Waiting requests are called back by the run's end (api.c's waiters), never by polling; each
 * has a timer for its own wait_s.  What it does not do: page reports (api_page.c).
 */
#include "api.h"
#include "transport.h"

#include <string.h>

/* ---- helpers ------------------------------------------------------------------------------ */

/* wait_s, 0..ORCH_WAIT_S_MAX; -1 when out of range.  Written so that NaN fails too (strtod
 * accepts "nan"): every comparison with NaN is false. */
static double wait_in_range(double v) { return v >= 0 && v <= ORCH_WAIT_S_MAX ? v : -1; }

/* wait_s from the query (absent: 0); -1 invalid. */
static double query_wait(const char *q) {
  if (q == NULL)
    return 0;
  char *end;
  double v = strtod(q, &end);
  return end == q || *end ? -1 : wait_in_range(v);
}

static void answer_or_wait(struct orch *o, struct tp_req *req, struct orch_run *run, int status,
                           double wait_s) {
  if (run->state == ORCH_RUN_DONE || wait_s <= 0)
    orch__api_json(req, status, orch__run_json(o, &run->rec));
  else
    orch__waiter_add(o, req, run, status, (uint64_t)(wait_s * 1000));
}

/* ---- create ------------------------------------------------------------------------------- */

/* A run read from the store, answered with `status`. */
static void answer_stored(struct orch *o, struct tp_req *req, const char *run_id, int status) {
  struct store_run r;
  if (store_run_get(o->st, run_id, &r) != 0) {
    orch__api_error(req, 500, "storage", "cannot read run %s", run_id);
    return;
  }
  orch__api_json(req, status, orch__run_json(o, &r));
  store_run_free(&r);
}

/* The run an idempotency key already named: 200, waiting up to wait_s when it is live. */
static void answer_existing(struct orch *o, struct tp_req *req, const char *run_id, double wait_s) {
  struct orch_run *live = orch__map_get(&o->runs, run_id);
  if (live)
    answer_or_wait(o, req, live, 200, wait_s);
  else
    answer_stored(o, req, run_id, 200);
}

struct create_ctx {
  struct orch *o;
  struct tp_req *req; /* held until answered */
  char chat_id[STORE_ID_LEN + 1];
  char run_id[STORE_ID_LEN + 1];
  char *idem; /* the idempotency key, or NULL */
  double wait_s;
};

static void on_created(void *ud, int rc, const struct sbx_error *err, struct orch_run *run) {
  struct create_ctx *ctx = ud;
  struct orch *o = ctx->o;
  store_id other;
  if (rc == SBX_EEXIST && ctx->idem) {
    if (store_run_by_idempotency(o->st, ctx->chat_id, ctx->idem, other) == 0)
      answer_existing(o, ctx->req, other, ctx->wait_s);
    else
      orch__api_error(ctx->req, 409, "conflict", "idempotency key already used");
  } else if (rc != 0) {
    orch__api_fail(ctx->req, rc, ORCH_OP_STORE, "run not stored: %s",
                   err ? err->msg : sbx_strerror(rc));
  } else if (run != NULL) {
    answer_or_wait(o, ctx->req, run, 201, ctx->wait_s);
  } else {
    answer_stored(o, ctx->req, ctx->run_id, 201); /* it already ended */
  }
  tp_req_release(ctx->req);
  sbx_free(ctx->idem);
  sbx_free(ctx);
}

/* A new run's origin, turn id and idempotency key, each within its bound (and the origin one of
 * ours).  Answers 400 and returns nonzero when one is not. */
static int labels_ok(struct tp_req *req, const char *origin, const char *turn_id,
                     const char *idem) {
  static const struct {
    const char *name;
    size_t max;
  } caps[] = {{"origin", 16}, {"turn_id", 64}, {"idempotency_key", 200}};
  const char *capped[] = {origin, turn_id, idem};
  for (size_t i = 0; i < SBX_ARRAY_SIZE(caps); i++)
    if (capped[i] && strlen(capped[i]) > caps[i].max) {
      orch__api_error(req, 400, "invalid_field", "%s: a string of at most %zu bytes", caps[i].name,
                      caps[i].max);
      return -1;
    }
  if (strcmp(origin, "tool") && strcmp(origin, "auto") && strcmp(origin, "user")) {
    orch__api_error(req, 400, "invalid_field", "origin: one of tool, auto, user");
    return -1;
  }
  return 0;
}

/* The turn a new run says it belongs to is a turn of its chat.  Answers 404 and returns nonzero
 * when it is not. */
static int turn_ok(struct orch *o, struct tp_req *req, const struct orch_chat *c,
                   const char *turn_id) {
  struct store_turn t;
  if (!orch__valid_id(turn_id) || store_turn_get(o->st, turn_id, &t) != 0) {
    orch__api_error(req, 404, "not_found", "turn_id: no turn %s", turn_id);
    return -1;
  }
  int same = strcmp(t.chat_id, c->id) == 0;
  store_turn_free(&t);
  if (!same) {
    orch__api_error(req, 404, "not_found", "turn_id: no turn %s in this chat", turn_id);
    return -1;
  }
  return 0;
}

static void on_create_run(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  struct orch_chat *c;
  json_t *body = orch__api_chat_object(o, req, &c);
  if (body == NULL)
    return;
  const char *code = NULL, *origin = NULL, *turn_id = NULL, *idem = NULL;
  json_int_t timeout = 0;
  double wait_s = 0;
  enum { F_CODE, F_ORIGIN, F_TURN, F_IDEM, F_TIMEOUT, F_WAIT, F__N };
  struct orch_field fields[F__N] = {
      [F_CODE] = ORCH_FIELD_REQUIRED("code", "s", &code),
      [F_ORIGIN] = ORCH_FIELD("origin", "s", &origin),
      [F_TURN] = ORCH_FIELD("turn_id", "s", &turn_id),
      [F_IDEM] = ORCH_FIELD("idempotency_key", "s", &idem),
      [F_TIMEOUT] = ORCH_FIELD("timeout_s", "I", &timeout),
      [F_WAIT] = ORCH_FIELD("wait_s", "F", &wait_s),
  };
  if (orch__api_unpack(req, body, NULL, fields, F__N) != 0)
    goto out;
  if (origin == NULL)
    origin = "tool";
  if (labels_ok(req, origin, turn_id, idem) != 0 || (turn_id && turn_ok(o, req, c, turn_id) != 0))
    goto out;
  int timeout_s = o->rt.time_limit_s;
  if (fields[F_TIMEOUT].given) {
    if (timeout < 1 || timeout > o->rt.time_limit_s) {
      orch__api_error(req, 400, "invalid_field",
                      "timeout_s: whole seconds from 1 to %d (CODE_TIME_LIMIT_S)",
                      o->rt.time_limit_s);
      goto out;
    }
    timeout_s = (int)timeout;
  }
  if ((wait_s = wait_in_range(wait_s)) < 0) {
    orch__api_error(req, 400, "invalid_field", "wait_s: seconds from 0 to %d", ORCH_WAIT_S_MAX);
    goto out;
  }
  if (idem) {
    store_id existing;
    if (store_run_by_idempotency(o->st, c->id, idem, existing) == 0) {
      answer_existing(o, req, existing, wait_s);
      goto out;
    }
  }
  struct orch_run *run = orch__run_new(o, c, code, origin, turn_id, timeout_s, idem);
  struct create_ctx *ctx = sbx_calloc(1, sizeof(*ctx));
  if (run == NULL || ctx == NULL || (idem && (ctx->idem = sbx_strdup(idem)) == NULL)) {
    if (run)
      orch__run_free(run);
    if (ctx)
      sbx_free(ctx->idem);
    sbx_free(ctx);
    orch__api_error(req, 500, "internal", "out of memory");
    goto out;
  }
  ctx->o = o;
  ctx->req = req;
  snprintf(ctx->chat_id, sizeof(ctx->chat_id), "%s", c->id);
  snprintf(ctx->run_id, sizeof(ctx->run_id), "%s", run->id);
  ctx->wait_s = wait_s;
  tp_req_hold(req);
  if (orch__run_create(o, c, run, on_created, ctx) != 0) { /* run freed */
    tp_req_release(req);
    sbx_free(ctx->idem);
    sbx_free(ctx);
    orch__api_error(req, 500, "internal", "run could not be queued");
  }
out:
  json_decref(body);
}

/* ---- read, cancel ------------------------------------------------------------------------- */

static void on_get_run(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  struct orch_run *live;
  struct store_run rec;
  if (orch__api_run(o, req, tp_req_param(req, "run"), &live, &rec, NULL) != 0)
    return;
  double wait_s = query_wait(tp_req_query(req, "wait_s"));
  if (wait_s < 0)
    orch__api_error(req, 400, "invalid_field", "wait_s: seconds from 0 to %d", ORCH_WAIT_S_MAX);
  else if (live)
    answer_or_wait(o, req, live, 200, wait_s);
  else
    orch__api_json(req, 200, orch__run_json(o, &rec));
  store_run_free(&rec);
}

static void on_cancel(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  struct orch_run *run;
  if (orch__api_live_run(o, req, &run, NULL) != 0)
    return;
  if (run == NULL) {
    orch__api_error(req, 409, "conflict", "the run has already ended");
    return;
  }
  tp_req_hold(req); /* a run that ends now is answered once durable (orch__api_answer_end) */
  int rc = orch__run_cancel(o, run, orch__api_answer_end, req);
  if (rc == 0)
    return;
  tp_req_release(req);
  if (rc == SBX_EINPROGRESS)
    orch__api_json(req, 202, orch__run_json(o, &run->rec)); /* the page was sent `cancel` */
  else
    orch__api_fail(req, rc, ORCH_OP_ANY, "%s",
                   rc == SBX_ESTATE ? "the run has already ended" : sbx_strerror(rc));
}

static void on_input(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  struct orch_run *run;
  if (orch__api_live_run(o, req, &run, NULL) != 0)
    return;
  json_t *body = orch__api_body_object(req);
  if (body == NULL)
    return;
  const char *text = NULL;
  struct orch_field f[] = {ORCH_FIELD_REQUIRED("text", "s", &text)};
  if (orch__api_unpack(req, body, NULL, f, 1) != 0)
    goto out;
  if (strlen(text) > ORCH_INPUT_BYTES) {
    orch__api_error(req, 400, "invalid_field", "text: at most %u bytes", ORCH_INPUT_BYTES);
    goto out;
  }
  int rc = run ? orch__run_give_input(o, run, text) : SBX_ESTATE;
  if (rc == SBX_ESTATE)
    orch__api_fail(req, rc, ORCH_OP_INPUT, "the run is not waiting for input (%s)",
                   run ? orch__run_state_name(run->state) : "it has ended");
  else if (rc != 0)
    orch__api_fail(req, rc, ORCH_OP_INPUT, "the input could not be sent: %s", sbx_strerror(rc));
  else {
    o->m.inputs_given++;
    orch__api_json(req, 200, json_pack("{s:b}", "delivered", 1));
  }
out:
  json_decref(body);
}

void orch__routes_runs(struct orch *o) {
  tp_route(o->tp, "POST", "/v1/chats/{chat}/runs", 2u << 20, on_create_run, o);
  tp_route(o->tp, "GET", "/v1/runs/{run}", 0, on_get_run, o);
  tp_route(o->tp, "POST", "/v1/runs/{run}/cancel", 64 * 1024, on_cancel, o);
  tp_route(o->tp, "POST", "/v1/runs/{run}/input", 8 * ORCH_INPUT_BYTES, on_input, o);
}
