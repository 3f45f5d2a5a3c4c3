/* backup.c -- a consistent copy of a data directory while its server runs, and the restore of
 * such a copy into a new data directory.
 *
 * What a backup is: a folder holding cerea.db (SQLite's online backup of the live database: one
 * snapshot, taken inside one read transaction, so it is consistent whatever the server writes
 * meanwhile), blobs/xx/<sha256> (every blob that snapshot references), the data directory's keys
 * (api_key, chat_key_secret: without the second, every chat key and MCP session would stop
 * working), backup.info (format, schema version, time), and last manifest.sha256: one line per
 * file, `<sha256>  <path>`, the format of sha256sum(1), so `sha256sum -c manifest.sha256` checks
 * a backup by hand.  A folder without the manifest is an unfinished backup.
 *
 * Why the blobs are copied twice over (before and after the snapshot): a blob file is written
 * before the row that names it commits, and removed (by the sweep) after its row is deleted.  So
 * every blob the snapshot names existed when the snapshot was taken; copying every blob present
 * *before* the snapshot, then the ones it names that were not there yet (written since, so too
 * new to be swept), finds each of them whatever the sweep does in between.  Copies the snapshot
 * does not name (swept meanwhile) are removed again.
 *
 * The restore checks before it writes: the manifest's every line (a plain relative path, each
 * blob under its own hash), every file of the backup listed, every file's size and sha256 while
 * it is copied, the database's integrity_check, into a temporary folder beside the target that
 * is renamed into place only when all of it held.  A tampered or truncated backup is refused
 * with nothing written; so is a target that is not empty, and one a server has open (its
 * cerea.lock flock, store_open's).
 *
 * What it does not do: PostgreSQL stores (pg_dump covers their tables and the files' contents:
 * docs/deploy.md); it runs outside the server, so it takes no loop and no writer.
 */
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MANIFEST     "manifest.sha256"
#define INFO         "backup.info"
#define FORMAT       1
#define MANIFEST_MAX (64u << 20) /* bytes: ~700k blobs; past it the manifest is not ours */
#define BUSY_RETRIES 200         /* x 25 ms: the backup step waiting on the server's writer */

static const char *const KEY_FILES[] = {"api_key", "chat_key_secret"};

/* ---- small file-system helpers -------------------------------------------------------------- */

static char *join(const char *a, const char *b) {
  size_t n = strlen(a) + strlen(b) + 2;
  char *p = sbx_malloc(n);
  if (p != NULL)
    snprintf(p, n, "%s/%s", a, b);
  return p;
}

static int is_hex(const char *s, size_t n) {
  if (strlen(s) != n)
    return 0;
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
      return 0;
  return 1;
}

static int exists(const char *path) {
  struct stat sb;
  return lstat(path, &sb) == 0;
}

/* 1 when dir is absent or an empty directory, 0 when it holds something, -errno otherwise. */
static int empty_or_absent(const char *dir) {
  DIR *d = opendir(dir);
  if (d == NULL)
    return errno == ENOENT ? 1 : -errno;
  struct dirent *e;
  int empty = 1;
  while (empty && (e = readdir(d)) != NULL)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
      empty = 0;
  closedir(d);
  return empty;
}

static int mkdir_err(const char *dir, struct sbx_error *err) {
  if (mkdir(dir, 0700) == 0 || errno == EEXIST)
    return 0;
  int e = errno;
  return sbx_error_set(err, (e == EACCES || e == EPERM || e == EROFS) ? SBX_EPERM : SBX_EIO,
                       "cannot make %s: %s", dir, strerror(e));
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)ftw;
  return flag == FTW_DP ? rmdir(path) : unlink(path);
}
/* Removes dir and everything in it (keep_top: only what is in it). */
static void rm_tree(const char *dir, int keep_top) {
  if (!keep_top) {
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return;
  }
  DIR *d = opendir(dir);
  if (d == NULL)
    return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    char *p = join(dir, e->d_name);
    if (p != NULL)
      nftw(p, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    sbx_free(p);
  }
  closedir(d);
}

/* Copies src to dst (made new, 0600, fsynced; dst NULL: only reads), hashing what it reads:
 * hex gets the sha256, *size the length.  ENOENT of src is SBX_ENOENT. */
static int hash_copy(const char *src, const char *dst, char hex[65], uint64_t *size,
                     struct sbx_error *err) {
  int in = open(src, O_RDONLY | O_CLOEXEC), out = -1, rc = 0;
  EVP_MD_CTX *md = EVP_MD_CTX_new();
  char buf[1 << 16];
  uint64_t total = 0;
  if (in < 0) {
    rc = sbx_error_set(err, errno == ENOENT ? SBX_ENOENT : SBX_EIO, "%s: %s", src, strerror(errno));
    goto out;
  }
  if (md == NULL || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
    rc = sbx_error_set(err, SBX_ENOMEM, "sha256: out of memory");
    goto out;
  }
  if (dst != NULL && (out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) < 0) {
    rc = sbx_error_set(err, st__errno_code(errno), "%s: %s", dst, strerror(errno));
    goto out;
  }
  for (;;) {
    ssize_t n = read(in, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      rc = sbx_error_set(err, SBX_EIO, "read %s: %s", src, strerror(errno));
      goto out;
    }
    if (n == 0)
      break;
    EVP_DigestUpdate(md, buf, (size_t)n);
    total += (uint64_t)n;
    if (out >= 0 && (rc = sbx_write_all(out, buf, (size_t)n)) != 0) {
      rc = sbx_error_set(err, st__errno_code(-rc), "write %s: %s", dst, strerror(-rc));
      goto out;
    }
  }
  if (out >= 0 && st__fsync(out) != 0) {
    rc = sbx_error_set(err, st__errno_code(errno), "fsync %s: %s", dst, strerror(errno));
    goto out;
  }
  unsigned char d[32];
  EVP_DigestFinal_ex(md, d, NULL);
  sbx_hex(d, sizeof d, hex);
  *size = total;
out:
  EVP_MD_CTX_free(md);
  if (in >= 0)
    close(in);
  if (out >= 0 && close(out) != 0 && rc == 0)
    rc = sbx_error_set(err, SBX_EIO, "close %s: %s", dst, strerror(errno));
  return rc;
}

/* ---- the manifest ---------------------------------------------------------------------------- */

struct entry {
  char *path; /* relative to the backup's folder */
  char sha[65];
  uint64_t size;
};

struct manifest {
  struct entry *v;
  size_t n, cap;
};

static int manifest_add(struct manifest *m, const char *path, const char sha[65], uint64_t size) {
  if (m->n == m->cap) {
    size_t cap = m->cap ? m->cap * 2 : 64;
    struct entry *v = sbx_realloc(m->v, cap * sizeof *v);
    if (v == NULL)
      return SBX_ENOMEM;
    m->v = v, m->cap = cap;
  }
  struct entry *e = &m->v[m->n];
  if ((e->path = sbx_strdup(path)) == NULL)
    return SBX_ENOMEM;
  memcpy(e->sha, sha, 65);
  e->size = size;
  m->n++;
  return 0;
}

static void manifest_free(struct manifest *m) {
  for (size_t i = 0; i < m->n; i++)
    sbx_free(m->v[i].path);
  sbx_free(m->v);
  m->v = NULL, m->n = m->cap = 0;
}

static int by_path(const void *a, const void *b) {
  return strcmp(((const struct entry *)a)->path, ((const struct entry *)b)->path);
}

static const struct entry *manifest_find(const struct manifest *m, const char *path) {
  struct entry key = {.path = (char *)path};
  if (m->n == 0) /* m->v is NULL: bsearch must not be handed it */
    return NULL;
  return bsearch(&key, m->v, m->n, sizeof *m->v, by_path);
}

/* A path the manifest may name: cerea.db, backup.info, a key file, or blobs/xx/<sha256> whose
 * name is its own hash (content-addressed: a blob line whose hash differs is tampered). */
static int path_allowed(const char *path, const char *sha) {
  if (strcmp(path, "cerea.db") == 0 || strcmp(path, INFO) == 0)
    return 1;
  for (size_t i = 0; i < SBX_ARRAY_SIZE(KEY_FILES); i++)
    if (strcmp(path, KEY_FILES[i]) == 0)
      return 1;
  if (strncmp(path, "blobs/", 6) != 0 || strlen(path) != 6 + 3 + 64 || path[8] != '/')
    return 0;
  const char *name = path + 9;
  return is_hex(name, 64) && strncmp(path + 6, name, 2) == 0 && strcmp(name, sha) == 0;
}

/* Reads SRC/manifest.sha256 into m, sorted by path.  Every line `<64 hex>  <path>` with an
 * allowed path, no path twice, cerea.db and backup.info present. */
static int manifest_read(const char *src, struct manifest *m, struct sbx_error *err) {
  char *path = join(src, MANIFEST);
  FILE *f = path ? fopen(path, "re") : NULL;
  int rc = 0;
  if (f == NULL) {
    rc = path == NULL      ? sbx_error_set(err, SBX_ENOMEM, "out of memory")
         : errno == ENOENT ? sbx_error_set(err, SBX_ECORRUPT,
                                           "%s has no %s: not a backup, or one that did not finish",
                                           src, MANIFEST)
                           : sbx_error_set(err, SBX_EIO, "%s: %s", path, strerror(errno));
    sbx_free(path);
    return rc;
  }
  char line[PATH_MAX + 80];
  size_t bytes = 0, lineno = 0;
  while (rc == 0 && fgets(line, sizeof line, f) != NULL) {
    lineno++;
    size_t n = strlen(line);
    bytes += n;
    if (n == 0 || line[n - 1] != '\n' || bytes > MANIFEST_MAX) {
      rc = sbx_error_set(err, SBX_ECORRUPT, "%s:%zu: line cut short or too long", path, lineno);
      break;
    }
    line[n - 1] = '\0';
    char sha[65];
    if (n < 64 + 2 + 2 || line[64] != ' ' || line[65] != ' ') {
      rc = sbx_error_set(err, SBX_ECORRUPT, "%s:%zu: not `<sha256>  <path>`", path, lineno);
      break;
    }
    memcpy(sha, line, 64);
    sha[64] = '\0';
    const char *p = line + 66;
    if (!is_hex(sha, 64) || !path_allowed(p, sha)) {
      rc = sbx_error_set(err, SBX_ECORRUPT, "%s:%zu: a line this program never writes", path,
                         lineno);
      break;
    }
    if (manifest_add(m, p, sha, 0) != 0)
      rc = sbx_error_set(err, SBX_ENOMEM, "out of memory");
  }
  if (rc == 0 && ferror(f))
    rc = sbx_error_set(err, SBX_EIO, "read %s: %s", path, strerror(errno));
  fclose(f);
  if (rc == 0 && m->n == 0)
    rc = sbx_error_set(err, SBX_ECORRUPT, "%s is empty: cerea.db and %s are missing from it",
                       path, INFO);
  if (rc == 0) {
    qsort(m->v, m->n, sizeof *m->v, by_path);
    for (size_t i = 1; i < m->n && rc == 0; i++)
      if (strcmp(m->v[i - 1].path, m->v[i].path) == 0)
        rc = sbx_error_set(err, SBX_ECORRUPT, "%s: %s listed twice", path, m->v[i].path);
    if (rc == 0 && (manifest_find(m, "cerea.db") == NULL || manifest_find(m, INFO) == NULL))
      rc = sbx_error_set(err, SBX_ECORRUPT, "%s: cerea.db or %s is missing from it", path, INFO);
  }
  sbx_free(path);
  return rc;
}

/* Writes DEST/manifest.sha256 (through a temp file, fsynced, renamed, the folder fsynced). */
static int manifest_write(const char *dest, struct manifest *m, struct sbx_error *err) {
  qsort(m->v, m->n, sizeof *m->v, by_path);
  char *tmp = join(dest, MANIFEST ".tmp"), *final = join(dest, MANIFEST);
  int rc = 0, fd = -1;
  if (tmp == NULL || final == NULL) {
    rc = sbx_error_set(err, SBX_ENOMEM, "out of memory");
    goto out;
  }
  if ((fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) < 0) {
    rc = sbx_error_set(err, st__errno_code(errno), "%s: %s", tmp, strerror(errno));
    goto out;
  }
  for (size_t i = 0; i < m->n && rc == 0; i++) {
    char line[PATH_MAX + 80];
    int n = snprintf(line, sizeof line, "%s  %s\n", m->v[i].sha, m->v[i].path);
    if ((rc = sbx_write_all(fd, line, (size_t)n)) != 0)
      rc = sbx_error_set(err, st__errno_code(-rc), "write %s: %s", tmp, strerror(-rc));
  }
  if (rc == 0 && st__fsync(fd) != 0)
    rc = sbx_error_set(err, st__errno_code(errno), "fsync %s: %s", tmp, strerror(errno));
  if (close(fd) != 0 && rc == 0)
    rc = sbx_error_set(err, SBX_EIO, "close %s: %s", tmp, strerror(errno));
  fd = -1;
  if (rc == 0 && rename(tmp, final) != 0)
    rc = sbx_error_set(err, SBX_EIO, "rename %s: %s", tmp, strerror(errno));
  if (rc == 0)
    st__fsync_dir(dest);
out:
  if (fd >= 0)
    close(fd);
  sbx_free(tmp);
  sbx_free(final);
  return rc;
}

/* ---- backup ---------------------------------------------------------------------------------- */

/* Copies file `rel` of from/ into to/ and lists it in m. */
static int copy_listed(const char *from, const char *to, const char *rel, struct manifest *m,
                       struct sbx_error *err) {
  char *s = join(from, rel), *d = join(to, rel), sha[65];
  uint64_t size = 0;
  int rc = s && d ? hash_copy(s, d, sha, &size, err) : sbx_error_set(err, SBX_ENOMEM, "oom");
  if (rc == 0 && manifest_add(m, rel, sha, size) != 0)
    rc = sbx_error_set(err, SBX_ENOMEM, "out of memory");
  sbx_free(s);
  sbx_free(d);
  return rc;
}

/* Copies one blob DATA/blobs/xx/sha to DEST/blobs/xx/sha unless it is there already; its content
 * must hash to its name.  A blob absent from DATA is SBX_ENOENT (quietly: the caller decides). */
static int copy_blob(const char *data, const char *dest, const char *sha, int *copied,
                     struct sbx_error *err) {
  char rel[6 + 3 + 65], dir[6 + 3];
  snprintf(rel, sizeof rel, "blobs/%.2s/%s", sha, sha);
  snprintf(dir, sizeof dir, "blobs/%.2s", sha);
  char *s = join(data, rel), *d = join(dest, rel), *dd = join(dest, dir), got[65];
  uint64_t size;
  int rc = 0;
  *copied = 0;
  if (s == NULL || d == NULL || dd == NULL) {
    rc = sbx_error_set(err, SBX_ENOMEM, "out of memory");
  } else if (!exists(d)) {
    if ((rc = mkdir_err(dd, err)) == 0 && (rc = hash_copy(s, d, got, &size, err)) == 0) {
      *copied = 1;
      if (strcmp(got, sha) != 0) {
        unlink(d);
        rc = sbx_error_set(err, SBX_ECORRUPT, "%s: its content does not hash to its name", s);
      }
    }
  }
  sbx_free(s);
  sbx_free(d);
  sbx_free(dd);
  return rc;
}

/* Every blob file present in DATA/blobs/ now, copied (the first pass; see the top). */
static int copy_present_blobs(const char *data, const char *dest, struct sbx_error *err) {
  char *top = join(data, "blobs");
  DIR *d = top ? opendir(top) : NULL;
  int rc = 0;
  if (d == NULL) {
    rc = top == NULL       ? sbx_error_set(err, SBX_ENOMEM, "out of memory")
         : errno == ENOENT ? 0
                           : sbx_error_set(err, SBX_EIO, "%s: %s", top, strerror(errno));
    sbx_free(top);
    return rc;
  }
  struct dirent *e;
  while (rc == 0 && (e = readdir(d)) != NULL) {
    if (!is_hex(e->d_name, 2))
      continue; /* ., .., tmp/ (upload stages) */
    char *sub = join(top, e->d_name);
    DIR *sd = sub ? opendir(sub) : NULL;
    struct dirent *f;
    while (rc == 0 && sd != NULL && (f = readdir(sd)) != NULL) {
      int copied;
      if (!is_hex(f->d_name, 64))
        continue; /* a blob's temp file (.N.tmp) is not a blob yet */
      rc = copy_blob(data, dest, f->d_name, &copied, err);
      if (rc == SBX_ENOENT)
        rc = 0; /* swept since readdir: the snapshot will not name it */
    }
    if (sd != NULL)
      closedir(sd);
    sbx_free(sub);
  }
  closedir(d);
  sbx_free(top);
  return rc;
}

static int db_checked(sqlite3 *db, const char *path, int *version, struct sbx_error *err);

/* SQLite's online backup of DATA/cerea.db into DEST/cerea.db, in one step (one read
 * transaction on the source: a consistent snapshot), then checked.  *version gets its schema
 * version. */
static int snapshot_db(const char *data, const char *dest, int *version, struct sbx_error *err) {
  char *src_path = join(data, "cerea.db"), *dst_path = join(dest, "cerea.db");
  sqlite3 *src = NULL, *dst = NULL;
  int rc = 0;
  if (src_path == NULL || dst_path == NULL) {
    rc = sbx_error_set(err, SBX_ENOMEM, "out of memory");
    goto out;
  }
  if (!exists(src_path)) {
    rc = sbx_error_set(err, SBX_ENOENT,
                       "%s: no database here (a PostgreSQL store is backed up with pg_dump: "
                       "docs/deploy.md)",
                       src_path);
    goto out;
  }
  int r = sqlite3_open_v2(src_path, &src, SQLITE_OPEN_READONLY, NULL);
  if (r == SQLITE_OK)
    r = sqlite3_open_v2(dst_path, &dst, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
  if (r != SQLITE_OK) {
    rc = sbx_error_set(err, SBX_EIO, "open: %s", sqlite3_errmsg(dst ? dst : src));
    goto out;
  }
  sqlite3_busy_timeout(src, 5000);
  sqlite3_backup *b = sqlite3_backup_init(dst, "main", src, "main");
  if (b == NULL) {
    rc = sbx_error_set(err, SBX_EDB, "backup: %s", sqlite3_errmsg(dst));
    goto out;
  }
  int tries = 0;
  while ((r = sqlite3_backup_step(b, -1)) == SQLITE_BUSY || r == SQLITE_LOCKED) {
    if (++tries > BUSY_RETRIES)
      break;
    sqlite3_sleep(25);
  }
  int fin = sqlite3_backup_finish(b);
  if (r != SQLITE_DONE || fin != SQLITE_OK) {
    rc = sbx_error_set(err, r == SQLITE_BUSY ? SBX_EBUSY : SBX_EDB, "backup of %s: %s", src_path,
                       sqlite3_errstr(r != SQLITE_DONE ? r : fin));
    goto out;
  }
  /* The copy takes the source's WAL mode with its pages: a backup is one self-contained file. */
  if (sqlite3_exec(dst, "PRAGMA journal_mode=DELETE", NULL, NULL, NULL) != SQLITE_OK) {
    rc = sbx_error_set(err, SBX_EDB, "%s: journal_mode: %s", dst_path, sqlite3_errmsg(dst));
    goto out;
  }
  rc = db_checked(dst, dst_path, version, err);
  if (rc == 0 && chmod(dst_path, 0600) != 0)
    rc = sbx_error_set(err, SBX_EIO, "chmod %s: %s", dst_path, strerror(errno));
out:
  sqlite3_close(src);
  sqlite3_close(dst);
  sbx_free(src_path);
  sbx_free(dst_path);
  return rc;
}

/* integrity_check == ok and the schema version, of an open database. */
static int db_checked(sqlite3 *db, const char *path, int *version, struct sbx_error *err) {
  sqlite3_stmt *s = NULL;
  int rc = 0;
  if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &s, NULL) != SQLITE_OK ||
      sqlite3_step(s) != SQLITE_ROW) {
    rc = sbx_error_set(err, SBX_ECORRUPT, "%s: not a database (%s)", path, sqlite3_errmsg(db));
  } else if (strcmp((const char *)sqlite3_column_text(s, 0), "ok") != 0) {
    rc = sbx_error_set(err, SBX_ECORRUPT, "%s: integrity_check: %s", path,
                       (const char *)sqlite3_column_text(s, 0));
  }
  sqlite3_finalize(s);
  if (rc == 0)
    rc = st__user_version(db, version, err);
  return rc;
}

/* The blobs the snapshot names: copied (the second pass) and listed; then the first pass's
 * copies it does not name removed. */
static int list_blobs(const char *data, const char *dest, struct manifest *m, size_t *nblobs,
                      uint64_t *bytes, struct sbx_error *err) {
  char *path = join(dest, "cerea.db");
  sqlite3 *db = NULL;
  sqlite3_stmt *s = NULL;
  int rc = 0;
  if (path == NULL || sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(db, "SELECT sha256 FROM blobs ORDER BY sha256", -1, &s, NULL) !=
          SQLITE_OK) {
    rc = sbx_error_set(err, SBX_EDB, "the backup's blob list: %s",
                       db ? sqlite3_errmsg(db) : "out of memory");
    goto out;
  }
  int r;
  while (rc == 0 && (r = sqlite3_step(s)) == SQLITE_ROW) {
    const char *sha = (const char *)sqlite3_column_text(s, 0);
    int copied;
    if (sha == NULL || !is_hex(sha, 64))
      continue; /* not a name a blob file can have; integrity is the sweep's concern */
    if ((rc = copy_blob(data, dest, sha, &copied, err)) == SBX_ENOENT) {
      rc = sbx_error_set(err, SBX_ENOENT, "blob %s is in the database but not in %s/blobs", sha,
                         data);
      break;
    }
    if (rc != 0)
      break;
    char rel[6 + 3 + 65];
    snprintf(rel, sizeof rel, "blobs/%.2s/%s", sha, sha);
    char *full = join(dest, rel);
    struct stat sb;
    if (full == NULL || stat(full, &sb) != 0)
      rc = sbx_error_set(err, SBX_EIO, "%s: %s", rel, strerror(errno));
    else if (manifest_add(m, rel, sha, (uint64_t)sb.st_size) != 0)
      rc = sbx_error_set(err, SBX_ENOMEM, "out of memory");
    else
      *bytes += (uint64_t)sb.st_size, (*nblobs)++;
    sbx_free(full);
  }
out:
  sqlite3_finalize(s);
  sqlite3_close(db);
  sbx_free(path);
  return rc;
}

/* The first pass's copies the snapshot does not name (swept meanwhile), removed. */
static void drop_unlisted_blobs(const char *dest, struct manifest *m) {
  qsort(m->v, m->n, sizeof *m->v, by_path);
  char *top = join(dest, "blobs");
  DIR *d = top ? opendir(top) : NULL;
  struct dirent *e;
  while (d != NULL && (e = readdir(d)) != NULL) {
    if (!is_hex(e->d_name, 2))
      continue;
    char *sub = join(top, e->d_name);
    DIR *sd = sub ? opendir(sub) : NULL;
    struct dirent *f;
    while (sd != NULL && (f = readdir(sd)) != NULL) {
      char rel[6 + 3 + 65];
      if (!is_hex(f->d_name, 64))
        continue;
      snprintf(rel, sizeof rel, "blobs/%.2s/%.64s", e->d_name, f->d_name); /* both checked hex above */
      if (manifest_find(m, rel) == NULL) {
        char *p = join(sub, f->d_name);
        if (p != NULL)
          unlink(p);
        sbx_free(p);
      }
    }
    if (sd != NULL)
      closedir(sd);
    if (sub != NULL)
      rmdir(sub); /* only when it was left empty */
    sbx_free(sub);
  }
  if (d != NULL)
    closedir(d);
  sbx_free(top);
}

static int write_info(const char *dest, int version, struct manifest *m, struct sbx_error *err) {
  char *path = join(dest, INFO), text[256], sha[65];
  int n = snprintf(text, sizeof text,
                   "format=%d\nschema_version=%d\ncreated_at_ms=%lld\nmade_by=cerea-sandbox\n",
                   FORMAT, version, (long long)sbx_now_wall_ms());
  int fd = path ? open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600) : -1, rc = 0;
  if (fd < 0 || sbx_write_all(fd, text, (size_t)n) != 0 || st__fsync(fd) != 0)
    rc = sbx_error_set(err, SBX_EIO, "%s: %s", path ? path : INFO, strerror(errno));
  if (fd >= 0)
    close(fd);
  sbx_free(path);
  store_sha256_hex(text, (size_t)n, sha);
  if (rc == 0 && manifest_add(m, INFO, sha, (uint64_t)n) != 0)
    rc = sbx_error_set(err, SBX_ENOMEM, "out of memory");
  return rc;
}

int store_backup(const char *data_dir, const char *dest, struct store_backup_stats *stats,
                 struct sbx_error *err) {
  struct manifest m = {0};
  struct store_backup_stats st = {0};
  int made = 0, version = 0, rc;
  int e = empty_or_absent(dest);
  if (e < 0)
    return sbx_error_set(err, e == -EACCES ? SBX_EPERM : SBX_EIO, "%s: %s", dest, strerror(-e));
  if (e == 0)
    return sbx_error_set(err, SBX_EEXIST,
                         "%s is not empty: a backup goes into a new or empty folder", dest);
  if (!exists(dest)) {
    if ((rc = mkdir_err(dest, err)) != 0)
      return rc;
    made = 1;
  }
  char *pp = join(dest, ".cerea-backup-probe");
  int pfd = pp ? open(pp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600) : -1;
  if (pfd < 0) {
    int pe = errno;
    sbx_free(pp);
    if (made)
      rmdir(dest);
    return sbx_error_set(err, (pe == EACCES || pe == EPERM || pe == EROFS) ? SBX_EPERM : SBX_EIO,
                         "%s is not writable: %s", dest, strerror(pe));
  }
  close(pfd);
  unlink(pp);
  sbx_free(pp);

  char *blobs = join(dest, "blobs");
  if ((rc = blobs ? mkdir_err(blobs, err) : SBX_ENOMEM) != 0)
    goto out;
  if ((rc = copy_present_blobs(data_dir, dest, err)) != 0)
    goto out;
  if ((rc = snapshot_db(data_dir, dest, &version, err)) != 0)
    goto out;
  {
    char *db = join(dest, "cerea.db"), sha[65];
    uint64_t size = 0;
    rc = db ? hash_copy(db, NULL, sha, &size, err) : SBX_ENOMEM;
    if (rc == 0 && manifest_add(&m, "cerea.db", sha, size) != 0)
      rc = SBX_ENOMEM;
    st.db_bytes = size;
    sbx_free(db);
    if (rc != 0)
      goto out;
  }
  if ((rc = list_blobs(data_dir, dest, &m, &st.blobs, &st.blob_bytes, err)) != 0)
    goto out;
  drop_unlisted_blobs(dest, &m);
  for (size_t i = 0; i < SBX_ARRAY_SIZE(KEY_FILES) && rc == 0; i++) {
    char *k = join(data_dir, KEY_FILES[i]);
    if (k != NULL && exists(k))
      rc = copy_listed(data_dir, dest, KEY_FILES[i], &m, err);
    sbx_free(k);
  }
  if (rc == 0)
    rc = write_info(dest, version, &m, err);
  if (rc == 0) {
    st__fsync_dir(dest);
    rc = manifest_write(dest, &m, err);
  }
out:
  sbx_free(blobs);
  if (rc != 0)
    rm_tree(dest, !made); /* it was new or empty: everything in it is ours */
  else if (stats != NULL)
    st.schema_version = version, *stats = st;
  manifest_free(&m);
  return rc;
}

/* ---- restore --------------------------------------------------------------------------------- */

/* Every file under src (but the manifest) must be one the manifest lists. */
static int unlisted_file(const char *src, const char *rel, const struct manifest *m,
                         struct sbx_error *err) {
  char *dir = rel[0] ? join(src, rel) : sbx_strdup(src);
  DIR *d = dir ? opendir(dir) : NULL;
  int rc = 0;
  if (d == NULL) {
    rc = sbx_error_set(err, SBX_EIO, "%s: %s", dir ? dir : src, strerror(errno));
    sbx_free(dir);
    return rc;
  }
  struct dirent *e;
  while (rc == 0 && (e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    char sub[PATH_MAX];
    snprintf(sub, sizeof sub, "%s%s%s", rel, rel[0] ? "/" : "", e->d_name);
    if (!rel[0] && strcmp(e->d_name, MANIFEST) == 0)
      continue;
    struct stat sb;
    char *full = join(src, sub);
    if (full == NULL || lstat(full, &sb) != 0)
      rc = sbx_error_set(err, SBX_EIO, "%s: %s", sub, strerror(errno));
    else if (S_ISDIR(sb.st_mode) && strchr(sub, '/') == NULL && strcmp(sub, "blobs") == 0)
      rc = unlisted_file(src, sub, m, err);
    else if (S_ISDIR(sb.st_mode) && strncmp(sub, "blobs/", 6) == 0 && is_hex(sub + 6, 2))
      rc = unlisted_file(src, sub, m, err);
    else if (!S_ISREG(sb.st_mode) || manifest_find(m, sub) == NULL)
      rc = sbx_error_set(err, SBX_ECORRUPT, "%s is in the backup but not in its manifest", sub);
    sbx_free(full);
  }
  closedir(d);
  sbx_free(dir);
  return rc;
}

static int check_info(const char *tmp, struct sbx_error *err) {
  char *path = join(tmp, INFO);
  FILE *f = path ? fopen(path, "re") : NULL;
  char line[128];
  int format = -1;
  while (f != NULL && fgets(line, sizeof line, f) != NULL)
    if (sscanf(line, "format=%d", &format) == 1)
      break;
  if (f != NULL)
    fclose(f);
  sbx_free(path);
  return format == FORMAT ? 0
                          : sbx_error_set(err, SBX_ECORRUPT,
                                          "%s says format %d: this program restores format %d",
                                          INFO, format, FORMAT);
}

/* SBX_EBUSY when a server holds DATA's lock (store_open's flock on cerea.lock). */
static int not_in_use(const char *data_dir, struct sbx_error *err) {
  char *path = join(data_dir, "cerea.lock");
  int fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1, rc = 0;
  if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK)
    rc = sbx_error_set(err, SBX_EBUSY,
                       "%s is in use by a running server: stop it, and restore into a new folder",
                       data_dir);
  if (fd >= 0)
    close(fd); /* releases the lock we may have taken */
  sbx_free(path);
  return rc;
}

int store_restore(const char *src, const char *target, struct store_backup_stats *stats,
                  struct sbx_error *err) {
  struct manifest m = {0};
  struct store_backup_stats st = {0};
  char *tmp = NULL, *data_dir = sbx_strdup(target);
  int rc;
  if (data_dir == NULL)
    return sbx_error_set(err, SBX_ENOMEM, "out of memory");
  for (size_t k = strlen(data_dir); k > 1 && data_dir[k - 1] == '/'; k--)
    data_dir[k - 1] = '\0'; /* the temporary folder goes beside it, not in it */
  if ((rc = not_in_use(data_dir, err)) != 0)
    goto out;
  int e = empty_or_absent(data_dir);
  if (e < 0) {
    rc = sbx_error_set(err, SBX_EIO, "%s: %s", data_dir, strerror(-e));
    goto out;
  }
  if (e == 0) {
    rc = sbx_error_set(err, SBX_EEXIST,
                       "%s is not empty: a restore goes into a new or empty folder (nothing "
                       "was changed)",
                       data_dir);
    goto out;
  }
  if ((rc = manifest_read(src, &m, err)) != 0 || (rc = unlisted_file(src, "", &m, err)) != 0)
    goto out;

  /* The copy goes to a temporary folder beside the target, renamed into place at the end. */
  size_t n = strlen(data_dir) + 32;
  if ((tmp = sbx_malloc(n)) == NULL) {
    rc = sbx_error_set(err, SBX_ENOMEM, "out of memory");
    goto out;
  }
  snprintf(tmp, n, "%s.restore-XXXXXX", data_dir);
  if (mkdtemp(tmp) == NULL) {
    int te = errno;
    sbx_free(tmp);
    tmp = NULL;
    rc = sbx_error_set(err, (te == EACCES || te == EPERM || te == EROFS) ? SBX_EPERM : SBX_EIO,
                       "cannot make a folder beside %s: %s", data_dir, strerror(te));
    goto out;
  }
  for (size_t i = 0; i < m.n && rc == 0; i++) {
    const struct entry *en = &m.v[i];
    char *s = join(src, en->path), *d = join(tmp, en->path), got[65];
    uint64_t size = 0;
    if (s == NULL || d == NULL) {
      rc = sbx_error_set(err, SBX_ENOMEM, "out of memory");
    } else {
      if (strncmp(en->path, "blobs/", 6) == 0) {
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%s/blobs", tmp);
        if ((rc = mkdir_err(dir, err)) == 0) {
          snprintf(dir, sizeof dir, "%s/blobs/%.2s", tmp, en->path + 6);
          rc = mkdir_err(dir, err);
        }
      }
      if (rc == 0 && (rc = hash_copy(s, d, got, &size, err)) == SBX_ENOENT)
        rc = sbx_error_set(err, SBX_ECORRUPT, "%s is in the manifest but not in the backup",
                           en->path);
      if (rc == 0 && strcmp(got, en->sha) != 0)
        rc = sbx_error_set(err, SBX_ECORRUPT,
                           "%s does not match its sha256 in the manifest (changed or cut short)",
                           en->path);
      if (rc == 0 && strncmp(en->path, "blobs/", 6) == 0)
        st.blobs++, st.blob_bytes += size;
      else if (rc == 0 && strcmp(en->path, "cerea.db") == 0)
        st.db_bytes = size;
    }
    sbx_free(s);
    sbx_free(d);
  }
  if (rc == 0)
    rc = check_info(tmp, err);
  if (rc == 0) {
    char *db_path = join(tmp, "cerea.db");
    sqlite3 *db = NULL;
    if (db_path == NULL || sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
      rc = sbx_error_set(err, SBX_ECORRUPT, "the backup's cerea.db does not open");
    else
      rc = db_checked(db, "the backup's cerea.db", &st.schema_version, err);
    sqlite3_close(db);
    sbx_free(db_path);
  }
  if (rc == 0) {
    rmdir(data_dir); /* empty (checked above) or absent */
    if (rename(tmp, data_dir) != 0)
      rc = sbx_error_set(err, SBX_EIO, "rename %s to %s: %s", tmp, data_dir, strerror(errno));
  }
  if (rc == 0) {
    char parent[PATH_MAX];
    snprintf(parent, sizeof parent, "%s/..", data_dir);
    st__fsync_dir(parent);
  }
out:
  if (rc != 0 && tmp != NULL)
    rm_tree(tmp, 0);
  sbx_free(tmp);
  sbx_free(data_dir);
  manifest_free(&m);
  if (rc == 0 && stats != NULL)
    *stats = st;
  return rc;
}
