// supervisor.js -- KernelSupervisor: the life of one chat's kernel, the same for the browser page
// and the headless host (docs/ui-adapter.md), over kernels lent by a KernelPool
// (pool.js) and driven through KernelClient (kernel-client.js):
//   - the chat's files: in-memory copies (shared memory where it can be had) that every fresh
//     kernel gets again without a download; each kernel is sent only what it lacks;
//   - the time limit, counted from the kernel's `started` event (Python executing user code, not
//     downloads or package loads): past it the kernel is always replaced — terminated, a fresh one
//     taken from the pool (the spare: milliseconds), every file remounted, and the result says
//     `restarted` with the `remounted` list;
//   - the cancel ladder: interrupt first (SharedArrayBuffer; it also wakes time.sleep,
//     asyncio.sleep and input()) and keep the namespace when Python stops within `cancelGraceMs`;
//     otherwise replace the kernel the same way; a kernel no interrupt reaches (no shared memory)
//     is replaced at once, without the grace;
//   - the live run (run-control.js): output, displays and input() requests as the kernel streams
//     them (events), input() answered (answer) or EOF past the input wait, which does not count
//     against the time limit; every ending keeps what was printed (a killed run reports the
//     output received up to then);
//   - a kernel that dies during a run: `crashed`, replaced the same way; one that dies between runs,
//     or is evicted by the pool to make room for other chats: the next run gets a fresh kernel and
//     says so (restarted, remounted, and a note saying why);
//   - reset(keep): a fresh interpreter with only `keep` mounted (a chat switch).
// Every sentence it adds to a result comes from notes.js.
//
// It does not fetch files, talk to the orchestrator or touch the DOM (the page session does), and
// it does not make kernels (the pool does).
//
// API
//   new KernelSupervisor({pool, id?, cancelGraceMs = 1000, lost?: 'detached', log?})
//       lost: the chat had a kernel on this host before this supervisor (its next run says restarted)
//   start()                     → Promise: a kernel loaded and the files mounted
//   mount(files, {complete = true})  files: [{name, data: Uint8Array, version?, sha256?, size?}];
//                               complete: these are all the chat's files (others are unmounted);
//                               else they are added to those mounted.  → Promise<{written, kept,
//                               removed, refused} | null> (null: nothing changed, or no kernel yet)
//   unmount(names)              → Promise
//   run({runId, code, timeoutS = 60, limits?, pypi?, notes?, files?, complete?, cancelled?})
//                               limits.input_wait_s: how long input() waits (default 300 s)
//                               → Promise<result>: the page protocol's
//                               result body (protocol.js RunResult: files with `data`) plus
//                               duration_ms, and restart_ms after a restart.  Never rejects for
//                               Python errors or a kernel that cannot start (status 'crashed').
//                               files/complete: as mount(), recorded before the run; cancelled():
//                               'cancel' or 'replace' when a cancel came before this run could be
//                               cancelled (while a kernel was being had): it is applied at once.
//   cancel({replace = false, quick = false})   the ladder above; replace: at once (the
//                               orchestrator gave up); quick: at once when the kernel reports that
//                               no interrupt reaches its Python (a newer attempt is waiting).
//   answer(runId, text)         → true when the run was waiting for input() and got it
//   replace(reason)             → Promise<{ms, remounted}>
//   owe(remounted)              a restart no result told: the next run's result tells it
//   reset(keep = [])            → Promise<{ms, remounted}>
//   whenSpareReady()            → Promise<boolean> (the pool's spare)
//   dispose()                   safe twice
//   state, kernel (the current KernelClient or null), current ({client, mounted} or null),
//   files (Map name → file), restarts, lastRestartMs, loads (the pool's)
// Events (Emitter): state {state, prev, reason?, error?, loadMs?}, progress {stage, message,
// loaded?, total?}, executing {run_id, at} (the kernel's `started`: the time limit starts), packages
// {run_id, loaded, failed}, output {run_id, stream, offset, text, truncated} (offset and the cap in
// code points), display {run_id, index, data}, input_request {run_id, prompt}, input_end {run_id,
// how: answered|eof|stopped}, restart {reason, ms, remounted}, evicted {}.  lastTimeoutAt: when the
// last time limit fired (performance.now()).
import { Emitter } from './emitter.js';
import { Fsm, machine } from './fsm.js';
import { shareBytes } from './kernel-client.js';
import { ERROR, NOTE, progressLabel } from './notes.js';
import { EVENT, LIMITS, STATUS, runResult } from './protocol.js';
import { RunControl } from './run-control.js';

// Life of a supervisor:
//
//     idle ──start()/run()──▶ loading ──kernel ready, files mounted──▶ ready ──run()──▶ busy
//      ▲                        │  ▲                                    │ ▲              │
//      │                        │  └──── replace(): time limit, crash, ─┴─┼──────────────┘
//      │                        │        cancel past the grace, reset     └── result ────┘
//      │                        └── no kernel could be loaded ──▶ dead ──start()──▶ loading
//      └── evicted by the pool, or the kernel died between runs (ready → idle)
//     any ──dispose()──▶ disposed
//
//   idle → loading, dead → loading   acquire() (start, or run with no kernel)
//   ready|busy → loading             replace()
//   loading → ready                  acquire() resolved;   loading → dead: it threw
//   ready ⇄ busy                     run()
//   ready → idle                     evicted() / onExit() (an idle kernel died)
const LIFE = machine('kernel supervisor', {
  idle: ['ready'],
  loading: ['idle', 'ready', 'busy', 'dead'],
  ready: ['loading', 'busy'],
  busy: ['ready'],
  dead: ['loading'],
  disposed: ['idle', 'loading', 'ready', 'busy', 'dead'],
});

const norm = (name) => String(name).split('/').filter(Boolean).join('/');
// Content identity for files that come without a sha256 (the playground's own attachments).
const identities = new WeakMap();
let identitySeq = 0;
function contentKey(f) {
  if (f.sha256) return `${f.version ?? ''}|${f.sha256}`;
  if (!identities.has(f.data)) identities.set(f.data, `local-${++identitySeq}`);
  return identities.get(f.data);
}

export class KernelSupervisor extends Emitter {
  /**
   * @param {object} o
   * @param {import('./pool.js').KernelPool} o.pool   where kernels come from (and the spare)
   * @param {string} [o.id='chat']
   * @param {number} [o.cancelGraceMs=1000]    how long an interrupt may take before the kernel is replaced
   * @param {Function|null} [o.lost]           called when the kernel is lost for good
   * @param {(msg: string) => void} [o.log]
   */
  constructor({ pool, id = 'chat', cancelGraceMs = 1000, lost = null, log = () => {} } = {}) {
    super();
    if (!pool) throw new TypeError('KernelSupervisor: pool is required');
    this.pool = pool;
    this.id = id;
    this.cancelGraceMs = cancelGraceMs;
    this.log = log;
    this.info = {};
    this.fsm = new Fsm(LIFE, 'idle', { id, onChange: (state, prev) => this.emit('state', { state, prev, ...this.info }) });
    this.current = null;        // {client, mounted: Map name → content key, off: unsubscribe}
    this.files = new Map();     // name → {name, version, sha256, size, data, key}: what every kernel gets
    this.active = null;         // RunControl of the run in progress
    this.lost = lost ? { note: NOTE[lost] ? NOTE[lost]() : String(lost) } : null;
    this.restarts = 0;
    this.lastRestartMs = null;
    this.lastTimeoutAt = null;
    this.claims = 0;            // runs asked for and not finished (their kernel is not evictable)
  }

  get state() { return this.fsm.state; }
  get kernel() { return this.current ? this.current.client : null; }
  get loads() { return this.pool.loads; }

  setState(to, info = {}) {
    this.info = info;
    this.fsm.set(to, info.reason || info.error || '');
    this.info = {};
  }

  // ---- the pool's owner interface -------------------------------------------------------------
  evictable() { return this.claims === 0 && this.fsm.is('idle', 'ready', 'dead'); }

  evicted() {
    this.detach();
    // The chat's bytes go with its kernel: a host's memory stays bounded by its live kernels.
    this.files.clear();
    this.lost = { note: NOTE.evicted() };
    if (this.fsm.is('ready')) this.setState('idle', { reason: 'evicted' });
    this.emit('evicted', {});
  }

  // ---- kernels ------------------------------------------------------------------------------
  adopt(client) {
    const off = client.onEvent((e) => this.onKernelEvent(client, e));
    this.current = { client, mounted: new Map(), off };
  }

  detach() {
    const cur = this.current;
    this.current = null;
    if (cur) cur.off();
    return cur;
  }

  onKernelEvent(client, e) {
    if (!this.current || this.current.client !== client) return;
    const run = this.active && this.active.runId === e.ref ? this.active : null;
    if (e.event === EVENT.PROGRESS) this.emit('progress', { ...e, message: progressLabel(e) });
    else if (e.event === EVENT.STARTED) {
      if (run && run.startedAt === null) {
        const at = performance.now();
        run.onStarted(at);
        this.emit('executing', { run_id: e.ref, at });
      }
    } else if (e.event === EVENT.OUTPUT) {
      if (run && run.onOutput(e)) this.emit('output', { run_id: e.ref, stream: e.stream, offset: e.offset, text: e.text, truncated: !!e.truncated });
    } else if (e.event === EVENT.DISPLAY) {
      if (run && run.onDisplay(e)) this.emit('display', { run_id: e.ref, index: e.index, data: e.data });
    } else if (e.event === EVENT.INPUT_REQUEST) {
      if (run) run.onInputRequest(e);
    } else if (e.event === 'interrupt') {
      if (run && e.stuck) run.onStuck();
    } else if (e.event === EVENT.PACKAGES) this.emit('packages', { run_id: e.ref, loaded: e.loaded, failed: e.failed });
    else if (e.event === 'exit') this.onExit(client, e);
  }

  // A kernel that dies during a run is handled by that run (its promise resolves 'crashed'); one
  // that dies between runs is dropped here, and the next run gets a fresh one and says why.
  onExit(client, e) {
    if (this.active || !this.fsm.is('ready')) return;
    this.detach();
    this.pool.release(this, STATUS.CRASHED);
    this.lost = { note: NOTE.diedIdle(e.message || e.reason) };
    this.setState('idle', { reason: 'kernel exited' });
  }

  // A kernel from the pool, with every file mounted → the names remounted.
  async acquire(reason) {
    const t0 = performance.now();
    this.setState('loading', { reason });
    let remounted = [];
    try {
      await this.pool.take(this, (client) => { this.detach(); this.adopt(client); });
      if (this.fsm.is('disposed')) throw Object.assign(new Error('disposed'), { code: 'disposed' });
      const r = await this.sync();
      remounted = r ? [...r.written, ...r.kept] : [];
    } catch (e) {
      this.detach();
      this.pool.release(this, STATUS.CRASHED);
      if (!this.fsm.is('disposed')) this.setState('dead', { error: e.message });
      throw e;
    }
    this.setState('ready', { loadMs: Math.round(performance.now() - t0), reason });
    return remounted;
  }

  async start() {
    if (this.fsm.is('disposed')) throw new Error('kernel supervisor disposed');
    while (this.fsm.is('loading')) await new Promise((r) => this.once('state', r));
    if (this.fsm.is('idle', 'dead')) {
      const remounted = await this.acquire('start');
      if (this.lost) this.lost.remounted = remounted;
    }
  }

  // Makes the current kernel's /mnt/data hold exactly this.files, sending bytes only for what
  // it lacks.  → the kernel's mount reply, or null when nothing had to change.
  async sync() {
    const cur = this.current;
    if (!cur) return null;
    let changed = cur.mounted.size !== this.files.size;
    const list = [];
    for (const f of this.files.values()) {
      const has = cur.mounted.get(f.name) === f.key;
      if (!has) changed = true;
      list.push({ name: f.name, version: f.version ?? null, sha256: f.sha256 || f.key, size: f.size, data: has ? undefined : f.data });
    }
    if (!changed) return null;
    let r = await cur.client.mount(list, { complete: true });
    // A file sent without bytes that the kernel no longer holds (user code deleted or changed
    // it): once more, with its bytes.
    const lacking = new Set(r.refused.filter((x) => list.some((f) => f.name === norm(x.name) && !f.data)).map((x) => norm(x.name)));
    if (lacking.size) {
      const again = await cur.client.mount(list.map((f) => (lacking.has(f.name) ? { ...f, data: this.files.get(f.name).data } : f)), { complete: true });
      r = { ...again, written: [...r.written, ...again.written], kept: again.kept.filter((n) => !r.written.includes(n)) };
    }
    cur.mounted = new Map();
    for (const name of [...r.written, ...r.kept]) { const f = this.files.get(norm(name)); if (f) cur.mounted.set(f.name, f.key); }
    return r;
  }

  async mount(files, { complete = true } = {}) {
    this.record(files, complete);
    return this.fsm.is('ready') ? this.sync() : null;
  }

  // Records the chat's files (the bytes every fresh kernel gets); the kernel gets them at sync().
  record(files, complete) {
    if (complete) {
      const keep = new Set(files.map((f) => norm(f.name)));
      for (const name of [...this.files.keys()]) if (!keep.has(name)) this.files.delete(name);
    }
    for (const f of files) {
      const name = norm(f.name);
      const key = contentKey(f);
      const have = this.files.get(name);
      if (have && have.key === key) continue;
      this.files.set(name, { name, version: f.version ?? null, sha256: f.sha256 || null, size: f.size ?? f.data.length,
        data: shareBytes(f.data), key });
    }
  }

  async unmount(names) {
    for (const n of names) this.files.delete(norm(n));
    return this.fsm.is('ready') ? this.sync() : null;
  }

  async replace(reason) {
    while (this.fsm.is('loading')) await new Promise((r) => this.once('state', r));
    if (this.fsm.is('disposed')) throw new Error('kernel supervisor disposed');
    const t0 = performance.now();
    this.detach();
    this.pool.release(this, reason === STATUS.TIMEOUT || reason === STATUS.CRASHED ? reason : STATUS.CANCELLED);
    const remounted = await this.acquire(reason);
    const ms = performance.now() - t0;
    this.restarts++;
    this.lastRestartMs = ms;
    this.emit('restart', { reason, ms, remounted });
    return { ms, remounted };
  }

  async reset(keep = []) {
    for (const name of [...this.files.keys()]) if (!keep.includes(name)) this.files.delete(name);
    this.lost = null;
    if (this.active) this.active.cancel(true);   // the old chat's run goes with its interpreter
    while (this.fsm.is('loading', 'busy')) await new Promise((r) => this.once('state', r));
    return this.replace('reset');
  }

  whenSpareReady() { return this.pool.spareReady(); }

  // A restart whose result nobody will report (the page session dropped that attempt): the next
  // run says restarted, with the files remounted then.
  owe(remounted = []) {
    if (!this.lost) this.lost = { note: NOTE.restartedForStale(), remounted };
  }

  cancel({ replace = false, quick = false } = {}) { if (this.active) this.active.cancel(replace, quick); }

  answer(runId, text) { return !!this.active && this.active.runId === runId && this.active.answer(text); }

  // ---- runs ---------------------------------------------------------------------------------
  async run({ runId = `local-${Date.now()}`, code, timeoutS = 60, limits, pypi = false, notes = [], files, complete = true, cancelled = null }) {
    const t0 = performance.now();
    const pre = [...notes];
    // From here to the end of the run this chat's kernel is not evictable.
    this.claims++;
    try {
      if (files) this.record(files, complete);
      if (!this.fsm.is('ready')) {
        try {
          await this.start();
        } catch (e) {
          if (this.fsm.is('disposed')) throw e;
          return runResult(STATUS.CRASHED, { error: ERROR.loadFailed(e.message), notes: pre, duration_ms: 0 });
        }
      }
      if (!this.fsm.is('ready')) throw new Error(`kernel supervisor ${this.state}: runs execute one at a time`);
      return await this.execute(runId, code, timeoutS, limits, pypi, pre, t0, cancelled);
    } finally {
      this.claims--;
    }
  }

  async execute(runId, code, timeoutS, limits, pypi, pre, t0, cancelled) {
    let restarted = false, remounted = [];
    if (this.lost) {
      restarted = true;
      remounted = this.lost.remounted || [];
      pre.push(this.lost.note);
      this.lost = null;
    }
    const client = this.current.client;
    this.setState('busy', { reason: runId });
    this.pool.touch(this);
    const run = new RunControl({ kernel: client, runId, timeoutS, inputWaitS: (limits && limits.input_wait_s) || LIMITS.input_wait_s,
      graceMs: () => this.cancelGraceMs, emit: (type, ev) => this.emit(type, ev),
      onLimit: () => { this.lastTimeoutAt = performance.now(); } });
    this.active = run;
    const asked = cancelled && cancelled();   // a cancel that came while a kernel was being had
    if (asked) run.cancel(asked === 'replace');
    let result;
    try {
      const m = await this.sync();
      if (m) for (const r of m.refused) pre.push(NOTE.notMounted(r.name, r.reason));
      result = await client.run({ run_id: runId, code, pypi, limits });
    } catch (e) {
      // The kernel went away between the mount and the run (or the mount itself failed).
      result = runResult(client.exitReason || STATUS.CRASHED, { exit: e.message });
    } finally {
      run.end();
      this.active = null;
    }
    const tEnd = performance.now();
    const duration = Math.round(tEnd - (run.startedAt ?? t0));
    // A run the kernel did not answer keeps what it streamed before it went.
    const got = result.exit === undefined ? { notes: [] } : run.received((limits && limits.out_chars) || LIMITS.out_chars);
    const out = { ...runResult(result.status), ...result, ...got, notes: [...pre, ...(result.notes || []), ...got.notes, ...run.notes],
      restarted, remounted, duration_ms: duration };
    delete out.exit; delete out.oom;
    if (this.fsm.is('disposed')) return out;
    // The kernel answered (exit undefined): it stays, unless it said it cannot (a worker that
    // reports its own kernel crashed, e.g. over its memory limit).
    const answered = result.exit === undefined;
    if (answered && result.status !== STATUS.CRASHED && result.status !== STATUS.TIMEOUT) {
      // An interrupt that landed keeps the namespace.
      if (run.cancelAsked && result.status === STATUS.CANCELLED) out.notes.push(NOTE.cancelKept());
      this.setState('ready', { reason: runId });
      if (client.state === 'dead') this.onExit(client, { message: client.exitReason });   // died right after answering
      return out;
    }
    // The kernel is gone (time limit, crash, a cancel it did not honour) or unfit: a fresh one
    // takes its place with every file remounted before anything else runs.
    const status = run.timedOut ? STATUS.TIMEOUT : answered ? result.status
      : run.cancelAsked && result.status !== STATUS.CRASHED ? STATUS.CANCELLED : STATUS.CRASHED;
    out.status = status;
    if (answered && result.error) out.error = result.error;
    else if (status === STATUS.TIMEOUT) out.error = ERROR.timeout(timeoutS);
    else if (status === STATUS.CRASHED && result.oom) { out.error = ERROR.outOfMemory(); out.notes.push(NOTE.outOfMemory()); }
    else if (status === STATUS.CRASHED) out.error = ERROR.crashed(result.exit);
    else if (run.uninterruptible) out.notes.push(NOTE.cancelNoInterrupt());
    else if (!run.replaceAsked) out.notes.push(NOTE.cancelReplaced(this.cancelGraceMs));
    try {
      const r = await this.replace(status);
      out.restarted = true;
      out.remounted = r.remounted;
    } catch (e) {
      if (!this.fsm.is('disposed')) out.notes.push(NOTE.notRestarted(e.message));
    }
    out.restart_ms = Math.round(performance.now() - tEnd);
    return out;
  }

  dispose() {
    if (this.fsm.is('disposed')) return;
    if (this.active) this.active.cancel(true);
    this.detach();
    this.pool.release(this, STATUS.CANCELLED);
    this.setState('disposed');
  }
}
