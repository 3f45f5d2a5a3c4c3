/* pg.c -- the PostgreSQL side of the statement layer: what db.c calls when the store was opened
 * with a database URL.  Connections over libpq, every statement of ST_STMTS prepared by id on
 * each (PQprepare, named "sbx_<id>"), their parameters and results, the schema migrations of this
 * backend, and the ONE place where PostgreSQL's errors (SQLSTATEs, libpq's connection failures)
 * become SBX_* codes (the server's own words kept in struct sbx_error, on one line).
 *
 * Statements: the PostgreSQL text of ST_STMTS, or, where it is ST_SAME, the SQLite text with $N
 * for each ?N and `rid` for `rowid` (every table SQLite orders by rowid has an identity column
 * rid here: its insertion order).  Parameters are sent as text (integers formatted here), blobs
 * in binary; results come back as text, except a blob chunk's (binary).  Types are the server's
 * inference from the statement, declared text only for a parameter the statement never names
 * (a put binds every column of the row, the UPDATE names fewer).  Each execution is one round
 * trip (PQexecPrepared) and fetches every row at once: statements that return many rows have a
 * LIMIT.
 *
 * Connections: the writer's runs the group transactions (synchronous_commit on: COMMIT returns
 * once the server's WAL is flushed, so a write's callback still means durable); the reader's is
 * read-only (default_transaction_read_only) and runs each read in its own implicit transaction,
 * one round trip each, on the loop thread.  A lost connection is opened again (PQreset, the
 * session set up and the statements prepared anew) at most every ST_PG_RETRY_MS: the reader's
 * before any read, the writer's only before a group's BEGIN (st__pg_ready), never inside a
 * transaction, so a group whose connection went away fails as a whole and nothing of it is
 * half-written.  Connection options added unless the URL sets them: connect_timeout 10 s,
 * TCP keepalives, application_name cerea-sandbox.
 *
 * What it does not do: know what a table means (the table files do) or hold a blob's content
 * (chunks.c), or open the store (open.c).
 */
#include "internal.h"

#include <ctype.h>
#include <libpq-fe.h>
#include <stdlib.h>
#include <string.h>

#define PG_MAX_PARAMS   32
#define PG_MAX_DEFERRED 4  /* control statements waiting for the next one (writer.c sends <= 2) */
#define PG_TEXTOID      25 /* pg_type.oid of text */

struct st_pgq {
  char name[24]; /* "sbx_<id>" */
  int nparams;   /* the highest $N of its text */
  int binary;    /* results in binary (a blob chunk's bytes) */
  const char *vals[PG_MAX_PARAMS];
  int lens[PG_MAX_PARAMS], fmts[PG_MAX_PARAMS];
  char num[PG_MAX_PARAMS][24]; /* integers, formatted */
  PGresult *res;               /* the execution's rows; NULL before the first step */
  int row, nrows;              /* the current row (-1 before the first) */
};

struct st_pgconn {
  PGconn *conn;
  char *url;          /* owned: opening it again */
  const char *name;   /* borrowed (st->db_name): what messages call the database */
  int64_t changes;    /* rows the last command changed */
  uint64_t retry_at;  /* mono ms: no new connection before */
  int auto_reconnect; /* the reader: each read stands alone, so it may reconnect first */
  int defer_ctl;      /* the writer: its SAVEPOINT and RELEASE ride with the next statement */
  int fence_session;  /* the writer: its fencing settings applied to this session */
  int ndeferred;
  enum st_stmt_id deferred[PG_MAX_DEFERRED];
  struct st_pgq q[ST_STMT_COUNT];
};

/* ---- errors ---------------------------------------------------------------------------------- */

int st__pg_code(const char *state) {
  static const struct {
    const char *state;
    int code;
  } exact[] = {
      {"40001", SBX_EBUSY},     /* serialization_failure */
      {"40P01", SBX_EBUSY},     /* deadlock_detected */
      {"55P03", SBX_EBUSY},     /* lock_not_available */
      {"53300", SBX_EBUSY},     /* too_many_connections */
      {"53100", SBX_EFULL},     /* disk_full */
      {"53200", SBX_ENOMEM},    /* out_of_memory */
      {"25006", SBX_EPERM},     /* read_only_sql_transaction */
      {"42501", SBX_EPERM},     /* insufficient_privilege */
      {"28000", SBX_EUNAUTH},   /* invalid_authorization_specification */
      {"28P01", SBX_EUNAUTH},   /* invalid_password */
      {"3D000", SBX_ENOENT},    /* invalid_catalog_name: no such database */
      {"57014", SBX_ETIMEDOUT}, /* query_canceled (statement_timeout) */
      {"XX001", SBX_ECORRUPT},  /* data_corrupted */
      {"XX002", SBX_ECORRUPT},  /* index_corrupted */
  };
  static const struct {
    const char *cls;
    int code;
  } classes[] = {
      {"23", SBX_ECONFLICT}, /* integrity constraint violation: unique, foreign key, ... */
      {"08", SBX_EIO},       /* connection exception */
      {"57", SBX_EIO},       /* operator intervention: the server shuts down, cannot connect */
      {"58", SBX_EIO},       /* system error: an I/O error of the server */
      {"53", SBX_EFULL},     /* insufficient resources */
      {"22", SBX_EINVAL},    /* data exception: a value the column cannot hold */
  };
  if (state == NULL || strlen(state) != 5)
    return SBX_EDB;
  for (size_t i = 0; i < SBX_ARRAY_SIZE(exact); i++)
    if (strcmp(state, exact[i].state) == 0)
      return exact[i].code;
  for (size_t i = 0; i < SBX_ARRAY_SIZE(classes); i++)
    if (strncmp(state, classes[i].cls, 2) == 0)
      return classes[i].code;
  return SBX_EDB;
}

/* libpq's and the server's messages span lines ("...failed: FATAL:  ...\n\tIs the server
 * running...?"): one line, runs of white space as one space, none at the ends. */
static void one_line(const char *in, char *out, size_t cap) {
  size_t n = 0;
  int space = 0;
  for (const char *p = in ? in : ""; *p && n + 1 < cap; p++) {
    if (isspace((unsigned char)*p)) {
      space = n > 0;
      continue;
    }
    if (space && n + 2 < cap)
      out[n++] = ' ';
    space = 0;
    out[n++] = *p;
  }
  out[n] = '\0';
}

/* A failed execution (res may be NULL: libpq could not even make a result). */
static int exec_failed(struct st_pgconn *c, const PGresult *res, const char *what,
                       struct sbx_error *err) {
  char msg[600];
  if (PQstatus(c->conn) != CONNECTION_OK) {
    one_line(PQerrorMessage(c->conn), msg, sizeof msg);
    return sbx_error_set(err, SBX_EIO, "%s: database %s: connection lost: %s", what ? what : "sql",
                         c->name, msg);
  }
  if (res == NULL) {
    one_line(PQerrorMessage(c->conn), msg, sizeof msg);
    return sbx_error_set(err, SBX_ENOMEM, "%s: %s", what ? what : "sql", msg);
  }
  const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
  const char *primary = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
  const char *detail = PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL);
  char d[300] = "";
  one_line(primary ? primary : PQresultErrorMessage(res), msg, sizeof msg);
  if (detail)
    one_line(detail, d, sizeof d);
  return sbx_error_set(err, st__pg_code(state), "%s: %s%s%s (postgres %s)", what ? what : "sql",
                       msg, d[0] ? ": " : "", d, state ? state : "?");
}

/* What an error of raw SQL calls it: its first words (a migration is long). */
static const char *sql_what(const char *sql, char *buf, size_t cap) {
  size_t n = strlen(sql);
  snprintf(buf, cap, "%.*s%s", (int)SBX_MIN(n, (size_t)48), sql, n > 48 ? "..." : "");
  return buf;
}

/* Why a connection could not be made, from libpq's message (the server sends its SQLSTATE only
 * with a result, which a failed connection does not have).  The message stays as it is. */
static int connect_code(PGconn *conn) {
  const char *m = PQerrorMessage(conn);
  if (strstr(m, "password authentication failed") || strstr(m, "authentication failed") ||
      (PQconnectionNeedsPassword(conn) && strstr(m, "password")))
    return SBX_EUNAUTH;
  if (strstr(m, "pg_hba.conf"))
    return SBX_EPERM;
  if (strstr(m, "database") && strstr(m, "does not exist"))
    return SBX_ENOENT;
  if (strstr(m, "out of memory"))
    return SBX_ENOMEM;
  return SBX_EIO; /* refused, no such host, timed out, the server starting or stopping */
}

int st__pg_name(const char *url, char **out, struct sbx_error *err) {
  char *perr = NULL;
  *out = NULL;
  PQconninfoOption *opts = PQconninfoParse(url, &perr);
  if (opts == NULL) {
    char msg[300];
    one_line(perr ? perr : "out of memory", msg, sizeof msg);
    PQfreemem(perr);
    return sbx_error_set(err, perr ? SBX_EINVAL : SBX_ENOMEM, "database URL: %s", msg);
  }
  const char *user = NULL, *host = NULL, *port = NULL, *db = NULL;
  for (PQconninfoOption *o = opts; o->keyword; o++) {
    if (o->val == NULL || o->val[0] == '\0')
      continue;
    if (strcmp(o->keyword, "user") == 0)
      user = o->val;
    else if (strcmp(o->keyword, "host") == 0 || (strcmp(o->keyword, "hostaddr") == 0 && !host))
      host = o->val;
    else if (strcmp(o->keyword, "port") == 0)
      port = o->val;
    else if (strcmp(o->keyword, "dbname") == 0)
      db = o->val;
  }
  size_t n = 64 + (user ? strlen(user) : 0) + (host ? strlen(host) : 0) +
             (port ? strlen(port) : 0) + (db ? strlen(db) : 0);
  char *s = sbx_malloc(n);
  if (s)
    snprintf(s, n, "%s%s%s%s%s/%s", user ? user : "", user ? "@" : "", host ? host : "localhost",
             port ? ":" : "", port ? port : "", db ? db : (user ? user : ""));
  PQconninfoFree(opts);
  if (s == NULL)
    return sbx_error_set(err, SBX_ENOMEM, "database URL: out of memory");
  *out = s;
  return 0;
}

/* ---- connections ----------------------------------------------------------------------------- */

/* The server's notices ("relation ... already exists, skipping") go to the log, not stderr. */
static void on_notice(void *name, const char *message) {
  char msg[400];
  one_line(message, msg, sizeof msg);
  sbx_log(SBX_LOG_DEBUG, ST_MOD, "database %s: %s", (const char *)name, msg);
}

static PGconn *connect_url(const char *url) {
  /* the URL is expanded where dbname stands and overrides what comes before it */
  static const char *const keys[] = {
      "connect_timeout",  "keepalives",       "keepalives_idle", "keepalives_interval",
      "keepalives_count", "application_name", "dbname",          NULL};
  const char *vals[] = {"10", "1", "10", "5", "3", "cerea-sandbox", url, NULL};
  return PQconnectdbParams(keys, vals, 1);
}

/* The session of a role: the writer's COMMIT waits for the server's WAL flush whatever the
 * server's default, and so does a lease's (nodes.c); the reader writes nothing.  All in UTF-8, as
 * SQLite's text.  Fencing (nodes.c) locks a chat's lease row from a write's check to its commit,
 * so a lease statement waits at most PG_LEASE_LOCK_MS for a lock (then SBX_EBUSY: asked again
 * later), never stalling its loop long; and once this node fences its writes, the writer's
 * session ends when it sits idle inside a transaction for PG_WRITER_IDLE_TXN_MS
 * (st__pg_fence_session: the writer never waits that long for itself there: that is a stopped or
 * stuck process, whose transaction the server then rolls back and whose locks go). */
#define PG_WRITER_IDLE_TXN_MS "5000"
#define PG_LEASE_LOCK_MS      "1000"
static int session_setup(struct st_db *db, struct sbx_error *err) {
  struct st_pgconn *c = db->pg;
  const char *enc = PQparameterStatus(c->conn, "server_encoding");
  if (enc == NULL || strcmp(enc, "UTF8") != 0)
    return sbx_error_set(err, SBX_EINVAL,
                         "database %s is encoded in %s: the store needs a UTF8 database "
                         "(CREATE DATABASE ... ENCODING 'UTF8')",
                         c->name, enc ? enc : "an unknown encoding");
  const char *sql =
      strcmp(db->role, "writer") == 0
          ? "SET client_encoding = 'UTF8'; SET synchronous_commit = on"
      : strcmp(db->role, "reader") != 0
          ? "SET client_encoding = 'UTF8'; SET synchronous_commit = on; "
            "SET lock_timeout = " PG_LEASE_LOCK_MS
          : "SET client_encoding = 'UTF8'; SET default_transaction_read_only = on";
  c->fence_session = 0;
  return st__pg_exec(db, sql, err);
}

int st__pg_fence_session(struct st_db *db, struct sbx_error *err) {
  struct st_pgconn *c = db->pg;
  if (c->fence_session)
    return 0;
  int rc = st__pg_exec(db, "SET idle_in_transaction_session_timeout = " PG_WRITER_IDLE_TXN_MS, err);
  c->fence_session = rc == 0;
  return rc;
}

int st__pg_connect_raw(const char *url, const char *name, struct pg_conn **out,
                       struct sbx_error *err) {
  PGconn *conn = connect_url(url);
  *out = NULL;
  if (conn == NULL)
    return sbx_error_set(err, SBX_ENOMEM, "database %s: out of memory", name);
  if (PQstatus(conn) != CONNECTION_OK) {
    char msg[600];
    one_line(PQerrorMessage(conn), msg, sizeof msg);
    int code = connect_code(conn);
    PQfinish(conn);
    return sbx_error_set(err, code, "database %s: %s", name, msg);
  }
  PQsetNoticeProcessor(conn, on_notice, (void *)name);
  *out = conn;
  return 0;
}

int st__pg_connect(struct st_db *db, const char *url, const char *name, struct sbx_error *err) {
  struct st_pgconn *c = sbx_calloc(1, sizeof *c);
  if (c == NULL || (c->url = sbx_strdup(url)) == NULL) {
    sbx_free(c);
    return sbx_error_set(err, SBX_ENOMEM, "database: out of memory");
  }
  c->name = name;
  c->auto_reconnect = strcmp(db->role, "writer") != 0; /* each of its statements stands alone */
  c->defer_ctl = strcmp(db->role, "writer") == 0;
  db->pg = c;
  c->conn = connect_url(url);
  if (c->conn == NULL)
    return sbx_error_set(err, SBX_ENOMEM, "database %s: out of memory", name);
  PQsetNoticeProcessor(c->conn, on_notice, (void *)c->name);
  if (PQstatus(c->conn) != CONNECTION_OK) {
    char msg[600];
    one_line(PQerrorMessage(c->conn), msg, sizeof msg);
    return sbx_error_set(err, connect_code(c->conn), "database %s: %s", name, msg);
  }
  return session_setup(db, err);
}

#define PG_TEXT_MAX 4096 /* the longest statement's text, and then some */

/* A statement's text for PostgreSQL into out: its own, or the SQLite one with ?N -> $N and rowid
 * -> rid.  *nparams gets the highest N, used[N - 1] whether it appears.  NULL when too long. */
static char *pg_text(int id, char out[PG_TEXT_MAX], int *nparams,
                     unsigned char used[PG_MAX_PARAMS]) {
  const char *src = st__stmt_pg[id] ? st__stmt_pg[id] : st__stmt_sqlite[id];
  char *o = out;
  if (strlen(src) >= PG_TEXT_MAX) /* the rewrites never lengthen it */
    return NULL;
  *nparams = 0;
  memset(used, 0, PG_MAX_PARAMS);
  for (const char *p = src; *p;) {
    if ((*p == '?' || *p == '$') && isdigit((unsigned char)p[1])) {
      int k = atoi(p + 1);
      *o++ = '$';
      for (p++; isdigit((unsigned char)*p);)
        *o++ = *p++;
      if (k >= 1 && k <= PG_MAX_PARAMS) {
        used[k - 1] = 1;
        if (k > *nparams)
          *nparams = k;
      }
      continue;
    }
    if (strncmp(p, "rowid", 5) == 0 &&
        (p == src || !(isalnum((unsigned char)p[-1]) || p[-1] == '_')) &&
        !(isalnum((unsigned char)p[5]) || p[5] == '_')) {
      memcpy(o, "rid", 3);
      o += 3;
      p += 5;
      continue;
    }
    *o++ = *p++;
  }
  *o = '\0';
  return out;
}

int st__pg_prepare(struct st_db *db, struct sbx_error *err) {
  struct st_pgconn *c = db->pg;
  for (int i = 0; i < ST_STMT_COUNT; i++) {
    struct st_pgq *q = &c->q[i];
    unsigned char used[PG_MAX_PARAMS];
    unsigned int types[PG_MAX_PARAMS];
    db->q[i].pg = q;
    char buf[PG_TEXT_MAX], *text = pg_text(i, buf, &q->nparams, used);
    if (text == NULL)
      return sbx_error_set(err, SBX_EINVAL, "%s: statement too long", st__stmt_names[i]);
    for (int k = 0; k < PG_MAX_PARAMS; k++)
      types[k] = used[k] ? 0 : PG_TEXTOID; /* 0: inferred; a parameter never named: text */
    snprintf(q->name, sizeof q->name, "sbx_%d", i);
    q->binary = i == ST_CHUNK_GET;
    q->row = -1;
    PGresult *res = PQprepare(c->conn, q->name, text, q->nparams, types);
    int rc =
        PQresultStatus(res) == PGRES_COMMAND_OK ? 0 : exec_failed(c, res, st__stmt_names[i], err);
    PQclear(res);
    if (rc != 0)
      return rc;
  }
  return 0;
}

void st__pg_close(struct st_db *db) {
  struct st_pgconn *c = db->pg;
  if (c == NULL)
    return;
  for (int i = 0; i < ST_STMT_COUNT; i++) {
    PQclear(c->q[i].res);
    db->q[i].pg = NULL;
  }
  PQfinish(c->conn);
  sbx_free(c->url);
  sbx_free(c);
  db->pg = NULL;
}

/* A lost connection opened again: the session and the statements as at open. */
static int reconnect(struct st_db *db, struct sbx_error *err) {
  struct st_pgconn *c = db->pg;
  uint64_t now = sbx_now_mono_ms();
  if (now < c->retry_at)
    return sbx_error_set(err, SBX_EIO, "database %s: connection lost (trying again shortly)",
                         c->name);
  c->retry_at = now + ST_PG_RETRY_MS;
  c->ndeferred = 0;                         /* of a transaction the lost session took with it */
  for (int i = 0; i < ST_STMT_COUNT; i++) { /* results of the lost session; bindings stay */
    PQclear(c->q[i].res);
    c->q[i].res = NULL;
    c->q[i].row = -1;
    c->q[i].nrows = 0;
  }
  PQreset(c->conn);
  int rc;
  if (PQstatus(c->conn) != CONNECTION_OK) {
    char msg[600];
    one_line(PQerrorMessage(c->conn), msg, sizeof msg);
    return sbx_error_set(err, connect_code(c->conn), "database %s: connection lost: %s", c->name,
                         msg);
  }
  if ((rc = session_setup(db, err)) != 0 || (rc = st__pg_prepare(db, err)) != 0)
    return rc;
  sbx_log(SBX_LOG_INFO, ST_MOD, "database %s: the %s's connection is back", c->name, db->role);
  return 0;
}

int st__pg_ready(struct st_db *db, struct sbx_error *err) {
  return PQstatus(db->pg->conn) == CONNECTION_OK ? 0 : reconnect(db, err);
}

int st__pg_exec(struct st_db *db, const char *sql, struct sbx_error *err) {
  struct st_pgconn *c = db->pg;
  char what[64];
  PGresult *res = PQexec(c->conn, sql);
  ExecStatusType es = PQresultStatus(res);
  int rc = es == PGRES_COMMAND_OK || es == PGRES_TUPLES_OK
               ? 0
               : exec_failed(c, res, sql_what(sql, what, sizeof what), err);
  PQclear(res);
  return rc;
}

int st__pg_int(struct st_db *db, const char *sql, int64_t *out, struct sbx_error *err) {
  struct st_pgconn *c = db->pg;
  PGresult *res = PQexec(c->conn, sql);
  int rc = 0;
  char what[64];
  if (PQresultStatus(res) != PGRES_TUPLES_OK)
    rc = exec_failed(c, res, sql_what(sql, what, sizeof what), err);
  else if (PQntuples(res) < 1 || PQnfields(res) < 1)
    rc = sbx_error_set(err, SBX_ENOENT, "%s: no row", sql);
  else
    *out = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
  PQclear(res);
  return rc;
}

int64_t st__pg_changes(struct st_db *db) { return db->pg->changes; }

int st__pg_in_txn(struct st_db *db) {
  PGTransactionStatusType t = PQtransactionStatus(db->pg->conn);
  return t == PQTRANS_INTRANS || t == PQTRANS_INERROR || t == PQTRANS_ACTIVE;
}

/* ---- statements ------------------------------------------------------------------------------ */

void st__pg_bind(struct st_stmt *s, int i, const char *v, size_t len, int binary) {
  struct st_pgq *q = s->pg;
  if (i < 1 || i > q->nparams)
    return; /* as SQLite: a parameter the statement does not have */
  q->vals[i - 1] = v;
  q->lens[i - 1] = (int)len;
  q->fmts[i - 1] = binary;
}

void st__pg_bind_int64(struct st_stmt *s, int i, int64_t v) {
  struct st_pgq *q = s->pg;
  if (i < 1 || i > q->nparams)
    return;
  snprintf(q->num[i - 1], sizeof q->num[i - 1], "%lld", (long long)v);
  st__pg_bind(s, i, q->num[i - 1], strlen(q->num[i - 1]), 0);
}

/* Runs q after the writer's deferred control statements, in one round trip (libpq's pipeline
 * mode: every query sent, then one sync, then the results read in order).  The result is q's,
 * or the first deferred statement's that failed (the server skips what follows a failure up to
 * the sync, so q did not run); NULL when the connection failed. */
static PGresult *exec_pipelined(struct st_pgconn *c, struct st_pgq *q) {
  int n = c->ndeferred, sent = 0, ok = PQenterPipelineMode(c->conn);
  c->ndeferred = 0;
  for (int i = 0; ok && i < n; i++, sent++)
    ok = PQsendQueryPrepared(c->conn, c->q[c->deferred[i]].name, 0, NULL, NULL, NULL, 0);
  if (ok && (ok = PQsendQueryPrepared(c->conn, q->name, q->nparams, q->vals, q->lens, q->fmts,
                                      q->binary)))
    sent++;
  if (ok)
    ok = PQpipelineSync(c->conn);
  PGresult *mine = NULL, *failed = NULL;
  for (int i = 0; ok && i < sent; i++) {
    PGresult *r = PQgetResult(c->conn);
    if (r == NULL) {
      ok = 0;
      break;
    }
    ExecStatusType es = PQresultStatus(r);
    if (i == n)
      mine = r;
    else if (es != PGRES_COMMAND_OK && failed == NULL)
      failed = r;
    else
      PQclear(r);
    while ((r = PQgetResult(c->conn)) != NULL) /* the end of that query's results */
      PQclear(r);
  }
  if (ok) { /* the sync point */
    PGresult *r = PQgetResult(c->conn);
    ok = r && PQresultStatus(r) == PGRES_PIPELINE_SYNC;
    PQclear(r);
  }
  if (!ok || !PQexitPipelineMode(c->conn)) {
    PQclear(mine);
    PQclear(failed);
    return NULL;
  }
  if (failed) {
    PQclear(mine);
    return failed;
  }
  return mine;
}

int st__pg_step(struct st_stmt *s, const char *what, struct sbx_error *err) {
  struct st_pgq *q = s->pg;
  struct st_pgconn *c = s->db->pg;
  int rc;
  if (q->res == NULL && c->defer_ctl && (s->id == ST_SAVEPOINT || s->id == ST_RELEASE) &&
      c->ndeferred < PG_MAX_DEFERRED) {
    /* The writer's savepoint around each write costs no round trip of its own: it goes with the
     * write's first statement (or a RELEASE with the next write's, or with the COMMIT).  A
     * failure of one is the failure of the statement it went with. */
    c->deferred[c->ndeferred++] = s->id;
    q->row = q->nrows = 0;
    return ST_DONE;
  }
  if (q->res == NULL) {
    for (int attempt = 0;; attempt++) {
      /* the reader runs each read alone: a lost connection is opened again first, and a read
       * that finds its session ended by the server is tried once more on a new one */
      if (c->auto_reconnect && PQstatus(c->conn) != CONNECTION_OK &&
          (rc = reconnect(s->db, err)) != 0)
        return rc;
      q->res = c->ndeferred ? exec_pipelined(c, q)
                            : PQexecPrepared(c->conn, q->name, q->nparams, q->vals, q->lens,
                                             q->fmts, q->binary);
      ExecStatusType es = PQresultStatus(q->res);
      if (es == PGRES_COMMAND_OK || es == PGRES_TUPLES_OK)
        break;
      int again = c->auto_reconnect && attempt == 0 && PQstatus(c->conn) != CONNECTION_OK;
      if (!again)
        rc = exec_failed(c, q->res, what, err);
      PQclear(q->res);
      q->res = NULL;
      if (!again)
        return rc;
      c->retry_at = 0; /* the first try after a loss is never held back */
    }
    /* COMMIT of a transaction the server had already failed answers ROLLBACK, not an error */
    if (s->id == ST_COMMIT && strcmp(PQcmdStatus(q->res), "ROLLBACK") == 0) {
      PQclear(q->res);
      q->res = NULL;
      return sbx_error_set(err, SBX_EDB, "%s: the transaction was rolled back",
                           what ? what : "COMMIT");
    }
    c->changes = strtoll(PQcmdTuples(q->res), NULL, 10); /* "" (0) for a SELECT */
    q->nrows = PQntuples(q->res);
    q->row = -1;
  }
  if (q->row < q->nrows)
    q->row++;
  return q->row < q->nrows ? ST_ROW : ST_DONE;
}

void st__pg_reset(struct st_stmt *s) {
  struct st_pgq *q = s->pg;
  if (q == NULL)
    return;
  PQclear(q->res);
  q->res = NULL;
  q->row = -1;
  q->nrows = 0;
  for (int i = 0; i < q->nparams; i++) {
    q->vals[i] = NULL;
    q->lens[i] = 0;
    q->fmts[i] = 0;
  }
}

const char *st__pg_col(struct st_stmt *s, int i, size_t *len) {
  struct st_pgq *q = s->pg;
  if (len)
    *len = 0;
  if (q->res == NULL || q->row < 0 || q->row >= q->nrows || i < 0 || i >= PQnfields(q->res) ||
      PQgetisnull(q->res, q->row, i))
    return NULL;
  if (len)
    *len = (size_t)PQgetlength(q->res, q->row, i);
  return PQgetvalue(q->res, q->row, i);
}

/* ---- migrations ------------------------------------------------------------------------------
 * pg_migrations[v - 1] takes the schema from version v - 1 to v; the version is the one row of
 * schema_version.  Forward only: a database newer than this code is refused.  Each step runs in
 * its own transaction (PostgreSQL's DDL is transactional: a failed step leaves the version before
 * it), all of them under an advisory lock of the schema, so that nodes starting together migrate
 * once.  Each SQLite step after version 7 has its step here (SQLite 8 is version 3, SQLite 9 version 4).  Version 1 is
 * the SQLite schema of version 7 (db.c), plus what this backend needs:
 *   - rid, an identity column, where SQLite orders by rowid (insertion order): chats, files, runs;
 *   - integers as bigint (SQLite's are 64-bit);
 *   - blob_chunks: a blob's content in ST_CHUNK-byte rows keyed by (sha256, n), deleted with the
 *     blob's row; stored out of line and uncompressed (most blobs are compressed already);
 *   - events keyed by (chat_id, seq) (a heap table appends rows wherever: the index is what a
 *     chat's events are found by, as SQLite's events_chat_seq). */
static const char *const pg_migrations[] = {
    /* 1: the domain model, as SQLite's schema 7 */
    "CREATE TABLE chats(rid BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE, id TEXT PRIMARY KEY,"
    " token_hash TEXT NOT NULL, title TEXT, created_at BIGINT NOT NULL);"
    "CREATE TABLE blobs(sha256 TEXT PRIMARY KEY, size BIGINT NOT NULL, created_at BIGINT NOT NULL);"
    "CREATE TABLE blob_chunks(sha256 TEXT NOT NULL REFERENCES blobs(sha256) ON DELETE CASCADE,"
    " n INTEGER NOT NULL, data BYTEA NOT NULL, PRIMARY KEY(sha256, n));"
    "ALTER TABLE blob_chunks ALTER COLUMN data SET STORAGE EXTERNAL;"
    "CREATE TABLE files(rid BIGINT GENERATED ALWAYS AS IDENTITY, id TEXT PRIMARY KEY,"
    " chat_id TEXT NOT NULL REFERENCES chats(id) ON DELETE CASCADE,"
    " name TEXT NOT NULL, version BIGINT NOT NULL, source BIGINT NOT NULL,"
    " sha256 TEXT NOT NULL REFERENCES blobs(sha256), size BIGINT NOT NULL,"
    " mounted BIGINT NOT NULL, left_out_reason TEXT, text_of TEXT NOT NULL, run_id TEXT NOT NULL,"
    " kind TEXT, created_at BIGINT NOT NULL, expires_at BIGINT NOT NULL DEFAULT 0,"
    " dup_stem TEXT NOT NULL, dup_ext TEXT NOT NULL, dup_n BIGINT NOT NULL,"
    " UNIQUE(chat_id, name, version));"
    "CREATE INDEX files_dup ON files(chat_id, dup_stem, dup_ext, dup_n);"
    "CREATE INDEX files_sha ON files(sha256);"
    "CREATE INDEX files_expiry ON files(expires_at) WHERE expires_at > 0;"
    "CREATE INDEX files_output ON files(chat_id, source, size) WHERE source = 3;"
    "CREATE TABLE turns(id TEXT PRIMARY KEY,"
    " chat_id TEXT NOT NULL REFERENCES chats(id) ON DELETE CASCADE, state BIGINT NOT NULL,"
    " answer TEXT, created_at BIGINT NOT NULL, finished_at BIGINT NOT NULL);"
    "CREATE TABLE runs(rid BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE, id TEXT PRIMARY KEY,"
    " chat_id TEXT NOT NULL REFERENCES chats(id) ON DELETE CASCADE, turn_id TEXT NOT NULL,"
    " code TEXT NOT NULL, origin TEXT NOT NULL, state TEXT NOT NULL, status TEXT,"
    " timeout_s BIGINT NOT NULL, attempts BIGINT NOT NULL, stdout_text TEXT, stderr_text TEXT,"
    " stdout_truncated BIGINT NOT NULL, stderr_truncated BIGINT NOT NULL, error_json TEXT,"
    " notes_json TEXT, remounted_json TEXT, restarted BIGINT NOT NULL,"
    " files_unlisted BIGINT NOT NULL, figures_dropped BIGINT NOT NULL, result_hash TEXT,"
    " idempotency_key TEXT, seq BIGINT NOT NULL, created_at BIGINT NOT NULL,"
    " started_at BIGINT NOT NULL, finished_at BIGINT NOT NULL);"
    "CREATE UNIQUE INDEX runs_idem ON runs(chat_id, idempotency_key)"
    " WHERE idempotency_key IS NOT NULL;"
    "CREATE INDEX runs_chat_seq ON runs(chat_id, seq);"
    "CREATE INDEX runs_unfinished ON runs(created_at) WHERE state <> 'done';"
    "CREATE TABLE run_files(run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
    " position BIGINT NOT NULL, file_id TEXT NOT NULL REFERENCES files(id) ON DELETE CASCADE,"
    " PRIMARY KEY(run_id, position));"
    "CREATE INDEX run_files_file ON run_files(file_id);"
    "CREATE TABLE events(chat_id TEXT NOT NULL REFERENCES chats(id) ON DELETE CASCADE,"
    " seq BIGINT NOT NULL, type TEXT NOT NULL, payload TEXT NOT NULL,"
    " created_at BIGINT NOT NULL DEFAULT 0, PRIMARY KEY(chat_id, seq));"
    "CREATE TABLE settings(key TEXT PRIMARY KEY, value TEXT NOT NULL);",
    /* 2: nodes (nodes.c): which node serves each chat until when, and every epoch of each chat's
     * lease (who held it, from, until); the leases a node holds found by node */
    "CREATE TABLE chat_leases(chat_id TEXT PRIMARY KEY, node_id TEXT NOT NULL,"
    " node_url TEXT NOT NULL, epoch BIGINT NOT NULL, expires_at TIMESTAMPTZ NOT NULL);"
    "CREATE INDEX chat_leases_node ON chat_leases(node_id);"
    "CREATE TABLE lease_log(chat_id TEXT NOT NULL, epoch BIGINT NOT NULL, node_id TEXT NOT NULL,"
    " taken_at TIMESTAMPTZ NOT NULL, until_at TIMESTAMPTZ NOT NULL, PRIMARY KEY(chat_id, epoch));",
    /* 3: SQLite's schema 8: what a run showed besides its output, the cell's value and its
     * display() bundles, as the orchestrator's JSON text; runs stored before read NULL */
    "ALTER TABLE runs ADD COLUMN value_json TEXT;"
    "ALTER TABLE runs ADD COLUMN displays_json TEXT;",
    /* 4: SQLite's schema 9: a chat's conversation, its messages in creation order (rid, as
     * SQLite's rowid); the answers still streaming by a partial index */
    "CREATE TABLE messages(rid BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE, id TEXT PRIMARY KEY,"
    " chat_id TEXT NOT NULL REFERENCES chats(id) ON DELETE CASCADE, turn_id TEXT NOT NULL,"
    " role TEXT NOT NULL, state TEXT NOT NULL, text TEXT NOT NULL, error_json TEXT,"
    " run_ids_json TEXT NOT NULL, calls_json TEXT, created_at BIGINT NOT NULL,"
    " updated_at BIGINT NOT NULL);"
    "CREATE INDEX messages_chat ON messages(chat_id, rid);"
    "CREATE INDEX messages_streaming ON messages(turn_id) WHERE state = 'streaming';",
    /* 5: SQLite's schema 10: where in an answer's text its tool runs happened */
    "ALTER TABLE messages ADD COLUMN parts_json TEXT;",
    /* 6: SQLite's schema 11: people, their sessions, a chat's owner */
    "CREATE TABLE people(rid BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE, id TEXT PRIMARY KEY,"
    " name TEXT NOT NULL UNIQUE, role TEXT NOT NULL, pw_hash TEXT NOT NULL,"
    " disabled BIGINT NOT NULL DEFAULT 0, must_change_password BIGINT NOT NULL DEFAULT 0,"
    " created_at BIGINT NOT NULL, last_seen_at BIGINT NOT NULL DEFAULT 0,"
    " settings_json TEXT NOT NULL DEFAULT '{}');"
    "CREATE TABLE sessions(token_hash TEXT PRIMARY KEY,"
    " person_id TEXT NOT NULL REFERENCES people(id) ON DELETE CASCADE,"
    " created_at BIGINT NOT NULL, last_used_at BIGINT NOT NULL, ended_at BIGINT NOT NULL DEFAULT 0);"
    "CREATE INDEX sessions_person ON sessions(person_id) WHERE ended_at = 0;"
    "ALTER TABLE chats ADD COLUMN owner TEXT REFERENCES people(id);"
    "CREATE INDEX chats_owner ON chats(owner, created_at) WHERE owner IS NOT NULL;",
};

/* The advisory lock of the schema the connection works in (a key from its name). */
#define PG_LOCK_KEY "hashtext('cerea-sandbox schema ' || current_schema())"

int st__pg_version(struct st_db *db, int *out, struct sbx_error *err) {
  int64_t exists = 0, v = 0;
  int rc = st__pg_int(db, "SELECT (to_regclass('schema_version') IS NOT NULL)::int", &exists, err);
  if (rc == 0 && exists)
    rc = st__pg_int(db, "SELECT COALESCE(MAX(version), 0) FROM schema_version", &v, err);
  *out = (int)v;
  return rc;
}

static int pg_exec(void *db, const char *sql, struct sbx_error *err) {
  return st__pg_exec(db, sql, err);
}

int st__pg_migrate(struct st_db *db, int target, struct sbx_error *err) {
  int cur = 0, rc;
  const int have = (int)SBX_ARRAY_SIZE(pg_migrations);
  if (target > have)
    return sbx_error_set(err, SBX_EINVAL, "no migration to schema version %d", target);
  if ((rc = st__pg_exec(db, "SELECT pg_advisory_lock(" PG_LOCK_KEY ")", err)) != 0)
    return rc;
  if ((rc = st__pg_exec(db,
                        "CREATE TABLE IF NOT EXISTS schema_version(version INTEGER NOT NULL);"
                        "INSERT INTO schema_version SELECT 0 WHERE NOT EXISTS "
                        "(SELECT 1 FROM schema_version)",
                        err)) != 0 ||
      (rc = st__pg_version(db, &cur, err)) != 0)
    goto out;
  if (cur > have) {
    rc = sbx_error_set(err, SBX_ECORRUPT,
                       "database %s: schema version %d is newer than this program's %d",
                       db->pg->name, cur, have);
    goto out;
  }
  for (int v = cur + 1; v <= target; v++) {
    char set[80];
    snprintf(set, sizeof set, "UPDATE schema_version SET version = %d", v);
    if ((rc = st__migrate_step(pg_exec, db, "BEGIN", pg_migrations[v - 1], set, v, err)) != 0)
      goto out;
    sbx_log(SBX_LOG_DEBUG, ST_MOD, "database %s: schema migrated to version %d", db->pg->name, v);
  }
out:;
  struct sbx_error ignored;
  st__pg_exec(db, "SELECT pg_advisory_unlock(" PG_LOCK_KEY ")", &ignored);
  return rc;
}
