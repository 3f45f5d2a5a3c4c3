/* json_load.c -- a fast path in front of jansson's json_loadb for request bodies.
 *
 * orch_json_load_fast(buf, len) builds the same jansson tree json_loadb(buf, len,
 * JSON_REJECT_DUPLICATES [| JSON_ALLOW_NUL]) builds, for the bodies the API sees every run (a JSON
 * object of strings, integers, booleans, nulls, arrays and objects), or returns NULL ("declined")
 * and the caller asks jansson, which then gives its own answer or its own error message.  It does
 * not report errors and never has to: anything it is not sure jansson accepts the same way, it
 * declines.  Declined: a top level that is not an object; reals (a '.', 'e' or 'E' after the
 * digits); integers of more than 18 digits; \u0000 and \u escapes of surrogate halves (a valid
 * pair is accepted); duplicate keys; nesting deeper than 32; any byte outside a string that is not
 * JSON's whitespace or structure; a string byte below 0x20 or not part of well-formed UTF-8
 * (RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF, as jansson's utf.c); running
 * out of memory.  Everything else that is not JSON (a trailing comma, a missing colon, text after
 * the object...) is declined too, because the grammar below is JSON's and nothing more.
 *
 * Why: jansson's lexer reads a byte at a time through a stream with a UTF-8 check per character;
 * it was ~70 % of the ~9,000 instructions a small body cost to load.  This one scans strings a
 * byte at a time in a tight loop and hands jansson the finished values.
 * tests/unit/orchestrator/test_json_load.c checks it against json_loadb: a table of accepted and
 * hostile bodies, every one- and two-byte prefix of UTF-8 lead bytes, and mutated bodies, each
 * either declined or equal (json_equal plus string lengths and key order) to jansson's tree.
 */
#include "internal.h"

#include <string.h>

#define JL_MAX_DEPTH 32

struct jl {
  const char *p, *end;
  char *tmp; /* decoded strings with escapes */
  size_t tmp_cap;
};

static void jl_ws(struct jl *l) {
  while (l->p < l->end && (*l->p == ' ' || *l->p == '\n' || *l->p == '\r' || *l->p == '\t'))
    l->p++;
}

/* The length of the well-formed UTF-8 sequence at p (lead byte >= 0x80), 0 when it is not one. */
static size_t jl_utf8(const unsigned char *p, const unsigned char *end) {
  unsigned c = p[0];
  size_t n;
  unsigned cp;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
    cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if ((size_t)(end - p) < n)
    return 0;
  for (size_t i = 1; i < n; i++) {
    if ((p[i] & 0xC0) != 0x80)
      return 0;
    cp = cp << 6 | (p[i] & 0x3F);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10FFFF ||
      (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;
  return n;
}

static int jl_hex4(const char *p, unsigned *out) {
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    char c = p[i];
    v <<= 4;
    if (c >= '0' && c <= '9')
      v |= (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f')
      v |= (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
      v |= (unsigned)(c - 'A' + 10);
    else
      return -1;
  }
  *out = v;
  return 0;
}

/* A string at l->p (just past its opening quote): *s, *n its decoded bytes (in the body itself
 * when it has no escape, else in l->tmp).  -1: declined. */
static int jl_string(struct jl *l, const char **s, size_t *n) {
  const unsigned char *p = (const unsigned char *)l->p, *end = (const unsigned char *)l->end;
  const unsigned char *start = p;
  for (;;) {
    if (p >= end)
      return -1;
    unsigned c = *p;
    if (c == '"') {
      *s = (const char *)start;
      *n = (size_t)(p - start);
      l->p = (const char *)p + 1;
      return 0;
    }
    if (c == '\\')
      break;
    if (c < 0x20)
      return -1;
    if (c < 0x80) {
      p++;
      continue;
    }
    size_t k = jl_utf8(p, end);
    if (k == 0)
      return -1;
    p += k;
  }
  /* Escapes: decode into tmp (never longer than the raw text: each escape shrinks or stays). */
  size_t need = (size_t)(end - start);
  if (need > l->tmp_cap) {
    char *t = sbx_realloc(l->tmp, need);
    if (t == NULL)
      return -1;
    l->tmp = t;
    l->tmp_cap = need;
  }
  char *o = l->tmp;
  size_t done = (size_t)(p - start);
  memcpy(o, start, done);
  o += done;
  for (;;) {
    if (p >= end)
      return -1;
    unsigned c = *p;
    if (c == '"') {
      *s = l->tmp;
      *n = (size_t)(o - l->tmp);
      l->p = (const char *)p + 1;
      return 0;
    }
    if (c < 0x20)
      return -1;
    if (c >= 0x80) {
      size_t k = jl_utf8(p, end);
      if (k == 0)
        return -1;
      memcpy(o, p, k);
      o += k;
      p += k;
      continue;
    }
    if (c != '\\') {
      *o++ = (char)c;
      p++;
      continue;
    }
    if (end - p < 2)
      return -1;
    switch (p[1]) {
    case '"': *o++ = '"'; break;
    case '\\': *o++ = '\\'; break;
    case '/': *o++ = '/'; break;
    case 'b': *o++ = '\b'; break;
    case 'f': *o++ = '\f'; break;
    case 'n': *o++ = '\n'; break;
    case 'r': *o++ = '\r'; break;
    case 't': *o++ = '\t'; break;
    case 'u': {
      unsigned cp, lo;
      if (end - p < 6 || jl_hex4((const char *)p + 2, &cp) != 0 || cp == 0)
        return -1;
      if (cp >= 0xDC00 && cp <= 0xDFFF)
        return -1;
      if (cp >= 0xD800 && cp <= 0xDBFF) { /* a pair: \uD8xx\uDCxx, 12 bytes in, 4 out */
        if (end - p < 12 || p[6] != '\\' || p[7] != 'u' || jl_hex4((const char *)p + 8, &lo) != 0 ||
            lo < 0xDC00 || lo > 0xDFFF)
          return -1;
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        p += 6;
      }
      if (cp < 0x80) {
        *o++ = (char)cp;
      } else if (cp < 0x800) {
        *o++ = (char)(0xC0 | cp >> 6);
        *o++ = (char)(0x80 | (cp & 0x3F));
      } else if (cp < 0x10000) {
        *o++ = (char)(0xE0 | cp >> 12);
        *o++ = (char)(0x80 | ((cp >> 6) & 0x3F));
        *o++ = (char)(0x80 | (cp & 0x3F));
      } else {
        *o++ = (char)(0xF0 | cp >> 18);
        *o++ = (char)(0x80 | ((cp >> 12) & 0x3F));
        *o++ = (char)(0x80 | ((cp >> 6) & 0x3F));
        *o++ = (char)(0x80 | (cp & 0x3F));
      }
      p += 4; /* plus the 2 below */
      break;
    }
    default:
      return -1;
    }
    p += 2;
  }
}

/* After a value: the next byte must be one that can follow it (or the end, checked by callers). */
static int jl_after_value_ok(struct jl *l) {
  jl_ws(l);
  return l->p < l->end && (*l->p == ',' || *l->p == '}' || *l->p == ']');
}

static json_t *jl_value(struct jl *l, int depth);

static json_t *jl_object(struct jl *l, int depth) {
  json_t *obj = json_object();
  if (obj == NULL)
    return NULL;
  l->p++; /* '{' */
  jl_ws(l);
  if (l->p < l->end && *l->p == '}') {
    l->p++;
    return obj;
  }
  for (;;) {
    jl_ws(l);
    if (l->p >= l->end || *l->p != '"')
      goto fail;
    l->p++;
    const char *k;
    size_t kn;
    if (jl_string(l, &k, &kn) != 0)
      goto fail;
    /* The key may sit in l->tmp, which the value below can reuse: jansson copies keys on set, but
     * the duplicate check and the set come after the value.  Copy short keys to the stack. */
    char kbuf[128];
    char *kheap = NULL;
    const char *key = k;
    if (k == l->tmp) {
      if (kn < sizeof(kbuf)) {
        memcpy(kbuf, k, kn);
        key = kbuf;
      } else {
        if ((kheap = sbx_malloc(kn)) == NULL)
          goto fail;
        memcpy(kheap, k, kn);
        key = kheap;
      }
    }
    jl_ws(l);
    json_t *v = NULL;
    if (l->p < l->end && *l->p == ':') {
      l->p++;
      v = jl_value(l, depth);
    }
    if (v == NULL || json_object_getn(obj, key, kn) != NULL ||
        json_object_setn_new_nocheck(obj, key, kn, v) != 0) {
      json_decref(v); /* NULL-safe; on a failed set jansson already dropped it */
      sbx_free(kheap);
      goto fail;
    }
    sbx_free(kheap);
    if (!jl_after_value_ok(l))
      goto fail;
    if (*l->p++ == '}')
      return obj;
    if (l->p[-1] != ',')
      goto fail;
  }
fail:
  json_decref(obj);
  return NULL;
}

static json_t *jl_array(struct jl *l, int depth) {
  json_t *arr = json_array();
  if (arr == NULL)
    return NULL;
  l->p++; /* '[' */
  jl_ws(l);
  if (l->p < l->end && *l->p == ']') {
    l->p++;
    return arr;
  }
  for (;;) {
    json_t *v = jl_value(l, depth);
    if (v == NULL || json_array_append_new(arr, v) != 0)
      goto fail; /* append_new drops v when it fails */
    if (!jl_after_value_ok(l))
      goto fail;
    if (*l->p++ == ']')
      return arr;
    if (l->p[-1] != ',')
      goto fail;
  }
fail:
  json_decref(arr);
  return NULL;
}

static json_t *jl_value(struct jl *l, int depth) {
  jl_ws(l);
  if (l->p >= l->end)
    return NULL;
  char c = *l->p;
  switch (c) {
  case '{':
    return depth >= JL_MAX_DEPTH ? NULL : jl_object(l, depth + 1);
  case '[':
    return depth >= JL_MAX_DEPTH ? NULL : jl_array(l, depth + 1);
  case '"': {
    const char *s;
    size_t n;
    l->p++;
    if (jl_string(l, &s, &n) != 0)
      return NULL;
    return json_stringn_nocheck(s, n);
  }
  case 't':
    if (l->end - l->p >= 4 && memcmp(l->p, "true", 4) == 0) {
      l->p += 4;
      return json_true();
    }
    return NULL;
  case 'f':
    if (l->end - l->p >= 5 && memcmp(l->p, "false", 5) == 0) {
      l->p += 5;
      return json_false();
    }
    return NULL;
  case 'n':
    if (l->end - l->p >= 4 && memcmp(l->p, "null", 4) == 0) {
      l->p += 4;
      return json_null();
    }
    return NULL;
  default: {
    /* -?(0|[1-9][0-9]*), at most 18 digits (no overflow), not followed by . e E (a real) */
    const char *p = l->p;
    int neg = 0;
    if (p < l->end && *p == '-') {
      neg = 1;
      p++;
    }
    const char *d = p;
    long long v = 0;
    while (p < l->end && *p >= '0' && *p <= '9' && p - d < 18)
      v = v * 10 + (*p++ - '0'); /* 18 digits at most: no overflow */
    size_t nd = (size_t)(p - d);
    if (nd == 0 || (nd > 1 && *d == '0'))
      return NULL;
    if (p < l->end && ((*p >= '0' && *p <= '9') || *p == '.' || *p == 'e' || *p == 'E'))
      return NULL; /* a 19th digit, or a real */
    l->p = p;
    return json_integer(neg ? -v : v);
  }
  }
}

json_t *orch_json_load_fast(const char *buf, size_t len) {
  struct jl l = {.p = buf, .end = buf + len, .tmp = NULL, .tmp_cap = 0};
  jl_ws(&l);
  json_t *j = NULL;
  if (l.p < l.end && *l.p == '{') {
    j = jl_object(&l, 1);
    jl_ws(&l);
    if (j && l.p != l.end) { /* text after the object */
      json_decref(j);
      j = NULL;
    }
  }
  sbx_free(l.tmp);
  return j;
}
