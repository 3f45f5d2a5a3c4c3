// early-worker.js -- one kernel worker made before the page's modules run, and handed to the
// kernel supervisor for its first kernel.  A page's first inline script calls
// `startEarlyWorker(url)` (app/first-worker.js) so that the worker, and in it the runtime's load,
// starts while the parser is still in the head; src/kernel.js takes it with `adoptWorker(url)`
// instead of making one.  The worker posts nothing before its init, so nothing is lost while it
// waits; one that failed meanwhile, or was made for another URL, is terminated, not adopted (a
// fresh worker then reports the failure).  Nothing else: no policy on which URL.
const SLOT = '__cereaEarlyWorker';

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
