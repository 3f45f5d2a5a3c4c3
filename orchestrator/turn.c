/* turn.c -- a turn (one assistant answer in progress) and the code blocks its answer schedules.
 *
 * A turn is OPEN while the assistant works: tool runs carry its id and the backend waits on them
 * (wait_s).  Finishing it with the answer text moves it to FINISHED and schedules each fenced
 * Python block of the answer (```python, ```py, ~~~python; CommonMark fences: up to 3 spaces of
 * indent, a closing fence of the same character at least as long; an unclosed fence runs to the
 * end of the answer) as an `auto` run, in order.
 *
 *   OPEN ──finish(answer)──▶ FINISHED (final)
 *
 *   from   to        step
 *   OPEN   FINISHED  orch__turn_finish (a second finish is refused: SBX_ESTATE -> 409)
 *
 * What it does not do: create runs or persist (api_turns.c does), run anything.
 */
#include "internal.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

static const char *turn_state_names[] = {"open", "finished"};

const char *orch__turn_state_name(enum orch_turn_state s) {
  return (unsigned)s < SBX_ARRAY_SIZE(turn_state_names) ? turn_state_names[s] : "?";
}

int orch__turn_transition_allowed(enum orch_turn_state from, enum orch_turn_state to) {
  return from == ORCH_TURN_OPEN && to == ORCH_TURN_FINISHED;
}

static int turn_set_state(struct orch_turn *t, enum orch_turn_state to) {
  if (!orch__turn_transition_allowed(t->state, to))
    return SBX_ESTATE;
  SBX_TRACE_STATE("turn", "turn", t->id, orch__turn_state_name(t->state), orch__turn_state_name(to));
  t->state = to;
  return 0;
}

int orch__turn_finish(struct orch_turn *t) { return turn_set_state(t, ORCH_TURN_FINISHED); }

/* One line [p, end) of text; returns the start of the next line. */
static const char *line_end(const char *p) {
  const char *e = strchr(p, '\n');
  return e ? e : p + strlen(p);
}

/* A fence line: up to 3 spaces, then >= 3 of ` or ~.  Sets the char, length, info start. */
static int fence(const char *p, const char *end, char *ch, size_t *len, const char **info) {
  int sp = 0;
  while (p < end && *p == ' ' && sp < 4)
    p++, sp++;
  if (sp > 3 || p >= end || (*p != '`' && *p != '~'))
    return 0;
  char c = *p;
  size_t n = 0;
  while (p < end && *p == c)
    p++, n++;
  if (n < 3)
    return 0;
  if (c == '`' && memchr(p, '`', (size_t)(end - p)) != NULL)
    return 0; /* a backtick fence's info string holds no backtick */
  *ch = c;
  *len = n;
  *info = p;
  return 1;
}

static int is_python_info(const char *p, const char *end) {
  while (p < end && isspace((unsigned char)*p))
    p++;
  const char *w = p;
  while (p < end && !isspace((unsigned char)*p) && *p != '{')
    p++;
  size_t n = (size_t)(p - w);
  return (n == 6 && strncasecmp(w, "python", 6) == 0) || (n == 2 && strncasecmp(w, "py", 2) == 0) ||
         (n == 7 && strncasecmp(w, "python3", 7) == 0);
}

static int closing(const char *p, const char *end, char ch, size_t len) {
  int sp = 0;
  while (p < end && *p == ' ' && sp < 4)
    p++, sp++;
  if (sp > 3)
    return 0;
  size_t n = 0;
  while (p < end && *p == ch)
    p++, n++;
  if (n < len)
    return 0;
  while (p < end && (*p == ' ' || *p == '\t' || *p == '\r'))
    p++;
  return p == end;
}

int orch__python_blocks(const char *answer, char ***out, size_t *n_out) {
  *out = NULL;
  *n_out = 0;
  size_t cap = 0;
  const char *p = answer;
  while (p && *p) {
    const char *e = line_end(p), *info;
    char ch;
    size_t len;
    if (!fence(p, e, &ch, &len, &info)) {
      p = *e ? e + 1 : e;
      continue;
    }
    int py = is_python_info(info, e);
    const char *body = *e ? e + 1 : e, *q = body, *body_end = NULL, *next = NULL;
    while (*q) {
      const char *qe = line_end(q);
      if (closing(q, qe, ch, len)) {
        body_end = q;
        next = *qe ? qe + 1 : qe;
        break;
      }
      q = *qe ? qe + 1 : qe;
    }
    if (body_end == NULL) { /* unclosed: to the end */
      body_end = body + strlen(body);
      next = body_end;
    }
    if (py) {
      if (*n_out == cap) {
        size_t ncap = cap ? cap * 2 : 4;
        char **v = sbx_realloc(*out, ncap * sizeof(*v));
        if (v == NULL)
          goto oom;
        *out = v;
        cap = ncap;
      }
      size_t bl = (size_t)(body_end - body);
      if (bl > 0 && body[bl - 1] == '\n')
        bl--; /* the newline before the closing fence is not code */
      if (bl > 0 && body[bl - 1] == '\r')
        bl--;
      char *code = sbx_strndup(body, bl);
      if (code == NULL)
        goto oom;
      (*out)[(*n_out)++] = code;
    }
    p = next;
  }
  return 0;
oom:
  orch__python_blocks_free(*out, *n_out);
  *out = NULL;
  *n_out = 0;
  return SBX_ENOMEM;
}

void orch__python_blocks_free(char **v, size_t n) {
  for (size_t i = 0; i < n; i++)
    sbx_free(v[i]);
  sbx_free(v);
}
