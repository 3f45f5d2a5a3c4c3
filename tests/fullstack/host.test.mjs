// host.test.mjs -- the headless host's own rules, checked without Pyodide where the rule is the
// code's logic (worker/session.js's PageSession and worker/supervisor.js's KernelSupervisor over
// worker/pool.js, against a scripted orchestrator client and scripted kernels, both named test
// doubles: stalled downloads, LRU eviction, replayed events, reconnects with Last-Event-ID, cancel
// before start, superseded attempts, stale attempts, restart, presence, the heartbeat, live
// output posted and resumed from the orchestrator's figures, input answered from the stream),
// and with the real
// processes where the rule is about them (a host without its sandbox refuses to run; server mode
// refuses to start hosts without bubblewrap unless trusted).
import { test, after } from 'node:test';
import { rmSync } from 'node:fs';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { PageSession } from '../../worker/session.js';
import { KernelSupervisor } from '../../worker/supervisor.js';
import { KernelPool } from '../../worker/pool.js';
import { KernelClient } from '../../worker/kernel-client.js';
import { EventEmitter } from 'node:events';
import { ERROR, NOTE } from '../../worker/notes.js';
import { FakeKernel } from '../kernel/doubles.mjs';
import { ROOT, tempDir, sleep } from './lib.mjs';
import { BIN } from '../integration/lib.mjs';

// ---- a scripted orchestrator (a test double of worker/host/http.js's client) -----------------
class FakeOrch {
  constructor() {
    this.results = [];
    this.calls = [];
    this.streams = [];
    this.files = new Map();   // url → bytes or 'stall'
    this.downloads = [];
    this.waiters = [];
    this.startedStatus = 200;
    this.outputs = [];            // bodies of POST .../output, in order
    this.held = new Map();        // run → {stdout, stderr, displays}: what a real orchestrator holds
    this.outputAnswer = null;     // (body, held) → {status, data} to script an answer
    this.inflight = 0;
    this.overlapped = false;
  }
  // The contract's rule (docs/api.md, POST /v1/runs/{run}/output): a chunk at or before the held
  // length is taken from there on; one after it (a gap) is not; the answer is what is held.
  output(path, body) {
    const run = path.split('/')[3];
    const h = this.held.get(run) || { stdout: '', stderr: '', displays: [] };
    this.held.set(run, h);
    for (const c of body.chunks || []) if (c.offset <= h[c.stream].length) h[c.stream] += c.text.slice(h[c.stream].length - c.offset);
    for (const d of body.displays || []) if (d.index === h.displays.length) h.displays.push(d.data);
    return { status: 200, data: { stdout: h.stdout.length, stderr: h.stderr.length, displays: h.displays.length } };
  }
  emit(event, data, id) { this.streams.at(-1).onText(`id: ${id}\nevent: ${event}\ndata: ${JSON.stringify(data)}\n\n`); }
  connect(opts) {
    return new Promise((resolve, reject) => {
      this.streams.push({ ...opts, end: () => resolve(200) });
      opts.onOpen(200);
      opts.signal.addEventListener('abort', () => reject(new Error('aborted')));
    });
  }
  async download(path, { signal } = {}) {
    this.downloads.push(path);
    const f = this.files.get(path);
    if (f === 'stall') return new Promise((_, reject) => signal.addEventListener('abort', () => reject(new Error('aborted'))));
    return { status: 200, bytes: new Uint8Array(Buffer.from(f)) };
  }
  async upload(path) { this.calls.push(['PUT', path]); return { status: 201, data: {} }; }
  async json(method, path, body) {
    this.calls.push([method, path, body]);
    if (path.endsWith('/started')) return { status: this.startedStatus, data: {} };
    if (path.endsWith('/output')) {
      if (this.inflight++) this.overlapped = true;
      await sleep(5);
      this.inflight--;
      this.outputs.push(body);
      return this.outputAnswer ? this.outputAnswer(body, () => this.output(path, body)) : this.output(path, body);
    }
    if (path.endsWith('/result')) { this.results.push({ path, body }); this.waiters.splice(0).forEach((w) => w()); }
    return { status: 200, data: {} };
  }
  nextResult() { const n = this.results.length; return new Promise((r) => { const check = () => (this.results.length > n ? r(this.results.at(-1)) : this.waiters.push(check)); check(); }); }
}

const runEvent = (id, attempt, mounts = [], extra = {}) => ({ run_id: id, attempt, code: `code ${id}`, timeout_s: 5, page_id: 'p1', mounts, heartbeat_ms: 2000, ...extra });
const mount = (name, sha) => ({ name, file_id: sha, version: 1, sha256: sha, size: 3, url: `/v1/files/${sha}` });
const fakePool = (max = 2, make = () => new FakeKernel()) => new KernelPool({ makeKernel: make, max, spareDelayMs: 0 });
// A chat attached as the headless host attaches it (no sha256 re-check: the fake bytes have none).
function attach(orch, pool, chatId, { pageId = 'p1', lost = null, ...opts } = {}) {
  const supervisor = new KernelSupervisor({ pool, id: chatId, cancelGraceMs: 100, lost });
  const session = new PageSession({ chatId, pageId, client: orch, supervisor, verifyFiles: false, ...opts });
  session.attach();
  return { session, supervisor, close() { session.detach(); supervisor.dispose(); } };
}

test('a stalled download is skipped after the file wait with a note, and tried again on the next run', async () => {
  const orch = new FakeOrch();
  const pool = fakePool();
  const chat = attach(orch, pool, 'c1', { fileDeadlineMs: 300 });
  orch.files.set('/v1/files/aaa', 'abc');
  orch.files.set('/v1/files/bbb', 'stall');
  const t0 = Date.now();
  let res = orch.nextResult();
  orch.emit('run', runEvent('r1', 1, [mount('a.txt', 'aaa'), mount('slow.txt', 'bbb')]), 1);
  let r = await res;
  assert.ok(Date.now() - t0 >= 290, 'waited for the stalled file');
  assert.ok(Date.now() - t0 < 2000, 'but no longer than the file wait');
  assert.equal(r.body.status, 'ok');
  assert.deepEqual(r.body.notes, [NOTE.skipped('slow.txt', 'deadline', 300)]);
  assert.match(r.body.notes[0], /^slow\.txt: download did not finish within 0\.3 s; skipped for this run, tried again on the next\.$/);
  assert.match(r.body.stdout, /mounted a\.txt$/);

  orch.files.set('/v1/files/bbb', 'xyz');
  res = orch.nextResult();
  orch.emit('run', runEvent('r2', 1, [mount('a.txt', 'aaa'), mount('slow.txt', 'bbb')]), 2);
  r = await res;
  assert.deepEqual(r.body.notes, []);
  assert.match(r.body.stdout, /mounted a\.txt,slow\.txt$/);
  assert.equal(orch.downloads.filter((d) => d === '/v1/files/aaa').length, 1, 'a file already fetched is not downloaded again');
  chat.close(); pool.dispose();
});

test('LRU eviction: at most N live kernels; the evicted chat\'s next run says restarted, with a note and the remounted files', async () => {
  const orch = new FakeOrch();
  const pool = fakePool(1);
  orch.files.set('/v1/files/f1', 'one');
  const a = attach(orch, pool, 'A');
  let res = orch.nextResult();
  orch.emit('run', runEvent('a1', 1, [mount('f.txt', 'f1')]), 1);
  let r = await res;
  assert.equal(r.body.restarted, false);
  const b = attach(orch, pool, 'B');
  res = orch.nextResult();
  orch.emit('run', runEvent('b1', 1), 1);
  r = await res;
  assert.equal(pool.live.size, 1);
  assert.ok(pool.live.has(b.supervisor) && !pool.live.has(a.supervisor), 'A was evicted');
  assert.equal(a.supervisor.state, 'idle');
  res = orch.nextResult();
  orch.streams[0].onText(`id: 2\nevent: run\ndata: ${JSON.stringify(runEvent('a2', 1, [mount('f.txt', 'f1')]))}\n\n`);
  r = await res;
  assert.equal(r.body.restarted, true);
  assert.deepEqual(r.body.remounted, ['f.txt']);
  assert.deepEqual(r.body.notes, [NOTE.evicted()]);
  assert.match(r.body.stdout, /saw 0 earlier runs/);
  assert.equal(orch.downloads.filter((d) => d === '/v1/files/f1').length, 2, 'an evicted chat\'s bytes were dropped and fetched again');
  a.close(); b.close(); pool.dispose();
});

test('LRU eviction never stops running code: with every kernel busy the pool goes over its bound', async () => {
  const pool = fakePool(1);
  const owner = (id) => ({ id, busy: false, n: 0, evictable() { return !this.busy; }, evicted() { this.n++; } });
  const A = owner('A'), B = owner('B'), C = owner('C');
  const a = await pool.take(A);
  A.busy = true; a.state = 'busy';
  const b = await pool.take(B);
  assert.notEqual(a.state, 'dead', 'the busy kernel was left alone');
  assert.equal(pool.live.size, 2);
  A.busy = false; a.state = 'ready';
  await pool.take(C);
  assert.equal(a.state, 'dead', 'once idle, the least recently used go, down to the bound');
  assert.equal(b.state, 'dead');
  assert.deepEqual([...pool.live.keys()], [C]);
  assert.deepEqual([A.n, B.n, C.n], [1, 1, 0]);
  pool.dispose();
});

test('a chat attached again after the orchestrator detached it (idle) says restarted on its next run', async () => {
  const orch = new FakeOrch();
  const pool = fakePool();
  const chat = attach(orch, pool, 'D', { lost: 'detached' });
  const res = orch.nextResult();
  orch.emit('run', runEvent('d1', 1), 1);
  const r = await res;
  assert.equal(r.body.restarted, true);
  assert.deepEqual(r.body.notes, [NOTE.detached()]);
  chat.close(); pool.dispose();
});

test('a replayed run event is not run twice; a reconnect carries Last-Event-ID and the same page id; presence waits for the stream', async () => {
  const orch = new FakeOrch();
  const pool = fakePool();
  const chat = attach(orch, pool, 'c2', { pageId: 'page-7', initialBackoffMs: 20 });
  const res = orch.nextResult();
  orch.emit('run', runEvent('r1', 1, [], { page_id: 'page-7' }), 41);
  await res;
  orch.streams[0].end();
  for (let i = 0; i < 50 && orch.streams.length < 2; i++) await sleep(20);
  assert.equal(orch.streams.length, 2, 'reconnected');
  assert.equal(orch.streams[1].lastEventId, '41');
  assert.match(orch.streams[1].path, /page_id=page-7&visible=1$/);
  orch.emit('run', runEvent('r1', 1, [], { page_id: 'page-7' }), 41);   // replayed
  orch.emit('run', runEvent('r1', 2, [], { page_id: 'other' }), 42);    // another page's attempt
  await sleep(100);
  assert.equal(orch.results.length, 1, 'neither ran');
  const presence = orch.calls.filter(([, p]) => p.endsWith('/presence'));
  assert.ok(presence.length >= 2, 'presence sent on each open stream');
  assert.deepEqual(presence[0][2], { page_id: 'page-7', visible: true, kernel: 'loading' });
  chat.close(); pool.dispose();
});

test('a run cancelled while its files download never runs and is reported cancelled', async () => {
  const orch = new FakeOrch();
  const pool = fakePool();
  const chat = attach(orch, pool, 'c3', { fileDeadlineMs: 400 });
  orch.files.set('/v1/files/s', 'stall');
  const res = orch.nextResult();
  const t0 = Date.now();
  orch.emit('run', runEvent('r1', 1, [mount('s.txt', 's')]), 1);
  await sleep(50);
  orch.emit('cancel', { run_id: 'r1' }, 2);
  const r = await res;
  assert.ok(Date.now() - t0 < 300, 'the downloads stopped at the cancel, not at the deadline');
  assert.equal(r.body.status, 'cancelled');
  assert.equal(r.body.notes.at(-1), NOTE.cancelledBeforeStart());
  assert.equal(pool.live.size, 0, 'no kernel was taken for it');
  chat.close(); pool.dispose();
});

test('a cancel that comes while the kernel still loads is applied once the run starts (interrupt: kept)', async () => {
  const orch = new FakeOrch();
  const slow = () => { const k = new FakeKernel(); k.ready = sleep(150).then(() => { k.state = 'ready'; return {}; }); return k; };
  const pool = fakePool(2, slow);
  const chat = attach(orch, pool, 'c7');
  const res = orch.nextResult();
  orch.emit('run', runEvent('r1', 1, [], { code: 'hang' }), 1);
  await sleep(30);
  assert.equal(chat.supervisor.state, 'loading');
  orch.emit('cancel', { run_id: 'r1' }, 2);
  const r = await res;
  assert.equal(r.body.status, 'cancelled');
  assert.equal(r.body.restarted, false);
  assert.deepEqual(r.body.notes, [NOTE.cancelKept()]);
  chat.close(); pool.dispose();
});

test('a kernel that cannot load: the run is reported crashed at once, not left to the watchdog', async () => {
  const orch = new FakeOrch();
  const broken = () => { const k = new FakeKernel(); k.ready = Promise.reject(new Error('Pyodide did not load')); k.ready.catch(() => {}); return k; };
  const pool = fakePool(2, broken);
  const chat = attach(orch, pool, 'c4');
  const res = orch.nextResult();
  orch.emit('run', runEvent('r1', 1), 1);
  const r = await res;
  assert.equal(r.body.status, 'crashed');
  assert.deepEqual(r.body.error, { type: 'KernelCrashed', message: 'The sandbox could not start: Pyodide did not load', traceback: '' });
  chat.close(); pool.dispose();
});

test('a newer attempt supersedes the running one: it is stopped before the next starts, and only the new one is posted', async () => {
  const orch = new FakeOrch();
  const pool = fakePool();
  const chat = attach(orch, pool, 'c5');
  const order = [];
  chat.session.on('stale', (e) => order.push(`stale ${e.attempt}`));
  chat.session.on('begin', (e) => order.push(`begin ${e.attempt}`));
  chat.session.on('end', (e) => order.push(`end ${e.attempt}`));
  orch.emit('run', runEvent('r1', 1, [], { code: 'sleep' }), 1);   // not interruptible: replaced past the grace
  await new Promise((r) => chat.supervisor.once('executing', r));
  const k1 = chat.supervisor.kernel;
  const res = orch.nextResult();
  const ended = new Promise((done) => chat.session.on('end', (e) => e.attempt === 2 && done()));
  orch.emit('run', runEvent('r1', 2), 2);
  const r = await res;
  await ended;
  assert.equal(r.body.attempt, 2);
  assert.equal(orch.results.length, 1, 'the superseded attempt posted nothing');
  assert.deepEqual(order, ['begin 1', 'stale 1', 'end 1', 'begin 2', 'end 2']);
  assert.equal(k1.state, 'dead', 'its kernel did not stop within the grace: replaced');
  assert.equal(r.body.restarted, true, 'the fresh kernel lost the namespace: the new attempt says so');
  assert.deepEqual(r.body.notes, [NOTE.restartedForStale()]);
  chat.close(); pool.dispose();
});

test('a 409 on started: the stale attempt is stopped and nothing is posted; `restart` replaces the kernel and posts nothing', async () => {
  const orch = new FakeOrch();
  const pool = fakePool();
  const chat = attach(orch, pool, 'c6');
  orch.startedStatus = 409;
  const stale = new Promise((r) => chat.session.once('stale', r));
  orch.emit('run', runEvent('r1', 1, [], { code: 'hang' }), 1);
  assert.match((await stale).why, /started: HTTP 409/);
  await new Promise((r) => chat.session.once('end', r));
  assert.equal(orch.results.length, 0);
  orch.startedStatus = 200;
  orch.emit('run', runEvent('r2', 1, [], { code: 'sleep' }), 2);
  await new Promise((r) => chat.supervisor.once('executing', r));
  const k = chat.supervisor.kernel;
  const ended = new Promise((r) => chat.session.once('end', r));
  orch.emit('restart', { run_id: 'r2', page_id: 'p1' }, 3);
  await ended;
  assert.equal(k.state, 'dead', 'replaced at once');
  assert.equal(orch.results.length, 0, 'the orchestrator settled it: nothing posted');
  chat.close(); pool.dispose();
});

// ---- the live run and the page's liveness -----------------------------------------------------
const presences = (orch) => orch.calls.filter(([, p]) => p.endsWith('/presence')).map(([, , b]) => b);

test('live output: the chunks reach POST /v1/runs/{run}/output in order, one call in flight, none after the result', async () => {
  const orch = new FakeOrch();
  const pool = fakePool();
  const chat = attach(orch, pool, 'L1');
  const res = orch.nextResult();
  orch.emit('run', runEvent('r1', 1, [], { code: 'stream' }), 1);
  const r = await res;
  assert.equal(r.body.stdout, 'one\ntwo\nthree\n');
  const held = orch.held.get('r1').stdout;
  assert.ok(held.length >= 4 && r.body.stdout.startsWith(held), `held ${JSON.stringify(held)} (the result carries the rest)`);
  assert.ok(orch.outputs.length >= 1 && orch.outputs.length <= 3, `${orch.outputs.length} calls`);
  assert.ok(orch.outputs.every((b) => b.attempt === 1));
  assert.equal(orch.overlapped, false, 'never two calls in flight');
  const order = orch.calls.map(([, p]) => p.split('/').pop());
  assert.ok(order.lastIndexOf('output') < order.indexOf('result'), 'no output call after the result');
  chat.close(); pool.dispose();
});

test('live output: a repeated chunk (an answer lost after the orchestrator took the call) is not doubled; after a gap the page resends from the orchestrator\'s figure', async () => {
  const orch = new FakeOrch();
  let n = 0;
  orch.outputAnswer = (body, take) => {
    n++;
    if (n === 1) { take(); throw new Error('connection reset'); }   // taken, answer lost: resent as is
    if (n === 3) orch.held.get('r1').stdout = '';                    // the orchestrator lost what it held
    return take();
  };
  const pool = fakePool();
  const chat = attach(orch, pool, 'L2');
  const res = orch.nextResult();
  orch.emit('run', runEvent('r1', 1, [], { code: 'stream-slow' }), 1);
  await res;
  const offsets = orch.outputs.map((b) => (b.chunks || []).map((c) => c.offset).join(','));
  assert.equal(offsets[1], '0', 'after a lost answer, the same chunk again');
  assert.equal(orch.outputs.at(-1).chunks[0].offset, 0, 'after the gap, from the orchestrator\'s figure');
  assert.equal(orch.held.get('r1').stdout, 'one\ntwo\nthree\n'.slice(0, orch.held.get('r1').stdout.length));
  assert.ok(!/one\none/.test(orch.held.get('r1').stdout), 'nothing doubled');
  chat.close(); pool.dispose();
});

test('live output: a 409 stops the attempt (nothing more posted, no result); a 404 only stops the streaming; an orchestrator that sends no heartbeat_ms gets no output calls', async () => {
  const orch = new FakeOrch();
  orch.outputAnswer = () => ({ status: 409, data: { error: { code: 'stale_attempt' } } });
  const pool = fakePool();
  const chat = attach(orch, pool, 'L3');
  const stale = new Promise((r) => chat.session.once('stale', r));
  orch.emit('run', runEvent('r1', 1, [], { code: 'print-hang' }), 1);
  assert.match((await stale).why, /output: HTTP 409/);
  await new Promise((r) => chat.session.once('end', r));
  assert.equal(orch.results.length, 0);
  assert.equal(orch.outputs.length, 1);
  orch.outputAnswer = () => ({ status: 404, data: null });
  const res = orch.nextResult();
  orch.emit('run', runEvent('r2', 1, [], { code: 'stream' }), 2);
  const r = await res;
  assert.equal(r.body.stdout, 'one\ntwo\nthree\n', 'the result carries it all');
  assert.equal(orch.outputs.filter((b) => b).length, 2, 'one call for r2, then no more');
  const old = orch.nextResult();
  const ev = runEvent('r3', 1, [], { code: 'stream' });
  delete ev.heartbeat_ms;
  orch.emit('run', ev, 3);
  assert.equal((await old).body.stdout, 'one\ntwo\nthree\n');
  assert.equal(orch.outputs.length, 2, 'no call for r3');
  chat.close(); pool.dispose();
});

test('every ending keeps what was printed: a cancel the kernel does not honour posts the output received before it was replaced', async () => {
  const orch = new FakeOrch();
  const pool = fakePool();
  const chat = attach(orch, pool, 'L4');
  const res = orch.nextResult();
  orch.emit('run', runEvent('r1', 1, [], { code: 'print-hang' }), 1);
  await new Promise((r) => chat.supervisor.once('output', r));
  orch.emit('cancel', { run_id: 'r1' }, 2);
  const r = await res;
  assert.equal(r.body.status, 'cancelled');
  assert.equal(r.body.stdout, 'printed\n');
  assert.equal(r.body.restarted, true);
  chat.close(); pool.dispose();
});

test('input(): the request goes out with the output call; `event: input` from the stream answers it', async () => {
  const orch = new FakeOrch();
  const pool = fakePool();
  const chat = attach(orch, pool, 'L5');
  const res = orch.nextResult();
  orch.emit('run', runEvent('r1', 1, [], { code: 'ask' }), 1);
  for (let i = 0; i < 100 && !orch.outputs.some((b) => b.input_request); i++) await sleep(10);
  const asked = orch.outputs.find((b) => b.input_request);
  assert.deepEqual(asked.input_request, { prompt: 'Name? ' });
  assert.deepEqual(asked.chunks, [{ stream: 'stdout', offset: 0, text: 'Name? ' }]);
  orch.emit('input', { run_id: 'r1', attempt: 2, page_id: 'p1', text: 'wrong attempt' }, 2);
  orch.emit('input', { run_id: 'r1', attempt: 1, page_id: 'p1', text: 'Ada' }, 3);
  const r = await res;
  assert.equal(r.body.stdout, 'Name? Ada\n');
  const again = orch.nextResult();
  orch.emit('run', runEvent('r2', 1, [], { code: 'ask' }), 4);
  for (let i = 0; i < 100 && orch.outputs.filter((b) => b.input_request).length < 2; i++) await sleep(10);
  orch.emit('input', { run_id: 'r2', attempt: 1, page_id: 'p1', text: 'first' }, 5);
  orch.emit('input', { run_id: 'r2', attempt: 1, page_id: 'p1', text: 'first' }, 5);   // the same event again
  assert.equal((await again).body.stdout, 'Name? first\n');
  chat.close(); pool.dispose();
});

test('the heartbeat: presence every heartbeat_ms while the page holds an attempt, none once it holds none', async () => {
  const orch = new FakeOrch();
  const pool = fakePool();
  const chat = attach(orch, pool, 'L6');
  await sleep(20);
  const before = presences(orch).length;
  const res = orch.nextResult();
  orch.emit('run', runEvent('r1', 1, [], { code: 'hang', heartbeat_ms: 40 }), 1);
  await sleep(300);
  const during = presences(orch).length - before;
  assert.ok(during >= 5, `${during} presence calls in 300 ms`);
  assert.ok(presences(orch).slice(before).every((b) => b.page_id === 'p1' && b.visible === true));
  orch.emit('cancel', { run_id: 'r1' }, 2);
  await res;
  await sleep(100);
  const after = presences(orch).length;
  await sleep(200);
  assert.equal(presences(orch).length, after, 'no heartbeat without an attempt');
  chat.close(); pool.dispose();
});

test('presence says `loading` before an attempt waits for a kernel, and `busy` as soon as it has one (no coalescing delay)', async () => {
  const orch = new FakeOrch();
  const slow = () => { const k = new FakeKernel(); k.ready = sleep(200).then(() => { k.state = 'ready'; return {}; }); return k; };
  const pool = new KernelPool({ makeKernel: slow, max: 2, spare: false });
  const chat = attach(orch, pool, 'L7', { presenceDelayMs: 1000 });
  await sleep(20);
  const n = presences(orch).length;
  const res = orch.nextResult();
  const t0 = Date.now();
  orch.emit('run', runEvent('r1', 1, [], { code: 'hang' }), 1);
  await new Promise((r) => chat.supervisor.once('executing', r));
  await sleep(50);
  const all = presences(orch).map((b) => b.kernel);
  const had = all.slice(n).findIndex((k) => k === 'ready' || k === 'busy');
  assert.ok(had >= 0, `a kernel was had and said within 50 ms, not after the 1 s coalescing (${all}, ${Date.now() - t0} ms)`);
  assert.equal(all[n + had - 1], 'loading', 'while it waited, the orchestrator\'s last word was loading');
  orch.emit('cancel', { run_id: 'r1' }, 2);
  await res;
  chat.close(); pool.dispose();
});

test('a superseded attempt whose Python no interrupt reaches (an awaited JS promise) is replaced at once, not after the grace', async () => {
  const orch = new FakeOrch();
  const pool = fakePool();
  const supervisor = new KernelSupervisor({ pool, id: 'L8', cancelGraceMs: 5000 });
  const session = new PageSession({ chatId: 'L8', pageId: 'p1', client: orch, supervisor, verifyFiles: false });
  session.attach();
  orch.emit('run', runEvent('r1', 1, [], { code: 'stuck' }), 1);
  await new Promise((r) => supervisor.once('executing', r));
  const t0 = Date.now();
  const begun = new Promise((r) => session.on('begin', (e) => e.attempt === 2 && r()));
  const res = orch.nextResult();
  orch.emit('run', runEvent('r1', 2), 2);
  await begun;
  assert.ok(Date.now() - t0 < 1000, `attempt 2 began ${Date.now() - t0} ms later`);
  const r = await res;
  assert.equal(r.body.attempt, 2);
  assert.equal(orch.results.length, 1);
  session.detach(); supervisor.dispose(); pool.dispose();
});

test('a re-run says why, as this page saw it: it went to the background since the last attempt', async () => {
  const orch = new FakeOrch();
  const pool = fakePool();
  const chat = attach(orch, pool, 'L9');
  const reruns = [];
  chat.session.on('queued', (e) => reruns.push(e.rerun));
  let res = orch.nextResult();
  orch.emit('run', runEvent('r1', 1, [], { code: 'hang' }), 1);
  await new Promise((r) => chat.supervisor.once('executing', r));
  chat.session.setVisible(false, 'test');
  chat.session.setVisible(true, 'test');
  orch.emit('run', runEvent('r1', 2), 2);
  await res;
  res = orch.nextResult();
  orch.emit('run', runEvent('r1', 3), 3);
  await res;
  assert.deepEqual(reruns, [null, 'hidden', 'lost']);
  chat.close(); pool.dispose();
});

// A worker_threads Worker stand-in (a test double): answers init, starts each run, and can die the
// way Node reports a worker over its heap limit.
class FakeWorker extends EventEmitter {
  postMessage(msg) {
    setTimeout(() => {
      if (msg.cmd === 'init') this.emit('message', { id: msg.id, type: 'ok', info: {} });
      else if (msg.cmd === 'run' && msg.run_id === 'warm-up') this.emit('message', { id: msg.id, type: 'ok', result: { status: 'ok', stdout: '', stderr: '', notes: [], files: [] } });
      else if (msg.cmd === 'run') {
        this.emit('message', { id: 0, type: 'event', event: 'started', ref: msg.run_id });
        this.emit('message', { id: 0, type: 'event', event: 'output', ref: msg.run_id, stream: 'stdout', offset: 0, text: 'growing\n', truncated: false });
        setTimeout(() => this.emit('error', Object.assign(new Error('Worker terminated due to reaching memory limit: JS heap out of memory'), { code: 'ERR_WORKER_OUT_OF_MEMORY' })), 20);
      } else this.emit('message', { id: msg.id, type: 'ok' });
    }, 1);
  }
  terminate() { this.terminated = true; }
}

test('a kernel worker that dies with ERR_WORKER_OUT_OF_MEMORY: crashed with the out-of-memory error and note, the output kept, the worker terminated', async () => {
  const workers = [];
  const pool = new KernelPool({ makeKernel: () => new KernelClient({ createWorker: () => { const w = new FakeWorker(); workers.push(w); return w; }, init: {} }), max: 1, spareDelayMs: 0 });
  const supervisor = new KernelSupervisor({ pool, id: 'oom' });
  const r = await supervisor.run({ runId: 'r1', code: 'x = [0] * 10**10' });
  assert.equal(r.status, 'crashed');
  assert.deepEqual(r.error, ERROR.outOfMemory());
  assert.ok(r.notes.includes(NOTE.outOfMemory()), JSON.stringify(r.notes));
  assert.equal(r.stdout, 'growing\n');
  assert.equal(r.restarted, true);
  assert.ok(workers[0].terminated, 'the dead worker was terminated');
  supervisor.dispose(); pool.dispose();
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
