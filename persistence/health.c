/* health.c -- whether the store answers and its writes succeed, for a health check: store_ping (a
 * trivial read on the read connection) and store_health (the outcome of the latest writes).
 *
 * What counts as a failed write: one that failed for a reason of the store, not of its input
 * (SBX_EFULL, SBX_EIO, SBX_ECORRUPT, SBX_EDB, SBX_EBUSY, SBX_EPERM, SBX_ENOMEM: a full disk, an
 * I/O error, a damaged or read-only database, no memory).  One refused for its input (a bad name,
 * no such chat, a duplicate key: SBX_ENAME, SBX_ENOENT, SBX_EEXIST, SBX_ECONFLICT, ...) says
 * nothing about the storage and is not counted.  A write the writer committed is a success and
 * ends a run of failures.  The writer notes every write it finished, in order (writer.c); stage.c
 * notes a staged upload's write that failed (a streamed upload filling the disk).
 *
 * What it does not do: decide what is unhealthy enough to report (the orchestrator's /healthz
 * does), or look at checkpoints (a failed one keeps the data in the WAL; st_ckpt counts them).
 */
#include "internal.h"

#include <string.h>

static const char *const health_names[] = {"ok", "failing"};
static const uint32_t health_from[] = {
    [ST_HEALTH_OK] = SBX_FSM_BIT(ST_HEALTH_FAILING),
    [ST_HEALTH_FAILING] = SBX_FSM_BIT(ST_HEALTH_OK),
};
static int health_invariant(const void *obj, unsigned state) {
  const struct st_health *h = obj;
  return state == ST_HEALTH_OK ? h->consecutive == 0
                               : h->consecutive > 0 && h->failing_since > 0 && h->last_error.code;
}
static const struct sbx_fsm health_fsm =
    SBX_FSM(ST_MOD, "write health", health_names, health_from, health_invariant);

#define set_state(st, to) set_state_((st), (to), __FILE__, __LINE__)
/* The only writer of st->health.state (under st->mu). */
static void set_state_(struct store *st, enum st_health_state to, const char *file, int line) {
  if (sbx_fsm_step(&health_fsm, st->health.state, to, st->dir, file, line) == 0)
    st->health.state = to;
}

static int storage_error(int rc) {
  switch (rc) {
  case SBX_EFULL:
  case SBX_EIO:
  case SBX_ECORRUPT:
  case SBX_EDB:
  case SBX_EBUSY:
  case SBX_EPERM:
  case SBX_ENOMEM:
    return 1;
  default:
    return 0;
  }
}

void st__health_note_held(struct store *st, int rc, const struct sbx_error *err) {
  struct st_health *h = &st->health;
  int64_t now = sbx_now_wall_ms();
  if (rc == 0) {
    h->last_ok_at = now;
    h->consecutive = 0;
    if (h->state == ST_HEALTH_FAILING)
      set_state(st, ST_HEALTH_OK);
  } else if (storage_error(rc)) {
    if (h->state == ST_HEALTH_OK)
      h->failing_since = now;
    h->consecutive++;
    h->failures++;
    h->last_error_at = now;
    sbx_error_set(&h->last_error, rc, "%s", err && err->msg[0] ? err->msg : sbx_strerror(rc));
    if (h->state == ST_HEALTH_OK)
      set_state(st, ST_HEALTH_FAILING);
  }
  SBX_FSM_CHECK(&health_fsm, h, h->state, st->dir);
}

void st__health_note(struct store *st, int rc, const struct sbx_error *err) {
  pthread_mutex_lock(&st->mu);
  st__health_note_held(st, rc, err);
  pthread_mutex_unlock(&st->mu);
}

int store_health(struct store *st, struct store_health *out) {
  if (st == NULL || out == NULL)
    return SBX_EINVAL;
  memset(out, 0, sizeof *out);
  pthread_mutex_lock(&st->mu);
  const struct st_health *h = &st->health;
  out->ok = h->state == ST_HEALTH_OK;
  out->consecutive_failures = h->consecutive;
  out->failing_since = h->state == ST_HEALTH_FAILING ? h->failing_since : 0;
  out->failures = h->failures;
  out->last_error = h->last_error;
  out->last_error_at = h->last_error_at;
  out->last_ok_at = h->last_ok_at;
  pthread_mutex_unlock(&st->mu);
  return 0;
}

int store_ping(struct store *st, struct sbx_error *err) {
  return st__step_done(st__q(&st->r, ST_PING), "ping", err);
}
