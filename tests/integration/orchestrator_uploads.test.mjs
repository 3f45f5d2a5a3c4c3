// orchestrator_uploads.test.mjs -- streamed uploads (POST /v1/chats/{chat}/files): the body goes
// piece by piece into a store stage (DATA/blobs/tmp), never whole into memory.  A 50 MiB upload
// round-trips byte for byte (HTTP/1.1 and h2c); 50 MiB + 1 is refused with 413, announced or
// streamed chunked, and leaves no temp file; a client gone mid-upload leaves no temp file and no
// row; a request without a credential gets its 401 and writes nothing; and the server's resident
// memory stays far below the size of a 40 MiB upload while it streams in.  The page's output
// files (PUT /v1/runs/{run}/files/{name*}) stream the same way, wait on disk for the result, and
// leave nothing behind when replaced, cut off, or never claimed by a result.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { connect as h2connect } from 'node:http2';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, rmSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { startServer, newChat, call, sleep, Page } from './lib.mjs';

const MIB = 1024 * 1024;
let srv;
before(async () => { srv = await startServer(); });
after(async () => { await srv.stop(); rmSync(srv.dataDir, { recursive: true, force: true }); });

// Pseudo-random bytes (so a dropped or repeated piece shows), the same for the same seed.
function bytes(n, seed = 1) {
  const b = Buffer.allocUnsafe(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i + 4 <= n; i += 4) {
    x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
    b.writeUInt32LE(x, i);
  }
  for (let i = n - (n % 4); i < n; i++) b[i] = i & 0xff;
  return b;
}
// Resolves when a writable drains or closes (listeners removed either way).
function drained(w) {
  return new Promise((r) => {
    const done = () => { w.off('drain', done); w.off('close', done); r(); };
    w.on('drain', done);
    w.on('close', done);
  });
}
const sha256 = (b) => createHash('sha256').update(b).digest('hex');

// Temp files of the blob store (stages in blobs/tmp, blob temp files in blobs/xx).
function tempFiles(s = srv) {
  const out = [];
  const walk = (d) => {
    if (!existsSync(d)) return;
    for (const e of readdirSync(d, { withFileTypes: true })) {
      if (e.isDirectory()) walk(join(d, e.name));
      else if (e.name.endsWith('.tmp')) out.push(join(d, e.name));
    }
  };
  walk(join(s.dataDir, 'blobs'));
  return out;
}

async function waitFor(cond, ms = 5000, what = 'condition') {
  const end = Date.now() + ms;
  while (Date.now() < end) { if (await cond()) return; await sleep(20); }
  throw new Error(`timed out waiting for ${what}`);
}

// The stage of a refused request is dropped right after its answer is written (the same loop
// turn), so a fast client may look a moment before: wait for it.
const noTemp = (s = srv) => waitFor(() => tempFiles(s).length === 0, 5000, 'no temp file left');

function rssKiB(pid) {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m[1]);
}

// Sends `data` over HTTP/1.1 in pieces of `piece` bytes (chunked when `chunked`), waiting for
// each write to drain; `onPiece(i)` runs after each.  Resolves {status, json} (or {error} when the
// server closed first).  `stopAfter` bytes: destroy the request there (client gone).
function send(s, path, data, { chunked = false, piece = MIB, token = s.key, onPiece, stopAfter, method = 'POST' } = {}) {
  return new Promise((resolve) => {
    const headers = { authorization: `Bearer ${token}` };
    if (!chunked) headers['content-length'] = data.length;
    const req = httpRequest({ host: '127.0.0.1', port: s.port, method, path, headers });
    let done = false;
    const finish = (v) => { if (!done) { done = true; resolve(v); } };
    req.on('response', (res) => {
      const parts = [];
      res.on('data', (d) => parts.push(d));
      res.on('end', () => {
        const buf = Buffer.concat(parts);
        let json = null;
        try { json = JSON.parse(buf.toString('utf8')); } catch { /* not JSON */ }
        finish({ status: res.statusCode, json });
      });
    });
    req.on('error', (error) => finish({ error }));
    (async () => {
      for (let off = 0, i = 0; off < data.length; off += piece, i++) {
        if (done || req.destroyed) return;
        if (stopAfter !== undefined && off >= stopAfter) { req.destroy(); finish({ aborted: true }); return; }
        const ok = req.write(data.subarray(off, Math.min(off + piece, data.length)));
        if (!ok) await drained(req);
        if (onPiece) await onPiece(i);
      }
      if (!done && !req.destroyed) req.end();
    })();
  });
}

test('a 40 MiB upload streams in: the server\'s resident memory grows far less than the upload', async () => {
  const chat = await newChat(srv);
  const data = bytes(40 * MIB, 3);
  // settle: one small upload first so lazy start-up allocations are behind us
  assert.equal((await send(srv, `/v1/chats/${chat.id}/files?name=warm.txt`, Buffer.from('warm'))).status, 201);
  const base = rssKiB(srv.pid);
  let peak = base;
  const r = await send(srv, `/v1/chats/${chat.id}/files?name=forty.bin`, data, {
    piece: 256 * 1024,
    onPiece: () => { peak = Math.max(peak, rssKiB(srv.pid)); },
  });
  peak = Math.max(peak, rssKiB(srv.pid));
  assert.equal(r.status, 201, JSON.stringify(r));
  assert.equal(r.json.sha256, sha256(data));
  const growthMiB = (peak - base) / 1024;
  console.log(`  server RSS ${Math.round(base / 1024)} MiB before, peak ${Math.round(peak / 1024)} MiB during a 40 MiB upload (+${growthMiB.toFixed(1)} MiB)`);
  assert.ok(growthMiB < 16, `RSS grew by ${growthMiB.toFixed(1)} MiB during a 40 MiB upload`);
});

test('a 50 MiB upload round-trips byte for byte, and the same content again is the same file', async () => {
  const chat = await newChat(srv);
  const data = bytes(50 * MIB, 5);
  const r = await send(srv, `/v1/chats/${chat.id}/files?name=fifty.bin`, data);
  assert.equal(r.status, 201, JSON.stringify(r));
  assert.equal(r.json.size, 50 * MIB);
  assert.equal(r.json.sha256, sha256(data));
  assert.equal(r.json.name, 'fifty.bin');
  assert.equal(r.json.mounted, false); // over 20 MB: stored, not mounted
  assert.ok(r.json.left_out_reason);
  const back = await call(srv, 'GET', `/v1/files/${r.json.file_id}`);
  assert.equal(back.status, 200);
  assert.equal(back.buf.length, data.length);
  assert.ok(back.buf.equals(data), 'downloaded bytes differ from the uploaded ones');
  // chunked this time, small pieces: the same content is the same file (200), no temp left
  const again = await send(srv, `/v1/chats/${chat.id}/files?name=fifty.bin`, data, { chunked: true, piece: 64 * 1024 });
  assert.equal(again.status, 200, JSON.stringify(again));
  assert.equal(again.json.file_id, r.json.file_id);
  await noTemp();
  // an empty upload still works (no body piece ever reaches the sink)
  const empty = await send(srv, `/v1/chats/${chat.id}/files?name=empty.txt`, Buffer.alloc(0));
  assert.equal(empty.status, 201);
  assert.equal(empty.json.size, 0);
  assert.equal(empty.json.sha256, sha256(Buffer.alloc(0)));
});

test('50 MiB + 1 is refused with 413, announced or streamed, and leaves no temp file and no row', async () => {
  // its own server: the transport closes a connection after a 413
  const own = await startServer();
  try {
    const chat = await newChat(own);
    const data = bytes(50 * MIB + 1, 7);
    // chunked: no length announced, refused when the running total passes the limit
    let seenTemp = false;
    const r = await send(own, `/v1/chats/${chat.id}/files?name=over.bin`, data, {
      chunked: true, piece: MIB,
      onPiece: () => { if (tempFiles(own).length) seenTemp = true; },
    });
    assert.ok(r.status === 413 || r.error, JSON.stringify(r));
    if (r.status) assert.equal(r.json.error.code, 'body_too_large');
    assert.ok(seenTemp, 'the body was staged while it came (a temp file existed)');
    await waitFor(() => tempFiles(own).length === 0, 5000, 'the stage to go');
    const list = await call(own, 'GET', `/v1/chats/${chat.id}/files`);
    assert.deepEqual(list.json.files, []);
    // announced: refused on the Content-Length before any byte is read
    const status = await new Promise((resolve, reject) => {
      const req = httpRequest({ host: '127.0.0.1', port: own.port, method: 'POST',
        path: `/v1/chats/${chat.id}/files?name=huge.bin`,
        headers: { authorization: `Bearer ${own.key}`, 'content-length': 50 * MIB + 1 } });
      req.on('response', (res) => { resolve(res.statusCode); res.resume(); req.destroy(); });
      req.on('error', reject);
      req.flushHeaders();
    });
    assert.equal(status, 413);
    await noTemp(own);
  } finally { await own.stop(); rmSync(own.dataDir, { recursive: true, force: true }); }
});

test('a client that disconnects mid-upload leaves no temp file and no row', async () => {
  const chat = await newChat(srv);
  const data = bytes(30 * MIB, 9);
  let sawTemp = false;
  const r = await send(srv, `/v1/chats/${chat.id}/files?name=cut.bin`, data, {
    piece: MIB, stopAfter: 10 * MIB,
    onPiece: async (i) => {
      if (i === 8) await waitFor(() => tempFiles().length > 0, 5000, 'the stage to appear');
      if (tempFiles().length) sawTemp = true;
    },
  });
  assert.ok(r.aborted);
  assert.ok(sawTemp);
  await waitFor(() => tempFiles().length === 0, 5000, 'the stage to go');
  const list = await call(srv, 'GET', `/v1/chats/${chat.id}/files`);
  assert.deepEqual(list.json.files, []);
  // the server is fine afterwards
  const ok = await send(srv, `/v1/chats/${chat.id}/files?name=after.txt`, Buffer.from('after'));
  assert.equal(ok.status, 201);
});

test('an upload without a usable credential gets its 401/403 and writes nothing', async () => {
  const chat = await newChat(srv);
  const other = await newChat(srv);
  const data = bytes(8 * MIB, 11);
  let seenTemp = false;
  const onPiece = () => { if (tempFiles().length) seenTemp = true; };
  const bad = await send(srv, `/v1/chats/${chat.id}/files?name=x.bin`, data, { token: 'wrong', onPiece });
  assert.equal(bad.status, 401);
  const foreign = await send(srv, `/v1/chats/${chat.id}/files?name=x.bin`, data, { token: other.token, onPiece });
  assert.equal(foreign.status, 403);
  assert.equal(seenTemp, false);
  // a page token of this chat may upload; a bad name is refused after the body, nothing kept
  const page = await send(srv, `/v1/chats/${chat.id}/files?name=${encodeURIComponent('../x')}`, data, { token: chat.token });
  assert.equal(page.status, 400);
  await noTemp();
  const list = await call(srv, 'GET', `/v1/chats/${chat.id}/files`);
  assert.deepEqual(list.json.files, []);
});

test('h2c: a 20 MiB upload round-trips; a streamed body past 50 MiB is refused with 413', async () => {
  const chat = await newChat(srv);
  const session = h2connect(srv.base);
  const post = (path, data, piece) => new Promise((resolve, reject) => {
    const st = session.request({ ':method': 'POST', ':path': path, authorization: `Bearer ${srv.key}` });
    let status = 0;
    const parts = [];
    st.on('response', (h) => { status = h[':status']; });
    st.on('data', (d) => parts.push(d));
    st.on('end', () => resolve({ status, body: Buffer.concat(parts).toString() }));
    st.on('error', (e) => (status ? resolve({ status, body: Buffer.concat(parts).toString() }) : reject(e)));
    (async () => {
      for (let off = 0; off < data.length && !st.destroyed; off += piece) {
        if (!st.write(data.subarray(off, Math.min(off + piece, data.length))))
          await drained(st);
        if (status) break; // answered early (413): stop sending
      }
      if (!st.destroyed) st.end();
    })();
  });
  try {
    const data = bytes(20 * MIB, 13);
    const r = await post(`/v1/chats/${chat.id}/files?name=h2.bin`, data, MIB);
    assert.equal(r.status, 201, r.body);
    const j = JSON.parse(r.body);
    assert.equal(j.sha256, sha256(data));
    const back = await call(srv, 'GET', `/v1/files/${j.file_id}`);
    assert.ok(back.buf.equals(data));
    const over = await post(`/v1/chats/${chat.id}/files?name=h2-over.bin`, bytes(50 * MIB + 1, 15), MIB);
    assert.equal(over.status, 413);
    await waitFor(() => tempFiles().length === 0, 5000, 'the stage to go');
    const list = await call(srv, 'GET', `/v1/chats/${chat.id}/files`);
    assert.deepEqual(list.json.files.map((f) => f.name), ['h2.bin']);
  } finally { session.close(); }
});

test('output files (PUT) stream to disk until the result: 30 MiB round-trips, replaced and cut-off ones leave nothing', async () => {
  const chat = await newChat(srv);
  const page = new Page(srv, chat, 'pg-put');
  await page.opened;
  const created = await call(srv, 'POST', `/v1/chats/${chat.id}/runs`, { body: { code: 'print(1)' } });
  assert.equal(created.status, 201);
  const ev = (await page.nextRun()).data;
  assert.equal((await page.started(ev)).status, 200);
  const path = (name) => `/v1/runs/${ev.run_id}/files/${name}?attempt=${ev.attempt}`;
  const big = bytes(30 * MIB, 21);
  const base = rssKiB(srv.pid);
  let peak = base;
  const put = await send(srv, path('plots/big.bin'), big, { method: 'PUT', token: chat.token, piece: 256 * 1024,
    onPiece: () => { peak = Math.max(peak, rssKiB(srv.pid)); } });
  assert.equal(put.status, 201, JSON.stringify(put));
  assert.deepEqual(put.json, { name: 'plots/big.bin', size: 30 * MIB, sha256: sha256(big) });
  assert.ok((peak - base) / 1024 < 16, `RSS grew by ${((peak - base) / 1024).toFixed(1)} MiB during a 30 MiB PUT`);
  assert.equal(tempFiles().length, 1); // waiting for the result, on disk
  // the same name again replaces it: still one temp file
  const small = Buffer.from('second version');
  assert.equal((await page.putFile(ev, 'plots/big.bin', small)).status, 201);
  const again = await send(srv, path('plots/big.bin'), big, { method: 'PUT', token: chat.token });
  assert.equal(again.status, 201);
  assert.equal(tempFiles().length, 1);
  // one cut off mid-body: nothing kept
  const cut = await send(srv, path('cut.bin'), bytes(20 * MIB, 22), { method: 'PUT', token: chat.token, stopAfter: 6 * MIB });
  assert.ok(cut.aborted);
  await waitFor(() => tempFiles().length === 1, 5000, 'the cut-off stage to go');
  // one not listed by the result: dropped with the run's uploads
  assert.equal((await page.putFile(ev, 'unlisted.txt', 'x')).status, 201);
  assert.equal(tempFiles().length, 2);
  const res = await page.result(ev, { files: [{ name: 'plots/big.bin', size: big.length, sha256: sha256(big), kind: 'file' }] });
  assert.equal(res.status, 200, JSON.stringify(res.json));
  assert.equal(res.json.files.length, 1);
  const back = await call(srv, 'GET', `/v1/files/${res.json.files[0].artifact_id}`);
  assert.ok(back.buf.equals(big), 'the artifact differs from the uploaded bytes');
  await waitFor(() => tempFiles().length === 0, 5000, 'the unlisted stage to go');
  // the same result again: the same answer (idempotent), nothing re-stored
  const res2 = await page.result(ev, { files: [{ name: 'plots/big.bin', size: big.length, sha256: sha256(big), kind: 'file' }] });
  assert.equal(res2.status, 200);
  assert.equal(res2.json.files[0].artifact_id, res.json.files[0].artifact_id);
  // a PUT for a run that has ended: 409 as ever, nothing written
  const late = await send(srv, path('late.bin'), bytes(4 * MIB, 23), { method: 'PUT', token: chat.token });
  assert.equal(late.status, 409);
  await noTemp();
  page.close();
});

test('an upload name holding a NUL (or a bad %-escape), or none, is a 400 invalid_name, and stores nothing', async () => {
  const chat = await newChat(srv);
  for (const q of ['name=a%00b.txt', 'name=%00', 'name=bad%zz.txt', 'source=attachment&name=x%00',
    '', 'name=', 'source=attachment', 'names=a.txt']) {
    const r = await call(srv, 'POST', `/v1/chats/${chat.id}/files?${q}`, { raw: 'hello' });
    assert.equal(r.status, 400, q);
    assert.equal(r.json.error.code, 'invalid_name', `${q}: ${r.buf}`);
  }
  const list = await call(srv, 'GET', `/v1/chats/${chat.id}/files`);
  assert.deepEqual(list.json.files, []);
});
