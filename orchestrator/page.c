/* page.c -- the page state machine: one kernel host (a browser tab or a headless host) attached
 * to a chat through its event stream.
 *
 * What it is for: the scheduler needs to know, for each chat, which page may run code now (the
 * active page: attached, visible, most recently made visible) and when a page that dropped its
 * stream is gone for good.  Every change goes through page_set_state(), which asks the transition
 * table (common/fsm.h) and traces the change with its place; each step checks the page's
 * invariant for its new state.  The grace deadline is a plain value read by orch__page_tick() with the
 * common clock, so tests use a fake clock.
 *
 * What it does not do: it does not pause runs or send events (chat.c reacts to the steps), and it
 * does not own the stream (api_events.c does).  The kernel state is a reported fact, not a life
 * this file drives.
 *
 * Liveness: a page's JavaScript can be frozen (a phone in the background) without a word reaching
 * the server, and the browser still answers the transport's pings; so every page call counts as a
 * sign of life (orch__page_alive), and a page holding a run sends one every PAGE_HEARTBEAT_MS.  A
 * VISIBLE page that holds a run and is silent for PAGE_SILENT_MS becomes SILENT
 * (orch__page_check_silent, from the chat's cron tick): it counts as hidden, so its run is paused;
 * its next sign of life makes it VISIBLE again (and the most recently visible page).
 *
 *            attach(visible)                 presence(hidden)
 *   NEW ─────────────────────▶ VISIBLE ◀───────────────────────▶ HIDDEN ◀──┐
 *    └─ attach(hidden) ──────────│─▲─────────────────────────────▶  │      │
 *         silent for             │ │ a sign of life                 │      │ presence(hidden)
 *         PAGE_SILENT_MS         ▼ │ (any page call)                │      │
 *         while holding a run  SILENT ────────────────────────────────────┘
 *                               │                                   │
 *                stream dropped │ (from VISIBLE, HIDDEN or SILENT)  │ stream dropped
 *                               ▼                                   ▼
 *                              GRACE ◀──────────────────────────────┘
 *                               │  └─▶ VISIBLE/HIDDEN: attach (the same page id, within the grace)
 *                               │ PAGE_GRACE_MS over, or at once when the page said it is leaving
 *                               ▼
 *                              GONE (final; the object is freed)
 *
 *   from                     to               step
 *   NEW, GRACE               VISIBLE/HIDDEN   orch__page_attach
 *   VISIBLE/HIDDEN           HIDDEN/VISIBLE   orch__page_presence (a report of the same state changes nothing)
 *   VISIBLE                  SILENT           orch__page_check_silent (holding a run, silent too long)
 *   SILENT                   VISIBLE          orch__page_alive (any page call), orch__page_presence(visible)
 *   SILENT                   HIDDEN           orch__page_presence(hidden)
 *   VISIBLE, HIDDEN, SILENT  GRACE            orch__page_drop, orch__page_leave (deadline: now)
 *   GRACE                    GRACE            orch__page_leave (its deadline brought to now)
 *   GRACE                    GONE             orch__page_tick (deadline passed)
 *   VISIBLE, HIDDEN, SILENT  VISIBLE/HIDDEN   orch__page_attach (a second stream replaces the first)
 */
#include "internal.h"

#include <stdio.h>
#include <string.h>

#include "fsm.h"

#define B(s) SBX_FSM_BIT(s)
static const char *const page_state_names[ORCH_PAGE__COUNT] = {"new",    "visible", "hidden",
                                                               "silent", "grace",   "gone"};
/* from[to]: the states `to` may be entered from (a report of the same state is a step too). */
static const uint32_t from[ORCH_PAGE__COUNT] = {
    [ORCH_PAGE_NEW] = 0,
    [ORCH_PAGE_VISIBLE] = B(ORCH_PAGE_NEW) | B(ORCH_PAGE_HIDDEN) | B(ORCH_PAGE_SILENT) |
                          B(ORCH_PAGE_GRACE) | B(ORCH_PAGE_VISIBLE),
    [ORCH_PAGE_HIDDEN] = B(ORCH_PAGE_NEW) | B(ORCH_PAGE_VISIBLE) | B(ORCH_PAGE_SILENT) |
                         B(ORCH_PAGE_GRACE) | B(ORCH_PAGE_HIDDEN),
    [ORCH_PAGE_SILENT] = B(ORCH_PAGE_VISIBLE),
    [ORCH_PAGE_GRACE] = B(ORCH_PAGE_VISIBLE) | B(ORCH_PAGE_HIDDEN) | B(ORCH_PAGE_SILENT) |
                        B(ORCH_PAGE_GRACE),
    [ORCH_PAGE_GONE] = B(ORCH_PAGE_GRACE),
};
#undef B

/* What holds in each state once a step is done. */
static int page_invariant(const void *obj, unsigned state) {
  const struct orch_page *p = obj;
  switch (state) {
  case ORCH_PAGE_VISIBLE:
    return p->visible == 1 && p->grace_deadline_ms == 0;
  case ORCH_PAGE_HIDDEN:
    return p->visible == 0 && p->grace_deadline_ms == 0;
  case ORCH_PAGE_SILENT: /* it said visible last; it said nothing since */
    return p->visible == 1 && p->grace_deadline_ms == 0;
  case ORCH_PAGE_GRACE:
    return p->grace_deadline_ms != 0;
  default:
    return p->grace_deadline_ms == 0;
  }
}

static const struct sbx_fsm page_fsm =
    SBX_FSM("page", "page", page_state_names, from, page_invariant);

#define page_set_state(p, to) page_set_state_((p), (to), __FILE__, __LINE__)
#define page_check(p)         SBX_FSM_CHECK(&page_fsm, (p), (p)->state, (p)->id)

/* The one writer of p->state (SBX_ESTATE for a transition the table refuses). */
static int page_set_state_(struct orch_page *p, enum orch_page_state to, const char *file,
                           int line) {
  int rc = sbx_fsm_step(&page_fsm, p->state, to, p->id, file, line);
  if (rc != 0)
    return rc;
  p->state = to;
  p->grace_deadline_ms = 0; /* set by the step that enters GRACE */
  return 0;
}

static const char *const kernel_names[] = {"unknown", "loading", "ready", "busy", "dead"};

const char *orch__page_state_name(enum orch_page_state s) { return sbx_fsm_name(&page_fsm, s); }
const char *orch__kernel_state_name(enum orch_kernel_state k) {
  return (unsigned)k < SBX_ARRAY_SIZE(kernel_names) ? kernel_names[k] : "?";
}
int orch__kernel_state_parse(const char *s, enum orch_kernel_state *out) {
  for (unsigned i = 1; s != NULL && i < SBX_ARRAY_SIZE(kernel_names); i++)
    if (strcmp(s, kernel_names[i]) == 0)
      return *out = (enum orch_kernel_state)i, 0;
  return SBX_EINVAL;
}

void orch__page_init(struct orch_page *p, const char *id) {
  memset(p, 0, sizeof(*p));
  snprintf(p->id, sizeof(p->id), "%s", id);
  p->state = ORCH_PAGE_NEW;
  p->kernel = ORCH_KERNEL_UNKNOWN;
  SBX_LIST_INIT(&p->chat_link);
}

static int become(struct orch_page *p, int visible, uint64_t *counter) {
  int was_visible = p->state == ORCH_PAGE_VISIBLE;
  int rc = page_set_state(p, visible ? ORCH_PAGE_VISIBLE : ORCH_PAGE_HIDDEN);
  if (rc != 0)
    return rc;
  p->visible = visible ? 1 : 0;
  if (visible && !was_visible)
    p->visible_seq = ++*counter;
  page_check(p);
  return 0;
}

/* VISIBLE, HIDDEN or SILENT: attached to its stream. */
static int attached(const struct orch_page *p) {
  return p->state == ORCH_PAGE_VISIBLE || p->state == ORCH_PAGE_HIDDEN ||
         p->state == ORCH_PAGE_SILENT;
}

int orch__page_attach(struct orch_page *p, int visible, uint64_t *counter) {
  if (p->state == ORCH_PAGE_GONE)
    return SBX_ESTATE;
  p->life_ms = sbx_now_mono_ms();
  return become(p, visible, counter);
}

int orch__page_presence(struct orch_page *p, int visible, uint64_t *counter) {
  p->life_ms = sbx_now_mono_ms();
  if (p->state == ORCH_PAGE_GRACE) {
    p->visible = visible ? 1 : 0; /* remembered for the reconnect */
    return 0;
  }
  if (!attached(p))
    return SBX_ESTATE;
  return become(p, visible, counter);
}

int orch__page_alive(struct orch_page *p, uint64_t *counter) {
  p->life_ms = sbx_now_mono_ms();
  if (p->state != ORCH_PAGE_SILENT)
    return 0;
  return become(p, 1, counter) == 0;
}

int orch__page_check_silent(struct orch_page *p, uint64_t since_ms, uint64_t silent_ms) {
  uint64_t last = SBX_MAX(p->life_ms, since_ms);
  if (p->state != ORCH_PAGE_VISIBLE || silent_ms == 0 || sbx_now_mono_ms() - last < silent_ms)
    return 0;
  int rc = page_set_state(p, ORCH_PAGE_SILENT);
  page_check(p);
  return rc == 0;
}

int orch__page_drop(struct orch_page *p, uint64_t grace_ms) {
  if (!attached(p))
    return SBX_ESTATE;
  int rc = page_set_state(p, ORCH_PAGE_GRACE);
  if (rc != 0)
    return rc;
  p->grace_deadline_ms = sbx_now_mono_ms() + grace_ms;
  page_check(p);
  return 0;
}

int orch__page_leave(struct orch_page *p) {
  if (!attached(p) && p->state != ORCH_PAGE_GRACE)
    return SBX_ESTATE;
  int rc = page_set_state(p, ORCH_PAGE_GRACE);
  if (rc != 0)
    return rc;
  uint64_t now = sbx_now_mono_ms();
  p->grace_deadline_ms = now ? now : 1; /* 0 means "no deadline" (GRACE's invariant) */
  page_check(p);
  return 0;
}

int orch__page_tick(struct orch_page *p) {
  if (p->state != ORCH_PAGE_GRACE || sbx_now_mono_ms() < p->grace_deadline_ms)
    return 0;
  int rc = page_set_state(p, ORCH_PAGE_GONE);
  page_check(p);
  return rc == 0;
}

int orch__page_can_run(const struct orch_page *p) { return p->state == ORCH_PAGE_VISIBLE; }
