// kernel-worker.js -- the browser's one kernel worker entry, as the web app serves it
// (build/www/worker/kernel-worker.js, a module worker bundled by ui-adapter/build.mjs): a thin shell
// over KernelCore (worker/core.js).  The kernel's Python sources are BUNDLED into this script
// (esbuild text loader, the virtual module below) instead of fetched: the worker's CSP limits
// connect-src to /pyodide/, so kernel/*.py served anywhere else would be refused.  `kernelURL`
// 'bundled:kernel/' names them; every other URL (the Pyodide runtime, the lock file) is fetched
// with the worker's own fetch before lock-down removes it.  The sizes of the runtime files Pyodide
// fetches are bundled too (`cerea:runtime-bytes`, read from build/www/pyodide/ at build time), so
// the download progress has its total before the first byte, and so is this build's
// memory-snapshot key (CEREA_SNAPSHOT_KEY: the worker restores only an image this build made).
// The CSP on this script's response, not this file, is what stops eval-based escapes.
import { KernelCore } from '../../worker/core.js';
import KERNEL_SOURCES from 'cerea:kernel-sources';
import RUNTIME_BYTES from 'cerea:runtime-bytes';
import { BUNDLED_KERNEL_URL } from '../../worker/protocol.js';

const scope = self;
const realFetch = scope.fetch.bind(scope);
const post = scope.postMessage.bind(scope);
const host = {
  isNode: false,
  scope,
  runtimeBytes: RUNTIME_BYTES,
  snapshotKey: typeof CEREA_SNAPSHOT_KEY === 'string' ? CEREA_SNAPSHOT_KEY : '',
  post: (msg, transfer) => post(msg, transfer),
  readText: async (url, { immutable = false } = {}) => {
    if (url.startsWith(BUNDLED_KERNEL_URL)) {
      const name = url.slice(BUNDLED_KERNEL_URL.length).replace(/\.py$/, '');
      if (!(name in KERNEL_SOURCES)) throw new Error(`kernel module ${name} is not bundled`);
      return KERNEL_SOURCES[name];
    }
    // The lock file and deployment.json change in place (an operator adds packages) under
    // /pyodide/'s year-long immutable caching: asked again each load (a 304 when unchanged).
    // A runtime file (immutable: named by its build) comes from the HTTP cache when there.
    const r = await realFetch(url, { credentials: 'omit', cache: immutable ? 'default' : 'no-cache' });
    if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
    return r.text();
  },
  // The served memory image (core.js reads it as it streams): through the scope's fetch of the moment, so the download progress
  // counts it (core.js reportDownloads wraps it while Pyodide loads); from the HTTP cache when
  // there (/pyodide/ is immutable and the file is named by its build).
  openBytes: (url) => scope.fetch(url, { credentials: 'omit' }),
  importPyodide: (url) => import(/* @vite-ignore */ url),
};
const core = new KernelCore(host);
scope.addEventListener('message', (e) => core.onMessage(e.data));
