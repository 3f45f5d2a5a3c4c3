/* fuzz_server.h -- what the fuzz targets that run a whole server in their own process share
 * (fuzz_api.c, fuzz_tools.c): the loop, the temporary root their servers' data lives under
 * (/dev/shm, else TMPDIR or /tmp; removed at exit), a fatal error, whether the store has writes
 * in flight, a server's close run to its end, and libFuzzer's per-input leak check turned off.
 *
 * Included once by a target, after its orchestrator headers, with FUZZ_NAME defined ("api":
 * messages say "fuzz_api: ...", the root is /dev/shm/fuzz-api-XXXXXX).  Everything is static:
 * each target has its own copy.
 */
#ifndef FUZZ_SERVER_H
#define FUZZ_SERVER_H

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#ifndef FUZZ_NAME
#error "define FUZZ_NAME before including fuzz_server.h"
#endif

#define SPIN_MAX 2000000 /* loop turns before a wait counts as a hang */

static uv_loop_t loop;
static char root[64] = "/dev/shm/fuzz-" FUZZ_NAME "-XXXXXX";

static void die(const char *what, const char *detail) {
  fprintf(stderr, "fuzz_" FUZZ_NAME ": %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
  abort();
}

static void on_walk(uv_handle_t *h, void *arg) {
  if (h->type == UV_ASYNC && uv_has_ref(h)) /* the store's: referenced while writes are in flight */
    *(int *)arg = 1;
}

/* Whether the store has writes in flight. */
static int store_busy(void) {
  int busy = 0;
  uv_walk(&loop, on_walk, &busy);
  return busy;
}

/* One turn of the loop: waits in the loop's poll while the store has writes in flight (they end
 * with the store's async, which wakes it), else does not wait.  Turning the loop without waiting
 * while the writer thread commits only took the CPU from that thread (two cores shared). */
static void loop_turn(void) { uv_run(&loop, store_busy() ? UV_RUN_ONCE : UV_RUN_NOWAIT); }

/* Whether the loop has nothing left to do but wait: no write in flight, no work on the thread
 * pool, no callback pending (libuv's own timeout for its poll is not 0). */
static int loop_quiet(void) {
  return !store_busy() && loop.active_reqs.count == 0 && uv_backend_timeout(&loop) != 0;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(p);
}

/* path and everything under it removed. */
static void rm_tree(const char *path) { nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

static void cleanup(void) { rm_tree(root); }

static void on_closed(void *ud) { *(int *)ud = 1; }

/* orch_close(o), the loop turned until the server is gone. */
static void close_server(struct orch *o) {
  volatile int closed = 0; /* set by the close callback */
  orch_close(o, on_closed, (void *)&closed);
  for (int i = 0; !closed; i++)
    if (i > SPIN_MAX)
      die("the server never closed", NULL);
    else
      uv_run(&loop, UV_RUN_NOWAIT);
}

/* The root made (removed at exit), errors alone logged, the loop ready. */
static void setup_root(void) {
  if (mkdtemp(root) == NULL) {
    snprintf(root, sizeof(root), "%s/fuzz-" FUZZ_NAME "-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (mkdtemp(root) == NULL)
      die("no temporary directory", strerror(errno));
  }
  atexit(cleanup);
  sbx_log_set_level(SBX_LOG_ERROR);
  if (uv_loop_init(&loop) != 0)
    die("no loop", NULL);
}

/* libFuzzer's leak check after each input is off unless asked for (-detect_leaks=1): a server's
 * state grows with what it stores, so nearly every input would set off a scan of the whole heap
 * (most of the time went to it).  LeakSanitizer still checks the process at exit.  For the
 * target's LLVMFuzzerInitialize. */
static int leak_check_off(int *argc, char ***argv) {
  static char off[] = "-detect_leaks=0";
  static char *args[256];
  for (int i = 0; i < *argc; i++)
    if (strncmp((*argv)[i], "-detect_leaks=", 14) == 0)
      return 0;
  if (*argc + 2 > (int)SBX_ARRAY_SIZE(args))
    return 0;
  memcpy(args, *argv, (size_t)*argc * sizeof(*args));
  args[(*argc)++] = off;
  args[*argc] = NULL;
  *argv = args;
  return 0;
}

#endif
