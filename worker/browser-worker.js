// browser-worker.js -- the Web Worker entry of the kernel (a module worker:
// `new Worker(url, {type: 'module'})`): a thin shell over KernelCore (core.js).  URLs in `init`
// are absolute (same origin, under /pyodide/ and /kernel/); the runtime is imported and read with
// the worker's own fetch before lock-down removes it.  Serve this script with its own CSP
// (`default-src 'none'; script-src 'self' 'wasm-unsafe-eval'; connect-src <package path>`, plus
// the PyPI hosts when allowed): that, not this file, is what stops eval-based escapes.
import { KernelCore } from './core.js';

const scope = self;
const realFetch = scope.fetch.bind(scope);
const post = scope.postMessage.bind(scope);
const host = {
  isNode: false,
  scope,
  post: (msg, transfer) => post(msg, transfer),
  readText: async (url) => { const r = await realFetch(url, { credentials: 'omit' }); if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`); return r.text(); },
  importPyodide: (url) => import(url),
};
const core = new KernelCore(host);
scope.addEventListener('message', (e) => core.onMessage(e.data));
