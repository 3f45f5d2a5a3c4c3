/* store.h -- the one public header of the persistence module.
 *
 * What it is: everything cerea-sandbox keeps, under one data directory: an SQLite database
 * (WAL, synchronous=FULL) holding chats, files, turns, messages, runs, run files (artifacts), the per-chat
 * event log, idempotency keys and settings; and a content-addressed blob store
 * (DATA/blobs/ab/abcdef...) holding file contents by sha256.  Or, opened with a database URL
 * (store_open_url), the same tables in a PostgreSQL database that several processes (nodes)
 * share, file contents in it too (in 1 MiB chunks), and the data directory holding this
 * process's local copies of those contents; every call below means the same on both.
 *
 * How writes work: one writer thread owns the write connection.  Every write below is queued to
 * it; it takes whatever is queued, runs it all in ONE transaction (group commit), commits, and
 * only then completes each write's callback on the loop thread (through a uv_async_t).  So a
 * callback with rc == 0 means the write is durable.  A write that fails rolls back alone (a
 * savepoint per write), the others of its group still commit.  Blob contents are written by the
 * writer thread too (temp file, fsync, rename, directory fsync) before the row that references
 * them; a streamed upload's content is written and hashed as it arrives, on the loop thread, into
 * a stage (below), and the writer only fsyncs and renames it.  Reads run synchronously on the
 * caller's (loop) thread on a separate read connection; they see every write whose callback has
 * run.
 *
 * What it is not: it knows nothing of HTTP, of the run state machine or of mount rules; the
 * orchestrator decides, this module records.  The file-naming rules (one place: naming.c) are
 * here because uniqueness is a property of the stored set.
 *
 * Ownership: records returned by reads are owned by the caller and freed with the matching
 * _free function.  Inputs to writes are copied before the call returns, except large blob data
 * passed with store_file_add, which is borrowed until its callback (documented there), and a
 * staged blob, which store_file_add_staged steals.
 *
 * Errors: 0 or a negative SBX_* code.  SQLite errors become SBX_EDB / SBX_EIO / SBX_EFULL /
 * SBX_ECORRUPT / SBX_EBUSY (and SBX_ENOMEM, SBX_EPERM read-only, SBX_ECONFLICT for a constraint
 * such as a duplicate id or event seq) once, in db.c, with SQLite's message kept in struct
 * sbx_error; PostgreSQL's the same way in pg.c (by SQLSTATE: a unique or foreign key violation
 * SBX_ECONFLICT, disk full SBX_EFULL, a serialization failure or deadlock SBX_EBUSY, a lost
 * connection SBX_EIO, ...).
 *
 * Cost of a read: SQLite, a lookup in this process; PostgreSQL, one round trip to the server
 * (reads stay synchronous on the loop thread), and a file's first read on a node fetches its
 * content once (one round trip per MiB).
 *
 * Threads: call everything from the loop thread (writes are queued from it, reads run on it);
 * store_close too.  The write callbacks run on it.  The async handle is referenced only while
 * writes are in flight, so uv_run returns when nothing else is active and every callback ran.
 * After store_close, run the loop once more (uv_run) so the async handle's close completes before
 * uv_loop_close.
 */
#ifndef SBX_STORE_H
#define SBX_STORE_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "common.h"

struct store;

#define STORE_ID_LEN 32 /* ids are 32 lower-case hex chars (128 random bits) */
typedef char store_id[STORE_ID_LEN + 1];

/* ---- open / close ---------------------------------------------------------------------------- */

/* Opens (creating when absent) DATA/cerea.db and DATA/blobs/, runs the migrations up to the
 * current schema version, starts the writer thread.  Holds an exclusive flock on DATA/cerea.lock
 * until store_close (one process per data directory) and removes blob temp files a killed
 * process left behind.
 * Errors: SBX_EPERM / SBX_EIO (directory not writable, with the path), SBX_EBUSY (another
 * process has the directory open), SBX_ECORRUPT, SBX_EDB. */
int store_open(uv_loop_t *loop, const char *data_dir, struct store **out, struct sbx_error *err);
/* store_open with the rows in a PostgreSQL database instead of DATA/cerea.db when database_url is
 * a postgresql:// (or postgres://) URL; NULL or "" is store_open.  The data directory is still
 * needed and still locked: it holds this process's local copies of blobs (their content lives
 * in the database, in chunks: every node reads every file) and the stages of uploads.
 * Errors, each one line naming the database without its password: SBX_EINVAL (not such a URL),
 * SBX_EIO (the server unreachable), SBX_EUNAUTH (authentication failed), SBX_EPERM (no access
 * allowed), SBX_ENOENT (no such database), SBX_ECORRUPT (its schema is newer than this
 * program's), SBX_EINVAL (not a UTF8 database), SBX_EDB; and the data directory's, as
 * store_open. */
int store_open_url(uv_loop_t *loop, const char *data_dir, const char *database_url,
                   struct store **out, struct sbx_error *err);
/* Finishes every queued write (their callbacks run, inside this call), stops the writer,
 * finalizes statements, closes the connections and handles, releases the directory lock.
 * Synchronous.  Not from inside a store callback (the store is freed under it); writes queued
 * from the callbacks it runs fail with SBX_ECLOSED. */
void store_close(struct store *st);
int store_schema_version(struct store *st);

typedef void (*store_done_cb)(int rc, const struct sbx_error *err, void *ud);

/* ---- ids, hashing ---------------------------------------------------------------------------- */
/* 32 hex chars: 48-bit wall-clock ms then 80 random bits (time-ordered, so id indexes grow at
 * their right edge; unguessable, but ids are names, not credentials). */
int store_new_id(store_id out);
/* sha256 of data as 64 lower-case hex chars + NUL. */
void store_sha256_hex(const void *data, size_t len, char out[65]);

/* ---- chats ----------------------------------------------------------------------------------- */
struct store_chat {
  store_id id;
  char token_hash[65]; /* sha256 hex of the page token; the token itself is never stored */
  char *title;         /* may be NULL */
  int64_t created_at;  /* wall ms */
  store_id owner;      /* the person it belongs to; "" for a backend's chat (schema 11) */
};
int store_chat_create(struct store *st, const struct store_chat *chat, store_done_cb cb, void *ud);
int store_chat_set_title(struct store *st, const char *chat_id, const char *title, store_done_cb cb,
                         void *ud);
/* SBX_ENOENT when absent. */
int store_chat_get(struct store *st, const char *chat_id, struct store_chat *out);
void store_chat_free(struct store_chat *c); /* frees members, not c */
/* Every chat, newest first, at most `limit` (for the app's chat list). */
int store_chat_list(struct store *st, size_t limit, struct store_chat **out, size_t *n);
void store_chat_list_free(struct store_chat *v, size_t n);
/* A person's chats, newest first, at most `limit`. */
int store_chat_list_owner(struct store *st, const char *owner, size_t limit,
                          struct store_chat **out, size_t *n);
/* Deletes a chat and everything of it: its files, turns, runs, run files, events and messages,
 * and the blobs its files held that no other file references (their files unlinked once the
 * delete is durable).  cb: 0, SBX_ENOENT (no such chat), the database's errors. */
int store_chat_delete(struct store *st, const char *chat_id, store_done_cb cb, void *ud);

/* ---- people and sessions (people.c) ----------------------------------------------------------
 * Who signs in: a person's name (unique), role ("admin" | "user"), password hash (the encoded
 * Argon2id string the orchestrator made: the store never sees a password), and their own
 * settings as the orchestrator's JSON text.  A session is kept by the sha256 of its cookie. */
struct store_person {
  store_id id;
  char *name;
  char *role;
  char *pw_hash;
  int disabled;
  int must_change_password;
  int64_t created_at, last_seen_at; /* wall ms; last_seen_at 0: never */
  char *settings_json;              /* a JSON object ("{}": every default) */
};
void store_person_free(struct store_person *p); /* frees members, not p */
void store_person_list_free(struct store_person *v, size_t n);
/* cb: 0, SBX_ECONFLICT (the name, or the id, is taken), the database's errors. */
int store_person_create(struct store *st, const struct store_person *p, store_done_cb cb,
                        void *ud);
/* Writes role, pw_hash, disabled, must_change_password and settings_json of person p->id.
 * cb: 0, SBX_ENOENT. */
int store_person_update(struct store *st, const struct store_person *p, store_done_cb cb,
                        void *ud);
/* SBX_ENOENT when absent. */
int store_person_get(struct store *st, const char *id, struct store_person *out);
int store_person_by_name(struct store *st, const char *name, struct store_person *out);
/* Everyone, oldest first. */
int store_person_list(struct store *st, struct store_person **out, size_t *n);
int store_person_count(struct store *st, int64_t *out);

struct store_session {
  char token_hash[65];
  store_id person_id;
  int64_t created_at, last_used_at, ended_at; /* wall ms; ended_at 0: open */
};
int store_session_create(struct store *st, const struct store_session *s, store_done_cb cb,
                         void *ud);
/* SBX_ENOENT when there is no session of that hash. */
int store_session_get(struct store *st, const char *token_hash, struct store_session *out);
/* The session was used at now: its last_used_at, and its person's last_seen_at. */
int store_session_touch(struct store *st, const char *token_hash, const char *person_id,
                        int64_t now, store_done_cb cb, void *ud);
/* Ends one session (token_hash), or every open session of person_id but `except` (NULL: all). */
int store_session_end(struct store *st, const char *token_hash, int64_t now, store_done_cb cb,
                      void *ud);
int store_session_end_person(struct store *st, const char *person_id, const char *except,
                             int64_t now, store_done_cb cb, void *ud);
/* Deletes the sessions ended or last used before `before` (wall ms). */
int store_session_purge(struct store *st, int64_t before, store_done_cb cb, void *ud);

/* ---- files ------------------------------------------------------------------------------------
 * A named, versioned file of a chat.  Naming rules (naming.c):
 *  - names are NFC-normalized; NUL, control characters, "..", "." segments, absolute paths,
 *    backslashes, names (or path segments) with no visible character (only spaces or invisible
 *    code points: zero-width spaces and joiners, soft hyphens, ...) and names longer than
 *    STORE_NAME_MAX bytes are refused (SBX_ENAME with detail);
 *  - attachment and knowledge names are one segment (no '/'); output names may hold '/';
 *  - attachment/knowledge: same name + same content -> the existing file (created = 0);
 *    same name + other content -> "name (N).ext", N the next free number found by one query;
 *  - tool/output: an existing name -> its next version (same content as the latest -> the latest,
 *    created = 0). */
#define STORE_NAME_MAX 255
enum store_source {
  STORE_SRC_ATTACHMENT = 0,
  STORE_SRC_KNOWLEDGE,
  STORE_SRC_TOOL,
  STORE_SRC_OUTPUT
};
const char *store_source_name(enum store_source s);
int store_source_parse(const char *s, enum store_source *out); /* SBX_EINVAL when unknown */

struct store_file {
  store_id id;
  store_id chat_id;
  char *name;
  int version; /* 1, 2, ... per (chat, name) */
  enum store_source source;
  char sha256[65];
  uint64_t size;
  int mounted;           /* decided by the orchestrator at upload */
  char *left_out_reason; /* NULL when mounted */
  store_id text_of;      /* "" or the id of the file this is the extracted text of */
  store_id run_id;       /* "" or the run that produced it (output files) */
  char *kind;            /* "file" / "figure" for output files; NULL otherwise */
  int64_t created_at;
  int64_t expires_at; /* 0: kept; else retention deadline (artifacts) */
};
void store_file_free(struct store_file *f);

struct store_file_in {
  const char *chat_id;
  const char *name; /* as given; normalized and checked here */
  enum store_source source;
  int mounted;
  const char *left_out_reason; /* may be NULL */
  const char *text_of;         /* may be NULL */
  const char *run_id;          /* may be NULL */
  const char *kind;            /* may be NULL */
  int64_t expires_at;
  const void *data; /* BORROWED until cb runs */
  size_t size;
  /* Sources other than output: the bytes the chat's files of those sources may take with this
   * one (store_chat_added_bytes), checked in the write's transaction (0: no bound). */
  uint64_t quota;
};
/* Result of store_file_add, passed to its callback. */
struct store_file_added {
  int created;            /* 1: a new file or version; 0: same content already there */
  struct store_file file; /* owned by the store; valid during the callback only */
};
typedef void (*store_file_cb)(int rc, const struct sbx_error *err,
                              const struct store_file_added *res, void *ud);
/* Stores the blob (if new) and the file row, applying the naming rules.  Errors via cb (rc):
 * SBX_ENAME (bad name, detail says why), SBX_ENOENT (no such chat), SBX_EFULL (a new file or
 * version past in->quota; the same content again is not refused), SBX_EIO, SBX_EDB.  Returns
 * nonzero (and never calls cb) only when the write could not even be queued (SBX_ENOMEM). */
int store_file_add(struct store *st, const struct store_file_in *in, store_file_cb cb, void *ud);

/* ---- staged blobs: streamed uploads (stage.c) ------------------------------------------------
 * The content of an upload written piece by piece as it arrives, instead of one buffer held whole:
 *   store_blob_stage_begin      a temp file in DATA/blobs/tmp/ and a fresh SHA-256;
 *   store_blob_stage_write      appends a piece (synchronous write on the calling, loop, thread:
 *                               a page-cache write; no fsync) and hashes it;
 *   store_blob_stage_finish     (optional) closes the file and gives the sha256, e.g. to answer
 *                               before storing; no write after it;
 *   store_file_add_staged       STEALS the stage (even on failure): the writer fsyncs and renames
 *                               the temp file into its content address, or unlinks it when that
 *                               content is stored already, and inserts the row with the naming
 *                               rules, exactly as store_file_add;
 *   store_blob_stage_abort      drops a stage not handed to store_file_add_staged (temp unlinked).
 * Every stage ends in exactly one of store_file_add_staged or store_blob_stage_abort.  A temp file
 * a killed process left is removed by the next store_open.  Loop thread only.
 * Errors: begin: SBX_ENOMEM, SBX_ECLOSED, SBX_EIO / SBX_EFULL (cannot create the temp file);
 * write: SBX_EIO, SBX_EFULL (disk full; the stage is then failed: only abort is left),
 * SBX_ESTATE (written after finish or after a failure); finish: SBX_EIO, SBX_ESTATE. */
struct store_blob_stage;
int store_blob_stage_begin(struct store *st, struct store_blob_stage **out, struct sbx_error *err);
int store_blob_stage_write(struct store_blob_stage *sg, const void *data, size_t len,
                           struct sbx_error *err);
uint64_t store_blob_stage_size(const struct store_blob_stage *sg);
/* The stage's temp file (borrowed, valid until the stage ends): after store_blob_stage_finish, a
 * reader may open it (a node forwarding an upload to the node that serves its chat). */
const char *store_blob_stage_path(const struct store_blob_stage *sg);
int store_blob_stage_finish(struct store_blob_stage *sg, char sha256[65], struct sbx_error *err);
void store_blob_stage_abort(struct store_blob_stage *sg); /* NULL: nothing */
/* store_file_add with the content of a stage (in->data and in->size are ignored).  Steals sg.
 * Errors via cb as store_file_add's; returned (cb never called; the stage is gone all the same):
 * SBX_EINVAL, SBX_ENOMEM, SBX_ECLOSED, or the stage's own failure (SBX_EIO, SBX_ESTATE). */
int store_file_add_staged(struct store *st, const struct store_file_in *in,
                          struct store_blob_stage *sg, store_file_cb cb, void *ud);

/* Validates and NFC-normalizes a name for a source without storing anything; *out owned.
 * SBX_ENAME with detail (naming.c: the rules). Exposed for the orchestrator's early 400s and for
 * tests. */
int store_name_normalize(const char *name, enum store_source src, char **out,
                         struct sbx_error *err);
/* The same for a name of `len` bytes that may hold a NUL (a percent-decoded URL parameter): a NUL
 * is refused, SBX_ENAME "name holds a NUL character U+0000 (byte N)". */
int store_name_normalize_len(const char *name, size_t len, enum store_source src, char **out,
                             struct sbx_error *err);

int store_file_get(struct store *st, const char *file_id, struct store_file *out);
/* Every file of a chat (all versions when all_versions, else the latest of each name), oldest
 * first. */
/* A counter that changes after every transaction that changed the files table has committed (or
 * rolled back).  Read it BEFORE a store_file_list: while it still has that value, the list read is
 * current, so a caller may keep the list and skip the next read (orchestrator: the dispatch
 * manifest).  Loop thread or any thread; never fails. */
uint64_t store_files_generation(struct store *st);
/* Moves store_files_generation on without a write here: another node changed files (nodes). */
void store_files_touch(struct store *st);
int store_file_list(struct store *st, const char *chat_id, int all_versions,
                    struct store_file **out, size_t *n);
void store_file_list_free(struct store_file *v, size_t n);
/* Bytes of output files (STORE_SRC_OUTPUT) the chat holds: the sizes of every stored version,
 * until the retention sweep deletes them (what a per-chat quota on stored output counts; the
 * same content stored twice counts twice).  0 for a chat with none, or no such chat.  One indexed
 * read (files_output, schema 7), however many other files the chat has.  SBX_EINVAL, SQLite's. */
int store_chat_output_bytes(struct store *st, const char *chat_id, uint64_t *out);
/* Bytes of the chat's files of every other source (attachment, knowledge, tool), every stored
 * version (the same content under two names counts twice).  0 for none.  SBX_EINVAL, the
 * database's. */
int store_chat_added_bytes(struct store *st, const char *chat_id, uint64_t *out);
/* Path of a blob on disk (for streaming with tp_respond_file); owned by caller.  With
 * PostgreSQL, a blob this process has no local copy of is fetched from the database first
 * (loop thread; one round trip per MiB): when that fails, the path names no file. */
char *store_blob_path(struct store *st, const char *sha256);
/* Reads a whole blob (used for small files and tests).  SBX_ENOENT, SBX_EIO; with PostgreSQL also
 * the fetch's errors (SBX_ECORRUPT: the database's chunks are missing or of other content). */
int store_blob_read(struct store *st, const char *sha256, char **data, size_t *len);
/* Opens a blob for a streamed read: *fd (O_RDONLY | O_CLOEXEC, the caller closes it) and its
 * size.  SBX_EINVAL (not a sha256), SBX_ENOENT, SBX_EIO; the fetch's errors, as store_blob_read. */
int store_blob_open(struct store *st, const char *sha256, int *fd, uint64_t *size);
uint64_t store_blob_bytes(struct store *st); /* bytes held in the blob store */

/* ---- turns ----------------------------------------------------------------------------------- */
enum store_turn_state { STORE_TURN_OPEN = 0, STORE_TURN_FINISHED };
struct store_turn {
  store_id id;
  store_id chat_id;
  int state;    /* enum store_turn_state, the orchestrator's enum value */
  char *answer; /* NULL until finished */
  int64_t created_at, finished_at;
};
int store_turn_put(struct store *st, const struct store_turn *t, store_done_cb cb, void *ud);
int store_turn_get(struct store *st, const char *turn_id, struct store_turn *out);
void store_turn_free(struct store_turn *t);

/* ---- messages (a chat's conversation) ---------------------------------------------------------
 * A message of a turn: the user's text, or the assistant's answer as it stands.  role and state
 * are the orchestrator's names ("user" | "assistant"; "streaming", "done", ...); error_json,
 * run_ids_json and calls_json are JSON text the orchestrator writes and reads (the store does not
 * look inside).  A put inserts, or updates the message of that id (state, text, error, run ids,
 * calls, parts, updated_at); its chat, turn, role and creation time never change.  An update with
 * calls_json NULL leaves the calls as stored (they can be large: every tool call's arguments and
 * result), so a writer that changed the rest alone sends only that. */
struct store_message {
  store_id id, chat_id, turn_id;
  char role[16], state[16];
  char *text;         /* never NULL in a message read */
  char *error_json;   /* NULL: none */
  char *run_ids_json; /* "[...]"; NULL on a put: "[]" */
  char *calls_json;   /* the tool calls it made and their results; NULL: none (on an update: kept) */
  char *parts_json;   /* where in its text its tool runs happened; NULL: not recorded */
  int64_t created_at, updated_at;
};
/* SBX_EINVAL (no id, chat, role or state), SBX_ENOMEM; via cb: SBX_ENOENT (no such chat). */
int store_message_put(struct store *st, const struct store_message *m, store_done_cb cb, void *ud);
/* The chat's messages in creation order, at most limit (1..100000); *out owned (free with
 * store_message_list_free).  SBX_EINVAL, SBX_ENOMEM, SBX_EDB. */
int store_message_list(struct store *st, const char *chat_id, size_t limit,
                       struct store_message **out, size_t *n);
/* A page of the chat's messages, in creation order: the newest limit (before_id and after_id
 * NULL), the limit just before message before_id, or just after message after_id (not both).
 * *more: whether messages are left past the page on its far side (older for the newest page and
 * a before page, newer for an after page).  calls_json is read only with with_calls (it can be
 * large: every tool call's arguments and result).  limit 1..STORE_MESSAGE_PAGE_MAX; *out owned.
 * SBX_EINVAL, SBX_ENOENT (the cursor is no message of this chat), SBX_ENOMEM, SBX_EDB. */
#define STORE_MESSAGE_PAGE_MAX 100000
int store_message_page(struct store *st, const char *chat_id, const char *before_id,
                       const char *after_id, size_t limit, int with_calls,
                       struct store_message **out, size_t *n, int *more);
/* Whether the chat's turn turn_id is a conversation turn (it has an assistant message): 1, 0, or
 * an error (SBX_EDB). */
int store_message_turn_answered(struct store *st, const char *chat_id, const char *turn_id);
/* At start: every message still `streaming` (its server stopped mid-answer) becomes `error` with
 * error_json, its turn finished with the text it had.  SBX_ENOMEM. */
int store_message_interrupt(struct store *st, const char *error_json, int64_t now, store_done_cb cb,
                            void *ud);
/* The same for one chat's messages alone: a node taking a chat over from a node that stopped
 * (several nodes on one PostgreSQL store, where a start must not touch other nodes' answers). */
int store_message_interrupt_chat(struct store *st, const char *chat_id, const char *error_json,
                                 int64_t now, store_done_cb cb, void *ud);
void store_message_free(struct store_message *m);
void store_message_list_free(struct store_message *v, size_t n);

/* ---- runs -------------------------------------------------------------------------------------
 * The whole run object.  JSON-shaped parts (error, notes, remounted, value, displays) are stored
 * as JSON text the orchestrator produces and parses; the store does not look inside. */
struct store_run {
  store_id id;
  store_id chat_id;
  store_id turn_id; /* "" when none */
  char *code;
  char *origin; /* "tool" | "auto" | "user" */
  char *state;  /* the orchestrator's state name */
  char *status; /* NULL until done */
  int timeout_s;
  int attempts;
  char *stdout_text, *stderr_text;
  int stdout_truncated, stderr_truncated;
  char *error_json;     /* NULL or {"type","message","traceback"} */
  char *notes_json;     /* NULL or [..] */
  char *remounted_json; /* NULL or [..] */
  char *value_json;     /* NULL or the cell's value, a MIME bundle {..} (schema 8) */
  char *displays_json;  /* NULL or its display() bundles [..] (schema 8) */
  int restarted;
  int files_unlisted, figures_dropped;
  char *result_hash;     /* sha256 of the canonical result body (idempotent results) */
  char *idempotency_key; /* NULL when none */
  int64_t seq;           /* order of creation within the chat */
  int64_t created_at, started_at, finished_at; /* wall ms; 0 when not yet */
};
/* Frees every string member and zeroes the whole struct (not r itself). */
void store_run_free(struct store_run *r);
/* Deep copy: every string member duplicated (NULL stays NULL), the rest copied; dst is
 * overwritten, not freed first.  SBX_ENOMEM leaves dst zeroed, holding nothing. */
int store_run_copy(struct store_run *dst, const struct store_run *src);
/* Inserts the run, or replaces the row of one that exists (the orchestrator keeps the truth in
 * memory and persists each change); a run's chat, seq (0: the chat's next), idempotency key and
 * created_at are fixed by its first put, later puts replace every other field.  When
 * idempotency_key is set and another run of the chat has it, fails with SBX_EEXIST and puts that
 * run's id in existing_id (via cb's err->msg); a run id of another chat fails with
 * SBX_ECONFLICT. */
int store_run_put(struct store *st, const struct store_run *r, store_done_cb cb, void *ud);
/* store_run_put of a run that is new (its id just made): the row is inserted without an UPDATE
 * tried first; a run of that id that exists fails it with SBX_ECONFLICT. */
int store_run_create(struct store *st, const struct store_run *r, store_done_cb cb, void *ud);
int store_run_get(struct store *st, const char *run_id, struct store_run *out);
int store_run_by_idempotency(struct store *st, const char *chat_id, const char *key,
                             store_id out_run_id); /* SBX_ENOENT when none */
/* Runs not done (state != "done"), oldest first: the orchestrator reloads them at start. */
int store_run_list_unfinished(struct store *st, struct store_run **out, size_t *n);
/* Latest runs (admin views), newest first, optionally of one chat: all runs in the order they
 * were first put (created), a chat's by seq, its creation order.  Both read only what they
 * return. */
int store_run_list(struct store *st, const char *chat_id, size_t limit, struct store_run **out,
                   size_t *n);
void store_run_list_free(struct store_run *v, size_t n);

/* Files a run produced, in the order they were written: (run, position) -> file id. */
int store_run_file_put(struct store *st, const char *run_id, int position, const char *file_id,
                       store_done_cb cb, void *ud);
int store_run_files(struct store *st, const char *run_id, struct store_file **out, size_t *n);

/* ---- per-chat event log (stream resumption) ---------------------------------------------------
 * seq is chosen by the orchestrator (per-chat counter, starts after store_event_last_seq). */
struct store_event {
  int64_t seq;
  char *type;
  char *payload; /* JSON text */
};
int store_event_append(struct store *st, const char *chat_id, int64_t seq, const char *type,
                       const char *payload, store_done_cb cb, void *ud);
int store_event_last_seq(struct store *st, const char *chat_id, int64_t *out);
/* Events with seq > after_seq, oldest first, at most limit. */
int store_event_since(struct store *st, const char *chat_id, int64_t after_seq, size_t limit,
                      struct store_event **out, size_t *n);
void store_event_list_free(struct store_event *v, size_t n);
/* Bounded work steps (store_event_trim, store_sweep) report how many rows they removed. */
typedef void (*store_sweep_cb)(int rc, const struct sbx_error *err, size_t removed, void *ud);
/* One bounded trim step of the event log, queued to the writer (durable when cb gets rc == 0).
 * Per chat it deletes a PREFIX of the log: from the oldest seq up, stopping at the first event
 * created at or after older_than_ms (wall ms; set by store_event_append) or among the chat's
 * newest keep_per_chat.  So what remains of a chat's log is always a contiguous tail (a page
 * whose Last-Event-ID is below the oldest remaining seq minus one knows events were trimmed),
 * and keep_per_chat is at least 1 (0 counts as 1): the newest event of a chat is never deleted,
 * so store_event_last_seq, from which the orchestrator continues a chat's seq, never goes back
 * and a seq is never reused.  At most `budget` rows are deleted and at most 8 x budget chats
 * looked at per call; the next call resumes after the last chat finished (round robin).  cb gets
 * the rows deleted; call again soon while it reports a full budget.
 * Errors (returned): SBX_EINVAL (budget 0 or > 100000), SBX_ENOMEM, SBX_ECLOSED; (cb): the
 * SQLite ones, the step then deleted nothing. */
int store_event_trim(struct store *st, int64_t older_than_ms, size_t keep_per_chat, size_t budget,
                     store_sweep_cb cb, void *ud);

/* ---- nodes: several processes on one PostgreSQL store (nodes.c) ------------------------------
 * With a database URL several orchestrators (nodes) may share the store.  A chat is served by
 * the node holding its lease: taken only when free or expired, renewed by its holder, each in one
 * statement timed by the database's clock; every epoch of a chat's lease is logged (lease_log:
 * node, taken_at, until_at).  These calls run synchronously on the loop thread, on the store's
 * lease connection: one round trip each, durable when they return.  SQLite: SBX_EINVAL.
 * Notifications between nodes carry ids only: store_notify (queued to the writer, so it reaches
 * the other nodes once the writes queued before it are durable) and store_listen (every
 * notification of any node, this one's included; "*" after the listen connection was lost and
 * opened again: some may be missing). */
int store_shared(struct store *st); /* 1 when nodes may share the store (PostgreSQL) */
struct store_lease {
  int mine;           /* 1: this node holds it now (taken or renewed) */
  int64_t epoch;      /* the lease's epoch (+1 each time another node took it) */
  store_id node_id;   /* its holder */
  char node_url[256]; /* its holder's URL */
  uint64_t left_ms;   /* how long it still holds, by the database's clock (lease_ms if mine) */
};
/* Takes the lease of chat_id for lease_ms (or renews it when this node holds it).  0 with
 * out->mine 0 when another node holds it (out says who and how much longer).  SBX_EAGAIN: it
 * changed hands between two statements (ask again); the database's errors. */
int store_lease_take(struct store *st, const char *chat_id, const char *node_id,
                     const char *node_url, uint64_t lease_ms, struct store_lease *out,
                     struct sbx_error *err);
/* Renews every lease node_id holds for lease_ms from now; *renewed gets how many. */
int store_lease_renew(struct store *st, const char *node_id, uint64_t lease_ms, size_t *renewed,
                      struct sbx_error *err);
/* Lets the lease of chat_id go (NULL: every lease of node_id): it expires now. */
int store_lease_release(struct store *st, const char *chat_id, const char *node_id,
                        struct sbx_error *err);
/* Fencing by lease epoch: once this node took a lease, every write that belongs to a chat (a
 * run, an event, a file, a message, a turn, a chat's title) commits only if, in its own
 * transaction, the chat's lease is still this node's at the epoch it was taken at (the lease's
 * row is locked FOR SHARE until the commit: a node taking it waits for it).  A write whose fence
 * fails is refused (its callback gets SBX_EFENCED; nothing of it is written), and cb, when set,
 * hears of it first (loop thread), with the chat's id: the node must stop serving that chat. */
typedef void (*store_fenced_cb)(const char *chat_id, void *ud);
void store_on_fenced(struct store *st, store_fenced_cb cb, void *ud);
typedef void (*store_notify_cb)(const char *payload, void *ud);
/* Notifies every node (PostgreSQL NOTIFY on channel "cerea"): payload at most 200 bytes.
 * SBX_EINVAL (SQLite, too long), SBX_ENOMEM; cb as any write's. */
int store_notify(struct store *st, const char *payload, store_done_cb cb, void *ud);
/* Calls cb (loop thread) with every notification from now on, until store_close.  Once per store.
 * SBX_EINVAL, or the connection's errors. */
int store_listen(struct store *st, store_notify_cb cb, void *ud, struct sbx_error *err);
/* A chat's unfinished runs (state != "done"), in creation order: what a node taking the chat over
 * makes live again. */
int store_run_list_unfinished_chat(struct store *st, const char *chat_id, struct store_run **out,
                                   size_t *n);

/* ---- settings (runtime settings an operator changes; survive restarts) ----------------------- */
int store_setting_put(struct store *st, const char *key, const char *value, store_done_cb cb,
                      void *ud);
/* *out owned; SBX_ENOENT when unset. */
int store_setting_get(struct store *st, const char *key, char **out);

/* ---- retention ------------------------------------------------------------------------------- */
/* One bounded sweep step, queued to the writer: deletes at most `budget` files whose expires_at
 * is in (0, now_ms], then blobs nothing references any more (their files unlinked after commit).
 * cb (store_sweep_cb, declared with the event log) gets how many were removed. */
int store_sweep(struct store *st, int64_t now_ms, size_t budget, store_sweep_cb cb, void *ud);
/* Sets a new expiry for every kept file, run outputs and added files alike, from its creation
 * time (retention setting changed; retention_ms 0: kept for ever). */
int store_retention_apply(struct store *st, int64_t retention_ms, store_done_cb cb, void *ud);

/* ---- statistics ------------------------------------------------------------------------------ */
struct store_stats {
  uint64_t commits, writes, write_errors;
  uint64_t max_group; /* largest group committed at once */
  uint64_t blob_bytes;
};
void store_get_stats(struct store *st, struct store_stats *out);
/* Most writes committed in one transaction (default 4096; 1 = one transaction per write, what
 * bench/store compares group commit against).  Thread-safe. */
void store_set_group_max(struct store *st, size_t n);

/* ---- health (health.c) ----------------------------------------------------------------------- */
/* Health check: a trivial read; 0 when the database answers. */
int store_ping(struct store *st, struct sbx_error *err);
/* Whether the store's writes succeed.  A write that failed for a reason of the store (a full disk,
 * an I/O error, a damaged or read-only database, no memory: SBX_EFULL, SBX_EIO, SBX_ECORRUPT,
 * SBX_EDB, SBX_EBUSY, SBX_EPERM, SBX_ENOMEM) makes `ok` 0 until a write is stored again; a write
 * refused for its input (a bad name, no such chat, a duplicate key) counts for nothing.  Every
 * write the writer finished counts, in order, and so does a staged upload's write to its temp
 * file (store_blob_stage_begin/write/finish) that failed.  Counted since store_open. */
struct store_health {
  int ok;                        /* 1: no write failed since the last one stored (or since open) */
  uint64_t consecutive_failures; /* writes failed since the last one stored */
  int64_t failing_since;         /* wall ms of the first of them; 0 while ok */
  uint64_t failures;             /* writes failed since open */
  struct sbx_error last_error;   /* the latest failure: code (0: none since open) and detail */
  int64_t last_error_at;         /* wall ms of it; 0: none */
  int64_t last_ok_at;            /* wall ms of the latest write stored; 0: none since open */
};
/* A consistent copy, from any thread.  0, or SBX_EINVAL for a NULL argument. */
int store_health(struct store *st, struct store_health *out);

/* ---- backup and restore (backup.c; outside a running store: no loop, no writer) ------------- */

struct store_backup_stats {
  int schema_version; /* of the database copied */
  size_t blobs;       /* blob files in the backup */
  uint64_t blob_bytes, db_bytes;
};
/* A consistent copy of DATA (its SQLite store) into dest, which must be absent or an empty
 * folder, while a server may be writing to DATA: SQLite's online backup of cerea.db, the blobs it
 * references, the keys, backup.info and last manifest.sha256 (`<sha256>  <path>` lines).  On
 * failure dest is left as it was (what was written into it removed).
 * Errors: SBX_EEXIST (dest not empty), SBX_EPERM (dest not writable), SBX_ENOENT (no cerea.db in
 * DATA: a PostgreSQL store is dumped with pg_dump; or a blob the database names is missing),
 * SBX_ECORRUPT (a blob whose content does not hash to its name, a database failing
 * integrity_check), SBX_EBUSY, SBX_EDB, SBX_EIO, SBX_EFULL, SBX_ENOMEM. */
int store_backup(const char *data_dir, const char *dest, struct store_backup_stats *stats,
                 struct sbx_error *err);
/* Restores a backup made by store_backup into data_dir, which must be absent or an empty folder
 * that no server holds.  Everything is checked before the target appears: the manifest's lines,
 * no file of the backup left out of it, each file's sha256 as it is copied, backup.info's format,
 * integrity_check; the copy is made beside the target and renamed into place.  On failure nothing
 * is left behind.
 * Errors: SBX_EBUSY (a server has data_dir open), SBX_EEXIST (not empty), SBX_ECORRUPT (not a
 * backup, unfinished, tampered or cut short: the message says which file), SBX_EPERM, SBX_EIO,
 * SBX_EFULL, SBX_ENOMEM. */
int store_restore(const char *src, const char *data_dir, struct store_backup_stats *stats,
                  struct sbx_error *err);

#endif
