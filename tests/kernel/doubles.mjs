// doubles.mjs -- test doubles shared by the tests that check the supervisor's and the page
// session's rules without Pyodide (tests/fullstack/host.test.mjs, tests/e2e/ui-adapter-unit.test.mjs):
// FakeKernel stands in for worker/kernel-client.js's KernelClient (same members, scripted runs).
// The real kernel is what tests/kernel/*.test.mjs check.  Not a test itself.
//
// Code 'hang' runs until interrupted (then 'cancelled', namespace kept) or terminated; 'sleep'
// ignores interrupts (only terminate ends it); 'stuck' too, and says so when interrupted (a
// kernel awaiting a JS promise no interrupt reaches); 'die' makes the worker die by itself; 'oom'
// answers `crashed` itself (a kernel the worker found over its memory limit); 'stream' prints
// three chunks 40 ms apart (output events) and ends ok ('stream-slow': 150 ms); 'print-hang' prints one chunk, then hangs
// like 'sleep'; 'ask' asks for input (an input_request event) and prints the answer (or ends with
// EOFError on eof()); anything else ends ok at once, saying which kernel ran it, how many earlier
// runs that kernel saw (its namespace) and what it has mounted.
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
    this.runId = msg.run_id;
    if (msg.run_id !== 'warm-up') this.runs.push(msg.code);
    return new Promise((resolve) => {
      this.pending = { resolve, code: msg.code };
      setTimeout(() => {
        if (this.state === 'dead') return;
        this.emit({ event: 'started', ref: msg.run_id });
        if (msg.code === 'hang' || msg.code === 'sleep' || msg.code === 'stuck') return;
        const out = (text, offset) => this.emit({ event: 'output', ref: msg.run_id, stream: 'stdout', offset, text, truncated: false });
        if (msg.code === 'stream' || msg.code === 'stream-slow') {
          const gap = msg.code === 'stream' ? 40 : 150;
          ['one\n', 'two\n', 'three\n'].forEach((t, i, all) => setTimeout(() => {
            if (this.state === 'dead') return;
            out(t, all.slice(0, i).join('').length);
            if (i === 2) setTimeout(() => this.finish({ status: 'ok', stdout: all.join(''), stderr: '', files: [], notes: [] }), gap);
          }, gap * i));
          return;
        }
        if (msg.code === 'print-hang') { out('printed\n', 0); this.pending.code = 'sleep'; return; }
        if (msg.code === 'ask') {
          out('Name? ', 0);
          this.asking = msg.run_id;
          this.emit({ event: 'input_request', ref: msg.run_id, prompt: 'Name? ' });
          return;
        }
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
  answer(text) {
    if (!this.asking) return false;
    this.asking = null;
    setTimeout(() => this.finish({ status: 'ok', stdout: `Name? ${text}\n`, stderr: '', files: [], notes: [] }), 5);
    return true;
  }
  eof() {
    if (!this.asking) return false;
    this.asking = null;
    setTimeout(() => this.finish({ status: 'error', stdout: 'Name? ', stderr: '', files: [], notes: [], error: { type: 'EOFError', message: 'EOF when reading a line', traceback: '' } }), 5);
    return true;
  }
  interrupt() {
    if (this.pending && this.pending.code === 'stuck') { setTimeout(() => this.emit({ event: 'interrupt', ref: this.runId, stuck: true }), 5); return true; }
    if (!this.pending || this.pending.code === 'sleep') return !!this.pending;
    setTimeout(() => this.finish({ status: 'cancelled', stdout: '', stderr: '', files: [], notes: [], error: { type: 'KeyboardInterrupt' } }), 5);
    return true;
  }
  terminate(reason = 'crashed') { this.die(`kernel terminated (${reason})`, reason); }
  die(why, reason = 'crashed') {
    if (this.state === 'dead') return;
    this.state = 'dead';
    this.exitReason = reason;
    this.asking = null;
    if (this.pending) { const p = this.pending; this.pending = null; p.resolve({ status: reason, stdout: '', stderr: '', files: [], notes: [], exit: why }); }
    this.emit({ event: 'exit', reason, message: why });
  }
}
