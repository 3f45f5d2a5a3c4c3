/* api_reply.c -- the answers every handler writes: JSON (Cache-Control: no-store), the error
 * answer in the API's one shape {"error":{"code","message"}} (its message kept valid UTF-8), and
 * 503 `unavailable` with Retry-After; and what a Host header may hold, for the URLs the answers
 * name.
 *
 * The error map: which status and API code an sbx code answers with, one table for every
 * handler (the access checks in api.c decide 401 and 403 themselves: no code says who asked).
 */
#include "api_reply.h"
#include "transport.h"

#include <stdarg.h>
#include <string.h>
#include <utf8proc.h>

void orch__api_json(struct tp_req *req, int status, json_t *body) {
  size_t len = 0;
  char *text = body ? orch__json_dump(body, &len) : NULL;
  json_decref(body);
  if (text == NULL) {
    tp_respond_error(req, 500, "internal", "out of memory");
    return;
  }
  tp_respond(req, status, "Content-Type: application/json\r\nCache-Control: no-store\r\n", text,
             len);
  sbx_free(text);
}

void orch__api_text(struct tp_req *req, int status, const char *json_text, size_t len) {
  tp_respond(req, status, "Content-Type: application/json\r\nCache-Control: no-store\r\n",
             json_text, len);
}

/* The one writer of error answers: headers (NULL, or Retry-After) before the JSON body. */
static void api_error_v(struct tp_req *req, int status, const char *headers, const char *code,
                        const char *fmt, va_list ap) {
  char msg[600], text[3 * sizeof(msg)];
  vsnprintf(msg, sizeof(msg), fmt, ap);
  /* A message quotes what the client sent (a path's id, a query's name: any bytes), and the cut
   * above may split a character: what is not UTF-8 becomes U+FFFD, so the answer stays JSON. */
  size_t n = strlen(msg), o = 0;
  for (size_t i = 0; i < n;) {
    utf8proc_int32_t c;
    utf8proc_ssize_t l =
        utf8proc_iterate((const utf8proc_uint8_t *)msg + i, (utf8proc_ssize_t)(n - i), &c);
    if (l > 0) {
      memcpy(text + o, msg + i, (size_t)l);
      o += (size_t)l, i += (size_t)l;
    } else {
      memcpy(text + o, "\xEF\xBF\xBD", 3);
      o += 3, i++;
    }
  }
  text[o] = '\0';
  tp_respond_error_h(req, status, headers, code, text);
}

void orch__api_error(struct tp_req *req, int status, const char *code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  api_error_v(req, status, NULL, code, fmt, ap);
  va_end(ap);
}

void orch__api_unavailable(struct tp_req *req, uint64_t retry_s, const char *fmt, ...) {
  char h[48];
  snprintf(h, sizeof h, "Retry-After: %llu\r\n", (unsigned long long)SBX_MAX(retry_s, 1));
  va_list ap;
  va_start(ap, fmt);
  api_error_v(req, 503, h, "unavailable", fmt, ap);
  va_end(ap);
}

/* Rows of an operation first, then the common ones (op ANY); the first match is the answer. */
static const struct {
  int rc;
  enum orch_api_op op;
  struct orch_api_fault f;
} api_faults[] = {
    {SBX_ESTATE, ORCH_OP_INPUT, {409, "not_waiting"}},
    {SBX_EBUSY, ORCH_OP_ASK, {409, "turn_open"}},
    {SBX_ESTATE, ORCH_OP_TURN_STOP, {409, "turn_finished"}},
    {SBX_EFULL, ORCH_OP_PAGE_FILE, {413, "too_many_files"}},
    {SBX_EBUSY, ORCH_OP_PAGE_FILE, {503, "busy"}},
    {SBX_ENOENT, ORCH_OP_MSG_CURSOR, {400, "invalid_field"}},
    {SBX_ENAME, ORCH_OP_ANY, {400, "invalid_name"}},
    {SBX_EINVAL, ORCH_OP_ANY, {400, "invalid_field"}},
    {SBX_ENOENT, ORCH_OP_ANY, {404, "not_found"}},
    {SBX_EEXIST, ORCH_OP_ANY, {409, "conflict"}},
    {SBX_ESTATE, ORCH_OP_ANY, {409, "conflict"}},
    {SBX_ECONFLICT, ORCH_OP_ANY, {409, "conflict"}},
    {SBX_EFULL, ORCH_OP_ANY, {413, "over_quota"}},
    {SBX_EBUSY, ORCH_OP_ANY, {503, "unavailable"}},   /* frees itself soon: a lease, a queue */
    {SBX_EREMOTE, ORCH_OP_ANY, {503, "unavailable"}}, /* one not forwarded: it moved meanwhile */
    {SBX_EAGAIN, ORCH_OP_ANY, {503, "unavailable"}},
};

struct orch_api_fault orch__api_fault(int rc, enum orch_api_op op) {
  for (size_t i = 0; i < SBX_ARRAY_SIZE(api_faults); i++)
    if (api_faults[i].rc == rc && (api_faults[i].op == op || api_faults[i].op == ORCH_OP_ANY))
      return api_faults[i].f;
  return (struct orch_api_fault){500, op == ORCH_OP_STORE ? "storage" : "internal"};
}

void orch__api_fail(struct tp_req *req, int rc, enum orch_api_op op, const char *fmt, ...) {
  struct orch_api_fault f = orch__api_fault(rc, op);
  va_list ap;
  va_start(ap, fmt);
  int soon = strcmp(f.code, "unavailable") == 0;
  api_error_v(req, f.status, soon ? "Retry-After: 1\r\n" : NULL, f.code, fmt, ap);
  va_end(ap);
}

int orch__host_ok(const char *h) {
  if (h == NULL || *h == '\0' || strlen(h) > 255)
    return 0;
  for (const char *p = h; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
          *p == '.' || *p == '-' || *p == ':' || *p == '[' || *p == ']'))
      return 0;
  return 1;
}
