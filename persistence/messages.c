/* messages.c -- a chat's conversation: a message's write (insert, or update of its state, text,
 * error, runs, parts and, when given, calls, through the writer) and the chat's messages in
 * creation order, whole or a page of them from a cursor (read connection).
 * What it does not do: decide anything about turns or answers, or look inside the JSON text. */
#include "internal.h"

#include <string.h>

/* the text columns in ST_MESSAGE_COLS order (parts_json, the last column, bound as ?12) */
enum {
  M_ID,
  M_CHAT,
  M_TURN,
  M_ROLE,
  M_STATE,
  M_TEXT,
  M_ERROR,
  M_RUN_IDS,
  M_CALLS,
  M_PARTS,
  M__STRINGS
};

static int message_put_exec(struct store *st, struct st_write *w, struct sbx_error *err) {
  struct st_simple *op = (struct st_simple *)w;
  struct st_stmt *s = st__q(&st->w, ST_MESSAGE_PUT);
  for (int i = 0; i < M_PARTS; i++)
    st__bind_text(s, i + 1, op->s[i]);
  st__bind_int64(s, 10, op->i[0]);
  st__bind_int64(s, 11, op->i[1]);
  st__bind_text(s, 12, op->s[M_PARTS]);
  int rc = st__step_done(s, "message put", err);
  if (rc == SBX_ECONFLICT) /* the only constraint that can fail here is the chat's foreign key */
    rc = sbx_error_set(err, SBX_ENOENT, "no chat %s", op->s[M_CHAT]);
  return rc;
}

int store_message_put(struct store *st, const struct store_message *m, store_done_cb cb, void *ud) {
  if (m == NULL || !m->id[0] || !m->chat_id[0] || !m->role[0] || !m->state[0])
    return SBX_EINVAL;
  const char *v[M__STRINGS] = {m->id,         m->chat_id,
                               m->turn_id,    m->role,
                               m->state,      m->text ? m->text : "",
                               m->error_json, m->run_ids_json ? m->run_ids_json : "[]",
                               m->calls_json, m->parts_json};
  struct st_simple *op = st__simple_new(message_put_exec, cb, ud);
  if (op == NULL)
    return SBX_ENOMEM;
  for (int i = 0; i < M__STRINGS; i++)
    if (st__simple_str(op, i, v[i]) != 0) {
      st__simple_discard(op);
      return SBX_ENOMEM;
    }
  op->i[0] = m->created_at;
  op->i[1] = m->updated_at;
  return st__submit_fenced(st, &op->w, m->chat_id);
}

/* op->s[1]: the one chat, or NULL for all */
static int interrupt_exec(struct store *st, struct st_write *w, struct sbx_error *err) {
  struct st_simple *op = (struct st_simple *)w;
  const char *chat = op->s[1];
  struct st_stmt *t =
      st__q(&st->w, chat ? ST_MESSAGE_INTERRUPT_TURNS_CHAT : ST_MESSAGE_INTERRUPT_TURNS);
  struct st_stmt *m = st__q(&st->w, chat ? ST_MESSAGE_INTERRUPT_CHAT : ST_MESSAGE_INTERRUPT);
  st__bind_int64(t, 2, op->i[0]);
  if (chat)
    st__bind_text(t, 3, chat);
  int rc = st__step_done(t, "interrupted turns", err);
  if (rc != 0)
    return rc;
  st__bind_text(m, 1, op->s[0]);
  st__bind_int64(m, 2, op->i[0]);
  if (chat)
    st__bind_text(m, 3, chat);
  return st__step_done(m, "interrupted messages", err);
}

static int interrupt_submit(struct store *st, const char *chat_id, const char *error_json,
                            int64_t now, store_done_cb cb, void *ud) {
  struct st_simple *op = st__simple_new(interrupt_exec, cb, ud);
  if (op == NULL || st__simple_str(op, 0, error_json) || st__simple_str(op, 1, chat_id)) {
    st__simple_discard(op);
    return SBX_ENOMEM;
  }
  op->i[0] = now;
  return st__submit_fenced(st, &op->w, chat_id);
}

int store_message_interrupt(struct store *st, const char *error_json, int64_t now, store_done_cb cb,
                            void *ud) {
  return interrupt_submit(st, NULL, error_json, now, cb, ud);
}

int store_message_interrupt_chat(struct store *st, const char *chat_id, const char *error_json,
                                 int64_t now, store_done_cb cb, void *ud) {
  if (chat_id == NULL || !chat_id[0])
    return SBX_EINVAL;
  return interrupt_submit(st, chat_id, error_json, now, cb, ud);
}

static int message_from_row(struct st_stmt *s, struct store_message *m) {
  int oom = 0;
  memset(m, 0, sizeof *m);
  st__col_id(s, 0, m->id);
  st__col_id(s, 1, m->chat_id);
  st__col_id(s, 2, m->turn_id);
  const char *role = st__col_text(s, 3), *state = st__col_text(s, 4);
  snprintf(m->role, sizeof m->role, "%s", role ? role : "");
  snprintf(m->state, sizeof m->state, "%s", state ? state : "");
  m->text = st__col_dup(s, 5, &oom);
  m->error_json = st__col_dup(s, 6, &oom);
  m->run_ids_json = st__col_dup(s, 7, &oom);
  m->calls_json = st__col_dup(s, 8, &oom);
  m->created_at = st__col_int64(s, 9);
  m->updated_at = st__col_int64(s, 10);
  m->parts_json = st__col_dup(s, 11, &oom);
  if (!oom && m->text == NULL && (m->text = sbx_strdup("")) == NULL)
    oom = 1;
  if (oom) {
    store_message_free(m);
    return SBX_ENOMEM;
  }
  return 0;
}

static int message_row(struct st_stmt *s, void *item) { return message_from_row(s, item); }
static void message_list_free(void *v, size_t n) { store_message_list_free(v, n); }

int store_message_list(struct store *st, const char *chat_id, size_t limit,
                       struct store_message **out, size_t *n) {
  *out = NULL;
  *n = 0;
  if (chat_id == NULL || limit == 0 || limit > 100000)
    return SBX_EINVAL;
  struct st_stmt *s = st__q(&st->r, ST_MESSAGE_LIST);
  st__bind_text(s, 1, chat_id);
  st__bind_int64(s, 2, (int64_t)limit);
  void *v;
  int r = st__rows(s, "message list", sizeof **out, message_row, message_list_free, &v, n);
  *out = v;
  return r;
}

int store_message_page(struct store *st, const char *chat_id, const char *before_id,
                       const char *after_id, size_t limit, int with_calls,
                       struct store_message **out, size_t *n, int *more) {
  *out = NULL;
  *n = 0;
  *more = 0;
  if (chat_id == NULL || limit == 0 || limit > STORE_MESSAGE_PAGE_MAX || (before_id && after_id))
    return SBX_EINVAL;
  const char *cursor = before_id ? before_id : after_id;
  struct st_stmt *s = st__q(&st->r, before_id  ? ST_MESSAGE_BEFORE
                                    : after_id ? ST_MESSAGE_AFTER
                                               : ST_MESSAGE_NEWEST);
  st__bind_text(s, 1, chat_id);
  st__bind_int64(s, 2, (int64_t)limit + 1); /* one more: whether the page has a far side */
  st__bind_text(s, 3, cursor);
  st__bind_int64(s, 4, with_calls ? 1 : 0);
  void *vv;
  size_t got;
  int rc = st__rows(s, "message page", sizeof **out, message_row, message_list_free, &vv, &got);
  if (rc != 0)
    return rc;
  struct store_message *v = vv;
  if (got == 0 && cursor) { /* an empty page, or a cursor that names nothing here */
    struct st_stmt *k = st__q(&st->r, ST_MESSAGE_OF_CHAT);
    st__bind_text(k, 1, cursor);
    st__bind_text(k, 2, chat_id);
    rc = st__step_one(k, "message of chat", NULL);
    if (rc <= 0)
      return rc < 0 ? rc : SBX_ENOENT;
  }
  if (got > limit) {
    store_message_free(&v[limit]);
    got = limit;
    *more = 1;
  }
  if (!after_id) /* read newest first: turned to creation order */
    for (size_t i = 0; i < got / 2; i++) {
      struct store_message tmp = v[i];
      v[i] = v[got - 1 - i];
      v[got - 1 - i] = tmp;
    }
  *out = v;
  *n = got;
  return 0;
}

int store_message_turn_answered(struct store *st, const char *chat_id, const char *turn_id) {
  if (chat_id == NULL || turn_id == NULL || !turn_id[0])
    return 0;
  struct st_stmt *s = st__q(&st->r, ST_MESSAGE_TURN_ANSWERED);
  st__bind_text(s, 1, chat_id);
  st__bind_text(s, 2, turn_id);
  int rc = st__step_one(s, "turn answered", NULL);
  return rc == ST_ROW ? 1 : rc;
}

void store_message_free(struct store_message *m) {
  if (m == NULL)
    return;
  sbx_free(m->text);
  sbx_free(m->error_json);
  sbx_free(m->run_ids_json);
  sbx_free(m->calls_json);
  sbx_free(m->parts_json);
  m->text = m->error_json = m->run_ids_json = m->calls_json = m->parts_json = NULL;
}

void store_message_list_free(struct store_message *v, size_t n) {
  for (size_t i = 0; i < n; i++)
    store_message_free(&v[i]);
  sbx_free(v);
}
