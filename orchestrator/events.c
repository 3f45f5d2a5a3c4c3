/* events.c -- the per-chat event log, and handing its events to the chat's listeners.
 *
 * Every event gets the chat's next sequence number, is appended to the store, and reaches the
 * chat's listeners only once the append is durable, so an `id:` a page has seen is always in the
 * log and `Last-Event-ID` can resume from it.  Live events (a run's output, displays and input
 * requests: live.c) are handed to the listeners at once, with seq 0: they are not in the log (a
 * page that missed one gets the run's held output again instead).  What it does not do: decide
 * which events exist (chat.c, live.c, api_*.c), or deliver them to a page (api_events.c's event
 * streams are listeners; they also replay the log to a page that fell behind or reconnects).
 */
#include "internal.h"

#include <stdio.h>
#include <string.h>

struct emit_ctx {
  struct orch *o;
  char chat_id[STORE_ID_LEN + 1];
  int64_t seq;
  char type[16];
  char *data;
  size_t len;
};

void orch__chat_listen(struct orch_chat *c, struct orch_listener *l, orch_listener_cb cb) {
  l->cb = cb;
  sbx_list_insert_tail(&c->listeners, &l->link);
}

void orch__chat_unlisten(struct orch_listener *l) { sbx_list_remove(&l->link); }

/* Hands ev to every listener of the chat. */
static void hand_out(struct orch_chat *c, const struct orch_event *ev) {
  struct sbx_list *it, *tmp;
  SBX_LIST_FOREACH_SAFE(it, tmp, &c->listeners) {
    struct orch_listener *l = SBX_CONTAINER_OF(it, struct orch_listener, link);
    l->cb(l, ev);
  }
}

void orch__event_publish(struct orch_chat *c, const char *type, const char *data, size_t len) {
  struct orch_event ev = {.seq = 0, .type = type, .data = data, .len = len};
  hand_out(c, &ev);
}

static void on_appended(int rc, const struct sbx_error *err, void *ud) {
  struct emit_ctx *ctx = ud;
  struct orch_chat *c = orch__map_get(&ctx->o->chats, ctx->chat_id);
  if (c != NULL)
    c->events_inflight--;
  if (rc != 0) {
    sbx_log(SBX_LOG_ERROR, "events", "chat %s event %lld not stored: %s", ctx->chat_id,
            (long long)ctx->seq, err ? err->msg : sbx_strerror(rc));
  } else if (c != NULL) {
    struct orch_event ev = {.seq = ctx->seq, .type = ctx->type, .data = ctx->data, .len = ctx->len};
    hand_out(c, &ev);
  }
  sbx_free(ctx->data);
  sbx_free(ctx);
}

int orch__event_emit(struct orch_chat *c, const char *type, json_t *payload) {
  struct orch *o = c->o;
  struct emit_ctx *ctx = sbx_calloc(1, sizeof(*ctx));
  char *data = payload ? orch__json_dump(payload, NULL) : NULL;
  json_decref(payload);
  if (ctx == NULL || data == NULL) {
    sbx_free(ctx);
    sbx_free(data);
    return SBX_ENOMEM;
  }
  ctx->o = o;
  snprintf(ctx->chat_id, sizeof(ctx->chat_id), "%s", c->id);
  snprintf(ctx->type, sizeof(ctx->type), "%s", type);
  ctx->seq = ++c->event_seq;
  ctx->data = data;
  ctx->len = strlen(data);
  int rc = store_event_append(o->st, c->id, ctx->seq, type, data, on_appended, ctx);
  if (rc != 0) {
    sbx_free(ctx->data);
    sbx_free(ctx);
    return rc;
  }
  c->events_inflight++; /* the chat stays in memory until the append is durable */
  return 0;
}
