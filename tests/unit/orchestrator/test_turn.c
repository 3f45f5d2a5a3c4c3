/* test_turn.c -- turns (turn.c): the fenced-python-block extraction, table-driven over markdown
 * answers.  A turn's finish (its writes, a second finish refused, a
 * failed write) is tested with a real store in test_chat.c. */
#include "internal.h"

#include <check.h>
#include <string.h>

struct bcase {
  const char *answer;
  const char *blocks[4];
};
static const struct bcase bcases[] = {
    {"no code here", {NULL}},
    {"```python\nprint(1)\n```\n", {"print(1)", NULL}},
    {"Text\n```py\na = 1\nb = 2\n```\nmore\n~~~python\nprint(a)\n~~~\n",
     {"a = 1\nb = 2", "print(a)", NULL}},
    {"```js\nalert(1)\n```\n```python\nx\n```", {"x", NULL}},
    {"```\nplain\n```\n```Python3 title\ny\n```\n", {"y", NULL}},
    {"````python\n```\ninside\n```\n````\n", {"```\ninside\n```", NULL}},
    {"   ```python\nindented ok\n   ```\n", {"indented ok", NULL}},
    {"    ```python\nfour spaces is code, not a fence\n    ```\n", {NULL}},
    {"```python\nunclosed\nruns to the end", {"unclosed\nruns to the end", NULL}},
    {"```python\n```\n", {"", NULL}},
    {"~~~python\r\nwin\r\n~~~\r\n", {"win", NULL}},
    {"```pythonic\nnot python\n```\n", {NULL}},
};

START_TEST(test_blocks) {
  const struct bcase *c = &bcases[_i];
  char **v;
  size_t n;
  ck_assert_int_eq(orch__python_blocks(c->answer, &v, &n), 0);
  size_t want = 0;
  while (want < 4 && c->blocks[want])
    want++;
  ck_assert_msg(n == want, "case %d: %zu blocks, want %zu", _i, n, want);
  for (size_t i = 0; i < n; i++)
    ck_assert_msg(strcmp(v[i], c->blocks[i]) == 0, "case %d block %zu: [%s] want [%s]", _i, i, v[i],
                  c->blocks[i]);
  orch__python_blocks_free(v, n);
}
END_TEST

START_TEST(test_blocks_oom) {
  char **v;
  size_t n;
  sbx_alloc_fail_at(2, 0);
  ck_assert_int_eq(orch__python_blocks("```py\na\n```\n", &v, &n), SBX_ENOMEM);
  sbx_alloc_fail_at(0, 0);
  ck_assert_ptr_null(v);
  ck_assert_uint_eq(n, 0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("turn");
  TCase *tc = tcase_create("turns");
  tcase_add_loop_test(tc, test_blocks, 0, (int)SBX_ARRAY_SIZE(bcases));
  tcase_add_test(tc, test_blocks_oom);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
