// main-chat.js -- the chat page at /chat/{chat_id}#token={page_token}: attaches this page to the
// chat as its kernel host (ChatSession) AT ONCE, while the module first evaluates, before anything
// renders or any effect runs, so a run the assistant starts right away finds this page registered
// and the chat's files mounted.  Then it shows the chat's files as chips (left-out ones say why),
// the conversation (conversation.js: the messages in order, the answer streaming in as markdown,
// each message's runs under it as run cards — code, output as it comes, the time used against the
// limit, a field for its input(), its value and displays, files with download and preview, "keep
// this page open" on phones and why a run started again — and the user's own runs between them),
// the message box (composer.js; or, when the deployment has no model, a note saying so), the
// stream and kernel state (boot.js, loaded first, starts the kernel and shows the runtime's
// download progress).  A small editor runs the user's own
// code in the chat (origin "user").  Uploads are checked against the server's limit before they
// start and show their progress.  A link that does not reach its chat (no token, a wrong one, an
// unknown chat) replaces the page with one that says so and what to do, and stops the Python
// runtime it had started loading.
// The token comes from the URL fragment (never sent to the server by the browser) and is only ever
// sent as a bearer header: a page link works with it alone (how integrators embed the page).  A
// chat opened without one is its signed-in owner's (the sign-in page first when no one is): the
// page asks for its token with the session (POST /v1/chats/{chat}/page_link) and keeps it in
// memory only, and shows the owner's chat list beside the chat (sidebar.js).  The "Connect an
// assistant" control (connect.js) mints the chat's MCP key with the same token.
import { ChatSession } from '../src/session.js';
import { Api } from '../src/api.js';
import { RunCard } from './cards.js';
import { Conversation } from './conversation.js';
import { wireComposer } from './composer.js';
import { h, fmtBytes } from './dom.js';
import { booted } from './boot.js';
import { serverConfig } from './settings.js';
import { createEditor } from './editor.js';
import { uploadFile, tooLarge } from './upload.js';
import { pageToken } from './chats.js';
import { requirePerson, recheckOnShow } from './account.js';
import { mountSidebar, onChatChanged } from './sidebar.js';
import { wireConnect } from './connect.js';
import { UI, UI_CODE } from '../../worker/notes.js';

const $ = (id) => document.getElementById(id);
const chatId = decodeURIComponent(location.pathname.split('/').filter(Boolean)[1] || '');
const hashToken = new URLSearchParams(location.hash.slice(1)).get('token') || '';
// No token in the link: the owner's page (awaited only then, so a page link registers at once).
const person = hashToken || !chatId ? null : await requirePerson().catch(() => null);
let ownerRefused = null;
const token = hashToken || (person ? await pageToken(chatId).catch((e) => { ownerRefused = e.status || 'none'; return ''; }) : '');

// ---- Register first (synchronously, before any rendering) ------------------------------------
// The kernel is boot.js's, already loading (its worker URL follows the PyPI toggle and
// /v1/config); the event stream does not wait for it.
const { supervisor, started } = booted;
const session = token && chatId ? new ChatSession({ chatId, token, supervisor }) : null;
session?.attach();
window.cereaSession = session; window.cereaSupervisor = supervisor; // tests and the console

let linkBroken = false;
started.catch((e) => { if (!linkBroken) $('runtime').textContent = `The Python runtime did not load: ${e.message}`; });

// A link that does not reach its chat: the page says so instead of offering what cannot work.
const LINK_WHY = { none: 'linkNoToken', 401: 'linkRefused', 403: 'linkOtherChat', 404: 'linkNoChat' };
function showBrokenLink(why) {
  if (linkBroken) return;
  linkBroken = true;
  session?.detach();
  supervisor.dispose();
  document.title = 'Chat link not valid — Cerea sandbox';
  // The chat's parts stay in the document (late callbacks may still touch them), hidden.
  for (const el of $('main').children) el.hidden = true;
  $('main').append(h('section', { class: 'panel error-page', 'data-testid': 'bad-link', role: 'alert' },
    h('h2', {}, 'This chat link does not work'),
    h('p', { 'data-code': UI_CODE[LINK_WHY[why] || 'linkOther'] }, LINK_WHY[why] ? UI[LINK_WHY[why]]() : UI.linkOther(why)),
    h('p', { 'data-code': UI_CODE.linkHelp }, UI.linkHelp()),
    h('p', {}, h('a', { href: '/', class: 'btn' }, 'Go to the playground and chats'))));
}

// ---- Rendering (boot.js shows the runtime's progress) -------------------------------------------
if (person) {
  // The owner's chat list beside the chat (a drawer on a phone); a page left by signing out shows
  // nothing of it again.
  $('layout').classList.add('with-side');
  $('chats').hidden = false;
  $('open-chats').hidden = false;
  mountSidebar({ person, current: chatId });
  recheckOnShow(person);
}
if (!session) {
  showBrokenLink(ownerRefused || 'none');
} else {
  wireConnect({ button: $('connect'), chatId, token });
  // The title is the server's (GET /v1/chats/{chat} with the page token).  It is read again when
  // this page comes back to the front and when a tab of this browser renamed it, so a rename
  // elsewhere shows here without a reload.
  const showTitle = (title) => {
    $('chat-title').textContent = title || `Chat ${chatId.slice(0, 12)}…`;
    document.title = `${title || 'Chat'} — Cerea sandbox`;
  };
  $('chat-title').title = chatId;
  showTitle(null);
  let titleSeq = 0;
  async function loadTitle() {
    const seq = ++titleSeq;
    let title;
    try { title = (await new Api({ token }).getChat(chatId))?.title; }
    catch (e) {
      if ([401, 403, 404].includes(e.status)) showBrokenLink(e.status);
      return; // otherwise the title shown stays
    }
    if (seq !== titleSeq) return; // a later read wins over an earlier slow one
    showTitle(title);
    $('chat-title').dataset.source = 'server';
  }
  loadTitle();
  onChatChanged((id) => { if (id === chatId) loadTitle(); }); // renamed or deleted in a tab of this browser
  document.addEventListener('visibilitychange', () => { if (document.visibilityState === 'visible') loadTitle(); });
  const STREAM = { connecting: 'Connecting…', open: 'Connected', waiting: 'Reconnecting…', failed: 'Not allowed: the page token does not reach this chat', stopped: 'Detached' };
  session.on('stream', ({ state, status }) => {
    if (state === 'failed') { showBrokenLink(status); return; }
    $('stream-state').textContent = STREAM[state] || state; $('stream-state').dataset.state = state;
  });
  // The runtime's own line (progress.js) says "Python ready": the badge speaks only of the rest.
  session.on('kernel', ({ state }) => { $('kernel-state').textContent = state === 'ready' || state === 'idle' ? '' : `Python: ${state}`; $('kernel-state').dataset.state = state; });

  session.on('files', ({ files }) => {
    $('chips').replaceChildren(...files.map((f) => {
      const out = !f.mounted;
      return h('li', { class: `chip${out ? ' left-out' : ''}`, 'data-name': f.name, title: out ? '' : `/mnt/data/${f.name}` },
        h('span', {}, f.name), h('span', { class: 'muted' }, fmtBytes(f.size)),
        out ? h('span', { class: 'chip-reason', 'data-testid': 'left-out' }, `not in the sandbox: ${f.left_out_reason || 'left out'}`) : null);
    }));
  });

  const cards = new Map();
  const api = new Api({ token });
  function cardFor(runId) {
    let c = cards.get(runId);
    if (!c) {
      c = new RunCard({ getBytes: (f) => session.artifactBytes(runId, f), onCancel: () => api.cancelRun(runId).catch(() => {}),
        onInput: (text) => session.answerInput(runId, text) });
      cards.set(runId, c);
    }
    return c;
  }
  const convo = new Conversation({ el: $('conversation'), messages: session.messages, cardFor });
  window.cereaConversation = convo;
  session.on('run', (v) => convo.run(v));
  // After a reload the chat's runs come back from the server (GET /v1/chats/{chat}/runs with the
  // page token, runs other pages executed included) and its conversation (GET …/messages).
  (async () => {
    let runs = [];
    try { runs = (await api.chatRuns(chatId, 50))?.runs || []; }
    catch (e) { $('stream-state').title = `Earlier runs not loaded: ${e.message}`; return; }
    for (const r of runs) if (!session.runs.get(r.run_id)?.status) convo.run(r);
  })();
  // A server that knows of conversations says so in /v1/config (`assistant`: the model, or null).
  const messagesRead = serverConfig().then((cfg) => (!('assistant' in cfg) ? null : session.loadMessages()))
    .catch((e) => { $('ask-status').textContent = `The conversation did not load: ${e.message}`; return null; });
  // A run another tab executes: follow it through the API until it ends.
  session.on('elsewhere', async ({ run_id: runId }) => {
    for (let i = 0; i < 40; i++) {
      try {
        const r = await api.getRun(runId, 15);
        convo.run(r);
        if (r.status) return;
      } catch { return; }
    }
  });

  // The message box, when the deployment has a model (GET /v1/config's `assistant`) and this server
  // keeps conversations; else a note that says so (and "run your own code" stays).
  const composer = wireComposer({ form: $('ask'), text: $('ask-text'), send: $('ask-send'), stop: $('ask-stop'), status: $('ask-status'), session });
  Promise.all([serverConfig(), messagesRead]).then(([cfg, list]) => {
    if (linkBroken) return;
    const model = cfg.assistant?.model;
    $('ask').hidden = !model || list === null;
    $('no-model').hidden = !!model && list !== null;
    if (model) $('ask-text').placeholder = `Ask the assistant (${model}); its code runs in this page. Enter sends, Shift+Enter is a new line.`;
    composer.sync();
  });

  // Attach files (page token: POST /v1/chats/{chat}/files); the orchestrator's `files` event
  // refreshes the chips, and the next run mounts them.  A file over the server's upload limit is
  // refused here, before a byte goes; one of 1 MB or more shows a progress bar while it goes.
  const bar = $('attach-progress');
  async function attach(list) {
    const cfg = await serverConfig();
    const status = $('attach-status');
    for (const f of list) {
      const why = tooLarge(f, cfg.limits?.upload_bytes);
      if (why) { status.textContent = why; status.dataset.state = 'refused'; continue; }
      status.textContent = `Uploading ${f.name} (${fmtBytes(f.size)})…`;
      delete status.dataset.state;
      bar.hidden = f.size < 1024 * 1024;
      bar.value = 0; bar.max = f.size || 1;
      try {
        const r = await uploadFile({ chatId, token, name: f.name, file: f, onProgress: (done, total) => {
          bar.max = total; bar.value = done;
          status.textContent = `Uploading ${f.name}: ${fmtBytes(done)} of ${fmtBytes(total)}`;
        } });
        status.textContent = r.mounted ? `${r.name} is at ${r.path}` : `${r.name} was stored but not mounted: ${r.left_out_reason}`;
      } catch (e) {
        status.textContent = `${f.name} was not attached: ${e.status === 413 ? 'too large for this deployment' : e.message}`;
        status.dataset.state = 'refused';
      } finally { bar.hidden = true; }
    }
    session.refreshFiles();
  }
  $('attach-input').addEventListener('change', (e) => { attach([...e.target.files]); e.target.value = ''; });
  const dz = $('dropzone');
  dz.addEventListener('dragover', (e) => { e.preventDefault(); dz.classList.add('drag'); });
  dz.addEventListener('dragleave', () => dz.classList.remove('drag'));
  dz.addEventListener('drop', (e) => { e.preventDefault(); dz.classList.remove('drag'); if (e.dataTransfer?.files?.length) attach([...e.dataTransfer.files]); });

  // The user's own code, run in this chat.
  let ed = null;
  $('composer').addEventListener('toggle', () => {
    if (!$('composer').open || ed) return;
    ed = createEditor($('editor'), { doc: 'print("hello from this chat")\n', onRun: () => runOwn(), label: 'Code to run in this chat' });
    window.cereaChatEditor = ed;
  }, { once: false });
  async function runOwn() {
    if (!ed) return;
    $('run').disabled = true;
    $('run-status').textContent = '';
    try { await api.createRun(chatId, { code: ed.getCode(), origin: 'user' }); }
    catch (e) { $('run-status').textContent = `Could not start the run: ${e.message}`; }
    finally { $('run').disabled = false; }
  }
  $('run').addEventListener('click', runOwn);
}
