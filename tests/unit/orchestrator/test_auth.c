/* test_auth.c -- credentials (auth.c): API key vs page tokens, a token reaching only its chat,
 * malformed headers, ?token=, the API key file created once with mode 0600, chat keys and their
 * secret file. */
#include "internal.h"

#include <check.h>
#include <openssl/sha.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void hash(const char *s, char out[65]) {
  unsigned char d[32];
  SHA256((const unsigned char *)s, strlen(s), d);
  sbx_hex(d, 32, out);
}

START_TEST(test_tokens) {
  const char *chat_a = "0123456789abcdef0123456789abcdef";
  const char *chat_b = "fedcba9876543210fedcba9876543210";
  char tok_a[128], hash_a[65], tok_b[128], hash_b[65], api_hash[65];
  ck_assert_int_eq(orch__token_new(chat_a, tok_a, sizeof(tok_a), hash_a), 0);
  ck_assert_int_eq(orch__token_new(chat_b, tok_b, sizeof(tok_b), hash_b), 0);
  ck_assert_str_ne(tok_a + 33, tok_b + 33);
  hash("the-api-key-0123456789", api_hash);
  char hdr[200];
  struct orch_auth a;
  snprintf(hdr, sizeof(hdr), "Bearer %s", tok_a);
  orch__auth_read(hdr, NULL, api_hash, NULL, &a);
  ck_assert_int_eq(a.kind, ORCH_CRED_PAGE);
  ck_assert_str_eq(a.chat_id, chat_a);
  ck_assert_int_eq(orch__auth_allows(&a, chat_a, hash_a), 1);
  ck_assert_int_eq(orch__auth_allows(&a, chat_b, hash_b), 0); /* another chat */
  ck_assert_int_eq(orch__auth_allows(&a, chat_a, hash_b), 0); /* right id, wrong secret */
  /* a forged token naming chat a */
  char forged[128];
  snprintf(forged, sizeof(forged), "Bearer %s.%064d", chat_a, 0);
  orch__auth_read(forged, NULL, api_hash, NULL, &a);
  ck_assert_int_eq(a.kind, ORCH_CRED_PAGE);
  ck_assert_int_eq(orch__auth_allows(&a, chat_a, hash_a), 0);
  /* API key reaches every chat */
  orch__auth_read("Bearer the-api-key-0123456789", NULL, api_hash, NULL, &a);
  ck_assert_int_eq(a.kind, ORCH_CRED_API);
  ck_assert_int_eq(orch__auth_allows(&a, chat_b, hash_b), 1);
  /* query token only when no header */
  orch__auth_read(NULL, tok_b, api_hash, NULL, &a);
  ck_assert_int_eq(a.kind, ORCH_CRED_PAGE);
  ck_assert_int_eq(orch__auth_allows(&a, chat_b, hash_b), 1);
  orch__auth_read(NULL, NULL, api_hash, NULL, &a);
  ck_assert_int_eq(a.kind, ORCH_CRED_NONE);
  orch__auth_read("Basic abc", NULL, api_hash, NULL, &a);
  ck_assert_int_eq(a.kind, ORCH_CRED_BAD);
  orch__auth_read("Bearer ", NULL, api_hash, NULL, &a);
  ck_assert_int_eq(a.kind, ORCH_CRED_BAD);
  orch__auth_read("Bearer wrong-key", NULL, api_hash, NULL, &a);
  ck_assert_int_eq(a.kind, ORCH_CRED_BAD);
  ck_assert_int_eq(orch__auth_allows(&a, chat_a, hash_a), 0);
}
END_TEST

/* The connection's memo: the same credential again takes its hash from the memo; another one
 * (of the same length too) is hashed and replaces it; the memo holds a hash, never a verdict, so a
 * key that no longer matches (rotated, revoked) is refused with the memo full. */
START_TEST(test_cred_memo) {
  char api_hash[65], other_hash[65], tok[128], tok_hash[65];
  hash("the-api-key-0123456789", api_hash);
  hash("the-new-key-0123456789", other_hash);
  const char *chat = "0123456789abcdef0123456789abcdef";
  ck_assert_int_eq(orch__token_new(chat, tok, sizeof(tok), tok_hash), 0);
  struct orch_cred_memo m = {0};
  struct orch_auth a;
  orch__auth_read_memo("Bearer the-api-key-0123456789", NULL, api_hash, NULL, &m, &a);
  ck_assert_int_eq(a.kind, ORCH_CRED_API);
  ck_assert_str_eq(m.hash, api_hash);
  /* the memo's hash is the one taken: a planted one shows it was not computed again */
  snprintf(m.hash, sizeof(m.hash), "%s", other_hash);
  orch__auth_read_memo("Bearer the-api-key-0123456789", NULL, api_hash, NULL, &m, &a);
  ck_assert_int_eq(a.kind, ORCH_CRED_BAD);
  snprintf(m.hash, sizeof(m.hash), "%s", api_hash);
  /* the key rotated: the same credential on the same connection is refused */
  orch__auth_read_memo("Bearer the-api-key-0123456789", NULL, other_hash, NULL, &m, &a);
  ck_assert_int_eq(a.kind, ORCH_CRED_BAD);
  /* another credential of the same length is hashed, not taken for the memo's */
  orch__auth_read_memo("Bearer the-new-key-0123456789", NULL, other_hash, NULL, &m, &a);
  ck_assert_int_eq(a.kind, ORCH_CRED_API);
  ck_assert_str_eq(m.hash, other_hash);
  /* a page token: its hash is what the chat's stored one is compared with, request by request */
  char hdr[200];
  snprintf(hdr, sizeof(hdr), "Bearer %s", tok);
  orch__auth_read_memo(hdr, NULL, api_hash, NULL, &m, &a);
  ck_assert_int_eq(a.kind, ORCH_CRED_PAGE);
  ck_assert_int_eq(orch__auth_allows(&a, chat, tok_hash), 1);
  orch__auth_read_memo(hdr, NULL, api_hash, NULL, &m, &a);
  ck_assert_int_eq(orch__auth_allows(&a, chat, api_hash), 0); /* the chat's token replaced */
  orch__auth_read_memo(NULL, tok, api_hash, NULL, &m, &a); /* ?token= alike */
  ck_assert_int_eq(orch__auth_allows(&a, chat, tok_hash), 1);
}
END_TEST

START_TEST(test_host_key) {
  const char *chat_a = "0123456789abcdef0123456789abcdef";
  char api_hash[65], host_hash[65], hash_a[65], tok_a[128];
  hash("the-api-key-0123456789", api_hash);
  hash("host-key-0123456789abcdef", host_hash);
  ck_assert_int_eq(orch__token_new(chat_a, tok_a, sizeof(tok_a), hash_a), 0);
  struct orch_auth a;
  orch__auth_read("Bearer host-key-0123456789abcdef", NULL, api_hash, host_hash, &a);
  ck_assert_int_eq(a.kind,
                   ORCH_CRED_HOST); /* page-level calls of every chat; never API-only ones */
  ck_assert_int_eq(orch__auth_allows(&a, chat_a, hash_a), 1);
  orch__auth_read("Bearer host-key-0123456789abcdef", NULL, api_hash, NULL, &a);
  ck_assert_int_eq(a.kind, ORCH_CRED_BAD); /* no hosts: the key means nothing */
  orch__auth_read("Bearer host-key-0123456789abcdef", NULL, api_hash, "", &a);
  ck_assert_int_eq(a.kind, ORCH_CRED_BAD);
  orch__auth_read("Bearer the-api-key-0123456789", NULL, api_hash, host_hash, &a);
  ck_assert_int_eq(a.kind, ORCH_CRED_API);
}
END_TEST

START_TEST(test_api_key_file) {
  char dir[] = "/tmp/orch-auth-XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(dir));
  char *k1 = NULL, *k2 = NULL;
  int gen = -1;
  ck_assert_int_eq(orch__api_key_load(dir, &k1, &gen, NULL), 0);
  ck_assert_int_eq(gen, 1);
  ck_assert_uint_eq(strlen(k1), 64);
  ck_assert_int_eq(orch__api_key_load(dir, &k2, &gen, NULL), 0);
  ck_assert_int_eq(gen, 0); /* printed once: only when generated */
  ck_assert_str_eq(k1, k2);
  char path[128];
  snprintf(path, sizeof(path), "%s/api_key", dir);
  struct stat st;
  ck_assert_int_eq(stat(path, &st), 0);
  ck_assert_int_eq(st.st_mode & 0777, 0600);
  unlink(path);
  rmdir(dir);
  sbx_free(k1);
  sbx_free(k2);
  struct sbx_error e;
  char *k3 = NULL;
  ck_assert_int_ne(orch__api_key_load("/nonexistent-dir/x", &k3, &gen, &e), 0);
  ck_assert_ptr_nonnull(strstr(e.msg, "api_key"));
}
END_TEST

/* Chat keys: made from the chat id and the secret, checked by their MAC; BAD for
 * orch__auth_read (no call takes one unless it asks), CHAT with its chat id when asked; another
 * chat's id, a flipped digit, another secret, a page token's shape: never CHAT. */
START_TEST(test_chat_keys) {
  const char *chat_a = "0123456789abcdef0123456789abcdef";
  const char *chat_b = "fedcba9876543210fedcba9876543210";
  unsigned char secret[ORCH_CHAT_SECRET_LEN], other[ORCH_CHAT_SECRET_LEN];
  memset(secret, 7, sizeof(secret));
  memset(other, 8, sizeof(other));
  char key[ORCH_CHAT_KEY_LEN + 1], key_b[ORCH_CHAT_KEY_LEN + 1], hdr[300], api_hash[65];
  hash("the-api-key-0123456789", api_hash);
  ck_assert_int_eq(orch__chat_key_make(secret, chat_a, key, sizeof(key)), 0);
  ck_assert_uint_eq(strlen(key), ORCH_CHAT_KEY_LEN);
  ck_assert_int_eq(strncmp(key, "mcp.0123456789abcdef0123456789abcdef.", 37), 0);
  ck_assert_int_eq(orch__chat_key_make(secret, chat_b, key_b, sizeof(key_b)), 0);
  ck_assert_str_ne(key + 37, key_b + 37);
  char again[ORCH_CHAT_KEY_LEN + 1];
  ck_assert_int_eq(orch__chat_key_make(secret, chat_a, again, sizeof(again)), 0);
  ck_assert_str_eq(key, again); /* nothing stored: the same key every time */
  ck_assert_int_eq(orch__chat_key_make(secret, "not-an-id", again, sizeof(again)), SBX_EINVAL);
  ck_assert_int_eq(orch__chat_key_make(secret, chat_a, again, ORCH_CHAT_KEY_LEN), SBX_EINVAL);
  struct orch_auth a;
  snprintf(hdr, sizeof(hdr), "Bearer %s", key);
  orch__auth_read(hdr, NULL, api_hash, NULL, &a);
  ck_assert_int_eq(a.kind, ORCH_CRED_BAD);
  ck_assert_int_eq(orch__auth_allows(&a, chat_a, NULL), 0);
  orch__auth_chat_key(&a, hdr, NULL, secret);
  ck_assert_int_eq(a.kind, ORCH_CRED_CHAT);
  ck_assert_str_eq(a.chat_id, chat_a);
  ck_assert_int_eq(orch__auth_allows(&a, chat_a, "any"), 1);
  ck_assert_int_eq(orch__auth_allows(&a, chat_b, "any"), 0);
  orch__auth_read(NULL, key, api_hash, NULL, &a); /* ?token= */
  orch__auth_chat_key(&a, NULL, key, secret);
  ck_assert_int_eq(a.kind, ORCH_CRED_CHAT);
  /* Near misses. */
  char bad[ORCH_CHAT_KEY_LEN + 2];
  const char *const near[] = {"flip", "chat", "secret", "long", "short", "prefix"};
  for (size_t i = 0; i < SBX_ARRAY_SIZE(near); i++) {
    snprintf(bad, sizeof(bad), "%s", key);
    const unsigned char *sec = secret;
    if (i == 0)
      bad[ORCH_CHAT_KEY_LEN - 1] = bad[ORCH_CHAT_KEY_LEN - 1] == '0' ? '1' : '0';
    else if (i == 1)
      memcpy(bad + 4, chat_b, 32); /* another chat's id, this chat's MAC */
    else if (i == 2)
      sec = other;
    else if (i == 3)
      strcat(bad, "0");
    else if (i == 4)
      bad[ORCH_CHAT_KEY_LEN - 1] = '\0';
    else
      memcpy(bad, "mcq.", 4);
    snprintf(hdr, sizeof(hdr), "Bearer %s", bad);
    orch__auth_read(hdr, NULL, api_hash, NULL, &a);
    orch__auth_chat_key(&a, hdr, NULL, sec);
    ck_assert_msg(a.kind == ORCH_CRED_BAD, "%s", near[i]);
  }
  /* Only a BAD credential is looked at: the API key stays the API key. */
  orch__auth_read("Bearer the-api-key-0123456789", NULL, api_hash, NULL, &a);
  orch__auth_chat_key(&a, "Bearer the-api-key-0123456789", NULL, secret);
  ck_assert_int_eq(a.kind, ORCH_CRED_API);
  orch__auth_read("Basic abc", NULL, api_hash, NULL, &a);
  orch__auth_chat_key(&a, "Basic abc", NULL, secret);
  ck_assert_int_eq(a.kind, ORCH_CRED_BAD);
}
END_TEST

/* The chat-key secret file: made once (0600), read back the same, replaced by a rotation;
 * a damaged file is refused with its name. */
START_TEST(test_chat_secret_file) {
  char dir[] = "/tmp/orch-auth-XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(dir));
  unsigned char s1[ORCH_CHAT_SECRET_LEN], s2[ORCH_CHAT_SECRET_LEN], s3[ORCH_CHAT_SECRET_LEN];
  ck_assert_int_eq(orch__chat_secret_load(dir, 0, s1, NULL), 0);
  ck_assert_int_eq(orch__chat_secret_load(dir, 0, s2, NULL), 0);
  ck_assert_int_eq(memcmp(s1, s2, sizeof(s1)), 0);
  char path[128];
  snprintf(path, sizeof(path), "%s/chat_key_secret", dir);
  struct stat st;
  ck_assert_int_eq(stat(path, &st), 0);
  ck_assert_int_eq(st.st_mode & 0777, 0600);
  ck_assert_int_eq(orch__chat_secret_load(dir, 1, s3, NULL), 0);
  ck_assert_int_ne(memcmp(s1, s3, sizeof(s1)), 0);
  ck_assert_int_eq(orch__chat_secret_load(dir, 0, s2, NULL), 0);
  ck_assert_int_eq(memcmp(s2, s3, sizeof(s2)), 0); /* the rotated one is kept */
  FILE *f = fopen(path, "w");
  fputs("not hex\n", f);
  fclose(f);
  struct sbx_error e;
  ck_assert_int_eq(orch__chat_secret_load(dir, 0, s2, &e), SBX_EINVAL);
  ck_assert_ptr_nonnull(strstr(e.msg, "chat_key_secret"));
  unlink(path);
  rmdir(dir);
}
END_TEST

/* Every credential gets exactly its own sha256 and kind: a near miss of the API key (one byte
 * off, one byte longer or shorter) is wrong, each of 300 page tokens is its own and a one-bit
 * change is not it, lengths up to the credential limit (512) are hashed and longer ones refused. */
START_TEST(test_each_credential_its_own) {
  char api_hash[65], want[65];
  hash("the-api-key-0123456789", api_hash);
  struct orch_auth a;
  const char *near[] = {"Bearer the-api-key-0123456788", "Bearer the-api-key-012345678",
                        "Bearer the-api-key-01234567890", "Bearer Xhe-api-key-0123456789"};
  for (size_t i = 0; i < sizeof(near) / sizeof(near[0]); i++) {
    orch__auth_read(near[i], NULL, api_hash, NULL, &a);
    ck_assert_int_eq(a.kind, ORCH_CRED_BAD);
    hash(near[i] + 7, want);
    ck_assert_str_eq(a.token_hash, want);
  }
  enum { N = 300 };
  static char toks[N][128], hashes[N][65];
  for (int i = 0; i < N; i++) {
    char chat[33];
    snprintf(chat, sizeof(chat), "%032x", i);
    ck_assert_int_eq(orch__token_new(chat, toks[i], sizeof(toks[i]), hashes[i]), 0);
  }
  for (int i = 0; i < N; i++) {
    char hdr[160];
    snprintf(hdr, sizeof(hdr), "Bearer %.127s", toks[i]);
    orch__auth_read(i % 2 ? hdr : NULL, i % 2 ? NULL : toks[i], api_hash, NULL, &a);
    ck_assert_int_eq(a.kind, ORCH_CRED_PAGE);
    ck_assert_str_eq(a.token_hash, hashes[i]);
    ck_assert_int_eq(orch__auth_allows(&a, a.chat_id, hashes[i]), 1);
    ck_assert_int_eq(orch__auth_allows(&a, a.chat_id, hashes[(i + 1) % N]), 0);
    toks[i][STORE_ID_LEN + 64] ^= 1; /* the last character off by one bit: not the token */
    orch__auth_read(NULL, toks[i], api_hash, NULL, &a);
    ck_assert_int_eq(orch__auth_allows(&a, a.chat_id, hashes[i]), 0);
  }
  static char big[600];
  for (size_t n = 1; n <= 514; n++) {
    memset(big, 'k', n);
    big[n] = '\0';
    big[n - 1] = (char)('a' + n % 26);
    orch__auth_read(NULL, big, api_hash, NULL, &a);
    if (n > 512) {
      ck_assert_int_eq(a.kind, ORCH_CRED_BAD);
      continue;
    }
    hash(big, want);
    ck_assert_str_eq(a.token_hash, want);
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("auth");
  TCase *tc = tcase_create("credentials");
  tcase_add_test(tc, test_tokens);
  tcase_add_test(tc, test_host_key);
  tcase_add_test(tc, test_cred_memo);
  tcase_add_test(tc, test_api_key_file);
  tcase_add_test(tc, test_each_credential_its_own);
  tcase_add_test(tc, test_chat_keys);
  tcase_add_test(tc, test_chat_secret_file);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
