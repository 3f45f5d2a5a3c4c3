/* api_static.c -- what the browser loads from us: the Pyodide runtime, the app's assets, the
 * kernel worker scripts with their own CSP, and the app pages with cross-origin isolation.
 *
 *   /pyodide/      build/www/pyodide/   immutable, long-lived cache; never redirects
 *   /assets/       build/www/assets/    no-cache (a 304 when unchanged)
 *   /assets/chunks/ build/www/assets/chunks/  content-hashed names: immutable, long-lived cache
 *   /worker/       build/www/worker/    CSP: default-src 'none'; script-src 'self'
 *   /worker-pypi/  build/www/worker/      'wasm-unsafe-eval'; connect-src <origin>/pyodide/
 *                                         (+ the PyPI hosts on /worker-pypi/ unless
 *                                         CHAT_PYODIDE_PYPI_DISABLED); no-cache with a strong
 *                                         ETag over the file and these headers (a 304)
 *   /v1/openapi.json -> openapi.json (docs/openapi.yaml as JSON, made by ui-adapter/build.mjs);
 *   /, /playground -> index.html; /chat/{chat} -> chat.html; /admin -> admin.html; /signin ->
 *   signin.html, each with
 *   COOP same-origin + COEP require-corp (SharedArrayBuffer for interrupts).  A missing html file
 *   gets a small built-in page instead of an error.
 *   any other path: 404 -- an HTML page when the request wants HTML (a browser), the API's JSON
 *   error otherwise.
 *
 * The worker CSP names our origin with the /pyodide/ path: 'self' cannot carry a path, and
 * `connect-src 'self'` would let Python call the app's own API.  The origin comes from the
 * request's Host (checked to be a plain host[:port]); both schemes are listed since one listener
 * serves TLS and cleartext.  What it does not do: serve artifacts (api_files.c, with a sandbox CSP).
 */
#include "api.h"
#include "transport.h"

#include <string.h>
#include <sys/stat.h>

static const char ISOLATION[] = "Cross-Origin-Opener-Policy: same-origin\r\n"
                                "Cross-Origin-Embedder-Policy: require-corp\r\n";
/* The app's pages may talk to this origin only: a script that got into a page (a preview that
 * escaped, a library's bug) cannot send what it read anywhere else, nor load plugins or move the
 * base URL.  Scripts and styles stay as they are (boot.js is inlined; the preview frames, srcdoc
 * documents, inherit this and add their own stricter policy). */
static const char APP_CSP[] =
    "Content-Security-Policy: connect-src 'self'; object-src 'none'; base-uri 'none'\r\n";
static const char SUBRESOURCE[] = "Cross-Origin-Resource-Policy: same-origin\r\n"
                                  "Cross-Origin-Embedder-Policy: require-corp\r\n"
                                  "X-Content-Type-Options: nosniff\r\n";

static const char *content_type(const char *path) {
  static const struct {
    const char *ext, *type;
  } types[] = {
      {".js", "text/javascript; charset=utf-8"},
      {".mjs", "text/javascript; charset=utf-8"},
      {".json", "application/json"},
      {".wasm", "application/wasm"},
      {".html", "text/html; charset=utf-8"},
      {".map", "application/json"},
      {".zip", "application/zip"},
      {".whl", "application/zip"},
      {".tar", "application/x-tar"},
      {".css", "text/css; charset=utf-8"},
  };
  const char *dot = strrchr(path, '.');
  for (size_t i = 0; dot && i < SBX_ARRAY_SIZE(types); i++)
    if (strcmp(dot, types[i].ext) == 0)
      return types[i].type;
  return "application/octet-stream";
}

static int rel_path_ok(const char *p) {
  if (p == NULL || *p == '\0' || *p == '/' || strstr(p, "..") || strchr(p, '\\'))
    return 0;
  return 1;
}

/* The kernel worker script's validator: a strong ETag over the file (size, mtime in ns) and the
 * headers its answer carries -- the CSP names the host and, on /worker-pypi/, the PyPI hosts -- so
 * a repeat visit gets a 304, and a new build or a changed policy (CHAT_PYODIDE_PYPI_DISABLED) the
 * new script with its new CSP.  `etag` (35 bytes) gets "\"<32 hex>\"". */
static void worker_etag(const struct stat *st, const char *headers, char *etag) {
  char text[1600], hex[65];
  int n = snprintf(text, sizeof(text), "%lld.%lld.%ld;%s", (long long)st->st_size,
                   (long long)st->st_mtim.tv_sec, (long)st->st_mtim.tv_nsec, headers);
  store_sha256_hex(text, n < 0 ? 0 : SBX_MIN((size_t)n, sizeof(text) - 1), hex);
  snprintf(etag, 35, "\"%.32s\"", hex);
}

static void serve_worker(struct tp_req *req, struct orch *o, int pypi) {
  const char *rel = tp_req_param(req, "path");
  const char *host = tp_req_header(req, "host");
  if (host == NULL)
    host = tp_req_header(req, ":authority");
  if (!rel_path_ok(rel)) {
    orch__api_error(req, 404, "not_found", "no such file");
    return;
  }
  if (!orch__host_ok(host)) {
    orch__api_error(req, 400, "bad_host", "a plain Host header is required");
    return;
  }
  char path[4096], headers[1400];
  snprintf(path, sizeof(path), "%s/worker/%s", o->static_dir, rel);
  int with_pypi = pypi && !o->cfg->pypi_disabled;
  int n = snprintf(headers, sizeof(headers),
                   "Content-Security-Policy: default-src 'none'; script-src 'self' "
                   "'wasm-unsafe-eval'; connect-src http://%s/pyodide/ https://%s/pyodide/%s\r\n"
                   "Cache-Control: no-cache\r\n%s",
                   host, host, with_pypi ? " https://pypi.org https://files.pythonhosted.org" : "",
                   SUBRESOURCE);
  struct stat st;
  char etag[40];
  if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) || n < 0 || (size_t)n >= sizeof(headers) - 64) {
    orch__api_error(req, 404, "not_found", "no such file");
    return;
  }
  worker_etag(&st, headers, etag);
  snprintf(headers + n, sizeof(headers) - (size_t)n, "ETag: %s\r\n", etag);
  if (tp_etag_listed(tp_req_header(req, "if-none-match"), etag)) {
    tp_respond(req, 304, headers, NULL, 0);
    return;
  }
  if (tp_respond_file(req, path, content_type(path), headers, 0) != 0)
    orch__api_error(req, 404, "not_found", "no such file");
}

static void on_worker(struct tp_req *req, void *ud) { serve_worker(req, ud, 0); }
static void on_worker_pypi(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  if (o->cfg->pypi_disabled) {
    orch__api_error(req, 404, "not_found", "PyPI access is disabled on this deployment");
    return;
  }
  serve_worker(req, o, 1);
}

static const char PLACEHOLDER[] =
    "<!doctype html><html><head><meta charset=\"utf-8\"><title>cerea-sandbox</title></head>"
    "<body><h1>cerea-sandbox</h1><p>The web app is not built here. Run "
    "<code>bash scripts/setup.sh</code> to build it. The API is at <code>/v1/</code>, health at "
    "<a href=\"/healthz\">/healthz</a>.</p></body></html>\n";

static void serve_app(struct tp_req *req, struct orch *o, const char *file) {
  char path[4096], headers[512];
  snprintf(path, sizeof(path), "%s/%s", o->static_dir, file);
  snprintf(headers, sizeof(headers),
           "%sCache-Control: no-cache\r\nX-Content-Type-Options: nosniff\r\n"
           "Referrer-Policy: no-referrer\r\n%s",
           ISOLATION, APP_CSP);
  struct stat st;
  if (stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
      tp_respond_file(req, path, "text/html; charset=utf-8", headers, 0) == 0)
    return;
  char h2[600];
  snprintf(h2, sizeof(h2), "Content-Type: text/html; charset=utf-8\r\n%s", headers);
  tp_respond(req, 200, h2, PLACEHOLDER, sizeof(PLACEHOLDER) - 1);
}

/* Does the request want a page (a browser's navigation says text/html first or among its types)?
 * API clients (fetch and curl send any-type Accept, or JSON) get the JSON error. */
static int wants_html(struct tp_req *req) {
  const char *accept = tp_req_header(req, "accept");
  return accept != NULL && strstr(accept, "text/html") != NULL;
}

/* A path no route or mount takes: a small HTML page for a browser (what exists, where to go), the
 * API's JSON 404 for everyone else.  The path is shown HTML-escaped and cut at 200 bytes. */
static void on_not_found(struct tp_req *req, void *ud) {
  (void)ud;
  if (!wants_html(req)) {
    orch__api_error(req, 404, "not_found", "no such path");
    return;
  }
  struct sbx_buf b;
  sbx_buf_init(&b, 16384);
  sbx_buf_appendf(
      &b, "%s",
      "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
      "<title>Page not found \xe2\x80\x94 Cerea sandbox</title>"
      "<link rel=\"icon\" href=\"data:,\"><link rel=\"stylesheet\" href=\"/assets/style.css\">"
      "</head><body><header class=\"top\"><h1 class=\"brand\"><a href=\"/\">Cerea sandbox</a>"
      "</h1></header><main class=\"single\" id=\"main\"><section class=\"panel error-page\">"
      "<h2>Page not found</h2><p>There is no page at <code>");
  const char *path = tp_req_path(req);
  for (size_t i = 0; path[i] && i < 200; i++) {
    const char *e = path[i] == '<'   ? "&lt;"
                    : path[i] == '>' ? "&gt;"
                    : path[i] == '&' ? "&amp;"
                    : path[i] == '"' ? "&quot;"
                                     : NULL;
    if (e)
      sbx_buf_appendf(&b, "%s", e);
    else
      sbx_buf_append(&b, path + i, 1);
  }
  sbx_buf_appendf(
      &b, "%s",
      "</code>. Check the address, or go to one of these:</p><ul>"
      "<li><a href=\"/\">Playground and chats</a> \xe2\x80\x94 run Python in your "
      "browser; open a chat from its list</li>"
      "<li><a href=\"/admin\">Administration</a> \xe2\x80\x94 for operators</li></ul>"
      "<p class=\"muted small\">A chat opens from the link the app gave you "
      "(<code>/chat/&lt;id&gt;#token=\xe2\x80\xa6</code>).</p></section></main></body></html>\n");
  char headers[600];
  snprintf(
      headers, sizeof(headers),
      "Content-Type: text/html; charset=utf-8\r\nCache-Control: no-store\r\n"
      "Content-Security-Policy: default-src 'none'; style-src 'self'; base-uri 'none'; "
      "form-action 'none'\r\n%sX-Content-Type-Options: nosniff\r\nReferrer-Policy: no-referrer\r\n",
      ISOLATION);
  tp_respond(req, 404, headers, b.data ? b.data : "", b.len);
  sbx_buf_free(&b);
}

/* GET /v1/openapi.json: docs/openapi.yaml as JSON, made by setup's app build into the static tree. */
static void on_openapi(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  char path[4096];
  snprintf(path, sizeof(path), "%s/openapi.json", o->static_dir);
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) ||
      tp_respond_file(req, path, "application/json",
                      "Cache-Control: no-cache\r\nX-Content-Type-Options: nosniff\r\n", 0) != 0)
    orch__api_error(req, 404, "not_found",
                    "no openapi.json in the static tree (run bash scripts/setup.sh)");
}

static void on_index(struct tp_req *req, void *ud) { serve_app(req, ud, "index.html"); }
static void on_chat_page(struct tp_req *req, void *ud) { serve_app(req, ud, "chat.html"); }
static void on_admin_page(struct tp_req *req, void *ud) { serve_app(req, ud, "admin.html"); }
static void on_signin_page(struct tp_req *req, void *ud) { serve_app(req, ud, "signin.html"); }

void orch__routes_static(struct orch *o) {
  char dir[4096];
  snprintf(dir, sizeof(dir), "%s/pyodide", o->static_dir);
  tp_static_mount(o->tp, "/pyodide/", dir, "public, max-age=31536000, immutable");
  snprintf(dir, sizeof(dir), "%s/assets", o->static_dir);
  tp_static_mount(o->tp, "/assets/", dir, "no-cache");
  /* esbuild names every chunk by its content's hash: a new build makes new names. */
  snprintf(dir, sizeof(dir), "%s/assets/chunks", o->static_dir);
  tp_static_mount(o->tp, "/assets/chunks/", dir, "public, max-age=31536000, immutable");
  tp_path_headers(o->tp, "/pyodide/", SUBRESOURCE);
  tp_path_headers(o->tp, "/assets/", SUBRESOURCE);
  tp_route(o->tp, "GET", "/worker/{path*}", 0, on_worker, o);
  tp_route(o->tp, "GET", "/worker-pypi/{path*}", 0, on_worker_pypi, o);
  tp_route(o->tp, "GET", "/", 0, on_index, o);
  tp_route(o->tp, "GET", "/playground", 0, on_index, o);
  tp_route(o->tp, "GET", "/chat/{chat}", 0, on_chat_page, o);
  tp_route(o->tp, "GET", "/admin", 0, on_admin_page, o);
  tp_route(o->tp, "GET", "/signin", 0, on_signin_page, o);
  tp_route(o->tp, "GET", "/v1/openapi.json", 0, on_openapi, o);
  tp_not_found(o->tp, on_not_found, o);
}
