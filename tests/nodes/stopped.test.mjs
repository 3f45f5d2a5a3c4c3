// stopped.test.mjs -- a call forwarded to a chat's owner that is there but does not answer (the
// owner SIGSTOPped: its kernel still accepts the connection and takes the request): the node the
// client reached answers 503 `unavailable` with Retry-After within ~10 s instead of holding the
// client until the owner wakes; and a live owner's long-poll (wait_s) through another node is
// not cut short by that check.  Needs CEREA_TEST_PG (scripts/test.d/45-postgres.sh).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PG, newSchema, startNode, req } from './cluster.mjs';

const skip = PG ? false : 'set CEREA_TEST_PG (scripts/test.d/45-postgres.sh starts a server)';
// The default lease: the stopped owner keeps the chat's lease ~10 s, so the call is forwarded.
const env = { CEREA_LEASE_MS: '10000' };

test('an owner that is stopped, not dead: 503 with Retry-After within 10 s; a live owner\'s long-poll waits', { skip, timeout: 90000 }, async () => {
  const { url } = newSchema('stopped');
  const owner = await startNode({ schemaUrl: url, env });
  const via = await startNode({ schemaUrl: url, env });
  let stopped = false;
  try {
    const r = await req(owner, 'POST', '/v1/chats', { body: {} });
    assert.equal(r.status, 201, r.text);
    const chat = r.json.chat_id;
    const run = await req(owner, 'POST', `/v1/chats/${chat}/runs`, { body: { code: 'print(1)' } });
    assert.equal(run.status, 201, run.text);
    // A live owner: a 6 s long-poll through the other node is answered by the owner after 6 s
    // (the run waits for a page), though the forwarder checked on it meanwhile.
    let t0 = Date.now();
    const polled = await req(via, 'GET', `/v1/runs/${run.json.run_id}?wait_s=6`, { timeoutMs: 30000 });
    assert.equal(polled.status, 200, polled.text);
    assert.equal(polled.json.state, 'paused');
    assert.ok(Date.now() - t0 >= 5500, `waited the whole wait_s (${Date.now() - t0} ms)`);
    // The owner stopped: the same kind of call through the other node.
    process.kill(owner.pid, 'SIGSTOP');
    stopped = true;
    t0 = Date.now();
    const got = await req(via, 'GET', `/v1/runs/${run.json.run_id}?wait_s=30`, { timeoutMs: 40000 });
    const took = Date.now() - t0;
    console.log(`a stopped owner: answered ${got.status} in ${took} ms`);
    assert.equal(got.status, 503, `${got.status} after ${took} ms: ${got.text}`);
    assert.ok(took < 10000, `answered within 10 s (${took} ms)`);
    assert.equal(got.json.error.code, 'unavailable');
    assert.match(got.json.error.message, /did not answer GET \/v1\/node/);
    const retry = Number(got.headers.get('retry-after'));
    assert.ok(Number.isInteger(retry) && retry >= 1 && retry <= 10, `Retry-After: ${got.headers.get('retry-after')}`);
    // Another call meanwhile is answered as promptly (each forward checks on its own).
    t0 = Date.now();
    const list = await req(via, 'GET', `/v1/chats/${chat}/runs`, { timeoutMs: 40000 });
    assert.ok(list.status === 503 || list.status === 200, `${list.status}: ${list.text}`); // 200 once the lease moved to `via`
    assert.ok(Date.now() - t0 < 10000, `answered within 10 s (${Date.now() - t0} ms)`);
  } finally {
    if (stopped) process.kill(owner.pid, 'SIGCONT');
    await owner.kill();
    await via.stop();
  }
});
