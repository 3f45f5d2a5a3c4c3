/* chunks.c -- blob contents in PostgreSQL.  With a database URL, a blob's bytes live in the
 * database, in blob_chunks rows of ST_CHUNK bytes numbered from 0 (pg.c's schema), so that every
 * node reads every file; each node keeps local copies in DATA/blobs/ab/<sha256>, the layout of
 * SQLite's blob store (blobs.c writes them as it does there), and downloads stream from those
 * (tp_respond_file: Range, the kernel's sendfile).
 *
 * Writes (writer thread, inside the write's savepoint, after the blob's row is inserted): from
 * memory (store_file_add's borrowed buffer: each chunk bound in place, not copied) or from a
 * file (a staged upload's temp file, read ST_CHUNK bytes at a time: a 50 MiB upload never sits in
 * memory whole).  They commit with the group, so a file's row and its content are durable
 * together.
 * Reads (loop thread, the reader's connection): a blob this node has no copy of is fetched chunk
 * by chunk into a temp file beside its final name, its sha256 checked, fsynced and renamed, so a
 * local copy is always complete and always that content.  One round trip per chunk: a 50 MiB
 * file costs 50 of them on the loop thread, once per node (docs/scale.md).
 *
 * What it does not do: decide whether a blob is new (blobs.c), or delete one (sweep.c: a blob's
 * chunks go with its row, ON DELETE CASCADE).
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int st__chunks_put(struct store *st, const char *sha, const void *data, const char *path,
                   uint64_t len, struct sbx_error *err) {
  struct st_stmt *s = st__q(&st->w, ST_CHUNK_PUT);
  char *buf = NULL;
  int fd = -1, rc = 0;
  if (data == NULL && len > 0) {
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
      return sbx_error_set(err, st__errno_code(errno), "open %s: %s", path, strerror(errno));
    if ((buf = sbx_malloc(SBX_MIN((uint64_t)ST_CHUNK, len))) == NULL) {
      close(fd);
      return sbx_error_set(err, SBX_ENOMEM, "blob chunks: out of memory");
    }
  }
  for (uint64_t off = 0, n = 0; off < len && rc == 0; n++) {
    size_t piece = (size_t)SBX_MIN((uint64_t)ST_CHUNK, len - off);
    const void *p = data ? (const char *)data + off : buf;
    if (data == NULL) {
      size_t got = 0;
      while (got < piece) {
        ssize_t r = pread(fd, buf + got, piece - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
          continue;
        if (r <= 0) {
          rc = sbx_error_set(err, SBX_EIO, "read %s: %s", path, r < 0 ? strerror(errno) : "short");
          break;
        }
        got += (size_t)r;
      }
      if (rc != 0)
        break;
    }
    st__bind_text(s, 1, sha);
    st__bind_int64(s, 2, (int64_t)n);
    st__bind_blob(s, 3, p, piece);
    rc = st__step_done(s, "blob chunk put", err);
    off += piece;
  }
  if (fd >= 0)
    close(fd);
  sbx_free(buf);
  return rc;
}

/* Writes the chunks of sha (size bytes in all) into the open fd, checking them against sha. */
static int fetch_into(struct store *st, const char *sha, uint64_t size, int fd, const char *tmp,
                      struct sbx_error *err) {
  struct st_stmt *s = st__q(&st->r, ST_CHUNK_GET);
  EVP_MD_CTX *md = EVP_MD_CTX_new();
  uint64_t got = 0;
  int rc = 0;
  if (md == NULL || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
    EVP_MD_CTX_free(md);
    return sbx_error_set(err, SBX_ENOMEM, "blob %s: digest init failed", sha);
  }
  for (int64_t n = 0; got < size && rc == 0; n++) {
    st__bind_text(s, 1, sha);
    st__bind_int64(s, 2, n);
    int r = st__step(s, "blob chunk get", err);
    size_t len = 0;
    const void *p = r == ST_ROW ? st__col_blob(s, 0, &len) : NULL;
    if (r < 0)
      rc = r;
    else if (r == ST_DONE || len == 0 || got + len > size)
      rc = sbx_error_set(err, SBX_ECORRUPT, "blob %s: chunk %lld %s", sha, (long long)n,
                         r == ST_DONE ? "missing" : "of the wrong size");
    else if ((rc = sbx_write_all(fd, p, len)) != 0)
      rc = sbx_error_set(err, st__errno_code(-rc), "write %s: %s", tmp, strerror(-rc));
    else if (EVP_DigestUpdate(md, p, len) != 1)
      rc = sbx_error_set(err, SBX_EIO, "blob %s: digest failed", sha);
    else
      got += len;
    st__reset(s);
  }
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned int dn = 0;
  char hex[65];
  if (rc == 0 && (EVP_DigestFinal_ex(md, d, &dn) != 1 || dn != 32))
    rc = sbx_error_set(err, SBX_EIO, "blob %s: digest failed", sha);
  if (rc == 0) {
    sbx_hex(d, 32, hex);
    if (strcmp(hex, sha) != 0)
      rc = sbx_error_set(err, SBX_ECORRUPT, "blob %s: the database holds content of sha256 %s", sha,
                         hex);
  }
  EVP_MD_CTX_free(md);
  return rc;
}

int st__chunks_fetch(struct store *st, const char *sha, const char *final, struct sbx_error *err) {
  struct st_stmt *s = st__q(&st->r, ST_BLOB_EXISTS);
  st__bind_text(s, 1, sha);
  int rc = st__step(s, "blob lookup", err);
  uint64_t size = rc == ST_ROW ? (uint64_t)st__col_int64(s, 0) : 0;
  st__reset(s);
  if (rc == ST_DONE)
    return sbx_error_set(err, SBX_ENOENT, "no blob %s", sha);
  if (rc < 0)
    return rc;
  char sub[4096], tmp[4200];
  snprintf(sub, sizeof sub, "%s/%.2s", st->blob_dir, sha);
  snprintf(tmp, sizeof tmp, "%s.fetch.tmp", final); /* loop thread only: one fetch at a time */
  if (mkdir(sub, 0700) != 0 && errno != EEXIST)
    return sbx_error_set(err, st__errno_code(errno), "mkdir %s: %s", sub, strerror(errno));
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    return sbx_error_set(err, st__errno_code(errno), "open %s: %s", tmp, strerror(errno));
  rc = fetch_into(st, sha, size, fd, tmp, err);
  if (rc == 0 && st__fsync(fd) != 0)
    rc = sbx_error_set(err, st__errno_code(errno), "fsync %s: %s", tmp, strerror(errno));
  if (close(fd) != 0 && rc == 0)
    rc = sbx_error_set(err, st__errno_code(errno), "close %s: %s", tmp, strerror(errno));
  if (rc == 0 && rename(tmp, final) != 0)
    rc = sbx_error_set(err, st__errno_code(errno), "rename %s: %s", final, strerror(errno));
  if (rc != 0) {
    unlink(tmp);
    return rc;
  }
  if (st__fsync_dir(sub) != 0) /* the copy is complete either way; a lost entry is fetched again */
    sbx_log(SBX_LOG_WARN, ST_MOD, "fsync %s failed", sub);
  return 0;
}
