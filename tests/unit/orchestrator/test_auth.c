/* test_auth.c -- credentials (auth.c): API key vs page tokens, a token reaching only its chat,
 * malformed headers, ?token=, the API key file created once with mode 0600. */
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
  ck_assert_int_eq(orch_token_new(chat_a, tok_a, sizeof(tok_a), hash_a), 0);
  ck_assert_int_eq(orch_token_new(chat_b, tok_b, sizeof(tok_b), hash_b), 0);
  ck_assert_str_ne(tok_a + 33, tok_b + 33);
  hash("the-api-key-0123456789", api_hash);
  char hdr[200];
  struct orch_auth a;
  snprintf(hdr, sizeof(hdr), "Bearer %s", tok_a);
  orch_auth_read(hdr, NULL, api_hash, NULL, &a);
  ck_assert_int_eq(a.kind, ORCH_CRED_PAGE);
  ck_assert_str_eq(a.chat_id, chat_a);
  ck_assert_int_eq(orch_auth_allows(&a, chat_a, hash_a), 1);
  ck_assert_int_eq(orch_auth_allows(&a, chat_b, hash_b), 0); /* another chat */
  ck_assert_int_eq(orch_auth_allows(&a, chat_a, hash_b), 0); /* right id, wrong secret */
  /* a forged token naming chat a */
  char forged[128];
  snprintf(forged, sizeof(forged), "Bearer %s.%064d", chat_a, 0);
  orch_auth_read(forged, NULL, api_hash, NULL, &a);
  ck_assert_int_eq(a.kind, ORCH_CRED_PAGE);
  ck_assert_int_eq(orch_auth_allows(&a, chat_a, hash_a), 0);
  /* API key reaches every chat */
  orch_auth_read("Bearer the-api-key-0123456789", NULL, api_hash, NULL, &a);
  ck_assert_int_eq(a.kind, ORCH_CRED_API);
  ck_assert_int_eq(orch_auth_allows(&a, chat_b, hash_b), 1);
  /* query token only when no header */
  orch_auth_read(NULL, tok_b, api_hash, NULL, &a);
  ck_assert_int_eq(a.kind, ORCH_CRED_PAGE);
  ck_assert_int_eq(orch_auth_allows(&a, chat_b, hash_b), 1);
  orch_auth_read(NULL, NULL, api_hash, NULL, &a);
  ck_assert_int_eq(a.kind, ORCH_CRED_NONE);
  orch_auth_read("Basic abc", NULL, api_hash, NULL, &a);
  ck_assert_int_eq(a.kind, ORCH_CRED_BAD);
  orch_auth_read("Bearer ", NULL, api_hash, NULL, &a);
  ck_assert_int_eq(a.kind, ORCH_CRED_BAD);
  orch_auth_read("Bearer wrong-key", NULL, api_hash, NULL, &a);
  ck_assert_int_eq(a.kind, ORCH_CRED_BAD);
  ck_assert_int_eq(orch_auth_allows(&a, chat_a, hash_a), 0);
}
END_TEST

START_TEST(test_host_key) {
  const char *chat_a = "0123456789abcdef0123456789abcdef";
  char api_hash[65], host_hash[65], hash_a[65], tok_a[128];
  hash("the-api-key-0123456789", api_hash);
  hash("host-key-0123456789abcdef", host_hash);
  ck_assert_int_eq(orch_token_new(chat_a, tok_a, sizeof(tok_a), hash_a), 0);
  struct orch_auth a;
  orch_auth_read("Bearer host-key-0123456789abcdef", NULL, api_hash, host_hash, &a);
  ck_assert_int_eq(a.kind, ORCH_CRED_HOST); /* page-level calls of every chat; never API-only ones */
  ck_assert_int_eq(orch_auth_allows(&a, chat_a, hash_a), 1);
  orch_auth_read("Bearer host-key-0123456789abcdef", NULL, api_hash, NULL, &a);
  ck_assert_int_eq(a.kind, ORCH_CRED_BAD); /* no hosts: the key means nothing */
  orch_auth_read("Bearer host-key-0123456789abcdef", NULL, api_hash, "", &a);
  ck_assert_int_eq(a.kind, ORCH_CRED_BAD);
  orch_auth_read("Bearer the-api-key-0123456789", NULL, api_hash, host_hash, &a);
  ck_assert_int_eq(a.kind, ORCH_CRED_API);
}
END_TEST

START_TEST(test_ct_streq) {
  ck_assert_int_eq(orch_ct_streq("abc", "abc"), 1);
  ck_assert_int_eq(orch_ct_streq("abc", "abd"), 0);
  ck_assert_int_eq(orch_ct_streq("abc", "abcd"), 0);
  ck_assert_int_eq(orch_ct_streq("", ""), 1);
}
END_TEST

START_TEST(test_api_key_file) {
  char dir[] = "/tmp/orch-auth-XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(dir));
  char *k1 = NULL, *k2 = NULL;
  int gen = -1;
  ck_assert_int_eq(orch_api_key_load(dir, &k1, &gen, NULL), 0);
  ck_assert_int_eq(gen, 1);
  ck_assert_uint_eq(strlen(k1), 64);
  ck_assert_int_eq(orch_api_key_load(dir, &k2, &gen, NULL), 0);
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
  ck_assert_int_ne(orch_api_key_load("/nonexistent-dir/x", &k3, &gen, &e), 0);
  ck_assert_ptr_nonnull(strstr(e.msg, "api_key"));
}
END_TEST

int main(void) {
  Suite *s = suite_create("auth");
  TCase *tc = tcase_create("credentials");
  tcase_add_test(tc, test_tokens);
  tcase_add_test(tc, test_host_key);
  tcase_add_test(tc, test_ct_streq);
  tcase_add_test(tc, test_api_key_file);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
