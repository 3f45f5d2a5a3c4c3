/* events.c -- the per-chat event log that lets an SSE stream resume after Last-Event-ID.  The
 * orchestrator picks each seq (a per-chat counter continuing after store_event_last_seq); a seq
 * used twice fails with SBX_ECONFLICT.  What it does not do: trim the log or format SSE. */
#include "internal.h"

#include <string.h>

static int event_exec(struct store *st, struct st_write *w, struct sbx_error *err) {
  struct st_simple *op = (struct st_simple *)w;
  sqlite3_stmt *s = st->ws[ST_CHAT_EXISTS];
  sqlite3_bind_text(s, 1, op->s[0], -1, SQLITE_STATIC);
  int rc = sqlite3_step(s);
  st__reset(s);
  if (rc == SQLITE_DONE)
    return sbx_error_set(err, SBX_ENOENT, "no chat %s", op->s[0]);
  if (rc != SQLITE_ROW)
    return st__translate(st->wdb, rc, "chat lookup", err);
  s = st->ws[ST_EVENT_APPEND];
  sqlite3_bind_text(s, 1, op->s[0], -1, SQLITE_STATIC);
  sqlite3_bind_int64(s, 2, op->i[0]);
  sqlite3_bind_text(s, 3, op->s[1], -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 4, op->s[2], -1, SQLITE_STATIC);
  return st__step_done(st->wdb, s, "event append", err);
}

int store_event_append(struct store *st, const char *chat_id, int64_t seq, const char *type,
                       const char *payload, store_done_cb cb, void *ud) {
  if (chat_id == NULL || type == NULL || seq <= 0)
    return SBX_EINVAL;
  struct st_simple *op = st__simple_new(event_exec, cb, ud);
  if (op == NULL || st__simple_str(op, 0, chat_id) || st__simple_str(op, 1, type) ||
      st__simple_str(op, 2, payload ? payload : "{}")) {
    st__simple_discard(op);
    return SBX_ENOMEM;
  }
  op->i[0] = seq;
  return st__submit(st, &op->w);
}

int store_event_last_seq(struct store *st, const char *chat_id, int64_t *out) {
  sqlite3_stmt *s = st->rs[ST_EVENT_LAST];
  sqlite3_bind_text(s, 1, chat_id, -1, SQLITE_STATIC);
  int rc = sqlite3_step(s), r = 0;
  if (rc == SQLITE_ROW)
    *out = sqlite3_column_int64(s, 0);
  else
    r = st__translate(st->rdb, rc, "event last", NULL);
  st__reset(s);
  return r;
}

void store_event_list_free(struct store_event *v, size_t n) {
  for (size_t i = 0; v && i < n; i++) {
    sbx_free(v[i].type);
    sbx_free(v[i].payload);
  }
  sbx_free(v);
}

int store_event_since(struct store *st, const char *chat_id, int64_t after_seq, size_t limit,
                      struct store_event **out, size_t *n) {
  sqlite3_stmt *s = st->rs[ST_EVENT_SINCE];
  struct store_event *v = NULL;
  size_t len = 0, cap = 0;
  int rc, r = 0;
  *out = NULL;
  *n = 0;
  sqlite3_bind_text(s, 1, chat_id, -1, SQLITE_STATIC);
  sqlite3_bind_int64(s, 2, after_seq);
  sqlite3_bind_int64(s, 3, (sqlite3_int64)SBX_MIN(limit, (size_t)INT64_MAX));
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    if (len == cap) {
      size_t nc = cap ? cap * 2 : 16;
      struct store_event *nv = sbx_realloc(v, nc * sizeof *nv);
      if (nv == NULL) {
        r = SBX_ENOMEM;
        break;
      }
      v = nv;
      cap = nc;
    }
    int oom = 0;
    v[len].seq = sqlite3_column_int64(s, 0);
    v[len].type = st__col_dup(s, 1, &oom);
    v[len].payload = st__col_dup(s, 2, &oom);
    len++;
    if (oom) {
      r = SBX_ENOMEM;
      break;
    }
  }
  if (r == 0 && rc != SQLITE_DONE)
    r = st__translate(st->rdb, rc, "events", NULL);
  st__reset(s);
  if (r != 0) {
    store_event_list_free(v, len);
    return r;
  }
  *out = v;
  *n = len;
  return 0;
}
