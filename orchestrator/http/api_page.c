/* api_page.c -- what a page reports about a run it was sent, as requests: started, its output as
 * it goes, output files, result.  The requests are read and checked here; what they do to the run
 * is report.c's.  Each call is a sign of life of the page the run's latest attempt went to (a page
 * silent too long counts as hidden: page.c).
 *
 * POST /v1/runs/{run}/started {attempt, page_id}   -> 200; a stale attempt -> 409
 * POST /v1/runs/{run}/output {attempt, chunks?: [{stream, offset, text}], displays?: [{index,
 *      data}], input_request?: {prompt}} -> 200 {stdout, stderr, displays}: what is held for the
 *      attempt after the call (the page sends from there: report.c and live.c say what is taken);
 *      a stale attempt -> 409 stale_attempt; a malformed body -> 400 (nothing of it taken).
 * PUT  /v1/runs/{run}/files/{name*}[?attempt=N]    -> 201 {name, size, sha256}; the name is the
 *      path under /mnt/output (may hold '/'), checked by the store's naming rules (400).  The body
 *      streams into a store stage (a temp file under DATA/blobs/tmp, hashed as it comes; never
 *      whole in memory), kept with the attempt until the result.  A body arriving for a run that
 *      cannot take it (no usable credential, run not running) is read and dropped; the handler
 *      answers the same errors as ever once the body is in.  At most ORCH_CHAT_UPLOADS bodies
 *      arrive at once for one chat (its attachments' uploads included): past it 503, Retry-After.
 * POST /v1/runs/{run}/result {attempt, status, ...} -> 200 the run object, once durable: each
 *      listed file must have been uploaded first (same size and sha256); the run is stored done
 *      after its files (report.c).  The same body again -> the same answer; a different one -> 409
 *      (result_hash); a stale attempt -> 409.  `value` (a MIME bundle or null) and `displays`
 *      (bundles, at most ORCH_DISPLAYS) are checked here (400 when one is not a bundle) and bounded
 *      by bundle.c.
 * What it does not do: keep uploads or results (report.c).
 */
#include "api.h"
#include "transport.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The body's attempt: an integer from 1 to INT32_MAX (a bigger one would wrap when cast to int
 * and could pass for the current attempt).  Answers 400 and returns nonzero otherwise. */
static int read_attempt(struct tp_req *req, const json_t *body, int *attempt) {
  json_int_t a = 0;
  struct orch_field f[] = {ORCH_FIELD_REQUIRED("attempt", "I", &a)};
  if (orch__api_unpack(req, body, NULL, f, 1) != 0)
    return -1;
  if (a < 1 || a > INT32_MAX) {
    orch__api_error(req, 400, "invalid_field", "attempt: an integer from 1 to %d", INT32_MAX);
    return -1;
  }
  *attempt = (int)a;
  return 0;
}

/* 0 when attempt is the current attempt of a run a page may report on (dispatched, running, or
 * finishing its result); else answers 409 and returns 1. */
static int stale(struct orch *o, struct tp_req *req, struct orch_run *run, int attempt) {
  if (run == NULL || run->state == ORCH_RUN_DONE) {
    orch__api_error(req, 409, "conflict", "the run has ended");
    return 1;
  }
  int reporting = orch__run_on_page(run) || run->state == ORCH_RUN_FINISHING;
  if (attempt != run->attempts || !reporting) {
    o->m.results_refused++;
    orch__api_error(req, 409, "stale_attempt",
                    "attempt %d is not the current attempt of this run (%d, %s)", attempt,
                    run->attempts, orch__run_state_name(run->state));
    return 1;
  }
  return 0;
}

/* The call is a sign of life of the page it names, else of the page of the run's latest attempt
 * when the call is about that attempt. */
static void page_alive(struct orch_chat *c, struct orch_run *run, const char *page_id,
                       int attempt) {
  if (page_id != NULL)
    orch__page_sign_of_life(c, orch__chat_page(c, page_id));
  else if (run != NULL)
    orch__run_sign_of_life(run, attempt);
}

/* ---- started ------------------------------------------------------------------------------ */

static void on_started(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  struct orch_run *run;
  struct orch_chat *c;
  if (orch__api_live_run(o, req, &run, &c) != 0)
    return;
  json_t *body = orch__api_body_object(req);
  if (body == NULL)
    return;
  int attempt;
  const char *pid = NULL;
  struct orch_field f[] = {ORCH_FIELD("page_id", "s", &pid)};
  if (read_attempt(req, body, &attempt) != 0 || orch__api_unpack(req, body, NULL, f, 1) != 0) {
    json_decref(body);
    return;
  }
  page_alive(c, run, pid, attempt);
  if (!stale(o, req, run, attempt)) {
    if (pid != NULL && run->page_id[0] && strcmp(pid, run->page_id) != 0) {
      /* Two pages of one chat both saw the `run` event: only the one it names runs it. */
      orch__api_error(req, 409, "other_page", "attempt %d of this run was sent to page %s, not %s",
                      run->attempts, run->page_id, pid);
    } else {
      orch__run_report_started(o, run, attempt);
      orch__api_json(req, 200, orch__run_json(o, &run->rec));
    }
  }
  json_decref(body);
}

/* ---- output files --------------------------------------------------------------------------- */

/* The sink's context of a PUT: the stage its body goes to (NULL: the body is dropped), and the
 * chat its arriving body counts against (NULL once it is in). */
struct put_ctx {
  struct store_blob_stage *stage;
  struct orch_chat *chat;
};

/* The quiet part of the handler's checks, for the sink (which cannot answer): the run when the
 * body could be kept (a credential that may reach the run's chat, an attempt out on a page), else
 * NULL, with *elsewhere set when the run is not in this node's memory but nodes are on: the body
 * is kept for the node that serves it (nodes.c), which counts and checks it. */
static struct orch_run *put_could_keep(struct orch *o, struct tp_req *req, int *elsewhere) {
  struct orch_auth a;
  *elsewhere = 0;
  orch__api_auth(o, req, NULL, &a);
  if (a.kind == ORCH_CRED_NONE || a.kind == ORCH_CRED_BAD || a.origin_bad)
    return NULL;
  const char *id = tp_req_param(req, "run");
  struct orch_run *run = orch__valid_id(id) ? orch__map_get(&o->runs, id) : NULL;
  /* perhaps another node's run (nodes.c); never for the hosts' key, which reaches this node's
   * chats only */
  *elsewhere = run == NULL && o->nodes != NULL && a.kind != ORCH_CRED_HOST;
  if (run == NULL || run->chat == NULL || !orch__run_on_page(run))
    return NULL;
  if ((a.kind == ORCH_CRED_PAGE || a.kind == ORCH_CRED_SESSION) &&
      !orch__auth_allows_chat(&a, run->chat))
    return NULL;
  return run;
}

static void put_ctx_free(struct put_ctx *p) {
  if (p->chat)
    orch__chat_upload_end(p->chat);
  store_blob_stage_abort(p->stage);
  sbx_free(p);
}

static void on_put_gone(struct tp_req *req, void *ud) {
  tp_req_set_data(req, NULL);
  put_ctx_free(ud);
}

static int on_put_body(struct tp_req *req, const void *data, size_t len, void *ud) {
  struct orch *o = ud;
  struct put_ctx *p = tp_req_get_data(req);
  struct sbx_error err;
  sbx_error_clear(&err);
  if (p == NULL) {
    int elsewhere;
    struct orch_run *run = put_could_keep(o, req, &elsewhere);
    if (run != NULL && orch__chat_upload_begin(run->chat) != 0) {
      o->m.uploads_refused_busy++;
      return SBX_EBUSY; /* 503 with Retry-After: the chat has enough uploads arriving */
    }
    if ((p = sbx_calloc(1, sizeof(*p))) == NULL) {
      if (run)
        orch__chat_upload_end(run->chat);
      return SBX_ENOMEM;
    }
    p->chat = run ? run->chat : NULL;
    if ((run || elsewhere) && store_blob_stage_begin(o->st, &p->stage, &err) != 0) {
      sbx_log(SBX_LOG_ERROR, "page", "output file not staged: %s", err.msg);
      put_ctx_free(p);
      return SBX_EIO;
    }
    tp_req_set_data(req, p);
    tp_req_on_close(req, on_put_gone, p);
  }
  if (p->stage && store_blob_stage_write(p->stage, data, len, &err) != 0) {
    sbx_log(SBX_LOG_ERROR, "page", "output file: %s", err.msg);
    return SBX_EIO; /* 500; the close callback drops the stage */
  }
  return 0;
}

/* The checks and the bookkeeping of a PUT whose body is in *stage (NULL: none was kept, because
 * the body was empty or dropped).  Takes *stage (sets it NULL) only when the file is kept. */
static void put_file(struct orch *o, struct tp_req *req, struct store_blob_stage **stage,
                     int dropped) {
  struct orch_run *run;
  struct orch_chat *c;
  if (orch__api_live_run_body(o, req, &run, &c, stage) != 0)
    return;
  const char *qa = tp_req_query(req, "attempt");
  int attempt = run ? run->attempts : 0;
  if (qa) {
    char *end;
    long v = strtol(qa, &end, 10);
    attempt = (int)v;
    if (end == qa || *end || v < 1 || v > INT32_MAX) {
      orch__api_error(req, 400, "invalid_field", "attempt: an integer");
      return;
    }
  }
  page_alive(c, run, NULL, attempt);
  if (stale(o, req, run, attempt))
    return;
  if (run->state == ORCH_RUN_FINISHING) {
    orch__api_error(req, 409, "conflict", "the run's result is being stored");
    return;
  }
  struct sbx_error err;
  sbx_error_clear(&err);
  char *name = NULL;
  if (store_name_normalize(tp_req_param(req, "name"), STORE_SRC_OUTPUT, &name, &err) != 0) {
    orch__api_error(req, 400, "invalid_name", "%s", err.msg[0] ? err.msg : "invalid file name");
    return;
  }
  if (*stage == NULL && dropped) { /* the run could not take it when the body came */
    sbx_free(name);
    orch__api_error(req, 503, "busy", "output file not kept; try again");
    return;
  }
  char sha[65];
  if ((*stage == NULL && store_blob_stage_begin(o->st, stage, &err) != 0) ||
      store_blob_stage_finish(*stage, sha, &err) != 0) {
    sbx_free(name);
    orch__api_error(req, 500, "storage", "output file not staged: %s", err.msg);
    return;
  }
  struct orch_upload *u;
  int rc = orch__run_add_upload(o, run, name, stage, sha, attempt, &u);
  if (rc != 0) {
    if (rc == SBX_EFULL)
      orch__api_fail(req, rc, ORCH_OP_PAGE_FILE, "at most %d files per run", ORCH_FILES_LISTED);
    else
      orch__api_fail(req, rc, ORCH_OP_PAGE_FILE, "%s",
                     rc == SBX_EBUSY ? "too many output bytes waiting for results; try again"
                                     : sbx_strerror(rc));
    return;
  }
  json_t *j = json_object();
  json_object_set_new(j, "name", json_string(u->name));
  json_object_set_new(j, "size", json_integer((json_int_t)u->size));
  json_object_set_new(j, "sha256", json_string(u->sha256));
  orch__api_json(req, 201, j);
}

static void on_put_file(struct tp_req *req, void *ud) {
  struct put_ctx *p = tp_req_get_data(req);
  tp_req_on_close(req, NULL, NULL); /* from here on the stage is this handler's */
  tp_req_set_data(req, NULL);
  struct store_blob_stage *stage = p ? p->stage : NULL;
  int had_body = p != NULL;
  if (p) { /* the body is in: it no longer counts against its chat */
    p->stage = NULL;
    put_ctx_free(p);
  }
  put_file(ud, req, &stage, had_body);
  store_blob_stage_abort(stage); /* not kept (refused): NULL when it was */
}

/* ---- result ------------------------------------------------------------------------------- */

/* An array of strings (notes, remounted). */
static int strings(const json_t *v) {
  size_t k;
  json_t *x;
  if (!json_is_array(v))
    return 0;
  json_array_foreach(v, k, x) if (!json_is_string(x)) return 0;
  return 1;
}

/* One entry of a result's files: {name, size?, sha256?, kind?}.  size, sha256 and kind may be left
 * out (or null), but never given as another type: a size "999" or a sha256 42 would otherwise
 * skip the comparison with the uploaded bytes.  Answers 400 and returns nonzero when it is wrong. */
static int read_file_entry(struct tp_req *req, const json_t *x, const char **name,
                           const char **kind, const char **sha, json_int_t *size, int *has_size) {
  *name = *kind = *sha = NULL;
  *size = 0;
  struct orch_field f[] = {ORCH_FIELD_REQUIRED("name", "s", name), ORCH_FIELD("size", "I", size),
                           ORCH_FIELD("sha256", "s", sha), ORCH_FIELD("kind", "s", kind)};
  if (!json_is_object(x)) {
    orch__api_error(req, 400, "invalid_field",
                    "files: each {name, size, sha256, kind: file|figure}");
    return -1;
  }
  if (orch__api_unpack(req, x, "files", f, SBX_ARRAY_SIZE(f)) != 0)
    return -1;
  *has_size = f[1].given;
  const char *bad = *size < 0                    ? "files.size: a size in bytes"
                    : *sha && strlen(*sha) != 64 ? "files.sha256: 64 hex digits"
                    : *kind && strcmp(*kind, "file") && strcmp(*kind, "figure")
                        ? "files.kind: file or figure"
                        : NULL;
  if (bad != NULL) {
    orch__api_error(req, 400, "invalid_field", "%s", bad);
    return -1;
  }
  return 0;
}

/* Each element of the array v a MIME bundle (bundle.c)?  Answers 400 naming `field` and returns
 * nonzero when one is not. */
static int bundles_ok(struct tp_req *req, const char *field, const json_t *v, size_t max) {
  char why[160];
  if (!json_is_array(v) || json_array_size(v) > max) {
    orch__api_error(req, 400, "invalid_field", "%s: an array of at most %zu MIME bundles", field,
                    max);
    return -1;
  }
  for (size_t i = 0; i < json_array_size(v); i++)
    if (orch__bundle_valid(json_array_get(v, i), why, sizeof(why)) != 0) {
      orch__api_error(req, 400, "invalid_field", "%s[%zu]: %s", field, i, why);
      return -1;
    }
  return 0;
}

/* The fields of a result body besides its attempt, into res (borrowed from body) and *files.
 * Answers 400 and returns nonzero when one is wrong. */
static int read_result(struct tp_req *req, const json_t *body, struct orch_result *res,
                       json_t **files) {
  const char *status = NULL;
  json_int_t unlisted = 0, dropped = 0;
  json_t *error = NULL;
  *files = NULL;
  struct orch_field f[] = {
      ORCH_FIELD_REQUIRED("status", "s", &status),
      ORCH_FIELD("stdout", "s", &res->out),
      ORCH_FIELD("stderr", "s", &res->err),
      ORCH_FIELD("stdout_truncated", "b", &res->out_cut),
      ORCH_FIELD("stderr_truncated", "b", &res->err_cut),
      ORCH_FIELD("restarted", "b", &res->restarted),
      ORCH_FIELD("files_unlisted", "I", &unlisted),
      ORCH_FIELD("figures_dropped", "I", &dropped),
      ORCH_FIELD("error", "o", &error),
      ORCH_FIELD("notes", "o", &res->notes),
      ORCH_FIELD("remounted", "o", &res->remounted),
      ORCH_FIELD("files", "o", files),
      ORCH_FIELD("value", "o", &res->value),
      ORCH_FIELD("displays", "o", &res->displays),
  };
  if (orch__api_unpack(req, body, NULL, f, SBX_ARRAY_SIZE(f)) != 0)
    return -1;
  res->out_given = f[1].given;
  res->err_given = f[2].given;
  char why[160];
  if (res->value && orch__bundle_valid(res->value, why, sizeof(why)) != 0) {
    orch__api_error(req, 400, "invalid_field", "value: null or %s", why);
    return -1;
  }
  if (res->displays && bundles_ok(req, "displays", res->displays, ORCH_DISPLAYS) != 0)
    return -1;
  enum orch_run_status st = ORCH_RUN_STATUS_NONE;
  const char *message = NULL, *traceback = NULL, *type = NULL;
  struct orch_field ef[] = {ORCH_FIELD_REQUIRED("type", "s", &type),
                            ORCH_FIELD("message", "s", &message),
                            ORCH_FIELD("traceback", "s", &traceback)};
  const char *bad = NULL;
  if (orch__run_status_parse(status, &st) != 0 || st > ORCH_RUN_STATUS_CANCELLED)
    bad = "status: one of ok, error, timeout, crashed, cancelled";
  else if (unlisted < 0 || unlisted > INT32_MAX || dropped < 0 || dropped > INT32_MAX)
    bad = "files_unlisted, figures_dropped: non-negative integers";
  else if (error && !json_is_object(error))
    bad = "error: null or {type, message, traceback} (strings)";
  else if ((res->notes && !strings(res->notes)) || (res->remounted && !strings(res->remounted)))
    bad = "notes, remounted: arrays of strings";
  else if (*files && (!json_is_array(*files) || json_array_size(*files) > ORCH_FILES_LISTED))
    bad = "files: an array of at most 200 {name, size, sha256, kind}";
  if (bad != NULL) {
    orch__api_error(req, 400, "invalid_field", "%s", bad);
    return -1;
  }
  if (error && orch__api_unpack(req, error, "error", ef, SBX_ARRAY_SIZE(ef)) != 0)
    return -1;
  res->status = st;
  res->files_unlisted = (int)unlisted;
  res->figures_dropped = (int)dropped;
  res->error = error;
  return 0;
}

/* Replaces every U+0000 in the string values of j (at any depth) by U+FFFD.  Program output may
 * hold NUL characters (print('\0')); refusing them would make the run's result unreportable, and
 * kept they would cut the C strings the run is stored from.  Object keys with NUL stay (no field
 * of ours has one; such a key is simply never read). */
static void replace_nul(json_t *j) {
  if (json_is_string(j)) {
    const char *s = json_string_value(j);
    size_t n = json_string_length(j), nul = 0;
    for (size_t i = 0; i < n; i++)
      nul += s[i] == '\0';
    if (nul == 0)
      return;
    char *t = sbx_malloc(n + 2 * nul + 1);
    if (t == NULL)
      return;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
      if (s[i] == '\0') {
        memcpy(t + o, "\xEF\xBF\xBD", 3);
        o += 3;
      } else {
        t[o++] = s[i];
      }
    }
    json_string_setn_nocheck(j, t, o);
    sbx_free(t);
  } else if (json_is_array(j)) {
    size_t i;
    json_t *v;
    json_array_foreach(j, i, v) replace_nul(v);
  } else if (json_is_object(j)) {
    const char *k;
    json_t *v;
    json_object_foreach(j, k, v) replace_nul(v);
  }
}

/* The output files a result lists, each matched to its upload of this attempt (into ups, their
 * kinds into kinds).  Answers 400 and returns nonzero when one is wrong. */
static int result_files(struct tp_req *req, struct orch_run *run, const json_t *files,
                        struct orch_upload **ups, const char **kinds) {
  for (size_t i = 0; i < json_array_size(files); i++) {
    const char *name, *sha;
    json_int_t size;
    int has_size;
    if (read_file_entry(req, json_array_get(files, i), &name, &kinds[i], &sha, &size, &has_size) !=
        0)
      return -1;
    struct sbx_error err;
    char *norm = NULL;
    if (store_name_normalize(name, STORE_SRC_OUTPUT, &norm, &err) != 0) {
      orch__api_error(req, 400, "invalid_name", "%s", err.msg);
      return -1;
    }
    struct orch_upload *u = orch__run_upload(run, norm);
    if (u == NULL || u->attempt != run->attempts ||
        (u->stage == NULL && u->file_id[0] == '\0' && !u->over_quota)) {
      orch__api_error(req, 400, "file_not_uploaded",
                      "files: %s was listed but not uploaded (PUT /v1/runs/%s/files/<name> first)",
                      norm, run->id);
      sbx_free(norm);
      return -1;
    }
    sbx_free(norm);
    if ((sha && strcmp(sha, u->sha256) != 0) || (has_size && (size_t)size != u->size)) {
      orch__api_error(req, 400, "file_mismatch",
                      "files: %s differs from the uploaded content (size or sha256)", u->name);
      return -1;
    }
    for (size_t k = 0; k < i; k++)
      if (ups[k] == u) {
        orch__api_error(req, 400, "invalid_field", "files: %s listed twice", u->name);
        return -1;
      }
    ups[i] = u;
  }
  return 0;
}

static void on_result(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  struct orch_run *run;
  struct orch_chat *c;
  struct store_run rec;
  if (orch__api_run(o, req, tp_req_param(req, "run"), &run, &rec, &c) != 0)
    return;
  json_t *body = orch__api_body_object_flags(req, JSON_ALLOW_NUL);
  if (body == NULL) {
    store_run_free(&rec);
    return;
  }
  replace_nul(body);
  /* The result's hash, over its canonical text: a resend is the same result, another one is not. */
  char *canon = json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS);
  char hash[65] = "";
  if (canon)
    store_sha256_hex(canon, strlen(canon), hash);
  free(canon);
  struct orch_upload **ups = NULL;
  const char **kinds = NULL;
  int attempt;
  if (read_attempt(req, body, &attempt) != 0)
    goto out;
  page_alive(c, run, NULL, attempt);
  /* Ended (or ending) already: the same result gets the same answer, another one 409. */
  if (run == NULL || run->state == ORCH_RUN_DONE || run->state == ORCH_RUN_FINISHING) {
    const char *have = run == NULL                        ? rec.result_hash
                       : run->state == ORCH_RUN_FINISHING ? run->finishing_hash
                                                          : run->rec.result_hash;
    int same = have && *have && strcmp(have, hash) == 0;
    if (same && run == NULL)
      orch__api_json(req, 200, orch__run_json(o, &rec));
    else if (same)
      orch__waiter_add(o, req, run, 200, 60000); /* answered when the first copy is durable */
    else {
      o->m.results_refused++;
      orch__api_error(req, 409, "conflict", "a different result was already recorded for this run");
    }
    goto out;
  }
  if (stale(o, req, run, attempt))
    goto out;
  struct orch_result res = {.attempt = attempt, .hash = hash};
  json_t *files;
  if (read_result(req, body, &res, &files) != 0)
    goto out;
  size_t n = files ? json_array_size(files) : 0;
  if (n && ((ups = sbx_calloc(n, sizeof(*ups))) == NULL ||
            (kinds = sbx_calloc(n, sizeof(*kinds))) == NULL)) {
    orch__api_error(req, 500, "internal", "out of memory");
    goto out;
  }
  if (n && result_files(req, run, files, ups, kinds) != 0)
    goto out;
  res.files = ups;
  res.kinds = kinds;
  res.n_files = n;
  tp_req_hold(req); /* answered once the run is stored done (orch__api_answer_end) */
  if (orch__run_submit_result(o, run, &res, orch__api_answer_end, req) != 0) {
    tp_req_release(req);
    orch__api_error(req, 500, "internal", "out of memory");
  }
out:
  sbx_free(ups);
  sbx_free(kinds);
  store_run_free(&rec);
  json_decref(body);
}

/* ---- output as it goes ------------------------------------------------------------------- */

#define OUTPUT_CHUNKS_MAX 64 /* chunks per call (the page sends one per stream) */

/* The chunks of an output body into c (borrowed from it).  Answers 400 and returns nonzero when
 * one is wrong. */
static int read_chunks(struct tp_req *req, const json_t *v, struct orch_chunk *c, size_t *n) {
  *n = 0;
  if (v == NULL)
    return 0;
  if (!json_is_array(v) || json_array_size(v) > OUTPUT_CHUNKS_MAX) {
    orch__api_error(req, 400, "invalid_field",
                    "chunks: an array of at most %d {stream, offset, "
                    "text}",
                    OUTPUT_CHUNKS_MAX);
    return -1;
  }
  for (size_t i = 0; i < json_array_size(v); i++) {
    const json_t *x = json_array_get(v, i);
    const char *stream = NULL, *text = NULL;
    json_int_t offset = 0;
    struct orch_field f[] = {ORCH_FIELD_REQUIRED("stream", "s", &stream),
                             ORCH_FIELD_REQUIRED("offset", "I", &offset),
                             ORCH_FIELD_REQUIRED("text", "s", &text)};
    if (!json_is_object(x)) {
      orch__api_error(req, 400, "invalid_field", "chunks: each {stream, offset, text}");
      return -1;
    }
    if (orch__api_unpack(req, x, "chunks", f, SBX_ARRAY_SIZE(f)) != 0)
      return -1;
    int out = strcmp(stream, "stdout") == 0;
    if ((!out && strcmp(stream, "stderr") != 0) || offset < 0) {
      orch__api_error(req, 400, "invalid_field",
                      "chunks: stream stdout or stderr, offset a number of characters (>= 0)");
      return -1;
    }
    c[(*n)++] = (struct orch_chunk){.stream = out ? ORCH_STDOUT : ORCH_STDERR,
                                    .offset = (size_t)offset,
                                    .text = text,
                                    .len = json_string_length(json_object_get(x, "text"))};
  }
  return 0;
}

/* The displays of an output body ([{index, data}]) into index/data (borrowed).  Answers 400 and
 * returns nonzero when one is wrong. */
static int read_displays(struct tp_req *req, const json_t *v, size_t *index, const json_t **data,
                         size_t *n) {
  *n = 0;
  if (v == NULL)
    return 0;
  char why[160];
  if (!json_is_array(v) || json_array_size(v) > ORCH_DISPLAYS) {
    orch__api_error(req, 400, "invalid_field", "displays: an array of at most %d {index, data}",
                    ORCH_DISPLAYS);
    return -1;
  }
  for (size_t i = 0; i < json_array_size(v); i++) {
    const json_t *x = json_array_get(v, i);
    json_int_t ix = 0;
    json_t *d = NULL;
    struct orch_field f[] = {ORCH_FIELD_REQUIRED("index", "I", &ix),
                             ORCH_FIELD_REQUIRED("data", "o", &d)};
    if (!json_is_object(x)) {
      orch__api_error(req, 400, "invalid_field", "displays: each {index, data}");
      return -1;
    }
    if (orch__api_unpack(req, x, "displays", f, SBX_ARRAY_SIZE(f)) != 0)
      return -1;
    if (ix < 0 || ix > INT32_MAX) {
      orch__api_error(req, 400, "invalid_field", "displays.index: a number from 0");
      return -1;
    }
    if (orch__bundle_valid(d, why, sizeof(why)) != 0) {
      orch__api_error(req, 400, "invalid_field", "displays.data: %s", why);
      return -1;
    }
    index[*n] = (size_t)ix;
    data[(*n)++] = d;
  }
  return 0;
}

static void on_output(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  struct orch_run *run;
  struct orch_chat *c;
  if (orch__api_live_run(o, req, &run, &c) != 0)
    return;
  json_t *body = orch__api_body_object_flags(req, JSON_ALLOW_NUL);
  if (body == NULL)
    return;
  replace_nul(body);
  struct orch_chunk chunks[OUTPUT_CHUNKS_MAX];
  size_t index[ORCH_DISPLAYS];
  const json_t *displays[ORCH_DISPLAYS];
  json_t *jchunks = NULL, *jdisplays = NULL, *ask = NULL;
  const char *prompt = NULL;
  struct orch_output out = {.chunks = chunks, .display_index = index, .displays = displays};
  struct orch_field f[] = {ORCH_FIELD("chunks", "o", &jchunks),
                           ORCH_FIELD("displays", "o", &jdisplays),
                           ORCH_FIELD("input_request", "o", &ask)};
  struct orch_field pf[] = {ORCH_FIELD("prompt", "s", &prompt)};
  if (read_attempt(req, body, &out.attempt) != 0 ||
      orch__api_unpack(req, body, NULL, f, SBX_ARRAY_SIZE(f)) != 0 ||
      read_chunks(req, jchunks, chunks, &out.n_chunks) != 0 ||
      read_displays(req, jdisplays, index, displays, &out.n_displays) != 0)
    goto out;
  if (ask && (!json_is_object(ask) || orch__api_unpack(req, ask, "input_request", pf, 1) != 0)) {
    if (!json_is_object(ask))
      orch__api_error(req, 400, "invalid_field", "input_request: {prompt}");
    goto out;
  }
  out.prompt = ask ? (prompt ? prompt : "") : NULL;
  page_alive(c, run, NULL, out.attempt);
  if (stale(o, req, run, out.attempt))
    goto out;
  int rc = orch__run_report_output(o, run, &out);
  if (rc == SBX_ECONFLICT) {
    stale(o, req, NULL, out.attempt);
    goto out;
  }
  if (rc != 0) {
    orch__api_error(req, 500, "internal", "out of memory");
    goto out;
  }
  size_t held[3];
  orch__live_held(run, &held[0], &held[1], &held[2]);
  char text[96]; /* three numbers: written as they are (a page makes this call every ~50 ms) */
  int n = snprintf(text, sizeof(text), "{\"stdout\":%zu,\"stderr\":%zu,\"displays\":%zu}", held[0],
                   held[1], held[2]);
  orch__api_text(req, 200, text, (size_t)n);
out:
  json_decref(body);
}

void orch__routes_page(struct orch *o) {
  tp_route(o->tp, "POST", "/v1/runs/{run}/started", 16 * 1024, on_started, o);
  tp_route_streamed(o->tp, "PUT", "/v1/runs/{run}/files/{name*}", ORCH_UPLOAD_MAX, on_put_body,
                    on_put_file, o);
  tp_route(o->tp, "POST", "/v1/runs/{run}/result", 4u << 20, on_result, o);
  tp_route(o->tp, "POST", "/v1/runs/{run}/output", 4u << 20, on_output, o);
}
