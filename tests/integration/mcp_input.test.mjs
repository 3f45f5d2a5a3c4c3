// mcp_input.test.mjs -- a run's input() answered through the stateless revision (2026-07-28):
//  - as a task (the Tasks extension, SEP-2663): while the run waits in input(), tasks/get says
//    `input_required` with the prompt as an elicitation/create input request (to a client that
//    declared elicitation), tasks/update with the answer under its key is the run's input; a
//    stale key, a decline or another chat's key gives nothing; no answer: the run's input wait;
//  - as a multi-round call (InputRequiredResult, SEP-2322): run_python's round ends when the run
//    waits in input(), and the next call, with the requestState it gave and the answer, feeds the
//    run and waits for it again; a changed requestState, or another credential's, is refused.
// Raw JSON-RPC over real HTTP (the SDK speaks neither).  Scripted pages (lib.mjs) for the
// protocol's corners; then real runs in `server` mode (real headless host, real Pyodide).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { startServer, call, newChat, Page, sleep, tempDir, ROOT } from './lib.mjs';
import { rpc, textOf } from './mcp_lib.mjs';

let srv;
before(async () => {
  srv = await startServer({ dataDir: tempDir('mcp-input'), env: { CODE_TIME_LIMIT_S: '5', CODE_INPUT_WAIT_S: '3', CODE_WATCHDOG_GRACE_MS: '1000' } });
});
after(async () => { await srv?.stop('SIGTERM'); });

const V = '2026-07-28';
const EXT = 'io.modelcontextprotocol/tasks';
let ids = 0;
// One stateless request; caps: the client's capabilities.
function req(server, method, params, { caps = {}, key } = {}) {
  const h = { 'mcp-method': method, ...(params.name ? { 'mcp-name': params.name } : {}) };
  const _meta = { 'io.modelcontextprotocol/protocolVersion': V, 'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
    'io.modelcontextprotocol/clientCapabilities': caps };
  return rpc(server, { jsonrpc: '2.0', id: ++ids, method, params: { ...params, _meta } }, { version: V, headers: h, key });
}
const TASKS = { extensions: { [EXT]: {} }, elicitation: {} };
const ELICIT = { elicitation: {} };

async function until(what, f, ms = 15000) {
  for (const end = Date.now() + ms; ; await sleep(100)) {
    const v = await f();
    if (v) return v;
    assert.ok(Date.now() < end, `${what} within ${ms} ms`);
  }
}
const taskOf = async (server, taskId, caps = TASKS) => (await req(server, 'tasks/get', { taskId }, { caps })).json.result;
const runState = async (server, id) => (await call(server, 'GET', `/v1/runs/${id}`)).json.state;

async function pageRun(code) {
  const chat = await newChat(srv);
  const page = new Page(srv, chat, 'p1');
  await page.opened;
  page.heartbeat(500);
  return { chat, page, code };
}

test('a task whose run waits in input(): tasks/get says input_required with the prompt; tasks/update with the answer under its key is the run\'s input, and the task completes', async () => {
  const { chat, page } = await pageRun();
  const made = req(srv, 'tools/call', { name: 'run_python', arguments: { chat_id: chat.id, code: 'print("hello", input("Your name? "))' } }, { caps: TASKS });
  const ev = (await page.nextRun()).data;
  await page.started(ev);
  const task = (await made).json.result;
  assert.equal(task.resultType, 'task');
  assert.equal(task.taskId, ev.run_id);
  assert.equal((await taskOf(srv, task.taskId)).status, 'working', 'no input asked yet');

  assert.equal((await page.output(ev, { input_request: { prompt: 'Your name? ' } })).status, 200);
  const asking = await until('input_required', async () => { const t = await taskOf(srv, task.taskId); return t.status === 'input_required' && t; });
  const keys = Object.keys(asking.inputRequests);
  assert.equal(keys.length, 1);
  const ask = asking.inputRequests[keys[0]];
  assert.equal(ask.method, 'elicitation/create');
  assert.match(ask.params.message, /Your name\? /);
  assert.deepEqual(ask.params.requestedSchema.required, ['answer']);
  assert.equal(asking.resultType, 'complete');
  // A client that cannot answer (no elicitation declared) is not asked: working, as before.
  const blind = await taskOf(srv, task.taskId, { extensions: { [EXT]: {} } });
  assert.equal(blind.status, 'working');
  assert.ok(!('inputRequests' in blind));

  // Answers that give nothing: another question's key, a decline, another chat's key, no map.
  for (const inputResponses of [{ 'input-9-9': { action: 'accept', content: { answer: 'x' } } }, { [keys[0]]: { action: 'decline' } }]) {
    const r = await req(srv, 'tasks/update', { taskId: task.taskId, inputResponses }, { caps: TASKS });
    assert.equal(r.json.result?.resultType, 'complete', r.text);
  }
  const other = await newChat(srv);
  const otherKey = (await call(srv, 'POST', `/v1/chats/${other.id}/chat_key`)).json.key;
  const foreign = await req(srv, 'tasks/update', { taskId: task.taskId, inputResponses: { [keys[0]]: { action: 'accept', content: { answer: 'x' } } } }, { caps: TASKS, key: otherKey });
  assert.equal(foreign.json.error?.code, -32602, foreign.text);
  assert.match(foreign.json.error.message, /^Task not found/);
  const nomap = await req(srv, 'tasks/update', { taskId: task.taskId }, { caps: TASKS });
  assert.equal(nomap.json.error?.code, -32602, nomap.text);
  assert.equal(await runState(srv, ev.run_id), 'waiting_input', 'none of them gave input');

  const ack = await req(srv, 'tasks/update', { taskId: task.taskId, inputResponses: { [keys[0]]: { action: 'accept', content: { answer: 'Ada' } } } }, { caps: TASKS });
  assert.deepEqual(Object.keys(ack.json.result).filter((k) => k !== '_meta'), ['resultType'], ack.text);
  assert.equal((await page.next('input', 10000)).data.text, 'Ada', 'the page hears the answer as if typed');
  const after = await taskOf(srv, task.taskId);
  assert.equal(after.status, 'working');
  assert.ok(!('inputRequests' in after));
  await page.result(ev, { stdout: 'hello Ada\n' });
  const done = await until('completed', async () => { const t = await taskOf(srv, task.taskId); return t.status === 'completed' && t; });
  assert.match(textOf(done.result), /hello Ada/);
  page.close();
});

test('a task whose input() is never answered: the run\'s input wait ends it, and the task completes as a tool error', async () => {
  const { chat, page } = await pageRun();
  const made = req(srv, 'tools/call', { name: 'run_python', arguments: { chat_id: chat.id, code: 'input("anyone? ")' } }, { caps: TASKS });
  const ev = (await page.nextRun()).data;
  await page.started(ev);
  const { taskId } = (await made).json.result;
  await page.output(ev, { input_request: { prompt: 'anyone? ' } });
  await until('input_required', async () => (await taskOf(srv, taskId)).status === 'input_required');
  const t0 = Date.now();
  const done = await until('the input wait to end it', async () => { const t = await taskOf(srv, taskId); return t.status !== 'input_required' && t.status !== 'working' && t; }, 30000);
  console.log(`# unanswered: ${done.status} ${Date.now() - t0} ms after input_required`);
  assert.equal(done.status, 'completed');
  assert.equal(done.result.isError, true, textOf(done.result));
  assert.notEqual(done.result.structuredContent.status, 'ok');
  page.close();
});

// The watchdog ends a run whose page never answers (the time limit, then the grace): the run is
// done while its end is being stored. A tasks/get in that moment once answered "completed" with
// wait_for_run's "still going" text (isError false), as the test above saw under load in CI.
test('a task polled hard as its run ends stays working until the end is stored, then completes with the run\'s own result, never with a "still going" answer', async () => {
  const { chat, page } = await pageRun();
  const made = req(srv, 'tools/call', { name: 'run_python', arguments: { chat_id: chat.id, code: 'while True: print("x" * 1000)' } }, { caps: TASKS });
  const ev = (await page.nextRun()).data;
  await page.started(ev);
  const { taskId } = (await made).json.result;
  // what it printed is kept with its end: a bigger write, a wider moment between done and stored
  for (let off = 0, i = 0; i < 8; i++, off += 64 * 1024)
    await page.output(ev, { chunks: [{ stream: 'stdout', offset: off, text: 'x'.repeat(64 * 1024) }] });
  // Polled from just before the time limit by pollers in a tight loop, so that one lands in the
  // moment the watchdog ends the run (the limit is 5 s, the grace 1 s, both from \`started\`).
  await sleep(4000);
  let done = null, polls = 0;
  const end = Date.now() + 30000;
  const poller = async () => {
    while (!done) {
      assert.ok(Date.now() < end, 'the watchdog ends the run within 30 s');
      const t = await taskOf(srv, taskId);
      polls++;
      if (t.status === 'working') continue;
      assert.equal(t.status, 'completed', JSON.stringify(t).slice(0, 300));
      assert.doesNotMatch(textOf(t.result), /is still going/, 'a completed task carries the run\'s result');
      done ??= t;
    }
  };
  await Promise.all(Array.from({ length: 24 }, poller));
  console.log(`# polled ${polls} times`);
  assert.equal(done.result.isError, true, textOf(done.result));
  assert.equal(done.result.structuredContent.status, 'timeout');
  page.close();
});

test('multi-round run_python: the round ends with an InputRequiredResult when the run waits in input(); the next call with its requestState and the answer feeds the run and waits for its end', async () => {
  const { chat, page } = await pageRun();
  const args = { chat_id: chat.id, code: 'print("hello", input("Name? "))' };
  const first = req(srv, 'tools/call', { name: 'run_python', arguments: args }, { caps: ELICIT });
  const ev = (await page.nextRun()).data;
  await page.started(ev);
  await page.output(ev, { input_request: { prompt: 'Name? ' } });
  const r1 = (await first).json.result;
  assert.equal(r1.resultType, 'input_required', JSON.stringify(r1));
  assert.ok(!('taskId' in r1) && !('content' in r1));
  const [key] = Object.keys(r1.inputRequests);
  assert.equal(r1.inputRequests[key].method, 'elicitation/create');
  assert.match(r1.inputRequests[key].params.message, /Name\? /);
  assert.equal(typeof r1.requestState, 'string');
  assert.equal(await runState(srv, ev.run_id), 'waiting_input', 'the run goes on: only the round ended');

  // A changed requestState, or the same one from another credential (this chat's own key): refused.
  const answer = { [key]: { action: 'accept', content: { answer: 'Ada' } } };
  const tampered = r1.requestState.replace(/^./, (c) => (c === '0' ? '1' : '0'));
  const chatKey = (await call(srv, 'POST', `/v1/chats/${chat.id}/chat_key`)).json.key;
  for (const [state, key2] of [[tampered, undefined], [r1.requestState, chatKey], ['nonsense', undefined]]) {
    const r = await req(srv, 'tools/call', { name: 'run_python', arguments: args, inputResponses: answer, requestState: state }, { caps: ELICIT, key: key2 });
    assert.equal(r.json.error?.code, -32602, r.text);
    assert.match(r.json.error.message, /requestState/);
  }
  assert.equal(await runState(srv, ev.run_id), 'waiting_input');

  const second = req(srv, 'tools/call', { name: 'run_python', arguments: args, inputResponses: answer, requestState: r1.requestState }, { caps: ELICIT });
  assert.equal((await page.next('input', 10000)).data.text, 'Ada');
  await page.result(ev, { stdout: 'hello Ada\n' });
  const r2 = (await second).json.result;
  assert.equal(r2.resultType, 'complete', JSON.stringify(r2));
  assert.equal(r2.isError, false);
  assert.equal(r2.structuredContent.run_id, ev.run_id, 'the same run');
  assert.match(textOf(r2), /hello Ada/);

  // Without elicitation declared: no round ends early; the page answers, as before.
  const plain = req(srv, 'tools/call', { name: 'run_python', arguments: { chat_id: chat.id, code: 'input()' } });
  const ev2 = (await page.nextRun()).data;
  await page.started(ev2);
  await page.output(ev2, { input_request: { prompt: '' } });
  await until('waiting_input', async () => (await runState(srv, ev2.run_id)) === 'waiting_input');
  await sleep(300);
  assert.equal((await call(srv, 'POST', `/v1/runs/${ev2.run_id}/input`, { token: chat.token, body: { text: 'Bo' } })).status, 200);
  await page.next('input', 10000);
  await page.result(ev2, { stdout: 'Bo\n' });
  const p = (await plain).json.result;
  assert.equal(p.resultType, 'complete');
  assert.match(textOf(p), /Bo/);
  page.close();
});

// ---- real runs: `server` mode, a real headless host running real Pyodide -----------------------

const PYODIDE = existsSync(join(ROOT, 'build/www/pyodide/pyodide.asm.wasm'));
const noKernel = PYODIDE ? false : 'build/www/pyodide is missing (scripts/setup.sh): no real kernel to run input() in';
if (noKernel) console.log(`# real runs skipped: ${noKernel}`);

test('real runs (server mode, real Pyodide): input() answered through a multi-round call, then through a task', { skip: noKernel, timeout: 300000 }, async () => {
  const { startStack, hostReady } = await import('../fullstack/lib.mjs');
  const real = await startStack({ dataDir: tempDir('mcp-input-real'), env: { CODE_TIME_LIMIT_S: '60', CODE_INPUT_WAIT_S: '60' } });
  try {
    await hostReady(real);
    const chat = await newChat(real);
    const args = { chat_id: chat.id, code: 'name = input("Name? ")\nprint("hello", name.upper())' };
    const t0 = Date.now();
    const r1 = (await req(real, 'tools/call', { name: 'run_python', arguments: args }, { caps: ELICIT })).json.result;
    assert.equal(r1.resultType, 'input_required', JSON.stringify(r1));
    const [key] = Object.keys(r1.inputRequests);
    assert.match(r1.inputRequests[key].params.message, /Name\? /);
    const r2 = (await req(real, 'tools/call', { name: 'run_python', arguments: args, requestState: r1.requestState,
      inputResponses: { [key]: { action: 'accept', content: { answer: 'ada' } } } }, { caps: ELICIT })).json.result;
    assert.equal(r2.resultType, 'complete', JSON.stringify(r2));
    assert.equal(r2.isError, false, textOf(r2));
    assert.match(textOf(r2), /stdout:\nName\? ada\nhello ADA\n/, 'the prompt and the answer echoed, as a terminal shows them');
    console.log(`# multi-round with a real kernel: ${Date.now() - t0} ms for both rounds`);

    const made = (await req(real, 'tools/call', { name: 'run_python', arguments: { chat_id: chat.id, code: 'print(int(input("n? ")) * 2)' } }, { caps: TASKS })).json.result;
    assert.equal(made.resultType, 'task');
    const asking = await until('input_required', async () => { const t = await taskOf(real, made.taskId); return t.status === 'input_required' && t; }, 120000);
    const [k] = Object.keys(asking.inputRequests);
    const ack = await req(real, 'tasks/update', { taskId: made.taskId, inputResponses: { [k]: { action: 'accept', content: { answer: '21' } } } }, { caps: TASKS });
    assert.equal(ack.json.result?.resultType, 'complete', ack.text);
    const done = await until('completed', async () => { const t = await taskOf(real, made.taskId); return t.status === 'completed' && t; }, 60000);
    assert.equal(done.result.isError, false, textOf(done.result));
    assert.match(textOf(done.result), /stdout:\nn\? 21\n42\n/);
  } finally {
    await real.stop();
  }
});
