// kernels.js -- the headless host's set of live kernels: one KernelClient (a worker thread running
// worker/host/sandbox-worker.js) per chat, at most `max` of them, least recently used evicted, plus
// one pre-loaded spare so a new chat, an eviction or a restart costs milliseconds, not a Pyodide
// load.
//
//   acquire(chat) → {kernel, fresh}   the chat's kernel; `fresh` when it had to be (re)made: the
//                                     caller remounts the chat's files and, when the chat had one
//                                     before, reports `restarted`.
//   retire(chat, reason)              terminates the chat's kernel (time limit, cancel that could not
//                                     interrupt, crash); the next acquire takes the spare.
//   takeEvicted(chat)                 true (once) when the chat lost its kernel to LRU eviction;
//                                     onEvict(chat) is also called at eviction time.  Idle kernels
//                                     only: running or loading ones are never evicted (the set goes
//                                     over its bound instead).
//   drop(chat)                        the chat is detached: its kernel goes, nothing is remembered.
//   dispose()                         terminates every kernel.  Safe twice.
//
// It does not talk to the orchestrator, hold chat files or run code (chat.js does).
import { Worker } from 'node:worker_threads';
import { KernelClient } from '../kernel-client.js';

export function sandboxWorkerFactory(workerOptions = {}) {
  return () => new Worker(new URL('./sandbox-worker.js', import.meta.url), workerOptions);
}

export class KernelSet {
  // makeClient(): a new KernelClient (not yet ready).  max: live kernels besides the spare.
  // onEvict(chat): told after a chat's kernel was evicted (the host drops that chat's file bytes).
  constructor({ makeClient, max = 2, log = () => {}, onEvict = () => {} }) {
    this.onEvict = onEvict;
    this.makeClient = makeClient;
    this.max = Math.max(1, max);
    this.live = new Map();      // chat id → KernelClient, least recently used first
    this.evicted = new Set();   // chats whose kernel was evicted (variables gone)
    this.spare = null;
    this.disposed = false;
    this.log = log;
    this.loads = 0;
  }

  startSpare() {
    if (this.disposed || (this.spare && this.spare.state !== 'dead')) return;
    this.loads++;
    const k = this.makeClient();
    this.spare = k;
    k.ready.catch((e) => { this.log(`spare kernel failed to load: ${e.message}`); if (this.spare === k) this.spare = null; });
  }

  takeEvicted(chat) { return this.evicted.delete(chat); }

  async acquire(chat) {
    const have = this.live.get(chat);
    if (have && have.state !== 'dead') {
      this.live.delete(chat); this.live.set(chat, have);   // most recently used now
      await have.ready;
      return { kernel: have, fresh: false };
    }
    this.live.delete(chat);
    while (this.live.size >= this.max) {
      // Evict the least recently used idle kernel.  Running or loading kernels are never evicted:
      // when all are, the set goes over its bound for a while (killing running code to make room
      // would cascade: its chat would need a kernel right back).
      let victim = null;
      for (const [c, k] of this.live) if (k.state === 'ready' || k.state === 'dead') { victim = c; break; }
      if (victim === null) { this.log(`all ${this.live.size} kernels busy: one more beyond the bound of ${this.max}`); break; }
      const k = this.live.get(victim);
      this.live.delete(victim);
      this.evicted.add(victim);
      this.log(`kernel of chat ${victim} evicted (at most ${this.max} live kernels)`);
      k.terminate('cancelled');
      try { this.onEvict(victim); } catch { /* the host's bookkeeping only */ }
    }
    let k = this.spare;
    this.spare = null;
    if (!k || k.state === 'dead') { this.loads++; k = this.makeClient(); }
    this.live.set(chat, k);
    try {
      await k.ready;
    } catch (e) {
      if (this.live.get(chat) === k) this.live.delete(chat);
      throw e;
    } finally {
      this.startSpare();
    }
    return { kernel: k, fresh: true };
  }

  retire(chat, reason = 'crashed') {
    const k = this.live.get(chat);
    if (!k) return;
    this.live.delete(chat);
    k.terminate(reason);
  }

  drop(chat) { this.retire(chat, 'cancelled'); this.evicted.delete(chat); }

  dispose() {
    if (this.disposed) return;
    this.disposed = true;
    for (const k of this.live.values()) k.terminate('cancelled');
    this.live.clear();
    if (this.spare) this.spare.terminate('cancelled');
    this.spare = null;
  }

  static node({ init, max, log, onEvict, loadTimeoutMs = 120000 }) {
    const createWorker = sandboxWorkerFactory();
    return new KernelSet({ max, log, onEvict, makeClient: () => new KernelClient({ createWorker, init, loadTimeoutMs }) });
  }
}
