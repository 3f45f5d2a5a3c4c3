/* fuzz_backup.c -- a backup's manifest.sha256 as store_restore reads it (persistence/backup.c,
 * behind `cerea-sandbox restore`): the manifest is the one file of a backup a restore trusts
 * nothing of until each line is checked, and anyone who can hand an operator a backup writes it.
 *
 * Made once: a real data directory (a store with a chat and a file, both key files) and its backup
 * by store_backup, the "good" backup.  One input: byte 0 says how the backup folder handed to the
 * restore differs from the good one and what the target is --
 *   bit 0  backup.info is gone          bit 2  an extra file the manifest does not list
 *   bit 1  the blob is cut short        bit 3  backup.info says another format
 *   bits 4-5  the target: 0 absent, 1 an empty folder, 2 a folder holding a file, 3 absent
 * -- and the rest is the manifest's text, written into the source folder made once for that
 * `how` (checked unchanged after every refusal, made again after a success).  "@D", "@I", "@B",
 * "@K", "@S" in it become the sha256 of cerea.db, backup.info, the blob, api_key and
 * chat_key_secret, and "@P" the blob's path (blobs/xx/<sha256>), so the fuzzer writes manifests
 * that name the real files.
 *
 * Checked for every input:
 * - a refusal has a message, and leaves the target as it was (absent, empty, or its one file) and
 *   nothing beside it (no temporary folder);
 * - a restore that succeeds had none of the changes above, an absent or empty target, and gives a
 *   folder holding exactly the files its manifest lists, each byte for byte the good backup's;
 * - the good manifest itself, its lines in any order, is restored whenever the backup is unchanged
 *   and the target absent or empty (a check that refuses everything would pass the above).
 * - after every input the work folder holds the source folders alone: the target and anything
 *   beside it are gone, so no input leaves anything for the next.
 * A hang or a sanitizer's report aborts.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../persistence/store.h"
#include "common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

#define SPIN_MAX 2000000

static char root[64] = "/dev/shm/fuzz-backup-XXXXXX";
static char good[128], work[128];
static char sha_db[65], sha_info[65], sha_blob[65], sha_key[65], sha_secret[65], blob_path[80];
static const char *const GOOD_FILES[] = {"cerea.db", "backup.info", "api_key", "chat_key_secret"};

static void die(const char *what, const char *detail) {
  fprintf(stderr, "fuzz_backup: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
  abort();
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(p);
}

static void rm_rf(const char *dir) { nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

static void cleanup(void) { rm_rf(root); }

static char *slurp(const char *path, size_t *len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat sb;
  if (fd < 0 || fstat(fd, &sb) != 0)
    die("cannot read", path);
  char *p = sbx_malloc((size_t)sb.st_size + 1);
  if (p == NULL || read(fd, p, (size_t)sb.st_size) != sb.st_size)
    die("cannot read", path);
  close(fd);
  p[sb.st_size] = '\0';
  *len = (size_t)sb.st_size;
  return p;
}

static void spit(const char *path, const void *p, size_t len) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0 || sbx_write_all(fd, p, len) != 0)
    die("cannot write", path);
  close(fd);
}

static void file_sha(const char *dir, const char *rel, char out[65]) {
  char path[400];
  size_t len;
  snprintf(path, sizeof(path), "%s/%s", dir, rel);
  char *p = slurp(path, &len);
  store_sha256_hex(p, len, out);
  sbx_free(p);
}

/* ---- the good backup ------------------------------------------------------------------------ */

static void on_done(int rc, const struct sbx_error *err, void *ud) {
  if (rc != 0)
    die("a setup write failed", err ? err->msg : NULL);
  *(int *)ud = 1;
}

static void on_file(int rc, const struct sbx_error *err, const struct store_file_added *res,
                    void *ud) {
  (void)res;
  on_done(rc, err, ud);
}

static void wait_for(uv_loop_t *loop, volatile int *flag) {
  for (int i = 0; !*flag; i++)
    if (i > SPIN_MAX)
      die("a setup write never finished", NULL);
    else
      uv_run(loop, UV_RUN_NOWAIT);
}

static void setup(void) {
  if (mkdtemp(root) == NULL) {
    snprintf(root, sizeof(root), "%s/fuzz-backup-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (mkdtemp(root) == NULL)
      die("no temporary directory", strerror(errno));
  }
  atexit(cleanup);
  sbx_log_set_level(SBX_LOG_ERROR);
  char data[128];
  snprintf(data, sizeof(data), "%s/data", root);
  snprintf(good, sizeof(good), "%s/good", root);
  snprintf(work, sizeof(work), "%s/work", root);
  uv_loop_t loop;
  struct store *st = NULL;
  struct sbx_error err;
  sbx_error_clear(&err);
  if (uv_loop_init(&loop) != 0 || store_open(&loop, data, &st, &err) != 0)
    die("no store", err.msg);
  struct store_chat chat = {0};
  store_new_id(chat.id);
  memset(chat.token_hash, 'a', 64);
  chat.created_at = sbx_now_wall_ms();
  volatile int done = 0;
  if (store_chat_create(st, &chat, on_done, (void *)&done) != 0)
    die("no chat", NULL);
  wait_for(&loop, &done);
  static const char content[] = "a,b\n1,2\n";
  struct store_file_in in = {.chat_id = chat.id,
                             .name = "data.csv",
                             .source = STORE_SRC_ATTACHMENT,
                             .data = content,
                             .size = sizeof(content) - 1};
  done = 0;
  if (store_file_add(st, &in, on_file, (void *)&done) != 0)
    die("no file", NULL);
  wait_for(&loop, &done);
  store_close(st);
  uv_run(&loop, UV_RUN_DEFAULT); /* the store's handles' close callbacks */
  if (uv_loop_close(&loop) != 0)
    die("the store left a handle open", NULL);
  char path[200];
  snprintf(path, sizeof(path), "%s/api_key", data);
  spit(path, "fuzz-backup-api-key\n", 20);
  snprintf(path, sizeof(path), "%s/chat_key_secret", data);
  spit(path, "0123456789abcdef0123456789abcdef\n", 33);
  struct store_backup_stats stats;
  if (store_backup(data, good, &stats, &err) != 0)
    die("no backup", err.msg);
  if (stats.blobs != 1)
    die("the good backup should hold one blob", NULL);
  store_sha256_hex(content, sizeof(content) - 1, sha_blob);
  snprintf(blob_path, sizeof(blob_path), "blobs/%.2s/%s", sha_blob, sha_blob);
  file_sha(good, "cerea.db", sha_db);
  file_sha(good, "backup.info", sha_info);
  file_sha(good, "api_key", sha_key);
  file_sha(good, "chat_key_secret", sha_secret);
  rm_rf(data);
  if (mkdir(work, 0700) != 0)
    die("mkdir", work);
}

/* ---- one input ------------------------------------------------------------------------------ */

static void prepare(struct sbx_buf *out, const uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++) {
    const char *v = NULL;
    if (p[i] == '@' && i + 1 < n)
      v = p[i + 1] == 'D'   ? sha_db
          : p[i + 1] == 'I' ? sha_info
          : p[i + 1] == 'B' ? sha_blob
          : p[i + 1] == 'K' ? sha_key
          : p[i + 1] == 'S' ? sha_secret
          : p[i + 1] == 'P' ? blob_path
                            : NULL;
    if (v) {
      sbx_buf_append(out, v, strlen(v));
      i++;
    } else {
      sbx_buf_append(out, p + i, 1);
    }
  }
}

/* The folder handed to the restore: the good backup's files (hard links, or a changed copy), and
 * manifest.sha256 (written by each input). */
static void make_src(const char *src, unsigned how) {
  char a[400], b[400];
  if (mkdir(src, 0700) != 0)
    die("mkdir", src);
  for (size_t i = 0; i < SBX_ARRAY_SIZE(GOOD_FILES); i++) {
    if (i == 1 && (how & 9)) /* gone, or rewritten below */
      continue;
    snprintf(a, sizeof(a), "%s/%s", good, GOOD_FILES[i]);
    snprintf(b, sizeof(b), "%s/%s", src, GOOD_FILES[i]);
    if (link(a, b) != 0)
      die("link", b);
  }
  if (how & 8) {
    snprintf(b, sizeof(b), "%s/backup.info", src);
    spit(b, "format=999\n", 11);
  }
  snprintf(b, sizeof(b), "%s/blobs", src);
  mkdir(b, 0700);
  snprintf(b, sizeof(b), "%s/blobs/%.2s", src, sha_blob);
  mkdir(b, 0700);
  snprintf(a, sizeof(a), "%s/%s", good, blob_path);
  snprintf(b, sizeof(b), "%s/%s", src, blob_path);
  if (how & 2)
    spit(b, "a,b\n", 4);
  else if (link(a, b) != 0)
    die("link", b);
  if (how & 4) {
    snprintf(b, sizeof(b), "%s/extra", src);
    spit(b, "x", 1);
  }
  snprintf(b, sizeof(b), "%s/manifest.sha256", src);
  spit(b, "", 0);
}

/* ---- the source folders, made once -----------------------------------------------------------
 * One per `how` (16), made at its first input and kept: each input writes its manifest into it.
 * A restore only reads its source, and that is checked after each one it refuses: every entry of
 * the folder (the folders themselves: an entry made, removed or renamed moves their times) is as
 * it was made (inode, mode, size, mtime; and a folder's links and ctime), the manifest aside.
 * After a restore that succeeds the folder is made again. */
#define SRC_ENTRIES 9
struct src {
  char dir[160];
  int made;
  struct stat st[SRC_ENTRIES]; /* as made: lstat of each path of src_path (errno: absent) */
};
static struct src srcs[16];

/* The i-th path of a source folder (i < SRC_ENTRIES), into out. */
static void src_path(const struct src *v, int i, char *out, size_t cap) {
  static const char *const rel[SRC_ENTRIES] = {
      "", "cerea.db", "backup.info", "api_key", "chat_key_secret", "blobs", "extra", "", ""};
  if (i == 7)
    snprintf(out, cap, "%s/blobs/%.2s", v->dir, sha_blob);
  else if (i == 8)
    snprintf(out, cap, "%s/%s", v->dir, blob_path);
  else
    snprintf(out, cap, "%s%s%s", v->dir, *rel[i] ? "/" : "", rel[i]);
}

static void src_stat(const struct src *v, struct stat st[SRC_ENTRIES]) {
  char p[400];
  for (int i = 0; i < SRC_ENTRIES; i++) {
    src_path(v, i, p, sizeof(p));
    memset(&st[i], 0, sizeof(st[i]));
    if (lstat(p, &st[i]) != 0)
      st[i].st_ino = 0; /* absent */
  }
}

/* (A file's links and ctime are left out: the good backup's files are linked into every source
 * folder, so making or removing another folder moves them; a write moves mtime.) */
static int stat_same(const struct stat *a, const struct stat *b) {
  int dir = S_ISDIR(a->st_mode);
  return a->st_ino == b->st_ino && a->st_mode == b->st_mode && a->st_size == b->st_size &&
         a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
         (!dir || (a->st_nlink == b->st_nlink && a->st_ctim.tv_sec == b->st_ctim.tv_sec &&
                   a->st_ctim.tv_nsec == b->st_ctim.tv_nsec));
}

/* The source folder for `how`, made when it is not there yet. */
static struct src *src_get(unsigned how) {
  struct src *v = &srcs[how];
  if (!v->made) {
    snprintf(v->dir, sizeof(v->dir), "%s/src-%u", work, how);
    make_src(v->dir, how);
    src_stat(v, v->st);
    v->made = 1;
  }
  return v;
}

/* After a refused restore: the source folder is as it was made. */
static void src_check(const struct src *v) {
  struct stat now[SRC_ENTRIES];
  src_stat(v, now);
  for (int i = 0; i < SRC_ENTRIES; i++)
    if (!stat_same(&now[i], &v->st[i])) {
      char p[400];
      src_path(v, i, p, sizeof(p));
      die("a restore changed its source folder", p);
    }
}

/* After a restore that succeeded: its source folder made again at the next input. */
static void src_forget(struct src *v) {
  rm_rf(v->dir);
  v->made = 0;
}

/* After each input: the work folder holds the source folders alone (the target and anything a
 * restore made beside it are gone), so nothing of an input is left for the next. */
static void work_check(void) {
  DIR *d = opendir(work);
  struct dirent *e;
  if (d == NULL)
    die("the work folder is gone", work);
  while ((e = readdir(d)) != NULL)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 &&
        strncmp(e->d_name, "src-", 4) != 0)
      die("an input left something in the work folder", e->d_name);
  closedir(d);
}

/* The paths in the manifest text (its lines' tails), sorted: what a restored folder must hold. */
static int listed(const char *text, size_t len, char ***out) {
  char **v = NULL;
  int n = 0;
  for (size_t i = 0; i < len;) {
    const char *nl = memchr(text + i, '\n', len - i);
    size_t end = nl ? (size_t)(nl - text) : len;
    if (end - i > 66) {
      v = sbx_realloc(v, (size_t)(n + 1) * sizeof(*v));
      v[n++] = sbx_strndup(text + i + 66, end - i - 66);
    }
    i = end + 1;
  }
  *out = v;
  return n;
}

static int files_under(const char *dir, const char *rel, char **v, int n, int *found) {
  char path[400];
  snprintf(path, sizeof(path), "%s%s%s", dir, *rel ? "/" : "", rel);
  DIR *d = opendir(path);
  if (d == NULL)
    return -1;
  struct dirent *e;
  int bad = 0;
  while (!bad && (e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    char sub[400], full[800];
    snprintf(sub, sizeof(sub), "%s%s%s", rel, *rel ? "/" : "", e->d_name);
    snprintf(full, sizeof(full), "%s/%s", dir, sub);
    struct stat sb;
    if (lstat(full, &sb) != 0)
      bad = 1;
    else if (S_ISDIR(sb.st_mode))
      bad = files_under(dir, sub, v, n, found) != 0;
    else {
      int hit = 0;
      for (int i = 0; i < n && !hit; i++)
        hit = strcmp(v[i], sub) == 0;
      char want[65], got[65];
      if (!hit)
        bad = 1;
      else {
        file_sha(good, sub, want);
        file_sha(dir, sub, got);
        bad = strcmp(want, got) != 0;
      }
      *found += hit;
    }
  }
  closedir(d);
  return bad;
}

/* 1 when text is the good manifest's lines, each once, in any order. */
static int is_good_manifest(const char *text, size_t len) {
  char lines[6][200];
  snprintf(lines[0], 200, "%s  cerea.db", sha_db);
  snprintf(lines[1], 200, "%s  backup.info", sha_info);
  snprintf(lines[2], 200, "%s  api_key", sha_key);
  snprintf(lines[3], 200, "%s  chat_key_secret", sha_secret);
  snprintf(lines[4], 200, "%s  %s", sha_blob, blob_path);
  int seen[5] = {0}, count = 0;
  if (len == 0 || text[len - 1] != '\n' || memchr(text, '\0', len) != NULL)
    return 0;
  for (size_t i = 0; i < len;) {
    const char *nl = memchr(text + i, '\n', len - i);
    size_t end = (size_t)(nl - text), k;
    for (k = 0; k < 5; k++)
      if (!seen[k] && strlen(lines[k]) == end - i && memcmp(lines[k], text + i, end - i) == 0)
        break;
    if (k == 5)
      return 0;
    seen[k] = 1, count++;
    i = end + 1;
  }
  return count == 5;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  static int ready;
  if (!ready) {
    setup();
    ready = 1;
  }
  if (n < 1)
    return 0;
  unsigned how = data[0] & 15, target_kind = (data[0] >> 4) & 3;
  struct sbx_buf text;
  sbx_buf_init(&text, 1u << 30);
  prepare(&text, data + 1, n - 1);
  const char *manifest = text.data ? text.data : "";

  char target[200], keep[300], mpath[300];
  struct src *sv = src_get(how);
  const char *src = sv->dir;
  snprintf(target, sizeof(target), "%s/target", work);
  snprintf(keep, sizeof(keep), "%s/kept", target);
  snprintf(mpath, sizeof(mpath), "%s/manifest.sha256", src);
  spit(mpath, manifest, text.len);
  if (target_kind == 1 || target_kind == 2)
    mkdir(target, 0700);
  if (target_kind == 2)
    spit(keep, "kept", 4);

  struct store_backup_stats stats;
  struct sbx_error err;
  sbx_error_clear(&err);
  int rc = store_restore(src, target, &stats, &err);
  int usable = how == 0 && target_kind != 2;
  if (rc != 0) {
    if (err.msg[0] == '\0')
      die("a refusal without a message", NULL);
    if (usable && is_good_manifest(manifest, text.len))
      die("the good manifest was refused", err.msg);
    struct stat sb;
    int there = stat(target, &sb) == 0;
    if (target_kind == 0 || target_kind == 3 ? there : !there)
      die("a refused restore changed whether the target exists", err.msg);
    DIR *d = opendir(work);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
      if (strstr(e->d_name, ".restore-") != NULL)
        die("a refused restore left its temporary folder", e->d_name);
    if (d)
      closedir(d);
    if (there) {
      int files = 0;
      d = opendir(target);
      while (d && (e = readdir(d)) != NULL)
        files += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
      if (d)
        closedir(d);
      if (files != (target_kind == 2))
        die("a refused restore wrote into the target", err.msg);
      if ((target_kind == 2 && unlink(keep) != 0) || rmdir(target) != 0)
        die("the target could not be removed", target);
    }
    src_check(sv);
  } else {
    if (!usable)
      die("a changed backup or a non-empty target was restored", manifest);
    char **v;
    int nv = listed(manifest, text.len, &v), found = 0;
    if (files_under(target, "", v, nv, &found) != 0 || found != nv)
      die("a restored folder that does not hold exactly its manifest's files", manifest);
    for (int i = 0; i < nv; i++)
      sbx_free(v[i]);
    sbx_free(v);
    rm_rf(target);
    src_forget(sv);
  }
  sbx_buf_free(&text);
  work_check();
  return 0;
}
