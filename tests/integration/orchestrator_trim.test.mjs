// orchestrator_trim.test.mjs -- the per-chat event log is trimmed by the cron, and a page whose
// Last-Event-ID is older than what the log still holds gets a correct state: the run it held is
// re-dispatched (a new attempt, its `run` event sent), not a replay with a hole in it.  A
// Last-Event-ID the log still covers replays as before.  The trim itself runs on events older
// than an hour, so the tests age events in the server's database (lib.mjs's sqlQuery: the sqlite3
// CLI, installed by setup, or psql) while the server runs or between two starts of it.
// What it does not test: the trim's own rules (tests/unit/persistence/test_events.c).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { startServer, call, newChat, upload, Page, sleep, tempDir, sqlQuery } from './lib.mjs';

const env = { PAGE_GRACE_MS: '60000' }; // the page stays in its grace for the whole test
let srv;
const dataDir = tempDir('trim');
before(async () => { srv = await startServer({ dataDir, env }); });
after(async () => { await srv.stop(); rmSync(dataDir, { recursive: true, force: true }); });

const sql = (q) => sqlQuery(dataDir, q);
const createRun = (chat) => call(srv, 'POST', `/v1/chats/${chat.id}/runs`, { body: { code: 'x' } });

// A page holding a running run drops its stream; a file arrives meanwhile (event 2); then the log
// loses event 1 (the run) the way store_event_trim would: oldest first, a contiguous tail left.
async function droppedWithTrimmedLog() {
  const chat = await newChat(srv);
  const p = new Page(srv, chat, 'tab');
  await p.opened;
  const r = await createRun(chat);
  assert.equal(r.status, 201);
  const e1 = await p.nextRun();
  assert.equal(e1.id, 1);
  assert.equal((await p.started(e1.data)).status, 200);
  p.close();
  await sleep(100);
  assert.equal((await upload(srv, chat, 'meanwhile.txt', 'x')).status, 201);
  await sleep(100);
  sql(`DELETE FROM events WHERE chat_id = '${chat.id}' AND seq = 1`);
  assert.equal(sql(`SELECT min(seq) || ',' || max(seq) FROM events WHERE chat_id = '${chat.id}'`), '2,2');
  return { chat, run: r.json, e1 };
}

test('Last-Event-ID older than the trimmed log: the run the page held is sent again (new attempt)', async () => {
  const { chat, run, e1 } = await droppedWithTrimmedLog();
  const p2 = new Page(srv, chat, 'tab', { lastEventId: 0 });
  await p2.opened;
  assert.equal(p2.status, 200);
  const e2 = await p2.nextRun();
  assert.equal(e2.data.run_id, run.run_id);
  assert.equal(e2.data.attempt, 2);
  assert.ok(e2.id > 2, `a new event after the log's last (got ${e2.id})`);
  // the file is in the new attempt's manifest; no replay from a log with a hole
  assert.ok(JSON.stringify(e2.data).includes('meanwhile.txt'));
  assert.equal(p2.events.filter((e) => e.event === 'files').length, 0);
  assert.equal((await p2.result(e1.data)).status, 409); // the attempt it lost
  assert.equal((await p2.result(e2.data, { stdout: 'again' })).status, 200);
  p2.close();
});

test('Last-Event-ID the trimmed log still covers: missed events replayed, the run carries on', async () => {
  const { chat, run, e1 } = await droppedWithTrimmedLog();
  const p2 = new Page(srv, chat, 'tab', { lastEventId: 1 });
  await p2.opened;
  const f = await p2.next('files');
  assert.equal(f.id, 2);
  assert.equal(f.data.name, 'meanwhile.txt');
  const res = await p2.result(e1.data, { stdout: 'same attempt' });
  assert.equal(res.status, 200);
  assert.equal(res.json.attempts, 1);
  assert.equal(p2.events.filter((e) => e.event === 'run').length, 0);
  assert.equal((await call(srv, 'GET', `/v1/runs/${run.run_id}`)).json.status, 'ok');
  p2.close();
});

test('the cron trims old events down to the newest 1000 per chat; the seq carries on after them', async () => {
  const chat = await newChat(srv);
  const young = await newChat(srv);
  await srv.stop();
  // 1500 events logged two hours ago, and 1500 logged just now in another chat
  const old = Date.now() - 2 * 3600 * 1000;
  const fill = (id, at) => `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1500) `
    + `INSERT INTO events(chat_id, seq, type, payload, created_at) SELECT '${id}', i, 'files', '{}', ${at} FROM n`;
  sql(fill(chat.id, old));
  sql(fill(young.id, Date.now()));
  srv = await startServer({ dataDir, env });
  // the first tick trims; steps of 500 follow tick after tick while they come back full
  const count = (id) => sql(`SELECT count(*) || ',' || min(seq) || ',' || max(seq) FROM events WHERE chat_id = '${id}'`);
  let got;
  for (let i = 0; i < 50 && (got = count(chat.id)) !== '1000,501,1500'; i++) await sleep(100);
  assert.equal(got, '1000,501,1500');
  assert.equal(count(young.id), '1500,1,1500');
  // the next event of the trimmed chat continues its seq
  const p = new Page(srv, chat, 'tab');
  await p.opened;
  assert.equal((await upload(srv, chat, 'after.txt', 'x')).status, 201);
  const f = await p.next('files');
  assert.equal(f.id, 1501);
  p.close();
});
