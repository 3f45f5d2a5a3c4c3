// host.test.mjs -- the headless host's own rules, checked without Pyodide where the rule is the
// host's logic (worker/host/chat.js and kernels.js against a scripted orchestrator and scripted
// kernels: stalled downloads, LRU eviction, replayed events, reconnects with Last-Event-ID, cancel
// before start), and with the real processes where the rule is about them (a host without its
// sandbox refuses to run; server mode refuses to start hosts without bubblewrap unless trusted).
import { test, after } from 'node:test';
import { rmSync } from 'node:fs';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { ChatAttachment } from '../../worker/host/chat.js';
import { KernelSet } from '../../worker/host/kernels.js';
import { ROOT, tempDir, sleep } from './lib.mjs';
import { BIN } from '../integration/lib.mjs';

// ---- scripted kernels ------------------------------------------------------------------------
let kernelSeq = 0;
class FakeKernel {
  constructor() {
    this.n = ++kernelSeq;
    this.state = 'loading';
    this.listeners = new Set();
    this.mounted = new Map();
    this.vars = new Set();
    this.ready = Promise.resolve().then(() => { this.state = 'ready'; return {}; });
    this.runs = [];
  }
  onEvent(fn) { this.listeners.add(fn); return () => this.listeners.delete(fn); }
  async mount(files, { complete = true } = {}) {
    const written = [], kept = [];
    for (const f of files) (this.mounted.get(f.name) === f.sha256 ? kept : written).push(f.name);
    if (complete) for (const n of [...this.mounted.keys()]) if (!files.some((f) => f.name === n)) this.mounted.delete(n);
    for (const f of files) this.mounted.set(f.name, f.sha256);
    return { written, kept, removed: [], refused: [] };
  }
  async run(msg) {
    this.state = 'busy';
    this.runs.push(msg.code);
    for (const fn of this.listeners) fn({ event: 'started', ref: msg.run_id });
    const vars = [...this.vars];
    this.vars.add(msg.code);
    await sleep(5);
    this.state = 'ready';
    return { status: 'ok', stdout: `kernel ${this.n} saw ${vars.length} earlier runs; mounted ${[...this.mounted.keys()].sort().join(',')}`,
      stderr: '', files: [], notes: [], restarted: false, remounted: [] };
  }
  async cancel() { return 'idle'; }
  terminate() { this.state = 'dead'; }
}

// ---- a scripted orchestrator -----------------------------------------------------------------
class FakeOrch {
  constructor() {
    this.results = [];
    this.streams = [];
    this.files = new Map();   // url → bytes or 'stall'
    this.downloads = [];
    this.waiters = [];
  }
  emit(event, data, id) { this.streams.at(-1).onEvent({ id: String(id), event, data: JSON.stringify(data) }); }
  stream(path, opts) {
    return new Promise((resolve) => {
      this.streams.push({ path, ...opts, end: () => resolve(200) });
      opts.onOpen(200);
      opts.signal.addEventListener('abort', () => resolve(200));
    });
  }
  async request(method, path, { signal } = {}) {
    this.downloads.push(path);
    const f = this.files.get(path);
    if (f === 'stall') return new Promise((_, reject) => signal.addEventListener('abort', () => reject(new Error('aborted'))));
    return { status: 200, body: Buffer.from(f), headers: {} };
  }
  async json(method, path, body) {
    if (path.endsWith('/result')) { this.results.push({ path, body }); this.waiters.splice(0).forEach((w) => w()); }
    return { status: 200, data: {} };
  }
  nextResult() { const n = this.results.length; return new Promise((r) => { const check = () => (this.results.length > n ? r(this.results.at(-1)) : this.waiters.push(check)); check(); }); }
}

const runEvent = (id, attempt, mounts = [], extra = {}) => ({ run_id: id, attempt, code: `code ${id}`, timeout_s: 5, page_id: 'p1', mounts, ...extra });
const mount = (name, sha) => ({ name, file_id: sha, version: 1, sha256: sha, size: 3, url: `/v1/files/${sha}` });

test('a stalled download is skipped after the file wait with a note, and tried again on the next run', async () => {
  const orch = new FakeOrch();
  const kernels = new KernelSet({ makeClient: () => new FakeKernel(), max: 2 });
  const chat = new ChatAttachment('c1', orch, kernels, { pageId: 'p1', fileWaitMs: 300 });
  chat.open();
  orch.files.set('/v1/files/aaa', 'abc');
  orch.files.set('/v1/files/bbb', 'stall');
  const t0 = Date.now();
  let res = orch.nextResult();
  orch.emit('run', runEvent('r1', 1, [mount('a.txt', 'aaa'), mount('slow.txt', 'bbb')]), 1);
  let r = await res;
  assert.ok(Date.now() - t0 >= 290, 'waited for the stalled file');
  assert.ok(Date.now() - t0 < 2000, 'but no longer than the file wait');
  assert.equal(r.body.status, 'ok');
  assert.match(r.body.notes.join('\n'), /slow\.txt could not be downloaded within 0\.3 s; it was skipped and will be tried again on the next run/);
  assert.match(r.body.stdout, /mounted a\.txt$/);

  orch.files.set('/v1/files/bbb', 'xyz');
  res = orch.nextResult();
  orch.emit('run', runEvent('r2', 1, [mount('a.txt', 'aaa'), mount('slow.txt', 'bbb')]), 2);
  r = await res;
  assert.deepEqual(r.body.notes, []);
  assert.match(r.body.stdout, /mounted a\.txt,slow\.txt$/);
  assert.equal(orch.downloads.filter((d) => d === '/v1/files/aaa').length, 1, 'a file already fetched is not downloaded again');
  chat.close();
  kernels.dispose();
});

test('LRU eviction: at most N live kernels; the evicted chat\'s next run says restarted, with a note and the remounted files', async () => {
  const orch = new FakeOrch();
  const chats = {};
  const kernels = new KernelSet({ makeClient: () => new FakeKernel(), max: 1, onEvict: (id) => chats[id].forgetFiles() });
  const a = chats.A = new ChatAttachment('A', orch, kernels, { pageId: 'p1' });
  const b = chats.B = new ChatAttachment('B', orch, kernels, { pageId: 'p1' });
  orch.files.set('/v1/files/f1', 'one');
  a.open();
  let res = orch.nextResult();
  orch.emit('run', runEvent('a1', 1, [mount('f.txt', 'f1')]), 1);
  let r = await res;
  assert.equal(r.body.restarted, false);
  b.open();
  res = orch.nextResult();
  orch.emit('run', runEvent('b1', 1), 1);
  r = await res;
  assert.equal(kernels.live.size, 1);
  assert.ok(kernels.live.has('B') && !kernels.live.has('A'), 'A was evicted');
  res = orch.nextResult();
  orch.streams[0].onEvent({ id: '2', event: 'run', data: JSON.stringify(runEvent('a2', 1, [mount('f.txt', 'f1')])) });
  r = await res;
  assert.equal(r.body.restarted, true);
  assert.deepEqual(r.body.remounted, ['f.txt']);
  assert.match(r.body.notes.join('\n'), /restarted .*make room for other chats.*variables .* gone/);
  assert.match(r.body.stdout, /saw 0 earlier runs/);
  assert.equal(orch.downloads.filter((d) => d === '/v1/files/f1').length, 2, 'an evicted chat\'s bytes were dropped and fetched again');
  a.close(); b.close(); kernels.dispose();
});

test('LRU eviction never stops running code: with every kernel busy the set goes over its bound', async () => {
  const kernels = new KernelSet({ makeClient: () => new FakeKernel(), max: 1 });
  const { kernel: a } = await kernels.acquire('A');
  a.state = 'busy';
  const { kernel: b } = await kernels.acquire('B');
  assert.notEqual(a.state, 'dead', 'the busy kernel was left alone');
  assert.equal(kernels.live.size, 2);
  a.state = 'ready';
  await kernels.acquire('C');
  assert.equal(a.state, 'dead', 'once idle, the least recently used go, down to the bound');
  assert.equal(b.state, 'dead');
  assert.deepEqual([...kernels.live.keys()], ['C']);
  assert.deepEqual([...kernels.evicted].sort(), ['A', 'B']);
  kernels.dispose();
});

test('a chat attached again after the orchestrator detached it (idle) says restarted on its next run', async () => {
  const orch = new FakeOrch();
  const kernels = new KernelSet({ makeClient: () => new FakeKernel(), max: 2 });
  const chat = new ChatAttachment('D', orch, kernels, { pageId: 'p1', hadKernel: true });
  chat.open();
  const res = orch.nextResult();
  orch.emit('run', runEvent('d1', 1), 1);
  const r = await res;
  assert.equal(r.body.restarted, true);
  assert.match(r.body.notes.join('\n'), /variables from earlier runs are gone/);
  chat.close(); kernels.dispose();
});

test('a replayed run event is not run twice; a reconnect carries Last-Event-ID and the same page id', async () => {
  const orch = new FakeOrch();
  const kernels = new KernelSet({ makeClient: () => new FakeKernel(), max: 2 });
  const chat = new ChatAttachment('c2', orch, kernels, { pageId: 'page-7' });
  chat.open();
  const res = orch.nextResult();
  orch.emit('run', runEvent('r1', 1, [], { page_id: 'page-7' }), 41);
  await res;
  orch.streams[0].end();
  for (let i = 0; i < 50 && orch.streams.length < 2; i++) await sleep(20);
  assert.equal(orch.streams.length, 2, 'reconnected');
  assert.equal(orch.streams[1].lastEventId, '41');
  assert.match(orch.streams[1].path, /page_id=page-7/);
  orch.emit('run', runEvent('r1', 1, [], { page_id: 'page-7' }), 41);   // replayed
  orch.emit('run', runEvent('r1', 2, [], { page_id: 'other' }), 42);    // another page's attempt
  await sleep(100);
  assert.equal(orch.results.length, 1, 'neither ran');
  chat.close(); kernels.dispose();
});

test('a run cancelled while its files download never runs and is reported cancelled', async () => {
  const orch = new FakeOrch();
  const kernels = new KernelSet({ makeClient: () => new FakeKernel(), max: 2 });
  const chat = new ChatAttachment('c3', orch, kernels, { pageId: 'p1', fileWaitMs: 400 });
  chat.open();
  orch.files.set('/v1/files/s', 'stall');
  const res = orch.nextResult();
  orch.emit('run', runEvent('r1', 1, [mount('s.txt', 's')]), 1);
  await sleep(50);
  orch.emit('cancel', { run_id: 'r1' }, 2);
  const r = await res;
  assert.equal(r.body.status, 'cancelled');
  assert.equal(kernels.live.size, 0, 'no kernel was taken for it');
  chat.close(); kernels.dispose();
});

test('a kernel that cannot load: the run is reported crashed at once, not left to the watchdog', async () => {
  const orch = new FakeOrch();
  const broken = () => { const k = new FakeKernel(); k.ready = Promise.reject(new Error('Pyodide did not load')); k.ready.catch(() => {}); return k; };
  const kernels = new KernelSet({ makeClient: broken, max: 2 });
  const chat = new ChatAttachment('c4', orch, kernels, { pageId: 'p1' });
  chat.open();
  const res = orch.nextResult();
  orch.emit('run', runEvent('r1', 1), 1);
  const r = await res;
  assert.equal(r.body.status, 'crashed');
  assert.match(r.body.error.message, /could not start: Pyodide did not load/);
  chat.close(); kernels.dispose();
});

function runProc(cmd, args, env, timeoutMs = 20000) {
  return new Promise((resolve) => {
    const p = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ['pipe', 'pipe', 'pipe'], cwd: ROOT });
    let out = '';
    p.stdout.on('data', (d) => { out += d; });
    p.stderr.on('data', (d) => { out += d; });
    const t = setTimeout(() => process.kill(p.pid, 'SIGKILL'), timeoutMs);
    p.on('exit', (code) => { clearTimeout(t); resolve({ code, out }); });
  });
}

test('a host without its sandbox refuses to run untrusted code (exit 3, saying what is missing)', async () => {
  const r = await runProc('node', [join(ROOT, 'worker/headless-host.js'), '--orchestrator', 'unix:/nonexistent.sock'], { CEREA_SERVER_TRUSTED: '0' });
  assert.equal(r.code, 3, r.out);
  assert.match(r.out, /refusing to run untrusted code without a sandbox/);
  assert.match(r.out, /disallow-code-generation-from-strings/);
  assert.match(r.out, /permission model is off/);
});

test('the same host with the Node flags but no network namespace still refuses', async (t) => {
  const os = await import('node:os');
  if (!Object.values(os.networkInterfaces()).flat().some((a) => !a.internal)) {
    t.skip('this machine has no interface but loopback: a missing namespace cannot be told from inside');
    return;
  }
  const r = await runProc('node', ['--disallow-code-generation-from-strings', '--experimental-permission', '--allow-worker',
    `--allow-fs-read=${ROOT}/worker`, `--allow-fs-read=${ROOT}/kernel`, join(ROOT, 'worker/headless-host.js'),
    '--orchestrator', 'unix:/nonexistent.sock'], { CEREA_SERVER_TRUSTED: '0' });
  assert.equal(r.code, 3, r.out);
  assert.match(r.out, /network namespace/);
  assert.doesNotMatch(r.out, /permission model is off|code generation from strings is allowed/);
});

test('server mode refuses to start hosts without bubblewrap unless CEREA_SERVER_TRUSTED=1', async () => {
  const dir = tempDir('fs-nobwrap');
  after(() => rmSync(dir, { recursive: true, force: true }));
  const env = { CHAT_CODE_EXECUTION: 'server', CEREA_BWRAP: '/nonexistent/bwrap', CEREA_API_KEY: 'k-0123456789abcdef0123' };
  const r = await runProc(BIN, ['serve', '--listen', '127.0.0.1:0', '--data', dir], env);
  assert.equal(r.code, 1, r.out);
  assert.match(r.out, /refuses to start kernel hosts without bubblewrap.*CEREA_SERVER_TRUSTED=1/);
  // Trusted: it starts (and is stopped by pid once listening).
  const p = spawn(BIN, ['serve', '--listen', '127.0.0.1:0', '--data', dir], { env: { ...process.env, ...env, CEREA_SERVER_TRUSTED: '1', CEREA_LOG: 'info' }, stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  p.stderr.on('data', (d) => { log += d; });
  for (let i = 0; i < 200 && !/host 0 started/.test(log); i++) await sleep(50);
  assert.match(log, /host 0 started \(pid \d+, TRUSTED: no bubblewrap\)/);
  const exited = new Promise((res) => p.on('exit', (code) => res(code)));
  process.kill(p.pid, 'SIGTERM');
  assert.equal(await exited, 0);
});
