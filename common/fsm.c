/* fsm.c -- the transition check, trace and invariant behind every object's one state setter
 * (fsm.h).  No state of its own besides the strictness switch. */
#include "fsm.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#ifdef SBX_DEBUG
static int strict = 1;
#else
static int strict = 0;
#endif

void sbx_fsm_set_strict(int s) { strict = s; }

const char *sbx_fsm_name(const struct sbx_fsm *m, unsigned s) {
  return s < m->n_states ? m->names[s] : "?";
}

int sbx_fsm_allowed(const struct sbx_fsm *m, unsigned from, unsigned to) {
  if (from >= m->n_states || to >= m->n_states)
    return 0;
  return (m->from[to] & SBX_FSM_BIT(from)) != 0;
}

int sbx_fsm_parse(const struct sbx_fsm *m, const char *name, unsigned *out) {
  for (unsigned i = 0; name != NULL && i < m->n_states; i++)
    if (strcmp(name, m->names[i]) == 0) {
      *out = i;
      return 0;
    }
  return SBX_EINVAL;
}

static const char *base(const char *file) {
  const char *s = strrchr(file, '/');
  return s ? s + 1 : file;
}

int sbx_fsm_step(const struct sbx_fsm *m, unsigned from, unsigned to, const char *id,
                 const char *file, int line) {
  if (!sbx_fsm_allowed(m, from, to)) {
    sbx_log(SBX_LOG_WARN, m->module, "%s %s: refused %s -> %s (%s:%d)", m->kind, id ? id : "",
            sbx_fsm_name(m, from), sbx_fsm_name(m, to), base(file), line);
    if (strict)
      abort(); /* a caller that checks the state first never gets here */
    return SBX_ESTATE;
  }
  if (from != to && SBX_LOG_ENABLED(SBX_LOG_TRACE))
    sbx_log(SBX_LOG_TRACE, m->module, "%s %s: %s -> %s (%s:%d)", m->kind, id ? id : "",
            sbx_fsm_name(m, from), sbx_fsm_name(m, to), base(file), line);
  return 0;
}

void sbx_fsm_check_(const struct sbx_fsm *m, const void *obj, unsigned state, const char *id,
                    const char *file, int line) {
  if (m->invariant == NULL || m->invariant(obj, state))
    return;
  sbx_log(SBX_LOG_ERROR, m->module, "%s %s: invariant of state %s broken (%s:%d)", m->kind,
          id ? id : "", sbx_fsm_name(m, state), base(file), line);
  abort();
}
