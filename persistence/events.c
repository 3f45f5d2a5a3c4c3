/* events.c -- the per-chat event log that lets an SSE stream resume after Last-Event-ID.  The
 * orchestrator picks each seq (a per-chat counter continuing after store_event_last_seq); a seq
 * used twice fails with SBX_ECONFLICT.  Each event records when it was logged, and
 * store_event_trim deletes old prefixes of the chats' logs in bounded steps (see store.h for the
 * rule; it never deletes a chat's newest event, so the seq counter never goes back).
 * What it does not do: format SSE, decide when to trim (the orchestrator's cron does). */
#include "internal.h"

#include <string.h>

static int event_exec(struct store *st, struct st_write *w, struct sbx_error *err) {
  struct st_simple *op = (struct st_simple *)w;
  int rc = st__known(st, ST_CHAT_EXISTS, op->s[0], "chat", err);
  if (rc != 0)
    return rc;
  struct st_stmt *s = st__q(&st->w, ST_EVENT_APPEND);
  st__bind_text(s, 1, op->s[0]);
  st__bind_int64(s, 2, op->i[0]);
  st__bind_text(s, 3, op->s[1]);
  st__bind_text(s, 4, op->s[2]);
  st__bind_int64(s, 5, op->i[1]);
  return st__step_done(s, "event append", err);
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
  op->i[1] = sbx_now_wall_ms(); /* when it was logged: what store_event_trim ages by */
  return st__submit_fenced(st, &op->w, chat_id);
}

int store_event_last_seq(struct store *st, const char *chat_id, int64_t *out) {
  struct st_stmt *s = st__q(&st->r, ST_EVENT_LAST);
  st__bind_text(s, 1, chat_id);
  return st__step_int64(s, "event last", out, NULL);
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
  struct st_stmt *s = st__q(&st->r, ST_EVENT_SINCE);
  struct store_event *v = NULL;
  size_t len = 0, cap = 0;
  int rc, r = 0;
  *out = NULL;
  *n = 0;
  st__bind_text(s, 1, chat_id);
  st__bind_int64(s, 2, after_seq);
  st__bind_int64(s, 3, (int64_t)SBX_MIN(limit, (size_t)INT64_MAX));
  while ((rc = st__step(s, "events", NULL)) == ST_ROW) {
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
    v[len].seq = st__col_int64(s, 0);
    v[len].type = st__col_dup(s, 1, &oom);
    v[len].payload = st__col_dup(s, 2, &oom);
    len++;
    if (oom) {
      r = SBX_ENOMEM;
      break;
    }
  }
  if (r == 0 && rc < 0)
    r = rc;
  st__reset(s);
  if (r != 0) {
    store_event_list_free(v, len);
    return r;
  }
  *out = v;
  *n = len;
  return 0;
}

/* ---- trimming -------------------------------------------------------------------------------
 * One step walks the chats that have events in key order from st->trim_cursor (the last chat it
 * finished).  Per chat, cheap checks first on (chat_id, seq) (oldest event young enough, or no
 * more events than keep_per_chat by seq span: nothing to do), then the keep-th newest seq, then
 * the old prefix below it, deleted as one key range.  A chat left unfinished because the budget
 * ran out is looked at again first by the next step. */
struct trim_op {
  struct st_write w;
  store_sweep_cb cb;
  void *ud;
  int64_t older_than_ms;
  int64_t keep; /* >= 1 */
  size_t budget;
  size_t removed;
};

/* Trims one chat: deletes at most `room` rows of its old prefix; *n gets how many. */
static int trim_chat(struct store *st, struct trim_op *op, const char *chat, size_t room, size_t *n,
                     struct sbx_error *err) {
  struct st_stmt *s = st__q(&st->w, ST_EVENT_SPAN);
  int64_t oldest, oldest_at, newest, bound, upto = 0;
  int rc;
  *n = 0;
  st__bind_text(s, 1, chat);
  rc = st__step(s, "event trim span", err);
  if (rc != ST_ROW) {
    st__reset(s);
    return rc;
  }
  oldest = st__col_int64(s, 0);
  oldest_at = st__col_int64(s, 1);
  newest = st__col_int64(s, 2);
  st__reset(s);
  if (oldest_at >= op->older_than_ms || newest - oldest < op->keep)
    return 0; /* nothing old, or at most keep events (seqs are unique: count <= span) */
  s = st__q(&st->w, ST_EVENT_KTH_NEWEST);
  st__bind_text(s, 1, chat);
  st__bind_int64(s, 2, op->keep - 1);
  rc = st__step(s, "event trim keep", err);
  if (rc != ST_ROW) {
    st__reset(s);
    return rc;
  }
  bound = st__col_int64(s, 0); /* the keep-th newest: everything below it may go */
  st__reset(s);
  s = st__q(&st->w, ST_EVENT_OLD_PREFIX);
  st__bind_text(s, 1, chat);
  st__bind_int64(s, 2, bound);
  st__bind_int64(s, 3, (int64_t)room);
  while ((rc = st__step(s, "event trim prefix", err)) == ST_ROW) {
    if (st__col_int64(s, 1) >= op->older_than_ms)
      break; /* the prefix ends at the first event young enough */
    upto = st__col_int64(s, 0);
    (*n)++;
  }
  st__reset(s);
  if (rc < 0) {
    *n = 0;
    return rc;
  }
  if (*n == 0)
    return 0;
  s = st__q(&st->w, ST_EVENT_DELETE_UPTO);
  st__bind_text(s, 1, chat);
  st__bind_int64(s, 2, upto);
  if ((rc = st__step_done(s, "event trim delete", err)) != 0)
    *n = 0;
  return rc;
}

static int trim_exec(struct store *st, struct st_write *w, struct sbx_error *err) {
  struct trim_op *op = (struct trim_op *)w;
  store_id cursor, chat;
  size_t visits = 0, max_visits = op->budget * 8;
  int rc = 0;
  memcpy(cursor, st->trim_cursor, sizeof cursor);
  op->removed = 0;
  while (op->removed < op->budget && visits++ < max_visits) {
    struct st_stmt *s = st__q(&st->w, ST_EVENT_NEXT_CHAT);
    st__bind_text(s, 1, st->trim_cursor);
    int src = st__step(s, "event trim chats", err);
    if (src == ST_DONE) { /* the end: the next step starts over */
      st__reset(s);
      st->trim_cursor[0] = '\0';
      break;
    }
    if (src < 0) {
      rc = src;
      st__reset(s);
      goto out;
    }
    st__col_id(s, 0, chat);
    st__reset(s);
    size_t n = 0;
    if ((rc = trim_chat(st, op, chat, op->budget - op->removed, &n, err)) != 0)
      goto out;
    op->removed += n;
    if (op->removed < op->budget)
      memcpy(st->trim_cursor, chat, sizeof chat); /* finished: the next one after it */
  }
out:
  if (rc != 0) { /* rolled back: the step never happened */
    memcpy(st->trim_cursor, cursor, sizeof cursor);
    op->removed = 0;
  }
  return rc;
}

static void trim_done(struct store *st, struct st_write *w) {
  (void)st;
  struct trim_op *op = (struct trim_op *)w;
  if (op->cb)
    op->cb(w->rc, w->rc ? &w->err : NULL, w->rc ? 0 : op->removed, op->ud);
}

static void trim_release(struct store *st, struct st_write *w) {
  (void)st;
  sbx_free(w);
}

int store_event_trim(struct store *st, int64_t older_than_ms, size_t keep_per_chat, size_t budget,
                     store_sweep_cb cb, void *ud) {
  if (budget == 0 || budget > 100000)
    return SBX_EINVAL;
  struct trim_op *op = sbx_calloc(1, sizeof *op);
  if (op == NULL)
    return SBX_ENOMEM;
  st__write_init(&op->w, trim_exec, NULL, trim_done, trim_release);
  op->cb = cb;
  op->ud = ud;
  op->older_than_ms = older_than_ms;
  op->keep = keep_per_chat == 0 ? 1 : (int64_t)SBX_MIN(keep_per_chat, (size_t)INT64_MAX);
  op->budget = budget;
  return st__submit(st, &op->w);
}
