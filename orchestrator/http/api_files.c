/* api_files.c -- a chat's files: upload (raw body, up to 50 MiB; 413 beyond, refused by the
 * transport), list, and download.
 *
 * Upload is streamed: the route is a tp_route_streamed one, so the body never sits in memory
 * whole.  Its first piece makes an upload context (kept with tp_req_set_data) that checks the
 * credential quietly (the sink cannot answer) and, when it could reach the chat, opens a store
 * stage (persistence: a temp file + incremental sha256); every piece is appended to it.  A
 * request without a usable credential has its body read and dropped, never written, and gets
 * the same 401/403 as before from the handler.  When the body ends, the handler checks
 * everything as it always did (credential, chat, source, name, text_of), decides `mounted` /
 * `left_out_reason` and stores it through orch__file_add (files.c: the manifest's rules against
 * the chat's files as stored now and the body's size; the store's naming rules: same content ->
 * the same file, 200; same name other content -> "name (N).ext"; tool/output -> next version)
 * and answers once durable.  A request that ends without its handler (413 past
 * 50 MiB, client gone, a refused piece) aborts the stage in its close callback: no temp file, no
 * row.  At most ORCH_CHAT_UPLOADS bodies arrive at once for one chat (its runs' output files
 * included): the first piece of one more is refused, 503 with Retry-After, before anything is
 * staged.  With text_of=FILE_ID the upload is that file's extracted text, named "<name>.md" and
 * mounted beside it.  Download streams the blob, only through a chat that holds the file (the API
 * key, the chat's page token, or its chat key); HTML and SVG get a sandbox CSP so an artifact
 * never runs as our origin.
 * What it does not do: output files of runs (api_page.c stores those with the result).
 *
 * An upload context's life:
 *
 *   first piece ──▶ STAGING ──(piece)──▶ STAGING ──(body ends: handler)──▶ STORING ──(store cb)──▶ freed
 *        │              └──(close: refused / gone / piece failed)──▶ freed, stage aborted
 *        └──▶ DISCARDING (no usable credential; pieces dropped) ──(handler / close)──▶ freed
 *   an empty body: the handler makes the context itself (STAGING, no piece).
 *
 *   transition              performed by
 *   -> STAGING/DISCARDING   upload_new (from on_upload_body, or on_upload for an empty body)
 *   STAGING -> STORING      on_upload, once the stage is handed to the store
 *   any -> freed            upload_free (on_upload_gone, on_upload's refusals, on_file_added)
 */
#include "api.h"
#include "transport.h"

#include <string.h>
#include <strings.h>

#include "fsm.h"

enum upload_state { UP_STAGING = 0, UP_DISCARDING, UP_STORING, UP__COUNT };
static const char *const upload_state_names[UP__COUNT] = {"staging", "discarding", "storing"};
static const uint32_t upload_from[UP__COUNT] = {
    [UP_STAGING] = 0, /* only the initial state */
    [UP_DISCARDING] = SBX_FSM_BIT(UP_STAGING),
    [UP_STORING] = SBX_FSM_BIT(UP_STAGING),
};
static const struct sbx_fsm upload_fsm =
    SBX_FSM("api", "upload", upload_state_names, upload_from, NULL);

struct upload_ctx {
  struct orch *o;
  struct tp_req *req;
  enum upload_state state;        /* written by set_state only */
  struct store_blob_stage *stage; /* STAGING: owned; NULL otherwise */
  struct orch_chat *arriving;     /* the chat its body counts against while it arrives */
  char *name;
};

#define set_state(u, to) set_state_((u), (to), __FILE__, __LINE__)

/* The one writer of u->state. */
static void set_state_(struct upload_ctx *u, enum upload_state to, const char *file, int line) {
  if (sbx_fsm_step(&upload_fsm, u->state, to, tp_req_path(u->req), file, line) == 0)
    u->state = to;
}

static int exec_on(struct orch *o) { return o->cfg->exec_mode != ORCH_EXEC_OFF; }

/* The body is in (or will never be): it no longer counts against its chat. */
static void body_in(struct upload_ctx *u) {
  if (u->arriving)
    orch__chat_upload_end(u->arriving);
  u->arriving = NULL;
}

static void upload_free(struct upload_ctx *u) {
  body_in(u);
  store_blob_stage_abort(u->stage); /* NULL once handed to the store */
  sbx_free(u->name);
  sbx_free(u);
}

/* The quiet part of the handler's checks, for the sink (which cannot answer): the chat when the
 * request's credential could reach it (an API key or host key; a page token of this chat), else
 * NULL, with *elsewhere set when another node serves the chat (nodes.c): the body is kept for that
 * node, which counts it and checks the token. */
static struct orch_chat *could_reach(struct orch *o, struct tp_req *req, int *elsewhere) {
  struct orch_auth a;
  orch__api_auth(o, req, NULL, &a);
  const char *chat_id = tp_req_param(req, "chat");
  struct orch_chat *c = NULL;
  *elsewhere = 0;
  if ((a.kind != ORCH_CRED_API && a.kind != ORCH_CRED_HOST && a.kind != ORCH_CRED_PAGE &&
       a.kind != ORCH_CRED_SESSION) ||
      a.origin_bad || !orch__valid_id(chat_id) || orch__host_elsewhere(o, &a, chat_id))
    return NULL;
  int rc = orch__chat_get(o, chat_id, &c);
  *elsewhere = rc == SBX_EREMOTE;
  if (rc != 0)
    return NULL;
  return (a.kind != ORCH_CRED_PAGE && a.kind != ORCH_CRED_SESSION) || orch__auth_allows_chat(&a, c)
             ? c
             : NULL;
}

static struct upload_ctx *upload_new(struct orch *o, struct tp_req *req, int *rc) {
  struct sbx_error err;
  sbx_error_clear(&err);
  *rc = 0;
  struct upload_ctx *u = sbx_calloc(1, sizeof(*u));
  if (u == NULL) {
    *rc = SBX_ENOMEM;
    return NULL;
  }
  u->o = o;
  u->req = req;
  u->state = UP_STAGING;
  int elsewhere;
  struct orch_chat *c = could_reach(o, req, &elsewhere);
  if (c == NULL && !elsewhere) {
    set_state(u, UP_DISCARDING);
    return u;
  }
  if (c && tp_req_body_arriving(req) && (*rc = orch__chat_upload_begin(c)) != 0) {
    o->m.uploads_refused_busy++;
    sbx_free(u);
    return NULL; /* SBX_EBUSY: 503 with Retry-After */
  }
  u->arriving = c && tp_req_body_arriving(req) ? c : NULL;
  if ((*rc = store_blob_stage_begin(o->st, &u->stage, &err)) != 0) {
    sbx_log(SBX_LOG_ERROR, "api", "upload not staged: %s", err.msg);
    upload_free(u);
    return NULL;
  }
  return u;
}

/* The request ended without its handler (413, client gone, a refused piece). */
static void on_upload_gone(struct tp_req *req, void *ud) {
  struct upload_ctx *u = ud;
  tp_req_set_data(req, NULL);
  upload_free(u);
}

/* Each piece of the body as it arrives (inside the protocol parser: never answers). */
static int on_upload_body(struct tp_req *req, const void *data, size_t len, void *ud) {
  struct orch *o = ud;
  struct upload_ctx *u = tp_req_get_data(req);
  int rc;
  if (u == NULL) {
    if ((u = upload_new(o, req, &rc)) == NULL)
      return rc == SBX_ENOMEM || rc == SBX_EBUSY ? rc : SBX_EIO;
    tp_req_set_data(req, u);
    tp_req_on_close(req, on_upload_gone, u);
  }
  if (u->state != UP_STAGING)
    return 0; /* DISCARDING: read and dropped */
  struct sbx_error err;
  sbx_error_clear(&err);
  if ((rc = store_blob_stage_write(u->stage, data, len, &err)) != 0) {
    sbx_log(SBX_LOG_ERROR, "api", "upload: %s", err.msg);
    return SBX_EIO; /* 500; the close callback drops the stage */
  }
  return 0;
}

static void on_file_added(int rc, const struct sbx_error *err, const struct store_file_added *res,
                          void *ud) {
  struct upload_ctx *ctx = ud;
  if (rc != 0) /* files.c words its refusals (a name, the quota) */
    orch__api_fail(ctx->req, rc, ORCH_OP_STORE, "%s",
                   rc == SBX_ENOENT ? "no such chat" : err && err->msg[0] ? err->msg
                                                                          : sbx_strerror(rc));
  else
    orch__api_json(ctx->req, res->created ? 201 : 200,
                   orch__file_json(&res->file, exec_on(ctx->o)));
  tp_req_release(ctx->req);
  upload_free(ctx);
}

/* The body is complete (all of it in the stage). */
static void on_upload(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  struct upload_ctx *u = tp_req_get_data(req);
  tp_req_on_close(req, NULL, NULL); /* from here on the context is this handler's */
  tp_req_set_data(req, NULL);
  if (u)
    body_in(u);
  struct orch_chat *c = orch__api_chat_body(o, req, tp_req_param(req, "chat"), ORCH_API_PAGE, 0,
                                            u ? &u->stage : NULL);
  if (c == NULL) {
    if (u)
      upload_free(u);
    return;
  }
  int rc = 0;
  if (u == NULL && (u = upload_new(o, req, &rc)) == NULL) { /* an empty body */
    orch__api_error(req, 500, "storage", "upload not staged: %s", sbx_strerror(rc));
    return;
  }
  if (u->state != UP_STAGING) { /* the credential changed its mind between sink and handler */
    upload_free(u);
    orch__api_error(req, 503, "busy", "upload not kept; try again");
    return;
  }
  enum store_source src = STORE_SRC_ATTACHMENT;
  const char *s = tp_req_query(req, "source");
  if (s && store_source_parse(s, &src) != 0) {
    upload_free(u);
    orch__api_error(req, 400, "invalid_field",
                    "source: one of attachment, knowledge, tool, output");
    return;
  }
  const char *name = tp_req_query(req, "name"), *text_of = tp_req_query(req, "text_of");
  char *derived = NULL;
  struct store_file target;
  memset(&target, 0, sizeof(target));
  if (text_of) {
    int got = orch__valid_id(text_of) && store_file_get(o->st, text_of, &target) == 0;
    if (!got || strcmp(target.chat_id, c->id) != 0) {
      if (got)
        store_file_free(&target);
      upload_free(u);
      orch__api_error(req, 404, "not_found", "text_of: no file %s in this chat", text_of);
      return;
    }
    size_t n = strlen(target.name) + 4;
    derived = sbx_malloc(n);
    if (derived)
      snprintf(derived, n, "%s.md", target.name);
    store_file_free(&target);
    name = derived;
  }
  /* No name, or one the transport could not decode (a NUL, %00, a bad %-escape: tp_req_query
   * gives NULL for it as for none) is a bad name. */
  if (name == NULL || *name == '\0') {
    sbx_free(derived);
    upload_free(u);
    orch__api_error(req, 400, "invalid_name",
                    "name: a file name is required (?name=NAME, "
                    "percent-encoded; a NUL, %%00, is not allowed)");
    return;
  }
  struct sbx_error err;
  sbx_error_clear(&err);
  char *norm = NULL;
  if (store_name_normalize(name, src, &norm, &err) != 0) {
    orch__api_error(req, 400, "invalid_name", "%s", err.msg[0] ? err.msg : "invalid file name");
    sbx_free(derived);
    upload_free(u);
    return;
  }
  sbx_free(derived);
  uint64_t len = store_blob_stage_size(u->stage);
  if (len > ORCH_UPLOAD_MAX) { /* the transport refuses it first; kept as the rule's statement */
    orch__api_error(req, 413, "too_large", "uploads are limited to 50 MB");
    sbx_free(norm);
    upload_free(u);
    return;
  }
  u->name = norm;
  struct store_file_in in = {.name = norm, .source = src, .text_of = text_of};
  struct store_blob_stage *stage = u->stage;
  u->stage = NULL; /* stolen by the store, even on failure */
  set_state(u, UP_STORING);
  tp_req_hold(req); /* answered once durable */
  if ((rc = orch__file_add(o, c, &in, stage, len, on_file_added, u)) != 0) {
    tp_req_release(req);
    upload_free(u);
    orch__api_error(req, 500, "internal", "upload could not be queued: %s", sbx_strerror(rc));
  }
}

static void on_list(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  struct orch_chat *c = orch__api_chat(o, req, tp_req_param(req, "chat"), ORCH_API_PAGE, 0);
  if (c == NULL)
    return;
  const char *all = tp_req_query(req, "all_versions");
  struct store_file *files = NULL;
  size_t n = 0;
  if (store_file_list(o->st, c->id, all && strcmp(all, "1") == 0, &files, &n) != 0) {
    orch__api_error(req, 500, "storage", "cannot list files");
    return;
  }
  json_t *arr = json_array();
  for (size_t i = 0; i < n; i++)
    json_array_append_new(arr, orch__file_json(&files[i], exec_on(o)));
  store_file_list_free(files, n);
  json_t *j = json_object();
  json_object_set_new(j, "files", arr);
  orch__api_json(req, 200, j);
}

static void on_download(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  const char *id = tp_req_param(req, "file");
  struct orch_auth a;
  orch__api_auth(o, req, tp_req_query(req, "token"), &a);
  /* A chat key downloads its chat's files (the links of a tool result). */
  orch__auth_chat_key(&a, tp_req_header(req, "authorization"), tp_req_query(req, "token"),
                      o->chat_secret);
  if (orch__api_deny_auth(req, &a))
    return;
  struct store_file f;
  if (!orch__valid_id(id) || store_file_get(o->st, id, &f) != 0) {
    orch__api_error(req, 404, "not_found", "no file %s", id ? id : "");
    return;
  }
  if (orch__api_host_elsewhere(o, req, &a, f.chat_id)) {
    store_file_free(&f);
    return;
  }
  struct orch_chat *c = NULL;
  char token_hash[65] = "";
  int rc = orch__chat_get(o, f.chat_id, &c);
  if (rc == SBX_EREMOTE) { /* another node serves the chat: its files are any node's */
    struct store_chat sc = {0};
    if (store_chat_get(o->st, f.chat_id, &sc) == 0)
      memcpy(token_hash, sc.token_hash, sizeof token_hash);
    store_chat_free(&sc);
  }
  if (rc == 0 ? !orch__auth_allows_chat(&a, c)
              : !token_hash[0] || !orch__auth_allows(&a, f.chat_id, token_hash)) {
    store_file_free(&f);
    orch__api_error(req, 404, "not_found", "no file %s", id);
    return;
  }
  char *path = store_blob_path(o->st, f.sha256);
  int active = 0;
  const char *type = orch__file_type(f.name, &active);
  char headers[700], fname[300];
  /* ASCII-safe filename for the header; the UI knows the real name from the JSON. */
  size_t j = 0;
  for (const char *p = strrchr(f.name, '/') ? strrchr(f.name, '/') + 1 : f.name;
       *p && j < sizeof(fname) - 1; p++)
    fname[j++] = (*p >= 0x20 && *p < 0x7f && *p != '"' && *p != '\\') ? *p : '_';
  fname[j] = '\0';
  snprintf(
      headers, sizeof(headers),
      "Content-Disposition: inline; filename=\"%s\"\r\nX-Content-Type-Options: nosniff\r\n"
      "Cache-Control: private, max-age=3600\r\nCross-Origin-Resource-Policy: same-origin\r\n%s",
      fname,
      active ? "Content-Security-Policy: sandbox; default-src 'none'; img-src data: blob:; "
               "style-src 'unsafe-inline'\r\n"
             : "");
  if (path == NULL || tp_respond_file(req, path, type, headers, 1) != 0)
    orch__api_error(req, 500, "storage", "the file's content is missing");
  sbx_free(path);
  store_file_free(&f);
}

void orch__routes_files(struct orch *o) {
  tp_route_streamed(o->tp, "POST", "/v1/chats/{chat}/files", ORCH_UPLOAD_MAX, on_upload_body,
                    on_upload, o);
  tp_route(o->tp, "GET", "/v1/chats/{chat}/files", 0, on_list, o);
  tp_route(o->tp, "GET", "/v1/files/{file}", 0, on_download, o);
}
