// kernel-client.js -- the controller side of one kernel worker, for the browser page and the Node
// headless host alike (no Node or DOM imports here).  It owns one worker: sends the commands of
// worker/protocol.js, matches replies by id, writes interrupts, flush signals and input() answers
// into the control buffer it shares with the worker (control.js), and terminates.  While a run
// executes it posts a flush signal every `flushMs` (the kernel then hands on what Python printed:
// live output without Python's cooperation).  It has no policy: the time limit, the cancel
// ladder, spares and remounts are the supervisor's (supervisor.js, over pool.js); the words a user
// reads are notes.js's.
//
// API
//   const k = new KernelClient({createWorker, init, loadTimeoutMs?, interrupts?})
//       createWorker(): returns a browser Worker (module worker over ui-adapter/src/kernel-worker.js)
//         or a Node worker_threads Worker (over worker/node-worker.js or host/sandbox-worker.js; see
//         worker/node-kernel.js).  Messages are read with .on('message') when the object has it,
//         else with addEventListener('message').
//       init: {indexURL, lockFileURL (absolute), packageBaseUrl, kernelURL, deploymentURL?, …}, or
//             a promise of it (the worker is made at once; init goes when the promise settles)
//       interrupts: default true when SharedArrayBuffer is usable (crossOriginIsolated in browsers).
//   k.ready            Promise<info> — resolves once Pyodide, the kernel and the lock-down are in
//                      place: {pyodide, python, interrupts, load_ms, packages: {has, lacks}, lockdown}.
//                      Rejects (and the worker is terminated) on load failure or timeout.
//   k.state            'loading' | 'ready' | 'busy' | 'dead'
//   k.mount(files, {complete=true}) → Promise<{written, removed, kept, refused, mount_ms}>
//                      files: [{name, version, sha256, size, data?: Uint8Array}].  Bytes in a
//                      SharedArrayBuffer cross as they are; others are copied once and the copy
//                      transferred (the caller keeps its bytes for remounts).  Only new or changed
//                      files need data; unchanged ones are kept by (version, sha256).
//   k.run({run_id, code, pypi, limits, files?}) → Promise<RunResult> (protocol.js).  When the
//                      worker is terminated or dies during the run, the promise resolves with
//                      status = the reason given to terminate ('crashed' when it died by itself),
//                      empty output, error null and `exit` = what happened: the supervisor words it.
//                      On a kernel that is already dead it rejects (code 'dead').
//   k.interrupt()      → true when SIGINT was written while Python runs user code (after the
//                      'started' event).  Python raises KeyboardInterrupt (also in time.sleep,
//                      asyncio.sleep and input()); run status 'cancelled'.  A run that awaits
//                      something no interrupt reaches (a JS promise) is reported by an event
//                      {event: 'interrupt', ref, stuck: true}.
//   k.answer(text) / k.eof()   the answer to the input() the running run waits for (its
//                      'input_request' event), or EOF (input() raises EOFError).  → false when
//                      there is no shared memory (input() raised EOFError at once already).
//   k.canAsk           whether input() can wait for an answer here (shared memory).
//   k.canInterrupt     whether an interrupt can reach this kernel's Python at all (shared memory):
//                      false in a page without SharedArrayBuffer, where only terminate() stops it.
//   k.running          the run_id whose user code is executing (between 'started' and the reply).
//   k.terminate(reason='crashed')  stops the worker now; pending commands settle.  Safe twice.
//   k.dispose()        → Promise: forget the namespace and files (the worker stays loaded).
//   k.onEvent(fn)      → unsubscribe function; fn(evt) for every side-channel event
//                      ({event: 'progress'|'started'|'packages'|'log'|'output'|'display'|
//                      'input_request', ref, ...}) and for {event: 'exit', reason, message, oom}
//                      when the worker goes away (oom: a Node worker over its heap limit).
import { CMD, EVENT, OUTPUT_BATCH, REPLY, STATUS, runResult, transferables } from './protocol.js';
import { ControlBuffer } from './control.js';
import { Fsm, machine } from './fsm.js';

// Life of a KernelClient:
//
//     loading ──ready──▶ ready ◀──▶ busy        (busy while a mount or run is pending)
//        │                 │          │
//        └─────────────────┴──────────┴──▶ dead  (terminate(), load failure/timeout, worker exit)
//
//   loading → ready   init reply ok                  (constructor's ready promise)
//   ready  ⇄ busy     first command sent / last reply (track)
//   any    → dead     terminate / worker error/exit  (settleAll); pending commands settle there
const LIFE = machine('kernel client', {
  loading: [], ready: ['loading', 'busy'], busy: ['ready'], dead: ['loading', 'ready', 'busy'],
});
let clients = 0;

export class KernelClient {
  /**
   * @param {object} o
   * @param {() => Worker} o.createWorker   makes the kernel's worker
   * @param {object} [o.init]               the init command's fields (protocol.js CMD.INIT)
   * @param {number} [o.loadTimeoutMs=60000]
   * @param {object} [o.interrupts]         the shared control buffer, where the page has one
   * @param {number} [o.flushMs]            how often a flush is signalled while user code runs
   */
  constructor({ createWorker, init, loadTimeoutMs = 60000, interrupts, flushMs = OUTPUT_BATCH.ms } = {}) {
    if (typeof createWorker !== 'function') throw new TypeError('KernelClient: createWorker is required');
    this.fsm = new Fsm(LIFE, 'loading', { id: `k${++clients}` });
    this.nextId = 1;
    this.pending = new Map();        // id → {resolve, reject, cmd}
    this.listeners = new Set();
    this.running = null;             // run_id of the run whose user code is executing
    this.busyCount = 0;
    this.exitReason = null;
    this.oom = false;
    this.flushMs = flushMs;
    this.flusher = null;
    const canShare = typeof SharedArrayBuffer === 'function' &&
      (typeof crossOriginIsolated === 'undefined' || crossOriginIsolated === true);
    this.control = (interrupts ?? canShare) && canShare ? ControlBuffer.create() : null;
    this.worker = createWorker();
    const onMsg = (data) => this.onMessage(data);
    // A worker that reports an uncaught error is done for: terminated, so it cannot linger.
    const onDeath = (why) => { this.settleAll(this.exitReason || STATUS.CRASHED, why); try { this.worker.terminate(); } catch { /* gone */ } };
    if (typeof this.worker.on === 'function') {
      this.worker.on('message', onMsg);
      // A Node worker's uncaught error comes on another channel than its messages, and can
      // overtake the output it posted just before it died: the run is settled at 'exit', which
      // Node emits once the worker's messages are delivered (or a second later, if it never comes).
      let died = null;
      this.worker.on('error', (e) => {
        if (e && e.code === 'ERR_WORKER_OUT_OF_MEMORY') this.oom = true;
        if (died) return;
        died = `worker error: ${e && e.message || e}`;
        setTimeout(() => onDeath(died), 1000).unref?.();
      });
      this.worker.on('exit', (code) => onDeath(died || `worker exited (${code})`));
    } else {
      this.worker.addEventListener('message', (e) => onMsg(e.data));
      // Handled here: the page never reports it as its own unhandled error.
      // (Its error event and its messages are separate tasks too: the messages first.)
      this.worker.addEventListener('error', (e) => { if (e && e.preventDefault) e.preventDefault(); const why = `worker error: ${e && e.message || 'unknown'}`; setTimeout(() => onDeath(why), 100); });
    }
    // The worker bounds its own load; this timer (a little later) also catches a worker whose
    // thread is stuck and cannot even run its timer.
    let timer;
    const stuck = new Promise((_, reject) => {
      timer = setTimeout(() => reject(Object.assign(new Error(`kernel did not load within ${loadTimeoutMs} ms`), { code: 'load_timeout' })), loadTimeoutMs + 1000);
    });
    const sendInit = (fields) => {
      const m = { cmd: CMD.INIT, ...fields, loadTimeoutMs, interruptBuffer: this.control ? this.control.sab : undefined };
      return this.send(m, transferables(m));
    };
    this.ready = Promise.race([Promise.resolve(init).then(sendInit), stuck])
      .finally(() => clearTimeout(timer))
      .then((r) => { if (this.fsm.is('loading')) this.fsm.set('ready'); this.info = r.info; return r.info; },
        (e) => { this.terminate(STATUS.CRASHED); throw e; });
    this.ready.catch(() => {});
  }

  get state() { return this.fsm.state; }
  get id() { return this.fsm.id; }
  get canAsk() { return !!this.control && this.control.canAsk; }
  get canInterrupt() { return !!this.control; }

  onEvent(fn) { this.listeners.add(fn); return () => this.listeners.delete(fn); }
  emit(evt) { for (const fn of this.listeners) { try { fn(evt); } catch { /* a listener's bug is not ours */ } } }

  onMessage(msg) {
    if (!msg || typeof msg !== 'object') return;
    if (msg.type === REPLY.EVENT) {
      if (msg.event === EVENT.STARTED) { this.running = msg.ref; this.startFlushing(); }
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
    if (this.fsm.is('dead')) return Promise.reject(Object.assign(new Error(`kernel is dead (${this.exitReason})`), { code: 'dead' }));
    const id = this.nextId++;
    let entry;
    const p = new Promise((resolve, reject) => { entry = { resolve, reject, cmd: msg.cmd }; });
    entry.settled = p.then(() => {}, () => {});
    this.pending.set(id, entry);
    this.worker.postMessage({ ...msg, id }, transfer);
    return p;
  }

  async track(p) {
    this.busyCount++; if (this.fsm.is('ready')) this.fsm.set('busy');
    try { return await p; } finally {
      this.busyCount--; if (this.busyCount === 0 && this.fsm.is('busy')) this.fsm.set('ready');
    }
  }

  async mount(files, { complete = true } = {}) {
    await this.ready;
    const [copies, transfer] = copyForTransfer(files);
    const r = await this.track(this.send({ cmd: CMD.MOUNT, files: copies, complete }, transfer));
    const { id, type, ...rest } = r; return rest;
  }

  /** @param {{run_id: string, code: string, pypi?: boolean, limits?: object, files?: object[], complete?: boolean}} job */
  async run({ run_id, code, pypi = false, limits, files, complete } = {}) {
    await this.ready;
    if (this.control) this.control.clear();   // no stale signal or answer reaches this run
    this.running = null;
    try {
      const [copies, transfer] = files ? copyForTransfer(files) : [undefined, []];
      const r = await this.track(this.send({ cmd: CMD.RUN, run_id, code, pypi, limits, files: copies, complete }, transfer));
      return r.result;
    } catch (e) {
      if (e && e.killed) return killedResult(e.reason, e.message, this.oom);
      throw e;
    } finally { this.running = null; this.stopFlushing(); }
  }

  // While user code runs: a flush signal every flushMs (into an empty slot only).
  startFlushing() {
    this.stopFlushing();
    if (!this.control || !this.flushMs) return;
    this.flusher = setInterval(() => this.control.requestFlush(), this.flushMs);
    if (typeof this.flusher === 'object' && this.flusher.unref) this.flusher.unref();
  }

  stopFlushing() { clearInterval(this.flusher); this.flusher = null; }

  interrupt() {
    if (!this.control || this.running === null || this.fsm.is('dead')) return false;
    const ref = this.running;
    this.control.interrupt();
    // Python awaiting (the worker's event loop free) reads this message at once.
    this.send({ cmd: CMD.INTERRUPT }).then((r) => {
      if (r.stuck && this.running === ref) this.emit({ event: 'interrupt', ref, stuck: true });
    }, () => {});
    return true;
  }

  answer(text) {
    if (!this.canAsk || this.running === null) return false;
    this.control.answer(text);
    return true;
  }

  eof() {
    if (!this.canAsk || this.running === null) return false;
    this.control.eof();
    return true;
  }

  terminate(reason = STATUS.CRASHED) {
    if (this.fsm.is('dead')) return;
    this.exitReason = reason;
    try { this.worker.terminate(); } catch { /* already gone */ }
    this.settleAll(reason, `kernel terminated (${reason})`);
  }

  settleAll(reason, why) {
    this.stopFlushing();
    if (this.fsm.is('dead') && this.pending.size === 0) return;
    if (!this.fsm.is('dead')) this.fsm.set('dead', why);
    this.exitReason = this.exitReason || reason;
    for (const [, p] of this.pending) p.reject(Object.assign(new Error(why), { code: 'dead', killed: true, reason: this.exitReason }));
    this.pending.clear();
    this.emit({ event: 'exit', reason: this.exitReason, message: why, oom: this.oom });
  }

  async dispose() {
    if (this.fsm.is('dead')) return;
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

// The bytes in shared memory where it can be had (one copy now), else as they are: a remount
// after a restart then shares them with the new worker instead of copying on this thread.
export function shareBytes(u8) {
  const ok = typeof SharedArrayBuffer === 'function' &&
    (typeof crossOriginIsolated === 'undefined' || crossOriginIsolated === true);
  if (!ok || !u8 || isShared(u8)) return u8;
  const data = new Uint8Array(new SharedArrayBuffer(u8.length));
  data.set(u8);
  return data;
}

// A run cut short by terminate() or the worker's death: no output of its own, no wording (the
// supervisor adds the error and notes from notes.js).
function killedResult(status, exit, oom) { return runResult(status, { exit, oom }); }
