/* events.c -- the per-chat event log and its delivery to event streams.
 *
 * Every event gets the chat's next sequence number, is appended to the store, and is sent to the
 * chat's streams only once the append is durable, so an `id:` a page has seen is always in the log
 * and `Last-Event-ID` can resume from it.  A stream that falls behind (its queue full: SBX_EAGAIN)
 * stops taking live events and catches up from the log when it drains; a reconnecting page
 * catches up the same way.  What it does not do: decide which events exist (chat.c, api_*.c) or
 * own streams (api_events.c).
 */
#include "internal.h"
#include "transport.h"

#include <string.h>

#define CATCH_UP_BATCH 64

struct emit_ctx {
  struct orch *o;
  char chat_id[STORE_ID_LEN + 1];
  int64_t seq;
  char type[16];
  char *data;
  size_t len;
};

static void on_drain(struct tp_req *req, void *ud) {
  (void)req;
  struct orch_stream *s = ud;
  if (s->lagging)
    orch__stream_catch_up(s);
}

static int send_one(struct orch_stream *s, const char *type, int64_t seq, const char *data, size_t len) {
  char id[24];
  orch__fmt_i64(id, (long long)seq);
  int rc = tp_sse_send(s->req, type, id, data, len);
  if (rc == 0) {
    s->last_seq = seq;
    s->chat->o->m.events_sent++;
  } else if (rc == SBX_EAGAIN) {
    s->lagging = 1;
    tp_stream_on_drain(s->req, on_drain, s);
  }
  return rc;
}

void orch__stream_catch_up(struct orch_stream *s) {
  struct orch *o = s->chat->o;
  s->lagging = 0;
  for (;;) {
    struct store_event *ev = NULL;
    size_t n = 0;
    if (store_event_since(o->st, s->chat->id, s->last_seq, CATCH_UP_BATCH, &ev, &n) != 0)
      return;
    for (size_t i = 0; i < n; i++) {
      int rc = send_one(s, ev[i].type, ev[i].seq, ev[i].payload, strlen(ev[i].payload));
      if (rc != 0) {
        store_event_list_free(ev, n);
        return; /* lagging: resumes on drain; closed: the close callback cleans up */
      }
      o->m.events_replayed++;
    }
    store_event_list_free(ev, n);
    if (n < CATCH_UP_BATCH)
      return;
  }
}

static void on_appended(int rc, const struct sbx_error *err, void *ud) {
  struct emit_ctx *ctx = ud;
  struct orch_chat *owner = orch__map_get(&ctx->o->chats, ctx->chat_id);
  if (owner != NULL)
    owner->events_inflight--;
  if (rc != 0) {
    sbx_log(SBX_LOG_ERROR, "events", "chat %s event %lld not stored: %s", ctx->chat_id,
            (long long)ctx->seq, err ? err->msg : sbx_strerror(rc));
  } else {
    struct orch_chat *c = orch__map_get(&ctx->o->chats, ctx->chat_id);
    struct sbx_list *it, *tmp;
    if (c != NULL)
      SBX_LIST_FOREACH_SAFE(it, tmp, &c->streams) {
        struct orch_stream *s = SBX_CONTAINER_OF(it, struct orch_stream, chat_link);
        if (!s->lagging && ctx->seq > s->last_seq)
          send_one(s, ctx->type, ctx->seq, ctx->data, ctx->len);
      }
  }
  sbx_free(ctx->data);
  sbx_free(ctx);
}

int orch__event_emit(struct orch_chat *c, const char *type, json_t *payload) {
  size_t len = 0;
  char *data = payload ? orch__json_dump(payload, &len) : NULL;
  json_decref(payload);
  if (data == NULL)
    return SBX_ENOMEM;
  return orch__event_emit_text(c, type, data, len);
}

int orch__event_emit_text(struct orch_chat *c, const char *type, char *data, size_t len) {
  struct orch *o = c->o;
  struct emit_ctx *ctx = sbx_calloc(1, sizeof(*ctx));
  if (ctx == NULL || data == NULL) {
    sbx_free(ctx);
    sbx_free(data);
    return SBX_ENOMEM;
  }
  ctx->o = o;
  orch__strcpy_cap(ctx->chat_id, sizeof(ctx->chat_id), c->id);
  orch__strcpy_cap(ctx->type, sizeof(ctx->type), type);
  ctx->seq = ++c->event_seq;
  ctx->data = data;
  ctx->len = len;
  int rc = store_event_append(o->st, c->id, ctx->seq, type, data, on_appended, ctx);
  if (rc != 0) {
    sbx_free(ctx->data);
    sbx_free(ctx);
    return rc;
  }
  c->events_inflight++; /* the chat stays in memory until the append is durable */
  return 0;
}
