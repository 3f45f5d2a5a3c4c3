// sse.js -- reads a chat's event stream (text/event-stream) with fetch, so the page token travels
// in the Authorization header rather than the URL, and keeps it open: when the stream drops it
// reconnects with the same URL (the same page id) and `Last-Event-ID` set to the last `id:` seen,
// so the orchestrator resumes where it stopped and no event is lost (DESIGN.md: a reconnect inside
// PAGE_GRACE_MS carries on as if nothing happened).  Backoff 250 ms doubling to 5 s, reset by a
// successful connect.  A 401/403/404 is final (the token no longer reaches the chat).
//
// It does not interpret events: it hands {type, data, id} to `onEvent` in order.  It does not
// dedupe either: the server's sequence ids make replays exact; the session ignores a run it has.
//
//   idle ──start()──▶ connecting ──200──▶ open ──drop──▶ waiting ──timer──▶ connecting
//                        │   ▲                             ▲                    │
//                        │   └───────────── error ─────────┘────────────────────┘
//                        └─401/403/404──▶ failed          any ──stop()──▶ stopped

export const STREAM_STATES = ['idle', 'connecting', 'open', 'waiting', 'failed', 'stopped'];

export class EventStream {
  /**
   * @param {object} o
   * @param {string} o.url  absolute or same-origin URL of the stream
   * @param {() => Record<string,string>} o.headers  request headers (the bearer credential)
   * @param {(ev: {type: string, data: string, id: string|null}) => void} o.onEvent
   * @param {(state: string, info?: object) => void} [o.onState]
   */
  constructor({ url, headers, onEvent, onState, fetch: f, maxBackoffMs = 5000 }) {
    this.url = url;
    this.headers = headers;
    this.onEvent = onEvent;
    this.onState = onState || (() => {});
    this._fetch = f || globalThis.fetch.bind(globalThis);
    this.state = 'idle';
    this.lastEventId = null;
    this.connects = 0;
    this._backoff = 250;
    this._maxBackoff = maxBackoffMs;
    this._ctrl = null;
    this._timer = null;
  }

  _set(state, info) {
    if (this.state === 'stopped') return;
    this.state = state;
    this.onState(state, info);
  }

  start() {
    if (this.state !== 'idle' && this.state !== 'waiting') return;
    this._connect();
  }

  stop() {
    this._set('stopped');
    clearTimeout(this._timer);
    this._ctrl?.abort();
  }

  /**
   * Drop the current connection and reconnect (a page returning to the front: at once; tests:
   * after `delayMs`, to drop the stream for a while).
   */
  reconnectNow(delayMs = 0) {
    if (this.state === 'stopped' || this.state === 'failed') return;
    clearTimeout(this._timer);
    if (this.state === 'waiting') { this._timer = setTimeout(() => this._connect(), delayMs); return; }
    this._holdMs = delayMs;
    this._ctrl?.abort();
  }

  async _connect() {
    this._set('connecting');
    const ctrl = new AbortController();
    this._ctrl = ctrl;
    const headers = { Accept: 'text/event-stream', ...this.headers() };
    if (this.lastEventId !== null) headers['Last-Event-ID'] = this.lastEventId;
    let res;
    try {
      res = await this._fetch(this.url, { headers, signal: ctrl.signal, cache: 'no-store', credentials: 'omit' });
    } catch (e) {
      return this._retry(e);
    }
    if (res.status === 401 || res.status === 403 || res.status === 404) {
      this._set('failed', { status: res.status });
      return;
    }
    if (!res.ok || !res.body) return this._retry(new Error(`HTTP ${res.status}`));
    this.connects++;
    this._backoff = 250;
    this._set('open', { reconnect: this.connects > 1 });
    try {
      await this._read(res.body.getReader());
      this._retry(new Error('stream ended'));
    } catch (e) {
      this._retry(e);
    }
  }

  _retry(err) {
    if (this.state === 'stopped' || this.state === 'failed') return;
    const wait = this._holdMs || this._backoff;
    this._holdMs = 0;
    this._backoff = Math.min(this._backoff * 2, this._maxBackoff);
    this._set('waiting', { error: String(err && err.message || err), retryMs: wait });
    this._timer = setTimeout(() => this._connect(), wait);
  }

  async _read(reader) {
    const dec = new TextDecoder();
    let buf = '';
    let type = '', data = [], id = null;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += dec.decode(value, { stream: true });
      let nl;
      while ((nl = buf.search(/\r\n|\r|\n/)) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + (buf[nl] === '\r' && buf[nl + 1] === '\n' ? 2 : 1));
        if (line === '') {
          if (data.length || type) {
            if (id !== null) this.lastEventId = id;
            const ev = { type: type || 'message', data: data.join('\n'), id };
            type = ''; data = []; id = null;
            if (this.state === 'stopped') return;
            this.onEvent(ev);
          }
          continue;
        }
        if (line[0] === ':') continue; // comment / keep-alive
        const c = line.indexOf(':');
        const field = c < 0 ? line : line.slice(0, c);
        let val = c < 0 ? '' : line.slice(c + 1);
        if (val[0] === ' ') val = val.slice(1);
        if (field === 'event') type = val;
        else if (field === 'data') data.push(val);
        else if (field === 'id') { if (!val.includes('\0')) id = val; }
        else if (field === 'retry') { const n = parseInt(val, 10); if (n >= 0) this._backoff = Math.min(n, this._maxBackoff); }
      }
    }
  }
}
