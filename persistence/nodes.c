/* nodes.c -- what several orchestrators (nodes) sharing one PostgreSQL store need from it: chat
 * leases (which node serves a chat, until when) and notifications between nodes (LISTEN/NOTIFY,
 * ids only).
 *
 * Leases: one row per chat in chat_leases (node, its URL, an epoch, an expiry in the database's
 * clock), and one row per epoch in lease_log (who held it, from when, until when: the record a
 * test or an operator checks that no chat was ever held by two nodes at once).  A lease is taken
 * only when it is free or expired, and renewed only by its holder, each in ONE statement (an
 * INSERT ... ON CONFLICT DO UPDATE ... WHERE: the row's lock orders two nodes trying at once, and
 * the loser gets no row back).  Times are the database's (clock_timestamp()), so the nodes' clocks
 * do not matter; a node counts its own lease from before it asked, so it always believes it holds
 * a lease for less long than the database does.  A released lease expires at once (its row stays:
 * the next epoch continues from it).
 *
 * Connections: two of the store's own, used on the loop thread only: the lease connection
 * (autocommit: each call is durable when it returns, one round trip each; opened again after a
 * loss as the reader is) and the listen connection (LISTEN cerea; its socket watched by a
 * uv_poll_t, notifications handed to the callback as they come).  A notification is sent by the
 * writer (store_notify: SELECT pg_notify inside the group, so it reaches the other nodes once the
 * group committed, after every write queued before it).  After the listen connection was lost
 * and opened again the callback gets "*": notifications may have been missed meanwhile.
 *
 * Fencing is fence.c: a lease taken or let go here sets or releases its chat's fence there.
 *
 * What it does not do: decide anything (the orchestrator's nodes.c does), or anything with SQLite
 * (one process per data directory: SBX_EINVAL).
 */
#include "internal.h"

#include <libpq-fe.h>
#include <stdlib.h>
#include <string.h>

#define NOTIFY_CHANNEL "cerea"
#define NOTIFY_MAX     200 /* bytes of a payload (PostgreSQL's limit is 8000) */

static int need_pg(struct store *st, struct sbx_error *err) {
  return st->kind == ST_PG && st->l.pg ? 0
                                       : sbx_error_set(err, SBX_EINVAL,
                                                       "nodes need a PostgreSQL store "
                                                       "(CEREA_DATABASE_URL)");
}

int store_shared(struct store *st) { return st->kind == ST_PG; }

/* ---- leases ------------------------------------------------------------------------------- */

int store_lease_take(struct store *st, const char *chat_id, const char *node_id,
                     const char *node_url, uint64_t lease_ms, struct store_lease *out,
                     struct sbx_error *err) {
  int rc;
  memset(out, 0, sizeof *out);
  if ((rc = need_pg(st, err)) != 0)
    return rc;
  struct st_stmt *s = st__q(&st->l, ST_LEASE_TAKE);
  st__bind_text(s, 1, chat_id);
  st__bind_text(s, 2, node_id);
  st__bind_text(s, 3, node_url);
  st__bind_int64(s, 4, (int64_t)lease_ms);
  rc = st__step(s, "lease take", err);
  if (rc == ST_ROW) {
    out->mine = 1;
    out->epoch = st__col_int64(s, 0);
    if (st__fence_set(st, chat_id, node_id, out->epoch) != 0) {
      st__reset(s);
      return sbx_error_set(err, SBX_ENOMEM, "lease of chat %s: out of memory", chat_id);
    }
    snprintf(out->node_id, sizeof out->node_id, "%s", node_id);
    snprintf(out->node_url, sizeof out->node_url, "%s", node_url);
    out->left_ms = lease_ms;
  }
  st__reset(s);
  if (rc != ST_DONE)
    return rc < 0 ? rc : 0;
  /* held by another node: who, and for how long still */
  s = st__q(&st->l, ST_LEASE_OWNER);
  st__bind_text(s, 1, chat_id);
  rc = st__step(s, "lease owner", err);
  if (rc == ST_ROW) {
    st__col_id(s, 0, out->node_id);
    const char *url = st__col_text(s, 1);
    snprintf(out->node_url, sizeof out->node_url, "%s", url ? url : "");
    out->left_ms = (uint64_t)st__col_int64(s, 2);
    out->epoch = st__col_int64(s, 3);
  }
  st__reset(s);
  if (rc == ST_DONE) /* released between the two statements: try again */
    return sbx_error_set(err, SBX_EAGAIN, "lease of chat %s changed hands; try again", chat_id);
  return rc < 0 ? rc : 0;
}

int store_lease_renew(struct store *st, const char *node_id, uint64_t lease_ms, size_t *renewed,
                      struct sbx_error *err) {
  int rc;
  *renewed = 0;
  if ((rc = need_pg(st, err)) != 0)
    return rc;
  struct st_stmt *s = st__q(&st->l, ST_LEASE_RENEW);
  st__bind_text(s, 1, node_id);
  st__bind_int64(s, 2, (int64_t)lease_ms);
  int64_t n = 0;
  rc = st__step_int64(s, "lease renew", &n, err);
  *renewed = (size_t)n;
  return rc;
}

int store_lease_release(struct store *st, const char *chat_id, const char *node_id,
                        struct sbx_error *err) {
  int rc;
  if ((rc = need_pg(st, err)) != 0)
    return rc;
  st__fence_release(st, chat_id);
  struct st_stmt *s = st__q(&st->l, chat_id ? ST_LEASE_RELEASE : ST_LEASE_RELEASE_ALL);
  st__bind_text(s, 1, node_id);
  if (chat_id)
    st__bind_text(s, 2, chat_id);
  return st__step_done(s, "lease release", err);
}

/* ---- notifications -------------------------------------------------------------------------- */

static int notify_exec(struct store *st, struct st_write *w, struct sbx_error *err) {
  struct st_simple *op = (struct st_simple *)w;
  struct st_stmt *s = st__q(&st->w, ST_NOTIFY);
  st__bind_text(s, 1, op->s[0]);
  return st__step_done(s, "notify", err);
}

int store_notify(struct store *st, const char *payload, store_done_cb cb, void *ud) {
  if (st->kind != ST_PG || payload == NULL || strlen(payload) > NOTIFY_MAX)
    return SBX_EINVAL;
  struct st_simple *op = st__simple_new(notify_exec, cb, ud);
  if (op == NULL || st__simple_str(op, 0, payload)) {
    st__simple_discard(op);
    return SBX_ENOMEM;
  }
  return st__submit(st, &op->w);
}

struct st_listen {
  struct store *st;
  PGconn *conn;
  uv_poll_t *poll; /* freed in its close callback */
  uv_timer_t *retry;
  store_notify_cb cb;
  void *ud;
  int closing;
};

static void on_handle_closed(uv_handle_t *h) { sbx_free(h); }

static void on_listen_retry(uv_timer_t *t);

/* Connection lost (or closing): the poll goes; unless closing, a new connection is tried every
 * ST_PG_RETRY_MS. */
static void listen_lost(struct st_listen *ls) {
  if (ls->poll) {
    uv_close((uv_handle_t *)ls->poll, on_handle_closed);
    ls->poll = NULL;
  }
  PQfinish(ls->conn);
  ls->conn = NULL;
  if (!ls->closing)
    uv_timer_start(ls->retry, on_listen_retry, ST_PG_RETRY_MS, 0);
}

static void on_listen_readable(uv_poll_t *h, int status, int events) {
  struct st_listen *ls = h->data;
  (void)events;
  if (status < 0 || !PQconsumeInput(ls->conn)) {
    sbx_log(SBX_LOG_WARN, ST_MOD, "database %s: the listen connection was lost", ls->st->db_name);
    listen_lost(ls);
    return;
  }
  PGnotify *n;
  while ((n = PQnotifies(ls->conn)) != NULL) {
    ls->cb(n->extra ? n->extra : "", ls->ud);
    PQfreemem(n);
    if (ls->conn == NULL) /* the callback closed the store's listening */
      return;
  }
}

/* Opens the listen connection, LISTENs and watches its socket.  0 or an error. */
static int listen_open(struct st_listen *ls, struct sbx_error *err) {
  int rc = st__pg_connect_raw(ls->st->db_url, ls->st->db_name, &ls->conn, err);
  if (rc != 0)
    return rc;
  PGresult *res = PQexec(ls->conn, "LISTEN " NOTIFY_CHANNEL);
  rc = PQresultStatus(res) == PGRES_COMMAND_OK
           ? 0
           : sbx_error_set(err, SBX_EIO, "database %s: LISTEN failed: %s", ls->st->db_name,
                           PQerrorMessage(ls->conn));
  PQclear(res);
  if (rc != 0) {
    PQfinish(ls->conn);
    ls->conn = NULL;
    return rc;
  }
  ls->poll = sbx_malloc(sizeof *ls->poll);
  if (ls->poll == NULL || uv_poll_init(ls->st->loop, ls->poll, PQsocket(ls->conn)) != 0) {
    sbx_free(ls->poll);
    ls->poll = NULL;
    PQfinish(ls->conn);
    ls->conn = NULL;
    return sbx_error_set(err, SBX_ENOMEM, "listen: cannot watch the connection");
  }
  ls->poll->data = ls;
  uv_poll_start(ls->poll, UV_READABLE, on_listen_readable);
  return 0;
}

static void on_listen_retry(uv_timer_t *t) {
  struct st_listen *ls = t->data;
  struct sbx_error err;
  if (ls->closing)
    return;
  if (listen_open(ls, &err) != 0) {
    uv_timer_start(ls->retry, on_listen_retry, ST_PG_RETRY_MS, 0);
    return;
  }
  sbx_log(SBX_LOG_INFO, ST_MOD, "database %s: listening again", ls->st->db_name);
  ls->cb("*", ls->ud); /* what was sent meanwhile is lost */
}

int store_listen(struct store *st, store_notify_cb cb, void *ud, struct sbx_error *err) {
  int rc;
  if ((rc = need_pg(st, err)) != 0)
    return rc;
  if (st->listen != NULL || cb == NULL)
    return sbx_error_set(err, SBX_EINVAL, "store_listen: once, with a callback");
  struct st_listen *ls = sbx_calloc(1, sizeof *ls);
  if (ls == NULL || (ls->retry = sbx_malloc(sizeof *ls->retry)) == NULL) {
    sbx_free(ls);
    return sbx_error_set(err, SBX_ENOMEM, "listen: out of memory");
  }
  ls->st = st;
  ls->cb = cb;
  ls->ud = ud;
  uv_timer_init(st->loop, ls->retry);
  ls->retry->data = ls;
  if ((rc = listen_open(ls, err)) != 0) {
    uv_close((uv_handle_t *)ls->retry, on_handle_closed);
    sbx_free(ls);
    return rc;
  }
  st->listen = ls;
  return 0;
}

void st__listen_close(struct store *st) {
  struct st_listen *ls = st->listen;
  if (ls == NULL)
    return;
  ls->closing = 1;
  listen_lost(ls);
  uv_close((uv_handle_t *)ls->retry, on_handle_closed);
  sbx_free(ls);
  st->listen = NULL;
}
