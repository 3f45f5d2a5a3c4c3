/* run.c -- the run state machine: one enum, one set_state, the step functions that move a run.
 *
 * What it is for: a run executes in a browser the orchestrator cannot see, so its life is decided
 * here from the few things the server does see (a page attached or not, visible or hidden, a
 * `started` report, a result, the clock).  Every transition goes through run_set_state(), which
 * asserts the allowed previous states and traces the change; the step functions below are the only
 * callers.  Deadlines (pause wait, watchdog, cancel grace) are plain millisecond values set on
 * entering a state and read by orch__run_tick() with the common clock, so unit tests drive them
 * with sbx_clock_set_fake() and no event loop.
 *
 * What it does not do: no I/O.  It does not persist, emit events or pick pages; the chat scheduler
 * (chat.c) calls a step, then persists the run and tells pages what changed.
 *
 *                     dispatch (attempt+1)           started(attempt)
 *   create ─▶ QUEUED ─────────────────────▶ DISPATCHED ───────────────▶ RUNNING
 *               │  │  no visible page            │  ▲   page hidden/gone   │
 *               │  └──────────────▶ PAUSED ◀─────┘  │ ◀────────────────────┘
 *               │                    │  └───────────┘ page active again: new attempt
 *               │ rejected/cancel    │ wait over: abandoned / cancel
 *               ▼                    ▼
 *             DONE ◀─────────── (result, cancel grace, watchdog) from DISPATCHED or RUNNING
 *
 *   from        to          step                      when
 *   QUEUED      DISPATCHED  orch__run_dispatch         head of its chat's queue, a page is active
 *   QUEUED      PAUSED      orch__run_pause            head of the queue, no page visible
 *   QUEUED      DONE        orch__run_finish           rejected (execution off), cancelled
 *   DISPATCHED  RUNNING     orch__run_started          page reports start of the current attempt
 *   DISPATCHED  PAUSED      orch__run_pause            its page went hidden or gone
 *   DISPATCHED  DONE        orch__run_finish           result, cancel grace, watchdog
 *   RUNNING     PAUSED      orch__run_pause            its page went hidden or gone
 *   RUNNING     DONE        orch__run_finish           result, cancel grace, watchdog
 *   PAUSED      DISPATCHED  orch__run_dispatch         a page of the chat is active again
 *   PAUSED      DONE        orch__run_finish           wait over (abandoned), cancelled
 *
 * Deadlines, by state: PAUSED -> pause wait (CODE_PAUSED_WAIT_MS) then abandoned;
 * DISPATCHED/RUNNING -> watchdog (timeout_s + grace) then timeout and the page is told to restart
 * its kernel; cancel requested -> cancel grace then cancelled.  A result whose attempt is not the
 * current one is refused (SBX_ECONFLICT -> 409): a re-dispatched run's stale result cannot win.
 */
#include "internal.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

static const char *state_names[] = {"queued", "dispatched", "running", "paused", "done"};
static const char *status_names[] = {"none",      "ok",       "error",    "timeout",
                                     "crashed",   "cancelled", "rejected", "abandoned"};

const char *orch__run_state_name(enum orch_run_state s) {
  return (unsigned)s < SBX_ARRAY_SIZE(state_names) ? state_names[s] : "?";
}

const char *orch__run_status_name(enum orch_run_status s) {
  return (unsigned)s < SBX_ARRAY_SIZE(status_names) ? status_names[s] : "?";
}

int orch__run_status_parse(const char *s, enum orch_run_status *out) {
  for (unsigned i = 1; s != NULL && i < SBX_ARRAY_SIZE(status_names); i++)
    if (strcmp(s, status_names[i]) == 0) {
      *out = (enum orch_run_status)i;
      return 0;
    }
  return SBX_EINVAL;
}

int orch__run_state_parse(const char *s, enum orch_run_state *out) {
  for (unsigned i = 0; s != NULL && i < SBX_ARRAY_SIZE(state_names); i++)
    if (strcmp(s, state_names[i]) == 0) {
      *out = (enum orch_run_state)i;
      return 0;
    }
  return SBX_EINVAL;
}

/* Allowed previous states of each state, as bit masks. */
#define B(s) (1u << (s))
static const unsigned allowed_from[ORCH_RUN__COUNT] = {
    [ORCH_RUN_QUEUED] = 0, /* only the initial state */
    [ORCH_RUN_DISPATCHED] = B(ORCH_RUN_QUEUED) | B(ORCH_RUN_PAUSED),
    [ORCH_RUN_RUNNING] = B(ORCH_RUN_DISPATCHED),
    [ORCH_RUN_PAUSED] = B(ORCH_RUN_QUEUED) | B(ORCH_RUN_DISPATCHED) | B(ORCH_RUN_RUNNING),
    [ORCH_RUN_DONE] = B(ORCH_RUN_QUEUED) | B(ORCH_RUN_DISPATCHED) | B(ORCH_RUN_RUNNING) |
                      B(ORCH_RUN_PAUSED),
};

int orch__run_transition_allowed(enum orch_run_state from, enum orch_run_state to) {
  if ((unsigned)from >= ORCH_RUN__COUNT || (unsigned)to >= ORCH_RUN__COUNT)
    return 0;
  return (allowed_from[to] & B(from)) != 0;
}
#undef B

/* The one writer of run->state.  Returns SBX_ESTATE (and changes nothing) for a forbidden
 * transition; a debug build also asserts, since every caller checks the state first. */
static int run_set_state(struct orch_run *run, enum orch_run_state to) {
  if (!orch__run_transition_allowed(run->state, to)) {
    sbx_log(SBX_LOG_WARN, "run", "run %s: refused %s -> %s", run->id,
            orch__run_state_name(run->state), orch__run_state_name(to));
#if defined(SBX_DEBUG) && !defined(ORCH_RUN_NO_ASSERT)
    assert(!"forbidden run transition");
#endif
    return SBX_ESTATE;
  }
  SBX_TRACE_STATE("run", "run", run->id, orch__run_state_name(run->state), orch__run_state_name(to));
  run->state = to;
  run->state_since_ms = sbx_now_mono_ms();
  /* Deadlines belong to states: cleared on leaving, set by the step that enters. */
  run->wait_deadline_ms = 0;
  run->watchdog_deadline_ms = 0;
  if (to != ORCH_RUN_DISPATCHED && to != ORCH_RUN_RUNNING)
    run->cancel_deadline_ms = 0;
  return 0;
}

void orch__run_init(struct orch_run *run, const char *id, int timeout_s) {
  memset(run, 0, sizeof(*run));
  orch__strcpy_cap(run->id, sizeof(run->id), id);
  run->state = ORCH_RUN_QUEUED;
  run->status = ORCH_RUN_STATUS_NONE;
  run->timeout_s = timeout_s;
  run->state_since_ms = sbx_now_mono_ms();
}

int orch__run_dispatch(struct orch_run *run, const char *page_id, uint64_t watchdog_grace_ms) {
  if (run->state != ORCH_RUN_QUEUED && run->state != ORCH_RUN_PAUSED)
    return SBX_ESTATE;
  int rc = run_set_state(run, ORCH_RUN_DISPATCHED);
  if (rc != 0)
    return rc;
  run->attempts++;
  orch__strcpy_cap(run->page_id, sizeof(run->page_id), page_id ? page_id : "");
  /* The page has downloads and a kernel start before Python runs: the watchdog allows the time
   * limit plus a grace from dispatch, and is re-armed when the page reports `started`. */
  run->watchdog_deadline_ms = sbx_now_mono_ms() + (uint64_t)run->timeout_s * 1000u + watchdog_grace_ms;
  return 0;
}

int orch__run_started(struct orch_run *run, int attempt, uint64_t watchdog_grace_ms) {
  if (attempt != run->attempts)
    return SBX_ECONFLICT;
  if (run->state == ORCH_RUN_RUNNING)
    return 0; /* the same report again */
  if (run->state != ORCH_RUN_DISPATCHED)
    return run->state == ORCH_RUN_DONE ? SBX_ECONFLICT : SBX_ESTATE;
  uint64_t cancel = run->cancel_deadline_ms;
  int rc = run_set_state(run, ORCH_RUN_RUNNING);
  if (rc != 0)
    return rc;
  run->cancel_deadline_ms = cancel;
  run->watchdog_deadline_ms = sbx_now_mono_ms() + (uint64_t)run->timeout_s * 1000u + watchdog_grace_ms;
  return 0;
}

/* Server mode's hook (hosts.c): a run that waits for capacity, not for a person, keeps waiting.
 * PAUSED (its chat waits for a free kernel slot on a host): the pause wait starts again now.
 * DISPATCHED (its host reported the kernel still loading): the watchdog starts again now, so the
 * time spent waiting for a kernel is not counted.  SBX_ESTATE in any other state. */
int orch__run_hold(struct orch_run *run, uint64_t wait_ms, uint64_t watchdog_grace_ms) {
  uint64_t now = sbx_now_mono_ms();
  if (run->state == ORCH_RUN_PAUSED)
    run->wait_deadline_ms = now + wait_ms;
  else if (run->state == ORCH_RUN_DISPATCHED)
    run->watchdog_deadline_ms = now + (uint64_t)run->timeout_s * 1000u + watchdog_grace_ms;
  else
    return SBX_ESTATE;
  return 0;
}

int orch__run_pause(struct orch_run *run, uint64_t wait_ms) {
  if (run->state == ORCH_RUN_PAUSED)
    return 0;
  if (run->state != ORCH_RUN_QUEUED && run->state != ORCH_RUN_DISPATCHED &&
      run->state != ORCH_RUN_RUNNING)
    return SBX_ESTATE;
  int rc = run_set_state(run, ORCH_RUN_PAUSED);
  if (rc != 0)
    return rc;
  run->page_id[0] = '\0';
  run->wait_deadline_ms = sbx_now_mono_ms() + wait_ms;
  return 0;
}

int orch__run_finish(struct orch_run *run, enum orch_run_status status) {
  if (status == ORCH_RUN_STATUS_NONE)
    return SBX_EINVAL;
  if (run->state == ORCH_RUN_DONE)
    return SBX_ESTATE;
  int rc = run_set_state(run, ORCH_RUN_DONE);
  if (rc != 0)
    return rc;
  run->status = status;
  return 0;
}

int orch__run_request_cancel(struct orch_run *run, uint64_t grace_ms) {
  switch (run->state) {
  case ORCH_RUN_QUEUED:
  case ORCH_RUN_PAUSED:
    return orch__run_finish(run, ORCH_RUN_STATUS_CANCELLED);
  case ORCH_RUN_DISPATCHED:
  case ORCH_RUN_RUNNING:
    if (run->cancel_deadline_ms == 0)
      run->cancel_deadline_ms = sbx_now_mono_ms() + grace_ms;
    return SBX_EAGAIN; /* the page is told; the run ends on its answer or after the grace */
  case ORCH_RUN_DONE:
  default:
    return SBX_ESTATE;
  }
}

int orch__run_check_result(const struct orch_run *run, int attempt) {
  if (run->state == ORCH_RUN_DONE)
    return SBX_ECONFLICT; /* the caller compares result hashes first */
  if (attempt != run->attempts || (run->state != ORCH_RUN_DISPATCHED && run->state != ORCH_RUN_RUNNING))
    return SBX_ECONFLICT;
  return 0;
}

enum orch_run_due orch__run_tick(struct orch_run *run) {
  uint64_t now = sbx_now_mono_ms();
  switch (run->state) {
  case ORCH_RUN_PAUSED:
    if (run->wait_deadline_ms && now >= run->wait_deadline_ms) {
      orch__run_finish(run, ORCH_RUN_STATUS_ABANDONED);
      return ORCH_RUN_DUE_ABANDONED;
    }
    break;
  case ORCH_RUN_DISPATCHED:
  case ORCH_RUN_RUNNING:
    if (run->cancel_deadline_ms && now >= run->cancel_deadline_ms) {
      orch__run_finish(run, ORCH_RUN_STATUS_CANCELLED);
      return ORCH_RUN_DUE_CANCELLED;
    }
    if (run->watchdog_deadline_ms && now >= run->watchdog_deadline_ms) {
      /* Started and never answered: it hit the limit.  Never started: the kernel is stuck. */
      enum orch_run_status st =
          run->state == ORCH_RUN_RUNNING ? ORCH_RUN_STATUS_TIMEOUT : ORCH_RUN_STATUS_CRASHED;
      orch__run_finish(run, st);
      return ORCH_RUN_DUE_WATCHDOG;
    }
    break;
  default:
    break;
  }
  return ORCH_RUN_DUE_NONE;
}
