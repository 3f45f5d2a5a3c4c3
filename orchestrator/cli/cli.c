/* cli.c -- `cerea-sandbox run` and `cerea-sandbox status`: small API clients for operators.
 *
 *   cerea-sandbox run    [options] [FILE|-]
 *   cerea-sandbox status [--url URL] [--key KEY] [--data DIR]
 *   cerea-sandbox user add NAME [--admin] [--url URL] [--key KEY] [--data DIR]
 *
 * orch_cli_usage() lists every flag (FLAGS below); an unknown one is refused with the usage.  URL
 * is http://HOST:PORT (default http://127.0.0.1:8080) or unix:PATH; the key comes from --key,
 * CEREA_API_KEY, or DIR/api_key (default ./var).  `run` checks what it can before it changes
 * anything (the flags, the script, every --attach file, the key, that the server answers), then
 * creates a chat unless --chat is given, uploads the --attach files (each printed with its name
 * and, when left out, why), posts the code, and follows the run's event stream
 * (GET /v1/runs/{run}/events) until its end (or --wait S): what the run prints goes out as it
 * arrives, stdout on stdout and stderr on stderr, each display() as its text on stdout (a run
 * started again as a new attempt says so and prints from its start); at the end the rest of the
 * run's stdout, stderr and displays (what the stream did not carry: the result's own text, or
 * what a time limit, a cancel or a crash kept), the cell's value as its text on stdout (as
 * Python's prompt shows it), the traceback of a Python error, notes, the restart and a status
 * line on stderr.  When the code calls input(), a line of standard input answers it (when the
 * script came from a FILE, not from standard input); its prompt came with stdout.  A server without the run stream is polled.  --out DIR saves the run's artifacts there (their relative names; never
 * outside DIR).  A chat's page token is a capability: it is printed only when asked (--page-url).
 * Exit status (CLI_EXIT_*): 0 ok, 1 the code raised, 124 time limit, 130 cancelled, 3 crashed /
 * abandoned / rejected, 4 --wait ran out (the run goes on), 2 usage, connection or API errors.
 * `status` prints /healthz and, with a key, the live runs, pages and settings (exit 0 healthy,
 * 1 degraded, 2 unreachable or key refused).
 *
 * What it is not: a general HTTP client.  Plain HTTP/1.1 over a blocking socket with
 * `Connection: close` (no TLS: point it at a local cleartext or unix: listener).
 */
#include "internal.h"
#include "orch_notes.h" /* the sentences a user reads, from worker/notes.js */

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

struct cli {
  char host[256];
  char port[16];
  char unix_path[108];
  char *key;
};

static int cli_connect(const struct cli *c) {
  if (c->unix_path[0]) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", c->unix_path);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
      return fd;
    if (fd >= 0)
      close(fd);
    return -1;
  }
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res, *ai;
  if (getaddrinfo(c->host, c->port, &hints, &res) != 0)
    return -1;
  int fd = -1;
  for (ai = res; ai; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
      break;
    if (fd >= 0)
      close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  return fd;
}

/* One request with a body of blen bytes (binary-safe); *status and the answer's body (owned,
 * NUL-terminated, *out_len bytes when out_len is given) on success. */
static int cli_request(const struct cli *c, const char *method, const char *path, const char *ctype,
                       const char *body, size_t blen, int *status, char **out, size_t *out_len) {
  int fd = cli_connect(c);
  if (fd < 0) {
    fprintf(stderr, "cerea-sandbox: cannot connect to %s%s%s: %s\n",
            c->unix_path[0] ? "unix:" : c->host, c->unix_path[0] ? c->unix_path : ":",
            c->unix_path[0] ? "" : c->port, strerror(errno));
    return -1;
  }
  struct sbx_buf req;
  sbx_buf_init(&req, 64u << 20);
  sbx_buf_appendf(&req,
                  "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\nContent-Length: %zu\r\n",
                  method, path, c->unix_path[0] ? "localhost" : c->host, blen);
  if (c->key)
    sbx_buf_appendf(&req, "Authorization: Bearer %s\r\n", c->key);
  if (body && ctype)
    sbx_buf_appendf(&req, "Content-Type: %s\r\n", ctype);
  sbx_buf_append(&req, "\r\n", 2);
  if (body)
    sbx_buf_append(&req, body, blen);
  size_t off = 0;
  while (off < req.len) {
    ssize_t n = write(fd, req.data + off, req.len - off);
    if (n <= 0) {
      close(fd);
      sbx_buf_free(&req);
      return -1;
    }
    off += (size_t)n;
  }
  sbx_buf_free(&req);
  struct sbx_buf resp;
  sbx_buf_init(&resp, 64u << 20);
  char chunk[16384];
  ssize_t n;
  while ((n = read(fd, chunk, sizeof(chunk))) > 0)
    if (sbx_buf_append(&resp, chunk, (size_t)n) != 0)
      break;
  close(fd);
  char *hdr_end = resp.data ? strstr(resp.data, "\r\n\r\n") : NULL;
  if (hdr_end == NULL || sscanf(resp.data, "HTTP/1.%*d %d", status) != 1) {
    fprintf(stderr, "cerea-sandbox: malformed answer from the server\n");
    sbx_buf_free(&resp);
    return -1;
  }
  /* Bodies come with Content-Length (answers here are never chunked but be safe: de-chunk). */
  const char *b = hdr_end + 4;
  int chunked = strcasestr(resp.data, "transfer-encoding: chunked") != NULL &&
                strcasestr(resp.data, "transfer-encoding: chunked") < hdr_end;
  struct sbx_buf outb;
  sbx_buf_init(&outb, 64u << 20);
  if (!chunked) {
    sbx_buf_append(&outb, b, resp.len - (size_t)(b - resp.data));
  } else {
    while (*b) {
      unsigned long sz = strtoul(b, NULL, 16);
      const char *d = strstr(b, "\r\n");
      if (sz == 0 || d == NULL)
        break;
      d += 2;
      if ((size_t)(d - resp.data) + sz > resp.len)
        break;
      sbx_buf_append(&outb, d, sz);
      b = d + sz + 2;
    }
  }
  sbx_buf_free(&resp);
  *out = sbx_buf_steal(&outb, out_len);
  return 0;
}

static int cli_http(const struct cli *c, const char *method, const char *path, const char *body,
                    int *status, char **out) {
  return cli_request(c, method, path, "application/json", body, body ? strlen(body) : 0, status,
                     out, NULL);
}

static int parse_url(struct cli *c, const char *url) {
  if (strncmp(url, "unix:", 5) == 0) {
    snprintf(c->unix_path, sizeof(c->unix_path), "%s", url + 5);
    return 0;
  }
  if (strncmp(url, "http://", 7) == 0)
    url += 7;
  else if (strstr(url, "://") != NULL)
    return -1; /* https: not supported here */
  const char *colon = strrchr(url, ':'), *slash = strchr(url, '/');
  size_t hl = colon ? (size_t)(colon - url) : (slash ? (size_t)(slash - url) : strlen(url));
  if (hl == 0 || hl >= sizeof(c->host))
    return -1;
  memcpy(c->host, url, hl);
  c->host[hl] = '\0';
  if (colon)
    snprintf(c->port, sizeof(c->port), "%.*s", (int)strcspn(colon + 1, "/"), colon + 1);
  else
    snprintf(c->port, sizeof(c->port), "80");
  return 0;
}

static char *read_all(FILE *f) {
  struct sbx_buf b;
  sbx_buf_init(&b, 16u << 20);
  char tmp[8192];
  size_t n;
  while ((n = fread(tmp, 1, sizeof(tmp), f)) > 0)
    if (sbx_buf_append(&b, tmp, n) != 0) {
      sbx_buf_free(&b);
      return NULL;
    }
  return sbx_buf_steal(&b, NULL);
}

/* Is name a relative path of plain segments (no empty, "." or ".." segment, no control bytes)?
 * The server normalizes output names already; the CLI checks again since it writes to disk. */
static int artifact_name_ok(const char *name) {
  if (name == NULL || *name == '\0' || *name == '/')
    return 0;
  for (const char *seg = name;;) {
    const char *end = strchr(seg, '/');
    size_t n = end ? (size_t)(end - seg) : strlen(seg);
    if (n == 0 || (n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.'))
      return 0;
    for (size_t i = 0; i < n; i++)
      if ((unsigned char)seg[i] < 0x20 || seg[i] == 0x7f)
        return 0;
    if (end == NULL)
      return 1;
    seg = end + 1;
  }
}

/* Opens dir/name for writing without leaving dir: each folder is made and entered with openat
 * and O_NOFOLLOW, so a symlink already inside dir cannot send the write elsewhere.  fd or -1. */
static int open_inside(const char *dir, const char *name) {
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  char seg[4096];
  const char *p = name;
  while (dfd >= 0) {
    const char *slash = strchr(p, '/');
    size_t n = slash ? (size_t)(slash - p) : strlen(p);
    if (n >= sizeof(seg)) {
      close(dfd);
      return -1;
    }
    memcpy(seg, p, n);
    seg[n] = '\0';
    if (slash == NULL) {
      int fd = openat(dfd, seg, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
      close(dfd);
      return fd;
    }
    mkdirat(dfd, seg, 0755);
    int next = openat(dfd, seg, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    close(dfd);
    dfd = next;
    p = slash + 1;
  }
  return -1;
}

/* ---- flags ----------------------------------------------------------------------------------- */

enum {
  CLI_EXIT_OK = 0,
  CLI_EXIT_RAISED = 1,
  CLI_EXIT_API = 2,
  CLI_EXIT_ENDED = 3,
  CLI_EXIT_WAITED = 4,
  CLI_EXIT_TIMEOUT = 124,
  CLI_EXIT_CANCELLED = 130
};

enum { F_URL, F_KEY, F_DATA, F_CHAT, F_ATTACH, F_OUT, F_TIMEOUT, F_WAIT, F_PAGE_URL, F_HELP, F_N };

/* Every flag of both commands: the parser and the usage read this one table.  `arg` NULL: a
 * switch.  The aliases are the names the first CLI issue used (--server, --api-key). */
static const struct flag {
  const char *name, *alias, *arg, *help;
  int run_only;
} FLAGS[F_N] = {
    [F_URL] = {"--url", "--server", "URL",
               "the server: http://HOST:PORT or unix:PATH (default http://127.0.0.1:8080)", 0},
    [F_KEY] = {"--key", "--api-key", "KEY",
               "the API key (default: CEREA_API_KEY, else DIR/api_key)", 0},
    [F_DATA] = {"--data", NULL, "DIR",
                "the server's data directory, which holds api_key (default ./var)", 0},
    [F_CHAT] = {"--chat", NULL, "ID", "run in this chat instead of a new one", 1},
    [F_ATTACH] = {"--attach", NULL, "FILE",
                  "upload FILE to the chat first, under its base name (repeatable)", 1},
    [F_OUT] = {"--out", NULL, "DIR", "save the run's output files into DIR", 1},
    [F_TIMEOUT] = {"--timeout", NULL, "S",
                   "time limit of the run, 1-300 seconds (default: the server's)", 1},
    [F_WAIT] = {"--wait", NULL, "S", "wait at most S seconds for the end (default: until it ends)",
                1},
    [F_PAGE_URL] = {"--page-url", NULL, NULL,
                    "print the link that opens the new chat in a browser (it holds the page token)",
                    1},
    [F_HELP] = {"--help", "-h", NULL, "this help", 0},
};

#define CLI_ATTACH_MAX 64

struct args {
  const char *val[F_N]; /* each flag's last value ("" for a switch that is set), or NULL */
  const char *attach[CLI_ATTACH_MAX];
  size_t nattach;
  const char *file; /* the script; "-" is standard input */
};

void orch_cli_usage(FILE *f) {
  fputs("usage: cerea-sandbox run [options] [FILE|-]     runs Python (FILE or stdin) in a chat\n"
        "       cerea-sandbox status [--url URL] [--key KEY] [--data DIR]\n"
        "       cerea-sandbox user add NAME [--admin] [--url URL] [--key KEY] [--data DIR]\n"
        "                                                 adds a person; prints their password\n"
        "options:\n",
        f);
  for (size_t i = 0; i < F_N; i++) {
    char name[48];
    snprintf(name, sizeof(name), "%s%s%s", FLAGS[i].name, FLAGS[i].arg ? " " : "",
             FLAGS[i].arg ? FLAGS[i].arg : "");
    fprintf(f, "  %-15s %s%s%s%s\n", name, FLAGS[i].run_only ? "run: " : "", FLAGS[i].help,
            FLAGS[i].alias ? "; also " : "", FLAGS[i].alias ? FLAGS[i].alias : "");
  }
  fputs("exit status of run: 0 ok, 1 the code raised an exception, 124 time limit, 130 cancelled,\n"
        "  3 crashed, abandoned or rejected, 4 --wait ran out (the run goes on on the server),\n"
        "  2 usage, connection or API error (a refused key, a missing file)\n",
        f);
}

/* Does arg[0..n) name the flag? */
static int flag_is(const char *arg, size_t n, const char *name) {
  return name != NULL && strlen(name) == n && strncmp(arg, name, n) == 0;
}

/* Reads argv[2..] into a (borrowed strings).  `--flag value` and `--flag=value`; one positional
 * FILE for run.  0, or -1 with the reason printed (the caller prints the usage). */
static int parse_args(int argc, char **argv, int run, struct args *a) {
  memset(a, 0, sizeof(*a));
  for (int i = 2; i < argc; i++) {
    const char *arg = argv[i];
    if (arg[0] != '-' || strcmp(arg, "-") == 0) {
      if (!run || a->file) {
        fprintf(stderr, "cerea-sandbox %s: unexpected argument %s\n", argv[1], arg);
        return -1;
      }
      a->file = arg;
      continue;
    }
    size_t n = strcspn(arg, "=");
    int f = -1;
    for (int k = 0; k < F_N && f < 0; k++)
      if ((run || !FLAGS[k].run_only) &&
          (flag_is(arg, n, FLAGS[k].name) || flag_is(arg, n, FLAGS[k].alias)))
        f = k;
    if (f < 0) {
      fprintf(stderr, "cerea-sandbox %s: unknown option %.*s\n", argv[1], (int)n, arg);
      return -1;
    }
    const char *v = "";
    if (FLAGS[f].arg == NULL && arg[n] == '=') {
      fprintf(stderr, "cerea-sandbox %s: %s takes no value\n", argv[1], FLAGS[f].name);
      return -1;
    }
    if (FLAGS[f].arg != NULL) {
      if (arg[n] == '=')
        v = arg + n + 1;
      else if (i + 1 < argc)
        v = argv[++i];
      else {
        fprintf(stderr, "cerea-sandbox %s: %s needs a value (%s)\n", argv[1], FLAGS[f].name,
                FLAGS[f].arg);
        return -1;
      }
    }
    if (f == F_ATTACH) {
      if (a->nattach == CLI_ATTACH_MAX) {
        fprintf(stderr, "cerea-sandbox run: at most %d --attach files\n", CLI_ATTACH_MAX);
        return -1;
      }
      a->attach[a->nattach++] = v;
    } else {
      a->val[f] = v;
    }
  }
  if (run && a->file == NULL)
    a->file = "-";
  return 0;
}

/* A whole number in [lo, hi], or -1 (printed). */
static long number_arg(const char *flag, const char *s, long lo, long hi) {
  char *end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) {
    fprintf(stderr, "cerea-sandbox run: %s %s: expected whole seconds from %ld to %ld\n", flag, s,
            lo, hi);
    return -1;
  }
  return v;
}

static int setup(struct cli *c, const struct args *a) {
  memset(c, 0, sizeof(*c));
  const char *url = a->val[F_URL];
  if (parse_url(c, url ? url : "http://127.0.0.1:8080") != 0) {
    fprintf(stderr, "cerea-sandbox: --url %s: expected http://HOST:PORT or unix:PATH\n", url);
    return -1;
  }
  const char *key = a->val[F_KEY];
  if (key == NULL)
    key = getenv("CEREA_API_KEY");
  if (key != NULL && *key != '\0') {
    c->key = sbx_strdup(key);
    return 0;
  }
  char path[4096];
  snprintf(path, sizeof(path), "%s/api_key", a->val[F_DATA] ? a->val[F_DATA] : "./var");
  FILE *f = fopen(path, "r");
  if (f) {
    char *k = read_all(f);
    fclose(f);
    if (k) {
      k[strcspn(k, "\r\n ")] = '\0';
      c->key = k;
    }
  }
  return 0;
}

/* ---- answers --------------------------------------------------------------------------------- */

/* Says why the server refused `what` (st, its body); returns CLI_EXIT_API. */
static int refused(const char *what, int st, const char *body) {
  if (st == 401) {
    fprintf(stderr,
            "cerea-sandbox: %s: the server refused the API key (401): check --key, CEREA_API_KEY "
            "or DIR/api_key\n",
            what);
    return CLI_EXIT_API;
  }
  json_t *j = json_loads(body ? body : "", 0, NULL);
  const char *msg = json_string_value(json_object_get(json_object_get(j, "error"), "message"));
  fprintf(stderr, "cerea-sandbox: %s: %d %s\n", what, st, msg ? msg : body ? body : "");
  json_decref(j);
  return CLI_EXIT_API;
}

/* GET/POST path expecting one of the 2xx `ok` codes; the parsed answer (owned) or NULL (printed,
 * *exit_code set). */
static json_t *api_json(const struct cli *c, const char *method, const char *path, const char *body,
                        const char *what, int *exit_code) {
  int st = 0;
  char *resp = NULL;
  json_t *j = NULL;
  *exit_code = CLI_EXIT_API;
  if (cli_http(c, method, path, body, &st, &resp) != 0)
    return NULL;
  if (st < 200 || st > 299)
    refused(what, st, resp);
  else if ((j = json_loads(resp, 0, NULL)) == NULL)
    fprintf(stderr, "cerea-sandbox: %s: the answer is not JSON\n", what);
  sbx_free(resp);
  return j;
}

static const char *str(json_t *o, const char *key) {
  return json_string_value(json_object_get(o, key));
}

/* Checks each --attach file before anything is created: a regular, readable file within the
 * upload limit.  0, or -1 (printed). */
static int attach_check(const struct args *a) {
  for (size_t i = 0; i < a->nattach; i++) {
    struct stat st;
    const char *why = NULL;
    if (stat(a->attach[i], &st) != 0 || access(a->attach[i], R_OK) != 0)
      why = strerror(errno);
    else if (!S_ISREG(st.st_mode))
      why = "not a regular file";
    else if (st.st_size > (off_t)ORCH_UPLOAD_MAX)
      why = "larger than the 50 MB upload limit";
    if (why) {
      fprintf(stderr, "cerea-sandbox: --attach %s: %s (nothing was created)\n", a->attach[i], why);
      return -1;
    }
  }
  return 0;
}

/* Uploads every --attach file to the chat under its base name.  0, or -1 (printed). */
static int attach_files(const struct cli *c, const struct args *a, const char *chat) {
  for (size_t i = 0; i < a->nattach; i++) {
    const char *file = a->attach[i];
    FILE *f = fopen(file, "rb");
    struct sbx_buf b;
    sbx_buf_init(&b, (size_t)ORCH_UPLOAD_MAX + 1);
    char tmp[65536];
    size_t n;
    int bad = f == NULL;
    while (f && (n = fread(tmp, 1, sizeof(tmp), f)) > 0)
      if (sbx_buf_append(&b, tmp, n) != 0) {
        bad = 1;
        break;
      }
    if (f)
      fclose(f);
    if (bad) {
      fprintf(stderr, "cerea-sandbox: --attach %s: %s\n", file,
              f ? "larger than the 50 MB upload limit" : strerror(errno));
      sbx_buf_free(&b);
      return -1;
    }
    const char *base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
    struct sbx_buf path;
    sbx_buf_init(&path, 8192);
    sbx_buf_appendf(&path, "/v1/chats/%s/files?name=", chat);
    for (const unsigned char *p = (const unsigned char *)base; *p; p++)
      if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
          strchr("-_.~", *p))
        sbx_buf_append(&path, (const char *)p, 1);
      else
        sbx_buf_appendf(&path, "%%%02X", *p);
    sbx_buf_append(&path, "", 1);
    int st = 0;
    char *resp = NULL;
    int rc = cli_request(c, "POST", path.data, "application/octet-stream", b.data ? b.data : "",
                         b.len, &st, &resp, NULL);
    sbx_buf_free(&b);
    sbx_buf_free(&path);
    if (rc != 0)
      return -1;
    if (st != 200 && st != 201) {
      char what[4200];
      snprintf(what, sizeof(what), "--attach %s", file);
      refused(what, st, resp);
      sbx_free(resp);
      return -1;
    }
    json_t *j = json_loads(resp, 0, NULL);
    const char *why = str(j, "left_out_reason");
    fprintf(stderr, "attached %s as %s%s%s%s\n", file, str(j, "name") ? str(j, "name") : base,
            why ? " (not mounted: " : "", why ? why : "", why ? ")" : "");
    json_decref(j);
    sbx_free(resp);
  }
  return 0;
}

/* Saves each artifact of the run into dir under its relative name, never outside dir, and prints
 * each as DIR/NAME (DIR without its trailing slashes).  0, or -1 (printed). */
static int save_artifacts(const struct cli *c, json_t *run, const char *dir) {
  size_t i, dl = strlen(dir);
  json_t *v;
  int rc = 0;
  while (dl > 1 && dir[dl - 1] == '/')
    dl--;
  const char *sep = dl == 1 && dir[0] == '/' ? "" : "/";
  mkdir(dir, 0755);
  json_array_foreach(json_object_get(run, "files"), i, v) {
    const char *name = str(v, "name"), *id = str(v, "artifact_id");
    if (!artifact_name_ok(name) || id == NULL || strlen(id) > 64) {
      fprintf(stderr, "cerea-sandbox: artifact %s not saved: not a safe relative name\n",
              name ? name : "(none)");
      rc = -1;
      continue;
    }
    char url[128];
    snprintf(url, sizeof(url), "/v1/files/%s", id);
    int st = 0, fd = -1;
    char *data = NULL;
    size_t len = 0;
    if (cli_request(c, "GET", url, NULL, NULL, 0, &st, &data, &len) != 0 || st != 200 ||
        (fd = open_inside(dir, name)) < 0 || sbx_write_all(fd, data, len) != 0) {
      fprintf(stderr, "cerea-sandbox: artifact %s could not be saved to %.*s%s%s\n", name, (int)dl,
              dir, sep, name);
      rc = -1;
    } else {
      fprintf(stderr, "saved %.*s%s%s (%zu bytes)\n", (int)dl, dir, sep, name, len);
    }
    if (fd >= 0)
      close(fd);
    sbx_free(data);
  }
  return rc;
}

static int exit_for_status(const char *status) {
  if (status == NULL)
    return CLI_EXIT_API;
  if (strcmp(status, "ok") == 0)
    return CLI_EXIT_OK;
  if (strcmp(status, "error") == 0)
    return CLI_EXIT_RAISED;
  if (strcmp(status, "timeout") == 0)
    return CLI_EXIT_TIMEOUT;
  if (strcmp(status, "cancelled") == 0)
    return CLI_EXIT_CANCELLED;
  return CLI_EXIT_ENDED;
}

/* s past its first n characters (code points). */
static const char *after_chars(const char *s, size_t n) {
  size_t len = strlen(s), i = 0;
  for (; n > 0 && i < len; n--)
    i += orch__utf8_next(s + i, len - i, NULL);
  return s + i;
}

/* A MIME bundle (a display or the value) for a terminal: its text/plain and a newline. */
static void print_bundle(json_t *bundle) {
  const char *text = str(bundle, "text/plain");
  if (text)
    printf("%s\n", text);
}

/* The ended run, for a person: stdout, the displays and the value on stdout; stderr, the
 * traceback (unless stderr holds it already), the status line, notes and the restart on stderr.
 * printed[3]: the characters of stdout and stderr and the displays already printed as they came
 * (not printed again). */
static void print_run(json_t *j, const size_t printed[3]) {
  fputs(after_chars(str(j, "stdout") ?: "", printed[0]), stdout);
  json_t *displays = json_object_get(j, "displays");
  for (size_t i = printed[2]; i < json_array_size(displays); i++)
    print_bundle(json_array_get(displays, i));
  print_bundle(json_object_get(j, "value"));
  fflush(stdout);
  const char *se = str(j, "stderr") ?: "";
  fputs(after_chars(se, printed[1]), stderr);
  json_t *err = json_object_get(j, "error");
  const char *tb = str(err, "traceback");
  if (tb && *tb && strstr(se, tb) == NULL)
    fprintf(stderr, "%s%s", tb, tb[strlen(tb) - 1] == '\n' ? "" : "\n");
  const char *status = str(j, "status"), *msg = str(err, "message");
  fprintf(stderr, "run %s: %s%s%s\n", str(j, "run_id"), status ? status : str(j, "state"),
          msg ? ": " : "", msg ? msg : "");
  size_t i;
  json_t *v;
  json_array_foreach(json_object_get(j, "notes"), i, v)
      fprintf(stderr, "note: %s\n", json_string_value(v));
  if (json_is_true(json_object_get(j, "restarted"))) {
    json_t *re = json_object_get(j, "remounted");
    fputs(json_array_size(re) ? "the sandbox was restarted; remounted:"
                              : "the sandbox was restarted; no files to remount",
          stderr);
    json_array_foreach(re, i, v) fprintf(stderr, " %s", json_string_value(v));
    fputc('\n', stderr);
  }
}

/* --wait ran out: what the run is doing and how to get its result. */
static void print_waited(const struct cli *c, json_t *j, long wait, const char *mode) {
  const char *id = str(j, "run_id"), *state = str(j, "state") ?: "?";
  fprintf(stderr,
          "cerea-sandbox: run %s is still %s after --wait %ld s; it goes on on the server.\n", id,
          state, wait);
  if (strcmp(state, "paused") == 0 ||
      (strcmp(state, "queued") == 0 && strcmp(mode, "browser") == 0))
    fprintf(stderr,
            "  It waits for a browser page of chat %s to be open (code runs in the page).\n",
            str(j, "chat_id"));
  if (c->unix_path[0])
    fprintf(stderr, "  Its result: GET /v1/runs/%s?wait_s=600 on unix:%s with the API key.\n", id,
            c->unix_path);
  else
    fprintf(stderr,
            "  Its result: curl -H \"Authorization: Bearer $CEREA_API_KEY\" "
            "'http://%s:%s/v1/runs/%s?wait_s=600'\n",
            c->host, c->port, id);
}

/* ---- following a run -------------------------------------------------------------------------
 * The run's event stream read over one connection: the head, then the body (chunked on HTTP/1.1:
 * decoded here), then SSE events (the lines of one event until a blank line). */

struct follow {
  const struct cli *c;
  const char *run_id;
  int fd;
  struct sbx_buf raw; /* bytes read and not taken yet */
  size_t pos;
  int head_done, chunked;
  size_t chunk_left;
  struct sbx_buf event; /* the event's lines so far (decoded body) */
  long long last_id;    /* the last event's id (resumes a broken stream) */
  int attempt;          /* the attempt whose output is printed */
  size_t printed[3];    /* its characters of stdout and stderr, and its displays, printed */
  int answer_input;     /* standard input answers input() */
  json_t *end;          /* the run object of `end` */
};

enum { FOLLOW_END = 0, FOLLOW_DEADLINE, FOLLOW_BROKEN, FOLLOW_UNSUPPORTED };

/* The attempt an output or display event `d` is of becomes the one printed: a new one (the run
 * started again) is printed from its start. */
static void follow_attempt(struct follow *f, json_t *d) {
  int attempt = (int)json_integer_value(json_object_get(d, "attempt"));
  if (attempt == f->attempt)
    return;
  if (f->printed[0] + f->printed[1] + f->printed[2] > 0)
    fprintf(stderr, "cerea-sandbox: " ORCH_NOTE_CLI_RERUN "\n", attempt);
  f->attempt = attempt;
  f->printed[0] = f->printed[1] = f->printed[2] = 0;
}

/* Prints what a chunk of `stream` adds to what was printed of its attempt. */
static void follow_output(struct follow *f, json_t *d) {
  const char *stream = str(d, "stream"), *text = str(d, "text");
  size_t offset = (size_t)json_integer_value(json_object_get(d, "offset"));
  int s = stream && strcmp(stream, "stderr") == 0;
  if (text == NULL)
    return;
  follow_attempt(f, d);
  if (offset > f->printed[s])
    return; /* a gap: the stream resends from what was sent (it never skips) */
  const char *rest = after_chars(text, f->printed[s] - offset);
  fputs(rest, s ? stderr : stdout);
  fflush(s ? stderr : stdout);
  size_t len = strlen(rest);
  for (size_t i = 0; i < len; f->printed[s]++)
    i += orch__utf8_next(rest + i, len - i, NULL);
}

/* A display() of the attempt printed, in order: its text on stdout. */
static void follow_display(struct follow *f, json_t *d) {
  follow_attempt(f, d);
  if ((size_t)json_integer_value(json_object_get(d, "index")) != f->printed[2])
    return; /* printed already (the stream resends from what was sent: it never skips) */
  print_bundle(json_object_get(d, "data"));
  fflush(stdout);
  f->printed[2]++;
}

/* input(): a line of standard input as the answer (the prompt came with stdout, as Python
 * writes it). */
static void follow_input(struct follow *f) {
  if (!f->answer_input) {
    fprintf(stderr,
            "\ncerea-sandbox: the run waits for input(); answer it with POST /v1/runs/%s/input "
            "{\"text\": ...} (standard input holds the script)\n",
            f->run_id);
    return;
  }
  char line[8192];
  if (fgets(line, sizeof(line), stdin) == NULL) {
    fprintf(stderr, "\ncerea-sandbox: standard input is closed: input() gets EOFError when it "
                    "gives up waiting\n");
    f->answer_input = 0;
    return;
  }
  line[strcspn(line, "\r\n")] = '\0';
  json_t *body = json_pack("{s:s}", "text", line);
  char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
  json_decref(body);
  char path[160];
  snprintf(path, sizeof(path), "/v1/runs/%s/input", f->run_id);
  int st = 0;
  char *resp = NULL;
  if (text && cli_http(f->c, "POST", path, text, &st, &resp) == 0 && st != 200)
    refused("answering input()", st, resp);
  sbx_free(resp);
  free(text);
}

/* One event of the stream; FOLLOW_END once it was `end`, else -1. */
static int follow_event(struct follow *f, const char *block) {
  char type[32] = "message";
  struct sbx_buf data;
  sbx_buf_init(&data, 64u << 20);
  for (const char *l = block; *l;) {
    size_t n = strcspn(l, "\n");
    if (n >= 6 && strncmp(l, "event:", 6) == 0)
      snprintf(type, sizeof(type), "%.*s", (int)(n - 6 - (l[6] == ' ')), l + 6 + (l[6] == ' '));
    else if (n >= 3 && strncmp(l, "id:", 3) == 0)
      f->last_id = strtoll(l + 3, NULL, 10);
    else if (n >= 5 && strncmp(l, "data:", 5) == 0) {
      size_t skip = 5 + (n > 5 && l[5] == ' ');
      if (data.len)
        sbx_buf_append(&data, "\n", 1);
      sbx_buf_append(&data, l + skip, n - skip);
    }
    l += n + (l[n] == '\n');
  }
  json_t *d = data.len ? json_loadb(data.data, data.len, 0, NULL) : NULL;
  sbx_buf_free(&data);
  int rc = -1;
  if (d && strcmp(type, "output") == 0)
    follow_output(f, d);
  else if (d && strcmp(type, "display") == 0)
    follow_display(f, d);
  else if (d && strcmp(type, "input_request") == 0)
    follow_input(f);
  else if (d && strcmp(type, "end") == 0) {
    f->end = json_incref(d);
    rc = FOLLOW_END;
  }
  json_decref(d);
  return rc;
}

/* Takes what was read: the head, then the body's bytes into events.  FOLLOW_END after `end`,
 * FOLLOW_UNSUPPORTED for a server without the stream, FOLLOW_BROKEN for a bad answer, else -1. */
static int follow_take(struct follow *f) {
  if (!f->head_done) {
    char *end = f->raw.data ? strstr(f->raw.data, "\r\n\r\n") : NULL;
    if (end == NULL)
      return -1;
    int status = 0;
    if (sscanf(f->raw.data, "HTTP/1.%*d %d", &status) != 1)
      return FOLLOW_BROKEN;
    if (status == 404 || status == 405)
      return FOLLOW_UNSUPPORTED;
    if (status != 200)
      return FOLLOW_BROKEN;
    f->chunked = strcasestr(f->raw.data, "transfer-encoding: chunked") != NULL &&
                 strcasestr(f->raw.data, "transfer-encoding: chunked") < end;
    f->head_done = 1;
    f->pos = (size_t)(end + 4 - f->raw.data);
  }
  while (f->pos < f->raw.len) {
    const char *p = f->raw.data + f->pos;
    size_t avail = f->raw.len - f->pos, take = avail;
    if (f->chunked && f->chunk_left == 0) {
      const char *crlf = memmem(p, avail, "\r\n", 2);
      if (crlf == NULL)
        break;
      if (crlf == p) { /* the CRLF that ends a chunk's data */
        f->pos += 2;
        continue;
      }
      f->chunk_left = strtoul(p, NULL, 16);
      f->pos += (size_t)(crlf - p) + 2;
      if (f->chunk_left == 0)
        return FOLLOW_BROKEN; /* the stream ended without `end` */
      continue;
    }
    if (f->chunked)
      take = SBX_MIN(avail, f->chunk_left);
    if (sbx_buf_append(&f->event, p, take) != 0)
      return FOLLOW_BROKEN;
    f->pos += take;
    if (f->chunked)
      f->chunk_left -= take;
    char *sep;
    while (f->event.data && (sep = strstr(f->event.data, "\n\n")) != NULL) {
      *sep = '\0';
      int rc = follow_event(f, f->event.data);
      size_t used = (size_t)(sep + 2 - f->event.data);
      memmove(f->event.data, f->event.data + used, f->event.len - used + 1);
      f->event.len -= used;
      if (rc == FOLLOW_END)
        return rc;
    }
  }
  if (f->pos > 0 && f->pos == f->raw.len) { /* everything taken: the buffer starts again */
    sbx_buf_reset(&f->raw);
    f->raw.data[0] = '\0';
    f->pos = 0;
  }
  return -1;
}

/* Follows the run's stream until its `end` (f->end), the deadline, or the stream fails. */
static int follow_once(struct follow *f, uint64_t deadline) {
  f->fd = cli_connect(f->c);
  if (f->fd < 0)
    return FOLLOW_BROKEN;
  struct sbx_buf req;
  sbx_buf_init(&req, 8192);
  sbx_buf_appendf(&req,
                  "GET /v1/runs/%s/events HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream"
                  "\r\nConnection: close\r\nAuthorization: Bearer %s\r\n",
                  f->run_id, f->c->unix_path[0] ? "localhost" : f->c->host, f->c->key);
  if (f->last_id >= 0)
    sbx_buf_appendf(&req, "Last-Event-ID: %lld\r\n", f->last_id);
  sbx_buf_append(&req, "\r\n", 2);
  int rc = sbx_write_all(f->fd, req.data, req.len) == 0 ? -1 : FOLLOW_BROKEN;
  sbx_buf_free(&req);
  sbx_buf_init(&f->raw, 16u << 20);
  sbx_buf_init(&f->event, 16u << 20);
  f->head_done = f->chunked = 0;
  f->pos = f->chunk_left = 0;
  while (rc < 0) {
    uint64_t now = sbx_now_mono_ms();
    if (now >= deadline) {
      rc = FOLLOW_DEADLINE;
      break;
    }
    struct pollfd pfd = {.fd = f->fd, .events = POLLIN};
    uint64_t left = deadline - now;
    int n = poll(&pfd, 1, left > 60000 ? 60000 : (int)left);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      continue;
    char buf[16384];
    ssize_t got = read(f->fd, buf, sizeof(buf));
    if (got <= 0 || sbx_buf_append(&f->raw, buf, (size_t)got) != 0)
      rc = FOLLOW_BROKEN;
    else
      rc = follow_take(f);
  }
  close(f->fd);
  sbx_buf_free(&f->raw);
  sbx_buf_free(&f->event);
  return rc;
}

/* Follows the run to its end: FOLLOW_END (f->end), FOLLOW_DEADLINE, or FOLLOW_UNSUPPORTED /
 * FOLLOW_BROKEN when the stream cannot be read (the caller polls instead).  A broken stream is
 * opened again from its last event a few times. */
static int follow(struct follow *f, uint64_t deadline) {
  int rc = FOLLOW_BROKEN;
  for (int tries = 0; tries < 5; tries++) {
    rc = follow_once(f, deadline);
    if (rc != FOLLOW_BROKEN)
      break;
    usleep(200 * 1000);
  }
  return rc;
}

/* ---- commands -------------------------------------------------------------------------------- */

/* Reads a command's flags: its exit code when that is all (a usage error, --help), else -1. */
static int parse_or_help(int argc, char **argv, int run, struct args *a) {
  if (parse_args(argc, argv, run, a) != 0) {
    orch_cli_usage(stderr);
    return CLI_EXIT_API;
  }
  if (a->val[F_HELP]) {
    orch_cli_usage(stdout);
    return CLI_EXIT_OK;
  }
  return -1;
}

int orch_cli_status(int argc, char **argv) {
  struct args a;
  int done = parse_or_help(argc, argv, 0, &a);
  if (done >= 0)
    return done;
  struct cli c;
  if (setup(&c, &a) != 0)
    return CLI_EXIT_API;
  int st = 0, rc = CLI_EXIT_API;
  char *body = NULL;
  if (cli_http(&c, "GET", "/healthz", NULL, &st, &body) != 0)
    goto out;
  printf("healthz %d %s\n", st, body);
  rc = st == 200 ? 0 : 1;
  sbx_free(body);
  body = NULL;
  if (c.key == NULL) {
    printf("(no API key: --key, CEREA_API_KEY or DIR/api_key for runs and pages)\n");
    goto out;
  }
  const char *paths[] = {"/v1/admin/runs", "/v1/admin/pages", "/v1/admin/settings"};
  for (size_t i = 0; i < SBX_ARRAY_SIZE(paths); i++) {
    if (cli_http(&c, "GET", paths[i], NULL, &st, &body) != 0) {
      rc = CLI_EXIT_API;
      break;
    }
    if (st != 200) {
      rc = refused(paths[i], st, body);
      break;
    }
    printf("%s %d %s\n", paths[i] + 10, st, body);
    sbx_free(body);
    body = NULL;
  }
out:
  sbx_free(body);
  sbx_free(c.key);
  return rc;
}

/* `user add NAME [--admin]`: POST /v1/admin/people with the API key; the password the server made
 * is printed once, on stdout (nothing else of it is kept anywhere but its hash). */
int orch_cli_user(int argc, char **argv) {
  if (argc < 4 || strcmp(argv[2], "add") != 0 || argv[3][0] == '-') {
    fprintf(stderr, "usage: cerea-sandbox user add NAME [--admin] [--url URL] [--key KEY] "
                    "[--data DIR]\n");
    return CLI_EXIT_API;
  }
  const char *name = argv[3];
  int admin = 0, n = 2;
  char **rest = sbx_calloc((size_t)argc + 1, sizeof *rest);
  if (rest == NULL)
    return CLI_EXIT_API;
  rest[0] = argv[0];
  rest[1] = argv[1];
  for (int i = 4; i < argc; i++) {
    if (strcmp(argv[i], "--admin") == 0)
      admin = 1;
    else
      rest[n++] = argv[i];
  }
  struct args a;
  int done = parse_or_help(n, rest, 0, &a);
  sbx_free(rest);
  if (done >= 0)
    return done;
  struct cli c;
  if (setup(&c, &a) != 0)
    return CLI_EXIT_API;
  if (c.key == NULL) {
    fprintf(stderr, "cerea-sandbox: no API key (--key, CEREA_API_KEY or DIR/api_key)\n");
    return CLI_EXIT_API;
  }
  json_t *req = json_pack("{s:s, s:s}", "name", name, "role", admin ? "admin" : "user");
  char *body = req ? json_dumps(req, JSON_COMPACT) : NULL;
  json_decref(req);
  int rc = CLI_EXIT_API;
  json_t *j = body ? api_json(&c, "POST", "/v1/admin/people", body, "adding a person", &rc) : NULL;
  free(body);
  if (j != NULL) {
    json_t *p = json_object_get(j, "person");
    printf("added %s \"%s\" (%s); one-time password (to be changed at the first sign-in): %s\n",
           str(p, "role"), str(p, "name"), str(p, "id"), str(j, "password"));
    rc = CLI_EXIT_OK;
    json_decref(j);
  }
  sbx_free(c.key);
  return rc;
}

/* run's own arguments: --timeout, --wait, --page-url only with a new chat, --chat an id.  0, or
 * the exit code when one is wrong (said on stderr). */
static int run_args(const struct args *a, long *timeout, long *wait) {
  if ((a->val[F_TIMEOUT] && (*timeout = number_arg("--timeout", a->val[F_TIMEOUT], 1, 300)) < 0) ||
      (a->val[F_WAIT] && (*wait = number_arg("--wait", a->val[F_WAIT], 0, 86400)) < 0))
    return CLI_EXIT_API;
  if (a->val[F_PAGE_URL] && a->val[F_CHAT]) {
    fprintf(stderr, "cerea-sandbox run: --page-url needs a new chat (a page token is given only "
                    "when a chat is created)\n");
    return CLI_EXIT_API;
  }
  const char *chat_opt = a->val[F_CHAT];
  if (chat_opt &&
      (*chat_opt == '\0' || strlen(chat_opt) > STORE_ID_LEN ||
       chat_opt[strspn(chat_opt,
                       "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")] !=
           '\0')) {
    fprintf(stderr, "cerea-sandbox run: --chat %s: not a chat id\n", chat_opt);
    return CLI_EXIT_API;
  }
  return 0;
}

/* The script (a file, or - for stdin), or NULL (said on stderr). */
static char *read_script(const struct args *a) {
  FILE *f = strcmp(a->file, "-") == 0 ? stdin : fopen(a->file, "r");
  if (f == NULL) {
    fprintf(stderr, "cerea-sandbox: cannot read %s: %s\n", a->file, strerror(errno));
    return NULL;
  }
  char *code = read_all(f);
  if (f != stdin)
    fclose(f);
  if (code == NULL)
    fprintf(stderr, "cerea-sandbox: %s: larger than the 16 MB a script may be\n", a->file);
  return code;
}

/* The run's chat into chat[]: --chat's, or a new one (said on stderr, with how a page attaches
 * where one runs the code).  0, or nonzero with *rc set. */
static int run_chat(struct cli *c, const struct args *a, const char *mode,
                    char chat[STORE_ID_LEN + 1], int *rc) {
  if (a->val[F_CHAT]) {
    snprintf(chat, STORE_ID_LEN + 1, "%s", a->val[F_CHAT]);
    return 0;
  }
  json_t *j = api_json(c, "POST", "/v1/chats", "{}", "creating a chat", rc);
  if (j == NULL)
    return -1;
  snprintf(chat, STORE_ID_LEN + 1, "%s", str(j, "chat_id") ?: "");
  if (a->val[F_PAGE_URL])
    fprintf(stderr, "chat %s: open %s%s%s%s/chat/%s#token=%s to attach a page\n", chat,
            c->unix_path[0] ? "" : "http://", c->unix_path[0] ? "" : c->host,
            c->unix_path[0] ? "" : ":", c->unix_path[0] ? "" : c->port, chat,
            str(j, "page_token") ?: "");
  else if (strcmp(mode, "browser") == 0)
    fprintf(stderr,
            "chat %s created; a browser page of this chat runs the code (--page-url prints its "
            "link)\n",
            chat);
  else
    fprintf(stderr, "chat %s created\n", chat);
  json_decref(j);
  return 0;
}

/* The run j (taken) once it is done: followed on its event stream; without one (an older
 * server) polled, each call waiting at most 600 s, with the CLI's own deadline.  NULL with *rc
 * set when it could not be read, or when the deadline came first (said, CLI_EXIT_WAITED). */
static json_t *run_done(struct cli *c, json_t *j, struct follow *fl, uint64_t deadline, long wait,
                        const char *mode, int *rc) {
  char path[160];
  if (strcmp(str(j, "state") ?: "", "done") != 0) {
    int fr = follow(fl, deadline);
    if (fr == FOLLOW_END) {
      json_decref(j);
      j = fl->end;
    } else if (fr == FOLLOW_DEADLINE) { /* its state now, for the message */
      snprintf(path, sizeof(path), "/v1/runs/%s", fl->run_id);
      json_t *now = api_json(c, "GET", path, NULL, "reading the run", rc);
      json_decref(j);
      if ((j = now) == NULL)
        return NULL;
      if (strcmp(str(j, "state") ?: "", "done") != 0) {
        print_waited(c, j, wait, mode);
        *rc = CLI_EXIT_WAITED;
        json_decref(j);
        return NULL;
      }
    }
  }
  while (strcmp(str(j, "state") ?: "", "done") != 0) {
    uint64_t now = sbx_now_mono_ms();
    if (now >= deadline) {
      print_waited(c, j, wait, mode);
      *rc = CLI_EXIT_WAITED;
      json_decref(j);
      return NULL;
    }
    uint64_t left_s = deadline == UINT64_MAX ? 600 : (deadline - now + 999) / 1000;
    snprintf(path, sizeof(path), "/v1/runs/%s?wait_s=%u", str(j, "run_id") ?: "",
             (unsigned)(left_s < 600 ? left_s : 600));
    json_t *next = api_json(c, "GET", path, NULL, "waiting for the run", rc);
    json_decref(j);
    if ((j = next) == NULL)
      return NULL;
  }
  return j;
}

int orch_cli_run(int argc, char **argv) {
  struct args a;
  int done = parse_or_help(argc, argv, 1, &a);
  if (done >= 0)
    return done;
  long timeout = -1, wait = -1;
  if ((done = run_args(&a, &timeout, &wait)) != 0)
    return done;
  struct cli c;
  if (setup(&c, &a) != 0)
    return CLI_EXIT_API;
  int rc = CLI_EXIT_API;
  char *code = NULL, *reqb = NULL;
  json_t *j = NULL, *cfg = NULL;
  if ((code = read_script(&a)) == NULL || attach_check(&a) != 0)
    goto out;
  if (c.key == NULL) {
    fprintf(stderr, "cerea-sandbox: no API key (--key, CEREA_API_KEY or DIR/api_key)\n");
    goto out;
  }
  /* The server answers (and says where code runs) before anything is created.  A server
   * without a readable /v1/config is still used: only the hints that depend on the mode go. */
  int cst = 0;
  char *cbody = NULL;
  if (cli_http(&c, "GET", "/v1/config", NULL, &cst, &cbody) != 0)
    goto out;
  cfg = cst == 200 ? json_loads(cbody, 0, NULL) : NULL;
  sbx_free(cbody);
  const char *mode = str(cfg, "code_execution") ?: "unknown";
  char chat[STORE_ID_LEN + 1] = "";
  if (run_chat(&c, &a, mode, chat, &rc) != 0)
    goto out;
  rc = CLI_EXIT_API;
  if (attach_files(&c, &a, chat) != 0)
    goto out;
  uint64_t deadline = wait >= 0 ? sbx_now_mono_ms() + (uint64_t)wait * 1000 : UINT64_MAX;
  json_t *rq =
      json_pack("{s:s, s:s, s:I}", "code", code, "origin", "user", "wait_s", (json_int_t)0);
  if (timeout > 0)
    json_object_set_new(rq, "timeout_s", json_integer(timeout));
  reqb = json_dumps(rq, JSON_COMPACT);
  json_decref(rq);
  char path[160];
  snprintf(path, sizeof(path), "/v1/chats/%s/runs", chat);
  if ((j = api_json(&c, "POST", path, reqb, "posting the run", &rc)) == NULL)
    goto out;
  char run_id[STORE_ID_LEN + 1];
  snprintf(run_id, sizeof(run_id), "%s", str(j, "run_id") ?: "");
  struct follow fl = {
      .c = &c, .run_id = run_id, .last_id = -1, .answer_input = strcmp(a.file, "-") != 0};
  if ((j = run_done(&c, j, &fl, deadline, wait, mode, &rc)) == NULL)
    goto out;
  size_t printed[3] = {0, 0, 0};
  if (fl.attempt == (int)json_integer_value(json_object_get(j, "attempts")))
    memcpy(printed, fl.printed, sizeof(printed)); /* (another attempt's output: all of it again) */
  print_run(j, printed);
  rc = exit_for_status(str(j, "status"));
  if (a.val[F_OUT] && save_artifacts(&c, j, a.val[F_OUT]) != 0 && rc == CLI_EXIT_OK)
    rc = CLI_EXIT_API;
out:
  json_decref(j);
  json_decref(cfg);
  free(reqb);
  sbx_free(code);
  sbx_free(c.key);
  return rc;
}
