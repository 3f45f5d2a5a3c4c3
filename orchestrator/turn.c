/* turn.c -- a turn (one assistant answer in progress): finishing it with its answer, and the
 * code blocks that answer schedules.
 *
 * A turn is OPEN while the assistant works: tool runs carry its id and the backend waits on them
 * (wait_s).  Finishing it with the answer text schedules each fenced Python block of the answer
 * (```python, ```py, ~~~python; CommonMark fences: up to 3 spaces of indent, a closing fence of
 * the same character at least as long; an unclosed fence runs to the end of the answer) as an
 * `auto` run, in order: the turn (now finished, with its answer) and every run are written, and
 * once all are durable the runs go live in their chat's queue, behind each other.  While those
 * writes are in flight the turn is FINISHING, in memory (struct orch's `turns`), so a second
 * finish is refused before the store says finished.
 *
 *   OPEN ──finish(answer)──▶ FINISHING ──all written──▶ FINISHED (final)
 *                               └──a write failed──▶ OPEN (the backend may finish it again)
 *
 *   from       to         step
 *   OPEN       FINISHING  orch__turn_finish (a finished or finishing turn: SBX_ESTATE -> 409)
 *   FINISHING  FINISHED   on_written, the last write durable
 *   FINISHING  OPEN       on_written, the last write back and one of them failed
 *
 * What it does not do: open turns (api_turns.c writes the row), or run anything.
 */
#include "internal.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "fsm.h"

static const char *const turn_state_names[ORCH_TURN__COUNT] = {"open", "finishing", "finished"};
static const uint32_t from[ORCH_TURN__COUNT] = {
    [ORCH_TURN_OPEN] = SBX_FSM_BIT(ORCH_TURN_FINISHING),
    [ORCH_TURN_FINISHING] = SBX_FSM_BIT(ORCH_TURN_OPEN),
    [ORCH_TURN_FINISHED] = SBX_FSM_BIT(ORCH_TURN_FINISHING),
};

/* FINISHING: its writes are in flight; every other state: none. */
static int turn_invariant(const void *obj, unsigned state) {
  const struct orch_turn *t = obj;
  return (state == ORCH_TURN_FINISHING) == (t->pending > 0);
}

static const struct sbx_fsm turn_fsm =
    SBX_FSM("turn", "turn", turn_state_names, from, turn_invariant);

#define turn_set_state(t, to) turn_set_state_((t), (to), __FILE__, __LINE__)

/* The one writer of t->state. */
static int turn_set_state_(struct orch_turn *t, enum orch_turn_state to, const char *file,
                           int line) {
  int rc = sbx_fsm_step(&turn_fsm, t->state, to, t->rec.id, file, line);
  if (rc == 0)
    t->state = to;
  return rc;
}

static void turn_free(struct orch_turn *t) {
  for (size_t i = 0; i < t->n_runs; i++)
    if (t->runs[i])
      orch__run_free(t->runs[i]);
  sbx_free(t->runs);
  sbx_free(t->run_ids);
  sbx_free(t->rec.answer);
  sbx_free(t);
}

/* Each write of a finish (the turn, then every run) completes here; the last one decides. */
static void on_written(int rc, const struct sbx_error *err, void *ud) {
  struct orch_turn *t = ud;
  if (rc != 0 && !t->failed) {
    t->failed = rc;
    sbx_log(SBX_LOG_ERROR, "turn", "turn %s: write failed: %s", t->rec.id,
            err ? err->msg : sbx_strerror(rc));
  }
  if (--t->pending > 0)
    return;
  struct orch *o = t->o;
  orch__map_del(&o->turns, t->rec.id);
  if (t->failed) {
    turn_set_state(t, ORCH_TURN_OPEN);
  } else {
    turn_set_state(t, ORCH_TURN_FINISHED);
    struct orch_chat *c = NULL;
    orch__chat_get(o, t->rec.chat_id, &c);
    for (size_t i = 0; i < t->n_runs; i++) {
      if (c)
        orch__run_accept(o, c, t->runs[i]); /* in order: queued behind each other */
      else
        orch__run_free(t->runs[i]);
      t->runs[i] = NULL;
    }
  }
  SBX_FSM_CHECK(&turn_fsm, t, t->state, t->rec.id);
  t->cb(t->ud, t->failed, t);
  turn_free(t);
}

int orch__turn_finish(struct orch *o, const struct store_turn *st, const char *answer,
                      orch_turn_cb cb, void *ud) {
  if (st->state == STORE_TURN_FINISHED || orch__map_get(&o->turns, st->id) != NULL)
    return SBX_ESTATE; /* the store says open until a finish in flight is durable */
  struct orch_chat *c = NULL;
  if (orch__chat_get(o, st->chat_id, &c) != 0)
    return SBX_ENOENT;
  char **blocks = NULL;
  size_t nb = 0;
  struct orch_turn *t = NULL;
  if (orch__python_blocks(answer, &blocks, &nb) != 0 || (t = sbx_calloc(1, sizeof(*t))) == NULL ||
      (nb && ((t->runs = sbx_calloc(nb, sizeof(*t->runs))) == NULL ||
              (t->run_ids = sbx_calloc(nb, sizeof(*t->run_ids))) == NULL)))
    goto oom;
  t->o = o;
  t->state = ORCH_TURN_OPEN;
  t->cb = cb;
  t->ud = ud;
  t->rec = *st;
  t->rec.state = STORE_TURN_FINISHED; /* what is written */
  t->rec.answer = sbx_strdup(answer);
  t->rec.finished_at = sbx_now_wall_ms();
  if (t->rec.answer == NULL)
    goto oom;
  for (size_t i = 0; i < nb; i++) {
    t->runs[i] = orch__run_new(o, c, blocks[i], "auto", t->rec.id, o->rt.time_limit_s, NULL);
    if (t->runs[i] == NULL)
      goto oom;
    snprintf(t->run_ids[i], sizeof(t->run_ids[i]), "%s", t->runs[i]->id);
    t->n_runs++;
  }
  if (orch__map_put(&o->turns, t->rec.id, t) != 0)
    goto oom;
  orch__python_blocks_free(blocks, nb);
  blocks = NULL;
  t->pending = 1 + t->n_runs; /* one callback per write; the last one decides */
  turn_set_state(t, ORCH_TURN_FINISHING);
  if (store_turn_put(o->st, &t->rec, on_written, t) != 0) {
    orch__map_del(&o->turns, t->rec.id);
    t->pending = 0;
    turn_set_state(t, ORCH_TURN_OPEN);
    turn_free(t);
    return SBX_ENOMEM;
  }
  for (size_t i = 0; i < t->n_runs; i++)
    if (store_run_put(o->st, &t->runs[i]->rec, on_written, t) != 0) {
      t->failed = SBX_ENOMEM;
      t->pending -= t->n_runs - i; /* the queued ones still call back */
      break;
    }
  return 0;
oom:
  orch__python_blocks_free(blocks, nb);
  if (t)
    turn_free(t);
  return SBX_ENOMEM;
}

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
