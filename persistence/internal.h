/* internal.h -- what the files of the persistence module share, and nothing outside it includes
 * (except its own tests and bench/store, which poke at the internals on purpose).
 *
 * Layout of the module, one job per file:
 *   open.c     the store's life: store_open and store_close (directory lock, connections, schema,
 *              statements, threads up and down)
 *   db.c       the statement layer everyone uses (the statement table, prepared by id; bind,
 *              step, columns) and its SQLite side: error translation (the ONE place SQLite codes
 *              become SBX_* codes), connections, the SQLite schema's migrations; row ids
 *   pg.c       the statement layer's PostgreSQL side (libpq): connections and reconnection, the
 *              ONE place PostgreSQL errors become SBX_* codes, the PostgreSQL schema's migrations
 *   writer.c   the writer thread: queue, group commit with a savepoint per write, completion of
 *              callbacks on the loop thread through a uv_async_t
 *   checkpoint.c  WAL checkpoints: a checkpointer thread (own connection, PASSIVE) woken by the
 *              writer's WAL hook, the writer's finishing step between groups, the hard bound
 *   health.c   store_ping and store_health: whether the store answers and its writes succeed
 *   blobs.c    sha256, the content-addressed blob files (temp + fsync + rename + dir fsync)
 *   chunks.c   with PostgreSQL: blob contents in the database in chunks, and this node's local
 *              copies of them fetched on first read
 *   stage.c    staged blobs: a streamed upload's temp file and incremental sha256 (loop thread)
 *   naming.c   NFC normalization (utf8proc) and the refusal rules; "name (N).ext" splitting
 *   files.c    store_file_*: the naming rules applied against the stored set; a chat's output
 *              bytes
 *   chats.c    chats (a chat's deletion with its files' blobs) and turns
 *   people.c   people and their sessions
 *   messages.c a chat's conversation (its messages)
 *   runs.c     runs and run files
 *   events.c   the per-chat event log and its bounded trimming
 *   settings.c runtime settings
 *   sweep.c    retention: bounded sweep steps, retention changes
 * The state machines (the store's life, the writer, the checkpointer, write health) are drawn
 * above their enums below; a stage's in stage.c.
 */
#ifndef SBX_STORE_INTERNAL_H
#define SBX_STORE_INTERNAL_H

#include <pthread.h>
#include <sqlite3.h>
#include <sys/types.h>

#include "fsm.h"
#include "store.h"

#define ST_MOD               "store"
#define ST_SCHEMA_VERSION    11
#define ST_GROUP_MAX_DEFAULT 4096 /* writes per group commit at most (bounds commit latency) */

/* ---- prepared statements ------------------------------------------------------------------
 * One table: X(name, SQLite text, PostgreSQL text).  Every statement is prepared on both
 * connections at open (the writer uses the write ones on its thread, reads use the read ones on
 * the loop thread) and finalized at close; the table files run them by id through db.c's
 * statement layer, whichever backend the store has.  ST_SAME: the PostgreSQL text is the SQLite
 * one with $N for each ?N and rid (the insertion-order column of the PostgreSQL tables, pg.c)
 * for rowid; a PostgreSQL text is written out only where the dialects differ.  A NULL SQLite
 * text is a statement of the PostgreSQL backend alone (blob chunks). */
#define ST_SAME NULL
#define ST_STMTS(X)                                                                                 \
  X(BEGIN, "BEGIN IMMEDIATE", "BEGIN")                                                              \
  X(COMMIT, "COMMIT", ST_SAME)                                                                      \
  X(ROLLBACK, "ROLLBACK", ST_SAME)                                                                  \
  X(SAVEPOINT, "SAVEPOINT w", ST_SAME)                                                              \
  X(RELEASE, "RELEASE w", ST_SAME)                                                                  \
  X(ROLLBACK_TO, "ROLLBACK TO w", ST_SAME)                                                          \
  X(PING, "SELECT 1", ST_SAME)                                                                      \
  X(CHAT_INSERT,                                                                                    \
    "INSERT INTO chats(id, token_hash, title, created_at, owner) VALUES(?1, ?2, ?3, ?4, ?5)",       \
    ST_SAME)                                                                                        \
  X(CHAT_SET_TITLE, "UPDATE chats SET title = ?2 WHERE id = ?1", ST_SAME)                           \
  X(CHAT_GET, "SELECT " ST_CHAT_COLS " FROM chats WHERE id = ?1", ST_SAME)                          \
  X(CHAT_EXISTS, "SELECT 1 FROM chats WHERE id = ?1", ST_SAME)                                      \
  X(CHAT_LIST,                                                                                      \
    "SELECT " ST_CHAT_COLS " FROM chats ORDER BY created_at DESC, rowid DESC LIMIT ?1", ST_SAME)    \
  /* a person's chats, newest first, on chats_owner (schema 11) */                                  \
  X(CHAT_LIST_OWNER,                                                                                \
    "SELECT " ST_CHAT_COLS " FROM chats WHERE owner = ?2 "                                          \
    "ORDER BY created_at DESC, rowid DESC LIMIT ?1",                                                \
    ST_SAME)                                                                                        \
  /* a chat deleted (chats.c): the blobs its files hold, then the chat (its files, turns, runs, \
   * run files, events and messages by cascade), then each blob no file references any more */  \
  X(CHAT_BLOBS,                                                                                     \
    "SELECT DISTINCT b.sha256, b.size FROM files f JOIN blobs b ON b.sha256 = f.sha256 "            \
    "WHERE f.chat_id = ?1",                                                                         \
    ST_SAME)                                                                                        \
  X(CHAT_DELETE, "DELETE FROM chats WHERE id = ?1", ST_SAME)                                        \
  X(BLOB_REFERENCED, "SELECT 1 FROM files WHERE sha256 = ?1 LIMIT 1", ST_SAME)                      \
  /* people and sessions (people.c, schema 11) */                                                   \
  X(PERSON_INSERT,                                                                                  \
    "INSERT INTO people(" ST_PERSON_COLS ") VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)", ST_SAME)   \
  X(PERSON_UPDATE,                                                                                  \
    "UPDATE people SET role = ?2, pw_hash = ?3, disabled = ?4, must_change_password = ?5, "         \
    "settings_json = ?6 WHERE id = ?1",                                                             \
    ST_SAME)                                                                                        \
  X(PERSON_SEEN, "UPDATE people SET last_seen_at = ?2 WHERE id = ?1", ST_SAME)                      \
  X(PERSON_GET, "SELECT " ST_PERSON_COLS " FROM people WHERE id = ?1", ST_SAME)                     \
  X(PERSON_BY_NAME, "SELECT " ST_PERSON_COLS " FROM people WHERE name = ?1", ST_SAME)               \
  X(PERSON_LIST, "SELECT " ST_PERSON_COLS " FROM people ORDER BY created_at, rowid", ST_SAME)       \
  X(PERSON_COUNT, "SELECT COUNT(*) FROM people", ST_SAME)                                           \
  X(SESSION_INSERT,                                                                                 \
    "INSERT INTO sessions(token_hash, person_id, created_at, last_used_at, ended_at) "              \
    "VALUES(?1, ?2, ?3, ?3, 0)",                                                                    \
    ST_SAME)                                                                                        \
  X(SESSION_GET,                                                                                    \
    "SELECT token_hash, person_id, created_at, last_used_at, ended_at FROM sessions "               \
    "WHERE token_hash = ?1",                                                                        \
    ST_SAME)                                                                                        \
  X(SESSION_TOUCH,                                                                                  \
    "UPDATE sessions SET last_used_at = ?2 WHERE token_hash = ?1 AND ended_at = 0", ST_SAME)        \
  X(SESSION_END,                                                                                    \
    "UPDATE sessions SET ended_at = ?2 WHERE token_hash = ?1 AND ended_at = 0", ST_SAME)            \
  /* every open session of a person but ?3 ('' : all of them) */                                    \
  X(SESSION_END_PERSON,                                                                             \
    "UPDATE sessions SET ended_at = ?2 WHERE person_id = ?1 AND ended_at = 0 "                      \
    "AND token_hash <> ?3",                                                                         \
    ST_SAME)                                                                                        \
  /* sessions ended, or unused, before ?1: nothing reads them any more */                           \
  X(SESSION_PURGE,                                                                                  \
    "DELETE FROM sessions WHERE (ended_at > 0 AND ended_at < ?1) OR last_used_at < ?1", ST_SAME)    \
  X(BLOB_EXISTS, "SELECT size FROM blobs WHERE sha256 = ?1", ST_SAME)                               \
  /* a blob row another node's transaction holds (or committed) already: no error, 0 rows */        \
  X(BLOB_INSERT, "INSERT INTO blobs(sha256, size, created_at) VALUES(?1, ?2, ?3)",                  \
    "INSERT INTO blobs(sha256, size, created_at) VALUES($1, $2, $3) "                               \
    "ON CONFLICT (sha256) DO NOTHING")                                                              \
  X(BLOB_TOTAL, "SELECT COALESCE(SUM(size), 0) FROM blobs", ST_SAME)                                \
  /* a blob's content in PostgreSQL (chunks.c): ST_CHUNK bytes a row, numbered from 0 */            \
  X(CHUNK_PUT, NULL, "INSERT INTO blob_chunks(sha256, n, data) VALUES($1, $2, $3)")                 \
  X(CHUNK_GET, NULL, "SELECT data FROM blob_chunks WHERE sha256 = $1 AND n = $2")                   \
  X(FILE_INSERT,                                                                                    \
    "INSERT INTO files(id, chat_id, name, version, source, sha256, size, mounted, "                 \
    "left_out_reason, text_of, run_id, kind, created_at, expires_at, dup_stem, "                    \
    "dup_ext, dup_n) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, "                    \
    "?13, ?14, ?15, ?16, ?17)",                                                                     \
    ST_SAME)                                                                                        \
  X(FILE_GET, "SELECT " ST_FILE_COLS " FROM files WHERE id = ?1", ST_SAME)                          \
  X(FILE_SAME_CONTENT,                                                                              \
    "SELECT " ST_FILE_COLS " FROM files f WHERE chat_id = ?1 AND "                                  \
    "dup_stem = ?2 AND dup_ext = ?3 AND sha256 = ?4 AND NOT EXISTS (SELECT 1 "                      \
    "FROM files g WHERE g.chat_id = f.chat_id AND g.name = f.name AND "                             \
    "g.version > f.version) ORDER BY (name = ?5) DESC, dup_n LIMIT 1",                              \
    ST_SAME)                                                                                        \
  /* EXISTS is an integer in SQLite, a boolean in PostgreSQL */                                     \
  X(FILE_DUP_MAX,                                                                                   \
    "SELECT COALESCE((SELECT MAX(dup_n) FROM files WHERE chat_id = ?1 AND "                         \
    "dup_stem = ?2 AND dup_ext = ?3), 0), EXISTS (SELECT 1 FROM files WHERE "                       \
    "chat_id = ?1 AND name = ?4)",                                                                  \
    "SELECT COALESCE((SELECT MAX(dup_n) FROM files WHERE chat_id = $1 AND dup_stem = $2 AND "       \
    "dup_ext = $3), 0), (EXISTS (SELECT 1 FROM files WHERE chat_id = $1 AND name = $4))::int")      \
  X(FILE_LATEST,                                                                                    \
    "SELECT " ST_FILE_COLS " FROM files WHERE chat_id = ?1 AND name = ?2 "                          \
    "ORDER BY version DESC LIMIT 1",                                                                \
    ST_SAME)                                                                                        \
  X(FILE_LIST_ALL, "SELECT " ST_FILE_COLS " FROM files WHERE chat_id = ?1 ORDER BY rowid",          \
    ST_SAME)                                                                                        \
  X(FILE_LIST_LATEST,                                                                               \
    "SELECT " ST_FILE_COLS " FROM files f WHERE chat_id = ?1 AND NOT EXISTS "                       \
    "(SELECT 1 FROM files g WHERE g.chat_id = f.chat_id AND g.name = f.name "                       \
    "AND g.version > f.version) ORDER BY rowid",                                                    \
    ST_SAME)                                                                                        \
  /* a chat's stored output bytes: the partial covering index files_output (schema 7) alone */      \
  X(CHAT_OUTPUT_BYTES,                                                                              \
    "SELECT COALESCE(SUM(size), 0) FROM files WHERE chat_id = ?1 AND "                              \
    "source = 3",                                                                                   \
    ST_SAME)                                                                                        \
  /* a chat's other files (attachment, knowledge, tool): what CHAT_ATTACHMENT_QUOTA_MB bounds */    \
  X(CHAT_ADDED_BYTES,                                                                               \
    "SELECT COALESCE(SUM(size), 0) FROM files WHERE chat_id = ?1 AND "                              \
    "source <> 3",                                                                                  \
    ST_SAME)                                                                                        \
  X(TURN_PUT,                                                                                       \
    "INSERT INTO turns(id, chat_id, state, answer, created_at, finished_at) "                       \
    "VALUES(?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT(id) DO UPDATE SET state = excluded.state, "         \
    "answer = excluded.answer, finished_at = excluded.finished_at",                                 \
    ST_SAME)                                                                                        \
  X(TURN_GET,                                                                                       \
    "SELECT id, chat_id, state, answer, created_at, finished_at FROM turns "                        \
    "WHERE id = ?1",                                                                                \
    ST_SAME)                                                                                        \
  X(MESSAGE_PUT,                                                                                    \
    "INSERT INTO messages(" ST_MESSAGE_COLS ") VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, "                 \
    "?8, ?9, ?10, ?11, ?12) ON CONFLICT(id) DO UPDATE SET state = excluded.state, "                 \
    "text = excluded.text, error_json = excluded.error_json, "                                      \
    "run_ids_json = excluded.run_ids_json, "                                                        \
    "calls_json = COALESCE(excluded.calls_json, messages.calls_json), "                             \
    "updated_at = excluded.updated_at, parts_json = excluded.parts_json",                           \
    ST_SAME)                                                                                        \
  X(MESSAGE_LIST,                                                                                   \
    "SELECT " ST_MESSAGE_COLS " FROM messages WHERE chat_id = ?1 ORDER BY rowid "                   \
    "LIMIT ?2",                                                                                     \
    ST_SAME)                                                                                        \
  /* a page of a chat's messages from a cursor (?3), calls_json only when ?4 is 1 */                \
  X(MESSAGE_NEWEST,                                                                                 \
    "SELECT " ST_MESSAGE_PAGE_COLS " FROM messages WHERE chat_id = ?1 ORDER BY rowid DESC "         \
    "LIMIT ?2",                                                                                     \
    ST_SAME)                                                                                        \
  X(MESSAGE_BEFORE,                                                                                 \
    "SELECT " ST_MESSAGE_PAGE_COLS " FROM messages WHERE chat_id = ?1 AND rowid < (SELECT rowid "   \
    "FROM messages WHERE id = ?3 AND chat_id = ?1) ORDER BY rowid DESC LIMIT ?2",                   \
    ST_SAME)                                                                                        \
  X(MESSAGE_AFTER,                                                                                  \
    "SELECT " ST_MESSAGE_PAGE_COLS " FROM messages WHERE chat_id = ?1 AND rowid > (SELECT rowid "   \
    "FROM messages WHERE id = ?3 AND chat_id = ?1) ORDER BY rowid LIMIT ?2",                        \
    ST_SAME)                                                                                        \
  X(MESSAGE_OF_CHAT, "SELECT 1 FROM messages WHERE id = ?1 AND chat_id = ?2", ST_SAME)              \
  X(MESSAGE_TURN_ANSWERED,                                                                          \
    "SELECT 1 FROM messages WHERE chat_id = ?1 AND turn_id = ?2 AND role = 'assistant'", ST_SAME)   \
  X(MESSAGE_INTERRUPT_TURNS,                                                                        \
    "UPDATE turns SET state = 1, finished_at = ?2, answer = (SELECT m.text FROM messages m "        \
    "WHERE m.turn_id = turns.id AND m.state = 'streaming' LIMIT 1) WHERE id IN "                    \
    "(SELECT turn_id FROM messages WHERE state = 'streaming')",                                     \
    ST_SAME)                                                                                        \
  X(MESSAGE_INTERRUPT,                                                                              \
    "UPDATE messages SET state = 'error', error_json = ?1, updated_at = ?2 "                        \
    "WHERE state = 'streaming'",                                                                    \
    ST_SAME)                                                                                        \
  /* the same for one chat (?3): a node taking the chat over (nodes) */                             \
  X(MESSAGE_INTERRUPT_TURNS_CHAT,                                                                   \
    "UPDATE turns SET state = 1, finished_at = ?2, answer = (SELECT m.text FROM messages m "        \
    "WHERE m.turn_id = turns.id AND m.state = 'streaming' LIMIT 1) WHERE id IN "                    \
    "(SELECT turn_id FROM messages WHERE state = 'streaming' AND chat_id = ?3)",                    \
    ST_SAME)                                                                                        \
  X(MESSAGE_INTERRUPT_CHAT,                                                                         \
    "UPDATE messages SET state = 'error', error_json = ?1, updated_at = ?2 "                        \
    "WHERE state = 'streaming' AND chat_id = ?3",                                                   \
    ST_SAME)                                                                                        \
  /* a run put (runs.c): RUN_UPDATE first (the run exists: only the columns a run changes after \
   * creation, none of them in an index but runs_unfinished's state, so no chat-keyed index page \
   * is rewritten), RUN_INSERT when it changed nothing.  An existing id fails the SQLite insert \
   * (a constraint) and inserts no row in PostgreSQL (DO NOTHING: a failed statement would abort \
   * the transaction, and runs.c asks which chat holds the id next); runs.c treats both alike. \
   * PostgreSQL types ?22 by its first use, so it is cast. */   \
  X(RUN_INSERT,                                                                                     \
    "INSERT INTO runs(" ST_RUN_COLS ") VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, "                 \
    "?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, CASE WHEN ?22 > 0 "                \
    "THEN ?22 ELSE (SELECT COALESCE(MAX(seq), 0) + 1 FROM runs WHERE chat_id = ?2) "                \
    "END, ?23, ?24, ?25, ?26, ?27)",                                                                \
    "INSERT INTO runs(" ST_RUN_COLS ") VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, "  \
    "$13, $14, $15, $16, $17, $18, $19, $20, $21, CASE WHEN $22::bigint > 0 THEN $22::bigint "      \
    "ELSE (SELECT COALESCE(MAX(seq), 0) + 1 FROM runs WHERE chat_id = $2) END, $23, $24, $25, "     \
    "$26, $27) "                                                                                    \
    "ON CONFLICT (id) DO NOTHING")                                                                  \
  X(RUN_UPDATE,                                                                                     \
    "UPDATE runs SET turn_id = ?3, code = ?4, origin = ?5, state = ?6, status = ?7, "               \
    "timeout_s = ?8, attempts = ?9, stdout_text = ?10, stderr_text = ?11, "                         \
    "stdout_truncated = ?12, stderr_truncated = ?13, error_json = ?14, notes_json = "               \
    "?15, remounted_json = ?16, restarted = ?17, files_unlisted = ?18, "                            \
    "figures_dropped = ?19, result_hash = ?20, started_at = ?24, finished_at = ?25, "               \
    "value_json = ?26, displays_json = ?27 WHERE id = ?1 AND chat_id = ?2",                         \
    ST_SAME)                                                                                        \
  X(RUN_CHAT_OF, "SELECT chat_id FROM runs WHERE id = ?1", ST_SAME)                                 \
  X(RUN_GET, "SELECT " ST_RUN_COLS " FROM runs WHERE id = ?1", ST_SAME)                             \
  X(RUN_BY_IDEM, "SELECT id FROM runs WHERE chat_id = ?1 AND idempotency_key = ?2", ST_SAME)        \
  X(RUN_UNFINISHED,                                                                                 \
    "SELECT " ST_RUN_COLS " FROM runs WHERE state <> 'done' "                                       \
    "ORDER BY created_at, rowid",                                                                   \
    ST_SAME)                                                                                        \
  /* newest first by insertion (a run's row is inserted when it is created): a reverse rowid \
   * scan that stops after ?1 rows (ORDER BY created_at would sort all runs of all chats) */      \
  X(RUN_LIST_ALL, "SELECT " ST_RUN_COLS " FROM runs ORDER BY rowid DESC LIMIT ?1", ST_SAME)         \
  /* seq is a chat's creation order: runs_chat_seq serves the list */                               \
  X(RUN_LIST_CHAT,                                                                                  \
    "SELECT " ST_RUN_COLS " FROM runs WHERE chat_id = ?2 "                                          \
    "ORDER BY seq DESC, rowid DESC LIMIT ?1",                                                       \
    ST_SAME)                                                                                        \
  X(RUN_FILE_PUT,                                                                                   \
    "INSERT INTO run_files(run_id, position, file_id) VALUES(?1, ?2, ?3) "                          \
    "ON CONFLICT(run_id, position) DO UPDATE SET file_id = excluded.file_id",                       \
    ST_SAME)                                                                                        \
  X(RUN_FILES,                                                                                      \
    "SELECT " ST_FILE_COLS_F " FROM run_files r JOIN files f ON f.id = r.file_id "                  \
    "WHERE r.run_id = ?1 ORDER BY r.position",                                                      \
    ST_SAME)                                                                                        \
  X(FILE_EXISTS, "SELECT 1 FROM files WHERE id = ?1", ST_SAME)                                      \
  X(EVENT_APPEND,                                                                                   \
    "INSERT INTO events(chat_id, seq, type, payload, created_at) "                                  \
    "VALUES(?1, ?2, ?3, ?4, ?5)",                                                                   \
    ST_SAME)                                                                                        \
  X(EVENT_LAST, "SELECT COALESCE(MAX(seq), 0) FROM events WHERE chat_id = ?1", ST_SAME)             \
  X(EVENT_SINCE,                                                                                    \
    "SELECT seq, type, payload FROM events WHERE chat_id = ?1 AND seq > ?2 "                        \
    "ORDER BY seq LIMIT ?3",                                                                        \
    ST_SAME)                                                                                        \
  /* trimming (events.c): chats in key order, then per chat its oldest event, newest seq, the \
   * keep-th newest seq and the old prefix below it, all on the events_chat_seq index */     \
  X(EVENT_NEXT_CHAT, "SELECT chat_id FROM events WHERE chat_id > ?1 ORDER BY chat_id LIMIT 1",      \
    ST_SAME)                                                                                        \
  X(EVENT_SPAN,                                                                                     \
    "SELECT e.seq, e.created_at, (SELECT seq FROM events WHERE chat_id = ?1 "                       \
    "ORDER BY seq DESC LIMIT 1) FROM events e WHERE e.chat_id = ?1 "                                \
    "ORDER BY e.seq LIMIT 1",                                                                       \
    ST_SAME)                                                                                        \
  X(EVENT_KTH_NEWEST,                                                                               \
    "SELECT seq FROM events WHERE chat_id = ?1 ORDER BY seq DESC "                                  \
    "LIMIT 1 OFFSET ?2",                                                                            \
    ST_SAME)                                                                                        \
  X(EVENT_OLD_PREFIX,                                                                               \
    "SELECT seq, created_at FROM events WHERE chat_id = ?1 AND seq < ?2 "                           \
    "ORDER BY seq LIMIT ?3",                                                                        \
    ST_SAME)                                                                                        \
  X(EVENT_DELETE_UPTO, "DELETE FROM events WHERE chat_id = ?1 AND seq <= ?2", ST_SAME)              \
  X(SETTING_PUT,                                                                                    \
    "INSERT INTO settings(key, value) VALUES(?1, ?2) "                                              \
    "ON CONFLICT(key) DO UPDATE SET value = excluded.value",                                        \
    ST_SAME)                                                                                        \
  X(SETTING_GET, "SELECT value FROM settings WHERE key = ?1", ST_SAME)                              \
  /* a chat's unfinished runs (a node taking the chat over), in creation order */                   \
  X(RUN_UNFINISHED_CHAT,                                                                            \
    "SELECT " ST_RUN_COLS " FROM runs WHERE chat_id = ?1 AND state <> 'done' ORDER BY seq",         \
    ST_SAME)                                                                                        \
  /* nodes (nodes.c, PostgreSQL only): a lease taken when free, expired or already this node's,   \
   * in one statement, its epoch logged; who holds it otherwise; renewed, released */ \
  X(LEASE_TAKE, NULL, ST_LEASE_TAKE_SQL)                                                            \
  X(LEASE_OWNER, NULL,                                                                              \
    "SELECT node_id, node_url, GREATEST(0, (EXTRACT(EPOCH FROM expires_at - clock_timestamp()) "    \
    "* 1000)::bigint), epoch FROM chat_leases WHERE chat_id = $1")                                  \
  X(LEASE_RENEW, NULL,                                                                              \
    "WITH r AS (UPDATE chat_leases SET expires_at = clock_timestamp() + $2::bigint * "              \
    "interval '1 millisecond' WHERE node_id = $1 RETURNING chat_id, epoch, expires_at), "           \
    "l AS (UPDATE lease_log g SET until_at = r.expires_at FROM r WHERE g.chat_id = r.chat_id "      \
    "AND g.epoch = r.epoch) SELECT count(*) FROM r")                                                \
  X(LEASE_RELEASE, NULL,                                                                            \
    "WITH r AS (UPDATE chat_leases SET expires_at = clock_timestamp() WHERE node_id = $1 AND "      \
    "chat_id = $2 RETURNING chat_id, epoch, expires_at) UPDATE lease_log g SET until_at = "         \
    "r.expires_at FROM r WHERE g.chat_id = r.chat_id AND g.epoch = r.epoch")                        \
  X(LEASE_RELEASE_ALL, NULL,                                                                        \
    "WITH r AS (UPDATE chat_leases SET expires_at = clock_timestamp() WHERE node_id = $1 AND "      \
    "expires_at > clock_timestamp() RETURNING chat_id, epoch, expires_at) UPDATE lease_log g "      \
    "SET until_at = r.expires_at FROM r WHERE g.chat_id = r.chat_id AND g.epoch = r.epoch")         \
  X(NOTIFY, NULL, "SELECT pg_notify('cerea', $1)")                                                  \
  /* the writer's fence: the lease still this node's at that epoch, locked until the commit */      \
  X(LEASE_FENCE, NULL,                                                                              \
    "SELECT 1 FROM chat_leases WHERE chat_id = $1 AND node_id = $2 AND epoch = $3 FOR SHARE")       \
  X(SWEEP_EXPIRED,                                                                                  \
    "SELECT id FROM files WHERE expires_at > 0 AND expires_at <= ?1 "                               \
    "ORDER BY expires_at LIMIT ?2",                                                                 \
    ST_SAME)                                                                                        \
  X(FILE_DELETE, "DELETE FROM files WHERE id = ?1", ST_SAME)                                        \
  X(SWEEP_UNREFERENCED,                                                                             \
    "SELECT sha256, size FROM blobs b WHERE NOT EXISTS (SELECT 1 FROM files "                       \
    "f WHERE f.sha256 = b.sha256) LIMIT ?1",                                                        \
    ST_SAME)                                                                                        \
  /* in PostgreSQL the blob's chunks go with it (ON DELETE CASCADE) */                              \
  X(BLOB_DELETE, "DELETE FROM blobs WHERE sha256 = ?1", ST_SAME)                                    \
  /* PostgreSQL types ?1 by its first use (an integer): cast */                                     \
  X(RETENTION_APPLY,                                                                                \
    "UPDATE files SET expires_at = CASE WHEN ?1 > 0 THEN created_at + ?1 "                          \
    "ELSE 0 END",                                                                                   \
    "UPDATE files SET expires_at = CASE WHEN $1::bigint > 0 THEN created_at + $1::bigint "          \
    "ELSE 0 END")

/* The lease's epoch goes up by one when another node takes it; the log keeps one row per epoch
 * (taken at, held until), the renewals moving its end. */
#define ST_LEASE_TAKE_SQL                                                                          \
  "WITH t AS (INSERT INTO chat_leases(chat_id, node_id, node_url, epoch, expires_at) "             \
  "VALUES($1, $2, $3, 1, clock_timestamp() + $4::bigint * interval '1 millisecond') "              \
  "ON CONFLICT (chat_id) DO UPDATE SET node_id = EXCLUDED.node_id, node_url = EXCLUDED.node_url, " \
  "epoch = chat_leases.epoch + (chat_leases.node_id <> EXCLUDED.node_id "                          \
  "OR chat_leases.expires_at < clock_timestamp())::int, expires_at = EXCLUDED.expires_at "         \
  "WHERE chat_leases.node_id = EXCLUDED.node_id OR chat_leases.expires_at < clock_timestamp() "    \
  "RETURNING chat_id, node_id, epoch, expires_at), "                                               \
  "l AS (INSERT INTO lease_log(chat_id, epoch, node_id, taken_at, until_at) "                      \
  "SELECT chat_id, epoch, node_id, clock_timestamp(), expires_at FROM t "                          \
  "ON CONFLICT (chat_id, epoch) DO UPDATE SET until_at = EXCLUDED.until_at) SELECT epoch FROM t"

#define ST_CHAT_COLS "id, token_hash, title, created_at, owner"
#define ST_PERSON_COLS                                                                             \
  "id, name, role, pw_hash, disabled, must_change_password, created_at, last_seen_at, "            \
  "settings_json"
#define ST_FILE_COLS                                                                               \
  "id, chat_id, name, version, source, sha256, size, mounted, left_out_reason, text_of, run_id, "  \
  "kind, created_at, expires_at"
#define ST_FILE_COLS_F                                                                             \
  "f.id, f.chat_id, f.name, f.version, f.source, f.sha256, f.size, f.mounted, f.left_out_reason, " \
  "f.text_of, f.run_id, f.kind, f.created_at, f.expires_at"
#define ST_RUN_COLS                                                                                \
  "id, chat_id, turn_id, code, origin, state, status, timeout_s, attempts, stdout_text, "          \
  "stderr_text, stdout_truncated, stderr_truncated, error_json, notes_json, remounted_json, "      \
  "restarted, files_unlisted, figures_dropped, result_hash, idempotency_key, seq, created_at, "    \
  "started_at, finished_at, value_json, displays_json"
#define ST_MESSAGE_COLS                                                                            \
  "id, chat_id, turn_id, role, state, text, error_json, run_ids_json, calls_json, created_at, "    \
  "updated_at, parts_json"
#define ST_MESSAGE_PAGE_COLS                                                                       \
  "id, chat_id, turn_id, role, state, text, error_json, run_ids_json, "                            \
  "CASE WHEN ?4 = 1 THEN calls_json END, created_at, updated_at, parts_json"

enum st_stmt_id {
#define ST_STMT_ENUM(name, sql, pg) ST_##name,
  ST_STMTS(ST_STMT_ENUM)
#undef ST_STMT_ENUM
      ST_STMT_COUNT
};

/* ---- writes -------------------------------------------------------------------------------
 * Every write is a struct st_write embedded first in an op struct holding its copied inputs.
 *   exec         writer thread, inside the group's transaction and the write's own savepoint;
 *                returns 0 or an SBX_* code (with err filled); a failure rolls back this write only
 *   after_commit writer thread, only when the group committed (e.g. unlink swept blob files)
 *   done         loop thread, after the commit (or the failure): calls the user's callback
 *   release      loop thread: frees the op */
struct st_write;
/* A blob file written by a write of the open group, not yet durable: its temp file is fsynced
 * and renamed to its final name just before the group's COMMIT (blobs.c). */
struct st_blob_pending {
  int fd;
  char *tmp, *final;
  int renamed;
};
typedef int (*st_exec_fn)(struct store *st, struct st_write *w, struct sbx_error *err);
typedef void (*st_op_fn)(struct store *st, struct st_write *w);

struct st_write {
  struct sbx_list link;
  st_exec_fn exec;
  st_op_fn after_commit; /* may be NULL */
  st_op_fn done;
  st_op_fn release;
  int rc;
  struct sbx_error err;
  int64_t blob_delta; /* bytes added to (or removed from) the blob store once committed */
  struct st_blob_pending *pending; /* blob files this write made (writer thread) */
  size_t npending;
  /* several nodes: the chat whose lease this write needs (st__submit_fenced); "" none.  The
   * writer checks, in the write's own savepoint, that this node still holds that lease at the
   * epoch it took (nodes.c); a write whose fence fails is refused with SBX_EFENCED. */
  store_id fence;
  int fence_counted; /* counted in its fence's pending (until the writer is done with it) */
};

/* A lease this node holds, as the writer's fence knows it (nodes.c). */
struct st_fence {
  store_id chat;
  int64_t epoch;
  size_t pending; /* fenced writes submitted and not yet through the writer */
  int released;   /* let go: forgotten once nothing is pending (a write queued before the release
                     still commits when no node took the lease since) */
};

/* Thin ops with a plain store_done_cb: one allocation, inputs copied into `strs`. */
struct st_simple {
  struct st_write w;
  store_done_cb cb;
  void *ud;
  int64_t i[8];
  char *s[10];
};

/* The writer thread's state, one per store; writer.c's set_state alone writes it (writer thread,
 * under store.mu), through common/fsm.h.
 *
 *    start ──▶ WAITING ──(queue non-empty)──▶ COMMITTING ──(group handed off)──▶ WAITING
 *                 │                              │
 *                 │                              └──(handed off, a checkpoint due)──▶ CHECKPOINTING
 *                 │                                           CHECKPOINTING ──(it ran)──▶ WAITING
 *                 └──(stopping and queue empty)──▶ STOPPED (thread exits; store_close joins)
 *
 *   transition                  performed by (writer.c)
 *   start -> WAITING            writer_main, on entry
 *   WAITING -> COMMITTING       writer_main, after taking a group off the queue
 *   COMMITTING -> WAITING       writer_main, after the group's completions are handed to the loop
 *   COMMITTING -> CHECKPOINTING writer_main, the same, when st__ckpt_writer_due names a checkpoint
 *   CHECKPOINTING -> WAITING    writer_main, after st__ckpt_writer_run (checkpoint.c)
 *   WAITING -> STOPPED          writer_main, when `stopping` (store_close's request) is set and
 *                               nothing is queued
 * So WAITING with an empty queue means nothing of the writer runs (tests wait for it). */
enum st_writer_state {
  ST_WS_START = 0,
  ST_WS_WAITING,
  ST_WS_COMMITTING,
  ST_WS_CHECKPOINTING,
  ST_WS_STOPPED
};

/* Checkpoints (checkpoint.c: why, and the thresholds' roles).  Frames are WAL pages (4 KiB). */
#define ST_CKPT_WAKE_FRAMES   4096  /* 16 MiB of WAL: the checkpointer starts copying */
#define ST_CKPT_STEP_FRAMES   1024  /* another pass when this many more frames were committed */
#define ST_CKPT_FINISH_FRAMES 1024  /* the writer copies a remainder this small itself */
#define ST_CKPT_HARD_FRAMES   16384 /* 64 MiB: the writer runs a blocking checkpoint */

/* The checkpointer's state, one per store, which is also the state of the one checkpoint lock:
 * who may checkpoint now.  checkpoint.c's set_state alone writes it (either thread, under
 * store.ckpt_mu), through common/fsm.h.
 *
 *    start ──▶ IDLE ──(want_pass(): enough new frames, not backing off)──▶ CHECKPOINTING
 *              │  ▲                                                              │
 *              │  └───────────────────────────(pass done)────────────────────────┘
 *              │  ▲
 *              │  └──(its checkpoint done)── WRITER ◀──(the writer checkpoints)── IDLE
 *              └──(stopping)──▶ STOPPED (thread exits; st__ckpt_stop joins)
 *
 *   transition                performed by (checkpoint.c)
 *   start -> IDLE             ckpt_main, on entry
 *   IDLE -> CHECKPOINTING     ckpt_main, when want_pass() holds
 *   CHECKPOINTING -> IDLE     ckpt_main, after the pass's result is recorded
 *   IDLE -> WRITER            st__ckpt_writer_run (writer thread), before its checkpoint
 *   WRITER -> IDLE            st__ckpt_writer_run, after its result is recorded
 *   IDLE -> STOPPED           ckpt_main, when `ckpt_stopping` is set (after the writer stopped)
 * Backing off (st_ckpt.tried_failed: no passive checkpoint for STEP frames after a failure) is a
 * condition of IDLE -> CHECKPOINTING and of the writer's finishing step, not a state: it is about
 * the WAL's history, and both threads obey it. */
enum st_ckpt_state {
  ST_CS_START = 0,
  ST_CS_IDLE,
  ST_CS_CHECKPOINTING,
  ST_CS_WRITER,
  ST_CS_STOPPED
};

/* What the WAL hook saw and what the checkpoints did; guarded by store.ckpt_mu. */
struct st_ckpt {
  int frames;         /* WAL frames after the last commit (the WAL hook) */
  uint64_t gen;       /* WAL generation: +1 each time the WAL restarted from its beginning */
  uint64_t done_gen;  /* generation of `done` */
  int done;           /* frames copied into the database by the last checkpoint of done_gen */
  uint64_t tried_gen; /* the last checkpoint (either thread) began at (tried_gen, tried_frames) */
  int tried_frames;
  int tried_failed;  /* it failed: passive ones wait STEP frames (one warning per STEP) */
  uint64_t hard_gen; /* the writer's last blocking checkpoint: generation and the frame */
  int hard_next;     /* count from which it may run another */
  /* counters (tests, bench) */
  uint64_t passes;        /* checkpointer passes (PASSIVE, its own connection) */
  uint64_t writer_passes; /* checkpoints run by the writer between groups (finish or blocking) */
  uint64_t blocking;      /* blocking ones tried (TRUNCATE, past the hard bound) */
  uint64_t complete;      /* checkpoints that copied every frame the pass saw */
  uint64_t errors;
  uint64_t max_frames; /* largest WAL seen after a commit, in frames */
};

/* The store's own life, one per store; open.c's set_life alone writes it (loop thread), through
 * common/fsm.h.
 *
 *    store_open ──▶ OPENING ──(directory, connections, schema, threads up)──▶ OPEN
 *                      │                                                      │
 *                      └──(a step failed: freed)                     (store_close)
 *                                                                             ▼
 *                                                     freed ◀──(drained)── CLOSING
 *
 *   transition          performed by (open.c)
 *   -> OPENING          store_open, on entry
 *   OPENING -> OPEN     store_open, when every step succeeded
 *   OPEN -> CLOSING     store_close, before it drains the writer: from then on a write is refused
 *                       (SBX_ECLOSED, st__submit) and so is a new stage */
enum st_life { ST_LIFE_OPENING = 0, ST_LIFE_OPEN, ST_LIFE_CLOSING };

/* Whether the store's writes succeed (health.c), one per store; health.c's set_state alone writes
 * it (under store.mu), through common/fsm.h.
 *
 *    OK ──(a write failed for a reason of the store)──▶ FAILING ──(a write was stored)──▶ OK
 *
 *   transition      performed by (health.c)
 *   OK -> FAILING   st__health_note_held: the writer after a group (writer.c), or a staged
 *                   upload's write that failed (stage.c, through st__health_note)
 *   FAILING -> OK   st__health_note_held: a write the writer committed */
enum st_health_state { ST_HEALTH_OK = 0, ST_HEALTH_FAILING };
struct st_health {
  enum st_health_state state;
  uint64_t consecutive;                             /* failed writes since the last stored one */
  uint64_t failures;                                /* since open */
  int64_t failing_since, last_error_at, last_ok_at; /* wall ms; 0: not yet */
  struct sbx_error last_error;                      /* code 0: none since open */
};

/* ---- connections and statements (db.c: the layer; pg.c: its PostgreSQL side) ----------------
 * A connection of the store (the writer's, the reader's) with every statement of ST_STMTS
 * prepared on it.  The table files hold no SQLite or libpq handle: they run statements by id
 * (st__q), bind, step and read columns through db.c, which calls SQLite or pg.c. */
enum st_kind { ST_SQLITE = 0, ST_PG };
struct st_pgconn; /* pg.c */
struct st_pgq;    /* pg.c: one prepared statement's parameters and result */
struct st_db;
struct st_stmt {
  struct st_db *db;
  enum st_stmt_id id;
  sqlite3_stmt *lite; /* ST_SQLITE */
  struct st_pgq *pg;  /* ST_PG */
};
struct st_db {
  enum st_kind kind;
  const char *role;     /* "writer", "reader": for messages */
  sqlite3 *lite;        /* ST_SQLITE */
  struct st_pgconn *pg; /* ST_PG */
  struct st_stmt q[ST_STMT_COUNT];
};

struct store {
  uv_loop_t *loop;
  char *dir, *db_path, *blob_dir;
  enum st_kind kind;
  char *db_url;      /* ST_PG: the database URL as given (owned; never logged: it may hold a
                     * password; st->db_name is what messages name) */
  char *db_name;     /* what messages call the database: the SQLite path, or user@host:port/db */
  struct st_db w, r; /* the writer's connection (writer thread), the reader's (loop thread) */
  struct st_db l;    /* ST_PG: the lease connection (nodes.c; loop thread, autocommit) */
  struct st_listen *listen; /* ST_PG: the listen connection, once store_listen was called */
  sqlite3 *cdb;             /* ST_SQLITE: the checkpointer's connection (checkpoint.c) */
  int schema_version;

  /* writer thread */
  pthread_t thread;
  int thread_started;
  pthread_mutex_t mu; /* guards queue, done, stopping, stats, health, group_max */
  pthread_cond_t cv;
  struct sbx_list queue;       /* submitted, not yet taken */
  struct sbx_list done;        /* finished, callbacks not yet run */
  int stopping;                /* store_close's request to the writer: drain, then stop */
  enum st_writer_state wstate; /* written by set_state in writer.c only */
  size_t group_max;
  struct store_stats stats;
  struct st_health health; /* under mu (health.c) */
  /* several nodes (nodes.c): the leases this node holds, sorted by chat, and its id ("" until it
   * took one: then every write of a chat is fenced); under mu.  on_fenced: loop thread. */
  struct st_fence *fences;
  size_t nfences, capfences;
  store_id fence_node;
  store_fenced_cb on_fenced;
  void *on_fenced_ud;
  uv_async_t *async; /* freed in its close callback */
  size_t inflight;   /* loop thread only: submitted, callback not yet run */
  /* loop thread only: the writes submitted in this turn of the loop, handed to the writer
   * together by an idle handle (writer.c) so that what one event asked for commits as one group */
  struct sbx_list corked;
  uv_idle_t *cork; /* freed in its close callback */
  enum st_life life; /* loop thread only: written by set_life in open.c */
  int lock_fd;       /* DATA/cerea.lock, flock'ed: one process per data directory */
  /* Files generation (store_files_generation): bumped by the writer thread after every commit or
   * rollback of a transaction in which a write touched the files table (files_dirty, writer thread
   * only, set by those writes' exec).  Read from the loop thread with __atomic loads. */
  uint64_t files_gen;
  int files_dirty;
  /* writer thread only: blob directories whose entries must be fsynced before the commit */
  unsigned char dirty_sub[256];
  int dirty_top;
  uint64_t tmp_seq;
  /* writer thread only: store_event_trim's round robin, the last chat it finished ("" = start;
   * chat ids fit a store_id: store_chat.id is one) */
  store_id trim_cursor;

  /* checkpointer thread (checkpoint.c) */
  pthread_t ckpt_thread;
  int ckpt_started;
  pthread_mutex_t ckpt_mu;     /* guards ckpt, cstate, ckpt_stopping */
  pthread_cond_t ckpt_cv;      /* wakes the checkpointer */
  pthread_cond_t ckpt_idle_cv; /* a pass ended (the writer waits for it at the hard bound) */
  int ckpt_stopping;           /* st__ckpt_stop's request to the checkpointer */
  enum st_ckpt_state cstate;   /* written by set_state in checkpoint.c only (either thread) */
  struct st_ckpt ckpt;
};

/* db.c: the statement layer.  Statement ids name ST_STMTS; a statement's parameters are
 * numbered from 1 and borrowed until its reset; its columns from 0, valid until the next step or
 * reset.  Errors carry the backend's message in err (may be NULL). */
#define ST_ROW  1 /* st__step: a row is there to read */
#define ST_DONE 0 /* st__step: no (more) rows */
static inline struct st_stmt *st__q(struct st_db *db, enum st_stmt_id id) { return &db->q[id]; }
void st__bind_text(struct st_stmt *s, int i, const char *v); /* NULL binds NULL */
void st__bind_int64(struct st_stmt *s, int i, int64_t v);
void st__bind_blob(struct st_stmt *s, int i, const void *p, size_t n); /* bytes, sent as they are */
/* ST_ROW, ST_DONE or a negative SBX_* code (the statement must then be reset). */
int st__step(struct st_stmt *s, const char *what, struct sbx_error *err);
void st__reset(struct st_stmt *s); /* also clears the bindings (every parameter NULL) */
/* Every row of s, each made by from_row into an array of elem-byte items (*out, *n; NULL, 0 for
 * none); s is reset.  On a failure what was made is freed with free_list and the error returned. */
int st__rows(struct st_stmt *s, const char *what, size_t elem,
             int (*from_row)(struct st_stmt *s, void *item), void (*free_list)(void *v, size_t n),
             void **out, size_t *n);
/* Steps a statement expecting no row (or ignoring it); resets it. 0 or an error. */
int st__step_done(struct st_stmt *s, const char *what, struct sbx_error *err);
/* Steps and resets: 1 when a row came, 0 when none, or an error. */
int st__step_one(struct st_stmt *s, const char *what, struct sbx_error *err);
/* Writer thread: does statement id (its one parameter: key) find a row?  0 when it does,
 * SBX_ENOENT "no <what> <key>" when not, or the error. */
int st__known(struct store *st, enum st_stmt_id id, const char *key, const char *what,
              struct sbx_error *err);
/* Steps a statement whose one row holds one integer, into *out; resets it.  No row is an error
 * (SBX_EDB). */
int st__step_int64(struct st_stmt *s, const char *what, int64_t *out, struct sbx_error *err);
/* Columns of the current row: text (NULL for SQL NULL), its length in bytes, an integer (0 for
 * NULL), a blob (NULL and 0 for NULL). */
const char *st__col_text(struct st_stmt *s, int i);
size_t st__col_len(struct st_stmt *s, int i);
int64_t st__col_int64(struct st_stmt *s, int i);
int st__col_int(struct st_stmt *s, int i);
const void *st__col_blob(struct st_stmt *s, int i, size_t *n);
char *st__col_dup(struct st_stmt *s, int i, int *oom); /* NULL for SQL NULL */
void st__col_id(struct st_stmt *s, int i, store_id out);
void st__col_hex(struct st_stmt *s, int i, char out[65]);
int64_t st__changes(struct st_db *db); /* rows the last INSERT / UPDATE / DELETE changed */
int st__in_txn(struct st_db *db);      /* 1 while a transaction is open on it */
/* Before the writer's BEGIN: a connection that was lost is opened again (PostgreSQL; at most
 * every ST_PG_RETRY_MS).  0 or SBX_EIO. */
int st__db_ready(struct st_db *db, struct sbx_error *err);
/* Raw SQL, one or several statements, no parameters (migrations, pragmas, tests). */
int st__db_exec(struct st_db *db, const char *sql, struct sbx_error *err);
/* Raw SQL whose first row's first column is an integer, into *out (tests, the schema version).
 * No row is SBX_ENOENT. */
int st__db_int(struct st_db *db, const char *sql, int64_t *out, struct sbx_error *err);
/* Prepares every statement of ST_STMTS of the connection's backend on db; st__db_close
 * finalizes them and closes the connection (both safe on a zeroed st_db). */
int st__db_prepare(struct st_db *db, struct sbx_error *err);
void st__db_close(struct st_db *db);
/* stmts.c: the statement table, and the migration step below */
extern const char *const st__stmt_names[ST_STMT_COUNT];
extern const char *const st__stmt_sqlite[ST_STMT_COUNT];
extern const char *const st__stmt_pg[ST_STMT_COUNT]; /* NULL: ST_SAME (pg.c derives it) */

/* Raw SQL on a connection of either backend (st__exec's and st__pg_exec's shape). */
typedef int (*st_sql_fn)(void *conn, const char *sql, struct sbx_error *err);
/* One migration step, in its own transaction: begin, the step's SQL, set_version (what records
 * version v), COMMIT; on any failure ROLLBACK, and err says "migration to schema version v
 * failed: ...".  Both backends' migrations run their steps through it. */
int st__migrate_step(st_sql_fn exec, void *conn, const char *begin, const char *sql,
                     const char *set_version, int v, struct sbx_error *err);

/* db.c: SQLite */
int st__translate(sqlite3 *db, int rc, const char *what, struct sbx_error *err);
int st__exec(sqlite3 *db, const char *sql, struct sbx_error *err);
int st__migrate(sqlite3 *db, int target, struct sbx_error *err);
int st__user_version(sqlite3 *db, int *out, struct sbx_error *err);
int st__open_conn(const char *path, sqlite3 **out, struct sbx_error *err);

/* nodes.c */
struct st_listen;
void st__listen_close(struct store *st); /* store_close: the listen connection and its handles */

/* pg.c: PostgreSQL over libpq (the parts db.c dispatches to, and the store's open) */
#define ST_PG_SCHEMA_VERSION 6
#define ST_PG_RETRY_MS       1000 /* a lost connection is tried again at most this often */
/* Writes per group at most with PostgreSQL: each write's savepoint is a subtransaction, and past
 * 64 of them a transaction overflows the server's per-session cache of them (PGPROC's subxids),
 * after which every other session's snapshot must look its subtransactions up on disk.  A COMMIT
 * per 64 writes costs little: a write is a round trip or more, a commit one WAL flush. */
#define ST_PG_GROUP_MAX 64
/* Connects db to url for `role` (its session: UTF-8, synchronous_commit on, ...), a clear
 * one-line error otherwise (name: what the message calls the database). */
int st__pg_connect(struct st_db *db, const char *url, const char *name, struct sbx_error *err);
/* A bare connection (no statements, no session settings) into *out, the caller's (PQfinish): the
 * listen connection.  Errors as st__pg_connect's. */
struct pg_conn;
int st__pg_connect_raw(const char *url, const char *name, struct pg_conn **out,
                       struct sbx_error *err);
int st__pg_migrate(struct st_db *db, int target, struct sbx_error *err);
int st__pg_version(struct st_db *db, int *out, struct sbx_error *err);
/* "user@host:port/dbname" of a URL, without its password, into *out (owned).  SBX_EINVAL: not a
 * URL libpq reads (libpq's reason in err); SBX_ENOMEM. */
int st__pg_name(const char *url, char **out, struct sbx_error *err);
/* The SBX_* code of an SQLSTATE (the five characters of a PostgreSQL error). */
int st__pg_code(const char *sqlstate);
int st__pg_prepare(struct st_db *db, struct sbx_error *err);
void st__pg_close(struct st_db *db);
void st__pg_bind(struct st_stmt *s, int i, const char *v, size_t len, int binary);
void st__pg_bind_int64(struct st_stmt *s, int i, int64_t v);
int st__pg_step(struct st_stmt *s, const char *what, struct sbx_error *err);
void st__pg_reset(struct st_stmt *s);
const char *st__pg_col(struct st_stmt *s, int i, size_t *len);
int64_t st__pg_changes(struct st_db *db);
int st__pg_in_txn(struct st_db *db);
int st__pg_ready(struct st_db *db, struct sbx_error *err);
/* The writer's session as fencing needs it (pg.c's session notes), once per session. */
int st__pg_fence_session(struct st_db *db, struct sbx_error *err);
int st__pg_exec(struct st_db *db, const char *sql, struct sbx_error *err);
int st__pg_int(struct st_db *db, const char *sql, int64_t *out, struct sbx_error *err);

/* writer.c */
int st__writer_start(struct store *st, struct sbx_error *err);
void st__writer_stop(struct store *st); /* drains, joins, runs every pending callback */
int st__submit(struct store *st, struct st_write *w); /* corked until the loop goes idle */
/* The corked writes handed to the writer now (the idle handle does it; tests that wait on the
 * writer thread without running the loop call it). */
void st__uncork(struct store *st);
/* A new write's hooks (after_commit may be NULL) and its link, ready to submit. */
void st__write_init(struct st_write *w, st_exec_fn exec, st_op_fn after_commit, st_op_fn done,
                    st_op_fn release);
struct st_simple *st__simple_new(st_exec_fn exec, store_done_cb cb, void *ud);
/* st__submit for a write that belongs to chat_id (NULL: to none): fenced by its lease. */
int st__submit_fenced(struct store *st, struct st_write *w, const char *chat_id);
/* fence.c, writer thread, inside the write's savepoint: 0 when w needs no fence, or its chat's
 * lease is still this node's at the epoch it took (the row then locked FOR SHARE until the
 * transaction ends, so no node takes it before this write commits); SBX_EFENCED otherwise.
 * done/n: the chats whose fence this transaction checked already (no statement for them). */
int st__fence_check(struct store *st, const struct st_write *w, const store_id *done, size_t n,
                    struct sbx_error *err);
void st__fence_count(struct store *st, struct st_write *w, int add); /* pending +1 / -1 */
void st__fences_free(struct store *st);
/* fence.c, loop thread (nodes.c): the fence of a lease just taken at epoch (0 or SBX_ENOMEM), and
 * of one let go (kept until the writes queued before it are through). */
int st__fence_set(struct store *st, const char *chat_id, const char *node_id, int64_t epoch);
void st__fence_release(struct store *st, const char *chat_id);
/* Copies into op->s[idx]; 0 or SBX_ENOMEM. NULL stays NULL. */
int st__simple_str(struct st_simple *op, int idx, const char *v);
void st__simple_discard(struct st_simple *op);

/* health.c */
/* The outcome of a finished write (0 or its SBX_* code, err its detail, may be NULL): held, the
 * caller holds st->mu (the writer); without it, it is taken (stage.c). */
void st__health_note_held(struct store *st, int rc, const struct sbx_error *err);
void st__health_note(struct store *st, int rc, const struct sbx_error *err);

/* checkpoint.c */
/* Opens the checkpointer's connection, installs the WAL hook on the writer connection (whose
 * wal_autocheckpoint must already be 0) and starts the thread.  Before st__writer_start. */
int st__ckpt_start(struct store *st, struct sbx_error *err);
/* The checkpoint the writer runs between groups: none, the finishing one (PASSIVE of a small
 * remainder) or the blocking one past the hard bound (TRUNCATE). */
enum st_ckpt_job { ST_CKPT_NONE = 0, ST_CKPT_FINISH, ST_CKPT_HARD };
/* Writer thread, between groups: which checkpoint it should run now.  Decides only; waits for
 * nothing. */
enum st_ckpt_job st__ckpt_writer_due(struct store *st);
/* Writer thread, between groups (callbacks handed off): runs that checkpoint (HARD first waits
 * for a pass of the checkpointer to end).  Decides again, so it may do nothing. */
void st__ckpt_writer_run(struct store *st, enum st_ckpt_job job);
/* Joins the thread and closes its connection; after st__writer_stop.  No-op when not started. */
void st__ckpt_stop(struct store *st);
void st__ckpt_get(struct store *st, struct st_ckpt *out); /* a consistent copy (tests, bench) */

/* blobs.c */
/* Writer thread, inside a write's savepoint: makes sure a blob with this content is in the blobs
 * table and on its way to disk (a temp file recorded in w->pending; w->blob_delta gets the bytes
 * newly stored).  The file becomes durable in st__blob_prepare_commit. */
int st__blob_put(struct store *st, struct st_write *w, const char *sha, const void *data,
                 size_t len, struct sbx_error *err);
/* Writer thread, just before COMMIT: fsyncs (in parallel) the temp files of the writes in `txn`
 * that succeeded, renames them to their final names, fsyncs the directories touched.  A failure
 * means the group must not commit (SBX_EIO / SBX_EFULL with the path). */
int st__blob_prepare_commit(struct store *st, struct sbx_list *txn, struct sbx_error *err);
/* Writer thread: closes a write's pending blob files, unlinking temp files never renamed. */
void st__blob_pending_drop(struct st_write *w);
char *st__blob_path(const struct store *st, const char *sha);
/* Writer thread, like st__blob_put for a staged blob: the content is already in the temp file
 * *tmp (written and hashed by stage.c, not yet fsynced).  When it is new, the temp file becomes a
 * pending blob file of w (*tmp is stolen: set to NULL; blobs.c fsyncs and renames it before the
 * commit, or unlinks it when the write fails); otherwise *tmp is left to the caller to unlink. */
int st__blob_put_staged(struct store *st, struct st_write *w, const char *sha, char **tmp,
                        uint64_t len, struct sbx_error *err);
/* At open: removes temp files a killed process left in blobs/xx/ and blobs/tmp/ (never
 * referenced), and makes blobs/tmp/. */
void st__blob_cleanup_tmp(struct store *st);

/* disk.c: the store's file-system calls below the blob files and their chunk copies */
/* fsync(2) of a directory, so the names made in it are durable: 0 or -errno. */
int st__fsync_dir(const char *dir);
/* SBX_EFULL for ENOSPC / EDQUOT, else SBX_EIO. */
int st__errno_code(int e);
/* fsync as blobs.c and chunks.c call it; tests replace it to inject failures (default: fsync). */
extern int (*st__fsync)(int fd);

/* chunks.c: a blob's content in PostgreSQL */
#define ST_CHUNK (1u << 20) /* bytes per blob_chunks row */
/* Writer thread, after the blob's row was inserted: its content as chunks, from data (borrowed)
 * or, when data is NULL, from the file at path (read a chunk at a time).  0 or an error. */
int st__chunks_put(struct store *st, const char *sha, const void *data, const char *path,
                   uint64_t len, struct sbx_error *err);
/* Loop thread: this node's local copy of blob sha at path `final`, made from its chunks (checked
 * against sha, fsynced, renamed).  SBX_ENOENT (no such blob), SBX_ECORRUPT (chunks missing or of
 * other content), SBX_EIO / SBX_EFULL, the database's. */
int st__chunks_fetch(struct store *st, const char *sha, const char *final, struct sbx_error *err);

/* stage.c */
/* DATA/blobs/tmp (owned), where stages keep their temp files. */
char *st__stage_dir(const struct store *st);
/* Finishes the stage (if still writing) and frees it, moving its temp path (owned) to *tmp and
 * its digest and size out.  On failure the stage is aborted (temp unlinked) and the error
 * returned.  Loop thread. */
int st__stage_take(struct store_blob_stage *sg, char **tmp, char sha[65], uint64_t *size,
                   struct sbx_error *err);
/* write(2) as stage.c calls it; tests replace it to inject I/O errors. */
extern ssize_t (*st__stage_write_fn)(int fd, const void *p, size_t n);

/* naming.c */
/* NFC of valid UTF-8 (refuses invalid UTF-8); *out owned. SBX_ENAME / SBX_ENOMEM. */
int st__nfc(const char *in, size_t len, char **out, size_t *outlen, struct sbx_error *err);
/* Splits a normalized one-segment name into stem, extension and duplicate number:
 * "report (3).pdf" -> ("report", ".pdf", 3); "report.pdf" -> ("report", ".pdf", 1). Owned. */
int st__name_split(const char *name, char **stem, char **ext, int *n);
/* stem + " (n)" + ext, or SBX_ENAME when longer than STORE_NAME_MAX. */
int st__name_join(const char *stem, const char *ext, int n, char **out, struct sbx_error *err);

/* records */
int st__file_from_row(struct st_stmt *s, struct store_file *f); /* 0 or SBX_ENOMEM */
int st__file_rows(struct st_stmt *s, struct store_file **out, size_t *n);

#endif
