/* test_nodes.c -- nodes.c, on a real PostgreSQL server (STORE_TEST_PG; on SQLite only the
 * refusals run): a lease taken, renewed by its holder, refused to another node until it expires
 * or is released, its epochs logged; renewing every lease of a node; two processes racing for the
 * same leases never holding one at once (the database's lease_log says so); notifications from
 * one store reaching another's listener after the notifying group committed, and "*" after the
 * listen connection was lost and opened again; the migration from schema 1 to 2 keeping rows;
 * fencing by lease epoch: a node's writes of a chat commit only while it holds the chat's lease at
 * the epoch it took, the lease's row stays locked until they did, and a writer stopped inside a
 * transaction is ended by the server. */
#include <sys/wait.h>

#include "helpers.h"

#define CHAT  "c0000000000000000000000000000001"
#define CHAT2 "c0000000000000000000000000000002"
#define NODEA "a0000000000000000000000000000001"
#define NODEB "b0000000000000000000000000000002"

static struct store_lease take(struct store *st, const char *chat, const char *node, uint64_t ms) {
  struct store_lease l;
  struct sbx_error err = {0};
  char url[64];
  snprintf(url, sizeof url, "http://node-%c:8080", node[0]);
  int rc = store_lease_take(st, chat, node, url, ms, &l, &err);
  ck_assert_msg(rc == 0, "lease take: %s", err.msg);
  return l;
}

START_TEST(test_sqlite_refuses) {
  if (t_pg())
    return; /* the PostgreSQL run has the real tests below */
  struct tctx t;
  t_open(&t);
  struct store_lease l;
  struct sbx_error err = {0};
  size_t n;
  ck_assert_int_eq(store_shared(t.st), 0);
  ck_assert_int_eq(store_lease_take(t.st, CHAT, NODEA, "http://a", 1000, &l, &err), SBX_EINVAL);
  ck_assert_ptr_nonnull(strstr(err.msg, "CEREA_DATABASE_URL"));
  ck_assert_int_eq(store_lease_renew(t.st, NODEA, 1000, &n, &err), SBX_EINVAL);
  ck_assert_int_eq(store_notify(t.st, "x", NULL, NULL), SBX_EINVAL);
  t_close(&t);
}
END_TEST

START_TEST(test_lease_take_renew_expire) {
  T_PG_ONLY("chat leases live in PostgreSQL");
  struct tctx t;
  t_open(&t);
  ck_assert_int_eq(store_shared(t.st), 1);
  struct store_lease l = take(t.st, CHAT, NODEA, 10000);
  ck_assert_int_eq(l.mine, 1);
  ck_assert_int_eq(l.epoch, 1);
  /* another node: refused, told who holds it and for how long */
  l = take(t.st, CHAT, NODEB, 10000);
  ck_assert_int_eq(l.mine, 0);
  ck_assert_str_eq(l.node_id, NODEA);
  ck_assert_str_eq(l.node_url, "http://node-a:8080");
  ck_assert_uint_gt(l.left_ms, 8000);
  ck_assert_uint_le(l.left_ms, 10000);
  /* the holder again: renewed, same epoch */
  l = take(t.st, CHAT, NODEA, 300);
  ck_assert_int_eq(l.mine, 1);
  ck_assert_int_eq(l.epoch, 1);
  usleep(450000); /* expired by the database's clock */
  l = take(t.st, CHAT, NODEB, 10000);
  ck_assert_int_eq(l.mine, 1);
  ck_assert_int_eq(l.epoch, 2);
  ck_assert_int_eq(take(t.st, CHAT, NODEA, 10000).mine, 0);
  /* released: free at once for the next */
  struct sbx_error err = {0};
  ck_assert_int_eq(store_lease_release(t.st, CHAT, NODEB, &err), 0);
  l = take(t.st, CHAT, NODEA, 10000);
  ck_assert_int_eq(l.mine, 1);
  ck_assert_int_eq(l.epoch, 3);
  /* a release by a node that does not hold it changes nothing */
  ck_assert_int_eq(store_lease_release(t.st, CHAT, NODEB, &err), 0);
  ck_assert_int_eq(take(t.st, CHAT, NODEB, 10000).mine, 0);
  /* renewing every lease of a node */
  ck_assert_int_eq(take(t.st, CHAT2, NODEA, 10000).mine, 1);
  size_t n = 0;
  ck_assert_int_eq(store_lease_renew(t.st, NODEA, 20000, &n, &err), 0);
  ck_assert_uint_eq(n, 2);
  ck_assert_int_eq(store_lease_renew(t.st, NODEB, 20000, &n, &err), 0);
  ck_assert_uint_eq(n, 0);
  ck_assert_uint_gt(take(t.st, CHAT2, NODEB, 1000).left_ms, 15000);
  /* the log: one row per epoch, in order, none overlapping the next */
  ck_assert_int_eq(t_sql_int(t.dir, "SELECT count(*) FROM lease_log WHERE chat_id = '" CHAT "'"),
                   3);
  ck_assert_int_eq(t_sql_int(t.dir, "SELECT count(*) FROM lease_log a JOIN lease_log b ON "
                                    "b.chat_id = a.chat_id AND b.epoch = a.epoch + 1 "
                                    "WHERE b.taken_at < a.until_at"),
                   0);
  /* all of a node's leases let go */
  ck_assert_int_eq(store_lease_release(t.st, NULL, NODEA, &err), 0);
  ck_assert_int_eq(take(t.st, CHAT, NODEB, 1000).mine, 1);
  ck_assert_int_eq(take(t.st, CHAT2, NODEB, 1000).mine, 1);
  t_close(&t);
}
END_TEST

/* Two processes (two nodes, a store each) take short leases of the same chats over and over;
 * whoever holds one renews it a few times, then lets it expire.  The database's log of epochs
 * must never show two holders at once. */
START_TEST(test_lease_race) {
  T_PG_ONLY("chat leases live in PostgreSQL");
  struct tctx t;
  t_mkdir(&t);
  enum { NODES = 3, ROUNDS = 150 };
  pid_t pids[NODES];
  for (int i = 0; i < NODES; i++) {
    if ((pids[i] = fork()) == 0) {
      char dir[300], node[40];
      snprintf(dir, sizeof dir, "%s/node%d", t.dir, i);
      snprintf(node, sizeof node, "%c%031d", 'a' + i, i);
      char url[1024];
      t_url(t.dir, url, sizeof url);
      uv_loop_t loop;
      struct store *st = NULL;
      struct sbx_error err = {0};
      uv_loop_init(&loop);
      if (store_open_url(&loop, dir, url, &st, &err) != 0)
        _exit(2);
      int held = 0;
      for (int r = 0; r < ROUNDS; r++) {
        const char *chat = r % 2 ? CHAT : CHAT2;
        struct store_lease l;
        int rc = store_lease_take(st, chat, node, "http://x", 40, &l, &err);
        if (rc != 0 && rc != SBX_EAGAIN)
          _exit(3);
        if (rc == 0 && l.mine) { /* renewed twice, then left to expire for the others */
          held++;
          for (int k = 0; k < 2; k++)
            if (store_lease_take(st, chat, node, "http://x", 40, &l, &err) != 0)
              _exit(3);
          usleep(45000);
        } else {
          usleep(1000 * (unsigned)(r % 7));
        }
      }
      store_close(st);
      uv_run(&loop, UV_RUN_DEFAULT);
      _exit(held > 0 ? 0 : 4);
    }
  }
  for (int i = 0; i < NODES; i++) {
    int status;
    ck_assert_int_eq(waitpid(pids[i], &status, 0), pids[i]);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "node %d: status %d", i, status);
  }
  int64_t epochs = t_sql_int(t.dir, "SELECT count(*) FROM lease_log");
  fprintf(stderr, "lease race: %lld epochs over 2 chats\n", (long long)epochs);
  ck_assert_int_gt(epochs, 4); /* the leases did change hands */
  ck_assert_int_eq(t_sql_int(t.dir, "SELECT count(*) FROM lease_log a JOIN lease_log b ON "
                                    "b.chat_id = a.chat_id AND b.epoch > a.epoch "
                                    "WHERE b.taken_at < a.until_at"),
                   0);
  /* epochs are contiguous: each one taken, none skipped */
  ck_assert_int_eq(t_sql_int(t.dir, "SELECT count(*) FROM (SELECT chat_id, max(epoch) - count(*) "
                                    "AS gap FROM lease_log GROUP BY chat_id) g WHERE gap <> 0"),
                   0);
  t_rmrf(t.dir);
}
END_TEST

struct heard {
  int n;
  char last[256];
};
static void on_heard(const char *payload, void *ud) {
  struct heard *h = ud;
  h->n++;
  snprintf(h->last, sizeof h->last, "%s", payload);
}

/* Runs the loop until cond holds or timeout_ms passed. */
static int wait_for(uv_loop_t *loop, int *counter, int want, int timeout_ms) {
  for (int i = 0; i < timeout_ms / 10 && *counter < want; i++) {
    uv_run(loop, UV_RUN_NOWAIT);
    usleep(10000);
  }
  return *counter >= want;
}

START_TEST(test_notify_listen) {
  T_PG_ONLY("LISTEN/NOTIFY");
  struct tctx t, other;
  t_open(&t);
  /* another node on the same database */
  char url[1024];
  struct sbx_error err = {0};
  t_url(t.dir, url, sizeof url);
  snprintf(other.dir, sizeof other.dir, "%.200s/other", t.dir);
  ck_assert_int_eq(uv_loop_init(&other.loop), 0);
  ck_assert_msg(store_open_url(&other.loop, other.dir, url, &other.st, &err) == 0, "%s", err.msg);
  struct heard h = {0};
  ck_assert_int_eq(store_listen(t.st, on_heard, &h, &err), 0);
  ck_assert_int_eq(store_listen(t.st, on_heard, &h, &err), SBX_EINVAL); /* once */
  struct done d = {0};
  ck_assert_int_eq(store_notify(other.st, "runs " CHAT, on_done, &d), 0);
  t_wait(&other);
  ck_assert_int_eq(d.rc, 0); /* committed: the notification is on its way */
  ck_assert_msg(wait_for(&t.loop, &h.n, 1, 5000), "no notification");
  ck_assert_str_eq(h.last, "runs " CHAT);
  ck_assert_int_eq(store_notify(other.st, "", NULL, NULL), 0);
  char big[300];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  ck_assert_int_eq(store_notify(other.st, big, NULL, NULL), SBX_EINVAL);
  t_wait(&other);
  ck_assert(wait_for(&t.loop, &h.n, 2, 5000));
  ck_assert_str_eq(h.last, "");
  /* the listen connection ended by the server: opened again, "*" said, then listening as before */
  t_pg_admin("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = 'LISTEN cerea'");
  ck_assert_msg(wait_for(&t.loop, &h.n, 3, 8000), "not back after a lost connection");
  ck_assert_str_eq(h.last, "*");
  ck_assert_int_eq(store_notify(other.st, "files " CHAT, NULL, NULL), 0);
  t_wait(&other);
  ck_assert(wait_for(&t.loop, &h.n, 4, 5000));
  ck_assert_str_eq(h.last, "files " CHAT);
  t_close_keep(&other);
  t_close(&t);
}
END_TEST

struct fenced {
  int n;
  char chat[64];
};
static void on_fenced(const char *chat_id, void *ud) {
  struct fenced *f = ud;
  f->n++;
  snprintf(f->chat, sizeof f->chat, "%s", chat_id);
}

/* An event of chat appended through t: its outcome. */
static int append(struct tctx *t, const char *chat, int64_t seq, struct done *d) {
  memset(d, 0, sizeof *d);
  ck_assert_int_eq(store_event_append(t->st, chat, seq, "x", "{}", on_done, d), 0);
  t_wait(t);
  ck_assert_int_eq(d->called, 1);
  return d->rc;
}

#define CHAT3 "c0000000000000000000000000000003"

START_TEST(test_fence) {
  T_PG_ONLY("chat leases live in PostgreSQL");
  struct tctx t;
  t_open(&t);
  struct fenced f = {0};
  store_on_fenced(t.st, on_fenced, &f);
  struct done d;
  t_chat(&t, CHAT);
  t_chat(&t, CHAT2);
  t_chat(&t, CHAT3);
  /* no lease taken yet (one node): nothing is fenced */
  ck_assert_int_eq(append(&t, CHAT, 1, &d), 0);
  /* a node: its chat's writes commit while it holds the lease at its epoch, however long the
   * lease has been expired meanwhile when no node took it */
  ck_assert_int_eq(take(t.st, CHAT, NODEA, 300).epoch, 1);
  ck_assert_int_eq(append(&t, CHAT, 2, &d), 0);
  ck_assert_int_eq(take(t.st, CHAT3, NODEA, 300).mine, 1);
  usleep(450000);
  ck_assert_int_eq(append(&t, CHAT3, 1, &d), 0);
  /* another node took it (what its store_lease_take does, here in SQL: this store is node A's):
   * refused, the hook told first, nothing of it written */
  t_sql_exec(t.dir, "UPDATE chat_leases SET node_id = '" NODEB "', epoch = epoch + 1 WHERE "
                    "chat_id = '" CHAT "'");
  ck_assert_int_eq(append(&t, CHAT, 3, &d), SBX_EFENCED);
  ck_assert_msg(strstr(d.msg, "epoch 1") != NULL, "%s", d.msg);
  ck_assert_int_eq(f.n, 1);
  ck_assert_str_eq(f.chat, CHAT);
  struct store_run r = {0};
  snprintf(r.id, sizeof r.id, "r0000000000000000000000000000001");
  snprintf(r.chat_id, sizeof r.chat_id, "%s", CHAT);
  r.code = (char *)"x", r.origin = (char *)"api", r.state = (char *)"queued", r.timeout_s = 1;
  memset(&d, 0, sizeof d);
  ck_assert_int_eq(store_run_put(t.st, &r, on_done, &d), 0);
  t_wait(&t);
  ck_assert_int_eq(d.rc, SBX_EFENCED);
  ck_assert_int_eq(f.n, 2);
  ck_assert_int_eq(t_sql_int(t.dir, "SELECT count(*) FROM events WHERE chat_id = '" CHAT "'"), 2);
  ck_assert_int_eq(t_sql_int(t.dir, "SELECT count(*) FROM runs"), 0);
  /* a chat it holds no lease of (never taken, or let go): refused without asking */
  ck_assert_int_eq(append(&t, CHAT2, 1, &d), SBX_EFENCED);
  ck_assert_msg(strstr(d.msg, "holds no lease") != NULL, "%s", d.msg);
  /* let go: a write queued before the release still commits (no node took it since); once
   * none is pending, the chat's writes are refused */
  struct sbx_error err = {0};
  struct done before = {0};
  ck_assert_int_eq(store_event_append(t.st, CHAT3, 2, "x", "{}", on_done, &before), 0);
  ck_assert_int_eq(store_lease_release(t.st, CHAT3, NODEA, &err), 0);
  t_wait(&t);
  ck_assert_int_eq(before.rc, 0);
  ck_assert_int_eq(append(&t, CHAT3, 3, &d), SBX_EFENCED);
  ck_assert_int_eq(f.n, 4);
  /* taken again (a new epoch): written again */
  ck_assert_int_eq(take(t.st, CHAT3, NODEA, 10000).epoch, 2);
  ck_assert_int_eq(append(&t, CHAT3, 3, &d), 0);
  t_close(&t);
}
END_TEST

/* A fenced write's check locks the lease's row until its transaction ends: a node taking the
 * lease over meanwhile waits for that commit, so it loads the chat with the write in it. */
START_TEST(test_fence_holds_the_lease) {
  T_PG_ONLY("chat leases live in PostgreSQL");
  struct tctx t;
  t_open(&t);
  t_chat(&t, CHAT);
  ck_assert_int_eq(take(t.st, CHAT, NODEA, 200).mine, 1);
  struct done held, ev;
  memset(&held, 0, sizeof held);
  memset(&ev, 0, sizeof ev);
  t_hold(&t, &held); /* the writer is inside one group; the next one is the event and a hold */
  ck_assert_int_eq(store_event_append(t.st, CHAT, 1, "x", "{}", on_done, &ev), 0);
  struct done held2 = {0};
  t_hold_queue(&t, &held2);
  t_let_go();
  t_held(); /* the second group: its event's fence checked (the row locked), held before COMMIT */
  usleep(300000); /* the lease has expired by the database's clock */
  char url[1024];
  t_url(t.dir, url, sizeof url);
  pid_t pid = fork();
  if (pid == 0) { /* another node takes the lease over: it has to wait for the commit */
    uv_loop_t loop;
    struct store *st;
    struct sbx_error err = {0};
    char dir[300];
    snprintf(dir, sizeof dir, "%.200s/b", t.dir);
    uv_loop_init(&loop);
    if (store_open_url(&loop, dir, url, &st, &err) != 0)
      _exit(2);
    struct store_lease l;
    if (store_lease_take(st, CHAT, NODEB, "http://b", 10000, &l, &err) != 0 || !l.mine)
      _exit(3);
    int64_t n = -1; /* what it sees once it holds the lease: the event committed */
    if (store_event_last_seq(st, CHAT, &n) != 0 || n != 1)
      _exit(4);
    _exit(0);
  }
  usleep(500000);
  int status;
  ck_assert_int_eq(waitpid(pid, &status, WNOHANG), 0); /* still waiting for the lock */
  t_let_go();
  t_wait(&t);
  ck_assert_int_eq(ev.rc, 0);
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the taker: status %d", status);
  t_close(&t);
}
END_TEST

/* A node's writer that stops inside a transaction (here: held in a write after a fenced one) is
 * ended by the server once it sat idle there for 5 s: its transaction rolled back (nothing of the
 * group lands), the lease's row free again for a node taking it over. */
START_TEST(test_fence_stopped_writer_ended) {
  T_PG_ONLY("chat leases live in PostgreSQL");
  struct tctx t;
  t_open(&t);
  t_chat(&t, CHAT);
  ck_assert_int_eq(take(t.st, CHAT, NODEA, 60000).mine, 1);
  struct done d;
  ck_assert_int_eq(append(&t, CHAT, 1, &d), 0); /* the writer's session set for fencing */
  struct done held = {0}, ev = {0}, held2 = {0};
  t_hold(&t, &held);
  ck_assert_int_eq(store_event_append(t.st, CHAT, 2, "x", "{}", on_done, &ev), 0);
  t_hold_queue(&t, &held2);
  t_let_go();
  t_held(); /* inside the second group, after the event's statements */
  sleep(7);
  t_let_go();
  t_wait(&t);
  ck_assert_int_ne(ev.rc, 0); /* the group was rolled back with the session */
  ck_assert_int_eq(t_sql_int(t.dir, "SELECT count(*) FROM events WHERE chat_id = '" CHAT "'"), 1);
  ck_assert_int_eq(append(&t, CHAT, 2, &d), 0); /* the writer's next session goes on */
  t_close(&t);
}
END_TEST

START_TEST(test_migration_1_to_2) {
  T_PG_ONLY("migrates a PostgreSQL schema");
  struct tctx t;
  t_pg_at_version(&t, 1);
  /* rows of a version-1 program */
  t_sql_exec(t.dir, "INSERT INTO chats(id, token_hash, title, created_at) VALUES('" CHAT
                    "', 'h', 'kept', 1)");
  ck_assert_int_eq(t_sql_int(t.dir, "SELECT count(*) FROM information_schema.tables WHERE "
                                    "table_schema = current_schema() AND table_name = "
                                    "'chat_leases'"),
                   0);
  t_reopen(&t); /* store_open migrates 1 -> 2 (and on) */
  ck_assert_int_eq(store_schema_version(t.st), ST_PG_SCHEMA_VERSION);
  struct store_chat c;
  ck_assert_int_eq(store_chat_get(t.st, CHAT, &c), 0);
  ck_assert_str_eq(c.title, "kept");
  store_chat_free(&c);
  ck_assert_int_eq(take(t.st, CHAT, NODEA, 1000).mine, 1);
  t_close(&t);
}
END_TEST

int main(void) {
  Suite *s = suite_create("nodes");
  TCase *tc = tcase_create("nodes");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_sqlite_refuses);
  tcase_add_test(tc, test_lease_take_renew_expire);
  tcase_add_test(tc, test_lease_race);
  tcase_add_test(tc, test_notify_listen);
  tcase_add_test(tc, test_migration_1_to_2);
  tcase_add_test(tc, test_fence);
  tcase_add_test(tc, test_fence_holds_the_lease);
  tcase_add_test(tc, test_fence_stopped_writer_ended);
  return t_run_suite(s, tc);
}
