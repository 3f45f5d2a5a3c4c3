/* run.c -- the run state machine: one enum, one setter, the step functions that move a run.
 *
 * What it is for: a run executes in a browser the orchestrator cannot see, so its life is decided
 * here from the few things the server does see (a page attached or not, visible or hidden, a
 * `started` report, a result, the clock).  Every transition goes through run_set_state(), which
 * asks the transition table below (common/fsm.h: refused transitions are logged, and abort a
 * debug build) and traces the change with its place; the step functions below are the only
 * callers, and each checks the run's invariant for its new state when it is done.  Deadlines
 * (pause wait, watchdog, cancel grace) are plain millisecond values set by the steps and read by
 * orch__run_tick() with the common clock, so unit tests drive them with sbx_clock_set_fake() and
 * no event loop.
 *
 * What it does not do: no I/O.  It does not persist, emit events or pick pages; the chat scheduler
 * (chat.c) calls a step, then persists the run and tells pages what changed.
 *
 *                  dispatch (attempt+1)       started(attempt)          input()
 *   create ─▶ QUEUED ─────────────▶ DISPATCHED ──────────────▶ RUNNING ──────────▶ WAITING_INPUT
 *               │  │                  │    ▲                    │  ▲ ◀───────────────┘   │
 *               │  │ no visible page  │    │ a page active      │  │  input given,       │
 *               │  ▼                  ▼    │ again: new attempt │  │  or ended           │
 *               │  └──────────────▶ PAUSED ┘ ◀──────────────────┘  │                     │
 *               │                    │  ▲   page hidden, silent or gone (from D, R, W)  │
 *               │                    │  └───────────────────────────────────────────────┘
 *               │ rejected/cancel    │ wait over: abandoned / cancel
 *               │                    │              result ┌───────────┐ result (from R, and
 *               │                    │          (from D) ──▶ FINISHING ◀── from W through R)
 *               ▼                    ▼                     └─────┬─────┘ outputs not stored:
 *             DONE ◀─────────────────────────────────────────────┘       back to D/R
 *               ▲                                  outputs stored
 *               └── cancel grace, watchdog: from DISPATCHED, RUNNING or WAITING_INPUT
 *
 *   from           to             step                       when
 *   QUEUED         DISPATCHED     orch__run_dispatch         head of its chat's queue, a page is active
 *   QUEUED         PAUSED         orch__run_pause            head of the queue, no page visible
 *   QUEUED         DONE           orch__run_finish           rejected (execution off), cancelled
 *   DISPATCHED     RUNNING        orch__run_started          page reports start of the current attempt
 *   DISPATCHED     PAUSED         orch__run_pause            its page went hidden, silent or gone
 *   DISPATCHED     FINISHING      orch__run_take_result      a result for the current attempt
 *   DISPATCHED     DONE           orch__run_finish           cancel grace, watchdog
 *   DISPATCHED     PAUSED         orch__run_lost             its page was lost (gone, or attached
 *                                                            again without its place)
 *   RUNNING        WAITING_INPUT  orch__run_wait_input       Python called input() (the page says so)
 *   RUNNING        PAUSED         orch__run_pause            its page went hidden, silent or gone
 *   RUNNING        FINISHING      orch__run_take_result      a result for the current attempt
 *   RUNNING        DONE           orch__run_finish           cancel grace, watchdog
 *   RUNNING,       PAUSED, or     orch__run_lost             its page was lost mid-run: paused for a
 *   WAITING_INPUT  DONE (crashed)                            new attempt, ended crashed when that
 *                                                            was the max_lost-th such attempt
 *   WAITING_INPUT  RUNNING        orch__run_input_over       input given; the page says input() ended
 *                                                            (EOF); CODE_INPUT_WAIT_S plus the grace
 *                                                            passed without word (orch__run_tick);
 *                                                            a result (orch__run_take_result, on its
 *                                                            way to FINISHING)
 *   WAITING_INPUT  PAUSED         orch__run_pause            its page went hidden, silent or gone
 *   WAITING_INPUT  DONE           orch__run_finish           cancel grace
 *   PAUSED         DISPATCHED     orch__run_dispatch         a page of the chat is active again
 *   PAUSED         DONE           orch__run_finish           wait over (abandoned), cancelled
 *   FINISHING      DONE           orch__run_finish           the result's output files are stored
 *   FINISHING      DISPATCHED,    orch__run_result_failed    an output file could not be stored: the
 *                  RUNNING                                   run goes on as before (the page may retry)
 *
 * FINISHING is the time a result's output files take to be stored: nothing pauses, cancels or
 * times out a run then, and another result is told apart by its hash (finishing_hash).  It is the
 * orchestrator's own: the run's record and the API keep the state it finishes from.
 *
 * Deadlines, by state: PAUSED -> pause wait (CODE_PAUSED_WAIT_MS) then abandoned;
 * DISPATCHED/RUNNING -> watchdog (timeout_s + grace) then timeout and the page is told to restart
 * its kernel; WAITING_INPUT -> the watchdog stops (time waiting for a person is not the code's:
 * what it had left is kept in watch_left_ms and re-armed when input() is over) and the input wait
 * runs instead (CODE_INPUT_WAIT_S plus the watchdog's grace: the page's kernel gave up at
 * CODE_INPUT_WAIT_S, so input() is taken as over); cancel requested -> cancel grace then cancelled.
 * The watchdog and the cancel deadline last through FINISHING (they do not fire there), the cancel
 * deadline through WAITING_INPUT too, and both are cleared on entering QUEUED, PAUSED or DONE; the
 * pause wait is cleared on leaving PAUSED, the input wait on leaving WAITING_INPUT.  In server mode a run that waits for
 * capacity, not for a person, has its pause wait or its dispatch watchdog started again
 * (orch__run_hold: no transition).  A result whose attempt is not the current
 * one is refused (SBX_ECONFLICT -> 409): a re-dispatched run's stale result cannot win.
 *
 * Lost attempts: an attempt whose code was running (the page reported `started`) when its page
 * vanished without a word (its stream dropped past the grace, or it attached again without
 * Last-Event-ID: a kernel host restarted after a crash, a tab reloaded) is counted in `lost`; the
 * max_lost-th ends the run crashed instead of sending it out again, so code that crashes its host
 * cannot loop forever.  A page that said it went to the background (presence hidden) or that it
 * leaves (chat.c pauses its run before it is gone), one that fell silent (a phone freezes a
 * background page's script without a word) and an attempt that had not started are re-dispatched
 * without being counted: none of them is a sign the code crashed.
 */
#include "internal.h"

#include <stdio.h>
#include <string.h>

#include "fsm.h"

#define B(s) SBX_FSM_BIT(s)
static const char *const state_names[ORCH_RUN__COUNT] = {
    "queued", "dispatched", "running", "waiting_input", "paused", "finishing", "done"};
/* from[to]: the states `to` may be entered from. */
static const uint32_t from[ORCH_RUN__COUNT] = {
    [ORCH_RUN_QUEUED] = 0, /* only the initial state */
    [ORCH_RUN_DISPATCHED] = B(ORCH_RUN_QUEUED) | B(ORCH_RUN_PAUSED) | B(ORCH_RUN_FINISHING),
    [ORCH_RUN_RUNNING] = B(ORCH_RUN_DISPATCHED) | B(ORCH_RUN_FINISHING) | B(ORCH_RUN_WAITING_INPUT),
    [ORCH_RUN_WAITING_INPUT] = B(ORCH_RUN_RUNNING),
    [ORCH_RUN_PAUSED] = B(ORCH_RUN_QUEUED) | B(ORCH_RUN_DISPATCHED) | B(ORCH_RUN_RUNNING) |
                        B(ORCH_RUN_WAITING_INPUT),
    [ORCH_RUN_FINISHING] = B(ORCH_RUN_DISPATCHED) | B(ORCH_RUN_RUNNING),
    [ORCH_RUN_DONE] = B(ORCH_RUN_QUEUED) | B(ORCH_RUN_DISPATCHED) | B(ORCH_RUN_RUNNING) |
                      B(ORCH_RUN_WAITING_INPUT) | B(ORCH_RUN_PAUSED) | B(ORCH_RUN_FINISHING),
};
#undef B

/* What holds in each state once a step is done. */
static int run_invariant(const void *obj, unsigned state) {
  const struct orch_run *r = obj;
  int has_page = r->page_id[0] != '\0';
  int running = state == ORCH_RUN_DISPATCHED || state == ORCH_RUN_RUNNING;
  if ((state == ORCH_RUN_DONE) != (r->status != ORCH_RUN_STATUS_NONE))
    return 0;
  if ((state == ORCH_RUN_WAITING_INPUT) != (r->input_deadline_ms != 0))
    return 0;
  switch (state) {
  case ORCH_RUN_QUEUED:
  case ORCH_RUN_PAUSED:
    return !has_page && r->watchdog_deadline_ms == 0 && r->cancel_deadline_ms == 0;
  case ORCH_RUN_WAITING_INPUT:
    return has_page && r->attempts > 0 && r->watchdog_deadline_ms == 0;
  case ORCH_RUN_FINISHING:
    return has_page && r->attempts > 0 &&
           (r->resume_state == ORCH_RUN_DISPATCHED || r->resume_state == ORCH_RUN_RUNNING);
  default:
    return !running || (has_page && r->attempts > 0 && r->watchdog_deadline_ms != 0);
  }
}

static const struct sbx_fsm run_fsm = SBX_FSM("run", "run", state_names, from, run_invariant);

#define run_set_state(r, to) run_set_state_((r), (to), __FILE__, __LINE__)
#define run_check(r)         SBX_FSM_CHECK(&run_fsm, (r), (r)->state, (r)->id)

/* The one writer of run->state.  Returns SBX_ESTATE (and changes nothing) for a forbidden
 * transition; every step checks the state first, so a debug build aborts there. */
static int run_set_state_(struct orch_run *run, enum orch_run_state to, const char *file,
                          int line) {
  int rc = sbx_fsm_step(&run_fsm, run->state, to, run->id, file, line);
  if (rc != 0)
    return rc;
  int keeps_watch = to != ORCH_RUN_QUEUED && to != ORCH_RUN_PAUSED && to != ORCH_RUN_DONE;
  run->state = to;
  run->state_since_ms = sbx_now_mono_ms();
  run->wait_deadline_ms = 0;  /* set by the step that enters PAUSED */
  run->input_deadline_ms = 0; /* set by the step that enters WAITING_INPUT */
  if (!keeps_watch) {
    run->watchdog_deadline_ms = 0;
    run->cancel_deadline_ms = 0;
  }
  return 0;
}

static const char *const status_names[] = {"none",    "ok",        "error",    "timeout",
                                           "crashed", "cancelled", "rejected", "abandoned"};

const char *orch__run_state_name(enum orch_run_state s) { return sbx_fsm_name(&run_fsm, s); }

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

void orch__run_init(struct orch_run *run, const char *id, int timeout_s) {
  memset(run, 0, sizeof(*run));
  snprintf(run->id, sizeof(run->id), "%s", id);
  run->state = ORCH_RUN_QUEUED;
  run->status = ORCH_RUN_STATUS_NONE;
  run->timeout_s = timeout_s;
  run->state_since_ms = sbx_now_mono_ms();
}

/* The watchdog of an attempt: the time limit plus a grace, from now. */
static uint64_t watchdog_from_now(const struct orch_run *run, uint64_t grace_ms) {
  return sbx_now_mono_ms() + (uint64_t)run->timeout_s * 1000u + grace_ms;
}

int orch__run_dispatch(struct orch_run *run, const char *page_id, uint64_t watchdog_grace_ms) {
  if (run->state != ORCH_RUN_QUEUED && run->state != ORCH_RUN_PAUSED)
    return SBX_ESTATE;
  int rc = run_set_state(run, ORCH_RUN_DISPATCHED);
  if (rc != 0)
    return rc;
  run->attempts++;
  snprintf(run->page_id, sizeof(run->page_id), "%s", page_id ? page_id : "");
  memcpy(run->last_page_id, run->page_id, sizeof(run->last_page_id));
  run->dispatched_ms = sbx_now_mono_ms();
  /* The page has downloads and a kernel start before Python runs: the watchdog allows the time
   * limit plus a grace from dispatch, and is re-armed when the page reports `started`. */
  run->watchdog_deadline_ms = watchdog_from_now(run, watchdog_grace_ms);
  run_check(run);
  return 0;
}

int orch__run_started(struct orch_run *run, int attempt, uint64_t watchdog_grace_ms) {
  if (attempt != run->attempts)
    return SBX_ECONFLICT;
  if (run->state == ORCH_RUN_RUNNING || run->state == ORCH_RUN_WAITING_INPUT ||
      run->state == ORCH_RUN_FINISHING)
    return 0; /* the same report again, or one overtaken by later reports */
  if (run->state != ORCH_RUN_DISPATCHED)
    return run->state == ORCH_RUN_DONE ? SBX_ECONFLICT : SBX_ESTATE;
  int rc = run_set_state(run, ORCH_RUN_RUNNING);
  if (rc != 0)
    return rc;
  run->watchdog_deadline_ms = watchdog_from_now(run, watchdog_grace_ms);
  run_check(run);
  return 0;
}

/* Server mode's hook (hosts.c): a run that waits for capacity, not for a person, keeps waiting.
 * PAUSED (its chat waits for a free kernel slot on a host): the pause wait starts again now.
 * DISPATCHED (its host reported the kernel still loading): the watchdog starts again now, so the
 * time spent waiting for a kernel is not counted.  SBX_ESTATE in any other state. */
int orch__run_hold(struct orch_run *run, uint64_t wait_ms, uint64_t watchdog_grace_ms) {
  if (run->state == ORCH_RUN_PAUSED)
    run->wait_deadline_ms = sbx_now_mono_ms() + wait_ms;
  else if (run->state == ORCH_RUN_DISPATCHED)
    run->watchdog_deadline_ms = watchdog_from_now(run, watchdog_grace_ms);
  else
    return SBX_ESTATE;
  run_check(run);
  return 0;
}

int orch__run_wait_input(struct orch_run *run, int attempt, uint64_t input_wait_ms,
                         uint64_t watchdog_grace_ms) {
  if (attempt != run->attempts)
    return SBX_ECONFLICT;
  if (run->state == ORCH_RUN_WAITING_INPUT)
    return 0; /* the same request again (a call the page sent twice) */
  if (run->state != ORCH_RUN_RUNNING)
    return SBX_ESTATE;
  uint64_t now = sbx_now_mono_ms();
  uint64_t left = run->watchdog_deadline_ms > now ? run->watchdog_deadline_ms - now : 0;
  int rc = run_set_state(run, ORCH_RUN_WAITING_INPUT);
  if (rc != 0)
    return rc;
  run->watch_left_ms = left;
  run->watchdog_deadline_ms = 0;
  run->input_deadline_ms = now + input_wait_ms + watchdog_grace_ms;
  run_check(run);
  return 0;
}

int orch__run_input_over(struct orch_run *run) {
  if (run->state != ORCH_RUN_WAITING_INPUT)
    return SBX_ESTATE;
  int rc = run_set_state(run, ORCH_RUN_RUNNING);
  if (rc != 0)
    return rc;
  run->watchdog_deadline_ms = sbx_now_mono_ms() + run->watch_left_ms;
  run->watch_left_ms = 0;
  run_check(run);
  return 0;
}

int orch__run_pause(struct orch_run *run, uint64_t wait_ms) {
  if (run->state == ORCH_RUN_PAUSED)
    return 0;
  if (run->state != ORCH_RUN_QUEUED && !orch__run_on_page(run))
    return SBX_ESTATE;
  int rc = run_set_state(run, ORCH_RUN_PAUSED);
  if (rc != 0)
    return rc;
  run->page_id[0] = '\0';
  run->wait_deadline_ms = sbx_now_mono_ms() + wait_ms;
  run_check(run);
  return 0;
}

int orch__run_lost(struct orch_run *run, int max_lost, uint64_t wait_ms) {
  if (!orch__run_on_page(run))
    return SBX_ESTATE;
  if (run->state != ORCH_RUN_DISPATCHED && ++run->lost >= max_lost && max_lost > 0) {
    orch__run_finish(run, ORCH_RUN_STATUS_CRASHED);
    return 1;
  }
  return orch__run_pause(run, wait_ms);
}

int orch__run_take_result(struct orch_run *run, int attempt, const char *hash) {
  if (attempt != run->attempts || !orch__run_on_page(run))
    return SBX_ECONFLICT;
  if (run->state == ORCH_RUN_WAITING_INPUT && orch__run_input_over(run) != 0)
    return SBX_ESTATE; /* a result says input() is over: the run finishes from RUNNING */
  enum orch_run_state was = run->state;
  int rc = run_set_state(run, ORCH_RUN_FINISHING);
  if (rc != 0)
    return rc;
  run->resume_state = was;
  snprintf(run->finishing_hash, sizeof(run->finishing_hash), "%s", hash ? hash : "");
  run_check(run);
  return 0;
}

int orch__run_result_failed(struct orch_run *run) {
  if (run->state != ORCH_RUN_FINISHING)
    return SBX_ESTATE;
  int rc = run_set_state(run, run->resume_state);
  if (rc != 0)
    return rc;
  run->finishing_hash[0] = '\0';
  run_check(run);
  return 0;
}

int orch__run_on_page(const struct orch_run *run) {
  return run->state == ORCH_RUN_DISPATCHED || run->state == ORCH_RUN_RUNNING ||
         run->state == ORCH_RUN_WAITING_INPUT;
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
  run_check(run);
  return 0;
}

int orch__run_request_cancel(struct orch_run *run, uint64_t grace_ms) {
  switch (run->state) {
  case ORCH_RUN_QUEUED:
  case ORCH_RUN_PAUSED:
    return orch__run_finish(run, ORCH_RUN_STATUS_CANCELLED);
  case ORCH_RUN_DISPATCHED:
  case ORCH_RUN_RUNNING:
  case ORCH_RUN_WAITING_INPUT:
    if (run->cancel_deadline_ms == 0)
      run->cancel_deadline_ms = sbx_now_mono_ms() + grace_ms;
    return SBX_EINPROGRESS; /* the page is told; the run ends on its answer or after the grace */
  default:
    return SBX_ESTATE; /* finishing or done */
  }
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
  case ORCH_RUN_WAITING_INPUT:
    if (run->cancel_deadline_ms && now >= run->cancel_deadline_ms) {
      orch__run_finish(run, ORCH_RUN_STATUS_CANCELLED);
      return ORCH_RUN_DUE_CANCELLED;
    }
    if (run->input_deadline_ms && now >= run->input_deadline_ms) {
      orch__run_input_over(run); /* the page's kernel gave up on input() by now */
      return ORCH_RUN_DUE_INPUT_OVER;
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
