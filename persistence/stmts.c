/* stmts.c -- what both backends read: the statement table (each statement of ST_STMTS by id: its
 * name, its SQLite text and, where the dialects differ, its PostgreSQL text) and the one step of a
 * schema migration (begin, the step's SQL, the version set, commit; rolled back on failure).
 *
 * What it does not do: prepare or run statements (db.c for SQLite, pg.c for PostgreSQL), or know
 * either backend's migrations (db.c's and pg.c's lists).
 */
#include "internal.h"

#include <stdio.h>

const char *const st__stmt_names[ST_STMT_COUNT] = {
#define ST_STMT_NAME(name, sql, pg) #name,
    ST_STMTS(ST_STMT_NAME)
#undef ST_STMT_NAME
};
const char *const st__stmt_sqlite[ST_STMT_COUNT] = {
#define ST_STMT_SQL(name, sql, pg) sql,
    ST_STMTS(ST_STMT_SQL)
#undef ST_STMT_SQL
};
const char *const st__stmt_pg[ST_STMT_COUNT] = {
#define ST_STMT_PG(name, sql, pg) pg,
    ST_STMTS(ST_STMT_PG)
#undef ST_STMT_PG
};

int st__migrate_step(st_sql_fn exec, void *conn, const char *begin, const char *sql,
                     const char *set_version, int v, struct sbx_error *err) {
  int rc;
  if ((rc = exec(conn, begin, err)) != 0)
    return rc;
  if ((rc = exec(conn, sql, err)) != 0 || (rc = exec(conn, set_version, err)) != 0 ||
      (rc = exec(conn, "COMMIT", err)) != 0) {
    struct sbx_error ignored;
    exec(conn, "ROLLBACK", &ignored);
    if (err) { /* copied first: err->msg is both the format's argument and its output */
      char why[sizeof err->msg];
      snprintf(why, sizeof why, "%s", err->msg);
      sbx_error_set(err, rc, "migration to schema version %d failed: %.400s", v, why);
    }
  }
  return rc;
}
