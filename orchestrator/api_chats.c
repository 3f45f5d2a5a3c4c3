/* api_chats.c -- POST /v1/chats (backend): a new chat and its page token, answered once durable.
 * The token is returned once and only its sha256 is stored.  What it does not do: files, runs.
 */
#include "internal.h"
#include "transport.h"

#include <string.h>

struct create_ctx {
  struct orch *o;
  struct tp_req *req;
  struct store_chat chat;
  char token[STORE_ID_LEN + 70];
};

static void on_chat_created(int rc, const struct sbx_error *err, void *ud) {
  struct create_ctx *ctx = ud;
  if (rc != 0) {
    orch_api_error(ctx->req, 500, "storage", "chat not stored: %s", err ? err->msg : sbx_strerror(rc));
  } else {
    orch_chat_add(ctx->o, ctx->chat.id, ctx->chat.token_hash, 0);
    json_t *j = json_object();
    json_object_set_new(j, "chat_id", json_string(ctx->chat.id));
    json_object_set_new(j, "page_token", json_string(ctx->token));
    orch_api_json(ctx->req, 201, j);
  }
  tp_req_release(ctx->req);
  sbx_free(ctx->chat.title);
  memset(ctx->token, 0, sizeof(ctx->token));
  sbx_free(ctx);
}

static void on_create_chat(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  struct orch_auth a;
  orch_auth_read(tp_req_header(req, "authorization"), NULL, o->api_key_hash, o->host_key_hash, &a);
  if (a.kind != ORCH_CRED_API) {
    if (a.kind == ORCH_CRED_PAGE)
      orch_api_error(req, 403, "forbidden", "creating chats needs the API key");
    else
      orch_api_error(req, 401, "unauthorized", a.kind == ORCH_CRED_NONE ? "missing credential" : "wrong credential");
    return;
  }
  const char *title = NULL;
  json_t *body = NULL;
  size_t len = 0;
  tp_req_body(req, &len);
  if (len > 0) {
    if ((body = orch_api_body_object(req)) == NULL)
      return;
    json_t *t = json_object_get(body, "title");
    if (t && !json_is_null(t)) {
      if (!json_is_string(t) || json_string_length(t) > 500) {
        json_decref(body);
        orch_api_error(req, 400, "invalid_field", "title: a string of at most 500 bytes");
        return;
      }
      title = json_string_value(t);
    }
  }
  struct create_ctx *ctx = sbx_calloc(1, sizeof(*ctx));
  if (ctx == NULL) {
    json_decref(body);
    orch_api_error(req, 500, "internal", "out of memory");
    return;
  }
  ctx->o = o;
  ctx->req = req;
  store_new_id(ctx->chat.id);
  ctx->chat.title = title ? sbx_strdup(title) : NULL;
  ctx->chat.created_at = sbx_now_wall_ms();
  json_decref(body);
  if (orch_token_new(ctx->chat.id, ctx->token, sizeof(ctx->token), ctx->chat.token_hash) != 0 ||
      store_chat_create(o->st, &ctx->chat, on_chat_created, ctx) != 0) {
    sbx_free(ctx->chat.title);
    sbx_free(ctx);
    orch_api_error(req, 500, "internal", "chat could not be created");
    return;
  }
  tp_req_hold(req);
}

static void on_list_chats(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  struct orch_auth a;
  orch_auth_read(tp_req_header(req, "authorization"), NULL, o->api_key_hash, o->host_key_hash, &a);
  if (a.kind != ORCH_CRED_API) {
    orch_api_error(req, a.kind == ORCH_CRED_PAGE ? 403 : 401, a.kind == ORCH_CRED_PAGE ? "forbidden" : "unauthorized",
                   "listing chats needs the API key");
    return;
  }
  struct store_chat *v = NULL;
  size_t n = 0;
  if (store_chat_list(o->st, 200, &v, &n) != 0) {
    orch_api_error(req, 500, "storage", "cannot list chats");
    return;
  }
  json_t *arr = json_array();
  for (size_t i = 0; i < n; i++) {
    json_t *c = json_object();
    json_object_set_new(c, "chat_id", json_string(v[i].id));
    json_object_set_new(c, "title", v[i].title ? json_string(v[i].title) : json_null());
    json_object_set_new(c, "created_at", json_integer(v[i].created_at));
    json_array_append_new(arr, c);
  }
  store_chat_list_free(v, n);
  json_t *j = json_object();
  json_object_set_new(j, "chats", arr);
  orch_api_json(req, 200, j);
}

void orch_routes_chats(struct orch *o) {
  tp_route(o->tp, "POST", "/v1/chats", 64 * 1024, on_create_chat, o);
  tp_route(o->tp, "GET", "/v1/chats", 0, on_list_chats, o);
}
