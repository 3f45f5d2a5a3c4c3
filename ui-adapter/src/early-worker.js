// early-worker.js -- one kernel worker made before the page's modules run, and handed to the
// kernel supervisor for its first kernel.  A page's first inline script calls
// `startEarlyWorker(url)` (app/first-worker.js) so that the worker, and in it the runtime's load,
// starts while the parser is still in the head; src/kernel.js takes it with `adoptWorker(url)`
// instead of making one.  The worker posts nothing before its init, so nothing is lost while it
// waits; one that failed meanwhile, or was made for another URL, is terminated, not adopted (a
// fresh worker then reports the failure).  Nothing else: no policy on which URL.
//
// `prefetchRuntime()` is for a page that cannot make its worker yet (it waits for /v1/config to
// say which one): the runtime's files every kernel fetches whichever worker it is and whichever
// start it takes (a load or a restore) are fetched now into the browser's HTTP cache (/pyodide/ is
// immutable), so that on a first visit their download does not wait for the server's answer; the
// worker's own requests for them then join the transfer or read the cache.
const SLOT = '__cereaEarlyWorker';
const PREFETCH = '__cereaRuntimePrefetch';
// Pyodide's own file names: the worker imports pyodide.mjs, which imports pyodide.asm.mjs;
// loadPyodide fetches the wasm and the standard library.
const RUNTIME_FILES = Object.freeze(['pyodide.mjs', 'pyodide.asm.mjs', 'pyodide.asm.wasm', 'python_stdlib.zip']);

export function startEarlyWorker(url, name = 'kernel-early') {
  if (typeof Worker !== 'function' || globalThis[SLOT]) return;
  const early = { url, worker: new Worker(url, { type: 'module', name }), failed: false };
  early.worker.addEventListener('error', () => { early.failed = true; }, { once: true });
  globalThis[SLOT] = early;
}

/** The early worker made for `url`, once; null when there is none, it is for another URL, or it failed. */
export function adoptWorker(url) {
  const early = globalThis[SLOT];
  if (!early) return null;
  delete globalThis[SLOT];
  if (early.url === url && !early.failed) return early.worker;
  early.worker.terminate();
  return null;
}

/** Fetches the runtime's files into the HTTP cache, once per page (bodies read and dropped: an
 * unread body would stall its transfer).  Failures are silent: the worker fetches them again. */
export function prefetchRuntime(base = '/pyodide/') {
  if (typeof fetch !== 'function' || globalThis[PREFETCH]) return;
  globalThis[PREFETCH] = RUNTIME_FILES.map((f) => fetch(`${base}${f}`, { credentials: 'same-origin' })
    .then((r) => (r.ok && r.body ? r.body.pipeTo(new WritableStream()) : null)).catch(() => {}));
}
