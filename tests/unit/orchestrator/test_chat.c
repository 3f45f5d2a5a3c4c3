/* test_chat.c -- the chat scheduler (chat.c, report.c, live.c, turn.c) under a fake clock, with a
 * real store in a temporary directory and no HTTP: runs created live and dispatched to the active
 * page (or paused while none can take them), one at a time in creation order; pages hidden, back,
 * silent, or gone after their grace; the pause wait, the watchdog, cancels; output while a run
 * goes (held, published, deduplicated, capped) and kept by every ending; input(); results (capped
 * output, value and displays, output files and the chat's output quota) and the callbacks of
 * whoever waits for a run's end; the run-event API's watchers; a turn's finish.  What the pages
 * hear is recorded by a listener of the chat (struct recorder), as an event stream would hear it;
 * what is durable is read back from the store. */
#include "internal.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t fake_now = 1000;
static uint64_t fake_mono(void *ud) {
  (void)ud;
  return fake_now;
}
static uint64_t fake_wall(void *ud) {
  (void)ud;
  return 1700000000000ull + fake_now;
}

/* ---- the chat scheduler's world: a server object with a store, without the transport -------- */

#define MAX_EVENTS 256
struct recorder { /* a listener of one chat: the events its pages would receive, in order */
  struct orch_listener l;
  size_t n;
  int64_t seq[MAX_EVENTS];
  char type[MAX_EVENTS][16];
  json_t *data[MAX_EVENTS];
};

static struct {
  uv_loop_t loop;
  char dir[64];
  struct orch_config cfg;
  struct orch *o;
  struct orch_chat *chat;
  struct recorder rec;
} w;

static void on_event(struct orch_listener *l, const struct orch_event *ev) {
  struct recorder *r = SBX_CONTAINER_OF(l, struct recorder, l);
  ck_assert_uint_lt(r->n, MAX_EVENTS);
  r->seq[r->n] = ev->seq;
  snprintf(r->type[r->n], sizeof(r->type[r->n]), "%s", ev->type);
  r->data[r->n] = json_loadb(ev->data, ev->len, 0, NULL);
  ck_assert_ptr_nonnull(r->data[r->n]);
  r->n++;
}

/* Runs the loop until every queued write called back (the store's handle is active only then). */
static void drain(void) { uv_run(&w.loop, UV_RUN_DEFAULT); }

static void on_chat_stored(int rc, const struct sbx_error *err, void *ud) {
  (void)err;
  *(int *)ud = rc == 0 ? 1 : -1;
}

static void setup(void) {
  fake_now = 1000;
  sbx_clock_set_fake(fake_mono, fake_wall, NULL);
  sbx_log_set_level(SBX_LOG_ERROR);
  memset(&w, 0, sizeof(w));
  snprintf(w.dir, sizeof(w.dir), "/tmp/orch-chat-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(w.dir));
  ck_assert_int_eq(uv_loop_init(&w.loop), 0);
  ck_assert_int_eq(orch_config_defaults(&w.cfg), 0);
  struct orch *o = w.o = sbx_calloc(1, sizeof(*o));
  o->loop = &w.loop;
  o->cfg = &w.cfg;
  orch__chats_init(o);
  orch__rt_init(&o->rt, &w.cfg);
  o->run_seq = 1;
  struct sbx_error err;
  ck_assert_int_eq(store_open(&w.loop, w.dir, &o->st, &err), 0);
  struct store_chat sc = {.created_at = 1};
  store_new_id(sc.id);
  memset(sc.token_hash, 'a', 64);
  int stored = 0;
  ck_assert_int_eq(store_chat_create(o->st, &sc, on_chat_stored, &stored), 0);
  drain();
  ck_assert_int_eq(stored, 1);
  ck_assert_int_eq(orch__chat_get(o, sc.id, &w.chat), 0);
  orch__chat_listen(w.chat, &w.rec.l, on_event);
}

static void teardown(void) {
  struct orch *o = w.o;
  o->closing = 1;
  store_close(o->st); /* what was still queued calls back first */
  uv_run(&w.loop, UV_RUN_DEFAULT);
  orch__chats_free(o);
  ck_assert_int_eq(uv_loop_close(&w.loop), 0);
  for (size_t e = 0; e < w.rec.n; e++)
    json_decref(w.rec.data[e]);
  sbx_free(o);
  orch_config_free(&w.cfg);
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", w.dir);
  ck_assert_int_eq(system(cmd), 0);
  sbx_clock_set_fake(NULL, NULL, NULL);
}

/* ---- helpers ------------------------------------------------------------------------------ */

static struct orch_page *attach(const char *id, int visible) {
  struct orch_page *p = sbx_calloc(1, sizeof(*p));
  orch__page_init(p, id);
  p->chat = w.chat;
  sbx_list_insert_tail(&w.chat->pages, &p->chat_link);
  ck_assert_int_eq(orch__page_attach(p, visible, &w.chat->visible_counter), 0);
  orch__chat_page_changed(w.chat, p);
  return p;
}

static void presence(struct orch_page *p, int visible) {
  ck_assert_int_eq(orch__page_presence(p, visible, &w.chat->visible_counter), 0);
  orch__chat_page_changed(w.chat, p);
}

struct created {
  int called, rc;
  char run_id[STORE_ID_LEN + 1];
  enum orch_run_state state; /* when the callback ran */
};

static void on_created(void *ud, int rc, const struct sbx_error *err, struct orch_run *run) {
  (void)err;
  struct created *c = ud;
  c->called++;
  c->rc = rc;
  c->state = run ? run->state : ORCH_RUN__COUNT;
}

/* A run of the test chat, created (live at once) and durable. */
static struct orch_run *create(const char *code, struct created *cr) {
  memset(cr, 0, sizeof(*cr));
  struct orch_run *run = orch__run_new(w.o, w.chat, code, "tool", NULL, 10, NULL);
  ck_assert_ptr_nonnull(run);
  snprintf(cr->run_id, sizeof(cr->run_id), "%s", run->id);
  ck_assert_int_eq(orch__run_create(w.o, w.chat, run, on_created, cr), 0);
  drain();
  ck_assert_int_eq(cr->called, 1);
  ck_assert_int_eq(cr->rc, 0);
  return orch__map_get(&w.o->runs, cr->run_id);
}

/* The same, its page having reported it started (attempt 1: running). */
static struct orch_run *started(const char *code, struct created *cr) {
  struct orch_run *run = create(code, cr);
  ck_assert_int_eq(orch__run_report_started(w.o, run, 1), 0);
  return run;
}

struct ended {
  int called, rc;
  enum orch_run_state state;
  enum orch_run_status status;
  char error_type[32];
  char stdout_text[64];
  int stdout_truncated, restarted, files_recorded;
  size_t stdout_chars;
};

static void on_end(void *ud, struct orch *o, struct orch_run *run, int rc,
                   const struct sbx_error *err) {
  (void)o, (void)err;
  struct ended *e = ud;
  e->called++;
  e->rc = rc;
  e->state = run->state;
  e->status = run->status;
  e->stdout_truncated = run->rec.stdout_truncated;
  e->restarted = run->rec.restarted;
  e->files_recorded = run->files_recorded;
  const char *out = run->rec.stdout_text ? run->rec.stdout_text : "";
  snprintf(e->stdout_text, sizeof(e->stdout_text), "%s", out);
  for (size_t i = 0, n = strlen(out); i < n; e->stdout_chars++)
    i += orch__utf8_next(out + i, n - i, NULL);
  json_t *ej = run->rec.error_json ? json_loads(run->rec.error_json, 0, NULL) : NULL;
  snprintf(e->error_type, sizeof(e->error_type), "%s",
           json_string_value(json_object_get(ej, "type")) ?: "");
  json_decref(ej);
}

/* The stored record of a run (state, status): what survives a restart. */
static void stored(const char *run_id, const char *state, const char *status) {
  struct store_run r;
  ck_assert_int_eq(store_run_get(w.o->st, run_id, &r), 0);
  ck_assert_str_eq(r.state, state);
  if (status)
    ck_assert_str_eq(r.status, status);
  else
    ck_assert_ptr_null(r.status);
  store_run_free(&r);
}

/* The last event the chat's pages heard, of that type. */
static json_t *last(const char *type) {
  for (size_t i = w.rec.n; i-- > 0;)
    if (strcmp(w.rec.type[i], type) == 0)
      return w.rec.data[i];
  return NULL;
}

static size_t count(const char *type) {
  size_t n = 0;
  for (size_t i = 0; i < w.rec.n; i++)
    n += strcmp(w.rec.type[i], type) == 0;
  return n;
}

static int attempt_of(json_t *ev) {
  return (int)json_integer_value(json_object_get(ev, "attempt"));
}

static void result(struct orch_run *run, const char *status, const char *out, struct ended *e) {
  enum orch_run_status st;
  ck_assert_int_eq(orch__run_status_parse(status, &st), 0);
  struct orch_result res = {
      .attempt = run->attempts, .hash = "h", .status = st, .out = out, .out_given = out != NULL};
  memset(e, 0, sizeof(*e));
  ck_assert_int_eq(orch__run_submit_result(w.o, run, &res, on_end, e), 0);
}

/* An output file of the run's current attempt, its content in a store stage (name not checked). */
static struct orch_upload *upload(struct orch_run *run, const char *name, const char *data) {
  struct sbx_error err;
  struct store_blob_stage *sg = NULL;
  ck_assert_int_eq(store_blob_stage_begin(w.o->st, &sg, &err), 0);
  ck_assert_int_eq(store_blob_stage_write(sg, data, strlen(data), &err), 0);
  char sha[65];
  ck_assert_int_eq(store_blob_stage_finish(sg, sha, &err), 0);
  struct orch_upload *u = NULL;
  ck_assert_int_eq(orch__run_add_upload(w.o, run, sbx_strdup(name), &sg, sha, run->attempts, &u),
                   0);
  ck_assert_ptr_null(sg); /* taken */
  return u;
}

/* An `ok` result of the current attempt listing the one file u. */
static int result_with(struct orch_run *run, struct orch_upload *u, struct ended *e) {
  struct orch_upload *files[] = {u};
  const char *kinds[] = {"file"};
  struct orch_result res = {.attempt = run->attempts,
                            .hash = "h",
                            .status = ORCH_RUN_STATUS_OK,
                            .files = files,
                            .kinds = kinds,
                            .n_files = 1};
  return orch__run_submit_result(w.o, run, &res, on_end, e);
}

/* The page's heartbeat for ms of the fake clock (a presence every PAGE_HEARTBEAT_MS), the chat's
 * cron ticking. */
static void live_for(struct orch_page *p, uint64_t ms) {
  for (uint64_t t = 0; t < ms;) {
    uint64_t step = SBX_MIN(w.o->rt.page_heartbeat_ms, ms - t);
    fake_now += step;
    t += step;
    presence(p, 1);
    orch__chat_tick(w.chat);
  }
}

static struct orch_chunk chunk(enum orch_stream s, size_t offset, const char *text) {
  return (struct orch_chunk){.stream = s, .offset = offset, .text = text, .len = strlen(text)};
}

/* One output call of the page: chunks, and input()'s prompt (NULL: none in this call). */
static int output(struct orch_run *run, int attempt, const struct orch_chunk *c, size_t n,
                  const char *prompt) {
  struct orch_output out = {.attempt = attempt, .chunks = c, .n_chunks = n, .prompt = prompt};
  return orch__run_report_output(w.o, run, &out);
}

static int output_display(struct orch_run *run, size_t index, const json_t *bundle) {
  const json_t *d[] = {bundle};
  struct orch_output out = {
      .attempt = run->attempts, .display_index = &index, .displays = d, .n_displays = 1};
  return orch__run_report_output(w.o, run, &out);
}

static const char *held(struct orch_run *run, enum orch_stream s) {
  return run->live.out[s].text.len ? run->live.out[s].text.data : "";
}

static size_t count_seq0(const char *type) {
  size_t n = 0;
  for (size_t i = 0; i < w.rec.n; i++)
    n += strcmp(w.rec.type[i], type) == 0 && w.rec.seq[i] == 0;
  return n;
}

static const char *str_of(json_t *ev, const char *key) {
  return json_string_value(json_object_get(ev, key));
}

/* ---- runs and pages ------------------------------------------------------------------------ */

/* A run created while a page is visible is dispatched at once, its creating put already saying
 * so, and the page hears of it only once that is durable. */
START_TEST(test_create_dispatches) {
  attach("pageA", 1);
  struct created cr;
  struct orch_run *run = create("print(1)", &cr);
  ck_assert_ptr_nonnull(run);
  ck_assert_int_eq(cr.state, ORCH_RUN_DISPATCHED);
  ck_assert_int_eq(run->attempts, 1);
  ck_assert_str_eq(run->page_id, "pageA");
  stored(cr.run_id, "dispatched", NULL);
  json_t *ev = last("run");
  ck_assert_ptr_nonnull(ev);
  ck_assert_str_eq(json_string_value(json_object_get(ev, "run_id")), cr.run_id);
  ck_assert_str_eq(json_string_value(json_object_get(ev, "page_id")), "pageA");
  ck_assert_str_eq(json_string_value(json_object_get(ev, "code")), "print(1)");
  ck_assert_int_eq(attempt_of(ev), 1);
  ck_assert_uint_eq(w.o->m.runs_created, 1);
  ck_assert_uint_eq(w.o->m.runs_dispatched, 1);
}
END_TEST

/* Without a visible page a run waits paused; a page that becomes visible takes it. */
START_TEST(test_paused_until_a_page) {
  struct orch_page *p = attach("pageA", 0);
  struct created cr;
  struct orch_run *run = create("x", &cr);
  ck_assert_int_eq(run->state, ORCH_RUN_PAUSED);
  stored(cr.run_id, "paused", NULL);
  ck_assert_uint_eq(count("run"), 0);
  presence(p, 1);
  ck_assert_int_eq(run->state, ORCH_RUN_DISPATCHED);
  drain();
  ck_assert_int_eq(attempt_of(last("run")), 1);
  stored(cr.run_id, "dispatched", NULL);
}
END_TEST

/* A page going hidden pauses the run it holds; back, the run is sent again as a new attempt, and
 * the old attempt's result is refused. */
START_TEST(test_hidden_then_back_is_a_new_attempt) {
  struct orch_page *p = attach("pageA", 1);
  struct created cr;
  struct orch_run *run = started("x", &cr);
  presence(p, 0);
  ck_assert_int_eq(run->state, ORCH_RUN_PAUSED);
  ck_assert_uint_eq(w.o->m.pauses, 1);
  drain();
  stored(cr.run_id, "paused", NULL);
  presence(p, 1);
  drain();
  ck_assert_int_eq(run->state, ORCH_RUN_DISPATCHED);
  ck_assert_int_eq(attempt_of(last("run")), 2);
  ck_assert_uint_eq(w.o->m.attempts_redispatched, 1);
  struct orch_result stale = {.attempt = 1, .hash = "h", .status = ORCH_RUN_STATUS_OK};
  struct ended e = {0};
  ck_assert_int_eq(orch__run_submit_result(w.o, run, &stale, on_end, &e), SBX_ECONFLICT);
  ck_assert_int_eq(run->state, ORCH_RUN_DISPATCHED);
  ck_assert_int_eq(e.called, 0);
}
END_TEST

/* The active page is the one most recently made visible; a dropped page runs nothing in its
 * grace and, gone past it, its run goes to another page. */
START_TEST(test_page_gone_after_grace) {
  struct orch_page *a = attach("pageA", 1);
  struct created cr;
  struct orch_run *run = create("x", &cr);
  ck_assert_str_eq(run->page_id, "pageA");
  struct orch_page *b = attach("pageB", 0);
  ck_assert_int_eq(orch__page_drop(a, w.o->rt.page_grace_ms), 0);
  orch__chat_page_changed(w.chat, a);
  ck_assert_int_eq(run->state, ORCH_RUN_DISPATCHED); /* in its grace: it may come back */
  fake_now += w.o->rt.page_grace_ms;
  orch__chat_tick(w.chat); /* a is gone and freed: its run is paused */
  ck_assert_int_eq(run->state, ORCH_RUN_PAUSED);
  presence(b, 1);
  ck_assert_str_eq(run->page_id, "pageB");
  ck_assert_int_eq(run->attempts, 2);
  drain();
}
END_TEST

/* Paused past CODE_PAUSED_WAIT_MS: abandoned, with a message; who waited hears of it. */
START_TEST(test_pause_wait_abandons) {
  struct created cr;
  struct orch_run *run = create("x", &cr);
  ck_assert_int_eq(run->state, ORCH_RUN_PAUSED);
  struct ended e = {0};
  ck_assert_ptr_nonnull(orch__run_on_end(run, on_end, &e));
  fake_now += w.o->rt.paused_wait_ms - 1;
  orch__chat_tick(w.chat);
  ck_assert_int_eq(e.called, 0);
  fake_now += 1;
  orch__chat_tick(w.chat);
  ck_assert_int_eq(e.called, 0); /* called back once durable */
  drain();
  ck_assert_int_eq(e.called, 1);
  ck_assert_int_eq(e.rc, 0);
  ck_assert_int_eq(e.status, ORCH_RUN_STATUS_ABANDONED);
  ck_assert_str_eq(e.error_type, "Abandoned");
  ck_assert_ptr_null(orch__map_get(&w.o->runs, cr.run_id));
  stored(cr.run_id, "done", "abandoned");
}
END_TEST

/* Started and silent past its time limit plus the grace: timeout, and the page is told to restart
 * its kernel; never started: crashed. */
START_TEST(test_watchdog) {
  struct orch_page *p = attach("pageA", 1);
  struct created cr;
  struct orch_run *run = started("while True: pass", &cr);
  struct ended e = {0};
  orch__run_on_end(run, on_end, &e);
  live_for(p, 10000 + w.o->rt.watchdog_grace_ms); /* its page is alive: the code is stuck */
  drain();
  ck_assert_int_eq(e.called, 1);
  ck_assert_int_eq(e.status, ORCH_RUN_STATUS_TIMEOUT);
  ck_assert_str_eq(e.error_type, "TimeoutError");
  ck_assert_int_eq(e.restarted, 1);
  json_t *ev = last("restart");
  ck_assert_ptr_nonnull(ev);
  ck_assert_str_eq(json_string_value(json_object_get(ev, "run_id")), cr.run_id);
  ck_assert_uint_eq(w.o->m.restarts, 1);
  stored(cr.run_id, "done", "timeout");
  struct created cr2;
  run = create("x", &cr2); /* the next one, never started */
  ck_assert_int_eq(run->state, ORCH_RUN_DISPATCHED);
  orch__run_on_end(run, on_end, &e);
  live_for(p, 10000 + w.o->rt.watchdog_grace_ms);
  drain();
  ck_assert_int_eq(e.status, ORCH_RUN_STATUS_CRASHED);
  ck_assert_str_eq(e.error_type, "KernelCrashed");
}
END_TEST

/* Cancel: a paused run ends at once; a running one is sent `cancel` and ends after the grace. */
START_TEST(test_cancel) {
  struct created cr;
  struct orch_run *run = create("x", &cr);
  struct ended e = {0};
  ck_assert_int_eq(orch__run_cancel(w.o, run, on_end, &e), 0);
  drain();
  ck_assert_int_eq(e.called, 1);
  ck_assert_int_eq(e.status, ORCH_RUN_STATUS_CANCELLED);
  ck_assert_str_eq(e.error_type, "Cancelled");
  stored(cr.run_id, "done", "cancelled");
  attach("pageA", 1);
  run = create("x", &cr);
  ck_assert_int_eq(orch__run_report_started(w.o, run, 1), 0);
  memset(&e, 0, sizeof(e));
  ck_assert_int_eq(orch__run_cancel(w.o, run, on_end, &e), SBX_EINPROGRESS);
  drain();
  json_t *ev = last("cancel");
  ck_assert_ptr_nonnull(ev);
  ck_assert_int_eq(attempt_of(ev), 1);
  ck_assert_int_eq(e.called, 0); /* not registered: the run goes on until the page answers */
  orch__run_on_end(run, on_end, &e);
  fake_now += w.o->rt.cancel_grace_ms;
  orch__chat_tick(w.chat);
  drain();
  ck_assert_int_eq(e.called, 1);
  ck_assert_int_eq(e.status, ORCH_RUN_STATUS_CANCELLED);
  ck_assert_int_eq(e.restarted, 1);
}
END_TEST

/* A result ends the run; the next run of the chat waits for it, then goes (one at a time). */
START_TEST(test_result_and_order) {
  attach("pageA", 1);
  struct created c1, c2;
  struct orch_run *r1 = create("first", &c1);
  struct orch_run *r2 = create("second", &c2);
  ck_assert_int_eq(r1->state, ORCH_RUN_DISPATCHED);
  ck_assert_int_eq(r2->state, ORCH_RUN_QUEUED);
  struct ended e;
  result(r1, "ok", "hello\n", &e);
  drain();
  ck_assert_int_eq(e.called, 1);
  ck_assert_int_eq(e.rc, 0);
  ck_assert_int_eq(e.state, ORCH_RUN_DONE);
  ck_assert_str_eq(e.stdout_text, "hello\n");
  stored(c1.run_id, "done", "ok");
  ck_assert_int_eq(r2->state, ORCH_RUN_DISPATCHED);
  ck_assert_str_eq(json_string_value(json_object_get(last("run"), "run_id")), c2.run_id);
  ck_assert_uint_eq(w.o->m.results_accepted, 1);
}
END_TEST

/* A page's stdout is kept to 8,000 characters (code points), the flag set. */
START_TEST(test_result_output_capped) {
  attach("pageA", 1);
  struct created cr;
  struct orch_run *run = create("print('☃' * 9000)", &cr);
  size_t n = 9000 * 3;
  char *out = malloc(n + 1);
  for (size_t i = 0; i < n; i += 3)
    memcpy(out + i, "\xe2\x98\x83", 3);
  out[n] = '\0';
  struct ended e;
  result(run, "ok", out, &e);
  free(out);
  drain();
  ck_assert_int_eq(e.called, 1);
  ck_assert_uint_eq(e.stdout_chars, ORCH_OUT_CHARS);
  ck_assert_int_eq(e.stdout_truncated, 1);
}
END_TEST

/* An output file uploaded for the attempt is stored with the result: FINISHING until then, the
 * run's files recorded, the chat told; a file of an earlier attempt is not kept. */
START_TEST(test_result_with_a_file) {
  attach("pageA", 1);
  struct created cr;
  struct orch_run *run = create("open('/mnt/output/a.txt','w').write('hi')", &cr);
  struct orch_upload *u = upload(run, "a.txt", "hi");
  char sha[65];
  memcpy(sha, u->sha256, sizeof(sha)); /* u goes with the run's end */
  ck_assert_ptr_eq(orch__run_upload(run, "a.txt"), u);
  ck_assert_uint_eq(w.o->pending_upload_bytes, 2);
  struct ended e = {0};
  ck_assert_int_eq(result_with(run, u, &e), 0);
  ck_assert_int_eq(run->state, ORCH_RUN_FINISHING);
  ck_assert_str_eq(run->finishing_hash, "h");
  ck_assert_int_eq(orch__run_cancel(w.o, run, NULL, NULL), SBX_ESTATE); /* nothing ends it now */
  drain();
  ck_assert_int_eq(e.called, 1);
  ck_assert_int_eq(e.rc, 0);
  ck_assert_int_eq(e.files_recorded, 1);
  ck_assert_ptr_nonnull(last("files"));
  ck_assert_uint_eq(w.o->pending_upload_bytes, 0);
  struct store_file *fv = NULL;
  size_t n = 0;
  ck_assert_int_eq(store_run_files(w.o->st, cr.run_id, &fv, &n), 0);
  ck_assert_uint_eq(n, 1);
  ck_assert_str_eq(fv[0].name, "a.txt");
  ck_assert_str_eq(fv[0].sha256, sha);
  store_file_list_free(fv, n);
}
END_TEST

/* An output file the store refuses: the result's own answer hears of it (SBX_ENAME), the run goes
 * back to where it was and whoever else waits for its end keeps waiting; the page may retry. */
START_TEST(test_result_file_refused) {
  attach("pageA", 1);
  struct created cr;
  struct orch_run *run = create("x", &cr);
  struct ended other = {0};
  ck_assert_ptr_nonnull(orch__run_on_end(run, on_end, &other)); /* a wait_s, say */
  struct orch_upload *u = upload(run, "../out.txt", "hi");
  struct ended mine = {0};
  ck_assert_int_eq(result_with(run, u, &mine), 0);
  drain();
  ck_assert_int_eq(mine.called, 1);
  ck_assert_int_eq(mine.rc, SBX_ENAME);
  ck_assert_int_eq(mine.state, ORCH_RUN_DISPATCHED);
  ck_assert_int_eq(run->state, ORCH_RUN_DISPATCHED);
  ck_assert_int_eq(other.called, 0);
  result(run, "ok", "again", &mine); /* the retry, without the file */
  drain();
  ck_assert_int_eq(mine.called, 1);
  ck_assert_int_eq(mine.rc, 0);
  ck_assert_int_eq(other.called, 1);
  ck_assert_int_eq(other.status, ORCH_RUN_STATUS_OK);
  stored(cr.run_id, "done", "ok");
}
END_TEST

/* ---- output while a run goes -------------------------------------------------------------- */

/* Chunks are held and published to the chat's pages as live events (no seq): a repeated or
 * overlapping chunk is taken from the held length on, never doubled; a gap is not taken (the page
 * resends from what it is told); characters are code points; the cap holds mid-stream. */
START_TEST(test_output_live) {
  attach("pageA", 1);
  struct created cr;
  struct orch_run *run = create("print('hello')", &cr);
  struct orch_chunk c1[] = {chunk(ORCH_STDOUT, 0, "hello\n")};
  ck_assert_int_eq(output(run, 1, c1, 1, NULL), 0);
  ck_assert_int_eq(run->state, ORCH_RUN_RUNNING); /* it prints: Python started */
  ck_assert_int_ne(run->rec.started_at, 0);
  ck_assert_str_eq(held(run, ORCH_STDOUT), "hello\n");
  json_t *ev = last("output");
  ck_assert_ptr_nonnull(ev);
  ck_assert_str_eq(str_of(ev, "stream"), "stdout");
  ck_assert_str_eq(str_of(ev, "text"), "hello\n");
  ck_assert_int_eq(json_integer_value(json_object_get(ev, "offset")), 0);
  ck_assert_int_eq(attempt_of(ev), 1);
  ck_assert_uint_eq(count_seq0("output"), 1); /* live: not in the durable log */
  struct orch_chunk c2[] = {chunk(ORCH_STDOUT, 0, "hello\n"), chunk(ORCH_STDOUT, 3, "lo\nwörld\n")};
  ck_assert_int_eq(output(run, 1, c2, 2, NULL), 0);
  ck_assert_str_eq(held(run, ORCH_STDOUT), "hello\nwörld\n");
  ck_assert_uint_eq(run->live.out[ORCH_STDOUT].chars, 12);
  ev = last("output");
  ck_assert_str_eq(str_of(ev, "text"), "wörld\n");
  ck_assert_int_eq(json_integer_value(json_object_get(ev, "offset")), 6);
  struct orch_chunk gap[] = {chunk(ORCH_STDOUT, 20, "late"), chunk(ORCH_STDERR, 0, "warn\n")};
  ck_assert_int_eq(output(run, 1, gap, 2, NULL), 0);
  ck_assert_str_eq(held(run, ORCH_STDOUT), "hello\nwörld\n"); /* the gap: not taken */
  ck_assert_str_eq(held(run, ORCH_STDERR), "warn\n");
  ck_assert_uint_eq(count("output"), 3);
  size_t n_out, n_err, n_disp;
  orch__live_held(run, &n_out, &n_err, &n_disp);
  ck_assert_uint_eq(n_out, 12);
  ck_assert_uint_eq(n_err, 5);
  ck_assert_uint_eq(n_disp, 0);
  ck_assert_int_eq(output(run, 2, c1, 1, NULL), SBX_ECONFLICT); /* not its attempt */
  /* the cap, mid-stream: 8,000 characters held and published, the rest dropped and flagged */
  char *big = malloc(9001);
  memset(big, 'x', 9000);
  big[9000] = '\0';
  struct orch_chunk c3[] = {chunk(ORCH_STDOUT, 12, big)};
  ck_assert_int_eq(output(run, 1, c3, 1, NULL), 0);
  free(big);
  ck_assert_uint_eq(run->live.out[ORCH_STDOUT].chars, ORCH_OUT_CHARS);
  ck_assert_int_eq(run->live.out[ORCH_STDOUT].cut, 1);
  ck_assert_uint_eq(strlen(str_of(last("output"), "text")), ORCH_OUT_CHARS - 12);
  size_t published = count("output");
  struct orch_chunk c4[] = {chunk(ORCH_STDOUT, 9012, "more")};
  ck_assert_int_eq(output(run, 1, c4, 1, NULL), 0);
  ck_assert_uint_eq(count("output"), published); /* nothing past the cap goes out */
  struct ended e;
  result(run, "ok", NULL, &e); /* a result without stdout keeps what was held */
  drain();
  ck_assert_int_eq(e.called, 1);
  ck_assert_uint_eq(e.stdout_chars, ORCH_OUT_CHARS);
  ck_assert_int_eq(e.stdout_truncated, 1);
}
END_TEST

/* Every ending the orchestrator decides keeps what the attempt printed: the watchdog, the cancel
 * grace, a cancel while paused, abandonment after the page went silent. */
START_TEST(test_endings_keep_output) {
  struct orch_page *p = attach("pageA", 1);
  struct created cr;
  struct orch_run *run = create("print('spinning'); while True: pass", &cr);
  struct orch_chunk c[] = {chunk(ORCH_STDOUT, 0, "spinning\n"), chunk(ORCH_STDERR, 0, "w\n")};
  ck_assert_int_eq(output(run, 1, c, 2, NULL), 0);
  struct ended e = {0};
  orch__run_on_end(run, on_end, &e);
  live_for(p, 10000 + w.o->rt.watchdog_grace_ms);
  drain();
  ck_assert_int_eq(e.status, ORCH_RUN_STATUS_TIMEOUT);
  ck_assert_str_eq(e.stdout_text, "spinning\n");
  struct store_run r;
  ck_assert_int_eq(store_run_get(w.o->st, cr.run_id, &r), 0);
  ck_assert_str_eq(r.stdout_text, "spinning\n");
  ck_assert_str_eq(r.stderr_text, "w\n");
  store_run_free(&r);
  /* the cancel grace */
  run = create("x", &cr);
  ck_assert_int_eq(output(run, 1, c, 1, NULL), 0);
  ck_assert_int_eq(orch__run_cancel(w.o, run, NULL, NULL), SBX_EINPROGRESS);
  memset(&e, 0, sizeof(e));
  orch__run_on_end(run, on_end, &e);
  live_for(p, w.o->rt.cancel_grace_ms);
  drain();
  ck_assert_int_eq(e.status, ORCH_RUN_STATUS_CANCELLED);
  ck_assert_str_eq(e.stdout_text, "spinning\n");
  /* the page goes silent: paused; then abandoned past the wait, with what it printed */
  run = create("x", &cr);
  ck_assert_int_eq(output(run, 1, c, 1, NULL), 0);
  fake_now += w.o->rt.page_silent_ms;
  orch__chat_tick(w.chat);
  ck_assert_int_eq(p->state, ORCH_PAGE_SILENT);
  ck_assert_int_eq(run->state, ORCH_RUN_PAUSED);
  memset(&e, 0, sizeof(e));
  orch__run_on_end(run, on_end, &e);
  fake_now += w.o->rt.paused_wait_ms;
  orch__chat_tick(w.chat);
  drain();
  ck_assert_int_eq(e.status, ORCH_RUN_STATUS_ABANDONED);
  ck_assert_str_eq(e.stdout_text, "spinning\n");
  ck_assert_str_eq(e.error_type, "Abandoned");
  /* cancelled while paused: the same */
  presence(p, 1);
  run = create("x", &cr);
  ck_assert_int_eq(output(run, 1, c, 1, NULL), 0);
  presence(p, 0);
  ck_assert_int_eq(run->state, ORCH_RUN_PAUSED);
  memset(&e, 0, sizeof(e));
  ck_assert_int_eq(orch__run_cancel(w.o, run, on_end, &e), 0);
  drain();
  ck_assert_int_eq(e.status, ORCH_RUN_STATUS_CANCELLED);
  ck_assert_str_eq(e.stdout_text, "spinning\n");
}
END_TEST

/* A page holding a run silent for PAGE_SILENT_MS: it counts as hidden (the run paused, counted);
 * its next sign of life (any page call about the run, or presence) makes it visible and the run
 * goes out again as a new attempt; the silent attempt's calls are refused.  A page that keeps its
 * heartbeat is never paused. */
START_TEST(test_silence) {
  struct orch_page *p = attach("pageA", 1);
  struct created cr;
  struct orch_run *run = started("import time; time.sleep(30)", &cr);
  live_for(p, 15000); /* heartbeats: never silent (within its 10 s + the grace) */
  ck_assert_int_eq(run->state, ORCH_RUN_RUNNING);
  ck_assert_uint_eq(w.o->m.pages_silent, 0);
  fake_now += w.o->rt.page_silent_ms - 1;
  orch__chat_tick(w.chat);
  ck_assert_int_eq(run->state, ORCH_RUN_RUNNING);
  fake_now += 1;
  orch__chat_tick(w.chat);
  ck_assert_int_eq(p->state, ORCH_PAGE_SILENT);
  ck_assert_int_eq(run->state, ORCH_RUN_PAUSED);
  ck_assert_uint_eq(w.o->m.pages_silent, 1);
  ck_assert_uint_eq(w.o->m.paused_by_silence, 1);
  drain();
  stored(cr.run_id, "paused", NULL);
  ck_assert_uint_eq(count("run"), 1);
  /* its late call about attempt 1 is its sign of life: visible, attempt 2 goes out */
  orch__run_sign_of_life(run, 1);
  ck_assert_int_eq(p->state, ORCH_PAGE_VISIBLE);
  ck_assert_int_eq(run->state, ORCH_RUN_DISPATCHED);
  ck_assert_int_eq(run->attempts, 2);
  struct orch_chunk c[] = {chunk(ORCH_STDOUT, 0, "late")};
  ck_assert_int_eq(output(run, 1, c, 1, NULL), SBX_ECONFLICT);
  struct orch_result stale = {.attempt = 1, .hash = "h", .status = ORCH_RUN_STATUS_OK};
  struct ended e = {0};
  ck_assert_int_eq(orch__run_submit_result(w.o, run, &stale, on_end, &e), SBX_ECONFLICT);
  drain();
  ck_assert_int_eq(attempt_of(last("run")), 2);
  /* silent again (counted from the new dispatch); presence brings it back */
  fake_now += w.o->rt.page_silent_ms;
  orch__chat_tick(w.chat);
  ck_assert_int_eq(run->state, ORCH_RUN_PAUSED);
  presence(p, 1);
  ck_assert_int_eq(run->attempts, 3);
  ck_assert_uint_eq(w.o->m.pages_silent, 2);
  result(run, "ok", "done", &e);
  drain();
  ck_assert_int_eq(e.status, ORCH_RUN_STATUS_OK);
  /* off: PAGE_SILENT_MS=0 */
  w.o->rt.page_silent_ms = 0;
  run = create("x", &cr);
  fake_now += 20000; /* silent, and within the watchdog */
  orch__chat_tick(w.chat);
  ck_assert_int_eq(run->state, ORCH_RUN_DISPATCHED);
}
END_TEST

/* input(): the run waits (its watchdog stopped: however long the wait, no timeout), the answer
 * goes to its page as a durable `input` event and the watchdog runs again with what it had left;
 * an answer when it does not wait is refused; an output call without the request ends the wait
 * (EOF on the page), and so does the input wait passing without a word. */
START_TEST(test_input) {
  struct orch_page *p = attach("pageA", 1);
  struct created cr;
  struct orch_run *run = create("input('name? ')", &cr);
  ck_assert_int_eq(orch__run_give_input(w.o, run, "early"), SBX_ESTATE);
  ck_assert_int_eq(orch__run_report_started(w.o, run, 1), 0);
  fake_now += 4000; /* the watchdog has 10 s + grace - 4 s left */
  struct orch_chunk c[] = {chunk(ORCH_STDOUT, 0, "asking\n")};
  ck_assert_int_eq(output(run, 1, c, 1, "name? "), 0);
  ck_assert_int_eq(run->state, ORCH_RUN_WAITING_INPUT);
  ck_assert_str_eq(str_of(last("input_request"), "prompt"), "name? ");
  ck_assert_str_eq(held(run, ORCH_STDOUT), "asking\n"); /* printed before it asked */
  drain();
  stored(cr.run_id, "waiting_input", NULL);
  ck_assert_int_eq(output(run, 1, NULL, 0, "name? "), 0); /* the same call again */
  ck_assert_uint_eq(count("input_request"), 1);
  live_for(p, 200000); /* waiting: no watchdog */
  ck_assert_int_eq(run->state, ORCH_RUN_WAITING_INPUT);
  ck_assert_int_eq(orch__run_give_input(w.o, run, "Ada"), 0);
  ck_assert_int_eq(run->state, ORCH_RUN_RUNNING);
  ck_assert_int_eq(orch__run_give_input(w.o, run, "again"), SBX_ESTATE);
  drain();
  json_t *ev = last("input");
  ck_assert_ptr_nonnull(ev);
  ck_assert_str_eq(str_of(ev, "text"), "Ada");
  ck_assert_str_eq(str_of(ev, "page_id"), "pageA");
  ck_assert_int_eq(attempt_of(ev), 1);
  ck_assert_int_gt(w.rec.seq[w.rec.n - 1], 0); /* durable: with its seq */
  struct ended e = {0};
  orch__run_on_end(run, on_end, &e);
  uint64_t left = 10000 + w.o->rt.watchdog_grace_ms - 4000;
  live_for(p, left - 2000);
  ck_assert_int_eq(e.called, 0);
  live_for(p, 2000);
  drain();
  ck_assert_int_eq(e.status, ORCH_RUN_STATUS_TIMEOUT);
  /* EOF on the page: an output call without the request */
  run = create("input()", &cr);
  ck_assert_int_eq(output(run, 1, NULL, 0, ""), 0);
  ck_assert_int_eq(run->state, ORCH_RUN_WAITING_INPUT);
  ck_assert_int_eq(output(run, 1, NULL, 0, NULL), 0);
  ck_assert_int_eq(run->state, ORCH_RUN_RUNNING);
  /* no word past the input wait: running again */
  ck_assert_int_eq(output(run, 1, NULL, 0, "again? "), 0);
  live_for(p, (uint64_t)w.o->rt.input_wait_s * 1000 + w.o->rt.watchdog_grace_ms);
  ck_assert_int_eq(run->state, ORCH_RUN_RUNNING);
  ck_assert_ptr_null(run->live.prompt);
  /* a result while it waits ends it */
  ck_assert_int_eq(output(run, 1, NULL, 0, "last? "), 0);
  result(run, "error", "", &e);
  drain();
  ck_assert_int_eq(e.status, ORCH_RUN_STATUS_ERROR);
  /* paused while it waits: nobody is asked any more (a page that attaches is not sent it) */
  run = create("input()", &cr);
  ck_assert_int_eq(output(run, 1, NULL, 0, "name? "), 0);
  presence(p, 0);
  ck_assert_int_eq(run->state, ORCH_RUN_PAUSED);
  ck_assert_ptr_null(run->live.prompt);
  presence(p, 1);
  ck_assert_int_eq(run->attempts, 2); /* it asks again */
}
END_TEST

static json_t *bundle_of(const char *plain, const char *html_text, size_t html_len) {
  json_t *b = json_pack("{s:s}", "text/plain", plain);
  if (html_text)
    json_object_set_new(b, "text/html", json_stringn(html_text, html_len));
  return b;
}

/* display() bundles: held by index (a repeat or a gap not taken) and published; a bundle whose
 * rich part is over ORCH_BUNDLE_BYTES is kept as text only, with a note.  A result's value is
 * stored with the run; a result that lists no displays keeps the held ones. */
START_TEST(test_value_and_displays) {
  attach("pageA", 1);
  struct created cr;
  struct orch_run *run = create("display(1); display(df); 41 + 1", &cr);
  json_t *b0 = bundle_of("1", NULL, 0);
  char *big = malloc(ORCH_BUNDLE_BYTES + 2);
  memset(big, 'h', ORCH_BUNDLE_BYTES + 1);
  json_t *b1 = bundle_of("<DataFrame>", big, ORCH_BUNDLE_BYTES + 1);
  free(big);
  ck_assert_int_eq(output_display(run, 1, b1), 0); /* a gap: not taken */
  ck_assert_uint_eq(orch__live_displays(run), 0);
  ck_assert_int_eq(output_display(run, 0, b0), 0);
  ck_assert_int_eq(output_display(run, 0, b0), 0); /* a repeat */
  ck_assert_int_eq(output_display(run, 1, b1), 0);
  ck_assert_uint_eq(orch__live_displays(run), 2);
  ck_assert_uint_eq(count("display"), 2);
  json_t *ev = last("display");
  ck_assert_int_eq(json_integer_value(json_object_get(ev, "index")), 1);
  json_t *data = json_object_get(ev, "data");
  ck_assert_str_eq(str_of(data, "text/plain"), "<DataFrame>");
  ck_assert_ptr_null(json_object_get(data, "text/html")); /* over the bound: text only */
  json_t *value = json_pack("{s:s, s:i}", "text/plain", "42", "application/json", 42);
  struct orch_result res = {
      .attempt = 1, .hash = "h", .status = ORCH_RUN_STATUS_OK, .value = value};
  struct ended e = {0};
  ck_assert_int_eq(orch__run_submit_result(w.o, run, &res, on_end, &e), 0);
  drain();
  ck_assert_int_eq(e.called, 1);
  struct store_run r;
  ck_assert_int_eq(store_run_get(w.o->st, cr.run_id, &r), 0);
  json_t *j = orch__run_json(NULL, &r);
  ck_assert_str_eq(str_of(json_object_get(j, "value"), "text/plain"), "42");
  json_t *shown = json_object_get(j, "displays");
  ck_assert_uint_eq(json_array_size(shown), 2);
  ck_assert_str_eq(str_of(json_array_get(shown, 0), "text/plain"), "1");
  ck_assert_ptr_nonnull(strstr(r.notes_json, "display 2: shown as text only"));
  json_decref(j);
  store_run_free(&r);
  /* a result that lists its displays: those */
  run = create("display(2)", &cr);
  ck_assert_int_eq(output_display(run, 0, b0), 0);
  json_t *listed = json_pack("[O, O]", b1, b0);
  struct orch_result res2 = {
      .attempt = 1, .hash = "h", .status = ORCH_RUN_STATUS_OK, .displays = listed};
  ck_assert_int_eq(orch__run_submit_result(w.o, run, &res2, on_end, &e), 0);
  drain();
  ck_assert_int_eq(store_run_get(w.o->st, cr.run_id, &r), 0);
  ck_assert_ptr_null(r.value_json);
  j = json_loads(r.displays_json, 0, NULL);
  ck_assert_uint_eq(json_array_size(j), 2);
  ck_assert_str_eq(str_of(json_array_get(j, 0), "text/plain"), "<DataFrame>");
  json_decref(j);
  store_run_free(&r);
  json_decref(listed);
  json_decref(value);
  json_decref(b0);
  json_decref(b1);
}
END_TEST

/* ---- the run-event API --------------------------------------------------------------------- */

#define MAX_SEEN 64
struct seen {
  size_t n;
  int64_t seq[MAX_SEEN];
  enum orch_run_ev kind[MAX_SEEN];
  char data[MAX_SEEN][2048];
  int rc, unwatch_first;
  struct orch_watch *self;
};

static void on_watch(void *ud, const struct orch_run_event *ev) {
  struct seen *s = ud;
  ck_assert_uint_lt(s->n, MAX_SEEN);
  s->seq[s->n] = ev->seq;
  s->kind[s->n] = ev->kind;
  snprintf(s->data[s->n], sizeof(s->data[s->n]), "%.*s", (int)ev->len, ev->data);
  s->n++;
  if (ev->kind == ORCH_RUN_EV_END)
    s->rc = ev->rc;
  if (s->unwatch_first && s->self && s->n == 2)
    orch__run_unwatch(s->self); /* from its own callback */
}

static int has(const struct seen *s, size_t i, enum orch_run_ev kind, const char *part) {
  return i < s->n && s->kind[i] == kind && strstr(s->data[i], part) != NULL;
}

/* A watcher hears every change of the run in order, numbered; a new one first gets the run as it
 * is (state, held output, displays, the pending request); one that resumes after a seq gets the
 * events after it; `end` comes last, once durable, and the watch is over.  A watcher may leave
 * from its own callback. */
START_TEST(test_watch) {
  struct created cr;
  struct orch_run *run = create("x", &cr); /* no page: paused */
  struct seen a = {0}, b = {0}, c = {0}, d = {0};
  ck_assert_ptr_nonnull(orch__run_watch(run, -1, on_watch, &a));
  ck_assert(has(&a, 0, ORCH_RUN_EV_STATE, "\"state\":\"paused\""));
  d.unwatch_first = 1;
  d.self = orch__run_watch(run, -1, on_watch, &d);
  struct orch_page *p = attach("pageA", 1);
  ck_assert(has(&a, 1, ORCH_RUN_EV_STATE, "\"state\":\"dispatched\""));
  ck_assert(has(&a, 1, ORCH_RUN_EV_STATE, "\"attempt\":1"));
  ck_assert_int_gt(a.seq[1], a.seq[0]);
  int64_t after_dispatch = a.seq[1];
  struct orch_chunk c1[] = {chunk(ORCH_STDOUT, 0, "one\n")};
  ck_assert_int_eq(output(run, 1, c1, 1, NULL), 0);
  ck_assert(has(&a, 2, ORCH_RUN_EV_STATE, "running")); /* output: started */
  ck_assert(has(&a, 3, ORCH_RUN_EV_OUTPUT, "\"text\":\"one\\n\",\"offset\":0"));
  struct orch_chunk c2[] = {chunk(ORCH_STDOUT, 4, "two\n")};
  ck_assert_int_eq(output(run, 1, c2, 1, "ok? "), 0);
  ck_assert(has(&a, 4, ORCH_RUN_EV_OUTPUT, "\"text\":\"two\\n\",\"offset\":4"));
  ck_assert(has(&a, 5, ORCH_RUN_EV_STATE, "waiting_input"));
  ck_assert(has(&a, 6, ORCH_RUN_EV_INPUT_REQUEST, "\"prompt\":\"ok? \""));
  ck_assert_uint_eq(d.n, 2); /* it left after its second event */
  /* resuming after the dispatch: the events after it, from the log */
  ck_assert_ptr_nonnull(orch__run_watch(run, after_dispatch, on_watch, &b));
  ck_assert_uint_eq(b.n, 5);
  for (size_t i = 0; i < 5; i++) {
    ck_assert_int_eq(b.seq[i], a.seq[2 + i]);
    ck_assert_str_eq(b.data[i], a.data[2 + i]);
  }
  /* a new watcher: the run as it is */
  ck_assert_ptr_nonnull(orch__run_watch(run, -1, on_watch, &c));
  ck_assert_uint_eq(c.n, 3);
  ck_assert(has(&c, 0, ORCH_RUN_EV_STATE, "waiting_input"));
  ck_assert(has(&c, 1, ORCH_RUN_EV_OUTPUT, "\"text\":\"one\\ntwo\\n\",\"offset\":0"));
  ck_assert(has(&c, 2, ORCH_RUN_EV_INPUT_REQUEST, "ok? "));
  ck_assert_int_eq(c.seq[2], a.seq[6]);
  /* a new attempt: the log starts again; a resume from before it gets the run as it is */
  presence(p, 0);
  presence(p, 1);
  ck_assert_int_eq(run->attempts, 2);
  struct seen e2 = {0};
  ck_assert_ptr_nonnull(orch__run_watch(run, after_dispatch, on_watch, &e2));
  ck_assert(has(&e2, 0, ORCH_RUN_EV_STATE, "\"attempt\":2"));
  ck_assert_uint_eq(e2.n, 1); /* the new attempt printed nothing yet */
  struct ended e;
  result(run, "ok", "one\n", &e);
  ck_assert(!has(&a, a.n - 1, ORCH_RUN_EV_END, "")); /* not before it is durable */
  drain();
  ck_assert(has(&a, a.n - 1, ORCH_RUN_EV_END, "\"status\":\"ok\""));
  ck_assert(has(&b, b.n - 1, ORCH_RUN_EV_END, "\"stdout\":\"one\\n\""));
  ck_assert(has(&e2, e2.n - 1, ORCH_RUN_EV_END, ""));
  ck_assert_int_eq(a.rc, 0);
  ck_assert(has(&a, a.n - 2, ORCH_RUN_EV_STATE, "\"state\":\"done\""));
  ck_assert_uint_eq(d.n, 2);
}
END_TEST

/* What a result's text adds to what its page streamed goes out as `output` before `end` (the
 * events of a run, joined, are its result's text); a result that does not continue the streamed
 * text adds no event (the result stands). */
START_TEST(test_result_tail) {
  attach("pageA", 1);
  struct created cr;
  struct orch_run *run = create("x", &cr);
  struct seen a = {0};
  ck_assert_ptr_nonnull(orch__run_watch(run, -1, on_watch, &a));
  struct orch_chunk c1[] = {chunk(ORCH_STDOUT, 0, "a\n")};
  ck_assert_int_eq(output(run, 1, c1, 1, NULL), 0);
  size_t before = a.n;
  struct ended e;
  result(run, "ok", "a\nb\n", &e);
  ck_assert(has(&a, before, ORCH_RUN_EV_OUTPUT, "\"text\":\"b\\n\",\"offset\":2"));
  ck_assert_str_eq(held(run, ORCH_STDOUT), "a\nb\n");
  drain();
  ck_assert(has(&a, a.n - 1, ORCH_RUN_EV_END, "\"stdout\":\"a\\nb\\n\""));

  struct orch_run *r2 = create("y", &cr);
  struct seen b = {0};
  ck_assert_ptr_nonnull(orch__run_watch(r2, -1, on_watch, &b));
  struct orch_chunk c2[] = {chunk(ORCH_STDOUT, 0, "streamed\n")};
  ck_assert_int_eq(output(r2, 1, c2, 1, NULL), 0);
  before = b.n;
  result(r2, "ok", "another text\n", &e);
  for (size_t i = before; i < b.n; i++)
    ck_assert_int_ne(b.kind[i], ORCH_RUN_EV_OUTPUT);
  drain();
  ck_assert(has(&b, b.n - 1, ORCH_RUN_EV_END, "\"stdout\":\"another text\\n\""));
}
END_TEST

/* ---- the chat's caps ----------------------------------------------------------------------- */

/* Output files that would take the chat's stored output past CHAT_OUTPUT_QUOTA_MB are not kept:
 * the run is, with a note, and the files within it are. */
START_TEST(test_output_quota) {
  attach("pageA", 1);
  w.o->rt.output_quota_bytes = 5;
  struct created cr;
  struct orch_run *run = create("x", &cr);
  struct orch_upload *u1 = upload(run, "a.txt", "hi");
  struct orch_upload *u2 = upload(run, "big.txt", "123456");
  struct orch_upload *files[] = {u2, u1};
  const char *kinds[] = {"file", "file"};
  struct orch_result res = {.attempt = 1,
                            .hash = "h",
                            .status = ORCH_RUN_STATUS_OK,
                            .files = files,
                            .kinds = kinds,
                            .n_files = 2};
  struct ended e = {0};
  ck_assert_int_eq(orch__run_submit_result(w.o, run, &res, on_end, &e), 0);
  drain();
  ck_assert_int_eq(e.rc, 0);
  ck_assert_int_eq(e.status, ORCH_RUN_STATUS_OK);
  ck_assert_int_eq(e.files_recorded, 1);
  ck_assert_uint_eq(w.o->m.output_files_over_quota, 1);
  struct store_file *fv = NULL;
  size_t n = 0;
  ck_assert_int_eq(store_run_files(w.o->st, cr.run_id, &fv, &n), 0);
  ck_assert_uint_eq(n, 1);
  ck_assert_str_eq(fv[0].name, "a.txt");
  store_file_list_free(fv, n);
  struct store_run r;
  ck_assert_int_eq(store_run_get(w.o->st, cr.run_id, &r), 0);
  ck_assert_ptr_nonnull(strstr(r.notes_json, "big.txt"));
  ck_assert_ptr_nonnull(strstr(r.notes_json, "CHAT_OUTPUT_QUOTA_MB"));
  store_run_free(&r);
  uint64_t bytes = 0;
  ck_assert_int_eq(store_chat_output_bytes(w.o->st, w.chat->id, &bytes), 0);
  ck_assert_uint_eq(bytes, 2);
}
END_TEST

/* At most ORCH_CHAT_UPLOADS bodies arrive at once for a chat. */
START_TEST(test_uploads_per_chat) {
  for (int i = 0; i < ORCH_CHAT_UPLOADS; i++)
    ck_assert_int_eq(orch__chat_upload_begin(w.chat), 0);
  ck_assert_int_eq(orch__chat_upload_begin(w.chat), SBX_EBUSY);
  orch__chat_upload_end(w.chat);
  ck_assert_int_eq(orch__chat_upload_begin(w.chat), 0);
  fake_now += 3600000;
  ck_assert_uint_eq(orch__chats_evict(w.o, 1000), 0); /* uploads arriving keep it */
  for (int i = 0; i < ORCH_CHAT_UPLOADS; i++)
    orch__chat_upload_end(w.chat);
  ck_assert_int_eq(w.chat->uploads, 0);
}
END_TEST

/* ---- turns --------------------------------------------------------------------------------- */

struct finished {
  int called, rc;
  size_t n_runs;
  char run_ids[4][STORE_ID_LEN + 1];
};

static void on_finished(void *ud, int rc, const struct orch_turn *t) {
  struct finished *f = ud;
  f->called++;
  f->rc = rc;
  f->n_runs = t->n_runs;
  for (size_t i = 0; i < t->n_runs && i < 4; i++)
    snprintf(f->run_ids[i], sizeof(f->run_ids[i]), "%s", t->run_ids[i]);
}

/* Finishing a turn makes each python block of its answer an auto run, live in order once all is
 * durable; a second finish, while the first is written or after, is refused. */
START_TEST(test_turn_finish) {
  attach("pageA", 1);
  struct store_turn st = {.state = STORE_TURN_OPEN, .created_at = 1};
  store_new_id(st.id);
  snprintf(st.chat_id, sizeof(st.chat_id), "%s", w.chat->id);
  int ok = 0;
  ck_assert_int_eq(store_turn_put(w.o->st, &st, on_chat_stored, &ok), 0);
  drain();
  ck_assert_int_eq(ok, 1);
  struct finished f = {0};
  const char *answer = "Here:\n```python\nprint(1)\n```\nand\n```py\nprint(2)\n```\n";
  ck_assert_int_eq(orch__turn_finish(w.o, &st, answer, on_finished, &f), 0);
  struct orch_turn *t = orch__map_get(&w.o->turns, st.id);
  ck_assert_ptr_nonnull(t);
  ck_assert_int_eq(t->state, ORCH_TURN_FINISHING);
  ck_assert_int_eq(orch__turn_finish(w.o, &st, answer, on_finished, &f), SBX_ESTATE);
  ck_assert_uint_eq(count("run"), 0); /* nothing runs before it is all durable */
  drain();
  ck_assert_int_eq(f.called, 1);
  ck_assert_int_eq(f.rc, 0);
  ck_assert_uint_eq(f.n_runs, 2);
  ck_assert_ptr_null(orch__map_get(&w.o->turns, st.id));
  struct orch_run *r1 = orch__map_get(&w.o->runs, f.run_ids[0]);
  struct orch_run *r2 = orch__map_get(&w.o->runs, f.run_ids[1]);
  ck_assert_int_eq(r1->state, ORCH_RUN_DISPATCHED);
  ck_assert_int_eq(r2->state, ORCH_RUN_QUEUED);
  ck_assert_str_eq(r1->rec.code, "print(1)");
  ck_assert_str_eq(r1->rec.origin, "auto");
  ck_assert_str_eq(r2->rec.turn_id, st.id);
  struct store_turn again;
  ck_assert_int_eq(store_turn_get(w.o->st, st.id, &again), 0);
  ck_assert_int_eq(again.state, STORE_TURN_FINISHED);
  ck_assert_int_eq(orch__turn_finish(w.o, &again, answer, on_finished, &f), SBX_ESTATE);
  store_turn_free(&again);
}
END_TEST

/* ---- chats in memory ----------------------------------------------------------------------- */

START_TEST(test_active_page) {
  struct orch_chat *c = w.chat;
  ck_assert_ptr_null(orch__chat_active_page(c));
  struct orch_page a, b;
  orch__page_init(&a, "a");
  orch__page_init(&b, "b");
  sbx_list_insert_tail(&c->pages, &a.chat_link);
  sbx_list_insert_tail(&c->pages, &b.chat_link);
  ck_assert_ptr_eq(orch__chat_page(c, "b"), &b);
  ck_assert_ptr_null(orch__chat_page(c, "zz"));
  ck_assert_int_eq(orch__page_attach(&a, 1, &c->visible_counter), 0);
  ck_assert_int_eq(orch__page_attach(&b, 0, &c->visible_counter), 0);
  ck_assert_ptr_eq(orch__chat_active_page(c), &a); /* b is hidden */
  ck_assert_int_eq(orch__page_presence(&b, 1, &c->visible_counter), 0);
  ck_assert_ptr_eq(orch__chat_active_page(c), &b); /* most recently visible */
  ck_assert_int_eq(orch__page_drop(&b, 100), 0);
  ck_assert_ptr_eq(orch__chat_active_page(c), &a); /* in its grace b runs nothing */
  ck_assert_int_eq(orch__page_presence(&a, 0, &c->visible_counter), 0);
  ck_assert_ptr_null(orch__chat_active_page(c));
  sbx_list_remove(&a.chat_link);
  sbx_list_remove(&b.chat_link);
}
END_TEST

/* Idle chats leave memory only when nothing is live (no run, page, listener, event in flight). */
START_TEST(test_evict_idle_only) {
  struct orch *o = w.o;
  orch__chat_unlisten(&w.rec.l); /* the test chat idles too */
  struct orch_chat *idle = orch__chat_add(o, "idle", "h", 0);
  struct orch_chat *paged = orch__chat_add(o, "paged", "h", 0);
  struct orch_chat *busy = orch__chat_add(o, "busy", "h", 0);
  struct orch_page p;
  orch__page_init(&p, "p");
  sbx_list_insert_tail(&paged->pages, &p.chat_link);
  busy->events_inflight = 1;
  fake_now += 299999;
  ck_assert_uint_eq(orch__chats_evict(o, 300000), 0); /* not idle long enough */
  fake_now += 1;
  struct orch_chat *fresh = orch__chat_add(o, "fresh", "h", 0); /* used just now */
  ck_assert_uint_eq(orch__chats_evict(o, 300000), 2);           /* idle and the test chat */
  ck_assert_ptr_null(orch__map_get(&o->chats, "idle"));
  ck_assert_ptr_eq(orch__map_get(&o->chats, "paged"), paged);
  ck_assert_ptr_eq(orch__map_get(&o->chats, "busy"), busy);
  ck_assert_ptr_eq(orch__map_get(&o->chats, "fresh"), fresh);
  busy->events_inflight = 0;
  ck_assert_uint_eq(orch__chats_evict(o, 300000), 1);
  ck_assert_ptr_null(orch__map_get(&o->chats, "busy"));
  sbx_list_remove(&p.chat_link);
  (void)idle;
  w.chat = NULL;
}
END_TEST

int main(void) {
  Suite *s = suite_create("chat");
  TCase *tc = tcase_create("scheduler");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_create_dispatches);
  tcase_add_test(tc, test_paused_until_a_page);
  tcase_add_test(tc, test_hidden_then_back_is_a_new_attempt);
  tcase_add_test(tc, test_page_gone_after_grace);
  tcase_add_test(tc, test_pause_wait_abandons);
  tcase_add_test(tc, test_watchdog);
  tcase_add_test(tc, test_cancel);
  tcase_add_test(tc, test_result_and_order);
  tcase_add_test(tc, test_result_output_capped);
  tcase_add_test(tc, test_result_with_a_file);
  tcase_add_test(tc, test_result_file_refused);
  tcase_add_test(tc, test_output_live);
  tcase_add_test(tc, test_endings_keep_output);
  tcase_add_test(tc, test_silence);
  tcase_add_test(tc, test_input);
  tcase_add_test(tc, test_value_and_displays);
  tcase_add_test(tc, test_watch);
  tcase_add_test(tc, test_result_tail);
  tcase_add_test(tc, test_output_quota);
  tcase_add_test(tc, test_uploads_per_chat);
  tcase_add_test(tc, test_turn_finish);
  tcase_add_test(tc, test_active_page);
  tcase_add_test(tc, test_evict_idle_only);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
