/* blobs.c -- the content-addressed blob store: DATA/blobs/ab/<sha256>, one file per distinct
 * content, referenced from the blobs table.
 *
 * A blob is written by the writer thread, before the row that references it: a temp file in its
 * directory, written while the write runs; then, just before the group's COMMIT, every temp file
 * of the group is fsynced (in parallel), renamed to its final name, and the directories touched
 * are fsynced.  So a file at its final name is always complete, and once the row that names it
 * commits, the bytes are durable.  The same content is never stored twice: a row in `blobs`
 * means the file is there.  A file without a row (its transaction rolled back, or the process
 * died between the blob and the commit) is reused when the same content comes again and is
 * otherwise harmless.
 * Reads: store_blob_path for streaming, store_blob_read for small blobs.  A staged blob (stage.c:
 * a streamed upload, written and hashed on the loop thread into blobs/tmp/) joins the same path
 * as a pending file of its write (st__blob_put_staged): fsynced, renamed, directory fsynced.
 *
 * What it does not do: decide when a blob may go (sweep.c does, after the commit that dropped
 * its last reference).
 */
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* SHA256() looks the algorithm up in OpenSSL 3's provider tables on every call, most of its
 * cost for a token or a small body; the algorithm is fetched once here and shared (an EVP_MD is
 * safe to use from several threads).  It lives as long as the process. */
static EVP_MD *sha256_md;
static pthread_once_t sha256_once = PTHREAD_ONCE_INIT;
static void sha256_fetch(void) { sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL); }

void store_sha256_hex(const void *data, size_t len, char out[65]) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  pthread_once(&sha256_once, sha256_fetch);
  if (sha256_md == NULL || EVP_Digest(data, len, md, &n, sha256_md, NULL) != 1 ||
      n != SHA256_DIGEST_LENGTH)
    SHA256(data, len, md);
  sbx_hex(md, SHA256_DIGEST_LENGTH, out);
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

/* Loop thread: the path of blob sha's file on this node (*path owned; NULL on SBX_EINVAL /
 * SBX_ENOMEM); with PostgreSQL, a blob this node has no copy of is fetched first (chunks.c). */
static int blob_local(struct store *st, const char *sha, char **path) {
  if ((*path = st__blob_path(st, sha)) == NULL)
    return valid_sha(sha) ? SBX_ENOMEM : SBX_EINVAL;
  if (st->kind != ST_PG || access(*path, F_OK) == 0)
    return 0;
  struct sbx_error e;
  int rc = st__chunks_fetch(st, sha, *path, &e);
  if (rc != 0 && rc != SBX_ENOENT)
    sbx_log(SBX_LOG_WARN, ST_MOD, "%s", e.msg);
  return rc;
}

char *store_blob_path(struct store *st, const char *sha256) {
  char *path = NULL;
  blob_local(st, sha256, &path); /* a copy that could not be made: the caller finds no file */
  return path;
}

static int hexval(char c) { return c <= '9' ? c - '0' : c - 'a' + 10; }

/* Writes the temp file for `sha` (no fsync yet: st__blob_prepare_commit does them all at once)
 * unless a complete file is at the final name already. */
static int write_blob_file(struct store *st, struct st_write *w, const char *sha, const void *data,
                           size_t len, struct sbx_error *err) {
  int rc = 0, fd = -1;
  char sub[4096];
  char *final = st__blob_path(st, sha), *tmp = NULL;
  int idx = hexval(sha[0]) * 16 + hexval(sha[1]);
  if (final == NULL)
    return sbx_error_set(err, SBX_ENOMEM, "blob path: out of memory");
  snprintf(sub, sizeof sub, "%s/%.2s", st->blob_dir, sha);
  struct stat sb;
  if (stat(final, &sb) == 0 && (uint64_t)sb.st_size == (uint64_t)len) {
    /* left by an earlier group whose commit failed: complete (only fsynced files are renamed),
     * but its directory entry may not be durable yet */
    st->dirty_sub[idx] = 1;
    goto out;
  }
  if (mkdir(sub, 0700) == 0) {
    st->dirty_top = 1;
  } else if (errno != EEXIST) {
    rc = sbx_error_set(err, st__errno_code(errno), "mkdir %s: %s", sub, strerror(errno));
    goto out;
  }
  struct st_blob_pending *pv = sbx_realloc(w->pending, (w->npending + 1) * sizeof *pv);
  size_t tn = strlen(final) + 32;
  if (pv == NULL || (tmp = sbx_malloc(tn)) == NULL) {
    if (pv)
      w->pending = pv;
    rc = sbx_error_set(err, SBX_ENOMEM, "blob: out of memory");
    goto out;
  }
  w->pending = pv;
  /* unique per write: two writes of one group may both write the same content when the first
   * rolled back after writing it */
  snprintf(tmp, tn, "%s.%llu.tmp", final, (unsigned long long)++st->tmp_seq);
  fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    rc = sbx_error_set(err, st__errno_code(errno), "open %s: %s", tmp, strerror(errno));
    goto out;
  }
  if ((rc = sbx_write_all(fd, data, len)) != 0) {
    rc = sbx_error_set(err, st__errno_code(-rc), "write %s: %s", tmp, strerror(-rc));
    goto out;
  }
  if (close(fd) != 0) {
    fd = -1;
    unlink(tmp);
    rc = sbx_error_set(err, st__errno_code(errno), "close %s: %s", tmp, strerror(errno));
    goto out;
  }
  /* closed now, reopened for the fsync: a group may hold thousands of new blobs, more than the
   * process may keep open */
  pv[w->npending++] = (struct st_blob_pending){-1, tmp, final, 0};
  st->dirty_sub[idx] = 1;
  return 0;
out:
  if (fd >= 0) {
    close(fd);
    unlink(tmp);
  }
  sbx_free(tmp);
  sbx_free(final);
  return rc;
}

/* Writer thread: is a blob with this content stored already?  1 yes, 0 no, or an error. */
static int blob_known(struct store *st, const char *sha, struct sbx_error *err) {
  struct st_stmt *s = st__q(&st->w, ST_BLOB_EXISTS);
  st__bind_text(s, 1, sha);
  return st__step_one(s, "blob lookup", err);
}

/* Writer thread: the blob's row and, in PostgreSQL, its content (chunks.c: from data, or from
 * the file at path when data is NULL).  No row inserted (PostgreSQL: another node's transaction
 * stored the same content meanwhile, BLOB_INSERT's DO NOTHING) means it is stored: no chunks. */
static int blob_insert(struct store *st, struct st_write *w, const char *sha, const void *data,
                       const char *path, uint64_t len, struct sbx_error *err) {
  struct st_stmt *s = st__q(&st->w, ST_BLOB_INSERT);
  st__bind_text(s, 1, sha);
  st__bind_int64(s, 2, (int64_t)len);
  st__bind_int64(s, 3, sbx_now_wall_ms());
  int rc = st__step_done(s, "blob insert", err);
  if (rc != 0 || st__changes(&st->w) == 0)
    return rc;
  if (st->kind == ST_PG && (rc = st__chunks_put(st, sha, data, path, len, err)) != 0)
    return rc;
  w->blob_delta += (int64_t)len;
  return 0;
}

int st__blob_put(struct store *st, struct st_write *w, const char *sha, const void *data,
                 size_t len, struct sbx_error *err) {
  int rc = blob_known(st, sha, err);
  if (rc != 0)
    return rc < 0 ? rc : 0; /* same content never stored twice */
  if ((rc = write_blob_file(st, w, sha, data, len, err)) != 0)
    return rc;
  return blob_insert(st, w, sha, data ? data : "", NULL, len, err);
}

int st__blob_put_staged(struct store *st, struct st_write *w, const char *sha, char **tmp,
                        uint64_t len, struct sbx_error *err) {
  int rc = blob_known(st, sha, err);
  char sub[4096];
  if (rc != 0)
    return rc < 0 ? rc : 0; /* stored already: the caller unlinks the temp file */
  char *final = st__blob_path(st, sha);
  int idx = hexval(sha[0]) * 16 + hexval(sha[1]);
  if (final == NULL)
    return sbx_error_set(err, SBX_ENOMEM, "blob path: out of memory");
  const char *src; /* where the content is until the commit: what chunks.c reads */
  struct stat sb;
  if (stat(final, &sb) == 0 && (uint64_t)sb.st_size == len) {
    st->dirty_sub[idx] = 1; /* a complete leftover (see write_blob_file): reused */
    src = *tmp;
    rc = blob_insert(st, w, sha, NULL, src, len, err);
    sbx_free(final);
    return rc;
  }
  snprintf(sub, sizeof sub, "%s/%.2s", st->blob_dir, sha);
  if (mkdir(sub, 0700) == 0) {
    st->dirty_top = 1;
  } else if (errno != EEXIST) {
    rc = sbx_error_set(err, st__errno_code(errno), "mkdir %s: %s", sub, strerror(errno));
    sbx_free(final);
    return rc;
  }
  struct st_blob_pending *pv = sbx_realloc(w->pending, (w->npending + 1) * sizeof *pv);
  if (pv == NULL) {
    sbx_free(final);
    return sbx_error_set(err, SBX_ENOMEM, "blob: out of memory");
  }
  w->pending = pv;
  pv[w->npending++] = (struct st_blob_pending){-1, *tmp, final, 0};
  src = *tmp;
  *tmp = NULL; /* the pending entry owns it now: renamed before the commit or unlinked */
  st->dirty_sub[idx] = 1;
  return blob_insert(st, w, sha, NULL, src, len, err);
}

/* ---- durability before the commit -------------------------------------------------------
 * fsync of many new files one after the other costs one journal commit each; issued from a few
 * threads at once the file system folds them together (figures: docs/benchmarks.md, the store
 * section).  So the group's blob files and directories are fsynced in parallel, once, here. */

#define FSYNC_THREADS 4

struct fsync_job {
  int *fds;
  size_t n, stride, first;
  int err; /* errno of the first failure, or 0 */
  size_t failed;
};

static void *fsync_worker(void *arg) {
  struct fsync_job *j = arg;
  for (size_t i = j->first; i < j->n; i += j->stride)
    if (st__fsync(j->fds[i]) != 0 && j->err == 0) {
      j->err = errno;
      j->failed = i;
    }
  return NULL;
}

/* fsyncs every fd; returns 0 or the errno of a failure, with its index in *failed. */
static int fsync_all(int *fds, size_t n, size_t *failed) {
  struct fsync_job jobs[FSYNC_THREADS];
  pthread_t th[FSYNC_THREADS];
  size_t nt = n < FSYNC_THREADS ? n : FSYNC_THREADS, started = 0;
  for (size_t k = 0; k < nt; k++) {
    jobs[k] = (struct fsync_job){fds, n, nt, k, 0, 0};
    if (k > 0 && pthread_create(&th[k], NULL, fsync_worker, &jobs[k]) == 0)
      started |= (size_t)1 << k;
    else if (k > 0)
      fsync_worker(&jobs[k]); /* no thread: do it here */
  }
  if (nt > 0)
    fsync_worker(&jobs[0]);
  int err = 0;
  for (size_t k = 0; k < nt; k++) {
    if (started & ((size_t)1 << k))
      pthread_join(th[k], NULL);
    if (jobs[k].err && !err) {
      err = jobs[k].err;
      *failed = jobs[k].failed;
    }
  }
  return err;
}

#define FSYNC_BATCH 64 /* files open at once for the parallel fsync */

/* Opens and fsyncs paths[0..n) in batches (files or directories).  0 or an error with the path. */
static int fsync_paths(char *const *paths, size_t n, struct sbx_error *err) {
  int fds[FSYNC_BATCH];
  for (size_t base = 0; base < n; base += FSYNC_BATCH) {
    size_t m = SBX_MIN((size_t)FSYNC_BATCH, n - base), failed = 0, k;
    int rc = 0, e;
    for (k = 0; k < m; k++) {
      fds[k] = open(paths[base + k], O_RDONLY | O_CLOEXEC);
      if (fds[k] < 0) {
        rc = sbx_error_set(err, st__errno_code(errno), "open %s: %s", paths[base + k],
                           strerror(errno));
        break;
      }
    }
    if (rc == 0 && (e = fsync_all(fds, m, &failed)) != 0)
      rc = sbx_error_set(err, st__errno_code(e), "fsync %s: %s", paths[base + failed], strerror(e));
    for (size_t j = 0; j < k; j++)
      close(fds[j]);
    if (rc != 0)
      return rc;
  }
  return 0;
}

int st__blob_prepare_commit(struct store *st, struct sbx_list *txn, struct sbx_error *err) {
  struct sbx_list *it;
  size_t n = 0, i = 0, nd = 0;
  int rc = 0;
  SBX_LIST_FOREACH(it, txn) {
    struct st_write *w = SBX_CONTAINER_OF(it, struct st_write, link);
    if (w->rc == 0)
      n += w->npending;
  }
  int dirty = st->dirty_top;
  for (int d = 0; d < 256 && !dirty; d++)
    dirty = st->dirty_sub[d];
  if (n == 0 && !dirty)
    return 0; /* the common group: no new blob, nothing to allocate or sync */
  char **paths = sbx_calloc(n + 257, sizeof *paths);
  struct st_blob_pending **pv = sbx_malloc((n + 1) * sizeof *pv);
  if (paths == NULL || pv == NULL) {
    rc = sbx_error_set(err, SBX_ENOMEM, "blob commit: out of memory");
    goto out;
  }
  SBX_LIST_FOREACH(it, txn) {
    struct st_write *w = SBX_CONTAINER_OF(it, struct st_write, link);
    for (size_t k = 0; w->rc == 0 && k < w->npending; k++) {
      pv[i] = &w->pending[k];
      paths[i++] = w->pending[k].tmp; /* borrowed */
    }
  }
  if ((rc = fsync_paths(paths, n, err)) != 0)
    goto out;
  for (i = 0; i < n; i++) {
    if (rename(pv[i]->tmp, pv[i]->final) != 0) {
      rc =
          sbx_error_set(err, st__errno_code(errno), "rename %s: %s", pv[i]->final, strerror(errno));
      goto out;
    }
    pv[i]->renamed = 1;
  }
  /* the directories whose entries changed (renames, a new subdirectory) */
  char **dirs = paths + n;
  size_t dl = strlen(st->blob_dir) + 4;
  for (int d = -1; d < 256; d++) {
    if (d < 0 ? !st->dirty_top : !st->dirty_sub[d])
      continue;
    if ((dirs[nd] = sbx_malloc(dl)) == NULL) {
      rc = sbx_error_set(err, SBX_ENOMEM, "blob commit: out of memory");
      goto out;
    }
    if (d < 0)
      snprintf(dirs[nd], dl, "%s", st->blob_dir);
    else
      snprintf(dirs[nd], dl, "%s/%02x", st->blob_dir, d);
    nd++;
  }
  if ((rc = fsync_paths(dirs, nd, err)) != 0)
    goto out;
  memset(st->dirty_sub, 0, sizeof st->dirty_sub);
  st->dirty_top = 0;
out:
  for (i = 0; paths && i < nd; i++)
    sbx_free(paths[n + i]);
  sbx_free(paths);
  sbx_free(pv);
  return rc;
}

void st__blob_pending_drop(struct st_write *w) {
  for (size_t k = 0; k < w->npending; k++) {
    struct st_blob_pending *p = &w->pending[k];
    if (p->fd >= 0)
      close(p->fd);
    if (!p->renamed)
      unlink(p->tmp);
    sbx_free(p->tmp);
    sbx_free(p->final);
  }
  sbx_free(w->pending);
  w->pending = NULL;
  w->npending = 0;
}

int store_blob_open(struct store *st, const char *sha256, int *fd, uint64_t *size) {
  *fd = -1;
  *size = 0;
  char *path = NULL;
  int rc = blob_local(st, sha256, &path);
  if (rc != 0) {
    sbx_free(path);
    return rc;
  }
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
  int fd = -1;
  uint64_t size = 0;
  int rc = store_blob_open(st, sha256, &fd, &size);
  if (rc != 0)
    return rc;
  size_t n = (size_t)size, got = 0;
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

/* Every file in blobs/tmp/ is a stage of an earlier process (stage.c): none is referenced. */
static size_t cleanup_stages(struct store *st) {
  size_t removed = 0;
  char *dir = st__stage_dir(st);
  if (dir == NULL)
    return 0;
  if (mkdir(dir, 0700) != 0 && errno == EEXIST) {
    DIR *d = opendir(dir);
    struct dirent *f;
    while (d && (f = readdir(d)) != NULL) {
      if (f->d_name[0] == '.')
        continue;
      char p[4096 + 256];
      snprintf(p, sizeof p, "%s/%s", dir, f->d_name);
      if (unlink(p) == 0)
        removed++;
    }
    if (d)
      closedir(d);
  }
  sbx_free(dir);
  return removed;
}

void st__blob_cleanup_tmp(struct store *st) {
  size_t removed = cleanup_stages(st);
  DIR *top = opendir(st->blob_dir);
  if (top == NULL)
    return;
  struct dirent *e;
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
    sbx_log(SBX_LOG_INFO, ST_MOD, "removed %zu blob temp files left by an earlier process",
            removed);
}
