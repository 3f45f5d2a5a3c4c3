/* api_people.c -- people and their sessions over HTTP (people.c is the domain):
 *
 *   POST  /v1/signin {name, password}   -> 200 {person} + Set-Cookie cerea_session (HttpOnly,
 *                                          SameSite=Strict, Path=/, Secure over TLS); 401 for a
 *                                          wrong name or password alike, or a disabled person;
 *                                          429 `throttled` + Retry-After before any hashing
 *   POST  /v1/signout                   -> 200 {}: the session ended in the store, the cookie
 *                                          cleared (Max-Age=0)
 *   GET   /v1/me                        -> 200 {person, settings} (a session)
 *   PATCH /v1/me/settings {pypi}        -> 200 {settings}
 *   POST  /v1/me/password {current, new} -> 200 {}: must_change_password cleared, the person's
 *                                          other sessions ended
 *   GET   /v1/admin/people              -> 200 {people}          (the API key or an admin)
 *   POST  /v1/admin/people {name, role?, password?} -> 201 {person, password?}: the password only
 *                                          when the server made it (once)
 *   PATCH /v1/admin/people/{id} {disabled?, role?, reset_password?} -> 200 {person, password?}:
 *                                          disabling ends the person's sessions at once
 *
 * A password is read from the body, handed to the thread pool (orch__pw_start) and wiped: it is
 * never logged, stored or answered; the one answer holding one is the password the server made.
 * What it does not do: check sessions of other calls (api.c), or hash on the loop.
 */
#include "api.h"
#include "transport.h"

#include <openssl/crypto.h>
#include <string.h>

/* ---- what the answers show ------------------------------------------------------------------- */

static json_t *person_json(const struct store_person *p, int admin_view) {
  json_t *j = json_pack("{s:s, s:s, s:s}", "id", p->id, "name", p->name, "role", p->role);
  if (j == NULL)
    return NULL;
  json_object_set_new(j, "must_change_password", json_boolean(p->must_change_password));
  if (admin_view) {
    json_object_set_new(j, "disabled", json_boolean(p->disabled));
    json_object_set_new(j, "created_at", json_integer(p->created_at));
    json_object_set_new(j, "last_seen_at",
                        p->last_seen_at ? json_integer(p->last_seen_at) : json_null());
  }
  return j;
}

static json_t *settings_json(struct orch *o, const struct store_person *p) {
  (void)o;
  return json_pack("{s:b}", "pypi", orch__settings_pypi(p->settings_json));
}

/* Set-Cookie for a session token (NULL: the cookie cleared). */
static void cookie_header(struct orch *o, const char *token, char *out, size_t cap) {
  const char *secure = o->cfg->tls_cert ? "; Secure" : "";
  if (token)
    snprintf(out, cap,
             "Set-Cookie: " ORCH_SESSION_COOKIE "=%s; Path=/; HttpOnly; SameSite=Strict; "
             "Max-Age=%d%s\r\nCache-Control: no-store\r\n",
             token, o->cfg->session_max_s, secure);
  else
    snprintf(out, cap,
             "Set-Cookie: " ORCH_SESSION_COOKIE "=; Path=/; HttpOnly; SameSite=Strict; "
             "Max-Age=0%s\r\nCache-Control: no-store\r\n",
             secure);
}

static void answer_json_h(struct tp_req *req, int status, const char *headers, json_t *body) {
  size_t len = 0;
  char *text = orch__json_dump(body, &len);
  json_decref(body);
  if (text == NULL) {
    orch__api_error(req, 500, "internal", "out of memory");
    return;
  }
  char h[800];
  snprintf(h, sizeof h, "%sContent-Type: application/json\r\n", headers);
  tp_respond(req, status, h, text, len);
  sbx_free(text);
}

static void answer_throttled(struct tp_req *req, uint64_t wait_s) {
  char h[64], msg[160];
  snprintf(h, sizeof h, "Retry-After: %llu\r\n", (unsigned long long)wait_s);
  snprintf(msg, sizeof msg, "too many sign-in attempts: try again in %llu s",
           (unsigned long long)wait_s);
  tp_respond_error_h(req, 429, h, "throttled", msg);
}

/* A string field of a body as bytes: jansson refuses a body that is not UTF-8 (400
 * malformed_json), and the check after it names the field (400 invalid_field). */
static int read_str(struct tp_req *req, json_t *body, const char *key, int required,
                    const char **s, size_t *len) {
  json_t *v = json_object_get(body, key);
  *s = NULL;
  *len = 0;
  if (v == NULL || json_is_null(v)) {
    if (required)
      orch__api_error(req, 400, "invalid_field", "%s: required", key);
    return required ? -1 : 0;
  }
  if (!json_is_string(v)) {
    orch__api_error(req, 400, "invalid_field", "%s: a string", key);
    return -1;
  }
  *s = json_string_value(v);
  *len = json_string_length(v);
  return 0;
}

/* The caller's live session: 0 with *a, else answered (401, or 403 for another origin). */
static int session_only(struct orch *o, struct tp_req *req, struct orch_auth *a) {
  orch__api_auth(o, req, NULL, a);
  if (orch__api_deny_auth(req, a))
    return 1;
  if (a->kind != ORCH_CRED_SESSION) {
    orch__api_error(req, 401, "unauthorized", "this call needs a person's session: sign in");
    return 1;
  }
  return 0;
}

/* ---- sign-in ---------------------------------------------------------------------------------- */

struct signin {
  struct orch *o;
  struct tp_req *req;
  int gone; /* the client left while the password was checked */
  char name[ORCH_NAME_MAX_BYTES + 1];
  size_t name_len;
  char addr[80];
  struct store_person p; /* the person of that name (p.id "" when none) */
  char token[65];
  struct store_session s;
};

static void signin_free(struct signin *si) {
  store_person_free(&si->p);
  OPENSSL_cleanse(si->token, sizeof si->token);
  sbx_free(si);
}

/* The server closed while the password was checked: its connection is gone (the transport
 * closed it first), so nothing is answered; the request is let go and the rest freed. */
static void signin_drop(void *ud) {
  struct signin *si = ud;
  tp_req_release(si->req);
  signin_free(si);
}

static void on_signin_gone(struct tp_req *req, void *ud) {
  (void)req;
  ((struct signin *)ud)->gone = 1;
}

static void on_session_stored(int rc, const struct sbx_error *err, void *ud) {
  struct signin *si = ud;
  if (!si->gone) {
    tp_req_on_close(si->req, NULL, NULL);
    if (rc != 0) {
      orch__api_fail(si->req, rc, ORCH_OP_STORE, "session not stored: %s",
                     err ? err->msg : sbx_strerror(rc));
    } else {
      char h[400];
      cookie_header(si->o, si->token, h, sizeof h);
      json_t *j = json_object();
      json_object_set_new(j, "person", person_json(&si->p, 0));
      answer_json_h(si->req, 200, h, j);
    }
  }
  tp_req_release(si->req);
  signin_free(si);
}

static void on_password_checked(void *ud, int match, const char *encoded) {
  (void)encoded;
  struct signin *si = ud;
  struct orch *o = si->o;
  int ok = match == 1 && si->p.id[0] && !si->p.disabled;
  orch__throttle_end(o->people, si->name, si->name_len, si->addr, ok, sbx_now_mono_ms());
  if (si->gone || !ok) {
    if (!si->gone) {
      tp_req_on_close(si->req, NULL, NULL);
      /* a disabled person, a wrong password, nobody of that name: one answer */
      orch__api_error(si->req, 401, "unauthorized", "wrong name or password");
    }
    tp_req_release(si->req);
    signin_free(si);
    return;
  }
  char hash[65];
  if (orch__session_token_new(si->token, hash) != 0) {
    tp_req_on_close(si->req, NULL, NULL);
    orch__api_error(si->req, 500, "internal", "no random bytes");
    tp_req_release(si->req);
    signin_free(si);
    return;
  }
  memcpy(si->s.token_hash, hash, sizeof hash);
  memcpy(si->s.person_id, si->p.id, sizeof si->s.person_id);
  si->s.created_at = si->s.last_used_at = sbx_now_wall_ms();
  if (store_session_create(o->st, &si->s, on_session_stored, si) != 0) {
    tp_req_on_close(si->req, NULL, NULL);
    orch__api_error(si->req, 500, "internal", "the session could not be queued");
    tp_req_release(si->req);
    signin_free(si);
  }
}

/* A body that is not UTF-8 is a name or password that is not (JSON text is UTF-8 or nothing):
 * said so, not as malformed JSON. */
static int body_not_utf8(struct tp_req *req) {
  size_t len = 0;
  const char *b = tp_req_body(req, &len);
  if (b == NULL || orch__utf8_valid(b, len))
    return 0;
  orch__api_error(req, 400, "invalid_field", "name and password: UTF-8 text");
  return 1;
}

static void on_signin(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  if (body_not_utf8(req))
    return;
  json_t *body = orch__api_body_object(req);
  if (body == NULL)
    return;
  const char *name, *pw, *why = NULL;
  size_t nlen, plen;
  if (read_str(req, body, "name", 1, &name, &nlen) != 0 ||
      read_str(req, body, "password", 1, &pw, &plen) != 0) {
    json_decref(body);
    return;
  }
  if ((why = orch__person_name_check(name, nlen)) != NULL ||
      (why = orch__password_check(pw, plen, 0)) != NULL) {
    orch__api_error(req, 400, "invalid_field", "%s", why);
    json_decref(body);
    return;
  }
  struct signin *si = sbx_calloc(1, sizeof *si);
  if (si == NULL) {
    json_decref(body);
    orch__api_error(req, 500, "internal", "out of memory");
    return;
  }
  si->o = o;
  si->req = req;
  memcpy(si->name, name, nlen);
  si->name_len = nlen;
  orch__throttle_key_addr(tp_req_peer(req), si->addr, sizeof si->addr);
  /* the throttle first: a refused attempt costs no hashing */
  uint64_t wait_s = orch__throttle_begin(o->people, si->name, nlen, si->addr, sbx_now_mono_ms());
  if (wait_s > 0) {
    json_decref(body);
    sbx_free(si);
    answer_throttled(req, wait_s);
    return;
  }
  int rc = store_person_by_name(o->st, si->name, &si->p);
  if (rc != 0 && rc != SBX_ENOENT) {
    orch__throttle_end(o->people, si->name, nlen, si->addr, -1, sbx_now_mono_ms());
    json_decref(body);
    signin_free(si);
    orch__api_error(req, 500, "storage", "cannot read people: %s", sbx_strerror(rc));
    return;
  }
  rc = orch__pw_start(o, 1, rc == 0 ? si->p.pw_hash : NULL, pw, plen, on_password_checked,
                      signin_drop, si);
  json_decref(body); /* the password's copy in the body goes with it */
  if (rc != 0) {
    orch__throttle_end(o->people, si->name, nlen, si->addr, -1, sbx_now_mono_ms());
    signin_free(si);
    if (rc == SBX_EBUSY)
      answer_throttled(req, 1);
    else
      orch__api_error(req, 500, "internal", "the password could not be checked");
    return;
  }
  tp_req_hold(req);
  tp_req_on_close(req, on_signin_gone, si);
}

/* ---- sign-out, me ----------------------------------------------------------------------------- */

struct held {
  struct orch *o;
  struct tp_req *req;
  int status;
  json_t *body; /* the answer once the write is durable */
  char headers[400];
};

static void on_held_written(int rc, const struct sbx_error *err, void *ud) {
  struct held *h = ud;
  if (rc == 0)
    answer_json_h(h->req, h->status, h->headers, h->body);
  else {
    json_decref(h->body);
    orch__api_fail(h->req, rc, ORCH_OP_STORE, "not stored: %s", err ? err->msg : sbx_strerror(rc));
  }
  tp_req_release(h->req);
  sbx_free(h);
}

static struct held *held_new(struct orch *o, struct tp_req *req, int status, json_t *body) {
  struct held *h = sbx_calloc(1, sizeof *h);
  if (h == NULL) {
    json_decref(body);
    orch__api_error(req, 500, "internal", "out of memory");
    return NULL;
  }
  h->o = o;
  h->req = req;
  h->status = status;
  h->body = body;
  snprintf(h->headers, sizeof h->headers, "Cache-Control: no-store\r\n");
  tp_req_hold(req);
  return h;
}

static void held_failed(struct held *h) {
  json_decref(h->body);
  orch__api_error(h->req, 500, "internal", "the write could not be queued");
  tp_req_release(h->req);
  sbx_free(h);
}

static void on_signout(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  struct orch_auth a;
  orch__api_auth(o, req, NULL, &a);
  if (a.origin_bad && orch__api_deny_auth(req, &a))
    return;
  if (a.kind != ORCH_CRED_SESSION) { /* no live session: nothing to end, the cookie cleared */
    char h[400];
    cookie_header(o, NULL, h, sizeof h);
    answer_json_h(req, 200, h, json_object());
    return;
  }
  struct held *h = held_new(o, req, 200, json_object());
  if (h == NULL)
    return;
  cookie_header(o, NULL, h->headers, sizeof h->headers);
  if (store_session_end(o->st, a.token_hash, sbx_now_wall_ms(), on_held_written, h) != 0)
    held_failed(h);
}

static void on_me(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  struct orch_auth a;
  if (session_only(o, req, &a))
    return;
  struct store_person p;
  if (store_person_get(o->st, a.person_id, &p) != 0) {
    orch__api_error(req, 401, "unauthorized", "no such person any more: sign in");
    return;
  }
  json_t *j = json_object();
  json_object_set_new(j, "person", person_json(&p, 0));
  json_object_set_new(j, "settings", settings_json(o, &p));
  store_person_free(&p);
  answer_json_h(req, 200, "Cache-Control: no-store\r\n", j);
}

static void on_me_settings(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  struct orch_auth a;
  if (session_only(o, req, &a))
    return;
  json_t *body = orch__api_body_object(req);
  if (body == NULL)
    return;
  int pypi = 1;
  struct orch_field f[] = {ORCH_FIELD("pypi", "b", &pypi)};
  if (orch__api_unpack(req, body, NULL, f, 1) != 0) {
    json_decref(body);
    return;
  }
  json_decref(body);
  struct store_person p;
  if (store_person_get(o->st, a.person_id, &p) != 0) {
    orch__api_error(req, 401, "unauthorized", "no such person any more: sign in");
    return;
  }
  json_t *set = p.settings_json ? json_loads(p.settings_json, 0, NULL) : NULL;
  if (!json_is_object(set)) {
    json_decref(set);
    set = json_object();
  }
  if (f[0].given)
    json_object_set_new(set, "pypi", json_boolean(pypi));
  char *text = orch__json_dump(set, NULL);
  json_decref(set);
  if (text == NULL) {
    store_person_free(&p);
    orch__api_error(req, 500, "internal", "out of memory");
    return;
  }
  sbx_free(p.settings_json);
  p.settings_json = text;
  json_t *answer = json_object();
  json_object_set_new(answer, "settings", settings_json(o, &p));
  struct held *h = held_new(o, req, 200, answer);
  if (h != NULL && store_person_update(o->st, &p, on_held_written, h) != 0)
    held_failed(h);
  store_person_free(&p);
}

/* ---- password changes ------------------------------------------------------------------------- */

struct pw_change {
  struct orch *o;
  struct tp_req *req;
  int gone;
  char *new_pw; /* wiped and freed */
  size_t new_len;
  char except[65]; /* the session kept (a person's own change); "" none */
  struct store_person p;
  int status;
  char generated[32]; /* a password the server made, answered once; "" none */
  int new_person;     /* create p (else update it) */
  int end_sessions;   /* end p's sessions (but except) once written */
};

static void pw_change_free(struct pw_change *c) {
  if (c->new_pw) {
    OPENSSL_cleanse(c->new_pw, c->new_len);
    sbx_free(c->new_pw);
  }
  OPENSSL_cleanse(c->generated, sizeof c->generated);
  store_person_free(&c->p);
  sbx_free(c);
}

/* The server closed while a password was hashed or checked: as signin_drop. */
static void pw_change_drop(void *ud) {
  struct pw_change *c = ud;
  tp_req_release(c->req);
  pw_change_free(c);
}

static void on_pw_gone(struct tp_req *req, void *ud) {
  (void)req;
  ((struct pw_change *)ud)->gone = 1;
}

/* Answers (status >= 400: the error code and msg; rc < 0: the error map's row for it) and frees c. */
static void pw_change_end_rc(struct pw_change *c, int rc, int status, const char *code,
                             const char *msg) {
  if (!c->gone) {
    tp_req_on_close(c->req, NULL, NULL);
    if (rc < 0) {
      orch__api_fail(c->req, rc, ORCH_OP_STORE, "%s", msg);
    } else if (status >= 400) {
      orch__api_error(c->req, status, code, "%s", msg);
    } else {
      json_t *j = json_object();
      if (c->status != 0) { /* admin calls show the person; a person's own change {} */
        json_object_set_new(j, "person", person_json(&c->p, 1));
        if (c->generated[0])
          json_object_set_new(j, "password", json_string(c->generated));
      }
      answer_json_h(c->req, status, "Cache-Control: no-store\r\n", j);
    }
  }
  tp_req_release(c->req);
  pw_change_free(c);
}

static void pw_change_end(struct pw_change *c, int status, const char *code, const char *msg) {
  pw_change_end_rc(c, 0, status, code, msg);
}

static void on_sessions_ended(int rc, const struct sbx_error *err, void *ud) {
  struct pw_change *c = ud;
  if (rc != 0)
    pw_change_end_rc(c, rc, 0, NULL, err ? err->msg : sbx_strerror(rc));
  else
    pw_change_end(c, c->status ? c->status : 200, NULL, NULL);
}

static void on_person_written(int rc, const struct sbx_error *err, void *ud) {
  struct pw_change *c = ud;
  if (rc != 0) { /* a taken name is the store's ECONFLICT: 409 conflict */
    pw_change_end_rc(c, rc, 0, NULL,
                     rc == SBX_ECONFLICT ? "that name is taken" : err ? err->msg : sbx_strerror(rc));
    return;
  }
  if (c->end_sessions &&
      store_session_end_person(c->o->st, c->p.id, c->except[0] ? c->except : NULL,
                               sbx_now_wall_ms(), on_sessions_ended, c) == 0)
    return;
  on_sessions_ended(c->end_sessions ? SBX_ENOMEM : 0, NULL, c);
}

static void write_person(struct pw_change *c) {
  int rc = c->new_person ? store_person_create(c->o->st, &c->p, on_person_written, c)
                         : store_person_update(c->o->st, &c->p, on_person_written, c);
  if (rc != 0)
    pw_change_end(c, 500, "internal", "the write could not be queued");
}

static void on_new_hash(void *ud, int rc, const char *encoded) {
  struct pw_change *c = ud;
  if (rc != 0 || c->gone) {
    pw_change_end(c, 500, "internal", "the password could not be hashed");
    return;
  }
  char *h = sbx_strdup(encoded);
  if (h == NULL) {
    pw_change_end(c, 500, "internal", "out of memory");
    return;
  }
  if (c->p.pw_hash) {
    OPENSSL_cleanse(c->p.pw_hash, strlen(c->p.pw_hash));
    sbx_free(c->p.pw_hash);
  }
  c->p.pw_hash = h;
  write_person(c);
}

/* Hashes c->new_pw (on the thread pool), then writes c->p with it. */
static void hash_and_write(struct pw_change *c) {
  int rc = orch__pw_start(c->o, 0, NULL, c->new_pw, c->new_len, on_new_hash, pw_change_drop, c);
  if (rc == SBX_EBUSY)
    pw_change_end(c, 503, "unavailable", "passwords are being checked: try again in a second");
  else if (rc != 0)
    pw_change_end(c, 500, "internal", "the password could not be hashed");
}

static void on_current_checked(void *ud, int match, const char *encoded) {
  (void)encoded;
  struct pw_change *c = ud;
  if (c->gone || match != 1) {
    pw_change_end(c, 401, "unauthorized", "the current password is wrong");
    return;
  }
  hash_and_write(c);
}

static struct pw_change *pw_change_new(struct orch *o, struct tp_req *req, const char *pw,
                                       size_t len) {
  struct pw_change *c = sbx_calloc(1, sizeof *c);
  if (c == NULL || (c->new_pw = sbx_malloc(len + 1)) == NULL) {
    sbx_free(c);
    orch__api_error(req, 500, "internal", "out of memory");
    return NULL;
  }
  memcpy(c->new_pw, pw, len);
  c->new_pw[len] = '\0';
  c->new_len = len;
  c->o = o;
  c->req = req;
  tp_req_hold(req);
  tp_req_on_close(req, on_pw_gone, c);
  return c;
}

static void on_me_password(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  struct orch_auth a;
  if (session_only(o, req, &a) || body_not_utf8(req))
    return;
  json_t *body = orch__api_body_object(req);
  if (body == NULL)
    return;
  const char *cur, *nw, *why = NULL;
  size_t clen, nlen;
  if (read_str(req, body, "current", 1, &cur, &clen) != 0 ||
      read_str(req, body, "new", 1, &nw, &nlen) != 0) {
    json_decref(body);
    return;
  }
  if ((why = orch__password_check(cur, clen, 0)) != NULL ||
      (why = orch__password_check(nw, nlen, 1)) != NULL) {
    json_decref(body);
    orch__api_error(req, 400, "invalid_field", "%s", why);
    return;
  }
  struct store_person p;
  if (store_person_get(o->st, a.person_id, &p) != 0) {
    json_decref(body);
    orch__api_error(req, 401, "unauthorized", "no such person any more: sign in");
    return;
  }
  struct pw_change *c = pw_change_new(o, req, nw, nlen);
  if (c == NULL) {
    store_person_free(&p);
    json_decref(body);
    return;
  }
  c->p = p;
  c->p.must_change_password = 0;
  c->end_sessions = 1;
  memcpy(c->except, a.token_hash, sizeof c->except);
  int rc = orch__pw_start(o, 1, c->p.pw_hash, cur, clen, on_current_checked, pw_change_drop, c);
  json_decref(body);
  if (rc == SBX_EBUSY)
    pw_change_end(c, 503, "unavailable", "passwords are being checked: try again in a second");
  else if (rc != 0)
    pw_change_end(c, 500, "internal", "the password could not be checked");
}

/* ---- administration ---------------------------------------------------------------------------- */

static int admin_only(struct orch *o, struct tp_req *req) {
  return orch__api_admin_only(o, req, "people calls", NULL);
}

static int role_ok(const char *r) { return strcmp(r, "admin") == 0 || strcmp(r, "user") == 0; }

static void on_people(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  if (admin_only(o, req))
    return;
  struct store_person *v = NULL;
  size_t n = 0;
  if (store_person_list(o->st, &v, &n) != 0) {
    orch__api_error(req, 500, "storage", "cannot list people");
    return;
  }
  json_t *arr = json_array();
  for (size_t i = 0; i < n; i++)
    json_array_append_new(arr, person_json(&v[i], 1));
  store_person_list_free(v, n);
  json_t *j = json_object();
  json_object_set_new(j, "people", arr);
  answer_json_h(req, 200, "Cache-Control: no-store\r\n", j);
}

static void on_add_person(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  if (admin_only(o, req) || body_not_utf8(req))
    return;
  json_t *body = orch__api_body_object(req);
  if (body == NULL)
    return;
  const char *name, *pw, *role = "user", *why = NULL;
  size_t nlen, plen;
  struct orch_field f[] = {ORCH_FIELD("role", "s", &role)};
  if (read_str(req, body, "name", 1, &name, &nlen) != 0 ||
      read_str(req, body, "password", 0, &pw, &plen) != 0 ||
      orch__api_unpack(req, body, NULL, f, 1) != 0) {
    json_decref(body);
    return;
  }
  if ((why = orch__person_name_check(name, nlen)) != NULL ||
      (pw && (why = orch__password_check(pw, plen, 1)) != NULL) ||
      (!role_ok(role) && (why = "role: \"admin\" or \"user\"") != NULL)) {
    json_decref(body);
    orch__api_error(req, 400, "invalid_field", "%s", why);
    return;
  }
  struct store_person existing;
  if (store_person_by_name(o->st, name, &existing) == 0) {
    store_person_free(&existing);
    json_decref(body);
    orch__api_error(req, 409, "conflict", "that name is taken");
    return;
  }
  char generated[32] = "";
  if (pw == NULL) {
    if (orch__pw_generate(generated, sizeof generated) != 0) {
      json_decref(body);
      orch__api_error(req, 500, "internal", "no random bytes");
      return;
    }
    pw = generated;
    plen = strlen(generated);
  }
  struct pw_change *c = pw_change_new(o, req, pw, plen);
  if (c == NULL) {
    OPENSSL_cleanse(generated, sizeof generated);
    json_decref(body);
    return;
  }
  memcpy(c->generated, generated, sizeof generated);
  OPENSSL_cleanse(generated, sizeof generated);
  c->status = 201;
  c->new_person = 1;
  store_new_id(c->p.id);
  c->p.name = sbx_strdup(name);
  c->p.role = sbx_strdup(role);
  c->p.settings_json = sbx_strdup("{}");
  c->p.must_change_password = c->generated[0] != '\0'; /* a password someone else read */
  c->p.created_at = sbx_now_wall_ms();
  json_decref(body);
  if (c->p.name == NULL || c->p.role == NULL || c->p.settings_json == NULL) {
    pw_change_end(c, 500, "internal", "out of memory");
    return;
  }
  hash_and_write(c);
}

static void on_patch_person(struct tp_req *req, void *ud) {
  struct orch *o = ud;
  struct orch_auth a;
  if (orch__api_admin_only(o, req, "people calls", &a))
    return;
  const char *id = tp_req_param(req, "id");
  struct store_person p;
  if (!orch__valid_id(id) || store_person_get(o->st, id, &p) != 0) {
    orch__api_error(req, 404, "not_found", "no person %s", id ? id : "");
    return;
  }
  json_t *body = orch__api_body_object(req);
  if (body == NULL) {
    store_person_free(&p);
    return;
  }
  int disabled = 0, reset = 0;
  const char *role = NULL;
  struct orch_field f[] = {ORCH_FIELD("disabled", "b", &disabled), ORCH_FIELD("role", "s", &role),
                           ORCH_FIELD("reset_password", "b", &reset)};
  if (orch__api_unpack(req, body, NULL, f, 3) != 0) {
    json_decref(body);
    store_person_free(&p);
    return;
  }
  if (role && !role_ok(role)) {
    json_decref(body);
    store_person_free(&p);
    orch__api_error(req, 400, "invalid_field", "role: \"admin\" or \"user\"");
    return;
  }
  if (a.kind == ORCH_CRED_SESSION && strcmp(a.person_id, p.id) == 0 &&
      ((f[0].given && disabled) || (role && strcmp(role, "admin") != 0))) {
    json_decref(body);
    store_person_free(&p);
    orch__api_error(req, 409, "conflict",
                    "an administrator cannot disable themselves or give up their own role");
    return;
  }
  char generated[32] = "";
  if (f[2].given && reset && orch__pw_generate(generated, sizeof generated) != 0) {
    json_decref(body);
    store_person_free(&p);
    orch__api_error(req, 500, "internal", "no random bytes");
    return;
  }
  struct pw_change *c = pw_change_new(o, req, generated, strlen(generated));
  if (c == NULL) {
    json_decref(body);
    store_person_free(&p);
    return;
  }
  c->p = p;
  c->status = 200;
  if (f[0].given) {
    c->p.disabled = disabled;
    c->end_sessions = disabled; /* at once: the next call of any of them is refused */
  }
  if (role) {
    char *r = sbx_strdup(role);
    if (r) {
      sbx_free(c->p.role);
      c->p.role = r;
    }
  }
  json_decref(body);
  if (generated[0]) { /* a new password, shown once; every session of the person ends */
    memcpy(c->generated, generated, sizeof generated);
    OPENSSL_cleanse(generated, sizeof generated);
    c->p.must_change_password = 1;
    c->end_sessions = 1;
    hash_and_write(c);
    return;
  }
  write_person(c);
}

void orch__routes_people(struct orch *o) {
  tp_route(o->tp, "POST", "/v1/signin", 8 * 1024, on_signin, o);
  tp_route(o->tp, "POST", "/v1/signout", 1024, on_signout, o);
  tp_route(o->tp, "GET", "/v1/me", 0, on_me, o);
  tp_route(o->tp, "PATCH", "/v1/me/settings", 4 * 1024, on_me_settings, o);
  tp_route(o->tp, "POST", "/v1/me/password", 8 * 1024, on_me_password, o);
  tp_route(o->tp, "GET", "/v1/admin/people", 0, on_people, o);
  tp_route(o->tp, "POST", "/v1/admin/people", 8 * 1024, on_add_person, o);
  tp_route(o->tp, "PATCH", "/v1/admin/people/{id}", 4 * 1024, on_patch_person, o);
}
