// boot.js -- the app pages' one script: index.html and chat.html name it alone, `async` (it does
// not wait for the style sheet and the first layout), with the page's own bundle named on its tag
// (`<script type="module" async src="/assets/boot.js" data-page="app">`; build.mjs writes this
// module's code into the served page instead, so no request stands before it).  It starts the page's
// kernel -- its worker, and in it the Pyodide load -- and only then imports the page's bundle
// (once the document is parsed), so the editor, cards and previews (hundreds of KB to parse and
// evaluate on the main thread) never hold the worker back; the runtime's progress shows from the
// start of the load.  The kernel supervisor it makes runs on the worker URL that the PyPI setting
// and the server's /v1/config choose (the two workers' CSPs differ), and it shows that
// supervisor's progress in #runtime.  Nothing else: the page's code (main-index.js,
// main-chat.js) takes the supervisor from here and owns it from then on.
//
// The worker is made without waiting for /v1/config when the strict worker (no PyPI hosts in its
// CSP) is the answer anyway: the PyPI setting is off, or the server said on this browser's last
// visit that PyPI cannot be used here (kept in localStorage).  A server that allows PyPI since
// then gets its way from the next page load; the kernel is never less strict than the server's
// last word.  Otherwise (a first visit, PyPI allowed) the kernel waits for /v1/config and for the
// signed-in person's own setting (GET /v1/me; settings.js wantedPypi).
import { KernelSupervisor } from '../src/kernel.js';
import { loadSettings, serverConfig, pypiAllowed, pypiState, workerUrl, wantedPypi } from './settings.js';
import { runtimeProgress } from './progress.js';
import { VERDICT, strictWorker } from './first-worker.js';

// The page bundles boot.js may load (build.mjs's entries), by the name on its script tag.
const PAGES = Object.freeze({ app: '/assets/app.js', chat: '/assets/chat.js' });
// An async script may run before the parser reached the end of the page.
const parsed = document.readyState === 'loading'
  ? new Promise((r) => document.addEventListener('DOMContentLoaded', r, { once: true })) : Promise.resolve();

/**
 * A fresh kernel supervisor for this page, started at once when the strict worker is the answer
 * (see above), else once /v1/config says which worker it needs.  → {supervisor, chosen: Promise
 * (the worker is being made), started: Promise (the kernel is ready; rejects when the runtime
 * does not load)}.
 */
export function startPageKernel(settings = loadSettings()) {
  const strict = strictWorker(settings);
  const supervisor = new KernelSupervisor({ workerUrl: workerUrl(!strict), pypi: !strict, spare: true });
  parsed.then(() => { const el = document.getElementById('runtime'); if (el) runtimeProgress(el, supervisor); });
  const config = serverConfig().then((cfg) => {
    try { localStorage.setItem(VERDICT, pypiState(cfg)); } catch { /* storage off: ask each time */ }
    return cfg;
  });
  // Strict at once: the person's own setting still refreshes the hint for the next load.
  if (strict) wantedPypi().catch(() => {});
  const chosen = strict ? Promise.resolve() : Promise.all([config, wantedPypi()]).then(([cfg, pypi]) => {
    if (!pypiAllowed({ pypi }, cfg)) { supervisor.workerUrl = workerUrl(false); supervisor.pypi = false; }
  });
  const started = chosen.then(() => supervisor.start());
  started.catch(() => {}); // the page says so (it holds `started`)
  return { supervisor, chosen, started };
}

/** The kernel this page started with, made while this module first evaluates. */
export const booted = startPageKernel();

const page = PAGES[document.querySelector('script[data-page]')?.dataset.page];
if (page) Promise.all([booted.chosen, parsed]).then(() => import(/* the page's own bundle */ page));
