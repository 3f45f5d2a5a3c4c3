/* test_runs.c -- runs.c: the whole run row round-trips, put replaces, seq is assigned when 0,
 * idempotency keys (conflict names the other run), unknown chat, a run never moves chats, a later
 * put keeps the run's identity (chat, seq, key, created_at) and its UPDATE writes no chat-keyed
 * index (checked on the bytecode), the unfinished list for start-up, newest-first lists, and run
 * files in the order written; the record's copy and free. */
#include "helpers.h"

#define CHAT  "c0000000000000000000000000000001"
#define CHAT2 "c0000000000000000000000000000002"

static struct store_run mk(const char *id, const char *chat, const char *state, int64_t at) {
  struct store_run r = {0};
  snprintf(r.id, sizeof r.id, "%s", id);
  snprintf(r.chat_id, sizeof r.chat_id, "%s", chat);
  r.code = "print('hi')";
  r.origin = "tool";
  r.state = (char *)state;
  r.timeout_s = 60;
  r.created_at = at;
  return r;
}

/* Every field a result sets, as a finished run has them. */
static void finish(struct store_run *r) {
  r->state = "done";
  r->status = "ok";
  r->attempts = 2;
  r->stdout_text = "hi\n";
  r->stderr_text = "";
  r->stdout_truncated = 1;
  r->stderr_truncated = 0;
  r->error_json = "{\"type\":\"ValueError\"}";
  r->notes_json = "[\"n\"]";
  r->remounted_json = "[\"a.csv\"]";
  r->value_json = "{\"text/plain\":\"42\"}";
  r->displays_json = "[{\"text/plain\":\"1\"}]";
  r->restarted = 1;
  r->files_unlisted = 3;
  r->figures_dropped = 4;
  r->result_hash = "abc";
  r->started_at = 101;
  r->finished_at = 102;
}

static int put(struct tctx *t, const struct store_run *r, struct done *d) {
  memset(d, 0, sizeof *d);
  ck_assert_int_eq(store_run_put(t->st, r, on_done, d), 0);
  t_wait(t);
  ck_assert_int_eq(d->called, 1);
  return d->rc;
}

START_TEST(test_run_roundtrip) {
  struct tctx t;
  struct done d;
  t_open(&t);
  t_chat(&t, CHAT);
  struct store_run r = mk("r0000000000000000000000000000001", CHAT, "queued", 100);
  snprintf(r.turn_id, sizeof r.turn_id, "t0000000000000000000000000000001");
  r.idempotency_key = "key-1";
  ck_assert_int_eq(put(&t, &r, &d), 0);
  struct store_run g;
  ck_assert_int_eq(store_run_get(t.st, r.id, &g), 0);
  ck_assert_str_eq(g.state, "queued");
  ck_assert_ptr_null(g.status);
  ck_assert_int_eq(g.seq, 1);
  ck_assert_str_eq(g.turn_id, r.turn_id);
  store_run_free(&g);
  finish(&r); /* the finished run: every field */
  ck_assert_int_eq(put(&t, &r, &d), 0);
  ck_assert_int_eq(store_run_get(t.st, r.id, &g), 0);
  ck_assert_str_eq(g.state, "done");
  ck_assert_str_eq(g.status, "ok");
  ck_assert_int_eq(g.attempts, 2);
  ck_assert_str_eq(g.stdout_text, "hi\n");
  ck_assert_str_eq(g.stderr_text, "");
  ck_assert_int_eq(g.stdout_truncated, 1);
  ck_assert_str_eq(g.error_json, r.error_json);
  ck_assert_str_eq(g.notes_json, r.notes_json);
  ck_assert_str_eq(g.remounted_json, r.remounted_json);
  ck_assert_str_eq(g.value_json, r.value_json);
  ck_assert_str_eq(g.displays_json, r.displays_json);
  ck_assert_int_eq(g.restarted, 1);
  ck_assert_int_eq(g.files_unlisted, 3);
  ck_assert_int_eq(g.figures_dropped, 4);
  ck_assert_str_eq(g.result_hash, "abc");
  ck_assert_str_eq(g.idempotency_key, "key-1");
  ck_assert_int_eq(g.seq, 1); /* kept on update */
  ck_assert_int_eq(g.created_at, 100);
  ck_assert_int_eq(g.started_at, 101);
  ck_assert_int_eq(g.finished_at, 102);
  ck_assert_int_eq(g.timeout_s, 60);
  store_run_free(&g);
  ck_assert_int_eq(store_run_get(t.st, "nope", &g), SBX_ENOENT);
  store_id got;
  ck_assert_int_eq(store_run_by_idempotency(t.st, CHAT, "key-1", got), 0);
  ck_assert_str_eq(got, r.id);
  ck_assert_int_eq(store_run_by_idempotency(t.st, CHAT, "key-2", got), SBX_ENOENT);
  /* another run with the same key: refused, naming the first */
  struct store_run r2 = mk("r0000000000000000000000000000002", CHAT, "queued", 110);
  r2.idempotency_key = "key-1";
  ck_assert_int_eq(put(&t, &r2, &d), SBX_EEXIST);
  ck_assert_str_eq(d.msg, r.id);
  /* no key: fine; seq continues */
  r2.idempotency_key = NULL;
  ck_assert_int_eq(put(&t, &r2, &d), 0);
  ck_assert_int_eq(store_run_get(t.st, r2.id, &g), 0);
  ck_assert_int_eq(g.seq, 2);
  store_run_free(&g);
  /* unknown chat; moving a run to another chat */
  struct store_run r3 = mk("r0000000000000000000000000000003", "c-none", "queued", 1);
  ck_assert_int_eq(put(&t, &r3, &d), SBX_ENOENT);
  t_chat(&t, CHAT2);
  struct store_run moved = mk(r.id, CHAT2, "queued", 1);
  ck_assert_int_eq(put(&t, &moved, &d), SBX_ECONFLICT);
  struct store_run none = {0};
  ck_assert_int_eq(store_run_put(t.st, &none, on_done, &d), SBX_EINVAL);
  t_close(&t);
}
END_TEST

/* Root pages of the b-trees a statement writes (Insert / IdxInsert / IdxDelete / Delete on a
 * cursor, mapped to the root page its Open* named), as a bit set over the first 64 pages (a
 * fresh database's schema lives there). */
static uint64_t written_roots(sqlite3 *db, const char *sql) {
  char q[4096];
  snprintf(q, sizeof q, "EXPLAIN %s", sql);
  sqlite3_stmt *s;
  ck_assert_int_eq(sqlite3_prepare_v2(db, q, -1, &s, NULL), SQLITE_OK);
  int root_of_cursor[64] = {0};
  uint64_t set = 0;
  while (sqlite3_step(s) == SQLITE_ROW) {
    const char *op = (const char *)sqlite3_column_text(s, 1);
    int p1 = sqlite3_column_int(s, 2), p2 = sqlite3_column_int(s, 3);
    if (p1 < 0 || p1 >= 64)
      continue;
    if (strcmp(op, "OpenWrite") == 0 || strcmp(op, "OpenRead") == 0) {
      ck_assert_int_lt(p2, 64);
      root_of_cursor[p1] = p2;
    } else if (strcmp(op, "Insert") == 0 || strcmp(op, "IdxInsert") == 0 ||
               strcmp(op, "IdxDelete") == 0 || strcmp(op, "Delete") == 0) {
      ck_assert_int_gt(root_of_cursor[p1], 0);
      set |= 1ull << root_of_cursor[p1];
    }
  }
  sqlite3_finalize(s);
  return set;
}

static uint64_t root_of(sqlite3 *db, const char *name) {
  char q[256];
  snprintf(q, sizeof q, "SELECT rootpage FROM sqlite_schema WHERE name = '%s'", name);
  sqlite3_stmt *s;
  ck_assert_int_eq(sqlite3_prepare_v2(db, q, -1, &s, NULL), SQLITE_OK);
  ck_assert_int_eq(sqlite3_step(s), SQLITE_ROW);
  int root = sqlite3_column_int(s, 0);
  sqlite3_finalize(s);
  ck_assert_int_gt(root, 0);
  ck_assert_int_lt(root, 64);
  return 1ull << root;
}

START_TEST(test_run_update_keeps_identity) {
  struct tctx t;
  struct done d;
  t_open(&t);
  t_chat(&t, CHAT);
  t_chat(&t, CHAT2);
  struct store_run r = mk("r0000000000000000000000000000001", CHAT, "queued", 100);
  r.idempotency_key = "key-1";
  ck_assert_int_eq(put(&t, &r, &d), 0);
  /* the result put: new state and outputs; seq, key and created_at as a caller might garble them */
  r.state = "done";
  r.status = "ok";
  r.stdout_text = "out";
  r.attempts = 1;
  r.finished_at = 105;
  r.seq = 77;
  r.idempotency_key = NULL;
  r.created_at = 5;
  ck_assert_int_eq(put(&t, &r, &d), 0);
  struct store_run g;
  ck_assert_int_eq(store_run_get(t.st, r.id, &g), 0);
  ck_assert_str_eq(g.state, "done");
  ck_assert_str_eq(g.status, "ok");
  ck_assert_str_eq(g.stdout_text, "out");
  ck_assert_int_eq(g.attempts, 1);
  ck_assert_int_eq(g.finished_at, 105);
  ck_assert_int_eq(g.seq, 1);
  ck_assert_str_eq(g.idempotency_key, "key-1");
  ck_assert_int_eq(g.created_at, 100);
  store_run_free(&g);
  store_id got;
  ck_assert_int_eq(store_run_by_idempotency(t.st, CHAT, "key-1", got), 0);
  ck_assert_str_eq(got, r.id);
  /* the run's id in another chat: refused, the row untouched */
  struct store_run moved = mk(r.id, CHAT2, "running", 1);
  ck_assert_int_eq(put(&t, &moved, &d), SBX_ECONFLICT);
  ck_assert_ptr_nonnull(strstr(d.msg, "another chat"));
  ck_assert_int_eq(store_run_get(t.st, r.id, &g), 0);
  ck_assert_str_eq(g.chat_id, CHAT);
  ck_assert_str_eq(g.state, "done");
  store_run_free(&g);
  /* an explicit seq on creation is kept */
  struct store_run r2 = mk("r0000000000000000000000000000002", CHAT, "queued", 110);
  r2.seq = 1000;
  ck_assert_int_eq(put(&t, &r2, &d), 0);
  ck_assert_int_eq(store_run_get(t.st, r2.id, &g), 0);
  ck_assert_int_eq(g.seq, 1000);
  store_run_free(&g);
  /* the update's bytecode: writes the table and runs_unfinished (state), no chat-keyed index;
   * the insert's writes runs_chat_seq (so the check can see one) */
  if (!t_sqlite_part(__func__, "the run statements' SQLite bytecode")) {
    t_close(&t);
    return;
  }
  sqlite3 *db = t.st->w.lite;
  uint64_t upd = written_roots(db, sqlite3_sql(t.st->w.q[ST_RUN_UPDATE].lite));
  uint64_t ins = written_roots(db, sqlite3_sql(t.st->w.q[ST_RUN_INSERT].lite));
  uint64_t seq_idx = root_of(db, "runs_chat_seq"), idem_idx = root_of(db, "runs_idem");
  ck_assert(upd & root_of(db, "runs"));
  ck_assert(upd & root_of(db, "runs_unfinished"));
  ck_assert(!(upd & seq_idx));
  ck_assert(!(upd & idem_idx));
  ck_assert(!(upd & root_of(db, "sqlite_autoindex_runs_1")));
  ck_assert(ins & seq_idx);
  ck_assert(ins & idem_idx);
  t_close(&t);
}
END_TEST

START_TEST(test_run_lists) {
  struct tctx t;
  struct done d;
  t_open(&t);
  t_chat(&t, CHAT);
  t_chat(&t, CHAT2);
  const char *states[] = {"queued", "done", "paused", "running", "done"};
  for (int i = 0; i < 5; i++) {
    char id[40];
    snprintf(id, sizeof id, "r%031d", i);
    struct store_run r = mk(id, i % 2 ? CHAT2 : CHAT, states[i], 100 + i);
    ck_assert_int_eq(store_run_put(t.st, &r, on_done, &d), 0);
  }
  t_wait(&t);
  struct store_run *v;
  size_t n;
  ck_assert_int_eq(store_run_list_unfinished(t.st, &v, &n), 0);
  ck_assert_uint_eq(n, 3);
  ck_assert_str_eq(v[0].state, "queued"); /* oldest first */
  ck_assert_str_eq(v[1].state, "paused");
  ck_assert_str_eq(v[2].state, "running");
  store_run_list_free(v, n);
  ck_assert_int_eq(store_run_list(t.st, NULL, 2, &v, &n), 0);
  ck_assert_uint_eq(n, 2);
  ck_assert_str_eq(v[0].id, "r0000000000000000000000000000004"); /* newest first */
  store_run_list_free(v, n);
  ck_assert_int_eq(store_run_list(t.st, CHAT2, 10, &v, &n), 0);
  ck_assert_uint_eq(n, 2);
  ck_assert_str_eq(v[0].id, "r0000000000000000000000000000003");
  ck_assert_str_eq(v[1].id, "r0000000000000000000000000000001");
  store_run_list_free(v, n);
  ck_assert_int_eq(store_run_list(t.st, NULL, 10, &v, &n), 0);
  ck_assert_uint_eq(n, 5);
  for (size_t i = 0; i < n; i++) /* every run, newest first */
    ck_assert_int_eq(v[i].created_at, 104 - (int64_t)i);
  store_run_list_free(v, n);
  /* a later put of an old run does not move it */
  struct store_run old = mk("r0000000000000000000000000000000", CHAT, "done", 100);
  ck_assert_int_eq(store_run_put(t.st, &old, on_done, &d), 0);
  t_wait(&t);
  ck_assert_int_eq(store_run_list(t.st, NULL, 1, &v, &n), 0);
  ck_assert_uint_eq(n, 1);
  ck_assert_str_eq(v[0].id, "r0000000000000000000000000000004");
  store_run_list_free(v, n);
  /* the list of all runs reads only the rows it returns: no sort of the whole table (PostgreSQL's
   * plans: test_pg.c) */
  if (!t_sqlite_part(__func__, "SQLite's query plan (test_pg.c checks PostgreSQL's)")) {
    t_close(&t);
    return;
  }
  sqlite3_stmt *q;
  char sql[1024];
  snprintf(sql, sizeof sql, "EXPLAIN QUERY PLAN %s", sqlite3_sql(t.st->r.q[ST_RUN_LIST_ALL].lite));
  ck_assert_int_eq(sqlite3_prepare_v2(t.st->r.lite, sql, -1, &q, NULL), SQLITE_OK);
  int sorts = 0, rows = 0;
  while (sqlite3_step(q) == SQLITE_ROW) {
    rows++;
    sorts += strstr((const char *)sqlite3_column_text(q, 3), "TEMP B-TREE") != NULL;
  }
  sqlite3_finalize(q);
  ck_assert_int_gt(rows, 0);
  ck_assert_int_eq(sorts, 0);
  t_close(&t);
}
END_TEST

START_TEST(test_run_files) {
  struct tctx t;
  struct done d;
  struct added a, b;
  t_open(&t);
  t_chat(&t, CHAT);
  struct store_run r = mk("r0000000000000000000000000000001", CHAT, "running", 1);
  ck_assert_int_eq(store_run_put(t.st, &r, on_done, &d), 0);
  t_wait(&t);
  ck_assert_int_eq(t_add(&t, CHAT, "z-last.csv", STORE_SRC_OUTPUT, "z", &a), 0);
  ck_assert_int_eq(t_add(&t, CHAT, "figure-1.png", STORE_SRC_OUTPUT, "png", &b), 0);
  /* written order: figure first, then the csv */
  memset(&d, 0, sizeof d);
  ck_assert_int_eq(store_run_file_put(t.st, r.id, 0, b.f.id, on_done, &d), 0);
  ck_assert_int_eq(store_run_file_put(t.st, r.id, 1, a.f.id, on_done, &d), 0);
  t_wait(&t);
  ck_assert_int_eq(d.called, 2);
  ck_assert_int_eq(d.rc, 0);
  struct store_file *v;
  size_t n;
  ck_assert_int_eq(store_run_files(t.st, r.id, &v, &n), 0);
  ck_assert_uint_eq(n, 2);
  ck_assert_str_eq(v[0].name, "figure-1.png");
  ck_assert_str_eq(v[1].name, "z-last.csv");
  store_file_list_free(v, n);
  memset(&d, 0, sizeof d);
  ck_assert_int_eq(store_run_file_put(t.st, "r-none", 0, a.f.id, on_done, &d), 0);
  t_wait(&t);
  ck_assert_int_eq(d.rc, SBX_ENOENT);
  ck_assert_int_eq(store_run_file_put(t.st, r.id, 2, "f-none", on_done, &d), 0);
  t_wait(&t);
  ck_assert_int_eq(d.rc, SBX_ENOENT);
  ck_assert_ptr_nonnull(strstr(d.msg, "no file"));
  ck_assert_int_eq(store_run_file_put(t.st, r.id, -1, a.f.id, on_done, &d), SBX_EINVAL);
  ck_assert_int_eq(store_run_files(t.st, "r-none", &v, &n), 0);
  ck_assert_uint_eq(n, 0);
  store_file_free(&a.f);
  store_file_free(&b.f);
  t_close(&t);
}
END_TEST

START_TEST(test_run_alloc_fail_at_n) {
  struct tctx t;
  t_open(&t);
  t_chat(&t, CHAT);
  uint64_t n;
  for (n = 1; n < 200; n++) {
    struct done d = {0};
    struct store_run r = mk("r0000000000000000000000000000001", CHAT, "done", 1);
    r.status = "ok";
    r.stdout_text = "out";
    r.notes_json = "[]";
    sbx_alloc_fail_at(n, 0);
    int rc = store_run_put(t.st, &r, on_done, &d);
    if (rc == 0)
      t_wait(&t);
    struct store_run g;
    int grc = store_run_get(t.st, r.id, &g);
    uint64_t used = sbx_alloc_count();
    sbx_alloc_fail_at(0, 0);
    if (rc != 0)
      ck_assert_int_eq(rc, SBX_ENOMEM);
    else
      ck_assert_int_eq(d.rc, 0);
    ck_assert_msg(grc == 0 || grc == SBX_ENOMEM || grc == SBX_ENOENT, "get %d", grc);
    if (grc == 0)
      store_run_free(&g);
    if (rc == 0 && grc == 0 && used < n)
      break;
  }
  ck_assert_uint_lt(n, 200);
  t_close(&t);
}
END_TEST

/* store_run_copy / store_run_free: the record's copy and free, the one pair the orchestrator
 * uses too.  Every string member is duplicated (a pointer of its own, equal text), NULL stays
 * NULL, the other members are copied; free zeroes the whole struct; a copy that runs out of
 * memory at any of its allocations leaves dst zeroed (and ASan sees nothing leak). */
static void assert_zeroed(const struct store_run *r) {
  static const struct store_run zero;
  ck_assert_msg(memcmp(r, &zero, sizeof zero) == 0, "not zeroed");
}

static void assert_same_str(const char *a, const char *b) {
  if (b == NULL) {
    ck_assert_ptr_null(a);
    return;
  }
  ck_assert_ptr_nonnull(a);
  ck_assert_ptr_ne(a, b);
  ck_assert_str_eq(a, b);
}

static void assert_copy_of(const struct store_run *c, const struct store_run *r) {
  ck_assert_str_eq(c->id, r->id);
  ck_assert_str_eq(c->chat_id, r->chat_id);
  ck_assert_str_eq(c->turn_id, r->turn_id);
  const char *const got[] = {c->code,           c->origin,      c->state,           c->status,
                             c->stdout_text,    c->stderr_text, c->error_json,      c->notes_json,
                             c->remounted_json, c->result_hash, c->idempotency_key, c->value_json,
                             c->displays_json};
  const char *const want[] = {r->code,           r->origin,      r->state,           r->status,
                              r->stdout_text,    r->stderr_text, r->error_json,      r->notes_json,
                              r->remounted_json, r->result_hash, r->idempotency_key, r->value_json,
                              r->displays_json};
  for (size_t i = 0; i < SBX_ARRAY_SIZE(want); i++)
    assert_same_str(got[i], want[i]);
  ck_assert_int_eq(c->timeout_s, r->timeout_s);
  ck_assert_int_eq(c->attempts, r->attempts);
  ck_assert_int_eq(c->stdout_truncated, r->stdout_truncated);
  ck_assert_int_eq(c->stderr_truncated, r->stderr_truncated);
  ck_assert_int_eq(c->restarted, r->restarted);
  ck_assert_int_eq(c->files_unlisted, r->files_unlisted);
  ck_assert_int_eq(c->figures_dropped, r->figures_dropped);
  ck_assert_int_eq(c->seq, r->seq);
  ck_assert_int_eq(c->created_at, r->created_at);
  ck_assert_int_eq(c->started_at, r->started_at);
  ck_assert_int_eq(c->finished_at, r->finished_at);
}

START_TEST(test_run_copy_free) {
  struct store_run r = mk("r0000000000000000000000000000001", CHAT, "queued", 7);
  snprintf(r.turn_id, sizeof r.turn_id, "t1");
  finish(&r);
  r.error_json = NULL; /* NULL stays NULL; "" (stderr_text) is not NULL */
  r.idempotency_key = "k";
  r.seq = 5;
  struct store_run c;
  ck_assert_int_eq(store_run_copy(&c, &r), 0);
  assert_copy_of(&c, &r);
  ck_assert_ptr_null(c.error_json);
  store_run_free(&c);
  assert_zeroed(&c);
  store_run_free(&c); /* a zeroed record frees again harmlessly */
  store_run_free(NULL);
  /* a record of NULL strings copies to one */
  struct store_run empty = {0}, e;
  ck_assert_int_eq(store_run_copy(&e, &empty), 0);
  assert_zeroed(&e);
  /* out of memory at the n-th allocation, for every n until the copy needs no more */
  uint64_t n;
  for (n = 1; n < 64; n++) {
    memset(&c, 0x5a, sizeof c); /* dst is overwritten, whatever it held */
    sbx_alloc_fail_at(n, 0);
    int rc = store_run_copy(&c, &r);
    uint64_t used = sbx_alloc_count();
    sbx_alloc_fail_at(0, 0);
    if (rc != 0) {
      ck_assert_int_eq(rc, SBX_ENOMEM);
      assert_zeroed(&c);
      continue;
    }
    assert_copy_of(&c, &r);
    store_run_free(&c);
    if (used < n)
      break;
  }
  ck_assert_uint_eq(n, 13); /* twelve strings were duplicated: the 13th allocation never came */
}
END_TEST

int main(void) {
  Suite *s = suite_create("runs");
  TCase *tc = tcase_create("runs");
  tcase_add_test(tc, test_run_roundtrip);
  tcase_add_test(tc, test_run_update_keeps_identity);
  tcase_add_test(tc, test_run_lists);
  tcase_add_test(tc, test_run_files);
  tcase_add_test(tc, test_run_alloc_fail_at_n);
  tcase_add_test(tc, test_run_copy_free);
  return t_run_suite(s, tc);
}
