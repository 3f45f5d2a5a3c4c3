/* helpers.h -- what the persistence tests share: a store in a fresh temporary directory on its
 * own loop, a callback recorder, and the teardown that insists nothing is left open
 * (uv_loop_close() == 0).  Header-only (static functions) so each suite is one executable.
 *
 * The backend: SQLite by default; PostgreSQL when STORE_TEST_PG holds a server's URL (a
 * database the tests may create schemas in; scripts/test.d/45-postgres.sh starts one).  Every
 * test directory then has a schema of its own in that database (t_schema: made by t_mkdir,
 * dropped by t_rmrf), named in the store's URL (t_url), so tests stay apart as they are on SQLite.
 * A test that means something for one backend only says so (T_SQLITE_ONLY / T_PG_ONLY: a line
 * on stderr naming the test and why, then it returns). */
#ifndef SBX_TEST_STORE_HELPERS_H
#define SBX_TEST_STORE_HELPERS_H

#define _XOPEN_SOURCE 700
#include <check.h>
#include <ftw.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "internal.h"
#include "store.h"

/* ---- the backend ---------------------------------------------------------------------------- */

static inline const char *t_pg_base(void) {
  const char *u = getenv("STORE_TEST_PG");
  return u && *u ? u : NULL;
}
static inline int t_pg(void) { return t_pg_base() != NULL; }

#define T_SQLITE_ONLY(why)                                                                         \
  do {                                                                                             \
    if (t_pg()) {                                                                                  \
      fprintf(stderr, "SKIP %s on PostgreSQL: %s\n", __func__, (why));                             \
      return;                                                                                      \
    }                                                                                              \
  } while (0)
#define T_PG_ONLY(why)                                                                             \
  do {                                                                                             \
    if (!t_pg()) {                                                                                 \
      fprintf(stderr, "SKIP %s on SQLite: %s (set STORE_TEST_PG)\n", __func__, (why));             \
      return;                                                                                      \
    }                                                                                              \
  } while (0)

/* The schema of test directory dir: "t_" and its last path segment in hex. */
static inline void t_schema(const char *dir, char *out, size_t cap) {
  const char *b = strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir;
  size_t n = (size_t)snprintf(out, cap, "t_");
  for (; *b && n + 3 < cap; b++)
    n += (size_t)snprintf(out + n, cap - n, "%02x", (unsigned char)*b);
}

/* The database URL of the store of dir: the server's, that schema first in its search_path. */
static inline void t_url(const char *dir, char *out, size_t cap) {
  char sch[200];
  t_schema(dir, sch, sizeof sch);
  const char *base = t_pg_base();
  snprintf(out, cap, "%s%coptions=-csearch_path%%3D%s", base, strchr(base, '?') ? '&' : '?', sch);
}

/* Runs sql on a connection of its own to the server (no schema); asserts it worked. */
static inline void t_pg_admin(const char *sql) {
  PGconn *c = PQconnectdb(t_pg_base());
  ck_assert_msg(PQstatus(c) == CONNECTION_OK, "STORE_TEST_PG: %s", PQerrorMessage(c));
  PQclear(PQexec(c, "SET client_min_messages = warning")); /* DROP ... CASCADE's notices */
  PGresult *r = PQexec(c, sql);
  ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK,
                "%s: %s", sql, PQerrorMessage(c));
  PQclear(r);
  PQfinish(c);
}

/* store_open for dir, on the backend of the run. */
static inline int t_store_open(uv_loop_t *loop, const char *dir, struct store **out,
                               struct sbx_error *err) {
  char url[1024];
  if (!t_pg())
    return store_open(loop, dir, out, err);
  t_url(dir, url, sizeof url);
  return store_open_url(loop, dir, url, out, err);
}

/* The schema version store_open brings a fresh database to, on the backend of the run. */
static inline int t_schema_version(void) {
  return t_pg() ? ST_PG_SCHEMA_VERSION : ST_SCHEMA_VERSION;
}

struct tctx {
  uv_loop_t loop;
  char dir[256];
  struct store *st;
};

struct done {
  int called;
  int rc;
  char msg[512];
};

static inline void on_done(int rc, const struct sbx_error *err, void *ud) {
  struct done *d = ud;
  d->called++;
  d->rc = rc;
  snprintf(d->msg, sizeof d->msg, "%s", err ? err->msg : "");
  if (rc == 0)
    ck_assert_ptr_null(err);
  else
    ck_assert_ptr_nonnull(err);
}

static inline int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *f) {
  (void)sb, (void)flag, (void)f;
  return remove(p);
}

/* Removes a test directory (and, on PostgreSQL, its schema). */
static inline void t_rmrf(const char *dir) {
  nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
  if (t_pg()) {
    char sch[200], sql[300];
    t_schema(dir, sch, sizeof sch);
    snprintf(sql, sizeof sql, "DROP SCHEMA IF EXISTS %s CASCADE", sch);
    t_pg_admin(sql);
  }
}

/* A fresh test directory (and, on PostgreSQL, its empty schema). */
static inline void t_mkdir(struct tctx *t) {
  const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  snprintf(t->dir, sizeof t->dir, "%s/sbx-store-XXXXXX", base);
  ck_assert_ptr_nonnull(mkdtemp(t->dir));
  if (t_pg()) {
    char sch[200], sql[300];
    t_schema(t->dir, sch, sizeof sch);
    snprintf(sql, sizeof sql, "CREATE SCHEMA %s", sch);
    t_pg_admin(sql);
  }
}

static inline void t_open(struct tctx *t) {
  struct sbx_error err = {0};
  t_mkdir(t);
  ck_assert_int_eq(uv_loop_init(&t->loop), 0);
  int rc = t_store_open(&t->loop, t->dir, &t->st, &err);
  ck_assert_msg(rc == 0, "store_open: %s", err.msg);
}

/* Reopens the same directory (after t_close_keep). */
static inline void t_reopen(struct tctx *t) {
  struct sbx_error err = {0};
  ck_assert_int_eq(uv_loop_init(&t->loop), 0);
  int rc = t_store_open(&t->loop, t->dir, &t->st, &err);
  ck_assert_msg(rc == 0, "store_open: %s", err.msg);
}

static inline void t_close_keep(struct tctx *t) {
  store_close(t->st);
  t->st = NULL;
  ck_assert_int_eq(uv_run(&t->loop, UV_RUN_DEFAULT), 0);
  ck_assert_int_eq(uv_loop_close(&t->loop), 0);
}

static inline void t_close(struct tctx *t) {
  t_close_keep(t);
  t_rmrf(t->dir);
}

/* A connection of its own to DATA/cerea.db, beside the store (raw SQL in tests). */
static inline sqlite3 *raw_open(const char *dir) {
  char path[512];
  sqlite3 *db;
  snprintf(path, sizeof path, "%s/cerea.db", dir);
  ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
  return db;
}

static inline int raw_int(sqlite3 *db, const char *sql) {
  sqlite3_stmt *s;
  ck_assert_int_eq(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK);
  ck_assert_int_eq(sqlite3_step(s), SQLITE_ROW);
  int v = sqlite3_column_int(s, 0);
  sqlite3_finalize(s);
  return v;
}

/* Raw SQL on a connection of its own to the database of test directory dir, beside the store,
 * the same text on both backends: t_raw_int gives the first column of the first row (asserting
 * there is one; -1 when want_row is 0 and none came), t_raw_exec the number of rows a statement
 * changed.  t_sql_int / t_sql_exec open and close one for a single statement. */
struct t_raw {
  sqlite3 *lite;
  PGconn *pg;
};

static inline struct t_raw t_raw_open(const char *dir) {
  struct t_raw r = {0};
  if (!t_pg()) {
    r.lite = raw_open(dir);
    sqlite3_busy_timeout(r.lite, 5000);
    return r;
  }
  char url[1024];
  t_url(dir, url, sizeof url);
  r.pg = PQconnectdb(url);
  ck_assert_msg(PQstatus(r.pg) == CONNECTION_OK, "%s", PQerrorMessage(r.pg));
  return r;
}

static inline void t_raw_close(struct t_raw *r) {
  if (r->lite)
    ck_assert_int_eq(sqlite3_close(r->lite), SQLITE_OK);
  if (r->pg)
    PQfinish(r->pg);
  r->lite = NULL;
  r->pg = NULL;
}

/* want_row: 1 a row must come, 0 none must (the changes are returned), -1 either (-1 if none) */
static inline int64_t t_raw_sql(struct t_raw *r, const char *sql, int want_row) {
  int64_t v = -1;
  if (r->lite) {
    sqlite3_stmt *s;
    ck_assert_msg(sqlite3_prepare_v2(r->lite, sql, -1, &s, NULL) == SQLITE_OK, "%s: %s", sql,
                  sqlite3_errmsg(r->lite));
    int rc = sqlite3_step(s);
    ck_assert_msg(rc == SQLITE_ROW || rc == SQLITE_DONE, "%s: %s", sql, sqlite3_errmsg(r->lite));
    ck_assert_msg(want_row < 0 || (rc == SQLITE_ROW) == (want_row == 1), "%s: %s", sql,
                  rc == SQLITE_ROW ? "a row" : "no row");
    v = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : want_row ? -1 : sqlite3_changes(r->lite);
    sqlite3_finalize(s);
    return v;
  }
  PGresult *res = PQexec(r->pg, sql);
  ExecStatusType es = PQresultStatus(res);
  ck_assert_msg(es == PGRES_TUPLES_OK || es == PGRES_COMMAND_OK, "%s: %s", sql,
                PQerrorMessage(r->pg));
  int row = es == PGRES_TUPLES_OK && PQntuples(res) > 0;
  ck_assert_msg(want_row < 0 || row == (want_row == 1), "%s: %s", sql, row ? "a row" : "no row");
  v = row        ? strtoll(PQgetvalue(res, 0, 0), NULL, 10)
      : want_row ? -1
                 : strtoll(PQcmdTuples(res), NULL, 10);
  PQclear(res);
  return v;
}
static inline int64_t t_raw_int(struct t_raw *r, const char *sql) { return t_raw_sql(r, sql, 1); }
static inline int64_t t_raw_exec(struct t_raw *r, const char *sql) { return t_raw_sql(r, sql, 0); }

static inline int64_t t_sql(const char *dir, const char *sql, int want_row) {
  struct t_raw r = t_raw_open(dir);
  int64_t v = t_raw_sql(&r, sql, want_row);
  t_raw_close(&r);
  return v;
}
static inline int64_t t_sql_int(const char *dir, const char *sql) { return t_sql(dir, sql, 1); }
static inline int64_t t_sql_exec(const char *dir, const char *sql) { return t_sql(dir, sql, 0); }

/* Part of a test that only means something on SQLite (its query plans, its bytecode): 1 to run
 * it; on PostgreSQL 0, after a line on stderr saying what is left out and why. */
static inline int t_sqlite_part(const char *test, const char *why) {
  if (t_pg())
    fprintf(stderr, "SKIP part of %s on PostgreSQL: %s\n", test, why);
  return !t_pg();
}

/* The query plan of sql on db, its detail lines joined by "; ". */
static inline void plan_of(sqlite3 *db, const char *sql, char *out, size_t cap) {
  char q[4096];
  snprintf(q, sizeof q, "EXPLAIN QUERY PLAN %s", sql);
  sqlite3_stmt *s;
  ck_assert_int_eq(sqlite3_prepare_v2(db, q, -1, &s, NULL), SQLITE_OK);
  size_t len = 0;
  out[0] = '\0';
  while (sqlite3_step(s) == SQLITE_ROW && len < cap)
    len += (size_t)snprintf(out + len, cap - len, "%s; ", (const char *)sqlite3_column_text(s, 3));
  sqlite3_finalize(s);
}

/* Runs the loop until every queued write's callback has run. */
static inline void t_wait(struct tctx *t) { uv_run(&t->loop, UV_RUN_DEFAULT); }

static inline void t_chat(struct tctx *t, const char *id) {
  struct store_chat c = {0};
  struct done d = {0};
  snprintf(c.id, sizeof c.id, "%s", id);
  store_sha256_hex("token", 5, c.token_hash);
  c.created_at = sbx_now_wall_ms();
  ck_assert_int_eq(store_chat_create(t->st, &c, on_done, &d), 0);
  t_wait(t);
  ck_assert_int_eq(d.called, 1);
  ck_assert_msg(d.rc == 0, "chat create: %s", d.msg);
}

/* A fresh test directory whose PostgreSQL schema is at version v (a program of that version
 * made it): the rows it wrote go in next, then t_reopen migrates them on. */
static inline void t_pg_at_version(struct tctx *t, int v) {
  struct sbx_error err = {0};
  char url[1024];
  t_mkdir(t);
  t_url(t->dir, url, sizeof url);
  struct st_db db = {.kind = ST_PG, .role = "writer"};
  ck_assert_msg(st__pg_connect(&db, url, "test", &err) == 0, "%s", err.msg);
  ck_assert_msg(st__pg_migrate(&db, v, &err) == 0, "%s", err.msg);
  st__pg_close(&db);
}

/* A run stored before runs had value_json and displays_json (SQLite 8, PostgreSQL 3), after the
 * migration: as it was (its stdout 'kept'), no value, no displays; then both written and read
 * back. */
static inline void t_run_value_migrated(struct tctx *t, const char *run_id) {
  struct store_run r;
  ck_assert_int_eq(store_run_get(t->st, run_id, &r), 0);
  ck_assert_str_eq(r.stdout_text, "kept");
  ck_assert_ptr_null(r.value_json);
  ck_assert_ptr_null(r.displays_json);
  r.value_json = sbx_strdup("{\"text/plain\":\"41\"}");
  r.displays_json = sbx_strdup("[]");
  struct done d = {0};
  ck_assert_int_eq(store_run_put(t->st, &r, on_done, &d), 0);
  t_wait(t);
  ck_assert_int_eq(d.rc, 0);
  store_run_free(&r);
  ck_assert_int_eq(store_run_get(t->st, run_id, &r), 0);
  ck_assert_str_eq(r.value_json, "{\"text/plain\":\"41\"}");
  ck_assert_str_eq(r.displays_json, "[]");
  ck_assert_str_eq(r.stdout_text, "kept");
  store_run_free(&r);
}

/* A chat stored before messages existed (SQLite 9, PostgreSQL 4), after the migration: no
 * messages; a message of its turn (owning run_id) written and read back. */
static inline void t_messages_migrated(struct tctx *t, const char *chat_id, const char *turn_id,
                                       const char *run_id) {
  struct store_message *v = NULL;
  size_t n = 9;
  ck_assert_int_eq(store_message_list(t->st, chat_id, 10, &v, &n), 0);
  ck_assert_uint_eq(n, 0);
  char runs[80];
  snprintf(runs, sizeof runs, "[\"%s\"]", run_id);
  struct store_message m = {.role = "assistant",
                            .state = "done",
                            .text = "the answer",
                            .run_ids_json = runs,
                            .created_at = 5,
                            .updated_at = 6};
  snprintf(m.id, sizeof m.id, "m1");
  snprintf(m.chat_id, sizeof m.chat_id, "%s", chat_id);
  snprintf(m.turn_id, sizeof m.turn_id, "%s", turn_id);
  struct done d = {0};
  ck_assert_int_eq(store_message_put(t->st, &m, on_done, &d), 0);
  t_wait(t);
  ck_assert_int_eq(d.rc, 0);
  ck_assert_int_eq(store_message_list(t->st, chat_id, 10, &v, &n), 0);
  ck_assert_uint_eq(n, 1);
  ck_assert_str_eq(v[0].run_ids_json, runs);
  ck_assert_str_eq(v[0].text, "the answer");
  store_message_list_free(v, n);
}

/* A person (name, role) stored in t's store, its id into id. */
static inline void t_person_add(struct tctx *t, const char *name, const char *role, store_id id) {
  struct store_person p = {.name = (char *)name,
                           .role = (char *)role,
                           .pw_hash = "$argon2id$v=19$m=8,t=1,p=1$c2FsdHNhbHQ$aGFzaA",
                           .created_at = 7,
                           .settings_json = "{}"};
  ck_assert_int_eq(store_new_id(p.id), 0);
  struct done d = {0};
  ck_assert_int_eq(store_person_create(t->st, &p, on_done, &d), 0);
  t_wait(t);
  ck_assert_msg(d.rc == 0, "person %s: %s", name, d.msg);
  memcpy(id, p.id, sizeof p.id);
}

/* A chat stored before chats had owners (SQLite 10, PostgreSQL 5), after the migration: a
 * backend's chat (owner ""), no people; then a person, a chat of theirs and a session, read
 * back. */
static inline void t_people_migrated(struct tctx *t, const char *chat_id) {
  struct store_chat c;
  ck_assert_int_eq(store_chat_get(t->st, chat_id, &c), 0);
  ck_assert_str_eq(c.owner, "");
  store_chat_free(&c);
  int64_t n = -1;
  ck_assert_int_eq(store_person_count(t->st, &n), 0);
  ck_assert_int_eq(n, 0);
  store_id pid;
  t_person_add(t, "ada", "admin", pid);
  struct store_chat mine = {.title = "hers", .created_at = 9};
  snprintf(mine.id, sizeof mine.id, "m%031d", 1);
  store_sha256_hex("tok", 3, mine.token_hash);
  memcpy(mine.owner, pid, sizeof mine.owner);
  struct done d = {0};
  ck_assert_int_eq(store_chat_create(t->st, &mine, on_done, &d), 0);
  struct store_session se = {.created_at = 10, .last_used_at = 10};
  store_sha256_hex("cookie", 6, se.token_hash);
  memcpy(se.person_id, pid, sizeof se.person_id);
  ck_assert_int_eq(store_session_create(t->st, &se, on_done, &d), 0);
  t_wait(t);
  ck_assert_msg(d.rc == 0, "%s", d.msg);
  struct store_chat *v;
  size_t k;
  ck_assert_int_eq(store_chat_list_owner(t->st, pid, 10, &v, &k), 0);
  ck_assert_uint_eq(k, 1);
  ck_assert_str_eq(v[0].id, mine.id);
  ck_assert_str_eq(v[0].owner, pid);
  store_chat_list_free(v, k);
  struct store_session g;
  ck_assert_int_eq(store_session_get(t->st, se.token_hash, &g), 0);
  ck_assert_str_eq(g.person_id, pid);
}

/* A write that holds the writer inside its group until the test lets it go, so that the writes
 * queued meanwhile form one group: t_hold_queue queues one (d gets its outcome), t_held waits until
 * the writer is inside it, t_hold does both, t_let_go lets the writer go on. */
static sem_t t_gate, t_entered;
static inline int t_hold_exec(struct store *st, struct st_write *w, struct sbx_error *err) {
  (void)st, (void)w, (void)err;
  sem_post(&t_entered);
  sem_wait(&t_gate);
  return 0;
}
static inline void t_hold_queue(struct tctx *t, struct done *d) {
  static int ready;
  if (!ready) {
    sem_init(&t_gate, 0, 0);
    sem_init(&t_entered, 0, 0);
    ready = 1;
  }
  struct st_simple *op = st__simple_new(t_hold_exec, on_done, d);
  ck_assert_ptr_nonnull(op);
  ck_assert_int_eq(st__submit(t->st, &op->w), 0);
  st__uncork(t->st); /* what was submitted before it goes with it, as the loop's idle would */
}
static inline void t_held(void) { sem_wait(&t_entered); }
static inline void t_hold(struct tctx *t, struct done *d) {
  t_hold_queue(t, d);
  t_held();
}
static inline void t_let_go(void) { sem_post(&t_gate); }

/* store_file_add, waiting; returns rc, fills *out (copy, caller frees) when rc == 0. */
struct added {
  int called, rc, created;
  char msg[512];
  struct store_file f;
};

static inline void on_added(int rc, const struct sbx_error *err, const struct store_file_added *res,
                            void *ud) {
  struct added *a = ud;
  a->called++;
  a->rc = rc;
  snprintf(a->msg, sizeof a->msg, "%s", err ? err->msg : "");
  if (rc == 0) {
    a->created = res->created;
    a->f = res->file;
    a->f.name = sbx_strdup(res->file.name);
    a->f.left_out_reason = res->file.left_out_reason ? sbx_strdup(res->file.left_out_reason) : NULL;
    a->f.kind = res->file.kind ? sbx_strdup(res->file.kind) : NULL;
  } else {
    ck_assert_ptr_null(res);
  }
}

/* store_file_add of `in`, waiting: the refused submit's rc, or the callback's (a filled). */
static inline int t_add_in(struct tctx *t, const struct store_file_in *in, struct added *a) {
  memset(a, 0, sizeof *a);
  int rc = store_file_add(t->st, in, on_added, a);
  if (rc != 0)
    return rc;
  t_wait(t);
  ck_assert_int_eq(a->called, 1);
  return a->rc;
}

static inline int t_add(struct tctx *t, const char *chat, const char *name, enum store_source src,
                        const char *data, struct added *a) {
  struct store_file_in in = {0};
  in.chat_id = chat;
  in.name = name;
  in.source = src;
  in.mounted = 1;
  in.data = data;
  in.size = strlen(data);
  return t_add_in(t, &in, a);
}

/* One round of a fault-injection loop over a file add: a refused submit (rc) must be ENOMEM
 * with no callback; an accepted one called back once, ok or ENOMEM (*ok counts the oks, their
 * copies freed).  Returns 0 when the submit was refused (the caller goes on to the next n). */
static inline int t_add_outcome(int rc, struct added *a, int *ok) {
  if (rc != 0) {
    ck_assert_int_eq(rc, SBX_ENOMEM);
    ck_assert_int_eq(a->called, 0);
    return 0;
  }
  ck_assert_int_eq(a->called, 1);
  ck_assert_msg(a->rc == 0 || a->rc == SBX_ENOMEM, "rc %d", a->rc);
  if (a->rc == 0) {
    (*ok)++;
    store_file_free(&a->f);
  }
  return 1;
}

/* The tail of every suite's main(): adds the case, runs it forked (CK_FORK, so one test's
 * crash or leak check does not take the others with it), returns the exit status. */
static inline int t_run_suite(Suite *s, TCase *tc) {
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_set_fork_status(sr, CK_FORK);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}

#endif
