/* chat.c -- the per-chat scheduler: runs of one chat execute one at a time, in creation order,
 * on the chat's active page (attached, visible, most recently made visible).
 *
 * What it does: loads chats on first use; makes new runs durable and live (orch__run_create: one
 * put that already records the first step, the `run` event behind it) and reloads unfinished
 * ones at start; pumps the queue (dispatch the head run with its mount manifest computed from the
 * database, or pause it while no page can take it); reacts to pages changing (hidden or gone ->
 * the run it ran is paused and re-dispatched as a new attempt elsewhere or later); cancels; ends
 * runs by their deadlines for the cron; settles finished runs (persist, then call back whoever
 * waits for the end, drop from memory).  Every run transition is a step of run.c; every page
 * transition a step of page.c.  What it does not do: know of HTTP (who waits for a run's end
 * registers a callback, orch__run_on_end), or take what pages report (report.c).
 */

#include "internal.h"
#include "orch_notes.h" /* the sentences a user reads, from worker/notes.js */
#include <string.h>

/* What a pump did to the head run of a chat. */
enum pump_step { PUMP_NONE = 0, PUMP_PAUSED, PUMP_DISPATCHED };

static struct orch_run *head_run(struct orch_chat *c);
/* Dispatches the head run when a page can take it, pauses it when none can. */
static void chat_pump(struct orch_chat *c);

/* ---- run records -------------------------------------------------------------------------- */

static void set_str(char **slot, const char *v) {
  if (*slot && v && strcmp(*slot, v) == 0)
    return;
  sbx_free(*slot);
  *slot = v ? sbx_strdup(v) : NULL;
}

/* Mirrors state/status/attempts into run->rec (what every put stores); a change of the state or
 * the attempt is a `state` event of the run (live.c). */
static void sync_rec(struct orch_run *run) {
  set_str(&run->rec.state, orch__run_state_name(run->state));
  set_str(&run->rec.status, run->status ? orch__run_status_name(run->status) : NULL);
  run->rec.attempts = run->attempts;
  orch__live_state(run);
}

static void free_uploads(struct orch *o, struct orch_run *run) {
  struct sbx_list *it, *tmp;
  SBX_LIST_FOREACH_SAFE(it, tmp, &run->uploads) {
    struct orch_upload *u = SBX_CONTAINER_OF(it, struct orch_upload, link);
    sbx_list_remove(&u->link);
    if (o)
      o->pending_upload_bytes -= u->size;
    sbx_free(u->name);
    store_blob_stage_abort(u->stage); /* an upload never stored: its temp file goes */
    sbx_free(u);
  }
  run->upload_bytes = 0;
}

void orch__run_free(struct orch_run *run) {
  orch__live_free(&run->live);
  sbx_free(run->end_text);
  free_uploads(run->chat ? run->chat->o : NULL, run);
  store_run_free(&run->rec);
  sbx_free(run);
}

static void on_persisted(int rc, const struct sbx_error *err, void *ud) {
  (void)ud;
  if (rc != 0)
    sbx_log(SBX_LOG_ERROR, "chat", "run state not persisted: %s",
            err ? err->msg : sbx_strerror(rc));
}

void orch__run_persist(struct orch *o, struct orch_run *run) {
  sync_rec(run);
  if (store_run_put(o->st, &run->rec, on_persisted, NULL) != 0)
    sbx_log(SBX_LOG_ERROR, "chat", "run %s: persist could not be queued", run->id);
}

/* ---- a run's creation --------------------------------------------------------------------- */

static struct orch_run *run_alloc(const char *id, int timeout_s) {
  struct orch_run *run = sbx_calloc(1, sizeof(*run));
  if (run == NULL)
    return NULL;
  orch__run_init(run, id, timeout_s);
  orch__live_init(&run->live);
  SBX_LIST_INIT(&run->settles);
  SBX_LIST_INIT(&run->uploads);
  SBX_LIST_INIT(&run->chat_link);
  return run;
}

struct orch_run *orch__run_new(struct orch *o, struct orch_chat *c, const char *code,
                               const char *origin, const char *turn_id, int timeout_s,
                               const char *idem) {
  store_id id;
  store_new_id(id);
  struct orch_run *run = run_alloc(id, timeout_s);
  if (run == NULL)
    return NULL;
  struct store_run *r = &run->rec;
  snprintf(r->id, sizeof(r->id), "%s", id);
  snprintf(r->chat_id, sizeof(r->chat_id), "%s", c->id);
  snprintf(r->turn_id, sizeof(r->turn_id), "%s", turn_id ? turn_id : "");
  r->code = sbx_strdup(code);
  r->origin = sbx_strdup(origin);
  r->timeout_s = timeout_s;
  r->idempotency_key = idem ? sbx_strdup(idem) : NULL;
  r->seq = ++o->run_seq;
  r->created_at = sbx_now_wall_ms();
  if (r->code == NULL || r->origin == NULL || (idem && r->idempotency_key == NULL)) {
    orch__run_free(run);
    return NULL;
  }
  if (o->cfg->exec_mode == ORCH_EXEC_OFF) {
    orch__run_finish(run, ORCH_RUN_STATUS_REJECTED);
    r->finished_at = r->created_at;
    r->error_json = sbx_strdup("{\"type\":\"ExecutionDisabled\",\"message\":\"Code execution is "
                               "turned off on this deployment (CHAT_CODE_EXECUTION=off); the code "
                               "was not run.\",\"traceback\":null}");
  }
  sync_rec(run);
  return run;
}

static void set_error(struct orch_run *run, const char *type, const char *message);

/* A reloaded tool run whose conversation turn ended with its server: it ends `abandoned` instead
 * of being dispatched again for nobody (its side effects would happen twice). */
static void abandon_orphan(struct orch *o, struct orch_run *run, const char *why) {
  orch__run_finish(run, ORCH_RUN_STATUS_ABANDONED);
  orch__live_keep(run); /* what its attempt printed before the server stopped */
  set_error(run, "Abandoned", why);
  sbx_log(SBX_LOG_INFO, "chat", "run %s: its turn %s was interrupted; abandoned, not run again",
          run->id, run->rec.turn_id);
  orch__run_settle(o, run);
}

int orch__run_reload(struct orch *o, struct store_run *rec) {
  struct orch_chat *c;
  if (orch__chat_get(o, rec->chat_id, &c) != 0)
    return 0; /* its chat cannot be loaded: the run stays in the store */
  struct orch_run *run = run_alloc(rec->id, rec->timeout_s);
  if (run == NULL)
    return SBX_ENOMEM;
  run->attempts = rec->attempts; /* the next dispatch is a new attempt */
  run->rec = *rec;               /* taken: the caller's copy keeps no strings */
  memset(rec, 0, sizeof(*rec));
  if (orch__map_put(&o->runs, run->id, run) != 0) {
    orch__run_free(run);
    return SBX_ENOMEM;
  }
  if (o->run_seq < run->rec.seq)
    o->run_seq = run->rec.seq;
  run->chat = c;
  sbx_list_insert_tail(&c->runs, &run->chat_link);
  sync_rec(run);
  const char *why = o->run_orphaned ? o->run_orphaned(o, &run->rec) : NULL;
  if (why != NULL)
    abandon_orphan(o, run, why);
  return 0;
}

/* The run joins the live runs: the map and its chat's queue (not pumped). */
static int enter(struct orch *o, struct orch_chat *c, struct orch_run *run) {
  if (orch__map_put(&o->runs, run->id, run) != 0)
    return SBX_ENOMEM;
  run->chat = c;
  sbx_list_insert_tail(&c->runs, &run->chat_link);
  return 0;
}

/* A live run whose creation was not made durable: it never existed. */
static void leave(struct orch *o, struct orch_run *run) {
  struct orch_chat *c = run->chat;
  sbx_list_remove(&run->chat_link);
  orch__map_del(&o->runs, run->id);
  orch__run_free(run);
  if (c)
    chat_pump(c);
}

struct orch_run *orch__run_accept(struct orch *o, struct orch_chat *c, struct orch_run *run) {
  o->m.runs_created++;
  if (run->state == ORCH_RUN_DONE) {
    orch__metrics_observe_run(&o->m, run->status, -1);
    orch__run_free(run);
    return NULL;
  }
  if (enter(o, c, run) != 0) {
    sbx_log(SBX_LOG_ERROR, "chat",
            "run %s: stored, but out of memory to run it now (it runs "
            "after a restart)",
            run->id);
    orch__run_free(run);
    return NULL;
  }
  chat_pump(c);
  return run;
}

struct create_ctx {
  struct orch *o;
  struct orch_run *run; /* a run that goes live once stored: owned until then */
  char run_id[STORE_ID_LEN + 1];
  orch_created_cb cb;
  void *ud;
};

static void on_created(int rc, const struct sbx_error *err, void *ud) {
  struct create_ctx *ctx = ud;
  struct orch *o = ctx->o;
  struct orch_run *run = ctx->run ? ctx->run : orch__map_get(&o->runs, ctx->run_id);
  struct orch_chat *c = NULL;
  if (rc != 0) {
    if (ctx->run)
      orch__run_free(run);
    else if (run) /* went live at once: what was queued behind its put fails or is moot */
      leave(o, run);
    ctx->cb(ctx->ud, rc, err, NULL);
  } else if (ctx->run == NULL) {
    ctx->cb(ctx->ud, 0, NULL, run); /* NULL: it already ended and left memory */
  } else if (run->state == ORCH_RUN_DONE) {
    ctx->cb(ctx->ud, 0, NULL, run);
    orch__run_accept(o, NULL, run); /* counted and freed */
  } else if (orch__chat_get(o, run->rec.chat_id, &c) != 0) {
    sbx_log(SBX_LOG_ERROR, "chat",
            "run %s: stored, but its chat cannot be loaded now (it runs "
            "after a restart)",
            run->id);
    orch__run_free(run);
    ctx->cb(ctx->ud, 0, NULL, NULL);
  } else {
    ctx->cb(ctx->ud, 0, NULL, orch__run_accept(o, c, run));
  }
  sbx_free(ctx);
}

static enum pump_step pump_step(struct orch_chat *c, struct orch_run **moved);
static void announce(struct orch *o, struct orch_chat *c, struct orch_run *run, enum pump_step st);
static void emit_dispatch(struct orch *o, struct orch_chat *c, struct orch_run *run);

int orch__run_create(struct orch *o, struct orch_chat *c, struct orch_run *run, orch_created_cb cb,
                     void *ud) {
  struct create_ctx *ctx = sbx_calloc(1, sizeof(*ctx));
  if (ctx == NULL) {
    orch__run_free(run);
    return SBX_ENOMEM;
  }
  *ctx = (struct create_ctx){.o = o, .run = run, .cb = cb, .ud = ud};
  snprintf(ctx->run_id, sizeof(ctx->run_id), "%s", run->id);
  /* Without an idempotency key (whose uniqueness only the store can settle) a run goes live at
   * once: it joins its chat's queue and takes its first step (dispatched, or paused while no page
   * can take it) before its one put is queued, so that put records the state it reached, and the
   * dispatch's `run` event is queued right behind it: one row write and one durable commit before
   * the page hears of the run (the writer completes in order). */
  enum pump_step step = PUMP_NONE;
  struct orch_run *moved = NULL;
  if (run->rec.idempotency_key == NULL && run->state != ORCH_RUN_DONE) {
    o->m.runs_created++;
    if (enter(o, c, run) != 0) {
      orch__run_free(run);
      sbx_free(ctx);
      return SBX_ENOMEM;
    }
    ctx->run = NULL;
    step = pump_step(c, &moved);
    if (moved != NULL && moved != run)
      announce(o, c, moved, step); /* the head was another run (it had waited for a page) */
    sync_rec(run);
  }
  int rc = store_run_create(o->st, &run->rec, on_created, ctx);
  if (rc != 0) {
    if (ctx->run)
      orch__run_free(run);
    else
      leave(o, run);
    sbx_free(ctx);
    return rc;
  }
  if (moved == run && step == PUMP_DISPATCHED)
    emit_dispatch(o, c, run);
  return 0;
}

/* ---- a run's end ------------------------------------------------------------------------- */

struct orch_settle {
  struct sbx_list link; /* in run->settles */
  orch_end_cb cb;
  void *ud;
};

struct orch_settle *orch__run_on_end(struct orch_run *run, orch_end_cb cb, void *ud) {
  struct orch_settle *s = sbx_malloc(sizeof(*s));
  if (s == NULL)
    return NULL;
  s->cb = cb;
  s->ud = ud;
  sbx_list_insert_tail(&run->settles, &s->link);
  return s;
}

void orch__settle_cancel(struct orch_settle *s) {
  sbx_list_remove(&s->link);
  sbx_free(s);
}

/* Calls back (and frees) every registration of the run, in order. */
static void call_back(struct orch *o, struct orch_run *run, int rc, const struct sbx_error *err) {
  while (!SBX_LIST_EMPTY(&run->settles)) {
    struct orch_settle *s = SBX_CONTAINER_OF(run->settles.next, struct orch_settle, link);
    sbx_list_remove(&s->link);
    orch_end_cb cb = s->cb;
    void *ud = s->ud;
    sbx_free(s);
    cb(ud, o, run, rc, err);
  }
}

struct settle_ctx {
  struct orch *o;
  struct orch_run *run;
};

static void settled(struct orch *o, struct orch_run *run, int rc, const struct sbx_error *err) {
  struct sbx_error e;
  if (rc != 0) {
    sbx_log(SBX_LOG_ERROR, "chat", "run %s: final state not durable: %s", run->id,
            err ? err->msg : sbx_strerror(rc));
    sbx_error_set(&e, rc, "the result could not be stored: %s", err ? err->msg : sbx_strerror(rc));
    err = &e;
  }
  orch__live_end(o, run, rc);
  call_back(o, run, rc, err);
  orch__map_del(&o->runs, run->id);
  orch__run_free(run);
}

static void on_settled(int rc, const struct sbx_error *err, void *ud) {
  struct settle_ctx *ctx = ud;
  settled(ctx->o, ctx->run, rc, err);
  sbx_free(ctx);
}

void orch__run_settle(struct orch *o, struct orch_run *run) {
  struct orch_chat *c = run->chat;
  if (run->rec.finished_at == 0)
    run->rec.finished_at = sbx_now_wall_ms();
  sync_rec(run);
  int64_t dur = run->rec.started_at ? run->rec.finished_at - run->rec.started_at : -1;
  orch__metrics_observe_run(&o->m, run->status, dur);
  sbx_list_remove(&run->chat_link); /* the queue moves on; the map keeps it until durable */
  free_uploads(o, run);
  run->chat = NULL; /* from here the run does not keep its chat in memory (eviction) */
  if (c)
    c->used_ms = sbx_now_mono_ms();
  struct settle_ctx *ctx = sbx_malloc(sizeof(*ctx));
  if (ctx != NULL)
    *ctx = (struct settle_ctx){.o = o, .run = run};
  if (ctx == NULL || store_run_put(o->st, &run->rec, on_settled, ctx) != 0) {
    sbx_free(ctx); /* not even queued: whoever waits hears of the failure now */
    struct sbx_error e;
    sbx_error_set(&e, SBX_ENOMEM, "the final state could not be queued");
    settled(o, run, SBX_ENOMEM, &e);
  }
  if (c)
    chat_pump(c);
}

/* The error object of a run the server ended itself, as stored JSON text. */
static void set_error(struct orch_run *run, const char *type, const char *message) {
  json_t *err = json_pack("{s:s, s:s, s:n}", "type", type, "message", message, "traceback");
  sbx_free(run->rec.error_json);
  run->rec.error_json = err ? orch__json_dump(err, NULL) : NULL;
  json_decref(err);
}

int orch__run_cancel(struct orch *o, struct orch_run *run, orch_end_cb cb, void *ud) {
  if (run->state == ORCH_RUN_FINISHING || run->state == ORCH_RUN_DONE)
    return SBX_ESTATE;
  if (orch__run_on_page(run)) {
    orch__run_request_cancel(run, o->rt.cancel_grace_ms);
    json_t *ev = json_pack("{s:s, s:i, s:s}", "run_id", run->id, "attempt", run->attempts,
                           "page_id", run->page_id);
    if (ev != NULL && run->chat != NULL)
      orch__event_emit(run->chat, "cancel", ev);
    else
      json_decref(ev);
    return SBX_EINPROGRESS;
  }
  if (cb != NULL && orch__run_on_end(run, cb, ud) == NULL)
    return SBX_ENOMEM;
  int ran = run->attempts > 0; /* paused: what its latest attempt printed is kept */
  orch__run_request_cancel(run, o->rt.cancel_grace_ms); /* queued or paused: done now */
  orch__live_keep(run);
  set_error(run, "Cancelled", ran ? ORCH_NOTE_CANCEL_PAUSED : ORCH_NOTE_CANCEL_QUEUED);
  orch__run_settle(o, run);
  return 0;
}

/* ---- chats and the scheduler -------------------------------------------------------------- */

void orch__chats_init(struct orch *o) {
  orch__map_init(&o->chats);
  orch__map_init(&o->runs);
  orch__map_init(&o->turns);
  orch__map_init(&o->asst);
}

void orch__chats_free(struct orch *o) {
  size_t i = 0;
  const char *k;
  void *v;
  while (orch__map_next(&o->runs, &i, &k, &v))
    orch__run_free(v);
  i = 0;
  while (orch__map_next(&o->chats, &i, &k, &v)) {
    struct orch_chat *c = v;
    struct sbx_list *it, *tmp;
    SBX_LIST_FOREACH_SAFE(it, tmp, &c->pages) {
      struct orch_page *p = SBX_CONTAINER_OF(it, struct orch_page, chat_link);
      sbx_free(p);
    }
    orch__chat_free(c);
  }
  orch__map_free(&o->runs);
  orch__map_free(&o->turns);
  orch__map_free(&o->asst);
  orch__map_free(&o->chats);
}

void orch__chat_free(struct orch_chat *c) {
  if (c->files_kept)
    store_file_list_free(c->files, c->n_files);
  sbx_free(c);
}

/* The chat's latest files for a manifest: the kept list while the store's files generation has
 * not moved since it was read (read before the list, so a change committed meanwhile only causes
 * one more read), else a fresh read.  Borrowed; SBX_* from store_file_list. */
static int chat_files(struct orch *o, struct orch_chat *c, const struct store_file **files,
                      size_t *n) {
  uint64_t gen = store_files_generation(o->st);
  if (!c->files_kept || c->files_gen != gen) {
    struct store_file *fresh = NULL;
    size_t nf = 0;
    int rc = store_file_list(o->st, c->id, 0, &fresh, &nf);
    if (rc != 0)
      return rc;
    if (c->files_kept)
      store_file_list_free(c->files, c->n_files);
    c->files = fresh;
    c->n_files = nf;
    c->files_gen = gen;
    c->files_kept = 1;
  }
  *files = c->files;
  *n = c->n_files;
  return 0;
}

struct orch_chat *orch__chat_add(struct orch *o, const char *id, const char *token_hash,
                                 int64_t last_seq) {
  struct orch_chat *c = sbx_calloc(1, sizeof(*c));
  if (c == NULL)
    return NULL;
  snprintf(c->id, sizeof(c->id), "%s", id);
  snprintf(c->token_hash, sizeof(c->token_hash), "%s", token_hash);
  c->o = o;
  c->event_seq = last_seq;
  c->used_ms = sbx_now_mono_ms();
  SBX_LIST_INIT(&c->runs);
  SBX_LIST_INIT(&c->pages);
  SBX_LIST_INIT(&c->listeners);
  if (orch__map_put(&o->chats, c->id, c) != 0) {
    sbx_free(c);
    return NULL;
  }
  return c;
}

int orch__chat_get(struct orch *o, const char *chat_id, struct orch_chat **out) {
  struct orch_chat *c = orch__map_get(&o->chats, chat_id);
  if (c != NULL && c->deleted)
    return SBX_ENOENT; /* kept in memory until what still holds it lets go (eviction) */
  if (c == NULL) {
    struct store_chat sc;
    int rc = store_chat_get(o->st, chat_id, &sc);
    if (rc == 0 && o->leases && (rc = o->leases->take(o, chat_id)) != 0) /* its lease first */
      store_chat_free(&sc);
    if (rc != 0)
      return rc;
    int64_t seq = 0;
    store_event_last_seq(o->st, chat_id, &seq);
    c = orch__chat_add(o, sc.id, sc.token_hash, seq);
    if (c != NULL)
      memcpy(c->owner, sc.owner, sizeof c->owner);
    store_chat_free(&sc);
    if (c == NULL) {
      if (o->leases)
        o->leases->release(o, chat_id);
      return SBX_ENOMEM;
    }
    if (o->leases)
      o->leases->loaded(o, c); /* a chat taken over brings its unfinished runs */
  }
  c->used_ms = sbx_now_mono_ms();
  *out = c;
  return 0;
}

struct chat_delete {
  struct orch *o;
  store_id id;
  store_done_cb cb;
  void *ud;
};

static void on_chat_deleted(int rc, const struct sbx_error *err, void *ud) {
  struct chat_delete *d = ud;
  struct orch_chat *c = orch__map_get(&d->o->chats, d->id);
  if (rc != 0 && rc != SBX_ENOENT && c != NULL)
    c->deleted = 0; /* not deleted after all: found again */
  if (d->cb)
    d->cb(rc, err, d->ud);
  sbx_free(d);
}

int orch__chat_delete(struct orch *o, struct orch_chat *c, store_done_cb cb, void *ud) {
  if (c->asst != NULL || !SBX_LIST_EMPTY(&c->runs) || c->uploads > 0)
    return SBX_ESTATE;
  struct chat_delete *d = sbx_calloc(1, sizeof *d);
  if (d == NULL)
    return SBX_ENOMEM;
  d->o = o;
  memcpy(d->id, c->id, sizeof d->id);
  d->cb = cb;
  d->ud = ud;
  int rc = store_chat_delete(o->st, c->id, on_chat_deleted, d);
  if (rc != 0) {
    sbx_free(d);
    return rc;
  }
  c->deleted = 1;
  return 0;
}

size_t orch__chats_evict(struct orch *o, uint64_t idle_ms) {
  uint64_t now = sbx_now_mono_ms();
  size_t i = 0, n = 0;
  const char *k;
  void *v;
  while (orch__map_next(&o->chats, &i, &k, &v)) {
    struct orch_chat *c = v;
    if (now - c->used_ms < idle_ms || c->events_inflight > 0 || c->uploads > 0 || c->asst ||
        !SBX_LIST_EMPTY(&c->runs) || !SBX_LIST_EMPTY(&c->pages) || !SBX_LIST_EMPTY(&c->listeners))
      continue;
    orch__map_del(&o->chats, c->id); /* a tombstone: the iteration goes on */
    if (o->leases)
      o->leases->release(o, c->id); /* its lease goes with it */
    orch__chat_free(c);
    n++;
  }
  return n;
}

struct orch_page *orch__chat_page(struct orch_chat *c, const char *page_id) {
  struct sbx_list *it;
  SBX_LIST_FOREACH(it, &c->pages) {
    struct orch_page *p = SBX_CONTAINER_OF(it, struct orch_page, chat_link);
    if (strcmp(p->id, page_id) == 0)
      return p;
  }
  return NULL;
}

struct orch_page *orch__chat_active_page(struct orch_chat *c) {
  struct orch_page *best = NULL;
  struct sbx_list *it;
  SBX_LIST_FOREACH(it, &c->pages) {
    struct orch_page *p = SBX_CONTAINER_OF(it, struct orch_page, chat_link);
    if (orch__page_can_run(p) && (best == NULL || p->visible_seq > best->visible_seq))
      best = p;
  }
  return best;
}

static struct orch_run *head_run(struct orch_chat *c) {
  return SBX_LIST_EMPTY(&c->runs) ? NULL
                                  : SBX_CONTAINER_OF(c->runs.next, struct orch_run, chat_link);
}

/* Tells the chat's pages the run was dispatched: its `run` event, with its mount manifest (from
 * the chat's kept file list) and the limits. */
static void emit_dispatch(struct orch *o, struct orch_chat *c, struct orch_run *run) {
  const struct store_file *files = NULL;
  size_t n = 0;
  int rc = chat_files(o, c, &files, &n);
  if (rc != 0)
    sbx_log(SBX_LOG_ERROR, "chat", "run %s: file list failed (%s): dispatched without mounts",
            run->id, sbx_strerror(rc));
  struct orch_manifest m;
  int have = rc == 0 && n > 0 && orch__manifest_compute(files, n, run->rec.code, &m) == 0;
  json_t *ev = orch__dispatch_json(run->id, c->id, run->page_id, run->rec.code ? run->rec.code : "",
                                   run->rec.origin ? run->rec.origin : "tool", run->timeout_s,
                                   run->attempts, have ? &m : NULL, orch__chat_pypi(o, c), &o->rt);
  if (have)
    orch__manifest_free(&m);
  if (ev == NULL || orch__event_emit(c, "run", ev) != 0) /* the watchdog ends the attempt */
    sbx_log(SBX_LOG_ERROR, "chat", "run %s: its `run` event was not sent (out of memory)", run->id);
}

/* The head run's next step, in the state machine only: dispatched to the chat's active page, or
 * paused while no page can take it.  *moved is the run that moved (its record and event are for
 * the caller to write: announce). */
static enum pump_step pump_step(struct orch_chat *c, struct orch_run **moved) {
  struct orch *o = c->o;
  *moved = NULL;
  if (o->closing)
    return PUMP_NONE;
  struct orch_run *run = head_run(c);
  if (run == NULL || orch__run_on_page(run) || run->state == ORCH_RUN_FINISHING)
    return PUMP_NONE; /* one at a time */
  struct orch_page *p = orch__chat_active_page(c);
  if (p != NULL) {
    int again = run->attempts > 0;
    if (orch__run_dispatch(run, p->id, o->rt.watchdog_grace_ms) != 0)
      return PUMP_NONE;
    free_uploads(o, run);  /* files of an earlier attempt never become artifacts */
    orch__live_begin(run); /* nor does its output */
    o->m.runs_dispatched++;
    if (again)
      o->m.attempts_redispatched++;
    *moved = run;
    return PUMP_DISPATCHED;
  }
  if (run->state == ORCH_RUN_QUEUED && orch__run_pause(run, o->rt.paused_wait_ms) == 0) {
    *moved = run;
    return PUMP_PAUSED;
  }
  return PUMP_NONE;
}

/* Writes what a step changed: the run's record and, for a dispatch, its `run` event. */
static void announce(struct orch *o, struct orch_chat *c, struct orch_run *run, enum pump_step st) {
  orch__run_persist(o, run);
  if (st == PUMP_DISPATCHED)
    emit_dispatch(o, c, run);
}

static void chat_pump(struct orch_chat *c) {
  struct orch_run *run;
  enum pump_step st = pump_step(c, &run);
  if (st != PUMP_NONE)
    announce(c->o, c, run, st);
}

int orch__chat_run_lost(struct orch_chat *c, struct orch_run *run) {
  struct orch *o = c->o;
  int rc = orch__run_lost(run, o->rt.max_attempts, o->rt.paused_wait_ms);
  if (rc == 0) {
    o->m.pauses++;
    orch__run_persist(o, run);
  }
  if (rc != 1)
    return 0;
  char msg[400];
  snprintf(msg, sizeof(msg), ORCH_NOTE_ATTEMPTS_LOST, run->lost, o->rt.max_attempts);
  sbx_log(SBX_LOG_WARN, "chat", "run %s of chat %s: %d attempts lost mid-run: ended crashed",
          run->id, c->id, run->lost);
  set_error(run, "KernelCrashed", msg);
  orch__live_keep(run); /* what its last attempt printed */
  orch__run_settle(o, run);
  return 1;
}

void orch__chat_page_changed(struct orch_chat *c, struct orch_page *p) {
  struct orch *o = c->o;
  struct orch_run *run = head_run(c);
  if (run && orch__run_on_page(run) && strcmp(run->page_id, p->id) == 0 &&
      p->state == ORCH_PAGE_GONE) {
    if (orch__chat_run_lost(c, run))
      return; /* ended: settling pumped the chat */
  } else if (run && orch__run_on_page(run) && strcmp(run->page_id, p->id) == 0 &&
             (p->state == ORCH_PAGE_HIDDEN || p->state == ORCH_PAGE_SILENT)) {
    if (orch__run_pause(run, o->rt.paused_wait_ms) == 0) {
      o->m.pauses++;
      orch__run_persist(o, run);
    }
  }
  chat_pump(c);
}

static void end_by_deadline(struct orch_chat *c, struct orch_run *run, enum orch_run_due due) {
  struct orch *o = c->o;
  char msg[400];
  const char *type = "Abandoned";
  if (due == ORCH_RUN_DUE_ABANDONED) {
    snprintf(msg, sizeof(msg),
             run->attempts > 0 ? ORCH_NOTE_ABANDONED_PAUSED : ORCH_NOTE_ABANDONED_NEVER_RAN,
             (unsigned long long)(o->rt.paused_wait_ms / 1000));
  } else if (due == ORCH_RUN_DUE_WATCHDOG) {
    type = run->status == ORCH_RUN_STATUS_TIMEOUT ? "TimeoutError" : "KernelCrashed";
    snprintf(msg, sizeof(msg),
             run->status == ORCH_RUN_STATUS_TIMEOUT ? ORCH_NOTE_WATCHDOG_TIMEOUT
                                                    : ORCH_NOTE_WATCHDOG_UNREPORTED,
             run->timeout_s);
  } else {
    type = "Cancelled";
    snprintf(msg, sizeof(msg), "%s", ORCH_NOTE_CANCEL_RESTARTED);
  }
  set_error(run, type, msg);
  orch__live_keep(run); /* what it printed before it was stopped */
  if (due != ORCH_RUN_DUE_ABANDONED && run->page_id[0]) {
    json_t *ev = json_pack("{s:s, s:s}", "run_id", run->id, "page_id", run->page_id);
    if (ev != NULL)
      orch__event_emit(c, "restart", ev);
    run->rec.restarted = 1;
    o->m.restarts++;
  }
  orch__run_settle(o, run);
}

/* The page holding the head run showed no sign of life for PAGE_SILENT_MS: it is silent, so the
 * run is paused (and the turn waits) as for a hidden page. */
static void check_silence(struct orch_chat *c) {
  struct orch *o = c->o;
  struct orch_run *run = head_run(c);
  struct orch_page *p = run && orch__run_on_page(run) ? orch__chat_page(c, run->page_id) : NULL;
  if (p == NULL || !orch__page_check_silent(p, run->dispatched_ms, o->rt.page_silent_ms))
    return;
  o->m.pages_silent++;
  sbx_log(SBX_LOG_INFO, "chat", "page %s of chat %s silent for %llu ms: run %s paused", p->id,
          c->id, (unsigned long long)o->rt.page_silent_ms, run->id);
  o->m.paused_by_silence++; /* (another visible page of the chat may take it at once) */
  orch__chat_page_changed(c, p);
}

/* Pages whose grace is over are gone: what they ran is paused. */
static void reap_pages(struct orch_chat *c) {
  struct sbx_list *it, *tmp;
  SBX_LIST_FOREACH_SAFE(it, tmp, &c->pages) {
    struct orch_page *p = SBX_CONTAINER_OF(it, struct orch_page, chat_link);
    if (orch__page_tick(p)) {
      sbx_list_remove(&p->chat_link);
      orch__chat_page_changed(c, p); /* gone: what it ran is paused */
      sbx_free(p);
    }
  }
}

void orch__chat_page_leave(struct orch_chat *c, struct orch_page *p) {
  struct orch_run *run = head_run(c);
  /* A page that says it goes away did not crash: its run is paused first, so its going is not
   * counted as a lost attempt (orch__chat_run_lost). */
  if (run && orch__run_on_page(run) && strcmp(run->page_id, p->id) == 0 &&
      orch__run_pause(run, c->o->rt.paused_wait_ms) == 0) {
    c->o->m.pauses++;
    orch__run_persist(c->o, run);
  }
  if (orch__page_leave(p) == 0)
    reap_pages(c);
}

void orch__chat_tick(struct orch_chat *c) {
  struct sbx_list *it, *tmp;
  reap_pages(c);
  check_silence(c);
  SBX_LIST_FOREACH_SAFE(it, tmp, &c->runs) {
    struct orch_run *run = SBX_CONTAINER_OF(it, struct orch_run, chat_link);
    enum orch_run_due due = orch__run_tick(run);
    if (due == ORCH_RUN_DUE_INPUT_OVER) {
      orch__live_asked_over(run);
      orch__run_persist(c->o, run);
    } else if (due != ORCH_RUN_DUE_NONE) {
      end_by_deadline(c, run, due);
      return; /* the list changed; the next tick sees the rest */
    }
  }
}

/* ---- signs of life, input ----------------------------------------------------------------- */

void orch__page_sign_of_life(struct orch_chat *c, struct orch_page *p) {
  if (p != NULL && orch__page_alive(p, &c->visible_counter))
    orch__chat_page_changed(c, p); /* silent no more: its run goes out again, a new attempt */
}

void orch__run_sign_of_life(struct orch_run *run, int attempt) {
  struct orch_chat *c = run->chat;
  if (c == NULL || attempt != run->attempts || run->last_page_id[0] == '\0')
    return; /* only the page of the latest attempt is known to make the call */
  orch__page_sign_of_life(c, orch__chat_page(c, run->last_page_id));
}

int orch__run_give_input(struct orch *o, struct orch_run *run, const char *text) {
  if (run->state != ORCH_RUN_WAITING_INPUT || run->chat == NULL)
    return SBX_ESTATE;
  json_t *ev = json_pack("{s:s, s:i, s:s, s:s}", "run_id", run->id, "attempt", run->attempts,
                         "page_id", run->page_id, "text", text);
  if (ev == NULL)
    return SBX_ENOMEM;
  int rc = orch__event_emit(run->chat, "input", ev);
  if (rc != 0)
    return rc;
  orch__run_input_over(run);
  orch__live_asked_over(run);
  orch__run_persist(o, run);
  return 0;
}

/* ---- uploads per chat ---------------------------------------------------------------------- */

int orch__chat_upload_begin(struct orch_chat *c) {
  if (c->uploads >= ORCH_CHAT_UPLOADS)
    return SBX_EBUSY;
  c->uploads++;
  return 0;
}

void orch__chat_upload_end(struct orch_chat *c) {
  if (c->uploads > 0)
    c->uploads--;
}
