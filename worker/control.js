// control.js -- the control buffer shared between a kernel controller (kernel-client.js, on the
// page's or the host's main thread) and its kernel worker (core.js): the one place that reads and
// writes it, for both sides.  Its layout and values are protocol.js's (CONTROL, INPUT, SIGINT,
// FLUSH); this file holds the operations:
//   controller  interrupt() (SIGINT, wakes a sleep or an input() wait), requestFlush() (FLUSH only
//               into an empty slot: it never replaces a SIGINT), answer(text) / eof() for input(),
//               clear() before a run;
//   kernel      take(armed) (Pyodide's interrupt buffer read: an atomic exchange, only while armed),
//               sleep(ms, …) (a timed Atomics.wait that an interrupt ends at once), waitInput(…).
// Why Atomics.wait and not a timer: while Python runs, the worker's event loop does not, so
// nothing but shared memory reaches it; a Web Worker and a Node worker thread may block.
//
// It does not decide anything (when to interrupt, how long input() may wait: the supervisor
// does) and holds no Pyodide: the kernel side is given callbacks.
import { CONTROL, FLUSH, INPUT, SIGINT } from './protocol.js';

const { SIGNAL, QUIET, INPUT: SLOT_INPUT, INPUT_LEN } = CONTROL;

export class ControlBuffer {
  // sab: a SharedArrayBuffer of CONTROL.BYTES (input() needs it all) or at least 4 bytes.
  constructor(sab) {
    this.sab = sab;
    this.i32 = new Int32Array(sab, 0, Math.min(4, sab.byteLength >> 2));
    this.data = sab.byteLength >= CONTROL.BYTES ? new Uint8Array(sab, CONTROL.DATA, CONTROL.INPUT_BYTES) : null;
  }

  static create() { return new ControlBuffer(new SharedArrayBuffer(CONTROL.BYTES)); }

  get canAsk() { return this.data !== null; }
  get canWait() { return this.i32.length >= 2; }

  // ---- controller ------------------------------------------------------------------------------
  clear() {
    Atomics.store(this.i32, SIGNAL, 0);
    if (this.canAsk) Atomics.store(this.i32, SLOT_INPUT, INPUT.NONE);
  }

  interrupt() {
    Atomics.store(this.i32, SIGNAL, SIGINT);
    Atomics.notify(this.i32, SIGNAL);
    if (this.canAsk) Atomics.notify(this.i32, SLOT_INPUT);
  }

  // → true when the slot was empty (a FLUSH is now pending).
  requestFlush() { return Atomics.compareExchange(this.i32, SIGNAL, 0, FLUSH) === 0; }

  // The answer to input(): at most CONTROL.INPUT_BYTES of UTF-8, cut at a character boundary.
  answer(text) {
    const bytes = new TextEncoder().encode(String(text));
    let n = Math.min(bytes.length, this.data.length);
    while (n < bytes.length && n > 0 && (bytes[n] & 0xC0) === 0x80) n--;   // not inside a character
    this.data.set(bytes.subarray(0, n));
    Atomics.store(this.i32, INPUT_LEN, n);
    Atomics.store(this.i32, SLOT_INPUT, INPUT.ANSWER);
    Atomics.notify(this.i32, SLOT_INPUT);
  }

  eof() {
    Atomics.store(this.i32, SLOT_INPUT, INPUT.EOF);
    Atomics.notify(this.i32, SLOT_INPUT);
  }

  // ---- kernel ----------------------------------------------------------------------------------
  // Pyodide reads its interrupt buffer's [0] and then writes 0: one atomic exchange instead (a
  // plain read-then-clear loses ~4 % of signals), and nothing while Python is not running user code.
  take(armed) { return armed ? Atomics.exchange(this.i32, SIGNAL, 0) : 0; }

  pending() { return Atomics.load(this.i32, SIGNAL); }

  // Waits ms milliseconds, or less: → 'interrupt' when a SIGINT is pending and armed (the caller
  // raises KeyboardInterrupt), else 'done'.  A FLUSH that comes meanwhile is taken (the caller
  // flushed before waiting); due(): the time (performance.now()) at which the caller wants to be
  // woken to deliver output (or Infinity), onDue() is then called and the wait goes on.
  sleep(ms, { armed, due = () => Infinity, onDue = () => {} }) {
    const end = performance.now() + Math.max(0, ms);
    for (;;) {
      const v = Atomics.load(this.i32, SIGNAL);
      if (armed && v === SIGINT) return 'interrupt';
      if (v === FLUSH) { Atomics.compareExchange(this.i32, SIGNAL, FLUSH, 0); continue; }
      const now = performance.now();
      if (now >= end) return 'done';
      const at = due();
      if (now >= at) { onDue(); continue; }
      const left = Math.min(end, at) - now;
      // On SIGNAL only while it is empty and a SIGINT would count; else on a slot nobody writes.
      if (armed && v === 0) Atomics.wait(this.i32, SIGNAL, 0, left);
      else Atomics.wait(this.i32, QUIET, 0, left);
    }
  }

  // Blocks until the controller answers: → {text} | {eof: true} | {interrupt: true} (a SIGINT
  // pending while armed) | {eof: true, late: true} past maxMs (the controller never answered).
  waitInput(maxMs, { armed }) {
    const end = performance.now() + maxMs;
    for (;;) {
      const st = Atomics.load(this.i32, SLOT_INPUT);
      if (st === INPUT.ANSWER) {
        const n = Atomics.load(this.i32, INPUT_LEN);
        const copy = new Uint8Array(n);   // out of shared memory: TextDecoder refuses shared views
        copy.set(this.data.subarray(0, n));
        Atomics.store(this.i32, SLOT_INPUT, INPUT.NONE);
        return { text: new TextDecoder().decode(copy) };
      }
      if (st === INPUT.EOF) { Atomics.store(this.i32, SLOT_INPUT, INPUT.NONE); return { eof: true }; }
      const v = Atomics.load(this.i32, SIGNAL);
      if (armed && v === SIGINT) return { interrupt: true };
      if (v === FLUSH) { Atomics.compareExchange(this.i32, SIGNAL, FLUSH, 0); continue; }
      const left = end - performance.now();
      if (left <= 0) return { eof: true, late: true };
      Atomics.wait(this.i32, SLOT_INPUT, INPUT.NONE, left);
    }
  }

  // input() begins: no answer left over from an earlier wait counts.
  expectInput() { Atomics.store(this.i32, SLOT_INPUT, INPUT.NONE); }
}
