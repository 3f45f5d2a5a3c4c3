/* api_admin.c -- the operator's views and runtime settings (API key only).
 *
 * GET /v1/admin/runs      live runs (state, page, attempts, deadlines) + the latest stored runs
 *                         (state, status, origin, restarted, attempts, times)
 * GET /v1/admin/pages     attached pages of every loaded chat (state, kernel, active)
 * GET /v1/admin/settings  runtime settings and the fixed ones
 * PUT /v1/admin/settings  {retention_days?, time_limit_s?, paused_wait_ms?, page_grace_ms?}:
 *     validated, persisted (store settings), applied; a retention change re-dates every kept
 *     artifact (store_retention_apply) and the sweeper follows it.  Answered once durable.
 * What it does not do: change settings that need a restart (listen, data dir, TLS, execution).
 */
#include "api.h"
#include "nodes.h"
#include "transport.h"

#include <string.h>

static int admin_only(struct orch *o, struct tp_req *req) {
  return orch__api_admin_only(o, req, "admin calls", NULL);
}

static void on_admin_runs(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  if (admin_only(o, req))
    return;
  json_t *live = json_array();
  size_t i = 0;
  const char *k;
  void *v;
  uint64_t now = sbx_now_mono_ms();
  while (orch__map_next(&o->runs, &i, &k, &v)) {
    struct orch_run *r = v;
    json_t *j = json_object();
    json_object_set_new(j, "run_id", json_string(r->id));
    json_object_set_new(j, "chat_id", json_string(r->rec.chat_id));
    json_object_set_new(j, "state", json_string(orch__run_state_name(r->state)));
    json_object_set_new(j, "attempts", json_integer(r->attempts));
    json_object_set_new(j, "page_id", r->page_id[0] ? json_string(r->page_id) : json_null());
    json_object_set_new(j, "origin", json_string(r->rec.origin ? r->rec.origin : ""));
    json_object_set_new(j, "code", json_string(r->rec.code ? r->rec.code : ""));
    json_object_set_new(j, "restarted", json_boolean(r->rec.restarted));
    json_object_set_new(j, "in_state_ms", json_integer((json_int_t)(now - r->state_since_ms)));
    json_object_set_new(j, "abandon_in_ms",
                        r->wait_deadline_ms ? json_integer((json_int_t)(r->wait_deadline_ms - now))
                                            : json_null());
    json_object_set_new(j, "created_at", json_integer(r->rec.created_at));
    json_array_append_new(live, j);
  }
  json_t *recent = json_array();
  struct store_run *rv = NULL;
  size_t n = 0;
  if (store_run_list(o->st, NULL, 50, &rv, &n) == 0) {
    for (size_t x = 0; x < n; x++) {
      json_t *j = json_object();
      json_object_set_new(j, "run_id", json_string(rv[x].id));
      json_object_set_new(j, "chat_id", json_string(rv[x].chat_id));
      json_object_set_new(j, "state", json_string(rv[x].state ? rv[x].state : ""));
      json_object_set_new(j, "status", rv[x].status ? json_string(rv[x].status) : json_null());
      json_object_set_new(j, "attempts", json_integer(rv[x].attempts));
      json_object_set_new(j, "origin", json_string(rv[x].origin ? rv[x].origin : ""));
      json_object_set_new(j, "code", json_string(rv[x].code ? rv[x].code : ""));
      json_object_set_new(j, "restarted", json_boolean(rv[x].restarted));
      json_object_set_new(j, "created_at", json_integer(rv[x].created_at));
      json_object_set_new(j, "duration_ms",
                          rv[x].started_at && rv[x].finished_at
                              ? json_integer(rv[x].finished_at - rv[x].started_at)
                              : json_null());
      json_array_append_new(recent, j);
    }
    store_run_list_free(rv, n);
  }
  json_t *j = json_object();
  json_object_set_new(j, "live", live);
  json_object_set_new(j, "recent", recent);
  orch__api_json(req, 200, j);
}

/* The last minutes of runs per second, run duration p50/p95 and live pages, for the charts. */
static void on_admin_history(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  if (admin_only(o, req))
    return;
  orch__api_json(req, 200, orch__metrics_history_json(o));
}

static void on_admin_pages(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  if (admin_only(o, req))
    return;
  json_t *arr = json_array();
  size_t i = 0;
  const char *k;
  void *v;
  while (orch__map_next(&o->chats, &i, &k, &v)) {
    struct orch_chat *c = v;
    struct orch_page *active = orch__chat_active_page(c);
    struct sbx_list *it;
    SBX_LIST_FOREACH(it, &c->pages) {
      struct orch_page *p = SBX_CONTAINER_OF(it, struct orch_page, chat_link);
      json_t *j = json_object();
      json_object_set_new(j, "chat_id", json_string(c->id));
      json_object_set_new(j, "page_id", json_string(p->id));
      json_object_set_new(j, "state", json_string(orch__page_state_name(p->state)));
      json_object_set_new(j, "kernel", json_string(orch__kernel_state_name(p->kernel)));
      json_object_set_new(j, "active", json_boolean(p == active));
      json_array_append_new(arr, j);
    }
  }
  json_t *j = json_object();
  json_object_set_new(j, "pages", arr);
  orch__api_json(req, 200, j);
}

static json_t *settings_json(struct orch *o) {
  json_t *j = json_object();
  for (size_t i = 0; i < ORCH_RT_N_SETTINGS; i++) {
    const struct orch_rt_setting *s = &orch__rt_table()[i];
    json_object_set_new(j, s->field, json_integer((json_int_t)orch__rt_get(&o->rt, s)));
  }
  json_object_set_new(j, "code_execution", json_string(orch_exec_mode_name(o->cfg->exec_mode)));
  json_object_set_new(j, "pypi_disabled", json_boolean(o->cfg->pypi_disabled));
  return j;
}

static void on_get_settings(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  if (admin_only(o, req))
    return;
  orch__api_json(req, 200, settings_json(o));
}

struct put_ctx {
  struct orch *o;
  struct tp_req *req;
  size_t pending;
  int failed;
  long long vals[ORCH_RT_N_SETTINGS];
  int set[ORCH_RT_N_SETTINGS];
};

static void on_put_part(int rc, const struct sbx_error *err, void *ud) {
  struct put_ctx *p = ud;
  if (rc != 0 && !p->failed) {
    p->failed = rc;
    sbx_log(SBX_LOG_ERROR, "admin", "setting not stored: %s", err ? err->msg : sbx_strerror(rc));
  }
  if (--p->pending > 0)
    return;
  if (p->failed) {
    orch__api_error(p->req, 500, "storage", "settings not stored");
  } else {
    for (size_t i = 0; i < ORCH_RT_N_SETTINGS; i++)
      if (p->set[i])
        orch__rt_set(&p->o->rt, orch__rt_table()[i].key, p->vals[i]);
    orch__node_settings_changed(p->o); /* nodes: the others read them again */
    orch__api_json(p->req, 200, settings_json(p->o));
  }
  tp_req_release(p->req);
  sbx_free(p);
}

/* One more write of the change (p->pending counts it); a write that cannot be queued fails it. */
static void queued(struct put_ctx *p, int rc) {
  if (rc == 0)
    p->pending++;
  else
    p->failed = SBX_ENOMEM;
}

static void on_put_settings(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  if (admin_only(o, req))
    return;
  json_t *body = orch__api_body_object(req);
  if (body == NULL)
    return;
  struct put_ctx *p = sbx_calloc(1, sizeof(*p));
  if (p == NULL) {
    orch__api_error(req, 500, "internal", "out of memory");
    goto out;
  }
  const char *key;
  json_t *val;
  json_object_foreach(body, key, val) {
    size_t i = 0;
    while (i < ORCH_RT_N_SETTINGS && strcmp(orch__rt_table()[i].field, key) != 0)
      i++;
    if (i == ORCH_RT_N_SETTINGS) {
      orch__api_error(
          req, 400, "invalid_field",
          "%s: not a runtime setting (retention_days, time_limit_s, paused_wait_ms, page_grace_ms)",
          key);
      goto fail;
    }
    const struct orch_rt_setting *s = &orch__rt_table()[i];
    if (!json_is_integer(val) || json_integer_value(val) < s->lo ||
        json_integer_value(val) > s->hi) {
      orch__api_error(req, 400, "invalid_field", "%s: an integer from %lld to %lld", key, s->lo,
                      s->hi);
      goto fail;
    }
    p->set[i] = 1;
    p->vals[i] = json_integer_value(val);
  }
  p->o = o;
  p->req = req;
  p->pending = 1; /* released below, after queueing */
  tp_req_hold(req);
  for (size_t i = 0; i < ORCH_RT_N_SETTINGS; i++) {
    if (!p->set[i])
      continue;
    const char *k = orch__rt_table()[i].key;
    char text[32];
    snprintf(text, sizeof(text), "%lld", p->vals[i]);
    queued(p, store_setting_put(o->st, k, text, on_put_part, p));
    if (strcmp(k, "ARTIFACT_RETENTION_DAYS") == 0) /* every kept artifact is re-dated */
      queued(p, store_retention_apply(o->st, p->vals[i] * 86400000LL, on_put_part, p));
  }
  on_put_part(0, NULL, p); /* drops the initial count; answers when nothing was queued */
  goto out;
fail:
  sbx_free(p);
out:
  json_decref(body);
}

void orch__routes_admin(struct orch *o) {
  tp_route(o->tp, "GET", "/v1/admin/runs", 0, on_admin_runs, o);
  tp_route(o->tp, "GET", "/v1/admin/history", 0, on_admin_history, o);
  tp_route(o->tp, "GET", "/v1/admin/pages", 0, on_admin_pages, o);
  tp_route(o->tp, "GET", "/v1/admin/settings", 0, on_get_settings, o);
  tp_route(o->tp, "PUT", "/v1/admin/settings", 64 * 1024, on_put_settings, o);
}
