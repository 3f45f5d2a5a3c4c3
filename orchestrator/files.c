/* files.c -- adding a file to a chat, whoever brings it (an upload, a tool call): the mount
 * decision (manifest.c's rules, against the chat's files as stored now and the new file's size),
 * the write (the store applies the naming rules: same content -> the same file; same name,
 * other content -> "name (N).ext"; tool and output sources -> the next version), and, once a new
 * file is durable, the chat's `files` event so its pages fetch it before the next run.
 *
 * Quota: what users add (every source but output: attachments, knowledge, tool files, whether
 * uploaded or added by a tool) is bounded per chat by CHAT_ATTACHMENT_QUOTA_MB, checked by the
 * store inside the write's transaction (two uploads at once cannot both pass it); a refused file
 * leaves nothing behind (its stage is dropped) and its caller hears SBX_EFULL with a sentence
 * saying why.  Run outputs have their own quota (report.c).  Every file added here expires after
 * the retention period (ARTIFACT_RETENTION_DAYS), as outputs do: the sweep removes it then.
 *
 * What it does not do: read request bodies or answer (api_files.c streams an upload into a stage;
 * tools.c brings the content of an add_file call in memory), or store a run's output files
 * (report.c, with the run's result).
 */
#include "internal.h"

#include <string.h>
#include <strings.h>

struct add_ctx {
  struct orch *o;
  char chat_id[STORE_ID_LEN + 1];
  uint64_t size;
  store_file_cb cb;
  void *ud;
};

/* The refusal of a file past the chat's quota, in words a person (or a model) can act on. */
static void over_quota(struct add_ctx *ctx, struct sbx_error *e) {
  struct orch *o = ctx->o;
  uint64_t used = 0;
  store_chat_added_bytes(o->st, ctx->chat_id, &used); /* (a failed read says 0 MB) */
  sbx_error_set(e, SBX_EFULL,
                "this chat's files take %.1f MB of the %llu MB it may keep "
                "(CHAT_ATTACHMENT_QUOTA_MB), and this file (%.1f MB) would pass that; nothing was "
                "stored. Start a new chat for more files.",
                (double)used / ORCH_MIB,
                (unsigned long long)(o->rt.attachment_quota_bytes / ORCH_MIB),
                (double)ctx->size / ORCH_MIB);
}

static void on_added(int rc, const struct sbx_error *err, const struct store_file_added *res,
                     void *ud) {
  struct add_ctx *ctx = ud;
  struct orch *o = ctx->o;
  if (rc == 0) {
    o->m.uploads++;
    struct orch_chat *c = orch__map_get(&o->chats, ctx->chat_id);
    if (c != NULL && res->created) {
      json_t *ev = json_pack("{s:s, s:s, s:s}", "chat_id", c->id, "file_id", res->file.id, "name",
                             res->file.name);
      if (ev != NULL)
        orch__event_emit(c, "files", ev);
    }
  }
  struct sbx_error e;
  if (rc == SBX_EFULL) {
    o->m.uploads_refused_quota++;
    over_quota(ctx, &e);
    err = &e;
  }
  ctx->cb(rc, err, res, ctx->ud);
  sbx_free(ctx);
}

int orch__file_add(struct orch *o, struct orch_chat *c, struct store_file_in *in,
                   struct store_blob_stage *stage, uint64_t size, store_file_cb cb, void *ud) {
  struct add_ctx *ctx = sbx_calloc(1, sizeof(*ctx));
  if (ctx == NULL) {
    store_blob_stage_abort(stage);
    return SBX_ENOMEM;
  }
  *ctx = (struct add_ctx){.o = o, .size = size, .cb = cb, .ud = ud};
  snprintf(ctx->chat_id, sizeof(ctx->chat_id), "%s", c->id);
  struct store_file *files = NULL;
  size_t n = 0;
  const char *reason = NULL;
  if (store_file_list(o->st, c->id, 0, &files, &n) == 0) {
    reason = orch__manifest_admit(files, n, in->name, in->source, in->kind, size);
    store_file_list_free(files, n);
  }
  in->chat_id = c->id;
  in->mounted = reason == NULL;
  in->left_out_reason = reason;
  in->quota = in->source == STORE_SRC_OUTPUT ? 0 : o->rt.attachment_quota_bytes;
  if (in->expires_at == 0) /* kept for the retention period, as run outputs are */
    in->expires_at = sbx_now_wall_ms() + (int64_t)o->rt.retention_days * 86400000LL;
  int rc = stage ? store_file_add_staged(o->st, in, stage, on_added, ctx)
                 : store_file_add(o->st, in, on_added, ctx);
  if (rc != 0)
    sbx_free(ctx);
  return rc;
}

const char *orch__file_type(const char *name, int *active) {
  static const struct {
    const char *ext, *type;
    int active;
  } t[] = {
      {".png", "image/png", 0},
      {".jpg", "image/jpeg", 0},
      {".jpeg", "image/jpeg", 0},
      {".gif", "image/gif", 0},
      {".webp", "image/webp", 0},
      {".svg", "image/svg+xml", 1},
      {".pdf", "application/pdf", 0},
      {".csv", "text/csv; charset=utf-8", 0},
      {".txt", "text/plain; charset=utf-8", 0},
      {".md", "text/markdown; charset=utf-8", 0},
      {".json", "application/json", 0},
      {".html", "text/html; charset=utf-8", 1},
      {".htm", "text/html; charset=utf-8", 1},
      {".xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", 0},
      {".docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document", 0},
      {".pptx", "application/vnd.openxmlformats-officedocument.presentationml.presentation", 0},
  };
  const char *dot = strrchr(name, '.');
  *active = 0;
  for (size_t i = 0; dot && i < SBX_ARRAY_SIZE(t); i++)
    if (strcasecmp(dot, t[i].ext) == 0) {
      *active = t[i].active;
      return t[i].type;
    }
  return "application/octet-stream";
}
