// orchestrator_phone.test.mjs -- page liveness (issue 16) against the real binary with scripted
// pages: a page holding a run that stops its heartbeat (frozen, no event at all) is paused within
// PAGE_SILENT_MS + 2 s, counted, and its run re-dispatched as a new attempt when it speaks again
// (its silent attempt's late calls refused); a page that keeps its heartbeat through a long run is
// never paused; a page idle before it gets a run is not silent at its dispatch.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, call, newChat, sleep, helpers } from './lib.mjs';

const SILENT_MS = 3000;
const HEARTBEAT_MS = 1000;
const env = { PAGE_SILENT_MS: String(SILENT_MS), PAGE_HEARTBEAT_MS: String(HEARTBEAT_MS) };
let srv;
before(async () => { srv = await startServer({ env }); });
after(async () => { await srv.stop(); });

const { createRun, getRun, openPage } = helpers(() => srv);
const metric = async (name) => {
  const m = await call(srv, 'GET', '/metrics', { token: null });
  const line = m.buf.toString().split('\n').find((l) => l.startsWith(`${name} `));
  return Number(line.split(' ')[1]);
};
// Polls until the run is in `state`; the time it took.
const untilState = async (id, state, timeoutMs) => {
  const t0 = Date.now();
  while (Date.now() - t0 < timeoutMs) {
    if ((await getRun(id)).json.state === state) return Date.now() - t0;
    await sleep(100);
  }
  throw new Error(`run ${id} not ${state} within ${timeoutMs} ms: ${(await getRun(id)).json.state}`);
};

test('the run event says how often to show a sign of life', async () => {
  const chat = await newChat(srv);
  const p = await openPage(chat, 'tab');
  await createRun(chat);
  const e = await p.nextRun();
  assert.equal(e.data.heartbeat_ms, HEARTBEAT_MS);
  assert.equal(e.data.limits.input_wait_s, 300);
  await p.result(e.data);
  p.close();
});

test('a page that stops its heartbeat is paused within PAGE_SILENT_MS + 2 s; speaking again brings its run back as a new attempt', async () => {
  const silentBefore = await metric('cerea_pages_silent_total');
  const pausedBefore = await metric('cerea_runs_paused_by_silence_total');
  const chat = await newChat(srv);
  const p = await openPage(chat, 'phone');
  p.heartbeat(HEARTBEAT_MS);
  const r = await createRun(chat);
  const e1 = (await p.nextRun()).data;
  await p.started(e1);
  await sleep(2 * HEARTBEAT_MS);
  p.stopHeartbeat(); // frozen: no visibility event, no call at all
  const frozenAt = p.lastBeat ?? Date.now();
  await untilState(r.json.run_id, 'paused', SILENT_MS + 6000);
  const pausedAfter = Date.now() - frozenAt;
  assert.ok(pausedAfter <= SILENT_MS + 2000, `paused ${pausedAfter} ms after the last sign of life`);
  assert.ok(pausedAfter >= SILENT_MS - 200, `not before PAGE_SILENT_MS (${pausedAfter} ms)`);
  const pages = await call(srv, 'GET', '/v1/admin/pages');
  assert.equal(pages.json.pages.find((x) => x.chat_id === chat.id).state, 'silent');
  assert.equal(await metric('cerea_pages_silent_total'), silentBefore + 1);
  assert.equal(await metric('cerea_runs_paused_by_silence_total'), pausedBefore + 1);
  // it wakes: its frozen attempt's late output is its first call (a sign of life, refused)
  const late = await p.output(e1, { chunks: [{ stream: 'stdout', offset: 0, text: 'late' }] });
  assert.equal(late.status, 409);
  const e2 = (await p.nextRun()).data;
  assert.equal(e2.attempt, 2);
  assert.equal((await getRun(r.json.run_id)).json.state, 'dispatched');
  assert.equal((await p.result(e1)).status, 409, 'the silent attempt\'s late result');
  p.heartbeat(HEARTBEAT_MS);
  await p.started(e2);
  const done = await p.result(e2, { stdout: 'again' });
  assert.equal(done.status, 200);
  assert.equal(done.json.attempts, 2);
  p.close();
});

test('a silent page\'s heartbeat (presence) is its sign of life too', async () => {
  const chat = await newChat(srv);
  const p = await openPage(chat, 'phone');
  const r = await createRun(chat);
  const e1 = (await p.nextRun()).data;
  await p.started(e1);
  await untilState(r.json.run_id, 'paused', SILENT_MS + 4000);
  const back = await p.presence(true);
  assert.equal(back.status, 200);
  assert.equal(back.json.state, 'visible');
  const e2 = (await p.nextRun()).data;
  assert.equal(e2.attempt, 2);
  await p.result(e2);
  p.close();
});

test('a page sending heartbeats during a long run is never paused', async () => {
  const chat = await newChat(srv);
  const p = await openPage(chat, 'busy');
  p.heartbeat(HEARTBEAT_MS);
  const r = await createRun(chat);
  const e = (await p.nextRun()).data;
  await p.started(e);
  const t0 = Date.now();
  while (Date.now() - t0 < 3 * SILENT_MS + 1000) { // a CPU-bound kernel: no page call but the heartbeat
    assert.equal((await getRun(r.json.run_id)).json.state, 'running');
    await sleep(250);
  }
  assert.ok(p.beats >= 6, `${p.beats} heartbeats`);
  const res = await p.result(e, { stdout: 'finished' });
  assert.equal(res.json.attempts, 1);
  assert.equal(res.json.status, 'ok');
  p.close();
});

test('a page idle before it gets a run is not silent at its dispatch', async () => {
  const chat = await newChat(srv);
  const p = await openPage(chat, 'idle');
  await sleep(SILENT_MS + 500); // attached, visible, no call: it holds nothing
  const r = await createRun(chat);
  const e = (await p.nextRun()).data;
  await sleep(500);
  assert.equal((await getRun(r.json.run_id)).json.state, 'dispatched');
  await p.result(e);
  p.close();
});
