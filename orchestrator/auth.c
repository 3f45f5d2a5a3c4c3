/* auth.c -- who is calling: the backend's API key, a chat's page token, or nobody.
 *
 * Backend calls carry `Authorization: Bearer <CEREA_API_KEY>`.  Page calls carry the chat's page
 * token, `<chat_id>.<64 hex>`: the chat id in front lets a token for another chat be told apart
 * from garbage (403/404 instead of 401) without a lookup table; the random part is the secret.
 * Only the sha256 of a token is stored, and a credential is kept in memory no longer than its
 * request: each one is hashed and its hash compared, in constant time, with the stored ones.  The
 * event stream also accepts `?token=` for clients that cannot set headers.  Headless hosts the
 * orchestrator spawns (hosts.c) get a host key, random per server start: it reaches every chat
 * like the API key, but only the calls a page token may make (never chats, turns, admin).
 *
 * What it does not do: it does not look chats up or answer requests (api_*.c do, with the chat's
 * stored hash); it does not rate-limit.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
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
  if (cred_len > 512) {
    out->kind = ORCH_CRED_BAD;
    return;
  }
  store_sha256_hex(cred, cred_len, out->token_hash);
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

int orch__auth_allows(const struct orch_auth *a, const char *chat_id, const char *chat_token_hash) {
  if (a->kind == ORCH_CRED_API || a->kind == ORCH_CRED_HOST)
    return 1; /* the host key only reaches calls that also take a page token (callers check) */
  if (a->kind != ORCH_CRED_PAGE || chat_id == NULL || chat_token_hash == NULL)
    return 0;
  /* Both compared: the id is not secret, the hash decides. */
  int same_chat = strcmp(a->chat_id, chat_id) == 0;
  int same_hash = ct_streq(a->token_hash, chat_token_hash);
  return same_chat && same_hash;
}

int orch__api_key_load(const char *data_dir, char **key, int *generated, struct sbx_error *err) {
  char path[4096];
  snprintf(path, sizeof(path), "%s/api_key", data_dir);
  *generated = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    char buf[256];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
      return sbx_error_set(err, SBX_EIO, "cannot read %s", path);
    buf[n] = '\0';
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
      buf[--n] = '\0';
    if (n < 16)
      return sbx_error_set(err, SBX_EINVAL, "%s: key shorter than 16 characters", path);
    *key = sbx_strdup(buf);
    return *key ? 0 : SBX_ENOMEM;
  }
  if (errno != ENOENT)
    return sbx_error_set(err, SBX_EIO, "cannot read %s: %s", path, strerror(errno));
  unsigned char r[32];
  char hex[65];
  if (sbx_random(r, sizeof(r)) != 0)
    return sbx_error_set(err, SBX_EIO, "no random bytes");
  sbx_hex(r, sizeof(r), hex);
  fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    return sbx_error_set(err, errno == EACCES ? SBX_EPERM : SBX_EIO, "cannot write %s: %s", path,
                         strerror(errno));
  char line[80];
  int len = snprintf(line, sizeof(line), "%s\n", hex);
  int ok = write(fd, line, (size_t)len) == len && fsync(fd) == 0;
  close(fd);
  if (!ok)
    return sbx_error_set(err, SBX_EIO, "cannot write %s", path);
  *key = sbx_strdup(hex);
  *generated = 1;
  return *key ? 0 : SBX_ENOMEM;
}
