/* auth.c -- who is calling: the backend's API key, a chat's page token, or nobody.
 *
 * Backend calls carry `Authorization: Bearer <CEREA_API_KEY>`.  Page calls carry the chat's page
 * token, `<chat_id>.<64 hex>`: the chat id in front lets a token for another chat be told apart
 * from garbage (403/404 instead of 401) without a lookup table; the random part is the secret.
 * Only the sha256 of a token is stored; each request's credential is hashed and its hash
 * compared, in constant time, with the stored ones.  A connection keeps the last credential it
 * presented with its hash (struct orch_cred_memo, freed with the connection, which holds the same
 * header in its HTTP/2 header table anyway), so the same bytes again are not hashed again; what
 * the hash is then compared with is read for every request, so a chat deleted, a session ended or
 * a secret rotated refuses the next request on the same connection as on a new one.  The
 * event stream also accepts `?token=` for clients that cannot set headers.  Headless hosts the
 * orchestrator spawns (hosts.c) get a host key, random per server start: it reaches every chat
 * like the API key, but only the calls a page token may make (never chats, turns, admin).
 *
 * Chat keys (the one-chat credential of MCP and /v1/tools, for desktop assistants):
 * "mcp.<chat_id>.<64 hex>", the hex being HMAC-SHA256 of the chat id under a server secret
 * (DATA/chat_key_secret, 32 random bytes made at first start).  Nothing per key is stored: a key
 * is checked by computing its HMAC again, and every key is revoked at once by rotating the
 * secret.  orch__auth_read leaves a chat key BAD; only the calls that ask orch__auth_chat_key
 * (the MCP endpoint, /v1/tools, downloads) take it, so it reaches its chat's tools and files and
 * nothing else.
 *
 * Page links (POST /v1/chats/{chat}/page_link, for a chat created elsewhere): a second page token
 * of the chat, "<chat_id>.<64 hex>" like the first, the hex being HMAC-SHA256 of the chat id under
 * the same secret in another domain ("cerea page link v1"); checked by computing it again when a
 * page token is not the chat's own (orch__auth_allows_chat), so rotating the secret revokes every
 * link as it does every chat key.
 *
 * Sessions (people.c): a person's browser holds the cookie cerea_session; a session reaches the
 * chats its person owns (orch__auth_allows_chat), never another's, and an administrator's the
 * admin calls too (api.c).  Only when no Bearer credential is given: a request with both is
 * judged by the Bearer one.
 *
 * What it does not do: it does not look chats up or answer requests (api_*.c do, with the chat's
 * stored hash); it does not rate-limit (people.c throttles sign-ins).
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void sha256_hex(const char *s, char out[65]) { store_sha256_hex(s, strlen(s), out); }

/* 1 when a and b are the same string, compared in constant time (OpenSSL's CRYPTO_memcmp). */
static int ct_streq(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  return la == lb && CRYPTO_memcmp(a, b, la) == 0; /* lengths are not secret: hashes, 64 each */
}

int orch__token_new(const char *chat_id, char *token, size_t cap, char hash_out[65]) {
  unsigned char r[32];
  char hex[65];
  if (sbx_random(r, sizeof(r)) != 0)
    return SBX_EIO;
  sbx_hex(r, sizeof(r), hex);
  int n = snprintf(token, cap, "%s.%s", chat_id, hex);
  if (n < 0 || (size_t)n >= cap)
    return SBX_EINVAL;
  sha256_hex(token, hash_out);
  return 0;
}

static int is_hex_id(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
      return 0;
  return 1;
}

void orch__auth_read(const char *authorization, const char *query_token, const char *api_key_hash,
                     const char *host_key_hash, struct orch_auth *out) {
  orch__auth_read_memo(authorization, query_token, api_key_hash, host_key_hash, NULL, out);
}

/* The credential's sha256 hex into out: memo's when it holds the same bytes (compared in constant
 * time), computed (and memo's from now on) when not. */
static void cred_hash(const char *cred, size_t len, struct orch_cred_memo *memo, char out[65]) {
  if (memo != NULL && memo->len == len && CRYPTO_memcmp(memo->cred, cred, len) == 0) {
    memcpy(out, memo->hash, 65);
    return;
  }
  store_sha256_hex(cred, len, out);
  if (memo != NULL) {
    memcpy(memo->cred, cred, len);
    memo->cred[len] = '\0';
    memo->len = len;
    memcpy(memo->hash, out, 65);
  }
}

void orch__cred_memo_free(void *memo) {
  if (memo != NULL)
    OPENSSL_cleanse(memo, sizeof(struct orch_cred_memo));
  sbx_free(memo);
}

void orch__auth_read_memo(const char *authorization, const char *query_token,
                          const char *api_key_hash, const char *host_key_hash,
                          struct orch_cred_memo *memo, struct orch_auth *out) {
  memset(out, 0, sizeof(*out));
  const char *cred = NULL;
  if (authorization != NULL) {
    if (strncasecmp(authorization, "Bearer ", 7) != 0) {
      out->kind = ORCH_CRED_BAD;
      return;
    }
    cred = authorization + 7;
    while (*cred == ' ')
      cred++;
  } else if (query_token != NULL) {
    cred = query_token;
  }
  if (cred == NULL || *cred == '\0') {
    out->kind = cred == NULL ? ORCH_CRED_NONE : ORCH_CRED_BAD;
    return;
  }
  size_t cred_len = strlen(cred);
  if (cred_len > ORCH_CRED_MAX) {
    out->kind = ORCH_CRED_BAD;
    return;
  }
  cred_hash(cred, cred_len, memo, out->token_hash);
  if (api_key_hash != NULL && ct_streq(out->token_hash, api_key_hash)) {
    out->kind = ORCH_CRED_API;
    return;
  }
  if (host_key_hash != NULL && *host_key_hash && ct_streq(out->token_hash, host_key_hash)) {
    out->kind = ORCH_CRED_HOST;
    return;
  }
  if (cred_len == STORE_ID_LEN + 1 + 64 && cred[STORE_ID_LEN] == '.' &&
      is_hex_id(cred, STORE_ID_LEN)) {
    out->kind = ORCH_CRED_PAGE;
    memcpy(out->chat_id, cred, STORE_ID_LEN);
    out->chat_id[STORE_ID_LEN] = '\0';
    return;
  }
  out->kind = ORCH_CRED_BAD;
}

/* ---- chat keys ------------------------------------------------------------------------------ */

#define CHAT_KEY_PREFIX "mcp."

int orch__secret_mac(const unsigned char secret[ORCH_CHAT_SECRET_LEN], const char *what,
                     const char *text, size_t len, char hex[65]) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_len = 0;
  size_t wlen = strlen(what);
  char *msg = sbx_malloc(wlen + 1 + len);
  if (msg == NULL)
    return SBX_ENOMEM;
  memcpy(msg, what, wlen);
  msg[wlen] = ':';
  memcpy(msg + wlen + 1, text, len);
  int ok = HMAC(EVP_sha256(), secret, ORCH_CHAT_SECRET_LEN, (const unsigned char *)msg,
                wlen + 1 + len, mac, &mac_len) != NULL &&
           mac_len == 32;
  sbx_free(msg);
  if (!ok)
    return SBX_EINVAL;
  sbx_hex(mac, 32, hex);
  return 0;
}

/* A chat's credential's MAC part: HMAC-SHA256(secret, "<what>:<chat_id>") as 64 hex. */
static int secret_mac(const unsigned char secret[ORCH_CHAT_SECRET_LEN], const char *what,
                      const char *chat_id, char hex[65]) {
  return orch__secret_mac(secret, what, chat_id, strlen(chat_id), hex);
}

/* "<prefix><chat_id>.<secret_mac(what, chat_id)>": a credential derived from the secret. */
static int derived_token(const unsigned char secret[ORCH_CHAT_SECRET_LEN], const char *what,
                         const char *prefix, const char *chat_id, char *out, size_t cap) {
  char hex[65];
  if (strlen(chat_id) != STORE_ID_LEN || !is_hex_id(chat_id, STORE_ID_LEN) ||
      secret_mac(secret, what, chat_id, hex) != 0)
    return SBX_EINVAL;
  int n = snprintf(out, cap, "%s%s.%s", prefix, chat_id, hex);
  return n < 0 || (size_t)n >= cap ? SBX_EINVAL : 0;
}

int orch__chat_key_make(const unsigned char secret[ORCH_CHAT_SECRET_LEN], const char *chat_id,
                        char *out, size_t cap) {
  return derived_token(secret, "cerea chat key v1", CHAT_KEY_PREFIX, chat_id, out, cap);
}

void orch__auth_chat_key(struct orch_auth *a, const char *authorization, const char *query_token,
                         const unsigned char secret[ORCH_CHAT_SECRET_LEN]) {
  if (a->kind != ORCH_CRED_BAD)
    return;
  const char *cred = query_token;
  if (authorization != NULL) {
    if (strncasecmp(authorization, "Bearer ", 7) != 0)
      return;
    for (cred = authorization + 7; *cred == ' '; cred++)
      ;
  }
  const size_t plen = sizeof(CHAT_KEY_PREFIX) - 1;
  if (cred == NULL || strlen(cred) != plen + STORE_ID_LEN + 1 + 64 ||
      strncmp(cred, CHAT_KEY_PREFIX, plen) != 0 || cred[plen + STORE_ID_LEN] != '.' ||
      !is_hex_id(cred + plen, STORE_ID_LEN))
    return;
  char chat_id[STORE_ID_LEN + 1], want[65];
  memcpy(chat_id, cred + plen, STORE_ID_LEN);
  chat_id[STORE_ID_LEN] = '\0';
  if (secret_mac(secret, "cerea chat key v1", chat_id, want) != 0 || !ct_streq(cred + plen + STORE_ID_LEN + 1, want))
    return;
  a->kind = ORCH_CRED_CHAT;
  memcpy(a->chat_id, chat_id, sizeof(a->chat_id));
}

int orch__auth_allows(const struct orch_auth *a, const char *chat_id, const char *chat_token_hash) {
  if (a->kind == ORCH_CRED_API || a->kind == ORCH_CRED_HOST)
    return 1; /* the host key only reaches calls that also take a page token (callers check) */
  if (a->kind == ORCH_CRED_CHAT) /* its MAC was checked when it was read */
    return chat_id != NULL && strcmp(a->chat_id, chat_id) == 0;
  if (a->kind != ORCH_CRED_PAGE || chat_id == NULL || chat_token_hash == NULL)
    return 0;
  /* Both compared: the id is not secret, the hash decides. */
  int same_chat = strcmp(a->chat_id, chat_id) == 0;
  int same_hash = ct_streq(a->token_hash, chat_token_hash);
  return same_chat && same_hash;
}

/* Writes "<hex>\n" to path (0600) and fsyncs it: created exclusively, or (replace) through a
 * temporary file renamed over it, so a reader sees the old content or the new, never part. */
static int write_secret(const char *path, const char *hex, int replace, struct sbx_error *err) {
  char tmp[4200];
  snprintf(tmp, sizeof(tmp), "%s.tmp", path);
  const char *target = replace ? tmp : path;
  int fd = open(target, O_WRONLY | O_CREAT | O_CLOEXEC | (replace ? O_TRUNC : O_EXCL), 0600);
  if (fd < 0)
    return sbx_error_set(err, errno == EACCES ? SBX_EPERM : SBX_EIO, "cannot write %s: %s", path,
                         strerror(errno));
  char line[80];
  int len = snprintf(line, sizeof(line), "%s\n", hex);
  int ok = write(fd, line, (size_t)len) == len && fsync(fd) == 0;
  close(fd);
  if (ok && replace && rename(tmp, path) != 0)
    ok = 0;
  if (!ok) {
    if (replace)
      unlink(tmp);
    return sbx_error_set(err, SBX_EIO, "cannot write %s", path);
  }
  return 0;
}

/* Reads the first line of path (trailing spaces and line breaks cut) into buf: 0, SBX_ENOENT
 * when there is no such file, SBX_EIO with detail otherwise. */
static int read_secret(const char *path, char *buf, size_t cap, struct sbx_error *err) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return errno == ENOENT
               ? SBX_ENOENT
               : sbx_error_set(err, SBX_EIO, "cannot read %s: %s", path, strerror(errno));
  ssize_t n = read(fd, buf, cap - 1);
  close(fd);
  if (n <= 0)
    return sbx_error_set(err, SBX_EIO, "cannot read %s", path);
  buf[n] = '\0';
  while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
    buf[--n] = '\0';
  return 0;
}

/* 32 fresh random bytes as 64 hex. */
static int random_hex(char hex[65]) {
  unsigned char r[32];
  if (sbx_random(r, sizeof(r)) != 0)
    return SBX_EIO;
  sbx_hex(r, sizeof(r), hex);
  return 0;
}

int orch__api_key_load(const char *data_dir, char **key, int *generated, struct sbx_error *err) {
  char path[4096], buf[256], hex[65];
  snprintf(path, sizeof(path), "%s/api_key", data_dir);
  *generated = 0;
  int rc = read_secret(path, buf, sizeof(buf), err);
  if (rc == 0) {
    if (strlen(buf) < 16)
      return sbx_error_set(err, SBX_EINVAL, "%s: key shorter than 16 characters", path);
    *key = sbx_strdup(buf);
    return *key ? 0 : SBX_ENOMEM;
  }
  if (rc != SBX_ENOENT)
    return rc;
  if (random_hex(hex) != 0)
    return sbx_error_set(err, SBX_EIO, "no random bytes");
  if ((rc = write_secret(path, hex, 0, err)) != 0)
    return rc;
  *key = sbx_strdup(hex);
  *generated = 1;
  return *key ? 0 : SBX_ENOMEM;
}

int orch__chat_secret_load(const char *data_dir, int rotate,
                           unsigned char out[ORCH_CHAT_SECRET_LEN], struct sbx_error *err) {
  char path[4096], hex[80];
  snprintf(path, sizeof(path), "%s/chat_key_secret", data_dir);
  int rc = rotate ? SBX_ENOENT : read_secret(path, hex, sizeof(hex), err);
  if (rc == SBX_ENOENT) {
    if (random_hex(hex) != 0)
      return sbx_error_set(err, SBX_EIO, "no random bytes");
    if ((rc = write_secret(path, hex, 1, err)) != 0)
      return rc;
  } else if (rc != 0) {
    return rc;
  }
  if (strlen(hex) != 2 * ORCH_CHAT_SECRET_LEN || !is_hex_id(hex, 2 * ORCH_CHAT_SECRET_LEN))
    return sbx_error_set(err, SBX_EINVAL, "%s: expected %d hex digits", path,
                         2 * ORCH_CHAT_SECRET_LEN);
  for (size_t i = 0; i < ORCH_CHAT_SECRET_LEN; i++) {
    char byte[3] = {hex[2 * i], hex[2 * i + 1], '\0'};
    out[i] = (unsigned char)strtoul(byte, NULL, 16);
  }
  return 0;
}

int orch__page_link_token(const unsigned char secret[ORCH_CHAT_SECRET_LEN], const char *chat_id,
                          char *out, size_t cap) {
  return derived_token(secret, "cerea page link v1", "", chat_id, out, cap);
}

int orch__auth_allows_chat(const struct orch_auth *a, const struct orch_chat *c) {
  if (a->kind == ORCH_CRED_SESSION) /* a person's own chats, an administrator's too */
    return c->owner[0] != '\0' && strcmp(c->owner, a->person_id) == 0;
  if (orch__auth_allows(a, c->id, c->token_hash))
    return 1;
  if (a->kind != ORCH_CRED_PAGE || strcmp(a->chat_id, c->id) != 0)
    return 0;
  char link[STORE_ID_LEN + 80], hash[65];
  if (orch__page_link_token(c->o->chat_secret, c->id, link, sizeof link) != 0)
    return 0;
  sha256_hex(link, hash);
  OPENSSL_cleanse(link, sizeof link);
  return ct_streq(a->token_hash, hash);
}

/* ---- the session cookie ----------------------------------------------------------------------- */

int orch__cookie_find(const char *header, const char *name, const char **val, size_t *len) {
  if (header == NULL || name == NULL)
    return 0;
  size_t nlen = strlen(name);
  const char *p = header;
  while (*p) {
    while (*p == ' ' || *p == '\t' || *p == ';')
      p++;
    const char *k = p;
    while (*p && *p != '=' && *p != ';')
      p++;
    const char *ke = p;
    while (ke > k && (ke[-1] == ' ' || ke[-1] == '\t'))
      ke--;
    if (*p != '=') /* a pair without '=': skipped */
      continue;
    const char *v = ++p;
    while (*p && *p != ';')
      p++;
    const char *ve = p;
    while (*v == ' ' || *v == '\t')
      v++;
    while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
      ve--;
    if (ve - v >= 2 && *v == '"' && ve[-1] == '"') /* a quoted value (RFC 6265's DQUOTE) */
      v++, ve--;
    if ((size_t)(ke - k) == nlen && memcmp(k, name, nlen) == 0) {
      *val = v;
      *len = (size_t)(ve - v);
      return 1;
    }
  }
  return 0;
}
