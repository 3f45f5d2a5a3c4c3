// lockdown-node.test.mjs -- the Node-only part of the kernel's lock-down (worker/host/sandbox-worker.js,
// kernel/lockdown.py hide_js_api), probed from Python in the headless host's own kernel worker:
// the Pyodide JS API is out of reach (no pyodide_js internals, no useNodeSockFS, no _nodeSock),
// module loading is closed (import() and require() refused, even with code generation from strings
// left on, as in this test process: one layer removed, the next still holds), and the kernel's
// memory is bounded (Python heap, JS buffers; a kernel left over its limit is reported crashed).
// The full process around it (bubblewrap, the permission model) is tests/fullstack/sandbox.test.mjs.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { newNodeKernel } from '../../worker/node-kernel.js';
import { run, EXPECTED_START } from './helpers.mjs';

const MEMORY_MB = 384;
// k2: a second kernel of this process.  Restored from the same image as k, it skips the scan for
// objects leading to the Pyodide JS API (k's found none: sandbox-worker.js lockDown), and is held
// to the same probes.
let k, info, k2, info2, server, port, hits = 0;
before(async () => {
  server = http.createServer((req, res) => { hits++; res.end('leak'); });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  port = server.address().port;
  process.env.CEREA_KERNEL_MEMORY_MB = String(MEMORY_MB);   // read by the worker at its start
  k = newNodeKernel({ entry: 'sandbox', loadTimeoutMs: 120000 });
  info = await k.ready;
  k2 = newNodeKernel({ entry: 'sandbox', loadTimeoutMs: 120000 });
  info2 = await k2.ready;
});
after(() => { k && k.terminate('cancelled'); k2 && k2.terminate('cancelled'); server && server.close(); });

// Each probe prints "<label> refused <Type>" or "<label> REACHED".
export const probe = (label, code) => `
try:
${code.split('\n').map((l) => '    ' + l).join('\n')}
    print(${JSON.stringify(label)}, 'REACHED')
except BaseException as e:
    print(${JSON.stringify(label)}, 'refused', type(e).__name__)
`;
const lines = (r) => r.stdout.trim().split('\n');

test('the lock-down reports nothing left undone (on the start path this run holds to the probes)', () => {
  for (const i of [info, info2]) {
    assert.equal(i.snapshot, EXPECTED_START);
    assert.deepEqual(i.lockdown, []);
    assert.equal(i.node_lockdown.memory_mb, MEMORY_MB);
  }
  // the scan ran for the first kernel; for the second only when it loaded (no image to know it by)
  assert.equal(info.api_scan, 'clean');
  assert.equal(info2.api_scan, EXPECTED_START === 'served' ? 'skipped' : 'clean');
});

test('the scan for objects leading to the API finds one held where the old walk of dicts, lists and tuples did not look (a closure cell)', async () => {
  // a plain worker (node-worker.js): no lock-down of its own; the API is planted, then hidden
  const plain = newNodeKernel({ loadTimeoutMs: 120000 });
  try {
    await plain.ready;
    const r = await run(plain, ['import pyodide_js',
      'def keep(x):', '    return lambda: x',
      'kept = keep(pyodide_js)', 'del pyodide_js',
      'from cerea_kernel import lockdown',
      'print(lockdown.hide_js_api())'].join('\n'));
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    assert.match(r.stdout, /the Pyodide JS API is still reachable from Python \(useNodeSockFS/);
  } finally { plain.terminate('cancelled'); }
});

test('the Pyodide JS API is out of Python\'s reach: pyodide_js internals, useNodeSockFS, _nodeSock, js globals (both kernels)', async () => {
  for (const kernel of [k, k2]) await apiOutOfReach(kernel);
});
async function apiOutOfReach(kernel) {
  const r = await run(kernel, ['import js, sys',
    probe('useNodeSockFS', 'import pyodide_js\nawait pyodide_js.useNodeSockFS()'),
    probe('_nodeSock', 'from pyodide_js._api import _nodeSock\n_nodeSock.connect'),
    probe('_module', 'import pyodide_js\npyodide_js._module.FS'),
    probe('FS', 'import pyodide_js\npyodide_js.FS.filesystems.NODEFS'),
    probe('loadPackage', 'import pyodide_js\npyodide_js.loadPackage'),
    probe('reimport', "del sys.modules['pyodide_js']\nimport pyodide_js\npyodide_js._api.config"),
    probe('registered', "import _pyodide._importhook as h\nh.jsfinder.jsproxies['pyodide_js']"),
    probe('loadPyodide', 'js.loadPyodide'),
    probe('globalThis.require', 'js.globalThis.require'),
    probe('process', 'js.process.binding'),
    probe('webloop', "import pyodide.webloop as w\nw.scheduleCallback._module.FS"),
    // the loader that imported pyodide_js, found among every object Python's collector tracks
    probe('loader', "import gc\nfrom _pyodide._importhook import JsLoader\n" +
      "next(o.jsproxy for o in gc.get_objects() if isinstance(o, JsLoader) and hasattr(o.jsproxy, 'useNodeSockFS')).useNodeSockFS"),
  ].join('\n'));
  assert.equal(r.status, 'ok', JSON.stringify(r.error));
  assert.equal(lines(r).length, 12, r.stdout);
  for (const l of lines(r)) assert.match(l, / refused /, l);
}

test('Pyodide\'s own Python still works without the API: asyncio sleeps on its WebLoop', async () => {
  const r = await run(k, 'import asyncio\nawait asyncio.sleep(0.01)\nloop = asyncio.get_event_loop()\nprint(type(loop).__name__, "slept")');
  assert.equal(r.status, 'ok', JSON.stringify(r.error));
  assert.equal(r.stdout.trim(), 'WebLoop slept');
});

test('module loading is closed: import() and require() are refused in the kernel worker, even with code generation allowed', async () => {
  const r = await run(k, ['import js',
    'from pyodide.code import run_js',
    probe('import node:net', 'await run_js(\'import("node:net")\')'),
    probe('import node:tls', 'await run_js(\'import("node:tls")\')'),
    probe('import node:vm', 'await run_js(\'import("node:vm")\')'),
    probe('import data:', 'await run_js(\'import("data:text/javascript,export default 1")\')'),
    probe('import our file', 'await run_js(\'import("../core.js")\')'),
    probe('Function import', 'await js.Function(\'return import("node:child_process")\')()'),
    probe('require', 'run_js(\'require("node:net")\')'),
    `print('net', (await run_js('fetch("http://127.0.0.1:${port}/").then(() => "REACHED", (e) => "refused")')))`,
  ].join('\n'));
  assert.equal(r.status, 'ok', JSON.stringify(r.error));
  assert.equal(lines(r).length, 8, r.stdout);
  for (const l of lines(r)) assert.match(l, / ?refused/, l);
  assert.equal(hits, 0, 'the local server saw no request');
});

test('memory: the Python heap stops at the kernel\'s limit with MemoryError; JS buffers past it are refused; the kernel lives on', async () => {
  const r = await run(k, ['import js',
    probe('python heap', `b = bytearray(${MEMORY_MB + 64} * 1024 * 1024)`),
    probe('typed array', `a = js.Uint8Array.new(${MEMORY_MB + 64} * 1024 * 1024)`),
    probe('array buffer', `a = js.ArrayBuffer.new(${MEMORY_MB + 64} * 1024 * 1024)`),
    probe('via constructor', `a = js.Object.getPrototypeOf(js.Float64Array.new(1)).constructor.new(${MEMORY_MB} * 1024 * 128)`),
    probe('wasm memory', `a = js.WebAssembly.Memory.new(js.Object.fromEntries([['initial', ${(MEMORY_MB + 64) * 16}]]))`),
    probe('small ok', 'a = js.Uint8Array.new(1024 * 1024); b = bytearray(16 * 1024 * 1024)\nraise ValueError("fine")'),
  ].join('\n'));
  assert.equal(r.status, 'ok', JSON.stringify(r.error));
  const out = lines(r);
  assert.equal(out.length, 6, r.stdout);
  assert.equal(out[0], 'python heap refused MemoryError');
  for (const l of out.slice(1, 5)) assert.match(l, /refused JsException/, l);
  assert.equal(out[5], 'small ok refused ValueError');
  const next = await run(k, 'print("alive")');
  assert.equal(next.stdout, 'alive\n');
});

test('memory: pieces under 1 MiB add up: files in the in-memory /tmp stop with ENOSPC, arrays kept from Python and copies with RangeError; the kernel lives on', async () => {
  const r = await run(k, ['import js, os',
    probe('files', `for i in range(${MEMORY_MB * 2}):\n    open(f'/tmp/f{i}', 'wb').write(b'x' * 900_000)`),
    'for f in os.listdir("/tmp"):\n    os.remove("/tmp/" + f)',
    'keep = []',
    probe('arrays', `for i in range(${MEMORY_MB * 2}):\n    keep.append(js.Uint8Array.new(900_000))`),
    'keep = None',
    'a = js.Uint8Array.new(900_000)',
    'keep = []',
    probe('clones', `for i in range(${MEMORY_MB * 2}):\n    keep.append(js.structuredClone(a))`),
    'keep = None',
  ].join('\n'));
  assert.equal(r.status, 'ok', JSON.stringify(r.error));
  assert.deepEqual(lines(r), ['files refused OSError', 'arrays refused JsException', 'clones refused JsException']);
  const next = await run(k, 'print("alive")');
  assert.equal(next.stdout, 'alive\n');
});

test('memory: a kernel a run left over its limit (copies the guard does not see, kept from Python) is reported crashed with the out-of-memory note', async () => {
  const chunk = Math.floor(MEMORY_MB / 3);
  // A message's copy is made where it arrives, past every constructor: only the run's end sees it.
  const r = await run(k, ['import js, asyncio', `a = js.Uint8Array.new(${chunk} * 1024 * 1024)`,
    'ch = js.MessageChannel.new()', 'got = []', 'ch.port2.onmessage = lambda e: got.append(e.data)',
    'for _ in range(3):\n    ch.port1.postMessage(a)',
    'for _ in range(100):\n    if len(got) == 3:\n        break\n    await asyncio.sleep(0.05)',
    'ch.port2.close()', 'keep = [a, *got]', "print('kept', len(keep))"].join('\n'));
  assert.equal(r.status, 'crashed', JSON.stringify(r));
  assert.equal(r.error.type, 'MemoryError');
  assert.equal(r.error.message, `the sandbox ran out of memory (limit ${MEMORY_MB} MiB) and was restarted`);
  assert.match(r.notes.join('\n'), /ran out of memory .*it held \d+ MiB/);
  assert.equal(r.stdout, 'kept 4\n', 'what it printed is kept');
});
