// protocol.js -- the message contract between a kernel controller (worker/kernel-client.js, used by
// the page and by the headless host) and a kernel worker (worker/core.js behind
// ui-adapter/src/kernel-worker.js, worker/node-worker.js or worker/host/sandbox-worker.js).  This file holds the contract alone: names,
// shapes, limits and a few pure helpers to build and check messages.  It does not send anything,
// own a worker, or know about Pyodide.
//
// Envelope.  Controller → worker: `{id, cmd, ...}` (id: a positive integer chosen by the
// controller, unique per worker).  Worker → controller: either a reply `{id, type, ...}` where
// `type` is REPLY.OK or REPLY.ERROR and `id` is the command's id, or a side-channel event
// `{id: 0, type: 'event', event: EVENT.*, ...}` (id 0: events belong to no command; the run or
// command they concern is named in `ref`).
//
// Commands (fields beyond id/cmd):
//   init     {indexURL, lockFileURL, packageBaseUrl, kernelURL, deploymentURL?, interruptBuffer?,
//             loadTimeoutMs?}
//            Loads Pyodide (absolute lockFileURL and explicit packageBaseUrl: never a CDN), the
//            kernel Python package, then locks the worker's global scope down.  interruptBuffer is
//            a SharedArrayBuffer of >= 4 bytes (Int32 slot 0) when the controller can share
//            memory; otherwise interrupts are unavailable (cancel then means terminate).
//            ok → {info: {pyodide, python, interrupts, packages: {has: [...], lacks: [{name,
//                  reason}]}, load_ms}}
//   mount    {files: [{name, version, sha256, size, data?: Uint8Array}], complete?: true}
//            Makes /mnt/data match the manifest: writes new and changed files (data required for
//            those), removes files no longer listed when `complete` (default true).  Names are
//            relative paths (one segment for attachments, `a/b.png` for outputs), never `..`.
//            ok → {written: [names], removed: [names], kept: [names], refused: [{name, reason}]}
//   run      {run_id, code, pypi?: bool, limits?: LIMITS-shaped overrides, files?: same as mount}
//            Mounts `files` first when given, then compiles (SyntaxError reported before any
//            package loads), loads packages for the imports, executes in the persistent
//            namespace, and collects output.  ok → {result: RunResult} (a Python exception is
//            still an ok reply: result.status === 'error').
//   interrupt {}   Asks Python to raise KeyboardInterrupt.  Prefer the controller writing
//            SIGINT into the shared buffer directly (kernel-client does): a worker busy in Python
//            cannot read this message until the run ends.  ok → {}
//   dispose  {}   Forgets the namespace and files; the worker stays loaded.  Safe twice.  ok → {}
//
// RunResult (maps onto DESIGN.md's POST /v1/runs/{run}/result body; the page session adds
// `attempt`, the supervisor `restarted`/`remounted` when it replaced the kernel):
//   {status: 'ok'|'error'|'cancelled' (worker) | 'timeout'|'crashed' (set by the supervisor),
//    stdout, stderr, stdout_truncated, stderr_truncated,
//    error: null | {type, message, traceback},
//    files: [{name, size, sha256, kind: 'file'|'figure', data: Uint8Array}]  (order written;
//            name is relative to /mnt/output; data is to be uploaded with PUT .../files/{name}),
//    files_unlisted, figures_dropped, notes: [string], restarted: false, remounted: [],
//    timing: {mount_ms, load_ms, exec_ms, collect_ms}}
//
// Events (`{id: 0, type: 'event', event, ref, ...}`):
//   progress  {ref: init id, stage: 'runtime'|'kernel'|'lockdown', message}, and in browsers
//             {ref: init id, stage: 'download', url, loaded, total, message} while the runtime's files
//             download (at most every 100 ms per file, and once at each file's end).
//   started   {ref: run_id}  Python begins executing user code now: the time limit starts here.
//   packages  {ref: run_id, loaded: [names], failed: [{name, message}]}
//   log       {ref, level, message}   worker diagnostics (never user output).

export const PROTOCOL_VERSION = 1;

export const CMD = Object.freeze({
  INIT: 'init', MOUNT: 'mount', RUN: 'run', INTERRUPT: 'interrupt', DISPOSE: 'dispose',
});

export const REPLY = Object.freeze({ OK: 'ok', ERROR: 'error', EVENT: 'event' });

export const EVENT = Object.freeze({
  PROGRESS: 'progress', STARTED: 'started', PACKAGES: 'packages', LOG: 'log',
});

export const STATUS = Object.freeze({
  OK: 'ok', ERROR: 'error', TIMEOUT: 'timeout', CRASHED: 'crashed', CANCELLED: 'cancelled',
});

// The guide's limits (seeds/000: Limits).  MB = 2^20 bytes.  A run may lower them, never raise.
export const LIMITS = Object.freeze({
  out_chars: 8000,            // per stream, stdout and stderr
  files_listed: 200,          // files listed per run
  figures: 20,                // swept figures per run
  file_load_bytes: 50 * 1048576, // per file loaded into a run or returned from it
});

// Worker-side error codes carried in `{type: 'error', code, message}` replies.
export const ERR = Object.freeze({
  BAD_MESSAGE: 'bad_message',   // malformed envelope or fields
  NOT_READY: 'not_ready',       // command before init finished, or init failed
  BUSY: 'busy',                 // a run or mount is already in progress
  LOAD_FAILED: 'load_failed',   // Pyodide or the kernel package failed to load
  LOAD_TIMEOUT: 'load_timeout', // Pyodide did not load within loadTimeoutMs
  DISPOSED: 'disposed',
  INTERNAL: 'internal',
});

// The SIGINT value written into the interrupt buffer (Pyodide raises KeyboardInterrupt on 2).
export const SIGINT = 2;

// The Python modules of kernel/, loaded in this order from `kernelURL` at init.
export const KERNEL_MODULES = Object.freeze(['__init__', 'output', 'mounts', 'outputs_diff',
  'figures', 'imports', 'lockdown', 'execute', 'runner']);

export function ok(id, fields = {}) { return { ...fields, id, type: REPLY.OK }; }
export function fail(id, code, message) { return { id, type: REPLY.ERROR, code, message }; }
export function event(name, fields = {}) { return { ...fields, id: 0, type: REPLY.EVENT, event: name }; }

// Returns null when `msg` is a well-formed command, else a message saying what is wrong.
export function checkCommand(msg) {
  if (msg === null || typeof msg !== 'object') return 'message is not an object';
  if (!Number.isInteger(msg.id) || msg.id <= 0) return 'id must be a positive integer';
  switch (msg.cmd) {
    case CMD.INIT:
      for (const k of ['indexURL', 'lockFileURL', 'packageBaseUrl', 'kernelURL'])
        if (typeof msg[k] !== 'string' || !msg[k]) return `init: ${k} must be a non-empty string`;
      return null;
    case CMD.MOUNT: return checkFiles(msg.files, 'mount');
    case CMD.RUN:
      if (typeof msg.code !== 'string') return 'run: code must be a string';
      if (msg.files !== undefined) return checkFiles(msg.files, 'run');
      return null;
    case CMD.INTERRUPT: case CMD.DISPOSE: return null;
    default: return `unknown cmd ${JSON.stringify(msg.cmd)}`;
  }
}

function checkFiles(files, what) {
  if (!Array.isArray(files)) return `${what}: files must be an array`;
  for (const f of files) {
    if (!f || typeof f.name !== 'string' || !f.name) return `${what}: every file needs a name`;
    if (f.data !== undefined && !(f.data instanceof Uint8Array)) return `${what}: ${f.name}: data must be a Uint8Array`;
  }
  return null;
}

// The ArrayBuffers of a message's file bytes, to pass as postMessage's transfer list.
export function transferables(msg) {
  const out = [];
  const files = msg.files || (msg.result && msg.result.files) || [];
  for (const f of files) if (f.data && f.data.buffer && !out.includes(f.data.buffer)) out.push(f.data.buffer);
  return out;
}
