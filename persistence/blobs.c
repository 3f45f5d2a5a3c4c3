/* blobs.c -- the content-addressed blob store: DATA/blobs/ab/<sha256>, one file per distinct
 * content, referenced from the blobs table.
 *
 * A blob is written by the writer thread, before the row that references it, as: temp file in
 * the same directory, write all, fsync, rename over the final name, fsync the directory.  So a
 * file at its final name is always complete, and once the row that names it commits, the bytes
 * are durable.  The same content is never stored twice: a row in `blobs` means the file is
 * there.  A file without a row (its transaction rolled back, or the process died between the
 * blob and the commit) is reused when the same content comes again and is otherwise harmless.
 * Reads: store_blob_path for streaming, store_blob_read for small blobs.
 *
 * What it does not do: decide when a blob may go (sweep.c does, after the commit that dropped
 * its last reference).
 */
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void store_sha256_hex(const void *data, size_t len, char out[65]) {
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(data, len, md);
  sbx_hex(md, sizeof md, out);
}

static int valid_sha(const char *sha) {
  if (sha == NULL || strlen(sha) != 64)
    return 0;
  for (int i = 0; i < 64; i++)
    if (!((sha[i] >= '0' && sha[i] <= '9') || (sha[i] >= 'a' && sha[i] <= 'f')))
      return 0;
  return 1;
}

char *st__blob_path(const struct store *st, const char *sha) {
  if (!valid_sha(sha))
    return NULL;
  size_t n = strlen(st->blob_dir) + 1 + 2 + 1 + 64 + 1;
  char *p = sbx_malloc(n);
  if (p)
    snprintf(p, n, "%s/%.2s/%s", st->blob_dir, sha, sha);
  return p;
}

char *store_blob_path(struct store *st, const char *sha256) { return st__blob_path(st, sha256); }

int st__fsync_dir(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  int rc = fsync(fd) == 0 ? 0 : -errno;
  close(fd);
  return rc;
}

static int write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      return -errno;
    }
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

static int errno_code(int e) { return e == ENOSPC || e == EDQUOT ? SBX_EFULL : SBX_EIO; }

/* Writes the file for `sha` unless a complete one is there. */
static int write_blob_file(struct store *st, const char *sha, const void *data, size_t len,
                           struct sbx_error *err) {
  int rc = 0, fd = -1;
  char sub[4096];
  char *final = st__blob_path(st, sha), *tmp = NULL;
  if (final == NULL)
    return sbx_error_set(err, SBX_ENOMEM, "blob path: out of memory");
  snprintf(sub, sizeof sub, "%s/%.2s", st->blob_dir, sha);
  struct stat sb;
  if (stat(final, &sb) == 0 && (uint64_t)sb.st_size == (uint64_t)len)
    goto sync_dir; /* left by an earlier write whose row never committed: complete (renamed) */
  if (mkdir(sub, 0700) == 0) {
    if ((rc = st__fsync_dir(st->blob_dir)) != 0) {
      rc = sbx_error_set(err, errno_code(-rc), "fsync %s: %s", st->blob_dir, strerror(-rc));
      goto out;
    }
  } else if (errno != EEXIST) {
    rc = sbx_error_set(err, errno_code(errno), "mkdir %s: %s", sub, strerror(errno));
    goto out;
  }
  size_t tn = strlen(final) + 16;
  if ((tmp = sbx_malloc(tn)) == NULL) {
    rc = sbx_error_set(err, SBX_ENOMEM, "blob path: out of memory");
    goto out;
  }
  snprintf(tmp, tn, "%s.tmp", final);
  fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    rc = sbx_error_set(err, errno_code(errno), "open %s: %s", tmp, strerror(errno));
    goto out;
  }
  if ((rc = write_all(fd, data, len)) != 0 || (fsync(fd) != 0 && (rc = -errno))) {
    rc = sbx_error_set(err, errno_code(-rc), "write %s: %s", tmp, strerror(-rc));
    goto out;
  }
  if (close(fd) != 0) {
    fd = -1;
    rc = sbx_error_set(err, errno_code(errno), "close %s: %s", tmp, strerror(errno));
    goto out;
  }
  fd = -1;
  if (rename(tmp, final) != 0) {
    rc = sbx_error_set(err, errno_code(errno), "rename %s: %s", final, strerror(errno));
    goto out;
  }
sync_dir:
  if ((rc = st__fsync_dir(sub)) != 0)
    rc = sbx_error_set(err, errno_code(-rc), "fsync %s: %s", sub, strerror(-rc));
out:
  if (fd >= 0)
    close(fd);
  if (rc != 0 && tmp)
    unlink(tmp);
  sbx_free(tmp);
  sbx_free(final);
  return rc;
}

int st__blob_put(struct store *st, const char *sha, const void *data, size_t len, int64_t *added,
                 struct sbx_error *err) {
  sqlite3_stmt *s = st->ws[ST_BLOB_EXISTS];
  int rc;
  *added = 0;
  sqlite3_bind_text(s, 1, sha, -1, SQLITE_STATIC);
  rc = sqlite3_step(s);
  st__reset(s);
  if (rc == SQLITE_ROW)
    return 0; /* same content never stored twice */
  if (rc != SQLITE_DONE)
    return st__translate(st->wdb, rc, "blob lookup", err);
  if ((rc = write_blob_file(st, sha, data, len, err)) != 0)
    return rc;
  s = st->ws[ST_BLOB_INSERT];
  sqlite3_bind_text(s, 1, sha, -1, SQLITE_STATIC);
  sqlite3_bind_int64(s, 2, (sqlite3_int64)len);
  sqlite3_bind_int64(s, 3, sbx_now_wall_ms());
  if ((rc = st__step_done(st->wdb, s, "blob insert", err)) != 0)
    return rc;
  *added = (int64_t)len;
  return 0;
}

int store_blob_open(struct store *st, const char *sha256, int *fd, uint64_t *size) {
  *fd = -1;
  *size = 0;
  char *path = st__blob_path(st, sha256);
  if (path == NULL)
    return valid_sha(sha256) ? SBX_ENOMEM : SBX_EINVAL;
  int f = open(path, O_RDONLY | O_CLOEXEC);
  sbx_free(path);
  if (f < 0)
    return errno == ENOENT ? SBX_ENOENT : SBX_EIO;
  struct stat sb;
  if (fstat(f, &sb) != 0) {
    close(f);
    return SBX_EIO;
  }
  *fd = f;
  *size = (uint64_t)sb.st_size;
  return 0;
}

int store_blob_read(struct store *st, const char *sha256, char **data, size_t *len) {
  *data = NULL;
  *len = 0;
  char *path = st__blob_path(st, sha256);
  if (path == NULL)
    return valid_sha(sha256) ? SBX_ENOMEM : SBX_EINVAL;
  int rc = 0, fd = open(path, O_RDONLY | O_CLOEXEC);
  sbx_free(path);
  if (fd < 0)
    return errno == ENOENT ? SBX_ENOENT : SBX_EIO;
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    rc = SBX_EIO;
    goto out;
  }
  size_t n = (size_t)sb.st_size, got = 0;
  char *buf = sbx_malloc(n + 1);
  if (buf == NULL) {
    rc = SBX_ENOMEM;
    goto out;
  }
  while (got < n) {
    ssize_t r = read(fd, buf + got, n - got);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0) {
      sbx_free(buf);
      rc = SBX_EIO;
      goto out;
    }
    got += (size_t)r;
  }
  buf[n] = '\0';
  *data = buf;
  *len = n;
out:
  close(fd);
  return rc;
}


void st__blob_cleanup_tmp(struct store *st) {
  DIR *top = opendir(st->blob_dir);
  if (top == NULL)
    return;
  struct dirent *e;
  size_t removed = 0;
  while ((e = readdir(top)) != NULL) {
    if (strlen(e->d_name) != 2 || e->d_name[0] == '.')
      continue;
    char sub[4096];
    snprintf(sub, sizeof sub, "%s/%s", st->blob_dir, e->d_name);
    DIR *d = opendir(sub);
    if (d == NULL)
      continue;
    struct dirent *f;
    while ((f = readdir(d)) != NULL) {
      size_t n = strlen(f->d_name);
      if (n > 4 && strcmp(f->d_name + n - 4, ".tmp") == 0) {
        char p[4096 + 256];
        snprintf(p, sizeof p, "%s/%s", sub, f->d_name);
        if (unlink(p) == 0)
          removed++;
      }
    }
    closedir(d);
  }
  closedir(top);
  if (removed)
    sbx_log(SBX_LOG_INFO, ST_MOD, "removed %zu blob temp files left by an earlier process", removed);
}
