/* people.c -- people and their sessions: their writes (through the writer) and reads (read
 * connection).  A person's password is never here, only the encoded Argon2id hash the
 * orchestrator made; a session only by the sha256 of its cookie.
 * What it does not do: hash or check passwords, decide expiry or who may do what (the
 * orchestrator does). */
#include "internal.h"

#include <string.h>

/* ---- people -------------------------------------------------------------------------------- */

static int person_insert_exec(struct store *st, struct st_write *w, struct sbx_error *err) {
  struct st_simple *op = (struct st_simple *)w;
  struct st_stmt *s = st__q(&st->w, ST_PERSON_INSERT);
  for (int i = 0; i < 4; i++)
    st__bind_text(s, i + 1, op->s[i]);
  st__bind_int64(s, 5, op->i[0]);
  st__bind_int64(s, 6, op->i[1]);
  st__bind_int64(s, 7, op->i[2]);
  st__bind_int64(s, 8, op->i[3]);
  st__bind_text(s, 9, op->s[4]);
  return st__step_done(s, "person insert", err);
}

static int person_valid(const struct store_person *p) {
  return p != NULL && strlen(p->id) == STORE_ID_LEN && p->name && *p->name && p->role &&
         p->pw_hash && *p->pw_hash;
}

int store_person_create(struct store *st, const struct store_person *p, store_done_cb cb,
                        void *ud) {
  if (!person_valid(p))
    return SBX_EINVAL;
  struct st_simple *op = st__simple_new(person_insert_exec, cb, ud);
  if (op == NULL || st__simple_str(op, 0, p->id) || st__simple_str(op, 1, p->name) ||
      st__simple_str(op, 2, p->role) || st__simple_str(op, 3, p->pw_hash) ||
      st__simple_str(op, 4, p->settings_json ? p->settings_json : "{}")) {
    st__simple_discard(op);
    return SBX_ENOMEM;
  }
  op->i[0] = p->disabled != 0;
  op->i[1] = p->must_change_password != 0;
  op->i[2] = p->created_at;
  op->i[3] = p->last_seen_at;
  return st__submit(st, &op->w);
}

static int person_update_exec(struct store *st, struct st_write *w, struct sbx_error *err) {
  struct st_simple *op = (struct st_simple *)w;
  struct st_stmt *s = st__q(&st->w, ST_PERSON_UPDATE);
  st__bind_text(s, 1, op->s[0]);
  st__bind_text(s, 2, op->s[1]);
  st__bind_text(s, 3, op->s[2]);
  st__bind_int64(s, 4, op->i[0]);
  st__bind_int64(s, 5, op->i[1]);
  st__bind_text(s, 6, op->s[3]);
  int rc = st__step_done(s, "person update", err);
  if (rc == 0 && st__changes(&st->w) == 0)
    rc = sbx_error_set(err, SBX_ENOENT, "no person %s", op->s[0]);
  return rc;
}

int store_person_update(struct store *st, const struct store_person *p, store_done_cb cb,
                        void *ud) {
  if (!person_valid(p))
    return SBX_EINVAL;
  struct st_simple *op = st__simple_new(person_update_exec, cb, ud);
  if (op == NULL || st__simple_str(op, 0, p->id) || st__simple_str(op, 1, p->role) ||
      st__simple_str(op, 2, p->pw_hash) ||
      st__simple_str(op, 3, p->settings_json ? p->settings_json : "{}")) {
    st__simple_discard(op);
    return SBX_ENOMEM;
  }
  op->i[0] = p->disabled != 0;
  op->i[1] = p->must_change_password != 0;
  return st__submit(st, &op->w);
}

void store_person_free(struct store_person *p) {
  if (p == NULL)
    return;
  sbx_free(p->name);
  sbx_free(p->role);
  if (p->pw_hash)
    memset(p->pw_hash, 0, strlen(p->pw_hash));
  sbx_free(p->pw_hash);
  sbx_free(p->settings_json);
  memset(p, 0, sizeof *p);
}

void store_person_list_free(struct store_person *v, size_t n) {
  for (size_t i = 0; v && i < n; i++)
    store_person_free(&v[i]);
  sbx_free(v);
}

static int person_from_row(struct st_stmt *s, void *item) {
  struct store_person *p = item;
  int oom = 0;
  memset(p, 0, sizeof *p);
  st__col_id(s, 0, p->id);
  p->name = st__col_dup(s, 1, &oom);
  p->role = st__col_dup(s, 2, &oom);
  p->pw_hash = st__col_dup(s, 3, &oom);
  p->disabled = st__col_int(s, 4);
  p->must_change_password = st__col_int(s, 5);
  p->created_at = st__col_int64(s, 6);
  p->last_seen_at = st__col_int64(s, 7);
  p->settings_json = st__col_dup(s, 8, &oom);
  if (oom) {
    store_person_free(p);
    return SBX_ENOMEM;
  }
  return 0;
}

static int person_one(struct store *st, enum st_stmt_id id, const char *key,
                      struct store_person *out) {
  memset(out, 0, sizeof *out);
  if (key == NULL)
    return SBX_EINVAL;
  struct st_stmt *s = st__q(&st->r, id);
  st__bind_text(s, 1, key);
  int rc = st__step(s, "person get", NULL);
  int r = rc == ST_ROW ? person_from_row(s, out) : rc == ST_DONE ? SBX_ENOENT : rc;
  st__reset(s);
  return r;
}

int store_person_get(struct store *st, const char *id, struct store_person *out) {
  return person_one(st, ST_PERSON_GET, id, out);
}

int store_person_by_name(struct store *st, const char *name, struct store_person *out) {
  return person_one(st, ST_PERSON_BY_NAME, name, out);
}

static void person_list_free(void *v, size_t n) { store_person_list_free(v, n); }

int store_person_list(struct store *st, struct store_person **out, size_t *n) {
  void *v;
  int r = st__rows(st__q(&st->r, ST_PERSON_LIST), "person list", sizeof **out, person_from_row,
                   person_list_free, &v, n);
  *out = v;
  return r;
}

int store_person_count(struct store *st, int64_t *out) {
  return st__step_int64(st__q(&st->r, ST_PERSON_COUNT), "person count", out, NULL);
}

/* ---- sessions ------------------------------------------------------------------------------ */

static int session_insert_exec(struct store *st, struct st_write *w, struct sbx_error *err) {
  struct st_simple *op = (struct st_simple *)w;
  struct st_stmt *s = st__q(&st->w, ST_SESSION_INSERT);
  st__bind_text(s, 1, op->s[0]);
  st__bind_text(s, 2, op->s[1]);
  st__bind_int64(s, 3, op->i[0]);
  int rc = st__step_done(s, "session insert", err);
  if (rc != 0)
    return rc;
  s = st__q(&st->w, ST_PERSON_SEEN); /* a sign-in is a sight of its person */
  st__bind_text(s, 1, op->s[1]);
  st__bind_int64(s, 2, op->i[0]);
  return st__step_done(s, "person seen", err);
}

int store_session_create(struct store *st, const struct store_session *se, store_done_cb cb,
                         void *ud) {
  if (se == NULL || strlen(se->token_hash) != 64 || strlen(se->person_id) != STORE_ID_LEN)
    return SBX_EINVAL;
  struct st_simple *op = st__simple_new(session_insert_exec, cb, ud);
  if (op == NULL || st__simple_str(op, 0, se->token_hash) ||
      st__simple_str(op, 1, se->person_id)) {
    st__simple_discard(op);
    return SBX_ENOMEM;
  }
  op->i[0] = se->created_at;
  return st__submit(st, &op->w);
}

int store_session_get(struct store *st, const char *token_hash, struct store_session *out) {
  memset(out, 0, sizeof *out);
  if (token_hash == NULL)
    return SBX_EINVAL;
  struct st_stmt *s = st__q(&st->r, ST_SESSION_GET);
  st__bind_text(s, 1, token_hash);
  int rc = st__step(s, "session get", NULL), r = rc == ST_DONE ? SBX_ENOENT : rc;
  if (rc == ST_ROW) {
    st__col_hex(s, 0, out->token_hash);
    st__col_id(s, 1, out->person_id);
    out->created_at = st__col_int64(s, 2);
    out->last_used_at = st__col_int64(s, 3);
    out->ended_at = st__col_int64(s, 4);
    r = 0;
  }
  st__reset(s);
  return r;
}

static int session_touch_exec(struct store *st, struct st_write *w, struct sbx_error *err) {
  struct st_simple *op = (struct st_simple *)w;
  struct st_stmt *s = st__q(&st->w, ST_SESSION_TOUCH);
  st__bind_text(s, 1, op->s[0]);
  st__bind_int64(s, 2, op->i[0]);
  int rc = st__step_done(s, "session touch", err);
  if (rc != 0)
    return rc;
  s = st__q(&st->w, ST_PERSON_SEEN);
  st__bind_text(s, 1, op->s[1]);
  st__bind_int64(s, 2, op->i[0]);
  return st__step_done(s, "person seen", err);
}

int store_session_touch(struct store *st, const char *token_hash, const char *person_id,
                        int64_t now, store_done_cb cb, void *ud) {
  if (token_hash == NULL || person_id == NULL)
    return SBX_EINVAL;
  struct st_simple *op = st__simple_new(session_touch_exec, cb, ud);
  if (op == NULL || st__simple_str(op, 0, token_hash) || st__simple_str(op, 1, person_id)) {
    st__simple_discard(op);
    return SBX_ENOMEM;
  }
  op->i[0] = now;
  return st__submit(st, &op->w);
}

static int session_end_exec(struct store *st, struct st_write *w, struct sbx_error *err) {
  struct st_simple *op = (struct st_simple *)w;
  struct st_stmt *s;
  if (op->s[1] != NULL) { /* every session of a person (but one) */
    s = st__q(&st->w, ST_SESSION_END_PERSON);
    st__bind_text(s, 1, op->s[1]);
    st__bind_int64(s, 2, op->i[0]);
    st__bind_text(s, 3, op->s[0] ? op->s[0] : "");
  } else {
    s = st__q(&st->w, ST_SESSION_END);
    st__bind_text(s, 1, op->s[0]);
    st__bind_int64(s, 2, op->i[0]);
  }
  return st__step_done(s, "session end", err);
}

static int session_end(struct store *st, const char *token_hash, const char *person_id,
                       int64_t now, store_done_cb cb, void *ud) {
  struct st_simple *op = st__simple_new(session_end_exec, cb, ud);
  if (op == NULL || st__simple_str(op, 0, token_hash) || st__simple_str(op, 1, person_id)) {
    st__simple_discard(op);
    return SBX_ENOMEM;
  }
  op->i[0] = now;
  return st__submit(st, &op->w);
}

int store_session_end(struct store *st, const char *token_hash, int64_t now, store_done_cb cb,
                      void *ud) {
  if (token_hash == NULL)
    return SBX_EINVAL;
  return session_end(st, token_hash, NULL, now, cb, ud);
}

int store_session_end_person(struct store *st, const char *person_id, const char *except,
                             int64_t now, store_done_cb cb, void *ud) {
  if (person_id == NULL)
    return SBX_EINVAL;
  return session_end(st, except, person_id, now, cb, ud);
}

static int session_purge_exec(struct store *st, struct st_write *w, struct sbx_error *err) {
  struct st_simple *op = (struct st_simple *)w;
  struct st_stmt *s = st__q(&st->w, ST_SESSION_PURGE);
  st__bind_int64(s, 1, op->i[0]);
  return st__step_done(s, "session purge", err);
}

int store_session_purge(struct store *st, int64_t before, store_done_cb cb, void *ud) {
  struct st_simple *op = st__simple_new(session_purge_exec, cb, ud);
  if (op == NULL)
    return SBX_ENOMEM;
  op->i[0] = before;
  return st__submit(st, &op->w);
}
