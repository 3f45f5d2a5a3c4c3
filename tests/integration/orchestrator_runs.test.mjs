// orchestrator_runs.test.mjs -- the run object as every answer and event carries it (its `code`
// included: create, get, wait, the chat's run list, the admin lists, the run stream's `end`, the
// chat stream's `run`), and a run whose attempts keep crashing their kernel, which ends `crashed`
// after CODE_MAX_ATTEMPTS instead of being sent again and again.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, call, newChat, runEvents, sleep, tempDir, helpers } from './lib.mjs';

const env = { CODE_PAUSED_WAIT_MS: '20000', PAGE_GRACE_MS: '800', CODE_TIME_LIMIT_S: '30',
  CODE_WATCHDOG_GRACE_MS: '500', CODE_CANCEL_GRACE_MS: '500', CODE_MAX_ATTEMPTS: '3' };
let srv;
before(async () => { srv = await startServer({ dataDir: tempDir('runs'), env }); });
after(async () => { await srv.stop(); });

const { createRun, getRun, openPage } = helpers(() => srv);
const CODE = 'import math\nprint("ü", math.pi)  # the code, whole\n';

test('a run carries its code in every answer and event that carries the run object', async () => {
  const chat = await newChat(srv);
  const p = await openPage(chat);
  const r = await createRun(chat, { code: CODE, origin: 'auto' });
  assert.equal(r.status, 201);
  assert.equal(r.json.code, CODE, 'create answer');
  const id = r.json.run_id;
  const dispatch = await p.nextRun();
  assert.equal(dispatch.data.code, CODE, 'the chat stream\'s run event');
  const live = await getRun(id);
  assert.equal(live.json.code, CODE, 'get while live');
  const admin = await call(srv, 'GET', '/v1/admin/runs');
  assert.equal(admin.json.live.find((x) => x.run_id === id)?.code, CODE, 'admin live list');
  const ev = runEvents(srv, id);
  await ev.opened;
  const waiting = getRun(id, 10);
  await p.started(dispatch.data);
  assert.equal((await p.result(dispatch.data, { stdout: 'ü 3.14\n' })).json.code, CODE, 'result answer');
  const waited = await waiting;
  assert.equal(waited.json.status, 'ok');
  assert.equal(waited.json.code, CODE, 'wait_s answer');
  const end = await ev.next('end', 10000);
  assert.equal(end.data.code, CODE, 'the run stream\'s end');
  ev.close();
  const after = runEvents(srv, id); // a finished run's stream: its end at once
  assert.equal((await after.next('end', 10000)).data.code, CODE, 'the end of an ended run\'s stream');
  after.close();
  assert.equal((await getRun(id)).json.code, CODE, 'get after the end (from the store)');
  const list = await call(srv, 'GET', `/v1/chats/${chat.id}/runs`, { token: chat.token });
  assert.equal(list.json.runs.find((x) => x.run_id === id)?.code, CODE, 'the chat\'s run list');
  const recent = await call(srv, 'GET', '/v1/admin/runs');
  assert.equal(recent.json.recent.find((x) => x.run_id === id)?.code, CODE, 'admin recent list');
  p.close();
});

test('a run kept after a restart of the server still has its code', async () => {
  const chat = await newChat(srv);
  const r = await createRun(chat, { code: CODE, origin: 'user' });
  const id = r.json.run_id;
  await srv.stop();
  srv = await startServer({ dataDir: srv.dataDir, env });
  assert.equal((await getRun(id)).json.code, CODE);
  const list = await call(srv, 'GET', `/v1/chats/${chat.id}/runs`);
  assert.equal(list.json.runs[0].code, CODE);
  await call(srv, 'POST', `/v1/runs/${id}/cancel`);
});

// A page whose kernel "dies" mid-run the way a crashed kernel host does: its stream drops and the
// host, restarted, attaches the chat again under the same page id without Last-Event-ID.
const crashAndReattach = async (p, chat, pageId) => {
  p.close();
  await sleep(50);
  return openPage(chat, pageId);
};

test('attempts that keep losing their page mid-run: crashed after CODE_MAX_ATTEMPTS, not sent again', async () => {
  const chat = await newChat(srv);
  let p = await openPage(chat, 'host-0');
  const r = await createRun(chat, { code: 'blow_up_the_host()' });
  const id = r.json.run_id;
  for (let attempt = 1; attempt <= 3; attempt++) {
    const e = await p.nextRun(10000);
    assert.equal(e.data.attempt, attempt);
    assert.equal((await p.started(e.data)).status, 200);
    await p.output(e.data, { chunks: [{ stream: 'stdout', text: `attempt ${attempt} printed\n`, offset: 0 }] });
    p = await crashAndReattach(p, chat, 'host-0');
  }
  const g = await getRun(id, 10);
  assert.equal(g.json.state, 'done');
  assert.equal(g.json.status, 'crashed');
  assert.equal(g.json.attempts, 3);
  assert.equal(g.json.error.type, 'KernelCrashed');
  assert.match(g.json.error.message, /3 of its attempts were lost .*CODE_MAX_ATTEMPTS=3/);
  assert.equal(g.json.stdout, 'attempt 3 printed\n', 'what the last attempt printed is kept');
  await sleep(500);
  assert.ok(!p.events.some((e) => e.event === 'run' && e.data.run_id === id && e.data.attempt > 3), 'no fourth attempt');
  // The chat goes on: the next run is dispatched to the same page.
  const next = await createRun(chat);
  const e = await p.nextRun(10000);
  assert.equal(e.data.run_id, next.json.run_id);
  await p.started(e.data);
  assert.equal((await p.result(e.data)).json.status, 'ok');
  p.close();
});

test('a page gone past its grace mid-run counts as a lost attempt; an attempt not yet started does not', async () => {
  const chat = await newChat(srv);
  let p = await openPage(chat, 'tab-a');
  const r = await createRun(chat);
  const id = r.json.run_id;
  // Dispatched, never started, lost twice: not counted (no code ran).
  for (let i = 0; i < 2; i++) {
    await p.nextRun(10000);
    p = await crashAndReattach(p, chat, 'tab-a');
  }
  // Started, then the page is gone past PAGE_GRACE_MS (another page takes the run): three times.
  for (let i = 0; i < 3; i++) {
    const e = await p.nextRun(10000);
    assert.equal(e.data.attempt, 3 + i);
    await p.started(e.data);
    p.close();
    // past the 800 ms grace the page is gone (the cron's next tick): the run paused or ended
    let g;
    for (const t0 = Date.now(); Date.now() - t0 < 15000; await sleep(100)) {
      g = await getRun(id);
      if (g.json.state !== 'running') break;
    }
    if (i < 2) {
      assert.equal(g.json.state, 'paused');
      p = await openPage(chat, `tab-b${i}`);
    } else {
      assert.equal(g.json.status, 'crashed');
      assert.equal(g.json.attempts, 5);
    }
  }
});

test('a page that goes to the background and comes back is not counted, however often', async () => {
  const chat = await newChat(srv);
  const p = await openPage(chat, 'phone');
  const r = await createRun(chat);
  for (let attempt = 1; attempt <= 5; attempt++) {
    const e = await p.nextRun(10000);
    assert.equal(e.data.attempt, attempt);
    await p.started(e.data);
    if (attempt < 5) {
      await p.presence(false, 'busy');
      assert.equal((await getRun(r.json.run_id)).json.state, 'paused');
      await p.presence(true, 'ready');
    } else {
      assert.equal((await p.result(e.data, { stdout: 'done\n' })).json.status, 'ok');
    }
  }
  const g = await getRun(r.json.run_id);
  assert.equal(g.json.status, 'ok');
  assert.equal(g.json.attempts, 5);
  p.close();
});

test('CODE_MAX_ATTEMPTS is checked at start', async () => {
  const bad = startServer({ dataDir: tempDir('runs-bad'), env: { CODE_MAX_ATTEMPTS: 'many' } });
  await assert.rejects(bad, /CODE_MAX_ATTEMPTS=many: expected whole attempts/);
});

test('a page that says it leaves mid-run (a reload, a closed tab) is not counted, however often', async () => {
  const chat = await newChat(srv);
  const r = await createRun(chat);
  for (let attempt = 1; attempt <= 4; attempt++) {
    const p = await openPage(chat, `tab-${attempt}`);
    const e = await p.nextRun(10000);
    assert.equal(e.data.attempt, attempt);
    await p.started(e.data);
    if (attempt < 4) {
      const left = await call(srv, 'POST', `/v1/chats/${chat.id}/presence`, { token: chat.token, body: { page_id: p.pageId, leaving: true } });
      assert.equal(left.status, 200);
      assert.equal((await getRun(r.json.run_id)).json.state, 'paused');
    } else {
      assert.equal((await p.result(e.data, { stdout: 'done\n' })).json.status, 'ok');
    }
    p.close();
  }
  const g = await getRun(r.json.run_id);
  assert.equal(g.json.status, 'ok');
  assert.equal(g.json.attempts, 4);
});
