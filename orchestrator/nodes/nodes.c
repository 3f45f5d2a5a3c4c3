/* nodes.c -- several orchestrators (nodes) serving one PostgreSQL store: each chat is served by
 * the node holding its lease (persistence/nodes.c keeps the leases), and a request that reaches
 * another node is forwarded to the owner (proxy.c).
 *
 * A node: CEREA_NODE_URL (how other nodes reach it), a node id drawn at start, CEREA_LEASE_MS.
 * It serves nothing before its URL was found to reach it (api_nodes.c checks, then
 * orch__node_ready; otherwise it says so in one line and exits: other nodes could not forward
 * to it).
 *
 * Leases.  In node mode a chat is in this node's memory (struct orch's chats) only while the node
 * holds its lease: orch__chat_get takes it before loading the chat (orch__node_take), the idle
 * eviction lets it go (orch__node_release), a chat created here is taken at once.  A chat newly
 * loaded brings its unfinished runs with it (orch__node_loaded: a node taking a chat over after
 * its owner died runs them again, as new attempts, once a page attaches).  Every lease this node
 * holds is renewed in one statement every CEREA_LEASE_MS / 4.
 *
 * Never two nodes at once: the database counts a lease from when it took or renewed it, this node
 * from before it asked, so the node's view ends first.  When renewals fail (the database is
 * unreachable) until CEREA_LEASE_MS minus a margin (a fifth) after the last one that succeeded
 * was sent, or the database renewed fewer leases than this node holds, the node exits at once
 * (fail-stop: one line on stderr, exit status 1) before any other node can take its chats; a
 * supervisor restarts it and it rejoins with a new id, taking chats as requests come.  Writes in
 * flight then are lost as a SIGKILL loses them: none was acknowledged.  And none of them lands
 * for a chat another node took meanwhile (a node resuming after a long pause runs its queued
 * requests and writes before its timer notices): each write of a chat commits only while the
 * chat's lease is still this node's at the epoch it took (the store's fence, in the write's own
 * transaction), and a refused one stops the node the same way (on_fenced).
 *
 * Requests for a chat another node holds are forwarded to it by api.c (with proxy.c); a
 * refused take leaves who holds the chat in refused_* for it.
 *
 * Notifications (LISTEN/NOTIFY, no content): "files" after a retention sweep removed files on any
 * node (every node's kept file lists are read again), "settings" after an operator changed the
 * runtime settings on one (every node reads them again), "mcp-cancel ..." and "mcp-end ..." for
 * MCP sessions, which are good on every node (mcp.c), "*" after the listen connection came back
 * (files and settings).  Runs need none: a run is created by the node serving its chat,
 * requests for it being forwarded there.
 *
 * What it does not do: HTTP (api_nodes.c: GET /v1/node, the URL check; api.c: forwarding), keep
 * leases (the store), or serve chats (chat.c).
 */
#include "nodes.h"
#include "assistant.h"
#include "mcp.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define NODES_TICK_MS 100

void orch__node_fail_stop(struct orch_nodes *ns, const char *fmt, ...) {
  char msg[700];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "cerea-sandbox: node %s (%s): %s\n", ns->id, ns->url, msg);
  fflush(stderr);
  exit(1);
}

static size_t held(struct orch_nodes *ns) { return ns->o->chats.len; }

static void renew(struct orch_nodes *ns, uint64_t now) {
  struct sbx_error err;
  size_t n = 0;
  sbx_error_clear(&err);
  int rc = store_lease_renew(ns->o->st, ns->id, ns->lease_ms, &n, &err);
  if (rc == 0) {
    if (n < held(ns))
      orch__node_fail_stop(
          ns,
          "the database renewed %zu of the %zu chat leases it holds: exiting so that "
          "no chat is served by two nodes",
          n, held(ns));
    ns->renewed_at = now;
    ns->next_renew = now + ns->lease_ms / 4;
    if (ns->failures)
      sbx_log(SBX_LOG_INFO, "nodes", "leases renewed again after %llu failures",
              (unsigned long long)ns->failures);
    ns->failures = 0;
    return;
  }
  if (ns->failures++ == 0)
    sbx_log(SBX_LOG_WARN, "nodes", "lease renewal failed: %s", err.msg);
  ns->next_renew = now + SBX_MIN(ns->lease_ms / 8, (uint64_t)250);
}

static void on_tick(uv_timer_t *t) {
  struct orch_nodes *ns = t->data;
  uint64_t now = sbx_now_mono_ms();
  if (!ns->ready)
    return;
  if (now >= ns->next_renew)
    renew(ns, now);
  if (held(ns) > 0 && now >= ns->renewed_at + ns->lease_ms - ns->margin_ms)
    orch__node_fail_stop(
        ns,
        "no lease renewal for %llu ms (the database does not answer): exiting before "
        "another node may take its %zu chats over",
        (unsigned long long)(now - ns->renewed_at), held(ns));
}

int orch__node_take(struct orch *o, const char *chat_id) {
  struct orch_nodes *ns = o->nodes;
  if (ns == NULL)
    return 0;
  if (!ns->ready)
    return SBX_EBUSY;
  struct store_lease l;
  struct sbx_error err;
  uint64_t t0 = sbx_now_mono_ms();
  int rc = store_lease_take(o->st, chat_id, ns->id, ns->url, ns->lease_ms, &l, &err);
  if (rc == SBX_EAGAIN) /* it changed hands between the take and the look-up */
    rc = store_lease_take(o->st, chat_id, ns->id, ns->url, ns->lease_ms, &l, &err);
  if (rc != 0) {
    sbx_log(SBX_LOG_WARN, "nodes", "lease of chat %s: %s", chat_id, err.msg);
    return rc;
  }
  if (l.mine) {
    if (held(ns) == 0) /* the first lease: counted from when it was asked for */
      ns->renewed_at = t0;
    return 0;
  }
  snprintf(ns->refused_chat, sizeof ns->refused_chat, "%s", chat_id);
  snprintf(ns->refused_url, sizeof ns->refused_url, "%s", l.node_url);
  ns->refused_left_ms = l.left_ms;
  return SBX_EREMOTE;
}

void orch__node_release(struct orch *o, const char *chat_id) {
  struct sbx_error err;
  if (o->nodes && store_lease_release(o->st, chat_id, o->nodes->id, &err) != 0)
    sbx_log(SBX_LOG_WARN, "nodes", "lease of chat %s not released (it expires): %s", chat_id,
            err.msg);
}

void orch__node_loaded(struct orch *o, struct orch_chat *c) {
  if (o->nodes == NULL)
    return;
  /* an answer still streaming was written by the node that served the chat before (this node
   * has no turn of a chat it had not loaded): interrupted, as a single node's start does */
  if (store_message_interrupt_chat(o->st, c->id, ORCH_INTERRUPTED_JSON, sbx_now_wall_ms(),
                                   orch__on_interrupted, NULL) != 0)
    sbx_log(SBX_LOG_WARN, "nodes", "chat %s: its answers left streaming were not marked", c->id);
  struct store_run *runs = NULL;
  size_t n = 0;
  if (store_run_list_unfinished_chat(o->st, c->id, &runs, &n) != 0) {
    sbx_log(SBX_LOG_WARN, "nodes", "chat %s: its unfinished runs could not be read", c->id);
    return;
  }
  size_t taken = 0;
  for (size_t i = 0; i < n; i++)
    if (orch__map_get(&o->runs, runs[i].id) == NULL && orch__run_reload(o, &runs[i]) == 0)
      taken++;
  store_run_list_free(runs, n);
  if (taken)
    sbx_log(SBX_LOG_INFO, "nodes", "chat %s taken over with %zu unfinished runs", c->id, taken);
}

/* A write of a chat was refused by its lease's epoch (the store's fence): another node took the
 * lease while this node still had the chat in memory.  That happens only when this node's
 * renewals stopped for a whole lease (it was paused, or cut off from the database), so every
 * lease it holds may be gone too: it stops as a node whose renewals failed does, before it
 * serves or writes anything more.  A chat no longer in memory (a late write after it went idle
 * and its lease was let go) costs only that write. */
static void on_fenced(const char *chat_id, void *ud) {
  struct orch_nodes *ns = ud;
  if (ns->o->closing || orch__map_get(&ns->o->chats, chat_id) == NULL) {
    sbx_log(SBX_LOG_WARN, "nodes", "a write of chat %s was refused: its lease is another node's",
            chat_id);
    return;
  }
  orch__node_fail_stop(
      ns,
      "a write of chat %s was refused: its lease is another node's now (this node was "
      "paused or cut off from the database past CEREA_LEASE_MS): exiting so that no chat "
      "is served by two nodes",
      chat_id);
}

/* ---- serving, notifications ------------------------------------------------------------------ */

/* Chats whose lease is free or expired and that have unfinished runs: a dead node's, taken over
 * without waiting for a request (their runs wait for a page as any queued run does). */
static void adopt_orphans(struct orch_nodes *ns) {
  struct store_run *runs = NULL;
  size_t n = 0;
  if (store_run_list_unfinished(ns->o->st, &runs, &n) != 0)
    return;
  for (size_t i = 0; i < n; i++) {
    struct orch_chat *c;
    if (orch__map_get(&ns->o->runs, runs[i].id) == NULL)
      orch__chat_get(ns->o, runs[i].chat_id, &c); /* taken (and its runs loaded) when free */
  }
  store_run_list_free(runs, n);
}

void orch__node_ready(struct orch_nodes *ns) {
  ns->ready = 1;
  ns->renewed_at = ns->next_renew = sbx_now_mono_ms();
  sbx_log(SBX_LOG_INFO, "nodes", "node %s serving at %s (leases of %llu ms)", ns->id, ns->url,
          (unsigned long long)ns->lease_ms);
  adopt_orphans(ns);
}

static void on_notify(const char *payload, void *ud) {
  struct orch_nodes *ns = ud;
  if (strncmp(payload, "mcp-", 4) == 0) { /* an MCP call cancelled, a session ended */
    orch__mcp_notified(ns->o->mcp, payload);
    return;
  }
  int all = strcmp(payload, "*") == 0; /* some may have been missed */
  if (all || strcmp(payload, "files") == 0)
    store_files_touch(ns->o->st); /* kept file lists are read again */
  if (all || strcmp(payload, "settings") == 0)
    orch__runtime_load(ns->o);
}

/* What the core calls around a chat's life in memory (struct orch_leases, internal.h). */
static const struct orch_leases leases = {orch__node_take, orch__node_loaded, orch__node_release};

int orch__nodes_start(struct orch *o, struct sbx_error *err) {
  const struct orch_config *cfg = o->cfg;
  if (cfg->node_url == NULL)
    return 0;
  struct orch_nodes *ns = sbx_calloc(1, sizeof *ns);
  if (ns == NULL || (ns->timer = sbx_malloc(sizeof *ns->timer)) == NULL) {
    sbx_free(ns);
    return sbx_error_set(err, SBX_ENOMEM, "nodes: out of memory");
  }
  ns->o = o;
  snprintf(ns->url, sizeof ns->url, "%s", cfg->node_url);
  ns->lease_ms = cfg->lease_ms;
  ns->margin_ms = cfg->lease_ms / 5;
  store_new_id(ns->id);
  int rc = store_listen(o->st, on_notify, ns, err);
  if (rc != 0) {
    sbx_free(ns->timer);
    sbx_free(ns);
    return rc;
  }
  store_on_fenced(o->st, on_fenced, ns);
  uv_timer_init(o->loop, ns->timer);
  ns->timer->data = ns;
  uv_timer_start(ns->timer, on_tick, NODES_TICK_MS, NODES_TICK_MS);
  o->nodes = ns;
  o->leases = &leases;
  return 0;
}

static void on_timer_closed(uv_handle_t *h) { sbx_free(h); }

void orch__nodes_stop(struct orch *o) {
  struct orch_nodes *ns = o->nodes;
  if (ns == NULL || ns->stopped)
    return;
  ns->stopped = 1;
  uv_timer_stop(ns->timer);
  uv_close((uv_handle_t *)ns->timer, on_timer_closed);
}

void orch__nodes_close(struct orch *o) {
  struct orch_nodes *ns = o->nodes;
  if (ns == NULL)
    return;
  orch__nodes_stop(o);
  struct sbx_error err;
  if (ns->ready && store_lease_release(o->st, NULL, ns->id, &err) != 0)
    sbx_log(SBX_LOG_WARN, "nodes", "leases not released (they expire): %s", err.msg);
  sbx_free(ns);
  o->nodes = NULL;
  o->leases = NULL;
}

const char *orch__node_id(const struct orch *o) { return o->nodes ? o->nodes->id : NULL; }

void orch__node_tell(struct orch *o, const char *what) {
  if (o->nodes && store_notify(o->st, what, NULL, NULL) != 0)
    sbx_log(SBX_LOG_WARN, "nodes", "the other nodes were not told (%s)", what);
}

void orch__node_files_changed(struct orch *o) { orch__node_tell(o, "files"); }
void orch__node_settings_changed(struct orch *o) { orch__node_tell(o, "settings"); }
