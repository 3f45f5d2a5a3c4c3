/* test_naming.c -- naming.c: NFC through utf8proc (a few vectors, checked against Python's
 * unicodedata when they were chosen, plus hand-picked cases), the refusal table, and the
 * "stem (N).ext" split. */
#include "helpers.h"

/* reordering, decompositions, composition exclusions, singletons, Hangul, blocked marks */
static const struct {
  const char *in, *nfc;
} nfc_vectors[] = {
    /* U+0344 decomposes, the marks reorder by combining class */
    {"\xd8\xa7\xcc\x9b\xcd\x84\xcc\xa8\xe0\xa4\xbc",
     "\xd8\xa7\xe0\xa4\xbc\xcc\xa8\xcc\x9b\xcc\x88\xcc\x81"},
    /* marks of different classes reorder, none composes */
    {"\xe0\xbd\xb2\xe3\x82\x9a\xcc\x9b", "\xe3\x82\x9a\xe0\xbd\xb2\xcc\x9b"},
    /* U+0F73 decomposes to two marks; U+037E is a singleton (';') */
    {"\xcc\x9b\xe0\xbd\xb3\xcd\xbe", "\xe0\xbd\xb1\xe0\xbd\xb2\xcc\x9b\x3b"},
    /* U+0958 decomposes and is a composition exclusion: not recomposed */
    {"\xe0\xa5\x98\x4e", "\xe0\xa4\x95\xe0\xa4\xbc\x4e"},
    /* an excluded composite and singleton marks */
    {"\xef\xac\x9d\xcd\x83\xcd\x83", "\xd7\x99\xd6\xb4\xcc\x93\xcc\x93"},
    /* Hangul LV + T composes to LVT */
    {"\xea\xb0\x80\xe1\x86\xa8", "\xea\xb0\x81"},
    /* U+2000 is a singleton (to U+2002) */
    {"\xe2\x80\x80", "\xe2\x80\x82"},
    /* a singleton mark (to U+0300) */
    {"\xcd\x80", "\xcc\x80"},
    /* a CJK compatibility ideograph (to U+8C48) */
    {"\xef\xa4\x80", "\xe8\xb1\x88"},
    /* c + caron composes; no composite takes the circumflex */
    {"\x63\xcc\x8c\xcc\x82", "\xc4\x8d\xcc\x82"},
    /* the first acute (a singleton) composes with I, the rest stay */
    {"\xd6\xb4\x49\xcd\x81\xcd\x80\xcd\x81", "\xd6\xb4\xc3\x8d\xcc\x80\xcc\x81"},
    /* a composite stays; I + grave composes */
    {"\xe1\xba\x9b\x49\xcc\x80", "\xe1\xba\x9b\xc3\x8c"},
    /* a leading non-starter, reordering, Hangul that is NFC already */
    {"\xcc\x81\xe0\xbd\xb2\xea\xb0\x80\xcc\x8a\xea\xb0\x81",
     "\xe0\xbd\xb2\xcc\x81\xea\xb0\x80\xcc\x8a\xea\xb0\x81"},
};

START_TEST(test_nfc_vectors) {
  for (size_t i = 0; i < SBX_ARRAY_SIZE(nfc_vectors); i++) {
    char *out = NULL;
    size_t n;
    struct sbx_error err = {0};
    int rc = st__nfc(nfc_vectors[i].in, strlen(nfc_vectors[i].in), &out, &n, &err);
    ck_assert_msg(rc == 0, "vector %zu: %s", i, err.msg);
    ck_assert_msg(strcmp(out, nfc_vectors[i].nfc) == 0, "vector %zu: NFC differs", i);
    ck_assert_uint_eq(n, strlen(nfc_vectors[i].nfc));
    sbx_free(out);
  }
}
END_TEST

static const struct {
  const char *in;
  enum store_source src;
  const char *out; /* NULL: refused */
  const char *why; /* substring of the detail when refused */
} cases[] = {
    {"report.pdf", STORE_SRC_ATTACHMENT, "report.pdf", NULL},
    {"e\xcc\x81t\xc3\xa9.txt", STORE_SRC_ATTACHMENT, "\xc3\xa9t\xc3\xa9.txt", NULL}, /* e+U+0301 */
    {"\xe2\x84\xab", STORE_SRC_ATTACHMENT, "\xc3\x85", NULL}, /* Angstrom sign */
    {"\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8", STORE_SRC_KNOWLEDGE, "\xea\xb0\x81", NULL}, /* jamo */
    {"\xe6\x8a\xa5\xe5\x91\x8a.xlsx", STORE_SRC_ATTACHMENT, "\xe6\x8a\xa5\xe5\x91\x8a.xlsx", NULL},
    {"\xf0\x9f\x93\x8a chart.png", STORE_SRC_OUTPUT, "\xf0\x9f\x93\x8a chart.png", NULL},
    {"my.report.v2.final.pdf", STORE_SRC_ATTACHMENT, "my.report.v2.final.pdf", NULL},
    {"Makefile", STORE_SRC_ATTACHMENT, "Makefile", NULL},
    {".bashrc", STORE_SRC_ATTACHMENT, ".bashrc", NULL},
    {"...", STORE_SRC_ATTACHMENT, "...", NULL},
    {"plots/a.png", STORE_SRC_OUTPUT, "plots/a.png", NULL},
    {"plots/sub/a.png", STORE_SRC_TOOL, "plots/sub/a.png", NULL},
    {"plots/.hidden", STORE_SRC_OUTPUT, "plots/.hidden", NULL},
    {"", STORE_SRC_ATTACHMENT, NULL, "empty"},
    {"a\x01"
     "b",
     STORE_SRC_ATTACHMENT, NULL, "U+0001"},
    {"a\tb", STORE_SRC_ATTACHMENT, NULL, "U+0009"},
    {"a\nb", STORE_SRC_OUTPUT, NULL, "U+000A"},
    {"a\x7f", STORE_SRC_ATTACHMENT, NULL, "U+007F"},
    {"a\xc2\x85", STORE_SRC_ATTACHMENT, NULL, "U+0085"}, /* C1 NEL */
    {"gpj.\xe2\x80\xae"
     "exe",
     STORE_SRC_ATTACHMENT, NULL, "U+202E"}, /* RTLO spoof */
    {"\xef\xbb\xbf"
     "a",
     STORE_SRC_ATTACHMENT, NULL, "U+FEFF"},
    {"a/b.txt", STORE_SRC_ATTACHMENT, NULL, "one path segment"},
    {"a/b.txt", STORE_SRC_KNOWLEDGE, NULL, "one path segment"},
    {"/etc/passwd", STORE_SRC_OUTPUT, NULL, "absolute"},
    {"/x", STORE_SRC_ATTACHMENT, NULL, "absolute"},
    {"../x", STORE_SRC_OUTPUT, NULL, "'..'"},
    {"a/../b", STORE_SRC_OUTPUT, NULL, "'..'"},
    {"a/..", STORE_SRC_OUTPUT, NULL, "'..'"},
    {"./a", STORE_SRC_OUTPUT, NULL, "'.'"},
    {".", STORE_SRC_ATTACHMENT, NULL, "'.'"},
    {"..", STORE_SRC_ATTACHMENT, NULL, "'..'"},
    {"a//b", STORE_SRC_OUTPUT, NULL, "empty path segment"},
    {"a/", STORE_SRC_OUTPUT, NULL, "empty path segment"},
    {"a\\b", STORE_SRC_ATTACHMENT, NULL, "backslash"},
    {"..\\..\\x", STORE_SRC_OUTPUT, NULL, "backslash"},
    {"\xff.txt", STORE_SRC_ATTACHMENT, NULL, "UTF-8"},
    {"\xc0\xaf", STORE_SRC_ATTACHMENT, NULL, "UTF-8"},         /* overlong '/' */
    {"\xed\xa0\x80", STORE_SRC_ATTACHMENT, NULL, "UTF-8"},     /* surrogate */
    {"\xf4\x90\x80\x80", STORE_SRC_ATTACHMENT, NULL, "UTF-8"}, /* > U+10FFFF */
    {"abc\xe2\x82", STORE_SRC_ATTACHMENT, NULL, "UTF-8"},      /* truncated */
    /* nothing visible: spaces, zero-width and other invisible code points, alone or mixed */
    {" ", STORE_SRC_ATTACHMENT, NULL, "no visible character"},
    {"   ", STORE_SRC_KNOWLEDGE, NULL, "no visible character"},
    {"\xc2\xa0", STORE_SRC_ATTACHMENT, NULL, "no visible character"},         /* no-break space */
    {"\xe3\x80\x80", STORE_SRC_ATTACHMENT, NULL, "no visible character"},     /* ideographic sp. */
    {"\xe2\x80\x8b", STORE_SRC_ATTACHMENT, NULL, "no visible character"},     /* zero-width space */
    {"\xe2\x80\x8c", STORE_SRC_ATTACHMENT, NULL, "no visible character"},     /* ZW non-joiner */
    {"\xe2\x80\x8d", STORE_SRC_ATTACHMENT, NULL, "no visible character"},     /* ZW joiner */
    {"\xc2\xad", STORE_SRC_ATTACHMENT, NULL, "no visible character"},         /* soft hyphen */
    {"\xe2\x81\xa0", STORE_SRC_ATTACHMENT, NULL, "no visible character"},     /* word joiner */
    {"\xe1\xa0\x8e", STORE_SRC_ATTACHMENT, NULL, "no visible character"},     /* Mongolian v.s. */
    {"\xe3\x85\xa4", STORE_SRC_ATTACHMENT, NULL, "no visible character"},     /* Hangul filler */
    {"\xe1\x85\x9f", STORE_SRC_ATTACHMENT, NULL, "no visible character"},     /* choseong filler */
    {"\xef\xb8\x8f", STORE_SRC_ATTACHMENT, NULL, "no visible character"},     /* variation sel. */
    {"\xe2\xa0\x80", STORE_SRC_ATTACHMENT, NULL, "no visible character"},     /* braille blank */
    {"\xf3\xa0\x80\xa0", STORE_SRC_ATTACHMENT, NULL, "no visible character"}, /* tag space */
    {" \xe2\x80\x8b\xc2\xad\xe2\x80\x8d ", STORE_SRC_OUTPUT, NULL, "no visible character"},
    {"plots/ /a.png", STORE_SRC_OUTPUT, NULL, "path segment with no visible character"},
    {"\xe2\x80\x8b/a.png", STORE_SRC_TOOL, NULL, "path segment with no visible character"},
    {"plots/\xc2\xad", STORE_SRC_OUTPUT, NULL, "path segment with no visible character"},
    /* visible beside invisible ones: kept as given */
    {" a ", STORE_SRC_ATTACHMENT, " a ", NULL},
    {"a b.txt", STORE_SRC_ATTACHMENT, "a b.txt", NULL},
    {"a\xe2\x80\x8d"
     "b",
     STORE_SRC_ATTACHMENT,
     "a\xe2\x80\x8d"
     "b",
     NULL},
    {"\xc2\xad"
     "x",
     STORE_SRC_ATTACHMENT,
     "\xc2\xad"
     "x",
     NULL},
    {"\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x92\xbb.png", STORE_SRC_OUTPUT,
     "\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x92\xbb.png", NULL}, /* an emoji ZWJ sequence */
    {"plots/ a/b.png", STORE_SRC_OUTPUT, "plots/ a/b.png", NULL},
};

START_TEST(test_rules_table) {
  for (size_t i = 0; i < SBX_ARRAY_SIZE(cases); i++) {
    char *out = (char *)1;
    struct sbx_error err = {0};
    int rc = store_name_normalize(cases[i].in, cases[i].src, &out, &err);
    if (cases[i].out) {
      ck_assert_msg(rc == 0, "case %zu: %s", i, err.msg);
      ck_assert_str_eq(out, cases[i].out);
      sbx_free(out);
    } else {
      ck_assert_msg(rc == SBX_ENAME, "case %zu accepted", i);
      ck_assert_ptr_null(out);
      ck_assert_msg(strstr(err.msg, cases[i].why) != NULL, "case %zu: detail \"%s\"", i, err.msg);
    }
  }
}
END_TEST

/* store_name_normalize_len: a name with its length, as a percent-decoded URL parameter comes; a
 * NUL anywhere is refused (SBX_ENAME, the byte named), and only `len` bytes are read. */
static const struct {
  const char *in;
  size_t len;
  const char *out; /* NULL: refused */
  const char *why;
} len_cases[] = {
    {"a\0b.txt", 7, NULL, "NUL character U+0000 (byte 1)"},
    {"\0", 1, NULL, "NUL character U+0000 (byte 0)"},
    {"report.pdf\0", 11, NULL, "NUL character U+0000 (byte 10)"},
    {"\0\xe2\x80\x8b", 4, NULL, "NUL"},
    {"report.pdfXYZ", 10, "report.pdf", NULL},
    {"e\xcc\x81t\xc3\xa9.txt", 10, "\xc3\xa9t\xc3\xa9.txt", NULL},
    {"abc", 0, NULL, "empty"},
    {" ", 1, NULL, "no visible character"},
};

START_TEST(test_rules_with_length) {
  for (size_t i = 0; i < SBX_ARRAY_SIZE(len_cases); i++) {
    char *out = (char *)1;
    struct sbx_error err = {0};
    int rc = store_name_normalize_len(len_cases[i].in, len_cases[i].len, STORE_SRC_ATTACHMENT, &out,
                                      &err);
    if (len_cases[i].out) {
      ck_assert_msg(rc == 0, "case %zu: %s", i, err.msg);
      ck_assert_str_eq(out, len_cases[i].out);
      sbx_free(out);
    } else {
      ck_assert_msg(rc == SBX_ENAME, "case %zu: rc %d", i, rc);
      ck_assert_ptr_null(out);
      ck_assert_msg(strstr(err.msg, len_cases[i].why) != NULL, "case %zu: detail \"%s\"", i,
                    err.msg);
    }
  }
}
END_TEST

START_TEST(test_length) {
  char name[600];
  char *out;
  struct sbx_error err = {0};
  memset(name, 'a', 255);
  name[255] = '\0';
  ck_assert_int_eq(store_name_normalize(name, STORE_SRC_ATTACHMENT, &out, &err), 0);
  sbx_free(out);
  name[255] = 'a';
  name[256] = '\0';
  ck_assert_int_eq(store_name_normalize(name, STORE_SRC_ATTACHMENT, &out, &err), SBX_ENAME);
  ck_assert_ptr_nonnull(strstr(err.msg, "longer than 255"));
  /* 128 x "e + U+0301" is 384 bytes in, 256 bytes of NFC out: refused after normalizing */
  char *p = name;
  for (int i = 0; i < 128; i++)
    p += sprintf(p, "e\xcc\x81");
  ck_assert_int_eq(store_name_normalize(name, STORE_SRC_ATTACHMENT, &out, &err), SBX_ENAME);
  /* 85 x "e + U+0301" is 255 bytes in, 170 out: accepted */
  name[85 * 3] = '\0';
  ck_assert_int_eq(store_name_normalize(name, STORE_SRC_ATTACHMENT, &out, &err), 0);
  ck_assert_uint_eq(strlen(out), 170);
  sbx_free(out);
  ck_assert_int_eq(store_name_normalize(NULL, STORE_SRC_ATTACHMENT, &out, &err), SBX_ENAME);
  ck_assert_int_eq(store_name_normalize("a", (enum store_source)9, &out, &err), SBX_EINVAL);
}
END_TEST

static const struct {
  const char *name, *stem, *ext;
  int n;
} splits[] = {
    {"report.pdf", "report", ".pdf", 1},
    {"report (3).pdf", "report", ".pdf", 3},
    {"report (2)", "report", "", 2},
    {"report (1).pdf", "report (1)", ".pdf", 1},
    {"report (03).pdf", "report (03)", ".pdf", 1},
    {"report(2).pdf", "report(2)", ".pdf", 1},
    {" (2).pdf", " (2)", ".pdf", 1},
    {"a.tar.gz", "a", ".tar.gz", 1},
    {"a (4).tar.gz", "a", ".tar.gz", 4},
    {".tar.gz", ".tar", ".gz", 1},
    {"my.report.v2.pdf", "my.report.v2", ".pdf", 1},
    {"Makefile", "Makefile", "", 1},
    {".bashrc", ".bashrc", "", 1},
    {"name.", "name.", "", 1},
    {"name. (2)", "name.", "", 2}, /* the second "name.", not "name" + ". (2)" */
    {"plots/fig (2).png", "plots/fig", ".png", 2},
    {"v1.2/readme", "v1.2/readme", "", 1},
    {"x (1234567890).txt", "x (1234567890)", ".txt", 1},
};

/* Whether s is well-formed UTF-8 (RFC 3629: no overlong forms, surrogates or > U+10FFFF). */
static int utf8_valid(const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  while (*p) {
    unsigned c = *p;
    size_t n = c < 0x80 ? 0 : c >= 0xC2 && c <= 0xDF ? 1 : c >= 0xE0 && c <= 0xEF ? 2
                                                    : c >= 0xF0 && c <= 0xF4     ? 3
                                                                                 : 9;
    if (n == 9)
      return 0;
    unsigned cp = n == 0 ? c : c & (0x3F >> n);
    for (size_t i = 1; i <= n; i++) {
      if ((p[i] & 0xC0) != 0x80)
        return 0;
      cp = (cp << 6) | (p[i] & 0x3F);
    }
    if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
      return 0;
    p += n + 1;
  }
  return 1;
}

START_TEST(test_split) {
  for (size_t i = 0; i < SBX_ARRAY_SIZE(splits); i++) {
    char *stem, *ext;
    int n;
    ck_assert_int_eq(st__name_split(splits[i].name, &stem, &ext, &n), 0);
    ck_assert_msg(strcmp(stem, splits[i].stem) == 0, "%s: stem %s", splits[i].name, stem);
    ck_assert_msg(strcmp(ext, splits[i].ext) == 0, "%s: ext %s", splits[i].name, ext);
    ck_assert_msg(n == splits[i].n, "%s: n %d", splits[i].name, n);
    sbx_free(stem);
    sbx_free(ext);
  }
  char *out;
  struct sbx_error err = {0};
  ck_assert_int_eq(st__name_join("report", ".pdf", 2, &out, &err), 0);
  ck_assert_str_eq(out, "report (2).pdf");
  sbx_free(out);
  char big[300];
  memset(big, 'b', 250);
  big[250] = '\0';
  ck_assert_int_eq(st__name_join(big, ".pdf", 2, &out, &err), SBX_ENAME);
  ck_assert_ptr_null(out);
  /* the message quotes the stem's start cut before a character, never inside one: stems of
   * 2-, 3- and 4-byte characters whose 40th byte falls inside one (and one where it does not) */
  const char *chars[][2] = {{"x", "\xc3\xa9"}, /* the 40th byte starts the 2nd half of an é */
                            {"", "\xe2\x82\xac"},
                            {"x", "\xf0\x9f\x98\x80"},
                            {"xy", "\xf0\x9f\x98\x80"},
                            {"", "\xc3\xa9"}}; /* 40 bytes are 20 whole é: nothing to step back */
  for (size_t k = 0; k < SBX_ARRAY_SIZE(chars); k++) {
    char stem[300];
    snprintf(stem, sizeof stem, "%s", chars[k][0]);
    while (strlen(stem) < 250) /* with " (2).txt": past STORE_NAME_MAX */
      strcat(stem, chars[k][1]);
    sbx_error_clear(&err);
    ck_assert_int_eq(st__name_join(stem, ".txt", 2, &out, &err), SBX_ENAME);
    const char *q = strchr(err.msg, '"') + 1, *e = strstr(q, "... (2).txt\"");
    ck_assert_msg(e != NULL, "%s", err.msg);
    size_t quoted = (size_t)(e - q);
    ck_assert_msg(quoted <= 40 && quoted > 40 - 4, "%zu bytes quoted: %s", quoted, err.msg);
    ck_assert_msg(memcmp(q, stem, quoted) == 0 && ((unsigned char)stem[quoted] & 0xC0) != 0x80,
                  "cut inside a character: %s", err.msg);
    ck_assert_int_eq(utf8_valid(err.msg), 1);
  }
}
END_TEST

START_TEST(test_sources) {
  enum store_source s;
  ck_assert_int_eq(store_source_parse("output", &s), 0);
  ck_assert_int_eq(s, STORE_SRC_OUTPUT);
  ck_assert_int_eq(store_source_parse("knowledge", &s), 0);
  ck_assert_int_eq(s, STORE_SRC_KNOWLEDGE);
  ck_assert_int_eq(store_source_parse("Output", &s), SBX_EINVAL);
  ck_assert_int_eq(store_source_parse(NULL, &s), SBX_EINVAL);
  ck_assert_str_eq(store_source_name(STORE_SRC_TOOL), "tool");
}
END_TEST

START_TEST(test_nfc_oom) {
  for (uint64_t n = 1;; n++) {
    char *out = NULL;
    size_t len;
    struct sbx_error err = {0};
    sbx_alloc_fail_at(n, 0);
    int rc = st__nfc("e\xcc\x81", 3, &out, &len, &err);
    uint64_t used = sbx_alloc_count();
    sbx_alloc_fail_at(0, 0);
    if (rc == 0) {
      ck_assert_str_eq(out, "\xc3\xa9");
      sbx_free(out);
      ck_assert_uint_lt(used, n); /* no injected failure was hit: done */
      break;
    }
    ck_assert_int_eq(rc, SBX_ENOMEM);
    ck_assert_ptr_null(out);
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("naming");
  TCase *tc = tcase_create("naming");
  tcase_add_test(tc, test_nfc_vectors);
  tcase_add_test(tc, test_rules_table);
  tcase_add_test(tc, test_rules_with_length);
  tcase_add_test(tc, test_length);
  tcase_add_test(tc, test_split);
  tcase_add_test(tc, test_sources);
  tcase_add_test(tc, test_nfc_oom);
  return t_run_suite(s, tc);
}
