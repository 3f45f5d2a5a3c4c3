// mcp_tasks.test.mjs -- the Tasks extension (SEP-2663, io.modelcontextprotocol/tasks) on the
// stateless revision (2026-07-28): run_python answered as a task whose id is the run id, polled
// with tasks/get (its result inlined once it has ended), stopped with tasks/cancel; a task of a
// chat the credential cannot reach is not found (-32602); tasks/* without the extension is
// -32021.  Raw JSON-RPC over real HTTP: the SDK here (@modelcontextprotocol/sdk 1.32) speaks
// only the session revisions and the older tasks draft (capabilities.tasks, tasks/result), not
// SEP-2663.  Browser mode with a scripted page (lib.mjs's Page): the run "sleeps" for as long
// as the test holds its result back.
import { test, before, after } from 'node:test';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import assert from 'node:assert/strict';
import { startServer, call, newChat, Page, sleep, tempDir } from './lib.mjs';
import { rpc, textOf } from './mcp_lib.mjs';

let srv;
before(async () => { srv = await startServer({ dataDir: tempDir('mcp-tasks'), env: { CODE_TIME_LIMIT_S: '150' } }); });
after(async () => { await srv?.stop('SIGTERM'); });

const V = '2026-07-28';
const EXT = 'io.modelcontextprotocol/tasks';
const meta = (tasks = true) => ({ 'io.modelcontextprotocol/protocolVersion': V, 'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
  'io.modelcontextprotocol/clientCapabilities': tasks ? { extensions: { [EXT]: {} } } : {} });
// One stateless request, given up after the SDK's default request timeout (60 s).
let ids = 0;
async function req(method, params, { key, tasks = true } = {}) {
  const h = { 'mcp-method': method, ...(params.name ? { 'mcp-name': params.name } : {}) };
  const t0 = Date.now();
  let timer;
  const r = await Promise.race([
    rpc(srv, { jsonrpc: '2.0', id: ++ids, method, params: { ...params, _meta: meta(tasks) } }, { version: V, headers: h, key }),
    new Promise((_, no) => { timer = setTimeout(() => no(new Error(`${method}: no answer within the default 60 s timeout`)), 60000); }),
  ]).finally(() => clearTimeout(timer));
  r.ms = Date.now() - t0;
  return r;
}
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

test('a run that sleeps 90 s, past the default 60 s request timeout: tools/call answers at once with a task (the run id), tasks/get polls it working, then completed with the run\'s result inlined', { timeout: 180000 }, async () => {
  const chat = await newChat(srv);
  const page = new Page(srv, chat, 'p1');
  await page.opened;
  page.heartbeat(1000);
  const list = await req('tools/list', {});
  const rp = list.json.result.tools.find((t) => t.name === 'run_python');
  assert.deepEqual(rp.execution, { taskSupport: 'optional' });
  const disc = await req('server/discover', {});
  assert.deepEqual(disc.json.result.capabilities.extensions, { [EXT]: {} });

  const t0 = Date.now();
  const made = req('tools/call', { name: 'run_python', arguments: { chat_id: chat.id, code: 'import time; time.sleep(90); print("slept")' } });
  const ev = await page.nextRun();
  await page.started(ev.data);
  const r = await made;
  assert.equal(r.status, 200);
  const task = r.json.result;
  assert.ok(r.ms < 10000, `answered in ${r.ms} ms`);
  assert.equal(task.resultType, 'task');
  assert.equal(task.taskId, ev.data.run_id, 'the task is the run');
  assert.equal(task.status, 'working');
  assert.match(task.createdAt, ISO);
  assert.match(task.lastUpdatedAt, ISO);
  assert.equal(task.ttlMs, null, 'durable: kept as long as the run row');
  assert.ok(Number.isInteger(task.pollIntervalMs) && task.pollIntervalMs > 0);
  for (const k of ['result', 'error', 'task', 'ttl', 'pollInterval', 'requestState']) assert.ok(!(k in task), k);

  // Polled through the run's 90 s: every answer comes at once, and says working.
  let polls = 0;
  while (Date.now() - t0 < 90000) {
    const g = await req('tasks/get', { taskId: task.taskId });
    assert.ok(g.ms < 10000, `tasks/get answered in ${g.ms} ms`);
    assert.equal(g.json.result.status, 'working');
    assert.equal(g.json.result.taskId, task.taskId);
    assert.ok(!('result' in g.json.result));
    polls++;
    await sleep(10000);
  }
  await page.result(ev.data, { stdout: 'slept\n' });
  let done;
  for (let i = 0; i < 20 && done?.status !== 'completed'; i++) {
    done = (await req('tasks/get', { taskId: task.taskId })).json.result;
    if (done.status !== 'completed') await sleep(500);
  }
  console.log(`# ${polls} polls while working; completed ${Date.now() - t0} ms after the call`);
  assert.equal(done.status, 'completed');
  assert.equal(done.resultType, 'complete');
  assert.equal(done.result.isError, false);
  assert.match(textOf(done.result), /stdout:\nslept\n/);
  assert.equal(done.result.structuredContent.status, 'ok');
  assert.ok(Date.parse(done.lastUpdatedAt) > Date.parse(done.createdAt));
  page.close();
});

test('tasks/cancel stops a working task (an empty ack; tasks/get then says cancelled) and, on an ended one, acks again with nothing cancelled; a task of a chat the credential cannot reach, or none, is not found (-32602); without the extension tasks/* is -32021 and tools/call is plain', { timeout: 60000 }, async () => {
  const chat = await newChat(srv);
  const page = new Page(srv, chat, 'p1');
  await page.opened;
  page.heartbeat(1000);
  const made = req('tools/call', { name: 'run_python', arguments: { chat_id: chat.id, code: 'import time; time.sleep(60)' } });
  const ev = await page.nextRun();
  await page.started(ev.data);
  const taskId = (await made).json.result.taskId;
  assert.equal(taskId, ev.data.run_id);

  // Another chat's key: the task is not found, for tasks/get and tasks/cancel alike.
  const other = await newChat(srv);
  const key = (await call(srv, 'POST', `/v1/chats/${other.id}/chat_key`)).json.key;
  for (const m of ['tasks/get', 'tasks/cancel']) {
    const r = await req(m, { taskId }, { key });
    assert.equal(r.json.error?.code, -32602, `${m}: ${r.text}`);
    assert.match(r.json.error.message, /^Task not found/);
  }
  assert.equal((await req('tasks/get', { taskId: 'f'.repeat(32) })).json.error?.code, -32602);
  assert.equal((await req('tasks/get', { taskId: 'nope' })).json.error?.code, -32602);
  assert.equal((await call(srv, 'GET', `/v1/runs/${taskId}`)).json.state, 'running', 'their refusal touched nothing');

  const c = await req('tasks/cancel', { taskId });
  assert.deepEqual(Object.keys(c.json.result).filter((k) => k !== '_meta'), ['resultType']);
  assert.equal(c.json.result.resultType, 'complete');
  assert.equal((await page.next('cancel')).data.run_id, taskId, 'the page is told to stop it');
  await page.result(ev.data, { status: 'cancelled' });
  let st;
  for (let i = 0; i < 20 && st !== 'cancelled'; i++) {
    st = (await req('tasks/get', { taskId })).json.result.status;
    if (st !== 'cancelled') await sleep(500);
  }
  assert.equal(st, 'cancelled');
  // Ended: the same ack (SEP-2663: cancel is idempotent, -32602 is for unknown ids only).
  const again = await req('tasks/cancel', { taskId });
  assert.equal(again.json.result?.resultType, 'complete', again.text);
  assert.equal((await req('tasks/get', { taskId })).json.result.status, 'cancelled', 'still cancelled');

  // Without the extension: tasks/* refused, run_python a plain (blocking) call.
  const g = await req('tasks/get', { taskId }, { tasks: false });
  assert.equal(g.status, 400);
  assert.equal(g.json.error.code, -32021);
  const plain = req('tools/call', { name: 'run_python', arguments: { chat_id: chat.id, code: 'print(1)' } }, { tasks: false });
  const ev2 = await page.nextRun();
  await page.started(ev2.data);
  await page.result(ev2.data, { stdout: '1\n' });
  const p = (await plain).json.result;
  assert.equal(p.resultType, 'complete');
  assert.ok(!('taskId' in p));
  assert.match(textOf(p), /stdout:\n1\n/);
  page.close();
});

test('1,000 tasks made at once: each is answered with a task (or refused clearly, -32000 past the calls in flight), every task is a run of the chat, and /healthz answers throughout', { timeout: 300000 }, async () => {
  const chat = await newChat(srv);
  const N = 1000;
  // /healthz is probed from a process of its own: in this one, the probe's answer would wait
  // behind the thousand answers this process is reading, and time the client, not the server.
  const prober = spawn(process.execPath, ['--input-type=module', '-e', `
    for (;;) {
      const p0 = Date.now();
      const h = await fetch(process.argv[1], { signal: AbortSignal.timeout(10000) }).then((r) => r.status).catch(() => 0);
      console.log(h, Date.now() - p0);
      await new Promise((r) => setTimeout(r, 100));
    }`, `${srv.base}/healthz`], { stdio: ['ignore', 'pipe', 'inherit'] });
  let lines = '';
  prober.stdout.on('data', (d) => { lines += d; });
  const stopProbe = async () => { prober.kill('SIGTERM'); await once(prober, 'exit'); };
  while (!lines.includes('\n')) await sleep(50); // the prober answers before the flood
  let healthy = 0, sick = 0, slowest = 0;
  const t0 = Date.now();
  const all = await Promise.all(Array.from({ length: N }, (_, i) =>
    req('tools/call', { name: 'run_python', arguments: { chat_id: chat.id, code: `print(${i})` } }).catch((e) => ({ status: 0, text: String(e) }))));
  const ms = Date.now() - t0;
  await sleep(200); // (the probe's last answer, had it one in flight)
  await stopProbe();
  for (const [h, ms] of lines.trim().split('\n').filter(Boolean).map((l) => l.split(' ').map(Number))) {
    slowest = Math.max(slowest, ms);
    if (h === 200) healthy++; else sick++;
  }
  const tasks = all.filter((r) => r.json?.result?.resultType === 'task').map((r) => r.json.result.taskId);
  const refused = all.filter((r) => r.json?.error?.code === -32000);
  const other = all.filter((r) => r.json?.result?.resultType !== 'task' && r.json?.error?.code !== -32000);
  console.log(`# ${N} task creations at once: ${tasks.length} tasks, ${refused.length} refused (-32000) in ${ms} ms; /healthz ${healthy} ok (slowest ${slowest} ms), ${sick} not`);
  assert.deepEqual(other.map((r) => `${r.status} ${(r.text ?? '').slice(0, 200)}`), [], 'every answer is a task or a clear refusal');
  for (const r of refused) assert.match(r.json.error.message, /in flight/);
  assert.equal(new Set(tasks).size, tasks.length, 'distinct tasks');
  assert.ok(tasks.length > 0);
  assert.ok(healthy >= 1 && sick === 0, '/healthz answered throughout');
  // Nothing lost: each task is a run of this chat, and tasks/get answers it (100 at a time).
  for (let i = 0; i < tasks.length; i += 100) {
    const got = await Promise.all(tasks.slice(i, i + 100).map((t) => req('tasks/get', { taskId: t })));
    got.forEach((g, j) => assert.equal(g.json?.result?.taskId, tasks[i + j], g.text));
  }
  const run = (await call(srv, 'GET', `/v1/runs/${tasks[tasks.length >> 1]}`)).json;
  assert.equal(run.chat_id, chat.id);
  assert.equal(run.origin, 'tool');
  const c = await req('tasks/cancel', { taskId: tasks[tasks.length - 1] });
  assert.equal(c.json.result?.resultType, 'complete');
});
