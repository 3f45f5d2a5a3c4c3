/* fuzz_people.c -- what a sign-in hands the server before any password is hashed: the Cookie
 * header (orch__cookie_find, auth.c) and the sign-in body (the JSON {name, password} as
 * api_people.c reads it, the UTF-8 check of the raw body, orch__person_name_check and
 * orch__password_check, people.c), then the throttle (orch__throttle_begin/_end) with the name
 * and an address made from the input, and the address a peer is throttled as
 * (orch__throttle_key_addr).
 *
 * One input: byte 0 picks the part (even: the Cookie header, the rest of the input; odd: the
 * sign-in body, the rest).  Checked:
 *  - cookie: a value found lies inside the header, holds no ';', has no space or tab at either
 *    end unless quoted, and the header really holds "<name>=" before it at a pair's start (the
 *    independent judge: a plain scan of the pairs written here); a header without the name finds
 *    nothing; every cookie name present at a pair's start is found by name;
 *  - body: orch__utf8_valid agrees with utf8proc's decoder on the raw bytes; a body jansson
 *    accepts as an object is UTF-8; an accepted name is 1..64 code points with no control
 *    character and no space at either end, an accepted password 1..1024 bytes; a name or
 *    password the checks refuse is never handed to the throttle;
 *  - throttle: the wait it gives is at most ORCH_LOCK_MAX_S; an attempt let through and ended is
 *    counted once (inflight back to 0); the state is a fixed struct however many keys come;
 *  - addresses: the key is NUL-terminated, fits its buffer, and is a prefix of the peer text
 *    (without the brackets of an IPv6 one).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "../../orchestrator/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

static struct orch_people *pp;
static uint64_t now_ms = 1000000;

static void fail(const char *what) {
  fprintf(stderr, "fuzz_people: %s\n", what);
  abort();
}

/* The judge's reading of a Cookie header: is there a pair whose name (trimmed) is `name`? */
static int judge_has(const char *h, const char *name) {
  size_t nl = strlen(name);
  for (const char *p = h; *p;) {
    while (*p == ' ' || *p == '\t' || *p == ';')
      p++;
    const char *k = p;
    while (*p && *p != '=' && *p != ';')
      p++;
    const char *ke = p;
    while (ke > k && (ke[-1] == ' ' || ke[-1] == '\t'))
      ke--;
    int has_eq = *p == '=';
    while (*p && *p != ';')
      p++;
    if (has_eq && (size_t)(ke - k) == nl && memcmp(k, name, nl) == 0)
      return 1;
  }
  return 0;
}

static void cookie(const char *h, size_t len) {
  const char *names[] = {ORCH_SESSION_COOKIE, "a", "", "cerea_session ", "x y"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    const char *v = NULL;
    size_t vl = 0;
    int found = orch__cookie_find(h, names[i], &v, &vl);
    if (found != judge_has(h, names[i]))
      fail("orch__cookie_find and the judge disagree");
    if (!found)
      continue;
    if (v < h || v + vl > h + len)
      fail("the value lies outside the header");
    if (memchr(v, ';', vl))
      fail("the value holds a ';'");
    int quoted = v > h && v[-1] == '"' && v + vl < h + len && v[vl] == '"';
    if (!quoted && vl > 0 && (v[0] == ' ' || v[0] == '\t' || v[vl - 1] == ' ' || v[vl - 1] == '\t'))
      fail("the value keeps white space at an end");
  }
}

/* utf8proc's verdict: every code point of s[0..len) decodes. */
static int judge_utf8(const char *s, size_t len) {
  for (size_t i = 0; i < len;) {
    utf8proc_int32_t cp;
    utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(len - i), &cp);
    if (k <= 0)
      return 0;
    i += (size_t)k;
  }
  return 1;
}

static size_t code_points(const char *s, size_t len) {
  size_t n = 0;
  for (size_t i = 0; i < len; i++)
    n += ((unsigned char)s[i] & 0xC0) != 0x80;
  return n;
}

static void signin(const char *b, size_t len) {
  if (orch__utf8_valid(b, len) != judge_utf8(b, len))
    fail("orch__utf8_valid and utf8proc disagree");
  json_error_t je;
  json_t *j = json_loadb(b, len, JSON_REJECT_DUPLICATES, &je);
  if (json_is_object(j) && !orch__utf8_valid(b, len))
    fail("jansson took a body that is not UTF-8");
  json_t *jn = json_object_get(j, "name"), *jp = json_object_get(j, "password");
  if (json_is_string(jn) && json_is_string(jp)) {
    const char *name = json_string_value(jn), *pw = json_string_value(jp);
    size_t nl = json_string_length(jn), pl = json_string_length(jp);
    const char *why_n = orch__person_name_check(name, nl), *why_p = orch__password_check(pw, pl, 0);
    if (why_n == NULL) {
      size_t cps = code_points(name, nl);
      if (nl == 0 || cps > 64 || name[0] == ' ' || name[nl - 1] == ' ' || !judge_utf8(name, nl))
        fail("a name accepted that breaks the rules");
      for (size_t i = 0; i < nl; i++)
        if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f)
          fail("a name accepted with a control character");
    }
    if (why_p == NULL && (pl == 0 || pl > ORCH_PASSWORD_MAX_BYTES || !judge_utf8(pw, pl)))
      fail("a password accepted that breaks the rules");
    if (orch__password_check(pw, pl, 1) == NULL && why_p != NULL)
      fail("a new password accepted that a sign-in's check refuses");
    if (why_n == NULL && why_p == NULL) {
      char addr[80], peer[96];
      snprintf(peer, sizeof peer, "10.0.%u.%u:1", (unsigned)(len & 255), (unsigned)(nl & 255));
      orch__throttle_key_addr(peer, addr, sizeof addr);
      uint64_t wait = orch__throttle_begin(pp, name, nl, addr, now_ms);
      if (wait > ORCH_LOCK_MAX_S)
        fail("a wait past the lock's bound");
      if (wait == 0)
        orch__throttle_end(pp, name, nl, addr, (int)(len % 3) - 1, now_ms);
      now_ms += 37;
    }
  }
  json_decref(j);
  /* the raw input as a peer's address text */
  char key[80], peer[200];
  size_t k = len < sizeof peer - 1 ? len : sizeof peer - 1;
  memcpy(peer, b, k);
  peer[k] = '\0';
  orch__throttle_key_addr(peer, key, sizeof key);
  size_t kl = strnlen(key, sizeof key);
  if (kl == sizeof key)
    fail("an address key without its NUL");
  const char *from = peer[0] == '[' ? peer + 1 : peer;
  if (strcmp(key, "?") != 0 && strncmp(key, from, kl) != 0)
    fail("an address key that is not a prefix of the peer");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  if (pp == NULL && (pp = calloc(1, sizeof *pp)) == NULL)
    abort();
  if (n == 0)
    return 0;
  char *s = malloc(n);
  if (s == NULL)
    abort();
  memcpy(s, data + 1, n - 1);
  s[n - 1] = '\0';
  if (data[0] % 2 == 0)
    cookie(s, strlen(s)); /* a header is text: up to its first NUL */
  else
    signin(s, n - 1);
  /* the inflight counts go back to 0: each attempt let through was ended */
  for (size_t i = 0; i < ORCH_THROTTLE_SLOTS; i++)
    if (pp->names.slot[i].inflight || pp->addrs.slot[i].inflight)
      fail("an attempt counted in flight after its end");
  free(s);
  return 0;
}
