// first-worker.js -- which kernel worker a page may make before /v1/config answers, and the page's
// first inline script: build.mjs bundles `prestart()` into a classic script written first into
// the head of index.html and chat.html, so the strict worker (no PyPI hosts in its CSP), when it
// is the answer whatever /v1/config says, starts loading the runtime while the parser is still in
// the head (src/early-worker.js; the kernel supervisor adopts it); otherwise /v1/config, which
// then decides, is asked for at once, and the runtime's files are fetched into the HTTP cache
// meanwhile.  boot.js follows the same rule.
import { loadSettings, prefetchConfig, workerUrl } from './settings.js';
import { prefetchRuntime, startEarlyWorker } from '../src/early-worker.js';

// What /v1/config last said about PyPI on this origin (settings.js pypiState), kept by boot.js.
export const VERDICT = 'cerea.boot.pypi';
const lastVerdict = () => { try { return localStorage.getItem(VERDICT); } catch { return null; } };

/** Is the strict worker the answer before /v1/config answers (the setting off, or the server said no last time)? */
export const strictWorker = (settings = loadSettings()) => !settings.pypi || ['unavailable', 'disabled'].includes(lastVerdict());

/** The inline script's one call: the strict worker now when it is the answer, else /v1/config now
 * (it decides which worker; boot.js waits for it) and, meanwhile, the runtime's files that either
 * worker fetches (src/early-worker.js prefetchRuntime: a first visit's download starts now). */
export function prestart() {
  if (strictWorker()) startEarlyWorker(workerUrl(false), 'kernel-1');
  else { prefetchConfig(); prefetchRuntime(); }
}
