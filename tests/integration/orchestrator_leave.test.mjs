// orchestrator_leave.test.mjs -- a page that says it is going away (presence {leaving: true}, sent
// from its pagehide with a keepalive request, and when it switches chats): its run goes to another
// visible page of the chat at once, without waiting out PAGE_GRACE_MS (30 s here, so a run that
// waited for it could not pass).  Whether the page's stream is still open or already dropped; the
// leaving page's stream is ended, its stale attempt refused; bad input answered 400.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, call, newChat, Page, helpers } from './lib.mjs';

const GRACE_MS = 30000;
let srv;
const { createRun, getRun, openPage } = helpers(() => srv);

before(async () => { srv = await startServer({ env: { PAGE_GRACE_MS: String(GRACE_MS) } }); });
after(async () => { await srv?.stop(); });

const leave = (chat, pageId, body = {}) => call(srv, 'POST', `/v1/chats/${chat.id}/presence`, { token: chat.token, body: { page_id: pageId, leaving: true, ...body } });

async function runningOn(chat, page) {
  const cr = await createRun(chat, { code: 'import time; time.sleep(60)', origin: 'user' });
  assert.equal(cr.status, 201, String(cr.buf));
  const ev = await page.nextRun(10000);
  assert.equal((await page.started(ev.data)).status, 200);
  return { id: cr.json.run_id, ev };
}

for (const how of ['with its stream still open', 'after its stream dropped']) {
  test(`a page that leaves ${how}: its run goes to another page at once, as a new attempt`, async () => {
    const chat = await newChat(srv);
    const p1 = await openPage(chat, 'old');
    await p1.presence(true, 'ready');
    const run = await runningOn(chat, p1);
    if (how === 'after its stream dropped') { p1.close(); await p1.ended; }
    const t0 = Date.now();
    const r = await leave(chat, 'old');
    assert.equal(r.status, 200, String(r.buf));
    assert.deepEqual(r.json, { page_id: 'old', state: 'gone' });
    if (how === 'with its stream still open') {
      await Promise.race([p1.ended, new Promise((_, no) => setTimeout(() => no(new Error('the leaving page\'s stream was not ended')), 5000))]);
    }
    const p2 = await openPage(chat, 'new');
    await p2.presence(true, 'ready');
    const ev = await p2.nextRun(GRACE_MS / 3);
    const waited = Date.now() - t0;
    console.log(`# ${how}: attempt ${ev.data.attempt} reached the other page ${waited} ms after the leave`);
    assert.equal(ev.data.run_id, run.id);
    assert.equal(ev.data.attempt, 2);
    assert.ok(waited < 5000, `re-dispatched in ${waited} ms, not after the ${GRACE_MS} ms grace`);
    // The old attempt no longer counts.
    const stale = await p1.result(run.ev.data, { stdout: 'late' });
    assert.equal(stale.status, 409);
    assert.equal((await p2.started(ev.data)).status, 200);
    assert.equal((await p2.result(ev.data, { stdout: 'fresh\n' })).status, 200);
    const done = await getRun(run.id, 5);
    assert.equal(done.json.status, 'ok');
    assert.equal(done.json.stdout, 'fresh\n');
    assert.equal(done.json.attempts, 2);
    p1.close(); p2.close();
  });
}

test('a page that leaves with no other page: its run waits, paused, and goes to the next page that comes', async () => {
  const chat = await newChat(srv);
  const p1 = await openPage(chat, 'only');
  await p1.presence(true, 'ready');
  const run = await runningOn(chat, p1);
  assert.equal((await leave(chat, 'only')).status, 200);
  assert.equal((await getRun(run.id)).json.state, 'paused', 'paused at once, not running on a page that left');
  const p2 = await openPage(chat, 'reloaded');
  await p2.presence(true, 'ready');
  const ev = await p2.nextRun(10000);
  assert.equal(ev.data.attempt, 2);
  p1.close(); p2.close();
});

test('leaving: a page already gone answers the same; a wrong type is refused; another chat\'s token is not enough', async () => {
  const chat = await newChat(srv);
  const r = await leave(chat, 'never-attached');
  assert.equal(r.status, 200);
  assert.equal(r.json.state, 'gone');
  const bad = await leave(chat, 'x', { leaving: 'yes' });
  assert.equal(bad.status, 400);
  assert.equal(bad.json.error.code, 'invalid_field');
  const other = await newChat(srv);
  const p = await openPage(chat, 'mine');
  const foreign = await call(srv, 'POST', `/v1/chats/${chat.id}/presence`, { token: other.token, body: { page_id: 'mine', leaving: true } });
  assert.ok(foreign.status === 403 || foreign.status === 404, `another chat's token: ${foreign.status}`);
  assert.equal((await p.presence(true)).status, 200, 'the page is still attached');
  p.close();
});
