// lockdown.test.mjs -- "Network: none: no fetch, sockets, WebSockets or storage APIs, including
// through pyfetch, micropip or the js bridge".  Probes from Python against a real kernel, with a
// local HTTP server that counts what reaches it (must be nothing), plus the guarded fetch and the
// prototype-chain removal checked on a stand-in global scope shaped like a browser worker's
// (fetch, indexedDB, caches on the prototype, as in Chromium's WorkerGlobalScope).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { newNodeKernel, run, EXPECTED_START } from './helpers.mjs';
import { KernelCore, BLOCKED_GLOBALS } from '../../worker/core.js';

let k, info, server, port, hits = 0;
before(async () => {
  server = http.createServer((req, res) => { hits++; res.end('leak'); });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  port = server.address().port;
  k = newNodeKernel(); info = await k.ready;
});

test(`the kernel started on the path this run holds to the probes (${EXPECTED_START === 'served' ? 'restored from the served snapshot' : 'loaded'}), its lock-down complete`, () => {
  assert.equal(info.snapshot, EXPECTED_START);
  assert.deepEqual(info.lockdown, []);
});
after(() => { k && k.terminate('cancelled'); server && server.close(); });

const probe = (label, code) => `
try:
${code.split('\n').map((l) => '    ' + l).join('\n')}
    print(${JSON.stringify(label)}, 'REACHED')
except BaseException as e:
    print(${JSON.stringify(label)}, 'refused', type(e).__name__)
`;

test('modules costly to import are patched when first imported, not at start; also after a reload; a failing patch fails the import', async () => {
  const r = await run(k, `import sys, importlib
print([m for m in ("pyodide.http", "urllib.request") if m in sys.modules])
import urllib.request, pyodide.http
from cerea_kernel.lockdown import _refuse, _PatchOnImport
print(urllib.request.urlopen is _refuse, pyodide.http.open_url is _refuse)
importlib.reload(urllib.request)
print(urllib.request.urlopen is _refuse)
def bad(m):
    raise RuntimeError("no")
sys.meta_path.insert(0, _PatchOnImport({"colorsys": ("colorsys", bad)}))
try:
    import colorsys
    print("imported")
except ImportError as e:
    print("ImportError", "colorsys" not in sys.modules)
finally:
    sys.meta_path.pop(0)`);
  assert.equal(r.status, 'ok', JSON.stringify(r.error));
  assert.equal(r.stdout, '[]\nTrue True\nTrue\nImportError True\n');
});

test('Python reaches no network: js.fetch, pyfetch, XHR, WebSocket, socket, urllib, open_url, EventSource', async () => {
  const url = `http://127.0.0.1:${port}/x`;
  const code = ['import js, pyodide.http, socket, urllib.request',
    probe('js.fetch', `await js.fetch(${JSON.stringify(url)})`),
    probe('pyfetch', `await pyodide.http.pyfetch(${JSON.stringify(url)})`),
    probe('xhr', 'x = js.XMLHttpRequest.new()\nx.open("GET", ' + JSON.stringify(url) + ', False)\nx.send()'),
    probe('websocket', `js.WebSocket.new(${JSON.stringify(`ws://127.0.0.1:${port}/`)})`),
    probe('socket', `socket.create_connection(("127.0.0.1", ${port}))`),
    probe('rawsocket', `s = socket.socket()\ns.connect(("127.0.0.1", ${port}))`),
    probe('urllib', `urllib.request.urlopen(${JSON.stringify(url)})`),
    probe('open_url', `pyodide.http.open_url(${JSON.stringify(url)})`),
    probe('eventsource', `js.EventSource.new(${JSON.stringify(url)})`),
    probe('fetch-proto', `await js.Object.getPrototypeOf(js.globalThis).fetch(${JSON.stringify(url)})`),
  ].join('\n');
  const r = await run(k, code, { pypi: false });
  assert.equal(r.status, 'ok', JSON.stringify(r.error));
  const lines = r.stdout.trim().split('\n');
  assert.equal(lines.length, 10, r.stdout);
  for (const l of lines) assert.match(l, /refused/, l);
  assert.equal(hits, 0, 'the server saw no request');
});

test('a refused socket reads plainly: PermissionError without an errno number in its text, errno EACCES for code that checks', async () => {
  const r = await run(k, 'import errno, socket\ntry:\n    socket.create_connection(("127.0.0.1", 9))\nexcept PermissionError as e:\n    print(str(e))\n    print(e.errno == errno.EACCES)\nsocket.getaddrinfo("example.com", 80)');
  assert.equal(r.stdout, 'network access is disabled in this sandbox\nTrue\n');
  assert.equal(r.error.type, 'PermissionError');
  assert.equal(r.error.message, 'network access is disabled in this sandbox');
  assert.doesNotMatch(r.error.traceback, /Errno/);
});

test('no storage or worker APIs from Python: importScripts, indexedDB, caches, BroadcastChannel, Worker', async () => {
  const names = ['importScripts', 'indexedDB', 'caches', 'BroadcastChannel', 'Worker', 'XMLHttpRequest', 'WebSocket'];
  const r = await run(k, `import js\nprint([n for n in ${JSON.stringify(names)} if getattr(js, n, None) is not None])`);
  assert.equal(r.stdout, '[]\n');
});

test('"pure-Python installs from PyPI when allowed": even with pypi on, only the PyPI hosts are allowed, never other hosts', async () => {
  const r = await run(k, `import js\ntry:\n    await js.fetch("http://127.0.0.1:${port}/y")\n    print("REACHED")\nexcept Exception as e:\n    print("refused")`, { pypi: true });
  assert.equal(r.stdout, 'refused\n');
  assert.equal(hits, 0);
});

// A stand-in for a browser worker's global scope: the APIs live on the prototype chain.
function fakeScope(realFetch) {
  class EventTargetLike {}
  class WorkerGlobalScopeLike extends EventTargetLike {}
  for (const n of ['fetch', 'importScripts', 'indexedDB', 'caches', 'XMLHttpRequest', 'WebSocket'])
    Object.defineProperty(WorkerGlobalScopeLike.prototype, n, { value: n === 'fetch' ? realFetch : () => 'live', configurable: true, writable: true });
  const scope = new WorkerGlobalScopeLike();
  scope.BroadcastChannel = function () {};
  scope.navigator = Object.create({ storage: {}, sendBeacon: () => true });
  return scope;
}

test('lock-down removes the APIs along the prototype chain and pins a guarded fetch non-configurable', async () => {
  const seen = [];
  const scope = fakeScope(async (u, init) => { seen.push([u, init]); return 'response'; });
  const core = new KernelCore({ scope, post() {}, isNode: false });
  core.allowedPrefixes = ['https://app.example/pyodide/'];
  core.lockDown();
  assert.deepEqual(core.lockdownReport, []);
  for (const n of ['importScripts', 'indexedDB', 'caches', 'XMLHttpRequest', 'WebSocket', 'BroadcastChannel'])
    assert.equal(scope[n], undefined, n);
  assert.ok(BLOCKED_GLOBALS.includes('EventSource'));
  assert.equal(scope.navigator.storage, undefined);
  assert.equal(scope.navigator.sendBeacon, undefined);
  const d = Object.getOwnPropertyDescriptor(scope, 'fetch');
  assert.equal(d.configurable, false);
  assert.equal(d.writable, false);
  assert.throws(() => { 'use strict'; scope.fetch = () => 'mine'; });
  assert.equal(Object.getPrototypeOf(scope).fetch, undefined, 'the prototype\'s fetch is gone too');
  // allowed: the package path, sent without credentials and refusing redirects
  assert.equal(await scope.fetch('https://app.example/pyodide/wheels/a.whl'), 'response');
  assert.equal(seen[0][1].credentials, 'omit');
  assert.equal(seen[0][1].redirect, 'error');
  // refused: the app's own API, other hosts, path tricks, PyPI while not allowed
  for (const u of ['https://app.example/v1/chats', 'https://evil.example/', 'https://app.example/pyodide/../v1/x',
    'https://app.example/pyodide/%2e%2e/v1', 'https://pypi.org/simple/x/'])
    await assert.rejects(scope.fetch(u), /refused/, u);
  core.pypiAllowed = true;
  assert.equal(await scope.fetch('https://files.pythonhosted.org/packages/x.whl'), 'response');
  await assert.rejects(scope.fetch('https://pypi.org.evil.example/'), /refused/);
  assert.equal(seen.length, 2);
});

test('Python cannot post to the controller (no forged replies): postMessage is gone from the scope', async () => {
  const r = await run(k, 'import js\nprint(getattr(js, "postMessage", None) is None)');
  assert.equal(r.stdout, 'True\n');
});
