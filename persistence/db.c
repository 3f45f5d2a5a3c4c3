/* db.c -- the SQLite plumbing every file of the module uses: the ONE place where SQLite result
 * codes become SBX_* codes (SQLite's own message is kept in the struct sbx_error), statement and
 * column helpers, opening a connection (WAL, synchronous=FULL, foreign keys on, busy timeout 5 s),
 * the schema migrations (forward only, by PRAGMA user_version), the prepared-statement table, and
 * the ids rows are keyed by.
 *
 * What it does not do: open or close the store (open.c), run writes (writer.c), or know what any
 * table means beyond creating it.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- error translation ---------------------------------------------------------------------- */

int st__translate(sqlite3 *db, int rc, const char *what, struct sbx_error *err) {
  int code;
  switch (rc & 0xff) {
  case SQLITE_OK:
  case SQLITE_DONE:
  case SQLITE_ROW:
    return 0;
  case SQLITE_NOMEM:
    code = SBX_ENOMEM;
    break;
  case SQLITE_IOERR:
  case SQLITE_CANTOPEN:
    code = SBX_EIO;
    break;
  case SQLITE_FULL:
    code = SBX_EFULL;
    break;
  case SQLITE_CORRUPT:
  case SQLITE_NOTADB:
    code = SBX_ECORRUPT;
    break;
  case SQLITE_BUSY:
  case SQLITE_LOCKED:
    code = SBX_EBUSY;
    break;
  case SQLITE_READONLY:
  case SQLITE_PERM:
  case SQLITE_AUTH:
    code = SBX_EPERM;
    break;
  case SQLITE_CONSTRAINT:
    code = SBX_ECONFLICT;
    break;
  default:
    code = SBX_EDB;
    break;
  }
  const char *msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  return sbx_error_set(err, code, "%s: %s (sqlite %d)", what ? what : "sqlite", msg, rc);
}

int st__exec(sqlite3 *db, const char *sql, struct sbx_error *err) {
  int rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
  return rc == SQLITE_OK ? 0 : st__translate(db, rc, sql, err);
}

void st__reset(sqlite3_stmt *s) {
  sqlite3_reset(s);
  sqlite3_clear_bindings(s);
}

int st__step_done(sqlite3 *db, sqlite3_stmt *s, const char *what, struct sbx_error *err) {
  int rc = sqlite3_step(s);
  int out = (rc == SQLITE_DONE || rc == SQLITE_ROW) ? 0 : st__translate(db, rc, what, err);
  st__reset(s);
  return out;
}

int st__step_int64(sqlite3 *db, sqlite3_stmt *s, const char *what, int64_t *out,
                   struct sbx_error *err) {
  int rc = sqlite3_step(s), r = 0;
  if (rc == SQLITE_ROW)
    *out = sqlite3_column_int64(s, 0);
  else
    r = st__translate(db, rc == SQLITE_DONE ? SQLITE_ERROR : rc, what, err);
  st__reset(s);
  return r;
}

int st__bind_text(sqlite3_stmt *s, int i, const char *v) {
  return v ? sqlite3_bind_text(s, i, v, -1, SQLITE_STATIC) : sqlite3_bind_null(s, i);
}

char *st__col_dup(sqlite3_stmt *s, int i, int *oom) {
  const unsigned char *t = sqlite3_column_text(s, i);
  if (t == NULL)
    return NULL;
  char *d = sbx_strndup((const char *)t, (size_t)sqlite3_column_bytes(s, i));
  if (d == NULL)
    *oom = 1;
  return d;
}

static void col_fixed(sqlite3_stmt *s, int i, char *out, size_t cap) {
  const unsigned char *t = sqlite3_column_text(s, i);
  size_t n = t ? (size_t)sqlite3_column_bytes(s, i) : 0;
  if (n >= cap)
    n = cap - 1;
  if (n)
    memcpy(out, t, n);
  out[n] = '\0';
}

void st__col_id(sqlite3_stmt *s, int i, store_id out) { col_fixed(s, i, out, sizeof(store_id)); }
void st__col_hex(sqlite3_stmt *s, int i, char out[65]) { col_fixed(s, i, out, 65); }

/* ---- migrations ------------------------------------------------------------------------------
 * migrations[v - 1] takes the schema from version v - 1 to v.  Forward only: a database newer
 * than this code is refused (SBX_ECORRUPT with the versions), never "downgraded". */
static const char *const migrations[] = {
    /* 1: the domain model */
    "CREATE TABLE chats(id TEXT PRIMARY KEY, token_hash TEXT NOT NULL, title TEXT,"
    " created_at INTEGER NOT NULL);"
    "CREATE TABLE blobs(sha256 TEXT PRIMARY KEY, size INTEGER NOT NULL,"
    " created_at INTEGER NOT NULL) WITHOUT ROWID;"
    "CREATE TABLE files(id TEXT PRIMARY KEY,"
    " chat_id TEXT NOT NULL REFERENCES chats(id) ON DELETE CASCADE,"
    " name TEXT NOT NULL, version INTEGER NOT NULL, source INTEGER NOT NULL,"
    " sha256 TEXT NOT NULL REFERENCES blobs(sha256), size INTEGER NOT NULL,"
    " mounted INTEGER NOT NULL, left_out_reason TEXT, text_of TEXT NOT NULL, run_id TEXT NOT NULL,"
    " kind TEXT, created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL DEFAULT 0,"
    " dup_stem TEXT NOT NULL, dup_ext TEXT NOT NULL, dup_n INTEGER NOT NULL,"
    " UNIQUE(chat_id, name, version));"
    "CREATE INDEX files_dup ON files(chat_id, dup_stem, dup_ext, dup_n);"
    "CREATE INDEX files_sha ON files(sha256);"
    "CREATE TABLE turns(id TEXT PRIMARY KEY,"
    " chat_id TEXT NOT NULL REFERENCES chats(id) ON DELETE CASCADE, state INTEGER NOT NULL,"
    " answer TEXT, created_at INTEGER NOT NULL, finished_at INTEGER NOT NULL);"
    "CREATE TABLE runs(id TEXT PRIMARY KEY,"
    " chat_id TEXT NOT NULL REFERENCES chats(id) ON DELETE CASCADE, turn_id TEXT NOT NULL,"
    " code TEXT NOT NULL, origin TEXT NOT NULL, state TEXT NOT NULL, status TEXT,"
    " timeout_s INTEGER NOT NULL, attempts INTEGER NOT NULL, stdout_text TEXT, stderr_text TEXT,"
    " stdout_truncated INTEGER NOT NULL, stderr_truncated INTEGER NOT NULL, error_json TEXT,"
    " notes_json TEXT, remounted_json TEXT, restarted INTEGER NOT NULL,"
    " files_unlisted INTEGER NOT NULL, figures_dropped INTEGER NOT NULL, result_hash TEXT,"
    " idempotency_key TEXT, seq INTEGER NOT NULL, created_at INTEGER NOT NULL,"
    " started_at INTEGER NOT NULL, finished_at INTEGER NOT NULL);"
    "CREATE UNIQUE INDEX runs_idem ON runs(chat_id, idempotency_key)"
    " WHERE idempotency_key IS NOT NULL;"
    "CREATE INDEX runs_chat ON runs(chat_id, created_at);"
    "CREATE TABLE run_files(run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
    " position INTEGER NOT NULL, file_id TEXT NOT NULL REFERENCES files(id) ON DELETE CASCADE,"
    " PRIMARY KEY(run_id, position)) WITHOUT ROWID;"
    "CREATE TABLE events(chat_id TEXT NOT NULL REFERENCES chats(id) ON DELETE CASCADE,"
    " seq INTEGER NOT NULL, type TEXT NOT NULL, payload TEXT NOT NULL,"
    " PRIMARY KEY(chat_id, seq)) WITHOUT ROWID;"
    "CREATE TABLE settings(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;",
    /* 2: indexes for the start-up reload and the retention sweep, and for cascading deletes of
     * swept files through run_files */
    "CREATE INDEX runs_unfinished ON runs(created_at) WHERE state <> 'done';"
    "CREATE INDEX files_expiry ON files(expires_at) WHERE expires_at > 0;"
    "CREATE INDEX run_files_file ON run_files(file_id);",
    /* 3: the next per-chat run seq (MAX(seq) of a chat) by index: without it every run insert
     * scans all runs of its chat */
    "CREATE INDEX runs_chat_seq ON runs(chat_id, seq);",
    /* 4: when each event was logged (wall ms), so store_event_trim can drop old ones.  Events
     * logged before it read 0: old, trimmed like any other beyond each chat's newest. */
    "ALTER TABLE events ADD COLUMN created_at INTEGER NOT NULL DEFAULT 0;",
    /* 5: runs_chat (chat_id, created_at) goes: runs_chat_seq (chat_id, seq) orders a chat's runs
     * the same way (seq is assigned in creation order), and each chat-keyed index costs every new
     * run one random page written (bench/runs/wal_pages.py counts them) */
    "DROP INDEX runs_chat;",
    /* 6: events becomes a rowid table with a unique index (chat_id, seq).  Keyed by (chat_id, seq)
     * WITHOUT ROWID, each event's whole row (payload included) goes into its chat's leaf page, a
     * random page per event that splits often; as a rowid table the row is appended at the right
     * edge (the group's events share pages) and only the small index entry goes to the chat's
     * leaf.  Every events.c query searches (chat_id, seq) on events_chat_seq. */
    "CREATE TABLE events_v6(id INTEGER PRIMARY KEY,"
    " chat_id TEXT NOT NULL REFERENCES chats(id) ON DELETE CASCADE, seq INTEGER NOT NULL,"
    " type TEXT NOT NULL, payload TEXT NOT NULL, created_at INTEGER NOT NULL DEFAULT 0);"
    "INSERT INTO events_v6(chat_id, seq, type, payload, created_at)"
    " SELECT chat_id, seq, type, payload, created_at FROM events ORDER BY created_at, chat_id, seq;"
    "DROP TABLE events;"
    "ALTER TABLE events_v6 RENAME TO events;"
    "CREATE UNIQUE INDEX events_chat_seq ON events(chat_id, seq);",
    /* 7: a chat's stored output bytes (store_chat_output_bytes, for a per-chat quota) without
     * reading its rows: the sizes of its output files (source 3) in a partial index keyed by
     * chat, which covers the SUM (source is a column of it too: SQLite checks the query's
     * source = 3 on the index entry, not the row).  Only output rows have entries, so only an
     * output file's insert writes one more index page. */
    "CREATE INDEX files_output ON files(chat_id, source, size) WHERE source = 3;",
    /* 8: what a run showed besides its output: the cell's value (a MIME bundle) and its display()
     * bundles, as the orchestrator's JSON text.  Runs stored before read NULL: no value, no
     * displays. */
    "ALTER TABLE runs ADD COLUMN value_json TEXT;"
    "ALTER TABLE runs ADD COLUMN displays_json TEXT;",
    /* 9: a chat's conversation: its messages (the user's text of a turn, the assistant's answer
     * with its state, its error, the runs it owns and the tool calls it made, as the
     * orchestrator's JSON text), in creation order by rowid within the chat's index entries; the
     * answers still streaming (none once a start marked them interrupted) by a partial index */
    "CREATE TABLE messages(id TEXT PRIMARY KEY,"
    " chat_id TEXT NOT NULL REFERENCES chats(id) ON DELETE CASCADE, turn_id TEXT NOT NULL,"
    " role TEXT NOT NULL, state TEXT NOT NULL, text TEXT NOT NULL, error_json TEXT,"
    " run_ids_json TEXT NOT NULL, calls_json TEXT, created_at INTEGER NOT NULL,"
    " updated_at INTEGER NOT NULL);"
    "CREATE INDEX messages_chat ON messages(chat_id);"
    "CREATE INDEX messages_streaming ON messages(turn_id) WHERE state = 'streaming';",
};

int st__user_version(sqlite3 *db, int *out, struct sbx_error *err) {
  sqlite3_stmt *s = NULL;
  int rc = sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &s, NULL);
  if (rc != SQLITE_OK)
    return st__translate(db, rc, "PRAGMA user_version", err);
  rc = sqlite3_step(s);
  if (rc == SQLITE_ROW) {
    *out = sqlite3_column_int(s, 0);
    rc = SQLITE_OK;
  }
  int r = st__translate(db, rc, "PRAGMA user_version", err);
  sqlite3_finalize(s);
  return r;
}

int st__migrate(sqlite3 *db, int target, struct sbx_error *err) {
  int cur = 0, rc;
  if (target > (int)SBX_ARRAY_SIZE(migrations))
    return sbx_error_set(err, SBX_EINVAL, "no migration to schema version %d", target);
  if ((rc = st__user_version(db, &cur, err)) != 0)
    return rc;
  if (cur > (int)SBX_ARRAY_SIZE(migrations))
    return sbx_error_set(err, SBX_ECORRUPT,
                         "database schema version %d is newer than this program's %d", cur,
                         (int)SBX_ARRAY_SIZE(migrations));
  for (int v = cur + 1; v <= target; v++) {
    char pragma[64];
    snprintf(pragma, sizeof pragma, "PRAGMA user_version = %d", v);
    if ((rc = st__exec(db, "BEGIN IMMEDIATE", err)) != 0)
      return rc;
    if ((rc = st__exec(db, migrations[v - 1], err)) != 0 || (rc = st__exec(db, pragma, err)) != 0 ||
        (rc = st__exec(db, "COMMIT", err)) != 0) {
      struct sbx_error ignored;
      st__exec(db, "ROLLBACK", &ignored);
      if (err)
        sbx_error_set(err, rc, "migration to schema version %d failed: %.400s", v, err->msg);
      return rc;
    }
    sbx_log(SBX_LOG_DEBUG, ST_MOD, "schema migrated to version %d", v);
  }
  return 0;
}

int st__open_conn(const char *path, sqlite3 **out, struct sbx_error *err) {
  sqlite3 *db = NULL;
  int rc = sqlite3_open_v2(path, &db,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
  if (rc != SQLITE_OK) {
    int r = st__translate(db, rc, path, err);
    sqlite3_close(db);
    return r;
  }
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, 5000);
  /* journal_mode answers with a row; WAL must stick (it does not on some file systems). */
  sqlite3_stmt *s = NULL;
  rc = sqlite3_prepare_v2(db, "PRAGMA journal_mode = WAL", -1, &s, NULL);
  if (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
    const char *mode = (const char *)sqlite3_column_text(s, 0);
    if (mode == NULL || strcmp(mode, "wal") != 0) {
      sbx_error_set(err, SBX_EDB, "%s: could not switch to WAL (journal_mode %s)", path,
                    mode ? mode : "?");
      sqlite3_finalize(s);
      sqlite3_close(db);
      return SBX_EDB;
    }
    rc = SQLITE_OK;
  }
  if (rc != SQLITE_OK) {
    int r = st__translate(db, rc, "PRAGMA journal_mode", err);
    sqlite3_finalize(s);
    sqlite3_close(db);
    return r;
  }
  sqlite3_finalize(s);
  if ((rc = st__exec(db, "PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;", err)) != 0) {
    sqlite3_close(db);
    return rc;
  }
  *out = db;
  return 0;
}

static const char *const stmt_sql[ST_STMT_COUNT] = {
#define ST_STMT_SQL(name, sql) sql,
    ST_STMTS(ST_STMT_SQL)
#undef ST_STMT_SQL
};

int st__stmts_prepare(sqlite3 *db, sqlite3_stmt **v, struct sbx_error *err) {
  for (int i = 0; i < ST_STMT_COUNT; i++) {
    int rc = sqlite3_prepare_v3(db, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &v[i], NULL);
    if (rc != SQLITE_OK)
      return st__translate(db, rc, stmt_sql[i], err);
  }
  return 0;
}

void st__stmts_finalize(sqlite3_stmt **v) {
  for (int i = 0; i < ST_STMT_COUNT; i++) {
    sqlite3_finalize(v[i]);
    v[i] = NULL;
  }
}

/* Ids are 32 hex chars: 48 bits of wall-clock milliseconds, then 80 random bits (like a ULID).
 * Time first so that new rows land at the right edge of every id index (a few pages touched per
 * commit instead of one random page per row); 80 random bits keep them unguessable and unique.
 * Ids are names, not credentials (page tokens are). */
int store_new_id(store_id out) {
  unsigned char b[16];
  int rc = sbx_random(b + 6, sizeof b - 6);
  if (rc != 0)
    return rc;
  uint64_t ms = (uint64_t)sbx_now_wall_ms();
  for (int i = 5; i >= 0; i--) {
    b[i] = (unsigned char)(ms & 0xff);
    ms >>= 8;
  }
  sbx_hex(b, sizeof b, out);
  return 0;
}
