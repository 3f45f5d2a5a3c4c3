/* api_health.c -- operator and page-facing read-only endpoints: /healthz (is the database
 * answering, are its writes stored: 503 with the reason while either fails), /metrics (Prometheus text), /v1/config (public: what a page needs to know before
 * it attaches: execution mode, PyPI, time limit, limits, and the Python packages this deployment
 * serves and lacks).  What it does not do: admin writes (issue 7's admin settings live in
 * api_admin.c).
 */
#include "api.h"
#include "assistant.h"
#include "transport.h"

#include <string.h>

static void on_healthz(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  struct sbx_error err;
  sbx_error_clear(&err);
  int rc = store_ping(o->st, &err);
  struct store_health h;
  if (store_health(o->st, &h) != 0)
    memset(&h, 0, sizeof(h)), h.ok = 1;
  int ok = rc == 0 && h.ok;
  json_t *j = json_object();
  json_object_set_new(j, "status", json_string(ok ? "ok" : "degraded"));
  json_t *db = json_object();
  json_object_set_new(db, "ok", json_boolean(ok));
  json_object_set_new(db, "schema_version", json_integer(store_schema_version(o->st)));
  if (rc != 0)
    json_object_set_new(db, "error", json_string(err.msg[0] ? err.msg : sbx_strerror(rc)));
  else if (!h.ok) {
    char why[700];
    snprintf(why, sizeof(why), "writes are failing: %llu in a row since %lld (wall ms): %s",
             (unsigned long long)h.consecutive_failures, (long long)h.failing_since,
             h.last_error.msg[0] ? h.last_error.msg : sbx_strerror(h.last_error.code));
    json_object_set_new(db, "error", json_string(why));
  }
  json_object_set_new(db, "writes",
                      json_pack("{s:b, s:I, s:I, s:I}", "ok", h.ok, "consecutive_failures",
                                (json_int_t)h.consecutive_failures, "failures",
                                (json_int_t)h.failures, "failing_since",
                                (json_int_t)h.failing_since));
  json_object_set_new(j, "database", db);
  json_object_set_new(j, "code_execution", json_string(orch_exec_mode_name(o->cfg->exec_mode)));
  json_object_set_new(j, "live_runs", json_integer((json_int_t)o->runs.len));
  orch__api_json(req, ok ? 200 : 503, j);
}

static void on_metrics(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  struct sbx_buf b;
  sbx_buf_init(&b, 4u << 20);
  if (orch__metrics_render(o, &b) != 0 || tp_metrics_write(o->tp, &b) != 0) {
    sbx_buf_free(&b);
    orch__api_error(req, 500, "internal", "metrics too large");
    return;
  }
  tp_respond(req, 200, "Content-Type: text/plain; version=0.0.4\r\nCache-Control: no-store\r\n",
             b.data ? b.data : "", b.len);
  sbx_buf_free(&b);
}

static void on_config(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  int micropip = 0;
  json_t *pkgs = orch__packages_json(o, &micropip);
  json_t *j = json_object();
  json_object_set_new(j, "code_execution", json_string(orch_exec_mode_name(o->cfg->exec_mode)));
  json_object_set_new(j, "pypi_disabled", json_boolean(o->cfg->pypi_disabled));
  /* Installs from PyPI need micropip as well as the operator's consent. */
  json_object_set_new(j, "pypi_available", json_boolean(!o->cfg->pypi_disabled && micropip));
  json_object_set_new(j, "packages", pkgs);
  json_object_set_new(j, "time_limit_s", json_integer(o->rt.time_limit_s));
  json_object_set_new(j, "input_wait_s", json_integer(o->rt.input_wait_s));
  json_object_set_new(j, "page_heartbeat_ms", json_integer((json_int_t)o->rt.page_heartbeat_ms));
  json_object_set_new(j, "page_silent_ms", json_integer((json_int_t)o->rt.page_silent_ms));
  json_object_set_new(j, "paused_wait_ms", json_integer((json_int_t)o->rt.paused_wait_ms));
  json_object_set_new(j, "page_grace_ms", json_integer((json_int_t)o->rt.page_grace_ms));
  json_object_set_new(j, "retention_days", json_integer(o->rt.retention_days));
  json_t *lim = json_object();
  orch__run_limits_set(lim);
  json_object_set_new(lim, "upload_bytes", json_integer(ORCH_UPLOAD_MAX));
  json_object_set_new(lim, "mount_file_bytes", json_integer((json_int_t)ORCH_MOUNT_FILE_MAX));
  json_object_set_new(lim, "mount_total_bytes", json_integer((json_int_t)ORCH_MOUNT_TOTAL_MAX));
  json_object_set_new(lim, "bundle_bytes", json_integer(ORCH_BUNDLE_BYTES));
  json_object_set_new(lim, "shown_bytes", json_integer(ORCH_SHOWN_BYTES));
  json_object_set_new(lim, "input_bytes", json_integer(ORCH_INPUT_BYTES));
  json_object_set_new(lim, "chat_output_bytes", json_integer((json_int_t)o->rt.output_quota_bytes));
  json_object_set_new(lim, "chat_attachment_bytes",
                      json_integer((json_int_t)o->rt.attachment_quota_bytes));
  json_object_set_new(j, "limits", lim);
  /* the model's name only: never its URL or key */
  json_object_set_new(j, "assistant", o->llm ? json_pack("{s:s}", "model", orch__llm_model(o->llm))
                                             : json_null());
  orch__api_json(req, 200, j);
}

void orch__routes_health(struct orch *o) {
  tp_route(o->tp, "GET", "/healthz", 0, on_healthz, o);
  tp_route(o->tp, "GET", "/metrics", 0, on_metrics, o);
  tp_route(o->tp, "GET", "/v1/config", 0, on_config, o);
}
