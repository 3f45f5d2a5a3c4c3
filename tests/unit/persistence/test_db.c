/* test_db.c -- db.c: each migration of the SQLite schema from the version before it with data
 * kept, a failing migration rolled back, SQLite's error translation table, ids.  PostgreSQL's
 * migrations and errors are test_pg.c's; the statement layer is what every other suite runs on. */
#include "helpers.h"

/* A fresh directory for t and a raw connection to its database at schema `version`. */
static sqlite3 *db_at(struct tctx *t, int version) {
  struct sbx_error err = {0};
  t_mkdir(t);
  sqlite3 *db = raw_open(t->dir);
  ck_assert_msg(st__migrate(db, version, &err) == 0, "to %d: %s", version, err.msg);
  return db;
}

START_TEST(test_migration_0_to_1) {
  T_SQLITE_ONLY("the SQLite schema's migrations (test_pg.c migrates PostgreSQL's)");
  struct tctx t;
  sqlite3 *db = db_at(&t, 1);
  struct sbx_error err = {0};
  ck_assert_int_eq(raw_int(db, "PRAGMA user_version"), 1);
  ck_assert_int_eq(raw_int(db, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name "
                               "IN ('chats','blobs','files','turns','runs','run_files','events',"
                               "'settings')"),
                   8);
  ck_assert_int_eq(raw_int(db, "SELECT count(*) FROM sqlite_master WHERE name = 'runs_unfinished'"),
                   0);
  /* again: nothing to do */
  ck_assert_int_eq(st__migrate(db, 1, &err), 0);
  ck_assert_int_eq(st__migrate(db, 99, &err), SBX_EINVAL);
  sqlite3_close(db);
  t_rmrf(t.dir);
}
END_TEST

/* Runs `rows` (what a program of the older version wrote) on db, closes it, and opens the store
 * on t's directory: store_open migrates it to the current version. */
static void reopen_migrated(struct tctx *t, sqlite3 *db, const char *rows) {
  ck_assert_int_eq(sqlite3_exec(db, rows, NULL, NULL, NULL), SQLITE_OK);
  sqlite3_close(db);
  t_reopen(t);
  ck_assert_int_eq(store_schema_version(t->st), ST_SCHEMA_VERSION);
}

static int has_object(sqlite3 *db, const char *name) {
  char sql[256];
  snprintf(sql, sizeof sql, "SELECT count(*) FROM sqlite_master WHERE name = '%s'", name);
  return raw_int(db, sql);
}

static void insert_v1_rows(sqlite3 *db) {
  ck_assert_int_eq(
      sqlite3_exec(
          db,
          "INSERT INTO chats VALUES('c1', 'h', 'title', 1);"
          "INSERT INTO runs(id, chat_id, turn_id, code, origin, state, timeout_s, attempts,"
          " stdout_truncated, stderr_truncated, restarted, files_unlisted, figures_dropped,"
          " seq, created_at, started_at, finished_at) VALUES"
          " ('r1', 'c1', '', 'print(1)', 'tool', 'queued', 60, 0, 0, 0, 0, 0, 0, 1, 10, 0, 0),"
          " ('r2', 'c1', '', 'print(2)', 'tool', 'done', 60, 1, 0, 0, 0, 0, 0, 2, 11, 0, 0);",
          NULL, NULL, NULL),
      SQLITE_OK);
}

START_TEST(test_migration_1_to_2) {
  T_SQLITE_ONLY("the SQLite schema's migrations (test_pg.c migrates PostgreSQL's)");
  struct tctx t;
  sqlite3 *db = db_at(&t, 1);
  struct sbx_error err = {0};
  insert_v1_rows(db); /* data written by a version-1 program */
  ck_assert_int_eq(st__migrate(db, 2, &err), 0);
  ck_assert_int_eq(raw_int(db, "PRAGMA user_version"), 2);
  ck_assert_int_eq(raw_int(db, "SELECT count(*) FROM sqlite_master WHERE name IN "
                               "('runs_unfinished','files_expiry','run_files_file')"),
                   3);
  ck_assert_int_eq(raw_int(db, "SELECT count(*) FROM sqlite_master WHERE name = 'runs_chat_seq'"),
                   0);
  ck_assert_int_eq(raw_int(db, "SELECT count(*) FROM runs WHERE state <> 'done'"), 1);
  sqlite3_close(db);
  t_rmrf(t.dir);
}
END_TEST

START_TEST(test_migration_2_to_3) {
  T_SQLITE_ONLY("the SQLite schema's migrations (test_pg.c migrates PostgreSQL's)");
  struct tctx t;
  sqlite3 *db = db_at(&t, 2);
  insert_v1_rows(db);
  sqlite3_close(db);
  struct tctx o = t;
  t_reopen(&o); /* store_open migrates 2 -> 3 */
  ck_assert_int_eq(store_schema_version(o.st), ST_SCHEMA_VERSION);
  ck_assert_int_eq(raw_int(o.st->r.lite, "SELECT count(*) FROM sqlite_master WHERE name = "
                                         "'runs_chat_seq'"),
                   1);
  /* the next seq is found through the index, not by scanning the chat's runs */
  sqlite3_stmt *q;
  ck_assert_int_eq(sqlite3_prepare_v2(o.st->r.lite,
                                      "EXPLAIN QUERY PLAN SELECT COALESCE(MAX(seq), 0) "
                                      "+ 1 FROM runs WHERE chat_id = 'c1'",
                                      -1, &q, NULL),
                   SQLITE_OK);
  int found = 0;
  while (sqlite3_step(q) == SQLITE_ROW)
    found |= strstr((const char *)sqlite3_column_text(q, 3), "runs_chat_seq") != NULL;
  sqlite3_finalize(q);
  ck_assert_int_eq(found, 1);
  struct store_run *v;
  size_t n;
  ck_assert_int_eq(store_run_list_unfinished(o.st, &v, &n), 0);
  ck_assert_uint_eq(n, 1);
  ck_assert_str_eq(v[0].id, "r1");
  ck_assert_str_eq(v[0].code, "print(1)");
  store_run_list_free(v, n);
  struct store_chat c;
  ck_assert_int_eq(store_chat_get(o.st, "c1", &c), 0);
  ck_assert_str_eq(c.title, "title");
  store_chat_free(&c);
  /* a new run continues the chat's seq */
  struct store_run r = {0};
  struct done d = {0};
  snprintf(r.id, sizeof r.id, "r3");
  snprintf(r.chat_id, sizeof r.chat_id, "c1");
  r.state = "queued";
  ck_assert_int_eq(store_run_put(o.st, &r, on_done, &d), 0);
  t_wait(&o);
  ck_assert_int_eq(d.rc, 0);
  struct store_run g;
  ck_assert_int_eq(store_run_get(o.st, "r3", &g), 0);
  ck_assert_int_eq(g.seq, 3);
  store_run_free(&g);
  t_close(&o);
}
END_TEST

static void on_trim_done(int rc, const struct sbx_error *err, size_t removed, void *ud) {
  (void)err;
  ck_assert_int_eq(rc, 0);
  *(size_t *)ud = removed;
}

START_TEST(test_migration_3_to_4) {
  T_SQLITE_ONLY("the SQLite schema's migrations (test_pg.c migrates PostgreSQL's)");
  struct tctx t;
  sqlite3 *db = db_at(&t, 3);
  insert_v1_rows(db);
  /* events logged by a version-3 program: no created_at */
  ck_assert_int_eq(sqlite3_exec(db,
                                "INSERT INTO events(chat_id, seq, type, payload) VALUES"
                                " ('c1', 1, 'run', '{}'), ('c1', 2, 'files', '{}'),"
                                " ('c1', 3, 'cancel', '{}')",
                                NULL, NULL, NULL),
                   SQLITE_OK);
  ck_assert_int_ne(sqlite3_exec(db, "SELECT created_at FROM events", NULL, NULL, NULL), SQLITE_OK);
  sqlite3_close(db);
  struct tctx o = t;
  t_reopen(&o); /* store_open migrates 3 -> 4 */
  ck_assert_int_eq(store_schema_version(o.st), ST_SCHEMA_VERSION);
  ck_assert_int_eq(raw_int(o.st->r.lite, "SELECT count(*) FROM events WHERE created_at = 0"), 3);
  /* a new event records when it was logged */
  struct done d = {0};
  int64_t before = sbx_now_wall_ms();
  ck_assert_int_eq(store_event_append(o.st, "c1", 4, "run", "{}", on_done, &d), 0);
  t_wait(&o);
  ck_assert_int_eq(d.rc, 0);
  ck_assert_int_eq(raw_int(o.st->r.lite, "SELECT count(*) FROM events WHERE seq = 4 AND "
                                         "created_at > 0"),
                   1);
  /* the old ones read as old: trimmed down to the chat's newest events */
  size_t removed = 99;
  ck_assert_int_eq(store_event_trim(o.st, before, 2, 100, on_trim_done, &removed), 0);
  t_wait(&o);
  ck_assert_uint_eq(removed, 2);
  int64_t last = 0;
  ck_assert_int_eq(store_event_last_seq(o.st, "c1", &last), 0);
  ck_assert_int_eq(last, 4);
  ck_assert_int_eq(raw_int(o.st->r.lite, "SELECT min(seq) FROM events"), 3);
  t_close(&o);
}
END_TEST

START_TEST(test_migration_4_to_5) {
  T_SQLITE_ONLY("the SQLite schema's migrations (test_pg.c migrates PostgreSQL's)");
  struct tctx t;
  sqlite3 *db = db_at(&t, 4);
  insert_v1_rows(db);
  /* a second chat whose runs were created in the other order of ids, one in the same ms */
  ck_assert_int_eq(
      sqlite3_exec(
          db,
          "INSERT INTO chats VALUES('c2', 'h', 't2', 2);"
          "INSERT INTO runs(id, chat_id, turn_id, code, origin, state, timeout_s, attempts,"
          " stdout_truncated, stderr_truncated, restarted, files_unlisted, figures_dropped,"
          " seq, created_at, started_at, finished_at) VALUES"
          " ('r9', 'c2', '', 'a', 'tool', 'done', 60, 1, 0, 0, 0, 0, 0, 1, 20, 0, 0),"
          " ('r8', 'c2', '', 'b', 'tool', 'done', 60, 1, 0, 0, 0, 0, 0, 2, 21, 0, 0),"
          " ('r7', 'c2', '', 'c', 'tool', 'queued', 60, 0, 0, 0, 0, 0, 0, 3, 21, 0, 0);",
          NULL, NULL, NULL),
      SQLITE_OK);
  ck_assert_int_eq(raw_int(db, "SELECT count(*) FROM sqlite_master WHERE name = 'runs_chat'"), 1);
  sqlite3_close(db);
  struct tctx o = t;
  t_reopen(&o); /* store_open migrates 4 -> 5 */
  ck_assert_int_eq(store_schema_version(o.st), ST_SCHEMA_VERSION);
  ck_assert_int_eq(
      raw_int(o.st->r.lite, "SELECT count(*) FROM sqlite_master WHERE name = 'runs_chat'"), 0);
  ck_assert_int_eq(raw_int(o.st->r.lite, "SELECT count(*) FROM sqlite_master WHERE name = "
                                         "'runs_chat_seq'"),
                   1);
  /* a chat's runs newest first, as before (created_at order, the same ms by insertion) */
  struct store_run *v;
  size_t n;
  ck_assert_int_eq(store_run_list(o.st, "c2", 10, &v, &n), 0);
  ck_assert_uint_eq(n, 3);
  ck_assert_str_eq(v[0].id, "r7");
  ck_assert_str_eq(v[1].id, "r8");
  ck_assert_str_eq(v[2].id, "r9");
  store_run_list_free(v, n);
  ck_assert_int_eq(store_run_list(o.st, "c2", 1, &v, &n), 0);
  ck_assert_uint_eq(n, 1);
  ck_assert_str_eq(v[0].id, "r7");
  store_run_list_free(v, n);
  ck_assert_int_eq(store_run_list(o.st, "c1", 10, &v, &n), 0);
  ck_assert_uint_eq(n, 2);
  ck_assert_str_eq(v[0].id, "r2");
  store_run_list_free(v, n);
  /* the chat-keyed run statements search an index, none sorts */
  static const enum st_stmt_id chat_keyed[] = {ST_RUN_LIST_CHAT, ST_RUN_INSERT, ST_RUN_BY_IDEM,
                                               ST_RUN_UNFINISHED};
  for (size_t i = 0; i < SBX_ARRAY_SIZE(chat_keyed); i++) {
    char plan[1024];
    plan_of(o.st->r.lite, sqlite3_sql(o.st->r.q[chat_keyed[i]].lite), plan, sizeof plan);
    ck_assert_msg(strstr(plan, "USING") != NULL && strstr(plan, "TEMP B-TREE") == NULL &&
                      strstr(plan, "SCAN runs;") == NULL,
                  "%s: %s", sqlite3_sql(o.st->r.q[chat_keyed[i]].lite), plan);
  }
  char plan[1024];
  plan_of(o.st->r.lite, sqlite3_sql(o.st->r.q[ST_RUN_LIST_CHAT].lite), plan, sizeof plan);
  ck_assert_ptr_nonnull(strstr(plan, "SEARCH runs USING INDEX runs_chat_seq (chat_id=?)"));
  /* deleting a chat finds its runs by index (the foreign key's cascade) */
  plan_of(o.st->r.lite, "SELECT 1 FROM runs WHERE chat_id = 'c1'", plan, sizeof plan);
  ck_assert_ptr_nonnull(strstr(plan, "runs_chat_seq"));
  t_close(&o);
}
END_TEST

START_TEST(test_migration_5_to_6) {
  T_SQLITE_ONLY("the SQLite schema's migrations (test_pg.c migrates PostgreSQL's)");
  struct tctx t;
  sqlite3 *db = db_at(&t, 5);
  insert_v1_rows(db);
  /* events of a version-5 program; then store_open migrates 5 -> 6 */
  reopen_migrated(&t, db,
                  "INSERT INTO chats VALUES('c2', 'h', 't2', 2);"
                  "INSERT INTO events(chat_id, seq, type, payload, created_at)"
                  " VALUES ('c2', 1, 'run', '{\"n\":1}', 5),"
                  " ('c1', 1, 'run', '{\"n\":2}', 6), ('c1', 2, 'files', '{}', 7),"
                  " ('c2', 2, 'cancel', '{\"n\":3}', 8)");
  ck_assert_int_eq(has_object(t.st->r.lite, "events_chat_seq"), 1);
  ck_assert_int_eq(has_object(t.st->r.lite, "events_v6"), 0);
  ck_assert_int_eq(raw_int(t.st->r.lite, "SELECT count(*) FROM pragma_table_info('events') WHERE "
                                         "name = 'id' AND pk = 1"),
                   1); /* a rowid table */
  ck_assert_int_eq(raw_int(t.st->r.lite, "SELECT count(*) FROM events"), 4);
  /* the rows kept: replay, last seq, created_at */
  struct store_event *v;
  size_t n;
  ck_assert_int_eq(store_event_since(t.st, "c2", 0, 10, &v, &n), 0);
  ck_assert_uint_eq(n, 2);
  ck_assert_int_eq(v[0].seq, 1);
  ck_assert_str_eq(v[0].payload, "{\"n\":1}");
  ck_assert_int_eq(v[1].seq, 2);
  ck_assert_str_eq(v[1].type, "cancel");
  store_event_list_free(v, n);
  int64_t last = 0;
  ck_assert_int_eq(store_event_last_seq(t.st, "c1", &last), 0);
  ck_assert_int_eq(last, 2);
  ck_assert_int_eq(raw_int(t.st->r.lite, "SELECT created_at FROM events WHERE chat_id = 'c2' AND "
                                         "seq = 2"),
                   8);
  /* a seq used twice is still refused; a new one appends */
  struct done d = {0};
  ck_assert_int_eq(store_event_append(t.st, "c1", 2, "run", "{}", on_done, &d), 0);
  t_wait(&t);
  ck_assert_int_eq(d.rc, SBX_ECONFLICT);
  ck_assert_int_eq(store_event_append(t.st, "c1", 3, "run", "{}", on_done, &d), 0);
  t_wait(&t);
  ck_assert_int_eq(d.rc, 0);
  /* every events statement searches events_chat_seq; none scans or sorts */
  static const enum st_stmt_id ev[] = {
      ST_EVENT_LAST,       ST_EVENT_SINCE,      ST_EVENT_NEXT_CHAT,  ST_EVENT_SPAN,
      ST_EVENT_KTH_NEWEST, ST_EVENT_OLD_PREFIX, ST_EVENT_DELETE_UPTO};
  for (size_t i = 0; i < SBX_ARRAY_SIZE(ev); i++) {
    char plan[1024];
    plan_of(t.st->w.lite, sqlite3_sql(t.st->w.q[ev[i]].lite), plan, sizeof plan);
    ck_assert_msg(strstr(plan, "events_chat_seq") != NULL && strstr(plan, "TEMP B-TREE") == NULL &&
                      strstr(plan, "SCAN events;") == NULL && strstr(plan, "SCAN e;") == NULL,
                  "%s: %s", sqlite3_sql(t.st->w.q[ev[i]].lite), plan);
  }
  t_close(&t);
}
END_TEST

START_TEST(test_migration_6_to_7) {
  T_SQLITE_ONLY("the SQLite schema's migrations (test_pg.c migrates PostgreSQL's)");
  struct tctx t;
  sqlite3 *db = db_at(&t, 6);
  insert_v1_rows(db);
  /* files written by a version-6 program: outputs (source 3) of two chats, an attachment; then
   * store_open migrates 6 -> 7 */
  reopen_migrated(&t, db,
                  "INSERT INTO chats VALUES('c2', 'h', 't2', 2);"
                  "INSERT INTO blobs VALUES('s1', 100, 1), ('s2', 30, 1), ('s3', 7, 1);"
                  "INSERT INTO files(id, chat_id, name, version, source, sha256, size, mounted,"
                  " text_of, run_id, created_at, dup_stem, dup_ext, dup_n) VALUES"
                  " ('f1', 'c1', 'a.png', 1, 3, 's1', 100, 1, '', 'r1', 1, 'a', '.png', 1),"
                  " ('f2', 'c1', 'a.png', 2, 3, 's2', 30, 1, '', 'r2', 2, 'a', '.png', 1),"
                  " ('f3', 'c1', 'doc.pdf', 1, 0, 's1', 100, 1, '', '', 3, 'doc', '.pdf', 1),"
                  " ('f4', 'c2', 'b.png', 1, 3, 's3', 7, 1, '', '', 4, 'b', '.png', 1);");
  ck_assert_int_eq(has_object(t.st->r.lite, "files_output"), 1);
  uint64_t bytes = 0;
  ck_assert_int_eq(store_chat_output_bytes(t.st, "c1", &bytes), 0);
  ck_assert_uint_eq(bytes, 130); /* both versions of a.png; not the attachment */
  ck_assert_int_eq(store_chat_output_bytes(t.st, "c2", &bytes), 0);
  ck_assert_uint_eq(bytes, 7);
  /* the rows are kept as they were */
  struct store_file f;
  ck_assert_int_eq(store_file_get(t.st, "f3", &f), 0);
  ck_assert_str_eq(f.name, "doc.pdf");
  store_file_free(&f);
  t_close(&t);
}
END_TEST

START_TEST(test_migration_7_to_8) {
  T_SQLITE_ONLY("the SQLite schema's migrations (test_pg.c migrates PostgreSQL's)");
  struct tctx t;
  sqlite3 *db = db_at(&t, 7);
  insert_v1_rows(db); /* runs written by a version-7 program; store_open migrates 7 -> 8 */
  reopen_migrated(&t, db, "UPDATE runs SET stdout_text = 'kept' WHERE id = 'r2';");
  t_run_value_migrated(&t, "r2");
  t_close(&t);
}
END_TEST

START_TEST(test_migration_8_to_9) {
  T_SQLITE_ONLY("the SQLite schema's migrations (test_pg.c migrates PostgreSQL's)");
  struct tctx t;
  sqlite3 *db = db_at(&t, 8);
  insert_v1_rows(db); /* chats, turns and runs of a version-8 program; store_open migrates 8 -> 9 */
  reopen_migrated(&t, db,
                  "INSERT INTO turns VALUES('t1', 'c1', 1, 'the answer', 5, 6);"
                  "UPDATE runs SET turn_id = 't1', value_json = '{}' WHERE id = 'r2';");
  ck_assert_int_eq(has_object(t.st->r.lite, "messages_chat"), 1);
  struct store_turn tu;
  ck_assert_int_eq(store_turn_get(t.st, "t1", &tu), 0);
  ck_assert_str_eq(tu.answer, "the answer"); /* the rows as they were */
  store_turn_free(&tu);
  struct store_run r;
  ck_assert_int_eq(store_run_get(t.st, "r2", &r), 0);
  ck_assert_str_eq(r.turn_id, "t1");
  ck_assert_str_eq(r.value_json, "{}");
  store_run_free(&r);
  t_messages_migrated(&t, "c1", "t1", "r2");
  t_close(&t);
}
END_TEST

START_TEST(test_migration_10_to_11) {
  T_SQLITE_ONLY("the SQLite schema's migrations (test_pg.c migrates PostgreSQL's)");
  struct tctx t;
  sqlite3 *db = db_at(&t, 10);
  insert_v1_rows(db); /* a chat of a version-10 program; store_open migrates 10 -> 11 */
  ck_assert_int_eq(has_object(db, "people"), 0);
  reopen_migrated(&t, db, "UPDATE chats SET title = 'kept' WHERE id = 'c1';");
  ck_assert_int_eq(has_object(t.st->r.lite, "chats_owner"), 1);
  ck_assert_int_eq(has_object(t.st->r.lite, "sessions_person"), 1);
  t_people_migrated(&t, "c1");
  t_close(&t);
}
END_TEST

START_TEST(test_migration_failure_rolls_back) {
  T_SQLITE_ONLY("the SQLite schema's migrations (test_pg.c migrates PostgreSQL's)");
  struct tctx t;
  sqlite3 *db = db_at(&t, 1);
  struct sbx_error err = {0};
  /* something in the way of migration 2 */
  ck_assert_int_eq(sqlite3_exec(db, "CREATE TABLE run_files_file(x)", NULL, NULL, NULL), SQLITE_OK);
  int rc = st__migrate(db, 2, &err);
  ck_assert_int_eq(rc, SBX_EDB);
  ck_assert_ptr_nonnull(strstr(err.msg, "schema version 2"));
  ck_assert_ptr_nonnull(strstr(err.msg, "run_files_file"));
  ck_assert_int_eq(raw_int(db, "PRAGMA user_version"), 1);
  ck_assert_int_eq(raw_int(db, "SELECT count(*) FROM sqlite_master WHERE name = 'files_expiry'"),
                   0);
  sqlite3_close(db);
  /* store_open reports it too */
  uv_loop_t loop;
  struct store *st = NULL;
  uv_loop_init(&loop);
  ck_assert_int_eq(store_open(&loop, t.dir, &st, &err), SBX_EDB);
  ck_assert_ptr_null(st);
  ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  ck_assert_int_eq(uv_loop_close(&loop), 0);
  t_rmrf(t.dir);
}
END_TEST

START_TEST(test_ids) {
  store_id a, b;
  ck_assert_int_eq(store_new_id(a), 0);
  ck_assert_int_eq(store_new_id(b), 0);
  ck_assert_uint_eq(strlen(a), STORE_ID_LEN);
  ck_assert_uint_eq(strspn(a, "0123456789abcdef"), STORE_ID_LEN);
  ck_assert_str_ne(a, b);
}
END_TEST

START_TEST(test_translate) {
  static const struct {
    int sqlite, sbx;
  } map[] = {
      {SQLITE_NOMEM, SBX_ENOMEM},
      {SQLITE_IOERR_FSYNC, SBX_EIO},
      {SQLITE_FULL, SBX_EFULL},
      {SQLITE_CORRUPT, SBX_ECORRUPT},
      {SQLITE_NOTADB, SBX_ECORRUPT},
      {SQLITE_BUSY, SBX_EBUSY},
      {SQLITE_LOCKED, SBX_EBUSY},
      {SQLITE_READONLY, SBX_EPERM},
      {SQLITE_CONSTRAINT_UNIQUE, SBX_ECONFLICT},
      {SQLITE_ERROR, SBX_EDB},
      {SQLITE_MISMATCH, SBX_EDB},
      {SQLITE_OK, 0},
      {SQLITE_DONE, 0},
  };
  for (size_t i = 0; i < SBX_ARRAY_SIZE(map); i++) {
    struct sbx_error err = {0};
    ck_assert_int_eq(st__translate(NULL, map[i].sqlite, "what", &err), map[i].sbx);
    if (map[i].sbx) {
      ck_assert_int_eq(err.code, map[i].sbx);
      ck_assert_ptr_nonnull(strstr(err.msg, "what: "));
    }
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("db");
  TCase *tc = tcase_create("db");
  tcase_add_test(tc, test_migration_0_to_1);
  tcase_add_test(tc, test_migration_1_to_2);
  tcase_add_test(tc, test_migration_2_to_3);
  tcase_add_test(tc, test_migration_3_to_4);
  tcase_add_test(tc, test_migration_4_to_5);
  tcase_add_test(tc, test_migration_5_to_6);
  tcase_add_test(tc, test_migration_6_to_7);
  tcase_add_test(tc, test_migration_7_to_8);
  tcase_add_test(tc, test_migration_8_to_9);
  tcase_add_test(tc, test_migration_10_to_11);
  tcase_add_test(tc, test_migration_failure_rolls_back);
  tcase_add_test(tc, test_ids);
  tcase_add_test(tc, test_translate);
  return t_run_suite(s, tc);
}
