/* json.c -- the JSON shapes of the API, over jansson: the run object (exactly the fields DESIGN
 * lists) and the file object.  References: functions named *_json return a NEW reference.
 * What it does not do: parse request bodies (the handlers do, field by field, with 400s).
 */
#include "internal.h"

#include <string.h>

/* ---- compact dump --------------------------------------------------------------------------
 * orch__json_dump writes exactly what json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY) writes (keys in
 * insertion order; '"', '\\' and control characters escaped, \u00XX in upper-case hex; other
 * UTF-8 as is; NULL for a string that is not valid UTF-8), in one pass into one growing buffer.
 * jansson's own dump costs ~28,000 instructions for a run object (a callback per string piece,
 * printf per integer, a hashtable of parents for loop detection); this ~4,000.  Reals, rare here,
 * are handed to jansson.  tests/unit/orchestrator/test_json.c compares the two on a table of values. */

struct jbuf {
  char *p;
  size_t len, cap;
  int failed;
  int sorted; /* object keys in jansson's JSON_SORT_KEYS order (bytes, then length) */
};

struct jkey {
  const char *key;
  size_t len;
  const json_t *value;
};

static int jkey_cmp(const void *a, const void *b) {
  const struct jkey *x = a, *y = b;
  size_t n = x->len < y->len ? x->len : y->len;
  int r = memcmp(x->key, y->key, n);
  return r ? r : (x->len > y->len) - (x->len < y->len);
}

/* The growing part of jb_grow, out of line: the check in front of it is inlined at each of the
 * ~150 calls a run's texts make. */
static __attribute__((noinline)) int jb_grow_slow(struct jbuf *b, size_t n) {
  if (b->failed)
    return -1;
  size_t cap = b->cap ? b->cap : 512;
  while (cap < b->len + n + 1)
    cap *= 2;
  char *p = sbx_realloc(b->p, cap);
  if (p == NULL) {
    b->failed = 1;
    return -1;
  }
  b->p = p;
  b->cap = cap;
  return 0;
}

/* Room for n more bytes and a NUL; -1 once any step failed. */
static inline int jb_grow(struct jbuf *b, size_t n) {
  if (!b->failed && b->len + n + 1 <= b->cap)
    return 0;
  return jb_grow_slow(b, n);
}

/* Ends a buffer: the NUL-terminated text (owned by the caller) and its length, or NULL (and the
 * buffer freed) when any step ran out of memory. */
static char *jb_finish(struct jbuf *b, size_t *len) {
  if (b->failed || jb_grow(b, 0) != 0) {
    sbx_free(b->p);
    return NULL;
  }
  b->p[b->len] = '\0';
  if (len)
    *len = b->len;
  return b->p;
}

static void jb_put(struct jbuf *b, const char *s, size_t n) {
  if (jb_grow(b, n) == 0) {
    memcpy(b->p + b->len, s, n);
    b->len += n;
  }
}

static void jb_int(struct jbuf *b, json_int_t v) {
  char tmp[24];
  jb_put(b, tmp, orch__fmt_i64(tmp, (long long)v));
}

/* Length of the valid UTF-8 sequence at s (as jansson's utf8_check_first/full), 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t left) {
  unsigned c = s[0];
  size_t n;
  unsigned v;
  if (c < 0x80)
    return 1;
  if (c < 0xC2)
    return 0;
  if (c < 0xE0) { n = 2; v = c & 0x1F; }
  else if (c < 0xF0) { n = 3; v = c & 0x0F; }
  else if (c < 0xF5) { n = 4; v = c & 0x07; }
  else return 0;
  if (n > left)
    return 0;
  for (size_t i = 1; i < n; i++) {
    if ((s[i] & 0xC0) != 0x80)
      return 0;
    v = (v << 6) | (s[i] & 0x3F);
  }
  if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF) || (n == 3 && v < 0x800) || (n == 4 && v < 0x10000))
    return 0;
  return n;
}

/* A JSON string; -1 (something written, nothing decided) when str is not valid UTF-8. */
static int jb_str_try(struct jbuf *b, const char *str, size_t len) {
  static const char hex[] = "0123456789ABCDEF";
  const unsigned char *s = (const unsigned char *)str;
  if (jb_grow(b, len + 2) != 0)
    return 0; /* failed: the buffer says so */
  b->p[b->len++] = '"';
  size_t run = 0; /* start of the pending plain run */
  for (size_t i = 0; i < len;) {
    unsigned c = s[i];
    if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
      i++;
      continue;
    }
    if (c >= 0x80) {
      size_t n = utf8_len(s + i, len - i);
      if (n == 0)
        return -1;
      i += n;
      continue;
    }
    jb_put(b, str + run, i - run);
    char esc[6] = {'\\', 0, '0', '0', 0, 0};
    size_t el = 2;
    switch (c) {
    case '"': esc[1] = '"'; break;
    case '\\': esc[1] = '\\'; break;
    case '\b': esc[1] = 'b'; break;
    case '\f': esc[1] = 'f'; break;
    case '\n': esc[1] = 'n'; break;
    case '\r': esc[1] = 'r'; break;
    case '\t': esc[1] = 't'; break;
    default:
      esc[1] = 'u';
      esc[4] = hex[c >> 4];
      esc[5] = hex[c & 15];
      el = 6;
    }
    jb_put(b, esc, el);
    run = ++i;
  }
  jb_put(b, str + run, len - run);
  jb_put(b, "\"", 1);
  return 0;
}

static void jb_str(struct jbuf *b, const char *str, size_t len) {
  if (jb_str_try(b, str, len) != 0)
    b->failed = 1;
}

static void jb_value(struct jbuf *b, const json_t *j, int depth) {
  if (b->failed)
    return;
  if (depth > 2048) { /* deeper than anything we build; refuse rather than overflow the stack */
    b->failed = 1;
    return;
  }
  switch (json_typeof(j)) {
  case JSON_OBJECT: {
    jb_put(b, "{", 1);
    int first = 1;
    size_t n = json_object_size(j);
    if (b->sorted && n > 1) {
      struct jkey *keys = sbx_malloc(n * sizeof(*keys));
      size_t k = 0;
      if (keys == NULL) {
        b->failed = 1;
        return;
      }
      for (void *it = json_object_iter((json_t *)j); it && k < n; it = json_object_iter_next((json_t *)j, it))
        keys[k++] = (struct jkey){json_object_iter_key(it), json_object_iter_key_len(it), json_object_iter_value(it)};
      qsort(keys, k, sizeof(*keys), jkey_cmp);
      for (size_t i = 0; i < k; i++) {
        if (i)
          jb_put(b, ",", 1);
        jb_str(b, keys[i].key, keys[i].len);
        jb_put(b, ":", 1);
        jb_value(b, keys[i].value, depth + 1);
      }
      sbx_free(keys);
      jb_put(b, "}", 1);
      break;
    }
    for (void *it = json_object_iter((json_t *)j); it; it = json_object_iter_next((json_t *)j, it)) {
      if (!first)
        jb_put(b, ",", 1);
      first = 0;
      jb_str(b, json_object_iter_key(it), json_object_iter_key_len(it));
      jb_put(b, ":", 1);
      jb_value(b, json_object_iter_value(it), depth + 1);
    }
    jb_put(b, "}", 1);
    break;
  }
  case JSON_ARRAY: {
    jb_put(b, "[", 1);
    size_t n = json_array_size(j);
    for (size_t i = 0; i < n; i++) {
      if (i)
        jb_put(b, ",", 1);
      jb_value(b, json_array_get(j, i), depth + 1);
    }
    jb_put(b, "]", 1);
    break;
  }
  case JSON_STRING:
    jb_str(b, json_string_value(j), json_string_length(j));
    break;
  case JSON_INTEGER:
    jb_int(b, json_integer_value(j));
    break;
  case JSON_REAL: {
    char *s = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
    if (s == NULL) {
      b->failed = 1;
      return;
    }
    jb_put(b, s, strlen(s));
    free(s);
    break;
  }
  case JSON_TRUE: jb_put(b, "true", 4); break;
  case JSON_FALSE: jb_put(b, "false", 5); break;
  case JSON_NULL: jb_put(b, "null", 4); break;
  }
}

static char *dump(const json_t *j, int sorted, size_t *len) {
  struct jbuf b = {0};
  b.sorted = sorted;
  if (j == NULL)
    return NULL;
  jb_value(&b, j, 0);
  return jb_finish(&b, len);
}

char *orch__json_dump(const json_t *j, size_t *len) { return dump(j, 0, len); }
char *orch__json_dump_sorted(const json_t *j, size_t *len) { return dump(j, 1, len); }

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

json_t *orch__json_parse_text(const char *text) {
  if (text == NULL || *text == '\0')
    return NULL;
  return json_loads(text, JSON_DECODE_ANY, NULL);
}

static json_t *str_or_null(const char *s) { return s ? json_string(s) : json_null(); }
static json_t *ms_or_null(int64_t ms) { return ms ? json_integer(ms) : json_null(); }

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
      snprintf(note, sizeof(note),
               "The file is available to code at %s (its latest version, if it has been edited).",
               path);
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

/* The run's files (output artifacts, in order) as a new array; [] when o is NULL or the run has
 * not ended. */
static json_t *run_files_json(struct orch *o, const struct store_run *r) {
  json_t *files = json_array();
  if (o != NULL && r->status != NULL) {
    struct store_file *fv = NULL;
    size_t n = 0;
    if (store_run_files(o->st, r->id, &fv, &n) == 0) {
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
      store_file_list_free(fv, n);
    }
  }
  return files;
}

json_t *orch__run_json(struct orch *o, const struct store_run *r) {
  json_t *j = json_object();
  json_object_set_new(j, "run_id", json_string(r->id));
  json_object_set_new(j, "chat_id", json_string(r->chat_id));
  json_object_set_new(j, "turn_id", r->turn_id[0] ? json_string(r->turn_id) : json_null());
  json_object_set_new(j, "origin", str_or_null(r->origin));
  json_object_set_new(j, "state", str_or_null(r->state));
  json_object_set_new(j, "status", str_or_null(r->status));
  json_object_set_new(j, "stdout", json_string(r->stdout_text ? r->stdout_text : ""));
  json_object_set_new(j, "stderr", json_string(r->stderr_text ? r->stderr_text : ""));
  json_object_set_new(j, "stdout_truncated", json_boolean(r->stdout_truncated));
  json_object_set_new(j, "stderr_truncated", json_boolean(r->stderr_truncated));
  json_t *err = orch__json_parse_text(r->error_json);
  json_object_set_new(j, "error", err ? err : json_null());
  json_t *files = run_files_json(o, r);
  json_object_set_new(j, "files", files);
  json_object_set_new(j, "files_unlisted", json_integer(r->files_unlisted));
  json_object_set_new(j, "figures_dropped", json_integer(r->figures_dropped));
  json_t *notes = orch__json_parse_text(r->notes_json);
  json_object_set_new(j, "notes", json_is_array(notes) ? notes : (json_decref(notes), json_array()));
  json_object_set_new(j, "restarted", json_boolean(r->restarted));
  json_t *rem = orch__json_parse_text(r->remounted_json);
  json_object_set_new(j, "remounted", json_is_array(rem) ? rem : (json_decref(rem), json_array()));
  json_object_set_new(j, "attempts", json_integer(r->attempts));
  json_object_set_new(j, "created_at", ms_or_null(r->created_at));
  json_object_set_new(j, "started_at", ms_or_null(r->started_at));
  json_object_set_new(j, "finished_at", ms_or_null(r->finished_at));
  json_object_set_new(j, "duration_ms", r->started_at && r->finished_at
                                            ? json_integer(r->finished_at - r->started_at)
                                            : json_null());
  return j;
}

/* ---- the run object as text ------------------------------------------------------------------
 * orch__run_text(o, r) == orch__json_dump(orch__run_json(o, r)), byte for byte, without building
 * the jansson tree (test_json.c compares the two on a table of records).  Like the tree, a string
 * field that is not valid UTF-8 is left out (json_string gives NULL, json_object_set_new skips
 * it); stored JSON parts (but "[]", what pages send most) and the files array still go through
 * jansson, they are rare or small. */

/* "k": after a comma unless it opens its object (the byte before is its '{'). */
static void jf_key(struct jbuf *b, const char *k) {
  size_t n = strlen(k); /* our keys: plain ASCII */
  if (jb_grow(b, n + 4) != 0)
    return;
  char *p = b->p + b->len;
  if (b->len > 0 && p[-1] != '{')
    *p++ = ',';
  *p++ = '"';
  memcpy(p, k, n);
  p += n;
  *p++ = '"';
  *p++ = ':';
  b->len = (size_t)(p - b->p);
}

/* "k":"v", or nothing when v is NULL or not valid UTF-8 (json_string gives NULL, the set
 * fails): one pass, the key and the partial string taken back when the check fails. */
static void jf_str(struct jbuf *b, const char *k, const char *v) {
  if (v == NULL)
    return;
  size_t mark = b->len;
  jf_key(b, k);
  if (jb_str_try(b, v, strlen(v)) != 0)
    b->len = mark;
}

static void jf_str_or_null(struct jbuf *b, const char *k, const char *v) {
  if (v)
    jf_str(b, k, v);
  else {
    jf_key(b, k);
    jb_put(b, "null", 4);
  }
}

static void jf_lit(struct jbuf *b, const char *k, const char *lit) {
  jf_key(b, k);
  jb_put(b, lit, strlen(lit));
}

static void jf_int(struct jbuf *b, const char *k, json_int_t v) {
  jf_key(b, k);
  jb_int(b, v);
}

static void jf_ms_or_null(struct jbuf *b, const char *k, int64_t ms) {
  if (ms)
    jf_int(b, k, ms);
  else
    jf_lit(b, k, "null");
}

/* A stored JSON part: parsed and written (want_array: only an array, else []). */
static void jf_part(struct jbuf *b, const char *k, const char *text, int want_array) {
  if (text && text[0] == '[' && text[1] == ']' && text[2] == '\0') { /* what pages send most */
    jf_key(b, k);
    jb_put(b, "[]", 2);
    return;
  }
  json_t *v = orch__json_parse_text(text);
  jf_key(b, k);
  if (v != NULL && (!want_array || json_is_array(v)))
    jb_value(b, v, 0);
  else
    jb_put(b, want_array ? "[]" : "null", want_array ? 2 : 4);
  json_decref(v);
}

char *orch__run_text(struct orch *o, const struct store_run *r, size_t *len) {
  struct jbuf b = {0};
  jb_put(&b, "{", 1);
  jf_str(&b, "run_id", r->id);
  jf_str(&b, "chat_id", r->chat_id);
  if (r->turn_id[0])
    jf_str(&b, "turn_id", r->turn_id);
  else
    jf_lit(&b, "turn_id", "null");
  jf_str_or_null(&b, "origin", r->origin);
  jf_str_or_null(&b, "state", r->state);
  jf_str_or_null(&b, "status", r->status);
  jf_str(&b, "stdout", r->stdout_text ? r->stdout_text : "");
  jf_str(&b, "stderr", r->stderr_text ? r->stderr_text : "");
  jf_lit(&b, "stdout_truncated", r->stdout_truncated ? "true" : "false");
  jf_lit(&b, "stderr_truncated", r->stderr_truncated ? "true" : "false");
  jf_part(&b, "error", r->error_json, 0);
  jf_key(&b, "files");
  if (o != NULL && r->status != NULL) {
    json_t *files = run_files_json(o, r);
    jb_value(&b, files, 0);
    json_decref(files);
  } else {
    jb_put(&b, "[]", 2);
  }
  jf_int(&b, "files_unlisted", r->files_unlisted);
  jf_int(&b, "figures_dropped", r->figures_dropped);
  jf_part(&b, "notes", r->notes_json, 1);
  jf_lit(&b, "restarted", r->restarted ? "true" : "false");
  jf_part(&b, "remounted", r->remounted_json, 1);
  jf_int(&b, "attempts", r->attempts);
  jf_ms_or_null(&b, "created_at", r->created_at);
  jf_ms_or_null(&b, "started_at", r->started_at);
  jf_ms_or_null(&b, "finished_at", r->finished_at);
  if (r->started_at && r->finished_at)
    jf_int(&b, "duration_ms", r->finished_at - r->started_at);
  else
    jf_lit(&b, "duration_ms", "null");
  jb_put(&b, "}", 1);
  return jb_finish(&b, len);
}

/* "mounts":[...],"left_out":[...] of a manifest (NULL: both []), entries as the jansson tree
 * chat.c used to build: mounts {name, file_id, version, sha256, size, url}, left_out {name,
 * reason}. */
static void jb_manifest(struct jbuf *b, const struct orch_manifest *m) {
  jf_key(b, "mounts");
  jb_put(b, "[", 1);
  for (size_t i = 0; m && i < m->n_mounts; i++) {
    const struct store_file *f = m->mounts[i].file;
    char url[80];
    size_t il = strnlen(f->id, sizeof(f->id) - 1);
    memcpy(url, "/v1/files/", 10);
    memcpy(url + 10, f->id, il);
    url[10 + il] = '\0';
    jb_put(b, i ? ",{" : "{", i ? 2 : 1);
    jf_str(b, "name", f->name);
    jf_str(b, "file_id", f->id);
    jf_key(b, "version");
    jb_int(b, f->version);
    jf_str(b, "sha256", f->sha256);
    jf_key(b, "size");
    jb_int(b, (json_int_t)f->size);
    jf_str(b, "url", url);
    jb_put(b, "}", 1);
  }
  jb_put(b, "]", 1);
  jf_key(b, "left_out");
  jb_put(b, "[", 1);
  for (size_t i = 0; m && i < m->n_left_out; i++) {
    jb_put(b, i ? ",{" : "{", i ? 2 : 1);
    jf_str(b, "name", m->left_out[i].file->name);
    jf_str(b, "reason", m->left_out[i].reason);
    jb_put(b, "}", 1);
  }
  jb_put(b, "]", 1);
}

/* The `run` event's payload as text, fields in the order pages have always seen:
 * {run_id, chat_id, page_id, code, origin, timeout_s, attempt, mounts, left_out, limits, pypi},
 * the manifest rendered from the manifest itself (NULL: [] and []). */
char *orch__dispatch_text(const char *run_id, const char *chat_id, const char *page_id,
                         const char *code, const char *origin, int timeout_s, int attempt,
                         const struct orch_manifest *m, int pypi, size_t *len) {
  struct jbuf b = {0};
  jb_put(&b, "{", 1);
  jf_str(&b, "run_id", run_id);
  jf_str(&b, "chat_id", chat_id);
  jf_str(&b, "page_id", page_id);
  jf_str(&b, "code", code);
  jf_str(&b, "origin", origin);
  jf_int(&b, "timeout_s", timeout_s);
  jf_int(&b, "attempt", attempt);
  jb_manifest(&b, m);
  jf_key(&b, "limits");
  jb_put(&b, "{", 1);
  jb_put(&b, "\"out_chars\":", 12);
  jb_int(&b, ORCH_OUT_CHARS);
  jb_put(&b, ",\"files_listed\":", 16);
  jb_int(&b, ORCH_FILES_LISTED);
  jb_put(&b, ",\"figures\":", 11);
  jb_int(&b, ORCH_FIGURES);
  jb_put(&b, ",\"file_load_bytes\":", 19);
  jb_int(&b, ORCH_UPLOAD_MAX);
  jb_put(&b, "}", 1);
  jf_lit(&b, "pypi", pypi ? "true" : "false");
  jb_put(&b, "}", 1);
  return jb_finish(&b, len);
}

