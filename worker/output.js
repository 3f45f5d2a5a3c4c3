// output.js -- OutputSink: the kernel worker's end of one output stream (stdout or stderr) of a
// run.  Pyodide calls write(bytes) with what Python flushed (kernel/output.py block-buffers, so
// that is once per 64 KiB, per flush signal or timed flush, per explicit flush, or before a sleep
// or an input()).  What a run keeps of a stream, within its cap of C characters (Unicode code
// points; C = LIMITS.out_chars):
//   - a stream of at most C characters, all of it;
//   - a longer one, its start and its end: the first H = floor(C / 2) characters, the gap line
//     NOTE.outputGap(k) (notes.js: "[… k characters left out …]" on a line of its own), and the
//     last T characters, T = C − H − the gap line's length, k = the characters in between; so
//     exactly C in all.
// It hands the kept text on in chunks, onChunk({offset, text, truncated}), `offset` the kept
// characters before `text`: the first H characters as they come (when OUTPUT_BATCH.chars are
// pending or OUTPUT_BATCH.ms passed since the last chunk, checked at each write, flush signal and
// sleep, and whenever the kernel says the moment has come: flush()), and everything after them
// only at the run's end (end()): the rest of a stream that stayed within C, or the gap line and
// the end.  So the chunks of a run, joined, are exactly what take() returns at its end (the live
// stream and the result never disagree) and the cap holds mid-stream.  `truncated` turns true on
// the first chunk after the stream passed C (an empty chunk says so if no text is due).
//
// It does not decide when Python flushes (kernel/output.py and the controller's flush signal do)
// nor post anything itself (core.js gives onChunk).
import { LIMITS, OUTPUT_BATCH } from './protocol.js';
import { NOTE } from './notes.js';

// Code points of a string (a surrogate pair is one character).
export function codePoints(s) {
  let n = s.length;
  for (let i = 0; i < s.length; i++) if ((s.charCodeAt(i) & 0xFC00) === 0xD800) n--;
  return n;
}

// The index in s after its first n code points.
function headIndex(s, n) {
  let i = 0;
  for (let k = 0; k < n && i < s.length; k++) i += (s.charCodeAt(i) & 0xFC00) === 0xD800 ? 2 : 1;
  return i;
}

// The last n code points of s.
function tailPoints(s, n) {
  let i = s.length;
  for (let k = 0; k < n && i > 0; k++) i -= i >= 2 && (s.charCodeAt(i - 1) & 0xFC00) === 0xDC00 && (s.charCodeAt(i - 2) & 0xFC00) === 0xD800 ? 2 : 1;
  return s.slice(i);
}

export class OutputSink {
  // onChunk({offset, text, truncated}) is called synchronously (inside Python's write); null: keep only.
  constructor(capChars = LIMITS.out_chars, onChunk = null, { batchMs = OUTPUT_BATCH.ms, batchChars = OUTPUT_BATCH.chars } = {}) {
    this.onChunk = onChunk;
    this.batchMs = batchMs;
    this.batchChars = batchChars;
    this.setCap(capChars);
  }

  setCap(capChars) {
    this.capChars = capChars;
    this.headChars = Math.floor(capChars / 2);
    this.reset();
  }

  reset() {
    this.decoder = new TextDecoder('utf-8', { fatal: false });
    this.head = '';           // the first headChars characters
    this.headCount = 0;
    this.rest = '';           // after the head: all of it while the stream is within the cap, then its end
    this.chars = 0;           // characters written in all
    this.pending = '';        // kept, not yet handed on
    this.sent = 0;            // code points handed on
    this.ended = null;        // end(): what follows the head, as kept
    this.told = false;        // the last chunk carried truncated: true
    this.lastAt = performance.now();
  }

  get truncated() { return this.chars > this.capChars; }

  write(bytes) {
    this.add(this.decoder.decode(bytes, { stream: true }));
    this.due();
    return bytes.length;
  }

  add(text) {
    if (!text || this.ended !== null) return;
    const cp = codePoints(text);
    this.chars += cp;
    if (this.headCount < this.headChars) {
      const room = this.headChars - this.headCount;
      const i = cp <= room ? text.length : headIndex(text, room);
      const h = text.slice(0, i);
      this.head += h;
      this.pending += h;
      this.headCount += Math.min(cp, room);
      text = text.slice(i);
    }
    if (!text) return;
    this.rest += text;
    // Past the cap only the end is wanted: trimmed now and then, never below what the end needs.
    const keep = this.capChars - this.headChars;
    if (this.truncated && this.rest.length > 4 * keep + 4096) this.rest = tailPoints(this.rest, keep);
  }

  // A chunk now if the batch is due: by size, or by age (minAge: a flush signal, which comes
  // every batchMs itself, accepts half of it, so that its jitter does not skip a beat).
  due(minAge = this.batchMs) {
    if (this.pending.length >= this.batchChars || performance.now() - this.lastAt >= minAge) this.flush();
  }

  // True when something waits to be handed on (text, or the news that the cap was passed).
  get waiting() { return this.pending.length > 0 || (this.truncated && !this.told); }

  // When the next chunk is due by age (performance.now() time), or Infinity with nothing waiting.
  get dueAt() { return this.waiting ? this.lastAt + this.batchMs : Infinity; }

  // Hands on what is pending, now.
  flush() {
    if (!this.waiting) return;
    const chunk = { offset: this.sent, text: this.pending, truncated: this.truncated };
    this.sent += codePoints(this.pending);
    this.pending = '';
    this.told = chunk.truncated;
    this.lastAt = performance.now();
    if (this.onChunk) this.onChunk(chunk);
  }

  // The run's end: the decoder's last partial character, what follows the head (all of it, or
  // the gap line and the end), the last chunk out.  Safe twice.
  end() {
    if (this.ended === null) {
      this.add(this.decoder.decode());
      let rest = this.rest;
      if (this.truncated) {
        // The gap line's length depends on the count it gives, which depends on the end's length.
        const room = this.capChars - this.headChars;
        let gap = NOTE.outputGap(this.chars - this.headChars), tail;
        for (;;) {   // converges: a shorter line leaves a longer end and so a smaller count
          tail = Math.max(0, room - codePoints(gap));
          const next = NOTE.outputGap(this.chars - this.headChars - tail);
          if (next === gap) break;
          gap = next;
        }
        rest = gap + tailPoints(this.rest, tail);
      }
      this.ended = rest;
      this.rest = '';
      this.pending += rest;
    }
    this.flush();
  }

  // {text, truncated}: every chunk of the run joined; the sink is reset for the next run.
  take() {
    this.end();
    const out = { text: this.head + this.ended, truncated: this.truncated };
    this.reset();
    return out;
  }
}
