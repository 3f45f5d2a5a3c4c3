/* api_files.c -- a chat's files: upload (raw body, up to 50 MiB; 413 beyond, refused by the
 * transport before the handler), list, and download.
 *
 * Upload decides `mounted` / `left_out_reason` with the manifest's rules against the chat's files
 * as stored now (manifest.c), then lets the store apply the naming rules (same content -> the same
 * file, 200; same name other content -> "name (N).ext"; tool/output -> next version) and answers
 * once durable.  With text_of=FILE_ID the upload is that file's extracted text, named
 * "<name>.md" and mounted beside it.  Download streams the blob, only through a chat that holds
 * the file; HTML and SVG get a sandbox CSP so an artifact never runs as our origin.
 * What it does not do: output files of runs (api_page.c stores those with the result).
 */
#include "internal.h"
#include "transport.h"

#include <string.h>
#include <strings.h>

struct upload_ctx {
  struct orch *o;
  struct tp_req *req;
  char chat_id[STORE_ID_LEN + 1];
  char *name;
};

static int exec_on(struct orch *o) { return o->cfg->exec_mode != ORCH_EXEC_OFF; }

static void on_file_added(int rc, const struct sbx_error *err, const struct store_file_added *res, void *ud) {
  struct upload_ctx *ctx = ud;
  if (rc == SBX_ENAME)
    orch_api_error(ctx->req, 400, "invalid_name", "%s", err && err->msg[0] ? err->msg : "invalid file name");
  else if (rc == SBX_ENOENT)
    orch_api_error(ctx->req, 404, "not_found", "no such chat");
  else if (rc != 0)
    orch_api_error(ctx->req, 500, "storage", "file not stored: %s", err ? err->msg : sbx_strerror(rc));
  else {
    ctx->o->m.uploads++;
    orch_api_json(ctx->req, res->created ? 201 : 200, orch_file_json(&res->file, exec_on(ctx->o)));
    struct orch_chat *c = orch_map_get(&ctx->o->chats, ctx->chat_id);
    if (c && res->created) {
      json_t *ev = json_object();
      json_object_set_new(ev, "chat_id", json_string(c->id));
      json_object_set_new(ev, "file_id", json_string(res->file.id));
      json_object_set_new(ev, "name", json_string(res->file.name));
      orch_event_emit(c, "files", ev);
    }
  }
  tp_req_release(ctx->req);
  sbx_free(ctx->name);
  sbx_free(ctx);
}

static void on_upload(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  struct orch_chat *c = orch_api_chat(o, req, tp_req_param(req, "chat"), 1, 0);
  if (c == NULL)
    return;
  enum store_source src = STORE_SRC_ATTACHMENT;
  const char *s = tp_req_query(req, "source");
  if (s && store_source_parse(s, &src) != 0) {
    orch_api_error(req, 400, "invalid_field", "source: one of attachment, knowledge, tool, output");
    return;
  }
  const char *name = tp_req_query(req, "name"), *text_of = tp_req_query(req, "text_of");
  char *derived = NULL;
  struct store_file target;
  memset(&target, 0, sizeof(target));
  if (text_of) {
    int got = orch_api_valid_id(text_of) && store_file_get(o->st, text_of, &target) == 0;
    if (!got || strcmp(target.chat_id, c->id) != 0) {
      if (got)
        store_file_free(&target);
      orch_api_error(req, 404, "not_found", "text_of: no file %s in this chat", text_of);
      return;
    }
    size_t n = strlen(target.name) + 4;
    derived = sbx_malloc(n);
    if (derived)
      snprintf(derived, n, "%s.md", target.name);
    store_file_free(&target);
    name = derived;
  }
  if (name == NULL || *name == '\0') {
    sbx_free(derived);
    orch_api_error(req, 400, "invalid_field", "name: the file name is required (?name=...)");
    return;
  }
  struct sbx_error err;
  sbx_error_clear(&err);
  char *norm = NULL;
  if (store_name_normalize(name, src, &norm, &err) != 0) {
    orch_api_error(req, 400, "invalid_name", "%s", err.msg[0] ? err.msg : "invalid file name");
    sbx_free(derived);
    return;
  }
  size_t len = 0;
  const char *body = tp_req_body(req, &len);
  if (len > ORCH_UPLOAD_MAX) {
    orch_api_error(req, 413, "too_large", "uploads are limited to 50 MB");
    sbx_free(norm);
    sbx_free(derived);
    return;
  }
  struct store_file *files = NULL;
  size_t n = 0;
  const char *reason = NULL;
  if (store_file_list(o->st, c->id, 0, &files, &n) == 0) {
    reason = orch_manifest_admit(files, n, norm, src, NULL, len);
    store_file_list_free(files, n);
  }
  struct upload_ctx *ctx = sbx_calloc(1, sizeof(*ctx));
  if (ctx == NULL) {
    sbx_free(norm);
    sbx_free(derived);
    orch_api_error(req, 500, "internal", "out of memory");
    return;
  }
  ctx->o = o;
  ctx->req = req;
  ctx->name = norm;
  snprintf(ctx->chat_id, sizeof(ctx->chat_id), "%s", c->id);
  struct store_file_in in = {
      .chat_id = c->id, .name = norm, .source = src, .mounted = reason == NULL,
      .left_out_reason = reason, .text_of = text_of, .data = body ? body : "", .size = len,
  };
  tp_req_hold(req); /* the body is borrowed by the store until the callback */
  if (store_file_add(o->st, &in, on_file_added, ctx) != 0) {
    tp_req_release(req);
    sbx_free(ctx->name);
    sbx_free(ctx);
    orch_api_error(req, 500, "internal", "upload could not be queued");
  }
  sbx_free(derived);
}

static void on_list(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  struct orch_chat *c = orch_api_chat(o, req, tp_req_param(req, "chat"), 1, 0);
  if (c == NULL)
    return;
  const char *all = tp_req_query(req, "all_versions");
  struct store_file *files = NULL;
  size_t n = 0;
  if (store_file_list(o->st, c->id, all && strcmp(all, "1") == 0, &files, &n) != 0) {
    orch_api_error(req, 500, "storage", "cannot list files");
    return;
  }
  json_t *arr = json_array();
  for (size_t i = 0; i < n; i++)
    json_array_append_new(arr, orch_file_json(&files[i], exec_on(o)));
  store_file_list_free(files, n);
  json_t *j = json_object();
  json_object_set_new(j, "files", arr);
  orch_api_json(req, 200, j);
}

static const char *file_type(const char *name, int *active) {
  static const struct { const char *ext, *type; int active; } t[] = {
      {".png", "image/png", 0},        {".jpg", "image/jpeg", 0},      {".jpeg", "image/jpeg", 0},
      {".gif", "image/gif", 0},        {".webp", "image/webp", 0},     {".svg", "image/svg+xml", 1},
      {".pdf", "application/pdf", 0},  {".csv", "text/csv; charset=utf-8", 0},
      {".txt", "text/plain; charset=utf-8", 0}, {".md", "text/markdown; charset=utf-8", 0},
      {".json", "application/json", 0}, {".html", "text/html; charset=utf-8", 1},
      {".htm", "text/html; charset=utf-8", 1},
      {".xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", 0},
      {".docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document", 0},
      {".pptx", "application/vnd.openxmlformats-officedocument.presentationml.presentation", 0},
  };
  const char *dot = strrchr(name, '.');
  *active = 0;
  for (size_t i = 0; dot && i < SBX_ARRAY_SIZE(t); i++)
    if (strcasecmp(dot, t[i].ext) == 0) {
      *active = t[i].active;
      return t[i].type;
    }
  return "application/octet-stream";
}

static void on_download(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  const char *id = tp_req_param(req, "file");
  struct orch_auth a;
  orch_auth_read(tp_req_header(req, "authorization"), tp_req_query(req, "token"), o->api_key_hash, o->host_key_hash, &a);
  if (a.kind == ORCH_CRED_NONE || a.kind == ORCH_CRED_BAD) {
    orch_api_error(req, 401, "unauthorized", a.kind == ORCH_CRED_NONE ? "missing credential" : "wrong credential");
    return;
  }
  struct store_file f;
  if (!orch_api_valid_id(id) || store_file_get(o->st, id, &f) != 0) {
    orch_api_error(req, 404, "not_found", "no file %s", id ? id : "");
    return;
  }
  struct orch_chat *c = NULL;
  if (orch_chat_get(o, f.chat_id, &c) != 0 || !orch_auth_allows(&a, c->id, c->token_hash)) {
    store_file_free(&f);
    orch_api_error(req, 404, "not_found", "no file %s", id);
    return;
  }
  char *path = store_blob_path(o->st, f.sha256);
  int active = 0;
  const char *type = file_type(f.name, &active);
  char headers[700], fname[300];
  /* ASCII-safe filename for the header; the UI knows the real name from the JSON. */
  size_t j = 0;
  for (const char *p = strrchr(f.name, '/') ? strrchr(f.name, '/') + 1 : f.name; *p && j < sizeof(fname) - 1; p++)
    fname[j++] = (*p >= 0x20 && *p < 0x7f && *p != '"' && *p != '\\') ? *p : '_';
  fname[j] = '\0';
  snprintf(headers, sizeof(headers),
           "Content-Disposition: inline; filename=\"%s\"\r\nX-Content-Type-Options: nosniff\r\n"
           "Cache-Control: private, max-age=3600\r\nCross-Origin-Resource-Policy: same-origin\r\n%s",
           fname, active ? "Content-Security-Policy: sandbox; default-src 'none'; img-src data: blob:; "
                           "style-src 'unsafe-inline'\r\n" : "");
  if (path == NULL || tp_respond_file(req, path, type, headers, 1) != 0)
    orch_api_error(req, 500, "storage", "the file's content is missing");
  sbx_free(path);
  store_file_free(&f);
}

void orch_routes_files(struct orch *o) {
  tp_route(o->tp, "POST", "/v1/chats/{chat}/files", ORCH_UPLOAD_MAX, on_upload, o);
  tp_route(o->tp, "GET", "/v1/chats/{chat}/files", 0, on_list, o);
  tp_route(o->tp, "GET", "/v1/files/{file}", 0, on_download, o);
}
