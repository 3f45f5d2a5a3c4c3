// node-kernel.js -- Node-only conveniences over kernel-client.js, pool.js and supervisor.js: the
// default init options for the runtime synced into build/www/pyodide/ and the kernel/ sources of
// this checkout, a createWorker that starts a worker_threads Worker (worker/node-worker.js, or the
// headless host's locked-down host/sandbox-worker.js), and ready-made kernels and supervisors.
// Used by the kernel tests, the benchmark and the headless host.  Not for browsers (imports node:
// modules).
import { Worker } from 'node:worker_threads';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { KernelClient } from './kernel-client.js';
import { KernelPool } from './pool.js';
import { KernelSupervisor } from './supervisor.js';
import { snapshotKey } from './snapshot-key.js';
import { LOCK_FIELD, checkServed } from './snapshot.js';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const PYODIDE_DIR = process.env.CEREA_PYODIDE_DIR || path.join(ROOT, 'build', 'www', 'pyodide');

// Whether Node kernels restore the served memory snapshot (the image setup made beside the
// runtime, worker/snapshot.js): yes unless CEREA_KERNEL_SNAPSHOT=0 (then every kernel loads
// Python from scratch; the kernel tests run both ways).
export const RESTORE_SNAPSHOT = !/^(0|false|no|off)$/i.test(process.env.CEREA_KERNEL_SNAPSHOT || '');

// Absolute paths with trailing slashes: Pyodide reads them with node:fs, never a CDN.
// restore: ask for the served memory snapshot (a kernel without one, or refusing it, loads).
export function nodeInitOptions(dir = PYODIDE_DIR, { restore = RESTORE_SNAPSHOT } = {}) {
  const d = path.resolve(dir) + '/';
  return {
    indexURL: d, packageBaseUrl: d, lockFileURL: d + 'pyodide-lock.json',
    kernelURL: path.join(ROOT, 'kernel') + '/', deploymentURL: d + 'deployment.json',
    ...(restore ? { servedSnapshot: true } : {}),
  };
}

// This build's snapshot key for the runtime in dir and this checkout's sources, hashed once per
// process and directory (~12 MB read: tens of ms, not one per kernel).
const keys = new Map();
export function buildKey(dir = PYODIDE_DIR) {
  const d = path.resolve(dir);
  if (!keys.has(d)) keys.set(d, snapshotKey(ROOT, d));
  return keys.get(d);
}

// entry: 'node' (worker/node-worker.js) or 'sandbox' (worker/host/sandbox-worker.js: Node's
// globals removed once the kernel loaded; what the headless host runs).  The worker learns the
// build key through workerData.
export function createNodeWorker(workerOptions = {}, entry = 'node', dir = PYODIDE_DIR) {
  const url = new URL(entry === 'sandbox' ? './host/sandbox-worker.js' : './node-worker.js', import.meta.url);
  return () => new Worker(url, { ...workerOptions, workerData: { ...(workerOptions.workerData || {}), snapshotKey: buildKey(dir) } });
}

// What every kernel of this process restoring the served image of dir shares, made once: the
// image read and checked against the served lock (its sha256, its header's build key:
// worker/snapshot.js), each kernel given a private copy of those bytes (never shared memory: a
// kernel could then change what the next one restores), and the runtime's wasm compiled once
// (each kernel instantiates that module instead of compiling 9.6 MB again).
// → Promise<{image: {bytes, sha256} | {refused: why} | null, wasm: {module, size} | null}>
const shared = new Map();
export function servedRuntime(dir = PYODIDE_DIR) {
  const d = path.resolve(dir);
  if (shared.has(d)) return shared.get(d);
  const readImage = async () => {
    let entry;
    try { entry = JSON.parse(fs.readFileSync(path.join(d, 'pyodide-lock.json'), 'utf8'))[LOCK_FIELD]; } catch { return null; }
    if (!entry) return null;
    if (typeof entry.file_name !== 'string' || !/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(entry.file_name)) return { refused: 'the served lock names no file beside the runtime' };
    let file;
    try { file = fs.readFileSync(path.join(d, entry.file_name)); } catch (e) { return { refused: `the served image is unreadable (${e.code || e.message})` }; }
    const bytes = new Uint8Array(file.buffer, file.byteOffset, file.length);
    const sha256 = crypto.createHash('sha256').update(bytes).digest('hex');
    const r = await checkServed(entry, bytes, buildKey(d), async () => sha256);
    return r.bytes ? { bytes, sha256 } : r;
  };
  const compile = async () => {
    try {
      const wasm = fs.readFileSync(path.join(d, 'pyodide.asm.wasm'));
      return { module: await WebAssembly.compile(wasm), size: wasm.length };
    } catch { return null; }   // each kernel compiles its own (and says why it fails, if it does)
  };
  const p = Promise.all([readImage(), compile()]).then(([image, wasm]) => ({ image, wasm }));
  shared.set(d, p);
  return p;
}

// The init fields that hand a kernel the shared parts (a copy of the image's bytes).
async function restoreFields(dir) {
  const { image, wasm } = await servedRuntime(dir);
  const f = {};
  if (wasm) f.wasmModule = wasm;
  if (image && image.refused) f.servedSnapshot = { refused: image.refused };
  else if (image) f.servedSnapshot = { bytes: image.bytes.slice(), sha256: image.sha256, apiScanned: image.apiScanned === true };
  return f;
}

// A sandboxed kernel restored from the served image whose lock-down scan found nothing
// (sandbox-worker.js info.api_scan): the image's answer, known for this host's later kernels.
async function noteScan(dir, info) {
  if (!info || info.snapshot !== 'served' || info.api_scan !== 'clean') return;
  const { image } = await servedRuntime(dir);
  if (image && image.bytes) image.apiScanned = true;
}

// opts: {pyodideDir, entry, workerOptions, restore (default RESTORE_SNAPSHOT), init (extra init
// fields), ...KernelClient's options}
export function newNodeKernel(opts = {}) {
  const { restore = RESTORE_SNAPSHOT, init, ...rest } = opts;
  const base = { ...nodeInitOptions(opts.pyodideDir, { restore }), ...(init || {}) };
  const k = new KernelClient({ createWorker: createNodeWorker(opts.workerOptions, opts.entry, opts.pyodideDir),
    ...rest, init: restore ? restoreFields(opts.pyodideDir).then((f) => ({ ...base, ...f })) : base });
  if (restore) k.ready.then((info) => noteScan(opts.pyodideDir, info), () => {});
  return k;
}

// A pool of Node kernels: {max, spare, spareDelayMs, log} as KernelPool takes them.
// Each kernel's start is logged with poolOpts.log: which path ran (restored from the served
// snapshot, or loaded) and the kernel's own log lines (a refused image and why).
export function newNodePool(opts = {}, poolOpts = {}) {
  const log = poolOpts.log;
  const makeKernel = () => {
    const k = newNodeKernel(opts);
    if (log) {
      k.onEvent((e) => { if (e.event === 'log') log(`kernel: ${e.message}`); });
      k.ready.then((info) => log(`kernel ${info.snapshot === 'served' ? 'restored from the served snapshot' : 'loaded'} in ${info.load_ms} ms`), () => {});
    }
    return k;
  };
  return new KernelPool({ makeKernel, ...poolOpts });
}

// One supervisor over a pool of its own (one live kernel and a spare: the page's configuration).
export function newNodeSupervisor(opts = {}, { pool = newNodePool(opts), ...supOpts } = {}) {
  return new KernelSupervisor({ pool, ...supOpts });
}
