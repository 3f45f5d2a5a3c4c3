// session.js -- ChatSession: attaches this page to a chat as its kernel host.  The page protocol
// itself (event stream with the bearer page token and Last-Event-ID, presence, runs executed one at
// a time, files, started, uploads, result, superseded attempts, cancel, restart) is
// worker/session.js's PageSession, the same code the headless host runs; this file adds what is
// about the page:
//   - the DOM's visibility (presence.js) → the session's presence reports;
//   - the screen wake lock, held while a run goes (a phone that sleeps freezes the page and the run);
//   - the view models UIs render: one per run (queued → preparing → running → done, or elsewhere),
//     with the result, this page's own copies of its output files, and the chat's file list;
//   - switching the page to another chat (a fresh interpreter, the old chat's files gone).
//
// It does not render anything, create chats or runs for the assistant, or decide policy (pausing,
// retries, which files are mounted): the orchestrator does.
import { Emitter } from '../../worker/emitter.js';
import { PageSession } from '../../worker/session.js';
import { Api, pageClient } from './api.js';
import { Presence } from './presence.js';
import { WakeLock } from './wakelock.js';

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
    this.presence = new Presence({ onChange: (visible, why) => this.page.setVisible(visible, why) });
    this.runs = new Map();   // run_id -> latest view model (for UIs)
    this.bind(chatId, token);
  }

  // A PageSession for this chat; its events become this page's view models.
  bind(chatId, token) {
    this.chatId = chatId;
    this.token = token;
    this.api = new Api({ base: this.base, token });
    const page = new PageSession({ chatId, pageId: this.pageId, client: pageClient(this.api), supervisor: this.supervisor,
      visible: this.presence.visible, fileDeadlineMs: this.fileDeadlineMs,
      log: (m) => console.warn(`ui-adapter: ${m}`) });
    this.page = page;
    const mine = (fn) => (ev) => { if (this.page === page) fn(ev); };
    for (const type of ['stream', 'kernel', 'visibility', 'event', 'stale', 'error']) page.on(type, mine((ev) => this.emit(type, ev)));
    page.on('files', mine(() => this.refreshFiles()));
    page.on('elsewhere', mine(({ job }) => {
      // Dispatched to another page of this chat (another tab): show it, do not run it.
      this.view(job.run_id, { chat_id: job.chat_id, code: job.code, origin: job.origin, state: 'elsewhere', attempts: job.attempt, status: null });
      this.emit('elsewhere', { run_id: job.run_id });
    }));
    page.on('queued', mine(({ job }) => this.view(job.run_id, { chat_id: job.chat_id, code: job.code, origin: job.origin, state: 'queued',
      attempts: job.attempt, status: null, left_out: job.left_out || [] })));
    page.on('begin', mine(() => this.wakeLock.acquire()));
    page.on('end', mine(() => this.wakeLock.release()));
    page.on('preparing', mine(({ run_id: runId }) => this.view(runId, { state: 'preparing' })));
    page.on('download', mine((p) => this.emit('download', p)));
    page.on('running', mine(({ run_id: runId }) => this.view(runId, { state: 'running', started_at: Date.now() })));
    page.on('result', mine(({ run_id: runId, body, run, files, duration_ms: ms, restart_ms: restartMs }) => {
      // Keep the output bytes for the UI (no re-download for previews of this page's own runs).
      const local = new Map(files.map((f) => [f.name, f.data]));
      const v = this.view(runId, { ...body, ...(run || {}), state: 'done', duration_ms: run?.duration_ms ?? ms, localBytes: local, restart_ms: restartMs });
      this.emit('result', v);
    }));
  }

  get state() { return this.page.state; }
  get stream() { return this.page.stream; }
  get current() { return this.page.current; }
  get cache() { return this.page.cache; }

  kernelState() { return this.page.kernelState(); }

  /**
   * Register with the orchestrator: open the event stream; presence follows once it is open.  Call
   * it as soon as the page knows its chat, before anything can start a run (the stream is what
   * makes this page the chat's host).  Returns at once; 'stream' events tell the connection state.
   */
  attach() {
    if (this.page.state !== 'new') return;
    this.page.attach();
    this.presence.start();
    this.refreshFiles();
  }

  detach() {
    this.presence.stop();
    this.page.detach();
  }

  /**
   * Switch this page to another chat: a fresh interpreter, the old chat's files removed (files
   * named in `keep`, e.g. knowledge files the user mounted, stay), then attach to the new chat.
   */
  async switchChat(chatId, token, { keep = [] } = {}) {
    this.detach();
    this.runs.clear();
    this.bind(chatId, token);
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

  view(runId, patch) {
    const v = { ...(this.runs.get(runId) || { run_id: runId }), ...patch };
    this.runs.set(runId, v);
    this.emit('run', v);
    return v;
  }

  /** The bytes of an artifact for download/preview: this page's copy, else GET /v1/files/{id}. */
  async artifactBytes(runId, file) {
    const local = this.runs.get(runId)?.localBytes?.get(file.name);
    if (local) return local;
    return this.api.fileBytes(file.artifact_id || file.file_id);
  }
}
