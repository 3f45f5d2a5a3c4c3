/* test_manifest.c -- mount manifests (manifest.c), table-driven: each case is a chat's file list
 * (latest versions, oldest first), a run's code, and the expected mounted names and left-out
 * names with reasons. */
#include "internal.h"

#include <check.h>
#include <string.h>

#define MB (1024ull * 1024ull)
struct f {
  const char *name;
  enum store_source src;
  const char *kind;
  uint64_t size;
};
struct mcase {
  const char *title;
  struct f files[8];
  const char *code;
  const char *mounted;  /* names joined by '|' */
  const char *left_out; /* "name=F" (file cap) or "name=T" (total cap), '|'-joined */
};

static const struct mcase cases[] = {
    {"empty chat", {{0}}, "print(1)", "", ""},
    {"attachment and its extracted text",
     {{"report.pdf", STORE_SRC_ATTACHMENT, NULL, 1000},
      {"report.pdf.md", STORE_SRC_ATTACHMENT, NULL, 200}},
     "x",
     "report.pdf|report.pdf.md",
     ""},
    {"knowledge and tool files",
     {{"kb.txt", STORE_SRC_KNOWLEDGE, NULL, 10}, {"memo.docx", STORE_SRC_TOOL, NULL, 10}},
     NULL,
     "kb.txt|memo.docx",
     ""},
    {"figure mounted only when named",
     {{"figure-1.png", STORE_SRC_OUTPUT, "figure", 10}, {"data.csv", STORE_SRC_OUTPUT, "file", 10}},
     "import pandas",
     "data.csv",
     ""},
    {"figure named by the code",
     {{"figure-1.png", STORE_SRC_OUTPUT, "figure", 10}, {"data.csv", STORE_SRC_OUTPUT, "file", 10}},
     "Image.open('/mnt/data/figure-1.png')",
     "figure-1.png|data.csv",
     ""},
    {"saved chart is an image too, named by its last segment",
     {{"plots/vendite.png", STORE_SRC_OUTPUT, "file", 10}},
     "open('vendite.png')",
     "plots/vendite.png",
     ""},
    {"tool image not named", {{"scan.jpg", STORE_SRC_TOOL, NULL, 10}}, "x = 1", "", ""},
    {"attached image always mounted",
     {{"photo.JPG", STORE_SRC_ATTACHMENT, NULL, 10}},
     "",
     "photo.JPG",
     ""},
    {"exactly 20 MiB is mounted, one byte more is not",
     {{"a.bin", STORE_SRC_ATTACHMENT, NULL, 20 * MB},
      {"b.bin", STORE_SRC_ATTACHMENT, NULL, 20 * MB + 1}},
     "",
     "a.bin",
     "b.bin=F"},
    {"total cap: the file that would cross 100 MiB is left out, a later small one fits",
     {{"1", STORE_SRC_ATTACHMENT, NULL, 20 * MB},
      {"2", STORE_SRC_ATTACHMENT, NULL, 20 * MB},
      {"3", STORE_SRC_ATTACHMENT, NULL, 20 * MB},
      {"4", STORE_SRC_ATTACHMENT, NULL, 20 * MB},
      {"5", STORE_SRC_ATTACHMENT, NULL, 19 * MB},
      {"6", STORE_SRC_ATTACHMENT, NULL, 2 * MB},
      {"7", STORE_SRC_ATTACHMENT, NULL, 1 * MB}},
     "",
     "1|2|3|4|5|7",
     "6=T"},
    {"exactly 100 MiB fits",
     {{"1", STORE_SRC_ATTACHMENT, NULL, 20 * MB},
      {"2", STORE_SRC_ATTACHMENT, NULL, 20 * MB},
      {"3", STORE_SRC_ATTACHMENT, NULL, 20 * MB},
      {"4", STORE_SRC_ATTACHMENT, NULL, 20 * MB},
      {"5", STORE_SRC_ATTACHMENT, NULL, 20 * MB},
      {"6", STORE_SRC_ATTACHMENT, NULL, 1}},
     "",
     "1|2|3|4|5",
     "6=T"},
    {"unnamed images count nothing toward the total",
     {{"big.png", STORE_SRC_OUTPUT, "figure", 19 * MB},
      {"1", STORE_SRC_ATTACHMENT, NULL, 20 * MB},
      {"2", STORE_SRC_ATTACHMENT, NULL, 20 * MB},
      {"3", STORE_SRC_ATTACHMENT, NULL, 20 * MB},
      {"4", STORE_SRC_ATTACHMENT, NULL, 20 * MB},
      {"5", STORE_SRC_ATTACHMENT, NULL, 20 * MB}},
     "",
     "1|2|3|4|5",
     ""},
};

static void join_mounts(const struct orch_manifest *m, char *out, size_t cap) {
  out[0] = '\0';
  for (size_t i = 0; i < m->n_mounts; i++) {
    if (i)
      strncat(out, "|", cap - strlen(out) - 1);
    strncat(out, m->mounts[i].file->name, cap - strlen(out) - 1);
  }
}
static void join_left(const struct orch_manifest *m, char *out, size_t cap) {
  out[0] = '\0';
  for (size_t i = 0; i < m->n_left_out; i++) {
    if (i)
      strncat(out, "|", cap - strlen(out) - 1);
    strncat(out, m->left_out[i].file->name, cap - strlen(out) - 1);
    strncat(out, m->left_out[i].reason == ORCH_REASON_FILE_CAP ? "=F" : "=T",
            cap - strlen(out) - 1);
  }
}

START_TEST(test_cases) {
  const struct mcase *c = &cases[_i];
  struct store_file files[8];
  size_t n = 0;
  memset(files, 0, sizeof(files));
  for (; n < 8 && c->files[n].name; n++) {
    files[n].name = (char *)c->files[n].name;
    files[n].source = c->files[n].src;
    files[n].kind = (char *)c->files[n].kind;
    files[n].size = c->files[n].size;
  }
  struct orch_manifest m;
  ck_assert_int_eq(orch__manifest_compute(files, n, c->code, &m), 0);
  char got[512];
  join_mounts(&m, got, sizeof(got));
  ck_assert_msg(strcmp(got, c->mounted) == 0, "%s: mounted [%s] want [%s]", c->title, got,
                c->mounted);
  join_left(&m, got, sizeof(got));
  ck_assert_msg(strcmp(got, c->left_out) == 0, "%s: left out [%s] want [%s]", c->title, got,
                c->left_out);
  ck_assert_uint_le(m.total_bytes, 100 * MB);
  orch__manifest_free(&m);
}
END_TEST

START_TEST(test_alloc_failure) {
  struct store_file f = {.name = "a", .size = 1};
  struct orch_manifest m;
  sbx_alloc_fail_at(1, 0);
  ck_assert_int_eq(orch__manifest_compute(&f, 1, "", &m), SBX_ENOMEM);
  sbx_alloc_fail_at(0, 0);
  ck_assert_ptr_null(m.mounts);
}
END_TEST

START_TEST(test_admit) {
  struct store_file files[5];
  memset(files, 0, sizeof(files));
  const char *names[] = {"1", "2", "3", "4", "fig.png"};
  for (int i = 0; i < 5; i++) {
    files[i].name = (char *)names[i];
    files[i].source = i == 4 ? STORE_SRC_OUTPUT : STORE_SRC_ATTACHMENT;
    files[i].size = 20 * MB;
  }
  ck_assert_ptr_null(orch__manifest_admit(files, 5, "new", STORE_SRC_ATTACHMENT, NULL, 20 * MB));
  ck_assert_ptr_eq(orch__manifest_admit(files, 5, "new", STORE_SRC_ATTACHMENT, NULL, 20 * MB + 1),
                   ORCH_REASON_FILE_CAP);
  ck_assert_ptr_eq(orch__manifest_admit(files, 5, "new", STORE_SRC_TOOL, NULL, 20 * MB + 1),
                   ORCH_REASON_FILE_CAP);
  files[4].source = STORE_SRC_ATTACHMENT; /* now 100 MiB mounted */
  ck_assert_ptr_eq(orch__manifest_admit(files, 5, "new", STORE_SRC_ATTACHMENT, NULL, 1),
                   ORCH_REASON_TOTAL_CAP);
  /* a new version of "1" replaces it in the total */
  ck_assert_ptr_null(orch__manifest_admit(files, 5, "1", STORE_SRC_TOOL, NULL, 20 * MB));
  /* a figure is mounted when named: never left out for the total */
  ck_assert_ptr_null(orch__manifest_admit(files, 5, "figure-1.png", STORE_SRC_OUTPUT, "figure", 1));
}
END_TEST

int main(void) {
  Suite *s = suite_create("manifest");
  TCase *tc = tcase_create("rules");
  tcase_add_loop_test(tc, test_cases, 0, (int)SBX_ARRAY_SIZE(cases));
  tcase_add_test(tc, test_alloc_failure);
  tcase_add_test(tc, test_admit);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
