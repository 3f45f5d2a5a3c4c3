// fsm.js -- the one state-machine helper every JS object with a life uses (the kernel core, the
// kernel client, the supervisor and each run it supervises, the event stream, the page session and
// each attempt it executes): the JS twin of common/fsm.h.
//
// An object describes its machine once, at module level, with `machine(kind, from)`: for each
// state, the states it may be entered from (the order of the keys is the order of the states).
// Each object then holds one `Fsm` and never writes a state field of its own: `fsm.set(to, why)`
// is the one setter.  It checks the table, traces the change with the caller's file:line when
// tracing is on (curl's `mstate`) and refuses a forbidden step by throwing an Error with code
// 'ESTATE' that names both states and the caller.  An optional invariant (SQLite's
// `assert_pager_state`) is checked after every change while tracing is on.
//
// What it is not: it holds no timers and calls no object code besides the invariant and the
// optional onChange hook (objects that announce their state to listeners pass their emit there);
// the steps themselves stay with the object.
//
// Tracing: `setTrace(fn)` installs a sink fn({kind, id, from, to, why, at}); `at` is the caller's
// file:line.  In Node, CEREA_FSM_TRACE=1 in the environment traces to stderr.

let traceSink = null;
{
  const env = typeof process !== 'undefined' && process.env ? process.env.CEREA_FSM_TRACE : undefined;
  if (env === '1') traceSink = (t) => console.error(`fsm ${t.kind} ${t.id}: ${t.from} -> ${t.to}${t.why ? ` (${t.why})` : ''} at ${t.at}`);
}

// Installs (or with null removes) the trace sink; returns the previous one.
export function setTrace(fn) { const prev = traceSink; traceSink = fn || null; return prev; }

// machine('kernel client', {loading: [], ready: ['loading', 'busy'], ...}) → the frozen table.
// A state that lists no predecessors can only be the initial one.
export function machine(kind, from) {
  const states = Object.keys(from);
  const table = new Map();
  for (const s of states) {
    for (const p of from[s]) if (!(p in from)) throw new Error(`fsm ${kind}: ${s} entered from unknown state ${p}`);
    table.set(s, new Set(from[s]));
  }
  return Object.freeze({ kind, states: Object.freeze(states), table });
}

// The caller's file:line: the first frame outside this file and outside an object's own
// `setState` wrapper (the one setter some objects put around fsm.set to attach event details).
function caller() {
  const frames = String(new Error().stack || '').split('\n').slice(1);
  for (const frame of frames) {
    if (frame.includes('fsm.js') || /\bsetState\b/.test(frame)) continue;
    const m = /([^/\\( ]+?:\d+)(?::\d+)?\)?\s*$/.exec(frame.trim());
    return m ? m[1] : '?';
  }
  return '?';
}

export class Fsm {
  // spec: from machine(); initial: the first state; id: names the object in traces and errors;
  // invariant(state) → true when the object is consistent; onChange(to, from, why) after each change.
  constructor(spec, initial, { id = '', invariant = null, onChange = null } = {}) {
    if (!spec.table.has(initial)) throw new Error(`fsm ${spec.kind}: unknown initial state ${initial}`);
    this.spec = spec;
    this.id = id;
    this.invariant = invariant;
    this.onChange = onChange;
    this.current = initial;
  }

  get state() { return this.current; }
  is(...states) { return states.includes(this.current); }
  can(to) { const f = this.spec.table.get(to); return !!f && f.has(this.current); }

  // The one setter.  Returns the previous state.  Throws (code 'ESTATE') on a step the table
  // forbids; a step to the same state is a step like any other (allowed only when listed).
  set(to, why = '') {
    const from = this.current;
    if (!this.can(to)) {
      const e = new Error(`${this.spec.kind} ${this.id}: refused ${from} -> ${to}${why ? ` (${why})` : ''} at ${caller()}`);
      e.code = 'ESTATE';
      throw e;
    }
    this.current = to;
    if (traceSink && from !== to) {
      traceSink({ kind: this.spec.kind, id: this.id, from, to, why, at: caller() });
      if (this.invariant && !this.invariant(to)) {
        const e = new Error(`${this.spec.kind} ${this.id}: invariant of state ${to} broken`);
        e.code = 'EINVARIANT';
        throw e;
      }
    }
    if (this.onChange && from !== to) this.onChange(to, from, why);
    return from;
  }
}
