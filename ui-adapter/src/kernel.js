// kernel.js -- the page's kernel supervisor: hosts the kernel Web Worker plus one pre-loaded spare,
// runs code on it, and enforces what the page owns (DESIGN.md "The kernel's life (page side)"):
//   - time limit, counted from when Python starts executing: the kernel is always replaced (the
//     worker is terminated, the spare swapped in, every mounted file remounted from the page's
//     in-memory copies) and the result says restarted + remounted;
//   - cancel: interrupt first (SharedArrayBuffer, when the page is cross-origin isolated) and keep
//     the namespace when Python stops within a short grace; otherwise replace the kernel the same way;
//   - a kernel that dies is reported `crashed` and replaced the same way;
//   - reset(): a fresh interpreter (chat switch), with no files mounted.
// It speaks to workers only through the adapter in kernel-port.js (the worker protocol lives in
// worker/protocol.js).  It does not fetch files, talk to the orchestrator or touch the DOM: the
// session (session.js) and the pages do.
//
//   loading ──first kernel ready──▶ ready ──run()──▶ busy ──result──▶ ready
//      │                              ▲               │
//      │                              │   time limit / crash / cancel not honoured
//      │                              └── replace() ◀─┘   (swap in spare, remount)
//      └── load failed ──▶ dead ──start()──▶ loading          any ──dispose()──▶ disposed
import { Emitter } from './emitter.js';
import { KernelPort } from './kernel-port.js';

export const KERNEL_STATES = ['idle', 'loading', 'ready', 'busy', 'dead', 'disposed'];
const NEXT = {
  idle: ['loading', 'disposed'],
  loading: ['ready', 'dead', 'disposed', 'loading'],
  ready: ['busy', 'loading', 'dead', 'disposed'],
  busy: ['ready', 'loading', 'dead', 'disposed'],
  dead: ['loading', 'disposed'],
  disposed: [],
};

export class KernelSupervisor extends Emitter {
  /**
   * @param {object} o
   * @param {string} o.workerUrl        module worker script (/worker/… or /worker-pypi/…)
   * @param {boolean} [o.pypi]          whether PyPI installs are allowed in this kernel
   * @param {boolean} [o.spare=true]    keep one pre-loaded spare kernel
   * @param {number} [o.cancelGraceMs]  how long an interrupt may take before the kernel is replaced
   * @param {number} [o.loadTimeoutMs]  a kernel not ready by then is dead (Pyodide hangs, not fails, under a bad CSP)
   * @param {(url: string, opts: object) => KernelPort} [o.createPort]  for tests
   */
  constructor({ workerUrl, pypi = false, spare = true, cancelGraceMs = 1000, loadTimeoutMs = 120_000, createPort } = {}) {
    super();
    this.workerUrl = workerUrl;
    this.pypi = pypi;
    this.useSpare = spare;
    this.cancelGraceMs = cancelGraceMs;
    this.loadTimeoutMs = loadTimeoutMs;
    this.createPort = createPort || ((url, opts) => new KernelPort(url, opts));
    this.state = 'idle';
    this.current = null;
    this.spare = null;
    this.files = new Map();      // name -> {name, bytes, sha256}: what every fresh kernel gets
    this.restarts = 0;
    this.lastRestartMs = null;
    this._active = null;         // {port, cancel: () => void}
    this._seq = 0;
  }

  setState(next, info = {}) {
    const prev = this.state;
    if (prev === next && next !== 'loading') return;
    if (!NEXT[prev].includes(next)) throw new Error(`kernel supervisor: ${prev} -> ${next} not allowed`);
    this.state = next;
    this.emit('state', { state: next, prev, ...info });
  }

  _spawn(role) {
    const port = this.createPort(this.workerUrl, { pypi: this.pypi, loadTimeoutMs: this.loadTimeoutMs, name: `kernel-${++this._seq}-${role}` });
    port.on('progress', (p) => { if (port === this.current) this.emit('progress', p); });
    port.on('exit', (e) => this._onExit(port, e));
    return port;
  }

  /** Load the first kernel (progress events), then the spare in the background. */
  async start() {
    if (this.state === 'disposed') throw new Error('disposed');
    if (this.current && this.state !== 'dead') return this.current.ready;
    this.setState('loading');
    const t0 = performance.now();
    this.current = this._spawn('main');
    try {
      await this.current.ready;
    } catch (e) {
      this.setState('dead', { error: e.message });
      throw e;
    }
    this.setState('ready', { loadMs: Math.round(performance.now() - t0) });
    this._ensureSpare();
    return undefined;
  }

  _ensureSpare() {
    if (!this.useSpare || this.spare || this.state === 'disposed') return;
    const spare = this._spawn('spare');
    this.spare = spare;
    // Once loaded, the spare runs one empty cell: a fresh kernel's first run pays one-time costs
    // (~7 ms measured), which this moves off the restart path.  `pass` leaves no name behind.
    spare.warm = spare.ready.then(() => spare.run({ code: 'pass', runId: 'warm-up' })).catch(() => {});
    spare.ready.then(() => { this._spareFailures = 0; }, () => {
      // A spare that fails to load is retried with a growing delay, three times at most in a row.
      if (this.spare === spare) this.spare = null;
      this._spareFailures = (this._spareFailures || 0) + 1;
      if (this._spareFailures < 3) setTimeout(() => this._ensureSpare(), 1000 * 2 ** this._spareFailures);
    });
  }

  /** Resolves when a spare kernel is loaded (at once when there is none to wait for). */
  async whenSpareReady() {
    while (this.useSpare && this.state !== 'disposed') {
      const s = this.spare;
      if (!s) { await new Promise((r) => setTimeout(r, 50)); continue; }
      try { await s.ready; return true; } catch { await new Promise((r) => setTimeout(r, 50)); }
    }
    return false;
  }

  _onExit(port, e) {
    if (port === this.spare) return;          // handled by its ready promise (_ensureSpare)
    if (port !== this.current) return;        // an old kernel we replaced
    if (this._active && this._active.port === port) { this._active.crashed(e); return; }
    // An idle, loaded kernel died: replace it quietly.  (A kernel that fails to LOAD is handled
    // by start()/replace(), which await its ready promise.)
    if (this.state === 'ready') this.replace('crashed').catch(() => {});
  }

  /**
   * Replace the current kernel by the spare (or a fresh one) and remount every file.
   * @returns {Promise<{ms: number, remounted: string[]}>}
   */
  async replace(reason) {
    const t0 = performance.now();
    const old = this.current;
    this.current = null;
    old?.terminate();
    this.setState('loading', { reason });
    let next = this.spare;
    this.spare = null;
    if (!next) next = this._spawn('main');
    this.current = next;
    try {
      await next.ready;
      await next.warm;
    } catch (e) {
      // The spare failed to load: try one fresh kernel before giving up.
      next.terminate();
      this.current = next = this._spawn('main');
      try { await next.ready; } catch (e2) { this.setState('dead', { error: e2.message }); throw e2; }
    }
    const remounted = [...this.files.keys()];
    if (remounted.length) await next.mountExactly([...this.files.values()]);
    const ms = performance.now() - t0;
    this.restarts++;
    this.lastRestartMs = ms;
    this.setState('ready');
    this.emit('restart', { reason, ms, remounted });
    this._ensureSpare();
    return { ms, remounted };
  }

  /** Fresh interpreter with no files (chat switch).  Files in `keep` stay mounted. */
  async reset(keep = []) {
    const kept = new Map([...this.files].filter(([n]) => keep.includes(n)));
    this.files = kept;
    return this.replace('reset');
  }

  /** Make `files` ({name, bytes, sha256}) mounted at /mnt/data in this kernel and every later one. */
  async mount(files) {
    const changed = files.filter((f) => this.files.get(f.name)?.sha256 !== f.sha256 || !f.sha256);
    for (const f of files) this.files.set(f.name, f);
    if (changed.length && this.current) await this.current.mount(changed);
    return changed.map((f) => f.name);
  }

  /** Remove files from /mnt/data (chat switch: the old chat's files). */
  async unmount(names) {
    for (const n of names) this.files.delete(n);
    if (this.current) await this.current.mountExactly([...this.files.values()]);
  }

  /**
   * Run code.  Resolves with a result object shaped like the page protocol's result body, plus
   * `files[i].bytes`, `duration_ms`, and `ms_to_next_ready` after a restart.  Never rejects for
   * Python errors (status 'error'); rejects only when no kernel can be had at all.
   * @param {{code: string, timeoutS?: number, files?: Array<{name, bytes, sha256?}>, limits?: object, notes?: string[]}} req
   */
  async run({ code, timeoutS = 60, files = [], limits = {}, notes = [], runId, pypi = true }) {
    if (this.state === 'idle' || this.state === 'dead') await this.start();
    while (this.state === 'loading') await new Promise((r) => this.once('state', r));
    if (this.state === 'busy') throw new Error('kernel busy: runs execute one at a time');
    if (this.state !== 'ready') throw new Error(`kernel ${this.state}`);
    if (files.length) await this.mount(files);
    const port = this.current;
    this.setState('busy');
    const t0 = performance.now();
    let tExec = null;
    let settle;
    const done = new Promise((r) => { settle = r; });
    let timer = null;
    const startTimer = () => {
      if (timer !== null) return;
      tExec = performance.now();
      this.emit('executing', { at: tExec });
      timer = setTimeout(() => { this.lastTimeoutAt = performance.now(); settle({ kind: 'timeout' }); }, timeoutS * 1000);
    };
    const offExec = port.on('executing', startTimer);
    this._active = {
      port,
      crashed: (e) => settle({ kind: 'crashed', error: e }),
      cancel: (replace) => settle({ kind: replace ? 'abort' : 'cancel' }),
    };
    port.run({ code, limits, pypi: this.pypi && pypi, runId }).then((result) => settle({ kind: 'result', result }),
      (error) => settle({ kind: 'crashed', error }));
    // Ports that cannot report "executing" start the clock at once.
    if (!port.reportsExecuting) startTimer();

    let out = await done;
    if (out.kind === 'cancel') {
      // Before Python starts the user's code the interrupt cannot land: send it as soon as it can.
      let offLate = null;
      if (!port.interrupt()) offLate = port.on('executing', () => { port.interrupt(); offLate?.(); });
      const graceful = await Promise.race([
        new Promise((r) => { settle = r; }).then((v) => v),
        new Promise((r) => setTimeout(() => r({ kind: 'grace-expired' }), this.cancelGraceMs)),
      ]);
      offLate?.();
      out = graceful.kind === 'result' ? { kind: 'cancelled-kept', result: graceful.result } : { kind: 'cancelled-replaced' };
    }
    clearTimeout(timer);
    offExec();
    this._active = null;
    const duration = Math.round(performance.now() - (tExec ?? t0));
    const base = { stdout: '', stderr: '', stdout_truncated: false, stderr_truncated: false, error: null,
      files: [], files_unlisted: 0, figures_dropped: 0, notes: [...notes], restarted: false, remounted: [] };

    if (out.kind === 'result') {
      this.setState('ready');
      return { ...base, ...out.result, notes: [...notes, ...(out.result.notes || [])], duration_ms: out.result.duration_ms ?? duration };
    }
    if (out.kind === 'cancelled-kept') {
      this.setState('ready');
      const r = out.result;
      return { ...base, ...r, status: 'cancelled', notes: [...notes, ...(r.notes || []), 'Cancelled: Python was interrupted; variables are kept.'], duration_ms: duration };
    }
    // Replace the kernel: time limit, crash, or a cancel the interpreter did not honour.
    if (out.kind === 'abort') out = { kind: 'cancelled-replaced' };
    const status = out.kind === 'timeout' ? 'timeout' : out.kind === 'crashed' ? 'crashed' : 'cancelled';
    const tHit = performance.now();
    const { ms, remounted } = await this.replace(status);
    const why = status === 'timeout' ? `The run reached the time limit (${timeoutS} s): the sandbox was restarted.`
      : status === 'crashed' ? `The sandbox stopped (${out.error?.message || 'worker died'}) and was restarted.`
        : 'Cancelled: Python did not stop in time, so the sandbox was restarted.';
    return { ...base, status, restarted: true, remounted,
      error: status === 'timeout' ? { type: 'TimeoutError', message: `Time limit of ${timeoutS} s reached`, traceback: '' }
        : status === 'crashed' ? { type: 'KernelCrashed', message: out.error?.message || 'kernel died', traceback: '' } : null,
      notes: [...notes, why, remounted.length ? `Files remounted in the fresh sandbox: ${remounted.join(', ')}.` : 'No files to remount.'],
      duration_ms: duration, restart_ms: Math.round(performance.now() - tHit), swap_ms: Math.round(ms) };
  }

  /**
   * Cancel the run in progress: interrupt first, replace the kernel if Python does not stop within
   * cancelGraceMs.  With {replace: true} the kernel is replaced at once (the orchestrator said so).
   */
  cancel({ replace = false } = {}) { this._active?.cancel(replace); }

  get crossOriginIsolated() { return !!globalThis.crossOriginIsolated; }

  dispose() {
    if (this.state === 'disposed') return;
    this.current?.terminate(); this.spare?.terminate();
    this.current = this.spare = null;
    this.setState('disposed');
  }
}
