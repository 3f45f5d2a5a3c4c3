/* chats.c -- chats and turns: their writes (through the writer) and reads (read connection).
 * The page token is never stored, only its sha256 (computed by the orchestrator).
 * What it does not do: check tokens or decide anything about turns. */
#include "internal.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

/* ---- chats --------------------------------------------------------------------------------- */

static int chat_create_exec(struct store *st, struct st_write *w, struct sbx_error *err) {
  struct st_simple *op = (struct st_simple *)w;
  struct st_stmt *s = st__q(&st->w, ST_CHAT_INSERT);
  st__bind_text(s, 1, op->s[0]);
  st__bind_text(s, 2, op->s[1]);
  st__bind_text(s, 3, op->s[2]);
  st__bind_int64(s, 4, op->i[0]);
  st__bind_text(s, 5, op->s[3]);
  return st__step_done(s, "chat insert", err);
}

int store_chat_create(struct store *st, const struct store_chat *chat, store_done_cb cb, void *ud) {
  if (chat == NULL || strlen(chat->id) == 0 || strlen(chat->token_hash) != 64)
    return SBX_EINVAL;
  struct st_simple *op = st__simple_new(chat_create_exec, cb, ud);
  if (op == NULL || st__simple_str(op, 0, chat->id) || st__simple_str(op, 1, chat->token_hash) ||
      st__simple_str(op, 2, chat->title) ||
      st__simple_str(op, 3, chat->owner[0] ? chat->owner : NULL)) {
    st__simple_discard(op);
    return SBX_ENOMEM;
  }
  op->i[0] = chat->created_at;
  return st__submit(st, &op->w);
}

static int chat_title_exec(struct store *st, struct st_write *w, struct sbx_error *err) {
  struct st_simple *op = (struct st_simple *)w;
  struct st_stmt *s = st__q(&st->w, ST_CHAT_SET_TITLE);
  st__bind_text(s, 1, op->s[0]);
  st__bind_text(s, 2, op->s[1]);
  int rc = st__step_done(s, "chat title", err);
  if (rc == 0 && st__changes(&st->w) == 0)
    rc = sbx_error_set(err, SBX_ENOENT, "no chat %s", op->s[0]);
  return rc;
}

int store_chat_set_title(struct store *st, const char *chat_id, const char *title, store_done_cb cb,
                         void *ud) {
  if (chat_id == NULL)
    return SBX_EINVAL;
  struct st_simple *op = st__simple_new(chat_title_exec, cb, ud);
  if (op == NULL || st__simple_str(op, 0, chat_id) || st__simple_str(op, 1, title)) {
    st__simple_discard(op);
    return SBX_ENOMEM;
  }
  return st__submit_fenced(st, &op->w, chat_id);
}

void store_chat_free(struct store_chat *c) {
  if (c == NULL)
    return;
  sbx_free(c->title);
  c->title = NULL;
}

void store_chat_list_free(struct store_chat *v, size_t n) {
  for (size_t i = 0; v && i < n; i++)
    store_chat_free(&v[i]);
  sbx_free(v);
}

static int chat_from_row(struct st_stmt *s, struct store_chat *c) {
  int oom = 0;
  memset(c, 0, sizeof *c);
  st__col_id(s, 0, c->id);
  st__col_hex(s, 1, c->token_hash);
  c->title = st__col_dup(s, 2, &oom);
  c->created_at = st__col_int64(s, 3);
  if (st__col_text(s, 4) != NULL)
    st__col_id(s, 4, c->owner);
  return oom ? SBX_ENOMEM : 0;
}

int store_chat_get(struct store *st, const char *chat_id, struct store_chat *out) {
  struct st_stmt *s = st__q(&st->r, ST_CHAT_GET);
  st__bind_text(s, 1, chat_id);
  int rc = st__step(s, "chat get", NULL);
  int r = rc == ST_ROW ? chat_from_row(s, out) : rc == ST_DONE ? SBX_ENOENT : rc;
  st__reset(s);
  return r;
}

static int chat_row(struct st_stmt *s, void *item) { return chat_from_row(s, item); }
static void chat_list_free(void *v, size_t n) { store_chat_list_free(v, n); }

int store_chat_list(struct store *st, size_t limit, struct store_chat **out, size_t *n) {
  struct st_stmt *s = st__q(&st->r, ST_CHAT_LIST);
  *out = NULL;
  *n = 0;
  if (limit == 0)
    return 0;
  if (limit > 100000)
    limit = 100000;
  st__bind_int64(s, 1, (int64_t)limit);
  void *v;
  int r = st__rows(s, "chat list", sizeof **out, chat_row, chat_list_free, &v, n);
  *out = v;
  return r;
}

int store_chat_list_owner(struct store *st, const char *owner, size_t limit,
                          struct store_chat **out, size_t *n) {
  struct st_stmt *s = st__q(&st->r, ST_CHAT_LIST_OWNER);
  *out = NULL;
  *n = 0;
  if (owner == NULL || limit == 0)
    return owner == NULL ? SBX_EINVAL : 0;
  if (limit > 100000)
    limit = 100000;
  st__bind_int64(s, 1, (int64_t)limit);
  st__bind_text(s, 2, owner);
  void *v;
  int r = st__rows(s, "chat list", sizeof **out, chat_row, chat_list_free, &v, n);
  *out = v;
  return r;
}

/* A chat's deletion: its rows go by cascade; the blobs only it referenced go too, their files
 * unlinked after the commit (as the retention sweep does: a crash in between leaves an orphan
 * file, never a row naming a missing one). */
struct chat_delete_op {
  struct st_write w;
  store_done_cb cb;
  void *ud;
  store_id chat_id;
  char **paths; /* blob files to unlink after commit */
  size_t npaths;
};

static void chat_delete_paths_free(struct chat_delete_op *op) {
  for (size_t i = 0; i < op->npaths; i++)
    sbx_free(op->paths[i]);
  sbx_free(op->paths);
  op->paths = NULL;
  op->npaths = 0;
}

static int chat_delete_exec(struct store *st, struct st_write *w, struct sbx_error *err) {
  struct chat_delete_op *op = (struct chat_delete_op *)w;
  char **sha = NULL;
  int64_t *size = NULL;
  size_t n = 0, cap = 0;
  int rc;
  chat_delete_paths_free(op);
  struct st_stmt *s = st__q(&st->w, ST_CHAT_BLOBS);
  st__bind_text(s, 1, op->chat_id);
  while ((rc = st__step(s, "chat blobs", err)) == ST_ROW) {
    if (n == cap) {
      size_t nc = cap ? 2 * cap : 16;
      char **ns = sbx_realloc(sha, nc * sizeof *ns);
      int64_t *nz = ns ? sbx_realloc(size, nc * sizeof *nz) : NULL;
      if (ns != NULL)
        sha = ns;
      if (nz == NULL) {
        rc = sbx_error_set(err, SBX_ENOMEM, "chat delete: out of memory");
        break;
      }
      size = nz;
      cap = nc;
    }
    int oom = 0;
    sha[n] = st__col_dup(s, 0, &oom);
    size[n] = st__col_int64(s, 1);
    if (oom || sha[n] == NULL) {
      rc = sbx_error_set(err, SBX_ENOMEM, "chat delete: out of memory");
      break;
    }
    n++;
  }
  st__reset(s);
  if (rc < 0)
    goto out;
  s = st__q(&st->w, ST_CHAT_DELETE);
  st__bind_text(s, 1, op->chat_id);
  if ((rc = st__step_done(s, "chat delete", err)) != 0)
    goto out;
  if (st__changes(&st->w) == 0) {
    rc = sbx_error_set(err, SBX_ENOENT, "no chat %s", op->chat_id);
    goto out;
  }
  st->files_dirty = 1;
  if (n && (op->paths = sbx_calloc(n, sizeof *op->paths)) == NULL) {
    rc = sbx_error_set(err, SBX_ENOMEM, "chat delete: out of memory");
    goto out;
  }
  for (size_t i = 0; i < n; i++) {
    s = st__q(&st->w, ST_BLOB_REFERENCED);
    st__bind_text(s, 1, sha[i]);
    if ((rc = st__step_one(s, "blob referenced", err)) < 0)
      goto out;
    if (rc == 1) { /* another chat's file holds the same content */
      rc = 0;
      continue;
    }
    s = st__q(&st->w, ST_BLOB_DELETE);
    st__bind_text(s, 1, sha[i]);
    if ((rc = st__step_done(s, "blob delete", err)) != 0)
      goto out;
    if ((op->paths[op->npaths] = st__blob_path(st, sha[i])) == NULL) {
      rc = sbx_error_set(err, SBX_ENOMEM, "chat delete: out of memory");
      goto out;
    }
    op->npaths++;
    w->blob_delta -= size[i];
  }
  rc = 0;
out:
  for (size_t i = 0; i < n; i++)
    sbx_free(sha[i]);
  sbx_free(sha);
  sbx_free(size);
  if (rc != 0) {
    chat_delete_paths_free(op);
    w->blob_delta = 0;
  }
  return rc;
}

static void chat_delete_after_commit(struct store *st, struct st_write *w) {
  (void)st;
  struct chat_delete_op *op = (struct chat_delete_op *)w;
  for (size_t i = 0; i < op->npaths; i++)
    if (unlink(op->paths[i]) != 0 && errno != ENOENT)
      sbx_log(SBX_LOG_WARN, ST_MOD, "chat delete: unlink %s: %s", op->paths[i], strerror(errno));
}

static void chat_delete_done(struct store *st, struct st_write *w) {
  (void)st;
  struct chat_delete_op *op = (struct chat_delete_op *)w;
  if (op->cb)
    op->cb(w->rc, w->rc ? &w->err : NULL, op->ud);
}

static void chat_delete_release(struct store *st, struct st_write *w) {
  (void)st;
  struct chat_delete_op *op = (struct chat_delete_op *)w;
  chat_delete_paths_free(op);
  sbx_free(op);
}

int store_chat_delete(struct store *st, const char *chat_id, store_done_cb cb, void *ud) {
  if (chat_id == NULL || strlen(chat_id) != STORE_ID_LEN)
    return SBX_EINVAL;
  struct chat_delete_op *op = sbx_calloc(1, sizeof *op);
  if (op == NULL)
    return SBX_ENOMEM;
  st__write_init(&op->w, chat_delete_exec, chat_delete_after_commit, chat_delete_done,
                 chat_delete_release);
  op->cb = cb;
  op->ud = ud;
  memcpy(op->chat_id, chat_id, sizeof op->chat_id);
  return st__submit_fenced(st, &op->w, chat_id);
}

/* ---- turns --------------------------------------------------------------------------------- */

static int turn_put_exec(struct store *st, struct st_write *w, struct sbx_error *err) {
  struct st_simple *op = (struct st_simple *)w;
  struct st_stmt *s = st__q(&st->w, ST_TURN_PUT);
  st__bind_text(s, 1, op->s[0]);
  st__bind_text(s, 2, op->s[1]);
  st__bind_int64(s, 3, op->i[0]);
  st__bind_text(s, 4, op->s[2]);
  st__bind_int64(s, 5, op->i[1]);
  st__bind_int64(s, 6, op->i[2]);
  int rc = st__step_done(s, "turn put", err);
  if (rc == SBX_ECONFLICT) /* the only constraint that can fail here is the chat's foreign key */
    rc = sbx_error_set(err, SBX_ENOENT, "no chat %s", op->s[1]);
  return rc;
}

int store_turn_put(struct store *st, const struct store_turn *t, store_done_cb cb, void *ud) {
  if (t == NULL || !t->id[0] || !t->chat_id[0])
    return SBX_EINVAL;
  struct st_simple *op = st__simple_new(turn_put_exec, cb, ud);
  if (op == NULL || st__simple_str(op, 0, t->id) || st__simple_str(op, 1, t->chat_id) ||
      st__simple_str(op, 2, t->answer)) {
    st__simple_discard(op);
    return SBX_ENOMEM;
  }
  op->i[0] = t->state;
  op->i[1] = t->created_at;
  op->i[2] = t->finished_at;
  return st__submit_fenced(st, &op->w, t->chat_id);
}

int store_turn_get(struct store *st, const char *turn_id, struct store_turn *out) {
  struct st_stmt *s = st__q(&st->r, ST_TURN_GET);
  st__bind_text(s, 1, turn_id);
  int rc = st__step(s, "turn get", NULL), r = 0, oom = 0;
  memset(out, 0, sizeof *out);
  if (rc == ST_ROW) {
    st__col_id(s, 0, out->id);
    st__col_id(s, 1, out->chat_id);
    out->state = st__col_int(s, 2);
    out->answer = st__col_dup(s, 3, &oom);
    out->created_at = st__col_int64(s, 4);
    out->finished_at = st__col_int64(s, 5);
    r = oom ? SBX_ENOMEM : 0;
  } else {
    r = rc == ST_DONE ? SBX_ENOENT : rc;
  }
  st__reset(s);
  return r;
}

void store_turn_free(struct store_turn *t) {
  if (t == NULL)
    return;
  sbx_free(t->answer);
  t->answer = NULL;
}
