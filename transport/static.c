/* static.c -- files under a mounted directory: MIME type by extension, a strong ETag from size
 * and modification time, If-None-Match (304), single byte ranges (206/416, If-Range), the
 * precompressed FILE.br / FILE.gz variants chosen by Accept-Encoding (Vary: Accept-Encoding), and
 * index.html for a directory.  It never redirects (a redirect under /pyodide/ would escape the
 * kernel's path-limited connect-src) and refuses `..`, NUL and backslashes with 404.
 *
 * What it does not do: directory listings, multiple ranges (answered with the whole file),
 * on-the-fly compression.  Files are opened and read synchronously on the loop thread: they are
 * local static assets; reads are at most 64 KiB, paced by what the peer takes (req.c's file
 * pump).
 *
 * The file cache (also behind tp_respond_file): open files, and misses such as an absent .br
 * variant, revalidated with one stat() when older than a second (inode, size and mtime must
 * match), so a hot file costs a pread() instead of a path walk, an open, an fstat and a close.
 * A file replaced on disk is seen within a second.  An open file (struct tp_file) is shared: the
 * cache holds one reference and each answer reading it another, so a thousand answers of the same
 * file hold one descriptor, and a file replaced meanwhile stays open until its last answer ends.
 * Opening one takes a descriptor of the server's budget; past it the answer is 503 (try again).
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
  struct tp_file *file; /* the cache's reference; NULL: a miss, errno in err */
  int err;
  char *data;    /* the bytes of a small regular file, else NULL */
  char etag[64]; /* strong: size and mtime in ns, plus the coding of a variant file */
  struct stat st;
  uint64_t checked;
};

struct tp_fcache {
  struct fc_ent e[FC_SLOTS];
};

void tp__file_ref(struct tp_file *f) { f->refs++; }

void tp__file_unref(struct tp_file *f) {
  if (--f->refs > 0)
    return;
  close(f->fd);
  tp__fd_add(f->srv, -1);
  sbx_free(f);
}

/* Opens `path` as a shared file (one reference), within the descriptor budget; NULL with errno
 * set (EMFILE at the budget). */
static struct tp_file *file_new(struct tp_server *s, const char *path) {
  if (!tp__fd_room(s, 1)) {
    errno = EMFILE;
    return NULL;
  }
  struct tp_file *f = sbx_malloc(sizeof(*f));
  if (f == NULL) {
    errno = ENOMEM;
    return NULL;
  }
  f->fd = open(path, O_RDONLY | O_CLOEXEC);
  if (f->fd < 0) {
    int e = errno;
    sbx_free(f);
    errno = e;
    return NULL;
  }
  f->refs = 1;
  f->srv = s;
  tp__fd_add(s, 1);
  return f;
}

void tp__fcache_free(struct tp_fcache *fc) {
  if (fc == NULL)
    return;
  for (size_t i = 0; i < FC_SLOTS; i++) {
    if (fc->e[i].file)
      tp__file_unref(fc->e[i].file);
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

static void fc_fill(struct tp_server *s, struct fc_ent *e, const char *path, uint64_t now) {
  if (e->file)
    tp__file_unref(e->file); /* answers still sending it keep it open */
  sbx_free(e->data);
  e->data = NULL;
  e->file = file_new(s, path);
  e->err = e->file ? 0 : errno;
  if (e->file && fstat(e->file->fd, &e->st) != 0) {
    e->err = errno;
    tp__file_unref(e->file);
    e->file = NULL;
  }
  e->checked = now;
  if (e->file) {
    size_t pl = strlen(path);
    const char *suffix = pl > 3 && strcmp(path + pl - 3, ".br") == 0   ? "-br"
                         : pl > 3 && strcmp(path + pl - 3, ".gz") == 0 ? "-gzip"
                                                                       : "";
    snprintf(e->etag, sizeof(e->etag), "\"%llx-%llx%s\"", (unsigned long long)e->st.st_size,
             (unsigned long long)e->st.st_mtim.tv_sec * 1000000000ull +
                 (unsigned long long)e->st.st_mtim.tv_nsec,
             suffix);
  }
  if (e->file && S_ISREG(e->st.st_mode) && e->st.st_size <= FC_SMALL) {
    size_t n = (size_t)e->st.st_size;
    e->data = sbx_malloc(n + 1);
    if (e->data && pread(e->file->fd, e->data, n, 0) != (ssize_t)n) {
      sbx_free(e->data); /* changed under us: serve from the descriptor */
      e->data = NULL;
    }
  }
}

/* Looks `path` up through the cache: the entry (borrowed until the next lookup), or NULL with
 * errno set (EMFILE at the descriptor budget). */
static const struct fc_ent *fc_get(struct tp_server *s, const char *path) {
  if (s->fcache == NULL && (s->fcache = sbx_calloc(1, sizeof(*s->fcache))) == NULL) {
    errno = ENOMEM;
    return NULL;
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
    fc_fill(s, e, path, now);
  } else if (now - e->checked >= FC_TTL_MS || (e->file == NULL && e->err == EMFILE)) {
    struct stat cur;
    int rc = stat(path, &cur);
    if (rc != 0 || e->file == NULL || cur.st_ino != e->st.st_ino || cur.st_dev != e->st.st_dev ||
        cur.st_size != e->st.st_size || cur.st_mtim.tv_sec != e->st.st_mtim.tv_sec ||
        cur.st_mtim.tv_nsec != e->st.st_mtim.tv_nsec)
      fc_fill(s, e, path, now);
    else
      e->checked = now;
  }
  if (e->file == NULL) {
    errno = e->err;
    return NULL;
  }
  return e;
}

static int errno_code(int e) {
  if (e == EMFILE || e == ENFILE)
    return SBX_EBUSY;
  return e == ENOENT || e == ENOTDIR ? SBX_ENOENT : e == ENOMEM ? SBX_ENOMEM : SBX_EIO;
}

int tp__file_open(struct tp_server *s, const char *path, struct tp_file **f, struct stat *st,
                  char *etag, const char **small) {
  const struct fc_ent *e = fc_get(s, path);
  if (e == NULL)
    return errno_code(errno);
  if (!S_ISREG(e->st.st_mode))
    return S_ISDIR(e->st.st_mode) ? SBX_ENOENT : SBX_EIO;
  tp__file_ref(e->file);
  *f = e->file;
  *st = e->st;
  memcpy(etag, e->etag, sizeof(e->etag));
  *small = e->data;
  return 0;
}

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

int tp_etag_listed(const char *inm, const char *etag) {
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

/* A file that cannot be served: 503 (try again) at the descriptor budget, else 404. */
static void not_served(struct tp_req *r, int err) {
  if (err == EMFILE || err == ENFILE)
    tp__refuse(r, TP_R_BUSY_FILES);
  else
    tp_respond_error(r, 404, "not_found", "no such file");
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
    not_served(r, e == NULL ? errno : 0);
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
    not_served(r, e == NULL ? errno : 0);
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
  if (tp_etag_listed(tp_req_header(r, "If-None-Match"), etag)) {
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
  tp__file_ref(e->file); /* the cache's descriptor, shared: no descriptor per answer */
  tp__respond_file_at(r, e->file, status, h, start, len);
}
