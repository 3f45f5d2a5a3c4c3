// output.js -- OutputSink: the kernel worker's end of one output stream (stdout or stderr) of a
// run.  Pyodide calls write(bytes) with what Python flushed (kernel/output.py block-buffers, so
// that is once per 64 KiB, per flush signal, or before a sleep or an input()); the sink keeps the
// first `capChars` characters (Unicode code points) of the run, counts what it drops, and hands the
// kept text on in chunks as it comes: onChunk({offset, text, truncated}) when OUTPUT_BATCH.chars
// are pending or OUTPUT_BATCH.ms passed since the last chunk (checked at each write, flush signal
// and sleep), and whenever the kernel says the moment has come (flush(): an input() prompt, a
// display, the run's end).  So the
// chunks of a run, joined, are exactly what take() returns at its end: the live stream and the
// result never disagree, and the cap holds mid-stream.
//
// It does not decide when Python flushes (kernel/output.py and the controller's flush signal do)
// nor post anything itself (core.js gives onChunk).
import { LIMITS, OUTPUT_BATCH } from './protocol.js';

// Code points of a string (a surrogate pair is one character).
export function codePoints(s) {
  let n = s.length;
  for (let i = 0; i < s.length; i++) if ((s.charCodeAt(i) & 0xFC00) === 0xD800) n--;
  return n;
}

// The first n code points of s.
function headPoints(s, n) {
  let i = 0;
  for (let k = 0; k < n && i < s.length; k++) i += (s.charCodeAt(i) & 0xFC00) === 0xD800 ? 2 : 1;
  return s.slice(0, i);
}

export class OutputSink {
  // onChunk({offset, text, truncated}) is called synchronously (inside Python's write); null: keep only.
  constructor(capChars = LIMITS.out_chars, onChunk = null, { batchMs = OUTPUT_BATCH.ms, batchChars = OUTPUT_BATCH.chars } = {}) {
    this.onChunk = onChunk;
    this.batchMs = batchMs;
    this.batchChars = batchChars;
    this.setCap(capChars);
  }

  setCap(capChars) { this.capChars = capChars; this.reset(); }

  reset() {
    this.decoder = new TextDecoder('utf-8', { fatal: false });
    this.kept = [];           // the text kept so far, in pieces
    this.chars = 0;           // code points kept
    this.pending = '';        // kept, not yet handed on
    this.sent = 0;            // code points handed on
    this.dropped = 0;         // bytes past the cap
    this.told = false;        // the last chunk carried truncated: true
    this.lastAt = performance.now();
  }

  get truncated() { return this.dropped > 0; }
  get full() { return this.chars >= this.capChars; }

  write(bytes) {
    const n = bytes.length;
    if (this.full) { this.dropped += n; this.due(); return n; }
    // A character is at most 4 bytes: never decode more than the room left can keep.
    const room = this.capChars - this.chars;
    const take = Math.min(n, room * 4 + 4);
    this.keep(this.decoder.decode(take === n ? bytes : bytes.subarray(0, take), { stream: take === n }));
    if (take < n) this.dropped += n - take;
    this.due();
    return n;
  }

  keep(text) {
    if (!text) return;
    let cp = codePoints(text);
    const room = this.capChars - this.chars;
    if (cp > room) {
      text = headPoints(text, room);
      cp = room;
      this.dropped += 1;   // at least one character did not fit
    }
    if (!text) return;
    this.kept.push(text);
    this.pending += text;
    this.chars += cp;
  }

  // A chunk now if the batch is due: by size, or by age (minAge: a flush signal, which comes
  // every batchMs itself, accepts half of it, so that its jitter does not skip a beat).
  due(minAge = this.batchMs) {
    if (this.pending.length >= this.batchChars || performance.now() - this.lastAt >= minAge) this.flush();
  }

  // True when something waits to be handed on (text, or the news that the cap was reached).
  get waiting() { return this.pending.length > 0 || (this.truncated && !this.told); }

  // When the next chunk is due by age (performance.now() time), or Infinity with nothing waiting.
  get dueAt() { return this.waiting ? this.lastAt + this.batchMs : Infinity; }

  // Hands on what is pending, now.
  flush() {
    if (!this.waiting) return;
    const chunk = { offset: this.sent, text: this.pending, truncated: this.truncated };
    this.sent = this.chars;
    this.pending = '';
    this.told = chunk.truncated;
    this.lastAt = performance.now();
    if (this.onChunk) this.onChunk(chunk);
  }

  // The run's end: the decoder's last partial character kept (when it fits), the last chunk out.
  end() {
    this.keep(this.decoder.decode());
    this.flush();
  }

  // {text, truncated}: every chunk of the run joined; the sink is reset for the next run.
  take() {
    this.end();
    const out = { text: this.kept.join(''), truncated: this.truncated };
    this.reset();
    return out;
  }
}
