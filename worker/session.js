// session.js -- PageSession: one chat attached to the orchestrator by a kernel host, exactly as the
// page protocol says (docs/api.md "The page protocol"), for the browser page and the
// headless host alike:
//   - the event stream (event-stream.js) with the bearer credential, the page id kept across
//     reconnects, `Last-Event-ID` on every reconnect, `visible=` from the host's visibility;
//   - presence {page_id, visible, kernel}: sent once the stream is open, again on every visibility
//     change, and for kernel state changes coalesced over `presenceDelayMs` (a run's busy → ready
//     flip inside that time sends nothing; but `loading` before an attempt waits for a kernel, and
//     `busy` once it has one, go out at once: the orchestrator holds the watchdog meanwhile);
//   - the heartbeat: while this page holds an attempt (queued to done), presence every
//     `heartbeat_ms` of the run event (PAGE_HEARTBEAT_MS), from this thread's own timers — never
//     from the kernel's worker, so a busy kernel cannot make the page look silent; a tick that comes
//     far later than due means this page was frozen (the reason a re-run tells);
//   - run events executed one at a time, in order: the manifest's files fetched (files.js: one 5 s
//     deadline, stalled downloads skipped with a note), the run handed to the supervisor
//     (supervisor.js: mount, time limit, cancel ladder, restart + remount), `started` posted when
//     Python starts, its output, displays and input() requests streamed as they come
//     (live-output.js: POST /v1/runs/{run}/output), each output file uploaded with PUT, then the
//     result posted, with retries;
//   - `input` events (an answer for the input() of the attempt this page runs) handed to the
//     supervisor;
//   - a newer attempt of the run in progress supersedes it: the old one is stopped (its downloads
//     aborted; the interrupt, which wakes time.sleep, asyncio.sleep and input(); the kernel replaced
//     at once when the interrupt cannot reach Python, e.g. an awaited JS promise, or past the
//     grace) before the next one starts, and its result is never posted; a replayed event (after
//     a reconnect) is ignored by run_id#attempt; a run addressed to another page of the chat is
//     announced (`elsewhere`), not run;
//   - `cancel` (queued or downloading: reported cancelled without running; running: the ladder),
//     `restart` (the orchestrator gave up on the run: the kernel is replaced, nothing is posted),
//     `files` (announced).
//
// The HTTP client is injected, so the same session runs over fetch in the browser
// (ui-adapter/src/api.js pageClient) and node:http over the Unix socket in the host (host/http.js):
//   client.json(method, path, body?, {keepalive?}) → Promise<{status, data}>  (rejects only when
//                                                    nothing came back: a network error)
//   client.upload(path, bytes) → Promise<{status, data}>        (PUT, application/octet-stream)
//   client.download(path, {signal, onProgress(loaded)}) → Promise<{status, bytes}>
//   client.connect(...)                                          the stream (event-stream.js)
//
// It does not render, hold the wake lock or watch the DOM (ui-adapter/src/session.js does, from
// these events), choose which chats to attach (the host's control channel or the page's URL), or
// decide policy (pausing, re-dispatching, what is mounted): the orchestrator does.
//
// Events (Emitter):
//   stream {state, ...}            the event stream's state (connecting, open, waiting, failed, stopped)
//   event {type, id, data}         every raw stream event (data parsed, null when not JSON)
//   visibility {visible, why}      kernel {state} (the supervisor's)
//   queued {job, rerun?}           a run (or a newer attempt) taken; rerun: why an attempt > 1 came
//                                  ('hidden', 'silent' or 'lost', as this page saw it)
//                                  elsewhere {job}: another page's
//   begin {run_id, attempt}        an attempt starts executing         end {run_id, attempt}: it ended
//   preparing {run_id}             download {run_id, name, loaded, total}
//   running {run_id, attempt}      Python started (the time limit runs)
//   output {run_id, attempt, stream, offset, text, truncated}   display {run_id, attempt, index, data}
//   input_request {run_id, attempt, prompt}   input_end {run_id, attempt, how}   (the live run)
//   result {run_id, attempt, body, run, files}   posted and accepted (run: the server's run object;
//                                  files: the output files with their bytes)
//   stale {run_id, attempt, why}   an attempt dropped without (further) posting
//   files {data}                   the chat's files changed     error {where, run_id?, message}
import { Emitter } from './emitter.js';
import { EventStream } from './event-stream.js';
import { FileCache, sha256Hex } from './files.js';
import { Fsm, machine } from './fsm.js';
import { LiveOutput } from './live-output.js';
import { NOTE } from './notes.js';
import { LIMITS, resultMessage, runResult } from './protocol.js';

// Life of a session:   new ──attach()──▶ attached ──detach()──▶ detached
const LIFE = machine('page session', { new: [], attached: ['new'], detached: ['new', 'attached'] });

// Life of one attempt (a run event this page is to execute):
//
//     queued ──▶ fetching ──▶ running ──▶ reporting ──▶ done
//       │           │            │            │
//       │           └──── cancel before Python: reporting (a cancelled result) ───▶
//       └───────────┴────────────┴────────────┴──▶ stale (superseded by a newer attempt, refused
//                                                  with 409, or given up by the orchestrator's
//                                                  `restart`): nothing (more) is posted
//
//   queued → fetching → running → reporting → done   execute() and report(), in order
//   queued|fetching → reporting                      execute(): cancel asked before Python ran
//   any but done → stale                             supersede(), restart, a 409 on started / PUT / result
const ATTEMPT = machine('attempt', {
  queued: [],
  fetching: ['queued'],
  running: ['fetching'],
  reporting: ['queued', 'fetching', 'running'],
  done: ['reporting'],
  stale: ['queued', 'fetching', 'running', 'reporting'],
});

const MAX_QUEUED = 64;      // attempts waiting on this page (the orchestrator sends a chat's runs one at a time)
const HEARTBEAT_MS = 2000;  // PAGE_HEARTBEAT_MS when the run event does not say
const MAX_SEEN = 4096;      // run_id#attempt keys remembered to ignore replays
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const enc = encodeURIComponent;

class Attempt {
  constructor(job) {
    this.job = job;
    this.run_id = job.run_id;
    this.attempt = job.attempt;
    this.fsm = new Fsm(ATTEMPT, 'queued', { id: `${job.run_id}#${job.attempt}` });
    this.abort = new AbortController();   // its downloads
    this.cancelAsked = false;
    this.startedPost = null;
    this.output = null;                   // LiveOutput while it runs
    this.why = null;                      // why it went stale
  }
  get state() { return this.fsm.state; }
  get live() { return !this.fsm.is('stale', 'done'); }
}

// Kernel states as presence reports them, and which of them go out at once.
const URGENT = { loading: true };

export class PageSession extends Emitter {
  /**
   * @param {object} o
   * @param {string} o.chatId
   * @param {string} o.pageId            kept across reconnects
   * @param {object} o.client            see above
   * @param {import('./supervisor.js').KernelSupervisor} o.supervisor
   * @param {boolean} [o.visible=true]   the host's visibility when it attaches
   * @param {number} [o.fileDeadlineMs=5000]   how long a run waits for its files in all
   * @param {boolean} [o.verifyFiles=true]     check each download's sha256
   * @param {number} [o.initialBackoffMs=250]  the event stream's reconnect waits
   * @param {number} [o.maxBackoffMs=5000]
   * @param {number} [o.presenceDelayMs=100]   presence reports within this are sent as one
   * @param {(msg: string) => void} [o.log]
   * @param {Map<string, string>} [o.earlier]  run_id → why this host let go of it before it
   *   attached ('reloaded', 'switched'): the reason an attempt > 1 of that run came, which this
   *   session could not have seen itself
   */
  constructor({ chatId, pageId, client, supervisor, visible = true, fileDeadlineMs = 5000, verifyFiles = true,
    initialBackoffMs = 250, maxBackoffMs = 5000, presenceDelayMs = 100, earlier = new Map(), log = () => {} }) {
    super();
    this.chatId = chatId;
    this.pageId = pageId;
    this.client = client;
    this.supervisor = supervisor;
    this.visible = visible;
    this.fileDeadlineMs = fileDeadlineMs;
    this.presenceDelayMs = presenceDelayMs;
    this.log = log;
    this.fsm = new Fsm(LIFE, 'new', { id: chatId });
    this.cache = new FileCache({ client, deadlineMs: fileDeadlineMs, verify: verifyFiles });
    this.queue = [];
    this.current = null;        // the Attempt executing
    this.seen = new Set();
    this.pumping = false;
    this.lastPresence = null;
    this.presenceTimer = null;
    this.heartbeat = null;      // {timer, ms, dueAt} while an attempt is held
    this.hiddenSeq = 0;         // visibility → hidden, counted
    this.frozenSeq = 0;         // heartbeat ticks far past due (this page was frozen), counted
    this.history = new Map();   // run_id → {hidden, frozen} when its last attempt came (why a re-run came)
    this.earlier = earlier;
    this.stats = { runs: 0, heartbeats: 0 };
    this.stream = new EventStream({
      connect: (o) => client.connect(o), initialBackoffMs, maxBackoffMs,
      path: () => `/v1/chats/${enc(chatId)}/events?page_id=${enc(pageId)}&visible=${this.visible ? 1 : 0}`,
      onEvent: (ev) => this.onEvent(ev),
      onState: (state, info) => {
        this.emit('stream', { state, ...info });
        if (state === 'open') this.presence('stream-open', true);
        if (state === 'failed') this.log(`chat ${chatId}: event stream refused (${info.status}); giving up`);
      },
    });
    this.onKernelState = ({ state }) => {
      this.emit('kernel', { state });
      // The orchestrator holds a dispatched run's watchdog while its kernel loads: say `busy` the
      // moment a kernel is had, and `loading` the moment one is awaited.
      const was = this.lastPresence && JSON.parse(this.lastPresence).kernel;
      if (this.holding() && (URGENT[this.kernelState()] || was === 'loading')) this.presence('kernel', false);
      else this.presenceSoon();
    };
    this.onEvicted = () => this.cache.clear();
  }

  get state() { return this.fsm.state; }

  /** Open the event stream: from now on this host runs the chat's runs addressed to it. */
  attach() {
    if (!this.fsm.is('new')) return;
    this.fsm.set('attached');
    this.supervisor.on('state', this.onKernelState);
    this.supervisor.on('evicted', this.onEvicted);
    this.stream.start();
  }

  /** The runs this host holds now (executing or waiting here), by id. */
  heldRunIds() {
    return [...(this.current?.live ? [this.current.run_id] : []), ...this.queue.filter((a) => a.live).map((a) => a.run_id)];
  }

  /**
   * This host is going away (a reload or a closed tab: pagehide; a chat switch: detach): say so at
   * once with a keepalive request, whatever the stream's state, so the orchestrator gives the run
   * it held to another page now instead of after its grace.  Fire and forget.
   */
  leave(why) {
    if (this.fsm.is('new') || this.left) return;
    this.left = why;
    const body = { page_id: this.pageId, leaving: true };
    const said = (e) => this.log(`presence (leaving, ${why}): ${e.message}`);
    try {   // sent now, inside pagehide: a microtask later may be too late for an unloading page
      this.client.json('POST', `/v1/chats/${enc(this.chatId)}/presence`, body, { keepalive: true }).catch(said);
    } catch (e) { said(e); }
  }

  /** Close the stream; attempts not finished are dropped (nothing more is posted for them). */
  detach() {
    if (this.fsm.is('detached')) return;
    this.leave('detached');
    this.fsm.set('detached');
    this.stream.stop();
    clearTimeout(this.presenceTimer);
    this.stopHeartbeat();
    this.supervisor.off('state', this.onKernelState);
    this.supervisor.off('evicted', this.onEvicted);
    for (const a of this.queue.splice(0)) this.drop(a, 'detached');
    if (this.current) { this.drop(this.current, 'detached'); this.supervisor.cancel(); }
  }

  // ---- presence ------------------------------------------------------------------------------
  kernelState() {
    const s = this.supervisor.state;
    if (s === 'idle') return this.supervisor.pool.hasReadySpare ? 'ready' : 'loading';   // the spare stands in
    return s === 'disposed' ? 'dead' : s;
  }

  /** The host's visibility changed (the page went to the background or came back). */
  setVisible(visible, why) {
    const changed = visible !== this.visible;
    this.visible = visible;
    if (changed && !visible) this.hiddenSeq++;
    if (changed) this.emit('visibility', { visible, why });
    if (visible && this.stream.state === 'waiting') this.stream.reconnectNow();
    return this.presence(why);
  }

  presenceSoon() {
    if (this.presenceTimer) return;
    this.presenceTimer = setTimeout(() => { this.presenceTimer = null; this.presence('kernel'); }, this.presenceDelayMs);
  }

  /** POST presence now (the stream must be open: before, the orchestrator answers 409). */
  async presence(why, force = false) {
    if (!this.fsm.is('attached') || this.stream.state !== 'open') return null;
    const body = { page_id: this.pageId, visible: this.visible, kernel: this.kernelState() };
    const key = JSON.stringify(body);
    if (!force && key === this.lastPresence) return null;
    this.lastPresence = key;
    try {
      const r = await this.client.json('POST', `/v1/chats/${enc(this.chatId)}/presence`, body, { keepalive: true });
      if (r.status !== 200) { this.lastPresence = null; this.log(`presence (${why}): HTTP ${r.status}`); }
      return r;
    } catch (e) {
      this.lastPresence = null;   // try again on the next report
      this.log(`presence (${why}): ${e.message}`);
      return null;
    }
  }

  // ---- the heartbeat ---------------------------------------------------------------------------
  /** Whether this page holds an attempt (queued, fetching, running, reporting). */
  holding() { return (!!this.current && this.current.live) || this.queue.some((a) => a.live); }

  startHeartbeat(ms) {
    if (this.heartbeat) return;
    const hb = { ms, dueAt: Date.now() + ms, timer: null };
    const tick = () => {
      const now = Date.now();
      // A tick far later than due: this thread did not run (the page was frozen).
      if (now - hb.dueAt > Math.max(1000, ms)) this.frozenSeq++;
      hb.dueAt = now + ms;
      hb.timer = setTimeout(tick, ms);
      if (!this.holding()) { this.stopHeartbeat(); return; }
      this.stats.heartbeats++;
      this.presence('heartbeat', true);
    };
    hb.timer = setTimeout(tick, ms);
    this.heartbeat = hb;
  }

  stopHeartbeat() {
    if (!this.heartbeat) return;
    clearTimeout(this.heartbeat.timer);
    this.heartbeat = null;
  }

  // ---- events --------------------------------------------------------------------------------
  onEvent(ev) {
    let data = null;
    try { data = ev.data ? JSON.parse(ev.data) : null; } catch { data = null; }
    this.emit('event', { type: ev.type, id: ev.id, data });
    if (!this.fsm.is('attached')) return;
    if (ev.type === 'run' && data) this.take(data);
    else if (ev.type === 'cancel' && data) this.cancel(data.run_id);
    else if (ev.type === 'restart' && data) this.restart(data.run_id, data.page_id);
    else if (ev.type === 'input' && data) {
      // An answer is used once, even if the stream delivers it again.
      if (ev.id !== null && ev.id !== undefined) { if (this.seen.has(`input#${ev.id}`)) return; this.remember(`input#${ev.id}`); }
      this.input(data);
    }
    else if (ev.type === 'files') this.emit('files', { data });
    else if (ev.type === 'run' || ev.type === 'cancel' || ev.type === 'restart') this.log(`chat ${this.chatId}: bad ${ev.type} event data`);
  }

  remember(key) {
    this.seen.add(key);
    if (this.seen.size > MAX_SEEN) this.seen.delete(this.seen.values().next().value);
  }

  take(job) {
    const key = `${job.run_id}#${job.attempt}`;
    if (this.seen.has(key)) return;   // replayed after a reconnect
    this.remember(key);
    if (job.page_id && job.page_id !== this.pageId) { this.emit('elsewhere', { job }); return; }
    // Why a newer attempt came, as this page saw it since the last one: it went to the background,
    // it was frozen (its timers stopped), or neither (the server lost its stream or its place).
    const seen = this.history.get(job.run_id);
    const rerun = job.attempt > 1 ? (seen && this.hiddenSeq > seen.hidden ? 'hidden' : seen && this.frozenSeq > seen.frozen ? 'silent'
      : !seen ? this.earlier.get(job.run_id) ?? null : 'lost') : null;
    this.history.delete(job.run_id);
    this.history.set(job.run_id, { hidden: this.hiddenSeq, frozen: this.frozenSeq });
    if (this.history.size > MAX_SEEN) this.history.delete(this.history.keys().next().value);
    // A newer attempt of the run in progress supersedes it (re-dispatch after a pause).
    const cur = this.current;
    if (cur && cur.run_id === job.run_id && cur.attempt < job.attempt) this.supersede(cur, 'superseded');
    for (const a of this.queue) if (a.run_id === job.run_id) this.drop(a, 'superseded');
    this.queue = this.queue.filter((a) => a.run_id !== job.run_id);
    if (this.queue.length >= MAX_QUEUED) {
      this.emit('error', { where: 'queue', run_id: job.run_id, message: `more than ${MAX_QUEUED} runs waiting on this page: this one is left to the orchestrator's watchdog` });
      return;
    }
    this.queue.push(new Attempt(job));
    this.emit('queued', { job, rerun });
    this.startHeartbeat(Number(job.heartbeat_ms) > 0 ? Number(job.heartbeat_ms) : HEARTBEAT_MS);
    this.pump();
  }

  cancel(runId) {
    const a = this.current && this.current.run_id === runId ? this.current : this.queue.find((q) => q.run_id === runId);
    if (!a || !a.live) return;
    a.cancelAsked = true;
    if (a.fsm.is('fetching')) a.abort.abort();
    else if (a.fsm.is('running')) this.supervisor.cancel();
  }

  // `event: input`: the answer to the input() the attempt this page runs waits for.
  input({ run_id: runId, attempt, page_id: pageId, text }) {
    const a = this.current;
    if (!a || a.run_id !== runId || (attempt && attempt !== a.attempt) || (pageId && pageId !== this.pageId)) return;
    if (typeof text !== 'string') { this.log(`run ${runId}: bad input event`); return; }
    if (!this.supervisor.answer(runId, text)) this.log(`run ${runId}: an input event came while it did not wait for input`);
  }

  restart(runId, pageId) {
    if (pageId && pageId !== this.pageId) return;
    for (const a of this.queue) if (!runId || a.run_id === runId) this.drop(a, 'restart');
    this.queue = this.queue.filter((a) => a.live);
    const cur = this.current;
    if (cur && (!runId || cur.run_id === runId)) {
      // The orchestrator already settled the run (its watchdog): replace the kernel, post nothing.
      this.drop(cur, 'restart');
      this.supervisor.cancel({ replace: true });
    } else if (!cur && this.supervisor.state === 'ready') {
      this.supervisor.replace('restart').catch((e) => this.log(`restart: ${e.message}`));
    }
  }

  drop(a, why) {
    if (!a.live) return;
    a.why = why;
    a.fsm.set('stale', why);
    a.abort.abort();
    this.emit('stale', { run_id: a.run_id, attempt: a.attempt, why });
  }

  // A superseded attempt is stopped (downloads aborted, the cancel ladder) before the next starts:
  // pump() runs attempts one after the other, and the supervisor's run ends only once the kernel
  // stopped or was replaced.
  supersede(a, why) {
    const wasRunning = a.fsm.is('running');
    this.drop(a, why);
    if (wasRunning) this.supervisor.cancel({ quick: true });
  }

  async pump() {
    if (this.pumping) return;
    this.pumping = true;
    try {
      while (this.queue.length && this.fsm.is('attached')) {
        const a = this.queue.shift();
        if (!a.live) continue;
        this.current = a;
        try { await this.execute(a); } catch (e) {
          this.log(`run ${a.run_id}: ${e.stack || e.message}`);
          this.emit('error', { where: 'run', run_id: a.run_id, message: e.message });
        } finally { this.current = null; }
      }
    } finally { this.pumping = false; }
  }

  // ---- one attempt ---------------------------------------------------------------------------
  async execute(a) {
    const job = a.job;
    const runId = job.run_id;
    this.stats.runs++;
    this.emit('begin', { run_id: runId, attempt: a.attempt });
    try {
      if (a.cancelAsked) return await this.report(a, runResult('cancelled', { notes: [NOTE.cancelledBeforeStart()] }));
      a.fsm.set('fetching');
      this.emit('preparing', { run_id: runId });
      const { files, skipped } = await this.cache.fetchAll(job.mounts || [], { signal: a.abort.signal,
        onProgress: (p) => this.emit('download', { run_id: runId, ...p }) });
      if (!a.live) return;
      const notes = skipped.map((s) => NOTE.skipped(s.name, s.why, this.fileDeadlineMs));
      if (a.cancelAsked) return await this.report(a, runResult('cancelled', { notes: [...notes, NOTE.cancelledBeforeStart()] }));
      a.fsm.set('running');
      // The orchestrator holds the watchdog of a run whose kernel loads: tell it before waiting.
      if (!this.supervisor.fsm.is('ready', 'busy')) await this.presence('kernel-loading');
      if (!a.live) return;
      // An orchestrator that sends heartbeat_ms speaks the live protocol (docs/api.md); one that
      // does not would answer every output call 404: the result alone carries the output then.
      const live = new LiveOutput({ client: this.client, runId, attempt: a.attempt, log: this.log, off: !('heartbeat_ms' in job),
        onStale: (why) => { if (a.live) this.supersede(a, why); } });
      a.output = live;
      const mine = (fn) => (e) => { if (e.run_id === runId && a.fsm.is('running')) fn(e); };
      const tag = { run_id: runId, attempt: a.attempt };
      const offs = [
        this.supervisor.on('executing', mine(() => {
          if (a.startedPost) return;
          a.startedPost = this.postStarted(a);
          this.emit('running', tag);
        })),
        this.supervisor.on('output', mine((e) => { live.output(e); this.emit('output', { ...tag, ...e }); })),
        this.supervisor.on('display', mine((e) => { live.display(e); this.emit('display', { ...tag, ...e }); })),
        this.supervisor.on('input_request', mine((e) => { live.inputRequest(e.prompt); this.emit('input_request', { ...tag, prompt: e.prompt }); })),
        this.supervisor.on('input_end', mine((e) => { if (e.how === 'eof') live.inputEnded(); this.emit('input_end', { ...tag, how: e.how }); })),
      ];
      let result;
      try {
        // Files that failed this time but were mounted before stay mounted (complete only when
        // every file came).
        result = await this.supervisor.run({ runId, code: job.code, timeoutS: job.timeout_s || 60, limits: job.limits,
          pypi: job.pypi === true, notes, files, complete: skipped.length === 0,
          cancelled: () => (a.why === 'restart' ? 'replace' : a.cancelAsked || !a.live ? 'cancel' : false) });
      } finally { for (const off of offs) off(); }
      await live.close();
      if (a.startedPost) await a.startedPost;
      // A restart no result will tell (this attempt was superseded or refused) is told by the next
      // run; one the orchestrator gave up on was told by the orchestrator.
      if (!a.live) { if (result.restarted && a.why !== 'restart') this.supervisor.owe(result.remounted); return; }
      await this.report(a, result);
    } finally {
      this.emit('end', { run_id: runId, attempt: a.attempt });
      this.presence('run-end');
    }
  }

  // POST started; a 409/404 means this attempt is no longer the run's current one: stop it.
  async postStarted(a) {
    try {
      const r = await this.client.json('POST', `/v1/runs/${enc(a.run_id)}/started`, { attempt: a.attempt, page_id: this.pageId });
      if ((r.status === 409 || r.status === 404) && a.live) this.supersede(a, `started: HTTP ${r.status}`);
      else if (r.status !== 200) this.log(`run ${a.run_id}: started: HTTP ${r.status}`);
    } catch (e) { this.log(`run ${a.run_id}: started: ${e.message}`); }
  }

  // Calls fn until something comes back (a status), `tries` times at most with a growing pause.
  async retrying(what, fn, tries) {
    let last = null;
    for (let i = 0; i < tries; i++) {
      try { return await fn(); } catch (e) {
        last = e;
        this.log(`${what}: ${e.message}; retrying`);
        await sleep(200 * (i + 1));
      }
    }
    return { status: 0, data: null, error: last };
  }

  // Uploads every output file (PUT), then posts the result.
  async report(a, result) {
    a.fsm.set('reporting');
    const q = `?attempt=${a.attempt}`;
    const notes = [...(result.notes || [])];
    const listed = [];
    for (const f of result.files || []) {
      const r = await this.retrying(`run ${a.run_id}: ${f.name}`, () => this.client.upload(`/v1/runs/${enc(a.run_id)}/files/${enc(f.name)}${q}`, f.data), 3);
      if (!a.live) return;
      if (r.status === 201) listed.push({ name: f.name, size: f.size ?? f.data.length, sha256: f.sha256 || await sha256Hex(f.data), kind: f.kind || 'file' });
      else if (r.status === 409) { this.drop(a, `upload: HTTP 409`); return; }
      else notes.push(NOTE.notSaved(f.name, r.status ? `HTTP ${r.status}` : (r.error && r.error.message) || 'no answer'));
    }
    const body = resultMessage(a.attempt, result, listed, notes);
    const r = await this.retrying(`run ${a.run_id}: result`, () => this.client.json('POST', `/v1/runs/${enc(a.run_id)}/result`, body), 5);
    if (!a.live) return;
    if (r.status === 200) {
      a.fsm.set('done');
      this.emit('result', { run_id: a.run_id, attempt: a.attempt, body, run: r.data, files: result.files || [], duration_ms: result.duration_ms, restart_ms: result.restart_ms });
    } else if (r.status === 409) {
      this.drop(a, 'result: HTTP 409');
    } else {
      a.fsm.set('done');
      this.log(`run ${a.run_id}: result refused (${r.status} ${JSON.stringify(r.data)})`);
      this.emit('error', { where: 'result', run_id: a.run_id, message: `result refused (HTTP ${r.status || 'no answer'})` });
    }
  }
}
