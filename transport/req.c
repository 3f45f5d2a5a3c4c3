/* req.c -- the request/response API every handler uses, whatever the protocol: accessors,
 * hold/release, buffered, streamed and file answers, Server-Sent Events, and the dispatch of a
 * complete request to its route, a static mount, 404 or 405.  It writes no bytes itself: the
 * protocol peer behind r->ops (http1.c, http2.c) frames them.
 */
#include "internal.h"

#include <assert.h>
#include <stddef.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const req_names[] = {"HEAD_IN", "BODY_IN", "HANDLING", "RESPONDING", "DONE"};
#define B(s) SBX_FSM_BIT(REQ_##s)
static const uint32_t req_from[] = {
    [REQ_HEAD_IN] = 0,
    [REQ_BODY_IN] = B(HEAD_IN),
    [REQ_HANDLING] = B(HEAD_IN) | B(BODY_IN),
    [REQ_RESPONDING] = B(HEAD_IN) | B(BODY_IN) | B(HANDLING),
    [REQ_DONE] = B(HEAD_IN) | B(BODY_IN) | B(HANDLING) | B(RESPONDING),
};
#undef B
static const struct sbx_fsm req_fsm = SBX_FSM(TP_MOD, "req", req_names, req_from, NULL);

void tp__req_set_state_(struct tp_req *r, enum req_state st, const char *file, int line) {
  const char *id = r->conn ? r->conn->id_text : "-";
  if (sbx_fsm_step(&req_fsm, r->state, st, id, file, line) == 0)
    r->state = st;
}

/* ---- refusals: one table for both protocols -------------------------------------------------- */

static const struct {
  short status;
  short retry; /* Retry-After: 1 (a bound that frees itself) */
  const char *code, *msg;
} refusals[] = {
    [TP_OK] = {500, 0, "internal", "refused"},
    [TP_R_BAD_REQUEST] = {400, 0, "bad_request", "malformed request"},
    [TP_R_BAD_HEADER] = {400, 0, "bad_header", "malformed request"},
    [TP_R_BAD_TARGET] = {400, 0, "bad_target", "malformed request"},
    [TP_R_BAD_BODY] = {400, 0, "bad_body", "malformed request"},
    [TP_R_BAD_VERSION] = {400, 0, "bad_request", "only HTTP/1.0 and HTTP/1.1 are served here"},
    [TP_R_UPGRADE] = {400, 0, "bad_request", "upgrade is not supported"},
    [TP_R_METHOD] = {405, 0, "method_not_allowed", "method not allowed"},
    [TP_R_TIMEOUT] = {408, 0, "timeout", "request not received in time"},
    [TP_R_BODY_TOO_LARGE] = {413, 0, "body_too_large", "request body over the limit"},
    [TP_R_URI_TOO_LONG] = {414, 0, "uri_too_long", "request line over the limit"},
    [TP_R_HEADERS_TOO_LARGE] = {431, 0, "headers_too_large", "request headers over the limit"},
    [TP_R_TOO_MANY_HEADERS] = {431, 0, "too_many_headers", "request headers over the limit"},
    [TP_R_TRANSFER_CODING] = {501, 0, "unsupported_transfer_coding",
                              "only the chunked transfer coding is accepted"},
    [TP_R_IO] = {500, 0, "io", "the request body could not be stored"},
    [TP_R_NO_MEMORY] = {503, 0, "no_memory", "out of memory"},
    [TP_R_BUSY_BODIES] = {503, 1, "busy", "too many uploads at once: try again"},
    [TP_R_BUSY_FILES] = {503, 1, "busy", "too many files open at once: try again"},
    [TP_R_BUSY_SINK] = {503, 1, "busy", "too many uploads at once: try again"},
    [TP_R_SHED] = {503, 1, "busy", "the server is at its connection bound: try again"},
};

int tp__refusal_status(enum tp_refusal why) { return refusals[why].status; }

int tp__refuse(struct tp_req *r, enum tp_refusal why) {
  if (refusals[why].retry)
    r->srv->stats.busy_total++;
  return tp_respond_error_h(r, refusals[why].status,
                            refusals[why].retry ? "Retry-After: 1\r\n" : NULL, refusals[why].code,
                            refusals[why].msg);
}

/* Freed requests kept for the next ones: a tp_req (~1.5 KiB with its arena) is past the sizes
 * malloc serves from its fast per-thread caches, and every HTTP/2 stream makes one.  Per thread,
 * as loops are (one loop per thread); only while a server of the thread is alive, so that a
 * request released after its server went is freed, not kept past the thread. */
#define REQ_POOL_MAX 64
static _Thread_local struct sbx_freelist req_pool = {NULL, 0, REQ_POOL_MAX};
static _Thread_local unsigned req_pool_servers;

void tp__req_pool_use(int delta) {
  req_pool_servers += (unsigned)delta;
  if (req_pool_servers == 0)
    sbx_freelist_clear(&req_pool);
}

struct tp_req *tp__req_new(struct tp_conn *c, const struct tp_req_ops *ops, enum tp_protocol p) {
  struct tp_req *r = sbx_freelist_take(&req_pool, sizeof(*r));
  if (r == NULL)
    return NULL;
  memset(r, 0, offsetof(struct tp_req, arena)); /* the arena needs no zeroing */
  r->srv = c->srv;
  r->conn = c;
  r->ops = ops;
  r->proto = p;
  r->refs = 1;
  memcpy(r->peer, c->peer, sizeof(r->peer)); /* same size, NUL-terminated there */
  SBX_LIST_INIT(&r->sse_node);
  sbx_buf_init(&r->body, c->srv->cfg.limits.default_body_limit);
  return r;
}

void tp__req_ref(struct tp_req *r) { r->refs++; }

char *tp__req_strndup(struct tp_req *r, const char *s, size_t n) {
  char *p;
  if (r->arena_used + n + 1 <= sizeof(r->arena)) {
    p = r->arena + r->arena_used;
    r->arena_used += n + 1;
  } else {
    struct tp_req_chunk *c = sbx_malloc(sizeof(*c) + n + 1);
    if (c == NULL)
      return NULL;
    c->next = r->chunks;
    r->chunks = c;
    p = c->data;
  }
  memcpy(p, s, n);
  p[n] = '\0';
  return p;
}

char *tp__req_decode(struct tp_req *r, const char *s, size_t n, int plus) {
  /* The usual path or parameter has nothing to decode: a copy (a NUL is refused either way). */
  if (!memchr(s, '%', n) && !(plus && memchr(s, '+', n)))
    return memchr(s, '\0', n) ? NULL : tp__req_strndup(r, s, n);
  size_t mark = r->arena_used;
  struct tp_req_chunk *chunks = r->chunks;
  char *p = tp__req_strndup(r, s, n); /* room for the result; decoded in place */
  if (p == NULL)
    return NULL;
  if (tp__pct_decode_to(p, s, n, plus) < 0) {
    if (r->chunks != chunks) { /* give the chunk back */
      struct tp_req_chunk *c = r->chunks;
      r->chunks = c->next;
      sbx_free(c);
    } else {
      r->arena_used = mark;
    }
    return NULL;
  }
  return p;
}

void tp__req_strings_free(struct tp_req *r) {
  while (r->chunks) {
    struct tp_req_chunk *c = r->chunks;
    r->chunks = c->next;
    sbx_free(c);
  }
  if (r->hdrs != r->hdrs_inline)
    sbx_free(r->hdrs);
  r->hdrs = NULL;
  r->nhdrs = r->hcap = 0;
  r->arena_used = 0;
}

/* Lets go of the answer's file. */
static void file_drop(struct tp_req *r) {
  if (r->file == NULL)
    return;
  tp__file_unref(r->file);
  r->file = NULL;
}

void tp__req_detach(struct tp_req *r) {
  file_drop(r);
  r->conn = NULL;
}

static void req_free(struct tp_req *r) {
  file_drop(r);
  sbx_list_remove(&r->sse_node);
  tp__req_strings_free(r);
  sbx_buf_free(&r->body);
  if (req_pool_servers > 0)
    sbx_freelist_give(&req_pool, r);
  else
    sbx_free(r);
}

void tp__req_unref(struct tp_req *r) {
  assert(r->refs > 0);
  if (--r->refs == 0)
    req_free(r);
}

static void sse_forget(struct tp_req *r) {
  if (r->sse) {
    r->sse = 0;
    sbx_list_remove(&r->sse_node);
    r->srv->stats.sse_streams_open--;
  }
}

enum tp_refusal tp__req_body_data(struct tp_req *r, const void *p, size_t n) {
  r->body_seen += n;
  r->body_last = uv_now(r->srv->loop);
  if (r->route == NULL || r->route->on_body == NULL) {
    int rc = sbx_buf_append(&r->body, p, n);
    return rc == 0 ? TP_OK : rc == SBX_ETOOBIG ? TP_R_BODY_TOO_LARGE : TP_R_NO_MEMORY;
  }
  if (r->body_seen > r->body_limit)
    return TP_R_BODY_TOO_LARGE;
  int rc = r->route->on_body(r, p, n, r->route->ud);
  switch (rc) {
  case 0:
    return TP_OK;
  case SBX_ETOOBIG:
    return TP_R_BODY_TOO_LARGE;
  case SBX_ENOMEM:
    return TP_R_NO_MEMORY;
  case SBX_EBUSY:
    return TP_R_BUSY_SINK;
  case SBX_EIO:
    return TP_R_IO;
  default:
    return TP_R_BAD_BODY;
  }
}

/* ---- bodies: admission, count, deadline ----------------------------------------------------- */

static int body_has_sink(const struct tp_req *r) { return r->route && r->route->on_body; }

enum tp_refusal tp__body_admit(struct tp_req *r) {
  struct tp_server *s = r->srv;
  if (s->bodies >= s->cfg.limits.max_bodies)
    return TP_R_BUSY_BODIES;
  if (body_has_sink(r) && !tp__fd_room(s, 1)) /* the sink will open a file */
    return TP_R_BUSY_FILES;
  return TP_OK;
}

void tp__body_enter(struct tp_req *r) {
  struct tp_server *s = r->srv;
  s->bodies++;
  if (body_has_sink(r))
    tp__fd_add(s, 1);
  r->body_start = r->body_last = uv_now(s->loop);
}

void tp__body_leave(struct tp_req *r) {
  struct tp_server *s = r->srv;
  s->bodies--;
  if (body_has_sink(r))
    tp__fd_add(s, -1);
}

uint64_t tp__body_due(const struct tp_req *r, uint64_t now) {
  const struct tp_limits *l = &r->srv->cfg.limits;
  uint64_t grace = l->body_grace_ms ? l->body_grace_ms : l->header_timeout_ms;
  uint64_t rate = l->body_min_rate ? l->body_min_rate : 1;
  uint64_t by_rate = r->body_start + grace + r->body_seen * 1000 / rate;
  uint64_t by_idle = r->body_last + l->idle_timeout_ms;
  (void)now;
  return SBX_MIN(by_rate, by_idle);
}

void tp__req_abandon(struct tp_req *r) {
  if (r->state < REQ_HANDLING && r->close_cb) {
    tp_req_close_cb cb = r->close_cb;
    r->close_cb = NULL;
    tp__req_ref(r);
    cb(r, r->close_ud);
    tp__req_unref(r);
  }
}

void tp__req_peer_gone(struct tp_req *r) {
  if (r->gone)
    return;
  r->gone = 1;
  tp__req_detach(r);
  sse_forget(r);
  if (r->state != REQ_DONE && r->close_cb) {
    tp_req_close_cb cb = r->close_cb;
    r->close_cb = NULL;
    tp__req_ref(r);
    cb(r, r->close_ud);
    tp__req_unref(r);
  }
}

int tp__req_add_header(struct tp_req *r, const char *n, size_t nl, const char *v, size_t vl) {
  if (r->hdrs == NULL) {
    r->hdrs = r->hdrs_inline;
    r->hcap = SBX_ARRAY_SIZE(r->hdrs_inline);
  }
  if (r->nhdrs == r->hcap) {
    size_t cap = r->hcap * 2;
    struct tp_kv *nh = sbx_malloc(cap * sizeof(*nh));
    if (nh == NULL)
      return SBX_ENOMEM;
    memcpy(nh, r->hdrs, r->nhdrs * sizeof(*nh));
    if (r->hdrs != r->hdrs_inline)
      sbx_free(r->hdrs);
    r->hdrs = nh;
    r->hcap = cap;
  }
  char *name = tp__req_strndup(r, n, nl), *value = tp__req_strndup(r, v, vl);
  if (!name || !value)
    return SBX_ENOMEM;
  r->hdrs[r->nhdrs].name = name;
  r->hdrs[r->nhdrs].value = value;
  r->nhdrs++;
  return 0;
}

int tp__req_set_target(struct tp_req *r, const char *m, const char *target, size_t tl) {
  r->method = tp__req_strndup(r, m, strlen(m));
  r->target = tp__req_strndup(r, target, tl);
  if (!r->method || !r->target)
    return SBX_ENOMEM;
  r->is_head = strcmp(m, "HEAD") == 0;
  const char *q = memchr(target, '?', tl);
  size_t pl = q ? (size_t)(q - target) : tl;
  if (pl == 0 || target[0] != '/')
    return SBX_EINVAL; /* only origin-form targets are served */
  r->path = tp__req_decode(r, target, pl, 0);
  if (r->path == NULL)
    return SBX_EINVAL;
  if (q) {
    r->query = tp__req_strndup(r, q + 1, tl - pl - 1);
    if (!r->query)
      return SBX_ENOMEM;
  }
  return 0;
}

void tp__req_route(struct tp_req *r) {
  struct tp_server *s = r->srv;
  if (r->conn && r->conn->shed) { /* past the descriptor budget: 503 whatever it asks */
    r->route_status = 503;
    r->body_limit = s->cfg.limits.default_body_limit;
    return;
  }
  char *q = strchr(r->target, '?');
  if (q) /* the router sees the raw path alone: cut the query off for the time of the match */
    *q = '\0';
  r->route =
      tp__route_match(s, r->method, r->target, r, r->allow, sizeof(r->allow), &r->route_status);
  if (q)
    *q = '?';
  if (r->route) {
    r->body_limit = r->route->body_limit;
    return;
  }
  if (r->route_status == 404) {
    /* The longest static mount prefix that holds the path. */
    size_t best = 0;
    for (size_t i = 0; i < s->nmounts; i++) {
      size_t pl = strlen(s->mounts[i].prefix);
      if (strncmp(r->path, s->mounts[i].prefix, pl) == 0 && pl > best) {
        best = pl;
        r->mount = &s->mounts[i];
      }
    }
    if (r->mount) {
      if (strcmp(r->method, "GET") == 0 || r->is_head) {
        r->route_status = 1;
      } else {
        r->route_status = 405;
        snprintf(r->allow, sizeof(r->allow), "GET, HEAD");
      }
    }
  }
  r->body_limit = s->cfg.limits.default_body_limit;
}

void tp__req_dispatch(struct tp_req *r) {
  struct tp_server *s = r->srv;
  s->stats.requests_total++;
  tp__req_set_state(r, REQ_HANDLING);
  tp__req_ref(r); /* the handler may end the request; keep it until we are done looking */
  if (r->route) {
    r->route->cb(r, r->route->ud);
  } else if (r->route_status == 1) {
    tp__static_serve(r, r->mount);
  } else if (r->route_status == 405) {
    char h[96];
    snprintf(h, sizeof(h), "Allow: %s\r\n", r->allow);
    tp_respond_error_h(r, 405, h, "method_not_allowed", "method not allowed");
  } else if (r->route_status == 503) {
    tp__refuse(r, TP_R_SHED);
  } else if (r->route_status == 404 && s->not_found_cb) {
    s->not_found_cb(r, s->not_found_ud);
  } else if (r->route_status == 404) {
    tp_respond_error(r, 404, "not_found", "no such path");
  } else {
    tp_respond_error(r, 500, "internal", "routing failed");
  }
  if (r->state == REQ_HANDLING && r->refs <= 2 && !r->gone) {
    /* Returned without answering and without holding: answer for it rather than hang. */
    sbx_log(SBX_LOG_WARN, TP_MOD, "handler for %s %s returned without answering", r->method,
            r->path);
    r->auto_answered = 1;
    tp_respond_error(r, 500, "internal", "the handler did not answer");
  }
  tp__req_unref(r);
}

void tp_not_found(struct tp_server *s, tp_handler_cb cb, void *ud) {
  s->not_found_cb = cb;
  s->not_found_ud = ud;
}

/* ---- accessors ------------------------------------------------------------------------------- */

const char *tp_req_path(const struct tp_req *r) { return r->path; }
const char *tp_req_method(const struct tp_req *r) { return r->method; }
const char *tp_req_target(const struct tp_req *r) { return r->target; }
const char *tp_req_peer(const struct tp_req *r) { return r->peer; }
int tp_req_body_arriving(const struct tp_req *r) { return r->state == REQ_BODY_IN; }

const char *tp_req_param(const struct tp_req *r, const char *name) {
  for (size_t i = 0; i < r->nparams; i++)
    if (strcmp(r->params[i].name, name) == 0)
      return r->params[i].value;
  return NULL;
}

const char *tp_req_query(const struct tp_req *r, const char *name) {
  if (r->query == NULL)
    return NULL;
  /* Decoded on demand and cached as a pseudo-parameter so the pointer stays valid. */
  char key[128];
  int kl = snprintf(key, sizeof(key), "?%s", name);
  if (kl < 0 || (size_t)kl >= sizeof(key))
    return NULL;
  const char *hit = tp_req_param(r, key);
  if (hit)
    return hit;
  size_t nl = strlen(name);
  const char *p = r->query;
  while (*p) {
    const char *amp = strchr(p, '&');
    size_t seg = amp ? (size_t)(amp - p) : strlen(p);
    const char *eq = memchr(p, '=', seg);
    size_t kn = eq ? (size_t)(eq - p) : seg;
    char kbuf[128];
    int match = kn < sizeof(kbuf) && tp__pct_decode_to(kbuf, p, kn, 1) == (long)nl &&
                memcmp(kbuf, name, nl) == 0;
    if (match) {
      struct tp_req *mr = (struct tp_req *)r;
      if (mr->nparams == SBX_ARRAY_SIZE(mr->params))
        return NULL;
      char *v = eq ? tp__req_decode(mr, eq + 1, seg - kn - 1, 1) : tp__req_strndup(mr, "", 0);
      char *k = tp__req_strndup(mr, key, (size_t)kl);
      if (v == NULL || k == NULL)
        return NULL;
      mr->params[mr->nparams].name = k;
      mr->params[mr->nparams].value = v;
      mr->nparams++;
      return v;
    }
    if (!amp)
      break;
    p = amp + 1;
  }
  return NULL;
}

const char *tp_req_header(const struct tp_req *r, const char *name) {
  for (size_t i = 0; i < r->nhdrs; i++)
    if (strcasecmp(r->hdrs[i].name, name) == 0)
      return r->hdrs[i].value;
  return NULL;
}

const char *tp_req_body(const struct tp_req *r, size_t *len) {
  if (len)
    *len = r->body.len;
  return r->body.data ? r->body.data : "";
}

void tp_req_hold(struct tp_req *r) { tp__req_ref(r); }
void tp_req_release(struct tp_req *r) { tp__req_unref(r); }

void tp_req_on_close(struct tp_req *r, tp_req_close_cb cb, void *ud) {
  r->close_cb = cb;
  r->close_ud = ud;
}
void tp_req_set_data(struct tp_req *r, void *data) { r->data = data; }
void *tp_req_get_data(const struct tp_req *r) { return r->data; }

void *tp_req_conn_data(const struct tp_req *r) { return r->conn ? r->conn->user : NULL; }

void tp_req_set_conn_data(struct tp_req *r, void *data, void (*free_fn)(void *)) {
  struct tp_conn *c = r->conn;
  if (c == NULL || c->user != NULL) {
    if (data && free_fn)
      free_fn(data);
    return;
  }
  c->user = data;
  c->user_free = free_fn;
}

/* ---- responses ------------------------------------------------------------------------------- */

/* Builds the header block: the caller's headers, per-path headers, Date, Server, and
 * Content-Length when known. */
static int build_headers(struct tp_req *r, struct sbx_buf *b, const char *headers, int64_t clen) {
  struct tp_server *s = r->srv;
  int rc = 0;
  if (headers)
    rc |= sbx_buf_append(b, headers, strlen(headers));
  for (size_t i = 0; i < s->nphdrs; i++)
    if (r->path && strncmp(r->path, s->phdrs[i].prefix, s->phdrs[i].prefix_len) == 0)
      rc |= sbx_buf_append(b, s->phdrs[i].headers, s->phdrs[i].headers_len);
  /* Every answer carries these: plain appends, no printf on the hot path. */
  const char *date = tp__http_date(s);
  rc |= sbx_buf_append(b, "Date: ", 6);
  rc |= sbx_buf_append(b, date, strlen(date));
  rc |= sbx_buf_append(b, "\r\nServer: ", 10);
  rc |= sbx_buf_append(b, s->server_name, s->server_name_len);
  rc |= sbx_buf_append(b, "\r\n", 2);
  if (clen >= 0) {
    char num[24], *e = num + sizeof(num), *p = e;
    unsigned long long v = (unsigned long long)clen;
    do
      *--p = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    rc |= sbx_buf_append(b, "Content-Length: ", 16);
    rc |= sbx_buf_append(b, p, (size_t)(e - p));
    rc |= sbx_buf_append(b, "\r\n", 2);
  }
  return rc ? SBX_ETOOBIG : 0;
}

const char *tp__headers_find(const char *headers, const char *name) {
  size_t nl = strlen(name);
  for (const char *p = headers; p && *p;) {
    if (strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
      p += nl + 1;
      while (*p == ' ' || *p == '\t')
        p++;
      return p;
    }
    p = strstr(p, "\r\n");
    if (p)
      p += 2;
  }
  return NULL;
}

static int64_t header_clen(const char *headers) {
  const char *v = tp__headers_find(headers, "Content-Length");
  return v ? strtoll(v, NULL, 10) : -1;
}

static int send_head(struct tp_req *r, int status, const char *headers, int64_t clen,
                     int has_body) {
  /* The server's scratch buffer: heads are built and handed over (copied) one at a time, and
   * ops->head never builds another one, so no allocation per answer. */
  struct sbx_buf *b = &r->srv->scratch;
  sbx_buf_reset(b);
  int rc = build_headers(r, b, headers, clen);
  if (rc == 0) {
    tp__count_status(r->srv, status);
    r->status = status;
    rc = r->ops->head(r, status, b->data, b->len, clen, has_body);
  }
  if (b->cap > 16 * 1024) /* a rare big head: do not keep its memory */
    sbx_buf_free(b);
  if (rc != 0 && r->conn) {
    /* No memory for the head: the answer cannot be framed; the connection goes (the handler
     * learns it through on_close, as for any peer that left). */
    tp__conn_close(r->conn, "cannot answer: out of memory");
  }
  return rc;
}

static int answer_check(struct tp_req *r) {
  if (r->state == REQ_RESPONDING || r->state == REQ_DONE)
    return SBX_ESTATE;
  if (r->gone || r->conn == NULL) {
    if (r->state != REQ_DONE)
      tp__req_set_state(r, REQ_DONE);
    return SBX_ECLOSED;
  }
  return 0;
}

static int finish(struct tp_req *r) {
  tp__req_set_state(r, REQ_DONE);
  return r->ops->end(r); /* may drop the peer's reference */
}

int tp_respond(struct tp_req *r, int status, const char *headers, const void *body, size_t len) {
  int rc = answer_check(r);
  if (rc != 0)
    return rc;
  int no_body = r->is_head || status == 204 || status == 304 || (status >= 100 && status < 200);
  tp__req_set_state(r, REQ_RESPONDING);
  rc = send_head(r, status, headers, (status == 204 || status == 304) ? -1 : (int64_t)len,
                 !no_body && len > 0);
  if (rc == 0 && !no_body && len > 0)
    rc = r->ops->data(r, body, len);
  int rc2 = finish(r);
  return rc ? rc : rc2;
}

int tp_respond_error_h(struct tp_req *r, int status, const char *headers, const char *code,
                       const char *message) {
  struct sbx_buf b;
  sbx_buf_init(&b, 8192);
  /* code and message are ours, but escape quotes and backslashes anyway */
  int rc = sbx_buf_appendf(&b, "{\"error\":{\"code\":\"%s\",\"message\":\"", code);
  for (const char *p = message; rc == 0 && *p; p++) {
    if (*p == '"' || *p == '\\')
      rc = sbx_buf_appendf(&b, "\\%c", *p);
    else if ((unsigned char)*p < 0x20)
      rc = sbx_buf_appendf(&b, "\\u%04x", *p);
    else
      rc = sbx_buf_append(&b, p, 1);
  }
  if (rc == 0)
    rc = sbx_buf_append(&b, "\"}}", 3);
  char h[256];
  int hl = snprintf(h, sizeof(h), "%sContent-Type: application/json\r\n", headers ? headers : "");
  if (rc == 0)
    rc = hl > 0 && (size_t)hl < sizeof(h) ? tp_respond(r, status, h, b.data, b.len) : SBX_ETOOBIG;
  sbx_buf_free(&b);
  return rc;
}

int tp_respond_error(struct tp_req *r, int status, const char *code, const char *message) {
  return tp_respond_error_h(r, status, NULL, code, message);
}

int tp_stream_start(struct tp_req *r, int status, const char *headers) {
  int rc = answer_check(r);
  if (rc != 0)
    return rc;
  tp__req_set_state(r, REQ_RESPONDING);
  /* A Content-Length the caller gives stays in its headers (no second one, no chunking). */
  rc = send_head(r, status, headers, header_clen(headers) >= 0 ? -2 : -1, !r->is_head);
  if (rc == 0)
    rc = r->ops->data(r, "", 0); /* the head goes out now, not with the first piece */
  if (r->conn)
    r->last_write_ms = uv_now(r->srv->loop);
  return rc;
}

int tp_stream_write(struct tp_req *r, const void *data, size_t len) {
  if (r->state != REQ_RESPONDING)
    return r->state == REQ_DONE ? SBX_ECLOSED : SBX_ESTATE;
  if (r->gone || r->conn == NULL)
    return SBX_ECLOSED;
  size_t q = r->ops->queued(r);
  if (q > 0 && q + len > r->srv->cfg.limits.sse_queue_bytes) {
    r->blocked = 1;
    return SBX_EAGAIN;
  }
  if (r->is_head || len == 0)
    return 0;
  r->last_write_ms = uv_now(r->srv->loop);
  return r->ops->data(r, data, len);
}

int tp_stream_end(struct tp_req *r) {
  if (r->state != REQ_RESPONDING)
    return r->state == REQ_DONE ? SBX_ECLOSED : SBX_ESTATE;
  sse_forget(r);
  if (r->gone || r->conn == NULL) {
    tp__req_set_state(r, REQ_DONE);
    return SBX_ECLOSED;
  }
  return finish(r);
}

void tp_stream_on_drain(struct tp_req *r, tp_drain_cb cb, void *ud) {
  r->drain_cb = cb;
  r->drain_ud = ud;
}

/* Sends the next file chunks while the peer takes them: ops->room says how much (the queue
 * below the low-water mark; for HTTP/2 also the flow-control window and the connection's
 * bounds), so a peer that does not read costs no buffer. */
static void file_pump(struct tp_req *r) {
  char *buf = NULL;
  while (r->file && r->conn) {
    if (r->file_left == 0) {
      file_drop(r);
      finish(r);
      break;
    }
    size_t room = r->ops->room(r);
    if (room == 0)
      break; /* the next drain goes on */
    size_t want = (size_t)SBX_MIN((uint64_t)SBX_MIN(room, TP_FILE_CHUNK), r->file_left);
    if (buf == NULL && (buf = sbx_malloc(TP_FILE_CHUNK)) == NULL)
      break; /* try again on the next drain */
    ssize_t n = pread(r->file->fd, buf, want, (off_t)r->file_off);
    if (n <= 0) {
      /* The file shrank or failed under us: the length promised cannot be kept; cut. */
      sbx_log(SBX_LOG_WARN, TP_MOD, "file read failed mid-response: %s",
              n < 0 ? strerror(errno) : "short file");
      struct tp_conn *c = r->conn;
      file_drop(r);
      tp__conn_close(c, "file read failed");
      break;
    }
    r->file_off += (uint64_t)n;
    r->file_left -= (uint64_t)n;
    if (r->ops->data(r, buf, (size_t)n) != 0)
      break;
  }
  sbx_free(buf);
}

int tp__req_wants_drain(const struct tp_req *r) { return r->file != NULL || r->blocked; }

void tp__req_drained(struct tp_req *r) {
  if (r->file) {
    tp__req_ref(r);
    file_pump(r);
    tp__req_unref(r);
    return;
  }
  if (r->blocked && r->drain_cb && r->ops->queued(r) <= r->srv->cfg.limits.sse_queue_bytes / 2) {
    r->blocked = 0;
    tp__req_ref(r);
    r->drain_cb(r, r->drain_ud);
    tp__req_unref(r);
  }
}

int tp__respond_file_at(struct tp_req *r, struct tp_file *f, int status, const char *headers,
                        uint64_t off, uint64_t len) {
  int rc = answer_check(r);
  if (rc != 0) {
    tp__file_unref(f);
    return rc;
  }
  tp__req_set_state(r, REQ_RESPONDING);
  rc = send_head(r, status, headers, (int64_t)len, !r->is_head && len > 0);
  if (rc != 0 || r->is_head || len == 0 || r->conn == NULL) {
    tp__file_unref(f);
    int rc2 = finish(r);
    return rc ? rc : rc2;
  }
  r->file = f;
  r->file_off = off;
  r->file_left = len;
  tp__req_ref(r);
  file_pump(r);
  tp__req_unref(r);
  return 0;
}

/* Parses "bytes=a-b" against `size`: 1 one range (start/len set), 0 no usable range (serve all),
 * -1 unsatisfiable (416). */
int tp__parse_range(const char *h, uint64_t size, uint64_t *start, uint64_t *len) {
  if (h == NULL || strncmp(h, "bytes=", 6) != 0)
    return 0;
  const char *p = h + 6;
  if (strchr(p, ','))
    return 0; /* several ranges: answer with the whole file */
  char *end;
  if (*p == '-') {
    if (p[1] < '0' || p[1] > '9')
      return 0;
    unsigned long long n = strtoull(p + 1, &end, 10);
    if (*end != '\0')
      return 0;
    if (n == 0 || size == 0)
      return -1;
    if (n > size)
      n = size;
    *start = size - n;
    *len = n;
    return 1;
  }
  if (*p < '0' || *p > '9')
    return 0;
  unsigned long long a = strtoull(p, &end, 10);
  if (*end != '-')
    return 0;
  p = end + 1;
  unsigned long long b;
  if (*p == '\0') {
    b = size ? size - 1 : 0;
  } else {
    if (*p < '0' || *p > '9')
      return 0;
    b = strtoull(p, &end, 10);
    if (*end != '\0' || b < a)
      return 0;
  }
  if (a >= size)
    return -1;
  if (b >= size)
    b = size - 1;
  *start = a;
  *len = b - a + 1;
  return 1;
}

int tp_respond_file(struct tp_req *r, const char *path, const char *content_type,
                    const char *extra_headers, int allow_range) {
  if (r->state == REQ_RESPONDING || r->state == REQ_DONE)
    return SBX_ESTATE;
  struct tp_file *f;
  struct stat st;
  char etag[64];
  const char *small;
  int rc = tp__file_open(r->srv, path, &f, &st, etag, &small);
  if (rc == SBX_EBUSY) {
    tp__refuse(r, TP_R_BUSY_FILES);
    return 0;
  }
  if (rc != 0)
    return rc;
  uint64_t size = (uint64_t)st.st_size, start = 0, len = size;
  int status = 200;
  struct sbx_buf h;
  sbx_buf_init(&h, 16 * 1024);
  rc = 0;
  if (content_type)
    rc |= sbx_buf_appendf(&h, "Content-Type: %s\r\n", content_type);
  if (extra_headers)
    rc |= sbx_buf_append(&h, extra_headers, strlen(extra_headers));
  if (allow_range) {
    rc |= sbx_buf_appendf(&h, "Accept-Ranges: bytes\r\n");
    int pr = tp__parse_range(tp_req_header(r, "Range"), size, &start, &len);
    if (pr < 0) {
      tp__file_unref(f);
      rc |= sbx_buf_appendf(&h, "Content-Range: bytes */%llu\r\n", (unsigned long long)size);
      rc = rc ? SBX_ENOMEM : tp_respond(r, 416, h.data, NULL, 0);
      sbx_buf_free(&h);
      return rc;
    }
    if (pr > 0) {
      status = 206;
      rc |=
          sbx_buf_appendf(&h, "Content-Range: bytes %llu-%llu/%llu\r\n", (unsigned long long)start,
                          (unsigned long long)(start + len - 1), (unsigned long long)size);
    }
  }
  if (rc != 0) {
    tp__file_unref(f);
    sbx_buf_free(&h);
    return SBX_ENOMEM;
  }
  if (small) { /* a small file is in the cache's memory: one copy, no read */
    rc = tp_respond(r, status, h.data, small + start, (size_t)len);
    tp__file_unref(f);
  } else {
    rc = tp__respond_file_at(r, f, status, h.data, start, len);
  }
  sbx_buf_free(&h);
  return rc;
}

/* ---- Server-Sent Events ---------------------------------------------------------------------- */

static size_t next_of(const char *data, size_t from, size_t len, char c) {
  const char *q = from < len ? memchr(data + from, c, len - from) : NULL;
  return q ? (size_t)(q - data) : len;
}

int tp__sse_encode(struct sbx_buf *buf, const char *event, const char *id, const char *data,
                   size_t len) {
  size_t mark = buf->len;
  int rc = 0;
  /* A field value with a line break would end the field early: refuse it. */
  if ((id && strpbrk(id, "\r\n")) || (event && strpbrk(event, "\r\n")))
    return SBX_EINVAL;
  if (id) { /* plain appends: one event per page per run goes through here */
    rc |= sbx_buf_append(buf, "id: ", 4);
    rc |= sbx_buf_append(buf, id, strlen(id));
    rc |= sbx_buf_append(buf, "\n", 1);
  }
  if (event) {
    rc |= sbx_buf_append(buf, "event: ", 7);
    rc |= sbx_buf_append(buf, event, strlen(event));
    rc |= sbx_buf_append(buf, "\n", 1);
  }
  /* One data: line per line; \r\n, \r and \n all end a line (the SSE grammar). */
  size_t i = 0;
  /* The next '\n' and '\r' at or after i (len when none), found with memchr and kept until
   * passed: an event is mostly one long line of JSON. */
  size_t nl = next_of(data, 0, len, '\n'), cr = next_of(data, 0, len, '\r');
  for (;;) {
    if (nl < i)
      nl = next_of(data, i, len, '\n');
    if (cr < i)
      cr = next_of(data, i, len, '\r');
    size_t j = SBX_MIN(nl, cr);
    rc |= sbx_buf_append(buf, "data: ", 6);
    rc |= sbx_buf_append(buf, data + i, j - i);
    rc |= sbx_buf_append(buf, "\n", 1);
    if (j >= len)
      break;
    if (data[j] == '\r' && j + 1 < len && data[j + 1] == '\n')
      j++;
    i = j + 1;
  }
  rc |= sbx_buf_append(buf, "\n", 1);
  if (rc != 0) {
    buf->len = mark;
    if (buf->data)
      buf->data[mark] = '\0';
    return SBX_ETOOBIG;
  }
  return 0;
}

#define SSE_OPENING ": open\n\n"

int tp_sse_start(struct tp_req *r, const char *extra_headers, uint64_t heartbeat_ms) {
  struct sbx_buf h;
  sbx_buf_init(&h, 16 * 1024);
  /* The caller's Cache-Control, when it gives one, is the only one. */
  int rc = sbx_buf_appendf(
      &h, "Content-Type: text/event-stream\r\n%sX-Accel-Buffering: no\r\n",
      tp__headers_find(extra_headers, "Cache-Control") ? "" : "Cache-Control: no-cache\r\n");
  if (rc == 0 && extra_headers)
    rc = sbx_buf_append(&h, extra_headers, strlen(extra_headers));
  if (rc == 0)
    rc = tp_stream_start(r, 200, h.data);
  sbx_buf_free(&h);
  /* The head goes with a first line of body, a comment every SSE parser skips: Firefox's fetch()
   * resolves only once body bytes arrive, so a stream with no event yet would look unanswered
   * until its first heartbeat. */
  if (rc == 0)
    rc = tp_stream_write(r, SSE_OPENING, sizeof SSE_OPENING - 1);
  if (rc != 0)
    return rc;
  tp_req_hold(r);
  r->sse = 1;
  r->hb_ms = heartbeat_ms;
  sbx_list_insert_tail(&r->srv->sse_reqs, &r->sse_node);
  r->srv->stats.sse_streams_open++;
  tp__cron_want(r->srv, heartbeat_ms);
  return 0;
}

int tp_sse_send(struct tp_req *r, const char *event, const char *id, const char *data, size_t len) {
  if (r->gone || r->conn == NULL)
    return SBX_ECLOSED;
  if (!r->sse)
    return r->state == REQ_DONE ? SBX_ECLOSED : SBX_ESTATE;
  /* Encoded in the server's scratch buffer (as heads are: nothing below builds another), with
   * the event's own limit for the time of the call: no allocation per event. */
  struct sbx_buf *b = &r->srv->scratch;
  size_t limit = b->limit;
  sbx_buf_reset(b);
  b->limit = r->srv->cfg.limits.sse_queue_bytes + 4096;
  int rc = tp__sse_encode(b, event, id, data ? data : "", data ? len : 0);
  if (rc == 0)
    rc = tp_stream_write(r, b->data, b->len); /* one event, one write */
  b->limit = limit;
  if (b->cap > 16 * 1024) /* a rare big event: do not keep its memory */
    sbx_buf_free(b);
  return rc;
}
