/* fsm.h -- the one state-machine helper every C object with a life uses (runs, pages, turns,
 * connections, HTTP/2 streams, the store's writer...).
 *
 * What it is for: each object keeps ONE state field of its own enum type and ONE static setter
 * that alone writes it.  The setter asks this helper whether the step is allowed (a transition
 * table: for each state, the bit mask of states it may be entered from), and the helper traces the
 * change with the caller's file and line (curl's `mstate`) or refuses it (SBX_ESTATE, logged; a
 * debug build aborts, since callers check the state first).  An optional invariant per object
 * type (SQLite's `assert_pager_state`) is checked in debug builds wherever the setter (after it
 * wrote the field) or a step function calls SBX_FSM_CHECK.
 *
 * What it is not: it holds no state and calls no object code besides the invariant; timers,
 * deadlines and side effects stay with the object's own step functions.
 *
 * Use:
 *   static const char *const names[] = {"queued", "running", "done"};
 *   static const uint32_t from[] = {[Q] = 0, [R] = SBX_FSM_BIT(Q), [D] = SBX_FSM_BIT(Q) | SBX_FSM_BIT(R)};
 *   static const struct sbx_fsm run_fsm = SBX_FSM("orch", "run", names, from, run_invariant);
 *   #define run_set_state(r, to) run_set_state_((r), (to), __FILE__, __LINE__)
 *   static int run_set_state_(struct run *r, enum run_state to, const char *file, int line) {
 *     int rc = sbx_fsm_step(&run_fsm, r->state, to, r->id, file, line);
 *     if (rc == 0) r->state = to;
 *     return rc;
 *   }
 */
#ifndef SBX_FSM_H
#define SBX_FSM_H

#include <stdint.h>

#include "common.h"

#define SBX_FSM_BIT(s) (1u << (unsigned)(s))

struct sbx_fsm {
  const char *module;       /* log module ("orch", "tp", "store") */
  const char *kind;         /* what the objects are ("run", "h2 stream") */
  unsigned n_states;        /* at most 32 */
  const char *const *names; /* n_states names */
  const uint32_t *from;     /* from[to]: mask of the states `to` may be entered from */
  /* Optional: 1 when obj is consistent for `state` (debug builds check it). */
  int (*invariant)(const void *obj, unsigned state);
};

#define SBX_FSM(module, kind, names, from, invariant)                                              \
  { (module), (kind), (unsigned)SBX_ARRAY_SIZE(names), (names), (from), (invariant) }

/* The state's name ("?" when out of range). */
const char *sbx_fsm_name(const struct sbx_fsm *m, unsigned s);
/* 1 when the table allows from -> to. */
int sbx_fsm_allowed(const struct sbx_fsm *m, unsigned from, unsigned to);
/* Parses a state name; SBX_EINVAL when none matches. */
int sbx_fsm_parse(const struct sbx_fsm *m, const char *name, unsigned *out);

/* The check a setter makes before it writes its field: 0 when from -> to is allowed (traced with
 * file:line when from != to), else SBX_ESTATE (logged as a warning; asserted when strict). */
int sbx_fsm_step(const struct sbx_fsm *m, unsigned from, unsigned to, const char *id,
                 const char *file, int line);

/* Debug builds: asserts m->invariant(obj, state) (when there is one).  Release builds: nothing. */
void sbx_fsm_check_(const struct sbx_fsm *m, const void *obj, unsigned state, const char *id,
                    const char *file, int line);
#ifdef SBX_DEBUG
#define SBX_FSM_CHECK(m, obj, state, id)                                                           \
  sbx_fsm_check_((m), (obj), (unsigned)(state), (id), __FILE__, __LINE__)
#else
#define SBX_FSM_CHECK(m, obj, state, id) ((void)0)
#endif

/* Whether a refused transition aborts (debug builds default to 1; tests that exercise refusals
 * set 0).  Release builds never abort. */
void sbx_fsm_set_strict(int strict);

#endif
