// core.js -- the kernel worker's one class: hosts Pyodide and the kernel/ Python package, and
// answers the commands of worker/protocol.js.  Shared by the browser Web Worker entry
// (ui-adapter/src/kernel-worker.js, bundled by ui-adapter/build.mjs) and the Node worker_threads
// entries (node-worker.js, host/sandbox-worker.js); the entries only provide a `host` (how to post
// messages, read the runtime's files and import Pyodide) and feed messages in.
//
// Life of a core (one Fsm, worker/fsm.js):
//
//     new ──init──▶ loading ──ok──▶ ready ⇄ busy (mount / run)
//                      │                 │
//                      └──fail/timeout──▶ failed        dispose: namespace and files forgotten,
//                                                        state stays ready (safe twice)
//
//   new → loading      init()
//   loading → ready    load() resolved                 loading → failed   load() failed or timed out
//   ready ⇄ busy       dispatch() around a mount or run
//
// Start-up is staged behind one ready promise: runtime (loadPyodide with an absolute
// lockFileURL and an explicit packageBaseUrl: Pyodide never falls back to a CDN; in browsers
// restored from init's memory snapshot when it is this build's and intact, else a normal load,
// and a snapshot made right after the load when init asks: protocol.js SNAPSHOTS), kernel (the
// Python modules written into /opt/cerea/cerea_kernel and imported), lock-down (the JS global
// scope loses every network and storage API except a guarded fetch; then kernel.runner.init
// applies the Python-side refusals).  No user code runs before lock-down finished.  A load
// timeout bounds the whole start (Pyodide hangs rather than failing when wasm is refused).
//
// Output: Pyodide's stdout/stderr go to two OutputSinks (output.js: keep a stream's start and
// end within the cap, hand the kept text on as `output` events while the run goes; Python
// block-buffers and flushes at the controller's flush signal, at an explicit flush, or by time
// from its write path without shared memory, so a sink is called once per 64 KiB or per flush);
// from a Pyodide fatal error on, nothing written is kept (its stack dump is not the run's).  The control buffer (control.js: interrupts, flush signals, input() answers) is
// read through Atomics.exchange (a plain Int32Array loses ~4 % of signals: Pyodide reads then
// clears it non-atomically), and only inside the window Python opens around user code
// (cerea_host.arm/disarm), so a late signal cannot break result collection.  The `cerea_host`
// module (hostModule) is what kernel/ calls: the window, output ticks, the interruptible sleep,
// input() and display().
//
// It does not enforce the time limit, restart itself or fetch chat files: the supervisor
// (supervisor.js) and the page session do.  In Node it is not a sandbox by itself (see
// node-worker.js).
import { CMD, ERR, EVENT, KERNEL_MODULES, LIMITS, SIGINT, STATUS, checkCommand, event, fail, ok, runResult,
  transferables } from './protocol.js';
import { ControlBuffer } from './control.js';
import { Fsm, machine } from './fsm.js';
import { NOTE, START } from './notes.js';
import { OutputSink } from './output.js';
import { LOCK_FIELD, checkServed } from './snapshot.js';
import { matchStackSwitching } from './stack-switching.js';

const KERNEL_DIR = '/opt/cerea';
const LIFE = machine('kernel core', {
  new: [], loading: ['new'], ready: ['loading', 'busy'], busy: ['ready'], failed: ['loading'],
});

// Global names removed along the scope's prototype chain (fetch is replaced, not removed).
export const BLOCKED_GLOBALS = Object.freeze([
  'XMLHttpRequest', 'XMLHttpRequestUpload', 'XMLHttpRequestEventTarget', 'WebSocket', 'WebSocketStream',
  'WebTransport', 'EventSource', 'importScripts', 'indexedDB', 'IDBFactory', 'caches', 'CacheStorage',
  'BroadcastChannel', 'Worker', 'SharedWorker', 'ServiceWorker', 'RTCPeerConnection',
  'webkitRTCPeerConnection', 'RTCDataChannel', 'fetchLater', 'Navigator', 'cookieStore',
  'FileSystemHandle', 'FileSystemFileHandle', 'FileSystemDirectoryHandle', 'FileSystemSyncAccessHandle',
  'openDatabase', 'Notification', 'PushManager', 'webkitRequestFileSystem', 'requestFileSystem',
  'webkitResolveLocalFileSystemURL',
  // The controller's channel: the entry captured it before lock-down; Python must not forge
  // replies or events with it.
  'postMessage',
]);
// Properties of navigator removed the same way (OPFS, beacons, locks shared across tabs).
const BLOCKED_NAVIGATOR = Object.freeze(['storage', 'sendBeacon', 'locks', 'serviceWorker', 'connection']);
export const PYPI_HOSTS = Object.freeze(['https://pypi.org/', 'https://files.pythonhosted.org/']);

// The download label: "downloading the Python runtime (4.2 of 12.1 MB)", or only the bytes
// read when the total is unknown.
function downloadMessage(loaded, total) {
  const mb = (n) => (n / 1048576).toFixed(1);
  return `downloading the Python runtime (${mb(loaded)}${total ? ` of ${mb(total)}` : ''} MB)`;
}

// A browser's first visit gives the served image up when, PROBE_MS after its first bytes, the rest
// of it would take longer than SERVED_BUDGET_MS: what a load of Python costs beyond a restore
// (~2.7 s in Chromium here: a load 3.4 s, a restore 0.7 s, docs/benchmarks.md; less on a fast
// desktop, more on a phone; the budget stays under it, so a slow link never pays for the image).
const PROBE_MS = 300;
const SERVED_BUDGET_MS = 1500;

// The standard-library modules kernel/ imports, imported into a snapshot's runtime before the
// image is taken (with the kernel's own modules: importKernel).
const SNAPSHOT_IMPORTS = 'import ast, asyncio, base64, hashlib, inspect, json, linecache, shutil, signal, traceback';

// Node hosts compile the runtime's wasm once per process and hand the module to each kernel
// (init's wasmModule: {module, size}; compiled code is immutable and shared between threads):
// while Pyodide instantiates, WebAssembly.instantiate(bytes) of a wasm of the module's size
// instantiates the module instead of compiling the bytes again.  → the function that puts
// instantiate back.
function useCompiled(compiled) {
  const module = compiled && compiled.module, size = compiled && Number(compiled.size);
  if (!(module instanceof WebAssembly.Module) || !(size > 0)) return () => {};
  const own = Object.getOwnPropertyDescriptor(WebAssembly, 'instantiate');
  const instantiate = WebAssembly.instantiate;
  Object.defineProperty(WebAssembly, 'instantiate', { ...own, value: function (source, imports) {
    const n = source && (source.byteLength ?? -1);
    if (n !== size) return instantiate.call(this, source, imports);
    return instantiate.call(this, module, imports).then((instance) => ({ instance, module }));
  } });
  return () => Object.defineProperty(WebAssembly, 'instantiate', own);
}

// The kernel package: its sources written into /opt/cerea/cerea_kernel (as UTF-8 bytes: Emscripten
// encodes a string in JavaScript, character by character), then imported, unless the runtime
// holds it already: a runtime restored from an image setup made (makeSnapshot) has every module
// imported, and they are used when the package's record of its sources (each file's SHA-256,
// taken when they were imported) is these files'.  Else whatever of cerea_kernel the runtime
// holds leaves sys.modules and the package is imported from these sources.  Tracebacks read the
// files (linecache), so they are written either way.
// → 'image' (the runtime's modules used), 'source' (imported), 'stale' (the runtime held modules
// of other sources: imported).
const KERNEL_IMPORT = `
import hashlib, sys
def _cerea_kernel_import(d, names):
    want = {}
    for m in names:
        with open(f"{d}/cerea_kernel/{m}.py", "rb") as f:
            want[m] = hashlib.sha256(f.read()).hexdigest()
    pkg = sys.modules.get("cerea_kernel")
    if (pkg is not None and getattr(pkg, "__source_sha256__", None) == want
            and all(f"cerea_kernel.{m}" in sys.modules for m in names if m != "__init__")):
        return "image"
    held = [m for m in sys.modules if m == "cerea_kernel" or m.startswith("cerea_kernel.")]
    for m in held:
        del sys.modules[m]
    if d not in sys.path:
        sys.path.insert(0, d)
    import cerea_kernel.runner
    sys.modules["cerea_kernel"].__source_sha256__ = want
    return "stale" if held else "source"
`;
function importKernel(py, kernelSources) {
  const pkgDir = `${KERNEL_DIR}/cerea_kernel`;
  py.FS.mkdirTree(pkgDir);
  const utf8 = new TextEncoder();
  for (const [m, src] of Object.entries(kernelSources)) py.FS.writeFile(`${pkgDir}/${m}.py`, utf8.encode(src));
  const ns = py.toPy({});   // a namespace of its own: nothing of it is left in __main__
  try {
    return py.runPython(`${KERNEL_IMPORT}\n_cerea_kernel_import(${JSON.stringify(KERNEL_DIR)}, ${JSON.stringify(Object.keys(kernelSources))})`, { globals: ns });
  } finally { ns.destroy(); }
}

async function sha256Hex(bytes) {
  const d = new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));
  return Array.from(d, (b) => b.toString(16).padStart(2, '0')).join('');
}

export class KernelCore {
  // host: {post(msg, transfer), readText(url, {immutable}) → Promise<string> (immutable: a runtime
  //        file the HTTP cache may answer), readBytes(url) → Promise<Uint8Array>
  //        (Node) or openBytes(url) → Promise<Response> (browser: the served image, streamed),
  //        importPyodide(url) → module, scope: the worker's global object, isNode: bool,
  //        snapshotKey?: this build's key for memory snapshots (worker/snapshot-key.js; none:
  //        snapshots are neither made nor restored), runtimeBytes?: {file name: bytes} of the
  //        runtime files Pyodide fetches (browser)}
  constructor(host) {
    this.host = host;
    this.fsm = new Fsm(LIFE, 'new');
    this.ready = null;            // the one ready promise (set by init)
    this.py = null;
    this.runner = null;
    this.info = null;
    this.lock = null;             // the served lock file (packages + import names)
    this.importMap = new Map();   // import name → package name (only packages this deployment has)
    this.out = new OutputSink(LIMITS.out_chars, (c) => this.onChunk('stdout', c));
    this.err = new OutputSink(LIMITS.out_chars, (c) => this.onChunk('stderr', c));
    this.tickTimer = null;
    this.fatal = false;           // Pyodide failed fatally: its report is not the run's output
    this.control = null;          // ControlBuffer over the controller's SharedArrayBuffer
    this.armed = false;
    this.runNotes = [];           // notes the run's waits add (input() unavailable)
    this.inputWaitMs = LIMITS.input_wait_s * 1000;
    this.pypiAllowed = false;
    this.allowedPrefixes = [];
    this.currentRun = null;
    this.startedSent = false;
    this.queue = Promise.resolve();
    this.lockdownReport = [];
    this.baseGlobals = new Set();
    this.downloads = null;        // while Pyodide loads (browser): {drop(file name)}
  }

  get state() { return this.fsm.state; }

  post(msg) { this.host.post(msg, transferables(msg)); }
  progress(ref, stage, message) { this.post(event(EVENT.PROGRESS, { ref, stage, message })); }

  // Entry for every message from the controller.  Commands other than interrupt are serialised.
  onMessage(msg) {
    const problem = checkCommand(msg);
    if (problem) { this.post(fail(msg && Number.isInteger(msg.id) ? msg.id : 0, ERR.BAD_MESSAGE, problem)); return; }
    if (msg.cmd === CMD.INTERRUPT) { this.post(ok(msg.id, this.interruptAwaiting())); return; }
    if (msg.cmd === CMD.INIT) { this.init(msg); return; }
    this.queue = this.queue.then(() => this.dispatch(msg));
  }

  async dispatch(msg) {
    if (!this.fsm.is('ready')) {
      this.post(fail(msg.id, ERR.NOT_READY, `kernel is ${this.state}`));
      return;
    }
    try {
      if (msg.cmd === CMD.DISPOSE) {
        this.runner.dispose();
        this.forgetGlobals();
        this.post(ok(msg.id));
        return;
      }
      this.fsm.set('busy', msg.cmd);
      try {
        if (msg.cmd === CMD.MOUNT) this.post(ok(msg.id, this.mount(msg.files, msg.complete !== false)));
        else if (msg.cmd === CMD.RUN) this.post(ok(msg.id, { result: await this.run(msg) }));
      } finally {
        this.fsm.set('ready');
      }
    } catch (e) {
      this.post(fail(msg.id, ERR.INTERNAL, String(e && e.stack || e)));
    }
  }

  // ---- start-up ------------------------------------------------------------------------------
  init(msg) {
    if (this.ready) {   // init twice: the same outcome as the first
      this.ready.then(() => this.post(ok(msg.id, { info: this.info })),
        (e) => this.post(fail(msg.id, e && e.code === ERR.LOAD_TIMEOUT ? ERR.LOAD_TIMEOUT : ERR.LOAD_FAILED, String(e && e.message || e))));
      return;
    }
    this.fsm.set('loading');
    const timeoutMs = msg.loadTimeoutMs || 60000;
    let timer;
    const timeout = new Promise((_, reject) => {
      timer = setTimeout(() => reject(Object.assign(new Error(`Pyodide did not load within ${timeoutMs} ms`), { code: ERR.LOAD_TIMEOUT })), timeoutMs);
    });
    this.ready = Promise.race([this.load(msg), timeout]).finally(() => clearTimeout(timer));
    this.ready.then(
      (info) => { this.fsm.set('ready'); this.post(ok(msg.id, { info })); },
      (e) => {
        this.fsm.set('failed', String(e && e.message || e));
        const code = e && e.code === ERR.LOAD_TIMEOUT ? ERR.LOAD_TIMEOUT : ERR.LOAD_FAILED;
        this.post(fail(msg.id, code, String(e && e.message || e)));
      });
  }

  async load(msg) {
    const t0 = performance.now();
    const base = (u) => (u.endsWith('/') ? u : u + '/');
    const indexURL = base(msg.indexURL), packageBaseUrl = base(msg.packageBaseUrl), kernelURL = base(msg.kernelURL);
    if (msg.interruptBuffer) this.control = new ControlBuffer(msg.interruptBuffer);

    // The progress line says which start this is: a restore from an image, or a load.
    const restoring = !!(this.host.snapshotKey && (msg.snapshot || msg.servedSnapshot));
    this.progress(msg.id, 'runtime', restoring ? START.restoring(msg.snapshot ? 'kept' : 'served') : START.loading());
    // Only pyodide.mjs stands before the runtime's download: the lock file (loadPyodide takes it
    // as a promise), deployment.json and the kernel's sources are read meanwhile, all at once,
    // and awaited where they are needed.  Each would be a round trip on the start's path.
    const readDeployment = async () => {
      if (!msg.deploymentURL) return { has: [], lacks: [] };
      try { return JSON.parse(await this.host.readText(msg.deploymentURL)); } catch (e) {
        this.post(event(EVENT.LOG, { ref: msg.id, level: 'warn', message: `deployment.json unreadable: ${e.message}` }));
        return { has: [], lacks: [] };
      }
    };
    // pyodide.mjs is asked first: the page's HTTP/1.1 connections are few, and the others queue.
    const pyodideModule = this.host.importPyodide(`${indexURL}pyodide.mjs`);
    const lockText = this.host.readText(msg.lockFileURL);
    const sources = Promise.all(KERNEL_MODULES.map((m) => this.host.readText(`${kernelURL}${m}.py`)));
    const deploymentRead = readDeployment();
    // Pyodide does not handle a lock promise that rejects (its package index would reject with no
    // one waiting): it gets one that never settles on failure, and the load fails with the read's
    // own error, at once.
    const never = new Promise(() => {});
    const lockFailed = lockText.then(() => never);
    // Awaited below; a failure that comes first (Pyodide's import) must not leave them unhandled.
    lockText.catch(() => {}); sources.catch(() => {}); lockFailed.catch(() => {});
    // The served image is read (and counted in the download progress) beside Pyodide's module.
    const served = msg.servedSnapshot || msg.snapshot ? this.servedEntry(lockText) : Promise.resolve(null);
    const restoreFetch = this.host.isNode ? () => {} : this.reportDownloads(msg.id, msg.snapshot ? Promise.resolve(null) : served);
    const image = this.snapshotToRestore(msg, served, indexURL);
    // makeSnapshot: with servedSnapshot, the served image this kernel restored is handed over
    // (the page keeps it for the next visit); without, an image of this load is made (setup).
    const asked = !!this.host.snapshotKey && msg.makeSnapshot === this.host.snapshotKey;
    const making = asked && !msg.servedSnapshot && !msg.snapshot;
    let py = null, snapshot = 'none';
    try {
      const { loadPyodide } = await pyodideModule;
      const options = {
        indexURL, packageBaseUrl, lockFileContents: lockText.catch(() => never),
        packageCacheDir: this.host.isNode ? packageBaseUrl : undefined,
        stdout: () => {}, stderr: () => {}, checkAPIVersion: true,
      };
      const img = await image;
      if (img && img.bytes) {
        try {
          const unpatch = this.host.isNode ? useCompiled(msg.wasmModule) : () => {};
          try { py = await Promise.race([lockFailed, loadPyodide({ ...options, _loadSnapshot: img.bytes })]); } finally { unpatch(); }
          if (py.runPython('1 + 1') !== 2) throw new Error('the restored runtime does not compute');
          // The image holds its maker's word on stack switching (setup's Node: none): this
          // engine's is put in its place (stack-switching.js), or the image is not used.
          await matchStackSwitching(py, () => this.host.readText(`${indexURL}pyodide.asm.mjs`, { immutable: true }));
          // Every kernel restored from one image would draw the same random numbers: `random`
          // was imported before the image was taken, its state is in it.
          py.runPython("import sys\nif 'random' in sys.modules: sys.modules['random'].seed()");
          snapshot = img.served ? 'served' : 'restored';
        } catch (e) {
          py = null;
          snapshot = `refused: restoring failed (${e && e.message || e})`;
        }
      } else if (img && img.skipped) {
        snapshot = `skipped: ${img.skipped}`;
        this.downloads && this.downloads.drop(img.name);
      } else if (img) snapshot = `refused: ${img.refused}`;
      if (!py) {
        if (snapshot.startsWith('skipped')) {
          this.post(event(EVENT.LOG, { ref: msg.id, level: 'info', message: `memory snapshot ${snapshot}: loaded instead` }));
          this.progress(msg.id, 'runtime', START.loadingFaster());
        } else if (snapshot !== 'none') {
          this.post(event(EVENT.LOG, { ref: msg.id, level: 'warn', message: `memory snapshot ${snapshot}: loaded normally` }));
          this.progress(msg.id, 'runtime', START.loadingInstead());
        } else if (restoring) this.progress(msg.id, 'runtime', START.loading());
        py = await Promise.race([lockFailed, loadPyodide({ ...options, _makeSnapshot: making || undefined })]);
      }
    } finally { restoreFetch(); }
    const [texts, deployment] = await Promise.all([sources, deploymentRead]);
    const kernelSources = Object.fromEntries(KERNEL_MODULES.map((m, i) => [m, texts[i]]));
    // The image is taken here, with the kernel's modules imported (nothing of ours has run: no JS
    // object of ours is in the runtime yet).
    const made = making && this.makeSnapshot(py, msg.id, kernelSources);
    if (asked && snapshot === 'served') {
      const img = await image;
      if (img.file) this.post(event(EVENT.SNAPSHOT, { ref: msg.id, key: this.host.snapshotKey, bytes: img.file }));
    }
    this.py = py;
    this.lock = JSON.parse(await lockText);
    for (const [name, p] of Object.entries(this.lock.packages || {}))
      for (const imp of p.imports || []) if (!this.importMap.has(imp)) this.importMap.set(imp, name);

    this.progress(msg.id, 'kernel', 'loading the kernel');
    // Pyodide's fatal-error handler dumps the Python stack to fd 1 before it gives up: that is the
    // kernel's crash report, not the run's output, so nothing written from then on is kept.
    const core = this, api = py._api;
    if (api && typeof api.fatal_error === 'function') {
      const fatal = api.fatal_error;
      api.fatal_error = function (e) { core.fatal = true; return fatal.call(this, e); };
    } else this.post(event(EVENT.LOG, { ref: msg.id, level: 'warn', message: "Pyodide's fatal_error is not where it was: a crash report may reach stdout" }));
    py.setStdout({ write: (b) => (this.fatal ? b.length : this.out.write(b)), isatty: false });
    py.setStderr({ write: (b) => (this.fatal ? b.length : this.err.write(b)), isatty: false });
    // No stdin: input() fails at once instead of blocking the worker (Node) or calling prompt().
    py.setStdin({ error: true });
    py.registerJsModule('cerea_host', this.hostModule());
    if (this.control) {
      py.setInterruptBuffer({ get 0() { return core.control.take(core.armed); }, set 0(_v) {}, length: 1 });
    }
    const kernelFrom = importKernel(py, kernelSources);
    if (kernelFrom === 'stale') this.post(event(EVENT.LOG, { ref: msg.id, level: 'warn', message: "the image's kernel modules are not these sources: imported from source" }));
    this.runner = py.pyimport('cerea_kernel.runner');

    this.progress(msg.id, 'lockdown', 'locking the sandbox down');
    this.allowedPrefixes = [packageBaseUrl, indexURL].filter((u) => /^https?:/.test(u));
    this.lockDown();
    const initOut = JSON.parse(this.runner.init(JSON.stringify({ lacks: deployment.lacks || [] })));
    this.lockdownReport.push(...initOut.notes);
    this.out.reset(); this.err.reset();
    this.info = {
      pyodide: py.version, python: py.runPython('import sys; sys.version.split()[0]'),
      interrupts: !!this.control, load_ms: Math.round(performance.now() - t0), kernel_modules: kernelFrom,
      packages: { has: deployment.has || [], lacks: deployment.lacks || [] },
      lockdown: this.lockdownReport.slice(),
    };
    if (made) snapshot = 'made';
    this.info.snapshot = snapshot;
    return this.info;
  }

  // The served lock's snapshot entry (worker/snapshot.js), or null when it lists none.
  async servedEntry(lockText) {
    try { return JSON.parse(await lockText)[LOCK_FIELD] || null; } catch { return null; }
  }

  // The image to restore → Promise of {bytes, served?} when it may be restored, {refused: why}
  // when not, null without one.  init's `snapshot` (the page's kept image: this build's key, the
  // SHA-256 it was stored with), else with `servedSnapshot` the served one (worker/snapshot.js:
  // the sha256 of the served lock, the build key in its header).  Read and hashed while Pyodide's
  // module loads.
  async snapshotToRestore(msg, served, indexURL) {
    const s = msg.snapshot;
    if (!s && !msg.servedSnapshot) return null;
    if (!this.host.snapshotKey) return { refused: 'this host restores none' };
    if (!s) {
      const entry = await served;
      if (!entry) return null;
      const given = msg.servedSnapshot;
      if (given && given.refused) return { refused: String(given.refused) };
      if (given && given.bytes instanceof Uint8Array) {
        // Read and hashed by the host process once for all its kernels (node-kernel.js): its
        // sha256 must be this lock's, its header this build's key.
        const r = await checkServed(entry, given.bytes, this.host.snapshotKey, async () => given.sha256);
        return r.bytes ? { bytes: r.bytes, served: true } : r;
      }
      if (typeof entry.file_name !== 'string' || !/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(entry.file_name)) return { refused: 'the served lock names no file beside the runtime' };
      if (!Number.isInteger(entry.size) || entry.size <= 0) return { refused: 'the served lock gives it no size' };
      const read = await this.readServed(`${indexURL}${entry.file_name}`, entry, msg);
      if (!read.bytes) return read;
      const r = await checkServed(entry, read.bytes, this.host.snapshotKey, sha256Hex);
      return r.bytes ? { bytes: r.bytes, served: true, file: read.bytes } : r;
    }
    if (s.key !== this.host.snapshotKey) return { refused: 'made by another build' };
    if (!(s.bytes instanceof Uint8Array) || !s.bytes.length) return { refused: 'no bytes' };
    // A kept image is restored only as a copy of the served one: its bytes hash to the sha256 the
    // served lock lists (so a script that wrote the origin's storage cannot plant an image).
    const entry = await served;
    if (!entry) return { refused: 'the served lock lists no image it could be a copy of' };
    const r = await checkServed(entry, s.bytes, this.host.snapshotKey, sha256Hex);
    return r.bytes ? { bytes: r.bytes, file: s.bytes } : { refused: r.refused.replace('the sha256 of the served lock', "the served image's sha256") };
  }

  // The served image's file, read for a restore.  In a browser on a first visit it streams while
  // its rate is measured: once PROBE_MS passed since its first bytes, a file whose rest would take
  // longer than the start it saves (init's servedSnapshot.budgetMs, SERVED_BUDGET_MS by default:
  // what a load costs beyond a restore) is given up and Python loads instead.  → {bytes} |
  // {refused: why} | {skipped: why}.
  async readServed(url, entry, msg) {
    const open = this.host.openBytes;
    if (!open) {
      try { return { bytes: await this.host.readBytes(url) }; } catch (e) { return { refused: `the served image is unreadable (${e.message})` }; }
    }
    const given = msg.servedSnapshot;
    const budgetMs = given && Number.isFinite(given.budgetMs) ? given.budgetMs : SERVED_BUDGET_MS;
    let res;
    try { res = await open(url); } catch (e) { return { refused: `the served image is unreadable (${e.message})` }; }
    if (!res.ok || !res.body) return { refused: `the served image is unreadable (HTTP ${res.status})` };
    const reader = res.body.getReader();
    const out = new Uint8Array(entry.size);
    // What share of the transfer n decoded bytes are: the lock's per-MiB figures for the encoding
    // the server chose (worker/snapshot.js `wire`), else the share of the bytes.
    const wire = entry.wire && entry.wire[(res.headers.get('content-encoding') || '').toLowerCase()];
    const share = (k) => {
      if (!Array.isArray(wire) || !wire.length) return k / out.length;
      const i = Math.min(Math.floor(k / 1048576), wire.length - 1), before = i ? wire[i - 1] : 0;
      return Math.min(1, (before + (wire[i] - before) * Math.min(1, (k - i * 1048576) / 1048576)) / wire[wire.length - 1]);
    };
    let n = 0, first = null;
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        if (first === null) first = performance.now();
        if (n + value.length > out.length) { reader.cancel().catch(() => {}); return { refused: `its size is over ${out.length}, the served lock's` }; }
        out.set(value, n); n += value.length;
        const spent = performance.now() - first;
        if (spent >= PROBE_MS && n < out.length) {
          const done = share(n);
          const rest = done > 0 ? spent * (1 - done) / done : Infinity;
          if (rest > budgetMs) {
            reader.cancel().catch(() => {});
            return { skipped: `the rest of it would take ${(rest / 1000).toFixed(1)} s here, more than a load's ${(budgetMs / 1000).toFixed(1)} s`, name: entry.file_name };
          }
        }
      }
    } catch (e) { return { refused: `the served image is unreadable (${e.message})` }; }
    return { bytes: n === out.length ? out : out.subarray(0, n) };
  }

  // The runtime's memory image (Pyodide loaded with _makeSnapshot, the kernel's modules imported:
  // importKernel), posted as a `snapshot` event (the page hashes it when it keeps it).  → whether
  // it was sent.  Never fails the load.
  makeSnapshot(py, ref, kernelSources) {
    try {
      py.runPython(SNAPSHOT_IMPORTS);
      importKernel(py, kernelSources);
      const bytes = py.makeMemorySnapshot();
      this.post(event(EVENT.SNAPSHOT, { ref, key: this.host.snapshotKey, bytes }));
      return true;
    } catch (e) {
      this.post(event(EVENT.LOG, { ref, level: 'warn', message: `memory snapshot not made: ${e && e.message || e}` }));
      return false;
    }
  }

  // While Pyodide loads (browser): counts the bytes of the runtime's own fetches
  // (pyodide.asm.wasm, python_stdlib.zip, and the served memory image) and reports them as one figure over all of them,
  // {stage: 'download', loaded, total}, at most every 100 ms and once when each file ends.  `total`
  // is the sum of the sizes the host knows beforehand (host.runtimeBytes: file name → decoded
  // bytes), so it does not change while files start; 0 when the host knows none (unknown: a
  // compressed response's length is not the byte count its body delivers).  Pyodide gets the
  // original Response and the bytes are counted on a clone: Chromium keeps the compiled wasm in
  // its code cache only for a response that came from its network stack, never for one built in
  // JavaScript, and without that cache every visit compiles the runtime again.
  // Returns the function that removes the wrapper.
  reportDownloads(ref, served = Promise.resolve(null)) {
    const scope = this.host.scope;
    const own = Object.getOwnPropertyDescriptor(scope, 'fetch');
    const real = scope.fetch;
    if (typeof real !== 'function') return () => {};
    const expected = new Map(Object.entries(this.host.runtimeBytes || {}));
    let known = [...expected.values()].reduce((a, b) => a + b, 0);
    // The served image (when this start restores it) counts as one more runtime file.
    served.then((e) => { if (known && e && Number.isInteger(e.size) && !expected.has(e.file_name)) { expected.set(e.file_name, e.size); known += e.size; } }, () => {});
    const loaded = new Map();   // file name → bytes read so far
    const dropped = new Set();  // files given up
    let last = 0;
    const send = (force) => {
      const now = Date.now();
      if (!force && now - last < 100) return;
      last = now;
      let sum = 0;
      for (const n of loaded.values()) sum += n;
      const total = known ? Math.max(known, sum) : 0;
      this.post(event(EVENT.PROGRESS, { ref, stage: 'download', loaded: sum, total, message: downloadMessage(sum, total) }));
    };
    const count = async (name, body) => {
      const reader = body.getReader();
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          // dropped: the clone is cancelled too, or the transfer would go on for it alone
          if (dropped.has(name)) { reader.cancel().catch(() => {}); return; }
          loaded.set(name, loaded.get(name) + value.byteLength);
          send(false);
        }
      } catch { /* the original's reader saw the same failure: Pyodide reports it */ }
      send(true);
    };
    const counting = async function fetch(input, init) {
      const res = await real.call(scope, input, init);
      const name = String(res.url || input).split(/[?#]/)[0].split('/').pop();
      if (!res.ok || !res.body || (known && !expected.has(name)) || loaded.has(name)) return res;
      loaded.set(name, 0);
      count(name, res.clone().body);
      return res;
    };
    try { Object.defineProperty(scope, 'fetch', { value: counting, writable: true, configurable: true }); } catch { return () => {}; }
    // A file given up (the served image on a slow link) leaves the total but for what of it came,
    // so the bar never goes back; its counting stops (and with it the clone's transfer).
    this.downloads = { drop: (name) => {
      const got = loaded.get(name) || 0;
      if (expected.has(name)) { known -= expected.get(name) - got; expected.set(name, got); }
      dropped.add(name); send(true);
    } };
    return () => {
      this.downloads = null;
      if (own) Object.defineProperty(scope, 'fetch', own); else delete scope.fetch;
    };
  }

  // Remove network and storage APIs from the global scope and its prototype chain; pin a guarded
  // fetch.  Every failure is recorded in lockdownReport (and info.lockdown), never silent.
  lockDown() {
    const scope = this.host.scope;
    const realFetch = typeof scope.fetch === 'function' ? scope.fetch.bind(scope) : null;
    const core = this;
    const removeAlongChain = (obj, name) => {
      for (let o = obj; o; o = Object.getPrototypeOf(o)) {
        const d = Object.getOwnPropertyDescriptor(o, name);
        if (!d) continue;
        if (d.configurable) delete o[name];
        else {
          try { Object.defineProperty(o, name, { value: undefined, writable: false }); } catch (e) {
            this.lockdownReport.push(`lock-down: ${name} could not be removed: ${e.message}`);
          }
        }
      }
      if (obj[name] !== undefined) this.lockdownReport.push(`lock-down: ${name} is still reachable`);
    };
    const nav = scope.navigator;
    if (nav) for (const n of BLOCKED_NAVIGATOR) { try { removeAlongChain(nav, n); } catch (e) { this.lockdownReport.push(`lock-down: navigator.${n}: ${e.message}`); } }
    for (const n of BLOCKED_GLOBALS) { try { removeAlongChain(scope, n); } catch (e) { this.lockdownReport.push(`lock-down: ${n}: ${e.message}`); } }
    const guarded = async function fetch(input, init) {
      const raw = typeof input === 'string' ? input : (input && (input.href || input.url)) || String(input);
      let url;
      try { url = new URL(raw, core.allowedPrefixes[0] || undefined).href; } catch { throw new TypeError('fetch refused: bad URL'); }
      const allowed = core.allowedPrefixes.some((p) => url.startsWith(p)) ||
        (core.pypiAllowed && PYPI_HOSTS.some((p) => url.startsWith(p)));
      if (!allowed || !realFetch || url.includes('/../') || url.includes('%2e%2e') || url.includes('%2E%2E'))
        throw new TypeError('fetch refused: network access is disabled in this sandbox');
      const i = init || {};
      return realFetch(url, { method: i.method === 'HEAD' ? 'HEAD' : 'GET', signal: i.signal, redirect: 'error',
        credentials: 'omit', referrerPolicy: 'no-referrer', cache: 'no-store' });
    };
    try { removeAlongChain(scope, 'fetch'); } catch { /* replaced below */ }
    try {
      Object.defineProperty(scope, 'fetch', { value: guarded, writable: false, configurable: false, enumerable: true });
    } catch (e) { this.lockdownReport.push(`lock-down: fetch could not be pinned: ${e.message}`); }
    if (scope.fetch !== guarded) this.lockdownReport.push('lock-down: fetch is not the guarded one');
    this.baseGlobals = new Set(Reflect.ownKeys(scope));
  }

  // dispose: globals user code added through the js bridge (js.x = ...) do not outlive the chat.
  forgetGlobals() {
    const scope = this.host.scope;
    for (const key of Reflect.ownKeys(scope)) {
      if (this.baseGlobals.has(key)) continue;
      const d = Object.getOwnPropertyDescriptor(scope, key);
      if (d && d.configurable) delete scope[key];
    }
  }

  // ---- mounts ------------------------------------------------------------------------------
  mount(files, complete = true, cap = LIMITS.file_load_bytes) {
    const t0 = performance.now();
    const manifest = files.map((f) => ({ name: f.name, version: f.version ?? null, sha256: f.sha256 ?? null,
      size: Math.max(Number(f.size) || 0, f.data ? f.data.length : 0), has_data: !!f.data }));
    const plan = JSON.parse(this.runner.plan_mount(JSON.stringify({ files: manifest, complete, file_cap: cap })));
    const byName = new Map(files.map((f) => [f.name.split('/').filter(Boolean).join('/'), f]));
    const written = [], refused = plan.refused;
    for (const name of plan.write) {
      const f = byName.get(name);
      // Bytes transferred to this worker are owned by the FS as they are; shared ones (the
      // controller's remount copies) are copied, so Python writing the file cannot alter them.
      const shared = typeof SharedArrayBuffer === 'function' && f.data.buffer instanceof SharedArrayBuffer;
      try { this.py.FS.writeFile(`/mnt/data/${name}`, f.data, { canOwn: !shared }); written.push(name); } catch (e) {
        refused.push({ name, reason: `write failed: ${e.message || e}` });
      }
    }
    this.runner.commit_mount(JSON.stringify(written));
    return { written, removed: plan.remove, kept: plan.keep, refused, mount_ms: +(performance.now() - t0).toFixed(3) };
  }

  // ---- runs --------------------------------------------------------------------------------
  async run(msg) {
    const limits = { ...LIMITS, ...(msg.limits || {}) };
    for (const k of Object.keys(LIMITS)) limits[k] = Math.min(limits[k], LIMITS[k]);
    const notes = [];
    const t0 = performance.now();
    let mountInfo = null;
    if (msg.files) {
      mountInfo = this.mount(msg.files, msg.complete !== false, limits.file_load_bytes);
      for (const r of mountInfo.refused) notes.push(NOTE.notMounted(r.name, r.reason));
    }
    if (this.out.capChars !== limits.out_chars) { this.out.setCap(limits.out_chars); this.err.setCap(limits.out_chars); }
    this.out.reset(); this.err.reset();

    const prep = JSON.parse(this.runner.prepare(msg.code));
    if (!prep.ok) return runResult(STATUS.ERROR, { notes, error: prep.error, timing: { mount_ms: mountInfo?.mount_ms ?? 0 } });

    // Packages for the imports (and matplotlib when the code mentions it), loaded before the run.
    const t1 = performance.now();
    const wanted = new Set();
    for (const imp of prep.imports) { const p = this.importMap.get(imp); if (p) wanted.add(p); }
    if (prep.matplotlib && this.importMap.has('matplotlib')) wanted.add(this.importMap.get('matplotlib'));
    const toLoad = [...wanted].filter((p) => !(p in this.py.loadedPackages));
    if (toLoad.length) {
      const errors = [];
      await this.py.loadPackage(toLoad, { messageCallback: () => {}, errorCallback: (m) => errors.push(m), checkIntegrity: !this.host.isNode });
      const failed = toLoad.filter((p) => !(p in this.py.loadedPackages));
      for (const p of failed) notes.push(NOTE.packageFailed(p, errors.join(' ').slice(0, 300)));
      this.post(event(EVENT.PACKAGES, { ref: msg.run_id ?? msg.id, loaded: toLoad.filter((p) => !failed.includes(p)),
        failed: failed.map((name) => ({ name, message: errors.join(' ').slice(0, 300) })) }));
    }
    const t2 = performance.now();

    this.pypiAllowed = msg.pypi === true;
    // The supervisor ends input()'s wait (EOF); this is only the kernel's own bound, past it.
    this.inputWaitMs = (Number(msg.limits && msg.limits.input_wait_s) || LIMITS.input_wait_s) * 1000;
    this.runNotes = [];
    this.currentRun = msg.run_id ?? msg.id;
    this.startedSent = false;
    let res;
    try {
      res = JSON.parse(await this.runner.execute_run(JSON.stringify({ limits })));
    } finally {
      this.out.end(); this.err.end();   // the last chunks, while they still name the run
      clearTimeout(this.tickTimer); this.tickTimer = null;
      this.currentRun = null; this.armed = false; this.pypiAllowed = false;
      if (this.control) this.control.clear();
    }
    const so = this.out.take(), se = this.err.take();
    if (so.truncated) notes.push(NOTE.cut('stdout', limits.out_chars));
    if (se.truncated) notes.push(NOTE.cut('stderr', limits.out_chars));
    notes.push(...this.runNotes, ...res.notes);
    if (res.displays_dropped) notes.push(NOTE.displaysDropped(res.displays_dropped, limits.displays));
    if (res.clear_output) notes.push(NOTE.clearOutputIgnored());
    for (const t of res.text_only || []) notes.push(NOTE.textOnly(t.what, t.kib, t.run));
    const files = [];
    for (const f of res.files) {
      try { files.push({ ...f, data: this.py.FS.readFile(`/mnt/output/${f.name}`) }); } catch (e) {
        notes.push(NOTE.notReadBack(f.name, e.message || e));
      }
    }
    return runResult(res.status, { stdout: so.text, stderr: se.text, stdout_truncated: so.truncated,
      stderr_truncated: se.truncated, error: res.error, files, files_unlisted: res.files_unlisted,
      figures_dropped: res.figures_dropped, notes, value: res.value ?? null, displays: res.displays || [],
      timing: { mount_ms: mountInfo?.mount_ms ?? 0, load_ms: +(t2 - t1).toFixed(3), ...res.timing,
        total_ms: +(performance.now() - t0).toFixed(3) } });
  }

  // ---- the live run: what kernel/ calls while user code runs ----------------------------------
  hostModule() {
    const core = this;
    return {
      // Around user code (kernel/execute.py).  User code can import this module too, so `started`
      // goes out once per run whatever it calls (it must not restart the time limit).
      arm() {
        if (core.control && !core.startedSent) core.control.clear();
        core.armed = true;
        if (core.currentRun !== null && !core.startedSent) {
          core.startedSent = true;
          core.post(event(EVENT.STARTED, { ref: core.currentRun }));
        }
      },
      disarm() { core.armed = false; },
      // Python flushes for a flush signal or a sleep: what it writes waits for the batch, which
      // tick() then hands on now (a prompt, a display) or when due.  Any other write of Python's
      // (an explicit flush, a full buffer) is handed on at once.
      hold() { core.out.held = core.err.held = true; },
      tick(now) { core.out.held = core.err.held = false; core.tickOutput(!!now); },
      can_wait() { return !!core.control && core.control.canWait; },
      sleep(ms) { return core.sleep(Number(ms)); },
      ask(prompt) { return core.ask(String(prompt)); },
      display(index, json) {
        if (core.currentRun !== null) core.post(event(EVENT.DISPLAY, { ref: core.currentRun, index, data: JSON.parse(json) }));
      },
    };
  }

  onChunk(stream, c) {
    if (this.currentRun !== null) this.post(event(EVENT.OUTPUT, { ref: this.currentRun, stream, ...c }));
  }

  // now: hand on what is pending; else only what is due (a flush signal or a wait), and (Python
  // awaiting: the event loop runs) a timer for the rest.
  tickOutput(now) {
    for (const s of [this.out, this.err]) { if (now) s.flush(); else s.due(s.batchMs / 2); }
    const at = Math.min(this.out.dueAt, this.err.dueAt);
    if (!now && at !== Infinity && !this.tickTimer && this.currentRun !== null) {
      this.tickTimer = setTimeout(() => { this.tickTimer = null; this.tickOutput(true); }, Math.max(0, at - performance.now()));
    }
  }

  // time.sleep (kernel/waits.py): blocked in Atomics.wait, woken by a SIGINT and to hand on output
  // that comes due meanwhile.  → true when interrupted: the SIGINT is taken, and Python raises
  // KeyboardInterrupt at the sleep (raising it from here, through Pyodide's checkInterrupt, would
  // also print it on stderr).
  sleep(ms) {
    const r = this.control.sleep(ms, { armed: this.armed && this.currentRun !== null,
      due: () => Math.min(this.out.dueAt, this.err.dueAt), onDue: () => this.tickOutput(true) });
    if (r !== 'interrupt') return false;
    this.control.take(true);
    return true;
  }

  // input(): → the answer, undefined (Python None: EOFError) or false (interrupted: the SIGINT is
  // taken, Python raises KeyboardInterrupt).
  ask(prompt) {
    if (!this.control || !this.control.canAsk || this.currentRun === null) {
      if (!this.runNotes.includes(NOTE.inputUnavailable())) this.runNotes.push(NOTE.inputUnavailable());
      return undefined;
    }
    this.control.expectInput();
    this.tickOutput(true);
    this.post(event(EVENT.INPUT_REQUEST, { ref: this.currentRun, prompt }));
    const r = this.control.waitInput(this.inputWaitMs + 5000, { armed: this.armed });
    if (r.interrupt) { this.control.take(true); return false; }
    if (r.late) this.runNotes.push(NOTE.inputUnanswered(this.inputWaitMs / 1000));
    return r.eof ? undefined : r.text;
  }

  // The controller's interrupt message.  Read here only when Python is not running (a worker
  // running Python reads no messages).  If the run's SIGINT is still unread, the cell awaits:
  // its task is cancelled and it gets KeyboardInterrupt at its await (kernel/execute.py), the
  // SIGINT taken so that it is raised once.  Still armed here means a step of the cell is
  // suspended inside a call (Pyodide's run_sync): nothing reaches it (stuck).
  interruptAwaiting() {
    const out = { delivered: false, awaiting: false, stuck: false };
    if (!this.control || this.currentRun === null || !this.startedSent || this.control.pending() !== SIGINT) return out;
    out.awaiting = true;
    const r = this.armed ? 'stuck' : this.runner.interrupt_awaiting();
    if (r === 'woken') { this.control.take(true); out.delivered = true; }
    out.stuck = r === 'stuck';
    return out;
  }

}
