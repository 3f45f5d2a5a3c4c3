/* faultvfs.h -- a test VFS wrapping SQLite's default one that fails the N-th xWrite or xSync
 * (counted from fault_arm) with SQLITE_IOERR_WRITE (or fv_write_error: SQLITE_FULL is a full
 * disk) / SQLITE_IOERR_FSYNC.  Registered as the
 * default VFS, so store_open uses it without knowing.  Counters are atomic: the writer thread
 * does the writes. */
#ifndef SBX_TEST_FAULTVFS_H
#define SBX_TEST_FAULTVFS_H

#include <sqlite3.h>
#include <stdatomic.h>
#include <string.h>

static sqlite3_vfs *fv_real;
static sqlite3_vfs fv_vfs;
static sqlite3_io_methods fv_methods;
static _Atomic int fv_fail_write_at, fv_fail_sync_at, fv_writes, fv_syncs, fv_fired;
static _Atomic int fv_write_error = SQLITE_IOERR_WRITE; /* what the failing xWrite returns */

struct fv_file {
  sqlite3_file base;
  sqlite3_file *real; /* follows this struct */
};
#define FV_REAL(f) (((struct fv_file *)(f))->real)

static inline void fault_arm(int write_at, int sync_at) {
  fv_writes = 0;
  fv_syncs = 0;
  fv_fired = 0;
  fv_fail_write_at = write_at;
  fv_fail_sync_at = sync_at;
}

static int fv_close(sqlite3_file *f) { return FV_REAL(f)->pMethods->xClose(FV_REAL(f)); }
static int fv_read(sqlite3_file *f, void *b, int n, sqlite3_int64 o) {
  return FV_REAL(f)->pMethods->xRead(FV_REAL(f), b, n, o);
}
static int fv_write(sqlite3_file *f, const void *b, int n, sqlite3_int64 o) {
  int k = ++fv_writes;
  if (fv_fail_write_at && k == fv_fail_write_at) {
    fv_fired++;
    return fv_write_error;
  }
  return FV_REAL(f)->pMethods->xWrite(FV_REAL(f), b, n, o);
}
static int fv_truncate(sqlite3_file *f, sqlite3_int64 s) {
  return FV_REAL(f)->pMethods->xTruncate(FV_REAL(f), s);
}
static int fv_sync(sqlite3_file *f, int flags) {
  int k = ++fv_syncs;
  if (fv_fail_sync_at && k == fv_fail_sync_at) {
    fv_fired++;
    return SQLITE_IOERR_FSYNC;
  }
  return FV_REAL(f)->pMethods->xSync(FV_REAL(f), flags);
}
static int fv_size(sqlite3_file *f, sqlite3_int64 *s) {
  return FV_REAL(f)->pMethods->xFileSize(FV_REAL(f), s);
}
static int fv_lock(sqlite3_file *f, int l) { return FV_REAL(f)->pMethods->xLock(FV_REAL(f), l); }
static int fv_unlock(sqlite3_file *f, int l) {
  return FV_REAL(f)->pMethods->xUnlock(FV_REAL(f), l);
}
static int fv_check(sqlite3_file *f, int *o) {
  return FV_REAL(f)->pMethods->xCheckReservedLock(FV_REAL(f), o);
}
static int fv_fctl(sqlite3_file *f, int op, void *a) {
  return FV_REAL(f)->pMethods->xFileControl(FV_REAL(f), op, a);
}
static int fv_sector(sqlite3_file *f) { return FV_REAL(f)->pMethods->xSectorSize(FV_REAL(f)); }
static int fv_devchar(sqlite3_file *f) {
  return FV_REAL(f)->pMethods->xDeviceCharacteristics(FV_REAL(f));
}
static int fv_shmmap(sqlite3_file *f, int i, int sz, int ext, void volatile **pp) {
  return FV_REAL(f)->pMethods->xShmMap(FV_REAL(f), i, sz, ext, pp);
}
static int fv_shmlock(sqlite3_file *f, int off, int n, int fl) {
  return FV_REAL(f)->pMethods->xShmLock(FV_REAL(f), off, n, fl);
}
static void fv_shmbarrier(sqlite3_file *f) { FV_REAL(f)->pMethods->xShmBarrier(FV_REAL(f)); }
static int fv_shmunmap(sqlite3_file *f, int del) {
  return FV_REAL(f)->pMethods->xShmUnmap(FV_REAL(f), del);
}
static int fv_fetch(sqlite3_file *f, sqlite3_int64 o, int n, void **pp) {
  return FV_REAL(f)->pMethods->xFetch(FV_REAL(f), o, n, pp);
}
static int fv_unfetch(sqlite3_file *f, sqlite3_int64 o, void *p) {
  return FV_REAL(f)->pMethods->xUnfetch(FV_REAL(f), o, p);
}

static int fv_open(sqlite3_vfs *v, const char *name, sqlite3_file *f, int flags, int *out) {
  struct fv_file *ff = (struct fv_file *)f;
  ff->real = (sqlite3_file *)(ff + 1);
  int rc = fv_real->xOpen(fv_real, name, ff->real, flags, out);
  if (rc != SQLITE_OK || ff->real->pMethods == NULL) {
    f->pMethods = NULL;
    return rc;
  }
  fv_methods.iVersion = ff->real->pMethods->iVersion;
  f->pMethods = &fv_methods;
  return rc;
}
static int fv_delete(sqlite3_vfs *v, const char *n, int s) {
  return fv_real->xDelete(fv_real, n, s);
}
static int fv_access(sqlite3_vfs *v, const char *n, int fl, int *o) {
  return fv_real->xAccess(fv_real, n, fl, o);
}
static int fv_full(sqlite3_vfs *v, const char *n, int sz, char *o) {
  return fv_real->xFullPathname(fv_real, n, sz, o);
}
static int fv_rand(sqlite3_vfs *v, int n, char *o) { return fv_real->xRandomness(fv_real, n, o); }
static int fv_sleep(sqlite3_vfs *v, int us) { return fv_real->xSleep(fv_real, us); }
static int fv_time(sqlite3_vfs *v, double *t) { return fv_real->xCurrentTime(fv_real, t); }
static int fv_lasterr(sqlite3_vfs *v, int n, char *o) {
  return fv_real->xGetLastError(fv_real, n, o);
}
static int fv_time64(sqlite3_vfs *v, sqlite3_int64 *t) {
  return fv_real->xCurrentTimeInt64(fv_real, t);
}

static inline void fault_register(void) {
  fv_real = sqlite3_vfs_find(NULL);
  fv_methods = (sqlite3_io_methods){
      3,          fv_close,      fv_read,     fv_write, fv_truncate, fv_sync,    fv_size,
      fv_lock,    fv_unlock,     fv_check,    fv_fctl,  fv_sector,   fv_devchar, fv_shmmap,
      fv_shmlock, fv_shmbarrier, fv_shmunmap, fv_fetch, fv_unfetch};
  memset(&fv_vfs, 0, sizeof fv_vfs);
  fv_vfs.iVersion = 2;
  fv_vfs.szOsFile = (int)sizeof(struct fv_file) + fv_real->szOsFile;
  fv_vfs.mxPathname = fv_real->mxPathname;
  fv_vfs.zName = "faultvfs";
  fv_vfs.xOpen = fv_open;
  fv_vfs.xDelete = fv_delete;
  fv_vfs.xAccess = fv_access;
  fv_vfs.xFullPathname = fv_full;
  fv_vfs.xRandomness = fv_rand;
  fv_vfs.xSleep = fv_sleep;
  fv_vfs.xCurrentTime = fv_time;
  fv_vfs.xGetLastError = fv_lasterr;
  fv_vfs.xCurrentTimeInt64 = fv_time64;
  sqlite3_vfs_register(&fv_vfs, 1);
}

#endif
