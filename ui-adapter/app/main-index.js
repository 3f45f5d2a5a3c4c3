// main-index.js -- the page at / and /playground: the signed-in person's chat list (sidebar.js;
// the way to sign in for someone who is not) and the playground (CodeMirror editor, a local
// kernel worker -- boot.js's, started before this bundle -- running the user's own code with no
// orchestrator involved, drag-and-drop
// attachments mounted at /mnt/data, run and artifact cards, share links that keep the language,
// the library set this deployment serves and lacks, the PyPI setting).  It does not talk to a
// chat's event stream (chat.html does).
import { createEditor, LANGUAGES } from './editor.js';
import { RunCard } from './cards.js';
import { h, fmtBytes } from './dom.js';
import { codeFromHash, langFromHash, shareUrl } from './share.js';
import { serverConfig, wireSettingsDialog, librariesText } from './settings.js';
import { me, recheckOnShow } from './account.js';
import { mountSidebar } from './sidebar.js';
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
// The signed-in person's chats (sidebar.js); the playground itself needs no one signed in.
me().catch(() => null).then((person) => {
  mountSidebar({ person });
  if (person) recheckOnShow(person, () => { document.body.replaceChildren(); location.reload(); }); // the playground stays open
});
wireSettingsDialog({ onChange: (s) => {
  if (s.pypi !== !!supervisor?.pypi) startKernel(); // a fresh sandbox behind the other worker CSP
} });
useKernel(booted);
