/* api_events.c -- how a page attaches: its event stream, and its presence reports.
 *
 * GET /v1/chats/{chat}/events?page_id=P[&visible=0|1][&token=T]  (SSE; Last-Event-ID resumes)
 *   Attaches page P to the chat (a second stream of the same page replaces the first), replays
 *   what it missed when Last-Event-ID is given, and lets the scheduler dispatch to it.  A page
 *   reconnecting WITHOUT Last-Event-ID lost its place: a run it held is re-dispatched as a new
 *   attempt.  So did one whose Last-Event-ID is older than what the log still holds (the cron
 *   trims old events, never inside a grace period: store_event_trim): it is treated the same,
 *   rather than replaying a log with a hole in it.  When the stream drops, the page enters its
 *   grace period (page.c).
 * POST /v1/chats/{chat}/presence {page_id, visible, kernel}
 *   Foreground/background and kernel state; hidden pauses the run the page holds.  A page that
 *   holds a run sends it every PAGE_HEARTBEAT_MS as its sign of life (page.c: silent too long, it
 *   counts as hidden).
 * Each stream is a listener of its chat's events (events.c): it writes them as SSE, and when it
 * falls behind (its queue full) it stops taking events and catches up from the log once it
 * drains; a reconnecting page catches up the same way.  A run's live events (output, display,
 * input_request: live.c) carry no `id:` (they are not in the log); a stream that attaches, or
 * that missed some while it was behind, is sent the live run's held output instead, as one
 * `output` per stream from offset 0, its displays and a pending input_request (pages keep what
 * they have by offset and index), and the assistant's answer streaming now as one whole `message`
 * (assistant.c).  What it does not do: make events (events.c, live.c) or decide
 * dispatch (chat.c).
 */
#include "api.h"
#include "assistant.h"
#include "transport.h"

#include <stdlib.h>
#include <string.h>

#define HEARTBEAT_MS   15000
#define CATCH_UP_BATCH 64

/* A page's event stream: a listener of its chat's events that writes them as SSE. */
struct stream {
  struct orch_listener l; /* in chat->listeners while attached */
  struct tp_req *req;
  struct orch_chat *chat;
  struct orch_page *page; /* NULL once detached */
  int64_t last_seq;       /* last event seq written to this stream */
  int lagging;            /* a send hit the queue limit: catch up from the store on drain */
  int missed_live;        /* a live event was not sent: the held output follows the catch-up */
};

static void catch_up(struct stream *s);

static void on_drain(struct tp_req *req, void *ud) {
  (void)req;
  struct stream *s = ud;
  if (s->lagging)
    catch_up(s);
}

/* Writes one event: with its id when it is in the log (seq > 0), without for a live one. */
static int send_one(struct stream *s, const char *type, int64_t seq, const char *data, size_t len) {
  char id[24];
  snprintf(id, sizeof(id), "%lld", (long long)seq);
  int rc = tp_sse_send(s->req, type, seq > 0 ? id : NULL, data, len);
  if (rc == 0 && seq > 0) {
    s->last_seq = seq;
    s->chat->o->m.events_sent++;
  } else if (rc == 0) {
    s->chat->o->m.live_events_sent++;
  } else if (rc == SBX_EAGAIN) {
    s->lagging = 1;
    s->missed_live |= seq == 0;
    tp_stream_on_drain(s->req, on_drain, s);
  }
  return rc;
}

static void on_held(void *ud, const struct orch_run_event *ev) {
  struct stream *s = ud;
  if (s->lagging)
    s->missed_live = 1; /* sent again once it caught up */
  else
    send_one(s, ev->type, 0, ev->data, ev->len);
}

/* The held output of the chat's live run (the head of its queue), as live events. */
static void send_held(struct stream *s) {
  struct orch_chat *c = s->chat;
  s->missed_live = 0;
  if (!SBX_LIST_EMPTY(&c->runs))
    orch__live_snapshot(SBX_CONTAINER_OF(c->runs.next, struct orch_run, chat_link), 0, on_held, s);
  size_t len = 0;
  char *msg = orch__asst_held(c, &len); /* the answer streaming now, whole, as a live event */
  if (msg && !s->lagging)
    send_one(s, "message", 0, msg, len);
  sbx_free(msg);
}

/* Sends the events after s->last_seq from the store (replay, or catching up after lagging). */
static void catch_up(struct stream *s) {
  struct orch *o = s->chat->o;
  s->lagging = 0;
  for (;;) {
    struct store_event *ev = NULL;
    size_t n = 0;
    if (store_event_since(o->st, s->chat->id, s->last_seq, CATCH_UP_BATCH, &ev, &n) != 0)
      return;
    for (size_t i = 0; i < n; i++) {
      int rc = send_one(s, ev[i].type, ev[i].seq, ev[i].payload, strlen(ev[i].payload));
      if (rc != 0) {
        store_event_list_free(ev, n);
        return; /* lagging: resumes on drain; closed: the close callback cleans up */
      }
      o->m.events_replayed++;
    }
    store_event_list_free(ev, n);
    if (n < CATCH_UP_BATCH) {
      if (s->missed_live)
        send_held(s);
      return;
    }
  }
}

/* An event of the chat (durable, or live with seq 0): sent unless the stream is catching up from
 * the log (then a live one is missed: the held output follows the catch-up). */
static void on_event(struct orch_listener *l, const struct orch_event *ev) {
  struct stream *s = SBX_CONTAINER_OF(l, struct stream, l);
  if (s->lagging)
    s->missed_live |= ev->seq == 0;
  else if (ev->seq == 0 || ev->seq > s->last_seq)
    send_one(s, ev->type, ev->seq, ev->data, ev->len);
}

static int page_id_ok(const char *s) {
  if (s == NULL || *s == '\0' || strlen(s) > ORCH_PAGE_ID_MAX)
    return 0;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
          *s == '-' || *s == '_' || *s == '.'))
      return 0;
  return 1;
}

static void detach(struct stream *s, int page_dropped) {
  struct orch_chat *c = s->chat;
  struct orch_page *p = s->page;
  orch__chat_unlisten(&s->l);
  s->page = NULL;
  if (p != NULL && p->events == &s->l) {
    p->events = NULL;
    if (page_dropped && orch__page_drop(p, c->o->rt.page_grace_ms) == 0)
      orch__chat_page_changed(c, p);
  }
}

/* Ends a stream from this side: its page no longer listens, the response is ended, s is freed. */
static void end_stream(struct stream *s) {
  detach(s, 0);
  tp_stream_end(s->req);
  tp_req_release(s->req);
  sbx_free(s);
}

static void on_stream_closed(struct tp_req *req, void *ud) {
  struct stream *s = ud;
  detach(s, 1);
  tp_req_release(req);
  sbx_free(s);
}

static int parse_visible(const char *q, int dflt) {
  if (q == NULL)
    return dflt;
  return !(strcmp(q, "0") == 0 || strcmp(q, "false") == 0 || strcmp(q, "hidden") == 0);
}

/* 1 when events after `last` were trimmed from the log: the trim deletes oldest-first, so that is
 * when the oldest event left comes after last + 1.  (A chat's first appends failing looks the
 * same; the page then re-runs what it held, which is safe.) */
static int log_lost_after(struct orch *o, struct orch_chat *c, int64_t last) {
  struct store_event *ev = NULL;
  size_t n = 0;
  int lost = 0;
  if (last < c->event_seq && store_event_since(o->st, c->id, 0, 1, &ev, &n) == 0 && n == 1)
    lost = ev[0].seq > last + 1;
  store_event_list_free(ev, n);
  return lost;
}

static void on_events(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  struct orch_chat *c = orch__api_chat(o, req, tp_req_param(req, "chat"), ORCH_API_PAGE, 1);
  if (c == NULL)
    return;
  const char *pid = tp_req_query(req, "page_id");
  if (!page_id_ok(pid)) {
    orch__api_error(req, 400, "invalid_field",
                    "page_id: 1 to %d characters of A-Z a-z 0-9 - _ . (?page_id=...)",
                    ORCH_PAGE_ID_MAX);
    return;
  }
  const char *lei = tp_req_header(req, "last-event-id");
  if (lei == NULL)
    lei = tp_req_query(req, "last_event_id");
  long long last = -1;
  if (lei != NULL) {
    char *end;
    last = strtoll(lei, &end, 10);
    if (end == lei || *end || last < 0) {
      orch__api_error(req, 400, "invalid_field", "Last-Event-ID: a non-negative event number");
      return;
    }
    if (last > c->event_seq)
      last = c->event_seq;
    if (log_lost_after(o, c, last))
      last = -1; /* lost its place, as without Last-Event-ID */
  }
  struct stream *s = sbx_calloc(1, sizeof(*s));
  struct orch_page *p = orch__chat_page(c, pid);
  int fresh_page = p == NULL;
  if (fresh_page)
    p = sbx_calloc(1, sizeof(*p));
  if (s == NULL || p == NULL) {
    sbx_free(s);
    if (fresh_page)
      sbx_free(p);
    orch__api_error(req, 500, "internal", "out of memory");
    return;
  }
  if (tp_sse_start(req, "Cache-Control: no-store\r\n", HEARTBEAT_MS) != 0) {
    sbx_free(s);
    if (fresh_page)
      sbx_free(p);
    return;
  }
  if (fresh_page) {
    orch__page_init(p, pid);
    p->chat = c;
    sbx_list_insert_tail(&c->pages, &p->chat_link);
  } else if (p->events != NULL) {
    /* The same page opened a second stream: the newer one wins. */
    end_stream(SBX_CONTAINER_OF(p->events, struct stream, l));
  }
  s->req = req;
  s->chat = c;
  s->page = p;
  s->last_seq = last >= 0 ? last : c->event_seq;
  p->events = &s->l;
  orch__chat_listen(c, &s->l, on_event);
  tp_req_on_close(req, on_stream_closed, s);

  int visible =
      parse_visible(tp_req_query(req, "visible"), p->state == ORCH_PAGE_NEW ? 1 : p->visible);
  orch__page_attach(p, visible, &c->visible_counter);
  if (last >= 0) {
    catch_up(s);
  } else {
    /* Without Last-Event-ID the page may have missed the `run` it holds: dispatch it again. */
    struct orch_run *head = SBX_LIST_EMPTY(&c->runs)
                                ? NULL
                                : SBX_CONTAINER_OF(c->runs.next, struct orch_run, chat_link);
    if (head && strcmp(head->page_id, p->id) == 0 && orch__run_on_page(head))
      orch__chat_run_lost(c, head); /* paused, or ended crashed after CODE_MAX_ATTEMPTS */
  }
  orch__chat_page_changed(c, p);
  send_held(s); /* what the live run printed so far (a re-dispatch above starts it empty) */
}

/* `leaving: true`: the page is going away (a reload, a closed tab, a chat switch; sent from its
 * pagehide with a keepalive request).  Its stream, if still open, is ended and the page is gone
 * at once instead of after PAGE_GRACE_MS, so the run it held goes to another visible page of the
 * chat now.  A page already gone answers the same. */
static void page_leaving(struct tp_req *req, struct orch_chat *c, const char *pid) {
  struct orch_page *p = orch__chat_page(c, pid);
  if (p != NULL) {
    if (p->events != NULL)
      end_stream(SBX_CONTAINER_OF(p->events, struct stream, l));
    orch__chat_page_leave(c, p); /* frees p */
  }
  json_t *j = json_object();
  json_object_set_new(j, "page_id", json_string(pid));
  json_object_set_new(j, "state", json_string("gone"));
  orch__api_json(req, 200, j);
}

static void on_presence(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  struct orch_chat *c = orch__api_chat(o, req, tp_req_param(req, "chat"), ORCH_API_PAGE, 0);
  if (c == NULL)
    return;
  json_t *body = orch__api_body_object(req);
  if (body == NULL)
    return;
  const char *pid = NULL, *kernel = NULL;
  int visible = 0, leaving = 0;
  struct orch_field f[] = {ORCH_FIELD("page_id", "s", &pid), ORCH_FIELD("visible", "b", &visible),
                           ORCH_FIELD("kernel", "s", &kernel), ORCH_FIELD("leaving", "b", &leaving)};
  enum orch_kernel_state k = ORCH_KERNEL_UNKNOWN;
  struct orch_page *p;
  if (orch__api_unpack(req, body, NULL, f, SBX_ARRAY_SIZE(f)) != 0) {
    json_decref(body);
    return;
  }
  if (!page_id_ok(pid))
    orch__api_error(req, 400, "invalid_field", "page_id: required, 1 to %d of A-Z a-z 0-9 - _ .",
                    ORCH_PAGE_ID_MAX);
  else if (kernel && orch__kernel_state_parse(kernel, &k) != 0)
    orch__api_error(req, 400, "invalid_field", "kernel: one of loading, ready, busy, dead");
  else if (leaving)
    page_leaving(req, c, pid);
  else if ((p = orch__chat_page(c, pid)) == NULL)
    orch__api_error(req, 409, "not_attached", "page %s has no event stream on this chat", pid);
  else {
    if (k != ORCH_KERNEL_UNKNOWN)
      p->kernel = k;
    if (f[1].given)
      orch__page_presence(p, visible, &c->visible_counter);
    json_t *j = json_object();
    json_object_set_new(j, "page_id", json_string(p->id));
    json_object_set_new(j, "state", json_string(orch__page_state_name(p->state)));
    json_object_set_new(j, "kernel", json_string(orch__kernel_state_name(p->kernel)));
    orch__chat_page_changed(c, p);
    json_object_set_new(j, "active", json_boolean(orch__chat_active_page(c) == p));
    orch__api_json(req, 200, j);
  }
  json_decref(body);
}

void orch__routes_events(struct orch *o) {
  tp_route(o->tp, "GET", "/v1/chats/{chat}/events", 0, on_events, o);
  tp_route(o->tp, "POST", "/v1/chats/{chat}/presence", 16 * 1024, on_presence, o);
}
