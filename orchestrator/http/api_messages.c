/* api_messages.c -- the conversation's HTTP side.
 *
 * POST /v1/chats/{chat}/messages {text, file_ids?} (backend or page token) -> 201 {message_id (the
 *   posted message), answer_id (the assistant's), turn_id} once the user's message, the assistant's message and the turn are durable; the model
 *   is asked then (assistant.c).  400 invalid_field (text empty, over ORCH_MSG_TEXT_MAX
 *   characters; file_ids not strings, over ORCH_MSG_FILES_MAX, or naming a file not of this
 *   chat), 409 turn_open (the chat's turn is still being answered), 503 no_model.
 * GET /v1/chats/{chat}/messages[?limit=N][&before=ID|&after=ID] (backend or page token) ->
 *   {messages: [message, ...], has_more} in creation order: a page of at most limit (default
 *   ORCH_MESSAGES_PAGE_DEFAULT, 1..ORCH_MESSAGES_PAGE_MAX): the newest, or those just before or
 *   after message ID; has_more: messages are left beyond its far end.  400 invalid_field for a
 *   bad limit, a malformed cursor, both cursors, or a cursor that is no message of the chat.
 * POST /v1/turns/{turn}/cancel (backend or the turn's chat's page token) -> 200 {turn_id, state:
 *   "finished", message_id, message_state: "stopped"} once the stopped answer is durable; a turn
 *   the backend opened (POST /v1/chats/{chat}/turns) has its live runs cancelled and stays open
 *   for its finish (state "open"); 409 turn_finished when it is finished or finishing.
 * POST /v1/chats/{chat}/page_link (backend) -> 200 {url, page_token}: a link that opens the chat's
 *   page (auth.c's page links), for chats made through the API or the CLI.
 * What it does not do: run the turn (assistant.c) or check credentials itself (api.c, auth.c).
 */
#include "api.h"
#include "assistant.h"
#include "transport.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- POST messages --------------------------------------------------------------------------- */

static void on_asked(void *ud, int rc, const struct sbx_error *err, const char *message_id,
                     const char *answer_id, const char *turn_id) {
  struct tp_req *req = ud;
  if (rc != 0)
    orch__api_error(req, 500, "storage", "the message was not stored: %s",
                    err && err->msg[0] ? err->msg : sbx_strerror(rc));
  else
    orch__api_json(req, 201,
                   json_pack("{s:s, s:s, s:s}", "message_id", message_id, "answer_id", answer_id,
                             "turn_id", turn_id));
  tp_req_release(req);
}

static size_t chars_of(const char *s) {
  size_t n = 0, len = strlen(s);
  for (size_t i = 0; i < len; n++)
    i += orch__utf8_next(s + i, len - i, NULL);
  return n;
}

/* The attachments named by file_ids, each checked to be a file of chat c (*files owned). */
static int read_files(struct orch *o, struct tp_req *req, struct orch_chat *c, const json_t *ids,
                      struct store_file **files, size_t *n) {
  *files = NULL;
  *n = 0;
  if (ids == NULL || json_is_null(ids))
    return 0;
  if (!json_is_array(ids) || json_array_size(ids) > ORCH_MSG_FILES_MAX) {
    orch__api_error(req, 400, "invalid_field", "file_ids: an array of at most %d file ids",
                    ORCH_MSG_FILES_MAX);
    return 1;
  }
  if (json_array_size(ids) == 0)
    return 0;
  if ((*files = sbx_calloc(json_array_size(ids), sizeof **files)) == NULL) {
    orch__api_error(req, 500, "internal", "out of memory");
    return 1;
  }
  size_t i;
  json_t *v;
  json_array_foreach(ids, i, v) {
    const char *id = json_string_value(v);
    struct store_file *f = &(*files)[*n];
    if (id == NULL || !orch__valid_id(id) || store_file_get(o->st, id, f) != 0) {
      orch__api_error(req, 400, "invalid_field", "file_ids[%zu]: no file %s", i, id ? id : "");
      return 1;
    }
    (*n)++;
    if (strcmp(f->chat_id, c->id) != 0) {
      orch__api_error(req, 400, "invalid_field", "file_ids[%zu]: no file %s in this chat", i, id);
      return 1;
    }
  }
  return 0;
}

static void on_post_message(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  struct orch_chat *c = orch__api_chat(o, req, tp_req_param(req, "chat"), ORCH_API_PERSON, 0);
  if (c == NULL)
    return;
  if (o->llm == NULL) {
    orch__api_error(req, 503, "no_model",
                    "No model is configured on this deployment: set CEREA_LLM_URL and "
                    "CEREA_LLM_MODEL.");
    return;
  }
  json_t *body = orch__api_body_object(req);
  if (body == NULL)
    return;
  const char *text = NULL;
  json_t *ids = NULL;
  struct store_file *files = NULL;
  size_t nf = 0;
  struct orch_field f[] = {ORCH_FIELD_REQUIRED("text", "s", &text),
                           ORCH_FIELD("file_ids", "o", &ids)};
  if (orch__api_unpack(req, body, NULL, f, SBX_ARRAY_SIZE(f)) != 0)
    goto out;
  if (text[strspn(text, " \t\r\n")] == '\0') {
    orch__api_error(req, 400, "invalid_field", "text: empty");
    goto out;
  }
  if (chars_of(text) > ORCH_MSG_TEXT_MAX) {
    orch__api_error(req, 400, "invalid_field", "text: over %d characters", ORCH_MSG_TEXT_MAX);
    goto out;
  }
  if (read_files(o, req, c, ids, &files, &nf) != 0)
    goto out;
  struct orch_ask ask = {.text = text, .files = files, .n_files = nf};
  tp_req_hold(req);
  int rc = orch__asst_ask(o, c, &ask, on_asked, req);
  if (rc != 0)
    tp_req_release(req);
  if (rc != 0)
    orch__api_fail(req, rc, ORCH_OP_ASK, "%s",
                   rc == SBX_EBUSY ? "The assistant is still answering in this chat: wait for its "
                                     "answer, or stop it (POST /v1/turns/{turn}/cancel)."
                                   : sbx_strerror(rc));
out:
  for (size_t i = 0; i < nf; i++)
    store_file_free(&files[i]);
  sbx_free(files);
  json_decref(body);
}

/* ---- GET messages ---------------------------------------------------------------------------- */

/* A cursor parameter (?before=, ?after=): absent (*id NULL), a message id, or refused (1). */
static int cursor_param(struct tp_req *req, const char *name, const char **id) {
  *id = tp_req_query(req, name);
  if (*id == NULL)
    return 0;
  if (!orch__valid_id(*id)) {
    orch__api_error(req, 400, "invalid_field", "%s: a message id of this chat", name);
    return 1;
  }
  return 0;
}

static void on_list_messages(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  struct orch_chat *c = orch__api_chat(o, req, tp_req_param(req, "chat"), ORCH_API_PERSON, 0);
  if (c == NULL)
    return;
  long limit = ORCH_MESSAGES_PAGE_DEFAULT;
  const char *q = tp_req_query(req, "limit"), *before, *after;
  if (q) {
    char *end = NULL;
    errno = 0;
    limit = strtol(q, &end, 10);
    if (*q == '\0' || *end != '\0' || errno || limit < 1 || limit > ORCH_MESSAGES_PAGE_MAX) {
      orch__api_error(req, 400, "invalid_field", "limit: a whole number from 1 to %d",
                      ORCH_MESSAGES_PAGE_MAX);
      return;
    }
  }
  if (cursor_param(req, "before", &before) || cursor_param(req, "after", &after))
    return;
  if (before && after) {
    orch__api_error(req, 400, "invalid_field", "before and after: one cursor at a time");
    return;
  }
  struct store_message *v = NULL;
  size_t n = 0;
  int more = 0;
  int rc = store_message_page(o->st, c->id, before, after, (size_t)limit, 0, &v, &n, &more);
  if (rc != 0) {
    if (rc == SBX_ENOENT) /* the cursor names no message of this chat */
      orch__api_fail(req, rc, ORCH_OP_MSG_CURSOR, "%s: no message %s in this chat",
                     before ? "before" : "after", before ? before : after);
    else
      orch__api_fail(req, rc, ORCH_OP_MSG_CURSOR, "messages not read: %s", sbx_strerror(rc));
    return;
  }
  json_t *list = json_array();
  for (size_t i = 0; i < n; i++)
    json_array_append_new(list, orch__message_json(o, &v[i]));
  store_message_list_free(v, n);
  orch__api_json(req, 200, json_pack("{s:o, s:b}", "messages", list, "has_more", more));
}

/* ---- cancel a turn --------------------------------------------------------------------------- */

struct stop_ctx {
  struct tp_req *req;
  store_id turn_id;
};

static void on_stopped(void *ud, int rc, const char *message_id) {
  struct stop_ctx *s = ud;
  if (rc != 0)
    orch__api_error(s->req, 500, "storage", "the stopped answer was not stored: %s",
                    sbx_strerror(rc));
  else
    orch__api_json(s->req, 200,
                   json_pack("{s:s, s:s, s:s, s:s}", "turn_id", s->turn_id, "state", "finished",
                             "message_id", message_id, "message_state", "stopped"));
  tp_req_release(s->req);
  sbx_free(s);
}

static void on_cancel_turn(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  const char *id = tp_req_param(req, "turn");
  struct store_turn st;
  if (!orch__valid_id(id) || store_turn_get(o->st, id, &st) != 0) {
    orch__api_error(req, 404, "not_found", "no turn %s", id ? id : ""); /* ids are unguessable */
    return;
  }
  struct orch_chat *c = orch__api_chat(o, req, st.chat_id, ORCH_API_PERSON, 0);
  if (c == NULL)
    goto out;
  if (st.state == STORE_TURN_FINISHED) {
    orch__api_error(req, 409, "turn_finished", "the turn is already finished");
    goto out;
  }
  struct stop_ctx *s = sbx_calloc(1, sizeof *s);
  if (s == NULL) {
    orch__api_error(req, 500, "internal", "out of memory");
    goto out;
  }
  s->req = req;
  snprintf(s->turn_id, sizeof s->turn_id, "%s", st.id);
  tp_req_hold(req);
  int rc = orch__asst_stop(o, st.id, on_stopped, s);
  if (rc == 0)
    goto out;
  tp_req_release(req);
  sbx_free(s);
  if (rc == SBX_ENOENT) { /* a backend's turn: its live runs end, it stays open */
    struct sbx_list *it, *tmp;
    SBX_LIST_FOREACH_SAFE(it, tmp, &c->runs) {
      struct orch_run *run = SBX_CONTAINER_OF(it, struct orch_run, chat_link);
      if (strcmp(run->rec.turn_id, st.id) == 0)
        orch__run_cancel(o, run, NULL, NULL);
    }
    orch__api_json(req, 200, json_pack("{s:s, s:s}", "turn_id", st.id, "state", "open"));
  } else {
    orch__api_fail(req, rc, ORCH_OP_TURN_STOP, "%s",
                   rc == SBX_ESTATE ? "the turn's answer is complete and being stored"
                                    : sbx_strerror(rc));
  }
out:
  store_turn_free(&st);
}

/* ---- page links ------------------------------------------------------------------------------ */

static void on_page_link(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  struct orch_chat *c = orch__api_chat(o, req, tp_req_param(req, "chat"), ORCH_API_BACKEND, 0);
  if (c == NULL)
    return;
  char token[STORE_ID_LEN + 80], base[512], url[1024];
  if (orch__page_link_token(o->chat_secret, c->id, token, sizeof token) != 0) {
    orch__api_error(req, 500, "internal", "no page link for chat %s", c->id);
    return;
  }
  orch__api_base_url(o, req, base, sizeof base);
  snprintf(url, sizeof url, "%s/chat/%s#token=%s", base, c->id, token);
  orch__api_json(req, 200, json_pack("{s:s, s:s}", "url", url, "page_token", token));
}

void orch__routes_messages(struct orch *o) {
  tp_route(o->tp, "POST", "/v1/chats/{chat}/messages", 512 * 1024, on_post_message, o);
  tp_route(o->tp, "GET", "/v1/chats/{chat}/messages", 0, on_list_messages, o);
  tp_route(o->tp, "POST", "/v1/turns/{turn}/cancel", 64 * 1024, on_cancel_turn, o);
  tp_route(o->tp, "POST", "/v1/chats/{chat}/page_link", 64 * 1024, on_page_link, o);
}
