/* test_blobs.c -- blobs.c: sha256, the blob layout DATA/blobs/ab/<sha256>, same content stored
 * once, whole reads, a leftover complete file reused, and a failing blob write reported with
 * nothing half-stored. */
#include <errno.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "helpers.h"

#define CHAT "c0000000000000000000000000000001"

START_TEST(test_sha256) {
  char out[65];
  store_sha256_hex("abc", 3, out);
  ck_assert_str_eq(out, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  store_sha256_hex("", 0, out);
  ck_assert_str_eq(out, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}
END_TEST

START_TEST(test_layout_and_dedup) {
  struct tctx t;
  struct added a, b;
  t_open(&t);
  t_chat(&t, CHAT);
  ck_assert_int_eq(t_add(&t, CHAT, "one.txt", STORE_SRC_ATTACHMENT, "same bytes", &a), 0);
  ck_assert_int_eq(t_add(&t, CHAT, "two.txt", STORE_SRC_ATTACHMENT, "same bytes", &b), 0);
  ck_assert_str_ne(a.f.id, b.f.id);
  ck_assert_str_eq(a.f.sha256, b.f.sha256);
  char *path = store_blob_path(t.st, a.f.sha256);
  char want[512];
  snprintf(want, sizeof want, "%s/blobs/%.2s/%s", t.dir, a.f.sha256, a.f.sha256);
  ck_assert_str_eq(path, want);
  struct stat sb;
  ck_assert_int_eq(stat(path, &sb), 0);
  ck_assert_int_eq(sb.st_size, 10);
  sbx_free(path);
  ck_assert_uint_eq(store_blob_bytes(t.st), 10); /* stored once */
  char *data;
  size_t len;
  ck_assert_int_eq(store_blob_read(t.st, a.f.sha256, &data, &len), 0);
  ck_assert_uint_eq(len, 10);
  ck_assert_mem_eq(data, "same bytes", 10);
  sbx_free(data);
  int fd;
  uint64_t size;
  ck_assert_int_eq(store_blob_open(t.st, a.f.sha256, &fd, &size), 0);
  ck_assert_uint_eq(size, 10);
  char buf[16] = {0};
  ck_assert_int_eq(read(fd, buf, sizeof buf), 10);
  ck_assert_str_eq(buf, "same bytes");
  close(fd);
  ck_assert_int_eq(store_blob_open(t.st, "zz", &fd, &size), SBX_EINVAL);
  ck_assert_int_eq(fd, -1);
  ck_assert_int_eq(
      store_blob_open(t.st, "1111111111111111111111111111111111111111111111111111111111111111", &fd,
                      &size),
      SBX_ENOENT);
  ck_assert_int_eq(store_blob_read(t.st, "00", &data, &len), SBX_EINVAL);
  ck_assert_int_eq(
      store_blob_read(t.st, "0000000000000000000000000000000000000000000000000000000000000000",
                      &data, &len),
      SBX_ENOENT);
  ck_assert_ptr_null(store_blob_path(t.st, "../../etc/passwd"));
  ck_assert_ptr_null(
      store_blob_path(t.st, "ABCDEF0000000000000000000000000000000000000000000000000000000000"));
  store_file_free(&a.f);
  store_file_free(&b.f);
  /* blob bytes survive a reopen (recomputed from the table) */
  t_close_keep(&t);
  t_reopen(&t);
  ck_assert_uint_eq(store_blob_bytes(t.st), 10);
  t_close(&t);
}
END_TEST

START_TEST(test_leftover_reused) {
  struct tctx t;
  struct added a;
  t_open(&t);
  t_chat(&t, CHAT);
  char sha[65], dir[512], path[600];
  store_sha256_hex("orphan", 6, sha);
  snprintf(dir, sizeof dir, "%s/blobs/%.2s", t.dir, sha);
  snprintf(path, sizeof path, "%s/%s", dir, sha);
  mkdir(dir, 0700);
  FILE *f = fopen(path, "w");
  fputs("orphan", f);
  fclose(f);
  ck_assert_int_eq(t_add(&t, CHAT, "o.txt", STORE_SRC_ATTACHMENT, "orphan", &a), 0);
  ck_assert_str_eq(a.f.sha256, sha);
  ck_assert_uint_eq(store_blob_bytes(t.st), 6);
  store_file_free(&a.f);
  t_close(&t);
}
END_TEST

START_TEST(test_blob_write_fails) {
  struct tctx t;
  struct added a;
  t_open(&t);
  t_chat(&t, CHAT);
  char sha[65], sub[512];
  store_sha256_hex("blocked", 7, sha);
  /* a plain file where the blob's subdirectory must go: the blob cannot be written */
  snprintf(sub, sizeof sub, "%s/blobs/%.2s", t.dir, sha);
  FILE *f = fopen(sub, "w");
  fclose(f);
  ck_assert_int_eq(t_add(&t, CHAT, "b.txt", STORE_SRC_ATTACHMENT, "blocked", &a), SBX_EIO);
  ck_assert_ptr_nonnull(strstr(a.msg, sha));
  struct store_file *v;
  size_t n;
  ck_assert_int_eq(store_file_list(t.st, CHAT, 1, &v, &n), 0);
  ck_assert_uint_eq(n, 0); /* no row without its blob */
  store_file_list_free(v, n);
  ck_assert_uint_eq(store_blob_bytes(t.st), 0);
  unlink(sub);
  ck_assert_int_eq(t_add(&t, CHAT, "b.txt", STORE_SRC_ATTACHMENT, "blocked", &a), 0);
  store_file_free(&a.f);
  t_close(&t);
}
END_TEST

START_TEST(test_large_blob) {
  struct tctx t;
  t_open(&t);
  t_chat(&t, CHAT);
  size_t n = 3u << 20;
  char *big = sbx_malloc(n + 1);
  for (size_t i = 0; i < n; i++)
    big[i] = (char)('a' + i % 26);
  big[n] = '\0';
  struct added a;
  ck_assert_int_eq(t_add(&t, CHAT, "big.txt", STORE_SRC_ATTACHMENT, big, &a), 0);
  char *data;
  size_t len;
  ck_assert_int_eq(store_blob_read(t.st, a.f.sha256, &data, &len), 0);
  ck_assert_uint_eq(len, n);
  ck_assert_int_eq(memcmp(data, big, n), 0);
  sbx_free(data);
  sbx_free(big);
  store_file_free(&a.f);
  t_close(&t);
}
END_TEST

static _Atomic int fsync_calls, fsync_fail_at;
static int failing_fsync(int fd) {
  if (++fsync_calls == fsync_fail_at) {
    errno = EIO;
    return -1;
  }
  return fsync(fd);
}

static int count_tmp(const char *dir) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "find %s/blobs -name '*.tmp' | wc -l", dir);
  FILE *p = popen(cmd, "r");
  int n = -1;
  if (fscanf(p, "%d", &n) != 1)
    n = -1;
  pclose(p);
  return n;
}

/* The group's blob files are fsynced just before its COMMIT: a failing fsync (of a file or of a
 * directory) fails the group, commits nothing and leaves no temp file. */
START_TEST(test_blob_fsync_fails) {
  struct tctx t;
  t_open(&t);
  t_chat(&t, CHAT);
  st__fsync = failing_fsync;
  int failures = 0;
  for (int at = 1; at <= 3; at++) {
    fsync_calls = 0;
    fsync_fail_at = at; /* 1: the file; 2, 3: its directories */
    char data[32];
    snprintf(data, sizeof data, "fsync fails at %d", at);
    struct added a;
    int rc = t_add(&t, CHAT, "f.txt", STORE_SRC_ATTACHMENT, data, &a);
    if (fsync_calls < at) { /* fewer fsyncs than `at`: nothing failed */
      ck_assert_int_eq(rc, 0);
      store_file_free(&a.f);
      continue;
    }
    ck_assert_int_eq(rc, SBX_EIO);
    ck_assert_ptr_nonnull(strstr(a.msg, "fsync"));
    failures++;
    struct store_file *v;
    size_t n;
    ck_assert_int_eq(store_file_list(t.st, CHAT, 1, &v, &n), 0);
    ck_assert_uint_eq(n, 0);
    store_file_list_free(v, n);
    ck_assert_int_eq(count_tmp(t.dir), 0);
  }
  ck_assert_int_eq(failures, 3); /* the file's fsync and both directories' were each hit */
  fsync_fail_at = 0;
  st__fsync = fsync;
  ck_assert_uint_eq(store_blob_bytes(t.st), 0);
  struct added a;
  ck_assert_int_eq(t_add(&t, CHAT, "f.txt", STORE_SRC_ATTACHMENT, "fine now", &a), 0);
  ck_assert_int_eq(a.created, 1);
  store_file_free(&a.f);
  t_close(&t);
}
END_TEST

/* A group may carry more new blobs than the process may hold files open. */
static int many_ok;
static void on_many(int rc, const struct sbx_error *err, const struct store_file_added *res,
                    void *ud) {
  if (rc == 0)
    many_ok++;
  else
    fprintf(stderr, "many: %s\n", err->msg);
}

START_TEST(test_many_blobs_few_fds) {
  struct tctx t;
  t_open(&t);
  t_chat(&t, CHAT);
  struct rlimit rl = {128, 128};
  ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
  enum { N = 400 };
  static char data[N][24];
  for (int i = 0; i < N; i++) {
    snprintf(data[i], sizeof data[i], "blob number %d", i);
    struct store_file_in in = {
        .chat_id = CHAT, .name = "m.bin", .data = data[i], .size = strlen(data[i])};
    ck_assert_int_eq(store_file_add(t.st, &in, on_many, NULL), 0);
  }
  t_wait(&t);
  ck_assert_int_eq(many_ok, N);
  struct store_stats s;
  store_get_stats(t.st, &s);
  if (t_pg()) /* groups stop at ST_PG_GROUP_MAX (fewer blobs than fds): the cap holds */
    ck_assert_uint_eq(s.max_group, ST_PG_GROUP_MAX);
  else
    ck_assert_uint_gt(s.max_group, 128); /* more blobs in one group than fds allowed */
  for (int i = 0; i < N; i += 37) {
    char sha[65], *got;
    size_t len;
    store_sha256_hex(data[i], strlen(data[i]), sha);
    ck_assert_int_eq(store_blob_read(t.st, sha, &got, &len), 0);
    ck_assert_mem_eq(got, data[i], len);
    sbx_free(got);
  }
  t_close(&t);
}
END_TEST

int main(void) {
  Suite *s = suite_create("blobs");
  TCase *tc = tcase_create("blobs");
  tcase_add_test(tc, test_sha256);
  tcase_add_test(tc, test_layout_and_dedup);
  tcase_add_test(tc, test_leftover_reused);
  tcase_add_test(tc, test_blob_write_fails);
  tcase_add_test(tc, test_large_blob);
  tcase_add_test(tc, test_blob_fsync_fails);
  tcase_add_test(tc, test_many_blobs_few_fds);
  return t_run_suite(s, tc);
}
