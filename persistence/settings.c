/* settings.c -- runtime settings an operator changes from the admin page (retention days, ...):
 * key -> text value, surviving restarts.  What it does not do: validate values (the
 * orchestrator owns their meaning). */
#include "internal.h"

static int setting_exec(struct store *st, struct st_write *w, struct sbx_error *err) {
  struct st_simple *op = (struct st_simple *)w;
  sqlite3_stmt *s = st->ws[ST_SETTING_PUT];
  sqlite3_bind_text(s, 1, op->s[0], -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 2, op->s[1], -1, SQLITE_STATIC);
  return st__step_done(st->wdb, s, "setting put", err);
}

int store_setting_put(struct store *st, const char *key, const char *value, store_done_cb cb,
                      void *ud) {
  if (key == NULL || *key == '\0' || value == NULL)
    return SBX_EINVAL;
  struct st_simple *op = st__simple_new(setting_exec, cb, ud);
  if (op == NULL || st__simple_str(op, 0, key) || st__simple_str(op, 1, value)) {
    st__simple_discard(op);
    return SBX_ENOMEM;
  }
  return st__submit(st, &op->w);
}

int store_setting_get(struct store *st, const char *key, char **out) {
  sqlite3_stmt *s = st->rs[ST_SETTING_GET];
  *out = NULL;
  sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
  int rc = sqlite3_step(s), r = 0, oom = 0;
  if (rc == SQLITE_ROW) {
    *out = st__col_dup(s, 0, &oom);
    r = oom ? SBX_ENOMEM : 0;
  } else {
    r = rc == SQLITE_DONE ? SBX_ENOENT : st__translate(st->rdb, rc, "setting get", NULL);
  }
  st__reset(s);
  return r;
}
