/* static.c -- files under a mounted directory: MIME type by extension, a strong ETag from size
 * and modification time, If-None-Match (304), single byte ranges (206/416, If-Range), the
 * precompressed FILE.br / FILE.gz variants chosen by Accept-Encoding (Vary: Accept-Encoding), and
 * index.html for a directory.  It never redirects (a redirect under /pyodide/ would escape the
 * kernel's path-limited connect-src) and refuses `..`, NUL and backslashes with 404.
 *
 * What it does not do: directory listings, multiple ranges (answered with the whole file),
 * on-the-fly compression.  Files are opened and read synchronously on the loop thread: they are
 * local static assets; reads are 64 KiB chunks paced by the socket (req.c's file pump).
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

int tp__parse_range(const char *h, uint64_t size, uint64_t *start, uint64_t *len);
int tp__respond_fd(struct tp_req *r, int fd, int status, const char *headers, uint64_t off,
                   uint64_t len);

/* Does the Accept-Encoding value accept `coding` (q > 0)? */
static int accepts(const char *ae, const char *coding) {
  if (ae == NULL)
    return 0;
  size_t cl = strlen(coding);
  const char *p = ae;
  while (*p) {
    while (*p == ' ' || *p == ',')
      p++;
    const char *end = p;
    while (*end && *end != ',')
      end++;
    size_t tl = 0;
    while (p + tl < end && p[tl] != ';' && p[tl] != ' ')
      tl++;
    if (tl == cl && strncasecmp(p, coding, cl) == 0) {
      const char *q = strstr(p, "q=");
      if (q && q < end) {
        double v = strtod(q + 2, NULL);
        return v > 0;
      }
      return 1;
    }
    p = end;
  }
  return 0;
}

/* Is `etag` in the If-None-Match list (weak comparison)? */
static int etag_listed(const char *inm, const char *etag) {
  if (inm == NULL)
    return 0;
  const char *e = etag[0] == 'W' ? etag + 2 : etag;
  size_t el = strlen(e);
  const char *p = inm;
  while (*p) {
    while (*p == ' ' || *p == ',')
      p++;
    if (*p == '*')
      return 1;
    if (p[0] == 'W' && p[1] == '/')
      p += 2;
    if (strncmp(p, e, el) == 0 && (p[el] == '\0' || p[el] == ',' || p[el] == ' '))
      return 1;
    while (*p && *p != ',')
      p++;
  }
  return 0;
}

static int path_safe(const char *rel) {
  if (strchr(rel, '\\'))
    return 0;
  const char *p = rel;
  for (;;) {
    const char *slash = strchr(p, '/');
    size_t sl = slash ? (size_t)(slash - p) : strlen(p);
    if ((sl == 2 && p[0] == '.' && p[1] == '.') || (sl == 1 && p[0] == '.'))
      return 0;
    if (!slash)
      return 1;
    p = slash + 1;
  }
}

void tp__static_serve(struct tp_req *r, const struct tp_mount *m) {
  const char *rel = r->path + strlen(m->prefix);
  char path[4096];
  struct stat st;
  int n;
  if (!path_safe(rel)) {
    tp_respond_error(r, 404, "not_found", "no such file");
    return;
  }
  n = snprintf(path, sizeof(path), "%s/%s", m->dir, rel);
  if (n < 0 || (size_t)n >= sizeof(path) - 16) {
    tp_respond_error(r, 404, "not_found", "no such file");
    return;
  }
  /* open + fstat rather than stat + open: fewer path walks per request. */
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd >= 0 && fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    close(fd);
    size_t pl = strlen(path);
    snprintf(path + pl, sizeof(path) - pl, "%sindex.html", path[pl - 1] == '/' ? "" : "/");
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0 && fstat(fd, &st) != 0) {
      close(fd);
      fd = -1;
    }
  }
  if (fd < 0 || !S_ISREG(st.st_mode)) {
    if (fd >= 0)
      close(fd);
    tp_respond_error(r, 404, "not_found", "no such file");
    return;
  }
  const char *mime = tp__mime_type(path);
  const char *range = tp_req_header(r, "Range");
  const char *ae = tp_req_header(r, "Accept-Encoding");
  const char *enc = NULL;
  /* Variants: .br first (smaller), then .gz, looked up only when the client takes them.  A Range
   * request gets the identity bytes: ranges of an encoded body confuse more clients than they
   * help.  Vary is sent on every static answer, variant or not (a cache must key on it anyway). */
  static const char *codings[][2] = {{"br", ".br"}, {"gzip", ".gz"}};
  for (size_t i = 0; i < 2 && !range && ae; i++) {
    if (!accepts(ae, codings[i][0]))
      continue;
    char vpath[4096 + 8];
    struct stat vst;
    snprintf(vpath, sizeof(vpath), "%s%s", path, codings[i][1]);
    int vfd = open(vpath, O_RDONLY | O_CLOEXEC);
    if (vfd < 0)
      continue;
    if (fstat(vfd, &vst) == 0 && S_ISREG(vst.st_mode)) {
      close(fd);
      fd = vfd;
      st = vst;
      enc = codings[i][0];
      break;
    }
    close(vfd);
  }
  char etag[96];
  snprintf(etag, sizeof(etag), "\"%llx-%llx%s%s\"", (unsigned long long)st.st_size,
           (unsigned long long)st.st_mtim.tv_sec * 1000000000ull + (unsigned long long)st.st_mtim.tv_nsec,
           enc ? "-" : "", enc ? enc : "");
  char h[1024];
  int hl = snprintf(h, sizeof(h),
                    "Content-Type: %s\r\nETag: %s\r\nCache-Control: %s\r\nVary: Accept-Encoding\r\n%s%s%s",
                    mime, etag, m->cache_control, enc ? "Content-Encoding: " : "", enc ? enc : "",
                    enc ? "\r\n" : "");
  if (hl < 0 || (size_t)hl >= sizeof(h) - 128) {
    close(fd);
    tp_respond_error(r, 500, "internal", "header too long");
    return;
  }
  if (etag_listed(tp_req_header(r, "If-None-Match"), etag)) {
    close(fd);
    tp_respond(r, 304, h, NULL, 0);
    return;
  }
  uint64_t size = (uint64_t)st.st_size, start = 0, len = size;
  int status = 200;
  if (!enc) {
    hl += snprintf(h + hl, sizeof(h) - (size_t)hl, "Accept-Ranges: bytes\r\n");
    const char *ifr = tp_req_header(r, "If-Range");
    if (range && (!ifr || strcmp(ifr, etag) == 0)) {
      int pr = tp__parse_range(range, size, &start, &len);
      if (pr < 0) {
        close(fd);
        snprintf(h + hl, sizeof(h) - (size_t)hl, "Content-Range: bytes */%llu\r\n",
                 (unsigned long long)size);
        tp_respond(r, 416, h, NULL, 0);
        return;
      }
      if (pr > 0) {
        status = 206;
        snprintf(h + hl, sizeof(h) - (size_t)hl, "Content-Range: bytes %llu-%llu/%llu\r\n",
                 (unsigned long long)start, (unsigned long long)(start + len - 1),
                 (unsigned long long)size);
      }
    }
  }
  tp__respond_fd(r, fd, status, h, start, len);
}
