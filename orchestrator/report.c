/* report.c -- what a page reports about the attempt it was sent, as the run's life takes it: the
 * attempt started, its output as it goes (and that Python waits in input()), an output file was
 * uploaded, the result.
 *
 * Output while it runs (orch__run_report_output) is held with the run by live.c and published as
 * the run's events; a call without input_request while the run waits for input means input() is
 * over on the page (it gave up after CODE_INPUT_WAIT_S): the run runs again, its watchdog with the
 * time it had left.
 *
 * Output files are kept with the attempt that uploaded them (struct orch_upload: the content in a
 * store stage, a temp file hashed as it came) until its result; an earlier attempt's files never
 * become artifacts (chat.c drops them at each dispatch).  A result takes the run to FINISHING
 * (run.c) while each file it lists is stored as an output file of the chat (the next version of
 * its name, source output, kind file|figure, expiring after the retention; the stage handed to
 * store_file_add_staged), then records the run's files in order and ends the run (chat.c's
 * settle).  A file whose store failed must be uploaded again before the result is retried (its
 * stage went with the failed write); one stored by an earlier try of the result is kept.  A file
 * that would take the chat's stored output files past CHAT_OUTPUT_QUOTA_MB is not stored: the run
 * is, without it, and a note says so.  The result's `value` and `displays` are kept as bundle.c
 * bounds them; a result that leaves out stdout, stderr or displays keeps what was held for the
 * attempt (live.c).
 *
 * What it does not do: read requests or check their fields (api_page.c does, then calls here),
 * or decide what a status means for the kernel (the page already replaced it).
 */
#include "internal.h"

#include <string.h>

#define UPLOADS_MAX_BYTES_TOTAL (1024ull * 1024 * 1024) /* across runs: SBX_EBUSY beyond */
#define UPLOADS_MAX_BYTES_RUN   (200ull * 1024 * 1024)

/* ---- started ------------------------------------------------------------------------------ */

int orch__run_report_started(struct orch *o, struct orch_run *run, int attempt) {
  enum orch_run_state was = run->state;
  int rc = orch__run_started(run, attempt, o->rt.watchdog_grace_ms);
  if (rc == 0 && was == ORCH_RUN_DISPATCHED) {
    run->rec.started_at = sbx_now_wall_ms();
    orch__run_persist(o, run);
  }
  return rc;
}

/* ---- output as it goes -------------------------------------------------------------------- */

int orch__run_report_output(struct orch *o, struct orch_run *run, const struct orch_output *out) {
  if (out->attempt != run->attempts)
    return SBX_ECONFLICT;
  if (!orch__run_on_page(run))
    return run->state == ORCH_RUN_FINISHING ? 0 : SBX_ECONFLICT; /* overtaken by its result */
  o->m.output_calls++;
  if (run->state == ORCH_RUN_DISPATCHED) /* it prints: Python started */
    orch__run_report_started(o, run, out->attempt);
  orch__live_chunks(run, out->chunks, out->n_chunks);
  for (size_t i = 0; i < out->n_displays; i++)
    if (orch__live_display(run, out->display_index[i], out->displays[i]) != 0)
      return SBX_ENOMEM;
  if (out->prompt != NULL && run->state == ORCH_RUN_RUNNING) {
    uint64_t wait_ms = (uint64_t)o->rt.input_wait_s * 1000;
    if (orch__run_wait_input(run, out->attempt, wait_ms, o->rt.watchdog_grace_ms) == 0) {
      orch__run_persist(o, run); /* `state` waiting_input, then the request */
      if (orch__live_ask(run, out->prompt) != 0)
        return SBX_ENOMEM;
    }
  } else if (out->prompt == NULL && run->state == ORCH_RUN_WAITING_INPUT) {
    orch__run_input_over(run); /* the page's input() ended without an answer */
    orch__live_asked_over(run);
    orch__run_persist(o, run);
  }
  return 0;
}

/* ---- output files ------------------------------------------------------------------------- */

struct orch_upload *orch__run_upload(struct orch_run *run, const char *name) {
  struct sbx_list *it;
  SBX_LIST_FOREACH(it, &run->uploads) {
    struct orch_upload *u = SBX_CONTAINER_OF(it, struct orch_upload, link);
    if (strcmp(u->name, name) == 0)
      return u;
  }
  return NULL;
}

int orch__run_add_upload(struct orch *o, struct orch_run *run, char *name,
                         struct store_blob_stage **stage, const char sha256[65], int attempt,
                         struct orch_upload **out) {
  size_t len = (size_t)store_blob_stage_size(*stage);
  struct orch_upload *u = orch__run_upload(run, name);
  size_t count = 0;
  struct sbx_list *it;
  SBX_LIST_FOREACH(it, &run->uploads) count++;
  int rc = 0;
  size_t old = u ? u->size : 0;
  if (u == NULL && count >= ORCH_FILES_LISTED)
    rc = SBX_EFULL;
  else if (run->upload_bytes - old + len > UPLOADS_MAX_BYTES_RUN ||
           o->pending_upload_bytes - old + len > UPLOADS_MAX_BYTES_TOTAL)
    rc = SBX_EBUSY;
  else if (u == NULL && (u = sbx_calloc(1, sizeof(*u))) == NULL)
    rc = SBX_ENOMEM;
  if (rc != 0) {
    sbx_free(name);
    return rc;
  }
  if (u->name == NULL) {
    u->name = name;
    sbx_list_insert_tail(&run->uploads, &u->link);
  } else {
    sbx_free(name);
    store_blob_stage_abort(u->stage); /* the earlier upload of this name */
  }
  run->upload_bytes = run->upload_bytes - old + len;
  o->pending_upload_bytes = o->pending_upload_bytes - old + len;
  u->stage = *stage;
  *stage = NULL;
  u->size = len;
  u->attempt = attempt;
  u->file_id[0] = '\0';
  memcpy(u->sha256, sha256, 65);
  *out = u;
  return 0;
}

/* ---- result ------------------------------------------------------------------------------- */

/* The first ORCH_OUT_CHARS characters (code points) of the UTF-8 text s, newly allocated; *cut
 * set when s was longer.  A page caps its streams itself; this keeps a careless or hostile page
 * from storing megabytes of "stdout" in a run that every reader of the run then receives. */
static char *capped_text(const char *s, int *cut) {
  *cut = 0;
  if (s == NULL)
    return sbx_strdup("");
  size_t len = strlen(s), i = 0;
  for (size_t chars = 0; i < len && chars < ORCH_OUT_CHARS; chars++)
    i += orch__utf8_next(s + i, len - i, NULL);
  *cut = i < len;
  return sbx_strndup(s, i);
}

/* A stored JSON part of the result: NULL when absent or null. */
static int dump_wanted(const json_t *v) { return v != NULL && !json_is_null(v); }
static char *dump_part(const json_t *v) { return dump_wanted(v) ? orch__json_dump(v, NULL) : NULL; }

/* A result being taken: what it records, copied from the request, until the run is stored done. */
struct result_job {
  struct orch *o;
  struct orch_run *run;
  enum orch_run_status status;
  char *out, *err, *error_json, *remounted_json, *value_json, *displays_json;
  json_t *notes; /* the page's and the orchestrator's, in order */
  int out_cut, err_cut, restarted, files_unlisted, figures_dropped;
  struct orch_upload **files; /* in the order listed */
  const char **kinds;         /* static "file" | "figure" */
  size_t n_files;
  size_t pending; /* output files still being stored (+1 while they are queued) */
  int failed;
  orch_end_cb cb; /* the result's answer: with the run's end, or now on a failure */
  void *ud;
  struct sbx_error error;
  struct file_cb {
    struct result_job *job;
    size_t i;
  } * cbs;
};

static void job_free(struct result_job *j);

/* The result's displays and value as kept (bundle.c's bounds; what is left out noted), or, when
 * it lists no displays, the ones held for its attempt.  0 or SBX_ENOMEM. */
static int keep_shown(struct result_job *j, struct orch_run *run, const struct orch_result *res) {
  size_t budget = ORCH_SHOWN_BYTES;
  json_t *displays = NULL;
  if (res->displays != NULL) {
    if ((displays = json_array()) == NULL)
      return SBX_ENOMEM;
    for (size_t i = 0; i < json_array_size(res->displays) && i < ORCH_DISPLAYS; i++) {
      char what[32];
      snprintf(what, sizeof(what), "display %zu", i + 1);
      json_t *b = orch__bundle_keep(json_array_get(res->displays, i), &budget, what, j->notes);
      if (b == NULL || json_array_append_new(displays, b) != 0) {
        json_decref(displays);
        return SBX_ENOMEM;
      }
    }
  } else if (run->live.attempt == res->attempt && orch__live_displays(run) > 0) {
    displays = json_incref(run->live.displays);
    budget -= run->live.shown_bytes;
    json_array_extend(j->notes, run->live.notes);
  }
  if (displays != NULL && json_array_size(displays) > 0)
    j->displays_json = orch__json_dump(displays, NULL);
  int oom = displays != NULL && json_array_size(displays) > 0 && j->displays_json == NULL;
  json_decref(displays);
  if (res->value != NULL && !oom) {
    json_t *v = orch__bundle_keep(res->value, &budget, "the value", j->notes);
    j->value_json = v ? orch__json_dump(v, NULL) : NULL;
    oom = j->value_json == NULL;
    json_decref(v);
  }
  return oom ? SBX_ENOMEM : 0;
}

static void job_free(struct result_job *j) {
  sbx_free(j->out);
  sbx_free(j->err);
  sbx_free(j->error_json);
  json_decref(j->notes);
  sbx_free(j->remounted_json);
  sbx_free(j->value_json);
  sbx_free(j->displays_json);
  sbx_free(j->files);
  sbx_free(j->kinds);
  sbx_free(j->cbs);
  sbx_free(j);
}

static void on_run_file_put(int rc, const struct sbx_error *err, void *ud) {
  (void)ud;
  if (rc != 0)
    sbx_log(SBX_LOG_ERROR, "report", "run file not recorded: %s",
            err ? err->msg : sbx_strerror(rc));
}

/* Every output file is stored: the result goes into the run's record and the run ends. */
static void commit(struct result_job *j) {
  struct orch *o = j->o;
  struct orch_run *run = j->run;
  struct store_run *r = &run->rec;
  sbx_free(r->notes_json);
  r->notes_json = json_array_size(j->notes) > 0 ? orch__json_dump(j->notes, NULL) : NULL;
  char **parts[] = {&r->stdout_text,    &r->stderr_text, &r->error_json,
                    &r->remounted_json, &r->value_json,  &r->displays_json};
  char **mine[] = {&j->out,        &j->err,          &j->error_json, &j->remounted_json,
                   &j->value_json, &j->displays_json};
  for (size_t i = 0; i < SBX_ARRAY_SIZE(parts); i++) {
    sbx_free(*parts[i]);
    *parts[i] = *mine[i]; /* taken */
    *mine[i] = NULL;
  }
  r->stdout_truncated = j->out_cut;
  r->stderr_truncated = j->err_cut;
  r->restarted = j->restarted;
  if (r->restarted)
    o->m.restarts++;
  r->files_unlisted = j->files_unlisted;
  r->figures_dropped = j->figures_dropped;
  sbx_free(r->result_hash);
  r->result_hash = sbx_strdup(run->finishing_hash);
  if (r->started_at == 0)
    r->started_at = sbx_now_wall_ms();
  r->finished_at = sbx_now_wall_ms();
  orch__run_finish(run, j->status);
  int kept = 0;
  for (size_t i = 0; i < j->n_files; i++)
    if (!j->files[i]->over_quota)
      store_run_file_put(o->st, run->id, kept++, j->files[i]->file_id, on_run_file_put, NULL);
  run->files_recorded = kept;
  o->m.results_accepted++;
  struct orch_chat *c = run->chat;
  if (kept > 0 && c) {
    json_t *ev = json_pack("{s:s, s:s}", "chat_id", c->id, "run_id", run->id);
    if (ev != NULL)
      orch__event_emit(c, "files", ev);
  }
  orch_end_cb cb = j->cb;
  void *ud = j->ud;
  job_free(j);
  if (orch__run_on_end(run, cb, ud) == NULL) { /* the end is still stored; its answer cannot wait */
    struct sbx_error e;
    sbx_error_set(&e, SBX_ENOMEM, "out of memory");
    cb(ud, o, run, SBX_ENOMEM, &e);
  }
  orch__run_settle(o, run);
}

/* Every output file of the result is stored (or failed): the run ends, or goes on as before. */
static void outputs_settled(struct result_job *j) {
  if (!j->failed) {
    commit(j);
    return;
  }
  struct orch *o = j->o;
  struct orch_run *run = j->run;
  int rc = j->failed;
  struct sbx_error e = j->error;
  if (rc != SBX_ENAME)
    sbx_error_set(&e, rc, "output files not stored: %s",
                  j->error.msg[0] ? j->error.msg : sbx_strerror(rc));
  orch_end_cb cb = j->cb;
  void *ud = j->ud;
  job_free(j);
  orch__run_result_failed(run);
  cb(ud, o, run, rc, &e); /* only the result's own answer: the run goes on for everyone else */
}

static void on_output_stored(int rc, const struct sbx_error *err,
                             const struct store_file_added *res, void *ud) {
  struct file_cb *fc = ud;
  struct result_job *j = fc->job;
  if (rc != 0) {
    if (!j->failed && err)
      j->error = *err;
    j->failed = j->failed ? j->failed : rc;
  } else {
    snprintf(j->files[fc->i]->file_id, sizeof(j->files[fc->i]->file_id), "%s", res->file.id);
  }
  if (--j->pending == 0)
    outputs_settled(j);
}

/* Stores each listed output file not stored yet (by an earlier try of this result). */
static void store_outputs(struct result_job *j) {
  struct orch *o = j->o;
  struct orch_run *run = j->run;
  struct orch_chat *c = run->chat;
  struct store_file *existing = NULL;
  size_t ne = 0;
  if (store_file_list(o->st, c->id, 0, &existing, &ne) != 0)
    ne = 0;
  uint64_t quota = o->rt.output_quota_bytes, used = 0;
  if (quota && store_chat_output_bytes(o->st, c->id, &used) != 0)
    used = 0; /* (a failed read: the files are stored, as without a quota) */
  int64_t expires = sbx_now_wall_ms() + (int64_t)o->rt.retention_days * 86400000LL;
  j->pending = 1; /* this loop's own hold: released after it */
  for (size_t i = 0; i < j->n_files; i++) {
    struct orch_upload *u = j->files[i];
    if (u->stage != NULL && quota && used + u->size > quota) {
      store_blob_stage_abort(u->stage); /* the run is kept; this file is not */
      u->stage = NULL;
      u->over_quota = 1;
      o->m.output_files_over_quota++;
    }
    if (u->over_quota) {
      char text[STORE_NAME_MAX + 200];
      snprintf(text, sizeof(text),
               "%s (%.1f MB) was not kept: the chat's output files would take more than its %llu "
               "MB (CHAT_OUTPUT_QUOTA_MB)",
               u->name, (double)u->size / ORCH_MIB, (unsigned long long)(quota / ORCH_MIB));
      json_array_append_new(j->notes, json_string(text));
      continue;
    }
    if (u->stage == NULL)
      continue; /* stored by an earlier try of this result: its file_id stands */
    used += u->size;
    u->file_id[0] = '\0';
    const char *reason =
        orch__manifest_admit(existing, ne, u->name, STORE_SRC_OUTPUT, j->kinds[i], u->size);
    struct store_file_in in = {
        .chat_id = c->id,
        .name = u->name,
        .source = STORE_SRC_OUTPUT,
        .mounted = reason == NULL,
        .left_out_reason = reason,
        .run_id = run->id,
        .kind = j->kinds[i],
        .expires_at = expires,
    };
    j->cbs[i] = (struct file_cb){.job = j, .i = i};
    struct store_blob_stage *sg = u->stage;
    u->stage = NULL; /* stolen by the store, even when it cannot queue */
    j->pending++;
    int qrc = store_file_add_staged(o->st, &in, sg, on_output_stored, &j->cbs[i]);
    if (qrc != 0) { /* could not queue: counts as failed now */
      j->failed = j->failed ? j->failed : qrc;
      j->pending--;
    }
  }
  if (ne)
    store_file_list_free(existing, ne);
  if (--j->pending == 0)
    outputs_settled(j);
}

int orch__run_submit_result(struct orch *o, struct orch_run *run, const struct orch_result *res,
                            orch_end_cb cb, void *ud) {
  size_t n = res->n_files;
  struct result_job *j = sbx_calloc(1, sizeof(*j));
  if (j == NULL || (n && ((j->files = sbx_calloc(n, sizeof(*j->files))) == NULL ||
                          (j->kinds = sbx_calloc(n, sizeof(*j->kinds))) == NULL ||
                          (j->cbs = sbx_calloc(n, sizeof(*j->cbs))) == NULL)))
    goto oom;
  j->o = o;
  j->run = run;
  j->cb = cb;
  j->ud = ud;
  j->status = res->status;
  j->n_files = n;
  const struct orch_held *held = run->live.attempt == res->attempt ? run->live.out : NULL;
  j->out =
      capped_text(res->out_given || !held ? res->out : held[ORCH_STDOUT].text.data, &j->out_cut);
  j->err =
      capped_text(res->err_given || !held ? res->err : held[ORCH_STDERR].text.data, &j->err_cut);
  j->out_cut |= res->out_given || !held ? res->out_cut : held[ORCH_STDOUT].cut;
  j->err_cut |= res->err_given || !held ? res->err_cut : held[ORCH_STDERR].cut;
  j->restarted = res->restarted;
  j->files_unlisted = res->files_unlisted;
  j->figures_dropped = res->figures_dropped;
  j->error_json = dump_part(res->error);
  j->remounted_json = dump_part(res->remounted);
  j->notes = dump_wanted(res->notes) ? json_deep_copy(res->notes) : json_array();
  if (j->out == NULL || j->err == NULL || (dump_wanted(res->error) && !j->error_json) ||
      (dump_wanted(res->remounted) && !j->remounted_json) || j->notes == NULL ||
      keep_shown(j, run, res) != 0)
    goto oom;
  for (size_t i = 0; i < n; i++) {
    j->files[i] = res->files[i];
    j->kinds[i] = res->kinds[i] && strcmp(res->kinds[i], "figure") == 0 ? "figure" : "file";
  }
  int rc = orch__run_take_result(run, res->attempt, res->hash);
  if (rc != 0) {
    job_free(j);
    return rc;
  }
  orch__live_result(run, res->attempt, j->out, j->err);
  if (n == 0)
    commit(j);
  else
    store_outputs(j);
  return 0;
oom:
  if (j)
    job_free(j);
  return SBX_ENOMEM;
}
