// kernel-client.js -- the controller side of a kernel worker, for the browser page and the Node
// headless host alike (no Node or DOM imports here).  It owns one worker: sends the commands of
// worker/protocol.js, matches replies by id, writes interrupts into a SharedArrayBuffer, and
// terminates.  KernelPool keeps one pre-loaded spare so a restart costs milliseconds.
// It does not fetch chat files, talk to the orchestrator or enforce the time limit by itself
// (the page or host calls terminate('timeout') when its timer fires).
//
// API
//   const k = new KernelClient({createWorker, init, loadTimeoutMs?, interrupts?})
//       createWorker(): returns a browser Worker (module worker over worker/browser-worker.js) or a
//         Node worker_threads Worker (over worker/node-worker.js; see worker/node-kernel.js for
//         ready-made options).  Messages are read with .on('message') when the object has it,
//         else with addEventListener('message').
//       init: {indexURL, lockFileURL (absolute), packageBaseUrl, kernelURL, deploymentURL?}
//       interrupts: default true when SharedArrayBuffer is usable (crossOriginIsolated in browsers).
//   k.ready            Promise<info> — resolves once Pyodide, the kernel and the lock-down are in
//                      place: {pyodide, python, interrupts, load_ms, packages: {has, lacks}, lockdown}.
//                      Rejects (and the worker is terminated) on load failure or timeout.
//   k.state            'loading' | 'ready' | 'busy' | 'dead'
//   k.mount(files, {complete=true}) → Promise<{written, removed, kept, refused, mount_ms}>
//                      files: [{name, version, sha256, size, data: Uint8Array}] (data is copied
//                      once and the copy transferred: the caller keeps its bytes for remounts).
//                      Only new or changed files need data; unchanged ones are kept by version.
//   k.run({run_id, code, pypi, limits, files?}) → Promise<RunResult> (protocol.js).  When the
//                      worker is terminated or dies during the run, the promise resolves with
//                      status 'timeout' | 'cancelled' | 'crashed' (the reason given to terminate,
//                      'crashed' when it died by itself) and empty output.  On a kernel that is
//                      already dead it rejects (code 'dead'): ask the pool for the active one.
//   k.interrupt()      → true when SIGINT was written while Python runs user code (after the
//                      'started' event).  Python raises KeyboardInterrupt; run status 'cancelled'.
//   k.cancel({graceMs=2000}) → Promise<'idle'|'interrupted'|'terminated'>: interrupt, and
//                      terminate('cancelled') if the run has not ended within graceMs.
//   k.terminate(reason='crashed')  stops the worker now; pending commands settle.  Safe twice.
//   k.dispose()        → Promise: forget the namespace and files (the worker stays loaded).
//   k.onEvent(fn)      → unsubscribe function; fn(evt) for every side-channel event
//                      ({event: 'progress'|'started'|'packages'|'log', ref, ...}) and for
//                      {event: 'exit', reason} when the worker goes away.
//
//   const pool = new KernelPool(makeClient, {spare=true, spareDelayMs=250})
//       makeClient(): returns a new KernelClient (not yet ready).
//   pool.active()      → Promise<KernelClient> ready kernel (the spare is started beside it).
//   pool.mount(files, opts) → mounts on the active kernel and remembers the manifest with its bytes
//                      (copied once into SharedArrayBuffers where available: a remount after a
//                      restart then costs one copy inside the new worker, none on this thread).
//   pool.run(msg)      → active kernel's run.
//   pool.replace(reason='crashed') → Promise<{client, remounted: [names]}>: terminates the active
//                      kernel (its pending run resolves with status `reason`), swaps in the spare
//                      (or loads one), remounts the remembered files, starts a new spare.
//   pool.forgetMounts()  for a chat switch (then replace() gives a fresh interpreter, empty).
//   pool.dispose()     terminates both kernels.
import { CMD, EVENT, REPLY, SIGINT, STATUS } from './protocol.js';

// Life of a KernelClient (state written only by setState):
//
//     loading ──ready──▶ ready ◀──▶ busy        (busy while a mount or run is pending)
//        │                 │          │
//        └───────────────┴──────────┴──▶ dead  (terminate(), load failure/timeout, worker exit)
//
//   loading → ready   init reply ok                  (constructor's ready promise)
//   ready  ⇄ busy     first command sent / last reply (track)
//   any    → dead     terminate / worker error/exit  (settleAll); pending commands settle there
const KSTATE = Object.freeze({ LOADING: 'loading', READY: 'ready', BUSY: 'busy', DEAD: 'dead' });
const KALLOWED = { ready: ['loading', 'busy'], busy: ['ready'], dead: ['loading', 'ready', 'busy'] };

export class KernelClient {
  constructor({ createWorker, init, loadTimeoutMs = 60000, interrupts } = {}) {
    if (typeof createWorker !== 'function') throw new TypeError('KernelClient: createWorker is required');
    this.state = KSTATE.LOADING;
    this.nextId = 1;
    this.pending = new Map();        // id → {resolve, reject, cmd}
    this.listeners = new Set();
    this.running = null;             // run_id of the run whose user code is executing
    this.busyCount = 0;
    this.exitReason = null;
    const canShare = typeof SharedArrayBuffer === 'function' &&
      (typeof crossOriginIsolated === 'undefined' || crossOriginIsolated === true);
    this.sab = (interrupts ?? canShare) && canShare ? new SharedArrayBuffer(4) : null;
    this.ibuf = this.sab ? new Int32Array(this.sab) : null;
    this.worker = createWorker();
    const onMsg = (data) => this.onMessage(data);
    const onDeath = (why) => this.settleAll(this.exitReason || STATUS.CRASHED, why);
    if (typeof this.worker.on === 'function') {
      this.worker.on('message', onMsg);
      this.worker.on('error', (e) => onDeath(`worker error: ${e && e.message || e}`));
      this.worker.on('exit', (code) => onDeath(`worker exited (${code})`));
    } else {
      this.worker.addEventListener('message', (e) => onMsg(e.data));
      this.worker.addEventListener('error', (e) => onDeath(`worker error: ${e && e.message || 'unknown'}`));
    }
    // The worker bounds its own load; this timer (a little later) also catches a worker whose
    // thread is stuck and cannot even run its timer.
    let timer;
    const stuck = new Promise((_, reject) => {
      timer = setTimeout(() => reject(Object.assign(new Error(`kernel did not load within ${loadTimeoutMs} ms`), { code: 'load_timeout' })), loadTimeoutMs + 1000);
    });
    this.ready = Promise.race([this.send({ cmd: CMD.INIT, ...init, loadTimeoutMs, interruptBuffer: this.sab || undefined }), stuck])
      .finally(() => clearTimeout(timer))
      .then((r) => { if (this.state === KSTATE.LOADING) this.setState(KSTATE.READY); this.info = r.info; return r.info; },
        (e) => { this.terminate(STATUS.CRASHED); throw e; });
    this.ready.catch(() => {});
  }

  setState(next) {
    if (!(KALLOWED[next] || []).includes(this.state)) throw new Error(`KernelClient: ${this.state} -> ${next} not allowed`);
    this.state = next;
  }

  onEvent(fn) { this.listeners.add(fn); return () => this.listeners.delete(fn); }
  emit(evt) { for (const fn of this.listeners) { try { fn(evt); } catch { /* a listener's bug is not ours */ } } }

  onMessage(msg) {
    if (!msg || typeof msg !== 'object') return;
    if (msg.type === REPLY.EVENT) {
      if (msg.event === EVENT.STARTED) this.running = msg.ref;
      this.emit(msg);
      return;
    }
    const p = this.pending.get(msg.id);
    if (!p) return;
    this.pending.delete(msg.id);
    if (msg.type === REPLY.OK) p.resolve(msg);
    else p.reject(Object.assign(new Error(msg.message || 'kernel error'), { code: msg.code }));
  }

  send(msg, transfer = []) {
    if (this.state === KSTATE.DEAD) return Promise.reject(Object.assign(new Error(`kernel is dead (${this.exitReason})`), { code: 'dead' }));
    const id = this.nextId++;
    let entry;
    const p = new Promise((resolve, reject) => { entry = { resolve, reject, cmd: msg.cmd }; });
    entry.settled = p.then(() => {}, () => {});
    this.pending.set(id, entry);
    this.worker.postMessage({ ...msg, id }, transfer);
    return p;
  }

  async track(p) {
    this.busyCount++; if (this.state === KSTATE.READY) this.setState(KSTATE.BUSY);
    try { return await p; } finally {
      this.busyCount--; if (this.busyCount === 0 && this.state === KSTATE.BUSY) this.setState(KSTATE.READY);
    }
  }

  async mount(files, { complete = true } = {}) {
    await this.ready;
    const [copies, transfer] = copyForTransfer(files);
    const r = await this.track(this.send({ cmd: CMD.MOUNT, files: copies, complete }, transfer));
    const { id, type, ...rest } = r; return rest;
  }

  async run({ run_id, code, pypi = false, limits, files, complete } = {}) {
    await this.ready;
    if (this.ibuf) Atomics.store(this.ibuf, 0, 0);   // no stale signal reaches this run
    this.running = null;
    try {
      const [copies, transfer] = files ? copyForTransfer(files) : [undefined, []];
      const r = await this.track(this.send({ cmd: CMD.RUN, run_id, code, pypi, limits, files: copies, complete }, transfer));
      return r.result;
    } catch (e) {
      if (e && e.killed) return emptyResult(e.reason, e.message);
      throw e;
    } finally { this.running = null; }
  }

  interrupt() {
    if (!this.ibuf || this.running === null || this.state === KSTATE.DEAD) return false;
    Atomics.store(this.ibuf, 0, SIGINT);
    return true;
  }

  async cancel({ graceMs = 2000 } = {}) {
    if (this.state !== KSTATE.BUSY) return 'idle';
    const runs = [...this.pending.values()].filter((p) => p.cmd === CMD.RUN);
    if (this.interrupt()) {
      const runsDone = Promise.allSettled(runs.map((p) => p.settled));
      const ended = await Promise.race([runsDone.then(() => true), new Promise((res) => setTimeout(() => res(false), graceMs))]);
      if (ended && this.state !== KSTATE.DEAD) return 'interrupted';
    }
    if (runs.length || this.state === KSTATE.BUSY) { this.terminate(STATUS.CANCELLED); return 'terminated'; }
    return 'idle';
  }

  terminate(reason = STATUS.CRASHED) {
    if (this.state === KSTATE.DEAD) return;
    this.exitReason = reason;
    try { this.worker.terminate(); } catch { /* already gone */ }
    this.settleAll(reason, `kernel terminated (${reason})`);
  }

  settleAll(reason, why) {
    if (this.state === KSTATE.DEAD && this.pending.size === 0) return;
    if (this.state !== KSTATE.DEAD) this.setState(KSTATE.DEAD);
    this.exitReason = this.exitReason || reason;
    for (const [, p] of this.pending) p.reject(Object.assign(new Error(why), { code: 'dead', killed: true, reason: this.exitReason }));
    this.pending.clear();
    this.emit({ event: 'exit', reason: this.exitReason, message: why });
  }

  async dispose() {
    if (this.state === KSTATE.DEAD) return;
    await this.ready;
    await this.send({ cmd: CMD.DISPOSE });
  }
}

// The caller keeps its bytes (for remounts after a restart): each file's data is copied once
// here and the copy is transferred, which costs one memcpy instead of structured cloning (about
// 5× slower for 100 MB here), and the worker's FS takes the copy without another.
function copyForTransfer(files) {
  const transfer = [];
  const copies = files.map((f) => {
    if (!f.data || isShared(f.data)) return f;   // shared memory crosses without a copy
    const data = f.data.slice();
    transfer.push(data.buffer);
    return { ...f, data };
  });
  return [copies, transfer];
}

const isShared = (u8) => typeof SharedArrayBuffer === 'function' && u8.buffer instanceof SharedArrayBuffer;

// Copies files' bytes into shared memory (where it can be had), so every later remount shares
// them with the worker instead of copying on this thread.
export function toSharedFiles(files) {
  const ok = typeof SharedArrayBuffer === 'function' &&
    (typeof crossOriginIsolated === 'undefined' || crossOriginIsolated === true);
  if (!ok) return files;
  return files.map((f) => {
    if (!f.data || isShared(f.data)) return f;
    const data = new Uint8Array(new SharedArrayBuffer(f.data.length));
    data.set(f.data);
    return { ...f, data };
  });
}

function emptyResult(status, message) {
  return { status, stdout: '', stderr: '', stdout_truncated: false, stderr_truncated: false,
    error: status === STATUS.CRASHED ? { type: 'KernelCrashed', message, traceback: '' } : null,
    files: [], files_unlisted: 0, figures_dropped: 0,
    notes: [status === STATUS.TIMEOUT ? 'the run hit the time limit; the sandbox was restarted'
      : status === STATUS.CANCELLED ? 'the run was cancelled; the sandbox was restarted'
        : `the sandbox stopped: ${message}`],
    restarted: false, remounted: [] };
}

export class KernelPool {
  constructor(makeClient, { spare = true, spareDelayMs = 250 } = {}) {
    this.makeClient = makeClient;
    this.spareDelayMs = spareDelayMs;
    this.wantSpare = spare;
    this.current = null;
    this.spare = null;
    this.mounts = null;          // last manifest mounted (with bytes), remounted on replace
    this.disposed = false;
  }

  startSpare() {
    if (this.wantSpare && !this.spare && !this.disposed) {
      this.spare = this.makeClient();
      this.spare.ready.catch(() => { this.spare = null; });
    }
  }

  async active() {
    if (!this.current || this.current.state === 'dead') {
      if (this.current) { await this.replace(STATUS.CRASHED); } else { this.current = this.makeClient(); }
    }
    await this.current.ready;
    this.startSpare();
    return this.current;
  }

  async mount(files, opts = {}) {
    const k = await this.active();
    const kept = toSharedFiles(files);     // one copy now; remounts then share it with the worker
    const r = await k.mount(kept, opts);
    this.mounts = { files: kept, opts };
    return r;
  }

  async run(msg) { return (await this.active()).run(msg); }

  forgetMounts() { this.mounts = null; }

  async replace(reason = STATUS.CRASHED) {
    if (this.current) this.current.terminate(reason);
    let next = this.spare;
    this.spare = null;
    if (!next || next.state === 'dead') next = this.makeClient();
    this.current = next;
    await next.ready;
    let remounted = [];
    if (this.mounts) {
      const r = await next.mount(this.mounts.files, this.mounts.opts);
      remounted = [...r.written, ...r.kept];
    }
    // The next spare starts a moment later: creating a worker and loading Pyodide would compete
    // for the CPU with the run the caller is about to start on the kernel just swapped in.
    setTimeout(() => this.startSpare(), this.spareDelayMs);
    return { client: next, remounted };
  }

  dispose() {
    this.disposed = true;
    for (const k of [this.current, this.spare]) if (k) k.terminate(STATUS.CANCELLED);
    this.current = this.spare = null;
  }
}
