/* test_writer.c -- writer.c: group commit (many writes, few commits, callbacks in order), a
 * savepoint per write (a failing write rolls back alone, its group commits), callbacks only
 * after the commit (another connection already sees the row), store_close draining the queue,
 * fail-at-N allocation, and SQLite I/O errors injected through a test VFS (the error reported as
 * SBX_EIO with SQLite's message, the store going on, the database consistent after reopening). */

#include "faultvfs.h"
#include "helpers.h"

#define CHAT "c0000000000000000000000000000001"

struct order {
  int next, bad;
  int n;
};
struct order_ud {
  struct order *o;
  int idx;
};
static void on_ordered(int rc, const struct sbx_error *err, void *ud) {
  struct order_ud *u = ud;
  if (rc != 0 || u->idx != u->o->next)
    u->o->bad++;
  u->o->next++;
}

START_TEST(test_group_commit) {
  struct tctx t;
  t_open(&t);
  enum { N = 300 };
  static struct order_ud uds[N];
  struct order o = {0};
  for (int i = 0; i < N; i++) {
    char key[32];
    snprintf(key, sizeof key, "k%d", i);
    uds[i] = (struct order_ud){&o, i};
    ck_assert_int_eq(store_setting_put(t.st, key, "v", on_ordered, &uds[i]), 0);
  }
  t_wait(&t);
  ck_assert_int_eq(o.next, N);
  ck_assert_int_eq(o.bad, 0);
  struct store_stats s;
  store_get_stats(t.st, &s);
  ck_assert_uint_eq(s.writes, N);
  ck_assert_uint_eq(s.write_errors, 0);
  ck_assert_uint_lt(s.commits, N / 2); /* grouped */
  ck_assert_uint_gt(s.max_group, 1);
  /* one transaction per write when asked */
  store_set_group_max(t.st, 1);
  struct order o2 = {0};
  for (int i = 0; i < 20; i++) {
    uds[i] = (struct order_ud){&o2, i};
    ck_assert_int_eq(store_setting_put(t.st, "one", "v", on_ordered, &uds[i]), 0);
  }
  t_wait(&t);
  struct store_stats s2;
  store_get_stats(t.st, &s2);
  ck_assert_uint_eq(s2.commits - s.commits, 20);
  t_close(&t);
}
END_TEST

/* A write that changes something and then fails. */
static int partial_exec(struct store *st, struct st_write *w, struct sbx_error *err) {
  struct st_stmt *s = st__q(&st->w, ST_SETTING_PUT);
  st__bind_text(s, 1, "partial");
  st__bind_text(s, 2, "must vanish");
  int rc = st__step_done(s, "partial", err);
  ck_assert_int_eq(rc, 0);
  return sbx_error_set(err, SBX_EINVAL, "failing on purpose after a change");
}

START_TEST(test_savepoint_per_write) {
  struct tctx t;
  t_open(&t);
  t_chat(&t, CHAT);
  struct done d0 = {0}, d1 = {0}, d2 = {0}, d3 = {0}, d4 = {0};
  t_hold(&t, &d0); /* the writer is inside the blocker: what follows queues up */
  ck_assert_int_eq(store_setting_put(t.st, "a", "1", on_done, &d1), 0);
  struct st_simple *bad = st__simple_new(partial_exec, on_done, &d2);
  ck_assert_int_eq(st__submit(t.st, &bad->w), 0);
  ck_assert_int_eq(store_event_append(t.st, "c-none", 1, "run", "{}", on_done, &d3), 0);
  ck_assert_int_eq(store_setting_put(t.st, "b", "2", on_done, &d4), 0);
  t_let_go();
  t_wait(&t);
  ck_assert_int_eq(d0.rc, 0);
  ck_assert_int_eq(d1.rc, 0);
  ck_assert_int_eq(d2.rc, SBX_EINVAL);
  ck_assert_str_eq(d2.msg, "failing on purpose after a change");
  ck_assert_int_eq(d3.rc, SBX_ENOENT);
  ck_assert_int_eq(d4.rc, 0);
  struct store_stats s;
  store_get_stats(t.st, &s);
  ck_assert_uint_ge(s.max_group, 4); /* the four writes queued behind the gate went together */
  ck_assert_uint_eq(s.write_errors, 2);
  char *v;
  ck_assert_int_eq(store_setting_get(t.st, "a", &v), 0);
  ck_assert_str_eq(v, "1");
  sbx_free(v);
  ck_assert_int_eq(store_setting_get(t.st, "b", &v), 0);
  sbx_free(v);
  ck_assert_int_eq(store_setting_get(t.st, "partial", &v), SBX_ENOENT);
  t_close(&t);
}
END_TEST

/* A transaction's first write runs without a savepoint of its own (writer.c): when it fails
 * after a change, the transaction, which holds nothing else, is rolled back whole and the writes
 * behind it commit in a new one; and what one turn of the loop submits goes to the writer as one
 * group (the cork), one commit. */
START_TEST(test_first_write_alone) {
  struct tctx t;
  t_open(&t);
  struct done d0 = {0}, d1 = {0}, d2 = {0};
  t_hold(&t, &d0);
  struct st_simple *bad = st__simple_new(partial_exec, on_done, &d1);
  ck_assert_int_eq(st__submit(t.st, &bad->w), 0); /* the first of the next group */
  ck_assert_int_eq(store_setting_put(t.st, "after", "1", on_done, &d2), 0);
  st__uncork(t.st);
  t_let_go();
  t_wait(&t);
  ck_assert_int_eq(d1.rc, SBX_EINVAL);
  ck_assert_int_eq(d2.rc, 0);
  char *v;
  ck_assert_int_eq(store_setting_get(t.st, "partial", &v), SBX_ENOENT); /* rolled back */
  ck_assert_int_eq(store_setting_get(t.st, "after", &v), 0);
  ck_assert_str_eq(v, "1");
  sbx_free(v);
  /* three writes in one turn of the loop: one commit */
  struct store_stats s0, s1;
  store_get_stats(t.st, &s0);
  struct done e[3] = {{0}};
  for (int i = 0; i < 3; i++)
    ck_assert_int_eq(store_setting_put(t.st, "turn", "x", on_done, &e[i]), 0);
  t_wait(&t);
  store_get_stats(t.st, &s1);
  ck_assert_uint_eq(s1.commits - s0.commits, 1);
  ck_assert_uint_eq(s1.writes - s0.writes, 3);
  t_close(&t);
}
END_TEST

/* Callbacks come after the commit: a connection of its own sees the row already. */
struct seen {
  const char *dir;
  int checked, visible;
};
static void on_check_visible(int rc, const struct sbx_error *err, void *ud) {
  struct seen *s = ud;
  ck_assert_int_eq(rc, 0);
  s->visible = (int)t_sql_int(s->dir, "SELECT count(*) FROM settings WHERE key = 'durable'") == 1;
  s->checked = 1;
}

START_TEST(test_callback_after_commit) {
  struct tctx t;
  t_open(&t);
  struct seen s = {t.dir, 0, 0};
  ck_assert_int_eq(store_setting_put(t.st, "durable", "yes", on_check_visible, &s), 0);
  t_wait(&t);
  ck_assert_int_eq(s.checked, 1);
  ck_assert_int_eq(s.visible, 1);
  ck_assert_int_eq(store_ping(t.st, NULL), 0);
  t_close(&t);
}
END_TEST

static struct store *closing_store;
static int requeue_rc = 1;
static void on_requeue(int rc, const struct sbx_error *err, void *ud) {
  requeue_rc = store_setting_put(closing_store, "late", "v", on_done, ud);
}

START_TEST(test_close_drains) {
  struct tctx t;
  t_open(&t);
  struct done d[50];
  memset(d, 0, sizeof d);
  for (int i = 0; i < 50; i++)
    ck_assert_int_eq(store_setting_put(t.st, "k", "v", on_done, &d[i]), 0);
  struct done late = {0};
  closing_store = t.st;
  ck_assert_int_eq(store_setting_put(t.st, "k2", "v", on_requeue, &late), 0);
  store_close(t.st); /* without running the loop: close runs every callback itself */
  ck_assert_int_eq(requeue_rc, SBX_ECLOSED); /* queued from a callback run by close: refused */
  ck_assert_int_eq(late.called, 0);
  for (int i = 0; i < 50; i++) {
    ck_assert_int_eq(d[i].called, 1);
    ck_assert_int_eq(d[i].rc, 0);
  }
  ck_assert_int_eq(uv_run(&t.loop, UV_RUN_DEFAULT), 0);
  ck_assert_int_eq(uv_loop_close(&t.loop), 0);
  t_reopen(&t);
  char *v;
  ck_assert_int_eq(store_setting_get(t.st, "k", &v), 0);
  sbx_free(v);
  t_close(&t);
}
END_TEST

START_TEST(test_alloc_fail_at_n) {
  struct tctx t;
  t_open(&t);
  uint64_t n;
  for (n = 1; n < 100; n++) {
    struct done d = {0};
    sbx_alloc_fail_at(n, 0);
    int rc = store_setting_put(t.st, "key", "value", on_done, &d);
    if (rc == 0)
      t_wait(&t);
    uint64_t used = sbx_alloc_count();
    sbx_alloc_fail_at(0, 0);
    if (rc != 0) {
      ck_assert_int_eq(rc, SBX_ENOMEM);
      ck_assert_int_eq(d.called, 0); /* an error return never also calls back */
      continue;
    }
    ck_assert_int_eq(d.called, 1);
    ck_assert_int_eq(d.rc, 0);
    if (used < n)
      break;
  }
  ck_assert_uint_lt(n, 100);
  t_close(&t);
}
END_TEST

struct io_ud {
  int rc;
  int called;
  char msg[512];
};
static void on_io(int rc, const struct sbx_error *err, void *ud) {
  struct io_ud *u = ud;
  u->called++;
  u->rc = rc;
  snprintf(u->msg, sizeof u->msg, "%s", err ? err->msg : "");
}

START_TEST(test_io_errors) {
  T_SQLITE_ONLY("I/O errors injected through SQLite's VFS");
  fault_register();
  struct tctx t;
  t_open(&t);
  t_chat(&t, CHAT);
  enum { ROUNDS = 24, PER = 6 };
  static struct io_ud res[ROUNDS * 2][PER];
  int reported = 0;
  for (int r = 0; r < ROUNDS * 2; r++) {
    int at = r % ROUNDS + 1;
    if (r < ROUNDS)
      fault_arm(at, 0); /* fail the at-th write */
    else
      fault_arm(0, (at + 1) / 2); /* fail the at/2-th sync */
    for (int i = 0; i < PER; i++) {
      char key[32];
      snprintf(key, sizeof key, "r%d-%d", r, i);
      ck_assert_int_eq(store_setting_put(t.st, key, "v", on_io, &res[r][i]), 0);
    }
    t_wait(&t);
    int fired = fv_fired;
    fault_arm(0, 0);
    for (int i = 0; i < PER; i++) {
      ck_assert_int_eq(res[r][i].called, 1);
      if (res[r][i].rc != 0) {
        ck_assert_msg(res[r][i].rc == SBX_EIO, "round %d: rc %d (%s)", r, res[r][i].rc,
                      res[r][i].msg);
        ck_assert_msg(strstr(res[r][i].msg, "I/O error") != NULL, "message: %s", res[r][i].msg);
        ck_assert_int_gt(fired, 0);
        reported++;
      }
    }
    /* the store goes on after the fault */
    struct done d = {0};
    ck_assert_int_eq(store_setting_put(t.st, "after", "ok", on_done, &d), 0);
    t_wait(&t);
    ck_assert_msg(d.rc == 0, "round %d: write after the fault: %s", r, d.msg);
  }
  ck_assert_int_gt(reported, 0);
  t_close_keep(&t);
  /* reopened: consistent, every acknowledged write there */
  sqlite3 *db;
  char path[300];
  snprintf(path, sizeof path, "%s/cerea.db", t.dir);
  ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
  sqlite3_stmt *q;
  ck_assert_int_eq(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &q, NULL), SQLITE_OK);
  ck_assert_int_eq(sqlite3_step(q), SQLITE_ROW);
  ck_assert_str_eq((const char *)sqlite3_column_text(q, 0), "ok");
  sqlite3_finalize(q);
  ck_assert_int_eq(sqlite3_prepare_v2(db, "SELECT 1 FROM settings WHERE key = ?1", -1, &q, NULL),
                   SQLITE_OK);
  for (int r = 0; r < ROUNDS * 2; r++)
    for (int i = 0; i < PER; i++) {
      if (res[r][i].rc != 0)
        continue;
      char key[32];
      snprintf(key, sizeof key, "r%d-%d", r, i);
      sqlite3_bind_text(q, 1, key, -1, SQLITE_TRANSIENT);
      ck_assert_msg(sqlite3_step(q) == SQLITE_ROW, "acknowledged %s missing", key);
      sqlite3_reset(q);
    }
  sqlite3_finalize(q);
  sqlite3_close(db);
  t_rmrf(t.dir);
}
END_TEST

int main(void) {
  Suite *s = suite_create("writer");
  TCase *tc = tcase_create("writer");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_group_commit);
  tcase_add_test(tc, test_savepoint_per_write);
  tcase_add_test(tc, test_first_write_alone);
  tcase_add_test(tc, test_callback_after_commit);
  tcase_add_test(tc, test_close_drains);
  tcase_add_test(tc, test_alloc_fail_at_n);
  tcase_add_test(tc, test_io_errors);
  return t_run_suite(s, tc);
}
