// ui-adapter-unit.test.mjs -- the ui-adapter's logic in Node, without a browser: the event-stream
// reader (parsing, Last-Event-ID on reconnect, final 401), the file cache (one shared deadline,
// stalled downloads skipped with a note and retried next run, sha256 checked, no re-download),
// share links, and the kernel supervisor's policy over fake kernels (time limit → spare swapped in
// and files remounted; cancel kept when the interrupt lands, replaced when it does not; crash;
// reset for a chat switch).  The same code runs in Chromium in the other e2e files.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import crypto from 'node:crypto';
import { EventStream } from '../../ui-adapter/src/sse.js';
import { FileCache } from '../../ui-adapter/src/files.js';
import { Api } from '../../ui-adapter/src/api.js';
import { KernelSupervisor } from '../../ui-adapter/src/kernel.js';
import { Emitter } from '../../ui-adapter/src/emitter.js';
import { encodeShare, decodeShare, codeFromHash } from '../../ui-adapter/app/share.js';

const sha = (b) => crypto.createHash('sha256').update(b).digest('hex');
function serve(handler) {
  return new Promise((resolve) => {
    const s = http.createServer(handler);
    s.listen(0, '127.0.0.1', () => resolve({ s, url: `http://127.0.0.1:${s.address().port}`, close: () => { s.closeAllConnections(); s.close(); } }));
  });
}

test('event stream: parses events, resumes with Last-Event-ID and the same URL, stops on 401', async () => {
  const seen = [];
  let conn = 0;
  const srv = await serve((req, res) => {
    conn++;
    seen.push({ url: req.url, lei: req.headers['last-event-id'] || null, auth: req.headers.authorization });
    if (conn === 3) { res.writeHead(401); res.end(); return; }
    res.writeHead(200, { 'Content-Type': 'text/event-stream' });
    if (conn === 1) res.end(': hi\n\nid: 1\nevent: run\ndata: {"a":\ndata: 1}\n\nid: 2\r\nevent: files\r\ndata: {}\r\n\r\n');
    else res.end('id: 3\nevent: cancel\ndata: {"run_id":"r"}\n\n');
  });
  const events = [];
  const states = [];
  await new Promise((done) => {
    const es = new EventStream({ url: `${srv.url}/v1/chats/c/events?page_id=p1`, headers: () => ({ Authorization: 'Bearer tok' }),
      onEvent: (e) => events.push(e), onState: (s) => { states.push(s); if (s === 'failed') done(); }, maxBackoffMs: 20 });
    es.start();
  });
  srv.close();
  assert.deepEqual(events.map((e) => [e.type, e.id, e.data]), [['run', '1', '{"a":\n1}'], ['files', '2', '{}'], ['cancel', '3', '{"run_id":"r"}']]);
  assert.deepEqual(seen.map((s) => s.lei), [null, '2', '3'], 'each reconnect sends the last id seen');
  assert.ok(seen.every((s) => s.url === '/v1/chats/c/events?page_id=p1' && s.auth === 'Bearer tok'));
  assert.equal(states.at(-1), 'failed');
});

test('file cache: one 5 s-style deadline, stalled download skipped then retried, sha checked, no re-download', async () => {
  const good = Buffer.from('a,b\n1,2\n');
  const slowBytes = Buffer.from('slow content');
  let stall = true;
  const srv = await serve((req, res) => {
    if (req.url.endsWith('/slow') && stall) { res.writeHead(200); res.write('partial'); return; } // never ends
    if (req.url.endsWith('/slow')) { res.end(slowBytes); return; }
    if (req.url.endsWith('/bad')) { res.end('tampered'); return; }
    res.end(good);
  });
  const cache = new FileCache({ api: new Api({ base: srv.url, token: 't' }), deadlineMs: 300 });
  const m = (name, path, bytes = good) => ({ name, sha256: sha(bytes), size: bytes.length, url: `/v1/files/${path}` });
  const t0 = Date.now();
  const r1 = await cache.fetchAll([m('ok.csv', 'ok'), m('slow.csv', 'slow', slowBytes), m('bad.csv', 'bad', Buffer.from('what the manifest promised'))]);
  assert.ok(Date.now() - t0 < 1500, 'the deadline bounds the wait');
  assert.deepEqual(r1.files.map((f) => f.name), ['ok.csv']);
  assert.deepEqual(r1.skipped.map((s) => s.name).sort(), ['bad.csv', 'slow.csv']);
  assert.match(r1.skipped.find((s) => s.name === 'slow.csv').reason, /did not finish within 0.3 s.*tried again next run/);
  assert.match(r1.skipped.find((s) => s.name === 'bad.csv').reason, /sha256 mismatch/);
  stall = false;
  const before = cache.downloads;
  const r2 = await cache.fetchAll([m('ok.csv', 'ok'), m('slow.csv', 'slow', slowBytes)]);
  assert.deepEqual(r2.files.map((f) => f.name), ['ok.csv', 'slow.csv']);
  assert.equal(cache.downloads - before, 1, 'only the skipped file is downloaded again');
  assert.ok(Buffer.from(r2.files[1].bytes).equals(slowBytes));
  srv.close();
});

test('share links round-trip any text; a broken one decodes to null', () => {
  for (const s of ['', 'print(1)', 'ünï ✓ 🐍\n\t"#&=?%', 'x'.repeat(100_000)]) {
    const enc = encodeShare(s);
    assert.match(enc, /^[A-Za-z0-9_-]*$/, 'URL-safe');
    assert.equal(decodeShare(enc), s);
    assert.equal(codeFromHash(`#code=${enc}`), s);
  }
  assert.equal(decodeShare('%%%'), null);
  assert.equal(codeFromHash('#other=1'), null);
});

// A fake kernel port: runs "code" as a tiny script: 'ok', 'loop' (never ends unless interrupted
// when interruptible), 'hang' (ignores interrupts), 'die'.
class FakePort extends Emitter {
  static made = 0;
  constructor() {
    super();
    FakePort.made++;
    this.id = FakePort.made;
    this.reportsExecuting = true;
    this.files = new Map();
    this.dead = false;
    this.ns = {};
    this.ready = new Promise((r) => setTimeout(r, 5));
  }
  async mount(files) { for (const f of files) this.files.set(f.name, f.bytes); }
  async mountExactly(files) { this.files = new Map(files.map((f) => [f.name, f.bytes])); }
  run({ code }) {
    setTimeout(() => this.emit('executing', {}), 1);
    return new Promise((resolve, reject) => {
      this._resolve = resolve;
      if (code === 'ok') setTimeout(() => resolve({ status: 'ok', stdout: `k${this.id} files=${[...this.files.keys()].join(',')} x=${this.ns.x ?? 'none'}`, files: [] }), 5);
      else if (code === 'set') { this.ns.x = 1; setTimeout(() => resolve({ status: 'ok', stdout: '', files: [] }), 5); }
      else if (code === 'pass') setTimeout(() => resolve({ status: 'ok', stdout: '', files: [] }), 1);
      else if (code === 'die') setTimeout(() => { this.dead = true; this.emit('exit', new Error('boom')); reject(new Error('boom')); }, 5);
      this.interruptible = code === 'loop';
    });
  }
  interrupt() { if (this.interruptible) setTimeout(() => this._resolve({ status: 'cancelled', stdout: '', files: [], error: { type: 'KeyboardInterrupt' } }), 5); return true; }
  terminate() { this.dead = true; }
}

test('supervisor: time limit swaps in the spare and remounts; cancel keeps or replaces; crash; reset', async () => {
  const sup = new KernelSupervisor({ workerUrl: 'x', createPort: () => new FakePort(), cancelGraceMs: 100 });
  await sup.start();
  await sup.whenSpareReady();
  await sup.mount([{ name: 'd.csv', bytes: new Uint8Array([1]), sha256: 'aa' }]);
  let r = await sup.run({ code: 'set' });
  assert.equal(r.status, 'ok');
  r = await sup.run({ code: 'ok' });
  assert.match(r.stdout, /^k1 files=d.csv x=1$/);
  // Time limit.
  r = await sup.run({ code: 'hang', timeoutS: 0.1 });
  assert.equal(r.status, 'timeout');
  assert.equal(r.restarted, true);
  assert.deepEqual(r.remounted, ['d.csv']);
  assert.ok(sup.lastRestartMs < 50, `spare swap took ${sup.lastRestartMs} ms`);
  r = await sup.run({ code: 'ok' });
  assert.match(r.stdout, /^k2 files=d.csv x=none$/, 'the spare (kernel 2) took over with the files, without the variables');
  // Cancel that lands: namespace kept.
  await sup.run({ code: 'set' });
  let p = sup.run({ code: 'loop', timeoutS: 10 });
  setTimeout(() => sup.cancel(), 20);
  r = await p;
  assert.equal(r.status, 'cancelled');
  assert.equal(r.restarted, false);
  assert.match((await sup.run({ code: 'ok' })).stdout, /^k2 .* x=1$/);
  // Cancel that does not land: replaced.
  await sup.whenSpareReady();
  p = sup.run({ code: 'hang', timeoutS: 10 });
  setTimeout(() => sup.cancel(), 20);
  r = await p;
  assert.equal(r.status, 'cancelled');
  assert.equal(r.restarted, true);
  // Crash.
  await sup.whenSpareReady();
  r = await sup.run({ code: 'die' });
  assert.equal(r.status, 'crashed');
  assert.equal(r.restarted, true);
  // Chat switch: fresh interpreter, no files.
  await sup.whenSpareReady();
  await sup.reset();
  r = await sup.run({ code: 'ok' });
  assert.match(r.stdout, /files= x=none$/);
  sup.dispose();
  sup.dispose(); // safe twice
  assert.equal(sup.state, 'disposed');
});
