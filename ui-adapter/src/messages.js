// messages.js -- MessageList: the conversation of one chat as a page holds it, built from what the
// orchestrator sends (docs/api.md "Messages"): the list `GET /v1/chats/{chat}/messages` answers, the
// chat stream's durable `message` events (with an id: the whole message object) and its live ones
// (without an id: `{message_id, delta: {offset, text}}` while the answer streams, or the whole
// object once on attach for a message still streaming).  Any mix of those, in any order, converges
// on the server's conversation:
//   - a whole object replaces what is held, except that a streaming one never shortens the text
//     held (a list read before the last deltas came, a replayed event), and nothing undoes an
//     ended message (done, stopped, error);
//   - a delta is appended at its offset (characters = code points, as live output counts them):
//     the part already held is dropped, a delta past the end (a gap) is ignored until the next
//     whole object brings the text;
//   - run_ids only grow, and so do `parts` (where in the text each tool run happened): a whole
//     object's parts replace those held unless they name fewer runs.
// segments(m) cuts the message's text as it stands (deltas included) at its runs' places.
// timeline(runs) lays the chat out in time order: each message with the runs it owns under it (its
// run_ids in order, then runs of its turn not listed yet), and the runs no message owns (the user's
// own code, a backend's runs) between them by creation time.
//
// It does not render, fetch or post anything: ChatSession feeds it and UIs draw its views.
import { Emitter } from '../../worker/emitter.js';
import { codePoints } from '../../worker/output.js';

export const ENDED = new Set(['done', 'stopped', 'error']);
const MAX_MESSAGES = 2000;   // a page keeps at most this many (the oldest go first)

const cpSlice = (s, from) => [...s].slice(from).join('');

export class MessageList extends Emitter {
  constructor() {
    super();
    this.byId = new Map();   // message_id -> message view
    this.seq = 0;            // arrival order, the tie-break of equal creation times
    this.latest = 0;         // the newest creation time seen: items without one sort after it
  }

  /** The messages in conversation order. */
  list() { return [...this.byId.values()].sort(byTime); }

  get(id) { return this.byId.get(id) || null; }

  /** The message of a turn still being answered, or null. */
  open() { return this.list().find((m) => m.role === 'assistant' && !ENDED.has(m.state)) || null; }

  /** `GET /v1/chats/{chat}/messages`'s list, merged like whole objects. */
  load(messages) { for (const m of messages || []) this.whole(m); }

  /**
   * One `message` event of the chat stream: `id` is its event id (null for a live one), `data` its
   * parsed JSON.  Returns the message's view when it changed, else null.
   */
  apply({ data }) {
    if (!data || typeof data.message_id !== 'string') return null;
    if (data.delta && typeof data.delta.text === 'string' && Number.isInteger(data.delta.offset)) return this.delta(data);
    if (typeof data.text === 'string' || data.role) return this.whole(data);
    return null;
  }

  whole(m) {
    if (!m || typeof m.message_id !== 'string') return null;
    const old = this.byId.get(m.message_id);
    if (old && ENDED.has(old.state) && !ENDED.has(m.state)) return null;   // a stale copy of an ended message
    const text = typeof m.text === 'string' ? m.text : (old?.text || '');
    const keepText = old && !ENDED.has(m.state) && codePoints(old.text) > codePoints(text);
    const runIds = Array.isArray(m.run_ids) ? m.run_ids : [];
    const v = { ...(old || {}), ...m,
      text: keepText ? old.text : text,
      run_ids: old && old.run_ids.length > runIds.length ? old.run_ids : runIds,
      parts: Array.isArray(m.parts) && !(old?.parts && runsIn(old.parts) > runsIn(m.parts)) ? m.parts : (old?.parts || null),
      error: m.error ?? null };
    return this.put(v, old);
  }

  delta({ message_id: id, turn_id: turnId, delta }) {
    const old = this.byId.get(id);
    if (!old) {
      // The first piece of an answer not seen whole yet (its creation event was missed): start it.
      if (delta.offset !== 0) return null;
      return this.put({ message_id: id, turn_id: turnId ?? null, role: 'assistant', text: delta.text, state: 'streaming',
        error: null, run_ids: [], parts: null }, null);
    }
    if (ENDED.has(old.state)) return null;
    const n = codePoints(old.text);
    if (delta.offset > n || delta.offset + codePoints(delta.text) <= n) return null;   // a gap, or nothing new
    return this.put({ ...old, text: old.text + cpSlice(delta.text, n - delta.offset) }, old);
  }

  put(v, old) {
    v.seq = old ? old.seq : ++this.seq;
    v.at = Number.isFinite(v.created_at) ? v.created_at : (old ? old.at : this.latest);
    if (Number.isFinite(v.created_at)) this.latest = Math.max(this.latest, v.created_at);
    this.byId.set(v.message_id, v);
    if (this.byId.size > MAX_MESSAGES) this.byId.delete(this.list()[0].message_id);
    this.emit('message', v);
    return v;
  }

  /** The message that owns a run: it lists it, or it is its turn's answer; else null. */
  ownerOf(run) {
    let byTurn = null;
    for (const m of this.byId.values()) {
      if (m.role !== 'assistant') continue;
      if (m.run_ids.includes(run.run_id)) return m;
      if (run.turn_id && m.turn_id === run.turn_id) byTurn = m;
    }
    return byTurn;
  }

  /**
   * The chat in time order: `[{kind: 'message', message, run_ids}, {kind: 'run', run_id}]`.
   * `runs` are the page's run views (`{run_id, turn_id?, created_at?, seen_at?}`): a run without a
   * creation time sorts by `seen_at` (when the page first saw it, on the server's clock as far as
   * the page knows it), else last.
   */
  timeline(runs) {
    const under = new Map();   // message_id -> run ids
    const items = [];
    for (const m of this.byId.values()) under.set(m.message_id, [...m.run_ids]);
    for (const r of runs) {
      const m = this.ownerOf(r);
      if (m) { if (!m.run_ids.includes(r.run_id)) under.get(m.message_id).push(r.run_id); continue; }
      const at = Number.isFinite(r.created_at) ? r.created_at : Number.isFinite(r.seen_at) ? r.seen_at : Infinity;
      items.push({ kind: 'run', run_id: r.run_id, at, seq: r.seq ?? 0 });
    }
    for (const m of this.byId.values()) items.push({ kind: 'message', message: m, run_ids: under.get(m.message_id), at: m.at, seq: m.seq });
    return items.sort(byTime).map(({ at, seq, ...item }) => item);
  }
}

const runsIn = (parts) => parts.filter((p) => p?.type === 'run').length;

/**
 * A message as it reads: `[{type: 'text', text}, {type: 'run', run_id}, …]`, its text as it stands
 * (live deltas included) cut at the place of each tool run its `parts` record; the text after the
 * last run grows as deltas come.  Empty texts are left out.  A message without parts is its text.
 */
export function segments(m) {
  const out = [];
  const text = m.text || '';
  let at = 0;      // UTF-16 units: the parts' texts joined are a prefix of the text
  let taken = 0;   // of the text, cut into `out` so far
  const cutAt = (end) => {
    if (end > taken && text.slice(taken, end).trim()) out.push({ type: 'text', text: text.slice(taken, end) });
    taken = Math.max(taken, end);
  };
  for (const p of m.parts || []) {
    if (!p || typeof p !== 'object') continue;
    if (p.type === 'text' && typeof p.text === 'string') at += p.text.length;
    else if (p.type === 'run' && typeof p.run_id === 'string') { cutAt(Math.min(at, text.length)); out.push({ type: 'run', run_id: p.run_id }); }
  }
  cutAt(text.length);
  return out;
}

// Creation time, then a turn's question before its answer, then arrival.
function byTime(a, b) {
  if (a.at !== b.at) return a.at < b.at ? -1 : 1;
  const ra = a.role ?? a.message?.role, rb = b.role ?? b.message?.role;
  if (ra !== rb && (ra === 'user' || rb === 'user')) return ra === 'user' ? -1 : 1;
  return a.seq - b.seq;
}
