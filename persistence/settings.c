/* settings.c -- runtime settings an operator changes from the admin page (retention days, ...):
 * key -> text value, surviving restarts.  What it does not do: validate values (the
 * orchestrator owns their meaning). */
#include "internal.h"

static int setting_exec(struct store *st, struct st_write *w, struct sbx_error *err) {
  struct st_simple *op = (struct st_simple *)w;
  struct st_stmt *s = st__q(&st->w, ST_SETTING_PUT);
  st__bind_text(s, 1, op->s[0]);
  st__bind_text(s, 2, op->s[1]);
  return st__step_done(s, "setting put", err);
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
  struct st_stmt *s = st__q(&st->r, ST_SETTING_GET);
  *out = NULL;
  st__bind_text(s, 1, key);
  int rc = st__step(s, "setting get", NULL), r = 0, oom = 0;
  if (rc == ST_ROW) {
    *out = st__col_dup(s, 0, &oom);
    r = oom ? SBX_ENOMEM : 0;
  } else {
    r = rc == ST_DONE ? SBX_ENOENT : rc;
  }
  st__reset(s);
  return r;
}
