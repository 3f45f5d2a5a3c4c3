// pool.js -- KernelPool: the kernels a host may hold at once and its pre-loaded spare, shared by
// the supervisors of that host (supervisor.js).  The one place that makes kernels and decides when
// one is started, lent, evicted or thrown away.  The browser page and the headless host differ
// only in how they configure it:
//
//   page           new KernelPool({makeKernel, max: 1, spare: true})     one chat, one spare
//   headless host  new KernelPool({makeKernel, max: N, spare: true})     one supervisor per chat,
//                  at most N live kernels, the least recently used idle one evicted to make room
//
// A spare is a loaded kernel nobody owns yet: taking it costs milliseconds instead of a Pyodide
// load (seconds).  It is warmed with one empty run (a kernel's first run pays one-time costs), and
// the next spare starts loading `spareDelayMs` after one was taken, so its load does not compete
// with the run about to start on the kernel just handed out.  A spare that fails to load is
// retried with a growing delay, three times at most in a row.  Running or loading kernels are
// never evicted: when every kernel is busy the pool goes over its bound for a while (killing
// running code to make room would cascade: its chat would need a kernel right back).
//
// API
//   pool.take(owner, onChosen?) → Promise<KernelClient>  a loaded kernel for owner: the spare, else a
//                          fresh load (the spare failing → one fresh try).  onChosen(kernel) is called
//                          at once, before it is loaded (the owner shows its load progress).
//   pool.release(owner, reason)   terminates owner's kernel, if it has one
//   pool.touch(owner)      owner used its kernel now (least-recently-used order)
//   pool.startSpare()      load a spare now unless one is loading or loaded (idempotent)
//   pool.spareReady()      → Promise<boolean>: true once a spare is loaded; false when none is wanted,
//                          the pool is disposed, or the spare keeps failing
//   pool.hasReadySpare, pool.live (Map owner → kernel, least recently used first), pool.loads
//   pool.dispose()         terminates every kernel.  Safe twice.
// An owner is {id, evictable() → bool (idle: not running, not loading), evicted() (its kernel is
// about to be terminated: forget it)}.
//
// It does not mount files, run code or word anything (the supervisor does).
import { Fsm, machine } from './fsm.js';

// Life of a pool:   open ──dispose()──▶ disposed
const LIFE = machine('kernel pool', { open: [], disposed: ['open'] });

export class KernelPool {
  constructor({ makeKernel, max = 1, spare = true, spareDelayMs = 250, log = () => {} }) {
    if (typeof makeKernel !== 'function') throw new TypeError('KernelPool: makeKernel is required');
    this.makeKernel = makeKernel;
    this.max = Math.max(1, max);
    this.wantSpare = spare;
    this.spareDelayMs = spareDelayMs;
    this.log = log;
    this.live = new Map();
    this.spare = null;
    this.spareFailures = 0;
    this.timer = null;
    this.loads = 0;
    this.fsm = new Fsm(LIFE, 'open');
  }

  get disposed() { return this.fsm.is('disposed'); }

  make() {
    this.loads++;
    const k = this.makeKernel();
    // Once loaded, one empty cell: moves a fresh kernel's one-time first-run costs off the path of
    // the run that takes it.  `pass` leaves no name behind.
    k.warm = k.ready.then(() => k.run({ run_id: 'warm-up', code: 'pass' })).then(() => {}, () => {});
    return k;
  }

  get hasReadySpare() { return !!this.spare && this.spare.state === 'ready'; }

  startSpare() {
    clearTimeout(this.timer);
    this.timer = null;
    if (this.disposed || !this.wantSpare || (this.spare && this.spare.state !== 'dead')) return;
    const k = this.make();
    this.spare = k;
    k.ready.then(() => { this.spareFailures = 0; }, (e) => {
      this.log(`spare kernel failed to load: ${e.message}`);
      if (this.spare === k) this.spare = null;
      this.spareFailures++;
      if (this.spareFailures < 3) this.scheduleSpare(1000 * 2 ** this.spareFailures);
    });
  }

  scheduleSpare(ms = this.spareDelayMs) {
    if (this.disposed || !this.wantSpare || this.timer) return;
    this.timer = setTimeout(() => this.startSpare(), ms);
    if (typeof this.timer === 'object' && this.timer.unref) this.timer.unref();
  }

  async spareReady() {
    while (this.wantSpare && !this.disposed) {
      const s = this.spare;
      if (!s) {
        if (this.spareFailures >= 3) return false;
        if (!this.timer) this.startSpare();
        await new Promise((r) => setTimeout(r, 50));
        continue;
      }
      try { await s.ready; await s.warm; } catch { continue; }
      if (this.spare === s && s.state === 'ready') return true;
    }
    return false;
  }

  touch(owner) {
    const k = this.live.get(owner);
    if (k) { this.live.delete(owner); this.live.set(owner, k); }
  }

  release(owner, reason = 'cancelled') {
    const k = this.live.get(owner);
    if (!k) return;
    this.live.delete(owner);
    k.terminate(reason);
  }

  // Evicts least recently used idle kernels of other owners until one more fits.
  makeRoom(owner) {
    while (this.live.size >= this.max) {
      let victim = null;
      for (const [o, k] of this.live) {
        if (o !== owner && o.evictable() && (k.state === 'ready' || k.state === 'dead')) { victim = o; break; }
      }
      if (!victim) { this.log(`all ${this.live.size} kernels busy: one more beyond the bound of ${this.max}`); return; }
      const k = this.live.get(victim);
      this.live.delete(victim);
      this.log(`kernel of ${victim.id} evicted (at most ${this.max} live kernels)`);
      try { victim.evicted(); } catch (e) { this.log(`evicted(${victim.id}): ${e.message}`); }
      k.terminate('cancelled');
    }
  }

  async take(owner, onChosen = () => {}) {
    if (this.disposed) throw Object.assign(new Error('the kernel pool is disposed'), { code: 'disposed' });
    this.release(owner, 'cancelled');
    this.makeRoom(owner);
    let k = this.spare;
    this.spare = null;
    const fromSpare = !!k && k.state !== 'dead';
    if (!fromSpare) k = this.make();
    this.live.set(owner, k);
    onChosen(k);
    try {
      await k.ready;
      await k.warm;
    } catch (e) {
      if (this.live.get(owner) === k) this.live.delete(owner);
      if (!fromSpare || this.disposed) { this.scheduleSpare(); throw e; }
      this.log(`the spare kernel failed to load (${e.message}): loading a fresh one`);
      return this.take(owner, onChosen);
    }
    this.scheduleSpare();
    if (this.live.get(owner) !== k) throw Object.assign(new Error('the kernel was released while it loaded'), { code: 'released' });
    return k;
  }

  dispose() {
    if (this.disposed) return;
    this.fsm.set('disposed');
    clearTimeout(this.timer);
    for (const k of this.live.values()) k.terminate('cancelled');
    this.live.clear();
    if (this.spare) this.spare.terminate('cancelled');
    this.spare = null;
  }
}
