/* fuzz_people.c -- what a sign-in hands the server before any password is hashed: the Cookie
 * header (orch__cookie_find, auth.c) and the sign-in body (the JSON {name, password} as
 * api_people.c reads it, the UTF-8 check of the raw body, orch__person_name_check and
 * orch__password_check, people.c), then the throttle (orch__throttle_begin/_end) with the name
 * and an address made from the input, and the address a peer is throttled as
 * (orch__throttle_key_addr).
 *
 * One input: byte 0 picks the part (0 mod 4: the Cookie header, the rest of the input; 2 mod 4:
 * a well-formed cookie-string built from the rest; odd: the sign-in body, the rest).  Checked:
 *  - cookie: the judge is RFC 6265's grammar (section 4.2.1: cookie-string = cookie-pair *("; "
 *    cookie-pair), cookie-name a token of RFC 2616, cookie-value *cookie-octet or the same in
 *    DQUOTEs; the header's OWS around it), parsed here without looking at orch__cookie_find's
 *    way: for a header the grammar takes, the cookie found by a name is exactly the first pair of
 *    that name, with its value (DQUOTEs taken off), and a name no pair has (or no token at all:
 *    "", "x y") finds nothing.  For any header: a value found lies inside it, holds no ';', and
 *    has no space or tab at either end unless quoted;
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

/* Whether the input reached the throttle (only orch__throttle_begin and _end change its counts). */
static int throttled;

/* Whether a slot of either table counts an attempt in flight.  Not instrumented: the scan of the
 * 2 x ORCH_THROTTLE_SLOTS slots is the harness's, not the code under test, and with the coverage's
 * comparison tracing on every slot it took ~85% of the target's time (2,900 inputs a second). */
__attribute__((no_sanitize("coverage", "address"))) static int
throttle_inflight(const struct orch_people *p) {
  uint32_t any = 0;
  for (size_t i = 0; i < ORCH_THROTTLE_SLOTS; i++)
    any |= p->names.slot[i].inflight | p->addrs.slot[i].inflight;
  return any != 0;
}

static void fail(const char *what) {
  fprintf(stderr, "fuzz_people: %s\n", what);
  abort();
}

/* ---- the judge: RFC 6265 section 4.2.1's grammar ---------------------------------------------
 *   cookie-header = "Cookie:" OWS cookie-string OWS
 *   cookie-string = cookie-pair *( ";" SP cookie-pair )
 *   cookie-pair   = cookie-name "=" cookie-value
 *   cookie-name   = token                                  (RFC 2616 2.2)
 *   cookie-value  = *cookie-octet / ( DQUOTE *cookie-octet DQUOTE )
 *   cookie-octet  = %x21 / %x23-2B / %x2D-3A / %x3C-5B / %x5D-7E
 *   token         = 1*<any CHAR except CTLs or separators>
 *   separators    = "(" | ")" | "<" | ">" | "@" | "," | ";" | ":" | "\" | <"> | "/" | "[" | "]"
 *                   | "?" | "=" | "{" | "}" | SP | HT
 *   OWS           = *( SP / HTAB ) */
static int is_token_char(unsigned char c) {
  return c > 0x20 && c < 0x7f && strchr("()<>@,;:\\\"/[]?={} \t", c) == NULL;
}
static int is_cookie_octet(unsigned char c) {
  return c == 0x21 || (c >= 0x23 && c <= 0x2b) || (c >= 0x2d && c <= 0x3a) ||
         (c >= 0x3c && c <= 0x5b) || (c >= 0x5d && c <= 0x7e);
}

/* h as the grammar reads it: -1 when it is no cookie-string (with OWS around); else whether a
 * pair is named `name`, the first such pair's value in *v, *vl (DQUOTEs taken off). */
static int judge_find(const char *h, const char *name, const char **v, size_t *vl) {
  const char *p = h, *end = h + strlen(h);
  while (p < end && (*p == ' ' || *p == '\t'))
    p++;
  while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
    end--;
  int found = 0;
  for (;;) {
    const char *k = p;
    while (p < end && is_token_char((unsigned char)*p))
      p++;
    if (p == k || p == end || *p != '=')
      return -1;
    size_t kl = (size_t)(p - k);
    const char *val = ++p;
    int quoted = p < end && *p == '"';
    if (quoted)
      p++;
    while (p < end && is_cookie_octet((unsigned char)*p))
      p++;
    if (quoted && (p == end || *p != '"'))
      return -1;
    const char *ve = p;
    if (quoted)
      val++, p++;
    if (!found && kl == strlen(name) && memcmp(k, name, kl) == 0) {
      found = 1;
      *v = val;
      *vl = (size_t)(ve - val);
    }
    if (p == end)
      return found;
    if (end - p < 2 || p[0] != ';' || p[1] != ' ')
      return -1;
    p += 2;
  }
}

/* A well-formed cookie-string made from d[0..n) into out (cap bytes, NUL-terminated): one pair
 * or more, named ORCH_SESSION_COOKIE, "a" or a token of the input's bytes, values of
 * cookie-octets, some quoted, OWS around some. */
static void make_cookie_string(const uint8_t *d, size_t n, char *out, size_t cap) {
  static const char *known[] = {ORCH_SESSION_COOKIE, "a"};
  size_t o = 0, i = 0;
  const size_t room = cap - 64; /* a pair's worst case fits past it */
  if (n > 0 && d[0] & 1)
    out[o++] = d[0] & 2 ? '\t' : ' ';
  for (int pairs = 0; (i < n || pairs == 0) && o < room; pairs++) { /* one pair at least */
    if (pairs)
      out[o++] = ';', out[o++] = ' ';
    uint8_t b = i < n ? d[i++] : 0;
    if (b % 4 < 2) {
      o += (size_t)snprintf(out + o, cap - o, "%s", known[b % 4]);
    } else {
      size_t len = 1 + (b >> 2) % 8;
      for (size_t j = 0; j < len; j++) {
        unsigned char c = (unsigned char)(0x21 + (i < n ? d[i++] : j) % 0x5e);
        out[o++] = (char)(is_token_char(c) ? c : 'k');
      }
    }
    out[o++] = '=';
    uint8_t vb = i < n ? d[i++] : 0;
    int quoted = vb & 0x80;
    if (quoted)
      out[o++] = '"';
    for (size_t j = 0, len = vb % 12; j < len; j++) {
      unsigned char c = (unsigned char)(0x21 + (i < n ? d[i++] : j) % 0x5e);
      out[o++] = (char)(is_cookie_octet(c) ? c : 'v');
    }
    if (quoted)
      out[o++] = '"';
  }
  if (n > 1 && d[1] & 1)
    out[o++] = ' ';
  out[o] = '\0';
}

static void cookie(const char *h, size_t len) {
  const char *names[] = {ORCH_SESSION_COOKIE, "a", "", "cerea_session ", "x y"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    const char *v = NULL, *jv = NULL;
    size_t vl = 0, jvl = 0;
    int found = orch__cookie_find(h, names[i], &v, &vl);
    int judged = judge_find(h, names[i], &jv, &jvl);
    if (judged >= 0 && found != judged)
      fail(found ? "orch__cookie_find found a cookie the grammar says is not there"
                 : "orch__cookie_find missed a cookie the grammar finds");
    if (judged == 1 && (vl != jvl || memcmp(v, jv, vl) != 0))
      fail("orch__cookie_find's value is not the grammar's");
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
      throttled = 1;
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
  if (data[0] % 4 == 2) {
    char h[4096 + 64];
    make_cookie_string(data + 1, n - 1 < 4096 ? n - 1 : 4096, h, sizeof h);
    if (judge_find(h, "a", &(const char *){NULL}, &(size_t){0}) < 0)
      fail("the judge refuses the cookie-string it was built from its grammar");
    cookie(h, strlen(h));
  } else if (data[0] % 2 == 0)
    cookie(s, strlen(s)); /* a header is text: up to its first NUL */
  else
    signin(s, n - 1);
  /* the inflight counts go back to 0: each attempt let through was ended */
  if (throttled && throttle_inflight(pp))
    fail("an attempt counted in flight after its end");
  throttled = 0;
  free(s);
  return 0;
}
