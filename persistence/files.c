/* files.c -- the files of a chat: store_file_add applies the naming rules (naming.c) against the
 * stored set and stores blob + row on the writer thread (store_file_add_staged the same, with the
 * content already in a stage's temp file: stage.c); the reads list and fetch file rows, and
 * sum a chat's stored output bytes.
 *
 * The rules, in the order store_file_add applies them:
 *   attachment, knowledge: same name family ("report.pdf", "report (2).pdf", ...) holding the
 *     same content as its latest version -> that file, created = 0 (the exact name preferred);
 *     the name taken -> "stem (N).ext", N = 1 + the largest number of the family, found by ONE
 *     indexed query (files_dup); never a loop of probes (the Django CVE-2014-0481 shape);
 *   tool, output: the latest version of that exact name has the same content -> it, created = 0;
 *     else the next version (1 when new).
 * What it does not do: decide mounting (the orchestrator passes `mounted` and the reason).
 */
#include "internal.h"

#include <string.h>
#include <unistd.h>

void store_file_free(struct store_file *f) {
  if (f == NULL)
    return;
  sbx_free(f->name);
  sbx_free(f->left_out_reason);
  sbx_free(f->kind);
  memset(f, 0, sizeof *f);
}

void store_file_list_free(struct store_file *v, size_t n) {
  for (size_t i = 0; v && i < n; i++)
    store_file_free(&v[i]);
  sbx_free(v);
}

int st__file_from_row(struct st_stmt *s, struct store_file *f) {
  int oom = 0;
  memset(f, 0, sizeof *f);
  st__col_id(s, 0, f->id);
  st__col_id(s, 1, f->chat_id);
  f->name = st__col_dup(s, 2, &oom);
  f->version = st__col_int(s, 3);
  f->source = (enum store_source)st__col_int(s, 4);
  st__col_hex(s, 5, f->sha256);
  f->size = (uint64_t)st__col_int64(s, 6);
  f->mounted = st__col_int(s, 7);
  f->left_out_reason = st__col_dup(s, 8, &oom);
  st__col_id(s, 9, f->text_of);
  st__col_id(s, 10, f->run_id);
  f->kind = st__col_dup(s, 11, &oom);
  f->created_at = st__col_int64(s, 12);
  f->expires_at = st__col_int64(s, 13);
  if (oom || f->name == NULL) {
    store_file_free(f);
    return SBX_ENOMEM;
  }
  return 0;
}

/* ---- store_file_add ------------------------------------------------------------------------ */

struct file_op {
  struct st_write w;
  store_file_cb cb;
  void *ud;
  char *chat_id, *name, *left_out_reason, *text_of, *run_id, *kind;
  enum store_source source;
  int mounted;
  int64_t expires_at;
  uint64_t quota;
  const void *data; /* borrowed until cb */
  size_t size;
  /* store_file_add_staged: the stage's temp file (owned until st__blob_put_staged takes it; the
   * release unlinks what is left) and its digest, computed on the loop thread */
  char *staged_tmp;
  char staged_sha[65];
  int staged;
  struct store_file_added res;
};

/* Runs a SELECT ST_FILE_COLS statement; 1 with *f filled, 0 when no row, or an error. */
static int file_row(struct st_stmt *s, struct store_file *f, struct sbx_error *err) {
  int rc = st__step(s, "file lookup", err), r;
  if (rc == ST_ROW)
    r = st__file_from_row(s, f) == 0 ? 1 : sbx_error_set(err, SBX_ENOMEM, "file: out of memory");
  else
    r = rc;
  st__reset(s);
  return r;
}

static int file_add_exec(struct store *st, struct st_write *w, struct sbx_error *err) {
  struct file_op *op = (struct file_op *)w;
  struct st_stmt *s;
  char *norm = NULL, *stem = NULL, *ext = NULL, *final = NULL;
  int rc, n, version = 1;
  char sha[65];

  if ((rc = store_name_normalize(op->name, op->source, &norm, err)) != 0)
    return rc;
  if ((rc = st__known(st, ST_CHAT_EXISTS, op->chat_id, "chat", err)) != 0)
    goto out;
  if (op->staged)
    memcpy(sha, op->staged_sha, sizeof sha);
  else
    store_sha256_hex(op->data, op->size, sha);
  if ((rc = st__name_split(norm, &stem, &ext, &n)) != 0) {
    rc = sbx_error_set(err, rc, "name: out of memory");
    goto out;
  }
  if (op->source == STORE_SRC_ATTACHMENT || op->source == STORE_SRC_KNOWLEDGE) {
    s = st__q(&st->w, ST_FILE_SAME_CONTENT);
    st__bind_text(s, 1, op->chat_id);
    st__bind_text(s, 2, stem);
    st__bind_text(s, 3, ext);
    st__bind_text(s, 4, sha);
    st__bind_text(s, 5, norm);
    if ((rc = file_row(s, &op->res.file, err)) != 0) {
      if (rc == 1)
        rc = 0; /* same content already there */
      goto out;
    }
    /* one query: the largest number of the family, and whether the exact name is taken */
    s = st__q(&st->w, ST_FILE_DUP_MAX);
    st__bind_text(s, 1, op->chat_id);
    st__bind_text(s, 2, stem);
    st__bind_text(s, 3, ext);
    st__bind_text(s, 4, norm);
    rc = st__step(s, "duplicate lookup", err);
    int max_n = rc == ST_ROW ? st__col_int(s, 0) : 0, taken = rc == ST_ROW ? st__col_int(s, 1) : 0;
    st__reset(s);
    if (rc != ST_ROW) {
      if (rc == ST_DONE)
        rc = sbx_error_set(err, SBX_EDB, "duplicate lookup: no row");
      goto out;
    }
    if (taken) {
      n = SBX_MAX(max_n, 1) + 1;
      if ((rc = st__name_join(stem, ext, n, &final, err)) != 0)
        goto out;
    }
  } else {
    struct store_file latest;
    s = st__q(&st->w, ST_FILE_LATEST);
    st__bind_text(s, 1, op->chat_id);
    st__bind_text(s, 2, norm);
    if ((rc = file_row(s, &latest, err)) < 0)
      goto out;
    if (rc == 1) {
      if (strcmp(latest.sha256, sha) == 0) {
        op->res.file = latest; /* same content as the latest version */
        rc = 0;
        goto out;
      }
      version = latest.version + 1;
      store_file_free(&latest);
    }
  }
  if (final == NULL) {
    final = norm;
    norm = NULL;
  }
  if (op->quota && op->source != STORE_SRC_OUTPUT) {
    int64_t used = 0;
    s = st__q(&st->w, ST_CHAT_ADDED_BYTES);
    st__bind_text(s, 1, op->chat_id);
    if ((rc = st__step_int64(s, "chat added bytes", &used, err)) != 0)
      goto out;
    if ((uint64_t)used + op->size > op->quota) {
      rc = sbx_error_set(err, SBX_EFULL, "quota: %lld bytes held, %zu more, %llu allowed",
                         (long long)used, op->size, (unsigned long long)op->quota);
      goto out;
    }
  }
  if (op->staged)
    rc = st__blob_put_staged(st, w, sha, &op->staged_tmp, op->size, err);
  else
    rc = st__blob_put(st, w, sha, op->data, op->size, err);
  if (rc != 0)
    goto out;

  struct store_file *f = &op->res.file;
  memset(f, 0, sizeof *f);
  if ((rc = store_new_id(f->id)) != 0) {
    rc = sbx_error_set(err, rc, "no random id");
    goto out;
  }
  snprintf(f->chat_id, sizeof f->chat_id, "%s", op->chat_id);
  f->version = version;
  f->source = op->source;
  memcpy(f->sha256, sha, sizeof sha);
  f->size = op->size;
  f->mounted = op->mounted;
  snprintf(f->text_of, sizeof f->text_of, "%s", op->text_of ? op->text_of : "");
  snprintf(f->run_id, sizeof f->run_id, "%s", op->run_id ? op->run_id : "");
  f->created_at = sbx_now_wall_ms();
  f->expires_at = op->expires_at;
  s = st__q(&st->w, ST_FILE_INSERT);
  st__bind_text(s, 1, f->id);
  st__bind_text(s, 2, f->chat_id);
  st__bind_text(s, 3, final);
  st__bind_int64(s, 4, version);
  st__bind_int64(s, 5, (int)op->source);
  st__bind_text(s, 6, sha);
  st__bind_int64(s, 7, (int64_t)op->size);
  st__bind_int64(s, 8, op->mounted ? 1 : 0);
  st__bind_text(s, 9, op->left_out_reason);
  st__bind_text(s, 10, f->text_of);
  st__bind_text(s, 11, f->run_id);
  st__bind_text(s, 12, op->kind);
  st__bind_int64(s, 13, f->created_at);
  st__bind_int64(s, 14, f->expires_at);
  st__bind_text(s, 15, stem);
  st__bind_text(s, 16, ext);
  st__bind_int64(s, 17, n);
  st->files_dirty = 1;
  if ((rc = st__step_done(s, "file insert", err)) != 0)
    goto out;
  op->res.created = 1;
  f->name = final;
  final = NULL;
  if ((op->left_out_reason && !(f->left_out_reason = sbx_strdup(op->left_out_reason))) ||
      (op->kind && !(f->kind = sbx_strdup(op->kind)))) {
    /* the row is written; only the copy for the callback failed: roll this write back */
    rc = sbx_error_set(err, SBX_ENOMEM, "file: out of memory");
    goto out;
  }
out:
  if (rc != 0) {
    store_file_free(&op->res.file);
    op->res.created = 0;
  }
  sbx_free(norm);
  sbx_free(stem);
  sbx_free(ext);
  sbx_free(final);
  return rc;
}

static void file_add_done(struct store *st, struct st_write *w) {
  struct file_op *op = (struct file_op *)w;
  op->cb(w->rc, w->rc ? &w->err : NULL, w->rc ? NULL : &op->res, op->ud);
}

static void file_op_free(struct file_op *op) {
  if (op->staged_tmp) /* a stage the writer did not take (same content, a failure, not run) */
    unlink(op->staged_tmp);
  sbx_free(op->staged_tmp);
  sbx_free(op->chat_id);
  sbx_free(op->name);
  sbx_free(op->left_out_reason);
  sbx_free(op->text_of);
  sbx_free(op->run_id);
  sbx_free(op->kind);
  store_file_free(&op->res.file);
  sbx_free(op);
}

static void file_add_release(struct store *st, struct st_write *w) {
  file_op_free((struct file_op *)w);
}

static int dup_opt(const char *in, char **out) {
  *out = NULL;
  if (in == NULL)
    return 0;
  return (*out = sbx_strdup(in)) ? 0 : SBX_ENOMEM;
}

static struct file_op *file_op_new(const struct store_file_in *in, store_file_cb cb, void *ud) {
  struct file_op *op = sbx_calloc(1, sizeof *op);
  if (op == NULL)
    return NULL;
  st__write_init(&op->w, file_add_exec, NULL, file_add_done, file_add_release);
  op->cb = cb;
  op->ud = ud;
  op->source = in->source;
  op->mounted = in->mounted;
  op->expires_at = in->expires_at;
  op->quota = in->quota;
  op->data = in->data ? in->data : "";
  op->size = in->size;
  if (dup_opt(in->chat_id, &op->chat_id) || dup_opt(in->name ? in->name : "", &op->name) ||
      dup_opt(in->left_out_reason, &op->left_out_reason) || dup_opt(in->text_of, &op->text_of) ||
      dup_opt(in->run_id, &op->run_id) || dup_opt(in->kind, &op->kind)) {
    file_op_free(op);
    return NULL;
  }
  return op;
}

int store_file_add(struct store *st, const struct store_file_in *in, store_file_cb cb, void *ud) {
  if (in == NULL || in->chat_id == NULL || cb == NULL || (in->data == NULL && in->size > 0))
    return SBX_EINVAL;
  struct file_op *op = file_op_new(in, cb, ud);
  if (op == NULL)
    return SBX_ENOMEM;
  return st__submit_fenced(st, &op->w, in->chat_id);
}

int store_file_add_staged(struct store *st, const struct store_file_in *in,
                          struct store_blob_stage *sg, store_file_cb cb, void *ud) {
  if (in == NULL || in->chat_id == NULL || cb == NULL || sg == NULL) {
    store_blob_stage_abort(sg);
    return SBX_EINVAL;
  }
  struct store_file_in copy = *in;
  copy.data = NULL;
  copy.size = 0;
  struct file_op *op = file_op_new(&copy, cb, ud);
  if (op == NULL) {
    store_blob_stage_abort(sg);
    return SBX_ENOMEM;
  }
  uint64_t size = 0;
  struct sbx_error e;
  sbx_error_clear(&e);
  int rc = st__stage_take(sg, &op->staged_tmp, op->staged_sha, &size, &e);
  if (rc != 0) {
    file_op_free(op);
    return rc;
  }
  op->staged = 1;
  op->size = (size_t)size;
  /* a refused submit releases op: the temp file goes with it */
  return st__submit_fenced(st, &op->w, in->chat_id);
}

/* ---- reads --------------------------------------------------------------------------------- */

int store_file_get(struct store *st, const char *file_id, struct store_file *out) {
  struct st_stmt *s = st__q(&st->r, ST_FILE_GET);
  st__bind_text(s, 1, file_id);
  int rc = file_row(s, out, NULL);
  return rc == 1 ? 0 : rc == 0 ? SBX_ENOENT : rc;
}

/* Collects every row of a prepared ST_FILE_COLS statement (bound already) into an array. */
int st__file_rows(struct st_stmt *s, struct store_file **out, size_t *n) {
  struct store_file *v = NULL;
  size_t len = 0, cap = 0;
  int rc;
  *out = NULL;
  *n = 0;
  while ((rc = st__step(s, "files", NULL)) == ST_ROW) {
    if (len == cap) {
      size_t nc = cap ? cap * 2 : 16;
      struct store_file *nv = sbx_realloc(v, nc * sizeof *nv);
      if (nv == NULL) {
        rc = SBX_ENOMEM;
        break;
      }
      v = nv;
      cap = nc;
    }
    if (st__file_from_row(s, &v[len]) != 0) {
      rc = SBX_ENOMEM;
      break;
    }
    len++;
  }
  int r = rc < 0 ? rc : 0;
  st__reset(s);
  if (r != 0) {
    store_file_list_free(v, len);
    return r;
  }
  *out = v;
  *n = len;
  return 0;
}

uint64_t store_files_generation(struct store *st) {
  return __atomic_load_n(&st->files_gen, __ATOMIC_ACQUIRE);
}

void store_files_touch(struct store *st) {
  __atomic_add_fetch(&st->files_gen, 1, __ATOMIC_RELEASE);
}

int store_file_list(struct store *st, const char *chat_id, int all_versions,
                    struct store_file **out, size_t *n) {
  struct st_stmt *s = st__q(&st->r, all_versions ? ST_FILE_LIST_ALL : ST_FILE_LIST_LATEST);
  st__bind_text(s, 1, chat_id);
  return st__file_rows(s, out, n);
}

/* One of a chat's byte sums (the statement q, named what). */
static int chat_bytes(struct store *st, enum st_stmt_id q, const char *what, const char *chat_id,
                      uint64_t *out) {
  *out = 0;
  if (chat_id == NULL)
    return SBX_EINVAL;
  struct st_stmt *s = st__q(&st->r, q);
  st__bind_text(s, 1, chat_id);
  int64_t v = 0;
  int rc = st__step_int64(s, what, &v, NULL);
  *out = (uint64_t)v;
  return rc;
}

int store_chat_added_bytes(struct store *st, const char *chat_id, uint64_t *out) {
  return chat_bytes(st, ST_CHAT_ADDED_BYTES, "chat added bytes", chat_id, out);
}

int store_chat_output_bytes(struct store *st, const char *chat_id, uint64_t *out) {
  return chat_bytes(st, ST_CHAT_OUTPUT_BYTES, "chat output bytes", chat_id, out);
}
