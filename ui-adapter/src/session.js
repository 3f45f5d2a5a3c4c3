// session.js -- ChatSession: attaches this page to a chat as its kernel host.  It opens the chat's
// event stream (fetch + bearer page token, reconnecting with Last-Event-ID and the same page id),
// reports presence (visible/hidden + kernel state), and executes the runs the orchestrator sends,
// one at a time and in order: fetch the manifest's files into the page's in-memory copies (one 5 s
// deadline, stalled downloads skipped with a note), mount them, POST started, run on the kernel
// supervisor (time limit, spare, remount, cancel), upload each output file with PUT, POST the
// result.  A run re-dispatched with a newer attempt (the page was hidden, then came back)
// supersedes the older attempt, whose result is never posted.  It holds the screen wake lock while
// a run goes, and emits events a UI renders (see docs/ui-adapter.md).
//
// It does not render anything, create chats or runs for the assistant, or decide policy (pausing,
// retries, which files are mounted): the orchestrator does.
//
//   new ──attach()──▶ attached ──switchChat()──▶ attached (fresh interpreter, old files gone)
//                        │
//                        └──detach()──▶ detached
import { Emitter } from './emitter.js';
import { Api, ApiError } from './api.js';
import { EventStream } from './sse.js';
import { Presence } from './presence.js';
import { WakeLock } from './wakelock.js';
import { FileCache, sha256Hex } from './files.js';

export function newPageId() {
  return (globalThis.crypto?.randomUUID?.() || `p-${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`);
}

export class ChatSession extends Emitter {
  /**
   * @param {object} o
   * @param {string} o.chatId
   * @param {string} o.token             the chat's page token (bearer)
   * @param {import('./kernel.js').KernelSupervisor} o.supervisor
   * @param {string} [o.base='']         API origin ('' = same origin)
   * @param {string} [o.pageId]          kept across reconnects; a new one per page load by default
   * @param {number} [o.fileDeadlineMs=5000]
   */
  constructor({ chatId, token, supervisor, base = '', pageId = newPageId(), fileDeadlineMs = 5000 }) {
    super();
    this.base = base;
    this.pageId = pageId;
    this.supervisor = supervisor;
    this.fileDeadlineMs = fileDeadlineMs;
    this.wakeLock = new WakeLock();
    this.state = 'new';
    this.current = null;   // {run_id, attempt, superseded}
    this.queue = [];
    this.seen = new Set(); // `${run_id}#${attempt}` already taken
    this.runs = new Map(); // run_id -> latest view model (for UIs)
    this._bind(chatId, token);
    this._onKernelState = ({ state }) => { this.presence?.report('kernel'); this.emit('kernel', { state }); };
    supervisor.on('state', this._onKernelState);
  }

  _bind(chatId, token) {
    this.chatId = chatId;
    this.token = token;
    this.api = new Api({ base: this.base, token });
    this.cache = new FileCache({ api: this.api, deadlineMs: this.fileDeadlineMs });
  }

  kernelState() {
    const s = this.supervisor.state;
    return s === 'idle' ? 'loading' : s === 'disposed' ? 'dead' : s;
  }

  /**
   * Register with the orchestrator: open the event stream and report presence.  Call it as soon as
   * the page knows its chat, before anything can start a run (the stream is what makes this page
   * the chat's host).  Returns at once; 'stream' events tell the connection state.
   */
  attach() {
    if (this.state === 'attached') return;
    this.state = 'attached';
    this.stream = new EventStream({
      url: `${this.base}/v1/chats/${encodeURIComponent(this.chatId)}/events?page_id=${encodeURIComponent(this.pageId)}`,
      headers: () => ({ Authorization: `Bearer ${this.token}` }),
      onEvent: (ev) => this._onEvent(ev),
      onState: (state, info) => {
        this.emit('stream', { state, ...info });
        if (state === 'open') this.presence?.report('stream-open', true);
      },
    });
    this.presence = new Presence({ api: this.api, chatId: this.chatId, pageId: this.pageId,
      kernelState: () => this.kernelState(),
      onChange: (visible, why) => {
        this.emit('visibility', { visible, why });
        if (visible && this.stream?.state === 'waiting') this.stream.reconnectNow();
      } });
    this.stream.start();
    this.presence.start();
    this.refreshFiles();
  }

  detach() {
    if (this.state !== 'attached') return;
    this.state = 'detached';
    this.stream?.stop();
    this.presence?.stop();
    this.supervisor.off('state', this._onKernelState);
  }

  /**
   * Switch this page to another chat: a fresh interpreter, the old chat's files removed (files
   * named in `keep`, e.g. knowledge files the user mounted, stay), then attach to the new chat.
   */
  async switchChat(chatId, token, { keep = [] } = {}) {
    this.detach();
    this.supervisor.on('state', this._onKernelState);
    this.queue = []; this.seen.clear(); this.runs.clear();
    if (this.current) this.current.superseded = true;
    this._bind(chatId, token);
    this.state = 'new';
    this.attach();
    await this.supervisor.reset(keep);
    this.emit('switched', { chatId });
  }

  async refreshFiles() {
    try {
      const list = await this.api.listFiles(this.chatId);
      const files = Array.isArray(list) ? list : (list?.files || []);
      this.emit('files', { files });
      return files;
    } catch (e) {
      this.emit('error', { where: 'files', message: e.message });
      return null;
    }
  }

  _onEvent(ev) {
    let data = null;
    try { data = ev.data ? JSON.parse(ev.data) : null; } catch { data = null; }
    this.emit('event', { type: ev.type, id: ev.id, data });
    if (ev.type === 'run' && data) this._enqueue(data);
    else if (ev.type === 'cancel' && data) this._cancel(data.run_id);
    else if (ev.type === 'restart' && data) this._restart(data.run_id, data.page_id);
    else if (ev.type === 'files') this.refreshFiles();
  }

  _view(run_id, patch) {
    const v = { ...(this.runs.get(run_id) || { run_id }), ...patch };
    this.runs.set(run_id, v);
    this.emit('run', v);
    return v;
  }

  _enqueue(job) {
    const key = `${job.run_id}#${job.attempt}`;
    if (this.seen.has(key)) return; // replayed after a reconnect
    this.seen.add(key);
    if (job.page_id && job.page_id !== this.pageId) {
      // Dispatched to another page of this chat (another tab): show it, do not run it.
      this._view(job.run_id, { chat_id: job.chat_id, code: job.code, origin: job.origin, state: 'elsewhere',
        attempts: job.attempt, status: null });
      this.emit('elsewhere', { run_id: job.run_id });
      return;
    }
    // A newer attempt of the run in progress supersedes it (re-dispatch after a pause).
    if (this.current && this.current.run_id === job.run_id && this.current.attempt < job.attempt) {
      this.current.superseded = true;
      this.supervisor.cancel();
    }
    this.queue = this.queue.filter((q) => q.run_id !== job.run_id);
    this.queue.push(job);
    this._view(job.run_id, { chat_id: job.chat_id, code: job.code, origin: job.origin, state: 'queued',
      attempts: job.attempt, status: null, left_out: job.left_out || [] });
    this._pump();
  }

  _cancel(runId) {
    this.queue = this.queue.filter((q) => q.run_id !== runId);
    if (this.current && this.current.run_id === runId) this.supervisor.cancel();
  }

  async _restart(runId, pageId) {
    if (pageId && pageId !== this.pageId) return;
    this.queue = this.queue.filter((q) => q.run_id !== runId);
    if (this.current && (!runId || this.current.run_id === runId)) {
      // The orchestrator already settled the run (its watchdog): replace the kernel, post nothing.
      this.current.superseded = true;
      this.supervisor.cancel({ replace: true });
    } else if (!this.current) {
      await this.supervisor.replace('restart requested').catch(() => {});
    }
  }

  async _pump() {
    if (this._pumping) return;
    this._pumping = true;
    try {
      while (this.queue.length && this.state === 'attached') {
        const job = this.queue.shift();
        this.current = { run_id: job.run_id, attempt: job.attempt, superseded: false };
        try { await this._execute(job, this.current); }
        catch (e) { this.emit('error', { where: 'run', run_id: job.run_id, message: e.message }); }
        this.current = null;
      }
    } finally { this._pumping = false; }
  }

  async _execute(job, cur) {
    const { run_id: runId, attempt } = job;
    this.wakeLock.acquire();
    try {
      this._view(runId, { state: 'preparing' });
      const { files, skipped } = await this.cache.fetchAll(job.mounts || [], (p) => this.emit('download', { run_id: runId, ...p }));
      const notes = skipped.map((s) => `${s.name}: ${s.reason}`);
      // The run's clock starts when Python can start: wait for the kernel before reporting.
      while (['idle', 'loading'].includes(this.supervisor.state)) await new Promise((r) => this.supervisor.once('state', r));
      if (cur.superseded) return;
      try {
        await this.api.started(runId, attempt, this.pageId);
      } catch (e) {
        if (e instanceof ApiError && (e.status === 409 || e.status === 404)) { this.emit('stale', { run_id: runId, attempt }); return; }
        throw e;
      }
      this._view(runId, { state: 'running', started_at: Date.now() });
      const res = await this.supervisor.run({ code: job.code, timeoutS: job.timeout_s || 60, files, limits: job.limits || {}, notes, runId,
        pypi: job.pypi !== false });
      if (cur.superseded) { this.emit('stale', { run_id: runId, attempt }); return; }
      // Upload every listed file first, then the result.
      const listed = [];
      for (const f of res.files || []) {
        const bytes = f.bytes;
        const sha = f.sha256 || await sha256Hex(bytes);
        try {
          await this.api.putRunFile(runId, f.name, bytes, attempt);
          listed.push({ name: f.name, size: bytes.length, sha256: sha, kind: f.kind || 'file' });
        } catch (e) {
          if (e instanceof ApiError && e.status === 409) { this.emit('stale', { run_id: runId, attempt }); return; }
          res.notes = [...(res.notes || []), `${f.name} could not be saved: ${e.message}`];
        }
      }
      const body = {
        attempt, status: res.status, stdout: res.stdout || '', stderr: res.stderr || '',
        stdout_truncated: !!res.stdout_truncated, stderr_truncated: !!res.stderr_truncated,
        error: res.error || null, files: listed, files_unlisted: res.files_unlisted || 0,
        figures_dropped: res.figures_dropped || 0, notes: res.notes || [],
        restarted: !!res.restarted, remounted: res.remounted || [],
      };
      let run;
      try {
        run = await this.api.result(runId, body);
      } catch (e) {
        if (e instanceof ApiError && e.status === 409) { this.emit('stale', { run_id: runId, attempt }); return; }
        throw e;
      }
      // Keep the output bytes for the UI (no re-download for previews of this page's own runs).
      const local = new Map((res.files || []).map((f) => [f.name, f.bytes]));
      const view = this._view(runId, { ...body, ...(run || {}), state: 'done', duration_ms: run?.duration_ms ?? res.duration_ms,
        localBytes: local, restart_ms: res.restart_ms });
      this.emit('result', view);
    } finally {
      this.wakeLock.release();
    }
  }

  /** The bytes of an artifact for download/preview: this page's copy, else GET /v1/files/{id}. */
  async artifactBytes(runId, file) {
    const local = this.runs.get(runId)?.localBytes?.get(file.name);
    if (local) return local;
    return this.api.fileBytes(file.artifact_id || file.file_id);
  }
}
