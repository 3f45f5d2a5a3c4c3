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
//             loadTimeoutMs?, snapshot?: {key, sha256, bytes: Uint8Array}, servedSnapshot?: true,
//             makeSnapshot?: key}
//            Loads Pyodide (absolute lockFileURL and explicit packageBaseUrl: never a CDN), the
//            kernel Python package, then locks the worker's global scope down.  interruptBuffer is
//            the control buffer (CONTROL below: CONTROL.BYTES of shared memory) when the
//            controller can share memory; otherwise interrupts, interruptible sleeps, live output
//            flushes and input() are unavailable (cancel then means terminate, input() raises
//            EOFError at once with a note).  A buffer of only 4 bytes (slot 0) gives interrupts.
//            `snapshot` is a memory image of the runtime this worker's build made (SNAPSHOTS
//            below; the page's kept one), restored instead of Pyodide's own start when its key is
//            this build's and its bytes hash to sha256; without it, `servedSnapshot` restores the
//            image served beside the runtime (worker/snapshot.js: the sha256 the served lock
//            lists, this build's key in its header); `snapshot` too is restored only when its
//            bytes are the served image's (a copy the page kept: a script that wrote the page
//            origin's storage cannot plant one).  In a browser the served image streams while its
//            rate is measured and is given up for a load when the rest of it would take longer
//            than the start it saves (servedSnapshot: {budgetMs} sets that; Node hosts pass
//            {bytes, sha256, apiScanned?} read and checked once per process, or {refused};
//            apiScanned: host/sandbox-worker.js's lock-down scan is known clean for this image).  A refused image
//            (and one whose restore fails) means a normal load with a log event; the `runtime`
//            progress says which start ran (notes.js START).  `makeSnapshot` (this build's key)
//            asks for an image in a `snapshot` event before the reply: the served file this
//            kernel restored (with servedSnapshot), else one made of this load (setup).  A host
//            without a build key does neither.
//            ok → {info: {pyodide, python, interrupts, packages: {has: [...], lacks: [{name,
//                  reason}]}, load_ms, snapshot: 'served'|'restored'|'made'|'none'|'refused: why'|
//                  'skipped: why', kernel_modules: 'image'|'source'|'stale'}}  (served: from the
//                  served image; restored: from init's; skipped: loaded, faster than downloading
//                  the image; kernel_modules: the image's imported modules were used, or imported
//                  from kernelURL's sources — stale: the image held other sources' — core.js
//                  importKernel)
//   mount    {files: [{name, version, sha256, size, data?: Uint8Array}], complete?: true}
//            Makes /mnt/data match the manifest: writes new and changed files (data required for
//            those), removes files no longer listed when `complete` (default true).  Names are
//            relative paths (one segment for attachments, `a/b.png` for outputs), never `..`.
//            ok → {written: [names], removed: [names], kept: [names], refused: [{name, reason}]}
//   run      {run_id, code, pypi?: bool, limits?: LIMITS-shaped overrides, files?: same as mount}
//            Mounts `files` first when given, then compiles (SyntaxError reported before any
//            package loads), loads packages for the imports, executes in the persistent
//            namespace, and collects output.  ok → {result: RunResult} (a Python exception is
//            still an ok reply: result.status === 'error').  While it executes, output,
//            display and input_request events go out (below).
//   interrupt {}   The controller writes SIGINT into the control buffer itself (Python running
//            user code reads it there; a sleeping or input()-waiting kernel is woken by
//            Atomics.notify) and ALSO sends this message: a worker whose Python is awaiting
//            (an asyncio task of the run) reads it at once and raises KeyboardInterrupt in the
//            run's sleeping tasks.  ok → {delivered, awaiting, stuck} (stuck: the run awaits
//            something no interrupt reaches, e.g. a JS promise: only a replacement stops it).
//   dispose  {}   Forgets the namespace and files; the worker stays loaded.  Safe twice.  ok → {}
//
// RunResult (maps onto docs/api.md's POST /v1/runs/{run}/result body; the page session adds
// `attempt`, the supervisor `restarted`/`remounted` when it replaced the kernel):
//   {status: 'ok'|'error'|'cancelled' (worker) | 'timeout'|'crashed' (set by the supervisor),
//    stdout, stderr, stdout_truncated, stderr_truncated,
//    error: null | {type, message, traceback},
//    files: [{name, size, sha256, kind: 'file'|'figure', data: Uint8Array}]  (order written;
//            name is relative to /mnt/output; data is to be uploaded with PUT .../files/{name}),
//    files_unlisted, figures_dropped, notes: [string], restarted: false, remounted: [],
//    value: null | Bundle (the cell's last expression, Jupyter's rule), displays: [Bundle] (≤ 20),
//    timing: {mount_ms, load_ms, exec_ms, collect_ms}}
// Bundle (a MIME bundle): {'text/plain': repr capped at out_chars, 'text/html'?, 'image/png'?
//   (base64), 'image/svg+xml'?, 'application/json'? (the value itself)}.
//
// Events (`{id: 0, type: 'event', event, ref, ...}`):
//   progress  {ref: init id, stage: 'runtime'|'kernel'|'lockdown', message}, and in browsers
//             {ref: init id, stage: 'download', loaded, total, message} while the runtime's files
//             download: one figure over all of them (bytes as delivered, decompressed), at most
//             every 100 ms and once at each file's end.  `loaded` only grows; `total` is known
//             before the first byte (the sizes bundled into the worker; never below `loaded`),
//             or 0 when unknown.
//   started   {ref: run_id}  Python begins executing user code now: the time limit starts here.
//   packages  {ref: run_id, loaded: [names], failed: [{name, message}]}
//   log       {ref, level, message}   worker diagnostics (never user output).
//   output    {ref: run_id, stream: 'stdout'|'stderr', offset, text, truncated}  what Python wrote,
//             batched (a chunk when OUTPUT_BATCH.chars are pending or OUTPUT_BATCH.ms passed since
//             the last, and at each flush signal, explicit flush, sleep, input() and the run's
//             end): `offset` is the characters (Unicode code points) of the stream before
//             `text`; the chunks of a run are what it keeps of the stream (all of it within
//             out_chars, else its start, a gap line and its end: output.js), in order, and
//             `truncated` turns true once the stream passed the cap.  The result's
//             stdout/stderr are those chunks joined.
//   display   {ref: run_id, index, data: Bundle}   display(obj) in the run (index from 0, ≤ 20).
//   input_request {ref: run_id, prompt}   input(prompt) waits for the controller's answer
//             (CONTROL below); the prompt itself went out as stdout first.
//   snapshot  {ref: init id, key, bytes}   the memory image init's makeSnapshot asked for,
//             taken once loadPyodide returned and the kernel's modules were imported (with the
//             standard-library modules they use): before anything of ours ran, the lock-down or
//             any user code.
//
// SNAPSHOTS: Pyodide's private memory-snapshot API (loadPyodide's _makeSnapshot /
// _loadSnapshot, makeMemorySnapshot).  The image is the wasm heap of a runtime that has imported
// the kernel's modules and run nothing of ours (core.js importKernel: used after a restore only
// when their sources are the files'); MEMFS is not in it (the kernel's files are written again) and neither is any
// JS state (stdout, the cerea_host module, the interrupt buffer: set again), and the lock-down is
// applied after a restore exactly as after a load.  The key names the build: the runtime's files
// and the worker's and kernel's sources (worker/snapshot-key.js), so a new deployment never
// restores an old image.  One image restores in Node and in browsers alike (setup makes the
// served one in Node: scripts/make_snapshot.mjs; tests/kernel/snapshot.test.mjs restores it in
// both).  After a restore the `random` module is seeded again (its state is in the image).
//
// The control buffer (shared memory the controller gives at init; Int32 slots, then bytes):
//   slot SIGNAL   0 nothing; SIGINT (2): raise KeyboardInterrupt; FLUSH (10, SIGUSR1): flush the
//                 run's output now.  The controller writes SIGINT with Atomics.store + notify
//                 (it wins over a FLUSH), FLUSH only with compareExchange from 0 (it never
//                 replaces a SIGINT); the kernel reads with Atomics.exchange, and only while
//                 Python runs user code.
//   slot QUIET    nobody writes it: a plain timed wait is Atomics.wait on it.
//   slot INPUT    INPUT.NONE while input() waits; the controller writes the answer's UTF-8 bytes
//                 at DATA, its length in slot INPUT_LEN, then INPUT.ANSWER (or INPUT.EOF: no
//                 answer, input() raises EOFError) with Atomics.store + notify.

export const PROTOCOL_VERSION = 1;

export const CMD = Object.freeze({
  INIT: 'init', MOUNT: 'mount', RUN: 'run', INTERRUPT: 'interrupt', DISPOSE: 'dispose',
});

export const REPLY = Object.freeze({ OK: 'ok', ERROR: 'error', EVENT: 'event' });

export const EVENT = Object.freeze({
  PROGRESS: 'progress', STARTED: 'started', PACKAGES: 'packages', LOG: 'log',
  OUTPUT: 'output', DISPLAY: 'display', INPUT_REQUEST: 'input_request', SNAPSHOT: 'snapshot',
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
  displays: 20,               // display(obj) bundles per run
  input_wait_s: 300,          // input() waits this long for an answer unless the run says (CODE_INPUT_WAIT_S)
});

// Live output batching: a chunk when this much is pending or this long passed since the last.
export const OUTPUT_BATCH = Object.freeze({ ms: 50, chars: 4096 });

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

// The signals written into the control buffer's SIGNAL slot: Pyodide raises KeyboardInterrupt on
// SIGINT; FLUSH (SIGUSR1) runs the kernel's handler that flushes the run's output (kernel/output.py).
export const SIGINT = 2;
export const FLUSH = 10;

// The control buffer's layout (see the header).
export const CONTROL = Object.freeze({
  SIGNAL: 0, QUIET: 1, INPUT: 2, INPUT_LEN: 3,
  DATA: 16,                   // byte offset of the answer's bytes
  INPUT_BYTES: 262144,        // the answer's UTF-8 bytes at most (64 Ki characters of 4 bytes)
  BYTES: 16 + 262144,
});
export const INPUT = Object.freeze({ NONE: 0, ANSWER: 1, EOF: 2 });

// The Python modules of kernel/, loaded in this order from `kernelURL` at init.
export const KERNEL_MODULES = Object.freeze(['__init__', 'output', 'mounts', 'outputs_diff',
  'figures', 'imports', 'lockdown', 'values', 'ipython', 'waits', 'execute', 'runner']);
// The `kernelURL` of modules bundled into the worker script itself (the browser's kernel worker,
// ui-adapter/src/kernel-worker.js): the page sends it, the worker reads them from its bundle.
export const BUNDLED_KERNEL_URL = 'bundled:kernel/';

// A RunResult (above), the one constructor every layer uses: the fields a result always has, as
// they are for a run that showed nothing, then the given ones.
export function runResult(status, fields = {}) {
  return { stdout: '', stderr: '', stdout_truncated: false, stderr_truncated: false, error: null, files: [],
    files_unlisted: 0, figures_dropped: 0, notes: [], restarted: false, remounted: [], value: null, displays: [],
    ...fields, status };
}

// The body of POST /v1/runs/{run}/result for `attempt`: a RunResult's fields (missing ones as
// runResult has them; not its timing nor its files' bytes), its files as listed after upload.
export function resultMessage(attempt, r, files, notes) {
  const d = runResult(r.status);
  return { attempt, status: r.status, stdout: r.stdout || d.stdout, stderr: r.stderr || d.stderr,
    stdout_truncated: !!r.stdout_truncated, stderr_truncated: !!r.stderr_truncated, error: r.error || d.error,
    files, files_unlisted: r.files_unlisted || 0, figures_dropped: r.figures_dropped || 0, notes,
    restarted: !!r.restarted, remounted: r.remounted || d.remounted, value: r.value ?? d.value,
    displays: r.displays || d.displays };
}

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

// The ArrayBuffers of a message's file bytes (and snapshot image), to pass as postMessage's
// transfer list.
export function transferables(msg) {
  const out = [];
  const image = (msg.snapshot && msg.snapshot.bytes) || (msg.servedSnapshot && msg.servedSnapshot.bytes) || (msg.event === EVENT.SNAPSHOT && msg.bytes);
  if (image && image.buffer) out.push(image.buffer);
  const files = msg.files || (msg.result && msg.result.files) || [];
  for (const f of files) if (f.data && f.data.buffer && !out.includes(f.data.buffer)) out.push(f.data.buffer);
  return out;
}
