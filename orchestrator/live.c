/* live.c -- a run's live output, and the run events its watchers receive.
 *
 * What it holds: for the run's latest attempt, the text of stdout and stderr the page sent while
 * Python ran (at most ORCH_OUT_CHARS characters each: past it the text is dropped and the stream
 * marked cut), the display() bundles in index order, and the prompt of an input() the run waits
 * in.  Held in memory with the live run, never persisted piece by piece: the result is (and an
 * ending the orchestrator decides keeps what is held, orch__live_keep).  A new attempt starts
 * empty (orch__live_begin, at its dispatch).
 *
 * The run-event API: every change of the run is an event numbered by the run (seq 1, 2, ...):
 * `state` (its state as the API names it, each change), `output` (a chunk of a stream, with the
 * characters before it), `display` (a bundle and its index), `input_request` (the prompt), and
 * last `end` (the run object, once its end is durable).  A watcher (orch__run_watch: the run
 * stream, the MCP server's progress notifications, anything in the process) registers a callback
 * and gets them in order, each with its data already rendered as JSON text.  On registering it
 * first catches up: after a seq it saw, the events the run's log still holds after it (the log
 * covers the latest attempt); without one, or past what the log holds, the run as it is now (its
 * state, then its held output as one `output` per stream from offset 0, its displays, a pending
 * input_request), each with the latest seq.  A result's stdout and stderr past what the page
 * streamed are published as the last `output` events before `end` (orch__live_result): a run's
 * `output` events, joined, are its result's text.  The output, display and input_request events
 * also go to the chat's listeners (its pages' event streams) as live events: no seq, not in the
 * durable log; a page that attaches meanwhile is sent the held output the same way
 * (orch__live_snapshot).
 *
 * What it does not do: decide whether a page may report (report.c checks the attempt), move the
 * run's state (run.c), or know of HTTP (api_live.c writes the run stream).
 */
#include "internal.h"

#include <string.h>

#define LIVE_LOG_MAX 4096 /* events of the latest attempt a watcher may resume within */

static const char *const stream_names[2] = {"stdout", "stderr"};
static const char *const ev_types[] = {"state", "output", "display", "input_request", "end"};

struct orch_live_entry { /* one event of the log: what it says, rendered again from the run */
  int64_t seq;
  enum orch_run_ev kind;
  int attempt;
  enum orch_stream stream; /* OUTPUT */
  size_t offset;           /* OUTPUT: characters of the stream before it; DISPLAY: its index */
  size_t from, len;        /* OUTPUT: its bytes in the held text */
  char state[16];          /* STATE */
};

struct orch_watch {
  struct sbx_list link; /* in run->live.watches */
  struct orch_run *run;
  orch_watch_cb cb;
  void *ud;
  int gone; /* unwatched while its run's watchers were being called: freed after */
};

void orch__live_init(struct orch_live *l) {
  memset(l, 0, sizeof(*l));
  for (int s = 0; s < 2; s++)
    sbx_buf_init(&l->out[s].text, ORCH_OUT_CHARS * 4 + 4);
  l->first_seq = 1;
  SBX_LIST_INIT(&l->watches);
}

/* The held output of an attempt goes (a new attempt, or the run is freed). */
static void clear_held(struct orch_live *l) {
  for (int s = 0; s < 2; s++) {
    sbx_buf_reset(&l->out[s].text);
    if (l->out[s].text.data != NULL)
      l->out[s].text.data[0] = '\0'; /* read as a C string too (the result's fallback) */
    l->out[s].chars = 0;
    l->out[s].cut = 0;
  }
  json_decref(l->displays);
  json_decref(l->notes);
  l->displays = l->notes = NULL;
  l->shown_bytes = 0;
  sbx_free(l->prompt);
  l->prompt = NULL;
  l->prompt_seq = 0;
}

void orch__live_free(struct orch_live *l) {
  clear_held(l);
  for (int s = 0; s < 2; s++)
    sbx_buf_free(&l->out[s].text);
  sbx_free(l->log);
  l->log = NULL;
  l->n_log = l->cap_log = 0;
  while (!SBX_LIST_EMPTY(&l->watches)) { /* nobody listens any more (the server is closing) */
    struct orch_watch *w = SBX_CONTAINER_OF(l->watches.next, struct orch_watch, link);
    sbx_list_remove(&w->link);
    sbx_free(w);
  }
}

void orch__live_begin(struct orch_run *run) {
  struct orch_live *l = &run->live;
  clear_held(l);
  l->attempt = run->attempts;
  l->n_log = 0;
  l->first_seq = l->seq + 1;
}

/* ---- rendering and delivery ------------------------------------------------------------------ */

/* The event's data as JSON text (ev->data; owned by the caller, sbx_free), from its fields. */
static char *render(struct orch_run_event *ev) {
  json_t *j = json_pack("{s:s, s:i}", "run_id", ev->run->id, "attempt", ev->attempt);
  switch (ev->kind) {
  case ORCH_RUN_EV_STATE:
    json_object_set_new(j, "state", json_string(ev->state));
    break;
  case ORCH_RUN_EV_OUTPUT:
    json_object_set_new(j, "stream", json_string(ev->stream));
    json_object_set_new(j, "text", json_stringn(ev->text, ev->text_len));
    json_object_set_new(j, "offset", json_integer((json_int_t)ev->offset));
    break;
  case ORCH_RUN_EV_DISPLAY:
    json_object_set_new(j, "index", json_integer(ev->index));
    json_object_set(j, "data", (json_t *)ev->bundle);
    break;
  case ORCH_RUN_EV_INPUT_REQUEST:
    json_object_set_new(j, "prompt", json_stringn(ev->text, ev->text_len));
    break;
  case ORCH_RUN_EV_END:
    break;
  }
  char *text = orch__json_dump(j, &ev->len);
  json_decref(j);
  ev->data = text;
  return text;
}

static void watch_free_gone(struct orch_live *l) {
  struct sbx_list *it, *tmp;
  SBX_LIST_FOREACH_SAFE(it, tmp, &l->watches) {
    struct orch_watch *w = SBX_CONTAINER_OF(it, struct orch_watch, link);
    if (w->gone) {
      sbx_list_remove(&w->link);
      sbx_free(w);
    }
  }
}

/* Hands ev to every watcher of the run (one that leaves meanwhile is not called again). */
static void deliver(struct orch_run *run, const struct orch_run_event *ev) {
  struct orch_live *l = &run->live;
  l->delivering++;
  struct sbx_list *it;
  SBX_LIST_FOREACH(it, &l->watches) {
    struct orch_watch *w = SBX_CONTAINER_OF(it, struct orch_watch, link);
    if (!w->gone)
      w->cb(w->ud, ev);
  }
  if (--l->delivering == 0)
    watch_free_gone(l);
}

static struct orch_live_entry *log_add(struct orch_live *l) {
  if (l->n_log == LIVE_LOG_MAX) { /* the oldest half goes: a resume from there gets the snapshot */
    size_t keep = LIVE_LOG_MAX / 2;
    memmove(l->log, l->log + (l->n_log - keep), keep * sizeof(*l->log));
    l->n_log = keep;
    l->first_seq = l->log[0].seq;
  }
  if (l->n_log == l->cap_log) {
    size_t nc = l->cap_log ? l->cap_log * 2 : 16;
    struct orch_live_entry *nl = sbx_realloc(l->log, nc * sizeof(*nl));
    if (nl == NULL)
      return NULL;
    l->log = nl;
    l->cap_log = nc;
  }
  struct orch_live_entry *e = &l->log[l->n_log++];
  memset(e, 0, sizeof(*e));
  return e;
}

/* A new event of the run: numbered, logged (so a watcher may resume after it), rendered once and
 * handed to the watchers and, unless it is a state, to the chat's listeners as a live event. */
static void publish(struct orch_run *run, struct orch_run_event *ev,
                    const struct orch_live_entry *e) {
  struct orch_live *l = &run->live;
  ev->seq = ++l->seq;
  ev->run = run;
  ev->run_id = run->id;
  ev->type = ev_types[ev->kind];
  struct orch_live_entry *le = log_add(l);
  if (le == NULL) /* out of memory: a watcher that resumes from here gets the snapshot */
    l->first_seq = l->seq + 1;
  else {
    *le = *e;
    le->seq = ev->seq;
    le->kind = ev->kind;
    le->attempt = ev->attempt;
  }
  int to_chat = ev->kind != ORCH_RUN_EV_STATE && run->chat != NULL;
  if (SBX_LIST_EMPTY(&l->watches) && !to_chat)
    return;
  char *data = render(ev);
  if (data == NULL) {
    sbx_log(SBX_LOG_ERROR, "live", "run %s: a %s event was not sent (out of memory)", run->id,
            ev->type);
    return;
  }
  deliver(run, ev);
  if (to_chat)
    orch__event_publish(run->chat, ev->type, data, ev->len);
  sbx_free(data);
}

/* ---- what a page sent -------------------------------------------------------------------------- */

void orch__live_state(struct orch_run *run) {
  struct orch_live *l = &run->live;
  const char *state = run->rec.state ? run->rec.state : "";
  if (run->state != ORCH_RUN_WAITING_INPUT && l->prompt != NULL)
    orch__live_asked_over(run); /* paused, cancelled, ended while it waited: nobody asks now */
  if (strcmp(l->state, state) == 0 && l->state_attempt == run->attempts)
    return;
  snprintf(l->state, sizeof(l->state), "%s", state);
  l->state_attempt = run->attempts;
  struct orch_live_entry e = {0};
  snprintf(e.state, sizeof(e.state), "%s", state);
  struct orch_run_event ev = {.kind = ORCH_RUN_EV_STATE, .attempt = run->attempts, .state = state};
  publish(run, &ev, &e);
}

/* Takes the part of one chunk that is new: from the held length on (a chunk that starts before
 * it repeats what is held: the overlap is dropped), up to the cap (the rest dropped, the stream
 * marked cut).  A chunk that starts after the held length (a gap) is not taken. */
static void take(struct orch_held *h, size_t offset, const char *text, size_t len) {
  if (h->chars >= ORCH_OUT_CHARS) {
    h->cut |= len > 0 && offset + len > h->chars; /* (a lower bound on its characters) */
    return;
  }
  if (offset > h->chars)
    return;
  size_t i = 0, start, took = 0;
  for (size_t k = h->chars - offset; k > 0 && i < len; k--)
    i += orch__utf8_next(text + i, len - i, NULL);
  for (start = i; i < len && h->chars + took < ORCH_OUT_CHARS; took++)
    i += orch__utf8_next(text + i, len - i, NULL);
  if (i < len)
    h->cut = 1;
  if (i > start && sbx_buf_append(&h->text, text + start, i - start) == 0)
    h->chars += took;
}

void orch__live_chunks(struct orch_run *run, const struct orch_chunk *c, size_t n) {
  struct orch_live *l = &run->live;
  size_t from[2], chars[2];
  for (int s = 0; s < 2; s++) {
    from[s] = l->out[s].text.len;
    chars[s] = l->out[s].chars;
  }
  for (size_t i = 0; i < n; i++)
    take(&l->out[c[i].stream], c[i].offset, c[i].text, c[i].len);
  for (int s = 0; s < 2; s++) { /* what this call added to a stream is one event */
    struct orch_held *h = &l->out[s];
    if (h->text.len == from[s])
      continue;
    struct orch_live_entry e = {.stream = (enum orch_stream)s,
                                .offset = chars[s],
                                .from = from[s],
                                .len = h->text.len - from[s]};
    struct orch_run_event ev = {.kind = ORCH_RUN_EV_OUTPUT,
                                .attempt = l->attempt,
                                .stream = stream_names[s],
                                .offset = chars[s],
                                .text = h->text.data + from[s],
                                .text_len = e.len};
    publish(run, &ev, &e);
  }
}

size_t orch__live_displays(const struct orch_run *run) {
  return run->live.displays ? json_array_size(run->live.displays) : 0;
}

int orch__live_display(struct orch_run *run, size_t index, const json_t *bundle) {
  struct orch_live *l = &run->live;
  if (index != orch__live_displays(run) || index >= ORCH_DISPLAYS)
    return 0; /* held already (a repeat), a gap, or past the run's displays: not taken */
  if (l->displays == NULL && (l->displays = json_array()) == NULL)
    return SBX_ENOMEM;
  if (l->notes == NULL && (l->notes = json_array()) == NULL)
    return SBX_ENOMEM;
  char what[32];
  snprintf(what, sizeof(what), "display %zu", index + 1);
  size_t budget = ORCH_SHOWN_BYTES - l->shown_bytes, before = budget;
  json_t *kept = orch__bundle_keep(bundle, &budget, what, l->notes);
  if (kept == NULL || json_array_append_new(l->displays, kept) != 0)
    return SBX_ENOMEM;
  l->shown_bytes += before - budget;
  struct orch_live_entry e = {.offset = index};
  struct orch_run_event ev = {
      .kind = ORCH_RUN_EV_DISPLAY, .attempt = l->attempt, .index = (int)index, .bundle = kept};
  publish(run, &ev, &e);
  return 0;
}

int orch__live_ask(struct orch_run *run, const char *prompt) {
  struct orch_live *l = &run->live;
  size_t len = strlen(prompt), i = 0;
  for (size_t chars = 0; i < len && chars < ORCH_OUT_CHARS; chars++)
    i += orch__utf8_next(prompt + i, len - i, NULL);
  char *p = sbx_strndup(prompt, i);
  if (p == NULL)
    return SBX_ENOMEM;
  sbx_free(l->prompt);
  l->prompt = p;
  struct orch_live_entry e = {0};
  struct orch_run_event ev = {
      .kind = ORCH_RUN_EV_INPUT_REQUEST, .attempt = l->attempt, .text = p, .text_len = i};
  publish(run, &ev, &e);
  l->prompt_seq = l->seq;
  return 0;
}

void orch__live_asked_over(struct orch_run *run) {
  sbx_free(run->live.prompt);
  run->live.prompt = NULL;
  run->live.prompt_seq = 0;
}

void orch__live_held(const struct orch_run *run, size_t *out, size_t *err, size_t *displays) {
  *out = run->live.out[ORCH_STDOUT].chars;
  *err = run->live.out[ORCH_STDERR].chars;
  *displays = orch__live_displays(run);
}

/* ---- endings ----------------------------------------------------------------------------------- */

/* text's copy in *slot (owned), replacing what it held; 0 or SBX_ENOMEM (slot unchanged). */
static int keep_text(char **slot, const char *text, size_t len) {
  char *t = sbx_strndup(text ? text : "", len);
  if (t == NULL)
    return SBX_ENOMEM;
  sbx_free(*slot);
  *slot = t;
  return 0;
}

void orch__live_keep(struct orch_run *run) {
  struct orch_live *l = &run->live;
  struct store_run *r = &run->rec;
  if (keep_text(&r->stdout_text, l->out[0].text.data, l->out[0].text.len) == 0)
    r->stdout_truncated = l->out[0].cut;
  if (keep_text(&r->stderr_text, l->out[1].text.data, l->out[1].text.len) == 0)
    r->stderr_truncated = l->out[1].cut;
  if (orch__live_displays(run) > 0) {
    sbx_free(r->displays_json);
    r->displays_json = orch__json_dump(l->displays, NULL);
  }
  if (l->notes && json_array_size(l->notes) > 0) {
    sbx_free(r->notes_json);
    r->notes_json = orch__json_dump(l->notes, NULL);
  }
}

void orch__live_result(struct orch_run *run, int attempt, const char *out, const char *err) {
  struct orch_live *l = &run->live;
  if (l->attempt != attempt)
    return;
  const char *texts[2] = {out, err};
  struct orch_chunk c[2];
  size_t n = 0;
  for (int s = 0; s < 2; s++) {
    const struct orch_held *h = &l->out[s];
    size_t len = texts[s] ? strlen(texts[s]) : 0;
    if (len <= h->text.len)
      continue;
    if (h->text.len > 0 && memcmp(texts[s], h->text.data, h->text.len) != 0) {
      /* the page streamed one text and reported another: the result stands, the events do not
       * add up to it */
      sbx_log(SBX_LOG_WARN, "live", "run %s: the result's %s does not continue its streamed text",
              run->id, stream_names[s]);
      continue;
    }
    c[n++] = (struct orch_chunk){.stream = (enum orch_stream)s,
                                 .offset = h->chars,
                                 .text = texts[s] + h->text.len,
                                 .len = len - h->text.len};
  }
  if (n > 0)
    orch__live_chunks(run, c, n);
}

void orch__live_end(struct orch *o, struct orch_run *run, int rc) {
  struct orch_live *l = &run->live;
  if (SBX_LIST_EMPTY(&l->watches))
    return;
  size_t len = 0;
  const char *text = orch__run_end_text(o, run, &len);
  struct orch_run_event ev = {.kind = ORCH_RUN_EV_END,
                              .type = "end",
                              .seq = ++l->seq,
                              .run_id = run->id,
                              .attempt = run->attempts,
                              .run = run,
                              .rc = rc,
                              .data = text ? text : "{}",
                              .len = text ? len : 2};
  deliver(run, &ev);
  while (!SBX_LIST_EMPTY(&l->watches)) { /* the end is the last event: every watch is over */
    struct orch_watch *w = SBX_CONTAINER_OF(l->watches.next, struct orch_watch, link);
    sbx_list_remove(&w->link);
    sbx_free(w);
  }
}

/* ---- catching up ------------------------------------------------------------------------------- */

/* Renders ev and hands it to cb. */
static void replay_one(struct orch_run_event *ev, orch_watch_cb cb, void *ud) {
  char *data = render(ev);
  if (data != NULL)
    cb(ud, ev);
  sbx_free(data);
}

void orch__live_snapshot(struct orch_run *run, int with_state, orch_watch_cb cb, void *ud) {
  struct orch_live *l = &run->live;
  struct orch_run_event ev = {.run = run, .run_id = run->id, .seq = l->seq, .attempt = l->attempt};
  if (with_state) {
    ev.kind = ORCH_RUN_EV_STATE;
    ev.type = ev_types[ev.kind];
    ev.attempt = l->state_attempt;
    ev.state = l->state;
    replay_one(&ev, cb, ud);
    ev.attempt = l->attempt;
  }
  if (l->attempt == 0)
    return;
  for (int s = 0; s < 2; s++) {
    if (l->out[s].text.len == 0)
      continue;
    ev.kind = ORCH_RUN_EV_OUTPUT;
    ev.type = ev_types[ev.kind];
    ev.stream = stream_names[s];
    ev.offset = 0;
    ev.text = l->out[s].text.data;
    ev.text_len = l->out[s].text.len;
    replay_one(&ev, cb, ud);
  }
  for (size_t i = 0; i < orch__live_displays(run); i++) {
    ev.kind = ORCH_RUN_EV_DISPLAY;
    ev.type = ev_types[ev.kind];
    ev.index = (int)i;
    ev.bundle = json_array_get(l->displays, i);
    replay_one(&ev, cb, ud);
  }
  if (l->prompt != NULL) {
    ev.kind = ORCH_RUN_EV_INPUT_REQUEST;
    ev.type = ev_types[ev.kind];
    ev.text = l->prompt;
    ev.text_len = strlen(l->prompt);
    replay_one(&ev, cb, ud);
  }
}

/* The events of the log after `after`, rendered from what the run holds.  An input_request other
 * than the pending one is over (answered or ended) and left out. */
static void replay_log(struct orch_run *run, int64_t after, orch_watch_cb cb, void *ud) {
  struct orch_live *l = &run->live;
  for (size_t i = 0; i < l->n_log; i++) {
    const struct orch_live_entry *e = &l->log[i];
    if (e->seq <= after)
      continue;
    struct orch_run_event ev = {.kind = e->kind,
                                .type = ev_types[e->kind],
                                .seq = e->seq,
                                .run = run,
                                .run_id = run->id,
                                .attempt = e->attempt};
    if (e->kind == ORCH_RUN_EV_STATE) {
      ev.state = e->state;
    } else if (e->kind == ORCH_RUN_EV_OUTPUT) {
      ev.stream = stream_names[e->stream];
      ev.offset = e->offset;
      ev.text = l->out[e->stream].text.data + e->from;
      ev.text_len = e->len;
    } else if (e->kind == ORCH_RUN_EV_DISPLAY) {
      ev.index = (int)e->offset;
      ev.bundle = json_array_get(l->displays, e->offset);
    } else if (e->seq == l->prompt_seq && l->prompt != NULL) {
      ev.text = l->prompt;
      ev.text_len = strlen(l->prompt);
    } else {
      continue;
    }
    replay_one(&ev, cb, ud);
  }
}

struct orch_watch *orch__run_watch(struct orch_run *run, int64_t after_seq, orch_watch_cb cb,
                                   void *ud) {
  struct orch_live *l = &run->live;
  struct orch_watch *w = sbx_calloc(1, sizeof(*w));
  if (w == NULL)
    return NULL;
  *w = (struct orch_watch){.run = run, .cb = cb, .ud = ud};
  sbx_list_insert_tail(&l->watches, &w->link);
  l->delivering++; /* an unwatch from the catch-up's callbacks is safe */
  if (after_seq >= 0 && after_seq >= l->first_seq - 1 && after_seq <= l->seq)
    replay_log(run, after_seq, cb, ud);
  else
    orch__live_snapshot(run, 1, cb, ud);
  if (--l->delivering == 0)
    watch_free_gone(l);
  return w;
}

void orch__run_unwatch(struct orch_watch *w) {
  if (w == NULL)
    return;
  if (w->run->live.delivering > 0) {
    w->gone = 1;
    return;
  }
  sbx_list_remove(&w->link);
  sbx_free(w);
}
