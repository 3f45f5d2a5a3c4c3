/* hosts.c -- `server` execution mode: the orchestrator spawns N headless kernel hosts
 * (worker/headless-host.js, Node), supervises them and assigns chats to them.
 *
 * A host is a page without a screen: it attaches each chat it is given exactly as a browser page
 * does (event stream, presence, started / files / result), over a Unix socket the orchestrator
 * listens on in its data directory (DATA/hosts/hosts.sock).  The orchestrator talks to a host's
 * process only through its stdin, one command a line: `key K` (the credential), `attach CHAT`;
 * `detach CHAT` (idle chats); the host answers on stdout (`ready`, `attached CHAT`).  The host's page id is `host-<slot>`,
 * the same across its restarts: a restarted host re-attaching a chat without Last-Event-ID makes
 * the run the dead one held a new attempt at once (api_events.c), which is the restart policy for
 * a dead host's runs — the run is re-dispatched from scratch and nothing is lost.
 *
 * Sandbox (DESIGN.md "Headless host"; NOTES.md "Node is not a sandbox"): every host runs as
 *   bwrap --unshare-net --unshare-pid --unshare-ipc --unshare-uts --die-with-parent --new-session
 *         --ro-bind /usr /usr (+ /bin /lib /lib64 /sbin symlinks, /etc/ld.so.cache) --dev --proc
 *         --tmpfs /tmp --ro-bind ROOT/{package.json,worker,kernel} PYODIDE (read-only)
 *         [--ro-bind NODE_BIN_DIR when not under /usr] --bind DATA/hosts DATA/hosts (the socket)
 *     node --disallow-code-generation-from-strings --experimental-permission --allow-worker
 *          --allow-fs-read=ROOT/worker --allow-fs-read=ROOT/kernel --allow-fs-read=PYODIDE
 *          ROOT/worker/headless-host.js --orchestrator unix:DATA/hosts/hosts.sock ...
 * (no network but the socket, no child processes, no fs writes, reads limited to the runtime and
 * our sources; the data dir other than the socket is hidden).  Without bubblewrap the mode
 * refuses to start unless CEREA_SERVER_TRUSTED=1 says the code is trusted; the host itself
 * checks its sandbox again and refuses to run without it (exit 3).
 *
 * Settings (environment): CEREA_HOSTS (hosts, default 1, 1..64), CEREA_HOST_KERNELS (live kernels
 * per host besides its spare, default 2), CEREA_HOST_CHAT_IDLE_S (a chat without live runs this
 * long is detached from its host, default 600), CEREA_NODE (node binary, default "node"),
 * CEREA_SERVER_TRUSTED (1: no bubblewrap, code is trusted), CEREA_BWRAP (default "bwrap").
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
 *   | * -> closing        | orch_hosts_close|
 *
 * Restarts back off 250 ms, doubling to 10 s; a host that lived 30 s starts again from 250 ms.
 * Processes are killed by handle only (uv_process_kill), their handles closed in the exit
 * callback: no zombies.  What it does not do: run code (the hosts do), or schedule runs (chat.c).
 */
#include "internal.h"
#include "transport.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HOSTS_MAX        64
#define BACKOFF_MIN_MS   250
#define BACKOFF_MAX_MS   10000
#define HEALTHY_AFTER_MS 30000
#define KILL_GRACE_MS    3000
#define LINE_MAX_BYTES   512

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
static const unsigned char host_allowed[HOST__COUNT][HOST__COUNT] = {
    /* from idle     */ {0, 1, 0, 0, 1},
    /* from starting */ {0, 0, 1, 1, 1},
    /* from ready    */ {0, 0, 0, 1, 1},
    /* from exited   */ {1, 0, 0, 0, 1},
    /* from closing  */ {0, 0, 0, 0, 1},
};

struct orch_hosts;

struct host {
  struct orch_hosts *hs;
  int slot;
  enum host_state state;
  char page_id[24];
  uv_process_t proc;
  uv_pipe_t in, out;
  uv_timer_t timer; /* backoff while exited; SIGKILL deadline while closing */
  int open_handles; /* proc, in, out of the current process */
  int running;      /* the process has not reported its exit */
  int restarts;
  uint64_t backoff_ms, started_ms;
  char line[LINE_MAX_BYTES];
  size_t line_len;
  size_t assigned; /* chats attached to this incarnation */
};

struct orch_hosts {
  struct orch *o; /* NULL once closing: nothing may reach the server any more */
  struct host *h;
  int n;
  int kernels;
  int trusted;
  int closing;
  int open_timers;
  uint64_t chat_idle_ms; /* an assigned chat idle this long is detached from its host */
  char *sock_dir, *sock_path, *data_dir, *root, *pyodide, *node, *bwrap;
  char node_prefix[PATH_MAX]; /* the folder of the node binary, bound when not under /usr */
  struct orch_map assign; /* chat id -> struct assignment (owns its key: chats may leave memory) */
};

struct assignment {
  char chat_id[STORE_ID_LEN + 1];
  int slot;
  uint64_t sent_ms;       /* last `attach` sent */
  uint64_t idle_since_ms; /* no live runs since (0: it has some) */
};
#define REATTACH_AFTER_MS 5000

static void host_set_state(struct host *h, enum host_state next) {
  if (!host_allowed[h->state][next]) {
    sbx_log(SBX_LOG_ERROR, "hosts", "host %d: %s -> %s not allowed", h->slot,
            host_state_names[h->state], host_state_names[next]);
    return;
  }
  SBX_TRACE_STATE("hosts", "host", h->page_id, host_state_names[h->state], host_state_names[next]);
  h->state = next;
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
static int have_program(const char *prog) { return find_program(prog, NULL); }

static char *join(const char *a, const char *b) {
  size_t n = strlen(a) + strlen(b) + 2;
  char *s = sbx_malloc(n);
  if (s)
    snprintf(s, n, "%s/%s", a, b);
  return s;
}

static void hosts_free(struct orch_hosts *hs) {
  size_t i = 0;
  const char *k;
  void *v;
  while (orch_map_next(&hs->assign, &i, &k, &v))
    sbx_free(v);
  orch_map_free(&hs->assign);
  sbx_free(hs->h);
  sbx_free(hs->sock_dir);
  sbx_free(hs->sock_path);
  sbx_free(hs->data_dir);
  sbx_free(hs->root);
  sbx_free(hs->pyodide);
  sbx_free(hs->node);
  sbx_free(hs->bwrap);
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
  while (orch_map_next(&hs->assign, &i, &k, &v)) {
    struct assignment *a = v;
    if (a->slot == slot) {
      orch_map_del(&hs->assign, a->chat_id); /* a tombstone: the iteration goes on */
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

static void host_spawn(struct host *h) {
  struct orch_hosts *hs = h->hs;
  char kernels[16], fs_worker[PATH_MAX + 32], fs_kernel[PATH_MAX + 32], fs_py[PATH_MAX + 32],
      script[PATH_MAX], orch_arg[PATH_MAX + 8], env_py[PATH_MAX + 32];
  snprintf(kernels, sizeof(kernels), "%d", hs->kernels);
  snprintf(fs_worker, sizeof(fs_worker), "--allow-fs-read=%s/worker", hs->root);
  snprintf(fs_kernel, sizeof(fs_kernel), "--allow-fs-read=%s/kernel", hs->root);
  snprintf(fs_py, sizeof(fs_py), "--allow-fs-read=%s", hs->pyodide);
  snprintf(script, sizeof(script), "%s/worker/headless-host.js", hs->root);
  snprintf(orch_arg, sizeof(orch_arg), "unix:%s", hs->sock_path);
  snprintf(env_py, sizeof(env_py), "CEREA_PYODIDE_DIR=%s", hs->pyodide);

  char *argv[80];
  int a = 0;
  char pkg[PATH_MAX + 16], worker_dir[PATH_MAX + 8], kernel_dir[PATH_MAX + 8];
  snprintf(pkg, sizeof(pkg), "%s/package.json", hs->root);
  snprintf(worker_dir, sizeof(worker_dir), "%s/worker", hs->root);
  snprintf(kernel_dir, sizeof(kernel_dir), "%s/kernel", hs->root);
  if (!hs->trusted) {
    /* The sandbox sees /usr (with the usual /bin, /lib symlinks), the node install when it lives
     * elsewhere, our sources and the runtime read-only, and the socket's folder: nothing else of
     * the machine (no /etc but the loader cache, no /home, /root, data dir or other checkouts). */
    const char *bw[] = {hs->bwrap,
                        "--unshare-net",
                        "--unshare-pid",
                        "--unshare-ipc",
                        "--unshare-uts",
                        "--die-with-parent",
                        "--new-session",
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
                        pkg,
                        pkg,
                        "--ro-bind",
                        worker_dir,
                        worker_dir,
                        "--ro-bind",
                        kernel_dir,
                        kernel_dir,
                        "--ro-bind",
                        hs->pyodide,
                        hs->pyodide,
                        "--chdir",
                        "/"};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(bw); i++)
      argv[a++] = (char *)bw[i];
    if (strncmp(hs->node_prefix, "/usr/", 5) != 0) {
      argv[a++] = "--ro-bind";
      argv[a++] = hs->node_prefix;
      argv[a++] = hs->node_prefix;
    }
    /* Last: the socket's folder, writable (a later bind wins over an earlier one). */
    argv[a++] = "--bind";
    argv[a++] = hs->sock_dir;
    argv[a++] = hs->sock_dir;
    argv[a++] = "--";
  }
  const char *nd[] = {hs->node,
                      "--disallow-code-generation-from-strings",
                      "--experimental-permission",
                      "--allow-worker",
                      fs_worker,
                      fs_kernel,
                      fs_py,
                      "--no-warnings",
                      script,
                      "--orchestrator",
                      orch_arg,
                      "--page-id",
                      h->page_id,
                      "--kernels",
                      kernels,
                      "--control",
                      "stdin"};
  for (size_t i = 0; i < SBX_ARRAY_SIZE(nd); i++)
    argv[a++] = (char *)nd[i];
  argv[a] = NULL;

  /* The host's environment: only what it needs (no API key, no settings of ours). */
  const char *path = getenv("PATH");
  char env_path[4096];
  snprintf(env_path, sizeof(env_path), "PATH=%s", path ? path : "/usr/bin:/bin");
  char *env[] = {env_path, env_py,
                 hs->trusted ? "CEREA_SERVER_TRUSTED=1" : "CEREA_SERVER_TRUSTED=0",
                 "NODE_OPTIONS=", NULL};

  uv_pipe_init(hs->o->loop, &h->in, 0);
  uv_pipe_init(hs->o->loop, &h->out, 0);
  h->in.data = h->out.data = h;
  uv_stdio_container_t stdio[3];
  stdio[0].flags = UV_CREATE_PIPE | UV_READABLE_PIPE;
  stdio[0].data.stream = (uv_stream_t *)&h->in;
  stdio[1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
  stdio[1].data.stream = (uv_stream_t *)&h->out;
  stdio[2].flags = UV_INHERIT_FD;
  stdio[2].data.fd = 2;
  uv_process_options_t opt;
  memset(&opt, 0, sizeof(opt));
  opt.file = argv[0];
  opt.args = argv;
  opt.env = env;
  opt.cwd = hs->root;
  opt.exit_cb = on_host_exit;
  opt.stdio_count = 3;
  opt.stdio = stdio;
  h->proc.data = h;
  h->line_len = 0;
  h->assigned = 0;
  host_set_state(h, HOST_STARTING);
  h->started_ms = sbx_now_mono_ms();
  int rc = uv_spawn(hs->o->loop, &h->proc, &opt);
  h->open_handles += 3;
  if (rc != 0) {
    sbx_log(SBX_LOG_ERROR, "hosts", "host %d: cannot start %s: %s", h->slot, argv[0],
            uv_strerror(rc));
    /* As if it exited at once: the handles close, the backoff timer tries again. */
    h->running = 1;
    on_host_exit(&h->proc, 127, 0);
    return;
  }
  h->running = 1;
  uv_read_start((uv_stream_t *)&h->out, on_alloc, on_host_stdout);
  host_send(h, "key %s\n", hs->o->host_key); /* page-level calls only (auth.c) */
  sbx_log(SBX_LOG_INFO, "hosts", "host %d started (pid %d%s)", h->slot, h->proc.pid,
          hs->trusted ? ", TRUSTED: no bubblewrap" : ", sandboxed");
}

/* ---- public -------------------------------------------------------------------------------- */

int orch_hosts_start(struct orch *o, struct sbx_error *err) {
  int n = env_int("CEREA_HOSTS", 1, 1, HOSTS_MAX);
  int kernels = env_int("CEREA_HOST_KERNELS", 2, 1, 64);
  int idle_s = env_int("CEREA_HOST_CHAT_IDLE_S", 600, 1, 86400 * 30);
  if (n < 0 || kernels < 0 || idle_s < 0)
    return sbx_error_set(
        err, SBX_EINVAL,
        "CEREA_HOSTS must be 1..%d, CEREA_HOST_KERNELS 1..64, CEREA_HOST_CHAT_IDLE_S "
        "1..2592000",
        HOSTS_MAX);
  const char *tv = getenv("CEREA_SERVER_TRUSTED");
  int trusted = tv && (strcmp(tv, "1") == 0 || strcmp(tv, "true") == 0);
  const char *node = getenv("CEREA_NODE") ? getenv("CEREA_NODE") : "node";
  const char *bwrap = getenv("CEREA_BWRAP") ? getenv("CEREA_BWRAP") : "bwrap";
  char node_real[PATH_MAX];
  if (!find_program(node, node_real))
    return sbx_error_set(err, SBX_ENOENT, "server mode: %s not found (set CEREA_NODE)", node);
  if (!trusted && !have_program(bwrap))
    return sbx_error_set(
        err, SBX_EPERM,
        "server mode refuses to start kernel hosts without bubblewrap (%s not found): "
        "install it, or set CEREA_SERVER_TRUSTED=1 if the code it runs is trusted",
        bwrap);

  struct orch_hosts *hs = sbx_calloc(1, sizeof(*hs));
  if (hs == NULL)
    return SBX_ENOMEM;
  hs->o = o;
  hs->n = n;
  hs->kernels = kernels;
  hs->trusted = trusted;
  hs->chat_idle_ms = (uint64_t)idle_s * 1000;
  orch_map_init(&hs->assign);
  char real_data[PATH_MAX], real_static[PATH_MAX];
  int rc = 0;
  if (realpath(o->cfg->data_dir, real_data) == NULL ||
      realpath(o->static_dir, real_static) == NULL) {
    rc = sbx_error_set(err, SBX_EIO, "server mode: cannot resolve the data or static directory: %s",
                       strerror(errno));
    goto fail;
  }
  /* The repository root: the static tree is ROOT/build/www unless --static moved it; then the
   * sources are found from CEREA_ROOT. */
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
  hs->sock_dir = join(real_data, "hosts");
  hs->sock_path = hs->sock_dir ? join(hs->sock_dir, "hosts.sock") : NULL;
  hs->node = sbx_strdup(node_real);
  /* /opt/node/bin/node -> /opt/node/bin (Node is one binary over system libraries); /usr/bin/node
   * is under /usr already. */
  snprintf(hs->node_prefix, sizeof(hs->node_prefix), "%s", node_real);
  {
    char *slash = strrchr(hs->node_prefix, '/');
    if (slash && slash != hs->node_prefix)
      *slash = '\0';
  }
  hs->bwrap = sbx_strdup(bwrap);
  hs->h = sbx_calloc((size_t)n, sizeof(*hs->h));
  if (!hs->data_dir || !hs->root || !hs->pyodide || !hs->sock_dir || !hs->sock_path || !hs->node ||
      !hs->bwrap || !hs->h) {
    rc = SBX_ENOMEM;
    goto fail;
  }
  char script[PATH_MAX + 32];
  snprintf(script, sizeof(script), "%s/worker/headless-host.js", hs->root);
  if (access(script, R_OK) != 0) {
    rc = sbx_error_set(err, SBX_ENOENT,
                       "server mode: %s not found (set CEREA_ROOT to the checkout)", script);
    goto fail;
  }
  if (strlen(hs->sock_path) >= 100) {
    rc = sbx_error_set(err, SBX_EINVAL, "server mode: socket path %s is too long for a Unix socket",
                       hs->sock_path);
    goto fail;
  }
  if (mkdir(hs->sock_dir, 0700) != 0 && errno != EEXIST) {
    rc = sbx_error_set(err, SBX_EIO, "server mode: cannot create %s: %s", hs->sock_dir,
                       strerror(errno));
    goto fail;
  }
  char addr[PATH_MAX + 8];
  snprintf(addr, sizeof(addr), "unix:%s", hs->sock_path);
  struct sbx_error le;
  sbx_error_clear(&le);
  if ((rc = tp_server_listen(o->tp, addr, &le)) != 0) {
    rc = sbx_error_set(err, rc, "server mode: cannot listen on %s: %s", addr,
                       le.msg[0] ? le.msg : sbx_strerror(rc));
    goto fail;
  }
  chmod(hs->sock_path, 0600);
  for (int i = 0; i < n; i++) {
    struct host *h = &hs->h[i];
    h->hs = hs;
    h->slot = i;
    h->backoff_ms = BACKOFF_MIN_MS;
    snprintf(h->page_id, sizeof(h->page_id), "host-%d", i);
    uv_timer_init(o->loop, &h->timer);
    h->timer.data = h;
    hs->open_timers++;
  }
  o->hosts = hs;
  for (int i = 0; i < n; i++)
    host_spawn(&hs->h[i]);
  return 0;

fail:
  hosts_free(hs);
  return rc;
}

/* Chats assigned but without live runs for chat_idle_ms are detached from their host (its stream,
 * kernel and file bytes go; the host remembers the chat had a kernel, so its next run says
 * restarted).  Bounds what a host holds when many chats come and go. */
static void detach_idle(struct orch_hosts *hs) {
  uint64_t now = sbx_now_mono_ms();
  size_t i = 0;
  const char *k;
  void *v;
  while (orch_map_next(&hs->assign, &i, &k, &v)) {
    struct assignment *a = v;
    struct orch_chat *c = orch_map_get(&hs->o->chats, a->chat_id);
    if (c != NULL && !SBX_LIST_EMPTY(&c->runs)) {
      a->idle_since_ms = 0;
      continue;
    }
    if (a->idle_since_ms == 0) {
      a->idle_since_ms = now;
      continue;
    }
    if (now - a->idle_since_ms < hs->chat_idle_ms)
      continue;
    struct host *h = &hs->h[a->slot];
    host_send(h, "detach %s\n", a->chat_id);
    if (h->assigned > 0)
      h->assigned--;
    orch_map_del(&hs->assign, a->chat_id); /* a tombstone: the iteration goes on */
    sbx_free(a);
  }
}

/* The cron's duty here: every chat with live runs and no host yet goes to the ready host with the
 * fewest chats.  A chat stays with its host until that host exits; one whose host is up but whose
 * page is missing is attached again. */
void orch_hosts_tick(struct orch_hosts *hs) {
  if (hs == NULL || hs->closing || hs->o == NULL)
    return;
  detach_idle(hs);
  size_t i = 0;
  const char *k;
  void *v;
  while (orch_map_next(&hs->o->chats, &i, &k, &v)) {
    struct orch_chat *c = v;
    if (SBX_LIST_EMPTY(&c->runs))
      continue;
    struct assignment *have = orch_map_get(&hs->assign, c->id);
    if (have != NULL) {
      /* Its host is up but its page is not attached (the host gave the chat up, or its stream
       * was refused): tell it again, at most every REATTACH_AFTER_MS. */
      struct host *h = &hs->h[have->slot];
      uint64_t now = sbx_now_mono_ms();
      if (h->state == HOST_READY && orch_chat_page(c, h->page_id) == NULL &&
          now - have->sent_ms >= REATTACH_AFTER_MS && host_send(h, "attach %s\n", c->id) == 0)
        have->sent_ms = now;
      continue;
    }
    struct host *best = NULL;
    for (int j = 0; j < hs->n; j++) {
      struct host *h = &hs->h[j];
      if (h->state == HOST_READY && (best == NULL || h->assigned < best->assigned))
        best = h;
    }
    if (best == NULL)
      return;
    struct assignment *a = sbx_calloc(1, sizeof(*a));
    if (a == NULL)
      return;
    snprintf(a->chat_id, sizeof(a->chat_id), "%s", c->id);
    a->slot = best->slot;
    a->sent_ms = sbx_now_mono_ms();
    if (host_send(best, "attach %s\n", c->id) == 0 && orch_map_put(&hs->assign, a->chat_id, a) == 0)
      best->assigned++;
    else
      sbx_free(a);
  }
}

/* Kills every host by its handle (SIGTERM, SIGKILL after a grace); the object frees itself once
 * every exit callback ran and every handle closed.  The server may be freed right after. */
static void on_kill_timer(uv_timer_t *t) {
  struct host *h = t->data;
  if (h->running)
    uv_process_kill(&h->proc, SIGKILL);
}

void orch_hosts_close(struct orch_hosts *hs) {
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
