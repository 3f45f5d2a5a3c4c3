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
