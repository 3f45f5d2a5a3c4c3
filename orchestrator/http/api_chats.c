/* api_chats.c -- the chat calls: POST /v1/chats (the API key, or a person's session: a new chat
 * and its page token, answered once durable; the token is returned once and only its sha256 is
 * stored; the chat belongs to the session's person, or to the one the API key names as `owner`),
 * GET /v1/chats (the chat list: every chat for the API key, a person's own for a session),
 * GET /v1/chats/{chat} (one chat: id, title, creation time, owner, so a chat page can show its
 * title), PATCH /v1/chats/{chat} (rename, answered once durable), DELETE /v1/chats/{chat} (the
 * chat and everything of it, the API key or its owner's session) and GET /v1/chats/{chat}/runs
 * (the chat's run history, newest first, for a page after a reload).  Those on one chat take the
 * API key, the chat's own page token or its owner's session.  What it does not do: files, or
 * create, dispatch or change runs (api_runs.c, api_page.c); the run object is json.c's.
 */
#include "api.h"
#include "nodes.h"
#include "transport.h"

#include <stdlib.h>
#include <string.h>

static json_t *chat_json(struct orch *o, const struct store_chat *c);

struct create_ctx {
  struct orch *o;
  struct tp_req *req;
  struct store_chat chat;
  char token[STORE_ID_LEN + 70];
};

static void on_chat_created(int rc, const struct sbx_error *err, void *ud) {
  struct create_ctx *ctx = ud;
  if (rc != 0) {
    orch__api_error(ctx->req, 500, "storage", "chat not stored: %s",
                    err ? err->msg : sbx_strerror(rc));
  } else {
    if (orch__node_take(ctx->o, ctx->chat.id) == 0) { /* nodes: its lease first (else later) */
      struct orch_chat *c = orch__chat_add(ctx->o, ctx->chat.id, ctx->chat.token_hash, 0);
      if (c != NULL)
        memcpy(c->owner, ctx->chat.owner, sizeof c->owner);
    }
    json_t *j = chat_json(ctx->o, &ctx->chat);
    json_object_set_new(j, "page_token", json_string(ctx->token));
    orch__api_json(ctx->req, 201, j);
  }
  tp_req_release(ctx->req);
  sbx_free(ctx->chat.title);
  memset(ctx->token, 0, sizeof(ctx->token));
  sbx_free(ctx);
}

/* The chats' own calls (create, list) take the API key or a person's session: 0 with *a set, or
 * answered. */
static int chats_caller(struct orch *o, struct tp_req *req, const char *what,
                        struct orch_auth *a) {
  orch__api_auth(o, req, NULL, a);
  if (a->kind == ORCH_CRED_SESSION || a->cookie)
    return orch__api_deny_auth(req, a);
  return orch__api_backend_only(o, req, what);
}

static void on_create_chat(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  struct orch_auth a;
  if (chats_caller(o, req, "creating chats", &a))
    return;
  const char *title = NULL, *owner = NULL;
  store_id owner_id = "";
  if (a.kind == ORCH_CRED_SESSION)
    memcpy(owner_id, a.person_id, sizeof owner_id);
  json_t *body = NULL;
  size_t len = 0;
  tp_req_body(req, &len);
  if (len > 0) {
    if ((body = orch__api_body_object(req)) == NULL)
      return;
    struct orch_field f[] = {ORCH_FIELD("title", "s", &title), ORCH_FIELD("owner", "s", &owner)};
    int bad = orch__api_unpack(req, body, NULL, f, 2) != 0;
    if (!bad && title && strlen(title) > 500) {
      orch__api_error(req, 400, "invalid_field", "title: a string of at most 500 bytes");
      bad = 1;
    }
    if (!bad && owner && a.kind == ORCH_CRED_SESSION) {
      orch__api_error(req, 400, "invalid_field", "owner: a session's chats are its person's");
      bad = 1;
    } else if (!bad && owner) { /* the API key names the person it makes the chat for */
      struct store_person p;
      if (store_person_by_name(o->st, owner, &p) != 0) {
        orch__api_error(req, 400, "invalid_field", "owner: nobody of that name");
        bad = 1;
      } else {
        memcpy(owner_id, p.id, sizeof owner_id);
        store_person_free(&p);
      }
    }
    if (bad) {
      json_decref(body);
      return;
    }
  }
  struct create_ctx *ctx = sbx_calloc(1, sizeof(*ctx));
  if (ctx == NULL) {
    json_decref(body);
    orch__api_error(req, 500, "internal", "out of memory");
    return;
  }
  ctx->o = o;
  ctx->req = req;
  store_new_id(ctx->chat.id);
  ctx->chat.title = title ? sbx_strdup(title) : NULL;
  ctx->chat.created_at = sbx_now_wall_ms();
  memcpy(ctx->chat.owner, owner_id, sizeof ctx->chat.owner);
  json_decref(body);
  if (orch__token_new(ctx->chat.id, ctx->token, sizeof(ctx->token), ctx->chat.token_hash) != 0 ||
      store_chat_create(o->st, &ctx->chat, on_chat_created, ctx) != 0) {
    sbx_free(ctx->chat.title);
    sbx_free(ctx);
    orch__api_error(req, 500, "internal", "chat could not be created");
    return;
  }
  tp_req_hold(req);
}

/* {id, name} of the chat's owner, or JSON null (a backend's chat, or a person no longer there). */
static json_t *owner_json(struct orch *o, const char *owner) {
  struct store_person p;
  if (owner[0] == '\0' || store_person_get(o->st, owner, &p) != 0)
    return json_null();
  json_t *j = json_pack("{s:s, s:s}", "id", p.id, "name", p.name);
  store_person_free(&p);
  return j ? j : json_null();
}

static json_t *chat_json(struct orch *o, const struct store_chat *c) {
  json_t *j = json_object();
  json_object_set_new(j, "chat_id", json_string(c->id));
  json_object_set_new(j, "title", c->title ? json_string(c->title) : json_null());
  json_object_set_new(j, "created_at", json_integer(c->created_at));
  json_object_set_new(j, "owner", owner_json(o, c->owner));
  return j;
}

static void on_list_chats(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  struct orch_auth a;
  if (chats_caller(o, req, "listing chats", &a))
    return;
  struct store_chat *v = NULL;
  size_t n = 0;
  int rc = a.kind == ORCH_CRED_SESSION ? store_chat_list_owner(o->st, a.person_id, 200, &v, &n)
                                       : store_chat_list(o->st, 200, &v, &n);
  if (rc != 0) {
    orch__api_error(req, 500, "storage", "cannot list chats");
    return;
  }
  json_t *arr = json_array();
  json_t *mine = a.kind == ORCH_CRED_SESSION ? owner_json(o, a.person_id) : NULL;
  for (size_t i = 0; i < n; i++) {
    json_t *c = mine ? json_object() : chat_json(o, &v[i]);
    if (mine) { /* every one the session's person's: its name read once */
      json_object_set_new(c, "chat_id", json_string(v[i].id));
      json_object_set_new(c, "title", v[i].title ? json_string(v[i].title) : json_null());
      json_object_set_new(c, "created_at", json_integer(v[i].created_at));
      json_object_set(c, "owner", mine);
    }
    json_array_append_new(arr, c);
  }
  json_decref(mine);
  store_chat_list_free(v, n);
  json_t *j = json_object();
  json_object_set_new(j, "chats", arr);
  orch__api_json(req, 200, j);
}

/* One chat (GET /v1/chats/{chat}): the object PATCH answers with, read from the store. */
static void on_get_chat(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  struct orch_chat *oc = orch__api_chat(o, req, tp_req_param(req, "chat"), ORCH_API_PAGE, 0);
  if (oc == NULL)
    return;
  struct store_chat c;
  int rc = store_chat_get(o->st, oc->id, &c);
  if (rc != 0) {
    orch__api_fail(req, rc, ORCH_OP_STORE, "chat %s not read: %s", oc->id, sbx_strerror(rc));
  } else {
    orch__api_json(req, 200, chat_json(o, &c));
    store_chat_free(&c);
  }
}

/* ---- rename --------------------------------------------------------------------------------- */

#define CHAT_TITLE_MAX 200 /* characters (code points), after trimming */

static int is_space(unsigned char ch) { return ch == ' ' || (ch >= '\t' && ch <= '\r'); }

/* Trims ASCII white space from both ends of s[0..len) (valid UTF-8, as jansson guarantees) and
 * checks the rest: 1..CHAT_TITLE_MAX code points, none a control character (C0, DEL, C1) or a line
 * or paragraph separator (U+2028/9).  Returns the trimmed title (owned) or NULL with *why set. */
static char *title_check(const char *s, size_t len, const char **why) {
  while (len > 0 && is_space((unsigned char)s[0]))
    s++, len--;
  while (len > 0 && is_space((unsigned char)s[len - 1]))
    len--;
  size_t chars = 0;
  for (size_t i = 0; i < len; chars++) {
    uint32_t cp;
    i += orch__utf8_next(s + i, len - i, &cp);
    if (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F) || cp == 0x2028 || cp == 0x2029) {
      *why = "title: no control characters or line breaks";
      return NULL;
    }
  }
  if (chars == 0 || chars > CHAT_TITLE_MAX) {
    *why = "title: from 1 to 200 characters (white space at either end is trimmed)";
    return NULL;
  }
  char *t = sbx_malloc(len + 1);
  if (t != NULL) {
    memcpy(t, s, len);
    t[len] = '\0';
  } else {
    *why = NULL;
  }
  return t;
}

struct rename_ctx {
  struct orch *o;
  struct tp_req *req;
  store_id chat_id;
};

static void on_title_set(int rc, const struct sbx_error *err, void *ud) {
  struct rename_ctx *ctx = ud;
  struct store_chat c;
  if (rc != 0) {
    orch__api_fail(ctx->req, rc, ORCH_OP_STORE, "chat %s: title not stored: %s", ctx->chat_id,
                   err ? err->msg : sbx_strerror(rc));
  } else if ((rc = store_chat_get(ctx->o->st, ctx->chat_id, &c)) != 0) {
    orch__api_fail(ctx->req, rc, ORCH_OP_STORE, "chat %s not read: %s", ctx->chat_id,
                   sbx_strerror(rc));
  } else {
    orch__api_json(ctx->req, 200, chat_json(ctx->o, &c));
    store_chat_free(&c);
  }
  tp_req_release(ctx->req);
  sbx_free(ctx);
}

static void on_rename_chat(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  struct orch_chat *c;
  json_t *body = orch__api_chat_object(o, req, &c);
  if (body == NULL)
    return;
  const char *given = NULL, *why = NULL;
  struct orch_field f[] = {ORCH_FIELD_REQUIRED("title", "s", &given)};
  if (orch__api_unpack(req, body, NULL, f, 1) != 0) {
    json_decref(body);
    return;
  }
  char *title = title_check(given, strlen(given), &why);
  json_decref(body);
  if (title == NULL) {
    if (why)
      orch__api_error(req, 400, "invalid_field", "%s", why);
    else
      orch__api_error(req, 500, "internal", "out of memory");
    return;
  }
  struct rename_ctx *ctx = sbx_calloc(1, sizeof(*ctx));
  if (ctx == NULL) {
    sbx_free(title);
    orch__api_error(req, 500, "internal", "out of memory");
    return;
  }
  ctx->o = o;
  ctx->req = req;
  snprintf(ctx->chat_id, sizeof(ctx->chat_id), "%s", c->id);
  tp_req_hold(req);
  int rc = store_chat_set_title(o->st, c->id, title, on_title_set, ctx); /* the store copies it */
  sbx_free(title);
  if (rc != 0) {
    tp_req_release(req);
    sbx_free(ctx);
    orch__api_error(req, 500, "internal", "rename could not be queued");
  }
}

/* ---- run history ------------------------------------------------------------------------------ */

#define CHAT_RUNS_DEFAULT 50
#define CHAT_RUNS_MAX     200

/* Stored runs of the chat, newest first; a run still live is answered from memory (its latest
 * state).  A run created in the last instant, not yet queued for the store, is not listed yet. */
static void on_chat_runs(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  struct orch_chat *c = orch__api_chat(o, req, tp_req_param(req, "chat"), ORCH_API_PAGE, 0);
  if (c == NULL)
    return;
  long limit = CHAT_RUNS_DEFAULT;
  const char *q = tp_req_query(req, "limit");
  if (q != NULL) {
    char *end = NULL;
    limit = strtol(q, &end, 10);
    if (*q == '\0' || end == NULL || *end != '\0' || limit < 1 || limit > CHAT_RUNS_MAX) {
      orch__api_error(req, 400, "invalid_field", "limit: a whole number from 1 to %d",
                      CHAT_RUNS_MAX);
      return;
    }
  }
  struct store_run *v = NULL;
  size_t n = 0;
  if (store_run_list(o->st, c->id, (size_t)limit, &v, &n) != 0) {
    orch__api_error(req, 500, "storage", "cannot list runs");
    return;
  }
  json_t *arr = json_array();
  for (size_t i = 0; i < n; i++) {
    struct orch_run *live = orch__map_get(&o->runs, v[i].id);
    json_array_append_new(arr, orch__run_json(o, live ? &live->rec : &v[i]));
  }
  store_run_list_free(v, n);
  json_t *j = json_object();
  json_object_set_new(j, "runs", arr);
  orch__api_json(req, 200, j);
}

/* ---- deletion ------------------------------------------------------------------------------ */

struct delete_ctx {
  struct tp_req *req;
  store_id chat_id;
};

static void on_chat_deleted(int rc, const struct sbx_error *err, void *ud) {
  struct delete_ctx *ctx = ud;
  if (rc == 0)
    orch__api_json(ctx->req, 200, json_object());
  else
    orch__api_fail(ctx->req, rc, ORCH_OP_STORE, "chat %s not deleted: %s", ctx->chat_id,
                   err ? err->msg : sbx_strerror(rc));
  tp_req_release(ctx->req);
  sbx_free(ctx);
}

/* DELETE /v1/chats/{chat}: its owner's session or the API key. */
static void on_delete_chat(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  struct orch_chat *c = orch__api_chat(o, req, tp_req_param(req, "chat"), ORCH_API_BACKEND, 0);
  if (c == NULL)
    return;
  struct delete_ctx *ctx = sbx_calloc(1, sizeof *ctx);
  if (ctx == NULL) {
    orch__api_error(req, 500, "internal", "out of memory");
    return;
  }
  ctx->req = req;
  memcpy(ctx->chat_id, c->id, sizeof ctx->chat_id);
  int rc = orch__chat_delete(o, c, on_chat_deleted, ctx);
  if (rc != 0) {
    sbx_free(ctx);
    orch__api_fail(req, rc, ORCH_OP_ANY, "chat %s %s", c->id,
                   rc == SBX_ESTATE ? "has runs or an answer in progress: cancel them, then "
                                      "delete it"
                                    : "could not be deleted");
    return;
  }
  tp_req_hold(req);
}

void orch__routes_chats(struct orch *o) {
  tp_route(o->tp, "DELETE", "/v1/chats/{chat}", 0, on_delete_chat, o);
  tp_route(o->tp, "POST", "/v1/chats", 64 * 1024, on_create_chat, o);
  tp_route(o->tp, "GET", "/v1/chats", 0, on_list_chats, o);
  tp_route(o->tp, "GET", "/v1/chats/{chat}", 0, on_get_chat, o);
  tp_route(o->tp, "PATCH", "/v1/chats/{chat}", 16 * 1024, on_rename_chat, o);
  tp_route(o->tp, "GET", "/v1/chats/{chat}/runs", 0, on_chat_runs, o);
}
