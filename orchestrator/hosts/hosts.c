/* hosts.c -- `server` execution mode: the orchestrator spawns N headless kernel hosts
 * (worker/headless-host.js, Node), supervises them and assigns chats to them.
 *
 * A host is a page without a screen: it attaches each chat it is given exactly as a browser page
 * does (event stream, presence, started / files / result), over a Unix socket the orchestrator
 * listens on (SOCK = /tmp/cerea-hosts-XXXXXX/sock/hosts.sock, a folder of the hosts' own uid, when
 * the orchestrator runs as root and starts them as nobody; else DATA/hosts/hosts.sock).  The orchestrator talks to a host's
 * process only through its stdin, one command a line: `key K` (the credential), `attach CHAT`;
 * `detach CHAT` (idle chats); the host answers on stdout (`ready`, `attached CHAT`).  The host's page id is `host-<slot>`
 * (with nodes `host-<node>-<slot>`), the same across its restarts: a restarted host re-attaching a
 * chat without Last-Event-ID makes the run the dead one held a new attempt at once (api_events.c),
 * which is the restart policy for a dead host's runs — the run is re-dispatched from scratch and
 * nothing is lost.
 *
 * With nodes (CEREA_NODE_URL) each node runs hosts of its own for the chats it holds: the chats
 * in a node's memory are exactly those whose lease it holds (nodes.c), and only those are given
 * to its hosts; one that leaves (idle, its lease let go) is detached at once, and its hosts' key
 * reaches no other chat (api.c: never a lease taken, never a call forwarded).  A node that dies
 * takes its hosts with it; the node that takes a chat over runs its unfinished runs on its own
 * hosts, as new attempts, the chat's files fetched from the shared store.
 *
 * Sandbox (DESIGN.md "Headless host"; NOTES.md "Node is not a sandbox"; docs/server-mode.md has the
 * table of layers and what each stops): every host runs as (uid 65534 outside its namespace too
 * when the orchestrator is root, never root: see prepare_nobody)
 *   prlimit --data=HOST_MB --                       (RLIMIT_DATA: the host process's memory bound)
 *   bwrap --unshare-user --uid 65534 --gid 65534 --disable-userns --cap-drop ALL
 *         --unshare-net --unshare-pid --unshare-ipc --unshare-uts --unshare-cgroup-try
 *         --die-with-parent --new-session --seccomp 3 (the filter built below, on fd 3)
 *         --ro-bind /usr /usr (+ /bin /lib /lib64 /sbin symlinks, /etc/ld.so.cache) --dev --proc
 *         --tmpfs /tmp --ro-bind {package.json,worker,kernel} and the runtime at /cerea/...
 *         (read-only; from the checkout, or from the copy a root orchestrator made)
 *         [--ro-bind NODE_BIN_DIR when not under /usr] --bind SOCK's folder (writable)
 *     node --disallow-code-generation-from-strings --experimental-permission --allow-worker
 *          --allow-fs-read=/cerea/worker --allow-fs-read=/cerea/kernel
 *          --allow-fs-read=/cerea/pyodide --allow-fs-read=/proc/self/status
 *          --max-old-space-size=JS_HEAP_MB
 *          /cerea/worker/headless-host.js --orchestrator unix:SOCK ...
 * (uid 65534 with no capabilities in a user namespace of its own, which may not make more; a
 * seccomp filter allowing what Node needs; no network but the socket, no child processes, no fs
 * writes, reads limited to the runtime and our sources; the data dir other than the socket is
 * hidden).  Without bubblewrap the mode refuses to start unless CEREA_SERVER_TRUSTED=1 says the
 * code is trusted; the host itself checks its sandbox again and refuses to run without it
 * (exit 3).  Memory: each kernel is bounded by CEREA_KERNEL_MEMORY_MB (its Python heap and the
 * JavaScript buffers it holds, its in-memory files among them, enforced in
 * worker/host/sandbox-worker.js; its JavaScript heap by its worker's resourceLimits,
 * CEREA_KERNEL_JS_HEAP_MB = JS_HEAP_MB, and the main thread's by --max-old-space-size), and the
 * whole host process by RLIMIT_DATA = (kernels + 1) x (CEREA_KERNEL_MEMORY_MB + JS_HEAP_MB) +
 * HOST_BASE_MB.
 *
 * Capacity: a host takes at most CEREA_HOST_KERNELS chats at a time (one kernel slot each); a
 * chat with live runs and no host waits in the orchestrator's queue (its head run paused, held
 * there while some host is up) until a slot frees, oldest first.  A chat without live runs gives
 * its slot up after CEREA_HOST_CHAT_IDLE_S, or after its linger when other chats wait
 * (HOST_LINGER_MS, longer while clients are slow to post their next run: linger_ms).  So a
 * host never loads more than its kernel count + 1 (the spare) at once, and a dispatched run never
 * waits behind a crowd of loads; while a host reports its kernel `loading` for a dispatched run,
 * that run's watchdog is held (orch__run_hold).
 *
 * Settings (environment): CEREA_HOSTS (hosts, default 1, 1..64), CEREA_HOST_KERNELS (live kernels
 * per host besides its spare, and so the chats it takes at once, default: what the memory budget
 * holds, see "capacity" below), CEREA_HOST_MEMORY_MB (each host's budget, default half the
 * machine's memory shared among the hosts), CEREA_HOST_CHAT_IDLE_S
 * (a chat without live runs this long is detached from its host, default 600),
 * CEREA_KERNEL_MEMORY_MB (per kernel, default 1024, 128..16384), CEREA_KERNEL_SNAPSHOT (0: kernels
 * load Python from scratch instead of restoring the served memory snapshot, default 1; a host
 * whose image is missing, foreign or corrupt loads and says why), CEREA_NODE (node binary, default
 * "node"), CEREA_SERVER_TRUSTED (1: no bubblewrap, code is trusted), CEREA_BWRAP (default "bwrap").
 *
 * Life of a host slot (state written by host_set_state only):
 *
 *     idle ──spawn──▶ starting ──"ready"──▶ ready
 *      ▲                 │                    │
 *      │              exit cb              exit cb
 *      │                 ▼                    ▼
 *      └──backoff timer── exited ◀────────────┘        any ──close──▶ closing (killed by handle;
 *                                                                         freed after exit cb)
 *   | transition          | function        |
 *   | idle -> starting    | host_spawn      |
 *   | starting -> ready   | on_host_stdout  |
 *   | * -> exited         | on_host_exit    |
 *   | exited -> idle      | on_backoff      |
 *   | * -> closing        | orch__hosts_close|
 *
 * Restarts back off 250 ms, doubling to 10 s; a host that lived 30 s starts again from 250 ms.
 * Processes are killed by handle only (uv_process_kill), their handles closed in the exit
 * callback: no zombies.  What it does not do: run code (the hosts do), or schedule runs (chat.c).
 */
#include "fsm.h"
#include "hosts.h"
#include "internal.h"
#include "nodes.h"
#include "transport.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <limits.h>
#include <linux/netlink.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define HOSTS_MAX          64
#define BACKOFF_MIN_MS     250
#define BACKOFF_MAX_MS     10000
#define HEALTHY_AFTER_MS   30000
#define KILL_GRACE_MS      3000
#define LINE_MAX_BYTES     512
#define HOST_LINGER_MS     1000 /* an idle chat keeps its slot this long when other chats wait */
#define HOST_LINGER_MAX_MS 5000 /* ... at most, however slow the clients' next runs come */
#define LOADING_HOLD_MAX_MS                                                                        \
  180000                     /* a dispatched run waits this long at most for a loading kernel */
#define HOST_BASE_MB     512 /* the host process beyond its kernels: Node, the main thread, files */
#define JS_HEAP_MB       256 /* each isolate's JS heap: --max-old-space-size, kernels' resourceLimits */
#define SANDBOX_UID      "65534" /* the host's uid and gid inside its user namespace */
#define HOST_OUTSIDE_UID 65534   /* ... and outside it, when the orchestrator runs as root */
#define SECCOMP_FD       3       /* where the filter reaches bwrap */
/* Where the sandbox sees our sources and the runtime, whichever folder they come from. */
#define APP_DIR    "/cerea"
#define PYODIDE_IN APP_DIR "/pyodide"

enum host_state {
  HOST_IDLE = 0,
  HOST_STARTING,
  HOST_READY,
  HOST_EXITED,
  HOST_CLOSING,
  HOST__COUNT
};
static const char *const host_state_names[HOST__COUNT] = {"idle", "starting", "ready", "exited",
                                                          "closing"};
/* from[to]: the states `to` may be entered from. */
static const uint32_t host_from[HOST__COUNT] = {
    [HOST_IDLE] = SBX_FSM_BIT(HOST_EXITED),
    [HOST_STARTING] = SBX_FSM_BIT(HOST_IDLE),
    [HOST_READY] = SBX_FSM_BIT(HOST_STARTING),
    [HOST_EXITED] = SBX_FSM_BIT(HOST_STARTING) | SBX_FSM_BIT(HOST_READY),
    [HOST_CLOSING] = SBX_FSM_BIT(HOST_IDLE) | SBX_FSM_BIT(HOST_STARTING) | SBX_FSM_BIT(HOST_READY) |
                     SBX_FSM_BIT(HOST_EXITED) | SBX_FSM_BIT(HOST_CLOSING),
};
static const struct sbx_fsm host_fsm = SBX_FSM("hosts", "host", host_state_names, host_from, NULL);

struct orch_hosts;

struct host {
  struct orch_hosts *hs;
  int slot;
  enum host_state state; /* written by host_set_state only */
  char page_id[32];
  uv_process_t proc;
  uv_pipe_t in, out;
  uv_timer_t timer; /* backoff while exited; SIGKILL deadline while closing */
  int open_handles; /* proc, in, out of the current process */
  int running;      /* the process has not reported its exit */
  int restarts;
  uint64_t backoff_ms, started_ms;
  char line[LINE_MAX_BYTES];
  size_t line_len;
  size_t assigned; /* chats attached to this incarnation (at most hs->kernels) */
};

struct orch_hosts {
  struct orch *o; /* NULL once closing: nothing may reach the server any more */
  struct host *h;
  int n;
  int kernels;
  int kernel_mb; /* CEREA_KERNEL_MEMORY_MB */
  int snapshot;  /* CEREA_KERNEL_SNAPSHOT: kernels restore the served memory snapshot */
  int trusted;
  int outside_uid; /* the uid (and gid) prlimit and bwrap run as: HOST_OUTSIDE_UID when we are
                      root (then sock_dir is its own, under base_dir), else 0: our own uid */
  int closing;
  int open_timers;
  uint64_t chat_idle_ms; /* an assigned chat idle this long is detached from its host */
  uint64_t gap_ms;       /* recent longest wait of an assigned chat between two runs (linger_ms) */
  char *sock_dir, *sock_path, *data_dir, *root, *pyodide, *node, *bwrap;
  char *base_dir; /* root only: /tmp/cerea-hosts-XXXXXX, with sock/ and runtime/ (see below) */
  int base_lock;  /* base_dir open and flock()ed while we live: a later start sweeps it if not */
  char *app_src, *pyodide_src; /* what the sandbox's APP_DIR and PYODIDE_IN are bound from */
  char prlimit[PATH_MAX];      /* util-linux prlimit: sets the host's RLIMIT_DATA, then execs */
  char node_prefix[PATH_MAX];  /* the folder of the node binary, bound when not under /usr */
  unsigned char *filter;       /* the seccomp program (struct sock_filter[]), built at start */
  size_t filter_len;
  struct orch_map assign; /* chat id -> struct assignment (owns its key: chats may leave memory) */
};

struct assignment {
  char chat_id[STORE_ID_LEN + 1];
  int slot;
  uint64_t sent_ms;       /* last `attach` sent */
  uint64_t idle_since_ms; /* no live runs since (0: it has some) */
};
#define REATTACH_AFTER_MS 5000

#define host_set_state(h, next) host_set_state_((h), (next), __FILE__, __LINE__)
static void host_set_state_(struct host *h, enum host_state next, const char *file, int line) {
  if (sbx_fsm_step(&host_fsm, h->state, next, h->page_id, file, line) == 0)
    h->state = next;
}

/* ---- the seccomp filter ------------------------------------------------------------------
 * An allow-list: what Node, V8, libuv and glibc use on Linux (measured with strace over the
 * full-stack suite, plus the neighbours of each call: the *at and 64 variants, the other waits
 * and clocks), everything else ENOSYS (glibc and libuv fall back, e.g. clone3 -> clone).  Refused
 * with EPERM, so that a probe reads a clear "Operation not permitted": the calls an escape from
 * Node would use against the kernel or other processes (ptrace and process_vm_*, mount and the
 * new mount API, keyctl, bpf, perf_event_open, kexec, module loading, unshare/setns, clone with a
 * namespace flag, io_uring, userfaultfd, privileges and clocks) and raw or packet sockets.
 * Sockets allowed: AF_UNIX (the orchestrator's socket), AF_NETLINK route (interface listing), and
 * TCP/UDP (inside the network namespace they reach only its own loopback). */
static const char filter_allow[] =
    "read write readv writev pread64 pwrite64 preadv pwritev preadv2 pwritev2 open openat openat2 "
    "close close_range lseek fstat stat lstat newfstatat statx fstatfs statfs access faccessat "
    "faccessat2 readlink readlinkat getdents getdents64 getcwd chdir fchdir mkdir mkdirat rmdir "
    "unlink unlinkat rename renameat renameat2 link linkat symlink symlinkat chmod fchmod "
    "fchmodat truncate ftruncate fsync fdatasync fallocate fadvise64 flock fcntl dup dup2 dup3 "
    "pipe pipe2 utimensat umask sendfile copy_file_range splice tee inotify_init1 "
    "inotify_add_watch inotify_rm_watch ioctl mmap munmap mremap mprotect madvise mincore msync "
    "mlock munlock mlock2 brk membarrier pkey_alloc pkey_free pkey_mprotect get_mempolicy mbind "
    "set_mempolicy memfd_create execve fork vfork exit exit_group wait4 waitid futex futex_waitv "
    "set_robust_list get_robust_list set_tid_address rseq sched_yield sched_getaffinity "
    "sched_setaffinity sched_getparam sched_getscheduler sched_setscheduler "
    "sched_get_priority_max sched_get_priority_min getpriority setpriority nanosleep "
    "clock_nanosleep clock_gettime clock_getres gettimeofday time times getrusage rt_sigaction "
    "rt_sigprocmask rt_sigreturn rt_sigsuspend rt_sigtimedwait rt_sigpending sigaltstack kill "
    "tgkill tkill pause alarm setitimer getitimer timer_create timer_settime timer_gettime "
    "timer_delete timer_getoverrun timerfd_create timerfd_settime timerfd_gettime signalfd "
    "signalfd4 eventfd eventfd2 epoll_create epoll_create1 epoll_ctl epoll_wait epoll_pwait "
    "epoll_pwait2 poll ppoll select pselect6 socketpair connect accept accept4 bind listen "
    "getsockname getpeername sendto recvfrom sendmsg recvmsg sendmmsg recvmmsg shutdown "
    "setsockopt getsockopt getpid getppid gettid getuid geteuid getgid getegid getgroups "
    "getresuid getresgid getpgrp getpgid getsid uname sysinfo getrlimit setrlimit prlimit64 "
    "getrandom capget arch_prctl prctl getcpu restart_syscall ";
static const char filter_refuse[] =
    "ptrace process_vm_readv process_vm_writev process_madvise kcmp pidfd_getfd mount umount2 "
    "pivot_root chroot move_mount open_tree fsopen fsconfig fsmount fspick mount_setattr keyctl "
    "add_key request_key bpf perf_event_open kexec_load kexec_file_load init_module finit_module "
    "delete_module unshare setns userfaultfd io_uring_setup io_uring_enter io_uring_register "
    "swapon swapoff reboot syslog acct settimeofday clock_settime clock_adjtime adjtimex quotactl "
    "name_to_handle_at open_by_handle_at iopl ioperm vhangup sethostname setdomainname "
    "personality setuid setgid setreuid setregid setresuid setresgid setgroups setfsuid setfsgid "
    "capset fanotify_init lookup_dcookie uselib ustat sysfs ";
#define NS_FLAGS                                                                                   \
  (CLONE_NEWNS | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS |       \
   CLONE_NEWCGROUP | 0x00000080 /* CLONE_NEWTIME */)

/* One rule with `action` for each space-separated syscall name this architecture has. */
static int add_names(scmp_filter_ctx ctx, uint32_t action, const char *names) {
  char name[40];
  for (const char *p = names; *p;) {
    size_t n = strcspn(p, " ");
    if (n > 0 && n < sizeof(name)) {
      memcpy(name, p, n);
      name[n] = '\0';
      int nr = seccomp_syscall_resolve_name(name);
      int rc = nr == __NR_SCMP_ERROR || nr < 0 ? 0 : seccomp_rule_add(ctx, action, nr, 0);
      if (rc != 0)
        return rc;
    }
    p += n;
    p += strspn(p, " ");
  }
  return 0;
}

/* Builds the filter and exports its BPF program into hs->filter.  SBX_EIO with detail. */
static int build_filter(struct orch_hosts *hs, struct sbx_error *err) {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(ENOSYS));
  int rc = 0, fd = -1;
  if (ctx == NULL)
    return sbx_error_set(err, SBX_ENOMEM, "server mode: seccomp_init failed");
  const uint32_t perm = SCMP_ACT_ERRNO(EPERM);
  rc = add_names(ctx, SCMP_ACT_ALLOW, filter_allow);
  if (rc == 0)
    rc = add_names(ctx, perm, filter_refuse);
  /* Threads (no namespace flag) go; a clone with any namespace flag is refused, one rule a flag. */
  if (rc == 0)
    rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
                          SCMP_A0(SCMP_CMP_MASKED_EQ, NS_FLAGS, 0));
  for (unsigned bit = 0; bit < 32 && rc == 0; bit++)
    if (NS_FLAGS & (1u << bit))
      rc = seccomp_rule_add(ctx, perm, SCMP_SYS(clone), 1,
                            SCMP_A0(SCMP_CMP_MASKED_EQ, 1u << bit, 1u << bit));
  if (rc == 0)
    rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1, SCMP_A0(SCMP_CMP_EQ, AF_UNIX));
  if (rc == 0)
    rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 2,
                          SCMP_A0(SCMP_CMP_EQ, AF_NETLINK), SCMP_A2(SCMP_CMP_EQ, NETLINK_ROUTE));
  const int inet[] = {AF_INET, AF_INET6};
  for (size_t i = 0; i < 2 && rc == 0; i++) {
    rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 2, SCMP_A0(SCMP_CMP_EQ, inet[i]),
                          SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, SOCK_STREAM));
    if (rc == 0)
      rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 2, SCMP_A0(SCMP_CMP_EQ, inet[i]),
                            SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, SOCK_DGRAM));
    if (rc == 0)
      rc = seccomp_rule_add(ctx, perm, SCMP_SYS(socket), 2, SCMP_A0(SCMP_CMP_EQ, inet[i]),
                            SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, SOCK_RAW));
  }
  if (rc == 0)
    rc = seccomp_rule_add(ctx, perm, SCMP_SYS(socket), 1, SCMP_A0(SCMP_CMP_EQ, AF_PACKET));
  if (rc != 0) {
    rc = sbx_error_set(err, SBX_EIO, "server mode: the seccomp filter could not be built: %s",
                       strerror(-rc));
    goto out;
  }
  /* libseccomp writes the program to a descriptor: a memory file, read back once. */
  fd = memfd_create("cerea-seccomp", MFD_CLOEXEC);
  if (fd < 0 || seccomp_export_bpf(ctx, fd) != 0) {
    rc = sbx_error_set(err, SBX_EIO, "server mode: the seccomp filter could not be exported: %s",
                       strerror(errno));
    goto out;
  }
  off_t len = lseek(fd, 0, SEEK_CUR);
  if (len <= 0 || (hs->filter = sbx_malloc((size_t)len)) == NULL ||
      pread(fd, hs->filter, (size_t)len, 0) != len) {
    rc = sbx_error_set(err, SBX_EIO, "server mode: the seccomp filter could not be read back");
    goto out;
  }
  hs->filter_len = (size_t)len;
out:
  if (fd >= 0)
    close(fd);
  seccomp_release(ctx);
  return rc;
}

/* A fresh descriptor holding the filter at offset 0, for one spawn (bwrap reads it to the end). */
static int filter_fd(const struct orch_hosts *hs) {
  int fd = memfd_create("cerea-seccomp", MFD_CLOEXEC);
  if (fd < 0)
    return -1;
  if (write(fd, hs->filter, hs->filter_len) != (ssize_t)hs->filter_len ||
      lseek(fd, 0, SEEK_SET) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

static int env_int(const char *name, int dflt, int lo, int hi) {
  const char *v = getenv(name);
  if (v == NULL || *v == '\0')
    return dflt;
  char *end;
  long x = strtol(v, &end, 10);
  if (*end || x < lo || x > hi)
    return -1;
  return (int)x;
}

/* A program found on PATH (or given with a slash) that we may execute; its resolved path in out
 * (PATH_MAX bytes) when out is not NULL. */
static int find_program(const char *prog, char *out) {
  char buf[PATH_MAX];
  int found = 0;
  if (strchr(prog, '/')) {
    snprintf(buf, sizeof(buf), "%s", prog);
    found = access(buf, X_OK) == 0;
  } else {
    const char *path = getenv("PATH");
    if (path == NULL)
      path = "/usr/bin:/bin";
    while (*path && !found) {
      const char *colon = strchr(path, ':');
      size_t len = colon ? (size_t)(colon - path) : strlen(path);
      snprintf(buf, sizeof(buf), "%.*s/%s", (int)len, path, prog);
      found = access(buf, X_OK) == 0;
      if (colon == NULL)
        break;
      path = colon + 1;
    }
  }
  if (found && out != NULL && realpath(buf, out) == NULL)
    snprintf(out, PATH_MAX, "%s", buf);
  return found;
}

static char *join(const char *a, const char *b) {
  size_t n = strlen(a) + strlen(b) + 2;
  char *s = sbx_malloc(n);
  if (s)
    snprintf(s, n, "%s/%s", a, b);
  return s;
}

static void remove_base(const char *base);

static void hosts_free(struct orch_hosts *hs) {
  size_t i = 0;
  const char *k;
  void *v;
  while (orch__map_next(&hs->assign, &i, &k, &v))
    sbx_free(v);
  orch__map_free(&hs->assign);
  sbx_free(hs->h);
  if (hs->base_dir != NULL)
    remove_base(hs->base_dir); /* the folder is ours alone (mkdtemp, and its lock) */
  if (hs->base_lock >= 0)
    close(hs->base_lock);
  sbx_free(hs->base_dir);
  sbx_free(hs->app_src);
  sbx_free(hs->pyodide_src);
  sbx_free(hs->sock_dir);
  sbx_free(hs->sock_path);
  sbx_free(hs->data_dir);
  sbx_free(hs->root);
  sbx_free(hs->pyodide);
  sbx_free(hs->node);
  sbx_free(hs->bwrap);
  sbx_free(hs->filter);
  sbx_free(hs);
}

/* Freed once every process reported its exit and every handle closed. */
static void maybe_free(struct orch_hosts *hs) {
  if (!hs->closing || hs->open_timers > 0)
    return;
  for (int i = 0; i < hs->n; i++)
    if (hs->h[i].open_handles > 0)
      return;
  hosts_free(hs);
}

static void on_handle_closed(uv_handle_t *handle) {
  struct host *h = handle->data;
  h->open_handles--;
  maybe_free(h->hs);
}

static void on_timer_closed(uv_handle_t *handle) {
  struct host *h = handle->data;
  h->hs->open_timers--;
  maybe_free(h->hs);
}

/* ---- talking to a host ------------------------------------------------------------------- */

struct write_req {
  uv_write_t w;
  char buf[];
};

static void on_written(uv_write_t *w, int status) {
  (void)status; /* a host that went away is noticed by its exit callback */
  sbx_free(w);
}

static int host_send(struct host *h, const char *fmt, const char *arg) {
  if (!h->running)
    return SBX_ECLOSED;
  size_t n = strlen(fmt) + strlen(arg) + 2;
  struct write_req *wr = sbx_malloc(sizeof(*wr) + n);
  if (wr == NULL)
    return SBX_ENOMEM;
  int len = snprintf(wr->buf, n, fmt, arg);
  uv_buf_t b = uv_buf_init(wr->buf, (unsigned)len);
  if (uv_write(&wr->w, (uv_stream_t *)&h->in, &b, 1, on_written) != 0) {
    sbx_free(wr);
    return SBX_EIO;
  }
  return 0;
}

static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf) {
  (void)handle;
  (void)suggested;
  static char slab[4096];
  *buf = uv_buf_init(slab, sizeof(slab));
}

static void on_line(struct host *h, const char *line) {
  if (strcmp(line, "ready") == 0 && h->state == HOST_STARTING) {
    host_set_state(h, HOST_READY);
    sbx_log(SBX_LOG_INFO, "hosts", "host %d (pid %d) ready", h->slot, h->proc.pid);
  }
}

static void on_host_stdout(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  struct host *h = s->data;
  if (nread < 0) {
    uv_read_stop(s);
    return;
  }
  for (ssize_t i = 0; i < nread; i++) {
    char ch = buf->base[i];
    if (ch == '\n') {
      h->line[h->line_len] = '\0';
      on_line(h, h->line);
      h->line_len = 0;
    } else if (h->line_len + 1 < sizeof(h->line)) {
      h->line[h->line_len++] = ch;
    }
  }
}

/* ---- spawning and supervising ----------------------------------------------------------- */

static void host_spawn(struct host *h);

static void unassign_host(struct orch_hosts *hs, int slot) {
  size_t i = 0;
  const char *k;
  void *v;
  while (orch__map_next(&hs->assign, &i, &k, &v)) {
    struct assignment *a = v;
    if (a->slot == slot) {
      orch__map_del(&hs->assign, a->chat_id); /* a tombstone: the iteration goes on */
      sbx_free(a);
    }
  }
  hs->h[slot].assigned = 0;
}

static void on_backoff(uv_timer_t *t) {
  struct host *h = t->data;
  if (h->hs->closing || h->state != HOST_EXITED)
    return;
  host_set_state(h, HOST_IDLE);
  host_spawn(h);
}

static void on_host_exit(uv_process_t *p, int64_t status, int sig) {
  struct host *h = p->data;
  struct orch_hosts *hs = h->hs;
  h->running = 0;
  uv_close((uv_handle_t *)&h->proc, on_handle_closed);
  uv_close((uv_handle_t *)&h->in, on_handle_closed);
  uv_close((uv_handle_t *)&h->out, on_handle_closed);
  if (hs->closing) {
    if (!uv_is_closing((uv_handle_t *)&h->timer))
      uv_close((uv_handle_t *)&h->timer, on_timer_closed);
    return;
  }
  uint64_t lived = sbx_now_mono_ms() - h->started_ms;
  sbx_log(SBX_LOG_WARN, "hosts", "host %d exited (status %lld, signal %d) after %llu ms%s", h->slot,
          (long long)status, sig, (unsigned long long)lived,
          status == 3 ? ": it refused to run without its sandbox" : "");
  host_set_state(h, HOST_EXITED);
  unassign_host(hs, h->slot);
  if (lived >= HEALTHY_AFTER_MS)
    h->backoff_ms = BACKOFF_MIN_MS;
  h->restarts++;
  uv_timer_start(&h->timer, on_backoff, h->backoff_ms, 0);
  h->backoff_ms = h->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : h->backoff_ms * 2;
}

/* What one spawn's command line and environment point into: alive until uv_spawn returns. */
struct spawn_text {
  char kernels[16], fs_worker[PATH_MAX + 32], fs_kernel[PATH_MAX + 32], fs_py[PATH_MAX + 32],
      script[PATH_MAX], orch_arg[PATH_MAX + 8], env_py[PATH_MAX + 32], heap[48], data_limit[48],
      seccomp_fd[16], env_mem[48], env_heap[48], env_snap[48], env_path[4096];
  char pkg[PATH_MAX + 16], worker_dir[PATH_MAX + 8], kernel_dir[PATH_MAX + 8];
  char *argv[96];
  int argc;
  char *env[8];
};

/* The arguments' and the environment's text.  Sandboxed, the host sees our sources and the
 * runtime at APP_DIR (bound from app_src and pyodide_src); trusted, where they are. */
static void spawn_text_fill(const struct orch_hosts *hs, struct spawn_text *t) {
  const char *app = hs->trusted ? hs->root : APP_DIR;
  const char *py = hs->trusted ? hs->pyodide : PYODIDE_IN;
  snprintf(t->kernels, sizeof(t->kernels), "%d", hs->kernels);
  snprintf(t->fs_worker, sizeof(t->fs_worker), "--allow-fs-read=%s/worker", app);
  snprintf(t->fs_kernel, sizeof(t->fs_kernel), "--allow-fs-read=%s/kernel", app);
  snprintf(t->fs_py, sizeof(t->fs_py), "--allow-fs-read=%s", py);
  snprintf(t->script, sizeof(t->script), "%s/worker/headless-host.js", app);
  snprintf(t->orch_arg, sizeof(t->orch_arg), "unix:%s", hs->sock_path);
  snprintf(t->env_py, sizeof(t->env_py), "CEREA_PYODIDE_DIR=%s", py);
  snprintf(t->env_mem, sizeof(t->env_mem), "CEREA_KERNEL_MEMORY_MB=%d", hs->kernel_mb);
  snprintf(t->env_heap, sizeof(t->env_heap), "CEREA_KERNEL_JS_HEAP_MB=%d", JS_HEAP_MB);
  snprintf(t->env_snap, sizeof(t->env_snap), "CEREA_KERNEL_SNAPSHOT=%d", hs->snapshot);
  snprintf(t->heap, sizeof(t->heap), "--max-old-space-size=%d", JS_HEAP_MB);
  snprintf(
      t->data_limit, sizeof(t->data_limit), "--data=%llu",
      (unsigned long long)((uint64_t)(hs->kernels + 1) * (uint64_t)(hs->kernel_mb + JS_HEAP_MB) +
                           HOST_BASE_MB) *
          ORCH_MIB);
  snprintf(t->seccomp_fd, sizeof(t->seccomp_fd), "%d", SECCOMP_FD);
  snprintf(t->pkg, sizeof(t->pkg), "%s/package.json", hs->app_src);
  snprintf(t->worker_dir, sizeof(t->worker_dir), "%s/worker", hs->app_src);
  snprintf(t->kernel_dir, sizeof(t->kernel_dir), "%s/kernel", hs->app_src);
  /* The host's environment: only what it needs (no API key, no settings of ours). */
  const char *path = getenv("PATH");
  snprintf(t->env_path, sizeof(t->env_path), "PATH=%s", path ? path : "/usr/bin:/bin");
  char *env[] = {t->env_path,     t->env_py,
                 t->env_mem,      t->env_heap,
                 t->env_snap,     hs->trusted ? "CEREA_SERVER_TRUSTED=1" : "CEREA_SERVER_TRUSTED=0",
                 "NODE_OPTIONS=", NULL};
  memcpy(t->env, env, sizeof(env));
}

static void spawn_args(struct spawn_text *t, const char *const *v, size_t n) {
  for (size_t i = 0; i < n; i++)
    t->argv[t->argc++] = (char *)v[i];
}

/* bubblewrap's part of the command line.  The sandbox sees /usr (with the usual /bin, /lib
 * symlinks), the node install when it lives elsewhere, our sources and the runtime read-only, and
 * the socket's folder: nothing else of the machine (no /etc but the loader cache, no /home, /root,
 * data dir or other checkouts).  It runs as SANDBOX_UID in a user namespace of its own with no
 * capability, may create no namespace, and runs Node under the seccomp filter (fd SECCOMP_FD). */
static void spawn_bwrap_args(const struct orch_hosts *hs, struct spawn_text *t) {
  const char *bw[] = {hs->bwrap,
                      "--unshare-user",
                      "--uid",
                      SANDBOX_UID,
                      "--gid",
                      SANDBOX_UID,
                      "--disable-userns",
                      "--cap-drop",
                      "ALL",
                      "--unshare-net",
                      "--unshare-pid",
                      "--unshare-ipc",
                      "--unshare-uts",
                      "--unshare-cgroup-try",
                      "--die-with-parent",
                      "--new-session",
                      "--seccomp",
                      t->seccomp_fd,
                      "--ro-bind",
                      "/usr",
                      "/usr",
                      "--symlink",
                      "usr/bin",
                      "/bin",
                      "--symlink",
                      "usr/sbin",
                      "/sbin",
                      "--symlink",
                      "usr/lib",
                      "/lib",
                      "--symlink",
                      "usr/lib64",
                      "/lib64",
                      "--ro-bind-try",
                      "/etc/ld.so.cache",
                      "/etc/ld.so.cache",
                      "--dev",
                      "/dev",
                      "--proc",
                      "/proc",
                      "--tmpfs",
                      "/tmp",
                      "--ro-bind",
                      t->pkg,
                      APP_DIR "/package.json",
                      "--ro-bind",
                      t->worker_dir,
                      APP_DIR "/worker",
                      "--ro-bind",
                      t->kernel_dir,
                      APP_DIR "/kernel",
                      "--ro-bind",
                      hs->pyodide_src,
                      PYODIDE_IN,
                      "--chdir",
                      "/"};
  spawn_args(t, bw, SBX_ARRAY_SIZE(bw));
  if (strncmp(hs->node_prefix, "/usr/", 5) != 0) {
    const char *node[] = {"--ro-bind", hs->node_prefix, hs->node_prefix};
    spawn_args(t, node, SBX_ARRAY_SIZE(node));
  }
  /* Last: the socket's folder, writable (a later bind wins over an earlier one). */
  const char *sock[] = {"--bind", hs->sock_dir, hs->sock_dir, "--"};
  spawn_args(t, sock, SBX_ARRAY_SIZE(sock));
}

/* Node's part.  /proc/self/status is readable so that the host can check its own sandbox (uid,
 * capabilities, seccomp, no_new_privs) before it runs anything.  (Its uid outside cannot be
 * checked from inside: --disable-userns nests its namespace in bwrap's, where it maps to 0.) */
static void spawn_node_args(const struct orch_hosts *hs, const struct host *h,
                            struct spawn_text *t) {
  const char *nd[] = {hs->node,
                      "--disallow-code-generation-from-strings",
                      "--experimental-permission",
                      "--allow-worker",
                      t->fs_worker,
                      t->fs_kernel,
                      t->fs_py,
                      "--allow-fs-read=/proc/self/status",
                      t->heap,
                      "--no-warnings",
                      t->script,
                      "--orchestrator",
                      t->orch_arg,
                      "--page-id",
                      h->page_id,
                      "--kernels",
                      t->kernels,
                      "--control",
                      "stdin"};
  spawn_args(t, nd, SBX_ARRAY_SIZE(nd));
  t->argv[t->argc] = NULL;
}

/* The process itself: its pipes (stdin for control, stdout for "ready"), the filter's fd, the uid
 * outside its namespace.  Returns uv_spawn's code; the three handles are open either way. */
static int spawn_process(struct host *h, struct spawn_text *t, int sfd) {
  struct orch_hosts *hs = h->hs;
  uv_pipe_init(hs->o->loop, &h->in, 0);
  uv_pipe_init(hs->o->loop, &h->out, 0);
  h->in.data = h->out.data = h;
  uv_stdio_container_t stdio[SECCOMP_FD + 1];
  stdio[0].flags = UV_CREATE_PIPE | UV_READABLE_PIPE;
  stdio[0].data.stream = (uv_stream_t *)&h->in;
  stdio[1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
  stdio[1].data.stream = (uv_stream_t *)&h->out;
  stdio[2].flags = UV_INHERIT_FD;
  stdio[2].data.fd = 2;
  stdio[SECCOMP_FD].flags = UV_INHERIT_FD;
  stdio[SECCOMP_FD].data.fd = sfd;
  uv_process_options_t opt;
  memset(&opt, 0, sizeof(opt));
  opt.file = t->argv[0];
  opt.args = t->argv;
  opt.env = t->env;
  opt.cwd = hs->trusted ? hs->root : "/"; /* a nobody's process has no business in the checkout */
  opt.exit_cb = on_host_exit;
  opt.stdio_count = hs->trusted ? 3 : SECCOMP_FD + 1;
  if (hs->outside_uid != 0) {
    opt.flags |= UV_PROCESS_SETUID | UV_PROCESS_SETGID; /* libuv drops the groups too */
    opt.uid = (uv_uid_t)hs->outside_uid;
    opt.gid = (uv_gid_t)hs->outside_uid;
  }
  opt.stdio = stdio;
  h->proc.data = h;
  h->line_len = 0;
  h->assigned = 0;
  host_set_state(h, HOST_STARTING);
  h->started_ms = sbx_now_mono_ms();
  int rc = uv_spawn(hs->o->loop, &h->proc, &opt);
  h->open_handles += 3;
  return rc;
}

static void host_spawn(struct host *h) {
  struct orch_hosts *hs = h->hs;
  struct spawn_text t;
  t.argc = 0;
  spawn_text_fill(hs, &t);
  const char *limit[] = {hs->prlimit, t.data_limit, "--"};
  spawn_args(&t, limit, SBX_ARRAY_SIZE(limit));
  int sfd = -1;
  if (!hs->trusted) {
    if ((sfd = filter_fd(hs)) < 0) {
      /* Nothing was started (no handle to close): tried again after the backoff. */
      sbx_log(SBX_LOG_ERROR, "hosts", "host %d: the seccomp filter cannot be passed: %s", h->slot,
              strerror(errno));
      host_set_state(h, HOST_STARTING);
      host_set_state(h, HOST_EXITED);
      uv_timer_start(&h->timer, on_backoff, h->backoff_ms, 0);
      return;
    }
    spawn_bwrap_args(hs, &t);
  }
  spawn_node_args(hs, h, &t);
  int rc = spawn_process(h, &t, sfd);
  if (sfd >= 0)
    close(sfd); /* the child has its copy */
  if (rc != 0) {
    sbx_log(SBX_LOG_ERROR, "hosts", "host %d: cannot start %s: %s", h->slot, t.argv[0],
            uv_strerror(rc));
    /* As if it exited at once: the handles close, the backoff timer tries again. */
    h->running = 1;
    on_host_exit(&h->proc, 127, 0);
    return;
  }
  h->running = 1;
  uv_read_start((uv_stream_t *)&h->out, on_alloc, on_host_stdout);
  host_send(h, "key %s\n", hs->o->host_key); /* page-level calls only (auth.c) */
  char uid_note[48] = "";
  if (!hs->trusted)
    snprintf(uid_note, sizeof(uid_note), ", uid %d outside its namespace",
             hs->outside_uid != 0 ? hs->outside_uid : (int)geteuid());
  sbx_log(SBX_LOG_INFO, "hosts", "host %d started (pid %d%s%s)", h->slot, h->proc.pid,
          hs->trusted ? ", TRUSTED: no bubblewrap" : ", sandboxed", uid_note);
}

/* ---- the uid a host runs as outside its namespace ----------------------------------------
 * A user namespace maps the host's uid 65534 to the uid of whoever started bwrap: were that root,
 * a host that got out of its namespace (a kernel bug) would be root, and a file it made in the
 * socket's folder root's.  So a root orchestrator always starts prlimit and bwrap as
 * HOST_OUTSIDE_UID (nobody, no supplementary group), never as root.
 *
 * bwrap resolves what it binds by path as that uid (a bind from an open descriptor too: it takes
 * the descriptor's path), so a checkout nobody may not read (a clone in a `mktemp -d` folder, a
 * home directory, files made with umask 077) cannot be bound from where it is.  So the
 * orchestrator copies what a host runs (package.json, worker/, kernel/ and the runtime without its
 * .br/.gz copies for browsers: ~14 MB) at start, as root, into a folder of root's that everyone
 * may read, and the sandbox sees the copy read-only at APP_DIR:
 *
 *   /tmp/cerea-hosts-XXXXXX/  root, 0711, flock()ed by the orchestrator while it lives
 *     owner                   made once the lock is held (a folder with it is a server's)
 *     sock/                   nobody's, 0700: hosts.sock
 *     runtime/                root's, folders 0755 and files 0644: the copy
 *
 * The copy also fixes what hosts run for the server's life: a rebuild of the checkout while it
 * serves never reaches a host restarted later with half of it.  The folder goes at exit; one left
 * by an orchestrator that was killed is swept by the next start (its lock is free).  When nobody
 * still cannot start a host (node, bwrap or prlimit out of its reach), server mode refuses to
 * start, saying which path. */

static int rm_one(const char *path, const struct stat *st, int type, struct FTW *ftw) {
  (void)st;
  (void)type;
  (void)ftw;
  remove(path);
  return 0;
}

/* base's own files only: sock/ is nobody's, so what a host may have left in it is not walked
 * (unlinking its socket and removing the folder when empty is all root does there). */
static void remove_base(const char *base) {
  char p[PATH_MAX];
  snprintf(p, sizeof(p), "%s/sock/hosts.sock", base);
  unlink(p);
  snprintf(p, sizeof(p), "%s/sock", base);
  rmdir(p);
  snprintf(p, sizeof(p), "%s/runtime", base);
  nftw(p, rm_one, 16, FTW_DEPTH | FTW_PHYS);
  snprintf(p, sizeof(p), "%s/owner", base);
  unlink(p);
  rmdir(base);
}

/* Folders of servers that were killed: root's, with an owner file, and nobody holds their lock. */
static void sweep_stale(void) {
  DIR *d = opendir("/tmp");
  if (d == NULL)
    return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (strncmp(e->d_name, "cerea-hosts-", 12) != 0)
      continue;
    char dir[PATH_MAX], owner[PATH_MAX + 8];
    snprintf(dir, sizeof(dir), "/tmp/%s", e->d_name);
    snprintf(owner, sizeof(owner), "%s/owner", dir);
    struct stat st;
    if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != 0 || lstat(owner, &st) != 0)
      continue;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
      continue;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
      remove_base(dir);
      sbx_log(SBX_LOG_INFO, "hosts", "removed %s, left by a server that was killed", dir);
    }
    close(fd);
  }
  closedir(d);
}

/* The tree walk's state (nftw takes no argument; the start runs once, on the loop's thread). */
static struct {
  uv_loop_t *loop;
  const char *to;
  size_t from_len;
  int skip_compressed;
  char failed[PATH_MAX];
} copying;

static int copy_one(const char *path, const struct stat *st, int type, struct FTW *ftw) {
  (void)st;
  (void)ftw;
  char to[PATH_MAX];
  snprintf(copying.failed, sizeof(copying.failed), "%s", path);
  if (snprintf(to, sizeof(to), "%s%s", copying.to, path + copying.from_len) >= (int)sizeof(to)) {
    errno = ENAMETOOLONG;
    return -1;
  }
  /* chmod after: the modes must not depend on our umask or on the checkout's */
  if (type == FTW_D)
    return (mkdir(to, 0755) == 0 || errno == EEXIST) && chmod(to, 0755) == 0 ? 0 : -1;
  if (type != FTW_F) {
    errno = type == FTW_DNR ? EACCES : ENOENT;
    return -1;
  }
  size_t n = strlen(path);
  if (copying.skip_compressed && n > 3 &&
      (strcmp(path + n - 3, ".br") == 0 || strcmp(path + n - 3, ".gz") == 0))
    return 0; /* the runtime's compressed copies are served to browsers; Node reads the files */
  uv_fs_t req;
  int rc = uv_fs_copyfile(copying.loop, &req, path, to, UV_FS_COPYFILE_FICLONE, NULL);
  uv_fs_req_cleanup(&req);
  if (rc < 0) {
    errno = -rc;
    return -1;
  }
  return chmod(to, 0644);
}

static int copy_tree(struct orch_hosts *hs, const char *from, const char *to, int skip_compressed,
                     struct sbx_error *err) {
  copying.loop = hs->o->loop;
  copying.to = to;
  copying.from_len = strlen(from);
  copying.skip_compressed = skip_compressed;
  copying.failed[0] = '\0';
  if (nftw(from, copy_one, 16, 0) == 0)
    return 0;
  return sbx_error_set(err, SBX_EIO, "server mode: cannot copy %s for the kernel hosts: %s",
                       copying.failed[0] ? copying.failed : from, strerror(errno));
}

/* 0 when uid may use each path as mode says, else the index + 1 of the first it may not. */
static int refused_to(int uid, const char *const *path, const int *mode, int n) {
  pid_t pid = fork();
  if (pid < 0)
    return n + 1;
  if (pid == 0) {
    if (setgroups(0, NULL) != 0 || setgid((gid_t)uid) != 0 || setuid((uid_t)uid) != 0)
      _exit(n + 1);
    for (int i = 0; i < n; i++)
      if (access(path[i], mode[i]) != 0)
        _exit(i + 1);
    _exit(0);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : n + 1;
}

/* The folder, its copy and the socket's folder for hosts run as nobody; then a child that became
 * nobody checks it reaches every program and file a host needs. */
static int prepare_nobody(struct orch_hosts *hs, struct sbx_error *err) {
  sweep_stale();
  char tmpl[] = "/tmp/cerea-hosts-XXXXXX";
  if (mkdtemp(tmpl) == NULL)
    return sbx_error_set(err, SBX_EIO,
                         "server mode: cannot make a folder for the kernel hosts in "
                         "/tmp: %s",
                         strerror(errno));
  hs->base_dir = sbx_strdup(tmpl);
  hs->sock_dir = join(tmpl, "sock");
  hs->app_src = join(tmpl, "runtime");
  hs->pyodide_src = hs->app_src ? join(hs->app_src, "pyodide") : NULL;
  if (!hs->base_dir || !hs->sock_dir || !hs->app_src || !hs->pyodide_src)
    return SBX_ENOMEM;
  char p[PATH_MAX + 32];
  snprintf(p, sizeof(p), "%s/owner", tmpl);
  int fd = -1;
  if ((hs->base_lock = open(tmpl, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 ||
      flock(hs->base_lock, LOCK_EX) != 0 || chmod(tmpl, 0711) != 0 ||
      (fd = open(p, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600)) < 0 ||
      mkdir(hs->sock_dir, 0700) != 0 || chown(hs->sock_dir, HOST_OUTSIDE_UID, HOST_OUTSIDE_UID) ||
      mkdir(hs->app_src, 0755) != 0 || chmod(hs->app_src, 0755) != 0) {
    int e = errno;
    if (fd >= 0)
      close(fd);
    return sbx_error_set(err, SBX_EIO, "server mode: cannot prepare %s for the kernel hosts: %s",
                         tmpl, strerror(e));
  }
  close(fd);
  const char *part[] = {"package.json", "worker", "kernel"};
  char from[PATH_MAX + 16], to[PATH_MAX + 16];
  int rc = 0;
  for (size_t i = 0; i < SBX_ARRAY_SIZE(part) && rc == 0; i++) {
    snprintf(from, sizeof(from), "%s/%s", hs->root, part[i]);
    snprintf(to, sizeof(to), "%s/%s", hs->app_src, part[i]);
    rc = copy_tree(hs, from, to, 0, err);
  }
  if (rc == 0)
    rc = copy_tree(hs, hs->pyodide, hs->pyodide_src, 1, err);
  if (rc != 0)
    return rc;

  char script[PATH_MAX + 32], host_dir[PATH_MAX + 16], kernel_dir[PATH_MAX + 8];
  snprintf(script, sizeof(script), "%s/worker/headless-host.js", hs->app_src);
  snprintf(host_dir, sizeof(host_dir), "%s/worker/host", hs->app_src);
  snprintf(kernel_dir, sizeof(kernel_dir), "%s/kernel", hs->app_src);
  int node_elsewhere = strncmp(hs->node_prefix, "/usr/", 5) != 0;
  const char *path[] = {script,          host_dir,     kernel_dir,
                        hs->pyodide_src, hs->sock_dir, hs->node,
                        hs->bwrap,       hs->prlimit,  node_elsewhere ? hs->node_prefix : hs->node};
  const int mode[] = {R_OK,
                      R_OK | X_OK,
                      R_OK | X_OK,
                      R_OK | X_OK,
                      R_OK | W_OK | X_OK,
                      X_OK,
                      X_OK,
                      X_OK,
                      node_elsewhere ? R_OK | X_OK : X_OK};
  int n = (int)SBX_ARRAY_SIZE(path);
  int bad = refused_to(HOST_OUTSIDE_UID, path, mode, n);
  if (bad != 0)
    return sbx_error_set(
        err, SBX_EPERM,
        "server mode refuses to start kernel hosts as root: they run as uid %d, which may not "
        "reach %s (make it and its parent folders readable and searchable by others, or run the "
        "server as another user)",
        HOST_OUTSIDE_UID, bad <= n ? path[bad - 1] : "its files (the probe failed)");
  return 0;
}

/* ---- capacity ------------------------------------------------------------------------------
 * How many kernels a host runs at once, unless CEREA_HOST_KERNELS says: as many as its memory
 * budget holds at each kernel's full cap, the spare among them (so the host's RLIMIT_DATA, below
 * the budget, is never the reason a kernel fails).  A restore from the memory snapshot costs a
 * fraction of a second of CPU, so a crowd of new chats can start that many kernels at once; a
 * load of Python costs 2-3 s (NOTES.md: a burst of loads starves them all), so without the
 * snapshot the count stays at 2.  The budget is CEREA_HOST_MEMORY_MB, by default half the
 * machine's memory shared among the hosts. */

static int default_budget_mb(int hosts) {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  uint64_t mb = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page / ORCH_MIB : 4096;
  uint64_t each = mb / 2 / (uint64_t)(hosts > 0 ? hosts : 1);
  return each < 1024 ? 1024 : each > (1u << 22) ? (1 << 22) : (int)each;
}

/* Live kernels besides the spare: (budget - HOST_BASE_MB) / (cap + JS heap) - 1, 1..64. */
static int kernels_for(int budget_mb, int kernel_mb, int snapshot) {
  long fit = ((long)budget_mb - HOST_BASE_MB) / ((long)kernel_mb + JS_HEAP_MB) - 1;
  if (fit < 1)
    fit = 1;
  if (fit > 64)
    fit = 64;
  if (!snapshot && fit > 2)
    fit = 2;
  return (int)fit;
}

/* ---- public -------------------------------------------------------------------------------- */

/* What server mode is configured with: the environment's settings and the programs it runs. */
struct hosts_settings {
  int n, kernels, idle_s, kernel_mb, budget_mb, snapshot, trusted;
  char node[PATH_MAX], bwrap[PATH_MAX], prlimit[PATH_MAX];
};

static int hosts_settings_read(struct hosts_settings *st, struct sbx_error *err) {
  st->n = env_int("CEREA_HOSTS", 1, 1, HOSTS_MAX);
  st->kernels = env_int("CEREA_HOST_KERNELS", 0, 1, 64);
  st->idle_s = env_int("CEREA_HOST_CHAT_IDLE_S", 600, 1, 86400 * 30);
  st->kernel_mb = env_int("CEREA_KERNEL_MEMORY_MB", 1024, 128, 16384);
  st->budget_mb = env_int("CEREA_HOST_MEMORY_MB", 0, 1024, 1 << 22);
  if (st->n < 0 || st->kernels < 0 || st->idle_s < 0 || st->kernel_mb < 0 || st->budget_mb < 0)
    return sbx_error_set(
        err, SBX_EINVAL,
        "CEREA_HOSTS must be 1..%d, CEREA_HOST_KERNELS 1..64, CEREA_HOST_CHAT_IDLE_S "
        "1..2592000, CEREA_KERNEL_MEMORY_MB 128..16384, CEREA_HOST_MEMORY_MB 1024..4194304",
        HOSTS_MAX);
  /* Kernels restore the served memory snapshot unless CEREA_KERNEL_SNAPSHOT says 0 (then each
   * loads Python from scratch; worker/node-kernel.js reads it in the host). */
  const char *sv = getenv("CEREA_KERNEL_SNAPSHOT");
  st->snapshot = !(sv && (strcmp(sv, "0") == 0 || strcmp(sv, "false") == 0 ||
                          strcmp(sv, "no") == 0 || strcmp(sv, "off") == 0));
  if (st->budget_mb == 0)
    st->budget_mb = default_budget_mb(st->n);
  if (st->kernels == 0)
    st->kernels = kernels_for(st->budget_mb, st->kernel_mb, st->snapshot);
  const char *tv = getenv("CEREA_SERVER_TRUSTED");
  st->trusted = tv && (strcmp(tv, "1") == 0 || strcmp(tv, "true") == 0);
  const char *node = getenv("CEREA_NODE") ? getenv("CEREA_NODE") : "node";
  const char *bwrap = getenv("CEREA_BWRAP") ? getenv("CEREA_BWRAP") : "bwrap";
  if (!find_program(node, st->node))
    return sbx_error_set(err, SBX_ENOENT, "server mode: %s not found (set CEREA_NODE)", node);
  snprintf(st->bwrap, sizeof(st->bwrap), "%s", bwrap);
  if (!st->trusted && !find_program(bwrap, st->bwrap))
    return sbx_error_set(
        err, SBX_EPERM,
        "server mode refuses to start kernel hosts without bubblewrap (%s not found): "
        "install it, or set CEREA_SERVER_TRUSTED=1 if the code it runs is trusted",
        bwrap);
  if (!find_program("prlimit", st->prlimit))
    return sbx_error_set(err, SBX_ENOENT,
                         "server mode: prlimit (util-linux) not found: it bounds each "
                         "host's memory");
  return 0;
}

/* Where everything is: the data dir, the checkout (the static tree is ROOT/build/www unless
 * --static moved it; then the sources are found from CEREA_ROOT), the runtime, Node's prefix, and
 * what the sandbox binds its APP_DIR and socket folder from. */
static int hosts_paths(struct orch_hosts *hs, const char *node, const char *bwrap,
                       struct sbx_error *err) {
  struct orch *o = hs->o;
  char real_data[PATH_MAX], real_static[PATH_MAX];
  if (realpath(o->cfg->data_dir, real_data) == NULL || realpath(o->static_dir, real_static) == NULL)
    return sbx_error_set(err, SBX_EIO,
                         "server mode: cannot resolve the data or static directory: %s",
                         strerror(errno));
  char root[PATH_MAX];
  if (getenv("CEREA_ROOT")) {
    snprintf(root, sizeof(root), "%s", getenv("CEREA_ROOT"));
  } else {
    snprintf(root, sizeof(root), "%s", real_static);
    for (int up = 0; up < 2; up++) {
      char *slash = strrchr(root, '/');
      if (slash && slash != root)
        *slash = '\0';
    }
  }
  hs->data_dir = sbx_strdup(real_data);
  hs->root = sbx_strdup(root);
  hs->pyodide = join(real_static, "pyodide");
  hs->node = sbx_strdup(node);
  /* /opt/node/bin/node -> /opt/node/bin (Node is one binary over system libraries); /usr/bin/node
   * is under /usr already. */
  snprintf(hs->node_prefix, sizeof(hs->node_prefix), "%s", node);
  char *slash = strrchr(hs->node_prefix, '/');
  if (slash && slash != hs->node_prefix)
    *slash = '\0';
  hs->bwrap = sbx_strdup(bwrap);
  hs->h = sbx_calloc((size_t)hs->n, sizeof(*hs->h));
  if (!hs->data_dir || !hs->root || !hs->pyodide || !hs->node || !hs->bwrap || !hs->h)
    return SBX_ENOMEM;
  int rc;
  if (!hs->trusted && (rc = build_filter(hs, err)) != 0)
    return rc;
  char script[PATH_MAX + 32];
  snprintf(script, sizeof(script), "%s/worker/headless-host.js", hs->root);
  if (access(script, R_OK) != 0)
    return sbx_error_set(err, SBX_ENOENT,
                         "server mode: %s not found (set CEREA_ROOT to the checkout)", script);
  /* As root the hosts run as nobody from a copy (prepare_nobody); else as our own uid, bound
   * from the checkout, with the socket in DATA/hosts. */
  if (!hs->trusted && geteuid() == 0) {
    if ((rc = prepare_nobody(hs, err)) != 0)
      return rc;
    hs->outside_uid = HOST_OUTSIDE_UID;
  } else {
    hs->sock_dir = join(real_data, "hosts");
    hs->app_src = sbx_strdup(hs->root);
    hs->pyodide_src = sbx_strdup(hs->pyodide);
  }
  hs->sock_path = hs->sock_dir ? join(hs->sock_dir, "hosts.sock") : NULL;
  if (!hs->sock_path || !hs->app_src || !hs->pyodide_src)
    return SBX_ENOMEM;
  return 0;
}

/* The hosts' socket: its folder made, listened on, readable by the hosts' uid alone. */
static int hosts_listen(struct orch_hosts *hs, struct sbx_error *err) {
  if (strlen(hs->sock_path) >= 100)
    return sbx_error_set(err, SBX_EINVAL,
                         "server mode: socket path %s is too long for a Unix socket",
                         hs->sock_path);
  if (mkdir(hs->sock_dir, 0700) != 0 && errno != EEXIST)
    return sbx_error_set(err, SBX_EIO, "server mode: cannot create %s: %s", hs->sock_dir,
                         strerror(errno));
  char addr[PATH_MAX + 8];
  snprintf(addr, sizeof(addr), "unix:%s", hs->sock_path);
  struct sbx_error le;
  sbx_error_clear(&le);
  int rc = tp_server_listen(hs->o->tp, addr, &le);
  if (rc != 0)
    return sbx_error_set(err, rc, "server mode: cannot listen on %s: %s", addr,
                         le.msg[0] ? le.msg : sbx_strerror(rc));
  chmod(hs->sock_path, 0600);
  if (hs->outside_uid != 0 && chown(hs->sock_path, HOST_OUTSIDE_UID, HOST_OUTSIDE_UID) != 0)
    return sbx_error_set(err, SBX_EIO, "server mode: cannot hand %s to uid %d: %s", hs->sock_path,
                         HOST_OUTSIDE_UID, strerror(errno));
  return 0;
}

/* Each host's slot: its page id (with nodes, "host-<node id's first 8 hex>-<slot>": the chat's
 * page list, its runs' page_id and /v1/admin/pages tell which node's host ran what) and timer. */
static void hosts_init_slots(struct orch_hosts *hs) {
  const char *node_id = orch__node_id(hs->o);
  for (int i = 0; i < hs->n; i++) {
    struct host *h = &hs->h[i];
    h->hs = hs;
    h->slot = i;
    h->backoff_ms = BACKOFF_MIN_MS;
    if (node_id)
      snprintf(h->page_id, sizeof(h->page_id), "host-%.8s-%d", node_id, i);
    else
      snprintf(h->page_id, sizeof(h->page_id), "host-%d", i);
    uv_timer_init(hs->o->loop, &h->timer);
    h->timer.data = h;
    hs->open_timers++;
  }
}

int orch__hosts_start(struct orch *o, struct sbx_error *err) {
  struct hosts_settings st;
  int rc;
  if ((rc = hosts_settings_read(&st, err)) != 0)
    return rc;
  struct orch_hosts *hs = sbx_calloc(1, sizeof(*hs));
  if (hs == NULL)
    return SBX_ENOMEM;
  hs->o = o;
  hs->base_lock = -1;
  hs->n = st.n;
  hs->kernels = st.kernels;
  sbx_log(SBX_LOG_INFO, "hosts",
          "%d kernels per host besides its spare (memory budget %d MiB, %d MiB per kernel%s)",
          st.kernels, st.budget_mb, st.kernel_mb + JS_HEAP_MB,
          st.snapshot ? ", restored from the memory snapshot" : ", loaded without the snapshot");
  hs->kernel_mb = st.kernel_mb;
  hs->snapshot = st.snapshot;
  snprintf(hs->prlimit, sizeof(hs->prlimit), "%s", st.prlimit);
  hs->trusted = st.trusted;
  hs->chat_idle_ms = (uint64_t)st.idle_s * 1000;
  orch__map_init(&hs->assign);
  if ((rc = hosts_paths(hs, st.node, st.bwrap, err)) != 0 || (rc = hosts_listen(hs, err)) != 0) {
    hosts_free(hs);
    return rc;
  }
  hosts_init_slots(hs);
  o->hosts = hs;
  for (int i = 0; i < hs->n; i++)
    host_spawn(&hs->h[i]);
  return 0;
}

static struct orch_run *head_run(struct orch_chat *c) {
  return SBX_LIST_EMPTY(&c->runs) ? NULL
                                  : SBX_CONTAINER_OF(c->runs.next, struct orch_run, chat_link);
}

static int any_ready(const struct orch_hosts *hs) {
  for (int j = 0; j < hs->n; j++)
    if (hs->h[j].state == HOST_READY)
      return 1;
  return 0;
}

static void detach(struct orch_hosts *hs, struct assignment *a) {
  struct host *h = &hs->h[a->slot];
  host_send(h, "detach %s\n", a->chat_id);
  if (h->assigned > 0)
    h->assigned--;
  orch__map_del(&hs->assign, a->chat_id); /* a tombstone: an iteration goes on */
  sbx_free(a);
}

/* How long an idle chat keeps its slot while others wait: HOST_LINGER_MS, or twice the recent
 * longest gap between a chat's runs (a chat that had no live run for a while, then a new one: its
 * client posting the next run), up to HOST_LINGER_MAX_MS.  On a loaded machine a client's next run
 * comes later than on a quiet one; a chat detached in that gap loses its interpreter (its next run
 * says restarted) and costs a kernel start (~1 s of CPU) to save a slot's second. */
static uint64_t linger_ms(const struct orch_hosts *hs) {
  uint64_t l = 2 * hs->gap_ms;
  return l < HOST_LINGER_MS ? HOST_LINGER_MS : l > HOST_LINGER_MAX_MS ? HOST_LINGER_MAX_MS : l;
}

/* A chat's runs came back after `gap` ms without: the recent longest gap rises to it at once and
 * falls back by an eighth of the difference with each shorter one. */
static void note_gap(struct orch_hosts *hs, uint64_t gap) {
  if (gap > HOST_LINGER_MAX_MS)
    return; /* a chat that came back after the longest linger: not a client's round trip */
  hs->gap_ms = gap >= hs->gap_ms ? gap : hs->gap_ms - (hs->gap_ms - gap) / 8;
}

/* Chats assigned but without live runs give their slot up: after chat_idle_ms, or after
 * linger_ms when `waiting` chats want one (the longest idle first, one per wanted slot).
 * Their stream, kernel and file bytes go; the host remembers the chat had a kernel, so its next
 * run says restarted.  Bounds what a host holds when many chats come and go.  A chat that left
 * this node's memory (idle, its host's page gone; with nodes its lease let go, so another node
 * may hold it next) is detached at once: its host's calls for it would be refused (api.c). */
static void detach_idle(struct orch_hosts *hs, size_t waiting) {
  uint64_t now = sbx_now_mono_ms();
  uint64_t linger = linger_ms(hs);
  size_t i = 0;
  const char *k;
  void *v;
  while (orch__map_next(&hs->assign, &i, &k, &v)) {
    struct assignment *a = v;
    struct orch_chat *c = orch__map_get(&hs->o->chats, a->chat_id);
    if (c == NULL)
      detach(hs, a);
    else if (!SBX_LIST_EMPTY(&c->runs)) {
      if (a->idle_since_ms != 0)
        note_gap(hs, now - a->idle_since_ms);
      a->idle_since_ms = 0;
    } else if (a->idle_since_ms == 0)
      a->idle_since_ms = now;
    else if (now - a->idle_since_ms >= hs->chat_idle_ms)
      detach(hs, a);
  }
  size_t free_slots = 0;
  for (int j = 0; j < hs->n; j++)
    if (hs->h[j].state == HOST_READY && hs->h[j].assigned < (size_t)hs->kernels)
      free_slots += (size_t)hs->kernels - hs->h[j].assigned;
  while (waiting > free_slots) {
    struct assignment *oldest = NULL;
    i = 0;
    while (orch__map_next(&hs->assign, &i, &k, &v)) {
      struct assignment *a = v;
      if (a->idle_since_ms && now - a->idle_since_ms >= linger &&
          (oldest == NULL || a->idle_since_ms < oldest->idle_since_ms))
        oldest = a;
    }
    if (oldest == NULL)
      break;
    detach(hs, oldest);
    free_slots++;
  }
}

/* The ready host with a free kernel slot and the fewest chats; NULL when every slot is taken. */
static struct host *free_host(struct orch_hosts *hs) {
  struct host *best = NULL;
  for (int j = 0; j < hs->n; j++) {
    struct host *h = &hs->h[j];
    if (h->state == HOST_READY && h->assigned < (size_t)hs->kernels &&
        (best == NULL || h->assigned < best->assigned))
      best = h;
  }
  return best;
}

static int attach(struct orch_hosts *hs, struct host *h, struct orch_chat *c) {
  struct assignment *a = sbx_calloc(1, sizeof(*a));
  if (a == NULL)
    return SBX_ENOMEM;
  snprintf(a->chat_id, sizeof(a->chat_id), "%s", c->id);
  a->slot = h->slot;
  a->sent_ms = sbx_now_mono_ms();
  if (host_send(h, "attach %s\n", c->id) != 0 || orch__map_put(&hs->assign, a->chat_id, a) != 0) {
    sbx_free(a);
    return SBX_EIO;
  }
  h->assigned++;
  return 0;
}

/* The cron's duty here.  Chats with live runs and no host wait for a free kernel slot, oldest
 * head run first; while they wait (and some host is up) their paused head run is held, so waiting
 * for capacity never abandons it.  An assigned chat whose host is up but whose page is missing is
 * attached again; one whose host reports its kernel loading has its dispatched run's watchdog
 * held. */
void orch__hosts_tick(struct orch_hosts *hs) {
  if (hs == NULL || hs->closing || hs->o == NULL)
    return;
  struct orch *o = hs->o;
  uint64_t now = sbx_now_mono_ms();
  int up = any_ready(hs);
  size_t waiting = 0;
  size_t i = 0;
  const char *k;
  void *v;
  while (orch__map_next(&o->chats, &i, &k, &v)) {
    struct orch_chat *c = v;
    struct orch_run *run = head_run(c);
    if (run == NULL)
      continue;
    struct assignment *have = orch__map_get(&hs->assign, c->id);
    if (have == NULL) {
      waiting++;
      if (up && run->state == ORCH_RUN_PAUSED)
        orch__run_hold(run, o->rt.paused_wait_ms, o->rt.watchdog_grace_ms);
      continue;
    }
    struct host *h = &hs->h[have->slot];
    struct orch_page *p = orch__chat_page(c, h->page_id);
    if (p == NULL) {
      /* The host gave the chat up, or its stream was refused: tell it again, at most every
       * REATTACH_AFTER_MS. */
      if (h->state == HOST_READY && now - have->sent_ms >= REATTACH_AFTER_MS &&
          host_send(h, "attach %s\n", c->id) == 0)
        have->sent_ms = now;
    } else if (p->kernel == ORCH_KERNEL_LOADING && run->state == ORCH_RUN_DISPATCHED &&
               strcmp(run->page_id, p->id) == 0 &&
               now - run->state_since_ms < LOADING_HOLD_MAX_MS) {
      orch__run_hold(run, o->rt.paused_wait_ms, o->rt.watchdog_grace_ms);
    }
  }
  detach_idle(hs, waiting);
  while (waiting > 0) {
    struct host *h = free_host(hs);
    if (h == NULL)
      return;
    /* The oldest waiting chat: its head run was created first. */
    struct orch_chat *next = NULL;
    int64_t next_at = 0;
    i = 0;
    while (orch__map_next(&o->chats, &i, &k, &v)) {
      struct orch_chat *c = v;
      struct orch_run *run = head_run(c);
      if (run == NULL || orch__map_get(&hs->assign, c->id) != NULL)
        continue;
      if (next == NULL || run->rec.created_at < next_at) {
        next = c;
        next_at = run->rec.created_at;
      }
    }
    if (next == NULL || attach(hs, h, next) != 0)
      return;
    waiting--;
  }
}

/* Kills every host by its handle (SIGTERM, SIGKILL after a grace); the object frees itself once
 * every exit callback ran and every handle closed.  The server may be freed right after. */
static void on_kill_timer(uv_timer_t *t) {
  struct host *h = t->data;
  if (h->running)
    uv_process_kill(&h->proc, SIGKILL);
}

void orch__hosts_close(struct orch_hosts *hs) {
  if (hs == NULL || hs->closing)
    return;
  hs->closing = 1;
  hs->o = NULL;
  for (int i = 0; i < hs->n; i++) {
    struct host *h = &hs->h[i];
    host_set_state(h, HOST_CLOSING);
    uv_timer_stop(&h->timer);
    if (h->running) {
      uv_process_kill(&h->proc, SIGTERM);
      uv_timer_start(&h->timer, on_kill_timer, KILL_GRACE_MS, 0);
      uv_unref((uv_handle_t *)&h->timer);
    } else {
      uv_close((uv_handle_t *)&h->timer, on_timer_closed);
    }
  }
  /* Timers of hosts still running close once their process exited (on_host_exit). */
  maybe_free(hs);
}
