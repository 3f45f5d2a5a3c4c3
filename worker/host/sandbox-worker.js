// sandbox-worker.js -- the worker_threads entry the headless host runs each kernel in: KernelCore
// (worker/core.js) exactly as worker/node-worker.js hosts it, plus the Node-specific part of the
// lock-down, applied at the one point where the kernel is loaded and no user code has run yet (the
// init reply is about to leave):
//   - Node's globals leave the worker's scope (process, Buffer, require, network classes, Worker):
//     Python's js bridge (`import js`) cannot even name them;
//   - the Pyodide JS API leaves Python's reach (kernel/lockdown.py hide_js_api: no `pyodide_js`,
//     `_api`, `_module`, useNodeSockFS, loadPackage);
//   - module loading closes: every later `import()` (ESM, through a resolve hook registered for
//     this worker) and `require()` (CommonJS, Module._load) is refused, so no code left in the
//     worker can load node:net, node:tls, node:vm, a data: URL or anything else;
//   - memory: each kernel is bounded by CEREA_KERNEL_MEMORY_MB (default 1024 MiB) — its Python
//     heap cannot grow past it (WebAssembly.Memory.prototype.grow refuses: Python raises
//     MemoryError), JavaScript buffers made from Python are refused past it however small each is
//     (RangeError), a file of the in-memory file system past it is a full disk (OSError ENOSPC),
//     and a run that leaves the kernel over it is reported `crashed` with "the sandbox ran out of
//     memory (limit N MiB) and was restarted", so the host replaces the kernel.  The JavaScript
//     heap is bounded by the worker's resourceLimits (headless-host.js: a kernel over it is ended
//     alone), the host by its RLIMIT_DATA.
//
// What it is not: a sandbox by itself.  What holds is the process around it (headless-host.js,
// orchestrator/hosts/hosts.c and docs/server-mode.md's table): V8 code generation from strings disabled,
// Node's permission model, and bubblewrap (user, network, pid namespaces; no capability; seccomp).
import { parentPort, workerData } from 'node:worker_threads';
import { readFile } from 'node:fs/promises';
import { constants as fsConstants, readFileSync } from 'node:fs';
import { constants as osConstants } from 'node:os';
import { createRequire, register } from 'node:module';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { KernelCore } from '../core.js';
import { ERROR, NOTE } from '../notes.js';
import { CMD, REPLY, STATUS } from '../protocol.js';

// Names removed from globalThis (and its prototype chain) after the kernel loaded.  Pyodide keeps
// the Node modules it needs in module scope, captured during loadPyodide.  (fetch stays: core.js
// pinned a guarded one that refuses every URL here.)
export const NODE_GLOBALS = Object.freeze([
  'process', 'Buffer', 'global', 'require', 'module', 'exports', '__filename', '__dirname',
  'BroadcastChannel', 'Worker', 'navigator', 'WebSocket', 'EventSource', 'Request',
  'Response', 'Headers', 'FormData',
  // bytes held where the memory guard cannot count them (Node's blob store), or made in bulk
  // from little (a decompression bomb)
  'Blob', 'File', 'CompressionStream', 'DecompressionStream',
  // a kernel started after another set --expose-gc (below) has it in its scope
  'gc',
]);
// Kept on purpose: setTimeout/setImmediate/MessageChannel (Pyodide's event loop schedules with
// them), performance, crypto.getRandomValues, TextEncoder/Decoder, WebAssembly.

const MIB = 1048576;
export const KERNEL_MEMORY_MB = Math.max(64, parseInt(process.env.CEREA_KERNEL_MEMORY_MB || '', 10) || 1024);
const LIMIT = KERNEL_MEMORY_MB * MIB;
const memoryUsage = process.memoryUsage.bind(process);   // kept: `process` leaves the scope

// Under Node's permission model process.binding() throws, and Emscripten's NODEFS reads its open
// flags from process.binding('constants') while Pyodide loads: answer that one question from the
// public modules and nothing else.
try {
  const deny = process.binding;
  process.binding = (name) => (name === 'constants' ? { fs: fsConstants, os: osConstants } : deny.call(process, name));
} catch (e) { /* not writable: the load fails and says why */ }

const toPath = (u) => (u.startsWith('file:') ? fileURLToPath(u) : u);

// ---- the start's trace (workerData.trace: bench/headless/kernel-start.mjs) ----------------------
// Absolute times (ms since the epoch, comparable across threads) of each step of the start, and
// this thread's CPU time at each (/proc/thread-self/schedstat, ns): added to the init reply's
// info as start_trace.  Off unless asked: nothing of it runs in a host.
const tracing = !!(workerData && workerData.trace);
const trace = tracing ? {} : null;
const threadCpuMs = () => { try { return Number(readFileSync('/proc/thread-self/schedstat', 'utf8').split(' ')[0]) / 1e6; } catch { return NaN; } };
const mark = (name) => { if (trace) { trace[name] = performance.timeOrigin + performance.now(); trace[`${name}_cpu`] = threadCpuMs(); } };
mark('entry');
let initId = 0;
let scanKnown = false;   // init's servedSnapshot.apiScanned: see lockDown
let core = null;
const report = [];

// ---- memory ---------------------------------------------------------------------------------
// Bytes of every wasm memory of this worker: Pyodide's heap, and any a run made.
const memories = new Set();
const wasmBytes = () => {
  let n = core && core.py ? core.py._module.HEAPU8.byteLength : 0;
  for (const m of memories) n += m.buffer.byteLength;
  return n;
};
const inUse = () => memoryUsage().arrayBuffers + wasmBytes();
// A full collection, run before a refusal: buffers a run let go of (files removed, arrays
// dropped) count until V8 collects them, and the guard refuses before V8 feels any pressure.
// (Taken from a context of its own at start: nothing in the kernel's scope can call it.)
// (Twice: V8 frees the buffers a collection found dead while it sweeps, which the next one's
// start finishes, and memoryUsage() counts them until then.)
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc');
const collect = () => { gc(); gc(); };
const over = (bytes) => {
  if (inUse() + bytes + MIB <= LIMIT) return false;
  collect();
  return inUse() + bytes + MIB > LIMIT;
};
const refuse = (what, bytes) => new RangeError(`${what}${bytes > 0 ? ` of ${Math.ceil(bytes / MIB)} MiB` : ''} refused: the sandbox's memory limit (${KERNEL_MEMORY_MB} MiB) is reached`);

// Installed before Pyodide loads: a memory may not grow past the kernel's limit (less the 1 MiB
// the allocation guard may not have looked at yet).  Emscripten's
// growMemory catches the error and malloc returns NULL, so Python raises MemoryError.
{
  const proto = WebAssembly.Memory.prototype;
  const grow = proto.grow;
  Object.defineProperty(proto, 'grow', {
    value: function grow_(pages) {
      const bytes = Number(pages) * 65536;
      if (bytes > 0 && over(bytes)) throw refuse('a Python heap growth', bytes);
      return grow.call(this, pages);
    },
    writable: false, configurable: false,
  });
}

// Installed at lock-down: buffers made through the global constructors (the ones Python's js
// bridge reaches, the species copies slice/map make, and MEMFS's file storage) are refused past
// the limit, whatever their size (guard, below).
const ALLOCATORS = ['ArrayBuffer', 'SharedArrayBuffer', 'Int8Array', 'Uint8Array', 'Uint8ClampedArray',
  'Int16Array', 'Uint16Array', 'Int32Array', 'Uint32Array', 'Float32Array', 'Float64Array',
  'BigInt64Array', 'BigUint64Array'];
function requested(C, args) {
  const a = args[0];
  const per = C.BYTES_PER_ELEMENT || 1;
  if (typeof a === 'number' || typeof a === 'bigint') return Number(a) * per;
  if (a && typeof a === 'object' && !(a instanceof ArrayBuffer) && !(typeof SharedArrayBuffer === 'function' && a instanceof SharedArrayBuffer))
    return (Number(a.length) || 0) * per;
  return 0;   // a view over an existing buffer allocates nothing
}
// Every allocation counts, however small: they add up until they make 1 MiB since the last
// look, then the kernel's memory is measured (memoryUsage() costs microseconds: not for each
// small one).  So pieces under 1 MiB (files in the in-memory /tmp, arrays kept from Python) stop
// at the limit as one big buffer does; the 1 MiB not yet looked at is kept free below it.
let unseen = 0;
function guard(what, bytes) {
  if (!(bytes > 0)) return;
  unseen += bytes;
  if (bytes < MIB && unseen < MIB) return;
  unseen = 0;
  if (over(bytes)) throw refuse(what, bytes);
}
function guardAllocations() {
  for (const name of ALLOCATORS) {
    const C = globalThis[name];
    if (typeof C !== 'function') continue;
    const P = new Proxy(C, {
      construct(target, args, newTarget) {
        guard(`a new ${name}`, requested(C, args));
        return Reflect.construct(target, args, newTarget === P ? target : newTarget);
      },
    });
    Object.defineProperty(globalThis, name, { value: P, writable: false, configurable: false });
    Object.defineProperty(C.prototype, 'constructor', { value: P, writable: false, configurable: false });
    for (const m of ['resize', 'grow']) {
      const f = C.prototype[m];
      if (typeof f !== 'function' || (name !== 'ArrayBuffer' && name !== 'SharedArrayBuffer')) continue;
      Object.defineProperty(C.prototype, m, {
        value: function (len) { guard(`a ${name} ${m}`, Number(len) - this.byteLength); return f.call(this, len); },
        writable: false, configurable: false,
      });
    }
  }
  const M = WebAssembly.Memory;
  const PM = new Proxy(M, {
    construct(target, args, newTarget) {
      guard('a new WebAssembly.Memory', (Number(args[0] && args[0].initial) || 0) * 65536);
      const m = Reflect.construct(target, args, newTarget === PM ? target : newTarget);
      memories.add(m);
      return m;
    },
  });
  Object.defineProperty(WebAssembly, 'Memory', { value: PM, writable: false, configurable: false });
  // Copies made inside V8, past the constructors: the kernel is measured after each one.
  const measured = (what, f) => function (...args) {
    const r = f.apply(this, args);
    if (over(0)) throw refuse(what, 0);
    return r;
  };
  const clone = globalThis.structuredClone;
  if (typeof clone === 'function')
    Object.defineProperty(globalThis, 'structuredClone', { value: measured('a structuredClone', clone), writable: false, configurable: false });
  const encode = TextEncoder.prototype.encode;
  Object.defineProperty(TextEncoder.prototype, 'encode', { value: measured('a TextEncoder.encode', encode), writable: false, configurable: false });
}

// A file of the in-memory file system (/tmp, /home...) lives in JavaScript buffers the guard
// counts; one refused there is a full disk to Python (OSError ENOSPC), not a JavaScript error
// unwinding through the interpreter (which Pyodide takes as fatal).
const ENOSPC = 51;   // Emscripten's errno numbers, not Linux's
function guardFiles() {
  const FS = core.py.FS;
  const MEMFS = FS.filesystems.MEMFS;
  const full = (f) => function (...args) {
    try { return f.apply(this, args); } catch (e) {
      if (e instanceof RangeError) throw new FS.ErrnoError(ENOSPC);
      throw e;
    }
  };
  for (const ops of new Set([MEMFS.stream_ops, MEMFS.ops_table && MEMFS.ops_table.file.stream]))
    if (ops) for (const name of ['write', 'allocate', 'mmap']) if (typeof ops[name] === 'function') ops[name] = full(ops[name]);
  for (const ops of new Set([MEMFS.node_ops, MEMFS.ops_table && MEMFS.ops_table.file.node]))
    if (ops && typeof ops.setattr === 'function') ops.setattr = full(ops.setattr);
}

// A run that left the kernel over its limit: reported crashed, so the host replaces the kernel.
function checkMemory(result) {
  if (inUse() <= LIMIT) return;
  collect();
  const used = inUse();
  if (used <= LIMIT) return;
  result.status = STATUS.CRASHED;
  result.error = ERROR.outOfMemory(KERNEL_MEMORY_MB);
  result.notes = [...(result.notes || []), NOTE.outOfMemory(KERNEL_MEMORY_MB, Math.ceil(used / MIB))];
}

// ---- module loading -------------------------------------------------------------------------
// The resolve hook of this worker's ESM loader once closed: every import() is refused.  (A data:
// URL: no file of its own to read under the permission model.)
const CLOSED_LOADER = 'data:text/javascript,' + encodeURIComponent(
  'export async function resolve(specifier) { throw new Error(`import("${specifier}") refused: module loading is closed in this sandbox`); }');
function closeModuleLoading() {
  const Module = createRequire(import.meta.url)('node:module');
  const load = Module._load;
  Module._load = function _load(request) {
    throw new Error(`require("${request}") refused: module loading is closed in this sandbox`);
  };
  if (Module._load === load) report.push('node lock-down: require() could not be closed');
  register(CLOSED_LOADER);
}

// ---- the lock-down point ---------------------------------------------------------------------
function removeNodeGlobals() {
  for (const name of NODE_GLOBALS) {
    try {
      for (let o = globalThis; o; o = Object.getPrototypeOf(o)) {
        const d = Object.getOwnPropertyDescriptor(o, name);
        if (!d) continue;
        if (d.configurable) delete o[name];
        else Object.defineProperty(o, name, { value: undefined, writable: false });
      }
      if (globalThis[name] !== undefined) report.push(`node lock-down: ${name} is still reachable`);
    } catch (e) { report.push(`node lock-down: ${name}: ${e.message}`); }
  }
}

// info: the init reply's.  hide_js_api's scan for objects still leading to the API walks every
// object Python tracks; its answer is the same for every kernel restored from one image (the same
// heap, the same start, no user code yet), so a host that saw one such kernel's scan find nothing
// says so in init (servedSnapshot.apiScanned, node-kernel.js) and its later kernels from that
// image skip it.  A loaded kernel always scans.  info.api_scan says which: 'clean', 'found' or
// 'skipped'.
function lockDown(info) {
  const step = (label, fn) => { try { fn(); } catch (e) { report.push(`node lock-down: ${label}: ${e.message}`); } };
  step('the Pyodide JS API', () => {
    const scan = !(scanKnown && info.snapshot === 'served');
    const notes = core.py.pyimport('cerea_kernel.lockdown').hide_js_api(scan);
    const found = notes.toJs();
    notes.destroy();
    report.push(...found);
    info.api_scan = !scan ? 'skipped' : found.length ? 'found' : 'clean';
  });
  mark('hide_js_api');
  step('module loading', closeModuleLoading);
  mark('module_loading');
  step('memory', guardAllocations);
  step('memory of files', guardFiles);
  removeNodeGlobals();
}

const post = (msg, transfer) => {
  if (trace && msg && msg.type === 'event' && msg.event === 'progress') mark(msg.stage);
  if (initId && msg && msg.id === initId && msg.type === REPLY.OK) {
    mark('reply');
    lockDown(msg.info || {});
    mark('node_lockdown');
    initId = 0;
    if (msg.info && trace) msg.info.start_trace = trace;
    if (msg.info) {
      msg.info.lockdown = [...(msg.info.lockdown || []), ...report];
      msg.info.node_lockdown = { removed: NODE_GLOBALS.filter((n) => globalThis[n] === undefined), memory_mb: KERNEL_MEMORY_MB };
    }
  } else if (msg && msg.type === REPLY.OK && msg.result) {
    checkMemory(msg.result);
  }
  parentPort.postMessage(msg, transfer);
};

const host = {
  isNode: true,
  scope: globalThis,
  post,
  snapshotKey: (workerData && workerData.snapshotKey) || '',
  readBytes: (url) => readFile(toPath(url)),
  readText: (url) => readFile(toPath(url), 'utf8'),
  importPyodide: (url) => import(/^(file):/.test(url) ? url : pathToFileURL(url).href),
};
if (trace) {
  const importPyodide = host.importPyodide;
  host.importPyodide = async (url) => {
    mark('import'); const m = await importPyodide(url); mark('imported');
    return { ...m, loadPyodide: async (opts) => {
      const instantiate = WebAssembly.instantiate;
      WebAssembly.instantiate = function (...a) { mark('instantiate'); return instantiate.apply(this, a).finally(() => mark('instantiated')); };
      mark('load');
      try { return await m.loadPyodide(opts); } finally { WebAssembly.instantiate = instantiate; mark('loaded'); }
    } };
  };
}
core = new KernelCore(host);
parentPort.on('message', (msg) => {
  if (msg && msg.cmd === CMD.INIT) { initId = msg.id; scanKnown = !!(msg.servedSnapshot && msg.servedSnapshot.apiScanned === true); }
  core.onMessage(msg);
});
