// doubles.mjs -- test doubles shared by the tests that check the supervisor's and the page
// session's rules without Pyodide (tests/fullstack/host.test.mjs, tests/e2e/ui-adapter-unit.test.mjs):
// FakeKernel stands in for worker/kernel-client.js's KernelClient (same members, scripted runs).
// The real kernel is what tests/kernel/*.test.mjs check.  Not a test itself.
//
// Code 'hang' runs until interrupted (then 'cancelled', namespace kept) or terminated; 'sleep'
// ignores interrupts (only terminate ends it); 'die' makes the worker die by itself; 'oom' answers
// `crashed` itself (a kernel the worker found over its memory limit); anything else
// ends ok at once, saying which kernel ran it, how many earlier runs that kernel saw (its
// namespace) and what it has mounted.
let kernelSeq = 0;
export class FakeKernel {
  constructor() {
    this.n = ++kernelSeq;
    this.state = 'loading';
    this.listeners = new Set();
    this.mounted = new Map();
    this.vars = new Set();
    this.ready = Promise.resolve().then(() => { this.state = 'ready'; return {}; });
    this.runs = [];
    this.pending = null;
    this.exitReason = null;
  }
  onEvent(fn) { this.listeners.add(fn); return () => this.listeners.delete(fn); }
  emit(e) { for (const fn of [...this.listeners]) fn(e); }
  async mount(files, { complete = true } = {}) {
    const written = [], kept = [];
    for (const f of files) (this.mounted.get(f.name) === f.sha256 ? kept : written).push(f.name);
    if (complete) for (const n of [...this.mounted.keys()]) if (!files.some((f) => f.name === n)) this.mounted.delete(n);
    for (const f of files) this.mounted.set(f.name, f.sha256);
    return { written, kept, removed: [], refused: [] };
  }
  run(msg) {
    if (this.state === 'dead') return Promise.reject(Object.assign(new Error('dead'), { code: 'dead' }));
    this.state = 'busy';
    if (msg.run_id !== 'warm-up') this.runs.push(msg.code);
    return new Promise((resolve) => {
      this.pending = { resolve, code: msg.code };
      setTimeout(() => {
        if (this.state === 'dead') return;
        this.emit({ event: 'started', ref: msg.run_id });
        if (msg.code === 'hang' || msg.code === 'sleep') return;
        if (msg.code === 'die') { this.die('worker exited (1)'); return; }
        if (msg.code === 'oom') {   // what host/sandbox-worker.js answers for a kernel left over its memory limit
          this.finish({ status: 'crashed', stdout: 'kept\n', stderr: '', files: [], notes: ['over its limit'], error: { type: 'MemoryError', message: 'out of memory', traceback: '' } });
          return;
        }
        const vars = [...this.vars];
        if (msg.run_id !== 'warm-up') this.vars.add(msg.code);
        setTimeout(() => this.finish({ status: 'ok', stdout: `kernel ${this.n} saw ${vars.length} earlier runs; mounted ${[...this.mounted.keys()].sort().join(',')}`,
          stderr: '', files: [], notes: [] }), 5);
      }, 1);
    });
  }
  finish(result) {
    const p = this.pending;
    if (!p) return;
    this.pending = null;
    if (this.state !== 'dead') this.state = 'ready';
    p.resolve(result);
  }
  interrupt() {
    if (!this.pending || this.pending.code === 'sleep') return !!this.pending;
    setTimeout(() => this.finish({ status: 'cancelled', stdout: '', stderr: '', files: [], notes: [], error: { type: 'KeyboardInterrupt' } }), 5);
    return true;
  }
  terminate(reason = 'crashed') { this.die(`kernel terminated (${reason})`, reason); }
  die(why, reason = 'crashed') {
    if (this.state === 'dead') return;
    this.state = 'dead';
    this.exitReason = reason;
    if (this.pending) { const p = this.pending; this.pending = null; p.resolve({ status: reason, stdout: '', stderr: '', files: [], notes: [], exit: why }); }
    this.emit({ event: 'exit', reason, message: why });
  }
}
