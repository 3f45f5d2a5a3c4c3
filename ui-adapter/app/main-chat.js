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
// sent as a bearer header.  A link without one still opens when this browser holds the chat's
// token (its chat list) or the operator key (Settings), which mints one (POST
// /v1/chats/{chat}/page_link); the token is then put in the fragment.
import { ChatSession } from '../src/session.js';
import { Api } from '../src/api.js';
import { RunCard } from './cards.js';
import { Conversation } from './conversation.js';
import { wireComposer } from './composer.js';
import { h, fmtBytes } from './dom.js';
import { booted } from './boot.js';
import { loadSettings, serverConfig } from './settings.js';
import { createEditor } from './editor.js';
import { uploadFile, tooLarge } from './upload.js';
import { storedToken, linkChat } from './chats.js';

const $ = (id) => document.getElementById(id);
const chatId = decodeURIComponent(location.pathname.split('/').filter(Boolean)[1] || '');
const hashToken = new URLSearchParams(location.hash.slice(1)).get('token') || '';
const token = hashToken || (chatId ? storedToken(chatId) : '') || '';
if (token && !hashToken) history.replaceState(null, '', `${location.pathname}${location.search}#token=${encodeURIComponent(token)}`);

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
const LINK_WHY = {
  none: 'This link has no page token: the part after #token= is missing.',
  401: 'The page token in this link is wrong or incomplete: the server did not accept it.',
  403: 'The page token in this link belongs to another chat.',
  404: 'There is no such chat on this server.',
  key: 'This link has no page token, and the server refused the operator API key in Settings that would make one.',
};
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
    h('p', {}, LINK_WHY[why] || `The server refused this link (${why}).`),
    h('p', {}, 'A chat opens from the link the app gave you when it was created (it ends in #token=…), or from the chat list: the browser that created it, or any with the operator API key in Settings.'),
    h('p', {}, h('a', { href: '/', class: 'btn' }, 'Go to the playground and chats'))));
}

// ---- Rendering (boot.js shows the runtime's progress) -------------------------------------------
if (!session && chatId && loadSettings().apiKey) {
  // A chat created elsewhere, opened by the operator of this browser: mint its page link, reload
  // with the token (the page then registers first, as always).
  $('stream-state').textContent = 'Opening this chat with the operator key…';
  linkChat(chatId, loadSettings().apiKey).then((p) => { location.replace(p); location.reload(); })
    .catch((e) => showBrokenLink(e.status === 404 ? 404 : e.status === 401 ? 'key' : (e.status || 'none')));
} else if (!session) {
  showBrokenLink('none');
} else {
  // The title is the server's (GET /v1/chats/{chat} with the page token); the copy this browser
  // keeps from the chat list is shown only when that call fails.  It is read again when this
  // page comes back to the front and when the chat list in another tab of this browser changes
  // (a rename there), so a rename shows here without a reload.
  const storedTitle = () => { try { return JSON.parse(localStorage.getItem('cerea.chats') || '[]').find((c) => c.chat_id === chatId)?.title; } catch { return null; } };
  const showTitle = (title) => {
    $('chat-title').textContent = title || `Chat ${chatId.slice(0, 12)}…`;
    document.title = `${title || 'Chat'} — Cerea sandbox`;
  };
  $('chat-title').title = chatId;
  showTitle(null);
  let titleSeq = 0;
  async function loadTitle() {
    const seq = ++titleSeq;
    let title, source = 'server';
    try { title = (await new Api({ token }).getChat(chatId))?.title; }
    catch (e) {
      if ([401, 403, 404].includes(e.status)) { showBrokenLink(e.status); return; }
      title = storedTitle(); source = 'local';
    }
    if (seq !== titleSeq) return; // a later read wins over an earlier slow one
    showTitle(title);
    $('chat-title').dataset.source = source;
  }
  loadTitle();
  addEventListener('storage', (e) => { if (e.key === 'cerea.chats') loadTitle(); });
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
