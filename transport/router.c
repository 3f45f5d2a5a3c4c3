/* router.c -- path patterns ("/v1/chats/{chat}/files", a trailing "{name*}" for the rest of the
 * path), matching a request's method and path against them, percent-decoding, and the small
 * tables every file needs (status texts, MIME types).  It does not run handlers (req.c).
 *
 * Matching is on the raw path split at '/', each segment decoded afterwards, so "%2F" inside a
 * parameter stays inside it; the path is split once per request and routes are compared
 * segment by segment against that table.  Literal routes (no parameter) are tried first, then
 * parametrised ones in registration order.  A pattern has at most TP_ROUTE_MAX_SEGS segments.  A path that matches some route with another method gives 405 with
 * the Allow list.
 */
#include "internal.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

static int hexval(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

long tp__pct_decode_to(char *out, const char *s, size_t n, int plus) {
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (c == '%') {
      int h, l;
      if (i + 2 >= n || (h = hexval(s[i + 1])) < 0 || (l = hexval(s[i + 2])) < 0)
        return -1;
      c = (char)(h * 16 + l);
      i += 2;
      if (c == '\0')
        return -1;
    } else if (c == '+' && plus) {
      c = ' ';
    } else if (c == '\0') {
      return -1;
    }
    out[o++] = c;
  }
  out[o] = '\0';
  return (long)o;
}

char *tp__pct_decode(const char *s, size_t n, int plus) {
  char *out = sbx_malloc(n + 1);
  if (out != NULL && tp__pct_decode_to(out, s, n, plus) < 0) {
    sbx_free(out);
    out = NULL;
  }
  return out;
}

int tp__route_compile(struct tp_route *rt) {
  const char *p = rt->pattern + 1;
  size_t cap = 1;
  for (const char *q = p; *q; q++)
    if (*q == '/')
      cap++;
  if (cap > TP_ROUTE_MAX_SEGS)
    return SBX_EINVAL;
  rt->segs = sbx_calloc(cap, sizeof(char *));
  rt->seg_param = sbx_calloc(cap, sizeof(*rt->seg_param));
  rt->seg_len = sbx_calloc(cap, sizeof(*rt->seg_len));
  if (rt->segs == NULL || rt->seg_param == NULL || rt->seg_len == NULL)
    return SBX_ENOMEM;
  rt->literal = 1;
  for (;;) {
    const char *slash = strchr(p, '/');
    size_t sl = slash ? (size_t)(slash - p) : strlen(p);
    char *seg = sbx_strndup(p, sl);
    if (seg == NULL)
      return SBX_ENOMEM;
    rt->seg_len[rt->nsegs] = sl;
    rt->segs[rt->nsegs++] = seg;
    if (sl >= 2 && seg[0] == '{' && seg[sl - 1] == '}') {
      rt->literal = 0;
      rt->seg_param[rt->nsegs - 1] = 1;
      if (sl >= 3 && seg[sl - 2] == '*') {
        if (slash)
          return SBX_EINVAL; /* {name*} only as the last segment */
        rt->rest = 1;
      }
    } else if (strchr(seg, '{') || strchr(seg, '}')) {
      return SBX_EINVAL;
    }
    if (!slash)
      break;
    p = slash + 1;
  }
  return 0;
}

void tp__route_free(struct tp_route *rt) {
  for (size_t i = 0; i < rt->nsegs; i++)
    sbx_free(rt->segs[i]);
  sbx_free(rt->segs);
  sbx_free(rt->seg_param);
  sbx_free(rt->seg_len);
  sbx_free(rt->method);
  sbx_free(rt->pattern);
}

static int add_param(struct tp_req *r, const char *seg, const char *v, size_t vl) {
  if (r->nparams == SBX_ARRAY_SIZE(r->params))
    return -1;
  size_t nl = strlen(seg) - 2;
  if (seg[nl] == '*')
    nl--;
  char *name = tp__req_strndup(r, seg + 1, nl);
  char *val = tp__req_decode(r, v, vl, 0);
  if (!name || !val)
    return -1;
  r->params[r->nparams].name = name;
  r->params[r->nparams].value = val;
  r->nparams++;
  return 0;
}

/* Is the raw (percent-encoded) segment [p, p+n) equal to the literal `lit` once decoded? */
static int seg_eq_pct(const char *p, size_t n, const char *lit) {
  size_t i = 0;
  for (; i < n; lit++) {
    if (*lit == '\0')
      return 0;
    char c = p[i];
    if (c == '%') {
      int h, l;
      if (i + 2 >= n)
        return 0;
      if ((h = hexval(p[i + 1])) < 0 || (l = hexval(p[i + 2])) < 0)
        return 0;
      c = (char)(h * 16 + l);
      i += 3;
    } else {
      i++;
    }
    if (c != *lit)
      return 0;
  }
  return *lit == '\0';
}

/* The request path split once at '/' (raw, undecoded): every route is compared against this
 * table, so a route that has another number of segments costs one comparison, and a literal
 * segment without '%' one length test and a memcmp.  No allocation. */
struct split {
  struct {
    const char *p;
    size_t len;
    int pct; /* holds a '%': compared decoded */
  } seg[TP_ROUTE_MAX_SEGS];
  size_t n;        /* segments in the path (may be more than the table holds) */
  const char *end; /* the path's terminating NUL */
};

static void split_path(const char *path, struct split *sp) {
  const char *p = path + 1, *start = p;
  int pct = 0;
  sp->n = 0;
  for (;; p++) {
    char c = *p;
    if (c == '/' || c == '\0') {
      if (sp->n < TP_ROUTE_MAX_SEGS) {
        sp->seg[sp->n].p = start;
        sp->seg[sp->n].len = (size_t)(p - start);
        sp->seg[sp->n].pct = pct;
      }
      sp->n++;
      if (c == '\0')
        break;
      start = p + 1;
      pct = 0;
    } else if (c == '%') {
      pct = 1;
    }
  }
  sp->end = p;
}

/* Segments are short: a plain loop, which mostly stops at the first byte, beats a call. */
static int bytes_eq(const char *a, const char *b, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (a[i] != b[i])
      return 0;
  return 1;
}

/* Does `rt` match the split path?  Fills r's params when r is given (0 and params cleared when
 * they do not fit or there is no memory).  The caller checked count_ok.  Literal segments are
 * compared last first: routes sharing a prefix ("/v1/runs/{run}/...") differ at their end. */
static int route_matches(const struct tp_route *rt, const struct split *sp, struct tp_req *r) {
  size_t last = rt->nsegs - 1;
  for (size_t i = rt->nsegs; i-- > 0;) {
    const char *p = sp->seg[i].p;
    size_t pl = rt->rest && i == last ? (size_t)(sp->end - p) : sp->seg[i].len;
    if (rt->seg_param[i]) {
      if (pl == 0)
        return 0;
    } else if (sp->seg[i].pct ? !seg_eq_pct(p, pl, rt->segs[i])
                              : pl != rt->seg_len[i] || !bytes_eq(p, rt->segs[i], pl)) {
      return 0;
    }
  }
  if (r == NULL || rt->literal)
    return 1;
  for (size_t i = 0; i < rt->nsegs; i++) {
    if (!rt->seg_param[i])
      continue;
    const char *p = sp->seg[i].p;
    size_t pl = rt->rest && i == last ? (size_t)(sp->end - p) : sp->seg[i].len;
    if (add_param(r, rt->segs[i], p, pl) != 0) {
      r->nparams = 0; /* their strings stay in the request's arena until it goes */
      return 0;
    }
  }
  return 1;
}

/* As many segments as the route takes (at least as many for a {name*} route): most routes fail
 * here, before a call. */
static inline int count_ok(const struct tp_route *rt, const struct split *sp) {
  return rt->rest ? sp->n >= rt->nsegs : sp->n == rt->nsegs;
}

static int method_ok(const struct tp_route *rt, const char *method, int is_head) {
  return strcmp(rt->method, method) == 0 || (is_head && strcmp(rt->method, "GET") == 0);
}

/* One pass over the routes for the hit: the path is matched first (most routes fail on their
 * number of segments or their first one), the method after; literal routes win over parametrised
 * ones, then registration order.  Only a miss makes a second pass, for the Allow list of the
 * routes that match with another method. */
const struct tp_route *tp__route_match(const struct tp_server *s, const char *method,
                                       const char *path, struct tp_req *r, char *allow,
                                       size_t allow_len, int *status) {
  allow[0] = '\0';
  if (path[0] != '/') {
    *status = 404;
    return NULL;
  }
  struct split sp;
  split_path(path, &sp);
  int is_head = strcmp(method, "HEAD") == 0;
  const struct tp_route *param_hit = NULL;
  for (size_t i = 0; i < s->nroutes; i++) {
    const struct tp_route *rt = &s->routes[i];
    if (!count_ok(rt, &sp) || !route_matches(rt, &sp, NULL) || !method_ok(rt, method, is_head))
      continue;
    if (rt->literal) {
      param_hit = rt;
      break;
    }
    if (param_hit == NULL)
      param_hit = rt;
  }
  if (param_hit) {
    if (r && !route_matches(param_hit, &sp, r)) {
      *status = 500; /* out of memory for the parameters */
      return NULL;
    }
    *status = 0;
    return param_hit;
  }
  size_t used = 0;
  for (size_t i = 0; i < s->nroutes; i++) {
    const struct tp_route *rt = &s->routes[i];
    if (!count_ok(rt, &sp) || !route_matches(rt, &sp, NULL) || strstr(allow, rt->method))
      continue;
    int n = snprintf(allow + used, allow_len - used, "%s%s", used ? ", " : "", rt->method);
    if (n > 0 && (size_t)n < allow_len - used)
      used += (size_t)n;
  }
  *status = used ? 405 : 404;
  return NULL;
}

const char *tp__status_text(int st) {
  switch (st) {
  case 100:
    return "Continue";
  case 200:
    return "OK";
  case 201:
    return "Created";
  case 202:
    return "Accepted";
  case 204:
    return "No Content";
  case 206:
    return "Partial Content";
  case 301:
    return "Moved Permanently";
  case 302:
    return "Found";
  case 304:
    return "Not Modified";
  case 400:
    return "Bad Request";
  case 401:
    return "Unauthorized";
  case 403:
    return "Forbidden";
  case 404:
    return "Not Found";
  case 405:
    return "Method Not Allowed";
  case 408:
    return "Request Timeout";
  case 409:
    return "Conflict";
  case 411:
    return "Length Required";
  case 412:
    return "Precondition Failed";
  case 413:
    return "Content Too Large";
  case 414:
    return "URI Too Long";
  case 416:
    return "Range Not Satisfiable";
  case 417:
    return "Expectation Failed";
  case 429:
    return "Too Many Requests";
  case 431:
    return "Request Header Fields Too Large";
  case 500:
    return "Internal Server Error";
  case 501:
    return "Not Implemented";
  case 502:
    return "Bad Gateway";
  case 503:
    return "Service Unavailable";
  case 504:
    return "Gateway Timeout";
  case 505:
    return "HTTP Version Not Supported";
  default:
    return "Unknown";
  }
}

const char *tp__mime_type(const char *path) {
  static const struct {
    const char *ext, *type;
  } t[] = {
      {".html", "text/html; charset=utf-8"},
      {".htm", "text/html; charset=utf-8"},
      {".js", "text/javascript; charset=utf-8"},
      {".mjs", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},
      {".json", "application/json"},
      {".map", "application/json"},
      {".wasm", "application/wasm"},
      {".svg", "image/svg+xml"},
      {".png", "image/png"},
      {".jpg", "image/jpeg"},
      {".jpeg", "image/jpeg"},
      {".gif", "image/gif"},
      {".webp", "image/webp"},
      {".ico", "image/x-icon"},
      {".txt", "text/plain; charset=utf-8"},
      {".md", "text/markdown; charset=utf-8"},
      {".py", "text/x-python; charset=utf-8"},
      {".pdf", "application/pdf"},
      {".zip", "application/zip"},
      {".whl", "application/zip"},
      {".tar", "application/x-tar"},
      {".woff2", "font/woff2"},
      {".woff", "font/woff"},
      {".xml", "application/xml"},
      {".csv", "text/csv; charset=utf-8"},
  };
  const char *dot = strrchr(path, '.');
  const char *slash = strrchr(path, '/');
  if (dot && (!slash || dot > slash))
    for (size_t i = 0; i < SBX_ARRAY_SIZE(t); i++)
      if (strcasecmp(dot, t[i].ext) == 0)
        return t[i].type;
  return "application/octet-stream";
}
