/* sqlite_floor.c -- the least CPU SQLite itself needs for the rows of one run, with no server
 * around it: a lower bound for the store's share of bench/runs.sh's server CPU per run.
 *
 *   sqlite_floor DIR [--runs N] [--chats C] [--group G] [--sync off|full] [--bare]
 *                    [--pragma "PRAGMA ...; ..."]   (run after the others, to try settings)
 *
 * DIR must not exist; the database is created by the real store (store_open: this build's schema,
 * indexes and pragmas), then closed and reopened with the plain SQLite API.  For each run, as the
 * orchestrator writes it (bench/runs' path): the run row in its dispatched state and its `run`
 * event (a ~290-byte payload, as the orchestrator's) in one commit, then the finished run row in a
 * later one.  G runs' creates and the previous G runs' results share each commit (group commit,
 * as the store's writer does at load).  What it leaves out, each of which the store does and costs
 * more: the writer thread and its hand-offs, a savepoint per write, the chat-exists check, the
 * per-chat seq lookup, binding from records, callbacks.  With --bare, one row per create and one
 * per result in a table of just (INTEGER PRIMARY KEY, blob): the floor of any two durable records
 * per run in SQLite, whatever the schema.
 *
 * Prints one JSON line: CPU (user+sys, getrusage) per run and per commit, runs/s, commits.
 * --sync off on tmpfs is the pure CPU floor; --sync full on disk adds the fsyncs (shared by G).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "store.h"

#include <sqlite3.h>
#include <uv.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static void die(const char *what, sqlite3 *db) {
  fprintf(stderr, "sqlite_floor: %s: %s\n", what, db ? sqlite3_errmsg(db) : "failed");
  exit(1);
}

static void exec(sqlite3 *db, const char *sql) {
  char *msg = NULL;
  if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
    fprintf(stderr, "sqlite_floor: %s: %s\n", sql, msg ? msg : "?");
    exit(1);
  }
}

static sqlite3_stmt *prep(sqlite3 *db, const char *sql) {
  sqlite3_stmt *s = NULL;
  if (sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, NULL) != SQLITE_OK)
    die(sql, db);
  return s;
}

static void step(sqlite3 *db, sqlite3_stmt *s) {
  if (sqlite3_step(s) != SQLITE_DONE)
    die("step", db);
  sqlite3_reset(s);
}

static double cpu_us(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
         (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

static double wall_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* time-first ids, as store_new_id makes them: 48 bits of a counter standing in for the clock,
 * then pseudo-random bits */
static void make_id(char out[33], unsigned long long n, unsigned long long *rnd) {
  *rnd = *rnd * 6364136223846793005ULL + 1442695040888963407ULL;
  snprintf(out, 33, "%012llx%020llx", n & 0xffffffffffffULL, *rnd & 0xfffffffffffffffULL);
}

int main(int argc, char **argv) {
  if (argc < 2 || argv[1][0] == '-') {
    fprintf(stderr, "usage: sqlite_floor DIR [--runs N] [--chats C] [--group G] [--sync off|full] [--bare] [--pragma SQL]\n");
    return 2;
  }
  const char *dir = argv[1];
  int runs = 200000, n_chats = 1000, group = 8, bare = 0;
  const char *sync = "off", *pragma = NULL;
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "--bare")) bare = 1;
    else if (i + 1 < argc && !strcmp(argv[i], "--runs")) runs = atoi(argv[++i]);
    else if (i + 1 < argc && !strcmp(argv[i], "--chats")) n_chats = atoi(argv[++i]);
    else if (i + 1 < argc && !strcmp(argv[i], "--group")) group = atoi(argv[++i]);
    else if (i + 1 < argc && !strcmp(argv[i], "--sync")) sync = argv[++i];
    else if (i + 1 < argc && !strcmp(argv[i], "--pragma")) pragma = argv[++i];
    else { fprintf(stderr, "unknown option %s\n", argv[i]); return 2; }
  }
  if (runs < group || group < 1 || n_chats < 1)
    return 2;

  /* the real schema, made by the real store */
  uv_loop_t loop;
  uv_loop_init(&loop);
  struct store *st = NULL;
  struct sbx_error err = {0};
  if (store_open(&loop, dir, &st, &err) != 0) {
    fprintf(stderr, "sqlite_floor: store_open %s: %s\n", dir, err.msg);
    return 1;
  }
  int schema = store_schema_version(st);
  store_close(st);
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);

  char path[4096];
  snprintf(path, sizeof path, "%s/cerea.db", dir);
  sqlite3 *db = NULL;
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK)
    die(path, db);
  exec(db, "PRAGMA journal_mode = WAL; PRAGMA foreign_keys = ON;");
  exec(db, !strcmp(sync, "full") ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = OFF");
  if (pragma)
    exec(db, pragma);
  if (bare)
    exec(db, "CREATE TABLE bare(id INTEGER PRIMARY KEY, body BLOB NOT NULL)");

  /* chats */
  char (*chat)[33] = calloc((size_t)n_chats, 33);
  long long *chat_seq = calloc((size_t)n_chats, sizeof(long long));
  char (*run_id)[33] = calloc((size_t)group, 33);
  int *run_chat = calloc((size_t)group, sizeof(int));
  if (!chat || !chat_seq || !run_id || !run_chat)
    return 1;
  unsigned long long rnd = 42, clock_ms = 1;
  exec(db, "BEGIN");
  sqlite3_stmt *ci = prep(db, "INSERT INTO chats(id, token_hash, title, created_at) VALUES(?1, ?2, NULL, 1)");
  for (int i = 0; i < n_chats; i++) {
    make_id(chat[i], clock_ms++, &rnd);
    sqlite3_bind_text(ci, 1, chat[i], 32, SQLITE_STATIC);
    sqlite3_bind_text(ci, 2, "0000000000000000000000000000000000000000000000000000000000000000", 64, SQLITE_STATIC);
    step(db, ci);
  }
  exec(db, "COMMIT");

  sqlite3_stmt *ins = prep(db,
      "INSERT INTO runs(id, chat_id, turn_id, code, origin, state, status, timeout_s, attempts,"
      " stdout_text, stderr_text, stdout_truncated, stderr_truncated, error_json, notes_json,"
      " remounted_json, restarted, files_unlisted, figures_dropped, result_hash, idempotency_key,"
      " seq, created_at, started_at, finished_at) VALUES(?1, ?2, '', 'pass', 'tool', 'dispatched',"
      " NULL, 60, 1, NULL, NULL, 0, 0, NULL, NULL, NULL, 0, 0, 0, NULL, NULL, ?3, ?4, ?4, 0)");
  sqlite3_stmt *ev = prep(db, "INSERT INTO events(chat_id, seq, type, payload, created_at) VALUES(?1, ?2, 'run', ?3, ?4)");
  sqlite3_stmt *upd = prep(db,
      "UPDATE runs SET state = 'done', status = 'ok', stdout_text = '', stderr_text = '',"
      " result_hash = ?2, finished_at = ?3 WHERE id = ?1");
  sqlite3_stmt *bi = bare ? prep(db, "INSERT INTO bare(body) VALUES(?1)") : NULL;
  char payload[512];
  int plen = snprintf(payload, sizeof payload,
      "{\"run_id\":\"%032d\",\"chat_id\":\"%032d\",\"page_id\":\"bench\",\"code\":\"pass\","
      "\"origin\":\"tool\",\"timeout_s\":60,\"attempt\":1,\"mounts\":[],\"left_out\":[],\"limits\":"
      "{\"out_chars\":8000,\"files_listed\":200,\"figures\":20,\"file_load_bytes\":52428800},"
      "\"pypi\":true}", 0, 0);
  const char *hash = "24d5a1cd329be22b1d654b8d7c8cf51d68d020ec32a8fb050358670ad6538a67";

  double c0 = cpu_us(), w0 = wall_s();
  int commits = 0, pending = 0;
  for (int done = 0; done < runs; done += group) {
    exec(db, "BEGIN");
    for (int k = 0; k < pending; k++) { /* results of the previous group */
      if (bare) {
        sqlite3_bind_blob(bi, 1, payload, 180, SQLITE_STATIC);
        step(db, bi);
        continue;
      }
      sqlite3_bind_text(upd, 1, run_id[k], 32, SQLITE_STATIC);
      sqlite3_bind_text(upd, 2, hash, 64, SQLITE_STATIC);
      sqlite3_bind_int64(upd, 3, (long long)clock_ms);
      step(db, upd);
    }
    for (int k = 0; k < group; k++) { /* creates: each on its own chat, like 64 assistants */
      int c = (int)((rnd >> 33) % (unsigned long long)n_chats);
      make_id(run_id[k], clock_ms++, &rnd);
      run_chat[k] = c;
      if (bare) {
        sqlite3_bind_blob(bi, 1, payload, plen, SQLITE_STATIC);
        step(db, bi);
        continue;
      }
      sqlite3_bind_text(ins, 1, run_id[k], 32, SQLITE_STATIC);
      sqlite3_bind_text(ins, 2, chat[c], 32, SQLITE_STATIC);
      sqlite3_bind_int64(ins, 3, ++chat_seq[c]);
      sqlite3_bind_int64(ins, 4, (long long)clock_ms);
      step(db, ins);
      sqlite3_bind_text(ev, 1, chat[c], 32, SQLITE_STATIC);
      sqlite3_bind_int64(ev, 2, chat_seq[c]);
      sqlite3_bind_text(ev, 3, payload, plen, SQLITE_STATIC);
      sqlite3_bind_int64(ev, 4, (long long)clock_ms);
      step(db, ev);
    }
    pending = group;
    exec(db, "COMMIT");
    commits++;
  }
  double cpu = cpu_us() - c0, wall = wall_s() - w0;
  printf("{\"schema\":%d,\"mode\":\"%s\",\"sync\":\"%s\",\"runs\":%d,\"chats\":%d,\"group\":%d,"
         "\"commits\":%d,\"cpu_us_per_run\":%.2f,\"cpu_us_per_commit\":%.1f,\"runs_per_s\":%.0f}\n",
         schema, bare ? "bare" : "schema", sync, runs, n_chats, group, commits, cpu / runs,
         cpu / commits, runs / wall);
  sqlite3_finalize(ci);
  sqlite3_finalize(ins);
  sqlite3_finalize(ev);
  sqlite3_finalize(upd);
  sqlite3_finalize(bi);
  sqlite3_close(db);
  free(chat);
  free(chat_seq);
  free(run_id);
  free(run_chat);
  return 0;
}
