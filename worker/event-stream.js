// event-stream.js -- a chat's event stream (text/event-stream) read and kept open, for the page and
// the headless host alike.  EventStream runs the reconnect loop: when a connection drops it
// connects again to the same path (the same page id) with `Last-Event-ID` set to the last `id:`
// seen, so the orchestrator resumes where it stopped and no event is lost (docs/api.md: a reconnect
// inside PAGE_GRACE_MS carries on as if nothing happened).  Backoff from `initialBackoffMs`
// doubling to `maxBackoffMs`, reset by a successful connect; a `retry:` field sets it.  A
// 401/403/404 is final (the credential no longer reaches the chat).  SseParser turns the text of
// one connection into events.
//
// The connection itself is injected, so the same loop serves fetch in the browser and node:http
// over the orchestrator's Unix socket in the host:
//   connect({path, lastEventId, signal, onOpen(status), onText(string)}) → Promise<status>
//     opens one connection with the bearer credential and `Last-Event-ID` (when not null), calls
//     onOpen with the HTTP status once the head arrived, onText with each decoded chunk of a 200
//     body, and resolves with the status when the connection ends; rejects on network errors
//     (and when `signal` aborts).
//
// It does not interpret events (the page session does) nor dedupe them (the server's sequence ids
// make replays exact; the session ignores an attempt it already has).
//
//   idle ──start()──▶ connecting ──200──▶ open ──drop──▶ waiting ──timer──▶ connecting
//                        │   ▲                            ▲                     │
//                        │   └──────────── error ─────────┘─────────────────────┘
//                        └─401/403/404──▶ failed           any ──stop()──▶ stopped
import { Fsm, machine } from './fsm.js';

const LIFE = machine('event stream', {
  idle: [],
  connecting: ['idle', 'waiting'],
  open: ['connecting'],
  waiting: ['connecting', 'open'],
  failed: ['connecting'],
  stopped: ['idle', 'connecting', 'open', 'waiting', 'failed'],
});
const FINAL = new Set([401, 403, 404]);

// Incremental SSE parsing (the WHATWG rules this protocol uses): lines end with \r\n, \r or \n;
// `event:`, `data:` (joined with \n), `id:` (without NUL), `retry:`; comments start with ':'.
// An event is dispatched at a blank line when it has data or a type.  At most `maxLine`
// characters are held for a line not yet ended (a peer that never ends a line cannot grow it).
export class SseParser {
  constructor(onEvent, { onRetry = () => {}, maxLine = 1 << 24 } = {}) {
    this.onEvent = onEvent;
    this.onRetry = onRetry;
    this.maxLine = maxLine;
    this.buf = '';
    this.type = '';
    this.data = [];
    this.id = null;
  }

  push(text) {
    this.buf += text;
    let start = 0;
    for (;;) {
      const lf = this.buf.indexOf('\n', start), cr = this.buf.indexOf('\r', start);
      const nl = lf < 0 ? cr : cr < 0 ? lf : Math.min(lf, cr);
      if (nl < 0) break;
      // A \r at the very end may be the first half of \r\n: wait for the next chunk.
      if (this.buf.charCodeAt(nl) === 13 && nl === this.buf.length - 1) break;
      const line = this.buf.slice(start, nl);
      start = nl + (this.buf.charCodeAt(nl) === 13 && this.buf.charCodeAt(nl + 1) === 10 ? 2 : 1);
      this.line(line);
    }
    this.buf = this.buf.slice(start);
    if (this.buf.length > this.maxLine) throw new Error(`event stream: a line longer than ${this.maxLine} characters`);
  }

  line(line) {
    if (line === '') {
      if (this.data.length || this.type) {
        const ev = { type: this.type || 'message', data: this.data.join('\n'), id: this.id };
        this.type = ''; this.data = []; this.id = null;
        this.onEvent(ev);
      }
      return;
    }
    if (line[0] === ':') return;   // comment / keep-alive
    const c = line.indexOf(':');
    const field = c < 0 ? line : line.slice(0, c);
    let val = c < 0 ? '' : line.slice(c + 1);
    if (val[0] === ' ') val = val.slice(1);
    if (field === 'event') this.type = val;
    else if (field === 'data') this.data.push(val);
    else if (field === 'id') { if (!val.includes('\0')) this.id = val; }
    else if (field === 'retry') { const n = parseInt(val, 10); if (n >= 0) this.onRetry(n); }
  }
}

export class EventStream {
  /**
   * @param {object} o
   * @param {Function} o.connect   see above
   * @param {string|(() => string)} o.path   the stream's path (a function: built at each connect)
   * @param {(ev: {type: string, data: string, id: string|null}) => void} o.onEvent
   * @param {(state: string, info?: object) => void} [o.onState]
   * @param {number} [o.initialBackoffMs=250]   the first reconnect's wait, doubled up to maxBackoffMs
   * @param {number} [o.maxBackoffMs=5000]
   */
  constructor({ connect, path, onEvent, onState = () => {}, initialBackoffMs = 250, maxBackoffMs = 5000 }) {
    this.connect = connect;
    this.path = typeof path === 'function' ? path : () => path;
    this.onEvent = onEvent;
    this.onState = onState;
    this.initialBackoffMs = initialBackoffMs;
    this.maxBackoffMs = maxBackoffMs;
    this.info = {};
    this.fsm = new Fsm(LIFE, 'idle', { onChange: (state) => this.onState(state, this.info) });
    this.lastEventId = null;
    this.connects = 0;
    this.backoff = initialBackoffMs;
    this.holdMs = 0;
    this.ctrl = null;
    this.timer = null;
    this.wake = null;
  }

  get state() { return this.fsm.state; }

  setState(to, info = {}) { this.info = info; this.fsm.set(to); this.info = {}; }

  start() {
    if (!this.fsm.is('idle')) return;
    this.loop();
  }

  stop() {
    if (this.fsm.is('stopped')) return;
    this.setState('stopped');
    clearTimeout(this.timer);
    if (this.ctrl) this.ctrl.abort();
    if (this.wake) this.wake();
  }

  /**
   * Drop the current connection and reconnect: at once (a page returning to the front), or after
   * `delayMs` (tests drop the stream for a while).
   */
  reconnectNow(delayMs = 0) {
    if (this.fsm.is('stopped', 'failed', 'idle')) return;
    if (this.fsm.is('waiting')) { clearTimeout(this.timer); this.timer = setTimeout(() => this.wake && this.wake(), delayMs); return; }
    this.holdMs = delayMs;
    if (this.ctrl) this.ctrl.abort();
  }

  async loop() {
    while (this.fsm.is('idle', 'waiting')) {
      this.setState('connecting');
      const ctrl = new AbortController();
      this.ctrl = ctrl;
      const parser = new SseParser((ev) => {
        if (ev.id !== null) this.lastEventId = ev.id;
        if (!this.fsm.is('stopped')) this.onEvent(ev);
      }, { onRetry: (ms) => { this.backoff = Math.min(ms, this.maxBackoffMs); } });
      let status = 0, error = null;
      try {
        status = await this.connect({
          path: this.path(), lastEventId: this.lastEventId, signal: ctrl.signal,
          onOpen: (st) => {
            if (st !== 200 || !this.fsm.is('connecting')) return;
            this.connects++;
            this.backoff = this.initialBackoffMs;
            this.setState('open', { reconnect: this.connects > 1 });
          },
          onText: (text) => { if (!this.fsm.is('stopped')) parser.push(text); },
        });
      } catch (e) { error = e; }
      this.ctrl = null;
      if (this.fsm.is('stopped')) return;
      if (FINAL.has(status)) { this.setState('failed', { status }); return; }
      const wait = this.holdMs || this.backoff;
      this.holdMs = 0;
      this.backoff = Math.min(this.backoff * 2, this.maxBackoffMs);
      this.setState('waiting', { error: error ? String(error.message || error) : status === 200 ? 'stream ended' : `HTTP ${status}`, retryMs: wait });
      await new Promise((r) => { this.wake = r; this.timer = setTimeout(r, wait); });
      this.wake = null;
    }
  }
}
