/* fuzz_blocks.c -- the fenced-block extraction of a turn's answer (orch__python_blocks in
 * orchestrator/turn.c): every input is the text of an answer (up to its first NUL, as the handler
 * hands it over: jansson refuses a \u0000 in the body).
 *
 * Checked, for whatever the text is (unclosed fences, fences in fences, CR LF, tabs, no final
 * newline):
 *  - every block is a piece of the answer, and the blocks come in the answer's order without
 *    overlapping: each is found after the end of the one before;
 *  - a non-empty block starts at the beginning of a line (its fence is the line before) and ends
 *    at the end of one (before "\n", "\r\n" or the end of the answer): a block is whole lines;
 *  - there are no more blocks than lines that could open one (lines starting, after up to 3
 *    spaces, with ``` or ~~~);
 *  - the same text gives the same blocks again.
 * What it does not do: compare with a CommonMark implementation (the extractor reads fences at
 * the top level only, not inside lists or quotes: turn.c says so). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../orchestrator/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

static void fail(const char *what, const char *text, size_t i) {
  fprintf(stderr, "fuzz_blocks: %s (block %zu of an answer of %zu bytes)\n", what, i, strlen(text));
  abort();
}

/* Lines that begin, after up to 3 spaces, with 3 backticks or tildes. */
static size_t fence_lines(const char *s) {
  size_t n = 0;
  for (const char *p = s; *p;) {
    const char *q = p;
    while (q - p < 3 && *q == ' ')
      q++;
    if ((q[0] == '`' || q[0] == '~') && q[1] == q[0] && q[2] == q[0])
      n++;
    const char *e = strchr(p, '\n');
    p = e ? e + 1 : p + strlen(p);
  }
  return n;
}

/* The first place at or after `from` where block b stands as whole lines; NULL when none. */
static const char *find_lines(const char *text, const char *from, const char *b, size_t bl) {
  for (const char *p = from; (p = strstr(p, b)) != NULL; p++) {
    char after = p[bl];
    if (p > text && p[-1] == '\n' && (after == '\0' || after == '\n' || after == '\r'))
      return p;
    if (*p == '\0')
      break;
  }
  return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  char *text = sbx_strndup((const char *)data, n);
  if (text == NULL)
    abort();
  char **v = NULL, **w = NULL;
  size_t nv = 0, nw = 0;
  if (orch__python_blocks(text, &v, &nv) != 0 || orch__python_blocks(text, &w, &nw) != 0)
    abort(); /* out of memory: the fuzzer's RSS limit, not this, reports that */
  if (nv > fence_lines(text))
    fail("more blocks than fence lines", text, nv);
  if (nv != nw)
    fail("the same answer gave another number of blocks", text, nw);
  const char *at = text;
  for (size_t i = 0; i < nv; i++) {
    size_t bl = strlen(v[i]);
    if (strcmp(v[i], w[i]) != 0)
      fail("the same answer gave another block", text, i);
    if (bl == 0)
      continue; /* an empty block is a piece of anything */
    const char *p = find_lines(text, at, v[i], bl);
    if (p == NULL)
      fail("a block is not whole lines of the answer after the block before it", text, i);
    at = p + bl;
  }
  orch__python_blocks_free(v, nv);
  orch__python_blocks_free(w, nw);
  sbx_free(text);
  return 0;
}
