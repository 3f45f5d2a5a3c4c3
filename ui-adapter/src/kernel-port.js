// kernel-port.js -- one kernel Web Worker seen from the page's supervisor (kernel.js): an adapter
// over the kernel's own controller, worker/kernel-client.js (KernelClient), which speaks the
// message contract of worker/protocol.js, owns the worker and its SharedArrayBuffer interrupt
// slot.  This file only maps the supervisor's small interface onto it: `ready`, events
// 'progress' / 'executing' (the kernel's `started` event: the time limit counts from there) /
// 'exit', mount / unmount from the page's in-memory copies (bytes are copied, never transferred),
// run, interrupt, terminate.  It chooses the absolute URLs the worker loads Pyodide from (our own
// origin's /pyodide/, never a CDN) and never gives the worker a page credential.
import { Emitter } from './emitter.js';
import { KernelClient } from '../../worker/kernel-client.js';

export const BUNDLED_KERNEL_URL = 'bundled:kernel/'; // see kernel-worker.js

export function initUrls(origin = globalThis.location.origin) {
  const base = `${origin}/pyodide/`;
  return { indexURL: base, packageBaseUrl: base, lockFileURL: `${base}pyodide-lock.json`,
    deploymentURL: `${base}deployment.json`, kernelURL: BUNDLED_KERNEL_URL };
}

export class KernelPort extends Emitter {
  constructor(url, { pypi = false, loadTimeoutMs = 120_000, name = 'kernel' } = {}) {
    super();
    this.url = url;
    this.name = name;
    this.pypi = pypi;
    this.reportsExecuting = true;
    this.dead = false;
    this.mounted = new Map(); // name -> sha256 in this kernel
    this.client = new KernelClient({
      createWorker: () => new Worker(url, { type: 'module', name }),
      init: initUrls(),
      loadTimeoutMs,
    });
    this.client.onEvent((e) => {
      if (e.event === 'progress') this.emit('progress', { message: progressText(e), stage: e.stage });
      else if (e.event === 'started') this.emit('executing', e);
      else if (e.event === 'packages') this.emit('packages', e);
      else if (e.event === 'exit') {
        const was = this.dead;
        this.dead = true;
        if (!was && !this._terminating) this.emit('exit', new Error(e.message || `kernel ${e.reason}`));
      }
    });
    this.ready = this.client.ready;
  }

  get info() { return this.client.info; }

  /** Add or replace files (incremental: files already mounted stay). */
  async mount(files) {
    const list = files.map((f) => ({ name: f.name, version: f.version || 1, sha256: f.sha256 || '',
      size: f.bytes.length, data: f.bytes.slice() }));
    const r = await this.client.mount(list, { complete: false });
    for (const f of files) this.mounted.set(f.name, f.sha256);
    return r;
  }

  /** Make /mnt/data hold exactly `files` (removes every other file). */
  async mountExactly(files) {
    const list = files.map((f) => ({ name: f.name, version: f.version || 1, sha256: f.sha256 || '',
      size: f.bytes.length, data: f.bytes.slice() }));
    const r = await this.client.mount(list, { complete: true });
    this.mounted = new Map(files.map((f) => [f.name, f.sha256]));
    return r;
  }

  async run({ code, limits, pypi, runId }) {
    const r = await this.client.run({ run_id: runId || `local-${Date.now()}`, code, pypi: !!pypi, limits: cleanLimits(limits) });
    return { ...r, files: (r.files || []).map(({ data, ...f }) => ({ ...f, bytes: data, size: f.size ?? data?.length })) };
  }

  interrupt() { return this.client.interrupt(); }

  terminate(reason = 'cancelled') {
    this._terminating = true;
    this.dead = true;
    this.client.terminate(reason);
  }
}

function cleanLimits(l) {
  if (!l) return undefined;
  const out = {};
  for (const k of ['out_chars', 'files_listed', 'figures', 'file_load_bytes']) if (Number.isFinite(l[k])) out[k] = l[k];
  return out;
}

function progressText(e) {
  const m = { runtime: 'Loading the Python runtime…', kernel: 'Loading the kernel…', lockdown: 'Locking the sandbox down…', packages: 'Loading packages…' };
  return e.message ? `${e.message[0].toUpperCase()}${e.message.slice(1)}…` : (m[e.stage] || 'Loading…');
}
