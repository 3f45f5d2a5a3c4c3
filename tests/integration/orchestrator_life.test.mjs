// orchestrator_life.test.mjs -- a run's life across pages that hide, drop and come back, with
// short timings: pause and resume (new attempt, stale result refused), abandoned past the wait,
// stream resumed within the grace (events replayed, the run carries on), past the grace (paused,
// re-dispatched), the watchdog, cancel with its grace, turns, and the admin views and settings.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, call, newChat, upload, Page, sleep, tempDir, helpers } from './lib.mjs';

const env = { CODE_PAUSED_WAIT_MS: '1500', PAGE_GRACE_MS: '800', CODE_TIME_LIMIT_S: '1',
  CODE_WATCHDOG_GRACE_MS: '500', CODE_CANCEL_GRACE_MS: '500' };
let srv;
const dataDir = tempDir('life');
before(async () => { srv = await startServer({ dataDir, env }); });
after(async () => { await srv.stop(); });

const { createRun, getRun, openPage } = helpers(() => srv);
// Create a run, take its dispatch on page `p` and report it started: { r: create reply, e: run event }.
const startRun = async (chat, p) => {
  const r = await createRun(chat);
  const e = await p.nextRun();
  await p.started(e.data);
  return { r, e };
};

test('hidden mid-run: paused; visible again: re-dispatched as attempt 2; attempt 1 refused', async () => {
  const chat = await newChat(srv);
  const p = await openPage(chat, 'phone');
  const { r, e: e1 } = await startRun(chat, p);
  await p.presence(false, 'busy');
  assert.equal((await getRun(r.json.run_id)).json.state, 'paused');
  const back = await p.presence(true, 'ready');
  assert.equal(back.json.active, true);
  const e2 = await p.nextRun();
  assert.equal(e2.data.attempt, 2);
  assert.equal((await p.result(e1.data)).status, 409);
  assert.equal((await p.result(e2.data, { stdout: 'second' })).status, 200);
  const m = await call(srv, 'GET', '/metrics', { token: null });
  assert.match(m.buf.toString(), /cerea_runs_paused_total [1-9]/);
  p.close();
});

test('hidden past CODE_PAUSED_WAIT_MS: abandoned with a message the assistant can relay', async () => {
  const chat = await newChat(srv);
  const p = await openPage(chat, 'phone');
  const r = await createRun(chat);
  await p.nextRun();
  await p.presence(false);
  const t0 = Date.now();
  const g = await getRun(r.json.run_id, 10);
  assert.equal(g.json.status, 'abandoned');
  assert.ok(Date.now() - t0 >= 1200 && Date.now() - t0 < 5000);
  assert.match(g.json.error.message, /keep the chat open/);
  p.close();
});

test('a run queued while no page is visible waits, then is abandoned', async () => {
  const chat = await newChat(srv);
  const r = await createRun(chat, { wait_s: 10 });
  assert.equal(r.json.status, 'abandoned');
});

test('stream dropped and resumed within the grace: missed events replayed, the run carries on', async () => {
  const chat = await newChat(srv);
  const p = await openPage(chat);
  const { r, e: e1 } = await startRun(chat, p);
  const last = p.lastId;
  p.close();
  await sleep(100);
  await upload(srv, chat, 'during-gap.txt', 'x');
  await sleep(200);
  assert.equal((await getRun(r.json.run_id)).json.state, 'running');
  const p2 = await openPage(chat, 'tab', { lastEventId: last });
  const f = await p2.next('files');
  assert.equal(f.data.name, 'during-gap.txt');
  assert.equal(f.id, last + 1);
  const res = await p2.result(e1.data, { stdout: 'same attempt' });
  assert.equal(res.status, 200);
  assert.equal(res.json.attempts, 1);
  p2.close();
});

test('past the grace: the page is gone, its run paused, then re-dispatched to the page that comes back', async () => {
  const chat = await newChat(srv);
  const p = await openPage(chat);
  const { r, e: e1 } = await startRun(chat, p);
  p.close();
  await sleep(1300);
  assert.equal((await getRun(r.json.run_id)).json.state, 'paused');
  const pages = await call(srv, 'GET', '/v1/admin/pages');
  assert.ok(!pages.json.pages.some((x) => x.chat_id === chat.id && x.page_id === 'tab'));
  const p2 = await openPage(chat, 'tab', { lastEventId: p.lastId });
  const e2 = await p2.nextRun();
  assert.equal(e2.data.attempt, 2);
  assert.equal((await p2.result(e2.data)).status, 200);
  p2.close();
});

test('watchdog: never started -> crashed; started and silent -> timeout; the page is told to restart', async () => {
  const chat = await newChat(srv);
  const p = await openPage(chat);
  const r1 = await createRun(chat);
  const e1 = await p.nextRun();
  const g1 = await getRun(r1.json.run_id, 10);
  assert.equal(g1.json.status, 'crashed');
  assert.equal(g1.json.restarted, true);
  const rs = await p.next('restart');
  assert.equal(rs.data.run_id, e1.data.run_id);
  const { r: r2, e: e2 } = await startRun(chat, p);
  const g2 = await getRun(r2.json.run_id, 10);
  assert.equal(g2.json.status, 'timeout');
  assert.equal((await p.next('restart')).data.run_id, r2.json.run_id);
  assert.equal((await p.result(e2.data)).status, 409, 'too late');
  p.close();
});

test('cancel a running run: cancel event; no answer within the grace -> cancelled and restart', async () => {
  const chat = await newChat(srv);
  const p = await openPage(chat);
  const { r, e } = await startRun(chat, p);
  const c = await call(srv, 'POST', `/v1/runs/${r.json.run_id}/cancel`);
  assert.equal(c.status, 202);
  assert.equal((await p.next('cancel')).data.run_id, r.json.run_id);
  const g = await getRun(r.json.run_id, 10);
  assert.equal(g.json.status, 'cancelled');
  assert.equal((await p.next('restart')).data.run_id, r.json.run_id);
  p.close();
});

test('turns: finish schedules each python block as an auto run, in order', async () => {
  const chat = await newChat(srv);
  const t = await call(srv, 'POST', `/v1/chats/${chat.id}/turns`, { body: {} });
  assert.equal(t.status, 201);
  assert.equal((await call(srv, 'POST', `/v1/chats/${chat.id}/turns`, { token: chat.token, body: {} })).status, 403);
  const tool = await createRun(chat, { code: 'tool', turn_id: t.json.turn_id, origin: 'tool' });
  assert.equal(tool.json.turn_id, t.json.turn_id);
  const answer = 'Here:\n```python\nfirst()\n```\nand\n```js\nnot()\n```\n~~~python\nsecond()\n~~~\n```py\nthird()\n```\n';
  const f = await call(srv, 'POST', `/v1/turns/${t.json.turn_id}/finish`, { body: { answer } });
  assert.equal(f.status, 200);
  assert.equal(f.json.runs.length, 3);
  assert.equal((await call(srv, 'POST', `/v1/turns/${t.json.turn_id}/finish`, { body: { answer } })).status, 409);
  const p = await openPage(chat);
  const codes = [];
  for (let i = 0; i < 4; i++) {
    const e = await p.nextRun();
    codes.push([e.data.code, e.data.origin]);
    await p.result(e.data);
  }
  assert.deepEqual(codes, [['tool', 'tool'], ['first()', 'auto'], ['second()', 'auto'], ['third()', 'auto']]);
  for (const id of f.json.runs) assert.equal((await getRun(id)).json.turn_id, t.json.turn_id);
  assert.equal((await call(srv, 'POST', `/v1/turns/${'0'.repeat(32)}/finish`, { body: { answer } })).status, 404);
  p.close();
});

test('admin: runs and pages views; settings round trip, persisted across a restart', async () => {
  const chat = await newChat(srv);
  assert.equal((await call(srv, 'GET', '/v1/admin/runs', { token: chat.token })).status, 403);
  assert.equal((await call(srv, 'GET', '/v1/admin/settings', { token: null })).status, 401);
  const runs = await call(srv, 'GET', '/v1/admin/runs');
  assert.ok(Array.isArray(runs.json.live) && runs.json.recent.length > 0);
  const s0 = await call(srv, 'GET', '/v1/admin/settings');
  assert.equal(s0.json.retention_days, 30);
  assert.equal((await call(srv, 'PUT', '/v1/admin/settings', { body: { retention_days: 0 } })).status, 400);
  assert.equal((await call(srv, 'PUT', '/v1/admin/settings', { body: { listen: 'x' } })).status, 400);
  const s1 = await call(srv, 'PUT', '/v1/admin/settings', { body: { retention_days: 7, paused_wait_ms: 2000 } });
  assert.equal(s1.status, 200);
  assert.equal(s1.json.retention_days, 7);
  // artifacts stored from now on expire after 7 days
  const p = await openPage(chat);
  await createRun(chat);
  const e = await p.nextRun();
  await p.putFile(e.data, 'r.txt', 'r');
  const res = await p.result(e.data, { files: [{ name: 'r.txt', size: 1, kind: 'file' }] });
  const files = await call(srv, 'GET', `/v1/chats/${chat.id}/files`);
  const art = files.json.files.find((x) => x.file_id === res.json.files[0].artifact_id);
  assert.ok(art.expires_at < Date.now() + 8 * 86400000 && art.expires_at > Date.now() + 6 * 86400000);
  p.close();
  await srv.stop();
  srv = await startServer({ dataDir, env });
  const s2 = await call(srv, 'GET', '/v1/admin/settings');
  assert.equal(s2.json.retention_days, 7);
  assert.equal(s2.json.paused_wait_ms, 2000);
  assert.equal((await call(srv, 'GET', '/v1/config', { token: null })).json.retention_days, 7);
});
