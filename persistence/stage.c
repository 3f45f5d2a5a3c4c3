/* stage.c -- staged blobs: the content of a streamed upload written to a temp file piece by piece
 * as it arrives, hashed as it goes, and handed whole to the writer by store_file_add_staged.
 *
 * Why: store_file_add borrows one buffer holding the whole content, so an upload of 50 MiB costs
 * 50 MiB of memory until it is stored, and the writer thread hashes and writes all of it inside
 * its group (every other write of that group waits).  A stage moves both jobs off the writer:
 * the bytes go to DATA/blobs/tmp/<random>.tmp and into an incremental SHA-256 (OpenSSL EVP) as
 * they come; the writer is left with an fsync and a rename into the content address (or an
 * unlink when that content is stored already), exactly as it finishes a store_file_add blob.
 *
 * Where the writes happen: synchronously, on the loop thread, one write(2) per piece (the
 * transport hands pieces of up to ~64 KiB).  Chosen over uv_fs_write on the thread pool because
 *   - the piece is borrowed only for the sink call and the transport has no way to pause a
 *     request body, so asynchronous writes would need a copy of every piece and a queue with no
 *     natural bound (the network can outrun the disk): the memory this file exists to save;
  *   - a write(2) of a piece into the page cache is short (shorter than hashing the piece), so a
 *     large upload is many short steps interleaved with every other event of the loop, never one
 *     long one;
 *   - the slow part, the fsync, does not happen here: the writer thread does it before the
 *     commit (blobs.c, in parallel with the group's other blob files).  So that fsync finds
 *     little left to write (the whole group waits for it), every 4 MiB written here starts its
 *     writeback with sync_file_range(SYNC_FILE_RANGE_WRITE), which does not wait for it.
 * (Figures: docs/benchmarks.md, staged uploads.)
 * The cost accepted: when the kernel throttles a process with too many dirty pages, one write may
 * block the loop for a while (the same as any synchronous log write would).
 *
 * Temp files live in DATA/blobs/tmp/ (same file system as the blobs, so the rename is atomic);
 * store_open removes every file there (a process killed mid-upload leaves its stage behind; no
 * row ever names one).  A stage's temp file is removed by store_blob_stage_abort, by the writer
 * when its write fails or its content was stored already, or at the next open.
 *
 * A stage's life is drawn above its enum, below.
 *
 * What it does not do: know about files or names (files.c), or make anything durable (blobs.c,
 * on the writer thread).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sync_file_range */
#endif
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define WRITEBACK_STEP (4u << 20)

/* A stage's life, one object per upload (loop thread only); set_state alone writes its state,
 * through common/fsm.h.  Freed is not a state: the object is gone.
 *
 *    begin ──▶ WRITING ◀─┐ write
 *               │  │  └──┘
 *               │  ├──(a write fails)──▶ FAILED ──(abort)──▶ freed, temp unlinked
 *               │  └──(finish: digest final, file closed)──▶ FINISHED ──(abort)──▶ freed, unlinked
 *               └──(abort)──▶ freed, temp unlinked
 *    WRITING or FINISHED ──(store_file_add_staged)──▶ taken: freed, its temp file the write's
 *
 *   transition            performed by
 *   -> WRITING            store_blob_stage_begin
 *   WRITING -> FAILED     store_blob_stage_write (an I/O error), store_blob_stage_finish (close)
 *   WRITING -> FINISHED   store_blob_stage_finish (or st__stage_take, which finishes first)
 *   any -> freed          store_blob_stage_abort, st__stage_take */
enum stage_state { STAGE_WRITING = 0, STAGE_FAILED, STAGE_FINISHED };

struct store_blob_stage {
  struct store *st;
  enum stage_state state; /* written by set_state only */
  int fd;                 /* open while WRITING */
  char *tmp;              /* DATA/blobs/tmp/<id>.tmp, owned */
  EVP_MD_CTX *md;         /* NULL once FINISHED */
  uint64_t size;
  uint64_t flushed; /* bytes whose writeback was started (sync_file_range) */
  char sha[65];     /* set once FINISHED */
};

static const char *const stage_names[] = {"writing", "failed", "finished"};
static const uint32_t stage_from[] = {
    [STAGE_WRITING] = 0,
    [STAGE_FAILED] = SBX_FSM_BIT(STAGE_WRITING),
    [STAGE_FINISHED] = SBX_FSM_BIT(STAGE_WRITING),
};
static int stage_invariant(const void *obj, unsigned state) {
  const struct store_blob_stage *sg = obj;
  if (state == STAGE_WRITING)
    return sg->fd >= 0 && sg->md != NULL;
  if (state == STAGE_FINISHED)
    return sg->fd < 0 && sg->md == NULL && strlen(sg->sha) == 64;
  return 1;
}
static const struct sbx_fsm stage_fsm =
    SBX_FSM(ST_MOD, "stage", stage_names, stage_from, stage_invariant);

#define set_state(sg, to) set_state_((sg), (to), __FILE__, __LINE__)
static void set_state_(struct store_blob_stage *sg, enum stage_state to, const char *file,
                       int line) {
  if (sbx_fsm_step(&stage_fsm, sg->state, to, sg->tmp, file, line) == 0)
    sg->state = to;
  SBX_FSM_CHECK(&stage_fsm, sg, sg->state, sg->tmp);
}

ssize_t (*st__stage_write_fn)(int fd, const void *p, size_t n) = write;

static int errno_code(int e) { return e == ENOSPC || e == EDQUOT ? SBX_EFULL : SBX_EIO; }

/* A file system call of the stage failed: the error goes to err (may be NULL) and, as a write of
 * the store that failed, to its health (health.c).  Returns the code. */
static int fs_failed(struct store *st, struct sbx_error *err, int e, const char *what,
                     const char *path) {
  struct sbx_error local;
  sbx_error_set(&local, errno_code(e), "%s %s: %s", what, path, strerror(e));
  st__health_note(st, local.code, &local);
  if (err)
    *err = local;
  return local.code;
}

char *st__stage_dir(const struct store *st) {
  size_t n = strlen(st->blob_dir) + 5;
  char *p = sbx_malloc(n);
  if (p)
    snprintf(p, n, "%s/tmp", st->blob_dir);
  return p;
}

static void stage_free(struct store_blob_stage *sg) {
  if (sg->fd >= 0)
    close(sg->fd);
  if (sg->md)
    EVP_MD_CTX_free(sg->md);
  sbx_free(sg->tmp);
  sbx_free(sg);
}

int store_blob_stage_begin(struct store *st, struct store_blob_stage **out, struct sbx_error *err) {
  *out = NULL;
  if (st == NULL || st->life != ST_LIFE_OPEN)
    return sbx_error_set(err, SBX_ECLOSED, "store closed");
  int rc = 0;
  store_id id;
  char *dir = NULL;
  struct store_blob_stage *sg = sbx_calloc(1, sizeof *sg);
  if (sg == NULL)
    return sbx_error_set(err, SBX_ENOMEM, "stage: out of memory");
  sg->st = st;
  sg->fd = -1;
  sg->state = STAGE_WRITING;
  if ((dir = st__stage_dir(st)) == NULL || (sg->tmp = sbx_malloc(strlen(dir) + 40)) == NULL) {
    rc = sbx_error_set(err, SBX_ENOMEM, "stage: out of memory");
    goto out;
  }
  if ((rc = store_new_id(id)) != 0) {
    rc = sbx_error_set(err, rc, "stage: no random name");
    goto out;
  }
  sprintf(sg->tmp, "%s/%s.tmp", dir, id);
  if ((sg->md = EVP_MD_CTX_new()) == NULL || EVP_DigestInit_ex(sg->md, EVP_sha256(), NULL) != 1) {
    rc = sbx_error_set(err, SBX_ENOMEM, "stage: digest init failed");
    goto out;
  }
  sg->fd = open(sg->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (sg->fd < 0 && errno == ENOENT && mkdir(dir, 0700) == 0) /* removed under us: once more */
    sg->fd = open(sg->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (sg->fd < 0) {
    rc = fs_failed(st, err, errno, "open", sg->tmp);
    goto out;
  }
  SBX_TRACE_STATE(ST_MOD, "stage", sg->tmp, "none", stage_names[STAGE_WRITING]);
  *out = sg;
out:
  sbx_free(dir);
  if (rc != 0)
    stage_free(sg);
  return rc;
}

int store_blob_stage_write(struct store_blob_stage *sg, const void *data, size_t len,
                           struct sbx_error *err) {
  if (sg->state != STAGE_WRITING)
    return sbx_error_set(err, SBX_ESTATE, "stage: %s, not writing", stage_names[sg->state]);
  const char *p = data;
  size_t n = len;
  while (n > 0) {
    ssize_t w = st__stage_write_fn(sg->fd, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0) {
      int e = w < 0 ? errno : EIO;
      set_state(sg, STAGE_FAILED);
      return fs_failed(sg->st, err, e, "write", sg->tmp);
    }
    p += w;
    n -= (size_t)w;
  }
  if (len > 0 && EVP_DigestUpdate(sg->md, data, len) != 1) {
    set_state(sg, STAGE_FAILED);
    return sbx_error_set(err, SBX_EIO, "stage: digest update failed");
  }
  sg->size += len;
#ifdef SYNC_FILE_RANGE_WRITE
  /* Start the writeback of every full WRITEBACK_STEP behind us without waiting for it, so the
   * writer's fsync before the commit finds little left to write (the group waits for it). */
  if (sg->size - sg->flushed >= WRITEBACK_STEP) {
    sync_file_range(sg->fd, (off64_t)sg->flushed, (off64_t)(sg->size - sg->flushed),
                    SYNC_FILE_RANGE_WRITE);
    sg->flushed = sg->size;
  }
#endif
  return 0;
}

uint64_t store_blob_stage_size(const struct store_blob_stage *sg) { return sg->size; }

const char *store_blob_stage_path(const struct store_blob_stage *sg) { return sg->tmp; }

int store_blob_stage_finish(struct store_blob_stage *sg, char sha256[65], struct sbx_error *err) {
  if (sg->state == STAGE_WRITING) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    int ok = EVP_DigestFinal_ex(sg->md, md, &n) == 1 && n == 32;
    EVP_MD_CTX_free(sg->md);
    sg->md = NULL;
    int rc = close(sg->fd);
    int e = errno;
    sg->fd = -1;
    if (!ok || rc != 0) {
      set_state(sg, STAGE_FAILED);
      return ok ? fs_failed(sg->st, err, e, "close", sg->tmp)
                : sbx_error_set(err, SBX_EIO, "stage: digest failed");
    }
    sbx_hex(md, 32, sg->sha);
    set_state(sg, STAGE_FINISHED);
  }
  if (sg->state != STAGE_FINISHED)
    return sbx_error_set(err, SBX_ESTATE, "stage: %s", stage_names[sg->state]);
  if (sha256)
    memcpy(sha256, sg->sha, 65);
  return 0;
}

void store_blob_stage_abort(struct store_blob_stage *sg) {
  if (sg == NULL)
    return;
  SBX_TRACE_STATE(ST_MOD, "stage", sg->tmp, stage_names[sg->state], "aborted");
  if (sg->fd >= 0) {
    close(sg->fd);
    sg->fd = -1;
  }
  unlink(sg->tmp);
  stage_free(sg);
}

int st__stage_take(struct store_blob_stage *sg, char **tmp, char sha[65], uint64_t *size,
                   struct sbx_error *err) {
  int rc = store_blob_stage_finish(sg, sha, err);
  if (rc != 0) {
    store_blob_stage_abort(sg);
    return rc;
  }
  *tmp = sg->tmp;
  *size = sg->size;
  sg->tmp = NULL;
  stage_free(sg);
  return 0;
}
