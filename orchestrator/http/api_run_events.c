/* api_run_events.c -- a run's own event stream, for backends (and the chat's pages).
 *
 * GET /v1/runs/{run}/events   (SSE; API key or the chat's page token; Last-Event-ID resumes)
 *   A live run: its events as they happen (live.c's run-event API: `state`, `output`, `display`,
 *   `input_request`, and last `end` with the run object), each with the run's event number as its
 *   `id:`; after `end` the stream ends.  A new stream (no Last-Event-ID) starts with the run as it
 *   is: its state, then what it printed so far; one that resumes gets what it missed.  A run that
 *   has ended answers its `end` at once and ends.
 * Falling behind (the stream's queue full) the stream stops taking events and, once it drains,
 * follows the run again from the last event it sent (the run's log, or the run as it is then);
 * an `end` that comes meanwhile is kept and sent then.  What it does not do: make the events
 * (live.c) or hold the run (the domain frees it after `end`).
 */
#include "api.h"
#include "transport.h"

#include <stdlib.h>
#include <string.h>

#define HEARTBEAT_MS 15000

struct rstream {
  struct orch *o;
  struct tp_req *req; /* held until the stream ends */
  struct orch_watch *watch;
  char run_id[STORE_ID_LEN + 1];
  int64_t last_seq; /* the last event sent (-1: none yet) */
  int lagging;      /* a send hit the queue limit: follow again on drain */
  char *end;        /* `end` that came while lagging (owned), sent on drain */
  size_t end_len;
};

static void rstream_free(struct rstream *s) {
  orch__run_unwatch(s->watch);
  tp_req_on_close(s->req, NULL, NULL);
  tp_req_release(s->req);
  sbx_free(s->end);
  sbx_free(s);
}

/* Sends `end` (its run object) and ends the stream; on a full queue, waits for the drain. */
static void finish(struct rstream *s, const char *data, size_t len, int64_t seq);
static void on_drain(struct tp_req *req, void *ud);

static int send_ev(struct rstream *s, const char *type, int64_t seq, const char *data, size_t len) {
  char id[24];
  snprintf(id, sizeof(id), "%lld", (long long)seq);
  int rc = tp_sse_send(s->req, type, id, data, len);
  if (rc == 0)
    s->last_seq = seq;
  else if (rc == SBX_EAGAIN && !s->lagging) {
    s->lagging = 1;
    tp_stream_on_drain(s->req, on_drain, s);
  }
  return rc;
}

static void on_run_event(void *ud, const struct orch_run_event *ev) {
  struct rstream *s = ud;
  if (ev->kind == ORCH_RUN_EV_END) {
    s->watch = NULL; /* over: the domain frees it */
    finish(s, ev->data, ev->len, ev->seq);
    return;
  }
  if (!s->lagging)
    send_ev(s, ev->type, ev->seq, ev->data, ev->len);
}

static void finish(struct rstream *s, const char *data, size_t len, int64_t seq) {
  if (!s->lagging && send_ev(s, "end", seq, data, len) != SBX_EAGAIN) {
    tp_stream_end(s->req);
    rstream_free(s);
    return;
  }
  if (s->end == NULL) { /* sent once the stream drains */
    s->end = sbx_strndup(data, len);
    s->end_len = len;
    s->last_seq = seq;
  }
  if (s->end == NULL) { /* out of memory: the stream ends without it (the client reads the run) */
    tp_stream_end(s->req);
    rstream_free(s);
  }
}

/* The stream drained: the kept `end`, or follow the run again from the last event sent. */
static void on_drain(struct tp_req *req, void *ud) {
  (void)req;
  struct rstream *s = ud;
  s->lagging = 0;
  if (s->end != NULL) {
    char *end = s->end;
    s->end = NULL;
    finish(s, end, s->end_len, s->last_seq);
    sbx_free(end);
    return;
  }
  struct orch_run *run = orch__map_get(&s->o->runs, s->run_id);
  orch__run_unwatch(s->watch);
  s->watch = run ? orch__run_watch(run, s->last_seq, on_run_event, s) : NULL;
  if (s->watch == NULL && !s->lagging && s->end == NULL) { /* gone meanwhile, or out of memory */
    tp_stream_end(s->req);
    rstream_free(s);
  }
}

static void on_gone(struct tp_req *req, void *ud) {
  (void)req;
  rstream_free(ud);
}

static void on_run_events(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  struct orch_run *run;
  struct store_run rec;
  if (orch__api_run(o, req, tp_req_param(req, "run"), &run, &rec, NULL) != 0)
    return;
  const char *lei = tp_req_header(req, "last-event-id");
  long long after = -1;
  if (lei != NULL) {
    char *end;
    after = strtoll(lei, &end, 10);
    if (end == lei || *end || after < 0) {
      orch__api_error(req, 400, "invalid_field", "Last-Event-ID: a non-negative event number");
      store_run_free(&rec);
      return;
    }
  }
  if (tp_sse_start(req, "Cache-Control: no-store\r\n", HEARTBEAT_MS) != 0) {
    store_run_free(&rec);
    return;
  }
  if (run == NULL) { /* ended: its end at once */
    json_t *j = orch__run_json(o, &rec);
    size_t len = 0;
    char *text = orch__json_dump(j, &len);
    json_decref(j);
    if (text != NULL)
      tp_sse_send(req, "end", NULL, text, len);
    sbx_free(text);
    store_run_free(&rec);
    tp_stream_end(req);
    tp_req_release(req);
    return;
  }
  store_run_free(&rec);
  struct rstream *s = sbx_calloc(1, sizeof(*s));
  if (s == NULL) {
    tp_stream_end(req);
    tp_req_release(req);
    return;
  }
  s->o = o;
  s->req = req;
  s->last_seq = -1;
  snprintf(s->run_id, sizeof(s->run_id), "%s", run->id);
  tp_req_on_close(req, on_gone, s);
  if ((s->watch = orch__run_watch(run, after, on_run_event, s)) == NULL) {
    tp_stream_end(req);
    rstream_free(s);
  }
}

void orch__routes_run_events(struct orch *o) {
  tp_route(o->tp, "GET", "/v1/runs/{run}/events", 0, on_run_events, o);
}
