/* test_open.c -- open.c: opening (each backend's connection settings, errors with the path), a
 * newer or foreign database refused, one process per data directory, and fail-at-N allocation
 * through store_open.  The PostgreSQL connection's own refusals (unreachable, password) are
 * test_pg.c's. */
#include <sys/stat.h>

#include "helpers.h"

/* The value of a one-integer query on a store connection. */
static int64_t conn_int(struct st_db *db, const char *sql) {
  int64_t v = -1;
  struct sbx_error err = {0};
  ck_assert_msg(st__db_int(db, sql, &v, &err) == 0, "%s: %s", sql, err.msg);
  return v;
}

START_TEST(test_open_fresh) {
  struct tctx t;
  t_open(&t);
  ck_assert_int_eq(store_schema_version(t.st), t_schema_version());
  ck_assert_int_eq(store_ping(t.st, NULL), 0);
  if (t_pg()) {
    /* the writer's COMMIT waits for the WAL flush whatever the server's default; the reader
     * cannot write; both in UTF-8 */
    ck_assert_int_eq(
        conn_int(&t.st->w, "SELECT (current_setting('synchronous_commit') = 'on')::int"), 1);
    ck_assert_int_eq(
        conn_int(&t.st->r, "SELECT (current_setting('default_transaction_read_only') = 'on')::int"),
        1);
    ck_assert_int_eq(
        conn_int(&t.st->r, "SELECT (current_setting('client_encoding') = 'UTF8')::int"), 1);
    struct sbx_error err = {0};
    ck_assert_int_eq(st__db_exec(&t.st->r, "INSERT INTO settings VALUES('k', 'v')", &err),
                     SBX_EPERM);
    t_close(&t);
    return;
  }
  ck_assert_int_eq(raw_int(t.st->r.lite, "PRAGMA foreign_keys"), 1);
  ck_assert_int_eq(raw_int(t.st->w.lite, "PRAGMA synchronous"), 2); /* FULL */
  ck_assert_int_eq(raw_int(t.st->w.lite, "PRAGMA busy_timeout"), 5000);
  /* the writer's cache; it never checkpoints inside a commit (checkpoint.c does); the reader
   * keeps the defaults */
  ck_assert_int_eq(raw_int(t.st->w.lite, "PRAGMA cache_size"), -32768);
  ck_assert_int_eq(raw_int(t.st->w.lite, "PRAGMA wal_autocheckpoint"), 0);
  ck_assert_int_eq(raw_int(t.st->w.lite, "PRAGMA journal_size_limit"), 64 << 20);
  ck_assert_int_eq(raw_int(t.st->r.lite, "PRAGMA cache_size"), -2000);
  ck_assert_int_eq(raw_int(t.st->r.lite, "PRAGMA wal_autocheckpoint"), 1000);
  t_close_keep(&t);
  sqlite3 *db = raw_open(t.dir);
  ck_assert_int_eq(raw_int(db, "SELECT journal_mode = 'wal' FROM pragma_journal_mode"), 1);
  sqlite3_close(db);
  t_rmrf(t.dir);
}
END_TEST

START_TEST(test_refusals) {
  struct tctx t;
  struct sbx_error err = {0};
  uv_loop_t loop;
  struct store *st = NULL;
  uv_loop_init(&loop);
  /* newer schema */
  t_mkdir(&t);
  if (t_pg()) {
    t_sql_exec(t.dir, "CREATE TABLE schema_version(version INTEGER NOT NULL)");
    t_sql_exec(t.dir, "INSERT INTO schema_version VALUES(99)");
  } else {
    sqlite3 *db = raw_open(t.dir);
    sqlite3_exec(db, "PRAGMA user_version = 99", NULL, NULL, NULL);
    sqlite3_close(db);
  }
  ck_assert_int_eq(t_store_open(&loop, t.dir, &st, &err), SBX_ECORRUPT);
  ck_assert_ptr_nonnull(strstr(err.msg, "newer"));
  ck_assert_ptr_null(strchr(err.msg, '\n')); /* one line */
  t_rmrf(t.dir);
  /* not a database (an SQLite file of something else) */
  t_mkdir(&t);
  char path[512];
  snprintf(path, sizeof path, "%s/cerea.db", t.dir);
  FILE *f = fopen(path, "w");
  for (int i = 0; i < 200; i++)
    fputs("this is not an SQLite database ", f);
  fclose(f);
  ck_assert_int_eq(store_open(&loop, t.dir, &st, &err), SBX_ECORRUPT);
  ck_assert_ptr_nonnull(strstr(err.msg, "not a database"));
  /* a database URL that is not one */
  ck_assert_int_eq(store_open_url(&loop, t.dir, "mysql://db/x", &st, &err), SBX_EINVAL);
  ck_assert_ptr_nonnull(strstr(err.msg, "postgresql://"));
  ck_assert_int_eq(store_open_url(&loop, t.dir, "postgresql://h/d?nonsense=1", &st, &err),
                   SBX_EINVAL);
  ck_assert_ptr_nonnull(strstr(err.msg, "nonsense"));
  ck_assert_ptr_null(st);
  t_rmrf(t.dir);
  /* data directory that cannot be made */
  ck_assert_int_eq(t_store_open(&loop, "/proc/sbx-nope/data", &st, &err) < 0, 1);
  ck_assert_ptr_nonnull(strstr(err.msg, "/proc/sbx-nope/data"));
  t_mkdir(&t);
  snprintf(path, sizeof path, "%s/file", t.dir);
  f = fopen(path, "w");
  fclose(f);
  ck_assert_int_eq(t_store_open(&loop, path, &st, &err), SBX_EIO);
  ck_assert_ptr_nonnull(strstr(err.msg, path));
  ck_assert_int_eq(store_open(&loop, "", &st, &err), SBX_EINVAL);
  ck_assert_ptr_null(st);
  t_rmrf(t.dir);
  ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  ck_assert_int_eq(uv_loop_close(&loop), 0);
}
END_TEST

START_TEST(test_one_process_per_dir) {
  struct tctx t;
  t_open(&t);
  /* a blob temp file as a killed process leaves it */
  char sub[512], tmp[600];
  snprintf(sub, sizeof sub, "%s/blobs/ab", t.dir);
  ck_assert_int_eq(mkdir(sub, 0700), 0);
  snprintf(tmp, sizeof tmp, "%s/ab%062d.tmp", sub, 0);
  FILE *f = fopen(tmp, "w");
  fputs("half", f);
  fclose(f);
  /* a second open of the same directory while the first is open: refused */
  uv_loop_t loop;
  struct store *st2 = NULL;
  struct sbx_error err = {0};
  uv_loop_init(&loop);
  ck_assert_int_eq(t_store_open(&loop, t.dir, &st2, &err), SBX_EBUSY);
  ck_assert_ptr_nonnull(strstr(err.msg, "in use"));
  ck_assert_int_eq(access(tmp, F_OK), 0); /* the refused open touched nothing */
  ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
  ck_assert_int_eq(uv_loop_close(&loop), 0);
  t_close_keep(&t);
  /* after close it opens again, and the temp file is cleaned up */
  t_reopen(&t);
  ck_assert_int_eq(access(tmp, F_OK), -1);
  t_close(&t);
}
END_TEST

START_TEST(test_open_alloc_fail_at_n) {
  struct tctx t;
  t_mkdir(&t);
  uint64_t n;
  for (n = 1; n < 100; n++) {
    uv_loop_t loop;
    struct store *st = NULL;
    struct sbx_error err = {0};
    uv_loop_init(&loop);
    sbx_alloc_fail_at(n, 0);
    int rc = t_store_open(&loop, t.dir, &st, &err);
    uint64_t used = sbx_alloc_count();
    sbx_alloc_fail_at(0, 0);
    if (rc == 0)
      store_close(st);
    else
      ck_assert_msg(rc == SBX_ENOMEM, "n %llu: %s", (unsigned long long)n, err.msg);
    ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
    if (rc == 0 && used < n)
      break;
  }
  ck_assert_uint_lt(n, 100);
  t_rmrf(t.dir);
}
END_TEST

int main(void) {
  Suite *s = suite_create("open");
  TCase *tc = tcase_create("open");
  tcase_add_test(tc, test_open_fresh);
  tcase_add_test(tc, test_refusals);
  tcase_add_test(tc, test_one_process_per_dir);
  tcase_add_test(tc, test_open_alloc_fail_at_n);
  return t_run_suite(s, tc);
}
