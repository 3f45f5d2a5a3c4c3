/* test_pg.c -- pg.c, against a real PostgreSQL server (STORE_TEST_PG; skipped with a line on
 * SQLite): bad configuration refused by store_open with one line (unreachable, wrong password,
 * no such database) leaving nothing behind; the SQLSTATE translation table; the migrations from
 * an empty schema, a failing one rolled back, nodes opening together migrating once; a lost
 * connection (the server ends the store's sessions) failing one group only, then reconnected;
 * and the indexes of the PostgreSQL schema serving the chat-keyed statements. */
#include <sys/wait.h>

#include "helpers.h"

#define CHAT "c0000000000000000000000000000001"

/* store_open_url on a fresh directory with url; the error it gave, and nothing left open. */
static int open_fails(const char *url, struct sbx_error *err) {
  struct tctx t;
  uv_loop_t loop;
  struct store *st = (struct store *)1;
  t_mkdir(&t);
  uv_loop_init(&loop);
  int rc = store_open_url(&loop, t.dir, url, &st, err);
  ck_assert_ptr_null(st);
  ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  ck_assert_int_eq(uv_loop_close(&loop), 0);  /* no handle of a half-opened store */
  ck_assert_ptr_null(strchr(err->msg, '\n')); /* one line */
  t_rmrf(t.dir);
  return rc;
}

START_TEST(test_connect_refusals) {
  T_PG_ONLY("connects to a PostgreSQL server");
  struct sbx_error err = {0};
  const char *port = getenv("STORE_TEST_PG_PORT");
  ck_assert_msg(port != NULL, "STORE_TEST_PG_PORT: the server's TCP port");
  char url[512];
  /* nothing listens there (port 1 is never the server's) */
  ck_assert_int_eq(open_fails("postgresql://cerea:secret-pw@127.0.0.1:1/cerea", &err), SBX_EIO);
  ck_assert_msg(strstr(err.msg, "database cerea@127.0.0.1:1/cerea") != NULL, "%s", err.msg);
  ck_assert_msg(strstr(err.msg, "refused") != NULL, "%s", err.msg);
  ck_assert_ptr_null(strstr(err.msg, "secret-pw")); /* the password is never repeated */
  /* the wrong password (TCP connections need one) */
  snprintf(url, sizeof url, "postgresql://postgres:wrong-pw@127.0.0.1:%s/postgres", port);
  ck_assert_int_eq(open_fails(url, &err), SBX_EUNAUTH);
  ck_assert_msg(strstr(err.msg, "password authentication failed") != NULL, "%s", err.msg);
  ck_assert_ptr_null(strstr(err.msg, "wrong-pw"));
  /* no password at all where one is needed */
  snprintf(url, sizeof url, "postgresql://postgres@127.0.0.1:%s/postgres", port);
  ck_assert_int_eq(open_fails(url, &err), SBX_EUNAUTH);
  /* the right server, a database it does not have */
  const char *tcp = getenv("STORE_TEST_PG_TCP");
  ck_assert_msg(tcp != NULL, "STORE_TEST_PG_TCP: the server's URL over TCP with its password");
  snprintf(url, sizeof url, "%.*s/no_such_db", (int)(strrchr(tcp, '/') - tcp), tcp);
  ck_assert_int_eq(open_fails(url, &err), SBX_ENOENT);
  ck_assert_msg(strstr(err.msg, "no_such_db") != NULL, "%s", err.msg);
  /* and the right password works over TCP too */
  struct tctx t;
  uv_loop_t loop;
  struct store *st = NULL;
  t_mkdir(&t);
  uv_loop_init(&loop);
  char sch[200];
  t_schema(t.dir, sch, sizeof sch);
  snprintf(url, sizeof url, "%s?options=-csearch_path%%3D%s", tcp, sch);
  ck_assert_msg(store_open_url(&loop, t.dir, url, &st, &err) == 0, "%s", err.msg);
  ck_assert_int_eq(store_ping(st, NULL), 0);
  store_close(st);
  ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  ck_assert_int_eq(uv_loop_close(&loop), 0);
  t_rmrf(t.dir);
}
END_TEST

START_TEST(test_sqlstates) {
  /* the table alone: no server needed */
  static const struct {
    const char *state;
    int code;
  } map[] = {
      {"23505", SBX_ECONFLICT}, /* unique violation */
      {"23503", SBX_ECONFLICT}, /* foreign key violation */
      {"40001", SBX_EBUSY},     /* serialization failure */
      {"40P01", SBX_EBUSY},     /* deadlock */
      {"53100", SBX_EFULL},     /* disk full */
      {"53200", SBX_ENOMEM},    /* out of memory */
      {"53300", SBX_EBUSY},     /* too many connections */
      {"28P01", SBX_EUNAUTH},   /* wrong password */
      {"42501", SBX_EPERM},     /* insufficient privilege */
      {"25006", SBX_EPERM},     /* read-only transaction */
      {"3D000", SBX_ENOENT},    /* no such database */
      {"08006", SBX_EIO},       /* connection failure */
      {"57P01", SBX_EIO},       /* the server shuts down */
      {"58030", SBX_EIO},       /* the server's I/O error */
      {"XX001", SBX_ECORRUPT},  /* data corrupted */
      {"22021", SBX_EINVAL},    /* invalid byte sequence */
      {"42P01", SBX_EDB},       /* undefined table: a bug, not the store's state */
      {"", SBX_EDB},
      {NULL, SBX_EDB},
  };
  for (size_t i = 0; i < SBX_ARRAY_SIZE(map); i++)
    ck_assert_msg(st__pg_code(map[i].state) == map[i].code, "%s", map[i].state);
}
END_TEST

START_TEST(test_migrations) {
  T_PG_ONLY("migrates a PostgreSQL schema");
  struct tctx t;
  t_open(&t);
  ck_assert_int_eq(store_schema_version(t.st), ST_PG_SCHEMA_VERSION);
  ck_assert_int_eq(t_sql_int(t.dir, "SELECT version FROM schema_version"), ST_PG_SCHEMA_VERSION);
  ck_assert_int_eq(t_sql_int(t.dir, "SELECT count(*) FROM information_schema.tables WHERE "
                                    "table_schema = current_schema() AND table_name IN "
                                    "('chats','blobs','blob_chunks','files','turns','runs',"
                                    "'run_files','events','settings','schema_version')"),
                   10);
  /* again: nothing to do; past the last: refused */
  struct sbx_error err = {0};
  ck_assert_int_eq(st__pg_migrate(&t.st->w, ST_PG_SCHEMA_VERSION, &err), 0);
  ck_assert_int_eq(st__pg_migrate(&t.st->w, 99, &err), SBX_EINVAL);
  t_close_keep(&t);
  t_reopen(&t); /* a reopen finds version 1 and keeps what it holds */
  ck_assert_int_eq(store_schema_version(t.st), ST_PG_SCHEMA_VERSION);
  t_close(&t);
}
END_TEST

START_TEST(test_migration_failure_rolls_back) {
  T_PG_ONLY("migrates a PostgreSQL schema");
  struct tctx t;
  struct sbx_error err = {0};
  t_mkdir(&t);
  t_sql_exec(t.dir, "CREATE TABLE runs_unfinished(x INTEGER)"); /* in migration 1's way */
  uv_loop_t loop;
  struct store *st = NULL;
  uv_loop_init(&loop);
  ck_assert_int_eq(t_store_open(&loop, t.dir, &st, &err), SBX_EDB);
  ck_assert_ptr_null(st);
  ck_assert_msg(strstr(err.msg, "schema version 1") != NULL, "%s", err.msg);
  ck_assert_msg(strstr(err.msg, "runs_unfinished") != NULL, "%s", err.msg);
  ck_assert_ptr_null(strchr(err.msg, '\n'));
  ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  ck_assert_int_eq(uv_loop_close(&loop), 0);
  /* nothing of migration 1 stays; the version is still 0 */
  ck_assert_int_eq(t_sql_int(t.dir, "SELECT version FROM schema_version"), 0);
  ck_assert_int_eq(t_sql_int(t.dir, "SELECT count(*) FROM information_schema.tables WHERE "
                                    "table_schema = current_schema() AND table_name = 'chats'"),
                   0);
  /* out of the way: it migrates */
  t_sql_exec(t.dir, "DROP TABLE runs_unfinished");
  t_reopen(&t);
  ck_assert_int_eq(store_schema_version(t.st), ST_PG_SCHEMA_VERSION);
  t_close(&t);
}
END_TEST

/* Version 2 -> 3 (SQLite's 7 -> 8): runs of a version-2 program kept, their value and displays
 * read NULL, then written and read back. */
START_TEST(test_migration_2_to_3) {
  T_PG_ONLY("migrates a PostgreSQL schema");
  struct tctx t;
  t_pg_at_version(&t, 2);
  t_sql_exec(t.dir, "INSERT INTO chats(id, token_hash, title, created_at) VALUES('" CHAT
                    "', 'h', 't', 1)");
  t_sql_exec(t.dir, "INSERT INTO runs(id, chat_id, turn_id, code, origin, state, status, timeout_s,"
                    " attempts, stdout_text, stdout_truncated, stderr_truncated, restarted,"
                    " files_unlisted, figures_dropped, seq, created_at, started_at, finished_at)"
                    " VALUES('r2', '" CHAT "', '', 'print(1)', 'assistant', 'done', 'ok', 60, 1,"
                    " 'kept', 0, 0, 0, 0, 0, 1, 1, 2, 3)");
  ck_assert_int_eq(t_sql_int(t.dir, "SELECT count(*) FROM information_schema.columns WHERE "
                                    "table_schema = current_schema() AND table_name = 'runs' AND "
                                    "column_name IN ('value_json', 'displays_json')"),
                   0);
  t_reopen(&t); /* store_open migrates 2 -> 3 (and on) */
  ck_assert_int_eq(store_schema_version(t.st), ST_PG_SCHEMA_VERSION);
  t_run_value_migrated(&t, "r2");
  t_close(&t);
}
END_TEST

/* Version 3 -> 4 (SQLite's 8 -> 9): a version-3 program's chat, turn and run kept, no messages,
 * then a message of the turn written and read back. */
START_TEST(test_migration_3_to_4) {
  T_PG_ONLY("migrates a PostgreSQL schema");
  struct tctx t;
  t_pg_at_version(&t, 3);
  t_sql_exec(t.dir, "INSERT INTO chats(id, token_hash, title, created_at) VALUES('" CHAT
                    "', 'h', 't', 1)");
  t_sql_exec(t.dir, "INSERT INTO turns VALUES('t1', '" CHAT "', 1, 'the answer', 5, 6)");
  t_sql_exec(t.dir, "INSERT INTO runs(id, chat_id, turn_id, code, origin, state, status, timeout_s,"
                    " attempts, stdout_text, stdout_truncated, stderr_truncated, restarted,"
                    " files_unlisted, figures_dropped, seq, created_at, started_at, finished_at,"
                    " value_json) VALUES('r3', '" CHAT "', 't1', 'print(1)', 'assistant', 'done',"
                    " 'ok', 60, 1, 'kept', 0, 0, 0, 0, 0, 1, 1, 2, 3, '{}')");
  ck_assert_int_eq(t_sql_int(t.dir, "SELECT (to_regclass('messages') IS NULL)::int"), 1);
  t_reopen(&t); /* store_open migrates 3 -> 4 (and on) */
  ck_assert_int_eq(store_schema_version(t.st), ST_PG_SCHEMA_VERSION);
  struct store_turn tu;
  ck_assert_int_eq(store_turn_get(t.st, "t1", &tu), 0);
  ck_assert_str_eq(tu.answer, "the answer"); /* the rows as they were */
  store_turn_free(&tu);
  struct store_run r;
  ck_assert_int_eq(store_run_get(t.st, "r3", &r), 0);
  ck_assert_str_eq(r.value_json, "{}");
  store_run_free(&r);
  t_messages_migrated(&t, CHAT, "t1", "r3");
  t_close(&t);
}
END_TEST

/* Version 5 -> 6 (SQLite's 10 -> 11): a version-5 program's chat kept, a backend's (no owner);
 * then a person, a chat of theirs and a session written and read back. */
START_TEST(test_migration_5_to_6) {
  T_PG_ONLY("migrates a PostgreSQL schema");
  struct tctx t;
  t_pg_at_version(&t, 5);
  t_sql_exec(t.dir, "INSERT INTO chats(id, token_hash, title, created_at) VALUES('" CHAT
                    "', 'h', 't', 1)");
  ck_assert_int_eq(t_sql_int(t.dir, "SELECT (to_regclass('people') IS NULL)::int"), 1);
  t_reopen(&t); /* store_open migrates 5 -> 6 (and on) */
  ck_assert_int_eq(store_schema_version(t.st), ST_PG_SCHEMA_VERSION);
  t_people_migrated(&t, CHAT);
  t_close(&t);
}
END_TEST

/* Nodes starting together on one database (other data directories): each store_open finds the
 * schema as another left it, under the migration lock; all of them open, at the one version. */
START_TEST(test_nodes_migrate_once) {
  T_PG_ONLY("several stores on one PostgreSQL database");
  enum { NODES = 4 };
  struct tctx t;
  t_mkdir(&t);
  char url[1024];
  t_url(t.dir, url, sizeof url);
  pid_t pids[NODES];
  for (int i = 0; i < NODES; i++) {
    pids[i] = fork();
    ck_assert_int_ge(pids[i], 0);
    if (pids[i] == 0) {
      char dir[300];
      snprintf(dir, sizeof dir, "%s/node%d", t.dir, i);
      uv_loop_t loop;
      struct store *st = NULL;
      struct sbx_error err = {0};
      uv_loop_init(&loop);
      int rc = store_open_url(&loop, dir, url, &st, &err);
      if (rc != 0)
        fprintf(stderr, "node %d: %s\n", i, err.msg);
      int v = rc == 0 ? store_schema_version(st) : -1;
      if (st)
        store_close(st);
      uv_run(&loop, UV_RUN_DEFAULT);
      _exit(rc == 0 && v == ST_PG_SCHEMA_VERSION ? 0 : 1);
    }
  }
  for (int i = 0; i < NODES; i++) {
    int status = 0;
    ck_assert_int_eq(waitpid(pids[i], &status, 0), pids[i]);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "node %d failed", i);
  }
  ck_assert_int_eq(t_sql_int(t.dir, "SELECT count(*) FROM schema_version"), 1);
  ck_assert_int_eq(t_sql_int(t.dir, "SELECT version FROM schema_version"), ST_PG_SCHEMA_VERSION);
  t_rmrf(t.dir);
}
END_TEST

static int put(struct tctx *t, const char *key, char *msg, size_t cap) {
  struct done d = {0};
  ck_assert_int_eq(store_setting_put(t->st, key, "v", on_done, &d), 0);
  t_wait(t);
  ck_assert_int_eq(d.called, 1);
  snprintf(msg, cap, "%s", d.msg);
  return d.rc;
}

/* The server ends both sessions of the store (as a restart or a failover of the server does). */
static void cut_connections(struct tctx *t) {
  int64_t wpid = 0, rpid = 0;
  struct sbx_error err = {0};
  ck_assert_int_eq(st__db_int(&t->st->w, "SELECT pg_backend_pid()", &wpid, &err), 0);
  ck_assert_int_eq(st__db_int(&t->st->r, "SELECT pg_backend_pid()", &rpid, &err), 0);
  char sql[200];
  snprintf(sql, sizeof sql, "SELECT pg_terminate_backend(%lld), pg_terminate_backend(%lld)",
           (long long)wpid, (long long)rpid);
  t_pg_admin(sql);
  for (int i = 0; i < 100; i++) { /* until the server has ended them */
    snprintf(sql, sizeof sql, "SELECT count(*) FROM pg_stat_activity WHERE pid IN (%lld, %lld)",
             (long long)wpid, (long long)rpid);
    if (t_sql_int(t->dir, sql) == 0)
      return;
    usleep(20000);
  }
  ck_abort_msg("the server did not end the store's sessions");
}

START_TEST(test_connection_lost) {
  T_PG_ONLY("a PostgreSQL server ending the store's sessions");
  struct tctx t;
  char msg[512];
  t_open(&t);
  ck_assert_int_eq(put(&t, "before", msg, sizeof msg), 0);
  cut_connections(&t);
  /* a read stands alone: the reader reconnects and answers, no error */
  ck_assert_int_eq(store_ping(t.st, NULL), 0);
  char *v = NULL;
  ck_assert_int_eq(store_setting_get(t.st, "before", &v), 0);
  sbx_free(v);
  /* the group that meets the lost connection fails as a whole, an I/O error saying so; the
   * writer never reconnects inside a transaction */
  ck_assert_int_eq(put(&t, "lost", msg, sizeof msg), SBX_EIO);
  ck_assert_msg(strstr(msg, "connection lost") != NULL, "%s", msg);
  struct store_health h;
  ck_assert_int_eq(store_health(t.st, &h), 0);
  ck_assert_int_eq(h.ok, 0);
  /* the next group reconnects (the first try is not held back) and is stored */
  ck_assert_msg(put(&t, "after", msg, sizeof msg) == 0, "%s", msg);
  ck_assert_int_eq(store_health(t.st, &h), 0);
  ck_assert_int_eq(h.ok, 1);
  ck_assert_int_eq(store_setting_get(t.st, "lost", &v), SBX_ENOENT);
  ck_assert_int_eq(store_setting_get(t.st, "after", &v), 0);
  sbx_free(v);
  /* lost again at once: the writer waits ST_PG_RETRY_MS before the next try, failing fast */
  cut_connections(&t);
  ck_assert_int_eq(put(&t, "lost2", msg, sizeof msg), SBX_EIO);
  int rc = put(&t, "lost3", msg, sizeof msg);
  if (rc != 0) /* within the retry interval: refused at once, then stored once it passed */
    ck_assert_msg(strstr(msg, "trying again") != NULL, "%s", msg);
  usleep((ST_PG_RETRY_MS + 100) * 1000);
  ck_assert_msg(put(&t, "after2", msg, sizeof msg) == 0, "%s", msg);
  t_close(&t);
}
END_TEST

/* EXPLAIN of sql in the test's schema with sequential scans off: can an index serve it? */
static void pg_plan(const char *dir, const char *sql, char *out, size_t cap) {
  char url[1024], q[2048];
  t_url(dir, url, sizeof url);
  PGconn *c = PQconnectdb(url);
  ck_assert_msg(PQstatus(c) == CONNECTION_OK, "%s", PQerrorMessage(c));
  PQclear(PQexec(c, "SET enable_seqscan = off"));
  snprintf(q, sizeof q, "EXPLAIN %s", sql);
  PGresult *r = PQexec(c, q);
  ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s: %s", sql, PQerrorMessage(c));
  size_t n = 0;
  out[0] = '\0';
  for (int i = 0; i < PQntuples(r) && n < cap; i++)
    n += (size_t)snprintf(out + n, cap - n, "%s; ", PQgetvalue(r, i, 0));
  PQclear(r);
  PQfinish(c);
}

START_TEST(test_indexes) {
  T_PG_ONLY("PostgreSQL's query plans (test_db.c, test_files.c, test_runs.c check SQLite's)");
  struct tctx t;
  t_open(&t);
  t_chat(&t, CHAT);
  static const struct {
    const char *sql, *index;
  } cases[] = {
      {"SELECT COALESCE(SUM(size), 0) FROM files WHERE chat_id = 'c' AND source = 3",
       "Index Only Scan using files_output"},
      {"SELECT id FROM runs ORDER BY rid DESC LIMIT 5", "runs_rid_key"},
      {"SELECT id FROM runs WHERE chat_id = 'c' ORDER BY seq DESC, rid DESC LIMIT 5",
       "runs_chat_seq"},
      {"SELECT COALESCE(MAX(seq), 0) + 1 FROM runs WHERE chat_id = 'c'", "runs_chat_seq"},
      {"SELECT id FROM runs WHERE chat_id = 'c' AND idempotency_key = 'k'", "runs_idem"},
      {"SELECT id FROM runs WHERE state <> 'done' ORDER BY created_at, rid", "runs_unfinished"},
      {"SELECT seq FROM events WHERE chat_id = 'c' AND seq > 3 ORDER BY seq LIMIT 10",
       "events_pkey"},
      {"SELECT chat_id FROM events WHERE chat_id > '' ORDER BY chat_id LIMIT 1", "events_pkey"},
      {"SELECT 1 FROM files WHERE chat_id = 'c' AND dup_stem = 'a' AND dup_ext = '.b'",
       "files_dup"},
      {"SELECT id FROM files WHERE expires_at > 0 AND expires_at <= 5 ORDER BY expires_at LIMIT 9",
       "files_expiry"},
      {"SELECT 1 FROM run_files WHERE file_id = 'f'", "run_files_file"},
      {"SELECT data FROM blob_chunks WHERE sha256 = 's' AND n = 2", "blob_chunks_pkey"},
      {"SELECT id FROM messages WHERE chat_id = 'c' ORDER BY rid LIMIT 9", "messages_chat"},
      {"SELECT turn_id FROM messages WHERE state = 'streaming'", "messages_streaming"},
  };
  for (size_t i = 0; i < SBX_ARRAY_SIZE(cases); i++) {
    char plan[2048];
    pg_plan(t.dir, cases[i].sql, plan, sizeof plan);
    ck_assert_msg(strstr(plan, cases[i].index) != NULL, "%s: %s", cases[i].sql, plan);
    ck_assert_msg(strstr(plan, "Seq Scan") == NULL, "%s: %s", cases[i].sql, plan);
  }
  t_close(&t);
}
END_TEST

int main(void) {
  Suite *s = suite_create("pg");
  TCase *tc = tcase_create("pg");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_connect_refusals);
  tcase_add_test(tc, test_sqlstates);
  tcase_add_test(tc, test_migrations);
  tcase_add_test(tc, test_migration_failure_rolls_back);
  tcase_add_test(tc, test_migration_2_to_3);
  tcase_add_test(tc, test_migration_3_to_4);
  tcase_add_test(tc, test_migration_5_to_6);
  tcase_add_test(tc, test_nodes_migrate_once);
  tcase_add_test(tc, test_connection_lost);
  tcase_add_test(tc, test_indexes);
  return t_run_suite(s, tc);
}
