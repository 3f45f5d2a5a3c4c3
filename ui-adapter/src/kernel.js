// kernel.js -- the page's kernel supervisor: worker/supervisor.js's KernelSupervisor (the one
// supervisor: time limit, cancel ladder, crash, replace + remount, reset), configured for a browser
// page: its kernels are module Web Workers over the app's worker entry (ui-adapter/src/
// kernel-worker.js, bundled by ui-adapter/build.mjs, served at /worker/kernel-worker.js, or under
// /worker-pypi/ with the CSP that adds the PyPI hosts), loaded from our own origin's /pyodide/ (never
// a CDN), in a pool of its own with one live kernel and one pre-loaded spare (worker/pool.js), on a
// repeat visit restored from the runtime's memory snapshot the page keeps (src/snapshot.js).
// What it adds is the page's call shapes: files as {name, bytes, sha256?}, results whose files carry
// `bytes`, files mounted one run at a time added to those already there, and the PyPI switch.  The
// worker is never given a page credential.
import { KernelClient } from '../../worker/kernel-client.js';
import { KernelPool } from '../../worker/pool.js';
import { KernelSupervisor as Supervisor } from '../../worker/supervisor.js';
import { pageSnapshots } from './snapshot.js';
import { adoptWorker } from './early-worker.js';
import { BUNDLED_KERNEL_URL } from '../../worker/protocol.js';

export { NOTE, PHONE, noteCode } from '../../worker/notes.js';

export function initUrls(origin = globalThis.location.origin) {
  const base = `${origin}/pyodide/`;
  return { indexURL: base, packageBaseUrl: base, lockFileURL: `${base}pyodide-lock.json`,
    deploymentURL: `${base}deployment.json`, kernelURL: BUNDLED_KERNEL_URL };
}

let workers = 0;
// A kernel worker, made at once (or the one made before the page's modules ran, early-worker.js); its
// init goes once the page's snapshot store answered (the worker loads its script meanwhile).
function browserKernel(url, { loadTimeoutMs, snapshots }) {
  const name = `kernel-${++workers}`;
  const fields = snapshots ? snapshots.initFields() : Promise.resolve({});
  const client = new KernelClient({ createWorker: () => adoptWorker(url) || new Worker(url, { type: 'module', name }),
    init: fields.then((f) => ({ ...initUrls(), ...f })), loadTimeoutMs });
  if (snapshots) snapshots.watch(client, fields);
  return client;
}

const toFile = (f) => ({ name: f.name, version: f.version, sha256: f.sha256, size: f.size, data: f.data ?? f.bytes });

export class KernelSupervisor extends Supervisor {
  /**
   * @param {object} o
   * @param {string} o.workerUrl        module worker script (/worker/… or /worker-pypi/…); read at each kernel's start
   * @param {boolean} [o.pypi]          whether PyPI installs are allowed in this kernel
   * @param {boolean} [o.spare=true]    keep one pre-loaded spare kernel
   * @param {number} [o.cancelGraceMs]  how long an interrupt may take before the kernel is replaced
   * @param {number} [o.loadTimeoutMs]  a kernel not ready by then is dead (Pyodide hangs, not fails, under a bad CSP)
   * @param {import('./snapshot.js').SnapshotStore|null} [o.snapshots]  where kernels find and keep the runtime's memory
   *                                    snapshot (src/snapshot.js; the page's one store by default)
   * @param {(url: string, opts: {loadTimeoutMs, snapshots}) => KernelClient} [o.createKernel]  for tests
   */
  constructor({ workerUrl, pypi = false, spare = true, cancelGraceMs = 1000, loadTimeoutMs = 120_000, createKernel = browserKernel,
    snapshots = typeof indexedDB === 'object' ? pageSnapshots() : null } = {}) {
    let self = null;
    const pool = new KernelPool({ makeKernel: () => createKernel(self.workerUrl, { loadTimeoutMs, snapshots }), max: 1, spare,
      log: (m) => console.warn(`kernel: ${m}`) });
    super({ pool, id: 'page', cancelGraceMs });
    self = this;
    this.workerUrl = workerUrl;
    this.pypi = pypi;
  }

  /** Add (or replace) files at /mnt/data, for this kernel and every later one. */
  mount(files, { complete = false } = {}) { return super.mount(files.map(toFile), { complete }); }

  /**
   * Run code → the result body of the page protocol plus `duration_ms`, `restart_ms` after a
   * restart, and each file's `bytes`.  `files` are added to those mounted (complete: they are all).
   */
  async run({ files, complete = false, pypi = true, ...req }) {
    const r = await super.run({ ...req, pypi: this.pypi && pypi, files: files && files.length ? files.map(toFile) : undefined, complete });
    return { ...r, files: (r.files || []).map((f) => ({ ...f, bytes: f.data })) };
  }

  get crossOriginIsolated() { return !!globalThis.crossOriginIsolated; }

  dispose() { super.dispose(); this.pool.dispose(); }
}
