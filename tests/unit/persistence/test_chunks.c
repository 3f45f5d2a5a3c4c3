/* test_chunks.c -- chunks.c, on a real PostgreSQL server (STORE_TEST_PG; skipped with a line on
 * SQLite): a file's content stored in ST_CHUNK rows, from memory and from a staged upload; another
 * node (a store on the same database with a data directory of its own) reading every file,
 * fetching its local copy once; chunks that went missing or changed refused (no local copy left);
 * and two nodes storing the same content at the same time, both succeeding with one blob. */
#include "helpers.h"

#define CHAT "c0000000000000000000000000000001"

/* n bytes of a pattern that differs per seed (no two chunks alike) */
static char *pattern(size_t n, unsigned seed) {
  char *p = malloc(n ? n : 1);
  for (size_t i = 0; i < n; i++) {
    seed = seed * 1103515245u + 12345u;
    p[i] = (char)(seed >> 16);
  }
  return p;
}

/* A second node on the same database: a store with a data directory of its own. */
static void open_node(struct tctx *node, const struct tctx *first) {
  char url[1024];
  struct sbx_error err = {0};
  t_url(first->dir, url, sizeof url);
  const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  snprintf(node->dir, sizeof node->dir, "%s/sbx-node-XXXXXX", base);
  ck_assert_ptr_nonnull(mkdtemp(node->dir));
  ck_assert_int_eq(uv_loop_init(&node->loop), 0);
  ck_assert_msg(store_open_url(&node->loop, node->dir, url, &node->st, &err) == 0, "%s", err.msg);
}

static void close_node(struct tctx *node) {
  t_close_keep(node);
  nftw(node->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS); /* its schema is the first node's */
}

static int64_t chunk_count(const struct tctx *t, const char *sha) {
  char q[300];
  snprintf(q, sizeof q, "SELECT count(*) FROM blob_chunks WHERE sha256 = '%s'", sha);
  return t_sql_int(t->dir, q);
}

/* store_blob_read of sha on a node gives exactly data. */
static void expect_blob(struct tctx *node, const char *sha, const char *data, size_t n) {
  char *got = NULL;
  size_t len = 0;
  ck_assert_int_eq(store_blob_read(node->st, sha, &got, &len), 0);
  ck_assert_uint_eq(len, n);
  ck_assert_int_eq(memcmp(got, data, n), 0);
  sbx_free(got);
}

static void local_path(const struct tctx *t, const char *sha, char *out, size_t cap) {
  snprintf(out, cap, "%s/blobs/%.2s/%s", t->dir, sha, sha);
}

START_TEST(test_chunks_and_other_node) {
  T_PG_ONLY("blob contents in PostgreSQL");
  struct tctx t, node;
  struct added a, b;
  t_open(&t);
  t_chat(&t, CHAT);
  /* from memory: 5.5 chunks */
  size_t n1 = ST_CHUNK * 5 + ST_CHUNK / 2;
  char *d1 = pattern(n1, 1);
  struct store_file_in in = {
      .chat_id = CHAT, .name = "big.bin", .data = d1, .size = n1, .mounted = 1};
  ck_assert_int_eq(t_add_in(&t, &in, &a), 0);
  ck_assert_int_eq(chunk_count(&t, a.f.sha256), 6);
  char q[400];
  snprintf(q, sizeof q,
           "SELECT (min(length(data)) = %u AND max(length(data)) = %u AND max(n) = 5)::int FROM "
           "blob_chunks WHERE sha256 = '%s' AND n < 5",
           ST_CHUNK, ST_CHUNK, a.f.sha256);
  ck_assert_int_eq(t_sql_int(t.dir, q) >= 0, 1);
  snprintf(q, sizeof q, "SELECT length(data) FROM blob_chunks WHERE sha256 = '%s' AND n = 5",
           a.f.sha256);
  ck_assert_int_eq(t_sql_int(t.dir, q), ST_CHUNK / 2);
  /* from a staged upload: 3 chunks exactly, streamed in pieces */
  size_t n2 = ST_CHUNK * 3;
  char *d2 = pattern(n2, 2);
  struct store_blob_stage *sg = NULL;
  struct sbx_error err = {0};
  ck_assert_int_eq(store_blob_stage_begin(t.st, &sg, &err), 0);
  for (size_t off = 0; off < n2; off += 65536)
    ck_assert_int_eq(store_blob_stage_write(sg, d2 + off, SBX_MIN((size_t)65536, n2 - off), &err),
                     0);
  struct store_file_in sin = {.chat_id = CHAT, .name = "staged.bin", .mounted = 1};
  memset(&b, 0, sizeof b);
  ck_assert_int_eq(store_file_add_staged(t.st, &sin, sg, on_added, &b), 0);
  t_wait(&t);
  ck_assert_msg(b.rc == 0, "%s", b.msg);
  ck_assert_int_eq(chunk_count(&t, b.f.sha256), 3);
  /* an empty file: a blob row, no chunk */
  struct added e;
  ck_assert_int_eq(t_add(&t, CHAT, "empty.txt", STORE_SRC_ATTACHMENT, "", &e), 0);
  ck_assert_int_eq(chunk_count(&t, e.f.sha256), 0);

  /* another node: no local copy yet; reading fetches one, then reads it */
  open_node(&node, &t);
  char path[600];
  local_path(&node, a.f.sha256, path, sizeof path);
  ck_assert_int_eq(access(path, F_OK), -1);
  expect_blob(&node, a.f.sha256, d1, n1);
  ck_assert_int_eq(access(path, F_OK), 0);
  int fd = -1;
  uint64_t size = 0;
  ck_assert_int_eq(store_blob_open(node.st, b.f.sha256, &fd, &size), 0);
  ck_assert_uint_eq(size, n2);
  close(fd);
  char *bp = store_blob_path(node.st, e.f.sha256);
  ck_assert_int_eq(access(bp, F_OK), 0); /* the empty blob too */
  sbx_free(bp);
  /* the node lists the first node's files, as any node does */
  struct store_file *v;
  size_t nf;
  ck_assert_int_eq(store_file_list(node.st, CHAT, 0, &v, &nf), 0);
  ck_assert_uint_eq(nf, 3);
  store_file_list_free(v, nf);
  /* no such blob; not a sha256 */
  ck_assert_int_eq(store_blob_open(node.st,
                                   "00000000000000000000000000000000000000000000000000000"
                                   "00000000000",
                                   &fd, &size),
                   SBX_ENOENT);
  ck_assert_int_eq(store_blob_open(node.st, "../etc", &fd, &size), SBX_EINVAL);
  close_node(&node);

  /* a third node, after a chunk changed in the database: refused, nothing left on its disk */
  snprintf(q, sizeof q,
           "UPDATE blob_chunks SET data = 'x'::bytea || data WHERE sha256 = '%s' AND "
           "n = 2",
           b.f.sha256);
  ck_assert_int_eq(t_sql_exec(t.dir, q), 1);
  open_node(&node, &t);
  ck_assert_int_eq(store_blob_open(node.st, b.f.sha256, &fd, &size), SBX_ECORRUPT);
  local_path(&node, b.f.sha256, path, sizeof path);
  ck_assert_int_eq(access(path, F_OK), -1);
  char tmp[700];
  snprintf(tmp, sizeof tmp, "%s.fetch.tmp", path);
  ck_assert_int_eq(access(tmp, F_OK), -1);
  /* and one whose chunk is gone */
  snprintf(q, sizeof q, "DELETE FROM blob_chunks WHERE sha256 = '%s' AND n = 4", a.f.sha256);
  ck_assert_int_eq(t_sql_exec(t.dir, q), 1);
  char *got = NULL;
  size_t len = 0;
  ck_assert_int_eq(store_blob_read(node.st, a.f.sha256, &got, &len), SBX_ECORRUPT);
  close_node(&node);
  /* the first node still serves its own copies */
  expect_blob(&t, a.f.sha256, d1, n1);
  store_file_free(&a.f);
  store_file_free(&b.f);
  store_file_free(&e.f);
  free(d1);
  free(d2);
  t_close(&t);
}
END_TEST

START_TEST(test_same_content_two_nodes) {
  T_PG_ONLY("two stores writing one PostgreSQL database");
  struct tctx t, node;
  t_open(&t);
  t_chat(&t, CHAT);
  open_node(&node, &t);
  size_t n = ST_CHUNK + 10;
  char *data = pattern(n, 7);
  struct store_file_in in = {.chat_id = CHAT, .name = "same.bin", .data = data, .size = n};
  struct added a = {0}, b = {0};
  struct done held1 = {0}, held2 = {0};
  /* node 1: its writer held in a first group, so that the add and a second hold queue up as one
   * group; then the blob row and chunks inserted and that transaction held open */
  t_hold(&t, &held1);
  ck_assert_int_eq(store_file_add(t.st, &in, on_added, &a), 0);
  t_hold_queue(&t, &held2);
  t_let_go();
  t_held();
  /* node 2: the same content; its insert waits for node 1's transaction */
  struct store_file_in in2 = in;
  in2.name = "copy.bin";
  ck_assert_int_eq(store_file_add(node.st, &in2, on_added, &b), 0);
  usleep(300000);
  t_let_go();
  t_wait(&t);
  t_wait(&node);
  ck_assert_msg(a.rc == 0, "%s", a.msg);
  ck_assert_msg(b.rc == 0, "%s", b.msg); /* not a conflict: the content is stored */
  ck_assert_str_eq(a.f.sha256, b.f.sha256);
  char q[300];
  snprintf(q, sizeof q, "SELECT count(*) FROM blobs WHERE sha256 = '%s'", a.f.sha256);
  ck_assert_int_eq(t_sql_int(t.dir, q), 1);
  ck_assert_int_eq(chunk_count(&t, a.f.sha256), 2);
  expect_blob(&node, b.f.sha256, data, n);
  store_file_free(&a.f);
  store_file_free(&b.f);
  free(data);
  close_node(&node);
  t_close(&t);
}
END_TEST

int main(void) {
  Suite *s = suite_create("chunks");
  TCase *tc = tcase_create("chunks");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_chunks_and_other_node);
  tcase_add_test(tc, test_same_content_two_nodes);
  return t_run_suite(s, tc);
}
