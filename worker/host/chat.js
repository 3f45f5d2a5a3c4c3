// chat.js -- one chat attached by the headless host, exactly as a page attaches (DESIGN.md, page
// protocol): the event stream read with a bearer credential, the page id kept across reconnects,
// Last-Event-ID on every reconnect, presence (always visible: a host has no background), then for
// each `run` event: fetch the manifest's files (5 s in all; a stalled download is skipped with a
// note and tried again next run), mount them, report `started` when Python starts, enforce the
// time limit (terminate → fresh kernel from the spare → remount → `restarted` + `remounted`),
// upload each output file with PUT, and post the result.  `cancel` interrupts first and replaces
// the kernel only when Python did not stop within the grace; `restart` replaces the kernel.
//
// Life of an attachment (state written by setState only):
//
//     new ──open()──▶ connecting ──200──▶ attached ──stream ends──▶ connecting (backoff, same id)
//                         │   ▲                                          │
//                         └───┴── error / non-200 (backoff) ─────────────┘
//     any ──close()──▶ closed
//
// It does not choose which chats to attach (the orchestrator tells the host) nor own kernels
// (kernels.js lends them).
const STATE = Object.freeze({ NEW: 'new', CONNECTING: 'connecting', ATTACHED: 'attached', CLOSED: 'closed' });
const ALLOWED = { connecting: ['new', 'attached', 'connecting'], attached: ['connecting'], closed: ['new', 'connecting', 'attached', 'closed'] };
export const FILE_WAIT_MS = 5000;
const TERMINAL_KERNEL = new Set(['timeout', 'crashed']);

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const encName = (name) => name.split('/').map(encodeURIComponent).join('/');

export class ChatAttachment {
  // client: OrchClient; kernels: KernelSet; opts: {pageId, log, cancelGraceMs, fileWaitMs}
  // hadKernel: the chat had a kernel on this host before (detached, then attached again).
  constructor(chatId, client, kernels, { pageId, log = () => {}, cancelGraceMs = 2000, fileWaitMs = FILE_WAIT_MS, hadKernel = false } = {}) {
    this.chatId = chatId;
    this.client = client;
    this.kernels = kernels;
    this.pageId = pageId;
    this.log = log;
    this.cancelGraceMs = cancelGraceMs;
    this.fileWaitMs = fileWaitMs;
    this.state = STATE.NEW;
    this.lastEventId = null;
    this.abort = null;
    this.queue = [];            // run payloads waiting, in order
    this.busy = false;
    this.current = null;        // {run_id, attempt, kernel, cancelled, timer, timedOut}
    this.seen = new Set();      // run_id#attempt handled (a replayed event is not run twice)
    this.cache = new Map();     // sha256 → Uint8Array (the chat's files, kept for remounts)
    this.mounted = [];          // the manifest last mounted: [{name, version, sha256, size, data}]
    this.mountedSig = null;     // its names and hashes, when the chat's kernel holds exactly it
    this.hadKernel = hadKernel;
    this.stats = { runs: 0, reconnects: 0 };
  }

  setState(next) {
    if (!(ALLOWED[next] || []).includes(this.state)) throw new Error(`chat ${this.chatId}: ${this.state} -> ${next} not allowed`);
    this.state = next;
  }

  open() { this.setState(STATE.CONNECTING); this.loop(); }

  close() {
    this.setState(STATE.CLOSED);
    if (this.abort) this.abort.abort();
    this.kernels.drop(this.chatId);
  }

  async loop() {
    let backoff = 100;
    while (this.state !== STATE.CLOSED) {
      this.abort = new AbortController();
      let status = 0;
      try {
        status = await this.client.stream(`/v1/chats/${this.chatId}/events?page_id=${encodeURIComponent(this.pageId)}&visible=1`, {
          lastEventId: this.lastEventId, signal: this.abort.signal,
          onOpen: (st) => {
            if (st !== 200 || this.state === STATE.CLOSED) return;
            this.setState(STATE.ATTACHED);
            backoff = 100;
            this.presence().catch((e) => this.log(`presence: ${e.message}`));
          },
          onEvent: (ev) => this.onEvent(ev),
        });
      } catch (e) {
        if (this.state === STATE.CLOSED) break;
        this.log(`chat ${this.chatId}: event stream: ${e.message}`);
      }
      if (this.state === STATE.CLOSED) break;
      if (status === 401 || status === 403 || status === 404) {
        this.log(`chat ${this.chatId}: event stream refused (${status}); giving up`);
        this.setState(STATE.CLOSED);
        break;
      }
      if (this.state === STATE.ATTACHED) this.setState(STATE.CONNECTING);
      this.stats.reconnects++;
      await sleep(backoff);
      backoff = Math.min(backoff * 2, 2000);
    }
  }

  // The chat's kernel was evicted: its file bytes go too (the host's memory stays bounded by the
  // live kernels); the next run downloads them again and remounts them all.
  forgetFiles() { this.cache.clear(); this.mounted = []; this.mountedSig = null; }

  kernelState() {
    const k = this.kernels.live.get(this.chatId);
    if (this.current) return 'busy';
    if (!k) return 'ready';   // the spare stands in: a run starts at once
    return k.state === 'loading' ? 'loading' : k.state === 'dead' ? 'dead' : k.state === 'busy' ? 'busy' : 'ready';
  }

  presence() {
    return this.client.json('POST', `/v1/chats/${this.chatId}/presence`, { page_id: this.pageId, visible: true, kernel: this.kernelState() });
  }

  onEvent(ev) {
    if (ev.id !== null && ev.id !== '') this.lastEventId = ev.id;
    let data;
    try { data = JSON.parse(ev.data); } catch { this.log(`chat ${this.chatId}: bad event data`); return; }
    if (ev.event === 'run') {
      if (data.page_id && data.page_id !== this.pageId) return;   // dispatched to another page
      const key = `${data.run_id}#${data.attempt}`;
      if (this.seen.has(key)) return;
      this.seen.add(key);
      this.queue.push(data);
      this.pump();
    } else if (ev.event === 'cancel') {
      this.cancel(data.run_id);
    } else if (ev.event === 'restart') {
      if (data.page_id && data.page_id !== this.pageId) return;
      const cur = this.current;
      if (cur && cur.run_id === data.run_id) { cur.restartRequested = true; this.kernels.retire(this.chatId, 'timeout'); }
      else if (!cur) this.kernels.retire(this.chatId, 'crashed');
    }
  }

  async pump() {
    if (this.busy) return;
    this.busy = true;
    try {
      while (this.queue.length && this.state !== STATE.CLOSED) {
        const run = this.queue.shift();
        try { await this.execute(run); } catch (e) { this.log(`run ${run.run_id}: ${e.stack || e.message}`); }
      }
    } finally { this.busy = false; }
  }

  async cancel(runId) {
    const cur = this.current;
    if (!cur || cur.run_id !== runId) {
      const i = this.queue.findIndex((r) => r.run_id === runId);
      if (i >= 0) this.queue.splice(i, 1);
      return;
    }
    cur.cancelled = true;
    if (!cur.kernel) return;     // still fetching files: reported cancelled before running
    const how = await cur.kernel.cancel({ graceMs: this.cancelGraceMs });
    this.log(`run ${runId}: cancel → ${how}`);
  }

  // Downloads what the manifest adds, within fileWaitMs in all.  → {files, skipped: [names]}
  async fetchFiles(mounts) {
    const deadline = Date.now() + this.fileWaitMs;
    const files = [], skipped = [];
    await Promise.all(mounts.map(async (m) => {
      let data = this.cache.get(m.sha256);
      if (!data) {
        const left = deadline - Date.now();
        try {
          if (left <= 0) throw new Error('no time left');
          const ac = new AbortController();
          const t = setTimeout(() => ac.abort(), left);
          let r;
          try { r = await this.client.request('GET', m.url, { signal: ac.signal, timeoutMs: left }); } finally { clearTimeout(t); }
          if (r.status !== 200) throw new Error(`HTTP ${r.status}`);
          data = new Uint8Array(r.body.buffer, r.body.byteOffset, r.body.length);
          this.cache.set(m.sha256, data);
        } catch (e) {
          this.log(`chat ${this.chatId}: ${m.name}: download failed (${e.message})`);
          skipped.push(m.name);
          return;
        }
      }
      files.push({ name: m.name, version: m.version, sha256: m.sha256, size: m.size, data });
    }));
    const order = new Map(mounts.map((m, i) => [m.name, i]));
    files.sort((a, b) => order.get(a.name) - order.get(b.name));
    // Forget bytes no manifest names any more.
    const keep = new Set(mounts.map((m) => m.sha256));
    for (const k of this.cache.keys()) if (!keep.has(k)) this.cache.delete(k);
    return { files, skipped };
  }

  // A fresh kernel for this chat with every file of the last manifest mounted → [names].
  async freshKernelRemounted() {
    const { kernel } = await this.kernels.acquire(this.chatId);
    this.mountedSig = JSON.stringify(this.mounted.map((f) => [f.name, f.sha256]));
    if (!this.mounted.length) return { kernel, remounted: [] };
    const r = await kernel.mount(this.mounted);
    return { kernel, remounted: [...r.written, ...r.kept] };
  }

  async execute(ev) {
    const cur = { run_id: ev.run_id, attempt: ev.attempt, kernel: null, cancelled: false, timer: null, timedOut: false };
    this.current = cur;
    this.stats.runs++;
    const notes = [];
    let restarted = false, remounted = [];
    try {
      const { files, skipped } = await this.fetchFiles(ev.mounts || []);
      for (const name of skipped)
        notes.push(`${name} could not be downloaded within ${this.fileWaitMs / 1000} s; it was skipped and will be tried again on the next run`);
      if (cur.cancelled) return await this.report(cur, cancelledResult(notes));

      // The chat's kernel, or a fresh one (spare) with its files remounted.
      const had = this.hadKernel;
      let acquired;
      try { acquired = await this.kernels.acquire(this.chatId); } catch (e) {
        // No kernel could be loaded: the run is reported crashed rather than left to the watchdog.
        return await this.report(cur, { status: 'crashed', stdout: '', stderr: '', files: [], restarted: false, remounted: [],
          error: { type: 'KernelCrashed', message: `the sandbox could not start: ${e.message}`, traceback: '' }, notes });
      }
      const { kernel, fresh } = acquired;
      cur.kernel = kernel;
      this.hadKernel = true;
      const evicted = this.kernels.takeEvicted(this.chatId);
      if (fresh && had) {
        restarted = true;
        notes.push(evicted
          ? 'the sandbox was restarted (its kernel was stopped to make room for other chats): variables from earlier runs are gone; the files were remounted'
          : 'the sandbox was restarted: variables from earlier runs are gone; the files were remounted');
      }
      // Files that failed this time but were mounted before stay mounted (complete only when all
      // came).  The same manifest on the same kernel is not posted again (bytes are copied to the
      // worker on every mount).
      const sig = JSON.stringify(files.map((f) => [f.name, f.sha256])) + (skipped.length ? '+' : '');
      if (fresh || sig !== this.mountedSig) {
        const m = await kernel.mount(files, { complete: skipped.length === 0 });
        for (const r of m.refused) notes.push(`${r.name} was not mounted: ${r.reason}`);
        if (restarted) remounted = [...m.written, ...m.kept];
        this.mountedSig = skipped.length ? null : sig;
      }
      this.mounted = files;

      const unsub = kernel.onEvent((e) => {
        if (e.event === 'started' && e.ref === ev.run_id) {
          this.client.json('POST', `/v1/runs/${ev.run_id}/started`, { attempt: ev.attempt, page_id: this.pageId })
            .catch((err) => this.log(`started: ${err.message}`));
          const ms = Math.max(1, ev.timeout_s || 60) * 1000;
          cur.timer = setTimeout(() => { cur.timedOut = true; this.kernels.retire(this.chatId, 'timeout'); }, ms);
        }
      });
      let result;
      try {
        result = await kernel.run({ run_id: ev.run_id, code: ev.code, pypi: !!ev.pypi, limits: ev.limits });
      } finally {
        unsub();
        clearTimeout(cur.timer);
      }
      if (cur.timedOut) result.status = 'timeout';
      result.notes = [...notes, ...(result.notes || [])];
      if (kernel.state === 'dead' || TERMINAL_KERNEL.has(result.status)) {
        // The kernel is gone (time limit, cancel past its grace, crash): a fresh one takes its
        // place with every file remounted before anything else runs.
        this.kernels.retire(this.chatId, result.status);
        const fresh2 = await this.freshKernelRemounted();
        restarted = true;
        remounted = fresh2.remounted;
        if (result.status === 'timeout') {
          result.error = result.error || { type: 'TimeoutError', message: `The run did not finish within its time limit of ${ev.timeout_s} s; the sandbox was restarted.`, traceback: '' };
          result.notes = result.notes.filter((n) => !/hit the time limit/.test(n));
          result.notes.push(`the run hit the time limit of ${ev.timeout_s} s; the sandbox was restarted and every file was remounted`);
        }
      }
      result.restarted = restarted || !!result.restarted;
      result.remounted = result.restarted ? remounted : [];
      return await this.report(cur, result);
    } finally {
      this.current = null;
      this.presence().catch(() => {});
    }
  }

  async report(cur, result) {
    const q = `?attempt=${cur.attempt}`;
    const listed = [];
    for (const f of result.files || []) {
      let r = { status: 0 };
      for (let i = 0; i < 3 && r.status === 0; i++) {
        try {
          r = await this.client.request('PUT', `/v1/runs/${cur.run_id}/files/${encName(f.name)}${q}`,
            { body: Buffer.from(f.data.buffer, f.data.byteOffset, f.data.length), headers: { 'content-type': 'application/octet-stream' } });
        } catch (e) {
          this.log(`run ${cur.run_id}: ${f.name} not uploaded (${e.message}); retrying`);
          await sleep(200 * (i + 1));
        }
      }
      if (r.status === 201) listed.push({ name: f.name, size: f.size, sha256: f.sha256, kind: f.kind });
      else if (r.status === 409) return;   // a stale attempt: the orchestrator moved on
      else result.notes.push(`${f.name} could not be saved (HTTP ${r.status})`);
    }
    const body = {
      attempt: cur.attempt, status: result.status, stdout: result.stdout || '', stderr: result.stderr || '',
      stdout_truncated: !!result.stdout_truncated, stderr_truncated: !!result.stderr_truncated,
      error: result.error || null, files: listed, files_unlisted: result.files_unlisted || 0,
      figures_dropped: result.figures_dropped || 0, notes: result.notes || [],
      restarted: !!result.restarted, remounted: result.remounted || [],
    };
    for (let i = 0; i < 5; i++) {
      try {
        const r = await this.client.json('POST', `/v1/runs/${cur.run_id}/result`, body);
        if (r.status !== 200) this.log(`run ${cur.run_id}: result refused (${r.status} ${JSON.stringify(r.data)})`);
        return;
      } catch (e) {
        this.log(`run ${cur.run_id}: result not delivered (${e.message}); retrying`);
        await sleep(200 * (i + 1));
      }
    }
  }
}

function cancelledResult(notes) {
  return { status: 'cancelled', stdout: '', stderr: '', error: null, files: [], notes: [...notes, 'the run was cancelled before it started'],
    restarted: false, remounted: [] };
}
