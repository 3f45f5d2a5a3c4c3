// node-worker.js -- the Node worker_threads entry of the kernel: a thin shell over KernelCore
// (core.js).  It reads the runtime and kernel files from the local filesystem (paths or file://
// URLs; http(s) URLs are fetched before lock-down) and relays parentPort messages.
//
// Not a sandbox by itself: Node built-ins stay reachable from Python through the js bridge
// (Pyodide needs them to load packages from disk).  A headless host that runs untrusted code
// must add (docs/server-mode.md): --disallow-code-generation-from-strings, Node's permission model,
// and a network namespace (bubblewrap).  Those belong to the host, not to this file.
import { parentPort, workerData } from 'node:worker_threads';
import { readFile } from 'node:fs/promises';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { KernelCore } from './core.js';

const toPath = (u) => (u.startsWith('file:') ? fileURLToPath(u) : u);
const realFetch = globalThis.fetch;
const host = {
  isNode: true,
  scope: globalThis,
  post: (msg, transfer) => parentPort.postMessage(msg, transfer),
  // This build's key (node-kernel.js computes it once per process, worker/snapshot-key.js).
  snapshotKey: (workerData && workerData.snapshotKey) || '',
  readBytes: (url) => readFile(toPath(url)),
  readText: async (url) => {
    if (/^https?:/.test(url)) { const r = await realFetch(url); if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`); return r.text(); }
    return readFile(toPath(url), 'utf8');
  },
  importPyodide: (url) => import(/^(file|https?):/.test(url) ? url : pathToFileURL(url).href),
};
const core = new KernelCore(host);
parentPort.on('message', (msg) => core.onMessage(msg));
