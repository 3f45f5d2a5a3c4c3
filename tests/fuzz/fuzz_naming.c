/* fuzz_naming.c -- file names through persistence's naming rules (naming.c): NFC through
 * utf8proc, the refusals, and the "name (N).ext" split and join the store numbers duplicates
 * with.  One input is a source (its first byte) and a name (the rest, NULs and invalid UTF-8
 * included).
 *
 * Checked for every accepted name, with utf8proc as the independent judge where it can be one:
 *  - it is valid UTF-8 and NFC-stable: utf8proc's NFC of it is the same bytes, and normalizing it
 *    again (store_name_normalize, the NUL-terminated entry) accepts it unchanged;
 *  - it fits STORE_NAME_MAX bytes, holds no NUL, control character (C0, DEL, C1), bidi or line
 *    separator format character, backslash; is not absolute; has no empty, "." or ".." segment,
 *    no segment without a visible character, and no '/' at all for attachments and knowledge;
 *  - the NUL-terminated entry agrees with the one given a length (when the name has no NUL);
 *  - split and join are each other's inverse: join(split(name)) is the name, and the numbered
 *    names the store would make from it (N = 2 and the next number) are themselves accepted names
 *    that normalize to the same bytes and split back to the same stem, extension and number (the
 *    store writes a numbered name without normalizing it again).
 * A refused name: SBX_ENAME with a detail, and nothing handed out.
 *
 * What it does not do: the stored set (which names are taken): the orchestrator's target
 * (fuzz_api) uploads through the real store. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "../../persistence/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

#define DUP_N_MAX 999999999 /* the most digits (9) a " (N)" the split reads back */

static void fail(const char *what, const char *name, size_t len) {
  fprintf(stderr, "fuzz_naming: %s: \"", what);
  for (size_t i = 0; i < len; i++)
    fprintf(stderr, (unsigned char)name[i] < 0x20 || name[i] == '"' ? "\\x%02x" : "%c",
            (unsigned char)name[i]);
  fprintf(stderr, "\" (%zu bytes)\n", len);
  abort();
}

/* utf8proc's verdict on s: every code point decodes, none is refused by the rules, and every
 * path segment holds a visible one. */
static void check_chars(const char *s, size_t len, enum store_source src) {
  int seg_visible = 0;
  size_t seg_start = 0;
  for (size_t i = 0; i <= len;) {
    if (i == len || s[i] == '/') {
      size_t sl = i - seg_start;
      if (sl == 0 || !seg_visible)
        fail("accepted a name with an empty or invisible segment", s, len);
      if ((sl == 1 && s[seg_start] == '.') ||
          (sl == 2 && s[seg_start] == '.' && s[seg_start + 1] == '.'))
        fail("accepted a '.' or '..' segment", s, len);
      if (i < len && (src == STORE_SRC_ATTACHMENT || src == STORE_SRC_KNOWLEDGE))
        fail("accepted a '/' in an attachment or knowledge name", s, len);
      seg_start = ++i;
      seg_visible = 0;
      continue;
    }
    utf8proc_int32_t c;
    utf8proc_ssize_t l =
        utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(len - i), &c);
    if (l <= 0)
      fail("accepted invalid UTF-8", s, len);
    if (c < 0x20 || c == 0x7F || (c >= 0x80 && c <= 0x9F) || c == '\\' || c == 0x200E ||
        c == 0x200F || (c >= 0x202A && c <= 0x202E) || (c >= 0x2066 && c <= 0x2069) ||
        c == 0x2028 || c == 0x2029 || c == 0xFEFF)
      fail("accepted a control, format character or backslash", s, len);
    utf8proc_category_t cat = utf8proc_category(c);
    if (!(cat == UTF8PROC_CATEGORY_ZS || cat == UTF8PROC_CATEGORY_ZL ||
          cat == UTF8PROC_CATEGORY_ZP || cat == UTF8PROC_CATEGORY_CF ||
          utf8proc_get_property(c)->ignorable || c == 0x2800))
      seg_visible = 1;
    i += (size_t)l;
  }
}

/* An accepted name: everything the rules promise of it, then its normalization again. */
static void check_accepted(const char *s, enum store_source src) {
  size_t len = strlen(s);
  if (len == 0 || len > STORE_NAME_MAX)
    fail("accepted an empty name or one past STORE_NAME_MAX", s, len);
  if (s[0] == '/')
    fail("accepted an absolute path", s, len);
  check_chars(s, len, src);
  utf8proc_uint8_t *nfc = utf8proc_NFC((const utf8proc_uint8_t *)s);
  if (nfc == NULL || strcmp((const char *)nfc, s) != 0)
    fail("accepted a name that is not NFC", s, len);
  free(nfc);
  char *again = NULL;
  struct sbx_error err;
  if (store_name_normalize(s, src, &again, &err) != 0 || strcmp(again, s) != 0)
    fail("normalizing an accepted name again does not give it back", s, len);
  sbx_free(again);
}

/* The numbered name join(stem, ext, k): refused only for its length; else an accepted name that
 * splits back to (stem, ext, k). */
static void check_numbered(const char *stem, const char *ext, int k, enum store_source src) {
  char *joined = NULL, *st2 = NULL, *ext2 = NULL;
  struct sbx_error err;
  if (st__name_join(stem, ext, k, &joined, &err) != 0) {
    int fits = snprintf(NULL, 0, "%s (%d)%s", stem, k, ext) <= STORE_NAME_MAX;
    if (fits || err.code != SBX_ENAME)
      fail("refused a numbered name that fits", stem, strlen(stem));
    return;
  }
  check_accepted(joined, src);
  int k2 = 0;
  if (st__name_split(joined, &st2, &ext2, &k2) != 0)
    abort();
  if (k2 != k || strcmp(st2, stem) != 0 || strcmp(ext2, ext) != 0)
    fail("a numbered name does not split back to its stem, extension and number", joined,
         strlen(joined));
  sbx_free(st2);
  sbx_free(ext2);
  sbx_free(joined);
}

static void check_split(const char *s, enum store_source src) {
  char *stem = NULL, *ext = NULL, *joined = NULL;
  int k = 0;
  struct sbx_error err;
  if (st__name_split(s, &stem, &ext, &k) != 0)
    abort();
  if (k < 1 || k > DUP_N_MAX || st__name_join(stem, ext, k, &joined, &err) != 0 ||
      strcmp(joined, s) != 0)
    fail("join(split(name)) is not the name", s, strlen(s));
  sbx_free(joined);
  check_numbered(stem, ext, 2, src);
  if (k + 1 <= DUP_N_MAX)
    check_numbered(stem, ext, k + 1, src);
  sbx_free(stem);
  sbx_free(ext);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  if (n == 0)
    return 0;
  enum store_source src = (enum store_source)(data[0] % (STORE_SRC_OUTPUT + 1));
  const char *name = (const char *)data + 1;
  size_t len = n - 1;
  char *out = NULL;
  struct sbx_error err;
  sbx_error_clear(&err);
  int rc = store_name_normalize_len(name, len, src, &out, &err);

  /* the NUL-terminated entry reads up to the first NUL: the same verdict without one */
  char *z = sbx_strndup(name, len), *out_z = NULL;
  if (z == NULL)
    abort();
  struct sbx_error err_z;
  int rc_z = store_name_normalize(z, src, &out_z, &err_z);
  if (memchr(name, '\0', len) == NULL && (rc_z != rc || (rc == 0 && strcmp(out, out_z) != 0)))
    fail("store_name_normalize and _len disagree", name, len);
  sbx_free(out_z);
  sbx_free(z);

  if (rc != 0) {
    if (out != NULL || rc != SBX_ENAME || err.code != SBX_ENAME || err.msg[0] == '\0')
      fail("a refusal without SBX_ENAME and its detail, or with a name", name, len);
    return 0;
  }
  check_accepted(out, src);
  check_split(out, src);
  sbx_free(out);
  return 0;
}
