// orchestrator.test.mjs -- the orchestrator's API v1 over real HTTP with scripted pages:
// dispatch and result, wait_s, artifacts, naming, caps, stale attempts, idempotent results,
// auth across chats, hostile names, size limits, malformed JSON, execution off, and a SIGKILL
// restart that keeps every acknowledged result.  Run: node --test tests/integration/
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { startServer, call, newChat, upload, Page, sleep, tempDir } from './lib.mjs';

const sha = (b) => createHash('sha256').update(b).digest('hex');
let srv;
before(async () => { srv = await startServer(); });
after(async () => { await srv.stop('SIGTERM'); });

async function createRun(chat, body, opts = {}) {
  return call(srv, 'POST', `/v1/chats/${chat.id}/runs`, { body: { code: 'print(1)', ...body }, ...opts });
}

test('health, config and metrics answer', async () => {
  const h = await call(srv, 'GET', '/healthz', { token: null });
  assert.equal(h.status, 200);
  assert.equal(h.json.database.ok, true);
  const c = await call(srv, 'GET', '/v1/config', { token: null });
  assert.equal(c.json.code_execution, 'browser');
  assert.equal(c.json.time_limit_s, 60);
  const m = await call(srv, 'GET', '/metrics', { token: null });
  assert.match(m.buf.toString(), /cerea_runs_total\{status="ok"\}/);
  assert.match(m.buf.toString(), /cerea_run_duration_seconds_bucket/);
});

test('app pages are cross-origin isolated; worker scripts carry their CSP', async () => {
  for (const p of ['/', '/playground', '/chat/abc', '/admin']) {
    const r = await call(srv, 'GET', p, { token: null });
    assert.equal(r.status, 200, p);
    assert.equal(r.headers.get('cross-origin-opener-policy'), 'same-origin');
    assert.equal(r.headers.get('cross-origin-embedder-policy'), 'require-corp');
    // A script that got into the page can talk to this origin only.
    assert.match(r.headers.get('content-security-policy') || '', /connect-src 'self'/, p);
  }
  const w = await call(srv, 'GET', '/worker/../../etc/passwd', { token: null });
  assert.notEqual(w.status, 200);
});

test('dispatch, started, result; wait_s on create is woken by the result', async () => {
  const chat = await newChat(srv);
  const page = new Page(srv, chat, 'page-a');
  await page.opened;
  assert.equal(page.status, 200);
  const t0 = Date.now();
  const pending = createRun(chat, { code: 'print(6*7)', wait_s: 10 });
  const ev = await page.nextRun();
  assert.equal(ev.data.code, 'print(6*7)');
  assert.equal(ev.data.attempt, 1);
  assert.equal(ev.data.timeout_s, 60);
  assert.deepEqual(ev.data.limits, { out_chars: 8000, files_listed: 200, figures: 20, file_load_bytes: 52428800, displays: 20, input_wait_s: 300 });
  assert.equal(ev.data.heartbeat_ms, 2000);
  assert.equal((await page.started(ev.data)).status, 200);
  await sleep(200);
  const res = await page.result(ev.data, { stdout: '42\n' });
  assert.equal(res.status, 200);
  assert.equal(res.json.status, 'ok');
  const created = await pending;
  assert.equal(created.status, 201);
  assert.equal(created.json.state, 'done');
  assert.equal(created.json.stdout, '42\n');
  assert.ok(Date.now() - t0 < 5000, 'woken by the result, not by wait_s');
  for (const k of ['run_id', 'chat_id', 'turn_id', 'origin', 'state', 'status', 'stdout', 'stderr', 'stdout_truncated', 'stderr_truncated', 'error', 'files', 'files_unlisted', 'figures_dropped', 'notes', 'restarted', 'remounted', 'attempts', 'created_at', 'started_at', 'finished_at', 'duration_ms', 'value', 'displays'])
    assert.ok(k in created.json, `run object has ${k}`);
  assert.ok(created.json.duration_ms >= 150);
  // GET with wait_s on a finished run answers at once
  const g = await call(srv, 'GET', `/v1/runs/${created.json.run_id}?wait_s=5`);
  assert.equal(g.json.status, 'ok');
  page.close();
});

test('wait_s expires with the run still going; GET wait_s is woken by the result', async () => {
  const chat = await newChat(srv);
  const page = new Page(srv, chat, 'p1');
  await page.opened;
  const t0 = Date.now();
  const r = await createRun(chat, { wait_s: 0.5 });
  assert.equal(r.status, 201);
  assert.ok(Date.now() - t0 >= 450);
  assert.notEqual(r.json.state, 'done');
  const ev = await page.nextRun();
  const waiting = call(srv, 'GET', `/v1/runs/${r.json.run_id}?wait_s=10`);
  await sleep(100);
  await page.result(ev.data, { status: 'error', error: { type: 'ZeroDivisionError', message: 'division by zero', traceback: 'Traceback...' } });
  const g = await waiting;
  assert.equal(g.json.status, 'error');
  assert.equal(g.json.error.type, 'ZeroDivisionError');
  page.close();
});

test('runs of a chat go one at a time, in order; a run waits for a page and still gets the files', async () => {
  const chat = await newChat(srv);
  assert.equal((await upload(srv, chat, 'sales.csv', 'a,b\n1,2\n')).status, 201);
  const r1 = await createRun(chat, { code: 'one' });
  const r2 = await createRun(chat, { code: 'two' });
  assert.equal(r1.json.state, 'paused'); // no page yet: waiting
  const page = new Page(srv, chat, 'late');
  await page.opened;
  const e1 = await page.nextRun();
  assert.equal(e1.data.code, 'one');
  assert.deepEqual(e1.data.mounts.map((m) => m.name), ['sales.csv']);
  await sleep(150);
  assert.equal(page.events.filter((e) => e.event === 'run').length, 1, 'second run waits for the first');
  await page.result(e1.data);
  const e2 = await page.nextRun();
  assert.equal(e2.data.code, 'two');
  await page.result(e2.data);
  page.close();
});

test('output files become artifacts: byte-identical download, next version, mounted next run; figures only when named', async () => {
  const chat = await newChat(srv);
  const page = new Page(srv, chat, 'pg');
  await page.opened;
  const bin = randomBytes(200000);
  const png = randomBytes(5000);
  const r = await createRun(chat, { code: 'make files' });
  const ev = await page.nextRun();
  assert.equal((await page.putFile(ev.data, 'plots/data.bin', bin)).status, 201);
  assert.equal((await page.putFile(ev.data, 'figure-1.png', png)).status, 201);
  const res = await page.result(ev.data, { files: [
    { name: 'plots/data.bin', size: bin.length, sha256: sha(bin), kind: 'file' },
    { name: 'figure-1.png', size: png.length, sha256: sha(png), kind: 'figure' }] });
  assert.equal(res.status, 200, res.buf.toString());
  assert.deepEqual(res.json.files.map((f) => [f.name, f.kind, f.version]), [['plots/data.bin', 'file', 1], ['figure-1.png', 'figure', 1]]);
  const dl = await call(srv, 'GET', `/v1/files/${res.json.files[0].artifact_id}`);
  assert.equal(dl.status, 200);
  assert.ok(dl.buf.equals(bin), 'byte-identical');
  const dlPage = await call(srv, 'GET', `/v1/files/${res.json.files[1].artifact_id}`, { token: chat.token });
  assert.ok(dlPage.buf.equals(png));
  const list = await call(srv, 'GET', `/v1/chats/${chat.id}/files`);
  const out = list.json.files.find((f) => f.name === 'plots/data.bin');
  assert.equal(out.source, 'output');
  assert.ok(out.expires_at > Date.now() + 29 * 86400000, 'kept for the retention period');
  // next run: the output is mounted; the figure is not (code does not name it)
  await createRun(chat, { code: 'print(open("/mnt/data/plots/data.bin","rb").read()[:3])' });
  const ev2 = await page.nextRun();
  assert.deepEqual(ev2.data.mounts.map((m) => m.name), ['plots/data.bin']);
  const png2 = randomBytes(3000);
  await page.putFile(ev2.data, 'figure-1.png', png2);
  const res2 = await page.result(ev2.data, { files: [{ name: 'figure-1.png', size: png2.length, sha256: sha(png2), kind: 'figure' }] });
  assert.equal(res2.json.files[0].version, 2, 'a redraw is the next version of the same artifact');
  // a run that names the figure gets it, at its latest version
  await createRun(chat, { code: 'Image.open("/mnt/data/figure-1.png")' });
  const ev3 = await page.nextRun();
  const fig = ev3.data.mounts.find((m) => m.name === 'figure-1.png');
  assert.ok(fig);
  assert.equal(fig.version, 2);
  const viaUrl = await call(srv, 'GET', fig.url, { token: chat.token });
  assert.ok(viaUrl.buf.equals(png2));
  await page.result(ev3.data);
  page.close();
  void r;
});

test('listed files must have been uploaded; a stale attempt\'s upload is refused', async () => {
  const chat = await newChat(srv);
  const page = new Page(srv, chat, 'pg');
  await page.opened;
  await createRun(chat, {});
  const ev = await page.nextRun();
  const r = await page.result(ev.data, { files: [{ name: 'missing.txt', size: 1, kind: 'file' }] });
  assert.equal(r.status, 400);
  assert.equal(r.json.error.code, 'file_not_uploaded');
  assert.equal((await page.putFile(ev.data, 'x.txt', 'x', 7)).status, 409);
  assert.equal((await page.result(ev.data)).status, 200);
  page.close();
});

test('duplicates and renames follow the naming rules', async () => {
  const chat = await newChat(srv);
  const a = await upload(srv, chat, 'report.pdf', 'AAAA');
  assert.equal(a.status, 201);
  assert.equal(a.json.path, '/mnt/data/report.pdf');
  assert.match(a.json.code_note, /^The file is available to code at \/mnt\/data\/report\.pdf/);
  const again = await upload(srv, chat, 'report.pdf', 'AAAA');
  assert.equal(again.status, 200);
  assert.equal(again.json.file_id, a.json.file_id);
  const other = await upload(srv, chat, 'report.pdf', 'BBBB');
  assert.equal(other.status, 201);
  assert.equal(other.json.name, 'report (2).pdf');
  const text = await upload(srv, chat, null, '# extracted', { text_of: a.json.file_id });
  assert.equal(text.status, 201);
  assert.equal(text.json.name, 'report.pdf.md');
  const t1 = await upload(srv, chat, 'memo.docx', 'v1', { source: 'tool' });
  const t2 = await upload(srv, chat, 'memo.docx', 'v2', { source: 'tool' });
  assert.equal(t1.json.version, 1);
  assert.equal(t2.json.version, 2);
  assert.equal(t2.json.name, 'memo.docx');
  const list = await call(srv, 'GET', `/v1/chats/${chat.id}/files`, { token: chat.token });
  assert.deepEqual(list.json.files.map((f) => `${f.name}@${f.version}`).sort(), ['memo.docx@2', 'report (2).pdf@1', 'report.pdf.md@1', 'report.pdf@1']);
});

test('size caps: over 20 MB stored but not mounted; the file crossing 100 MB left out, with reasons and no path', async () => {
  const chat = await newChat(srv);
  const big = Buffer.alloc(20 * 1024 * 1024 + 1, 1);
  const r = await upload(srv, chat, 'big.bin', big);
  assert.equal(r.status, 201);
  assert.equal(r.json.mounted, false);
  assert.equal(r.json.path, null);
  assert.equal(r.json.code_note, null);
  assert.match(r.json.left_out_reason, /20 MB/);
  const twenty = Buffer.alloc(20 * 1024 * 1024, 2);
  for (let i = 1; i <= 5; i++) assert.equal((await upload(srv, chat, `part${i}.bin`, twenty)).json.mounted, true);
  const over = await upload(srv, chat, 'one-more.txt', 'x');
  assert.equal(over.json.mounted, false);
  assert.match(over.json.left_out_reason, /100 MB/);
  const page = new Page(srv, chat, 'pg');
  await page.opened;
  await createRun(chat, {});
  const ev = await page.nextRun();
  assert.deepEqual(ev.data.mounts.map((m) => m.name), ['part1.bin', 'part2.bin', 'part3.bin', 'part4.bin', 'part5.bin']);
  assert.deepEqual(ev.data.left_out.map((l) => l.name), ['big.bin', 'one-more.txt']);
  assert.ok(ev.data.left_out.every((l) => l.reason && !('path' in l)));
  await page.result(ev.data);
  page.close();
});

test('uploads over 50 MB are refused with 413; 50 MB exactly is stored', async () => {
  // Its own server: see docs/api.md (a request after a 413 on the same keep-alive connection
  // aborted the transport's HTTP/1.1 peer when this was written).
  const own = await startServer();
  try {
    const chat = await newChat(own);
    const ok = await upload(own, chat, 'fifty.bin', Buffer.alloc(50 * 1024 * 1024, 7));
    assert.equal(ok.status, 201);
    assert.equal(ok.json.mounted, false);
    // Announce 50 MB + 1 and wait for the answer before sending the body: the server refuses on
    // the Content-Length (a client still writing when the server closes sees ECONNRESET).
    const status = await new Promise((resolve, reject) => {
      const req = httpRequest({ host: '127.0.0.1', port: own.port, method: 'POST',
        path: `/v1/chats/${chat.id}/files?name=huge.bin`,
        headers: { authorization: `Bearer ${own.key}`, 'content-length': 50 * 1024 * 1024 + 1 } });
      req.on('response', (res) => { resolve(res.statusCode); res.resume(); req.destroy(); });
      req.on('error', reject);
      req.flushHeaders();
    });
    assert.equal(status, 413);
  } finally { await own.stop(); }
});

test('hostile names are refused with 400', async () => {
  const chat = await newChat(srv);
  for (const n of ['../etc/passwd', 'a/b.txt', '/abs', '..', 'nul\u0000x', 'ctl\u0001x', 'x'.repeat(300), '']) {
    const r = await upload(srv, chat, n, 'x');
    assert.equal(r.status, 400, JSON.stringify(n));
    assert.ok(r.json.error.code);
  }
  const page = new Page(srv, chat, 'pg');
  await page.opened;
  await createRun(chat, {});
  const ev = await page.nextRun();
  for (const n of ['%2e%2e/x', 'a/%2e%2e/%2e%2e/x', 'a%00b', 'a%5Cb']) {
    const r = await call(srv, 'PUT', `/v1/runs/${ev.data.run_id}/files/${n}`, { token: chat.token, raw: 'x' });
    assert.ok(r.status === 400 || r.status === 404, `${n}: ${r.status}`);
  }
  await page.result(ev.data);
  page.close();
});

test('malformed JSON and invalid fields are 400; unknown ids 404', async () => {
  const chat = await newChat(srv);
  const cases = [['{', 'malformed_json'], ['[1]', 'malformed_json'], [{ origin: 'tool' }, 'invalid_field'],
    [{ code: 'x', origin: 'robot' }, 'invalid_field'], [{ code: 'x', wait_s: -1 }, 'invalid_field'],
    [{ code: 'x', timeout_s: 301 }, 'invalid_field'], [{ code: 5 }, 'invalid_field']];
  for (const [body, code] of cases) {
    const r = await call(srv, 'POST', `/v1/chats/${chat.id}/runs`, { body });
    assert.equal(r.status, 400, JSON.stringify(body));
    assert.equal(r.json.error.code, code);
  }
  assert.equal((await call(srv, 'POST', `/v1/chats/${'0'.repeat(32)}/runs`, { body: { code: 'x' } })).status, 404);
  assert.equal((await call(srv, 'GET', `/v1/runs/${'0'.repeat(32)}`)).status, 404);
  assert.equal((await call(srv, 'GET', `/v1/files/${'0'.repeat(32)}`)).status, 404);
  assert.equal((await call(srv, 'GET', '/v1/runs/not-an-id')).status, 404);
});

test('a page token reaches its chat only: 401 without or with a wrong credential, 403/404 across chats', async () => {
  const a = await newChat(srv);
  const b = await newChat(srv);
  const fb = await upload(srv, b, 'secret.txt', 'b-secret');
  const pageB = new Page(srv, b, 'pb');
  await pageB.opened;
  const rb = await createRun(b, {});
  const evb = await pageB.nextRun();
  // no credential / wrong one
  assert.equal((await call(srv, 'GET', `/v1/chats/${b.id}/files`, { token: null })).status, 401);
  assert.equal((await call(srv, 'GET', `/v1/chats/${b.id}/files`, { token: 'nope' })).status, 401);
  assert.equal((await call(srv, 'GET', `/v1/chats/${b.id}/files`, { token: `${b.id}.${'0'.repeat(64)}` })).status, 401);
  // chat a's token on chat b's objects
  const t = a.token;
  assert.equal((await call(srv, 'GET', `/v1/chats/${b.id}/files`, { token: t })).status, 403);
  assert.equal((await upload(srv, b, 'x.txt', 'x', { token: t })).status, 403);
  assert.equal((await call(srv, 'POST', `/v1/chats/${b.id}/runs`, { token: t, body: { code: 'x' } })).status, 403);
  assert.equal((await call(srv, 'POST', `/v1/chats/${b.id}/presence`, { token: t, body: { page_id: 'pb', visible: false } })).status, 403);
  const spy = new Page(srv, b, 'spy', { token: t });
  await spy.opened;
  assert.equal(spy.status, 403);
  const qs = await fetch(`${srv.base}/v1/chats/${b.id}/events?page_id=q&token=${encodeURIComponent(t)}`);
  assert.equal(qs.status, 403);
  assert.equal((await call(srv, 'GET', `/v1/files/${fb.json.file_id}`, { token: t })).status, 404);
  assert.equal((await call(srv, 'GET', `/v1/runs/${rb.json.run_id}`, { token: t })).status, 404);
  assert.equal((await call(srv, 'POST', `/v1/runs/${rb.json.run_id}/result`, { token: t, body: { attempt: 1, status: 'ok' } })).status, 404);
  assert.equal((await call(srv, 'PUT', `/v1/runs/${rb.json.run_id}/files/x.txt`, { token: t, raw: 'x' })).status, 404);
  assert.equal((await call(srv, 'POST', '/v1/chats', { token: t, body: {} })).status, 403);
  // the right token works, also as ?token= on the event stream
  const qok = await fetch(`${srv.base}/v1/chats/${b.id}/events?page_id=q2&token=${encodeURIComponent(b.token)}`);
  assert.equal(qok.status, 200);
  await qok.body.cancel();
  assert.equal((await pageB.result(evb.data)).status, 200);
  pageB.close();
});

test('stale attempts: hidden mid-run -> paused -> another page -> attempt 2; attempt 1 refused', async () => {
  const chat = await newChat(srv);
  const p1 = new Page(srv, chat, 'phone');
  await p1.opened;
  const r = await createRun(chat, {});
  const ev1 = await p1.nextRun();
  await p1.started(ev1.data);
  assert.equal((await p1.presence(false)).status, 200);
  let g = await call(srv, 'GET', `/v1/runs/${r.json.run_id}`);
  assert.equal(g.json.state, 'paused');
  const p2 = new Page(srv, chat, 'laptop');
  await p2.opened;
  const ev2 = await p2.nextRun();
  assert.equal(ev2.data.attempt, 2);
  const stale = await p1.result(ev1.data, { stdout: 'old' });
  assert.equal(stale.status, 409);
  assert.equal((await p1.started(ev1.data)).status, 409);
  // p1 also saw the event for attempt 2 (same chat): it is not addressed to it
  const seenByP1 = await p1.next((e) => e.event === 'run' && e.data.attempt === 2);
  assert.equal(seenByP1.data.page_id, 'laptop');
  const wrong = await p1.started(seenByP1.data);
  assert.equal(wrong.status, 409);
  assert.equal(wrong.json.error.code, 'other_page');
  assert.equal((await p2.started(ev2.data)).status, 200);
  const fresh = await p2.result(ev2.data, { stdout: 'new' });
  assert.equal(fresh.status, 200);
  g = await call(srv, 'GET', `/v1/runs/${r.json.run_id}`);
  assert.equal(g.json.stdout, 'new');
  assert.equal(g.json.attempts, 2);
  p1.close(); p2.close();
});

test('idempotent results: the same result twice -> the same answer; a different one -> 409', async () => {
  const chat = await newChat(srv);
  const page = new Page(srv, chat, 'pg');
  await page.opened;
  await createRun(chat, {});
  const ev = await page.nextRun();
  const body = { stdout: 'same', notes: ['n1'] };
  const [a, b] = await Promise.all([page.result(ev.data, body), page.result(ev.data, body)]);
  assert.equal(a.status, 200);
  assert.equal(b.status, 200);
  assert.deepEqual(a.json, b.json);
  const c = await page.result(ev.data, body);
  assert.deepEqual(c.json, a.json);
  assert.equal((await page.result(ev.data, { stdout: 'different' })).status, 409);
  page.close();
});

test('idempotency_key on create returns the first run', async () => {
  const chat = await newChat(srv);
  const a = await createRun(chat, { idempotency_key: 'k1' });
  const b = await createRun(chat, { idempotency_key: 'k1' });
  assert.equal(a.status, 201);
  assert.equal(b.status, 200);
  assert.equal(a.json.run_id, b.json.run_id);
});

test('event stream resumes with Last-Event-ID: missed events replayed', async () => {
  const chat = await newChat(srv);
  const p = new Page(srv, chat, 'pg');
  await p.opened;
  await upload(srv, chat, 'a.txt', 'a');
  const f1 = await p.next('files');
  p.close();
  await sleep(100);
  await upload(srv, chat, 'b.txt', 'b');
  await upload(srv, chat, 'c.txt', 'c');
  await sleep(100);
  const p2 = new Page(srv, chat, 'pg', { lastEventId: f1.id });
  await p2.opened;
  const e2 = await p2.next('files');
  const e3 = await p2.next('files');
  assert.equal(e2.id, f1.id + 1);
  assert.equal(e3.id, f1.id + 2);
  assert.deepEqual([e2.data.name, e3.data.name], ['b.txt', 'c.txt']);
  p2.close();
});

test('cancel: a queued run ends at once; a running one is told and ends on the page\'s answer', async () => {
  const chat = await newChat(srv);
  const q = await createRun(chat, {});
  const c1 = await call(srv, 'POST', `/v1/runs/${q.json.run_id}/cancel`);
  assert.equal(c1.status, 200);
  assert.equal(c1.json.status, 'cancelled');
  assert.equal((await call(srv, 'POST', `/v1/runs/${q.json.run_id}/cancel`)).status, 409);
  const page = new Page(srv, chat, 'pg');
  await page.opened;
  const r = await createRun(chat, {});
  const ev = await page.nextRun();
  await page.started(ev.data);
  const c2 = await call(srv, 'POST', `/v1/runs/${r.json.run_id}/cancel`);
  assert.equal(c2.status, 202);
  const cev = await page.next('cancel');
  assert.equal(cev.data.run_id, r.json.run_id);
  assert.equal((await page.result(ev.data, { status: 'cancelled' })).json.status, 'cancelled');
  page.close();
});

test('CHAT_CODE_EXECUTION=off: runs rejected with a clear error; no code_note', async () => {
  const off = await startServer({ env: { CHAT_CODE_EXECUTION: 'off' } });
  try {
    const chat = await newChat(off);
    const f = await upload(off, chat, 'a.csv', '1');
    assert.equal(f.json.mounted, true);
    assert.equal(f.json.code_note, null);
    const r = await call(off, 'POST', `/v1/chats/${chat.id}/runs`, { body: { code: 'print(1)' } });
    assert.equal(r.status, 201);
    assert.equal(r.json.state, 'done');
    assert.equal(r.json.status, 'rejected');
    assert.equal(r.json.error.type, 'ExecutionDisabled');
    assert.match(r.json.error.message, /CHAT_CODE_EXECUTION=off/);
    const g = await call(off, 'GET', `/v1/runs/${r.json.run_id}`);
    assert.equal(g.json.status, 'rejected');
  } finally { await off.stop(); }
});

test('SIGKILL and restart: every acknowledged result intact; an unfinished run comes back', async () => {
  const dataDir = tempDir('kill');
  let s = await startServer({ dataDir });
  const chat = await newChat(s);
  const page = new Page(s, chat, 'pg');
  await page.opened;
  const acked = [];
  for (let i = 0; i < 5; i++) {
    const r = await call(s, 'POST', `/v1/chats/${chat.id}/runs`, { body: { code: `run ${i}` } });
    const ev = await page.nextRun();
    const data = randomBytes(1000 + i);
    await page.putFile(ev.data, `out/${i}.bin`, data);
    const res = await page.result(ev.data, { stdout: `out ${i}`, files: [{ name: `out/${i}.bin`, size: data.length, sha256: sha(data), kind: 'file' }] });
    assert.equal(res.status, 200);
    acked.push({ id: r.json.run_id, data, art: res.json.files[0].artifact_id });
  }
  const unfinished = await call(s, 'POST', `/v1/chats/${chat.id}/runs`, { body: { code: 'in flight' } });
  await page.nextRun();
  page.close();
  await s.stop('SIGKILL');
  s = await startServer({ dataDir });
  try {
    for (const [i, a] of acked.entries()) {
      const g = await call(s, 'GET', `/v1/runs/${a.id}`, { token: chat.token });
      assert.equal(g.json.status, 'ok');
      assert.equal(g.json.stdout, `out ${i}`);
      const dl = await call(s, 'GET', `/v1/files/${a.art}`, { token: chat.token });
      assert.ok(dl.buf.equals(a.data));
    }
    const p2 = new Page(s, chat, 'pg2');
    await p2.opened;
    const ev = await p2.nextRun();
    assert.equal(ev.data.run_id, unfinished.json.run_id);
    assert.equal(ev.data.attempt, 2, 'a new attempt after the restart');
    assert.equal((await p2.result(ev.data)).status, 200);
    p2.close();
  } finally { await s.stop(); }
});

test('startup errors are one clear line: port in use, unwritable data dir', async () => {
  const { spawnSync } = await import('node:child_process');
  const { BIN, ROOT } = await import('./lib.mjs');
  const r1 = spawnSync(BIN, ['serve', '--listen', `127.0.0.1:${srv.port}`, '--data', tempDir('busy')], { cwd: ROOT, env: { ...process.env, CEREA_API_KEY: 'x'.repeat(20) }, encoding: 'utf8', timeout: 5000 });
  assert.equal(r1.status, 1);
  assert.match(r1.stderr, /address already in use/);
  const r2 = spawnSync(BIN, ['serve', '--listen', '127.0.0.1:0', '--data', '/proc/forbidden/x'], { cwd: ROOT, env: { ...process.env, CEREA_API_KEY: 'x'.repeat(20) }, encoding: 'utf8', timeout: 5000 });
  assert.equal(r2.status, 1);
  assert.match(r2.stderr, /data directory .* (cannot be created|is not writable)/);
  const r3 = spawnSync(BIN, ['serve', '--static', '/nonexistent/www'], { cwd: ROOT, encoding: 'utf8', timeout: 5000 });
  assert.equal(r3.status, 1);
  assert.match(r3.stderr, /scripts\/setup\.sh/);
  const r4 = spawnSync(BIN, ['serve'], { cwd: ROOT, env: { ...process.env, CODE_TIME_LIMIT_S: '900' }, encoding: 'utf8', timeout: 5000 });
  assert.equal(r4.status, 1);
  assert.match(r4.stderr, /CODE_TIME_LIMIT_S=900/);
});

test('the same flow over HTTP/2 (h2c): event stream, run with wait_s, result', async () => {
  const http2 = await import('node:http2');
  const chat = await newChat(srv);
  const s = http2.connect(srv.base);
  const req = (method, path, token, body) => new Promise((resolve, reject) => {
    const r = s.request({ ':method': method, ':path': path, authorization: `Bearer ${token}`, 'content-type': 'application/json' });
    let status = 0; const chunks = [];
    r.on('response', (h) => { status = h[':status']; });
    r.on('data', (c) => chunks.push(c));
    r.on('end', () => resolve({ status, json: JSON.parse(Buffer.concat(chunks).toString() || 'null') }));
    r.on('error', reject);
    r.end(body ? JSON.stringify(body) : undefined);
  });
  try {
    const ev = s.request({ ':method': 'GET', ':path': `/v1/chats/${chat.id}/events?page_id=h2`, authorization: `Bearer ${chat.token}` });
    ev.setEncoding('utf8');
    let buf = '';
    const answered = new Promise((resolve) => ev.on('data', (d) => {
      buf += d;
      const m = /event: run\ndata: (.*)\n/.exec(buf);
      if (m) { const run = JSON.parse(m[1]); buf = ''; req('POST', `/v1/runs/${run.run_id}/result`, chat.token, { attempt: run.attempt, status: 'ok', stdout: 'h2' }).then(resolve); }
    }));
    await new Promise((r) => ev.on('response', r));
    const created = await req('POST', `/v1/chats/${chat.id}/runs`, srv.key, { code: 'x', wait_s: 10 });
    assert.equal(created.status, 201);
    assert.equal(created.json.status, 'ok');
    assert.equal(created.json.stdout, 'h2');
    assert.equal((await answered).status, 200);
    ev.close();
  } finally { s.close(); }
});

test('CLI: `run` posts code and prints the result; `status` prints health and live state', async () => {
  const { spawn, spawnSync } = await import('node:child_process');
  const { BIN, ROOT } = await import('./lib.mjs');
  const chat = await newChat(srv);
  const page = new Page(srv, chat, 'cli-page');
  await page.opened;
  const child = spawn(BIN, ['run', '--url', srv.base, '--key', srv.key, '--chat', chat.id, '--wait', '10', '-'], { cwd: ROOT });
  let out = '', err = '';
  child.stdout.on('data', (d) => { out += d; });
  child.stderr.on('data', (d) => { err += d; });
  const exited = new Promise((r) => child.on('exit', r)); // (it may exit before result() returns)
  child.stdin.end('print("from the cli")\n');
  const ev = await page.nextRun();
  assert.equal(ev.data.code, 'print("from the cli")\n');
  assert.equal(ev.data.origin, 'user');
  await page.result(ev.data, { stdout: 'from the cli\n', stderr: 'warn\n' });
  const code = await exited;
  assert.equal(code, 0, err);
  assert.equal(out, 'from the cli\n');
  assert.match(err, /warn\n.*: ok/s);
  const st = spawnSync(BIN, ['status', '--url', srv.base, '--key', srv.key], { encoding: 'utf8' });
  assert.equal(st.status, 0);
  assert.match(st.stdout, /^healthz 200 .*"database":\{"ok":true/m);
  assert.match(st.stdout, /^pages 200 .*cli-page/m);
  const bad = spawnSync(BIN, ['status', '--url', 'http://127.0.0.1:1'], { encoding: 'utf8' });
  assert.equal(bad.status, 2, 'a server that is down: exit 2, as documented (1 is a degraded one)');
  assert.match(bad.stderr, /cannot connect/);
  page.close();
});

test('TLS: --tls-cert/--tls-key serve HTTPS with ALPN h2 and HTTP/1.1 on the same port', async (t) => {
  const { spawnSync } = await import('node:child_process');
  const https = await import('node:https');
  const http2 = await import('node:http2');
  const { join } = await import('node:path');
  const dir = tempDir('tls');
  const gen = spawnSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
    '-days', '2', '-subj', '/CN=localhost', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')], { encoding: 'utf8' });
  if (gen.status !== 0) { t.skip(`openssl could not make a certificate: ${gen.stderr}`); return; }
  const tls = await startServer({ env: { CEREA_TLS_CERT: join(dir, 'cert.pem'), CEREA_TLS_KEY: join(dir, 'key.pem') } });
  try {
    const h1 = await new Promise((resolve, reject) => {
      https.get({ host: '127.0.0.1', port: tls.port, path: '/healthz', rejectUnauthorized: false }, (res) => {
        let b = ''; res.on('data', (d) => { b += d; }); res.on('end', () => resolve({ status: res.statusCode, body: b }));
      }).on('error', reject);
    });
    assert.equal(h1.status, 200);
    assert.match(h1.body, /"database":\{"ok":true/);
    const s = http2.connect(`https://127.0.0.1:${tls.port}`, { rejectUnauthorized: false });
    const h2 = await new Promise((resolve, reject) => {
      const r = s.request({ ':path': '/v1/chats', ':method': 'POST', authorization: `Bearer ${tls.key}` });
      let status = 0, b = '';
      r.on('response', (h) => { status = h[':status']; });
      r.on('data', (d) => { b += d; });
      r.on('end', () => resolve({ status, body: b, alpn: s.alpnProtocol }));
      r.on('error', reject);
      r.end('{}');
    });
    s.close();
    assert.equal(h2.alpn, 'h2');
    assert.equal(h2.status, 201);
    assert.match(h2.body, /"page_token"/);
  } finally { await tls.stop(); }
});
