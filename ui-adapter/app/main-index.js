// main-index.js -- the page at / and /playground: the chat list (create with the operator's API
// key, open, rename through the API; page tokens kept in this browser; a refused key or a failed
// create or rename says so until the next success) and the playground (CodeMirror editor, a local
// kernel worker -- boot.js's, started before this bundle -- running the user's own code with no
// orchestrator involved, drag-and-drop
// attachments mounted at /mnt/data, run and artifact cards, share links that keep the language,
// the library set this deployment serves and lacks, the PyPI setting).  It does not talk to a
// chat's event stream (chat.html does).
import { createEditor, LANGUAGES } from './editor.js';
import { RunCard } from './cards.js';
import { h, fmtBytes } from './dom.js';
import { codeFromHash, langFromHash, shareUrl } from './share.js';
import { loadSettings, saveSettings, serverConfig, wireSettingsDialog, librariesText } from './settings.js';
import { Api } from '../src/api.js';
import { loadChats, saveChats, rememberChat, chatPath, linkChat } from './chats.js';
import { booted, startPageKernel } from './boot.js';

const $ = (id) => document.getElementById(id);
const DEFAULT_CODE = `# Python runs in your browser (Pyodide). Files you drop are in /mnt/data.
import sys, platform
print("Hello from Python", sys.version.split()[0], "on", platform.system())

# Save to /mnt/output to get a file back:
with open("/mnt/output/hello.txt", "w") as f:
    f.write("made in the playground\\n")
`;

// ---- Playground -------------------------------------------------------------------------------
const attached = new Map(); // name -> Uint8Array
let supervisor = null;
let running = null;
const versions = new Map(); // output name -> times written in this playground session

const startLang = langFromHash(LANGUAGES) || 'python';
$('lang').value = startLang;
$('run').disabled = !LANGUAGES[startLang].runnable;
const editor = createEditor($('editor'), {
  doc: codeFromHash() ?? localStorage.getItem('cerea.playground.code') ?? DEFAULT_CODE,
  language: startLang,
  onRun: () => run(),
  onChange: (code) => { try { localStorage.setItem('cerea.playground.code', code); } catch { /* full */ } },
  label: 'Python code editor',
});
window.cereaEditor = editor; // for tests and the console

function setLanguage(l) {
  $('lang').value = l;
  editor.setLanguage(l);
  $('run').disabled = !LANGUAGES[l].runnable || !!running;
}
$('lang').addEventListener('change', (e) => setLanguage(e.target.value));
window.addEventListener('hashchange', () => {
  const c = codeFromHash();
  if (c === null) return;
  setLanguage(langFromHash(LANGUAGES) || 'python');
  editor.setCode(c);
});
serverConfig().then((cfg) => {
  const t = librariesText(cfg);
  $('libraries').textContent = t;
  $('libraries').hidden = !t;
});

// The first kernel is boot.js's (started before this bundle ran); a PyPI switch gives a fresh one.
function useKernel({ supervisor: sup, started }) {
  supervisor = sup;
  window.cereaSupervisor = supervisor;
  started.catch((e) => { if (supervisor === sup) $('runtime').textContent = `The Python runtime did not load: ${e.message}`; });
}
function startKernel() {
  supervisor?.dispose();
  useKernel(startPageKernel());
}

let runSeq = 0;
async function run() {
  if (!LANGUAGES[$('lang').value].runnable) return;
  if (running) return;
  const code = editor.getCode();
  const runId = `playground-${++runSeq}`;
  const card = new RunCard({ getBytes: async (f) => f.bytes, onCancel: () => supervisor.cancel(), title: 'Playground',
    onInput: async (text) => { if (!supervisor.answer(runId, text)) throw new Error('the run no longer waits for input'); } });
  $('runs').prepend(card.el);
  const t0 = performance.now();
  // The card follows the run live: output, displays, input() prompts (the supervisor's events).
  let view = { run_id: runId, code, origin: 'user', state: 'running', timeout_s: supervisor.timeLimitOverrideS || 60,
    stdout: '', stderr: '', displays: [], input: null, input_ms: 0, started_at: null };
  const show = (patch) => { view = { ...view, ...patch }; if (running === card) card.update(view); };
  const mine = (fn) => (e) => { if (e.run_id === runId) fn(e); };
  const offs = [
    supervisor.on('executing', mine(() => show({ started_at: Date.now(), running_here: true }))),
    supervisor.on('output', mine((e) => show({ [e.stream]: view[e.stream] + e.text, [`${e.stream}_truncated`]: e.truncated }))),
    supervisor.on('display', mine((e) => show({ displays: [...view.displays, e.data] }))),
    supervisor.on('input_request', mine((e) => show({ input: { prompt: e.prompt, since: Date.now() } }))),
    supervisor.on('input_end', mine(() => show({ input: null, input_ms: view.input_ms + (Date.now() - (view.input?.since || Date.now())) }))),
  ];
  running = card;
  card.update(view);
  $('run').disabled = true; $('cancel').hidden = false;
  try {
    const files = [...attached].map(([name, bytes]) => ({ name, bytes }));
    const res = await supervisor.run({ runId, code, files, timeoutS: view.timeout_s });
    // A file written again under the same name is the next version of one artifact.
    for (const f of res.files || []) { const v = (versions.get(f.name) || 0) + 1; versions.set(f.name, v); f.version = v; }
    running = null;
    card.update({ ...res, run_id: runId, code, origin: 'user', duration_ms: res.duration_ms ?? Math.round(performance.now() - t0) });
  } catch (e) {
    running = null;
    card.update({ run_id: runId, code, origin: 'user', status: 'error', error: { type: 'SandboxError', message: e.message } });
  } finally {
    for (const off of offs) off();
    running = null;
    $('run').disabled = !LANGUAGES[$('lang').value].runnable; $('cancel').hidden = true;
  }
}
$('run').addEventListener('click', () => run());
$('cancel').addEventListener('click', () => supervisor?.cancel());
$('share').addEventListener('click', async () => {
  const url = shareUrl(editor.getCode(), $('lang').value);
  $('share-out').replaceChildren('Share link: ', h('a', { href: url, 'data-testid': 'share-link' }, url.length > 90 ? url.slice(0, 87) + '…' : url));
  try { await navigator.clipboard.writeText(url); $('share-out').append(' (copied)'); } catch { /* no permission */ }
});

// Attachments: drag and drop onto the editor area, or the file picker.
function renderChips() {
  $('chips').replaceChildren(...[...attached].map(([name, bytes]) => h('li', { class: 'chip' },
    h('span', {}, name), h('span', { class: 'muted' }, fmtBytes(bytes.length)),
    h('button', { type: 'button', class: 'chip-x', 'aria-label': `Remove ${name}`, onclick: () => { attached.delete(name); renderChips(); } }, '×'))));
}
async function addFiles(list) {
  const refused = [];
  for (const f of list) {
    if (f.size > 20 * 1024 * 1024) { refused.push(`${f.name} (${fmtBytes(f.size)})`); continue; }
    let name = f.name.replace(/[/\\]/g, '_');
    if (attached.has(name)) {
      const dot = name.lastIndexOf('.');
      const [base, ext] = dot > 0 ? [name.slice(0, dot), name.slice(dot)] : [name, ''];
      let n = 2; while (attached.has(`${base} (${n})${ext}`)) n++;
      name = `${base} (${n})${ext}`;
    }
    attached.set(name, new Uint8Array(await f.arrayBuffer()));
  }
  $('attach-note').textContent = refused.length ? `Not attached, over the 20 MB a file may have here: ${refused.join(', ')}.` : '';
  $('attach-note').hidden = !refused.length;
  renderChips();
}
$('attach-input').addEventListener('change', (e) => { addFiles(e.target.files); e.target.value = ''; });
const dz = $('dropzone');
dz.addEventListener('dragover', (e) => { e.preventDefault(); dz.classList.add('drag'); });
dz.addEventListener('dragleave', () => dz.classList.remove('drag'));
dz.addEventListener('drop', (e) => { e.preventDefault(); dz.classList.remove('drag'); if (e.dataTransfer?.files?.length) addFiles(e.dataTransfer.files); });

// ---- Chat list ---------------------------------------------------------------------------------
// Chats are created with the operator's API key (POST /v1/chats is a backend call).  The page
// token of a chat created here is kept in this browser (chats.js; the API never shows a token
// again); GET /v1/chats lists the others (created through the API, the CLI, another browser): one
// of them opens through a page link minted with the operator key (POST /v1/chats/{chat}/page_link),
// whose token is then kept here too.  A rename is stored on the server (PATCH /v1/chats/{chat}
// with the chat's page token, or the API key for a chat created elsewhere); the server's titles win
// over the ones kept here.
let serverChats = [];
let chatsError = ''; // the last failure of a chat-list action (create, rename, list), until a success
const keyRefused = 'The server refused the operator API key in Settings: check it there.';
async function fetchServerChats() {
  const { apiKey } = loadSettings();
  if (!apiKey) { serverChats = []; return; }
  try { serverChats = (await new Api({ token: apiKey }).call('GET', '/v1/chats'))?.chats || []; }
  catch (e) { serverChats = []; if (e.status === 401) chatsError = keyRefused; return; }
  if (chatsError === keyRefused) chatsError = '';
  const titles = new Map(serverChats.filter((c) => c.title).map((c) => [c.chat_id, c.title]));
  const chats = loadChats();
  let changed = false;
  for (const c of chats) if (titles.has(c.chat_id) && titles.get(c.chat_id) !== c.title) { c.title = titles.get(c.chat_id); changed = true; }
  if (changed) { try { saveChats(chats); } catch { /* full */ } }
}
async function renameChat(chatId, current, token) {
  const t = prompt('New name for this chat', current || '');
  if (t === null) return;
  if (!t.trim()) { chatsError = 'A chat name cannot be empty.'; renderChats(); return; }
  try {
    const r = await new Api({ token }).renameChat(chatId, t);
    const all = loadChats();
    for (const c of all) if (c.chat_id === chatId) c.title = r.title;
    saveChats(all);
    for (const c of serverChats) if (c.chat_id === chatId) c.title = r.title;
    chatsError = '';
  } catch (e) { chatsError = `Could not rename the chat: ${e.message}`; }
  renderChats();
}
function renameButton(chatId, title, token) {
  return h('button', { type: 'button', class: 'btn btn-small btn-ghost', 'aria-label': `Rename ${title || chatId}`,
    onclick: () => renameChat(chatId, title, token) }, 'Rename');
}
function renderChats() {
  const chats = loadChats();
  const mine = new Set(chats.map((c) => c.chat_id));
  const others = serverChats.filter((c) => !mine.has(c.chat_id));
  const { apiKey } = loadSettings();
  $('chats-note').textContent = chatsError || (chats.length || others.length ? '' : 'No chats yet. Creating one needs the operator API key (Settings).');
  $('chats-note').classList.toggle('note', !!chatsError);
  const items = chats.map((c) => {
    const link = h('a', { href: chatPath(c.chat_id, c.page_token), title: c.title || c.chat_id }, c.title || c.chat_id);
    return h('li', { 'data-chat-id': c.chat_id }, link, renameButton(c.chat_id, c.title, c.page_token || apiKey));
  });
  for (const c of others) {
    const name = c.title || c.chat_id.slice(0, 12);
    const open = h('a', { href: `/chat/${encodeURIComponent(c.chat_id)}`, title: `${c.title || c.chat_id} (created elsewhere: opened with a link made with the operator key)`,
      onclick: async (e) => {
        e.preventDefault();
        try { location.assign(await linkChat(c.chat_id, apiKey, c.title)); }
        catch (err) {
          chatsError = err.status === 404 ? 'This server cannot make a link for a chat created elsewhere (POST /v1/chats/{chat}/page_link is missing).'
            : err.status === 401 ? keyRefused : `Could not open the chat: ${err.message}`;
          renderChats();
        }
      } }, name);
    items.push(h('li', { 'data-chat-id': c.chat_id, 'data-elsewhere': '' }, open, h('span', { class: 'small muted' }, 'elsewhere'),
      renameButton(c.chat_id, c.title, apiKey)));
  }
  $('chat-list').replaceChildren(...items);
}
$('new-chat').addEventListener('click', async () => {
  const { apiKey } = loadSettings();
  if (!apiKey) { chatsError = 'Enter the operator API key in Settings first.'; renderChats(); $('settings').showModal(); return; }
  try {
    const title = `Chat ${new Date().toLocaleString()}`;
    const r = await new Api({ token: apiKey }).createChat({ title });
    rememberChat({ chat_id: r.chat_id, page_token: r.page_token, title });
    chatsError = '';
  } catch (e) { chatsError = e.status === 401 ? `Could not create a chat. ${keyRefused}` : `Could not create a chat: ${e.message}`; }
  renderChats();
});
fetchServerChats().then(renderChats);

renderChats();
let lastPypi = loadSettings().pypi;
wireSettingsDialog({ onChange: (s) => {
  saveSettings(s);
  if (s.pypi !== lastPypi) { lastPypi = s.pypi; startKernel(); } // a fresh sandbox behind the other worker CSP
  fetchServerChats().then(renderChats);
} });
useKernel(booted);
