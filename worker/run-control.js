// run-control.js -- RunControl: one run as the kernel supervisor (supervisor.js) watches it, from
// the moment it is handed to a kernel until its result: the time limit, the cancel ladder's
// interrupt and grace, the wait for input(), and what the kernel streamed meanwhile (output,
// displays), so that every ending keeps what was printed — a run the supervisor had to kill
// (time limit, a cancel Python did not honour, a crash) reports the output received up to then.
//
// It does not replace kernels or word results (the supervisor does, from notes.js) and talks to no
// orchestrator.
//
// Life of one supervised run:
//
//     starting ──'started' event──▶ executing ⇄ waiting_input ──result / killed──▶ ended
//        │                            │              │
//        └──────── cancel() ──────────┴──────────────┴──▶ stopping (interrupt sent, or due at
//                                                          'started'; grace timer: then terminate) ──▶ ended
//   (a kernel with no interrupt buffer, a page without SharedArrayBuffer, is terminated at once)
//
//   starting → executing            onStarted (the time limit's timer is armed)
//   executing → waiting_input       onInputRequest (the time limit's timer pauses, the input wait's starts)
//   waiting_input → executing       answer() / the input wait ran out (EOF; the time limit goes on
//                                   with the time it had left)
//   starting|executing|waiting_input → stopping   cancel()
//   any → ended                     end() (the kernel answered or was terminated)
import { Fsm, machine } from './fsm.js';
import { NOTE } from './notes.js';
import { codePoints } from './output.js';
import { LIMITS, STATUS } from './protocol.js';

const RUN = machine('supervised run', {
  starting: [],
  executing: ['starting', 'waiting_input'],
  waiting_input: ['executing'],
  stopping: ['starting', 'executing', 'waiting_input'],
  ended: ['starting', 'executing', 'waiting_input', 'stopping'],
});

const stream = () => ({ text: '', chars: 0, truncated: false });

export class RunControl {
  // graceMs() → the cancel grace (read at cancel time); emit(type, ev): the supervisor's events;
  // onLimit(): the time limit fired.
  constructor({ kernel, runId, timeoutS, inputWaitS = LIMITS.input_wait_s, graceMs, emit, onLimit = () => {} }) {
    this.kernel = kernel;
    this.runId = runId;
    this.timeoutS = timeoutS;
    this.inputWaitS = inputWaitS;
    this.graceMs = graceMs;        // () → ms
    this.emit = emit;
    this.onLimit = onLimit;
    this.fsm = new Fsm(RUN, 'starting', { id: runId });
    this.startedAt = null;
    this.limitTimer = null;
    this.limitLeftMs = timeoutS * 1000;
    this.stretchAt = null;         // when the time limit's current stretch began
    this.inputTimer = null;
    this.graceTimer = null;
    this.timedOut = false;
    this.cancelAsked = false;
    this.replaceAsked = false;
    this.quick = false;            // replace at once when the interrupt cannot reach Python
    this.uninterruptible = false;  // cancelled by replacing at once: the kernel takes no interrupt
    this.out = { stdout: stream(), stderr: stream() };
    this.displays = [];
    this.notes = [];
  }

  get state() { return this.fsm.state; }

  // The kernel's `started` event for this run: the time limit starts now.
  onStarted(at) {
    if (this.fsm.is('ended') || this.startedAt !== null) return;
    this.startedAt = at;
    this.armLimit();
    if (this.fsm.is('starting')) this.fsm.set('executing');
    else if (this.fsm.is('stopping')) this.kernel.interrupt();   // the cancel came before Python ran
  }

  armLimit() {
    this.stretchAt = performance.now();
    this.limitTimer = setTimeout(() => this.onTimeLimit(), Math.max(0, this.limitLeftMs));
  }

  pauseLimit() {
    clearTimeout(this.limitTimer);
    this.limitTimer = null;
    this.limitLeftMs -= performance.now() - this.stretchAt;
  }

  onTimeLimit() {
    if (this.fsm.is('ended')) return;
    this.timedOut = true;
    this.onLimit();
    this.kernel.terminate(STATUS.TIMEOUT);
  }

  // ---- what the kernel streams ---------------------------------------------------------------
  // A chunk is kept when it continues the stream (the kernel sends them in order, once each).
  onOutput(e) {
    const s = this.out[e.stream];
    if (!s || e.offset !== s.chars || this.fsm.is('ended')) return false;
    s.text += e.text;
    s.chars += codePoints(e.text);
    s.truncated = s.truncated || !!e.truncated;
    return true;
  }

  onDisplay(e) {
    if (e.index !== this.displays.length || this.fsm.is('ended')) return false;
    this.displays.push(e.data);
    return true;
  }

  onInputRequest(e) {
    if (!this.fsm.is('executing')) return false;
    this.pauseLimit();
    this.fsm.set('waiting_input', 'input()');
    this.inputTimer = setTimeout(() => this.onInputTimeout(), this.inputWaitS * 1000);
    this.emit('input_request', { run_id: this.runId, prompt: e.prompt });
    return true;
  }

  // → true when the answer went to the kernel (the run was waiting for it).
  answer(text) {
    if (!this.fsm.is('waiting_input') || !this.kernel.answer(text)) return false;
    this.resume('answered');
    return true;
  }

  onInputTimeout() {
    if (!this.fsm.is('waiting_input')) return;
    this.kernel.eof();
    this.notes.push(NOTE.inputTimedOut(this.inputWaitS));
    this.resume('eof');
  }

  resume(how) {
    clearTimeout(this.inputTimer);
    this.inputTimer = null;
    this.fsm.set('executing', how);
    this.armLimit();
    this.emit('input_end', { run_id: this.runId, how });
  }

  // ---- stopping ------------------------------------------------------------------------------
  // replace: at once (the orchestrator gave up); quick: at once when the kernel says no
  // interrupt reaches its Python (a newer attempt waits for this one to stop).
  cancel(replace, quick = false) {
    if (this.fsm.is('ended')) return;
    this.cancelAsked = true;
    this.quick = this.quick || quick;
    if (replace) { this.replaceAsked = true; this.kernel.terminate(STATUS.CANCELLED); return; }
    // No interrupt can reach Python (no shared memory): waiting out the grace would only delay
    // the replacement that must come.
    if (this.kernel.canInterrupt === false) { this.uninterruptible = true; this.kernel.terminate(STATUS.CANCELLED); return; }
    if (this.fsm.is('stopping')) return;
    const waited = this.fsm.is('waiting_input');
    this.fsm.set('stopping');
    if (waited) { clearTimeout(this.inputTimer); this.emit('input_end', { run_id: this.runId, how: 'stopped' }); }
    if (this.startedAt !== null) this.kernel.interrupt();
    this.graceTimer = setTimeout(() => { if (!this.fsm.is('ended')) this.kernel.terminate(STATUS.CANCELLED); }, this.graceMs());
  }

  // The kernel's answer to the interrupt: its Python awaits something no interrupt reaches.
  onStuck() {
    if (this.quick && this.fsm.is('stopping')) this.kernel.terminate(STATUS.CANCELLED);
  }

  end() {
    clearTimeout(this.limitTimer);
    clearTimeout(this.graceTimer);
    clearTimeout(this.inputTimer);
    this.fsm.set('ended');
  }

  // What a killed run reports: the output and displays received, with the cut notes.
  received(cap = LIMITS.out_chars) {
    const o = this.out;
    const notes = [];
    if (o.stdout.truncated) notes.push(NOTE.cut('stdout', cap));
    if (o.stderr.truncated) notes.push(NOTE.cut('stderr', cap));
    return { stdout: o.stdout.text, stderr: o.stderr.text, stdout_truncated: o.stdout.truncated,
      stderr_truncated: o.stderr.truncated, displays: this.displays.slice(), notes };
  }
}

