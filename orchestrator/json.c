/* json.c -- the JSON shapes of the API, over jansson: the run object (the fields docs/api.md lists,
 * value and displays included), the file object and the `run` event a page is dispatched; and the
 * one walker of the UTF-8 text jansson hands us; what an id looks like (orch__valid_id).
 * References: functions named *_json return a NEW reference.
 * What it does not do: parse request bodies (the handlers do, field by field, with 400s).
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

int orch__valid_id(const char *s) {
  if (s == NULL || strlen(s) != STORE_ID_LEN)
    return 0;
  for (const char *p = s; *p; p++)
    if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
      return 0;
  return 1;
}

char *orch__json_dump(const json_t *j, size_t *len) {
  char *s = j ? json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
  if (s == NULL)
    return NULL;
  char *d = sbx_strdup(s); /* sbx-owned, as every string our records hold */
  free(s);
  if (d && len)
    *len = strlen(d);
  return d;
}

size_t orch__utf8_next(const char *s, size_t len, uint32_t *cp) {
  const unsigned char *u = (const unsigned char *)s;
  size_t n = u[0] < 0x80 ? 1 : u[0] < 0xE0 ? 2 : u[0] < 0xF0 ? 3 : 4;
  if (n > len)
    n = len; /* not valid UTF-8 after all: the rest is one character */
  if (cp != NULL) {
    static const unsigned char lead_mask[5] = {0, 0x7F, 0x1F, 0x0F, 0x07};
    uint32_t v = u[0] & lead_mask[n];
    for (size_t i = 1; i < n; i++)
      v = (v << 6) | (u[i] & 0x3F);
    *cp = v;
  }
  return n;
}

/* A stored JSON part: NULL for none ("" or NULL) or one that does not parse. */
static json_t *parse_text(const char *text) {
  if (text == NULL || *text == '\0')
    return NULL;
  return json_loads(text, JSON_DECODE_ANY, NULL);
}

static json_t *str_or_null(const char *s) { return s ? json_string(s) : json_null(); }
static json_t *ms_or_null(int64_t ms) { return ms ? json_integer(ms) : json_null(); }

void orch__code_note(const char *path, char *buf, size_t cap) {
  snprintf(buf, cap, "The file is available to code at %s (its latest version, if it has been edited).",
           path);
}

json_t *orch__file_json(const struct store_file *f, int exec_on) {
  json_t *j = json_object();
  json_object_set_new(j, "file_id", json_string(f->id));
  json_object_set_new(j, "name", json_string(f->name));
  json_object_set_new(j, "version", json_integer(f->version));
  json_object_set_new(j, "size", json_integer((json_int_t)f->size));
  json_object_set_new(j, "sha256", json_string(f->sha256));
  json_object_set_new(j, "source", json_string(store_source_name(f->source)));
  json_object_set_new(j, "kind", str_or_null(f->kind));
  json_object_set_new(j, "text_of", f->text_of[0] ? json_string(f->text_of) : json_null());
  json_object_set_new(j, "run_id", f->run_id[0] ? json_string(f->run_id) : json_null());
  json_object_set_new(j, "mounted", json_boolean(f->mounted));
  json_object_set_new(j, "left_out_reason", str_or_null(f->mounted ? NULL : f->left_out_reason));
  if (f->mounted) {
    char path[STORE_NAME_MAX + 32], note[STORE_NAME_MAX + 160];
    snprintf(path, sizeof(path), "/mnt/data/%s", f->name);
    json_object_set_new(j, "path", json_string(path));
    if (exec_on) {
      orch__code_note(path, note, sizeof(note));
      json_object_set_new(j, "code_note", json_string(note));
    } else {
      json_object_set_new(j, "code_note", json_null());
    }
  } else {
    json_object_set_new(j, "path", json_null());
    json_object_set_new(j, "code_note", json_null());
  }
  json_object_set_new(j, "created_at", json_integer(f->created_at));
  json_object_set_new(j, "expires_at", ms_or_null(f->expires_at));
  return j;
}

/* The run's files (output artifacts, in order) as a new array. */
static json_t *run_files_json(const struct store_file *fv, size_t n) {
  json_t *files = json_array();
  for (size_t i = 0; i < n; i++) {
    json_t *f = json_object();
    char path[STORE_NAME_MAX + 32];
    snprintf(path, sizeof(path), "/mnt/output/%s", fv[i].name);
    json_object_set_new(f, "name", json_string(fv[i].name));
    json_object_set_new(f, "path", json_string(path));
    json_object_set_new(f, "size", json_integer((json_int_t)fv[i].size));
    json_object_set_new(f, "sha256", json_string(fv[i].sha256));
    json_object_set_new(f, "artifact_id", json_string(fv[i].id));
    json_object_set_new(f, "version", json_integer(fv[i].version));
    json_object_set_new(f, "kind", json_string(fv[i].kind ? fv[i].kind : "file"));
    json_array_append_new(files, f);
  }
  return files;
}

json_t *orch__run_json(struct orch *o, const struct store_run *r) {
  struct store_file *fv = NULL;
  size_t n = 0;
  if (o != NULL && r->status != NULL && store_run_files(o->st, r->id, &fv, &n) != 0)
    n = 0;
  json_t *j = orch__run_json_files(r, fv, n);
  store_file_list_free(fv, n);
  return j;
}

json_t *orch__run_json_files(const struct store_run *r, const struct store_file *fv, size_t nf) {
  json_t *j = json_object();
  json_object_set_new(j, "run_id", json_string(r->id));
  json_object_set_new(j, "chat_id", json_string(r->chat_id));
  json_object_set_new(j, "turn_id", r->turn_id[0] ? json_string(r->turn_id) : json_null());
  json_object_set_new(j, "code", str_or_null(r->code));
  json_object_set_new(j, "origin", str_or_null(r->origin));
  json_object_set_new(j, "state", str_or_null(r->state));
  json_object_set_new(j, "status", str_or_null(r->status));
  json_object_set_new(j, "stdout", json_string(r->stdout_text ? r->stdout_text : ""));
  json_object_set_new(j, "stderr", json_string(r->stderr_text ? r->stderr_text : ""));
  json_object_set_new(j, "stdout_truncated", json_boolean(r->stdout_truncated));
  json_object_set_new(j, "stderr_truncated", json_boolean(r->stderr_truncated));
  json_t *err = parse_text(r->error_json);
  json_object_set_new(j, "error", err ? err : json_null());
  json_object_set_new(j, "files", run_files_json(fv, nf));
  json_object_set_new(j, "files_unlisted", json_integer(r->files_unlisted));
  json_object_set_new(j, "figures_dropped", json_integer(r->figures_dropped));
  json_t *notes = parse_text(r->notes_json);
  json_object_set_new(j, "notes",
                      json_is_array(notes) ? notes : (json_decref(notes), json_array()));
  json_object_set_new(j, "restarted", json_boolean(r->restarted));
  json_t *rem = parse_text(r->remounted_json);
  json_object_set_new(j, "remounted", json_is_array(rem) ? rem : (json_decref(rem), json_array()));
  json_t *value = parse_text(r->value_json);
  json_object_set_new(j, "value",
                      json_is_object(value) ? value : (json_decref(value), json_null()));
  json_t *shown = parse_text(r->displays_json);
  json_object_set_new(j, "displays",
                      json_is_array(shown) ? shown : (json_decref(shown), json_array()));
  json_object_set_new(j, "attempts", json_integer(r->attempts));
  json_object_set_new(j, "created_at", ms_or_null(r->created_at));
  json_object_set_new(j, "started_at", ms_or_null(r->started_at));
  json_object_set_new(j, "finished_at", ms_or_null(r->finished_at));
  json_object_set_new(j, "duration_ms",
                      r->started_at && r->finished_at ? json_integer(r->finished_at - r->started_at)
                                                      : json_null());
  return j;
}

const char *orch__run_end_text(struct orch *o, struct orch_run *run, size_t *len) {
  if (run->end_text == NULL) {
    /* Its files are read from the store only if its result recorded some (run files are written
     * nowhere else). */
    json_t *j = orch__run_json(run->files_recorded ? o : NULL, &run->rec);
    run->end_text = orch__json_dump(j, &run->end_len);
    json_decref(j);
  }
  *len = run->end_len;
  return run->end_text;
}

/* The `run` event's payload: {run_id, chat_id, page_id, code, origin, timeout_s, attempt, mounts,
 * left_out, limits, pypi, heartbeat_ms}, the manifest's entries {name, file_id, version, sha256,
 * size, url} and {name, reason} (m NULL: both []), the limits {out_chars, files_listed, figures,
 * file_load_bytes, displays, input_wait_s}.  A string that is not UTF-8 (json_string refuses it)
 * leaves its field out. */
json_t *orch__dispatch_json(const char *run_id, const char *chat_id, const char *page_id,
                            const char *code, const char *origin, int timeout_s, int attempt,
                            const struct orch_manifest *m, int pypi,
                            const struct orch_runtime *rt) {
  json_t *mounts = json_array(), *left = json_array();
  for (size_t i = 0; m && i < m->n_mounts; i++) {
    const struct store_file *f = m->mounts[i].file;
    char url[80];
    snprintf(url, sizeof(url), "/v1/files/%s", f->id);
    json_t *e = json_object();
    json_object_set_new(e, "name", json_string(f->name));
    json_object_set_new(e, "file_id", json_string(f->id));
    json_object_set_new(e, "version", json_integer(f->version));
    json_object_set_new(e, "sha256", json_string(f->sha256));
    json_object_set_new(e, "size", json_integer((json_int_t)f->size));
    json_object_set_new(e, "url", json_string(url));
    json_array_append_new(mounts, e);
  }
  for (size_t i = 0; m && i < m->n_left_out; i++) {
    json_t *e = json_object();
    json_object_set_new(e, "name", json_string(m->left_out[i].file->name));
    json_object_set_new(e, "reason", json_string(m->left_out[i].reason));
    json_array_append_new(left, e);
  }
  json_t *j = json_object();
  json_object_set_new(j, "run_id", json_string(run_id));
  json_object_set_new(j, "chat_id", json_string(chat_id));
  json_object_set_new(j, "page_id", json_string(page_id));
  json_object_set_new(j, "code", json_string(code));
  json_object_set_new(j, "origin", json_string(origin));
  json_object_set_new(j, "timeout_s", json_integer(timeout_s));
  json_object_set_new(j, "attempt", json_integer(attempt));
  json_object_set_new(j, "mounts", mounts);
  json_object_set_new(j, "left_out", left);
  json_object_set_new(j, "limits",
                      json_pack("{s:i, s:i, s:i, s:I, s:i, s:i}", "out_chars", ORCH_OUT_CHARS,
                                "files_listed", ORCH_FILES_LISTED, "figures", ORCH_FIGURES,
                                "file_load_bytes", (json_int_t)ORCH_UPLOAD_MAX, "displays",
                                ORCH_DISPLAYS, "input_wait_s", rt->input_wait_s));
  json_object_set_new(j, "pypi", json_boolean(pypi));
  json_object_set_new(j, "heartbeat_ms", json_integer((json_int_t)rt->page_heartbeat_ms));
  return j;
}
