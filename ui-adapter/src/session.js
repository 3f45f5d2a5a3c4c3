// session.js -- ChatSession: attaches this page to a chat as its kernel host.  The page protocol
// itself (event stream with the bearer page token and Last-Event-ID, presence, runs executed one at
// a time, files, started, uploads, result, superseded attempts, cancel, restart) is
// worker/session.js's PageSession, the same code the headless host runs; this file adds what is
// about the page:
//   - the DOM's visibility (presence.js) → the session's presence reports;
//   - the screen wake lock, held while a run goes (a phone that sleeps freezes the page and the run);
//   - the view models UIs render: one per run (queued → preparing → running → done, or elsewhere),
//     with its live output, displays and input() prompt as they come (from this page's own run, or
//     from the chat stream's `output`/`display`/`input_request` events for a run another page
//     executes; chunks deduplicated by offset), the time used against the limit, why a re-run
//     came, the result, this page's own copies of its output files, and the chat's file list;
//   - answering input(): POST /v1/runs/{run}/input (the card's field);
//   - the conversation (messages.js's MessageList): the chat stream's `message` events and the list
//     `GET /v1/chats/{chat}/messages` answers, merged; asking (POST …/messages) and stopping a turn;
//   - switching the page to another chat (a fresh interpreter, the old chat's files gone);
//   - leaving: on pagehide (a reload, a closed tab) and on a chat switch the page session says at
//     once that this page is going (its run goes to the next page without waiting out the
//     server's grace), and the runs it held are noted in sessionStorage (ids only: no token), so
//     the page that loads next in this tab can say why they run again.
//
// It does not render anything, create chats or runs for the assistant, or decide policy (pausing,
// retries, which files are mounted, what the model is asked): the orchestrator does.
import { Emitter } from '../../worker/emitter.js';
import { codePoints } from '../../worker/output.js';
import { PageSession } from '../../worker/session.js';
import { Api, ApiError, pageClient } from './api.js';
import { MessageList } from './messages.js';
import { Presence } from './presence.js';
import { WakeLock } from './wakelock.js';

// What a new attempt starts without: the live parts of a run's view.
const LIVE_RESET = { stdout: '', stderr: '', stdout_truncated: false, stderr_truncated: false, displays: [], value: null,
  input: null, input_ms: 0, started_at: null, running_here: false };

// sessionStorage (this tab only, across its reloads): the runs the page held when it went away.
const LEFT_KEY = 'cerea-sandbox.left';
const LEFT_FRESH_MS = 10 * 60_000;

/** The runs this tab's previous page held when it was reloaded: run_id → 'reloaded' (read once). */
function takeLeftRuns(chatId, storage = globalThis.sessionStorage) {
  const earlier = new Map();
  try {
    const left = JSON.parse(storage?.getItem(LEFT_KEY) || 'null');
    storage?.removeItem(LEFT_KEY);
    if (left && left.chat_id === chatId && Date.now() - left.at < LEFT_FRESH_MS && Array.isArray(left.runs)) {
      for (const id of left.runs.slice(0, 100)) if (typeof id === 'string') earlier.set(id, 'reloaded');
    }
  } catch { /* no storage (a sandboxed embedding), or not ours: no reasons to give */ }
  return earlier;
}

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
    this.presence = new Presence({ onChange: (visible, why) => this.page.setVisible(visible, why), onLeave: () => this.leaving() });
    this.runs = new Map();   // run_id -> latest view model (for UIs)
    this.messages = null;    // MessageList of the chat bound
    this.leftChats = new Map(); // chat_id → the run ids this page held when it switched away from it
    this.bind(chatId, token, takeLeftRuns(chatId));
  }

  // A PageSession for this chat; its events become this page's view models.
  bind(chatId, token, earlier = new Map()) {
    this.chatId = chatId;
    this.token = token;
    this.api = new Api({ base: this.base, token });
    const messages = new MessageList();
    this.messages = messages;
    messages.on('message', (v) => { if (this.messages === messages) this.emit('message', v); });
    const page = new PageSession({ chatId, pageId: this.pageId, client: pageClient(this.api), supervisor: this.supervisor,
      visible: this.presence.visible, fileDeadlineMs: this.fileDeadlineMs, earlier,
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
    page.on('queued', mine(({ job, rerun }) => this.view(job.run_id, { chat_id: job.chat_id, code: job.code, origin: job.origin, state: 'queued',
      attempts: job.attempt, status: null, left_out: job.left_out || [], timeout_s: job.timeout_s || 60, rerun: rerun || null,
      ...LIVE_RESET })));
    page.on('begin', mine(() => this.wakeLock.acquire()));
    page.on('end', mine(() => this.wakeLock.release()));
    page.on('preparing', mine(({ run_id: runId }) => this.view(runId, { state: 'preparing' })));
    page.on('download', mine((p) => this.emit('download', p)));
    page.on('running', mine(({ run_id: runId }) => this.view(runId, { state: 'running', started_at: Date.now(), running_here: true })));
    page.on('output', mine((e) => this.liveOutput(e)));
    page.on('display', mine((e) => this.liveDisplay(e)));
    page.on('input_request', mine((e) => this.inputRequested(e)));
    page.on('input_end', mine(({ run_id: runId }) => this.inputEnded(runId)));
    // The chat stream's live events: runs another page executes (and this page's own: deduplicated).
    page.on('event', mine(({ type, id, data }) => {
      if (type === 'message') { messages.apply({ id, data }); return; }
      if (!data || !data.run_id || !this.runs.has(data.run_id) || this.runs.get(data.run_id).status) return;
      if (type === 'output') this.liveOutput(data);
      else if (type === 'display') this.liveDisplay(data);
      else if (type === 'input_request') this.inputRequested(data);
    }));
    page.on('result', mine(({ run_id: runId, body, run, files, duration_ms: ms, restart_ms: restartMs }) => {
      // Keep the output bytes for the UI (no re-download for previews of this page's own runs).
      const local = new Map(files.map((f) => [f.name, f.data]));
      const v = this.view(runId, { ...body, ...(run || {}), state: 'done', duration_ms: run?.duration_ms ?? ms, localBytes: local, restart_ms: restartMs,
        input: null, value: run?.value ?? body.value ?? null, displays: run?.displays ?? body.displays ?? [] });
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

  /** pagehide: this page is going away (a reload, a closed tab, a navigation). */
  leaving() {
    try {
      const runs = this.page.heldRunIds();
      if (runs.length) globalThis.sessionStorage?.setItem(LEFT_KEY, JSON.stringify({ chat_id: this.chatId, runs, at: Date.now() }));
    } catch { /* no storage: the next page says less */ }
    this.page.leave('pagehide');
  }

  /**
   * Switch this page to another chat: a fresh interpreter, the old chat's files removed (files
   * named in `keep`, e.g. knowledge files the user mounted, stay), then attach to the new chat.
   */
  async switchChat(chatId, token, { keep = [] } = {}) {
    // The runs this page held in the chat it leaves: if it comes back to that chat and they run
    // again here, they say why.
    const held = this.page.heldRunIds();
    if (held.length) this.leftChats.set(this.chatId, held);
    if (this.leftChats.size > 20) this.leftChats.delete(this.leftChats.keys().next().value);
    this.detach();
    this.runs.clear();
    const back = new Map((this.leftChats.get(chatId) || []).map((id) => [id, 'switched']));
    this.leftChats.delete(chatId);
    this.bind(chatId, token, back);
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

  // A chunk of a run's live output: kept when it continues what the view holds (a chunk seen
  // twice, from this page's kernel and from the chat stream, is kept once).
  liveOutput({ run_id: runId, attempt, stream, offset, text, truncated }) {
    const v = this.runs.get(runId);
    if (!v || v.status || (attempt && v.attempts && attempt !== v.attempts) || (stream !== 'stdout' && stream !== 'stderr')) return;
    const have = v[stream] || '';
    const n = codePoints(have);
    if (offset > n || offset + codePoints(text) <= n) return;
    const tail = [...text].slice(n - offset).join('');
    this.view(runId, { [stream]: have + tail, [`${stream}_truncated`]: !!v[`${stream}_truncated`] || !!truncated });
  }

  liveDisplay({ run_id: runId, attempt, index, data }) {
    const v = this.runs.get(runId);
    if (!v || v.status || (attempt && v.attempts && attempt !== v.attempts)) return;
    const displays = v.displays || [];
    if (index !== displays.length) return;
    this.view(runId, { displays: [...displays, data] });
  }

  // input() asks: from this page's kernel, and again from the chat stream once the orchestrator has
  // it.  A request the view holds already is kept (a new `since` would rebuild the card's field
  // and drop what the person typed meanwhile).
  inputRequested({ run_id: runId, attempt, prompt }) {
    const v = this.runs.get(runId);
    if (!v || v.status || v.input || (attempt && v.attempts && attempt !== v.attempts)) return;
    this.view(runId, { input: { prompt, since: Date.now() } });
  }

  inputEnded(runId) {
    const v = this.runs.get(runId);
    if (!v || !v.input) return;
    this.view(runId, { input: null, input_ms: (v.input_ms || 0) + (Date.now() - v.input.since) });
  }

  /** Answer the input() a run waits for (the card's field): POST /v1/runs/{run}/input. */
  answerInput(runId, text) { return this.api.call('POST', `/v1/runs/${encodeURIComponent(runId)}/input`, { text }); }

  /**
   * Reads the conversation (`GET /v1/chats/{chat}/messages`) into `messages`; events that came
   * meanwhile are kept (the merge converges).  Resolves the list, or null when this server has no
   * messages API (404: an unknown chat is told by the page's other calls), and throws ApiError on
   * other refusals.
   */
  async loadMessages() {
    const messages = this.messages;
    const r = await this.api.send('GET', `/v1/chats/${encodeURIComponent(this.chatId)}/messages`);
    if (r.status === 404) return null;
    if (!r.ok) throw new ApiError(r.status, r.json?.error?.code || `http_${r.status}`, r.json?.error?.message || r.text.slice(0, 200));
    messages.load(r.json?.messages);
    return messages.list();
  }

  /** Asks the assistant: `POST /v1/chats/{chat}/messages` -> {message_id, turn_id}; ApiError on refusal. */
  sendMessage(text, fileIds) { return this.api.postMessage(this.chatId, text, fileIds); }

  /** Stops a turn being answered: `POST /v1/turns/{turn}/cancel`. */
  stopTurn(turnId) { return this.api.cancelTurn(turnId); }

  view(runId, patch) {
    const v = { seen_at: Date.now(), ...(this.runs.get(runId) || { run_id: runId }), ...patch };
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
