// conversation.js -- the chat page's conversation: the messages in order (the user's question as
// text, the assistant's answer as sanitized markdown while it streams and once it ends, how it ended
// when that was not plainly: stopped, or the model's error in plain words), each tool run's card at
// the place in the answer where it ran (the message's `parts`: text, card, text…, live and after a
// reload), then the message's other runs (the answer's auto runs) under it in order, and
// the runs of no message (the user's own code) between messages by time, oldest first; a reader at
// the end of the page is kept there as it grows.  It draws
// MessageList.timeline() (ui-adapter/src/messages.js); elements are kept and moved only when their
// place changes, so a card's open preview or frame is not reloaded by a new delta.
//
// It does not fetch or post: the page gives it run views (`run(view)`) and the session's messages,
// and `cardFor` builds run cards with the page's callbacks.
import { h } from './dom.js';
import { renderMarkdown } from './markdown.js';
import { segments } from '../src/messages.js';

// What a model error means for the person at the page (the codes of docs/api.md "Messages").
// The server's words for model_error and model_unreachable are whole sentences that already say
// what failed ("The model answered HTTP 500: …", "The model could not be reached: …"): shown as
// they are, said once.
export const MODEL_ERROR = {
  model_error: (m) => m || 'The model answered with an error.',
  model_unreachable: (m) => m || 'The model could not be reached.',
  model_stalled: (m) => `The model stopped sending its answer part-way: ${m}`,
  turn_time_limit: () => 'The answer took longer than this deployment allows for one turn, so it was ended here.',
  tool_call_limit: () => 'The assistant asked to run code more times than one turn allows; it was asked to answer without running more.',
  // The server's sentence says the answer was cut where its text ends (kept across the restart).
  interrupted: (m) => m || 'This answer was cut.',
};
export function modelErrorText(err) {
  if (!err) return '';
  const f = MODEL_ERROR[err.code];
  return f ? f(err.message || '') : `The answer ended with an error (${err.code}): ${err.message || ''}`;
}

export class Conversation {
  /**
   * @param {{el: HTMLElement, messages: import('../src/messages.js').MessageList,
   *   cardFor: (runId: string) => {el: HTMLElement, update: (view: object) => void}}} o
   */
  constructor({ el, messages, cardFor }) {
    this.el = el;
    this.messages = messages;
    this.cardFor = cardFor;
    this.runs = new Map();     // run_id -> latest view
    this.blocks = new Map();   // message_id -> {el, flow, status, runsEl, texts: [{el, shown}]}
    this.pending = false;
    messages.on('message', () => this.schedule());
  }

  /** A run's latest view (from the session, the run list or a poll): its card is updated now. */
  run(view) {
    const old = this.runs.get(view.run_id);
    const v = { ...(old || {}), ...view };
    this.runs.set(view.run_id, v);
    this.cardFor(view.run_id).update(v);
    if (!old || old.turn_id !== v.turn_id || old.created_at !== v.created_at) this.schedule();
  }

  // Drawing is coalesced to one per frame (deltas come up to ~20 a second).
  schedule() {
    if (this.pending) return;
    this.pending = true;
    const go = () => { this.pending = false; this.draw(); };
    if (typeof requestAnimationFrame === 'function' && document.visibilityState === 'visible') requestAnimationFrame(go);
    else setTimeout(go, 0);
  }

  draw() {
    // A reader at the end of the page stays there as the conversation grows; one who scrolled up
    // to read is left where they are.
    const doc = document.scrollingElement || document.documentElement;
    const atEnd = doc.scrollHeight - (doc.scrollTop + innerHeight) < 120;
    const height = doc.scrollHeight;
    const items = this.messages.timeline([...this.runs.values()]);
    const order = [];
    for (const item of items) {
      if (item.kind === 'run') { order.push(this.cardFor(item.run_id).el); continue; }
      const b = this.block(item.message, item.run_ids);
      order.push(b.el);
    }
    place(this.el, order);
    if (atEnd && doc.scrollHeight > height) doc.scrollTop = doc.scrollHeight;
  }

  // A message's article: its text cut at its tool runs with their cards in those places (the flow),
  // how it ended, then its runs that are not in its text (`owned` less those placed).
  block(m, owned = m.run_ids) {
    let b = this.blocks.get(m.message_id);
    if (!b) {
      const flow = h('div', { class: 'msg-flow' });
      const status = h('p', { class: 'msg-status', 'data-testid': 'message-status', role: 'status' });
      const runsEl = h('div', { class: 'msg-runs' });
      const el = h('article', { class: `msg msg-${m.role}`, 'data-message-id': m.message_id, 'data-role': m.role },
        h('header', { class: 'msg-head' }, m.role === 'user' ? 'You' : 'Assistant'), flow, status, runsEl);
      b = { el, flow, status, runsEl, texts: [] };
      this.blocks.set(m.message_id, b);
    }
    b.el.dataset.state = m.state;
    b.el.setAttribute('aria-busy', String(m.state === 'streaming'));   // read out once it is whole
    b.el.dataset.turnId = m.turn_id || '';
    const segs = m.role === 'assistant' ? segments(m) : [{ type: 'text', text: m.text }];
    // An answer with no text yet still has its (empty) text element first: the status line and
    // the streaming mark go by it.
    if (!segs.some((x) => x.type === 'text')) segs.unshift({ type: 'text', text: '' });
    const inFlow = new Set();
    let t = 0;
    const flow = segs.map((x) => {
      if (x.type === 'run') { inFlow.add(x.run_id); return this.cardFor(x.run_id).el; }
      const seg = (b.texts[t++] ||= { el: h('div', { class: 'msg-text', 'data-testid': 'message-text' }), shown: null });
      if (seg.shown !== x.text) {
        seg.shown = x.text;
        if (m.role === 'assistant') seg.el.replaceChildren(renderMarkdown(x.text));
        else seg.el.textContent = x.text;
      }
      return seg.el;
    });
    b.texts.length = t;
    place(b.flow, flow);
    place(b.runsEl, owned.filter((id) => !inFlow.has(id)).map((id) => this.cardFor(id).el));
    const errText = modelErrorText(m.error);
    const statusText = m.state === 'streaming' ? (m.text || m.run_ids.length ? '' : 'Thinking…') : m.state === 'stopped' ? 'Stopped: the answer ends here.' : errText;
    if (b.status.textContent !== statusText) b.status.textContent = statusText;
    b.status.classList.toggle('error', !!errText);
    b.status.hidden = !statusText;
    return b;
  }
}

// Make `parent`'s children exactly `els`, in order, moving only what is out of place.
function place(parent, els) {
  els.forEach((el, i) => { if (parent.children[i] !== el) parent.insertBefore(el, parent.children[i] || null); });
  while (parent.children.length > els.length) parent.lastElementChild.remove();
}
