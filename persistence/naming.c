/* naming.c -- the file-naming rules, all in one place: NFC normalization, the refusals, and the
 * "name (N).ext" split used to number duplicates.
 *
 * NFC and UTF-8 decoding are utf8proc's (utf8proc_map with UTF8PROC_STABLE | UTF8PROC_COMPOSE,
 * on its own Unicode tables); invalid UTF-8 (overlong forms, surrogates, > U+10FFFF, truncated
 * sequences) is refused.
 *
 * Refused, with SBX_ENAME and a detail naming the reason: empty names; more than STORE_NAME_MAX
 * bytes after normalization; NUL and every control character (C0, DEL, C1); the invisible
 * bidirectional and line-separator format characters (U+200E/F, U+202A-202E, U+2066-2069,
 * U+2028/2029, U+FEFF), which make a name display as another; names, and path segments, with no
 * visible character (only spaces, zero-width spaces, joiners and non-joiners, soft hyphens, other
 * format or default-ignorable code points), which display as nothing; backslashes; absolute
 * paths; empty, "." and ".." segments; and '/' in attachment and knowledge names (one segment).
 * Output and tool names may hold '/' (subfolders of /mnt/output).  A name given with its length
 * (store_name_normalize_len) may hold a NUL byte: refused too.
 *
 * What it does not do: look at the stored set (files.c applies the rules against it).
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#define NAME_INPUT_MAX 4096 /* bytes accepted before normalization: bounds the work */

/* ---- NFC ----------------------------------------------------------------------------------- */

int st__nfc(const char *in, size_t len, char **out, size_t *outlen, struct sbx_error *err) {
  *out = NULL;
  utf8proc_uint8_t *nfc = NULL;
  utf8proc_ssize_t n = utf8proc_map((const utf8proc_uint8_t *)in, (utf8proc_ssize_t)len, &nfc,
                                    UTF8PROC_STABLE | UTF8PROC_COMPOSE);
  if (n < 0) {
    free(nfc);
    if (n == UTF8PROC_ERROR_NOMEM)
      return sbx_error_set(err, SBX_ENOMEM, "name: out of memory");
    /* utf8proc says only that it is invalid; the detail names the first byte that is */
    size_t at = 0;
    utf8proc_int32_t c;
    utf8proc_ssize_t l;
    while (at < len && (l = utf8proc_iterate((const utf8proc_uint8_t *)in + at,
                                             (utf8proc_ssize_t)(len - at), &c)) > 0)
      at += (size_t)l;
    return sbx_error_set(err, SBX_ENAME, "name is not valid UTF-8 (byte %zu)", at);
  }
  /* utf8proc allocates with malloc; what the store hands out is freed with sbx_free */
  *out = sbx_strndup((const char *)nfc, (size_t)n);
  free(nfc);
  if (*out == NULL)
    return sbx_error_set(err, SBX_ENOMEM, "name: out of memory");
  *outlen = (size_t)n;
  return 0;
}

/* ---- the rules ----------------------------------------------------------------------------- */

/* Control characters and the format characters that make a name display as another. */
static int refused_char(utf8proc_int32_t c) {
  return c < 0x20 || c == 0x7F || (c >= 0x80 && c <= 0x9F) || c == 0x200E || c == 0x200F ||
         (c >= 0x202A && c <= 0x202E) || (c >= 0x2066 && c <= 0x2069) || c == 0x2028 ||
         c == 0x2029 || c == 0xFEFF;
}

/* A code point that displays as nothing: white space (Zs, Zl, Zp), controls (Cc), format
 * characters (Cf: zero-width space, joiners, soft hyphen, ...), the default-ignorable ones
 * (utf8proc's `ignorable`: variation selectors, Hangul fillers, ...) and the blank braille
 * pattern U+2800. */
static int blank_char(utf8proc_int32_t c) {
  utf8proc_category_t cat = utf8proc_category(c);
  return cat == UTF8PROC_CATEGORY_ZS || cat == UTF8PROC_CATEGORY_ZL ||
         cat == UTF8PROC_CATEGORY_ZP || cat == UTF8PROC_CATEGORY_CC ||
         cat == UTF8PROC_CATEGORY_CF || utf8proc_get_property(c)->ignorable || c == 0x2800;
}

/* The code point at s + *i of valid UTF-8 (utf8proc_map made it; -1 if not), *i moved past it. */
static utf8proc_int32_t next_cp(const char *s, size_t n, size_t *i) {
  utf8proc_int32_t c = -1;
  utf8proc_ssize_t l =
      utf8proc_iterate((const utf8proc_uint8_t *)s + *i, (utf8proc_ssize_t)(n - *i), &c);
  *i += l > 0 ? (size_t)l : 1;
  return c;
}

static int visible(const char *seg, size_t len) {
  for (size_t i = 0; i < len;)
    if (!blank_char(next_cp(seg, len, &i)))
      return 1;
  return 0;
}

int store_name_normalize_len(const char *name, size_t len, enum store_source src, char **out,
                             struct sbx_error *err) {
  *out = NULL;
  if (name == NULL || len == 0)
    return sbx_error_set(err, SBX_ENAME, "name is empty");
  if ((unsigned)src > STORE_SRC_OUTPUT)
    return sbx_error_set(err, SBX_EINVAL, "unknown file source %d", (int)src);
  if (len > NAME_INPUT_MAX)
    return sbx_error_set(err, SBX_ENAME, "name is longer than %d bytes", STORE_NAME_MAX);
  const char *nul = memchr(name, '\0', len);
  if (nul != NULL)
    return sbx_error_set(err, SBX_ENAME, "name holds a NUL character U+0000 (byte %zu)",
                         (size_t)(nul - name));
  char *s;
  size_t n;
  int rc = st__nfc(name, len, &s, &n, err);
  if (rc != 0)
    return rc;
  const char *why = NULL;
  char detail[128] = "";
  if (n > STORE_NAME_MAX) {
    snprintf(detail, sizeof detail, "name is longer than %d bytes (%zu)", STORE_NAME_MAX, n);
    goto refuse;
  }
  for (size_t i = 0; i < n;) {
    utf8proc_int32_t c = next_cp(s, n, &i);
    if (refused_char(c)) {
      snprintf(detail, sizeof detail, "name holds a control or invisible format character U+%04X",
               (unsigned)c);
      goto refuse;
    }
  }
  if (strchr(s, '\\')) {
    why = "name holds a backslash";
  } else if (s[0] == '/') {
    why = "name is an absolute path";
  } else if ((src == STORE_SRC_ATTACHMENT || src == STORE_SRC_KNOWLEDGE) && strchr(s, '/')) {
    why = "attachment and knowledge names are one path segment (no '/')";
  } else {
    for (const char *seg = s;;) {
      const char *end = strchr(seg, '/');
      size_t sl = end ? (size_t)(end - seg) : strlen(seg);
      if (sl == 0) {
        why = "name has an empty path segment";
        break;
      }
      if ((sl == 1 && seg[0] == '.') || (sl == 2 && seg[0] == '.' && seg[1] == '.')) {
        why = "name has a '.' or '..' segment";
        break;
      }
      if (!visible(seg, sl)) {
        why = seg == s && end == NULL
                  ? "name has no visible character (only spaces or invisible code points)"
                  : "name has a path segment with no visible character (only spaces or invisible "
                    "code points)";
        break;
      }
      if (!end)
        break;
      seg = end + 1;
    }
  }
  if (why == NULL) {
    *out = s;
    return 0;
  }
  snprintf(detail, sizeof detail, "%s", why);
refuse:
  sbx_free(s);
  return sbx_error_set(err, SBX_ENAME, "%s", detail);
}

int store_name_normalize(const char *name, enum store_source src, char **out,
                         struct sbx_error *err) {
  size_t len = name ? strnlen(name, NAME_INPUT_MAX + 1) : 0;
  return store_name_normalize_len(name, len, src, out, err);
}

/* ---- duplicates: "stem (N).ext" ----------------------------------------------------------- */

int st__name_split(const char *name, char **stem, char **ext, int *n) {
  const char *base = strrchr(name, '/');
  base = base ? base + 1 : name;
  size_t len = strlen(name);
  const char *dot = strrchr(base, '.');
  size_t stem_len = len;
  /* an extension starts at the last dot of the last segment, not at its first character
   * (".bashrc" has none), not at its end ("name." has none) and not before a space ("name. (2)"
   * is the second "name.", as join makes it, not "name" with ". (2)"); ".tar.<x>" stays together */
  if (dot && dot > base && dot[1] != '\0' && dot[1] != ' ') {
    stem_len = (size_t)(dot - name);
    if (stem_len >= 4 && (size_t)(dot - base) > 4 && strncmp(dot - 4, ".tar", 4) == 0)
      stem_len -= 4;
  }
  *n = 1;
  size_t sl = stem_len;
  /* a trailing " (N)", N >= 2 without leading zeros, is a duplicate number */
  if (sl >= 5 && name[sl - 1] == ')') {
    size_t j = sl - 1, digits = 0;
    while (j > 0 && name[j - 1] >= '0' && name[j - 1] <= '9' && digits < 10)
      j--, digits++;
    if (digits >= 1 && digits <= 9 && name[j] != '0' && j >= 2 && name[j - 1] == '(' &&
        name[j - 2] == ' ' && j - 2 > (size_t)(base - name)) {
      int v = 0;
      for (size_t k = j; k < sl - 1; k++)
        v = v * 10 + (name[k] - '0');
      if (v >= 2) {
        *n = v;
        sl = j - 2;
      }
    }
  }
  *stem = sbx_strndup(name, sl);
  *ext = sbx_strdup(name + stem_len);
  if (*stem == NULL || *ext == NULL) {
    sbx_free(*stem);
    sbx_free(*ext);
    *stem = *ext = NULL;
    return SBX_ENOMEM;
  }
  return 0;
}

int st__name_join(const char *stem, const char *ext, int n, char **out, struct sbx_error *err) {
  size_t cap = strlen(stem) + strlen(ext) + 16;
  *out = NULL;
  char *s = sbx_malloc(cap);
  if (s == NULL)
    return sbx_error_set(err, SBX_ENOMEM, "name: out of memory");
  int w = n > 1 ? snprintf(s, cap, "%s (%d)%s", stem, n, ext) : snprintf(s, cap, "%s%s", stem, ext);
  if (w > STORE_NAME_MAX) {
    sbx_free(s);
    /* the stem's first 40 bytes or fewer, cut before a character, not inside one (the stem is
     * UTF-8: a name normalized) */
    size_t cut = strnlen(stem, 40);
    if (stem[cut] != '\0')
      while (cut > 0 && ((unsigned char)stem[cut] & 0xC0) == 0x80)
        cut--;
    return sbx_error_set(err, SBX_ENAME, "numbered name \"%.*s... (%d)%s\" is longer than %d bytes",
                         (int)cut, stem, n, ext, STORE_NAME_MAX);
  }
  *out = s;
  return 0;
}

const char *store_source_name(enum store_source s) {
  switch (s) {
  case STORE_SRC_ATTACHMENT:
    return "attachment";
  case STORE_SRC_KNOWLEDGE:
    return "knowledge";
  case STORE_SRC_TOOL:
    return "tool";
  case STORE_SRC_OUTPUT:
    return "output";
  }
  return "unknown";
}

int store_source_parse(const char *s, enum store_source *out) {
  static const enum store_source all[] = {STORE_SRC_ATTACHMENT, STORE_SRC_KNOWLEDGE, STORE_SRC_TOOL,
                                          STORE_SRC_OUTPUT};
  for (size_t i = 0; s && i < SBX_ARRAY_SIZE(all); i++)
    if (strcmp(s, store_source_name(all[i])) == 0) {
      *out = all[i];
      return 0;
    }
  return SBX_EINVAL;
}
