/* tp_serve.c -- a small server on the transport alone, for benchmarks and for trying the
 * transport by hand before (or beside) the orchestrator binary: /healthz, /metrics, /sse (one
 * event, then heartbeats), POST /echo (up to 64 MiB, answered with the same bytes) and a static mount.
 *
 *   tp_serve --listen 127.0.0.1:8081 [--listen unix:/tmp/x.sock] [--static DIR]
 *            [--tls-cert F --tls-key F]
 *
 * It stops on SIGINT/SIGTERM (graceful close).  Not part of the product. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport.h"

static struct tp_server *srv;
static uv_signal_t sigint, sigterm;

static void h_healthz(struct tp_req *r, void *ud) {
  static const char b[] = "{\"ok\":true}";
  tp_respond(r, 200, "Content-Type: application/json\r\nCache-Control: no-store\r\n", b,
             sizeof(b) - 1);
}

static void h_metrics(struct tp_req *r, void *ud) {
  struct sbx_buf b;
  sbx_buf_init(&b, 1 << 20);
  tp_metrics_write(srv, &b);
  tp_respond(r, 200, "Content-Type: text/plain; version=0.0.4\r\n", b.data, b.len);
  sbx_buf_free(&b);
}

static void h_echo(struct tp_req *r, void *ud) {
  size_t n;
  const char *b = tp_req_body(r, &n);
  tp_respond(r, 200, "Content-Type: application/octet-stream\r\n", b, n);
}

static void on_close_sse(struct tp_req *r, void *ud) { tp_req_release(r); }

static void h_sse(struct tp_req *r, void *ud) {
  if (tp_sse_start(r, NULL, 15000) != 0)
    return;
  tp_req_on_close(r, on_close_sse, NULL);
  tp_sse_send(r, "hello", "1", "{}", 2);
}

static void on_closed(struct tp_server *s, void *ud) {
  uv_close((uv_handle_t *)&sigint, NULL);
  uv_close((uv_handle_t *)&sigterm, NULL);
}

static void on_signal(uv_signal_t *h, int sig) {
  uv_signal_stop(&sigint);
  uv_signal_stop(&sigterm);
  tp_server_close(srv, 2000, on_closed, NULL);
}

int main(int argc, char **argv) {
  const char *listen[8];
  int nl = 0;
  const char *dir = NULL;
  struct tp_config cfg = {0};
  tp_limits_default(&cfg.limits);
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--listen") == 0 && i + 1 < argc && nl < 8)
      listen[nl++] = argv[++i];
    else if (strcmp(argv[i], "--static") == 0 && i + 1 < argc)
      dir = argv[++i];
    else if (strcmp(argv[i], "--tls-cert") == 0 && i + 1 < argc)
      cfg.tls_cert_file = argv[++i];
    else if (strcmp(argv[i], "--tls-key") == 0 && i + 1 < argc)
      cfg.tls_key_file = argv[++i];
    else {
      fprintf(stderr, "usage: tp_serve --listen ADDR [--static DIR] [--tls-cert F --tls-key F]\n");
      return 2;
    }
  }
  if (nl == 0)
    listen[nl++] = "127.0.0.1:8081";
  signal(SIGPIPE, SIG_IGN);
  uv_loop_t *loop = uv_default_loop();
  struct sbx_error err;
  if (tp_server_new(loop, &cfg, &srv, &err) != 0) {
    fprintf(stderr, "tp_serve: %s\n", err.msg);
    return 1;
  }
  tp_route(srv, "GET", "/healthz", 0, h_healthz, NULL);
  tp_route(srv, "GET", "/metrics", 0, h_metrics, NULL);
  tp_route(srv, "GET", "/sse", 0, h_sse, NULL);
  tp_route(srv, "POST", "/echo", 64u << 20, h_echo, NULL);
  if (dir)
    tp_static_mount(srv, "/", dir, "public, max-age=3600");
  for (int i = 0; i < nl; i++) {
    if (tp_server_listen(srv, listen[i], &err) != 0) {
      fprintf(stderr, "tp_serve: %s\n", err.msg);
      return 1;
    }
  }
  fprintf(stderr, "tp_serve: listening (port %d)\n", tp_server_port(srv));
  uv_signal_init(loop, &sigint);
  uv_signal_init(loop, &sigterm);
  uv_signal_start(&sigint, on_signal, SIGINT);
  uv_signal_start(&sigterm, on_signal, SIGTERM);
  uv_run(loop, UV_RUN_DEFAULT);
  return uv_loop_close(loop) == 0 ? 0 : 1;
}
