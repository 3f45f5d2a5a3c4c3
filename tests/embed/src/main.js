// main.js -- the ui-adapter quickstart (docs/ui-adapter.md, "Embedding it", is this file): a chat
// page of an app that is not ours becomes the kernel host of one chat.  Its backend created the
// chat (POST /v1/chats with the API key) and handed this page the chat id and its page token; the
// page runs the chat's code in this browser and shows each run: its code, its output as it comes,
// its status and its output files.
import { KernelSupervisor, ChatSession } from '@cerea/ui-adapter';

// From the backend, in the URL fragment (never sent to a server): #chat=<id>&token=<page token>.
const { chat, token } = Object.fromEntries(new URLSearchParams(location.hash.slice(1)));

// The kernel: Pyodide in a locked-down module worker served from this origin (with a spare ready).
const supervisor = new KernelSupervisor({ workerUrl: '/worker/kernel-worker.js', pypi: false, spare: true });
// The chat: its event stream, presence, runs, files and results, with the page token.
const session = new ChatSession({ chatId: chat, token, supervisor });
session.attach();      // register first: from now on this page runs the chat's runs
supervisor.start();    // load Python

function $(tag, props = {}, ...kids) {
  const el = Object.assign(document.createElement(tag), props);
  el.append(...kids.filter(Boolean));
  return el;
}

supervisor.on('state', ({ state }) => {
  document.getElementById('kernel').textContent = `Python: ${state === 'idle' || state === 'ready' ? 'ready' : state}`;
  document.body.dataset.kernel = state;
});

// One card per run, redrawn on every change of its view model.
const cards = new Map();
session.on('run', (run) => {
  let card = cards.get(run.run_id);
  if (!card) {
    card = $('section', { className: 'card' });
    card.dataset.runId = run.run_id;
    cards.set(run.run_id, card);
    document.getElementById('runs').append(card);
  }
  card.dataset.status = run.status || run.state || 'queued';
  card.replaceChildren(
    $('strong', { textContent: run.status || run.state || 'queued' }),
    $('pre', { className: 'code', textContent: run.code || '' }),
    $('pre', { className: 'stdout', textContent: run.stdout || '' }),
    run.stderr ? $('pre', { className: 'stderr', textContent: run.stderr }) : null,
    ...(run.files || []).map((file) => fileCard(run, file)));
});

// An output file: its name and size, and a link that downloads it (the bytes this page kept, or
// GET /v1/files/{id} with the page token).
function fileCard(run, file) {
  const a = $('a', { className: 'file', textContent: `${file.name} (${file.size} bytes)`, href: '#' });
  a.dataset.name = file.name;
  a.addEventListener('click', async (e) => {
    e.preventDefault();
    const bytes = await session.artifactBytes(run.run_id, file);
    a.href = URL.createObjectURL(new Blob([bytes]));
    a.download = file.name.split('/').pop();
    a.dataset.loaded = new TextDecoder().decode(bytes);
    a.click();
  }, { once: true });
  return a;
}
