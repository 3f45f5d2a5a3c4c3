// ui-adapter-unit.test.mjs -- the ui-adapter's logic in Node, without a browser: the event-stream
// reader (parsing, Last-Event-ID on reconnect, final 401), the file cache (one shared deadline,
// stalled downloads skipped with a note and retried next run, sha256 checked, no re-download),
// share links, and the kernel supervisor's policy over fake kernels (time limit → spare swapped in
// and files remounted; cancel kept when the interrupt lands, replaced when it does not; crash;
// reset for a chat switch).  The same code runs in Chromium in the other e2e files.
// ui-adapter-unit.test.mjs -- the page-side logic in Node, without a browser: the event-stream
// loop (worker/event-stream.js) over the page's fetch connection (ui-adapter/src/sse.js): parsing,
// Last-Event-ID on reconnect, final 401; the file cache (worker/files.js) over the page's client
// (ui-adapter/src/api.js pageClient): one shared deadline, stalled downloads skipped with a note
// and retried next run, sha256 checked, no re-download; share links; and the page's kernel
// supervisor (ui-adapter/src/kernel.js over worker/supervisor.js) with scripted kernels (time
// limit → spare swapped in and files remounted; cancel kept when the interrupt lands, replaced
// when it does not; crash; reset for a chat switch), each restart worded once.  The same code runs
// in Chromium in the other e2e files.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import crypto from 'node:crypto';
import { EventStream } from '../../worker/event-stream.js';
import { FileCache } from '../../worker/files.js';
import { NOTE } from '../../worker/notes.js';
import { fetchConnect } from '../../ui-adapter/src/sse.js';
import { Api, pageClient } from '../../ui-adapter/src/api.js';
import { KernelSupervisor } from '../../ui-adapter/src/kernel.js';
import { encodeShare, decodeShare, codeFromHash } from '../../ui-adapter/app/share.js';
import { FakeKernel } from '../kernel/doubles.mjs';

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
    else { res.write('id: 3\nevent: cancel\r'); setTimeout(() => res.end('\ndata: {"run_id":"r"}\n\n'), 20); }   // \r\n split across chunks
  });
  const events = [];
  const states = [];
  await new Promise((done) => {
    const es = new EventStream({ connect: fetchConnect({ base: srv.url, headers: () => ({ Authorization: 'Bearer tok' }) }),
      path: '/v1/chats/c/events?page_id=p1',
      onEvent: (e) => events.push(e), onState: (s) => { states.push(s); if (s === 'failed') done(); }, initialBackoffMs: 10, maxBackoffMs: 20 });
    es.start();
  });
  srv.close();
  assert.deepEqual(events.map((e) => [e.type, e.id, e.data]), [['run', '1', '{"a":\n1}'], ['files', '2', '{}'], ['cancel', '3', '{"run_id":"r"}']]);
  assert.deepEqual(seen.map((s) => s.lei), [null, '2', '3'], 'each reconnect sends the last id seen');
  assert.ok(seen.every((s) => s.url === '/v1/chats/c/events?page_id=p1' && s.auth === 'Bearer tok'));
  assert.deepEqual(states, ['connecting', 'open', 'waiting', 'connecting', 'open', 'waiting', 'connecting', 'failed']);
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
  // A second of deadline: the good and the tampered file must be in by then on a loaded machine.
  // The stalled response never ends: the server is closed whatever the outcome (else the file
  // never exits).
  try {
    const cache = new FileCache({ client: pageClient(new Api({ base: srv.url, token: 't' })), deadlineMs: 1000 });
    const m = (name, path, bytes = good) => ({ name, sha256: sha(bytes), size: bytes.length, url: `/v1/files/${path}` });
    const t0 = Date.now();
    const r1 = await cache.fetchAll([m('ok.csv', 'ok'), m('slow.csv', 'slow', slowBytes), m('bad.csv', 'bad', Buffer.from('what the manifest promised'))]);
    assert.ok(Date.now() - t0 < 5000, 'the deadline bounds the wait');
    assert.deepEqual(r1.files.map((f) => f.name), ['ok.csv']);
    assert.deepEqual(r1.skipped.map((s) => s.name).sort(), ['bad.csv', 'slow.csv']);
    const slow = r1.skipped.find((s) => s.name === 'slow.csv');
    assert.equal(slow.why, 'deadline');
    assert.equal(NOTE.skipped(slow.name, slow.why, 1000), 'slow.csv: download did not finish within 1 s; skipped for this run, tried again on the next.');
    assert.match(r1.skipped.find((s) => s.name === 'bad.csv').why, /sha256 mismatch/);
    stall = false;
    const before = cache.downloads;
    const r2 = await cache.fetchAll([m('ok.csv', 'ok'), m('slow.csv', 'slow', slowBytes)]);
    assert.deepEqual(r2.files.map((f) => f.name), ['ok.csv', 'slow.csv']);
    assert.equal(cache.downloads - before, 1, 'only the skipped file is downloaded again');
    assert.ok(Buffer.from(r2.files[1].data).equals(slowBytes));
  } finally { srv.close(); }
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

test('page supervisor: time limit swaps in the spare and remounts; cancel keeps or replaces; crash; reset; each restart worded once', async () => {
  const made = [];
  const sup = new KernelSupervisor({ workerUrl: 'x', cancelGraceMs: 100, createKernel: (url) => { const k = new FakeKernel(); made.push([url, k]); return k; } });
  await sup.start();
  assert.equal(await sup.whenSpareReady(), true);
  assert.equal(made.length, 2, 'the first kernel and one spare');
  assert.ok(made.every(([url]) => url === 'x'), 'the worker URL is read at each kernel\'s start');
  let r = await sup.run({ code: 'set', files: [{ name: 'd.csv', bytes: new Uint8Array([1]), sha256: 'aa' }] });
  assert.equal(r.status, 'ok');
  const k1 = sup.kernel;
  r = await sup.run({ code: 'ok' });
  assert.equal(r.stdout, `kernel ${k1.n} saw 1 earlier runs; mounted d.csv`);
  // Time limit.
  r = await sup.run({ code: 'sleep', timeoutS: 0.1 });
  assert.equal(r.status, 'timeout');
  assert.equal(r.restarted, true);
  assert.deepEqual(r.remounted, ['d.csv']);
  assert.deepEqual(r.notes, [], 'the restart is worded once, by NOTE.restarted from the fields (the card)');
  assert.equal(NOTE.restarted(r.remounted), 'The sandbox was restarted: variables and files written outside /mnt/output are gone. Files back in /mnt/data: d.csv.');
  assert.ok(sup.lastRestartMs < 50, `spare swap took ${sup.lastRestartMs} ms`);
  assert.notEqual(sup.kernel, k1);
  r = await sup.run({ code: 'ok' });
  assert.equal(r.stdout, `kernel ${sup.kernel.n} saw 0 earlier runs; mounted d.csv`, 'the spare took over with the files, without the variables');
  // Cancel that lands: namespace kept.
  await sup.run({ code: 'set' });
  const k2 = sup.kernel;
  let p = sup.run({ code: 'hang', timeoutS: 10 });
  sup.once('executing', () => setTimeout(() => sup.cancel(), 20));
  r = await p;
  assert.equal(r.status, 'cancelled');
  assert.equal(r.restarted, false);
  assert.deepEqual(r.notes, [NOTE.cancelKept()]);
  assert.equal(sup.kernel, k2, 'the same kernel');
  assert.match((await sup.run({ code: 'ok' })).stdout, /saw 2 earlier runs/, "its namespace: 'ok' and 'set'");
  // Cancel that does not land: replaced.
  await sup.whenSpareReady();
  p = sup.run({ code: 'sleep', timeoutS: 10 });
  sup.once('executing', () => setTimeout(() => sup.cancel(), 20));
  r = await p;
  assert.equal(r.status, 'cancelled');
  assert.equal(r.restarted, true);
  assert.deepEqual(r.notes, [NOTE.cancelReplaced(100)]);
  // Crash.
  await sup.whenSpareReady();
  r = await sup.run({ code: 'die' });
  assert.equal(r.status, 'crashed');
  assert.equal(r.restarted, true);
  assert.deepEqual(r.error, { type: 'KernelCrashed', message: 'The sandbox stopped (worker exited (1)).', traceback: '' });
  // A worker that answers `crashed` itself: its words and output stay, its kernel is replaced.
  await sup.whenSpareReady();
  const k3 = sup.kernel;
  r = await sup.run({ code: 'oom' });
  assert.equal(r.status, 'crashed');
  assert.deepEqual([r.stdout, r.notes, r.error.type, r.restarted, r.remounted], ['kept\n', ['over its limit'], 'MemoryError', true, ['d.csv']]);
  assert.equal(k3.state, 'dead');
  // Chat switch: fresh interpreter, no files.
  await sup.whenSpareReady();
  await sup.reset();
  r = await sup.run({ code: 'ok' });
  assert.match(r.stdout, /saw 0 earlier runs; mounted $/);
  assert.equal(r.restarted, false);
  sup.dispose();
  sup.dispose(); // safe twice
  assert.equal(sup.state, 'disposed');
  assert.ok(made.every(([, k]) => k.state === 'dead'), 'every kernel and the spare are gone');
});
