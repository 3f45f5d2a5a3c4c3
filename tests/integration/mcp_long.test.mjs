// mcp_long.test.mjs -- runs that are quiet or long, through the official TypeScript SDK over real
// HTTP, in browser mode with scripted pages (tests/integration/lib.mjs's Page: the run "sleeps"
// for as long as the test holds its result back, and the page's heartbeats keep it running).
// Keepalive: a call with a progress token hears of its run at least every 15 s, while it waits
// for the page and while it runs silently, so the SDK's timeout with resetTimeoutOnProgress never
// fires.  Hand-off: a call with no progress stream that would outlive CEREA_MCP_HANDOFF_S (8 s
// on this server; 50 by default) answers with the run still going, and wait_for_run and
// cancel_run finish the job.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, call, newChat, Page, sleep, tempDir } from './lib.mjs';
import { mcpClient, textOf, runOf } from './mcp_lib.mjs';

let srv;
before(async () => { srv = await startServer({ dataDir: tempDir('mcp-long'), env: { CEREA_MCP_HANDOFF_S: '8' } }); });
after(async () => { await srv?.stop('SIGTERM'); });

test('keepalive: a quiet call (12 s waiting for the page, then 25 s running silently) gets a progress notification at least every 15 s, with its state and the time so far', { timeout: 90000 }, async () => {
  const chat = await newChat(srv);
  const c = await mcpClient(srv);
  const seen = []; // [ms since the call, notification]
  const t0 = Date.now();
  // 20 s without a notification would end the call: only keepalives carry it through.
  const pending = c.client.callTool({ name: 'run_python', arguments: { chat_id: chat.id, code: 'import time; time.sleep(25)' } },
    undefined, { onprogress: (p) => seen.push([Date.now() - t0, p]), timeout: 20000, resetTimeoutOnProgress: true, maxTotalTimeout: 120000 });
  await sleep(12000);
  const page = new Page(srv, chat, 'p1');
  await page.opened;
  page.heartbeat(1000);
  const ev = await page.nextRun();
  await page.started(ev.data);
  await sleep(25000);
  await page.result(ev.data, { stdout: 'slept\n' });
  const r = await pending;
  const total = Date.now() - t0;
  page.close();
  await c.close();
  assert.match(textOf(r), /stdout:\nslept\n/);
  const times = [0, ...seen.map(([t]) => t), total];
  const gaps = times.slice(1).map((t, i) => t - times[i]);
  const keep = seen.filter(([, p]) => runOf(p).keepalive);
  console.log(`# ${seen.length} notifications in ${total} ms (${keep.length} keepalives, ~${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/progress', params: keep[0]?.[1] }).length} bytes each); gaps (ms): ${gaps.join(', ')}`);
  assert.ok(Math.max(...gaps) <= 15000, `a gap of ${Math.max(...gaps)} ms`);
  const states = keep.map(([, p]) => runOf(p).state);
  assert.ok(states.includes('waiting_for_page') && states.includes('running'), `keepalives while waiting and while running: ${states}`);
  for (const [t, p] of keep) {
    const m = runOf(p);
    assert.equal(m.run_id, ev.data.run_id);
    assert.ok(Math.abs(m.elapsed_s * 1000 - t) < 5000, `elapsed_s ${m.elapsed_s} at ${t} ms`);
    assert.match(p.message, new RegExp(`${m.elapsed_s} s since the call began\\.$`));
  }
  assert.deepEqual(seen.map(([, p]) => p.progress), seen.map((_, i) => i + 1), 'progress increases');
});

test('hand-off: a run_python call past CEREA_MCP_HANDOFF_S without progress answers with the run still going (its id, the tools to use); wait_for_run waits and gets its result; cancel_run stops a run; another chat\'s run is refused', { timeout: 120000 }, async () => {
  const chat = await newChat(srv);
  const page = new Page(srv, chat, 'p1');
  await page.opened;
  page.heartbeat(1000);
  const c = await mcpClient(srv);
  const { tools } = await c.client.listTools();
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
  assert.deepEqual(byName.wait_for_run.inputSchema.required, ['run_id']);
  assert.equal(byName.wait_for_run.inputSchema.properties.wait_s.maximum, 8);
  assert.deepEqual(byName.cancel_run.inputSchema.required, ['run_id']);
  assert.equal(byName.wait_for_run.inputSchema.properties.chat_id, undefined, 'the run says its chat');
  const http = (await call(srv, 'GET', '/v1/tools')).json.tools.map((t) => t.function.name);
  assert.ok(http.includes('wait_for_run') && http.includes('cancel_run'), http.join());

  // The first call: handed back at ~8 s while the run goes on ("sleeping": its result held back).
  const t0 = Date.now();
  const first = c.client.callTool({ name: 'run_python', arguments: { chat_id: chat.id, code: 'import time; time.sleep(20); print("slept")' } });
  const ev = await page.nextRun();
  await page.started(ev.data);
  const r1 = await first;
  const ms = Date.now() - t0;
  const runId = ev.data.run_id;
  console.log(`# handed back after ${ms} ms: ${textOf(r1)}`);
  assert.ok(ms >= 7000 && ms < 20000, `${ms} ms`);
  assert.equal(r1.isError, false);
  assert.equal(r1.structuredContent.run_id, runId);
  assert.match(textOf(r1), new RegExp(`^The run ${runId} is still going, \\d+ s after it was made \\(state running`));
  assert.match(textOf(r1), new RegExp(`wait_for_run with \\{"run_id": "${runId}"\\}`));
  assert.match(textOf(r1), /cancel_run/);
  assert.equal((await call(srv, 'GET', `/v1/runs/${runId}`)).json.state, 'running', 'the run goes on');

  // wait_for_run, shorter than the run: still going again.
  const t1 = Date.now();
  const w1 = await c.client.callTool({ name: 'wait_for_run', arguments: { run_id: runId, wait_s: 2 } });
  assert.ok(Date.now() - t1 >= 1500, 'it waited');
  assert.match(textOf(w1), /is still going/);
  // wait_for_run as the run ends: its result, as run_python gives it.
  const w2p = c.client.callTool({ name: 'wait_for_run', arguments: { run_id: runId } });
  await sleep(2000);
  await page.result(ev.data, { stdout: 'slept\n' });
  const w2 = await w2p;
  assert.equal(w2.isError, false);
  assert.match(textOf(w2), /^The code ran to the end/);
  assert.match(textOf(w2), /stdout:\nslept\n/);
  assert.equal(w2.structuredContent.status, 'ok');
  const w3 = await c.client.callTool({ name: 'wait_for_run', arguments: { run_id: runId, wait_s: 0 } });
  assert.equal(textOf(w3), textOf(w2), 'an ended run: the same result, at once');

  // cancel_run: a run started by the API, cancelled through the tool.
  const made = await call(srv, 'POST', `/v1/chats/${chat.id}/runs`, { body: { code: 'import time; time.sleep(60)' } });
  const ev2 = await page.nextRun();
  assert.equal(ev2.data.run_id, made.json.run_id);
  await page.started(ev2.data);
  const cp = c.client.callTool({ name: 'cancel_run', arguments: { run_id: made.json.run_id } });
  assert.equal((await page.next('cancel')).data.run_id, made.json.run_id, 'the page is told to stop it');
  await page.result(ev2.data, { status: 'cancelled' });
  const cr = await cp;
  assert.equal(cr.structuredContent.status, 'cancelled');
  assert.match(textOf(cr), /cancelled/);
  const again = await c.client.callTool({ name: 'cancel_run', arguments: { run_id: made.json.run_id } });
  assert.match(textOf(again), /^The run had already ended: nothing was cancelled\./);

  // Scoped to the credential's chats: another chat's key, an unknown id, a malformed one.
  const other = await newChat(srv);
  const key = (await call(srv, 'POST', `/v1/chats/${other.id}/chat_key`)).json.key;
  const theirs = await mcpClient(srv, { key });
  for (const name of ['wait_for_run', 'cancel_run']) {
    const r = await theirs.client.callTool({ name, arguments: { run_id: runId } });
    assert.equal(r.isError, true);
    assert.match(textOf(r), new RegExp(`run_id: no run ${runId} in chat ${other.id}`));
  }
  let r = await c.client.callTool({ name: 'wait_for_run', arguments: { run_id: 'f'.repeat(32) } });
  assert.match(textOf(r), /run_id: no run f{32}/);
  r = await c.client.callTool({ name: 'wait_for_run', arguments: {} });
  assert.match(textOf(r), /run_id: required/);
  r = await call(srv, 'POST', '/v1/tools/call', { body: { name: 'wait_for_run', arguments: { run_id: runId } } });
  assert.equal(r.status, 200);
  assert.match(r.json.text, /stdout:\nslept\n/, 'the same through /v1/tools/call');
  await theirs.close();
  page.close();
  await c.close();
});
