/* db.c -- the statement layer every file of the module uses, and its SQLite side.
 *
 * The layer: the statement table (ST_STMTS, internal.h: each statement's SQLite text and, where
 * the dialects differ, its PostgreSQL text), prepared by id on each connection; bind, step,
 * columns, reset, rows changed, whether a transaction is open.  The table files (chats.c,
 * files.c, runs.c, ...) are written against it alone, so each query's meaning is written once
 * whichever backend runs it; each call goes to SQLite here or to pg.c.
 *
 * SQLite's side: the ONE place where SQLite result codes become SBX_* codes (SQLite's own message
 * is kept in the struct sbx_error), opening a connection (WAL, synchronous=FULL, foreign keys on,
 * busy timeout 5 s), the SQLite schema's migrations (forward only, by PRAGMA user_version).  And
 * the ids rows are keyed by.
 *
 * What it does not do: open or close the store (open.c), run writes (writer.c), talk to
 * PostgreSQL (pg.c), or know what any table means beyond creating it.
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

int st__db_prepare(struct st_db *db, struct sbx_error *err) {
  for (int i = 0; i < ST_STMT_COUNT; i++) {
    db->q[i].db = db;
    db->q[i].id = (enum st_stmt_id)i;
  }
  if (db->kind == ST_PG)
    return st__pg_prepare(db, err);
  for (int i = 0; i < ST_STMT_COUNT; i++) {
    if (st__stmt_sqlite[i] == NULL)
      continue; /* a statement of the PostgreSQL backend alone */
    int rc = sqlite3_prepare_v3(db->lite, st__stmt_sqlite[i], -1, SQLITE_PREPARE_PERSISTENT,
                                &db->q[i].lite, NULL);
    if (rc != SQLITE_OK)
      return st__translate(db->lite, rc, st__stmt_sqlite[i], err);
  }
  return 0;
}

void st__db_close(struct st_db *db) {
  if (db->kind == ST_PG) {
    st__pg_close(db);
    return;
  }
  for (int i = 0; i < ST_STMT_COUNT; i++) {
    sqlite3_finalize(db->q[i].lite);
    db->q[i].lite = NULL;
  }
  if (db->lite && sqlite3_close(db->lite) != SQLITE_OK)
    sbx_log(SBX_LOG_ERROR, ST_MOD, "%s connection did not close: %s", db->role,
            sqlite3_errmsg(db->lite));
  db->lite = NULL;
}

int st__db_exec(struct st_db *db, const char *sql, struct sbx_error *err) {
  return db->kind == ST_PG ? st__pg_exec(db, sql, err) : st__exec(db->lite, sql, err);
}

int st__db_int(struct st_db *db, const char *sql, int64_t *out, struct sbx_error *err) {
  if (db->kind == ST_PG)
    return st__pg_int(db, sql, out, err);
  sqlite3_stmt *s = NULL;
  int rc = sqlite3_prepare_v2(db->lite, sql, -1, &s, NULL);
  if (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
    *out = sqlite3_column_int64(s, 0);
    rc = SQLITE_OK;
  } else if (rc == SQLITE_DONE) {
    sqlite3_finalize(s);
    return sbx_error_set(err, SBX_ENOENT, "%s: no row", sql);
  }
  int r = st__translate(db->lite, rc, sql, err);
  sqlite3_finalize(s);
  return r;
}

int st__db_ready(struct st_db *db, struct sbx_error *err) {
  return db->kind == ST_PG ? st__pg_ready(db, err) : 0;
}

/* ---- the statement layer ---------------------------------------------------------------------
 * Each call goes to SQLite directly or to pg.c.  SQLite binds borrow (SQLITE_STATIC) exactly as
 * pg.c's do, so a caller's buffers live until the reset on both. */

void st__bind_text(struct st_stmt *s, int i, const char *v) {
  if (s->db->kind == ST_PG)
    st__pg_bind(s, i, v, v ? strlen(v) : 0, 0);
  else if (v)
    sqlite3_bind_text(s->lite, i, v, -1, SQLITE_STATIC);
  else
    sqlite3_bind_null(s->lite, i);
}

void st__bind_int64(struct st_stmt *s, int i, int64_t v) {
  if (s->db->kind == ST_PG)
    st__pg_bind_int64(s, i, v);
  else
    sqlite3_bind_int64(s->lite, i, (sqlite3_int64)v);
}

void st__bind_blob(struct st_stmt *s, int i, const void *p, size_t n) {
  if (s->db->kind == ST_PG)
    st__pg_bind(s, i, p ? p : "", n, 1);
  else
    sqlite3_bind_blob64(s->lite, i, p ? p : "", (sqlite3_uint64)n, SQLITE_STATIC);
}

int st__step(struct st_stmt *s, const char *what, struct sbx_error *err) {
  if (s->db->kind == ST_PG)
    return st__pg_step(s, what, err);
  int rc = sqlite3_step(s->lite);
  if (rc == SQLITE_ROW)
    return ST_ROW;
  if (rc == SQLITE_DONE)
    return ST_DONE;
  return st__translate(s->db->lite, rc, what, err);
}

void st__reset(struct st_stmt *s) {
  if (s->db->kind == ST_PG) {
    st__pg_reset(s);
    return;
  }
  sqlite3_reset(s->lite);
  sqlite3_clear_bindings(s->lite);
}

int st__step_done(struct st_stmt *s, const char *what, struct sbx_error *err) {
  int rc = st__step(s, what, err);
  st__reset(s);
  return rc < 0 ? rc : 0;
}

int st__step_one(struct st_stmt *s, const char *what, struct sbx_error *err) {
  int rc = st__step(s, what, err);
  st__reset(s);
  return rc;
}

int st__step_int64(struct st_stmt *s, const char *what, int64_t *out, struct sbx_error *err) {
  int rc = st__step(s, what, err), r = 0;
  if (rc == ST_ROW)
    *out = st__col_int64(s, 0);
  else
    r = rc < 0 ? rc : sbx_error_set(err, SBX_EDB, "%s: no row", what ? what : "query");
  st__reset(s);
  return r;
}

int st__known(struct store *st, enum st_stmt_id id, const char *key, const char *what,
              struct sbx_error *err) {
  struct st_stmt *s = st__q(&st->w, id);
  st__bind_text(s, 1, key);
  int rc = st__step_one(s, what, err); /* an error's message names what was looked up */
  return rc == ST_ROW    ? 0
         : rc == ST_DONE ? sbx_error_set(err, SBX_ENOENT, "no %s %s", what, key)
                         : rc;
}

const char *st__col_text(struct st_stmt *s, int i) {
  if (s->db->kind == ST_PG)
    return st__pg_col(s, i, NULL);
  return (const char *)sqlite3_column_text(s->lite, i);
}

size_t st__col_len(struct st_stmt *s, int i) {
  if (s->db->kind == ST_PG) {
    size_t n = 0;
    st__pg_col(s, i, &n);
    return n;
  }
  return (size_t)sqlite3_column_bytes(s->lite, i);
}

int st__col_int(struct st_stmt *s, int i) { return (int)st__col_int64(s, i); }

int64_t st__col_int64(struct st_stmt *s, int i) {
  if (s->db->kind == ST_PG) {
    const char *v = st__pg_col(s, i, NULL);
    return v ? strtoll(v, NULL, 10) : 0;
  }
  return sqlite3_column_int64(s->lite, i);
}

const void *st__col_blob(struct st_stmt *s, int i, size_t *n) {
  if (s->db->kind == ST_PG)
    return st__pg_col(s, i, n);
  const void *p = sqlite3_column_blob(s->lite, i);
  *n = (size_t)sqlite3_column_bytes(s->lite, i);
  return p;
}

char *st__col_dup(struct st_stmt *s, int i, int *oom) {
  const char *t = st__col_text(s, i);
  if (t == NULL)
    return NULL;
  char *d = sbx_strndup(t, st__col_len(s, i));
  if (d == NULL)
    *oom = 1;
  return d;
}

static void col_fixed(struct st_stmt *s, int i, char *out, size_t cap) {
  const char *t = st__col_text(s, i);
  size_t n = t ? st__col_len(s, i) : 0;
  if (n >= cap)
    n = cap - 1;
  if (n)
    memcpy(out, t, n);
  out[n] = '\0';
}

void st__col_id(struct st_stmt *s, int i, store_id out) { col_fixed(s, i, out, sizeof(store_id)); }
void st__col_hex(struct st_stmt *s, int i, char out[65]) { col_fixed(s, i, out, 65); }

int64_t st__changes(struct st_db *db) {
  return db->kind == ST_PG ? st__pg_changes(db) : sqlite3_changes64(db->lite);
}

int st__in_txn(struct st_db *db) {
  return db->kind == ST_PG ? st__pg_in_txn(db) : !sqlite3_get_autocommit(db->lite);
}

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
    /* 10: where in an answer's text its tool runs happened, as the orchestrator's JSON text;
     * messages stored before read NULL (their runs placed nowhere) */
    "ALTER TABLE messages ADD COLUMN parts_json TEXT;",
    /* 11: people and their sessions (people.c): a person's name (unique), role, Argon2id hash
     * (encoded, its parameters in it), whether disabled or made to change the password, when
     * made and last seen, their own settings as the orchestrator's JSON text; a session by the
     * sha256 of its cookie, its person, when made, last used and ended (0: open), the open ones
     * of a person found by index; and a chat's owner (NULL: a backend's chat), a person's chats
     * newest first by chats_owner */
    "CREATE TABLE people(id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, role TEXT NOT NULL,"
    " pw_hash TEXT NOT NULL, disabled INTEGER NOT NULL DEFAULT 0,"
    " must_change_password INTEGER NOT NULL DEFAULT 0, created_at INTEGER NOT NULL,"
    " last_seen_at INTEGER NOT NULL DEFAULT 0, settings_json TEXT NOT NULL DEFAULT '{}');"
    "CREATE TABLE sessions(token_hash TEXT PRIMARY KEY,"
    " person_id TEXT NOT NULL REFERENCES people(id) ON DELETE CASCADE,"
    " created_at INTEGER NOT NULL, last_used_at INTEGER NOT NULL,"
    " ended_at INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID;"
    "CREATE INDEX sessions_person ON sessions(person_id) WHERE ended_at = 0;"
    "ALTER TABLE chats ADD COLUMN owner TEXT REFERENCES people(id);"
    "CREATE INDEX chats_owner ON chats(owner, created_at) WHERE owner IS NOT NULL;",
};

static int lite_exec(void *conn, const char *sql, struct sbx_error *err) {
  return st__exec(conn, sql, err);
}

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
    if ((rc = st__migrate_step(lite_exec, db, "BEGIN IMMEDIATE", migrations[v - 1], pragma, v,
                               err)) != 0)
      return rc;
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

int st__rows(struct st_stmt *s, const char *what, size_t elem,
             int (*from_row)(struct st_stmt *s, void *item), void (*free_list)(void *v, size_t n),
             void **out, size_t *n) {
  char *v = NULL;
  size_t len = 0, cap = 0;
  int rc, r = 0;
  *out = NULL;
  *n = 0;
  while ((rc = st__step(s, what, NULL)) == ST_ROW) {
    if (len == cap) {
      size_t ncap = cap ? cap * 2 : 16;
      char *nv = sbx_realloc(v, ncap * elem);
      if (nv == NULL) {
        r = SBX_ENOMEM;
        break;
      }
      v = nv;
      cap = ncap;
    }
    if ((r = from_row(s, v + len * elem)) != 0)
      break;
    len++;
  }
  if (r == 0 && rc < 0)
    r = rc;
  st__reset(s);
  if (r != 0) {
    free_list(v, len);
    return r;
  }
  *out = v;
  *n = len;
  return 0;
}
