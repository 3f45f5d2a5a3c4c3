/* open.c -- the store's life: store_open brings it up (the data directory and its lock, the
 * connections and their roles' settings, the schema, the prepared statements, the checkpointer and
 * writer threads) and store_close takes it down in the reverse order.  Of the two backends,
 * SQLite (DATA/cerea.db, the default) and PostgreSQL (a database URL), only the connections and
 * the schema differ here: the data directory, its lock and the blob files (PostgreSQL: the
 * node's local copies, chunks.c) are the same.
 *
 * What it does not do: the SQL plumbing (db.c, pg.c), run writes (writer.c) or checkpoints
 * (checkpoint.c); it starts and stops them.
 *
 * Connections: the write connection belongs to the writer thread after store_open returns; the
 * read connection (SQLite: query_only) to the loop thread; SQLite's checkpointer's to its thread
 * (PostgreSQL checkpoints by itself: no checkpointer).
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const life_names[] = {"opening", "open", "closing"};
static const uint32_t life_from[] = {
    [ST_LIFE_OPENING] = 0,
    [ST_LIFE_OPEN] = SBX_FSM_BIT(ST_LIFE_OPENING),
    [ST_LIFE_CLOSING] = SBX_FSM_BIT(ST_LIFE_OPEN),
};
static int life_invariant(const void *obj, unsigned state) {
  const struct store *st = obj;
  /* open: the threads run (SQLite: the checkpointer too) and the statements are prepared */
  return state != ST_LIFE_OPEN || (st->thread_started && (st->kind == ST_PG || st->ckpt_started) &&
                                   st->w.q[ST_PING].db != NULL && st->r.q[ST_PING].db != NULL);
}
static const struct sbx_fsm life_fsm =
    SBX_FSM(ST_MOD, "store", life_names, life_from, life_invariant);

#define set_life(st, to) set_life_((st), (to), __FILE__, __LINE__)
/* The only writer of st->life (loop thread). */
static void set_life_(struct store *st, enum st_life to, const char *file, int line) {
  if (sbx_fsm_step(&life_fsm, st->life, to, st->dir, file, line) == 0)
    st->life = to;
  SBX_FSM_CHECK(&life_fsm, st, st->life, st->dir);
}

/* The writer connection's cache and checkpoints (figures: docs/benchmarks.md).
 *  - cache_size 32 MiB (default 2 MiB): a run touches a leaf page of its chat in a few chat-keyed
 *    b-trees; with many chats those pages do not stay in 2 MiB, and each miss is a pread of the
 *    WAL or the database.  The reader's cache is emptied by every commit of the writer anyway
 *    (WAL), so it keeps the default.
 *  - wal_autocheckpoint 0: SQLite's auto-checkpoint runs inside a COMMIT on the writer thread and
 *    holds that group's callbacks for the whole copy.  checkpoint.c checkpoints instead, on its
 *    own thread and connection, from 16 MiB of WAL on: a long window copies each page once however
 *    often it was rewritten in it, and hot leaf pages are rewritten by many commits; a longer one
 *    makes the writer's finishing step (and so the group-commit tail latency) longer.
 *  - journal_size_limit 64 MiB (checkpoint.c's hard bound): when the WAL restarts it is truncated
 *    to this size, so a WAL that grew past it (a reader held an old snapshot) does not keep its
 *    size. */
#define ST_WRITER_PRAGMAS                                                                          \
  "PRAGMA cache_size = -32768; PRAGMA wal_autocheckpoint = 0; "                                    \
  "PRAGMA journal_size_limit = 67108864;"

static char *path_join(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  char *p = sbx_malloc(la + lb + 2);
  if (p) {
    memcpy(p, a, la);
    p[la] = '/';
    memcpy(p + la + 1, b, lb + 1);
  }
  return p;
}

static int ensure_dir(const char *path, struct sbx_error *err) {
  struct stat sb;
  if (mkdir(path, 0700) == 0 || errno == EEXIST) {
    if (stat(path, &sb) == 0 && !S_ISDIR(sb.st_mode))
      errno = ENOTDIR;
    else if (access(path, W_OK | X_OK) == 0)
      return 0;
  }
  int e = errno;
  return sbx_error_set(err, (e == EACCES || e == EPERM || e == EROFS) ? SBX_EPERM : SBX_EIO,
                       "%s: %s", path, strerror(e));
}

/* One process per data directory: a second orchestrator on the same directory would race the
 * first one's blob temp files and sweeps.  flock is released by the kernel when the process dies
 * (crash, SIGKILL), so a stale lock cannot outlive its owner. */
static int lock_dir(struct store *st, struct sbx_error *err) {
  size_t n = strlen(st->dir) + 16;
  char *path = sbx_malloc(n);
  if (path == NULL)
    return sbx_error_set(err, SBX_ENOMEM, "store_open: out of memory");
  snprintf(path, n, "%s/cerea.lock", st->dir);
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  int rc = 0;
  if (fd < 0) {
    rc = sbx_error_set(err, SBX_EIO, "%s: %s", path, strerror(errno));
  } else if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int e = errno;
    close(fd);
    fd = -1;
    rc = e == EWOULDBLOCK ? sbx_error_set(err, SBX_EBUSY,
                                          "%s: data directory in use by another "
                                          "process",
                                          st->dir)
                          : sbx_error_set(err, SBX_EIO, "%s: flock: %s", path, strerror(e));
  }
  st->lock_fd = fd;
  sbx_free(path);
  return rc;
}

static void store_free(struct store *st) {
  st__ckpt_stop(st); /* its connection closes first: the last one to close checkpoints */
  st__listen_close(st);
  st__db_close(&st->w);
  st__db_close(&st->r);
  st__db_close(&st->l);
  if (st->lock_fd >= 0)
    close(st->lock_fd); /* releases the flock */
  sbx_free(st->dir);
  sbx_free(st->db_path);
  sbx_free(st->blob_dir);
  sbx_free(st->db_url);
  sbx_free(st->db_name);
  sbx_free(st);
}

/* SQLite: the writer's connection (its pragmas, the migrations), the reader's (query_only), the
 * statements on both, the checkpointer. */
static int open_sqlite(struct store *st, struct sbx_error *err) {
  int rc;
  if ((rc = st__open_conn(st->db_path, &st->w.lite, err)) != 0)
    return rc;
  if ((rc = st__exec(st->w.lite, ST_WRITER_PRAGMAS, err)) != 0 ||
      (rc = st__migrate(st->w.lite, ST_SCHEMA_VERSION, err)) != 0 ||
      (rc = st__user_version(st->w.lite, &st->schema_version, err)) != 0)
    return rc;
  if ((rc = st__open_conn(st->db_path, &st->r.lite, err)) != 0)
    return rc;
  if ((rc = st__exec(st->r.lite, "PRAGMA query_only = ON", err)) != 0)
    return rc;
  if ((rc = st__db_prepare(&st->w, err)) != 0 || (rc = st__db_prepare(&st->r, err)) != 0)
    return rc;
  return st__ckpt_start(st, err);
}

/* PostgreSQL: the writer's connection (the migrations, under a lock so that nodes starting
 * together migrate once), the reader's, the statements on both. */
static int open_pg(struct store *st, struct sbx_error *err) {
  int rc;
  if ((rc = st__pg_connect(&st->w, st->db_url, st->db_name, err)) != 0 ||
      (rc = st__pg_migrate(&st->w, ST_PG_SCHEMA_VERSION, err)) != 0 ||
      (rc = st__pg_version(&st->w, &st->schema_version, err)) != 0)
    return rc;
  if ((rc = st__pg_connect(&st->r, st->db_url, st->db_name, err)) != 0 ||
      (rc = st__pg_connect(&st->l, st->db_url, st->db_name, err)) != 0)
    return rc;
  if ((rc = st__db_prepare(&st->w, err)) != 0 || (rc = st__db_prepare(&st->r, err)) != 0 ||
      (rc = st__db_prepare(&st->l, err)) != 0)
    return rc;
  return 0;
}

static int is_pg_url(const char *url) {
  return strncmp(url, "postgresql://", 13) == 0 || strncmp(url, "postgres://", 11) == 0;
}

int store_open(uv_loop_t *loop, const char *data_dir, struct store **out, struct sbx_error *err) {
  return store_open_url(loop, data_dir, NULL, out, err);
}

int store_open_url(uv_loop_t *loop, const char *data_dir, const char *database_url,
                   struct store **out, struct sbx_error *err) {
  int rc;
  *out = NULL;
  if (loop == NULL || data_dir == NULL || *data_dir == '\0')
    return sbx_error_set(err, SBX_EINVAL, "store_open: loop and data directory are required");
  if (database_url && *database_url && !is_pg_url(database_url))
    return sbx_error_set(err, SBX_EINVAL,
                         "database URL: expected postgresql://USER:PASSWORD@HOST:PORT/DBNAME");
  struct store *st = sbx_calloc(1, sizeof *st);
  if (st == NULL)
    return sbx_error_set(err, SBX_ENOMEM, "store_open: out of memory");
  st->loop = loop;
  st->kind = database_url && *database_url ? ST_PG : ST_SQLITE;
  st->w.kind = st->r.kind = st->l.kind = st->kind;
  st->w.role = "writer";
  st->r.role = "reader";
  st->l.role = "leases";
  st->life = ST_LIFE_OPENING;
  st->lock_fd = -1;
  st->group_max = ST_GROUP_MAX_DEFAULT;
  SBX_LIST_INIT(&st->queue);
  SBX_LIST_INIT(&st->done);
  SBX_LIST_INIT(&st->corked);
  st->dir = sbx_strdup(data_dir);
  st->db_path = path_join(data_dir, "cerea.db");
  st->blob_dir = path_join(data_dir, "blobs");
  if (!st->dir || !st->db_path || !st->blob_dir) {
    rc = sbx_error_set(err, SBX_ENOMEM, "store_open: out of memory");
    goto out;
  }
  if (st->kind == ST_PG) {
    if ((st->db_url = sbx_strdup(database_url)) == NULL) {
      rc = sbx_error_set(err, SBX_ENOMEM, "store_open: out of memory");
      goto out;
    }
    if ((rc = st__pg_name(database_url, &st->db_name, err)) != 0)
      goto out;
  } else if ((st->db_name = sbx_strdup(st->db_path)) == NULL) {
    rc = sbx_error_set(err, SBX_ENOMEM, "store_open: out of memory");
    goto out;
  }
  if ((rc = ensure_dir(st->dir, err)) != 0 || (rc = ensure_dir(st->blob_dir, err)) != 0)
    goto out;
  if ((rc = lock_dir(st, err)) != 0)
    goto out;
  st__blob_cleanup_tmp(st); /* safe: the lock says no other process writes blobs here */
  if ((rc = st->kind == ST_PG ? open_pg(st, err) : open_sqlite(st, err)) != 0)
    goto out;
  int64_t blob_bytes = 0;
  if ((rc = st__step_int64(st__q(&st->r, ST_BLOB_TOTAL), "blob total", &blob_bytes, err)) != 0)
    goto out;
  st->stats.blob_bytes = (uint64_t)blob_bytes;
  if ((rc = st__writer_start(st, err)) != 0)
    goto out;
  set_life(st, ST_LIFE_OPEN);
  *out = st;
  return 0;
out:
  store_free(st);
  return rc;
}

void store_close(struct store *st) {
  if (st == NULL)
    return;
  set_life(st, ST_LIFE_CLOSING);
  st__writer_stop(st); /* every queued write finishes and its callback runs */
  store_free(st);
}

int store_schema_version(struct store *st) { return st->schema_version; }
