/* cli.c -- `cerea-sandbox run` and `cerea-sandbox status`: small API clients for operators.
 *
 *   cerea-sandbox status [--url URL] [--key KEY] [--data DIR]
 *   cerea-sandbox run    [--url URL] [--key KEY] [--data DIR] [--chat ID] [--timeout S] [--wait S]
 *                        [--attach FILE]... [--out DIR] [FILE|-]
 *
 * URL is http://HOST:PORT (default http://127.0.0.1:8080) or unix:PATH; the key comes from --key,
 * CEREA_API_KEY, or DIR/api_key (default ./var).  `run` creates a chat unless --chat is given
 * (printing the page URL to open so a page attaches and runs it), posts the code with wait_s, and
 * prints the run's stdout and stderr and a status line.  --attach uploads files to the chat first
 * (each printed with its name and, when left out, why); --out DIR saves the run's artifacts there
 * (their relative names; never outside DIR).  Without --wait it waits until the run ends.  Exit
 * status: 0 ok, 1 error (Python raised), 124 timeout, 130 cancelled, 3 crashed / abandoned /
 * rejected, 2 usage or API errors.  --server and --api-key are accepted for --url and --key.
 * `status` prints /healthz and, with a key, the live runs and attached pages.
 *
 * What it is not: a general HTTP client.  Plain HTTP/1.1 over a blocking socket with
 * `Connection: close` (no TLS: point it at a local cleartext or unix: listener).
 */
#include "internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
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

static const char *opt(int argc, char **argv, const char *name) {
  /* The names of the CLI (--server, --api-key) stand for --url and --key. */
  const char *alias = strcmp(name, "--url") == 0   ? "--server"
                      : strcmp(name, "--key") == 0 ? "--api-key"
                                                   : name;
  for (int i = 2; i + 1 < argc; i++)
    if (strcmp(argv[i], name) == 0 || strcmp(argv[i], alias) == 0)
      return argv[i + 1];
  return NULL;
}

/* Uploads every --attach FILE to the chat under its base name.  0, or -1 (printed). */
static int attach_files(const struct cli *c, int argc, char **argv, const char *chat) {
  for (int i = 2; i + 1 < argc; i++) {
    if (strcmp(argv[i], "--attach") != 0)
      continue;
    const char *file = argv[++i];
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
    json_t *j = json_loads(resp, 0, NULL);
    if (st != 200 && st != 201) {
      fprintf(stderr, "cerea-sandbox: --attach %s: %d %s\n", file, st, resp);
      json_decref(j);
      sbx_free(resp);
      return -1;
    }
    const char *why = json_string_value(json_object_get(j, "left_out_reason"));
    fprintf(stderr, "attached %s as %s%s%s%s\n", file,
            json_string_value(json_object_get(j, "name")), why ? " (not mounted: " : "",
            why ? why : "", why ? ")" : "");
    json_decref(j);
    sbx_free(resp);
  }
  return 0;
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

static int write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* Saves each artifact of the run into dir under its relative name, never outside dir.  0, or -1
 * (printed). */
static int save_artifacts(const struct cli *c, json_t *run, const char *dir) {
  size_t i;
  json_t *v;
  int rc = 0;
  mkdir(dir, 0755);
  json_array_foreach(json_object_get(run, "files"), i, v) {
    const char *name = json_string_value(json_object_get(v, "name"));
    const char *id = json_string_value(json_object_get(v, "artifact_id"));
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
        (fd = open_inside(dir, name)) < 0 || write_all(fd, data, len) != 0) {
      fprintf(stderr, "cerea-sandbox: artifact %s could not be saved to %s/%s\n", name, dir, name);
      rc = -1;
    } else {
      fprintf(stderr, "saved %s/%s (%zu bytes)\n", dir, name, len);
    }
    if (fd >= 0)
      close(fd);
    sbx_free(data);
  }
  return rc;
}

static int exit_for_status(const char *status) {
  if (status == NULL)
    return 2;
  if (strcmp(status, "ok") == 0)
    return 0;
  if (strcmp(status, "error") == 0)
    return 1;
  if (strcmp(status, "timeout") == 0)
    return 124;
  if (strcmp(status, "cancelled") == 0)
    return 130;
  return 3;
}

static int setup(struct cli *c, int argc, char **argv) {
  memset(c, 0, sizeof(*c));
  const char *url = opt(argc, argv, "--url");
  if (parse_url(c, url ? url : "http://127.0.0.1:8080") != 0) {
    fprintf(stderr, "cerea-sandbox: --url %s: expected http://HOST:PORT or unix:PATH\n", url);
    return -1;
  }
  const char *key = opt(argc, argv, "--key");
  if (key == NULL)
    key = getenv("CEREA_API_KEY");
  if (key != NULL) {
    c->key = sbx_strdup(key);
  } else {
    const char *dir = opt(argc, argv, "--data");
    char path[4096];
    snprintf(path, sizeof(path), "%s/api_key", dir ? dir : "./var");
    FILE *f = fopen(path, "r");
    if (f) {
      char *k = read_all(f);
      fclose(f);
      if (k) {
        k[strcspn(k, "\r\n ")] = '\0';
        c->key = k;
      }
    }
  }
  return 0;
}

int orch_cli_status(int argc, char **argv) {
  struct cli c;
  if (setup(&c, argc, argv) != 0)
    return 2;
  int st = 0, rc = 1;
  char *body = NULL;
  if (cli_http(&c, "GET", "/healthz", NULL, &st, &body) != 0)
    goto out;
  printf("healthz %d %s\n", st, body);
  rc = st == 200 ? 0 : 1;
  sbx_free(body);
  body = NULL;
  if (c.key == NULL) {
    printf("(no API key: --key, CEREA_API_KEY or DATA/api_key for runs and pages)\n");
    goto out;
  }
  const char *paths[] = {"/v1/admin/runs", "/v1/admin/pages", "/v1/admin/settings"};
  for (size_t i = 0; i < SBX_ARRAY_SIZE(paths); i++) {
    if (cli_http(&c, "GET", paths[i], NULL, &st, &body) != 0) {
      rc = 1;
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

int orch_cli_run(int argc, char **argv) {
  struct cli c;
  if (setup(&c, argc, argv) != 0)
    return 2;
  int rc = 1, st = 0;
  char *code = NULL, *body = NULL, *reqb = NULL;
  json_t *j = NULL;
  const char *file = "-";
  for (int i = 2; i < argc; i++) {
    if (strncmp(argv[i], "--", 2) == 0) {
      i++;
      continue;
    }
    file = argv[i];
  }
  FILE *f = strcmp(file, "-") == 0 ? stdin : fopen(file, "r");
  if (f == NULL) {
    fprintf(stderr, "cerea-sandbox: cannot read %s: %s\n", file, strerror(errno));
    goto out;
  }
  code = read_all(f);
  if (f != stdin)
    fclose(f);
  if (c.key == NULL) {
    fprintf(stderr, "cerea-sandbox: no API key (--key, CEREA_API_KEY or DATA/api_key)\n");
    goto out;
  }
  char chat[STORE_ID_LEN + 1] = "";
  const char *chat_opt = opt(argc, argv, "--chat");
  if (chat_opt) {
    snprintf(chat, sizeof(chat), "%s", chat_opt);
  } else {
    if (cli_http(&c, "POST", "/v1/chats", "{}", &st, &body) != 0)
      goto out;
    j = json_loads(body, 0, NULL);
    if (st != 201 || j == NULL) {
      fprintf(stderr, "cerea-sandbox: creating a chat: %d %s\n", st, body);
      goto out;
    }
    snprintf(chat, sizeof(chat), "%s", json_string_value(json_object_get(j, "chat_id")));
    fprintf(stderr, "chat %s: open http://%s:%s/chat/%s#token=%s to attach a page\n", chat,
            c.host[0] ? c.host : "localhost", c.port[0] ? c.port : "8080", chat,
            json_string_value(json_object_get(j, "page_token")));
    json_decref(j);
    j = NULL;
    sbx_free(body);
    body = NULL;
  }
  if (attach_files(&c, argc, argv, chat) != 0) {
    rc = 2;
    goto out;
  }
  const char *wait = opt(argc, argv, "--wait"), *timeout = opt(argc, argv, "--timeout");
  json_t *rq = json_pack("{s:s, s:s, s:f}", "code", code ? code : "", "origin", "user", "wait_s",
                         wait ? atof(wait) : 600.0);
  if (timeout)
    json_object_set_new(rq, "timeout_s", json_integer(atoi(timeout)));
  reqb = json_dumps(rq, JSON_COMPACT);
  json_decref(rq);
  char path[128];
  snprintf(path, sizeof(path), "/v1/chats/%s/runs", chat);
  if (cli_http(&c, "POST", path, reqb, &st, &body) != 0)
    goto out;
  j = json_loads(body, 0, NULL);
  if ((st != 200 && st != 201) || j == NULL) {
    fprintf(stderr, "cerea-sandbox: run: %d %s\n", st, body);
    rc = 2;
    goto out;
  }
  /* Without --wait: wait until the run ends (a paused run may wait for a page for minutes). */
  while (wait == NULL &&
         strcmp(json_string_value(json_object_get(j, "state")) ?: "", "done") != 0) {
    snprintf(path, sizeof(path), "/v1/runs/%s?wait_s=600",
             json_string_value(json_object_get(j, "run_id")));
    sbx_free(body);
    body = NULL;
    if (cli_http(&c, "GET", path, NULL, &st, &body) != 0 || st != 200) {
      rc = 2;
      goto out;
    }
    json_decref(j);
    if ((j = json_loads(body, 0, NULL)) == NULL) {
      rc = 2;
      goto out;
    }
  }
  fputs(json_string_value(json_object_get(j, "stdout")) ?: "", stdout);
  fputs(json_string_value(json_object_get(j, "stderr")) ?: "", stderr);
  const char *status = json_string_value(json_object_get(j, "status"));
  json_t *err = json_object_get(j, "error");
  fprintf(stderr, "run %s: %s%s%s\n", json_string_value(json_object_get(j, "run_id")),
          status ? status : json_string_value(json_object_get(j, "state")),
          json_is_object(err) ? ": " : "",
          json_is_object(err) ? json_string_value(json_object_get(err, "message")) ?: "" : "");
  size_t i;
  json_t *v;
  json_array_foreach(json_object_get(j, "notes"), i, v)
      fprintf(stderr, "note: %s\n", json_string_value(v));
  if (json_is_true(json_object_get(j, "restarted"))) {
    fprintf(stderr, "the sandbox was restarted; remounted:");
    json_array_foreach(json_object_get(j, "remounted"), i, v)
        fprintf(stderr, " %s", json_string_value(v));
    fputc('\n', stderr);
  }
  rc = exit_for_status(status);
  const char *outdir = opt(argc, argv, "--out");
  if (outdir && save_artifacts(&c, j, outdir) != 0 && rc == 0)
    rc = 2;
out:
  json_decref(j);
  free(reqb);
  sbx_free(body);
  sbx_free(code);
  sbx_free(c.key);
  return rc;
}
