// node-kernel.js -- Node-only conveniences over kernel-client.js: the default init options for
// the runtime synced into build/www/pyodide/ and the kernel/ sources of this checkout, and a
// createWorker that starts worker/node-worker.js in a worker_threads Worker.  Used by the kernel
// tests, the benchmark and the headless host.  Not for browsers (imports node: modules).
import { Worker } from 'node:worker_threads';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { KernelClient, KernelPool } from './kernel-client.js';

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

export function createNodeWorker(workerOptions = {}) {
  return () => new Worker(new URL('./node-worker.js', import.meta.url), workerOptions);
}

export function newNodeKernel(opts = {}) {
  return new KernelClient({ createWorker: createNodeWorker(opts.workerOptions), init: nodeInitOptions(opts.pyodideDir), ...opts });
}

export function newNodePool(opts = {}, poolOpts = {}) {
  return new KernelPool(() => newNodeKernel(opts), poolOpts);
}
