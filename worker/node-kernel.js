// node-kernel.js -- Node-only conveniences over kernel-client.js, pool.js and supervisor.js: the
// default init options for the runtime synced into build/www/pyodide/ and the kernel/ sources of
// this checkout, a createWorker that starts a worker_threads Worker (worker/node-worker.js, or the
// headless host's locked-down host/sandbox-worker.js), and ready-made kernels and supervisors.
// Used by the kernel tests, the benchmark and the headless host.  Not for browsers (imports node:
// modules).
import { Worker } from 'node:worker_threads';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { KernelClient } from './kernel-client.js';
import { KernelPool } from './pool.js';
import { KernelSupervisor } from './supervisor.js';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const PYODIDE_DIR = process.env.CEREA_PYODIDE_DIR || path.join(ROOT, 'build', 'www', 'pyodide');

// Absolute paths with trailing slashes: Pyodide reads them with node:fs, never a CDN.
export function nodeInitOptions(dir = PYODIDE_DIR) {
  const d = path.resolve(dir) + '/';
  return {
    indexURL: d, packageBaseUrl: d, lockFileURL: d + 'pyodide-lock.json',
    kernelURL: path.join(ROOT, 'kernel') + '/', deploymentURL: d + 'deployment.json',
  };
}

// entry: 'node' (worker/node-worker.js) or 'sandbox' (worker/host/sandbox-worker.js: Node's
// globals removed once the kernel loaded; what the headless host runs).
export function createNodeWorker(workerOptions = {}, entry = 'node') {
  const url = new URL(entry === 'sandbox' ? './host/sandbox-worker.js' : './node-worker.js', import.meta.url);
  return () => new Worker(url, workerOptions);
}

export function newNodeKernel(opts = {}) {
  return new KernelClient({ createWorker: createNodeWorker(opts.workerOptions, opts.entry), init: nodeInitOptions(opts.pyodideDir), ...opts });
}

// A pool of Node kernels: {max, spare, spareDelayMs, log} as KernelPool takes them.
export function newNodePool(opts = {}, poolOpts = {}) {
  return new KernelPool({ makeKernel: () => newNodeKernel(opts), ...poolOpts });
}

// One supervisor over a pool of its own (one live kernel and a spare: the page's configuration).
export function newNodeSupervisor(opts = {}, { pool = newNodePool(opts), ...supOpts } = {}) {
  return new KernelSupervisor({ pool, ...supOpts });
}
