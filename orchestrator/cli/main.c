/* main.c -- the cerea-sandbox command line: `serve` runs the orchestrator until SIGTERM/SIGINT.
 *
 *   cerea-sandbox serve [--listen ADDR:PORT|unix:PATH]... [--data DIR] [--tls-cert F --tls-key F]
 *                       [--static DIR] [--config FILE]
 *   cerea-sandbox run | status | user add ...   (API clients, cli.c)
 *
 * Settings come from defaults, then a config file (--config or CEREA_CONFIG), then the environment,
 * then these flags (config.c).  Everything else lives in the orchestrator library; this file only
 * parses, starts, and stops on a signal (graceful: in-flight answers drain, the store flushes).
 */
#include "orch.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct orch *server;
static uv_signal_t sig_term, sig_int;

static void usage(FILE *f) {
  fputs(
      "usage: cerea-sandbox serve [--listen ADDR:PORT|unix:PATH]... [--data DIR]\n"
      "                           [--tls-cert FILE --tls-key FILE] [--static DIR] [--config FILE]\n"
      "  defaults: --listen 127.0.0.1:8080 --data ./var; settings: docs/configuration.md\n"
      "usage: cerea-sandbox backup DEST [--data DIR] | restore SRC [--data DIR]\n",
      f);
  orch_cli_usage(f);
}

/* The address a person opens: the first TCP listener, a wildcard one as loopback. */
static void print_open_url(const struct orch_config *cfg, int port) {
  const char *addr = NULL;
  for (size_t i = 0; i < cfg->n_listen && addr == NULL; i++)
    if (strncmp(cfg->listen[i], "unix:", 5) != 0)
      addr = cfg->listen[i];
  if (cfg->n_listen == 0)
    addr = "127.0.0.1:8080";
  if (addr == NULL || port <= 0)
    return;
  const char *colon = strrchr(addr, ':');
  int hl = colon ? (int)(colon - addr) : (int)strlen(addr);
  const char *host = addr;
  if ((hl == 7 && strncmp(addr, "0.0.0.0", 7) == 0) || hl == 0)
    host = "127.0.0.1", hl = 9;
  else if (hl == 4 && strncmp(addr, "[::]", 4) == 0)
    host = "[::1]", hl = 5;
  const char *scheme = cfg->tls_cert ? "https" : "http";
  fprintf(stderr,
          "cerea-sandbox: open %s://%.*s:%d/ for the playground and chats, %s://%.*s:%d/admin for "
          "operators\n",
          scheme, hl, host, port, scheme, hl, host, port);
}

static void on_closed(void *ud) { (void)ud; }

static void on_signal(uv_signal_t *h, int signum) {
  fprintf(stderr, "cerea-sandbox: %s, shutting down\n", signum == SIGTERM ? "SIGTERM" : "SIGINT");
  uv_signal_stop(&sig_term);
  uv_signal_stop(&sig_int);
  uv_close((uv_handle_t *)&sig_term, NULL);
  uv_close((uv_handle_t *)&sig_int, NULL);
  if (server)
    orch_close(server, on_closed, NULL);
  server = NULL;
  (void)h;
}

static int serve(int argc, char **argv) {
  struct orch_config cfg;
  struct sbx_error err;
  sbx_error_clear(&err);
  if (orch_config_defaults(&cfg) != 0)
    return 1;
  const char *cfg_file = getenv("CEREA_CONFIG");
  for (int i = 2; i < argc; i++)
    if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
      cfg_file = argv[i + 1];
  int rc = 0;
  if (cfg_file && (rc = orch_config_load_file(&cfg, cfg_file, &err)) != 0)
    goto bad;
  if ((rc = orch_config_load_env(&cfg, &err)) != 0)
    goto bad;
  int cli_listen = 0;
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i], *key = NULL;
    if (strcmp(a, "--listen") == 0)
      key = "CEREA_LISTEN";
    else if (strcmp(a, "--data") == 0)
      key = "CEREA_DATA_DIR";
    else if (strcmp(a, "--tls-cert") == 0)
      key = "CEREA_TLS_CERT";
    else if (strcmp(a, "--tls-key") == 0)
      key = "CEREA_TLS_KEY";
    else if (strcmp(a, "--static") == 0)
      key = "CEREA_STATIC_DIR";
    else if (strcmp(a, "--config") == 0) {
      i++;
      continue;
    } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      orch_config_free(&cfg);
      return 0;
    } else {
      fprintf(stderr, "cerea-sandbox: unknown option %s\n", a);
      usage(stderr);
      orch_config_free(&cfg);
      return 2;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "cerea-sandbox: %s needs a value\n", a);
      orch_config_free(&cfg);
      return 2;
    }
    if (strcmp(key, "CEREA_LISTEN") == 0 && !cli_listen) {
      /* Flags replace the environment's listeners rather than adding to them. */
      for (size_t j = 0; j < cfg.n_listen; j++)
        sbx_free(cfg.listen[j]);
      cfg.n_listen = 0;
      cli_listen = 1;
    }
    if ((rc = orch_config_set(&cfg, key, argv[++i], &err)) != 0)
      goto bad;
  }

  signal(SIGPIPE, SIG_IGN);
  uv_loop_t *loop = uv_default_loop();
  if ((rc = orch_new(loop, &cfg, &server, &err)) != 0)
    goto bad;
  fprintf(stderr, "cerea-sandbox: listening on %s (port %d), data in %s, code execution %s\n",
          cfg.n_listen ? cfg.listen[0] : "127.0.0.1:8080", orch_port(server), cfg.data_dir,
          orch_exec_mode_name(cfg.exec_mode));
  print_open_url(&cfg, orch_port(server));
  uv_signal_init(loop, &sig_term);
  uv_signal_init(loop, &sig_int);
  uv_signal_start(&sig_term, on_signal, SIGTERM);
  uv_signal_start(&sig_int, on_signal, SIGINT);
  uv_run(loop, UV_RUN_DEFAULT);
  uv_loop_close(loop);
  orch_config_free(&cfg);
  return 0;

bad:
  fprintf(stderr, "cerea-sandbox: %s\n", err.msg[0] ? err.msg : sbx_strerror(rc));
  orch_config_free(&cfg);
  return 1;
}

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "serve") == 0)
    return serve(argc, argv);
  if (argc >= 2 && strcmp(argv[1], "run") == 0)
    return orch_cli_run(argc, argv);
  if (argc >= 2 && strcmp(argv[1], "status") == 0)
    return orch_cli_status(argc, argv);
  if (argc >= 2 && strcmp(argv[1], "user") == 0)
    return orch_cli_user(argc, argv);
  if (argc >= 2 && strcmp(argv[1], "backup") == 0)
    return orch_cli_backup(argc, argv);
  if (argc >= 2 && strcmp(argv[1], "restore") == 0)
    return orch_cli_restore(argc, argv);
  if (argc >= 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
    usage(stdout);
    return 0;
  }
  usage(stderr);
  return 2;
}
