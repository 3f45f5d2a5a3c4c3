/* http_client.c -- libcurl's multi interface on the libuv loop (http_client.h says what a caller
 * gets).  curl does the HTTP, TLS and timeouts of connecting and of the whole transfer; this file
 * connects it to the loop: CURLMOPT_SOCKETFUNCTION asks for a uv_poll_t per socket,
 * CURLMOPT_TIMERFUNCTION for the one uv_timer_t, and both call curl_multi_socket_action.  The stall
 * bound (no byte for stall_ms) is a timer of the transfer, restarted by every byte: curl's own
 * low-speed check averages over seconds and could not tell a stall from a slow start.
 *
 * A transfer's life:
 *
 *   start ──▶ ACTIVE ──on_body: SBX_EAGAIN──▶ PAUSED ──tp_http_resume──▶ ACTIVE
 *   ACTIVE, PAUSED ──curl done / stall / cancel──▶ ENDED (final: on_done unless cancelled; freed)
 *
 *   from            to      step
 *   (start)         ACTIVE  tp_http_start
 *   ACTIVE          PAUSED  on_write, the caller could not take a piece
 *   PAUSED          ACTIVE  tp_http_resume
 *   ACTIVE, PAUSED  ENDED   xfer_end (curl's message, the stall timer), tp_http_cancel
 *
 * Inside curl (curl_multi_socket_action, curl_easy_pause) a transfer is never removed: a cancel
 * there marks it ENDED and makes its callbacks refuse, and it is freed when curl hands it back.
 *
 * What it does not do: look at what it carries (the caller parses), or log a header.
 */
#include "http_client.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fsm.h"

#define HC_CONNECT_MS 10000

struct tp_http_client {
  uv_loop_t *loop;
  CURLM *multi;
  uv_timer_t *timer; /* freed in its close callback */
  struct sbx_list xfers;
  int in_curl; /* inside curl: transfers are not removed */
};

struct hc_sock {
  uv_poll_t poll;
  curl_socket_t fd;
  struct tp_http_client *hc;
};

enum xfer_state { XFER_ACTIVE = 0, XFER_PAUSED, XFER_ENDED, XFER__COUNT };

struct tp_http_xfer {
  struct sbx_list link;
  struct tp_http_client *hc;
  enum xfer_state state; /* written by xfer_set_state() only */
  CURL *easy;
  struct curl_slist *headers;
  char *url, *body;
  struct tp_http_cbs cbs;
  void *ud;
  long (*read_body)(void *ud, char *p, size_t cap);
  uv_timer_t *stall; /* NULL without a stall bound; freed in its close callback */
  uint64_t stall_ms;
  int status;    /* the final head's status (0: none yet) */
  int head_told; /* on_head was called */
  int in_final;  /* the head being received is the final one (not a 1xx) */
  int cancelled; /* tp_http_cancel: no callback any more */
  int aborted;   /* a callback asked to stop */
  int stalled;   /* the stall timer ended it */
  char id[24];   /* for the state trace */
};

static const char *const xfer_state_names[XFER__COUNT] = {"active", "paused", "ended"};
static const uint32_t from[XFER__COUNT] = {
    [XFER_ACTIVE] = SBX_FSM_BIT(XFER_PAUSED),
    [XFER_PAUSED] = SBX_FSM_BIT(XFER_ACTIVE),
    [XFER_ENDED] = SBX_FSM_BIT(XFER_ACTIVE) | SBX_FSM_BIT(XFER_PAUSED),
};
static const struct sbx_fsm xfer_fsm = SBX_FSM("tp", "http transfer", xfer_state_names, from, NULL);

#define xfer_set_state(x, to) xfer_set_state_((x), (to), __FILE__, __LINE__)

/* The one writer of x->state. */
static int xfer_set_state_(struct tp_http_xfer *x, enum xfer_state to, const char *file, int line) {
  int rc = sbx_fsm_step(&xfer_fsm, x->state, to, x->id, file, line);
  if (rc == 0)
    x->state = to;
  return rc;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static int curl_ok;
static void curl_init(void) { curl_ok = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK; }

static void on_closed_free(uv_handle_t *h) { sbx_free(h); }

const char *tp_http_end_name(enum tp_http_end e) {
  static const char *const names[] = {"ok",        "unreachable", "stalled",
                                      "timed out", "broken",      "aborted"};
  return (unsigned)e < SBX_ARRAY_SIZE(names) ? names[e] : "?";
}

/* ---- libuv <-> curl -------------------------------------------------------------------------- */

static void check_done(struct tp_http_client *hc);

static void socket_action(struct tp_http_client *hc, curl_socket_t fd, int flags) {
  int running = 0;
  hc->in_curl++;
  curl_multi_socket_action(hc->multi, fd, flags, &running);
  hc->in_curl--;
  check_done(hc);
}

static void on_poll(uv_poll_t *h, int status, int events) {
  struct hc_sock *s = h->data;
  int flags = status < 0 ? CURL_CSELECT_ERR : 0;
  if (events & UV_READABLE)
    flags |= CURL_CSELECT_IN;
  if (events & UV_WRITABLE)
    flags |= CURL_CSELECT_OUT;
  socket_action(s->hc, s->fd, flags);
}

static int on_curl_socket(CURL *e, curl_socket_t fd, int what, void *userp, void *socketp) {
  (void)e;
  struct tp_http_client *hc = userp;
  struct hc_sock *s = socketp;
  if (what == CURL_POLL_REMOVE) {
    if (s) {
      uv_poll_stop(&s->poll);
      curl_multi_assign(hc->multi, fd, NULL);
      uv_close((uv_handle_t *)&s->poll, on_closed_free);
    }
    return 0;
  }
  if (s == NULL) {
    if ((s = sbx_calloc(1, sizeof *s)) == NULL)
      return -1;
    if (uv_poll_init_socket(hc->loop, &s->poll, fd) != 0) {
      sbx_free(s);
      return -1;
    }
    s->fd = fd;
    s->hc = hc;
    s->poll.data = s;
    curl_multi_assign(hc->multi, fd, s);
  }
  int ev = (what & CURL_POLL_IN ? UV_READABLE : 0) | (what & CURL_POLL_OUT ? UV_WRITABLE : 0);
  uv_poll_start(&s->poll, ev, on_poll);
  return 0;
}

static void on_timer(uv_timer_t *t) { socket_action(t->data, CURL_SOCKET_TIMEOUT, 0); }

static int on_curl_timer(CURLM *m, long timeout_ms, void *userp) {
  (void)m;
  struct tp_http_client *hc = userp;
  if (timeout_ms < 0)
    uv_timer_stop(hc->timer);
  else
    uv_timer_start(hc->timer, on_timer, (uint64_t)timeout_ms, 0);
  return 0;
}

/* ---- transfers ------------------------------------------------------------------------------- */

static void xfer_free(struct tp_http_xfer *x) {
  if (x->easy) {
    curl_multi_remove_handle(x->hc->multi, x->easy);
    curl_easy_cleanup(x->easy);
  }
  if (x->stall) {
    uv_timer_stop(x->stall);
    uv_close((uv_handle_t *)x->stall, on_closed_free);
  }
  curl_slist_free_all(x->headers);
  sbx_free(x->url);
  sbx_free(x->body);
  sbx_list_remove(&x->link);
  sbx_free(x);
}

static void on_stall(uv_timer_t *t);

/* A byte came (or the transfer goes on after a pause): the stall bound counts from now. */
static void stall_restart(struct tp_http_xfer *x) {
  if (x->stall && x->state == XFER_ACTIVE)
    uv_timer_start(x->stall, on_stall, x->stall_ms, 0);
}

/* The transfer is over: its one on_done (unless cancelled), then freed.  Outside curl only. */
static void xfer_end(struct tp_http_xfer *x, enum tp_http_end end, const char *why) {
  if (x->state != XFER_ENDED)
    xfer_set_state(x, XFER_ENDED);
  if (!x->cancelled && x->cbs.on_done)
    x->cbs.on_done(x->ud, end, x->status, why);
  xfer_free(x);
}

/* curl's result, as the caller is told it. */
static enum tp_http_end classify(struct tp_http_xfer *x, CURLcode res) {
  if (x->stalled)
    return TP_HTTP_STALLED;
  if (x->aborted)
    return TP_HTTP_ABORTED;
  curl_off_t connected = 0;
  curl_easy_getinfo(x->easy, CURLINFO_CONNECT_TIME_T, &connected);
  switch (res) {
  case CURLE_OK:
    return TP_HTTP_OK;
  case CURLE_COULDNT_RESOLVE_HOST:
  case CURLE_COULDNT_RESOLVE_PROXY:
  case CURLE_COULDNT_CONNECT:
  case CURLE_SSL_CONNECT_ERROR:
  case CURLE_PEER_FAILED_VERIFICATION:
  case CURLE_SSL_CERTPROBLEM:
  case CURLE_SSL_CIPHER:
  case CURLE_SSL_CACERT_BADFILE:
  case CURLE_UNSUPPORTED_PROTOCOL:
  case CURLE_URL_MALFORMAT:
    return TP_HTTP_UNREACHABLE;
  case CURLE_OPERATION_TIMEDOUT:
    return connected > 0 ? TP_HTTP_TIMEDOUT : TP_HTTP_UNREACHABLE;
  default:
    return connected > 0 || x->status ? TP_HTTP_BROKEN : TP_HTTP_UNREACHABLE;
  }
}

static void check_done(struct tp_http_client *hc) {
  if (hc->in_curl)
    return;
  struct sbx_list *it, *tmp;
  SBX_LIST_FOREACH_SAFE(it, tmp, &hc->xfers) { /* cancelled inside curl: freed now */
    struct tp_http_xfer *x = SBX_CONTAINER_OF(it, struct tp_http_xfer, link);
    if (x->cancelled && x->state == XFER_ENDED)
      xfer_free(x);
  }
  CURLMsg *m;
  int left;
  while ((m = curl_multi_info_read(hc->multi, &left)) != NULL) {
    if (m->msg != CURLMSG_DONE)
      continue;
    struct tp_http_xfer *x = NULL;
    curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&x);
    CURLcode res = m->data.result;
    xfer_end(x, classify(x, res), res == CURLE_OK ? "" : curl_easy_strerror(res));
  }
}

static void on_stall(uv_timer_t *t) {
  struct tp_http_xfer *x = t->data;
  x->stalled = 1;
  char why[64];
  snprintf(why, sizeof why, "no byte received for %llu ms", (unsigned long long)x->stall_ms);
  xfer_end(x, TP_HTTP_STALLED, why);
}

/* Each header line; the blank line that ends a final (not 1xx) head tells the caller. */
static size_t on_header(char *p, size_t size, size_t n, void *ud) {
  struct tp_http_xfer *x = ud;
  size_t len = size * n;
  if (x->state == XFER_ENDED)
    return 0;
  stall_restart(x);
  if (len >= 5 && memcmp(p, "HTTP/", 5) == 0) { /* a status line: a 1xx's head, or the final */
    const char *sp = memchr(p, ' ', len);
    x->in_final = sp != NULL && atoi(sp + 1) >= 200;
    return len;
  }
  if (len > 2 || (p[0] != '\r' && p[0] != '\n')) {
    if (x->in_final && !x->head_told && x->cbs.on_header && x->cbs.on_header(x->ud, p, len) != 0) {
      x->aborted = 1;
      return 0;
    }
    return len;
  }
  long code = 0;
  curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &code);
  if (code < 200)
    return len; /* 1xx: another head follows */
  x->status = (int)code;
  if (!x->head_told) {
    x->head_told = 1;
    char *ct = NULL;
    curl_easy_getinfo(x->easy, CURLINFO_CONTENT_TYPE, &ct);
    if (x->cbs.on_head && x->cbs.on_head(x->ud, x->status, ct) != 0) {
      x->aborted = 1;
      return 0;
    }
  }
  return len;
}

static size_t on_write(char *p, size_t size, size_t n, void *ud) {
  struct tp_http_xfer *x = ud;
  size_t len = size * n;
  if (x->state == XFER_ENDED)
    return 0;
  stall_restart(x);
  int rc = x->cbs.on_body ? x->cbs.on_body(x->ud, p, len) : 0;
  if (rc == SBX_EAGAIN) {
    xfer_set_state(x, XFER_PAUSED);
    if (x->stall)
      uv_timer_stop(x->stall); /* paused by us: not a stall of the server */
    return CURL_WRITEFUNC_PAUSE;
  }
  if (rc != 0 || x->state == XFER_ENDED) { /* refused, or cancelled in the callback */
    x->aborted = 1;
    return 0;
  }
  return len;
}

static size_t on_read(char *p, size_t size, size_t n, void *ud) {
  struct tp_http_xfer *x = ud;
  if (x->state == XFER_ENDED)
    return CURL_READFUNC_ABORT;
  long r = x->read_body(x->ud, p, size * n);
  if (r < 0) {
    x->aborted = 1;
    return CURL_READFUNC_ABORT;
  }
  return (size_t)r;
}

struct tp_http_xfer *tp_http_start(struct tp_http_client *hc, const struct tp_http_request *rq,
                                   const struct tp_http_cbs *cbs, void *ud) {
  static uint64_t next_id;
  if (rq->url == NULL || rq->method == NULL)
    return NULL;
  struct tp_http_xfer *x = sbx_calloc(1, sizeof *x);
  if (x == NULL)
    return NULL;
  SBX_LIST_INIT(&x->link);
  x->hc = hc;
  x->cbs = *cbs;
  x->ud = ud;
  x->read_body = rq->read_body;
  x->stall_ms = rq->stall_ms;
  snprintf(x->id, sizeof x->id, "%llu", (unsigned long long)++next_id);
  if ((x->url = sbx_strdup(rq->url)) == NULL || (x->easy = curl_easy_init()) == NULL)
    goto fail;
  if (rq->body && (x->body = sbx_malloc(rq->body_len + 1)) == NULL)
    goto fail;
  for (size_t i = 0; i < rq->n_headers; i++) {
    struct curl_slist *l = curl_slist_append(x->headers, rq->headers[i]);
    if (l == NULL)
      goto fail;
    x->headers = l;
  }
  struct curl_slist *l = curl_slist_append(x->headers, "Expect:"); /* no 100-continue wait */
  if (l == NULL)
    goto fail;
  x->headers = l;
  if (rq->stall_ms) {
    if ((x->stall = sbx_malloc(sizeof *x->stall)) == NULL)
      goto fail;
    uv_timer_init(hc->loop, x->stall);
    x->stall->data = x;
  }
  CURL *e = x->easy;
  curl_easy_setopt(e, CURLOPT_URL, x->url);
  curl_easy_setopt(e, CURLOPT_PRIVATE, x);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
  if (rq->ca_file)
    curl_easy_setopt(e, CURLOPT_CAINFO, rq->ca_file);
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                   (long)(rq->connect_ms ? rq->connect_ms : HC_CONNECT_MS));
  if (rq->total_ms)
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)rq->total_ms);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->headers);
  if (x->read_body) { /* read as it goes out, the size known */
    curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(e, CURLOPT_READFUNCTION, on_read);
    curl_easy_setopt(e, CURLOPT_READDATA, x);
    curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, (curl_off_t)rq->body_len);
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, rq->method);
  } else if (strcmp(rq->method, "GET") == 0) {
    curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
  } else if (strcmp(rq->method, "HEAD") == 0) {
    curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
  } else {
    if (x->body)
      memcpy(x->body, rq->body, rq->body_len);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, x->body ? x->body : "");
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(x->body ? rq->body_len : 0));
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, rq->method);
  }
  sbx_list_insert_tail(&hc->xfers, &x->link);
  if (curl_multi_add_handle(hc->multi, e) != CURLM_OK) {
    curl_easy_cleanup(x->easy);
    x->easy = NULL;
    goto fail;
  }
  SBX_TRACE_STATE("tp", "http transfer", x->id, "(start)", "active");
  stall_restart(x);
  return x;
fail:
  xfer_free(x);
  return NULL;
}

void tp_http_cancel(struct tp_http_xfer *x) {
  if (x == NULL || x->cancelled)
    return;
  x->cancelled = 1;
  if (x->state == XFER_ENDED)
    return; /* in its own on_done: freed after it */
  xfer_set_state(x, XFER_ENDED);
  if (x->hc->in_curl) { /* its callbacks now refuse; freed when curl hands it back */
    if (x->stall)
      uv_timer_stop(x->stall);
    return;
  }
  xfer_free(x);
}

void tp_http_resume(struct tp_http_xfer *x) {
  if (x == NULL || x->state != XFER_PAUSED)
    return;
  xfer_set_state(x, XFER_ACTIVE);
  stall_restart(x);
  struct tp_http_client *hc = x->hc;
  hc->in_curl++;
  curl_easy_pause(x->easy, CURLPAUSE_CONT); /* may hand the held piece at once */
  hc->in_curl--;
  check_done(hc);
}

size_t tp_http_active(const struct tp_http_client *hc) {
  size_t n = 0;
  const struct sbx_list *it;
  SBX_LIST_FOREACH(it, &hc->xfers)
  n++;
  return n;
}

int tp_http_client_new(uv_loop_t *loop, struct tp_http_client **out, struct sbx_error *err) {
  pthread_once(&curl_once, curl_init);
  if (!curl_ok)
    return sbx_error_set(err, SBX_EIO, "libcurl could not be initialised");
  struct tp_http_client *hc = sbx_calloc(1, sizeof *hc);
  if (hc == NULL || (hc->timer = sbx_malloc(sizeof *hc->timer)) == NULL ||
      (hc->multi = curl_multi_init()) == NULL) {
    if (hc)
      sbx_free(hc->timer);
    sbx_free(hc);
    return sbx_error_set(err, SBX_ENOMEM, "http client: out of memory");
  }
  hc->loop = loop;
  SBX_LIST_INIT(&hc->xfers);
  uv_timer_init(loop, hc->timer);
  hc->timer->data = hc;
  curl_multi_setopt(hc->multi, CURLMOPT_SOCKETFUNCTION, on_curl_socket);
  curl_multi_setopt(hc->multi, CURLMOPT_SOCKETDATA, hc);
  curl_multi_setopt(hc->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer);
  curl_multi_setopt(hc->multi, CURLMOPT_TIMERDATA, hc);
  *out = hc;
  return 0;
}

void tp_http_client_free(struct tp_http_client *hc) {
  if (hc == NULL)
    return;
  struct sbx_list *it, *tmp;
  SBX_LIST_FOREACH_SAFE(it, tmp, &hc->xfers) {
    struct tp_http_xfer *x = SBX_CONTAINER_OF(it, struct tp_http_xfer, link);
    x->cancelled = 1;
    xfer_free(x);
  }
  curl_multi_cleanup(hc->multi); /* its sockets' REMOVE callbacks close their polls */
  uv_close((uv_handle_t *)hc->timer, on_closed_free);
  sbx_free(hc);
}
