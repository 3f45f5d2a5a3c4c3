/* test_people.c -- people.c's pure parts and the cookie parser (auth.c): Argon2id hashing and
 * checking (a wrong password, another salt, a hash made under other parameters, a malformed
 * hash); the names and passwords refused; the sign-in throttle (a name locked after its free
 * failures, the wait doubling to its bound, attempts in flight counted, a success clearing the
 * name, an address counted across names, a quiet key forgotten, memory fixed however many keys
 * come); session expiry (idle, absolute, ended); the address a peer is throttled as; and
 * Cookie headers.  And one case with the real server: closed while a sign-in's password is still
 * checked on the thread pool, it frees that sign-in and its request (LeakSanitizer in the
 * sanitizer build says so) and its loop closes with nothing left. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"
#include "orch.h"

static struct orch_config cfg;

static void setup(void) {
  ck_assert_int_eq(orch_config_defaults(&cfg), 0);
  cfg.argon2_memory_kib = 64; /* fast for the tests; the encoded hash names what it used */
  cfg.argon2_iterations = 1;
}
static void teardown(void) { orch_config_free(&cfg); }

START_TEST(test_hash_verify) {
  char h1[ORCH_PW_HASH_MAX], h2[ORCH_PW_HASH_MAX];
  const char *pw = "correct horse battery staple";
  ck_assert_int_eq(orch__pw_hash(&cfg, pw, strlen(pw), h1, sizeof h1), 0);
  ck_assert_msg(strncmp(h1, "$argon2id$v=19$m=64,t=1,p=1$", 28) == 0, "%s", h1);
  ck_assert_ptr_null(strstr(h1, pw)); /* the password is not in its hash */
  ck_assert_int_eq(orch__pw_verify(h1, pw, strlen(pw)), 1);
  ck_assert_int_eq(orch__pw_verify(h1, pw, strlen(pw) - 1), 0);
  ck_assert_int_eq(orch__pw_verify(h1, "Correct horse battery staple", strlen(pw)), 0);
  ck_assert_int_eq(orch__pw_verify(h1, "", 0), 0);
  /* the same password again: another salt, another hash, both check */
  ck_assert_int_eq(orch__pw_hash(&cfg, pw, strlen(pw), h2, sizeof h2), 0);
  ck_assert_str_ne(h1, h2);
  ck_assert_int_eq(orch__pw_verify(h2, pw, strlen(pw)), 1);
  /* a hash made under other parameters still checks under today's */
  cfg.argon2_memory_kib = 128;
  cfg.argon2_iterations = 2;
  ck_assert_int_eq(orch__pw_hash(&cfg, pw, strlen(pw), h2, sizeof h2), 0);
  ck_assert_msg(strstr(h2, "m=128,t=2") != NULL, "%s", h2);
  ck_assert_int_eq(orch__pw_verify(h1, pw, strlen(pw)), 1);
  ck_assert_int_eq(orch__pw_verify(h2, pw, strlen(pw)), 1);
  /* a password holding a NUL byte is the bytes it holds */
  ck_assert_int_eq(orch__pw_hash(&cfg, "a\0b", 3, h1, sizeof h1), 0);
  ck_assert_int_eq(orch__pw_verify(h1, "a\0b", 3), 1);
  ck_assert_int_eq(orch__pw_verify(h1, "a", 1), 0);
  /* malformed hashes never match */
  ck_assert_int_eq(orch__pw_verify("$argon2id$v=19$m=64,t=1,p=1$", pw, strlen(pw)), 0);
  ck_assert_int_eq(orch__pw_verify("", pw, strlen(pw)), 0);
  ck_assert_int_eq(orch__pw_verify(NULL, pw, strlen(pw)), 0);
  h1[strlen(h1) - 2] ^= 1; /* the tag changed */
  ck_assert_int_eq(orch__pw_verify(h1, "a\0b", 3), 0);
  /* too small a buffer */
  ck_assert_int_ne(orch__pw_hash(&cfg, pw, strlen(pw), h2, 20), 0);
  char gen[32], gen2[32];
  ck_assert_int_eq(orch__pw_generate(gen, sizeof gen), 0);
  ck_assert_int_eq(orch__pw_generate(gen2, sizeof gen2), 0);
  ck_assert_uint_eq(strlen(gen), 20);
  ck_assert_str_ne(gen, gen2);
  ck_assert_ptr_null(orch__password_check(gen, strlen(gen), 1));
  ck_assert_int_ne(orch__pw_generate(gen, 10), 0);
}
END_TEST

START_TEST(test_names_passwords) {
  ck_assert_ptr_null(orch__person_name_check("ada", 3));
  ck_assert_ptr_null(orch__person_name_check("Zoë Ø", strlen("Zoë Ø")));
  ck_assert_ptr_nonnull(orch__person_name_check("", 0));
  ck_assert_ptr_nonnull(orch__person_name_check(" ada", 4));
  ck_assert_ptr_nonnull(orch__person_name_check("ada ", 4));
  ck_assert_ptr_nonnull(orch__person_name_check("a\tb", 3));
  ck_assert_ptr_nonnull(orch__person_name_check("a\nb", 3));
  ck_assert_ptr_nonnull(orch__person_name_check("a\x7f", 2));
  ck_assert_ptr_nonnull(orch__person_name_check("a\xc2\x85", 3));  /* C1 NEL */
  ck_assert_ptr_nonnull(orch__person_name_check("\xff", 1));        /* not UTF-8 */
  ck_assert_ptr_nonnull(orch__person_name_check("\xc0\xaf", 2));    /* overlong */
  ck_assert_ptr_nonnull(orch__person_name_check("\xed\xa0\x80", 3)); /* a surrogate */
  ck_assert_ptr_nonnull(orch__person_name_check("\xe2\x82", 2));    /* cut short */
  char big[2000];
  memset(big, 'a', sizeof big);
  ck_assert_ptr_nonnull(orch__person_name_check(big, 65));
  ck_assert_ptr_null(orch__person_name_check(big, 64));
  ck_assert_ptr_nonnull(orch__person_name_check(big, 1025));
  /* passwords: any UTF-8 text up to 1024 bytes; a new one at least 8 characters */
  ck_assert_ptr_null(orch__password_check("x", 1, 0));
  ck_assert_ptr_nonnull(orch__password_check("x", 1, 1));
  ck_assert_ptr_nonnull(orch__password_check("ççççççç", strlen("ççççççç"), 1)); /* 7 chars */
  ck_assert_ptr_null(orch__password_check("çççççççç", strlen("çççççççç"), 1));
  ck_assert_ptr_null(orch__password_check("with spaces ok", 14, 1));
  ck_assert_ptr_nonnull(orch__password_check("", 0, 0));
  ck_assert_ptr_null(orch__password_check(big, 1024, 1));
  ck_assert_ptr_nonnull(orch__password_check(big, 1025, 0));
  ck_assert_ptr_nonnull(orch__password_check("abc\xfe" "defgh", 9, 0));
  ck_assert_ptr_nonnull(orch__password_check("abc\0defgh", 9, 0));
}
END_TEST

static struct orch_people *people_new(void) {
  struct orch_people *pp = calloc(1, sizeof *pp);
  ck_assert_ptr_nonnull(pp);
  return pp;
}

#define NAME(s) (s), strlen(s)

START_TEST(test_throttle_name) {
  struct orch_people *pp = people_new();
  uint64_t now = 1000000;
  /* the free failures of a name */
  for (int i = 0; i < ORCH_NAME_FREE - 1; i++) {
    ck_assert_uint_eq(orch__throttle_begin(pp, NAME("ada"), "10.0.0.1", now), 0);
    orch__throttle_end(pp, NAME("ada"), "10.0.0.1", 0, now);
  }
  ck_assert_uint_eq(orch__throttle_begin(pp, NAME("ada"), "10.0.0.1", now), 0);
  orch__throttle_end(pp, NAME("ada"), "10.0.0.1", 0, now); /* the 5th: locked 1 s */
  ck_assert_uint_eq(orch__throttle_begin(pp, NAME("ada"), "10.0.0.2", now), 1);
  ck_assert_uint_eq(orch__throttle_begin(pp, NAME("ada"), "10.0.0.2", now + 999), 1);
  ck_assert_uint_eq(pp->throttled, 2);
  /* another name from the same address is not locked */
  ck_assert_uint_eq(orch__throttle_begin(pp, NAME("bob"), "10.0.0.1", now), 0);
  orch__throttle_end(pp, NAME("bob"), "10.0.0.1", -1, now);
  /* each further failure doubles the wait: 2, 4, 8 ... up to ORCH_LOCK_MAX_S */
  uint64_t want = 2;
  for (int i = 0; i < 12; i++) {
    now += 400000; /* past any lock */
    ck_assert_uint_eq(orch__throttle_begin(pp, NAME("ada"), "10.0.0.3", now), 0);
    orch__throttle_end(pp, NAME("ada"), "10.0.0.3", 0, now);
    ck_assert_uint_eq(orch__throttle_begin(pp, NAME("ada"), "10.0.0.4", now), want);
    want = want * 2 > ORCH_LOCK_MAX_S ? ORCH_LOCK_MAX_S : want * 2;
  }
  ck_assert_uint_eq(want, ORCH_LOCK_MAX_S);
  /* a success clears the name */
  now += 400000;
  ck_assert_uint_eq(orch__throttle_begin(pp, NAME("ada"), "10.0.0.5", now), 0);
  orch__throttle_end(pp, NAME("ada"), "10.0.0.5", 1, now);
  for (int i = 0; i < ORCH_NAME_FREE - 1; i++) {
    ck_assert_uint_eq(orch__throttle_begin(pp, NAME("ada"), "10.0.0.6", now), 0);
    orch__throttle_end(pp, NAME("ada"), "10.0.0.6", 0, now);
  }
  /* a name quiet for ORCH_THROTTLE_FORGET_MS starts again */
  ck_assert_uint_eq(orch__throttle_begin(pp, NAME("ada"), "10.0.0.7", now), 0);
  orch__throttle_end(pp, NAME("ada"), "10.0.0.7", 0, now);
  ck_assert_uint_gt(orch__throttle_begin(pp, NAME("ada"), "10.0.0.7", now), 0);
  now += ORCH_THROTTLE_FORGET_MS + 2000;
  ck_assert_uint_eq(orch__throttle_begin(pp, NAME("ada"), "10.0.0.8", now), 0);
  orch__throttle_end(pp, NAME("ada"), "10.0.0.8", 0, now);
  ck_assert_uint_eq(orch__throttle_begin(pp, NAME("ada"), "10.0.0.8", now), 0);
  orch__throttle_end(pp, NAME("ada"), "10.0.0.8", -1, now);
  free(pp);
}
END_TEST

START_TEST(test_throttle_inflight_and_address) {
  struct orch_people *pp = people_new();
  uint64_t now = 5000000;
  /* attempts in flight count: a name takes ORCH_NAME_FREE at once, then must wait for them */
  for (int i = 0; i < ORCH_NAME_FREE; i++)
    ck_assert_uint_eq(orch__throttle_begin(pp, NAME("cy"), "10.1.0.1", now), 0);
  ck_assert_uint_eq(orch__throttle_begin(pp, NAME("cy"), "10.1.0.1", now), 1);
  for (int i = 0; i < ORCH_NAME_FREE; i++)
    orch__throttle_end(pp, NAME("cy"), "10.1.0.1", -1, now); /* none was checked after all */
  ck_assert_uint_eq(orch__throttle_begin(pp, NAME("cy"), "10.1.0.1", now), 0);
  orch__throttle_end(pp, NAME("cy"), "10.1.0.1", -1, now);
  /* two at once for one name (two sign-ins racing): both go on */
  ck_assert_uint_eq(orch__throttle_begin(pp, NAME("dee"), "10.1.0.9", now), 0);
  ck_assert_uint_eq(orch__throttle_begin(pp, NAME("dee"), "10.1.0.9", now), 0);
  orch__throttle_end(pp, NAME("dee"), "10.1.0.9", 1, now);
  orch__throttle_end(pp, NAME("dee"), "10.1.0.9", 1, now);
  /* an address counts across names: ORCH_ADDR_FREE failures, each of another name */
  char name[32];
  for (int i = 0; i < ORCH_ADDR_FREE; i++) {
    snprintf(name, sizeof name, "guess%d", i);
    ck_assert_uint_eq(orch__throttle_begin(pp, NAME(name), "10.2.0.1", now), 0);
    orch__throttle_end(pp, NAME(name), "10.2.0.1", 0, now);
  }
  ck_assert_uint_gt(orch__throttle_begin(pp, NAME("fresh"), "10.2.0.1", now), 0);
  ck_assert_uint_eq(orch__throttle_begin(pp, NAME("fresh"), "10.2.0.2", now), 0);
  orch__throttle_end(pp, NAME("fresh"), "10.2.0.2", -1, now);
  free(pp);
}
END_TEST

START_TEST(test_throttle_bounded) {
  /* 100,000 addresses and names, each failing: the tables stay what they are (fixed arrays),
   * the oldest entries are forgotten, and an address failing after them is locked as before */
  struct orch_people *pp = people_new();
  size_t size = sizeof *pp;
  uint64_t now = 9000000;
  char name[32], addr[32];
  for (int i = 0; i < 100000; i++) {
    snprintf(name, sizeof name, "n%d", i);
    snprintf(addr, sizeof addr, "10.%d.%d.%d", (i >> 16) & 255, (i >> 8) & 255, i & 255);
    uint64_t w = orch__throttle_begin(pp, NAME(name), addr, now + 1 + (uint64_t)i / 1000);
    if (w == 0)
      orch__throttle_end(pp, NAME(name), addr, 0, now + 1 + (uint64_t)i / 1000);
  }
  ck_assert_uint_eq(sizeof *pp, size);
  ck_assert_uint_gt(pp->names.evicted, 90000);
  ck_assert_uint_gt(pp->addrs.evicted, 90000);
  size_t used = 0;
  for (size_t i = 0; i < ORCH_THROTTLE_SLOTS; i++)
    used += pp->addrs.slot[i].used;
  ck_assert_uint_le(used, ORCH_THROTTLE_SLOTS);
  /* and it still throttles: an address failing now is locked */
  now += 200000;
  for (int i = 0; i < ORCH_ADDR_FREE; i++) {
    snprintf(name, sizeof name, "after%d", i);
    ck_assert_uint_eq(orch__throttle_begin(pp, NAME(name), "192.0.2.1", now), 0);
    orch__throttle_end(pp, NAME(name), "192.0.2.1", 0, now);
  }
  ck_assert_uint_gt(orch__throttle_begin(pp, NAME("after-more"), "192.0.2.1", now), 0);
  free(pp);
}
END_TEST

START_TEST(test_throttle_addr_key) {
  char out[80];
  orch__throttle_key_addr("203.0.113.7:51234", out, sizeof out);
  ck_assert_str_eq(out, "203.0.113.7");
  orch__throttle_key_addr("[2001:db8:1:2:3:4:5:6]:443", out, sizeof out);
  ck_assert_str_eq(out, "2001:db8:1:2");
  orch__throttle_key_addr("[2001:db8:1:2:ffff::9]:443", out, sizeof out);
  ck_assert_str_eq(out, "2001:db8:1:2"); /* the same /64 */
  orch__throttle_key_addr("[::1]:80", out, sizeof out);
  ck_assert_str_eq(out, "::1");
  orch__throttle_key_addr("unix", out, sizeof out);
  ck_assert_str_eq(out, "unix");
  orch__throttle_key_addr(NULL, out, sizeof out);
  ck_assert_str_eq(out, "?");
}
END_TEST

START_TEST(test_session_life) {
  struct store_session s = {.created_at = 1000, .last_used_at = 5000};
  const int64_t idle = 10000, max = 100000;
  ck_assert_int_eq(orch__session_life(&s, 5000, idle, max), ORCH_SESSION_LIVE);
  ck_assert_int_eq(orch__session_life(&s, 14999, idle, max), ORCH_SESSION_LIVE);
  ck_assert_int_eq(orch__session_life(&s, 15000, idle, max), ORCH_SESSION_EXPIRED); /* idle */
  s.last_used_at = 100500;
  ck_assert_int_eq(orch__session_life(&s, 100999, idle, max), ORCH_SESSION_LIVE);
  ck_assert_int_eq(orch__session_life(&s, 101000, idle, max), ORCH_SESSION_EXPIRED); /* absolute */
  s.ended_at = 100600;
  ck_assert_int_eq(orch__session_life(&s, 100700, idle, max), ORCH_SESSION_ENDED);
  char t1[65], h1[65], t2[65], h2[65], want[65];
  ck_assert_int_eq(orch__session_token_new(t1, h1), 0);
  ck_assert_int_eq(orch__session_token_new(t2, h2), 0);
  ck_assert_uint_eq(strlen(t1), 64);
  ck_assert_str_ne(t1, t2);
  store_sha256_hex(t1, 64, want);
  ck_assert_str_eq(h1, want);
  ck_assert_str_ne(h1, t1);
}
END_TEST

START_TEST(test_cookie_find) {
  const char *v;
  size_t n;
  ck_assert_int_eq(orch__cookie_find("cerea_session=abc", "cerea_session", &v, &n), 1);
  ck_assert_int_eq(n, 3);
  ck_assert_int_eq(strncmp(v, "abc", 3), 0);
  ck_assert_int_eq(orch__cookie_find("a=1; cerea_session=xyz; b=2", "cerea_session", &v, &n), 1);
  ck_assert_int_eq(strncmp(v, "xyz", n), 0);
  ck_assert_int_eq(n, 3);
  ck_assert_int_eq(orch__cookie_find("a=1;cerea_session = \"q\" ;b", "cerea_session", &v, &n), 1);
  ck_assert_int_eq(n, 1);
  ck_assert_int_eq(*v, 'q');
  /* the first of two counts; a longer or shorter name is another cookie */
  ck_assert_int_eq(orch__cookie_find("cerea_session=1; cerea_session=2", "cerea_session", &v, &n), 1);
  ck_assert_int_eq(*v, '1');
  ck_assert_int_eq(orch__cookie_find("xcerea_session=1; cerea_sessionx=2", "cerea_session", &v, &n),
                   0);
  ck_assert_int_eq(orch__cookie_find("cerea_session", "cerea_session", &v, &n), 0);
  ck_assert_int_eq(orch__cookie_find("cerea_session=", "cerea_session", &v, &n), 1);
  ck_assert_int_eq(n, 0);
  ck_assert_int_eq(orch__cookie_find("", "cerea_session", &v, &n), 0);
  ck_assert_int_eq(orch__cookie_find(";;; ;", "cerea_session", &v, &n), 0);
  ck_assert_int_eq(orch__cookie_find(NULL, "cerea_session", &v, &n), 0);
  ck_assert_int_eq(orch__cookie_find("=x; cerea_session=\"", "cerea_session", &v, &n), 1);
  ck_assert_int_eq(n, 1); /* a lone quote is the value */
}
END_TEST

START_TEST(test_settings_pypi) {
  ck_assert_int_eq(orch__settings_pypi("{}"), 1);
  ck_assert_int_eq(orch__settings_pypi(NULL), 1);
  ck_assert_int_eq(orch__settings_pypi("{\"pypi\":true}"), 1);
  ck_assert_int_eq(orch__settings_pypi("{\"pypi\":false}"), 0);
  ck_assert_int_eq(orch__settings_pypi("not json"), 1);
}
END_TEST

/* ---- the server closed while a sign-in hashes ------------------------------------------------ */

static struct {
  struct orch *o;
  uv_tcp_t client;
  uv_connect_t conn;
  uv_write_t wr;
  uv_timer_t poll;
  char req[512];
  int hashing_seen, closed, polls;
} cw;

static void on_orch_closed(void *ud) {
  (void)ud;
  cw.closed = 1;
}

/* Once the sign-in's check is on the thread pool: the client goes (its request is then gone) and
 * the server closes, well before the check ends. */
static void on_poll(uv_timer_t *t) {
  if (orch__pw_working(cw.o) == 0 && ++cw.polls < 2000)
    return;
  cw.hashing_seen = orch__pw_working(cw.o) > 0;
  uv_timer_stop(t);
  uv_close((uv_handle_t *)t, NULL);
  uv_close((uv_handle_t *)&cw.client, NULL);
  orch_close(cw.o, on_orch_closed, NULL);
}

static void on_written(uv_write_t *w, int status) {
  (void)w;
  ck_assert_int_eq(status, 0);
  uv_timer_start(&cw.poll, on_poll, 1, 1);
}

static void on_connected(uv_connect_t *c, int status) {
  ck_assert_int_eq(status, 0);
  uv_buf_t b = uv_buf_init(cw.req, (unsigned)strlen(cw.req));
  ck_assert_int_eq(uv_write(&cw.wr, c->handle, &b, 1, on_written), 0);
}

START_TEST(test_close_while_signin_hashes) {
  char dir[64] = "/tmp/cerea-tpeople-XXXXXX", www[96], py[112], cmd[128];
  ck_assert_ptr_nonnull(mkdtemp(dir));
  snprintf(www, sizeof www, "%s/www", dir);
  snprintf(py, sizeof py, "%s/pyodide", www);
  ck_assert_int_eq(mkdir(www, 0755), 0);
  ck_assert_int_eq(mkdir(py, 0755), 0);
  struct orch_config c;
  ck_assert_int_eq(orch_config_defaults(&c), 0);
  ck_assert_int_eq(orch_config_set(&c, "CEREA_LISTEN", "127.0.0.1:0", NULL), 0);
  ck_assert_int_eq(orch_config_set(&c, "CEREA_DATA_DIR", dir, NULL), 0);
  ck_assert_int_eq(orch_config_set(&c, "CEREA_STATIC_DIR", www, NULL), 0);
  ck_assert_int_eq(orch_config_set(&c, "CEREA_API_KEY", "unit-test-key-0123456789", NULL), 0);
  c.argon2_memory_kib = 64 * 1024; /* a check that takes a while: the close comes during it */
  c.argon2_iterations = 3;
  uv_loop_t loop;
  ck_assert_int_eq(uv_loop_init(&loop), 0);
  struct sbx_error err;
  sbx_error_clear(&err);
  memset(&cw, 0, sizeof cw);
  int rc = orch_new(&loop, &c, &cw.o, &err);
  ck_assert_msg(rc == 0, "orch_new: %s", err.msg);
  const char *body = "{\"name\":\"nobody\",\"password\":\"a wrong password\"}";
  snprintf(cw.req, sizeof cw.req,
           "POST /v1/signin HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
           "Content-Length: %zu\r\n\r\n%s",
           strlen(body), body);
  struct sockaddr_in addr;
  uv_ip4_addr("127.0.0.1", orch_port(cw.o), &addr);
  uv_tcp_init(&loop, &cw.client);
  uv_timer_init(&loop, &cw.poll);
  ck_assert_int_eq(
      uv_tcp_connect(&cw.conn, &cw.client, (const struct sockaddr *)&addr, on_connected), 0);
  uint64_t t0 = sbx_now_mono_ms();
  uv_run(&loop, UV_RUN_DEFAULT); /* until the server closed and the check came back */
  ck_assert_int_eq(cw.closed, 1);
  ck_assert_msg(cw.hashing_seen, "the sign-in's check never reached the thread pool");
  ck_assert_int_eq(uv_loop_close(&loop), 0);
  fprintf(stderr, "# closed during a sign-in's check; all done in %llu ms\n",
          (unsigned long long)(sbx_now_mono_ms() - t0));
  orch_config_free(&c);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  ck_assert_int_eq(system(cmd), 0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("people");
  TCase *tc = tcase_create("people");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_hash_verify);
  tcase_add_test(tc, test_names_passwords);
  tcase_add_test(tc, test_throttle_name);
  tcase_add_test(tc, test_throttle_inflight_and_address);
  tcase_add_test(tc, test_throttle_bounded);
  tcase_add_test(tc, test_throttle_addr_key);
  tcase_add_test(tc, test_session_life);
  tcase_add_test(tc, test_cookie_find);
  tcase_add_test(tc, test_settings_pypi);
  tcase_add_test(tc, test_close_while_signin_hashes);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
