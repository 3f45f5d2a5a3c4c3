// orchestrator_caps.test.mjs -- the per-chat caps of issue 21 (items 3 and 9) against the real
// binary: at most 8 uploads arriving at once for one chat (the next one 503 with Retry-After, other
// chats unaffected), a per-chat quota on stored output files (CHAT_OUTPUT_QUOTA_MB: the run is
// stored, the file over it is not, with a note), /healthz answering 503 with the reason while the
// store's writes fail, and the admin runs list carrying origin and restarted.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { startServer, call, newChat, upload, Page, sleep } from './lib.mjs';

let srv;
before(async () => { srv = await startServer({ env: { CHAT_OUTPUT_QUOTA_MB: '1' } }); });
after(async () => { await srv.stop(); });

// An HTTP/1.1 upload whose body stops after its first bytes: the socket, and what it answered.
function slowUpload(chat, name) {
  const sock = connect(srv.port, '127.0.0.1');
  let answer = '';
  sock.on('data', (d) => { answer += d; });
  sock.on('error', () => {});
  const closed = new Promise((r) => sock.on('close', r));
  sock.write(`POST /v1/chats/${chat.id}/files?name=${name} HTTP/1.1\r\nHost: x\r\n` +
    `Authorization: Bearer ${chat.token}\r\nContent-Length: 100000\r\n\r\n${'x'.repeat(1000)}`);
  return { sock, closed, get answer() { return answer; }, finish() { sock.write('y'.repeat(99000)); } };
}

test('at most 8 uploads arrive at once for one chat: the 9th is 503 with Retry-After; other chats are not held up', async () => {
  const chat = await newChat(srv);
  const other = await newChat(srv);
  const slow = [];
  for (let i = 0; i < 8; i++) slow.push(slowUpload(chat, `f${i}.txt`));
  await sleep(500);
  assert.ok(slow.every((u) => u.answer === ''), 'the eight are still arriving');
  const ninth = slowUpload(chat, 'f8.txt');
  await ninth.closed;
  assert.match(ninth.answer, /^HTTP\/1\.1 503 /);
  assert.match(ninth.answer, /\r\nRetry-After: \d+\r\n/i);
  const elsewhere = await upload(srv, other, 'ok.txt', 'fine', { token: other.token });
  assert.equal(elsewhere.status, 201);
  slow[0].finish();
  await sleep(300);
  assert.match(slow[0].answer, /^HTTP\/1\.1 201 /);
  const m = await call(srv, 'GET', '/metrics', { token: null });
  assert.match(m.buf.toString(), /cerea_uploads_refused_busy_total [1-9]/);
  const tenth = await upload(srv, chat, 'after.txt', 'room again', { token: chat.token });
  assert.equal(tenth.status, 201);
  for (const u of slow) u.sock.destroy();
});

test('CHAT_OUTPUT_QUOTA_MB: the run is stored, an output file past the quota is not, with a note', async () => {
  const chat = await newChat(srv);
  const p = new Page(srv, chat, 'tab');
  await p.opened;
  const half = Buffer.alloc(600 * 1024, 1);
  for (const [i, expectKept] of [[1, true], [2, false]]) {
    await call(srv, 'POST', `/v1/chats/${chat.id}/runs`, { body: { code: 'save' } });
    const e = (await p.nextRun()).data;
    assert.equal((await p.putFile(e, `out${i}.bin`, half)).status, 201);
    assert.equal((await p.putFile(e, `small${i}.txt`, 'tiny')).status, 201);
    const res = await p.result(e, { files: [{ name: `out${i}.bin`, size: half.length }, { name: `small${i}.txt` }] });
    assert.equal(res.status, 200);
    assert.equal(res.json.status, 'ok');
    const names = res.json.files.map((f) => f.name);
    if (expectKept) {
      assert.deepEqual(names, [`out${i}.bin`, `small${i}.txt`]);
    } else {
      assert.deepEqual(names, [`small${i}.txt`], 'the file past the quota is not kept');
      assert.ok(res.json.notes.some((n) => /out2\.bin/.test(n) && /CHAT_OUTPUT_QUOTA_MB/.test(n)), JSON.stringify(res.json.notes));
    }
  }
  const files = await call(srv, 'GET', `/v1/chats/${chat.id}/files`);
  assert.ok(!files.json.files.some((f) => f.name === 'out2.bin'));
  p.close();
});

test('/healthz answers 503 with the reason while the store\'s writes fail, and 200 once they are stored again', async () => {
  const ok = await call(srv, 'GET', '/healthz', { token: null });
  assert.equal(ok.status, 200);
  assert.equal(ok.json.database.writes.ok, true);
  const chat = await newChat(srv);
  const tmp = join(srv.dataDir, 'blobs', 'tmp');
  rmSync(tmp, { recursive: true, force: true });
  writeFileSync(tmp, 'not a directory'); // every staged write now fails
  try {
    const up = await upload(srv, chat, 'a.txt', 'data', { token: chat.token });
    assert.equal(up.status, 500);
    const h = await call(srv, 'GET', '/healthz', { token: null });
    assert.equal(h.status, 503);
    assert.equal(h.json.status, 'degraded');
    assert.equal(h.json.database.writes.ok, false);
    assert.match(h.json.database.error, /writes are failing/);
  } finally {
    rmSync(tmp, { force: true });
    mkdirSync(tmp);
  }
  assert.equal((await upload(srv, chat, 'b.txt', 'data', { token: chat.token })).status, 201);
  const again = await call(srv, 'GET', '/healthz', { token: null });
  assert.equal(again.status, 200);
});

test('GET /v1/admin/runs lists origin and restarted for finished runs too', async () => {
  const chat = await newChat(srv);
  const p = new Page(srv, chat, 'tab');
  await p.opened;
  const r = await call(srv, 'POST', `/v1/chats/${chat.id}/runs`, { body: { code: 'x', origin: 'user' } });
  const e = (await p.nextRun()).data;
  await p.result(e, { status: 'timeout', restarted: true, remounted: [] });
  const runs = await call(srv, 'GET', '/v1/admin/runs');
  const mine = runs.json.recent.find((x) => x.run_id === r.json.run_id);
  assert.equal(mine.origin, 'user');
  assert.equal(mine.restarted, true);
  assert.equal(mine.status, 'timeout');
  p.close();
});
