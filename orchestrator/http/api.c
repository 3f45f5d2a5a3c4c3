/* api.c -- helpers every API handler uses: JSON bodies and their fields (json_unpack_ex), the access checks
 * that decide 401 / 403 / 404 (or forward the request to the node that holds its chat), and the
 * answers that wait for a run's end (a wait_s, a result's answer, an immediate cancel).
 *
 * Access rules: no credential or a malformed one -> 401.  The API key reaches everything.  A page
 * token reaches only its chat: on a chat's own URL another chat's token gets 403; on a run or file
 * URL another chat's objects are 404 (their existence is not revealed).  A person's session (the
 * cookie, when no Bearer credential is given) reaches its person's own chats, every call of them;
 * another person's chat is 404 like a chat that does not exist; an ended or expired session is
 * 401, and a state-changing call whose Origin is not this server's 403.  What it does not do:
 * decide what a handler does with the object.
 */
#include "api.h"
#include "nodes.h"
#include "transport.h"

#include <string.h>

json_t *orch__api_body_object(struct tp_req *req) { return orch__api_body_object_flags(req, 0); }

json_t *orch__api_chat_object(struct orch *o, struct tp_req *req, struct orch_chat **c) {
  *c = orch__api_chat(o, req, tp_req_param(req, "chat"), ORCH_API_PERSON, 0);
  return *c ? orch__api_body_object(req) : NULL;
}

json_t *orch__api_body_object_flags(struct tp_req *req, size_t flags) {
  size_t len = 0;
  const char *body = tp_req_body(req, &len);
  json_error_t je;
  json_t *j = body && len ? json_loadb(body, len, JSON_REJECT_DUPLICATES | flags, &je) : NULL;
  if (j == NULL) {
    if (body == NULL || len == 0)
      orch__api_error(req, 400, "malformed_json", "a JSON object body is required");
    else
      orch__api_error(req, 400, "malformed_json", "malformed JSON at line %d column %d: %s",
                      je.line, je.column, je.text);
    return NULL;
  }
  if (!json_is_object(j)) {
    json_decref(j);
    orch__api_error(req, 400, "malformed_json", "the body must be a JSON object");
    return NULL;
  }
  return j;
}

int orch__api_unpack(struct tp_req *req, const json_t *obj, const char *within,
                     struct orch_field *f, size_t n) {
  for (size_t i = 0; i < n; i++) {
    json_t *v = json_object_get(obj, f[i].key);
    f[i].given = v != NULL && !json_is_null(v);
    json_error_t e;
    const char *why = NULL;
    if (!f[i].given && f[i].required)
      why = "required";
    else if (f[i].given && json_unpack_ex(v, &e, 0, f[i].fmt, f[i].out) != 0)
      why = e.text;
    if (why != NULL) {
      orch__api_error(req, 400, "invalid_field", "%s%s%s: %s", within ? within : "",
                      within ? "." : "", f[i].key, why);
      return -1;
    }
  }
  return 0;
}

/* Is the request's Origin this server's?  A cookie call that changes something must say so:
 * another site's page cannot (its Origin is its own), so a forged form or fetch fails. */
static int origin_ours(struct orch *o, struct tp_req *req) {
  const char *origin = tp_req_header(req, "origin");
  if (origin == NULL)
    return 0;
  char base[600];
  orch__api_base_url(o, req, base, sizeof base);
  if (base[0] && strcmp(origin, base) == 0)
    return 1;
  return o->cfg->public_url != NULL && strcmp(origin, o->cfg->public_url) == 0;
}

static int state_changing(struct tp_req *req) {
  const char *m = tp_req_method(req);
  return strcmp(m, "GET") != 0 && strcmp(m, "HEAD") != 0 && strcmp(m, "OPTIONS") != 0;
}

/* The connection's credential memo (auth.c), made on its first request that carries one. */
static struct orch_cred_memo *conn_memo(struct tp_req *req) {
  struct orch_cred_memo *m = tp_req_conn_data(req);
  if (m == NULL && (m = sbx_calloc(1, sizeof(*m))) != NULL) {
    tp_req_set_conn_data(req, m, orch__cred_memo_free);
    m = tp_req_conn_data(req); /* NULL when the peer is gone: hashed without one */
  }
  return m;
}

void orch__api_auth(struct orch *o, struct tp_req *req, const char *query_token,
                    struct orch_auth *a) {
  const char *authz = tp_req_header(req, "authorization");
  orch__auth_read_memo(authz, query_token, o->api_key_hash, o->host_key_hash,
                       authz || query_token ? conn_memo(req) : NULL, a);
  const char *v;
  size_t n;
  if (a->kind != ORCH_CRED_NONE || o->people == NULL ||
      !orch__cookie_find(tp_req_header(req, "cookie"), ORCH_SESSION_COOKIE, &v, &n))
    return; /* a Bearer credential decides, when there is one */
  a->cookie = 1;
  enum orch_session_life life = orch__session_check(o, v, n, a);
  if (life != ORCH_SESSION_LIVE) {
    a->kind = ORCH_CRED_BAD;
    a->expired = life != ORCH_SESSION_NONE;
    return;
  }
  a->origin_bad = state_changing(req) && !origin_ours(o, req);
}

static void read_auth(struct orch *o, struct tp_req *req, int query_ok, struct orch_auth *a) {
  orch__api_auth(o, req, query_ok ? tp_req_query(req, "token") : NULL, a);
}

int orch__api_deny_auth(struct tp_req *req, const struct orch_auth *a) {
  if (a->kind == ORCH_CRED_NONE) {
    orch__api_error(req, 401, "unauthorized", "missing credential (Authorization: Bearer ...)");
    return 1;
  }
  if (a->kind == ORCH_CRED_BAD) {
    orch__api_error(req, 401, "unauthorized",
                    a->expired  ? "the session ended or expired: sign in again"
                    : a->cookie ? "no such session: sign in"
                                : "wrong credential");
    return 1;
  }
  if (a->origin_bad) {
    orch__api_error(req, 403, "forbidden",
                    "a call made with the session cookie must come from this server's own pages "
                    "(its Origin header)");
    return 1;
  }
  return 0;
}

static int deny_missing(struct tp_req *req, const struct orch_auth *a) {
  return orch__api_deny_auth(req, a);
}

/* Is a page-token-shaped credential really its chat's token?  Its shape alone proves nothing:
 * "<chat id>.<64 zeros>" is a wrong credential (401), not a page token (403). */
static int page_token_real(struct orch *o, const struct orch_auth *a) {
  struct orch_chat *c = NULL;
  if (a->kind != ORCH_CRED_PAGE)
    return 0;
  int rc = orch__chat_get(o, a->chat_id, &c);
  if (rc == SBX_EREMOTE) { /* nodes: another node serves the chat; its token is in the store */
    struct store_chat sc = {0};
    int real =
        store_chat_get(o->st, a->chat_id, &sc) == 0 && orch__auth_allows(a, sc.id, sc.token_hash);
    store_chat_free(&sc);
    return real;
  }
  return rc == 0 && orch__auth_allows_chat(a, c);
}

/* Refuses a page token or the host key on a backend call: 403 for a real one, 401 for anything
 * else that is not the API key.  Returns nonzero once it answered. */
static int deny_not_backend(struct orch *o, struct tp_req *req, const struct orch_auth *a,
                            const char *what) {
  if (a->kind == ORCH_CRED_API)
    return 0;
  if (a->kind == ORCH_CRED_HOST || page_token_real(o, a))
    orch__api_error(req, 403, "forbidden", "%s needs the API key, not a page token", what);
  else
    orch__api_error(req, 401, "unauthorized",
                    a->kind == ORCH_CRED_NONE ? "missing credential" : "wrong credential");
  return 1;
}

int orch__host_elsewhere(const struct orch *o, const struct orch_auth *a, const char *chat_id) {
  return a->kind == ORCH_CRED_HOST && o->nodes != NULL && orch__map_get(&o->chats, chat_id) == NULL;
}

int orch__api_host_elsewhere(struct orch *o, struct tp_req *req, const struct orch_auth *a,
                             const char *chat_id) {
  if (!orch__host_elsewhere(o, a, chat_id))
    return 0;
  orch__api_error(req, 409, "conflict",
                  "chat %s is not held by this node: its kernel hosts reach only this node's "
                  "chats",
                  chat_id);
  return 1;
}

int orch__api_backend_only(struct orch *o, struct tp_req *req, const char *what) {
  struct orch_auth a;
  read_auth(o, req, 0, &a);
  if (a.kind == ORCH_CRED_SESSION && !a.origin_bad) {
    orch__api_error(req, 403, "forbidden", "%s needs the API key, not a session", what);
    return 1;
  }
  if (a.cookie && orch__api_deny_auth(req, &a))
    return 1;
  return deny_not_backend(o, req, &a, what);
}

int orch__api_admin_only(struct orch *o, struct tp_req *req, const char *what,
                         struct orch_auth *out) {
  struct orch_auth a;
  read_auth(o, req, 0, &a);
  if (out)
    *out = a;
  if (a.cookie && orch__api_deny_auth(req, &a))
    return 1;
  if (a.kind == ORCH_CRED_SESSION) {
    if (a.admin)
      return 0;
    orch__api_error(req, 403, "forbidden", "%s need an administrator", what);
    return 1;
  }
  return deny_not_backend(o, req, &a, what);
}

/* Forwarding (why not a redirect: docs/scale.md): a request that was forwarded already
 * (X-Cerea-Node) is not forwarded again but answered 503, and so is one whose owner is this node's
 * own URL under an older id (its previous life, dead: its leases expire within CEREA_LEASE_MS;
 * Retry-After says when). */
void orch__node_forward(struct orch *o, struct tp_req *req, const char *chat_id,
                        struct store_blob_stage **stage) {
  struct orch_nodes *ns = o->nodes;
  if (ns == NULL || !ns->ready) {
    orch__api_error(req, 503, "unavailable", "this node is starting; try again");
    return;
  }
  if (strcmp(ns->refused_chat, chat_id) != 0) { /* not the chat last refused: look again */
    struct orch_chat *c;
    if (orch__chat_get(o, chat_id, &c) != SBX_EREMOTE) {
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

/* A chat that could not be loaded (orch__chat_get's rc), answered by the error map. */
static void chat_unloaded(struct tp_req *req, const char *chat_id, int rc) {
  if (rc == SBX_ENOENT)
    orch__api_fail(req, rc, ORCH_OP_ANY, "no chat %s", chat_id);
  else if (rc == SBX_EBUSY) /* nodes: its lease is changing hands, or this node is starting */
    orch__api_fail(req, rc, ORCH_OP_ANY,
                   "chat %s cannot be loaded just now (its lease is changing hands); try again",
                   chat_id);
  else
    orch__api_fail(req, rc, ORCH_OP_ANY, "cannot load chat: %s", sbx_strerror(rc));
}

struct orch_chat *orch__api_chat_body(struct orch *o, struct tp_req *req, const char *chat_id,
                                      enum orch_api_who who, int query_ok,
                                      struct store_blob_stage **stage) {
  struct orch_auth a;
  read_auth(o, req, query_ok, &a);
  if (deny_missing(req, &a))
    return NULL;
  if (who == ORCH_API_BACKEND && a.kind != ORCH_CRED_SESSION &&
      deny_not_backend(o, req, &a, "this call"))
    return NULL;
  if (who == ORCH_API_PERSON && a.kind == ORCH_CRED_HOST) {
    orch__api_error(req, 403, "forbidden", "a kernel host may not make this call");
    return NULL;
  }
  if (a.kind == ORCH_CRED_PAGE && (!orch__valid_id(chat_id) || strcmp(a.chat_id, chat_id) != 0)) {
    orch__api_error(req, 403, "forbidden", "this page token belongs to another chat");
    return NULL;
  }
  if (orch__valid_id(chat_id) && orch__api_host_elsewhere(o, req, &a, chat_id))
    return NULL;
  struct orch_chat *c = NULL;
  int rc = orch__valid_id(chat_id) ? orch__chat_get(o, chat_id, &c) : SBX_ENOENT;
  if (rc == SBX_EREMOTE) { /* another node serves it (nodes.c) */
    orch__node_forward(o, req, chat_id, stage);
    return NULL;
  }
  if (rc == SBX_ENOENT && a.kind == ORCH_CRED_PAGE) { /* a page token names its own chat */
    orch__api_error(req, 401, "unauthorized", "wrong credential");
    return NULL;
  }
  if (rc != 0) {
    chat_unloaded(req, chat_id, rc);
    return NULL;
  }
  if (!orch__auth_allows_chat(&a, c)) {
    if (a.kind == ORCH_CRED_SESSION) /* another person's chat: as if there were none */
      orch__api_error(req, 404, "not_found", "no chat %s", chat_id);
    else
      orch__api_error(req, 401, "unauthorized", "wrong credential");
    return NULL;
  }
  return c;
}

int orch__api_run_body(struct orch *o, struct tp_req *req, const char *run_id,
                       struct orch_run **live, struct store_run *rec, struct orch_chat **chat,
                       struct store_blob_stage **stage) {
  struct orch_auth a;
  read_auth(o, req, 0, &a);
  *live = NULL;
  memset(rec, 0, sizeof(*rec));
  if (deny_missing(req, &a))
    return 1;
  struct orch_run *run = orch__valid_id(run_id) ? orch__map_get(&o->runs, run_id) : NULL;
  int rc = 0;
  if (run != NULL) { /* callers read the live run itself: only its ids are copied (no strdups) */
    memcpy(rec->id, run->rec.id, sizeof(rec->id));
    memcpy(rec->chat_id, run->rec.chat_id, sizeof(rec->chat_id));
  } else if (!orch__valid_id(run_id))
    rc = SBX_ENOENT;
  else
    rc = store_run_get(o->st, run_id, rec);
  if (rc != 0) {
    orch__api_fail(req, rc, ORCH_OP_ANY, rc == SBX_ENOENT ? "no run %s" : "cannot load run %s",
                   run_id);
    return 1;
  }
  if (orch__api_host_elsewhere(o, req, &a, rec->chat_id)) {
    store_run_free(rec);
    return 1;
  }
  struct orch_chat *c = NULL;
  if ((rc = orch__chat_get(o, rec->chat_id, &c)) == SBX_EREMOTE) { /* another node's (nodes.c) */
    orch__node_forward(o, req, rec->chat_id, stage);
    store_run_free(rec);
    return 1;
  }
  if (rc == SBX_EBUSY) { /* (any other failure hides the run: 404 below) */
    chat_unloaded(req, rec->chat_id, rc);
    store_run_free(rec);
    return 1;
  }
  if (run == NULL && rc == 0 && (run = orch__map_get(&o->runs, run_id)) != NULL) {
    /* nodes: the run went live with its chat just now (taken over from a node that died): the
     * caller reads the live run, not the stored record of the attempt the dead node had out */
    store_run_free(rec);
    memset(rec, 0, sizeof(*rec));
    memcpy(rec->id, run->rec.id, sizeof(rec->id));
    memcpy(rec->chat_id, run->rec.chat_id, sizeof(rec->chat_id));
  }
  if (rc != 0 || !orch__auth_allows_chat(&a, c)) {
    store_run_free(rec);
    if (a.kind == ORCH_CRED_PAGE && c != NULL && strcmp(a.chat_id, c->id) == 0)
      orch__api_error(req, 401, "unauthorized", "wrong credential");
    else
      orch__api_error(req, 404, "not_found", "no run %s", run_id);
    return 1;
  }
  *live = run;
  if (chat)
    *chat = c;
  return 0;
}

int orch__api_live_run_body(struct orch *o, struct tp_req *req, struct orch_run **live,
                            struct orch_chat **chat, struct store_blob_stage **stage) {
  struct store_run rec;
  if (orch__api_run_body(o, req, tp_req_param(req, "run"), live, &rec, chat, stage) != 0)
    return -1;
  store_run_free(&rec);
  return 0;
}

void orch__api_answer_end(void *ud, struct orch *o, struct orch_run *run, int rc,
                          const struct sbx_error *err) {
  struct tp_req *req = ud;
  size_t len = 0;
  const char *text = rc == 0 ? orch__run_end_text(o, run, &len) : NULL;
  if (rc == 0 && text == NULL)
    orch__api_error(req, 500, "internal", "out of memory");
  else if (rc == 0)
    orch__api_text(req, 200, text, len);
  else
    orch__api_fail(req, rc, ORCH_OP_STORE, "%s", err && err->msg[0] ? err->msg : sbx_strerror(rc));
  tp_req_release(req);
}

/* ---- waiters: requests answered when a run ends ------------------------------------------- */

struct waiter {
  struct orch_settle *settle; /* its registration with the run; NULL once called back */
  struct orch *o;
  struct tp_req *req; /* held */
  struct orch_run *run;
  uv_timer_t timer;
  int status; /* HTTP status of the answer (200/201) */
};

static void on_waiter_timer_closed(uv_handle_t *h) { sbx_free(h->data); }

/* The waiter is done (answered, or its client gone): its registration, request and timer go. */
static void waiter_free(struct waiter *w) {
  if (w->settle)
    orch__settle_cancel(w->settle);
  tp_req_on_close(w->req, NULL, NULL);
  tp_req_release(w->req);
  uv_timer_stop(&w->timer);
  uv_close((uv_handle_t *)&w->timer, on_waiter_timer_closed);
}

static void on_waiter_end(void *ud, struct orch *o, struct orch_run *run, int rc,
                          const struct sbx_error *err) {
  (void)rc, (void)err;
  struct waiter *w = ud;
  w->settle = NULL;
  size_t len = 0;
  const char *text = orch__run_end_text(o, run, &len);
  if (text != NULL)
    orch__api_text(w->req, w->status, text, len);
  else
    orch__api_error(w->req, 500, "internal", "out of memory");
  waiter_free(w);
}

static void on_waiter_timeout(uv_timer_t *t) {
  struct waiter *w = t->data;
  orch__api_json(w->req, w->status, orch__run_json(w->o, &w->run->rec));
  waiter_free(w);
}

static void on_waiter_gone(struct tp_req *req, void *ud) {
  (void)req;
  waiter_free(ud);
}

void orch__waiter_add(struct orch *o, struct tp_req *req, struct orch_run *run, int status,
                      uint64_t wait_ms) {
  struct waiter *w = sbx_calloc(1, sizeof(*w));
  if (w == NULL || (w->settle = orch__run_on_end(run, on_waiter_end, w)) == NULL) {
    sbx_free(w);
    orch__api_json(req, status, orch__run_json(o, &run->rec));
    return;
  }
  w->o = o;
  w->req = req;
  w->run = run;
  w->status = status;
  tp_req_hold(req);
  tp_req_on_close(req, on_waiter_gone, w);
  uv_timer_init(o->loop, &w->timer);
  w->timer.data = w;
  uv_timer_start(&w->timer, on_waiter_timeout, wait_ms, 0);
}

void orch__api_base_url(struct orch *o, struct tp_req *req, char *out, size_t cap) {
  const char *host = tp_req_header(req, "host");
  if (host == NULL)
    host = tp_req_header(req, ":authority");
  if (!orch__host_ok(host)) {
    *out = '\0';
    return;
  }
  snprintf(out, cap, "%s://%s", o->cfg->tls_cert ? "https" : "http", host);
}
