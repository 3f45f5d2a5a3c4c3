// sandbox-worker.js -- the worker_threads entry the headless host runs each kernel in: KernelCore
// (worker/core.js) exactly as worker/node-worker.js hosts it, plus the Node-specific part of the
// lock-down: once Pyodide, the kernel and the browser-API lock-down are in place (the init reply is
// about to leave), the Node globals are removed from the worker's scope, so Python's js bridge
// (`import js`) finds no process, Buffer, require-like hooks, network classes or Worker
// constructors to climb out through.
//
// What it is not: a sandbox by itself.  What holds is the process around it (see headless-host.js
// and orchestrator/hosts.c): V8 code generation from strings disabled (no js.eval / js.Function /
// run_js, hence no dynamic import() of node: modules), Node's permission model (read only the
// runtime and our sources, no writes, no child processes), and a bubblewrap network namespace in
// which the only way out is the orchestrator's Unix socket.  Removing globals is the layer that
// keeps Python from even naming Node's APIs.
import { parentPort } from 'node:worker_threads';
import { readFile } from 'node:fs/promises';
import { constants as fsConstants } from 'node:fs';
import { constants as osConstants } from 'node:os';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { KernelCore } from '../core.js';
import { CMD, REPLY } from '../protocol.js';

// Names removed from globalThis (and its prototype chain) after the kernel loaded.  Pyodide keeps
// the Node modules it needs in module scope, captured during loadPyodide.
export const NODE_GLOBALS = Object.freeze([
  'process', 'Buffer', 'global', 'require', 'module', 'exports', '__filename', '__dirname',
  'BroadcastChannel', 'Worker', 'navigator', 'WebSocket', 'EventSource', 'fetch', 'Request',
  'Response', 'Headers', 'FormData',
]);
// Kept on purpose: setTimeout/setImmediate/MessageChannel (Pyodide's event loop schedules with
// them), performance, crypto.getRandomValues, TextEncoder/Decoder, WebAssembly.

// Under Node's permission model process.binding() throws, and Emscripten's NODEFS reads its open
// flags from process.binding('constants') while Pyodide loads: answer that one question from the
// public modules and nothing else.
try {
  const deny = process.binding;
  process.binding = (name) => (name === 'constants' ? { fs: fsConstants, os: osConstants } : deny.call(process, name));
} catch (e) { /* not writable: the load fails and says why */ }

const toPath = (u) => (u.startsWith('file:') ? fileURLToPath(u) : u);
let initId = 0;
const report = [];

function removeNodeGlobals() {
  for (const name of NODE_GLOBALS) {
    try {
      for (let o = globalThis; o; o = Object.getPrototypeOf(o)) {
        const d = Object.getOwnPropertyDescriptor(o, name);
        if (!d) continue;
        if (d.configurable) delete o[name];
        else Object.defineProperty(o, name, { value: undefined, writable: false });
      }
      if (globalThis[name] !== undefined && name !== 'fetch') report.push(`node lock-down: ${name} is still reachable`);
    } catch (e) { report.push(`node lock-down: ${name}: ${e.message}`); }
  }
}

const post = (msg, transfer) => {
  if (initId && msg && msg.id === initId && msg.type === REPLY.OK) {
    // The one point where the kernel is loaded and no user code has run yet.
    removeNodeGlobals();
    initId = 0;
    if (msg.info) msg.info.lockdown = [...(msg.info.lockdown || []), ...report];
    msg.info.node_lockdown = { removed: NODE_GLOBALS.filter((n) => globalThis[n] === undefined) };
  }
  parentPort.postMessage(msg, transfer);
};

const host = {
  isNode: true,
  scope: globalThis,
  post,
  readText: (url) => readFile(toPath(url), 'utf8'),
  importPyodide: (url) => import(/^(file):/.test(url) ? url : pathToFileURL(url).href),
};
const core = new KernelCore(host);
parentPort.on('message', (msg) => {
  if (msg && msg.cmd === CMD.INIT) initId = msg.id;
  core.onMessage(msg);
});
