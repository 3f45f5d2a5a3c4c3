/* server.c -- the orchestrator server object: opens the store, loads the API key and runtime
 * settings, reloads unfinished runs, builds the HTTP server with every route and static mount,
 * listens, runs the housekeeping cron, and closes it all in order.
 *
 * The cron (one uv_timer, every ORCH_CRON_MS) is the one place periodic duties live:
 *  - run deadlines: pause wait over -> abandoned, watchdog -> timeout/crashed, cancel grace,
 *    input wait over -> running again;
 *  - page grace over -> the page is gone and what it ran is paused;
 *  - page silence: a page holding a run and silent for PAGE_SILENT_MS -> its run is paused;
 *  - retention: one bounded sweep step of expired artifacts every ORCH_SWEEP_EVERY_MS;
 *  - event log: one bounded trim step (store_event_trim) every ORCH_SWEEP_EVERY_MS, on every tick
 *    while steps come back full: events older than max(1 h, 10 x PAGE_GRACE_MS) go, each chat
 *    keeping its newest ORCH_TRIM_KEEP (a page in its grace period never misses one);
 *  - memory: chats idle for ORCH_CHAT_IDLE_MS with nothing live are dropped (loaded again on use);
 *  - history: a metrics sample every ORCH_HISTORY_EVERY_MS, for the admin page's charts;
 *  - people: the first administrator, on the first tick a start with nobody serves (people.c).
 * Requests that wait (wait_s, event streams) are never woken by it: events wake them.
 *
 * What it does not do: answer requests (api_*.c), schedule runs (chat.c).
 */
#include "api.h"
#include "assistant.h"
#include "hosts.h"
#include "mcp.h"
#include "nodes.h"
#include "transport.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ORCH_CRON_MS         100
#define ORCH_SWEEP_EVERY_MS  60000
#define ORCH_SWEEP_BUDGET    200
#define ORCH_TRIM_BUDGET     500     /* event rows per trim step (one short writer transaction) */
#define ORCH_TRIM_KEEP       1000    /* newest events each chat keeps whatever their age */
#define ORCH_TRIM_MIN_AGE_MS 3600000 /* events younger than max(this, 10 x page grace) stay */
#define ORCH_EVICT_EVERY_MS  10000
#define ORCH_CHAT_IDLE_MS    (5 * 60 * 1000) /* an idle chat leaves memory (the store keeps it) */

static uint64_t last_sweep_ms, last_evict_ms, last_trim_ms, last_sample_ms;
static int trim_pending, trim_more; /* a step queued; the last one came back full */

static void on_trim(int rc, const struct sbx_error *err, size_t removed, void *ud) {
  (void)ud;
  trim_pending = 0;
  trim_more = rc == 0 && removed == ORCH_TRIM_BUDGET;
  if (rc != 0)
    sbx_log(SBX_LOG_WARN, "orch", "event log trim failed: %s", err ? err->msg : sbx_strerror(rc));
  else if (removed > 0)
    sbx_log(SBX_LOG_DEBUG, "orch", "event log trim removed %zu events", removed);
}

static void on_sweep(int rc, const struct sbx_error *err, size_t removed, void *ud) {
  (void)ud;
  if (rc != 0)
    sbx_log(SBX_LOG_WARN, "orch", "retention sweep failed: %s", err ? err->msg : sbx_strerror(rc));
  else if (removed > 0) {
    sbx_log(SBX_LOG_INFO, "orch", "retention sweep removed %zu expired files", removed);
    orch__node_files_changed(ud); /* nodes: the others' kept file lists are stale */
  }
}

static void on_purged(int rc, const struct sbx_error *err, void *ud) {
  (void)ud;
  if (rc != 0)
    sbx_log(SBX_LOG_WARN, "orch", "session purge failed: %s", err ? err->msg : sbx_strerror(rc));
}

/* The first administrator was stored: its one-time password, printed once with where to sign in
 * (as a generated API key is), on stderr, never in the log. */
static void print_first_admin(struct orch *o, const char *name, const char *password) {
  const char *addr = o->cfg->n_listen ? o->cfg->listen[0] : "127.0.0.1:8080";
  const char *colon = strrchr(addr, ':');
  int hl = colon ? (int)(colon - addr) : (int)strlen(addr);
  const char *host = addr;
  if (strncmp(addr, "unix:", 5) == 0 || (hl == 7 && strncmp(addr, "0.0.0.0", 7) == 0) || hl == 0)
    host = "127.0.0.1", hl = 9;
  else if (hl == 4 && strncmp(addr, "[::]", 4) == 0)
    host = "[::1]", hl = 5;
  char url[300];
  if (o->cfg->public_url)
    snprintf(url, sizeof url, "%s/signin", o->cfg->public_url);
  else
    snprintf(url, sizeof url, "%s://%.*s:%d/signin", o->cfg->tls_cert ? "https" : "http", hl, host,
             o->tp ? orch_port(o) : 0);
  fprintf(stderr,
          "cerea-sandbox: created the administrator \"%s\" with the one-time password %s (to be "
          "changed at the first sign-in): sign in at %s\n",
          name, password, url);
}

static void on_cron(uv_timer_t *t) {
  struct orch *o = t->data;
  if (o->closing)
    return;
  size_t i = 0;
  const char *k;
  void *v;
  while (orch__map_next(&o->chats, &i, &k, &v))
    orch__chat_tick(v);
  orch__hosts_tick(o->hosts);
  if (o->people && o->people->first_admin_due && (o->nodes == NULL || o->nodes->ready))
    orch__people_first_admin(o); /* nobody at start: the first administrator, once serving */
  uint64_t now = sbx_now_mono_ms();
  if (now - last_sample_ms >= ORCH_HISTORY_EVERY_MS) {
    last_sample_ms = now;
    orch__metrics_sample(o);
  }
  if (now - last_evict_ms >= ORCH_EVICT_EVERY_MS) {
    last_evict_ms = now;
    orch__chats_evict(o, ORCH_CHAT_IDLE_MS);
  }
  if (now - last_sweep_ms >= ORCH_SWEEP_EVERY_MS) {
    last_sweep_ms = now;
    store_sweep(o->st, sbx_now_wall_ms(), ORCH_SWEEP_BUDGET, on_sweep, o);
    /* sessions past their absolute expiry, used or ended, are nobody's any more */
    store_session_purge(o->st, sbx_now_wall_ms() - (int64_t)o->cfg->session_max_s * 1000,
                        on_purged, NULL);
  }
  if (!trim_pending && (trim_more || now - last_trim_ms >= ORCH_SWEEP_EVERY_MS)) {
    uint64_t age = SBX_MAX((uint64_t)ORCH_TRIM_MIN_AGE_MS, 10 * o->rt.page_grace_ms);
    last_trim_ms = now;
    trim_more = 0;
    trim_pending = store_event_trim(o->st, sbx_now_wall_ms() - (int64_t)age, ORCH_TRIM_KEEP,
                                    ORCH_TRIM_BUDGET, on_trim, o) == 0;
  }
}

/* build/www from the current directory or any parent (run from the repository or below it). */
static char *find_static_dir(void) {
  char cwd[PATH_MAX];
  if (getcwd(cwd, sizeof(cwd)) == NULL)
    return NULL;
  for (;;) {
    char cand[PATH_MAX + 16];
    struct stat st;
    snprintf(cand, sizeof(cand), "%s/build/www", cwd);
    if (stat(cand, &st) == 0 && S_ISDIR(st.st_mode))
      return sbx_strdup(cand);
    char *slash = strrchr(cwd, '/');
    if (slash == NULL || slash == cwd)
      return NULL;
    *slash = '\0';
  }
}

static int prepare_data_dir(const char *dir, struct sbx_error *err) {
  char path[PATH_MAX];
  snprintf(path, sizeof(path), "%s", dir);
  for (char *p = path + 1; *p; p++)
    if (*p == '/') {
      *p = '\0';
      mkdir(path, 0700);
      *p = '/';
    }
  if (mkdir(path, 0700) != 0 && errno != EEXIST)
    return sbx_error_set(err, errno == EACCES || errno == EROFS ? SBX_EPERM : SBX_EIO,
                         "data directory %s cannot be created: %s", dir, strerror(errno));
  if (access(path, W_OK | X_OK) != 0)
    return sbx_error_set(err, SBX_EPERM, "data directory %s is not writable: %s", dir,
                         strerror(errno));
  return 0;
}

static int reload_runs(struct orch *o, struct sbx_error *err) {
  struct store_run *runs = NULL;
  size_t n = 0;
  int rc = store_run_list_unfinished(o->st, &runs, &n);
  if (rc != 0)
    return sbx_error_set(err, rc, "cannot reload unfinished runs: %s", sbx_strerror(rc));
  for (size_t i = 0; i < n && rc == 0; i++)
    rc = orch__run_reload(o, &runs[i]);
  if (n > 0)
    sbx_log(SBX_LOG_INFO, "orch", "reloaded %zu unfinished runs", n);
  store_run_list_free(runs, n);
  return rc;
}

/* The web app's files: the configured tree, or build/www found upward from here. */
static int open_static(struct orch *o, struct sbx_error *err) {
  o->static_dir = o->cfg->static_dir ? sbx_strdup(o->cfg->static_dir) : find_static_dir();
  struct stat sst;
  if (o->static_dir == NULL || stat(o->static_dir, &sst) != 0 || !S_ISDIR(sst.st_mode))
    return sbx_error_set(
        err, SBX_ENOENT,
        "static tree %s not found (run bash scripts/setup.sh, or pass --static DIR)",
        o->static_dir ? o->static_dir : "build/www");
  return 0;
}

/* The credentials' secrets: the API key (configured, or kept in the data directory: generated on
 * the first start and said once), the host key, the chat keys' secret. */
static int load_keys(struct orch *o, struct sbx_error *err) {
  const struct orch_config *cfg = o->cfg;
  int rc;
  if (cfg->api_key != NULL) {
    o->api_key = sbx_strdup(cfg->api_key);
  } else {
    int generated = 0;
    if ((rc = orch__api_key_load(cfg->data_dir, &o->api_key, &generated, err)) != 0)
      return rc;
    if (generated)
      fprintf(stderr,
              "cerea-sandbox: generated an API key (kept in %s/api_key; set CEREA_API_KEY to "
              "choose one):\n  %s\n",
              cfg->data_dir, o->api_key);
  }
  if (o->api_key == NULL)
    return SBX_ENOMEM;
  store_sha256_hex(o->api_key, strlen(o->api_key), o->api_key_hash);
  /* The headless hosts' key: random per start, reaches only what a page token may (auth.c),
   * so a host that Python escaped into cannot create chats, turns or read the admin views. */
  unsigned char r[32];
  if (sbx_random(r, sizeof(r)) != 0)
    return sbx_error_set(err, SBX_EIO, "no random bytes for the host key");
  sbx_hex(r, sizeof(r), o->host_key);
  store_sha256_hex(o->host_key, strlen(o->host_key), o->host_key_hash);
  if ((rc = orch__chat_secret_load(cfg->data_dir, 0, o->chat_secret, err)) != 0)
    return rc;
  if ((rc = orch__people_start(o, err)) != 0)
    return rc;
  o->people->first_admin_cb = print_first_admin;
  return 0;
}

/* What the last life left: the runtime settings, its unfinished runs, its answers cut off while
 * streaming; and the model connector. */
static int restore(struct orch *o, struct sbx_error *err) {
  const struct orch_config *cfg = o->cfg;
  int rc;
  orch__runtime_load(o);
  o->run_orphaned = orch__asst_run_orphaned; /* before any run is reloaded */
  /* nodes: a chat's runs are reloaded by the node that takes its lease (nodes.c) */
  if (cfg->node_url == NULL && (rc = reload_runs(o, err)) != 0)
    return rc;
  if ((rc = orch__llm_new(o->loop, cfg, &o->llm, err)) != 0)
    return rc;
  /* nodes: a chat's answers left streaming are marked by the node that takes its lease (nodes.c):
   * the other nodes' live answers are in the same database */
  if (cfg->node_url == NULL &&
      store_message_interrupt(o->st, ORCH_INTERRUPTED_JSON, sbx_now_wall_ms(), orch__on_interrupted,
                              NULL) != 0)
    return sbx_error_set(err, SBX_ENOMEM, "out of memory");
  return 0;
}

/* The transport with every route. */
static int serve(struct orch *o, struct sbx_error *err) {
  struct tp_config tc;
  memset(&tc, 0, sizeof(tc));
  tp_limits_default(&tc.limits);
  /* One event must fit a stream's queue: a `run` with its code (up to 2 MiB) and manifest, a run
   * stream's `end` with the whole run object (a result of up to 4 MiB).  A stream past it lags
   * and catches up (api_events.c, api_run_events.c), so this is what a stalled one may hold. */
  tc.limits.sse_queue_bytes = ORCH_SSE_EVENT_BYTES;
  tc.tls_cert_file = o->cfg->tls_cert;
  tc.tls_key_file = o->cfg->tls_key;
  int rc = tp_server_new(o->loop, &tc, &o->tp, err);
  if (rc != 0)
    return rc;
  orch__routes_static(o);
  orch__routes_health(o);
  orch__routes_chats(o);
  orch__routes_files(o);
  orch__routes_runs(o);
  orch__routes_events(o);
  orch__routes_page(o);
  orch__routes_run_events(o);
  orch__routes_turns(o);
  orch__routes_admin(o);
  orch__routes_mcp(o);
  orch__routes_messages(o);
  orch__routes_people(o);
  return 0;
}

/* Every CEREA_LISTEN address (127.0.0.1:8080 when none is given). */
static int listen_all(struct orch *o, struct sbx_error *err) {
  const struct orch_config *cfg = o->cfg;
  size_t nl = cfg->n_listen ? cfg->n_listen : 1;
  for (size_t i = 0; i < nl; i++) {
    const char *addr = cfg->n_listen ? cfg->listen[i] : "127.0.0.1:8080";
    struct sbx_error le;
    sbx_error_clear(&le);
    int rc = tp_server_listen(o->tp, addr, &le);
    if (rc == SBX_EADDRINUSE)
      return sbx_error_set(err, rc, "cannot listen on %s: address already in use (another server?)",
                           addr);
    if (rc != 0)
      return sbx_error_set(err, rc, "cannot listen on %s: %s", addr,
                           le.msg[0] ? le.msg : sbx_strerror(rc));
  }
  return 0;
}

int orch_new(uv_loop_t *loop, const struct orch_config *cfg, struct orch **out,
             struct sbx_error *err) {
  int rc = orch_config_validate(cfg, err);
  if (rc != 0)
    return rc;
  struct orch *o = sbx_calloc(1, sizeof(*o));
  if (o == NULL)
    return SBX_ENOMEM;
  o->loop = loop;
  o->cfg = cfg;
  orch__chats_init(o);
  o->run_seq = sbx_now_wall_ms() * 1000;
  if ((rc = open_static(o, err)) != 0 || (rc = prepare_data_dir(cfg->data_dir, err)) != 0 ||
      (rc = store_open_url(loop, cfg->data_dir, cfg->database_url, &o->st, err)) != 0 ||
      (rc = load_keys(o, err)) != 0 || (rc = restore(o, err)) != 0 || (rc = serve(o, err)) != 0)
    goto fail;
  /* nodes before the hosts: a node's hosts are named after it (hosts.c) */
  if ((rc = listen_all(o, err)) != 0 || (rc = orch__routes_nodes(o, err)) != 0 ||
      (cfg->exec_mode == ORCH_EXEC_SERVER && (rc = orch__hosts_start(o, err)) != 0))
    goto fail_tp;
  uv_timer_init(loop, &o->cron);
  o->cron.data = o;
  uv_timer_start(&o->cron, on_cron, ORCH_CRON_MS, ORCH_CRON_MS);
  last_sweep_ms = sbx_now_mono_ms() - ORCH_SWEEP_EVERY_MS + 5000; /* first sweep 5 s after start */
  *out = o;
  return 0;

fail_tp:
  orch__api_nodes_stop(o);
  orch__nodes_close(o);
  /* The transport frees itself in its close callback; run the loop until it did. */
  tp_server_close(o->tp, 0, NULL, NULL);
  uv_run(loop, UV_RUN_NOWAIT);
  o->tp = NULL;
fail:
  orch__llm_free(o->llm);
  if (o->st)
    store_close(o->st);
  orch__people_close(o);
  orch__asst_free_all(o);
  orch__chats_free(o);
  orch__mcp_free(o->mcp);
  sbx_free(o->api_key);
  sbx_free(o->static_dir);
  sbx_free(o);
  return rc;
}

int orch_port(const struct orch *o) { return tp_server_port(o->tp); }

static void on_cron_closed(uv_handle_t *h) {
  struct orch *o = h->data;
  orch__nodes_close(o); /* every lease let go, now that nothing is served */
  store_close(o->st);
  orch__people_close(o); /* hashes still on the thread pool free it when they end */
  orch__asst_free_all(o);
  orch__chats_free(o);
  orch__mcp_free(o->mcp);
  orch_closed_cb cb = o->close_cb;
  void *ud = o->close_ud;
  sbx_free(o->api_key);
  sbx_free(o->static_dir);
  sbx_free(o);
  if (cb)
    cb(ud);
}

static void on_tp_closed(struct tp_server *s, void *ud) {
  (void)s;
  struct orch *o = ud;
  o->tp = NULL;
  uv_timer_stop(&o->cron);
  uv_close((uv_handle_t *)&o->cron, on_cron_closed);
}

void orch_close(struct orch *o, orch_closed_cb cb, void *ud) {
  if (o->closing)
    return;
  o->closing = 1;
  o->close_cb = cb;
  o->close_ud = ud;
  orch__hosts_close(o->hosts);
  o->hosts = NULL;
  orch__asst_close_all(o); /* model requests end; a turn's run stays for the next start */
  orch__llm_free(o->llm);
  o->llm = NULL;
  orch__api_nodes_stop(o);
  tp_server_close(o->tp, 2000, on_tp_closed, o);
}
