/* fuzz_tp.c -- the transport's fuzz support: one server, made at the first input and kept, with
 * the unit tests' routes (tests/unit/transport/handlers.c: buffered and streamed bodies, held
 * answers, SSE) and a static mount (a small file, and one past the in-memory size for the file
 * pump and ranges), listening on a unix socket in a temporary directory.  Each input goes
 * through a real socket and the real loop, the way a client's bytes do: no socket double.
 *
 * What it does not do: TLS (the protocol peers are the same behind it), timeouts (no input waits
 * long enough for one). */
#include "fuzz_tp.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "handlers.h"
#include "internal.h"

static uv_loop_t loop;
static struct tp_server *srv;
static struct sockaddr_un addr;

static void put(const char *dir, const char *name, size_t size) {
  char p[256];
  snprintf(p, sizeof(p), "%s/%s", dir, name);
  FILE *f = fopen(p, "w");
  if (f == NULL)
    abort();
  for (size_t i = 0; i < size; i++)
    fputc('a' + (int)(i % 26), f);
  fclose(f);
}

static char dir[64] = "/tmp/fuzz-tp-XXXXXX";

/* The fuzzer exits without closing the server: its files go with the process. */
static void cleanup(void) {
  static const char *const names[] = {"a.txt", "big.txt", "big.txt.gz", "s"};
  char p[128];
  for (size_t i = 0; i < SBX_ARRAY_SIZE(names); i++) {
    snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
    unlink(p);
  }
  rmdir(dir);
}

static void setup(void) {
  if (mkdtemp(dir) == NULL)
    abort();
  atexit(cleanup);
  put(dir, "a.txt", 10);
  put(dir, "big.txt", 100000);
  put(dir, "big.txt.gz", 1000);
  sbx_log_set_level(SBX_LOG_ERROR); /* abuse warnings are what the fuzzer sends */
  if (uv_loop_init(&loop) != 0)
    abort();
  struct tp_config cfg;
  memset(&cfg, 0, sizeof(cfg));
  tp_limits_default(&cfg.limits);
  struct sbx_error err;
  char listen[128];
  snprintf(listen, sizeof(listen), "unix:%s/s", dir);
  if (tp_server_new(&loop, &cfg, &srv, &err) != 0 || tp_static_mount(srv, "/static/", dir, NULL) ||
      tp_server_listen(srv, listen, &err) != 0) {
    fprintf(stderr, "fuzz_tp: no server: %s\n", err.msg);
    abort();
  }
  th_add_routes(srv);
  addr.sun_family = AF_UNIX;
  snprintf(addr.sun_path, sizeof(addr.sun_path), "%s/s", dir);
}

/* One turn of the loop, without waiting, then whatever the server wrote is read (and dropped).
 * 0 while the client's socket is open, 1 once the server closed it. */
static int turn(int fd) {
  uv_run(&loop, UV_RUN_NOWAIT);
  char buf[65536];
  for (;;) {
    ssize_t r = recv(fd, buf, sizeof(buf), 0);
    if (r > 0)
      continue;
    return r == 0 || (errno != EAGAIN && errno != EINTR);
  }
}

static void send_all(int fd, const uint8_t *p, size_t n, size_t piece) {
  while (n > 0) {
    ssize_t w = send(fd, p, SBX_MIN(n, piece), MSG_NOSIGNAL);
    if (w > 0) {
      p += w;
      n -= (size_t)w;
    } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
      return; /* the server closed: the rest is not for it */
    }
    if (turn(fd))
      return;
  }
}

void fuzz_tp_run(const uint8_t *data, size_t n, const char *prefix, size_t prefix_len) {
  if (srv == NULL)
    setup();
  if (n == 0)
    return;
  size_t piece = data[0] == 0 ? n : (size_t)data[0] * 7 % 509 + 1;
  data++;
  n--;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0)
    abort();
  send_all(fd, (const uint8_t *)prefix, prefix_len, prefix_len ? prefix_len : 1);
  send_all(fd, data, n, piece);
  shutdown(fd, SHUT_WR);
  int i = 0;
  while (!turn(fd) || srv->stats.connections_open > 0)
    if (++i > 100000) {
      fprintf(stderr, "fuzz_tp: the connection never closed after the client's EOF\n");
      abort();
    }
  close(fd);
  if (srv->bodies != 0 || srv->queued != 0) {
    fprintf(stderr, "fuzz_tp: not at rest: %u bodies arriving, %zu bytes queued\n", srv->bodies,
            srv->queued);
    abort();
  }
}
