// mcp_tasks.test.mjs -- the Tasks extension (SEP-2663, stateless 2026-07-28) with several nodes,
// against a real PostgreSQL (CEREA_TEST_PG) and two real nodes sharing DATA/chat_key_secret: a
// task is the run, kept in the shared store, so the node that made it is not needed to answer it.
// A multi-round run_python call through B on a chat A holds: both rounds forwarded, the
// requestState A signed under the nodes' shared secret taken by B and A.
// Two tasks are made through node A for a chat A holds (one ended, one running); the running one
// asks input(), which B, not holding the chat, shows (tasks/get forwarded to A: input_required)
// and answers (tasks/update forwarded: the page on A's run hears it); A is SIGKILLed; node B
// answers tasks/get for both once A's lease has run out: the ended one completed with its
// result, the running one working and, after B's page ran it again as a new attempt, completed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PG, newSchema, startSharedNodes, req, sleep, sql, overlappingLeases } from './cluster.mjs';
import { Page } from '../integration/lib.mjs';
import { rpc, textOf } from '../integration/mcp_lib.mjs';

const skip = PG ? false : 'set CEREA_TEST_PG (scripts/test.d/45-postgres.sh starts a server)';
const V = '2026-07-28';
const EXT = 'io.modelcontextprotocol/tasks';
let ids = 0;
function task(node, method, params) {
  const _meta = { 'io.modelcontextprotocol/protocolVersion': V, 'io.modelcontextprotocol/clientCapabilities': { extensions: { [EXT]: {} }, elicitation: {} } };
  return rpc(node, { jsonrpc: '2.0', id: ++ids, method, params: { ...params, _meta } },
    { version: V, headers: { 'mcp-method': method, ...(params.name ? { 'mcp-name': params.name } : {}) } }).catch((e) => ({ status: 0, text: String(e) }));
}

// tasks/get through node until it answers a task (the interim answers, while the dead owner's
// lease runs out, are kept to print).
async function answered(node, taskId, want, interim, ms = 30000) {
  for (const end = Date.now() + ms; ; await sleep(200)) {
    const r = await task(node, 'tasks/get', { taskId });
    const t = r.json?.result;
    if (t && (!want || t.status === want)) return t;
    interim.push(`${r.status} ${r.json?.error?.code ?? t?.status ?? r.text.slice(0, 80)}`);
    assert.ok(Date.now() < end, `tasks/get ${taskId} through ${node.port}: ${interim.slice(-5).join('; ')}`);
  }
}

test('a task made on node A is answered by node B after A is SIGKILLed: an ended one with its result, a running one working, then completed once it ran again', { skip, timeout: 120000 }, async () => {
  const { url } = newSchema('mcptasks');
  const nodes = await startSharedNodes(2, url);
  const [A, B] = nodes;
  let page;
  try {
    const made = await req(A, 'POST', '/v1/chats', { body: {} });
    assert.equal(made.status, 201, made.text);
    const chat = { id: made.json.chat_id, token: made.json.page_token };
    page = new Page(B, chat, 'tasks-page');
    await page.opened;
    assert.equal(page.status, 200);

    // 1. an ended task, and a running one, both made through A (the chat's holder)
    const one = task(A, 'tools/call', { name: 'run_python', arguments: { chat_id: chat.id, code: 'print("one")' } });
    const run1 = (await page.nextRun(15000)).data;
    assert.equal((await page.started(run1)).status, 200);
    const t1 = (await one).json.result;
    assert.equal(t1.resultType, 'task', JSON.stringify(t1));
    assert.equal(t1.taskId, run1.run_id);
    assert.equal((await page.result(run1, { stdout: 'one\n' })).status, 200);
    assert.equal((await answered(A, t1.taskId, 'completed', [])).status, 'completed');

    // a multi-round call (no Tasks) through B on A's chat: both rounds forwarded to A, the
    // requestState A signed (the nodes' shared secret) taken by B and A alike
    const mr = (body) => rpc(B, { jsonrpc: '2.0', id: ++ids, method: 'tools/call', params: { name: 'run_python', ...body,
      _meta: { 'io.modelcontextprotocol/protocolVersion': V, 'io.modelcontextprotocol/clientCapabilities': { elicitation: {} } } } },
    { version: V, headers: { 'mcp-method': 'tools/call', 'mcp-name': 'run_python' } });
    const margs = { chat_id: chat.id, code: 'print(input("who? "))' };
    const round1 = mr({ arguments: margs });
    const run3 = (await page.nextRun(15000)).data;
    assert.equal((await page.started(run3)).status, 200);
    assert.equal((await page.output(run3, { input_request: { prompt: 'who? ' } })).status, 200);
    const r1 = (await round1).json.result;
    assert.equal(r1.resultType, 'input_required', JSON.stringify(r1));
    const [mkey] = Object.keys(r1.inputRequests);
    const round2 = mr({ arguments: margs, requestState: r1.requestState, inputResponses: { [mkey]: { action: 'accept', content: { answer: 'Ada' } } } });
    assert.equal((await page.next('input', 10000)).data.text, 'Ada');
    assert.equal((await page.result(run3, { stdout: 'who? Ada\nAda\n' })).status, 200);
    const r2 = (await round2).json.result;
    assert.equal(r2.resultType, 'complete', JSON.stringify(r2));
    assert.equal(r2.structuredContent.run_id, run3.run_id);

    // the second asks input(): B, which does not hold the chat, forwards tasks/get and
    // tasks/update to A, and the answer reaches the run there
    const two = task(A, 'tools/call', { name: 'run_python', arguments: { chat_id: chat.id, code: 'print(input("n? "))' } });
    const run2 = (await page.nextRun(15000)).data;
    assert.equal((await page.started(run2)).status, 200);
    const t2 = (await two).json.result;
    assert.equal(t2.taskId, run2.run_id);
    assert.equal((await task(B, 'tasks/get', { taskId: t2.taskId })).json.result.status, 'working');
    assert.equal((await page.output(run2, { input_request: { prompt: 'n? ' } })).status, 200);
    const asking = await answered(B, t2.taskId, 'input_required', []);
    const [key] = Object.keys(asking.inputRequests);
    assert.match(asking.inputRequests[key].params.message, /n\? /);
    const ack = await task(B, 'tasks/update', { taskId: t2.taskId, inputResponses: { [key]: { action: 'accept', content: { answer: '21' } } } });
    assert.equal(ack.json?.result?.resultType, 'complete', ack.text);
    assert.equal((await page.next('input', 10000)).data.text, '21', 'the answer given through B reached the run on A');
    assert.equal((await answered(B, t2.taskId, 'working', [])).status, 'working');

    // 2. A dies; B answers both
    await A.kill();
    const t0 = Date.now();
    const interim = [];
    const got1 = await answered(B, t1.taskId, null, interim);
    console.log(`# B answered the ended task ${Date.now() - t0} ms after A's SIGKILL (before: ${interim.length ? interim.join('; ') : 'nothing'})`);
    assert.equal(got1.status, 'completed');
    assert.match(textOf(got1.result), /stdout:\none\n/);
    const got2 = await answered(B, t2.taskId, null, []);
    assert.equal(got2.status, 'working', 'the running task goes on: its run is queued again');

    // the page, through B again (its stream ended with A), runs it as a new attempt
    page.close();
    for (const end = Date.now() + 20000; ; await sleep(200)) {
      page = new Page(B, chat, 'tasks-page-2');
      await page.opened;
      if (page.status === 200) break;
      page.close();
      assert.ok(Date.now() < end, 'the chat was not taken over');
    }
    const again = (await page.nextRun(20000)).data;
    assert.equal(again.run_id, t2.taskId);
    assert.ok(again.attempt > run2.attempt, `a new attempt: ${again.attempt}`);
    assert.equal((await page.started(again)).status, 200);
    assert.equal((await page.result(again, { stdout: 'two\n' })).status, 200);
    const done = await answered(B, t2.taskId, 'completed', []);
    assert.match(textOf(done.result), /stdout:\ntwo\n/);
    assert.equal(sql(url, `SELECT node_url FROM chat_leases WHERE chat_id = '${chat.id}'`), B.base);
    assert.equal(overlappingLeases(url), 0, 'a lease held by two nodes at once');
  } finally {
    page?.close();
    for (const n of nodes) await n.stop().catch(() => {});
  }
});
