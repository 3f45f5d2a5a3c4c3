/* disk.c -- the store's file-system calls under its blob files and their chunk copies: fsync
 * (replaceable by tests, to inject failures), fsync of a directory, and the errno of a failed
 * write translated to the store's codes.
 *
 * What it does not do: decide what is written where (blobs.c, chunks.c, stage.c).
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

int (*st__fsync)(int fd) = fsync;

int st__fsync_dir(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  int rc = fsync(fd) == 0 ? 0 : -errno;
  close(fd);
  return rc;
}

int st__errno_code(int e) { return e == ENOSPC || e == EDQUOT ? SBX_EFULL : SBX_EIO; }
