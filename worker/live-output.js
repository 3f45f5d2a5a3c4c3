// live-output.js -- LiveOutput: what one attempt of a run streams to the orchestrator while it
// executes, for the page and the headless host alike (the page session makes one per attempt):
// `POST /v1/runs/{run}/output {attempt, chunks?, displays?, input_request?}` (docs/api.md), fed
// by the supervisor's output, display and input_request events.
//   - batched: at most one call in flight, and calls at least `batchMs` apart (the kernel already
//     hands output on in ~50 ms or 4 KiB chunks, never one message per print);
//   - resumable: the answer's figures {stdout, stderr, displays} are what the orchestrator holds;
//     every call sends from there, so a chunk the orchestrator did not take (a gap, a lost call)
//     is sent again and a repeated one is never doubled (it drops the overlap);
//   - bounded: the text of each stream is at most the run's cap (the kernel's sink cut it), a
//     call carries at most `maxDisplayChars` of display data (the rest follow in the next call);
//   - a 409 means the attempt is no longer the run's current one: `onStale` stops it; a 404 or
//     400 (an orchestrator without this call, a body it refuses) stops the streaming only (the
//     result still carries everything); a network error or a 5xx is tried again.
//
// It does not word anything, decide the run's fate (the session does) or post the result.
import { codePoints } from './output.js';

const enc = encodeURIComponent;

// s from code point `from` on.
function fromPoint(s, from) {
  let i = 0;
  for (let k = 0; k < from && i < s.length; k++) i += (s.charCodeAt(i) & 0xFC00) === 0xD800 ? 2 : 1;
  return s.slice(i);
}

export class LiveOutput {
  // off: post nothing (an orchestrator without this call).
  constructor({ client, runId, attempt, onStale = () => {}, log = () => {}, batchMs = 50, maxDisplayChars = 1 << 20, retryMs = 200, off = false }) {
    this.client = client;
    this.path = `/v1/runs/${enc(runId)}/output`;
    this.attempt = attempt;
    this.onStale = onStale;
    this.log = log;
    this.batchMs = batchMs;
    this.maxDisplayChars = maxDisplayChars;
    this.retryMs = retryMs;
    this.streams = { stdout: { text: '', chars: 0 }, stderr: { text: '', chars: 0 } };
    this.displays = [];
    this.held = { stdout: 0, stderr: 0, displays: 0 };   // what the orchestrator said it holds
    this.ask = null;               // {prompt}: an input request not yet acknowledged
    this.nudge = false;            // send a call even with nothing new (input() ended)
    this.inflight = null;
    this.timer = null;
    this.lastAt = -Infinity;
    this.stopped = off;            // no more calls (off, closed, stale, refused)
    this.calls = 0;
  }

  // ---- fed by the supervisor's events --------------------------------------------------------
  output({ stream, offset, text }) {
    const s = this.streams[stream];
    if (!s || offset !== s.chars) return;
    s.text += text;
    s.chars += codePoints(text);
    this.schedule();
  }

  display({ index, data }) {
    if (index !== this.displays.length) return;
    this.displays.push(data);
    this.schedule();
  }

  inputRequest(prompt) { this.ask = { prompt }; this.schedule(); }

  // input() ended without an answer from the orchestrator (EOF): it learns the run goes on.
  inputEnded() { this.nudge = true; this.schedule(); }

  get owed() {
    return this.nudge || !!this.ask || this.displays.length > this.held.displays ||
      this.streams.stdout.chars > this.held.stdout || this.streams.stderr.chars > this.held.stderr;
  }

  schedule(delay = null) {
    if (this.stopped || this.inflight || this.timer || !this.owed) return;
    const wait = delay ?? Math.max(0, this.lastAt + this.batchMs - performance.now());
    this.timer = setTimeout(() => { this.timer = null; this.send(); }, wait);
  }

  body() {
    const b = { attempt: this.attempt };
    const chunks = [];
    for (const stream of ['stdout', 'stderr']) {
      const s = this.streams[stream], from = this.held[stream];
      if (s.chars > from) chunks.push({ stream, offset: from, text: fromPoint(s.text, from) });
    }
    if (chunks.length) b.chunks = chunks;
    const displays = [];
    let budget = this.maxDisplayChars;
    for (let i = this.held.displays; i < this.displays.length; i++) {
      const size = JSON.stringify(this.displays[i]).length;
      if (displays.length && size > budget) break;
      displays.push({ index: i, data: this.displays[i] });
      budget -= size;
    }
    if (displays.length) b.displays = displays;
    if (this.ask) b.input_request = this.ask;
    return b;
  }

  send() {
    if (this.stopped || this.inflight || !this.owed) return;
    const body = this.body();
    const ask = this.ask;
    this.nudge = false;
    this.lastAt = performance.now();
    this.calls++;
    this.inflight = (async () => {
      let again = null;
      try {
        const r = await this.client.json('POST', this.path, body);
        if (r.status === 200 && r.data) {
          this.resume(r.data, body);
          if (this.ask === ask) this.ask = null;
        } else if (r.status === 409) {
          this.stopped = true;
          this.onStale(`output: HTTP ${r.status}`);
        } else if (r.status >= 500) {
          again = this.retryMs;
        } else {
          this.stopped = true;
          this.log(`output: HTTP ${r.status}: live output stops for this attempt (the result carries it)`);
        }
      } catch (e) {
        again = this.retryMs;
        this.log(`output: ${e.message}; trying again`);
      } finally {
        this.inflight = null;
      }
      if (again !== null) { this.nudge = true; this.schedule(again); } else this.schedule();
    })();
  }

  // The orchestrator's figures: resume from them.  A stream it holds no more of after being
  // offered more (its cap is lower than ours) is not offered again.
  resume(held, body) {
    for (const stream of ['stdout', 'stderr']) {
      const n = Number(held[stream]);
      if (!Number.isFinite(n) || n < 0) continue;
      const offered = (body.chunks || []).find((c) => c.stream === stream);
      const stuck = offered && n <= this.held[stream] && n >= offered.offset;
      this.held[stream] = stuck ? this.streams[stream].chars : Math.min(n, this.streams[stream].chars);
    }
    const d = Number(held.displays);
    if (Number.isFinite(d) && d >= 0) {
      const offered = (body.displays || []).length;
      const stuck = offered && d <= this.held.displays;
      this.held.displays = stuck ? this.displays.length : Math.min(d, this.displays.length);
    }
  }

  // The attempt ended: no more calls; waits for the one in flight (so the result comes after it).
  async close() {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = null;
    if (this.inflight) await this.inflight;
  }
}
