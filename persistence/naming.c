/* naming.c -- the file-naming rules, all in one place: NFC normalization, the refusals, and the
 * "name (N).ext" split used to number duplicates.
 *
 * NFC: there is no ICU here, so this file implements Unicode normalization form C itself, fully
 * (canonical decomposition, canonical ordering, canonical composition with the composition
 * exclusions, Hangul), from tables generated out of Python's unicodedata (nfc_tables.h, Unicode
 * version in NFC_UNICODE_VERSION; regenerate with persistence/tools/gen_nfc_tables.py).  Invalid
 * UTF-8 (overlong forms, surrogates, > U+10FFFF, truncated sequences) is refused.
 *
 * Refused, with SBX_ENAME and a detail naming the reason: empty names; more than STORE_NAME_MAX
 * bytes after normalization; NUL and every control character (C0, DEL, C1); the invisible
 * bidirectional and line-separator format characters (U+200E/F, U+202A-202E, U+2066-2069,
 * U+2028/2029, U+FEFF), which make a name display as another; backslashes; absolute paths;
 * empty, "." and ".." segments; and '/' in attachment and knowledge names (one segment).  Output
 * and tool names may hold '/' (subfolders of /mnt/output).
 *
 * What it does not do: look at the stored set (files.c applies the rules against it).
 */
#include "internal.h"

#include <stdio.h>
#include <string.h>

#include "nfc_tables.h"

#define NAME_INPUT_MAX 4096 /* bytes accepted before normalization: bounds the work */

/* ---- UTF-8 --------------------------------------------------------------------------------- */

/* Decodes one code point; returns its length or 0 when invalid. */
static size_t utf8_decode(const unsigned char *p, size_t n, uint32_t *cp) {
  if (p[0] < 0x80) {
    *cp = p[0];
    return 1;
  }
  size_t len;
  uint32_t c, min;
  if ((p[0] & 0xE0) == 0xC0) {
    len = 2, c = p[0] & 0x1F, min = 0x80;
  } else if ((p[0] & 0xF0) == 0xE0) {
    len = 3, c = p[0] & 0x0F, min = 0x800;
  } else if ((p[0] & 0xF8) == 0xF0) {
    len = 4, c = p[0] & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (len > n)
    return 0;
  for (size_t i = 1; i < len; i++) {
    if ((p[i] & 0xC0) != 0x80)
      return 0;
    c = (c << 6) | (p[i] & 0x3F);
  }
  if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
    return 0;
  *cp = c;
  return len;
}

static size_t utf8_encode(uint32_t c, char *o) {
  if (c < 0x80) {
    o[0] = (char)c;
    return 1;
  }
  if (c < 0x800) {
    o[0] = (char)(0xC0 | (c >> 6));
    o[1] = (char)(0x80 | (c & 0x3F));
    return 2;
  }
  if (c < 0x10000) {
    o[0] = (char)(0xE0 | (c >> 12));
    o[1] = (char)(0x80 | ((c >> 6) & 0x3F));
    o[2] = (char)(0x80 | (c & 0x3F));
    return 3;
  }
  o[0] = (char)(0xF0 | (c >> 18));
  o[1] = (char)(0x80 | ((c >> 12) & 0x3F));
  o[2] = (char)(0x80 | ((c >> 6) & 0x3F));
  o[3] = (char)(0x80 | (c & 0x3F));
  return 4;
}

/* ---- NFC ----------------------------------------------------------------------------------- */

enum {
  S_BASE = 0xAC00,
  L_BASE = 0x1100,
  V_BASE = 0x1161,
  T_BASE = 0x11A7,
  L_COUNT = 19,
  V_COUNT = 21,
  T_COUNT = 28,
  N_COUNT = V_COUNT * T_COUNT,
  S_COUNT = L_COUNT * N_COUNT
};

static int ccc(uint32_t c) {
  size_t lo = 0, hi = SBX_ARRAY_SIZE(nfc_ccc_tab);
  if (c < 0x300)
    return 0;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (c < nfc_ccc_tab[mid].lo)
      hi = mid;
    else if (c > nfc_ccc_tab[mid].hi)
      lo = mid + 1;
    else
      return nfc_ccc_tab[mid].ccc;
  }
  return 0;
}

static const struct nfc_dec *dec_lookup(uint32_t c) {
  size_t lo = 0, hi = SBX_ARRAY_SIZE(nfc_dec_tab);
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (c < nfc_dec_tab[mid].cp)
      hi = mid;
    else if (c > nfc_dec_tab[mid].cp)
      lo = mid + 1;
    else
      return &nfc_dec_tab[mid];
  }
  return NULL;
}

/* Full canonical decomposition of c appended to out (room for 4 more is guaranteed per level:
 * canonical decompositions expand a code point to at most 4). */
static void decompose(uint32_t c, uint32_t *out, size_t *n) {
  if (c >= S_BASE && c < S_BASE + S_COUNT) {
    uint32_t s = c - S_BASE;
    out[(*n)++] = L_BASE + s / N_COUNT;
    out[(*n)++] = V_BASE + (s % N_COUNT) / T_COUNT;
    if (s % T_COUNT)
      out[(*n)++] = T_BASE + s % T_COUNT;
    return;
  }
  const struct nfc_dec *d = c < 0xC0 ? NULL : dec_lookup(c);
  if (d == NULL) {
    out[(*n)++] = c;
    return;
  }
  decompose(d->d0, out, n);
  if (d->d1)
    decompose(d->d1, out, n);
}

static uint32_t compose_pair(uint32_t a, uint32_t b) {
  if (a >= L_BASE && a < L_BASE + L_COUNT && b >= V_BASE && b < V_BASE + V_COUNT)
    return S_BASE + ((a - L_BASE) * V_COUNT + (b - V_BASE)) * T_COUNT;
  if (a >= S_BASE && a < S_BASE + S_COUNT && (a - S_BASE) % T_COUNT == 0 && b > T_BASE &&
      b < T_BASE + T_COUNT)
    return a + (b - T_BASE);
  size_t lo = 0, hi = SBX_ARRAY_SIZE(nfc_comp_tab);
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    const struct nfc_comp *e = &nfc_comp_tab[mid];
    if (a < e->a || (a == e->a && b < e->b))
      hi = mid;
    else if (a > e->a || b > e->b)
      lo = mid + 1;
    else
      return e->c;
  }
  return 0;
}

int st__nfc(const char *in, size_t len, char **out, size_t *outlen, struct sbx_error *err) {
  const unsigned char *p = (const unsigned char *)in;
  *out = NULL;
  /* ASCII is already NFC: the common case costs one scan and one copy */
  size_t i = 0;
  while (i < len && p[i] < 0x80)
    i++;
  if (i == len) {
    if ((*out = sbx_strndup(in, len)) == NULL)
      return sbx_error_set(err, SBX_ENOMEM, "name: out of memory");
    *outlen = len;
    return 0;
  }
  /* at most len code points, each decomposing to at most 4 */
  uint32_t *buf = sbx_malloc(sizeof(uint32_t) * (len * 4 + 4));
  if (buf == NULL)
    return sbx_error_set(err, SBX_ENOMEM, "name: out of memory");
  size_t n = 0;
  for (i = 0; i < len;) {
    uint32_t c;
    size_t l = utf8_decode(p + i, len - i, &c);
    if (l == 0) {
      sbx_free(buf);
      return sbx_error_set(err, SBX_ENAME, "name is not valid UTF-8 (byte %zu)", i);
    }
    decompose(c, buf, &n);
    i += l;
  }
  /* canonical ordering: a stable sort of each run of non-starters by combining class */
  for (size_t k = 1; k < n; k++) {
    int ck = ccc(buf[k]);
    if (ck == 0)
      continue;
    size_t j = k;
    while (j > 0) {
      int cj = ccc(buf[j - 1]);
      if (cj <= ck)
        break;
      uint32_t t = buf[j];
      buf[j] = buf[j - 1];
      buf[j - 1] = t;
      j--;
    }
  }
  /* canonical composition */
  if (n > 0) {
    size_t starter = 0, o = 1;
    int last = ccc(buf[0]) ? 256 : 0;
    for (size_t k = 1; k < n; k++) {
      uint32_t c = buf[k];
      int cc = ccc(c);
      uint32_t comp = compose_pair(buf[starter], c);
      if (comp && (last < cc || last == 0)) {
        buf[starter] = comp;
        continue;
      }
      if (cc == 0)
        starter = o;
      last = cc;
      buf[o++] = c;
    }
    n = o;
  }
  char *s = sbx_malloc(n * 4 + 1);
  if (s == NULL) {
    sbx_free(buf);
    return sbx_error_set(err, SBX_ENOMEM, "name: out of memory");
  }
  size_t o = 0;
  for (size_t k = 0; k < n; k++)
    o += utf8_encode(buf[k], s + o);
  s[o] = '\0';
  sbx_free(buf);
  *out = s;
  *outlen = o;
  return 0;
}

/* ---- the rules ----------------------------------------------------------------------------- */

static int refused_char(uint32_t c) {
  return c < 0x20 || c == 0x7F || (c >= 0x80 && c <= 0x9F) || c == 0x200E || c == 0x200F ||
         (c >= 0x202A && c <= 0x202E) || (c >= 0x2066 && c <= 0x2069) || c == 0x2028 ||
         c == 0x2029 || c == 0xFEFF;
}

int store_name_normalize(const char *name, enum store_source src, char **out,
                         struct sbx_error *err) {
  *out = NULL;
  if (name == NULL || *name == '\0')
    return sbx_error_set(err, SBX_ENAME, "name is empty");
  if ((unsigned)src > STORE_SRC_OUTPUT)
    return sbx_error_set(err, SBX_EINVAL, "unknown file source %d", (int)src);
  size_t len = strnlen(name, NAME_INPUT_MAX + 1);
  if (len > NAME_INPUT_MAX)
    return sbx_error_set(err, SBX_ENAME, "name is longer than %d bytes", STORE_NAME_MAX);
  char *s;
  size_t n;
  int rc = st__nfc(name, len, &s, &n, err);
  if (rc != 0)
    return rc;
  const char *why = NULL;
  char detail[96] = "";
  if (n > STORE_NAME_MAX) {
    snprintf(detail, sizeof detail, "name is longer than %d bytes (%zu)", STORE_NAME_MAX, n);
    goto refuse;
  }
  for (size_t i = 0; i < n;) {
    uint32_t c = 0;
    size_t l = utf8_decode((const unsigned char *)s + i, n - i, &c);
    if (l == 0) { /* cannot happen: st__nfc produced valid UTF-8 */
      snprintf(detail, sizeof detail, "name is not valid UTF-8");
      goto refuse;
    }
    if (refused_char(c)) {
      snprintf(detail, sizeof detail, "name holds a control or invisible format character U+%04X",
               (unsigned)c);
      goto refuse;
    }
    i += l;
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

/* ---- duplicates: "stem (N).ext" ----------------------------------------------------------- */

int st__name_split(const char *name, char **stem, char **ext, int *n) {
  const char *base = strrchr(name, '/');
  base = base ? base + 1 : name;
  size_t len = strlen(name);
  const char *dot = strrchr(base, '.');
  size_t stem_len = len;
  /* an extension starts at the last dot of the last segment, not at its first character
   * (".bashrc" has none) and not at its end ("name." has none); ".tar.<x>" stays together */
  if (dot && dot > base && dot[1] != '\0') {
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
    return sbx_error_set(err, SBX_ENAME,
                         "numbered name \"%.40s... (%d)%s\" is longer than %d bytes", stem, n, ext,
                         STORE_NAME_MAX);
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
