// kernel-port.js -- one kernel Web Worker seen from the page: spawns the module worker, loads
// Python in it (ready promise, progress events), and turns the worker's messages into promises
// (replies matched to requests by id) and events ('executing', 'progress', 'exit').  It owns the
// worker's interrupt buffer (SharedArrayBuffer when the page is cross-origin isolated).  This is
// the only file that knows the worker's message contract; the supervisor (kernel.js) decides what
// to do with kernels.  It never gives the worker a page credential.
import { Emitter } from './emitter.js';

export class KernelPort extends Emitter {
  constructor(url, { pypi = false, loadTimeoutMs = 120_000, name = 'kernel' } = {}) {
    super();
    this.url = url;
    this.name = name;
    this.pypi = pypi;
    this.reportsExecuting = true;
    this._next = 1;
    this._pending = new Map();
    this.dead = false;
    this.interrupt_ = globalThis.crossOriginIsolated ? new Int32Array(new SharedArrayBuffer(4)) : null;
    this.worker = new Worker(url, { type: 'module', name });
    this.worker.onmessage = (ev) => this._onMessage(ev.data);
    this.worker.onerror = (ev) => this._die(new Error(ev.message || 'worker error'));
    this.worker.onmessageerror = () => this._die(new Error('worker message error'));
    const timeout = new Promise((_, rej) => {
      this._loadTimer = setTimeout(() => rej(new Error(`Python did not load within ${loadTimeoutMs / 1000} s`)), loadTimeoutMs);
    });
    this.ready = Promise.race([this._call('init', { interruptBuffer: this.interrupt_ ? this.interrupt_.buffer : null, pypi }), timeout])
      .finally(() => clearTimeout(this._loadTimer));
    this.ready.catch((e) => this._die(e));
  }

  _call(cmd, args = {}, transfer = []) {
    if (this.dead) return Promise.reject(new Error('kernel is dead'));
    const id = this._next++;
    return new Promise((resolve, reject) => {
      this._pending.set(id, { resolve, reject, cmd });
      this.worker.postMessage({ id, cmd, ...args }, transfer);
    });
  }

  _onMessage(m) {
    if (!m || typeof m !== 'object') return;
    if (m.type === 'progress') { this.emit('progress', m); return; }
    if (m.type === 'executing') { this.emit('executing', m); return; }
    const p = this._pending.get(m.id);
    if (!p) return;
    this._pending.delete(m.id);
    if (m.type === 'error') p.reject(new Error(m.message));
    else p.resolve(m.result ?? m);
  }

  _die(err) {
    if (this.dead) return;
    this.dead = true;
    for (const p of this._pending.values()) p.reject(err);
    this._pending.clear();
    try { this.worker.terminate(); } catch { /* gone */ }
    this.emit('exit', err);
  }

  mount(files) {
    // Copies: the page keeps its own bytes for the next remount.
    return this._call('mount', { files: files.map((f) => ({ name: f.name, bytes: f.bytes.slice() })) });
  }
  unmount(names) { return this._call('unmount', { names }); }
  run({ code, limits, pypi }) {
    if (this.interrupt_) Atomics.store(this.interrupt_, 0, 0);
    return this._call('run', { code, limits, pypi });
  }
  interrupt() { if (this.interrupt_) { Atomics.store(this.interrupt_, 0, 2); return true; } return false; }
  terminate() {
    if (this.dead) return;
    this.dead = true;
    for (const p of this._pending.values()) p.reject(new Error('kernel terminated'));
    this._pending.clear();
    this.worker.terminate();
  }
}
