/* static.c -- files under a mounted directory: MIME type by extension, a strong ETag from size
 * and modification time, If-None-Match (304), single byte ranges (206/416, If-Range), the
 * precompressed FILE.br / FILE.gz variants chosen by Accept-Encoding (Vary: Accept-Encoding), and
 * index.html for a directory.  It never redirects (a redirect under /pyodide/ would escape the
 * kernel's path-limited connect-src) and refuses `..`, NUL and backslashes with 404.
 *
 * What it does not do: directory listings, multiple ranges (answered with the whole file),
 * on-the-fly compression.  Files are opened and read synchronously on the loop thread: they are
 * local static assets; reads are 64 KiB chunks paced by the socket (req.c's file pump).
 *
 * Open files (and misses, such as an absent .br variant) are kept in a small cache and
 * revalidated with one stat() when older than a second (inode, size and mtime must match), so a
 * hot file costs a dup() and a pread() instead of a path walk, an open, an fstat and a close.
 * A file replaced on disk is seen within a second.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define FC_SLOTS  256
#define FC_TTL_MS 1000

#define FC_SMALL (32 * 1024) /* files up to this size are kept in memory too */

struct fc_ent {
  char *path;
  int fd; /* -1: a miss, errno in err */
  int err;
  char *data;    /* the bytes of a small regular file, else NULL */
  char etag[64]; /* strong: size and mtime in ns, plus the coding of a variant file */
  struct stat st;
  uint64_t checked;
};

struct tp_fcache {
  struct fc_ent e[FC_SLOTS];
};

void tp__fcache_free(struct tp_fcache *fc) {
  if (fc == NULL)
    return;
  for (size_t i = 0; i < FC_SLOTS; i++) {
    if (fc->e[i].fd >= 0)
      close(fc->e[i].fd);
    sbx_free(fc->e[i].path);
    sbx_free(fc->e[i].data);
  }
  sbx_free(fc);
}

static uint32_t fc_hash(const char *p) {
  uint32_t h = 2166136261u; /* FNV-1a */
  for (; *p; p++)
    h = (h ^ (unsigned char)*p) * 16777619u;
  return h;
}

static void fc_fill(struct fc_ent *e, const char *path, uint64_t now) {
  if (e->fd >= 0)
    close(e->fd);
  sbx_free(e->data);
  e->data = NULL;
  e->fd = open(path, O_RDONLY | O_CLOEXEC);
  e->err = e->fd < 0 ? errno : 0;
  if (e->fd >= 0 && fstat(e->fd, &e->st) != 0) {
    e->err = errno;
    close(e->fd);
    e->fd = -1;
  }
  e->checked = now;
  if (e->fd >= 0) {
    size_t pl = strlen(path);
    const char *suffix = pl > 3 && strcmp(path + pl - 3, ".br") == 0   ? "-br"
                         : pl > 3 && strcmp(path + pl - 3, ".gz") == 0 ? "-gzip"
                                                                       : "";
    snprintf(e->etag, sizeof(e->etag), "\"%llx-%llx%s\"", (unsigned long long)e->st.st_size,
             (unsigned long long)e->st.st_mtim.tv_sec * 1000000000ull +
                 (unsigned long long)e->st.st_mtim.tv_nsec,
             suffix);
  }
  if (e->fd >= 0 && S_ISREG(e->st.st_mode) && e->st.st_size <= FC_SMALL) {
    size_t n = (size_t)e->st.st_size;
    e->data = sbx_malloc(n + 1);
    if (e->data && pread(e->fd, e->data, n, 0) != (ssize_t)n) {
      sbx_free(e->data); /* changed under us: serve from the descriptor */
      e->data = NULL;
    }
  }
}

/* Looks `path` up through the cache: the entry (borrowed until the next lookup), or NULL with
 * errno set. */
static const struct fc_ent *fc_get(struct tp_server *s, const char *path) {
  static struct fc_ent nocache; /* used when the cache cannot be allocated */
  if (s->fcache == NULL) {
    s->fcache = sbx_calloc(1, sizeof(*s->fcache));
    if (s->fcache == NULL) {
      if (nocache.fd >= 0 && nocache.path != NULL)
        close(nocache.fd);
      nocache.path = (char *)"";
      nocache.fd = -1;
      fc_fill(&nocache, path, 0);
      errno = nocache.err;
      return nocache.fd >= 0 ? &nocache : NULL;
    }
    for (size_t i = 0; i < FC_SLOTS; i++)
      s->fcache->e[i].fd = -1;
  }
  uint64_t now = uv_now(s->loop);
  struct fc_ent *e = &s->fcache->e[fc_hash(path) % FC_SLOTS];
  if (e->path == NULL || strcmp(e->path, path) != 0) {
    char *copy = sbx_strdup(path);
    if (copy == NULL) {
      errno = ENOMEM;
      return NULL;
    }
    sbx_free(e->path);
    e->path = copy;
    fc_fill(e, path, now);
  } else if (now - e->checked >= FC_TTL_MS) {
    struct stat cur;
    int rc = stat(path, &cur);
    if (rc != 0 || e->fd < 0 || cur.st_ino != e->st.st_ino || cur.st_dev != e->st.st_dev ||
        cur.st_size != e->st.st_size || cur.st_mtim.tv_sec != e->st.st_mtim.tv_sec ||
        cur.st_mtim.tv_nsec != e->st.st_mtim.tv_nsec)
      fc_fill(e, path, now);
    else
      e->checked = now;
  }
  if (e->fd < 0) {
    errno = e->err;
    return NULL;
  }
  return e;
}

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
  if (!path_safe(rel)) {
    tp_respond_error(r, 404, "not_found", "no such file");
    return;
  }
  size_t dl = strlen(m->dir), rl = strlen(rel);
  if (dl + 1 + rl >= sizeof(path) - 16) {
    tp_respond_error(r, 404, "not_found", "no such file");
    return;
  }
  memcpy(path, m->dir, dl);
  path[dl] = '/';
  memcpy(path + dl + 1, rel, rl + 1);
  const struct fc_ent *e = fc_get(r->srv, path);
  if (e && S_ISDIR(e->st.st_mode)) {
    size_t pl = strlen(path);
    snprintf(path + pl, sizeof(path) - pl, "%sindex.html", path[pl - 1] == '/' ? "" : "/");
    e = fc_get(r->srv, path);
  }
  if (e == NULL || !S_ISREG(e->st.st_mode)) {
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
    snprintf(vpath, sizeof(vpath), "%s%s", path, codings[i][1]);
    const struct fc_ent *ve = fc_get(r->srv, vpath);
    if (ve && S_ISREG(ve->st.st_mode)) {
      memcpy(path, vpath, strlen(vpath) + 1);
      enc = codings[i][0];
      break;
    }
  }
  e = fc_get(r->srv, path); /* again: a variant's lookup may have taken the slot */
  if (e == NULL || !S_ISREG(e->st.st_mode)) {
    tp_respond_error(r, 404, "not_found", "no such file");
    return;
  }
  st = e->st;
  const char *etag = e->etag;
  /* The head, by appends (no printf on the hot path). */
  char h[1024];
  size_t hl = 0;
#define H_ADD(str)                                                                                 \
  do {                                                                                             \
    size_t l_ = strlen(str);                                                                       \
    if (hl + l_ < sizeof(h) - 160) {                                                               \
      memcpy(h + hl, (str), l_);                                                                   \
      hl += l_;                                                                                    \
    }                                                                                              \
  } while (0)
  H_ADD("Content-Type: ");
  H_ADD(mime);
  H_ADD("\r\nETag: ");
  H_ADD(etag);
  H_ADD("\r\nCache-Control: ");
  H_ADD(m->cache_control);
  H_ADD("\r\nVary: Accept-Encoding\r\n");
  if (enc) {
    H_ADD("Content-Encoding: ");
    H_ADD(enc);
    H_ADD("\r\n");
  }
#undef H_ADD
  h[hl] = '\0';
  if (etag_listed(tp_req_header(r, "If-None-Match"), etag)) {
    tp_respond(r, 304, h, NULL, 0);
    return;
  }
  uint64_t size = (uint64_t)st.st_size, start = 0, len = size;
  int status = 200;
  if (!enc) {
    memcpy(h + hl, "Accept-Ranges: bytes\r\n", 23); /* room kept by H_ADD */
    hl += 22;
    const char *ifr = tp_req_header(r, "If-Range");
    if (range && (!ifr || strcmp(ifr, etag) == 0)) {
      int pr = tp__parse_range(range, size, &start, &len);
      if (pr < 0) {
        snprintf(h + hl, sizeof(h) - hl, "Content-Range: bytes */%llu\r\n",
                 (unsigned long long)size);
        tp_respond(r, 416, h, NULL, 0);
        return;
      }
      if (pr > 0) {
        status = 206;
        snprintf(h + hl, sizeof(h) - hl, "Content-Range: bytes %llu-%llu/%llu\r\n",
                 (unsigned long long)start, (unsigned long long)(start + len - 1),
                 (unsigned long long)size);
      }
    }
  }
  if (e->data) { /* small file: from memory, no system call */
    tp_respond(r, status, h, e->data + start, (size_t)len);
    return;
  }
  int fd = fcntl(e->fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) {
    tp_respond_error(r, 503, "unavailable", "cannot open file");
    return;
  }
  tp__respond_fd(r, fd, status, h, start, len);
}
