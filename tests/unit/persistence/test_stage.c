/* test_stage.c -- staged blobs (persistence/stage.c) and store_file_add_staged: a streamed
 * upload's content written piece by piece into blobs/tmp/, hashed as it goes, and stored by the
 * writer exactly as store_file_add stores a buffer.  Success and same-content cases beside abort,
 * allocation failure at every step, injected write and fsync errors, and a process killed with a
 * stage open (its temp file goes at the next open). */
#include "helpers.h"

#include <errno.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define CHAT "0123456789abcdef0123456789abcdef"

/* Files under blobs/ whose name ends in .tmp (stages and blob temp files alike). */
static int count_tmp(const char *dir) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "find %s/blobs -name '*.tmp' | wc -l", dir);
  FILE *p = popen(cmd, "r");
  int n = -1;
  if (p == NULL || fscanf(p, "%d", &n) != 1)
    n = -1;
  if (p)
    pclose(p);
  return n;
}

static size_t count_rows(struct tctx *t) {
  struct store_file *v;
  size_t n;
  ck_assert_int_eq(store_file_list(t->st, CHAT, 1, &v, &n), 0);
  store_file_list_free(v, n);
  return n;
}

static char *pattern(size_t n, unsigned seed) {
  char *p = sbx_malloc(n ? n : 1);
  ck_assert_ptr_nonnull(p);
  for (size_t i = 0; i < n; i++)
    p[i] = (char)((i * 2654435761u + seed) >> 7);
  return p;
}

/* Stages `data` in pieces of `piece` bytes and stores it; waits for the callback. */
static int t_add_staged(struct tctx *t, const char *name, enum store_source src, const char *data,
                        size_t len, size_t piece, struct added *a) {
  struct store_blob_stage *sg;
  struct sbx_error err = {0};
  memset(a, 0, sizeof *a);
  int rc = store_blob_stage_begin(t->st, &sg, &err);
  if (rc != 0)
    return rc;
  for (size_t off = 0; off < len; off += piece)
    ck_assert_int_eq(store_blob_stage_write(sg, data + off, SBX_MIN(piece, len - off), &err), 0);
  ck_assert_uint_eq(store_blob_stage_size(sg), len);
  struct store_file_in in = {.chat_id = CHAT, .name = name, .source = src, .mounted = 1};
  if ((rc = store_file_add_staged(t->st, &in, sg, on_added, a)) != 0)
    return rc;
  t_wait(t);
  ck_assert_int_eq(a->called, 1);
  return a->rc;
}

START_TEST(test_staged_success) {
  struct tctx t;
  t_open(&t);
  t_chat(&t, CHAT);
  size_t n = (3u << 20) + 12345;
  char *data = pattern(n, 1);
  char sha[65];
  store_sha256_hex(data, n, sha);
  struct added a;
  ck_assert_int_eq(t_add_staged(&t, "big.bin", STORE_SRC_ATTACHMENT, data, n, 65536, &a), 0);
  ck_assert_int_eq(a.created, 1);
  ck_assert_str_eq(a.f.sha256, sha);
  ck_assert_uint_eq(a.f.size, n);
  ck_assert_str_eq(a.f.name, "big.bin");
  char *back;
  size_t len;
  ck_assert_int_eq(store_blob_read(t.st, sha, &back, &len), 0);
  ck_assert_uint_eq(len, n);
  ck_assert_int_eq(memcmp(back, data, n), 0);
  sbx_free(back);
  ck_assert_uint_eq(store_blob_bytes(t.st), n);
  ck_assert_int_eq(count_tmp(t.dir), 0);
  store_file_free(&a.f);
  /* an empty upload is a stage with no write */
  ck_assert_int_eq(t_add_staged(&t, "empty.txt", STORE_SRC_ATTACHMENT, "", 0, 1, &a), 0);
  store_sha256_hex("", 0, sha);
  ck_assert_str_eq(a.f.sha256, sha);
  ck_assert_uint_eq(a.f.size, 0);
  store_file_free(&a.f);
  /* what store_file_add stores and what a stage stores are the same file */
  struct added b;
  ck_assert_int_eq(t_add(&t, CHAT, "small.txt", STORE_SRC_ATTACHMENT, "hello", &b), 0);
  ck_assert_int_eq(t_add_staged(&t, "small.txt", STORE_SRC_ATTACHMENT, "hello", 5, 2, &a), 0);
  ck_assert_int_eq(a.created, 0);
  ck_assert_str_eq(a.f.id, b.f.id);
  store_file_free(&a.f);
  store_file_free(&b.f);
  sbx_free(data);
  t_close(&t);
}
END_TEST

START_TEST(test_staged_same_content) {
  struct tctx t;
  t_open(&t);
  t_chat(&t, CHAT);
  size_t n = 200000;
  char *data = pattern(n, 2);
  struct added a, b, c, d;
  ck_assert_int_eq(t_add_staged(&t, "r.csv", STORE_SRC_ATTACHMENT, data, n, 4096, &a), 0);
  ck_assert_int_eq(a.created, 1);
  /* same name, same content: the same file, and the second temp file is gone */
  ck_assert_int_eq(t_add_staged(&t, "r.csv", STORE_SRC_ATTACHMENT, data, n, 7777, &b), 0);
  ck_assert_int_eq(b.created, 0);
  ck_assert_str_eq(b.f.id, a.f.id);
  ck_assert_int_eq(count_tmp(t.dir), 0);
  /* other name, same content: a new row, no second copy of the blob */
  ck_assert_int_eq(t_add_staged(&t, "s.csv", STORE_SRC_ATTACHMENT, data, n, n, &c), 0);
  ck_assert_int_eq(c.created, 1);
  ck_assert_str_eq(c.f.sha256, a.f.sha256);
  ck_assert_uint_eq(store_blob_bytes(t.st), n);
  ck_assert_int_eq(count_tmp(t.dir), 0);
  /* same name, other content: "r (2).csv"; output: the next version */
  data[0] ^= 1;
  ck_assert_int_eq(t_add_staged(&t, "r.csv", STORE_SRC_ATTACHMENT, data, n, 65536, &d), 0);
  ck_assert_str_eq(d.f.name, "r (2).csv");
  store_file_free(&d.f);
  ck_assert_int_eq(t_add_staged(&t, "out/p.png", STORE_SRC_OUTPUT, data, n, 65536, &d), 0);
  ck_assert_int_eq(d.f.version, 1);
  store_file_free(&d.f);
  data[1] ^= 1;
  ck_assert_int_eq(t_add_staged(&t, "out/p.png", STORE_SRC_OUTPUT, data, n, 65536, &d), 0);
  ck_assert_int_eq(d.f.version, 2);
  store_file_free(&d.f);
  ck_assert_uint_eq(store_blob_bytes(t.st), 3 * n);
  ck_assert_int_eq(count_tmp(t.dir), 0);
  /* finish first (the sha256 known before storing), then store */
  struct store_blob_stage *sg;
  struct sbx_error err = {0};
  char sha[65], want[65];
  ck_assert_int_eq(store_blob_stage_begin(t.st, &sg, &err), 0);
  ck_assert_int_eq(store_blob_stage_write(sg, "abc", 3, &err), 0);
  ck_assert_int_eq(store_blob_stage_finish(sg, sha, &err), 0);
  store_sha256_hex("abc", 3, want);
  ck_assert_str_eq(sha, want);
  ck_assert_int_eq(store_blob_stage_write(sg, "d", 1, &err), SBX_ESTATE); /* no write after */
  struct store_file_in in = {
      .chat_id = CHAT, .name = "abc.txt", .mounted = 0, .left_out_reason = "too big"};
  struct added e = {0};
  ck_assert_int_eq(store_file_add_staged(t.st, &in, sg, on_added, &e), 0);
  t_wait(&t);
  ck_assert_int_eq(e.rc, 0);
  ck_assert_str_eq(e.f.sha256, want);
  ck_assert_int_eq(e.f.mounted, 0);
  ck_assert_str_eq(e.f.left_out_reason, "too big");
  store_file_free(&e.f);
  store_file_free(&a.f);
  store_file_free(&b.f);
  store_file_free(&c.f);
  sbx_free(data);
  t_close(&t);
}
END_TEST

START_TEST(test_staged_abort_and_refusals) {
  struct tctx t;
  t_open(&t);
  t_chat(&t, CHAT);
  struct store_blob_stage *sg;
  struct sbx_error err = {0};
  ck_assert_int_eq(store_blob_stage_begin(t.st, &sg, &err), 0);
  ck_assert_int_eq(store_blob_stage_write(sg, "partial", 7, &err), 0);
  ck_assert_int_eq(count_tmp(t.dir), 1);
  store_blob_stage_abort(sg);
  ck_assert_int_eq(count_tmp(t.dir), 0);
  ck_assert_uint_eq(count_rows(&t), 0);
  store_blob_stage_abort(NULL);
  /* a chat that does not exist: the callback fails, the temp file goes */
  ck_assert_int_eq(store_blob_stage_begin(t.st, &sg, &err), 0);
  ck_assert_int_eq(store_blob_stage_write(sg, "x", 1, &err), 0);
  struct store_file_in in = {.chat_id = "ffffffffffffffffffffffffffffffff", .name = "x.txt"};
  struct added a = {0};
  ck_assert_int_eq(store_file_add_staged(t.st, &in, sg, on_added, &a), 0);
  t_wait(&t);
  ck_assert_int_eq(a.rc, SBX_ENOENT);
  ck_assert_int_eq(count_tmp(t.dir), 0);
  /* a bad name: the same */
  ck_assert_int_eq(store_blob_stage_begin(t.st, &sg, &err), 0);
  in.chat_id = CHAT;
  in.name = "../x";
  memset(&a, 0, sizeof a);
  ck_assert_int_eq(store_file_add_staged(t.st, &in, sg, on_added, &a), 0);
  t_wait(&t);
  ck_assert_int_eq(a.rc, SBX_ENAME);
  ck_assert_int_eq(count_tmp(t.dir), 0);
  /* invalid arguments: refused at once, the stage is taken all the same */
  ck_assert_int_eq(store_blob_stage_begin(t.st, &sg, &err), 0);
  ck_assert_int_eq(store_file_add_staged(t.st, &in, sg, NULL, NULL), SBX_EINVAL);
  ck_assert_int_eq(count_tmp(t.dir), 0);
  ck_assert_uint_eq(count_rows(&t), 0);
  t_close(&t);
}
END_TEST

START_TEST(test_staged_alloc_fail_at_n) {
  struct tctx t;
  t_open(&t);
  t_chat(&t, CHAT);
  int ok = 0;
  uint64_t n;
  for (n = 1; n < 300; n++) {
    char data[40];
    snprintf(data, sizeof data, "staged %llu", (unsigned long long)n);
    struct added a = {0};
    struct store_blob_stage *sg = NULL;
    struct sbx_error err = {0};
    struct store_file_in in = {
        .chat_id = CHAT, .name = "oom.txt", .kind = "file", .left_out_reason = "r"};
    sbx_alloc_fail_at(n, 0);
    int rc = store_blob_stage_begin(t.st, &sg, &err);
    if (rc == 0 && (rc = store_blob_stage_write(sg, data, strlen(data), &err)) != 0)
      store_blob_stage_abort(sg);
    if (rc == 0 && (rc = store_file_add_staged(t.st, &in, sg, on_added, &a)) == 0)
      t_wait(&t);
    uint64_t used = sbx_alloc_count();
    sbx_alloc_fail_at(0, 0);
    ck_assert_int_eq(count_tmp(t.dir), 0); /* whatever failed, no temp file stays */
    if (!t_add_outcome(rc, &a, &ok))
      continue;
    if (used < n)
      break; /* the whole upload ran without reaching the injected failure */
  }
  ck_assert_uint_lt(n, 300);
  ck_assert_int_gt(ok, 0);
  struct store_file *v;
  size_t cnt;
  ck_assert_int_eq(store_file_list(t.st, CHAT, 1, &v, &cnt), 0);
  ck_assert_uint_eq(cnt, (size_t)ok); /* exactly the acknowledged files, each with its blob */
  for (size_t i = 0; i < cnt; i++) {
    char *data;
    size_t len;
    ck_assert_int_eq(store_blob_read(t.st, v[i].sha256, &data, &len), 0);
    ck_assert_uint_eq(len, v[i].size);
    sbx_free(data);
  }
  store_file_list_free(v, cnt);
  t_close(&t);
}
END_TEST

static int write_fail_errno;
static ssize_t failing_write(int fd, const void *p, size_t n) {
  (void)fd, (void)p, (void)n;
  errno = write_fail_errno;
  return -1;
}
static _Atomic int fsync_calls, fsync_fail_at;
static int failing_fsync(int fd) {
  if (++fsync_calls == fsync_fail_at) {
    errno = EIO;
    return -1;
  }
  return fsync(fd);
}

START_TEST(test_staged_io_errors) {
  struct tctx t;
  t_open(&t);
  t_chat(&t, CHAT);
  struct store_blob_stage *sg;
  struct sbx_error err = {0};
  const int errs[] = {ENOSPC, EIO};
  const int codes[] = {SBX_EFULL, SBX_EIO};
  for (int i = 0; i < 2; i++) {
    ck_assert_int_eq(store_blob_stage_begin(t.st, &sg, &err), 0);
    ck_assert_int_eq(store_blob_stage_write(sg, "ok", 2, &err), 0);
    write_fail_errno = errs[i];
    st__stage_write_fn = failing_write;
    ck_assert_int_eq(store_blob_stage_write(sg, "lost", 4, &err), codes[i]);
    st__stage_write_fn = write;
    ck_assert_ptr_nonnull(strstr(err.msg, "write"));
    /* failed: no more writes, no storing; the temp file goes with the stage */
    ck_assert_int_eq(store_blob_stage_write(sg, "more", 4, &err), SBX_ESTATE);
    struct store_file_in in = {.chat_id = CHAT, .name = "w.txt"};
    struct added a = {0};
    ck_assert_int_eq(store_file_add_staged(t.st, &in, sg, on_added, &a), SBX_ESTATE);
    ck_assert_int_eq(a.called, 0);
    ck_assert_int_eq(count_tmp(t.dir), 0);
  }
  /* an fsync failing before the commit (file, then each directory): nothing stored, no temp */
  st__fsync = failing_fsync;
  int failures = 0;
  for (int at = 1; at <= 3; at++) {
    fsync_calls = 0;
    fsync_fail_at = at;
    char data[40];
    snprintf(data, sizeof data, "fsync fails at %d", at);
    struct added a;
    int rc = t_add_staged(&t, "f.txt", STORE_SRC_ATTACHMENT, data, strlen(data), 3, &a);
    if (fsync_calls < at) {
      ck_assert_int_eq(rc, 0);
      store_file_free(&a.f);
      continue;
    }
    ck_assert_int_eq(rc, SBX_EIO);
    ck_assert_ptr_nonnull(strstr(a.msg, "fsync"));
    failures++;
    ck_assert_uint_eq(count_rows(&t), 0);
    ck_assert_int_eq(count_tmp(t.dir), 0);
  }
  ck_assert_int_eq(failures, 3);
  fsync_fail_at = 0;
  st__fsync = fsync;
  ck_assert_uint_eq(store_blob_bytes(t.st), 0);
  /* temp directory gone under the store: begin makes it again */
  char tmpdir[512];
  snprintf(tmpdir, sizeof tmpdir, "%s/blobs/tmp", t.dir);
  ck_assert_int_eq(rmdir(tmpdir), 0);
  struct added a;
  ck_assert_int_eq(t_add_staged(&t, "f.txt", STORE_SRC_ATTACHMENT, "fine", 4, 4, &a), 0);
  ck_assert_int_eq(a.created, 1);
  store_file_free(&a.f);
  /* a temp directory that cannot be made: begin fails with the path */
  ck_assert_int_eq(rmdir(tmpdir), 0);
  FILE *f = fopen(tmpdir, "w");
  ck_assert_ptr_nonnull(f);
  fclose(f);
  ck_assert_int_eq(store_blob_stage_begin(t.st, &sg, &err), SBX_EIO);
  ck_assert_ptr_nonnull(strstr(err.msg, "blobs/tmp"));
  unlink(tmpdir);
  t_close(&t);
}
END_TEST

/* A process killed while a stage is open leaves its temp file; the next open removes it and the
 * store goes on. */
START_TEST(test_staged_crash_leftover) {
  struct tctx t;
  t_mkdir(&t);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    uv_loop_t loop;
    struct store *st;
    struct store_blob_stage *sg;
    struct sbx_error err = {0};
    if (uv_loop_init(&loop) != 0 || store_open(&loop, t.dir, &st, &err) != 0)
      _exit(2);
    if (store_blob_stage_begin(st, &sg, &err) != 0 ||
        store_blob_stage_write(sg, "never committed", 15, &err) != 0)
      _exit(3);
    _exit(0); /* killed: no abort, no close */
  }
  int status = 0;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_int_eq(WEXITSTATUS(status), 0);
  ck_assert_int_eq(count_tmp(t.dir), 1);
  t_reopen(&t);
  ck_assert_int_eq(count_tmp(t.dir), 0);
  t_chat(&t, CHAT);
  struct added a;
  ck_assert_int_eq(t_add_staged(&t, "after.txt", STORE_SRC_ATTACHMENT, "after", 5, 5, &a), 0);
  store_file_free(&a.f);
  t_close(&t);
}
END_TEST

int main(void) {
  Suite *s = suite_create("stage");
  TCase *tc = tcase_create("stage");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_staged_success);
  tcase_add_test(tc, test_staged_same_content);
  tcase_add_test(tc, test_staged_abort_and_refusals);
  tcase_add_test(tc, test_staged_alloc_fail_at_n);
  tcase_add_test(tc, test_staged_io_errors);
  tcase_add_test(tc, test_staged_crash_leftover);
  return t_run_suite(s, tc);
}
