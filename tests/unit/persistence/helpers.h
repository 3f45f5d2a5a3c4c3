/* helpers.h -- what the persistence tests share: a store in a fresh temporary directory on its
 * own loop, a callback recorder, and the teardown that insists nothing is left open
 * (uv_loop_close() == 0).  Header-only (static functions) so each suite is one executable. */
#ifndef SBX_TEST_STORE_HELPERS_H
#define SBX_TEST_STORE_HELPERS_H

#define _XOPEN_SOURCE 700
#include <check.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "store.h"

struct tctx {
  uv_loop_t loop;
  char dir[256];
  struct store *st;
};

struct done {
  int called;
  int rc;
  char msg[512];
};

static inline void on_done(int rc, const struct sbx_error *err, void *ud) {
  struct done *d = ud;
  d->called++;
  d->rc = rc;
  snprintf(d->msg, sizeof d->msg, "%s", err ? err->msg : "");
  if (rc == 0)
    ck_assert_ptr_null(err);
  else
    ck_assert_ptr_nonnull(err);
}

static inline int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *f) {
  (void)sb, (void)flag, (void)f;
  return remove(p);
}

static inline void t_rmrf(const char *dir) { nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

static inline void t_mkdir(struct tctx *t) {
  const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  snprintf(t->dir, sizeof t->dir, "%s/sbx-store-XXXXXX", base);
  ck_assert_ptr_nonnull(mkdtemp(t->dir));
}

static inline void t_open(struct tctx *t) {
  struct sbx_error err = {0};
  t_mkdir(t);
  ck_assert_int_eq(uv_loop_init(&t->loop), 0);
  int rc = store_open(&t->loop, t->dir, &t->st, &err);
  ck_assert_msg(rc == 0, "store_open: %s", err.msg);
}

/* Reopens the same directory (after t_close_keep). */
static inline void t_reopen(struct tctx *t) {
  struct sbx_error err = {0};
  ck_assert_int_eq(uv_loop_init(&t->loop), 0);
  int rc = store_open(&t->loop, t->dir, &t->st, &err);
  ck_assert_msg(rc == 0, "store_open: %s", err.msg);
}

static inline void t_close_keep(struct tctx *t) {
  store_close(t->st);
  t->st = NULL;
  ck_assert_int_eq(uv_run(&t->loop, UV_RUN_DEFAULT), 0);
  ck_assert_int_eq(uv_loop_close(&t->loop), 0);
}

static inline void t_close(struct tctx *t) {
  t_close_keep(t);
  t_rmrf(t->dir);
}

/* A connection of its own to DATA/cerea.db, beside the store (raw SQL in tests). */
static inline sqlite3 *raw_open(const char *dir) {
  char path[512];
  sqlite3 *db;
  snprintf(path, sizeof path, "%s/cerea.db", dir);
  ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
  return db;
}

static inline int raw_int(sqlite3 *db, const char *sql) {
  sqlite3_stmt *s;
  ck_assert_int_eq(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK);
  ck_assert_int_eq(sqlite3_step(s), SQLITE_ROW);
  int v = sqlite3_column_int(s, 0);
  sqlite3_finalize(s);
  return v;
}

/* The query plan of sql on db, its detail lines joined by "; ". */
static inline void plan_of(sqlite3 *db, const char *sql, char *out, size_t cap) {
  char q[4096];
  snprintf(q, sizeof q, "EXPLAIN QUERY PLAN %s", sql);
  sqlite3_stmt *s;
  ck_assert_int_eq(sqlite3_prepare_v2(db, q, -1, &s, NULL), SQLITE_OK);
  size_t len = 0;
  out[0] = '\0';
  while (sqlite3_step(s) == SQLITE_ROW && len < cap)
    len += (size_t)snprintf(out + len, cap - len, "%s; ", (const char *)sqlite3_column_text(s, 3));
  sqlite3_finalize(s);
}

/* Runs the loop until every queued write's callback has run. */
static inline void t_wait(struct tctx *t) { uv_run(&t->loop, UV_RUN_DEFAULT); }

static inline void t_chat(struct tctx *t, const char *id) {
  struct store_chat c = {0};
  struct done d = {0};
  snprintf(c.id, sizeof c.id, "%s", id);
  store_sha256_hex("token", 5, c.token_hash);
  c.created_at = sbx_now_wall_ms();
  ck_assert_int_eq(store_chat_create(t->st, &c, on_done, &d), 0);
  t_wait(t);
  ck_assert_int_eq(d.called, 1);
  ck_assert_msg(d.rc == 0, "chat create: %s", d.msg);
}

/* store_file_add, waiting; returns rc, fills *out (copy, caller frees) when rc == 0. */
struct added {
  int called, rc, created;
  char msg[512];
  struct store_file f;
};

static inline void on_added(int rc, const struct sbx_error *err, const struct store_file_added *res,
                            void *ud) {
  struct added *a = ud;
  a->called++;
  a->rc = rc;
  snprintf(a->msg, sizeof a->msg, "%s", err ? err->msg : "");
  if (rc == 0) {
    a->created = res->created;
    a->f = res->file;
    a->f.name = sbx_strdup(res->file.name);
    a->f.left_out_reason = res->file.left_out_reason ? sbx_strdup(res->file.left_out_reason) : NULL;
    a->f.kind = res->file.kind ? sbx_strdup(res->file.kind) : NULL;
  } else {
    ck_assert_ptr_null(res);
  }
}

/* store_file_add of `in`, waiting: the refused submit's rc, or the callback's (a filled). */
static inline int t_add_in(struct tctx *t, const struct store_file_in *in, struct added *a) {
  memset(a, 0, sizeof *a);
  int rc = store_file_add(t->st, in, on_added, a);
  if (rc != 0)
    return rc;
  t_wait(t);
  ck_assert_int_eq(a->called, 1);
  return a->rc;
}

static inline int t_add(struct tctx *t, const char *chat, const char *name, enum store_source src,
                        const char *data, struct added *a) {
  struct store_file_in in = {0};
  in.chat_id = chat;
  in.name = name;
  in.source = src;
  in.mounted = 1;
  in.data = data;
  in.size = strlen(data);
  return t_add_in(t, &in, a);
}

/* One round of a fault-injection loop over a file add: a refused submit (rc) must be ENOMEM
 * with no callback; an accepted one called back once, ok or ENOMEM (*ok counts the oks, their
 * copies freed).  Returns 0 when the submit was refused (the caller goes on to the next n). */
static inline int t_add_outcome(int rc, struct added *a, int *ok) {
  if (rc != 0) {
    ck_assert_int_eq(rc, SBX_ENOMEM);
    ck_assert_int_eq(a->called, 0);
    return 0;
  }
  ck_assert_int_eq(a->called, 1);
  ck_assert_msg(a->rc == 0 || a->rc == SBX_ENOMEM, "rc %d", a->rc);
  if (a->rc == 0) {
    (*ok)++;
    store_file_free(&a->f);
  }
  return 1;
}

/* The tail of every suite's main(): adds the case, runs it forked (CK_FORK, so one test's
 * crash or leak check does not take the others with it), returns the exit status. */
static inline int t_run_suite(Suite *s, TCase *tc) {
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_set_fork_status(sr, CK_FORK);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}

#endif
