// mcp_long.test.mjs -- runs that are quiet or long, through the official TypeScript SDK over real
// HTTP, in browser mode with scripted pages (tests/integration/lib.mjs's Page: the run "sleeps"
// for as long as the test holds its result back, and the page's heartbeats keep it running).
// Keepalive: a call with a progress token hears of its run at least every 15 s, while it waits
// for the page and while it runs silently, so the SDK's timeout with resetTimeoutOnProgress never
// fires.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, newChat, Page, sleep, tempDir } from './lib.mjs';
import { mcpClient, textOf, runOf } from './mcp_lib.mjs';

let srv;
before(async () => { srv = await startServer({ dataDir: tempDir('mcp-long') }); });
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
    assert.ok(Math.abs(m.elapsed_s * 1000 - t) < 3000, `elapsed_s ${m.elapsed_s} at ${t} ms`);
    assert.match(p.message, new RegExp(`${m.elapsed_s} s since the call began\\.$`));
  }
  assert.deepEqual(seen.map(([, p]) => p.progress), seen.map((_, i) => i + 1), 'progress increases');
});
