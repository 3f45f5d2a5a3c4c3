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

/* An id or a sha256 of ours (lower-case hex, made here): nothing in it for jansson's UTF-8 check. */
static json_t *hex_string(const char *s) { return json_string_nocheck(s); }

static json_t *str_or_null(const char *s) { return s ? json_string(s) : json_null(); }
static json_t *ms_or_null(int64_t ms) { return ms ? json_integer(ms) : json_null(); }

void orch__code_note(const char *path, char *buf, size_t cap) {
  snprintf(buf, cap, "The file is available to code at %s (its latest version, if it has been edited).",
           path);
}

/* Sets a member whose key is a literal of ours: jansson's check that the key is UTF-8 is for keys
 * that come from outside. */
static void set_lit(json_t *obj, const char *key, json_t *v) {
  json_object_set_new_nocheck(obj, key, v);
}

json_t *orch__file_json(const struct store_file *f, int exec_on) {
  json_t *j = json_object();
  set_lit(j, "file_id", hex_string(f->id));
  set_lit(j, "name", json_string(f->name));
  set_lit(j, "version", json_integer(f->version));
  set_lit(j, "size", json_integer((json_int_t)f->size));
  set_lit(j, "sha256", hex_string(f->sha256));
  set_lit(j, "source", json_string(store_source_name(f->source)));
  set_lit(j, "kind", str_or_null(f->kind));
  set_lit(j, "text_of", f->text_of[0] ? json_string(f->text_of) : json_null());
  set_lit(j, "run_id", f->run_id[0] ? json_string(f->run_id) : json_null());
  set_lit(j, "mounted", json_boolean(f->mounted));
  set_lit(j, "left_out_reason", str_or_null(f->mounted ? NULL : f->left_out_reason));
  if (f->mounted) {
    char path[STORE_NAME_MAX + 32], note[STORE_NAME_MAX + 160];
    snprintf(path, sizeof(path), "/mnt/data/%s", f->name);
    set_lit(j, "path", json_string(path));
    if (exec_on) {
      orch__code_note(path, note, sizeof(note));
      set_lit(j, "code_note", json_string(note));
    } else {
      set_lit(j, "code_note", json_null());
    }
  } else {
    set_lit(j, "path", json_null());
    set_lit(j, "code_note", json_null());
  }
  set_lit(j, "created_at", json_integer(f->created_at));
  set_lit(j, "expires_at", ms_or_null(f->expires_at));
  return j;
}

/* The run's files (output artifacts, in order) as a new array. */
static json_t *run_files_json(const struct store_file *fv, size_t n) {
  json_t *files = json_array();
  for (size_t i = 0; i < n; i++) {
    json_t *f = json_object();
    char path[STORE_NAME_MAX + 32];
    snprintf(path, sizeof(path), "/mnt/output/%s", fv[i].name);
    set_lit(f, "name", json_string(fv[i].name));
    set_lit(f, "path", json_string(path));
    set_lit(f, "size", json_integer((json_int_t)fv[i].size));
    set_lit(f, "sha256", hex_string(fv[i].sha256));
    set_lit(f, "artifact_id", hex_string(fv[i].id));
    set_lit(f, "version", json_integer(fv[i].version));
    set_lit(f, "kind", json_string(fv[i].kind ? fv[i].kind : "file"));
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
  set_lit(j, "run_id", hex_string(r->id));
  set_lit(j, "chat_id", hex_string(r->chat_id));
  set_lit(j, "turn_id", r->turn_id[0] ? hex_string(r->turn_id) : json_null());
  set_lit(j, "code", str_or_null(r->code));
  set_lit(j, "origin", str_or_null(r->origin));
  set_lit(j, "state", str_or_null(r->state));
  set_lit(j, "status", str_or_null(r->status));
  set_lit(j, "stdout", json_string(r->stdout_text ? r->stdout_text : ""));
  set_lit(j, "stderr", json_string(r->stderr_text ? r->stderr_text : ""));
  set_lit(j, "stdout_truncated", json_boolean(r->stdout_truncated));
  set_lit(j, "stderr_truncated", json_boolean(r->stderr_truncated));
  json_t *err = parse_text(r->error_json);
  set_lit(j, "error", err ? err : json_null());
  set_lit(j, "files", run_files_json(fv, nf));
  set_lit(j, "files_unlisted", json_integer(r->files_unlisted));
  set_lit(j, "figures_dropped", json_integer(r->figures_dropped));
  json_t *notes = parse_text(r->notes_json);
  set_lit(j, "notes", json_is_array(notes) ? notes : (json_decref(notes), json_array()));
  set_lit(j, "restarted", json_boolean(r->restarted));
  json_t *rem = parse_text(r->remounted_json);
  set_lit(j, "remounted", json_is_array(rem) ? rem : (json_decref(rem), json_array()));
  json_t *value = parse_text(r->value_json);
  set_lit(j, "value", json_is_object(value) ? value : (json_decref(value), json_null()));
  json_t *shown = parse_text(r->displays_json);
  set_lit(j, "displays", json_is_array(shown) ? shown : (json_decref(shown), json_array()));
  set_lit(j, "attempts", json_integer(r->attempts));
  set_lit(j, "created_at", ms_or_null(r->created_at));
  set_lit(j, "started_at", ms_or_null(r->started_at));
  set_lit(j, "finished_at", ms_or_null(r->finished_at));
  set_lit(j, "duration_ms",
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

void orch__run_limits_set(json_t *lim) {
  set_lit(lim, "out_chars", json_integer(ORCH_OUT_CHARS));
  set_lit(lim, "files_listed", json_integer(ORCH_FILES_LISTED));
  set_lit(lim, "figures", json_integer(ORCH_FIGURES));
  set_lit(lim, "file_load_bytes", json_integer((json_int_t)ORCH_UPLOAD_MAX));
  set_lit(lim, "displays", json_integer(ORCH_DISPLAYS));
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
    set_lit(e, "name", json_string(f->name));
    set_lit(e, "file_id", hex_string(f->id));
    set_lit(e, "version", json_integer(f->version));
    set_lit(e, "sha256", hex_string(f->sha256));
    set_lit(e, "size", json_integer((json_int_t)f->size));
    set_lit(e, "url", json_string(url));
    json_array_append_new(mounts, e);
  }
  for (size_t i = 0; m && i < m->n_left_out; i++) {
    json_t *e = json_object();
    set_lit(e, "name", json_string(m->left_out[i].file->name));
    set_lit(e, "reason", json_string(m->left_out[i].reason));
    json_array_append_new(left, e);
  }
  json_t *j = json_object();
  set_lit(j, "run_id", hex_string(run_id));
  set_lit(j, "chat_id", hex_string(chat_id));
  set_lit(j, "page_id", json_string(page_id));
  set_lit(j, "code", json_string(code));
  set_lit(j, "origin", json_string(origin));
  set_lit(j, "timeout_s", json_integer(timeout_s));
  set_lit(j, "attempt", json_integer(attempt));
  set_lit(j, "mounts", mounts);
  set_lit(j, "left_out", left);
  json_t *limits = json_object();
  orch__run_limits_set(limits);
  set_lit(limits, "input_wait_s", json_integer(rt->input_wait_s));
  set_lit(j, "limits", limits);
  set_lit(j, "pypi", json_boolean(pypi));
  set_lit(j, "heartbeat_ms", json_integer((json_int_t)rt->page_heartbeat_ms));
  return j;
}
