/* server.c -- the server object: configuration, listeners (TCP and unix:PATH), registration of
 * routes, static mounts and per-path headers, graceful close, the SSE heartbeat cron and the
 * metrics.  It does not parse HTTP (http1.c, http2.c) nor touch sockets of accepted connections
 * (conn.c).
 */
#include "internal.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void tp_limits_default(struct tp_limits *l) {
  l->max_header_bytes = 16 * 1024;
  l->max_headers = 100;
  l->max_request_line = 8 * 1024;
  l->default_body_limit = 1024 * 1024;
  l->header_timeout_ms = 10000;
  l->idle_timeout_ms = 60000;
  l->handshake_timeout_ms = 10000;
  l->h2_max_concurrent_streams = 100;
  l->sse_queue_bytes = 256 * 1024;
  l->h2_outbound_queue_bytes = 1024 * 1024;
  l->max_connections = 50000;
  l->body_grace_ms = 0; /* the header timeout's */
  l->body_min_rate = 1024;
  l->max_bodies = 1024;
  l->h2_conn_buffer_bytes = 256 * 1024;
  l->buffer_bytes = 64 * 1024 * 1024;
  l->h2_header_bytes_per_sec = 8 * 1024 * 1024;
  l->fd_reserve = 0;
}

static const char *const srv_names[] = {"RUNNING", "DRAINING", "CLOSING"};
static const uint32_t srv_from[] = {
    [SRV_RUNNING] = 0,
    [SRV_DRAINING] = SBX_FSM_BIT(SRV_RUNNING),
    [SRV_CLOSING] = SBX_FSM_BIT(SRV_RUNNING) | SBX_FSM_BIT(SRV_DRAINING),
};
static const struct sbx_fsm srv_fsm = SBX_FSM(TP_MOD, "server", srv_names, srv_from, NULL);

#define srv_set_state(s, st) srv_set_state_((s), (st), __FILE__, __LINE__)
static void srv_set_state_(struct tp_server *s, enum srv_state st, const char *file, int line) {
  if (sbx_fsm_step(&srv_fsm, s->state, st, "-", file, line) == 0)
    s->state = st;
}

/* Descriptors open now (when the server is made): the entries of /proc/self/fd, less the one
 * the listing itself holds; 16 when there is no /proc. */
static unsigned fds_open_now(void) {
  DIR *d = opendir("/proc/self/fd");
  if (d == NULL)
    return 16;
  unsigned n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.')
      n++;
  closedir(d);
  return n > 0 ? n - 1 : 0;
}

static void fd_budget_init(struct tp_server *s) {
  struct rlimit rl;
  unsigned lim = 1024;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
    lim = rl.rlim_cur > 1u << 30 ? 1u << 30 : (unsigned)rl.rlim_cur;
  else if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
    lim = 1u << 20;
  unsigned reserve = s->cfg.limits.fd_reserve;
  if (reserve == 0)
    reserve = SBX_MAX(32u, lim / 16);
  s->fd_limit = lim;
  s->fd_budget = lim > reserve ? lim - reserve : 0;
  s->fd_base = fds_open_now();
}

int tp__fd_room(const struct tp_server *s, unsigned n) {
  return s->fd_base + s->fds + n <= s->fd_budget;
}

void tp__fd_add(struct tp_server *s, int n) { s->fds = (unsigned)((int)s->fds + n); }

/* ---- memory ----------------------------------------------------------------------------------
 * glibc serves the 64 KiB write blocks and stream queues from its heap and keeps what is freed:
 * after a wave of connections the process stays at the wave's size.  Once TP_TRIM_AFTER bytes of
 * such buffers were freed, malloc_trim runs a second later (once, however many come meanwhile). */
#define TP_TRIM_AFTER (16u * 1024 * 1024)

static void on_trim(uv_timer_t *t) {
  struct tp_server *s = t->data;
  s->freed = 0;
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

void tp__freed(struct tp_server *s, size_t n) {
  s->freed += n;
  if (s->freed >= TP_TRIM_AFTER && s->state != SRV_CLOSING &&
      !uv_is_active((uv_handle_t *)&s->trim_timer))
    uv_timer_start(&s->trim_timer, on_trim, 1000, 0);
}

#define ABUSE_LINES_PER_SEC 5

void tp__log_abuse(struct tp_server *s, const struct tp_conn *c, const char *what) {
  uint64_t now = uv_now(s->loop);
  if (now - s->abuse_window >= 1000) {
    s->abuse_window = now;
    s->abuse_lines = 0;
  }
  if (++s->abuse_lines > ABUSE_LINES_PER_SEC) {
    s->abuse_dropped++;
    return;
  }
  char more[64] = "";
  if (s->abuse_dropped)
    snprintf(more, sizeof(more), " (and %u more like it not logged)", s->abuse_dropped);
  s->abuse_dropped = 0;
  sbx_log(SBX_LOG_WARN, TP_MOD, "conn %llu %s: %s: connection closed%s", (unsigned long long)c->id,
          c->peer, what, more);
}

static void cron_tick(uv_timer_t *t);

int tp_server_new(uv_loop_t *loop, const struct tp_config *cfg, struct tp_server **out,
                  struct sbx_error *err) {
  int rc = 0;
  /* A peer that closes while we write must not kill the process: a write error is enough.
   * Set only when nobody chose a disposition for SIGPIPE. */
  struct sigaction sa;
  if (sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL)
    signal(SIGPIPE, SIG_IGN);
  struct tp_server *s = sbx_calloc(1, sizeof(*s));
  if (s == NULL)
    return sbx_error_set(err, SBX_ENOMEM, "out of memory");
  s->loop = loop;
  if (cfg)
    s->cfg = *cfg;
  else
    tp_limits_default(&s->cfg.limits);
  if (s->cfg.limits.h2_max_concurrent_streams == 0 || s->cfg.limits.h2_max_concurrent_streams > 100)
    s->cfg.limits.h2_max_concurrent_streams = 100;
  SBX_LIST_INIT(&s->listeners);
  SBX_LIST_INIT(&s->conns);
  SBX_LIST_INIT(&s->sse_reqs);
  sbx_buf_init(&s->scratch, 64 * 1024);
  s->server_name = sbx_strdup(cfg && cfg->server_name ? cfg->server_name : "cerea-sandbox");
  s->rbuf = sbx_malloc(TP_READ_BUF);
  if (s->server_name == NULL || s->rbuf == NULL) {
    rc = sbx_error_set(err, SBX_ENOMEM, "out of memory");
    goto out;
  }
  s->cfg.server_name = s->server_name;
  s->server_name_len = strlen(s->server_name);
  if ((cfg && cfg->tls_cert_file) || (cfg && cfg->tls_key_file)) {
    if (!cfg->tls_cert_file || !cfg->tls_key_file) {
      rc = sbx_error_set(err, SBX_ETLS, "TLS needs both a certificate and a key file");
      goto out;
    }
    rc = tp__tls_ctx_new(cfg->tls_cert_file, cfg->tls_key_file, &s->ssl_ctx, err);
    if (rc != 0)
      goto out;
    s->tls_cert_file = sbx_strdup(cfg->tls_cert_file);
    s->tls_key_file = sbx_strdup(cfg->tls_key_file);
    s->cfg.tls_cert_file = s->tls_cert_file;
    s->cfg.tls_key_file = s->tls_key_file;
  }
  uv_timer_init(loop, &s->cron);
  uv_timer_init(loop, &s->drain_timer);
  uv_timer_init(loop, &s->trim_timer);
  s->trim_timer.data = s;
  uv_idle_init(loop, &s->defer_idle);
  SBX_LIST_INIT(&s->deferred);
  s->cron.data = s;
  s->drain_timer.data = s;
  s->defer_idle.data = s;
  s->handles_open = 4;
  s->wpool.max = TP_WPOOL_MAX;
  s->h2s_pool.max = TP_H2S_POOL_MAX;
  tp__req_pool_use(1);
  fd_budget_init(s);
  *out = s;
  return 0;
out:
  if (s->ssl_ctx)
    SSL_CTX_free(s->ssl_ctx);
  sbx_free(s->server_name);
  sbx_free(s->rbuf);
  sbx_free(s);
  return rc;
}

static void listener_free(struct tp_listener *l) {
  struct tp_server *s = l->srv;
  if (l->unix_path) {
    unlink(l->unix_path);
    sbx_free(l->unix_path);
  }
  sbx_free(l);
  tp__server_maybe_finish(s);
}

static void on_listener_closed(uv_handle_t *h) {
  struct tp_listener *l = h->data;
  l->srv->handles_open--;
  tp__fd_add(l->srv, -1);
  l->listener_closed = 1;
  if (!l->reject_busy)
    listener_free(l);
}

static void on_reject_closed(uv_handle_t *h) {
  struct tp_listener *l = h->data;
  l->srv->handles_open--;
  l->reject_busy = 0;
  if (l->listener_closed) {
    listener_free(l);
    return;
  }
  if (l->reject_pending) { /* another connection waited meanwhile: try it again */
    l->reject_pending = 0;
    tp__conn_accept(l);
  }
}

void tp__listener_reject(struct tp_listener *l) {
  struct tp_server *s = l->srv;
  if (l->reject_busy || l->listener_closed) {
    l->reject_pending = 1;
    return;
  }
  if (l->is_unix)
    uv_pipe_init(s->loop, &l->reject.pipe, 0);
  else
    uv_tcp_init(s->loop, &l->reject.tcp);
  l->reject.handle.data = l;
  uv_accept(&l->h.stream, &l->reject.stream);
  l->reject_busy = 1;
  s->handles_open++;
  sbx_log(SBX_LOG_WARN, TP_MOD, "out of memory: a new connection was closed");
  uv_close(&l->reject.handle, on_reject_closed);
}

static void on_connection(uv_stream_t *server, int status) {
  struct tp_listener *l = server->data;
  if (status < 0) {
    sbx_log(SBX_LOG_WARN, TP_MOD, "accept failed: %s", uv_strerror(status));
    return;
  }
  tp__conn_accept(l);
}

int tp_server_listen(struct tp_server *s, const char *addr, struct sbx_error *err) {
  int rc;
  if (addr == NULL || s->state != SRV_RUNNING)
    return sbx_error_set(err, SBX_EINVAL, "no address");
  struct tp_listener *l = sbx_calloc(1, sizeof(*l));
  if (l == NULL)
    return sbx_error_set(err, SBX_ENOMEM, "out of memory");
  l->srv = s;
  l->h.handle.data = l;
  if (strncmp(addr, "unix:", 5) == 0) {
    const char *path = addr + 5;
    if (*path == '\0' || strlen(path) >= 100) {
      sbx_free(l);
      return sbx_error_set(err, SBX_EINVAL, "bad unix socket path '%s'", path);
    }
    l->is_unix = 1;
    uv_pipe_init(s->loop, &l->h.pipe, 0);
    l->h.handle.data = l;
    unlink(path); /* a stale socket file from an earlier run */
    rc = uv_pipe_bind(&l->h.pipe, path);
    if (rc == 0) {
      l->unix_path = sbx_strdup(path);
      chmod(path, 0660);
    }
  } else {
    struct sockaddr_storage ss;
    char host[128];
    const char *colon = strrchr(addr, ':');
    if (colon == NULL || colon == addr || (size_t)(colon - addr) >= sizeof(host)) {
      sbx_free(l);
      return sbx_error_set(err, SBX_EINVAL, "bad listen address '%s' (want ADDR:PORT)", addr);
    }
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end != '\0' || colon[1] == '\0' || port < 0 || port > 65535) {
      sbx_free(l);
      return sbx_error_set(err, SBX_EINVAL, "bad port in '%s'", addr);
    }
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = '\0';
    if (host[0] == '[' && host[strlen(host) - 1] == ']') {
      memmove(host, host + 1, strlen(host));
      host[strlen(host) - 1] = '\0';
      rc = uv_ip6_addr(host, (int)port, (struct sockaddr_in6 *)&ss);
    } else {
      rc = uv_ip4_addr(host, (int)port, (struct sockaddr_in *)&ss);
    }
    if (rc != 0) {
      sbx_free(l);
      return sbx_error_set(err, SBX_EINVAL, "bad address '%s'", addr);
    }
    uv_tcp_init(s->loop, &l->h.tcp);
    l->h.handle.data = l;
    rc = uv_tcp_bind(&l->h.tcp, (struct sockaddr *)&ss, 0);
  }
  if (rc == 0)
    rc = uv_listen(&l->h.stream, 511, on_connection);
  s->handles_open++;
  tp__fd_add(s, 1);
  if (rc != 0) {
    int code = sbx_from_uv(rc);
    if (code != SBX_EADDRINUSE && code != SBX_EPERM)
      code = SBX_EIO;
    sbx_error_set(err, code, "cannot listen on %s: %s", addr, uv_strerror(rc));
    uv_close(&l->h.handle, on_listener_closed);
    return code;
  }
  if (!l->is_unix) {
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    uv_tcp_getsockname(&l->h.tcp, (struct sockaddr *)&ss, &len);
    l->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                             : ((struct sockaddr_in *)&ss)->sin_port);
  }
  sbx_list_insert_tail(&s->listeners, &l->node);
  return 0;
}

int tp_server_port(const struct tp_server *s) {
  struct sbx_list *it;
  SBX_LIST_FOREACH(it, &s->listeners) {
    struct tp_listener *l = SBX_CONTAINER_OF(it, struct tp_listener, node);
    if (!l->is_unix)
      return l->port;
  }
  return -1;
}

/* ---- deferred work ---------------------------------------------------------------------------- */

static void on_defer_idle(uv_idle_t *h) {
  struct tp_server *s = h->data;
  while (!SBX_LIST_EMPTY(&s->deferred)) {
    struct tp_deferred *d = SBX_CONTAINER_OF(s->deferred.next, struct tp_deferred, node);
    sbx_list_remove(&d->node);
    d->queued = 0;
    d->fn(d);
  }
  uv_idle_stop(&s->defer_idle);
}

void tp__defer(struct tp_server *s, struct tp_deferred *d) {
  if (d->queued || s->state == SRV_CLOSING)
    return;
  d->queued = 1;
  sbx_list_insert_tail(&s->deferred, &d->node);
  uv_idle_start(&s->defer_idle, on_defer_idle);
}

void tp__defer_cancel(struct tp_deferred *d) {
  if (d->queued) {
    sbx_list_remove(&d->node);
    d->queued = 0;
  }
}

/* ---- close ----------------------------------------------------------------------------------- */

static void on_own_handle_closed(uv_handle_t *h) {
  struct tp_server *s = h->data;
  s->handles_open--;
  tp__server_maybe_finish(s);
}

static void server_free(struct tp_server *s) {
  for (size_t i = 0; i < s->nroutes; i++)
    tp__route_free(&s->routes[i]);
  sbx_free(s->routes);
  for (size_t i = 0; i < s->nmounts; i++) {
    sbx_free(s->mounts[i].prefix);
    sbx_free(s->mounts[i].dir);
    sbx_free(s->mounts[i].cache_control);
  }
  sbx_free(s->mounts);
  for (size_t i = 0; i < s->nphdrs; i++) {
    sbx_free(s->phdrs[i].prefix);
    sbx_free(s->phdrs[i].headers);
  }
  sbx_free(s->phdrs);
  tp__fcache_free(s->fcache);
  sbx_buf_free(&s->scratch);
  sbx_freelist_clear(&s->wpool);
  sbx_freelist_clear(&s->h2s_pool);
  tp__req_pool_use(-1);
  if (s->ssl_ctx)
    SSL_CTX_free(s->ssl_ctx);
  sbx_free(s->tls_cert_file);
  sbx_free(s->tls_key_file);
  sbx_free(s->server_name);
  sbx_free(s->rbuf);
  sbx_free(s);
}

/* Closes every connection and our own handles once nothing is in flight (or drain_ms passed). */
static void server_close_all(struct tp_server *s) {
  if (s->state == SRV_CLOSING)
    return;
  srv_set_state(s, SRV_CLOSING);
  struct sbx_list *it, *tmp;
  SBX_LIST_FOREACH_SAFE(it, tmp, &s->conns) {
    tp__conn_close(SBX_CONTAINER_OF(it, struct tp_conn, node), "server closing");
  }
  uv_timer_stop(&s->cron);
  uv_timer_stop(&s->drain_timer);
  uv_timer_stop(&s->trim_timer);
  uv_idle_stop(&s->defer_idle);
  uv_close((uv_handle_t *)&s->defer_idle, on_own_handle_closed);
  uv_close((uv_handle_t *)&s->cron, on_own_handle_closed);
  uv_close((uv_handle_t *)&s->drain_timer, on_own_handle_closed);
  uv_close((uv_handle_t *)&s->trim_timer, on_own_handle_closed);
}

void tp__server_maybe_finish(struct tp_server *s) {
  if (s->state == SRV_DRAINING && SBX_LIST_EMPTY(&s->conns)) {
    server_close_all(s);
    return;
  }
  if (s->state == SRV_CLOSING && s->handles_open == 0 && SBX_LIST_EMPTY(&s->conns)) {
    tp_closed_cb cb = s->closed_cb;
    void *ud = s->closed_ud;
    server_free(s);
    if (cb)
      cb(s, ud); /* s is only an identity here */
  }
}

void tp__server_conn_gone(struct tp_server *s) {
  if (s->state != SRV_RUNNING)
    tp__server_maybe_finish(s);
}

static void on_drain_timeout(uv_timer_t *t) {
  struct tp_server *s = t->data;
  sbx_log(SBX_LOG_INFO, TP_MOD, "drain time over: closing the remaining connections");
  server_close_all(s);
  tp__server_maybe_finish(s);
}

void tp_server_close(struct tp_server *s, uint64_t drain_ms, tp_closed_cb cb, void *ud) {
  if (s == NULL || s->state != SRV_RUNNING)
    return;
  s->closed_cb = cb;
  s->closed_ud = ud;
  srv_set_state(s, SRV_DRAINING);
  struct sbx_list *it, *tmp;
  SBX_LIST_FOREACH_SAFE(it, tmp, &s->listeners) {
    struct tp_listener *l = SBX_CONTAINER_OF(it, struct tp_listener, node);
    sbx_list_remove(&l->node);
    uv_close(&l->h.handle, on_listener_closed);
  }
  SBX_LIST_FOREACH_SAFE(it, tmp, &s->conns) {
    struct tp_conn *c = SBX_CONTAINER_OF(it, struct tp_conn, node);
    if (c->ops && c->ops->shutdown)
      c->ops->shutdown(c);
    else
      tp__conn_close(c, "server closing");
  }
  if (drain_ms == 0) {
    server_close_all(s);
  } else if (s->state == SRV_DRAINING) {
    uv_timer_start(&s->drain_timer, on_drain_timeout, drain_ms, 0);
  }
  tp__server_maybe_finish(s);
}

/* ---- registration ---------------------------------------------------------------------------- */

int tp_route(struct tp_server *s, const char *method, const char *pattern, size_t body_limit,
             tp_handler_cb cb, void *ud) {
  return tp_route_streamed(s, method, pattern, body_limit, NULL, cb, ud);
}

int tp_route_streamed(struct tp_server *s, const char *method, const char *pattern,
                      size_t body_limit, tp_body_cb on_body, tp_handler_cb cb, void *ud) {
  if (!method || !pattern || pattern[0] != '/' || !cb)
    return SBX_EINVAL;
  struct tp_route *nr = sbx_realloc(s->routes, (s->nroutes + 1) * sizeof(*nr));
  if (nr == NULL)
    return SBX_ENOMEM;
  s->routes = nr;
  struct tp_route *rt = &nr[s->nroutes];
  memset(rt, 0, sizeof(*rt));
  rt->method = sbx_strdup(method);
  rt->pattern = sbx_strdup(pattern);
  rt->body_limit = body_limit ? body_limit : s->cfg.limits.default_body_limit;
  rt->cb = cb;
  rt->on_body = on_body;
  rt->ud = ud;
  int rc = (rt->method && rt->pattern) ? tp__route_compile(rt) : SBX_ENOMEM;
  if (rc != 0) {
    tp__route_free(rt);
    return rc;
  }
  s->nroutes++;
  return 0;
}

int tp_static_mount(struct tp_server *s, const char *prefix, const char *dir,
                    const char *cache_control) {
  if (!prefix || prefix[0] != '/' || !dir)
    return SBX_EINVAL;
  struct tp_mount *nm = sbx_realloc(s->mounts, (s->nmounts + 1) * sizeof(*nm));
  if (nm == NULL)
    return SBX_ENOMEM;
  s->mounts = nm;
  struct tp_mount *m = &nm[s->nmounts];
  m->prefix = sbx_strdup(prefix);
  m->dir = sbx_strdup(dir);
  m->cache_control = sbx_strdup(cache_control ? cache_control : "no-cache");
  if (!m->prefix || !m->dir || !m->cache_control) {
    sbx_free(m->prefix);
    sbx_free(m->dir);
    sbx_free(m->cache_control);
    return SBX_ENOMEM;
  }
  s->nmounts++;
  return 0;
}

int tp_path_headers(struct tp_server *s, const char *prefix, const char *headers) {
  if (!prefix || !headers)
    return SBX_EINVAL;
  size_t hl = strlen(headers);
  if (hl < 2 || strcmp(headers + hl - 2, "\r\n") != 0)
    return SBX_EINVAL;
  struct tp_path_hdr *np = sbx_realloc(s->phdrs, (s->nphdrs + 1) * sizeof(*np));
  if (np == NULL)
    return SBX_ENOMEM;
  s->phdrs = np;
  np[s->nphdrs].prefix = sbx_strdup(prefix);
  np[s->nphdrs].headers = sbx_strdup(headers);
  np[s->nphdrs].prefix_len = strlen(prefix);
  np[s->nphdrs].headers_len = hl;
  if (!np[s->nphdrs].prefix || !np[s->nphdrs].headers) {
    sbx_free(np[s->nphdrs].prefix);
    sbx_free(np[s->nphdrs].headers);
    return SBX_ENOMEM;
  }
  s->nphdrs++;
  return 0;
}

/* ---- cron: SSE heartbeats ---------------------------------------------------------------------
 * One timer for the server instead of one per event stream (a timer per stream would cost a
 * handle and an asynchronous close each).  Duties: send ": hb" on every event stream idle for
 * its heartbeat period.  It runs only while event streams are open. */
static void cron_tick(uv_timer_t *t) {
  struct tp_server *s = t->data;
  uint64_t now = uv_now(s->loop);
  struct sbx_list *it, *tmp;
  SBX_LIST_FOREACH_SAFE(it, tmp, &s->sse_reqs) {
    struct tp_req *r = SBX_CONTAINER_OF(it, struct tp_req, sse_node);
    if (r->hb_ms && now - r->last_write_ms >= r->hb_ms && !r->gone &&
        r->ops->queued(r) < s->cfg.limits.sse_queue_bytes) {
      r->ops->data(r, ": hb\n\n", 6);
      r->last_write_ms = now;
    }
  }
  if (SBX_LIST_EMPTY(&s->sse_reqs)) {
    uv_timer_stop(&s->cron);
    s->cron_running = 0;
  }
}

void tp__cron_want(struct tp_server *s, uint64_t period_ms) {
  if (period_ms == 0 || s->state == SRV_CLOSING)
    return;
  uint64_t p = period_ms / 2 ? period_ms / 2 : 1; /* tick at half the period: late by < p/2 */
  if (s->cron_running && s->cron_period <= p)
    return;
  s->cron_period = p;
  s->cron_running = 1;
  uv_timer_start(&s->cron, cron_tick, p, p);
}

/* ---- date, metrics --------------------------------------------------------------------------- */

const char *tp__http_date(struct tp_server *s) {
  time_t now = time(NULL);
  if (now != s->date_sec) {
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(s->date, sizeof(s->date), "%a, %d %b %Y %H:%M:%S GMT", &tm);
    s->date_sec = now;
  }
  return s->date;
}

void tp__count_status(struct tp_server *s, int status) {
  if (status >= 100 && status < 600) {
    s->by_status[status]++;
    s->stats.responses_by_class[status / 100]++;
  }
}

int tp_metrics_write(const struct tp_server *s, struct sbx_buf *out) {
  static const char *pn[3] = {"http/1.1", "h2c", "h2"};
  const struct tp_stats *st = &s->stats;
  int rc = 0;
  rc |= sbx_buf_appendf(out, "# HELP cerea_http_connections_open Connections open now.\n"
                             "# TYPE cerea_http_connections_open gauge\n");
  for (int i = 0; i < 3; i++)
    rc |= sbx_buf_appendf(out, "cerea_http_connections_open{protocol=\"%s\"} %" PRIu64 "\n", pn[i],
                          st->connections_open_by_proto[i]);
  rc |= sbx_buf_appendf(out,
                        "# HELP cerea_http_connections_total Connections accepted, by protocol.\n"
                        "# TYPE cerea_http_connections_total counter\n");
  for (int i = 0; i < 3; i++)
    rc |= sbx_buf_appendf(out, "cerea_http_connections_total{protocol=\"%s\"} %" PRIu64 "\n", pn[i],
                          st->connections_total[i]);
  rc |= sbx_buf_appendf(out,
                        "# HELP cerea_http_requests_total Requests received.\n"
                        "# TYPE cerea_http_requests_total counter\n"
                        "cerea_http_requests_total %" PRIu64 "\n"
                        "# HELP cerea_http_responses_total Responses sent, by status code.\n"
                        "# TYPE cerea_http_responses_total counter\n",
                        st->requests_total);
  for (int c = 100; c < 600; c++)
    if (s->by_status[c])
      rc |= sbx_buf_appendf(out, "cerea_http_responses_total{code=\"%d\"} %" PRIu64 "\n", c,
                            s->by_status[c]);
  rc |= sbx_buf_appendf(
      out,
      "# HELP cerea_http_bytes_in_total Bytes received (on the wire).\n"
      "# TYPE cerea_http_bytes_in_total counter\n"
      "cerea_http_bytes_in_total %" PRIu64 "\n"
      "# HELP cerea_http_bytes_out_total Bytes sent (on the wire).\n"
      "# TYPE cerea_http_bytes_out_total counter\n"
      "cerea_http_bytes_out_total %" PRIu64 "\n"
      "# HELP cerea_http_sse_streams_open Event streams open now.\n"
      "# TYPE cerea_http_sse_streams_open gauge\n"
      "cerea_http_sse_streams_open %" PRIu64 "\n"
      "# HELP cerea_http_protocol_errors_total Connections closed for malformed input or abuse.\n"
      "# TYPE cerea_http_protocol_errors_total counter\n"
      "cerea_http_protocol_errors_total %" PRIu64 "\n",
      st->bytes_in, st->bytes_out, st->sse_streams_open, st->protocol_errors);
  rc |= sbx_buf_appendf(
      out,
      "# HELP cerea_http_descriptors Descriptors open (as counted), and the budget.\n"
      "# TYPE cerea_http_descriptors gauge\n"
      "cerea_http_descriptors{of=\"open\"} %u\n"
      "cerea_http_descriptors{of=\"budget\"} %u\n"
      "# HELP cerea_http_bodies_arriving Request bodies being received now.\n"
      "# TYPE cerea_http_bodies_arriving gauge\n"
      "cerea_http_bodies_arriving %u\n"
      "# HELP cerea_http_queued_bytes Response bytes waiting in HTTP/2 streams.\n"
      "# TYPE cerea_http_queued_bytes gauge\n"
      "cerea_http_queued_bytes %zu\n"
      "# HELP cerea_http_busy_total Answers 503 at a bound: connections past the descriptor "
      "budget, requests past max_bodies or the files bound.\n"
      "# TYPE cerea_http_busy_total counter\n"
      "cerea_http_busy_total{of=\"connections\"} %" PRIu64 "\n"
      "cerea_http_busy_total{of=\"requests\"} %" PRIu64 "\n",
      s->fd_base + s->fds, s->fd_budget, s->bodies, s->queued, st->shed_total, st->busy_total);
  return rc ? SBX_ETOOBIG : 0;
}
