// mcp.test.mjs -- MCP (POST /mcp) with several nodes: a client connected to one node calls tools
// on a chat another node owns, against a real PostgreSQL (CEREA_TEST_PG) and three real nodes
// sharing DATA/chat_key_secret:
//  - the official SDK's client on node B, a chat owned by node A, its page reading through node C:
//    the call runs on A (the chat's lease never moves), progress (states and live output) and the
//    result reach the client through B;
//  - a stateless (2026-07-28) call through B: forwarded to A with its headers, answered through B;
//  - notifications/cancelled sent through C for a call running on A cancels its run; DELETE /mcp
//    through C ends the session everywhere (a call in flight on A ends, B refuses the id);
//  - the owner SIGKILLed: a later call from the same session lands on the chat's new owner.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PG, newSchema, startSharedNodes, req, sleep, sql, overlappingLeases } from './cluster.mjs';
import { Page } from '../integration/lib.mjs';
import { mcpClient, rpc, textOf, runOf } from '../integration/mcp_lib.mjs';

const skip = PG ? false : 'set CEREA_TEST_PG (scripts/test.d/45-postgres.sh starts a server)';

// A raw tools/call asking for progress, read as an SSE stream: its JSON-RPC messages as they
// come; `ended` resolves when the stream ends.
function rawCall(node, session, id, args) {
  const s = { messages: [], status: 0 };
  s.ended = fetch(`${node.base}/mcp`, {
    method: 'POST',
    headers: { authorization: `Bearer ${node.key}`, 'content-type': 'application/json',
      accept: 'application/json, text/event-stream', 'mcp-session-id': session },
    body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call',
      params: { name: 'run_python', arguments: args, _meta: { progressToken: `p${id}` } } }),
  }).then(async (res) => {
    s.status = res.status;
    const text = await res.text();
    for (const block of text.split('\n\n'))
      for (const line of block.split('\n'))
        if (line.startsWith('data: ')) s.messages.push(JSON.parse(line.slice(6)));
  });
  return s;
}

// The run of a chat made by the latest tool call, once the owner stored it.
async function toolRun(url, chat, after, ms = 15000) {
  for (const end = Date.now() + ms; Date.now() < end; await sleep(100)) {
    const r = sql(url, `SELECT id || ' ' || state || ' ' || COALESCE(status, '') FROM runs WHERE chat_id = '${chat}' ` +
      `AND origin = 'tool' AND id NOT IN (${after.map((x) => `'${x}'`).join(',') || "''"}) ORDER BY created_at DESC LIMIT 1`);
    if (r) { const [id, state, status] = r.split(' '); return { id, state, status }; }
  }
  assert.fail(`no tool run of chat ${chat} stored`);
}

async function runEnds(url, id, ms = 15000) {
  for (const end = Date.now() + ms; Date.now() < end; await sleep(100)) {
    const r = sql(url, `SELECT state || ' ' || COALESCE(status, '') FROM runs WHERE id = '${id}'`);
    if (r.startsWith('done')) return r.split(' ')[1];
  }
  assert.fail(`run ${id} did not end`);
}

test('MCP across nodes: a call on another node\'s chat runs on the owner, progress and result through the node the client talks to; cancel and DELETE reach it; after the owner dies the next call lands on the new owner', { skip, timeout: 120000 }, async () => {
  const { url } = newSchema('mcp');
  const nodes = await startSharedNodes(3, url);
  const [A, B, C] = nodes;
  let page, client;
  try {
    const made = await req(A, 'POST', '/v1/chats', { body: {} });
    assert.equal(made.status, 201, made.text);
    const chat = { id: made.json.chat_id, token: made.json.page_token };
    const aId = (await req(A, 'GET', '/v1/node')).json.node_id;
    page = new Page(C, chat, 'mcp-page');
    await page.opened;
    assert.equal(page.status, 200);

    // 1. progress and the result, through B
    client = await mcpClient(B);
    const progress = [];
    const pending = client.client.callTool({ name: 'run_python', arguments: { chat_id: chat.id, code: 'print("hello")' } },
      undefined, { onprogress: (p) => progress.push(p), timeout: 60000 });
    const run = (await page.nextRun(15000)).data;
    assert.equal((await page.started(run)).status, 200);
    assert.equal((await page.output(run, { chunks: [{ stream: 'stdout', offset: 0, text: 'hello\n' }] })).status, 200);
    for (const end = Date.now() + 10000; !progress.some((p) => runOf(p)?.text === 'hello\n'); await sleep(50))
      assert.ok(Date.now() < end, `no live output in the progress: ${JSON.stringify(progress)}`);
    assert.equal((await page.result(run, { stdout: 'hello\n' })).status, 200);
    const result = await pending;
    assert.equal(result.isError, false, JSON.stringify(result));
    assert.match(textOf(result), /hello/);
    assert.equal(result.structuredContent.run_id, run.run_id);
    assert.ok(progress.some((p) => runOf(p)?.state === 'running'), JSON.stringify(progress));
    assert.ok(progress.every((p) => runOf(p)?.run_id === run.run_id));
    // it ran on A: the chat's lease never left A (one epoch, A's), and B never held it
    assert.equal(sql(url, `SELECT node_id || ' ' || count(*) OVER () FROM lease_log WHERE chat_id = '${chat.id}'`), `${aId} 1`);

    // 1b. the stateless revision (2026-07-28) through B: no session, the headers forwarded to A
    const meta = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} };
    const sl = rpc(B, { jsonrpc: '2.0', id: 's1', method: 'tools/call', params: { name: 'run_python', arguments: { chat_id: chat.id, code: 'print(3)' }, _meta: meta } },
      { version: '2026-07-28', headers: { 'mcp-method': 'tools/call', 'mcp-name': 'run_python' } });
    const run1b = (await page.nextRun(15000)).data;
    assert.equal((await page.started(run1b)).status, 200);
    assert.equal((await page.result(run1b, { stdout: '3\n' })).status, 200);
    const slr = await sl;
    assert.equal(slr.status, 200, slr.text);
    assert.equal(slr.json.result.resultType, 'complete');
    assert.equal(slr.json.result.structuredContent.run_id, run1b.run_id);
    assert.equal(slr.headers.get('mcp-session-id'), null);

    // 2. notifications/cancelled through C for the call running on A (the page gone: it waits)
    page.close();
    await sleep(300);
    const session = client.transport.sessionId;
    assert.match(session, /^[0-9a-f]{64}$/);
    const seen = [run.run_id, run1b.run_id];
    const held = rawCall(B, session, 'c1', { chat_id: chat.id, code: 'print(1)' });
    const r2 = await toolRun(url, chat.id, seen);
    seen.push(r2.id);
    const note = await rpc(C, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'c1', reason: 'test' } }, { session });
    assert.equal(note.status, 202, note.text);
    assert.equal(await runEnds(url, r2.id), 'cancelled');
    await held.ended;
    assert.equal(held.status, 200);
    assert.ok(!held.messages.some((m) => m.id === 'c1'), `no response after a cancel: ${JSON.stringify(held.messages)}`);

    // 3. DELETE through C ends the session on every node: the call in flight on A ends too
    const held2 = rawCall(B, session, 'd1', { chat_id: chat.id, code: 'print(2)' });
    const r3 = await toolRun(url, chat.id, seen);
    seen.push(r3.id);
    const del = await fetch(`${C.base}/mcp`, { method: 'DELETE', headers: { authorization: `Bearer ${C.key}`, 'mcp-session-id': session } });
    assert.equal(del.status, 200);
    assert.equal(await runEnds(url, r3.id), 'cancelled');
    await held2.ended;
    for (const n of [A, B, C]) {
      const ping = await rpc(n, { jsonrpc: '2.0', id: 9, method: 'ping' }, { session });
      assert.equal(ping.status, 404, `node ${n.port}: ${ping.text}`);
    }
    await client.close().catch(() => {});

    // 4. the owner SIGKILLed: a new session on B; its call lands on whichever node took the chat
    await A.kill();
    client = await mcpClient(B);
    for (const end = Date.now() + 20000; ; await sleep(200)) { // 503 until A's lease runs out
      page = new Page(C, chat, 'mcp-page-2');
      await page.opened;
      if (page.status === 200) break;
      page.close();
      assert.ok(Date.now() < end, 'the chat was not taken over');
    }
    let later = null;
    for (const end = Date.now() + 20000; !later; ) {
      const p2 = [];
      const call = client.client.callTool({ name: 'run_python', arguments: { chat_id: chat.id, code: 'print("again")' } },
        undefined, { onprogress: (p) => p2.push(p), timeout: 60000 });
      const ev = await page.nextRun(10000).catch(() => null);
      if (ev) {
        assert.equal((await page.started(ev.data)).status, 200);
        assert.equal((await page.result(ev.data, { stdout: 'again\n' })).status, 200);
      }
      later = await call.catch((e) => { assert.ok(Date.now() < end, String(e)); return null; });
      if (!later) await sleep(300);
    }
    assert.equal(later.isError, false, JSON.stringify(later));
    assert.match(textOf(later), /again/);
    const holder = sql(url, `SELECT node_url FROM chat_leases WHERE chat_id = '${chat.id}'`);
    assert.ok(holder === B.base || holder === C.base, `the chat's new owner: ${holder}`);
    assert.equal(overlappingLeases(url), 0, 'a lease held by two nodes at once');
  } finally {
    page?.close();
    await client?.close().catch(() => {});
    for (const n of nodes) await n.stop().catch(() => {});
  }
});
