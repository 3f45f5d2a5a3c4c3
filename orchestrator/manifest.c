/* manifest.c -- which of a chat's files a run gets under /mnt/data, and why the others are left
 * out.  A pure function of the database's file list and the run's code, computed at dispatch:
 * never from what a page says it holds, so a run created before any page attached still gets
 * every file of its chat.
 *
 * The rules (the user guide's "Files you attach"):
 *  - every file is mounted at its name; the input is already the latest version of each name,
 *    and an extracted text is its own file named "<name>.md" (text_of), mounted beside;
 *  - images a run drew (output files of kind figure, or with an image extension) and images the
 *    tools saved are mounted only when the code names them (full name or last path segment);
 *    they are not "left out" otherwise: nothing is wrong with them;
 *  - a file over 20 MiB is left out ("over the 20 MB per-file limit");
 *  - files are taken oldest first; one that would take the mounted total over 100 MiB is left out
 *    ("would take the chat's mounted files over 100 MB") and later smaller ones may still fit.
 * Left-out files carry their reason; the caller gives no path for them.
 *
 * What it does not do: no I/O, no JSON (api code renders), no naming (persistence's naming.c).
 */
#include "internal.h"

#include <string.h>
#include <strings.h>

const char ORCH_REASON_FILE_CAP[] = "over the 20 MB per-file limit for mounted files";
const char ORCH_REASON_TOTAL_CAP[] = "would take the chat's mounted files over 100 MB";

static int has_image_ext(const char *name) {
  static const char *exts[] = {".png",  ".jpg", ".jpeg", ".gif", ".svg",
                               ".webp", ".bmp", ".tif",  ".tiff"};
  size_t n = strlen(name);
  for (size_t i = 0; i < SBX_ARRAY_SIZE(exts); i++) {
    size_t e = strlen(exts[i]);
    if (n > e && strcasecmp(name + n - e, exts[i]) == 0)
      return 1;
  }
  return 0;
}

int orch__manifest_named_only(const struct store_file *f) {
  if (f->source == STORE_SRC_OUTPUT)
    return (f->kind != NULL && strcmp(f->kind, "figure") == 0) || has_image_ext(f->name);
  if (f->source == STORE_SRC_TOOL)
    return has_image_ext(f->name);
  return 0;
}

static int code_names(const char *code, const char *name) {
  if (code == NULL || *code == '\0')
    return 0;
  if (strstr(code, name) != NULL)
    return 1;
  const char *base = strrchr(name, '/');
  return base != NULL && base[1] != '\0' && strstr(code, base + 1) != NULL;
}

int orch__manifest_compute(const struct store_file *files, size_t n, const char *code,
                           struct orch_manifest *out) {
  memset(out, 0, sizeof(*out));
  if (n == 0)
    return 0;
  out->mounts = sbx_calloc(n, sizeof(*out->mounts));
  out->left_out = sbx_calloc(n, sizeof(*out->left_out));
  if (out->mounts == NULL || out->left_out == NULL) {
    orch__manifest_free(out);
    return SBX_ENOMEM;
  }
  for (size_t i = 0; i < n; i++) {
    const struct store_file *f = &files[i];
    if (orch__manifest_named_only(f) && !code_names(code, f->name))
      continue;
    const char *reason = NULL;
    if (f->size > ORCH_MOUNT_FILE_MAX)
      reason = ORCH_REASON_FILE_CAP;
    else if (out->total_bytes + f->size > ORCH_MOUNT_TOTAL_MAX)
      reason = ORCH_REASON_TOTAL_CAP;
    if (reason != NULL) {
      out->left_out[out->n_left_out].file = f;
      out->left_out[out->n_left_out++].reason = reason;
      continue;
    }
    out->total_bytes += f->size;
    out->mounts[out->n_mounts++].file = f;
  }
  return 0;
}

void orch__manifest_free(struct orch_manifest *m) {
  sbx_free(m->mounts);
  sbx_free(m->left_out);
  memset(m, 0, sizeof(*m));
}

const char *orch__manifest_admit(const struct store_file *files, size_t n, const char *name,
                                 enum store_source src, const char *kind, uint64_t size) {
  if (size > ORCH_MOUNT_FILE_MAX)
    return ORCH_REASON_FILE_CAP;
  /* The total counts what is mounted without any code naming images, minus an older version of
   * the same name (the new one replaces it). */
  uint64_t total = 0;
  for (size_t i = 0; i < n; i++) {
    const struct store_file *f = &files[i];
    if (strcmp(f->name, name) == 0 || orch__manifest_named_only(f) || f->size > ORCH_MOUNT_FILE_MAX)
      continue;
    if (total + f->size <= ORCH_MOUNT_TOTAL_MAX)
      total += f->size;
  }
  struct store_file probe = {.name = (char *)name, .source = src, .kind = (char *)kind};
  if (orch__manifest_named_only(&probe))
    return NULL; /* mounted when named; counts nothing until then */
  return total + size > ORCH_MOUNT_TOTAL_MAX ? ORCH_REASON_TOTAL_CAP : NULL;
}
