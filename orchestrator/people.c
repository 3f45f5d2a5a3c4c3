/* people.c -- who signs in: passwords (Argon2id through libargon2, hashed and checked on libuv's
 * thread pool, never on the loop), sign-in throttling, sessions and their expiry, the names and
 * passwords a person may have, a person's own settings, and the first administrator.
 *
 * Passwords: hashed with Argon2id (RFC 9106) under CEREA_ARGON2_MEMORY_KIB and
 * CEREA_ARGON2_ITERATIONS, one lane, a 16-byte random salt and a 32-byte tag, kept as the encoded
 * string ("$argon2id$v=19$m=...,t=...,p=1$salt$tag") so a hash made under older parameters still
 * checks.  A password is held in memory only while it is hashed, and wiped after; it is never
 * logged or stored.  A name nobody has is checked against a hash made at start (the same cost),
 * so the answer's time does not tell which names exist.
 *
 * Throttling (struct orch_throttle): before any hashing, each attempt is counted against its
 * name and its address, in two fixed tables (memory bounded whatever the traffic: a full set
 * forgets its least recently used entry).  A key may fail ORCH_NAME_FREE (name) or
 * ORCH_ADDR_FREE (address) times; after that each further failure locks it out for twice as
 * long as the last (1 s, 2 s, 4 s, ... at most ORCH_LOCK_MAX_S), and attempts in flight count as
 * failures until they are answered, so many attempts at once are throttled like many in a row.
 * A key quiet for ORCH_THROTTLE_FORGET_MS starts again.  A sign-in that succeeds clears its name.
 *
 * Sessions: the cookie is 32 random bytes as hex; only its sha256 is stored.  A session is live
 * while it is not ended, younger than CEREA_SESSION_MAX_S and used within CEREA_SESSION_IDLE_S,
 * and its person exists and is not disabled (read from the store on every call: disabling ends
 * every session at once).  Its use is written at most every ORCH_TOUCH_MS (or a quarter of the
 * idle time, if shorter).
 *
 * What it does not do: read cookies or requests, or answer (http/api_people.c, http/api.c).
 */
#include "internal.h"

#include <argon2.h>
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>

#define ORCH_MOD "people"

/* ---- passwords -------------------------------------------------------------------------------- */

#define PW_SALT_LEN 16
#define PW_TAG_LEN  32

int orch__pw_hash(const struct orch_config *cfg, const char *pw, size_t len, char *out,
                  size_t cap) {
  unsigned char salt[PW_SALT_LEN];
  if (sbx_random(salt, sizeof salt) != 0)
    return SBX_EIO;
  int rc = argon2id_hash_encoded((uint32_t)cfg->argon2_iterations,
                                 (uint32_t)cfg->argon2_memory_kib, 1, pw, len, salt, sizeof salt,
                                 PW_TAG_LEN, out, cap);
  return rc == ARGON2_OK ? 0 : rc == ARGON2_MEMORY_ALLOCATION_ERROR ? SBX_ENOMEM : SBX_EINVAL;
}

int orch__pw_verify(const char *encoded, const char *pw, size_t len) {
  return encoded != NULL && argon2id_verify(encoded, pw, len) == ARGON2_OK;
}

/* One hash or check on the thread pool.  The request it answers may be gone by the end; the
 * people state it reports to may be closing (then only freed). */
struct pw_work {
  uv_work_t req;
  struct orch_people *pp;
  const struct orch_config *cfg;
  int verify;
  char *pw; /* wiped and freed after */
  size_t len;
  char encoded[ORCH_PW_HASH_MAX];
  int rc; /* hash: 0 or SBX_*; verify: 1 match, 0 not */
  orch_pw_cb cb;
  void (*drop)(void *ud); /* frees ud when the server closed first (cb not called) */
  void *ud;
};

static void pw_work_run(uv_work_t *r) {
  struct pw_work *w = r->data;
  if (w->verify)
    w->rc = orch__pw_verify(w->encoded, w->pw, w->len);
  else
    w->rc = orch__pw_hash(w->cfg, w->pw, w->len, w->encoded, sizeof w->encoded);
}

static void people_release(struct orch_people *pp) {
  if (pp->closed && pp->working == 0) {
    OPENSSL_cleanse(pp->dummy_hash, sizeof pp->dummy_hash);
    sbx_free(pp);
  }
}

static void pw_work_done(uv_work_t *r, int status) {
  struct pw_work *w = r->data;
  struct orch_people *pp = w->pp;
  OPENSSL_cleanse(w->pw, w->len);
  sbx_free(w->pw);
  pp->working--;
  if (!pp->closed)
    w->cb(w->ud, status == 0 ? w->rc : (w->verify ? 0 : SBX_EIO), w->encoded);
  else
    w->drop(w->ud);
  OPENSSL_cleanse(w->encoded, sizeof w->encoded);
  sbx_free(w);
  people_release(pp);
}

int orch__pw_working(const struct orch *o) { return o->people ? o->people->working : 0; }

int orch__pw_start(struct orch *o, int verify, const char *encoded, const char *pw, size_t len,
                   orch_pw_cb cb, void (*drop)(void *ud), void *ud) {
  struct orch_people *pp = o->people;
  if (cb == NULL || drop == NULL)
    return SBX_EINVAL;
  if (pp == NULL || pp->closed)
    return SBX_ECLOSED;
  if (pp->working >= ORCH_PW_WORKING_MAX)
    return SBX_EBUSY;
  struct pw_work *w = sbx_calloc(1, sizeof *w);
  if (w == NULL || (w->pw = sbx_malloc(len + 1)) == NULL) {
    sbx_free(w);
    return SBX_ENOMEM;
  }
  memcpy(w->pw, pw, len);
  w->pw[len] = '\0';
  w->len = len;
  w->verify = verify;
  w->cfg = o->cfg;
  w->pp = pp;
  w->cb = cb;
  w->drop = drop;
  w->ud = ud;
  if (verify)
    snprintf(w->encoded, sizeof w->encoded, "%s", encoded ? encoded : pp->dummy_hash);
  w->req.data = w;
  if (uv_queue_work(o->loop, &w->req, pw_work_run, pw_work_done) != 0) {
    OPENSSL_cleanse(w->pw, len);
    sbx_free(w->pw);
    sbx_free(w);
    return SBX_EIO;
  }
  pp->working++;
  return 0;
}

int orch__pw_generate(char *out, size_t cap) {
  /* 20 characters of a 32-letter alphabet without look-alikes: 100 bits */
  static const char abc[] = "abcdefghjkmnpqrstuvwxyz23456789";
  unsigned char r[20];
  if (cap < sizeof r + 1 || sbx_random(r, sizeof r) != 0)
    return SBX_EIO;
  for (size_t i = 0; i < sizeof r; i++)
    out[i] = abc[r[i] % 31];
  out[sizeof r] = '\0';
  OPENSSL_cleanse(r, sizeof r);
  return 0;
}

/* ---- names and passwords ---------------------------------------------------------------------- */

/* 1 when s[0..len) is UTF-8 (no overlong forms, no surrogates, at most U+10FFFF) and, unless
 * controls_ok, holds no control character (C0, DEL, C1); *chars gets its code points. */
static int utf8_scan(const char *s, size_t len, int controls_ok, size_t *chars) {
  const unsigned char *p = (const unsigned char *)s;
  size_t i = 0, n = 0;
  while (i < len) {
    uint32_t cp;
    size_t k;
    if (p[i] < 0x80)
      cp = p[i], k = 1;
    else if ((p[i] & 0xE0) == 0xC0)
      cp = p[i] & 0x1F, k = 2;
    else if ((p[i] & 0xF0) == 0xE0)
      cp = p[i] & 0x0F, k = 3;
    else if ((p[i] & 0xF8) == 0xF0)
      cp = p[i] & 0x07, k = 4;
    else
      return 0;
    if (i + k > len)
      return 0;
    for (size_t j = 1; j < k; j++) {
      if ((p[i + j] & 0xC0) != 0x80)
        return 0;
      cp = (cp << 6) | (p[i + j] & 0x3F);
    }
    if ((k == 2 && cp < 0x80) || (k == 3 && cp < 0x800) || (k == 4 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
      return 0;
    if (!controls_ok && (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F)))
      return 0;
    i += k, n++;
  }
  *chars = n;
  return 1;
}

static int utf8_clean(const char *s, size_t len, size_t *chars) {
  return utf8_scan(s, len, 0, chars);
}

int orch__utf8_valid(const char *s, size_t len) {
  size_t chars;
  return utf8_scan(s, len, 1, &chars);
}

const char *orch__person_name_check(const char *s, size_t len) {
  size_t chars = 0;
  if (len == 0 || len > ORCH_NAME_MAX_BYTES)
    return "name: from 1 to 64 characters";
  if (!utf8_clean(s, len, &chars))
    return "name: UTF-8 text without control characters";
  if (chars > 64)
    return "name: from 1 to 64 characters";
  if (s[0] == ' ' || s[len - 1] == ' ')
    return "name: no space at either end";
  return NULL;
}

const char *orch__password_check(const char *s, size_t len, int new_one) {
  size_t chars = 0;
  if (len == 0 || len > ORCH_PASSWORD_MAX_BYTES)
    return "password: from 1 to 1024 bytes";
  if (!utf8_clean(s, len, &chars))
    return "password: UTF-8 text without control characters";
  if (new_one && chars < ORCH_PASSWORD_MIN_CHARS)
    return "password: at least 8 characters";
  return NULL;
}

/* ---- throttling --------------------------------------------------------------------------------- */

static struct orch_throttle_slot *throttle_slot(struct orch_throttle *t, const char *key,
                                                size_t len, uint64_t now_ms, int make) {
  unsigned char d[32];
  char hex[65];
  store_sha256_hex(key, len, hex); /* the key's hash: no name or address is kept as given */
  for (int i = 0; i < 16; i++) {
    char b[3] = {hex[2 * i], hex[2 * i + 1], '\0'};
    d[i] = (unsigned char)strtoul(b, NULL, 16);
  }
  size_t set = ((size_t)d[0] | (size_t)d[1] << 8) % (ORCH_THROTTLE_SLOTS / ORCH_THROTTLE_WAYS);
  struct orch_throttle_slot *ways = &t->slot[set * ORCH_THROTTLE_WAYS], *lru = &ways[0];
  for (int i = 0; i < ORCH_THROTTLE_WAYS; i++) {
    struct orch_throttle_slot *s = &ways[i];
    if (s->used && memcmp(s->key, d, sizeof s->key) == 0) {
      if (s->inflight == 0 && s->until_ms <= now_ms &&
          now_ms - s->last_ms > ORCH_THROTTLE_FORGET_MS)
        s->fails = 0; /* quiet long enough: starts again */
      return s;
    }
    if (!s->used || (lru->used && s->last_ms < lru->last_ms))
      lru = s;
  }
  if (!make)
    return NULL;
  if (lru->used)
    t->evicted++;
  memset(lru, 0, sizeof *lru);
  lru->used = 1;
  memcpy(lru->key, d, sizeof lru->key);
  lru->last_ms = now_ms;
  return lru;
}

/* Seconds until slot s may try again (0: now), counting the attempts in flight as failures. */
static uint64_t throttle_wait(const struct orch_throttle_slot *s, unsigned free_fails,
                              uint64_t now_ms) {
  if (s == NULL)
    return 0;
  if (s->until_ms > now_ms)
    return (s->until_ms - now_ms + 999) / 1000;
  if (s->fails + s->inflight >= free_fails && s->inflight > 0)
    return 1; /* attempts of it are being checked: their outcome first */
  return 0;
}

uint64_t orch__throttle_begin(struct orch_people *pp, const char *name, size_t name_len,
                              const char *addr, uint64_t now_ms) {
  struct orch_throttle_slot *n = throttle_slot(&pp->names, name, name_len, now_ms, 0);
  struct orch_throttle_slot *a = throttle_slot(&pp->addrs, addr, strlen(addr), now_ms, 0);
  uint64_t wn = throttle_wait(n, ORCH_NAME_FREE, now_ms), wa = throttle_wait(a, ORCH_ADDR_FREE,
                                                                            now_ms);
  if (wn || wa) {
    pp->throttled++;
    return wn > wa ? wn : wa;
  }
  n = throttle_slot(&pp->names, name, name_len, now_ms, 1);
  a = throttle_slot(&pp->addrs, addr, strlen(addr), now_ms, 1);
  n->inflight++, a->inflight++;
  n->last_ms = a->last_ms = now_ms;
  return 0;
}

static void throttle_end_one(struct orch_throttle_slot *s, int ok, int clear, unsigned free_fails,
                             uint64_t now_ms) {
  if (s == NULL)
    return;
  if (s->inflight > 0)
    s->inflight--;
  if (ok < 0) /* not tried after all */
    return;
  s->last_ms = now_ms;
  if (ok) {
    if (clear)
      s->fails = 0, s->until_ms = 0;
    return;
  }
  s->fails++;
  if (s->fails >= free_fails) {
    unsigned k = s->fails - free_fails;
    uint64_t lock_s = k >= 9 ? ORCH_LOCK_MAX_S : (1u << k);
    if (lock_s > ORCH_LOCK_MAX_S)
      lock_s = ORCH_LOCK_MAX_S;
    s->until_ms = now_ms + lock_s * 1000;
  }
}

void orch__throttle_end(struct orch_people *pp, const char *name, size_t name_len,
                        const char *addr, int ok, uint64_t now_ms) {
  /* the slots may have been forgotten in between (a full set): then nothing is counted */
  throttle_end_one(throttle_slot(&pp->names, name, name_len, now_ms, 0), ok, 1, ORCH_NAME_FREE,
                   now_ms);
  throttle_end_one(throttle_slot(&pp->addrs, addr, strlen(addr), now_ms, 0), ok, 0,
                   ORCH_ADDR_FREE, now_ms);
}

void orch__throttle_key_addr(const char *peer, char *out, size_t cap) {
  /* "1.2.3.4:5678" -> "1.2.3.4"; "[2001:db8:1:2:...]:5678" -> its /64, "2001:db8:1:2" (one
   * machine holds a whole /64: counted as one address) */
  if (peer == NULL || *peer == '\0') {
    snprintf(out, cap, "?");
    return;
  }
  if (peer[0] == '[') {
    const char *end = strchr(peer, ']');
    size_t n = end ? (size_t)(end - peer - 1) : strlen(peer + 1);
    int groups = 0;
    size_t i = 0;
    for (; i < n && groups < 4; i++)
      if (peer[1 + i] == ':' && ++groups == 4)
        break;
    snprintf(out, cap, "%.*s", (int)i, peer + 1);
    return;
  }
  const char *colon = strrchr(peer, ':');
  snprintf(out, cap, "%.*s", colon ? (int)(colon - peer) : (int)strlen(peer), peer);
}

/* ---- sessions ----------------------------------------------------------------------------------- */

int orch__session_token_new(char token[65], char hash[65]) {
  unsigned char r[32];
  if (sbx_random(r, sizeof r) != 0)
    return SBX_EIO;
  sbx_hex(r, sizeof r, token);
  OPENSSL_cleanse(r, sizeof r);
  store_sha256_hex(token, 64, hash);
  return 0;
}

enum orch_session_life orch__session_life(const struct store_session *s, int64_t now_ms,
                                          int64_t idle_ms, int64_t max_ms) {
  if (s->ended_at != 0)
    return ORCH_SESSION_ENDED;
  if (now_ms - s->created_at >= max_ms || now_ms - s->last_used_at >= idle_ms)
    return ORCH_SESSION_EXPIRED;
  return ORCH_SESSION_LIVE;
}

static void on_touched(int rc, const struct sbx_error *err, void *ud) {
  (void)ud;
  if (rc != 0)
    sbx_log(SBX_LOG_WARN, ORCH_MOD, "a session's use not stored: %s",
            err ? err->msg : sbx_strerror(rc));
}

enum orch_session_life orch__session_check(struct orch *o, const char *token, size_t len,
                                           struct orch_auth *a) {
  if (len != 64)
    return ORCH_SESSION_NONE;
  for (size_t i = 0; i < 64; i++)
    if (!((token[i] >= '0' && token[i] <= '9') || (token[i] >= 'a' && token[i] <= 'f')))
      return ORCH_SESSION_NONE;
  char hash[65];
  store_sha256_hex(token, 64, hash);
  struct store_session s;
  if (store_session_get(o->st, hash, &s) != 0)
    return ORCH_SESSION_NONE;
  int64_t now = sbx_now_wall_ms(), idle_ms = (int64_t)o->cfg->session_idle_s * 1000;
  enum orch_session_life life =
      orch__session_life(&s, now, idle_ms, (int64_t)o->cfg->session_max_s * 1000);
  if (life != ORCH_SESSION_LIVE)
    return life;
  struct store_person p;
  if (store_person_get(o->st, s.person_id, &p) != 0)
    return ORCH_SESSION_NONE;
  int disabled = p.disabled;
  a->admin = p.role != NULL && strcmp(p.role, "admin") == 0;
  store_person_free(&p);
  if (disabled)
    return ORCH_SESSION_ENDED;
  a->kind = ORCH_CRED_SESSION;
  memcpy(a->person_id, s.person_id, sizeof a->person_id);
  memcpy(a->token_hash, hash, sizeof a->token_hash);
  int64_t every = idle_ms / 4 < ORCH_TOUCH_MS ? idle_ms / 4 : ORCH_TOUCH_MS;
  if (now - s.last_used_at >= every)
    store_session_touch(o->st, hash, s.person_id, now, on_touched, NULL);
  return ORCH_SESSION_LIVE;
}

/* ---- a person's settings -------------------------------------------------------------------------- */

int orch__settings_pypi(const char *settings_json) {
  json_t *j = settings_json ? json_loads(settings_json, 0, NULL) : NULL;
  json_t *v = json_object_get(j, "pypi");
  int on = !json_is_false(v); /* unset: on, as the page's default */
  json_decref(j);
  return on;
}

int orch__chat_pypi(struct orch *o, const struct orch_chat *c) {
  if (o->cfg->pypi_disabled)
    return 0;
  if (c == NULL || c->owner[0] == '\0')
    return 1;
  struct store_person p;
  if (store_person_get(o->st, c->owner, &p) != 0)
    return 1;
  int on = orch__settings_pypi(p.settings_json);
  store_person_free(&p);
  return on;
}

/* ---- the state, and the first administrator -------------------------------------------------------- */

struct first_admin {
  struct orch *o;
  char name[16];
  char password[32];
};

static void first_admin_free(struct first_admin *fa) {
  OPENSSL_cleanse(fa->password, sizeof fa->password);
  sbx_free(fa);
}

static void first_admin_drop(void *ud) { first_admin_free(ud); }

static void on_first_admin(int rc, const struct sbx_error *err, void *ud) {
  struct first_admin *fa = ud;
  struct orch *o = fa->o;
  if (rc == 0 && o->people && o->people->first_admin_cb) {
    o->people->first_admin_cb(o, fa->name, fa->password);
  } else if (rc == SBX_ECONFLICT) {
    sbx_log(SBX_LOG_INFO, ORCH_MOD, "another node made the first administrator");
  } else if (rc != 0) {
    sbx_log(SBX_LOG_ERROR, ORCH_MOD, "the first administrator was not stored: %s",
            err ? err->msg : sbx_strerror(rc));
  }
  first_admin_free(fa);
}

static void on_first_admin_hash(void *ud, int rc, const char *encoded) {
  struct first_admin *fa = ud;
  struct orch *o = fa->o;
  struct store_person p = {.name = fa->name,
                           .role = "admin",
                           .pw_hash = (char *)encoded,
                           .must_change_password = 1,
                           .created_at = sbx_now_wall_ms(),
                           .settings_json = "{}"};
  if (rc != 0 || store_new_id(p.id) != 0 || store_person_create(o->st, &p, on_first_admin, fa) != 0) {
    sbx_log(SBX_LOG_ERROR, ORCH_MOD, "the first administrator could not be made");
    first_admin_free(fa);
  }
}

void orch__people_first_admin(struct orch *o) {
  struct orch_people *pp = o->people;
  if (pp == NULL || !pp->first_admin_due)
    return;
  pp->first_admin_due = 0;
  int64_t n = 0;
  if (store_person_count(o->st, &n) != 0 || n > 0)
    return; /* somebody was made meanwhile (another node, the API key) */
  struct first_admin *fa = sbx_calloc(1, sizeof *fa);
  if (fa == NULL)
    return;
  fa->o = o;
  snprintf(fa->name, sizeof fa->name, "admin");
  if (orch__pw_generate(fa->password, sizeof fa->password) != 0) {
    first_admin_free(fa);
    return;
  }
  int rc = orch__pw_start(o, 0, NULL, fa->password, strlen(fa->password), on_first_admin_hash,
                          first_admin_drop, fa);
  if (rc != 0) {
    first_admin_free(fa);
    pp->first_admin_due = rc == SBX_EBUSY; /* passwords being checked: the next tick */
  }
}

int orch__people_start(struct orch *o, struct sbx_error *err) {
  struct orch_people *pp = sbx_calloc(1, sizeof *pp);
  if (pp == NULL)
    return SBX_ENOMEM;
  o->people = pp;
  char pw[32];
  if (orch__pw_generate(pw, sizeof pw) != 0 ||
      orch__pw_hash(o->cfg, pw, strlen(pw), pp->dummy_hash, sizeof pp->dummy_hash) != 0)
    return sbx_error_set(err, SBX_EIO, "cannot hash a password (Argon2id)");
  OPENSSL_cleanse(pw, sizeof pw);
  int64_t n = 0;
  int rc = store_person_count(o->st, &n);
  if (rc != 0)
    return sbx_error_set(err, rc, "cannot count people: %s", sbx_strerror(rc));
  pp->first_admin_due = n == 0;
  return 0;
}

void orch__people_close(struct orch *o) {
  struct orch_people *pp = o->people;
  o->people = NULL;
  if (pp == NULL)
    return;
  pp->closed = 1;
  people_release(pp);
}
