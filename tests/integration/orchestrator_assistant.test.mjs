// orchestrator_assistant.test.mjs -- the conversation against the real binary, with a TEST DOUBLE
// for the model (model_double.mjs: a scripted OpenAI-compatible server; no model runs here) and
// scripted pages (lib.mjs) that run the tool and auto runs: a plain answer, a tool call whose
// result reaches the model, two python blocks that auto-run in order, a page hidden during a
// tool run, a model error, a stalled stream, an unreachable model, a turn's time limit, a stop, a
// second page seeing the conversation live, page links, and the key never shown anywhere.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startServer, call, newChat, upload, Page, sleep, PG, sqlQuery } from './lib.mjs';
import { startModelDouble } from './model_double.mjs';

const LLM_KEY = 'sk-double-secret-0123456789-never-shown';
let srv, model;

const env = (m, extra = {}) => ({
  CEREA_LLM_URL: m.url, CEREA_LLM_MODEL: 'double-model', CEREA_LLM_API_KEY: LLM_KEY,
  CEREA_LLM_STALL_S: '1', CEREA_LOG: 'trace', ...extra,
});

before(async () => {
  model = await startModelDouble();
  srv = await startServer({ env: env(model) });
});
after(async () => {
  await srv?.stop();
  await model?.close();
});

const ask = (chat, text, token = chat.token, s = srv) =>
  call(s, 'POST', `/v1/chats/${chat.id}/messages`, { token, body: { text } });
const messages = async (chat, s = srv) => (await call(s, 'GET', `/v1/chats/${chat.id}/messages`, { token: chat.token })).json.messages;
// The assistant message's durable event once it ended.
const ended = (page, id, timeoutMs = 10000) =>
  page.next((e) => e.event === 'message' && e.id !== null && e.data.message_id === id && e.data.state !== 'streaming', timeoutMs);

async function openPage(chat, pageId = 'tab', s = srv) {
  const p = new Page(s, chat, pageId);
  await p.opened;
  return p;
}

// The page runs each run it is sent: started, then a result printing `out(code)`.
function runsEverything(page, out = (code) => `ran ${code}\n`) {
  page.ran = [];
  const loop = async () => {
    for (;;) {
      let ev;
      try { ev = await page.nextRun(30000); } catch { return; }
      page.ran.push(ev.data);
      await page.started(ev.data);
      await page.result(ev.data, { stdout: out(ev.data.code) });
    }
  };
  loop();
}

test('/v1/config names the model (never its URL or key)', async () => {
  const r = await call(srv, 'GET', '/v1/config');
  assert.deepEqual(r.json.assistant, { model: 'double-model' });
  assert.ok(!r.buf.toString().includes(LLM_KEY));
  assert.ok(!r.buf.toString().includes(`${model.port}`));
});

test('a plain answer streams to the page, is stored, and the model was asked as OpenAI says', async () => {
  const chat = await newChat(srv);
  const page = await openPage(chat);
  const n0 = model.requests.length;
  model.script.push({ text: 'Hello there, how can I help?', pieces: 4, delayMs: 30 });
  const r = await ask(chat, 'hello');
  assert.equal(r.status, 201, r.buf.toString());
  const { message_id: uid, answer_id: mid, turn_id: tid } = r.json;
  assert.deepEqual(Object.keys(r.json).sort(), ['answer_id', 'message_id', 'turn_id']);
  const user = await page.next((e) => e.event === 'message' && e.data.role === 'user');
  assert.equal(user.data.text, 'hello');
  assert.equal(user.data.message_id, uid, 'message_id: the posted message');
  assert.ok(user.id > 0, 'the user message is a durable event');
  const fin = await ended(page, mid);
  assert.equal(fin.data.state, 'done');
  assert.equal(fin.data.text, 'Hello there, how can I help?');
  assert.deepEqual(fin.data.run_ids, []);
  assert.equal(fin.data.turn_id, tid);
  // live deltas (no id) put together by offset give the same text
  let text = '';
  for (const e of page.events.filter((e) => e.event === 'message' && e.id === null && e.data.delta)) {
    assert.equal(e.data.delta.offset, [...text].length);
    text += e.data.delta.text;
  }
  assert.equal(text, 'Hello there, how can I help?');
  const list = await messages(chat);
  assert.deepEqual(list.map((m) => [m.role, m.state, m.text]), [['user', 'done', 'hello'], ['assistant', 'done', 'Hello there, how can I help?']]);
  assert.deepEqual(list.map((m) => m.parts), [[{ type: 'text', text: 'hello' }], [{ type: 'text', text: 'Hello there, how can I help?' }]]);
  assert.deepEqual(user.data.parts, [{ type: 'text', text: 'hello' }]);
  assert.deepEqual(fin.data.parts, [{ type: 'text', text: 'Hello there, how can I help?' }]);
  assert.equal(list[0].message_id, uid);
  assert.equal(list[1].message_id, mid);
  assert.equal(list[0].turn_id, tid);
  const rq = model.requests[n0];
  assert.equal(rq.headers.authorization, `Bearer ${LLM_KEY}`);
  assert.equal(rq.body.model, 'double-model');
  assert.equal(rq.body.stream, true);
  assert.equal(rq.body.max_tokens, 4096);
  assert.deepEqual(rq.body.tools.map((t) => t.function.name), ['run_python']);
  assert.ok(!('chat_id' in rq.body.tools[0].function.parameters.properties), 'the chat is implied');
  assert.equal(rq.body.messages[0].role, 'system');
  assert.deepEqual(rq.body.messages.at(-1), { role: 'user', content: 'hello' });
  page.close();
});

test('a tool call runs in the page as a tool run of the turn; its result reaches the model, then the answer', async () => {
  const chat = await newChat(srv);
  const page = await openPage(chat);
  runsEverything(page, () => '42\n');
  const n0 = model.requests.length;
  model.script.push({ code: 'print(6 * 7)', text: 'Let me compute that.' }, { text: 'It is 42.' });
  const r = await ask(chat, 'what is 6 times 7?');
  assert.equal(r.status, 201);
  const fin = await ended(page, r.json.answer_id);
  assert.equal(fin.data.state, 'done', JSON.stringify(fin.data));
  assert.equal(fin.data.text, 'Let me compute that.\n\nIt is 42.');
  assert.equal(page.ran.length, 1);
  const run = page.ran[0];
  assert.equal(run.code, 'print(6 * 7)');
  assert.equal(run.origin, 'tool');
  assert.deepEqual(fin.data.run_ids, [run.run_id]);
  // where the run happened in the text: between the two responses
  const parts = [{ type: 'text', text: 'Let me compute that.' }, { type: 'run', run_id: run.run_id }, { type: 'text', text: '\n\nIt is 42.' }];
  assert.deepEqual(fin.data.parts, parts);
  const stored = (await messages(chat)).find((m) => m.message_id === r.json.answer_id);
  assert.deepEqual(stored.parts, parts, 'the same after a reload');
  const got = await call(srv, 'GET', `/v1/runs/${run.run_id}`);
  assert.equal(got.json.turn_id, r.json.turn_id);
  // the second request carries the call and its result text
  const second = model.requests[n0 + 1].body.messages;
  const asked = second.find((m) => m.role === 'assistant' && m.tool_calls);
  assert.equal(asked.tool_calls[0].function.name, 'run_python');
  assert.deepEqual(JSON.parse(asked.tool_calls[0].function.arguments), { code: 'print(6 * 7)' });
  const tool = second.find((m) => m.role === 'tool');
  assert.equal(tool.tool_call_id, asked.tool_calls[0].id);
  assert.match(tool.content, /42/);
  // a run event joined the message while it streamed
  const joined = page.events.find((e) => e.event === 'message' && e.id !== null && e.data.state === 'streaming' && e.data.run_ids.length === 1);
  assert.ok(joined, 'a durable message event when the run joined');
  assert.deepEqual(joined.data.parts, parts.slice(0, 2), 'the run after the text so far');
  // the next turn sends the earlier call and its result back to the model
  model.script.push({ text: 'Still 42.' });
  const r2 = await ask(chat, 'and again?');
  await ended(page, r2.json.answer_id);
  const third = model.requests.at(-1).body.messages;
  assert.deepEqual(third.filter((m) => m.role !== 'system').map((m) => m.role), ['user', 'assistant', 'tool', 'assistant', 'user']);
  assert.match(third.find((m) => m.role === 'tool').content, /42/);
  page.close();
});

test('while the answer streams, a run joining writes the message\'s text, runs and parts, not its tool calls; the end writes the calls once', async () => {
  const chat = await newChat(srv);
  const page = await openPage(chat);
  const big = `print(len("${'x'.repeat(200_000)}"))`;
  model.script.push({ code: big, text: 'Counting.' }, { text: 'It is 200000.' });
  const r = await ask(chat, 'count the x');
  assert.equal(r.status, 201);
  const row = () => sqlQuery(srv.dataDir, `SELECT CASE WHEN calls_json IS NULL THEN 'none' ELSE 'calls:' || length(calls_json) END, parts_json, run_ids_json FROM messages WHERE id = '${r.json.answer_id}'`);
  const run = (await page.nextRun(10000)).data;   // the page holds it: the turn is mid-way
  await page.next((e) => e.event === 'message' && e.id !== null && e.data.run_ids?.length === 1);
  let mid = '';
  for (let i = 0; i < 50 && !mid.includes(run.run_id); i++) { mid = row(); if (!mid.includes(run.run_id)) await sleep(100); }
  const [calls, parts, ids] = mid.split('|');
  assert.equal(ids, JSON.stringify([run.run_id]), mid.slice(0, 300));
  assert.deepEqual(JSON.parse(parts), [{ at: 'Counting.'.length, run_id: run.run_id }], 'the run\'s place is stored as it joins');
  assert.equal(calls, 'none', 'the tool calls (200 KB of arguments) are not written while the answer streams');
  await page.started(run);
  await page.result(run, { stdout: '200000\n' });
  const fin = await ended(page, r.json.answer_id);
  assert.equal(fin.data.state, 'done');
  let end = '';
  for (let i = 0; i < 50 && !end.startsWith('calls:'); i++) { end = row(); if (!end.startsWith('calls:')) await sleep(100); }
  assert.ok(Number(end.split('|')[0].slice(6)) > 200_000, `the end writes the calls: ${end.slice(0, 80)}`);
  // The next turn replays that call with its result.
  model.script.push({ text: 'Yes.' });
  const r2 = await ask(chat, 'sure?');
  await ended(page, r2.json.answer_id);
  const replay = model.requests.at(-1).body.messages;
  assert.equal(replay.find((m) => m.role === 'tool')?.content.includes('200000'), true);
  page.close();
});

test('an answer with two python blocks: both auto-run, in order, under the message', async () => {
  const chat = await newChat(srv);
  const page = await openPage(chat);
  runsEverything(page);
  model.script.push({ text: 'First:\n```python\nprint(1)\n```\nThen:\n```python\nprint(2)\n```\n' });
  const r = await ask(chat, 'two blocks please');
  const fin = await ended(page, r.json.answer_id);
  assert.equal(fin.data.state, 'done');
  assert.equal(fin.data.run_ids.length, 2);
  for (let i = 0; i < 50 && page.ran.length < 2; i++) await sleep(100);
  assert.deepEqual(page.ran.map((x) => [x.code, x.origin]), [['print(1)', 'auto'], ['print(2)', 'auto']]);
  assert.deepEqual(page.ran.map((x) => x.run_id), fin.data.run_ids);
  page.close();
});

test('the page hidden during a tool run: the turn waits, the page returns, the run goes again, the turn finishes', async () => {
  const chat = await newChat(srv);
  const page = await openPage(chat);
  model.script.push({ code: 'print("slow")' }, { text: 'Done after the pause.' });
  const n0 = model.requests.length;
  const r = await ask(chat, 'run something');
  const first = (await page.nextRun(10000)).data;
  await page.started(first);
  await page.presence(false);
  await sleep(500);
  assert.equal(model.requests.length, n0 + 1, 'the model is not asked again while the run waits');
  assert.equal((await messages(chat)).at(-1).state, 'streaming');
  assert.equal((await call(srv, 'GET', `/v1/runs/${first.run_id}`)).json.state, 'paused');
  await page.presence(true);
  const again = (await page.nextRun(10000)).data;
  assert.equal(again.run_id, first.run_id);
  assert.equal(again.attempt, 2);
  await page.started(again);
  await page.result(again, { stdout: 'slow\n' });
  const fin = await ended(page, r.json.answer_id);
  assert.equal(fin.data.state, 'done');
  assert.equal(fin.data.text, 'Done after the pause.');
  assert.match(model.requests[n0 + 1].body.messages.find((m) => m.role === 'tool').content, /slow/);
  page.close();
});

test('a model error is shown as such and the chat takes the next message', async () => {
  const chat = await newChat(srv);
  const page = await openPage(chat);
  model.script.push({ status: 500, body: { error: { message: 'model overloaded, try later', type: 'server_error' } } });
  const r = await ask(chat, 'hi');
  const fin = await ended(page, r.json.answer_id);
  assert.equal(fin.data.state, 'error');
  assert.equal(fin.data.error.code, 'model_error');
  assert.match(fin.data.error.message, /HTTP 500/);
  assert.match(fin.data.error.message, /model overloaded, try later/);
  model.script.push({ text: 'Better now.' });
  const r2 = await ask(chat, 'again');
  assert.equal(r2.status, 201, 'no stuck turn');
  assert.equal((await ended(page, r2.json.answer_id)).data.state, 'done');
  page.close();
});

test('a stalled stream ends as model_stalled after CEREA_LLM_STALL_S', async () => {
  const chat = await newChat(srv);
  const page = await openPage(chat);
  model.script.push({ stall: true });
  const t0 = Date.now();
  const r = await ask(chat, 'hi');
  const fin = await ended(page, r.json.answer_id, 15000);
  assert.equal(fin.data.state, 'error');
  assert.equal(fin.data.error.code, 'model_stalled');
  assert.match(fin.data.error.message, /sent nothing for 1 s/);
  assert.ok(Date.now() - t0 >= 900, 'not before the stall bound');
  model.script.push({ text: 'ok' });
  assert.equal((await ask(chat, 'again')).status, 201);
  await page.next((e) => e.event === 'message' && e.id !== null && e.data.state === 'done');
  page.close();
});

test('a stop ends the model request and keeps the text so far', async () => {
  const chat = await newChat(srv);
  const page = await openPage(chat);
  model.script.push({ text: 'one two three four five six seven eight nine ten', pieces: 10, delayMs: 300 });
  const r = await ask(chat, 'count slowly');
  await page.next((e) => e.event === 'message' && e.id === null && e.data.delta);
  const busy = await ask(chat, 'and more?');
  assert.equal(busy.status, 409);
  assert.equal(busy.json.error.code, 'turn_open');
  const c = await call(srv, 'POST', `/v1/turns/${r.json.turn_id}/cancel`, { token: chat.token, body: {} });
  assert.equal(c.status, 200, c.buf.toString());
  assert.deepEqual(c.json, { turn_id: r.json.turn_id, state: 'finished', message_id: r.json.answer_id, message_state: 'stopped' });
  const fin = await ended(page, r.json.answer_id);
  assert.equal(fin.data.state, 'stopped');
  assert.ok(fin.data.text.length > 0 && fin.data.text.length < 40, fin.data.text);
  assert.equal(fin.data.error, null);
  const again = await call(srv, 'POST', `/v1/turns/${r.json.turn_id}/cancel`, { token: chat.token, body: {} });
  assert.equal(again.status, 409);
  await sleep(200);
  assert.ok(model.requests.at(-1).closed, 'the model request was ended');
  page.close();
});

test('a second page sees the same conversation live; a page attaching mid-answer gets it whole', async () => {
  const chat = await newChat(srv);
  const a = await openPage(chat, 'tab-a');
  const b = await openPage(chat, 'tab-b');
  model.script.push({ text: 'streaming to every page of the chat', pieces: 6, delayMs: 150 });
  const r = await ask(chat, 'hi both', chat.token);
  await a.next((e) => e.event === 'message' && e.id === null && e.data.delta);
  const c = await openPage(chat, 'tab-c');
  const held = await c.next((e) => e.event === 'message' && e.id === null && e.data.message_id === r.json.answer_id && !e.data.delta);
  assert.equal(held.data.state, 'streaming');
  assert.ok(held.data.text.length > 0);
  for (const p of [a, b, c]) {
    const fin = await ended(p, r.json.answer_id);
    assert.equal(fin.data.text, 'streaming to every page of the chat');
  }
  const deltas = (p) => p.events.filter((e) => e.event === 'message' && e.id === null && e.data.delta).map((e) => e.data.delta.text).join('');
  assert.equal(deltas(b), 'streaming to every page of the chat');
  for (const p of [a, b, c]) p.close();
});

test('bad asks are refused and lose nothing; attachments reach the model with their code note', async () => {
  const chat = await newChat(srv);
  assert.equal((await call(srv, 'POST', `/v1/chats/${chat.id}/messages`, { token: chat.token, body: { text: '  ' } })).status, 400);
  assert.equal((await call(srv, 'POST', `/v1/chats/${chat.id}/messages`, { token: chat.token, body: { text: 'x'.repeat(32001) } })).json.error.code, 'invalid_field');
  assert.equal((await call(srv, 'POST', `/v1/chats/${chat.id}/messages`, { token: chat.token, body: { text: 'x', file_ids: ['0'.repeat(32)] } })).status, 400);
  const other = await newChat(srv);
  const of = await upload(srv, other, 'theirs.csv', 'a,b\n');
  assert.match((await call(srv, 'POST', `/v1/chats/${chat.id}/messages`, { token: chat.token, body: { text: 'x', file_ids: [of.json.file_id] } })).json.error.message, /not|no file/);
  assert.deepEqual(await messages(chat), []);
  const f = await upload(srv, chat, 'data.csv', 'a,b\n1,2\n');
  const page = await openPage(chat);
  model.script.push({ text: 'I see your file.' });
  const r = await call(srv, 'POST', `/v1/chats/${chat.id}/messages`, { token: chat.token, body: { text: 'look at this', file_ids: [f.json.file_id] } });
  assert.equal(r.status, 201);
  await ended(page, r.json.answer_id);
  const msgs = model.requests.at(-1).body.messages;
  assert.match(msgs.at(-1).content, /^look at this\n\nAttached: data\.csv\. The file is available to code at \/mnt\/data\/data\.csv/);
  assert.match(msgs[0].content, /data\.csv: The file is available to code at \/mnt\/data\/data\.csv/);
  page.close();
});

test('the message list pages: the newest by default, before and after a message id, bad input refused', async () => {
  const chat = await newChat(srv);
  const page = await openPage(chat);
  for (let i = 0; i < 6; i++) {
    model.script.push({ text: `answer ${i}` });
    const r = await ask(chat, `question ${i}`);
    assert.equal(r.status, 201);
    await ended(page, r.json.answer_id);
  }
  page.close();
  const get = (q) => call(srv, 'GET', `/v1/chats/${chat.id}/messages${q}`, { token: chat.token });
  const texts = (r) => r.json.messages.map((m) => m.text);
  const all = await get('');
  assert.equal(all.status, 200);
  assert.equal(all.json.has_more, false);
  assert.deepEqual(texts(all), [0, 1, 2, 3, 4, 5].flatMap((i) => [`question ${i}`, `answer ${i}`]));
  const ids = all.json.messages.map((m) => m.message_id);
  const newest = await get('?limit=5');
  assert.deepEqual(texts(newest), ['answer 3', 'question 4', 'answer 4', 'question 5', 'answer 5']);
  assert.equal(newest.json.has_more, true);
  // walking back from the newest page with `before` gives the whole conversation once, in order
  let walked = [...newest.json.messages], more = newest.json.has_more;
  while (more) {
    const r = await get(`?limit=5&before=${walked[0].message_id}`);
    assert.equal(r.status, 200);
    walked = [...r.json.messages, ...walked];
    more = r.json.has_more;
  }
  assert.deepEqual(walked.map((m) => m.message_id), ids);
  const after = await get(`?after=${ids[3]}&limit=4`);
  assert.deepEqual(after.json.messages.map((m) => m.message_id), ids.slice(4, 8));
  assert.equal(after.json.has_more, true);
  const tail = await get(`?after=${ids[9]}`);
  assert.deepEqual(tail.json.messages.map((m) => m.message_id), ids.slice(10));
  assert.equal(tail.json.has_more, false);
  assert.deepEqual((await get(`?before=${ids[0]}`)).json, { messages: [], has_more: false });
  assert.equal((await get('?limit=500')).json.messages.length, 12);
  const other = await newChat(srv);
  const theirs = await call(srv, 'GET', `/v1/chats/${other.id}/messages?before=${ids[5]}`, { token: other.token });
  for (const [q, why] of [['?limit=0', /limit/], ['?limit=501', /limit/], ['?limit=100000000000000000000', /limit/], ['?limit=abc', /limit/],
    ['?limit=', /limit/], ['?limit=5x', /limit/], ['?before=not-an-id', /before/], ['?after=%27%20OR%201%3D1', /after/],
    [`?before=${'0'.repeat(32)}`, /no message/], [`?before=${ids[1]}&after=${ids[0]}`, /one cursor/]]) {
    const r = await get(q);
    assert.equal(r.status, 400, `${q}: ${r.buf}`);
    assert.equal(r.json.error.code, 'invalid_field', q);
    assert.match(r.json.error.message, why, q);
  }
  assert.equal(theirs.status, 400, 'a cursor of another chat names no message there');
  assert.equal((await get('')).json.messages.length, 12, 'nothing lost');
});

test('what is replayed of earlier turns has a budget: long tool arguments and results shortened, the oldest turns dropped past 1 MiB', async (t) => {
  // Its own server, whose stall bound is not this file's 1 s: the model double reads requests of
  // megabytes here, and on a busy machine took longer than 1 s to send a first byte (model_stalled).
  const m2 = await startModelDouble();
  const s2 = await startServer({ env: env(m2, { CEREA_LLM_STALL_S: '30' }) });
  try {
    const chat = await newChat(s2);
    const page = await openPage(chat, 'tab', s2);
    const RESULT = `${'o'.repeat(6000)}\nRESULT-END\n`;
    runsEverything(page, () => RESULT);
    const big = (t, k) => `# head ${t}.${k}\n${'print(1)\n'.repeat(100000)}# tail ${t}.${k}\n`; // ~900 KB each
    const firsts = [];
    for (let i = 0; i < 4; i++) {
      m2.script.push({ calls: [big(i, 0), big(i, 1)] }, { text: `turn ${i} done` });
      firsts.push(m2.requests.length);
      const r = await ask(chat, `turn ${i}`, chat.token, s2);
      assert.equal(r.status, 201);
      const fin = await ended(page, r.json.answer_id, 30000);
      assert.equal(fin.data.state, 'done', JSON.stringify(fin.data.error));
    }
    // the turn in progress is sent whole: its own calls and results
    const within = m2.requests[firsts[3] + 1].body.messages;
    const own = within.filter((m) => m.tool_calls).at(-1);
    assert.equal(JSON.parse(own.tool_calls[0].function.arguments).code, big(3, 0));
    assert.equal(within.at(-1).role, 'tool');
    assert.ok(within.at(-1).content.includes(RESULT), 'its result whole');
    m2.script.push({ text: 'and now?' });
    const n0 = m2.requests.length;
    const r = await ask(chat, 'one more', chat.token, s2);
    await ended(page, r.json.answer_id);
    const rq = m2.requests[n0];
    // before the budget every request carried every earlier 900 KB argument whole (~7 MB here)
    t.diagnostic(`the fifth turn's request: ${rq.bytes} bytes`);
    assert.ok(rq.bytes < 200 * 1024, `the request is ${rq.bytes} bytes`);
    const msgs = rq.body.messages;
    assert.deepEqual(msgs.filter((m) => m.role === 'user').map((m) => m.content), ['turn 0', 'turn 1', 'turn 2', 'turn 3', 'one more']);
    const calls = msgs.filter((m) => m.tool_calls).flatMap((m) => m.tool_calls);
    assert.equal(calls.length, 8);
    for (const [i, c] of calls.entries()) {
      const code = JSON.parse(c.function.arguments).code; // still JSON
      assert.ok(code.startsWith(`# head ${Math.floor(i / 2)}.${i % 2}\n`), code.slice(0, 40));
      assert.ok(code.endsWith(`# tail ${Math.floor(i / 2)}.${i % 2}\n`));
      assert.match(code, /\n\[… \d+ characters left out …\]\n/);
      assert.ok([...code].length < 3100, `${[...code].length} characters kept`);
    }
    const results = msgs.filter((m) => m.role === 'tool');
    assert.equal(results.length, 8);
    for (const m of results) {
      assert.ok(m.content.includes('RESULT-END'), 'its end kept');
      assert.match(m.content, /characters left out/);
      assert.ok([...m.content].length < 3100, `${[...m.content].length} characters kept`);
    }
    page.close();

    // the overall budget: answers of 200,000 characters; the oldest turns go first, whole
    const chat2 = await newChat(s2);
    const page2 = await openPage(chat2, 'tab', s2);
    for (let i = 0; i < 7; i++) {
      m2.script.push({ text: `answer ${i} ${'w'.repeat(200000)}`, pieces: 4 });
      const r2 = await ask(chat2, `long ${i}`, chat2.token, s2);
      await ended(page2, r2.json.answer_id, 20000);
    }
    const last = m2.requests.at(-1);
    t.diagnostic(`the seventh long turn's request: ${last.bytes} bytes`);
    assert.ok(last.bytes < 1024 * 1024 + 64 * 1024, `${last.bytes} bytes`);
    const roles = last.body.messages.map((m) => m.role);
    assert.equal(roles[0], 'system');
    assert.equal(roles[1], 'user', 'the replay starts at a question');
    const asked = last.body.messages.filter((m) => m.role === 'user').map((m) => m.content);
    assert.equal(asked.at(-1), 'long 6');
    assert.ok(asked.length >= 4 && asked.length < 7, asked.join(', '));
    assert.deepEqual(asked, Array.from({ length: asked.length }, (_, i) => `long ${7 - asked.length + i}`), 'the newest kept, in order');
    page2.close();
  } finally {
    await s2.stop();
    await m2.close();
  }
});

test('a page link opens a chat made through the API (backend only)', async () => {
  const chat = await newChat(srv);
  const l = await call(srv, 'POST', `/v1/chats/${chat.id}/page_link`, { body: {} });
  assert.equal(l.status, 200);
  assert.equal(l.json.url, `${srv.base}/chat/${chat.id}#token=${l.json.page_token}`);
  assert.notEqual(l.json.page_token, chat.token);
  assert.equal((await call(srv, 'POST', `/v1/chats/${chat.id}/page_link`, { body: {} })).json.page_token, l.json.page_token);
  const linked = { id: chat.id, token: l.json.page_token };
  assert.equal((await call(srv, 'GET', `/v1/chats/${chat.id}/messages`, { token: linked.token })).status, 200);
  const page = await openPage(linked, 'linked');
  assert.equal(page.status, 200);
  page.close();
  assert.equal((await call(srv, 'POST', `/v1/chats/${chat.id}/page_link`, { token: chat.token, body: {} })).status, 403);
  const other = await newChat(srv);
  assert.equal((await call(srv, 'GET', `/v1/chats/${other.id}/messages`, { token: linked.token })).status, 403);
});

test('`data: [DONE]` ends the answer even when the model keeps the connection open', async () => {
  const chat = await newChat(srv);
  const page = await openPage(chat);
  model.script.push({ text: 'All done here.', keepOpen: true });
  const r = await ask(chat, 'hi');
  // CEREA_LLM_STALL_S is 1 here: an answer not taken as finished would end model_stalled
  const fin = await ended(page, r.json.answer_id);
  assert.equal(fin.data.state, 'done', JSON.stringify(fin.data));
  assert.equal(fin.data.text, 'All done here.');
  const rq = model.requests.at(-1);
  for (let i = 0; i < 50 && !rq.closed; i++) await sleep(100);
  assert.ok(rq.closed, 'the orchestrator closed the model connection itself');
  page.close();
});

// Every file under dir (the database, its WAL, blobs), read whole.
function filesUnder(dir) {
  const out = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...filesUnder(p));
    else if (e.isFile()) out.push(p);
  }
  return out;
}

test('the key echoed by the model (an HTTP error, an error in the stream) is scrubbed before it is stored or shown', async () => {
  const chat = await newChat(srv);
  const page = await openPage(chat);
  const proxyKey = 'sk-proxy-ABCDEFGHIJKLMNOPQRSTUVWX';
  model.script.push({ status: 401, body: { error: { message: `Invalid API key provided: Bearer ${LLM_KEY}`, type: 'invalid_request_error' } } });
  const r1 = await ask(chat, 'hi');
  const f1 = await ended(page, r1.json.answer_id);
  assert.equal(f1.data.error.code, 'model_error');
  assert.match(f1.data.error.message, /HTTP 401: Invalid API key provided: Bearer \[redacted\]/);
  model.script.push({ streamError: `Incorrect API key provided: ${LLM_KEY}; the proxy's is Bearer ${proxyKey} (key ${proxyKey})` });
  const r2 = await ask(chat, 'again');
  const f2 = await ended(page, r2.json.answer_id);
  assert.equal(f2.data.error.code, 'model_error');
  assert.match(f2.data.error.message, /Incorrect API key provided: \[redacted\]; the proxy's is Bearer \[redacted\] \(key \[redacted\]\)/);
  // the answer's own text, the key split across its pieces: taken out of it (a token's shape stays)
  model.script.push({ text: `Your key is ${LLM_KEY}, and sk-example-shape-1234567890 is a shape.`, pieces: 7, delayMs: 20 });
  const r3 = await ask(chat, 'what is my key?');
  const f3 = await ended(page, r3.json.answer_id);
  assert.equal(f3.data.state, 'done');
  assert.equal(f3.data.text, 'Your key is [redacted], and sk-example-shape-1234567890 is a shape.');
  const deltas = page.events.filter((e) => e.event === 'message' && e.id === null && e.data.message_id === r3.json.answer_id && e.data.delta);
  assert.ok(deltas.length > 1, 'it streamed');
  assert.equal(deltas.map((e) => e.data.delta.text).join(''), f3.data.text);
  const list = await call(srv, 'GET', `/v1/chats/${chat.id}/messages`, { token: chat.token });
  const listed = list.buf.toString();
  assert.match(listed, /redacted/);
  const streamed = JSON.stringify(page.events);
  for (const secret of [LLM_KEY, proxyKey]) {
    assert.ok(!listed.includes(secret), 'not in the message list');
    assert.ok(!streamed.includes(secret), 'not in the chat stream');
    assert.ok(!srv.log.includes(secret), 'not in the log');
  }
  if (!PG) { // the database files as they are on disk: cerea.db, its WAL
    const db = filesUnder(srv.dataDir).filter((p) => /cerea\.db/.test(p));
    assert.ok(db.length > 0);
    for (const p of db) for (const secret of [LLM_KEY, proxyKey]) assert.ok(!readFileSync(p).includes(secret), `not in ${p}`);
  }
  page.close();
});

test('the model key appears in no log line, event, stored byte or answer', async () => {
  assert.ok(model.requests.length > 3);
  assert.match(srv.log, /conversation turn [0-9a-f]+: asking -> tooling/, 'the log is at trace level');
  assert.ok(!srv.log.includes(LLM_KEY), 'not in the server log');
  const stored = filesUnder(srv.dataDir);
  if (PG) { // the store is in PostgreSQL (stage 45): every row of the tables that hold text, read whole
    for (const t of ['chats', 'files', 'turns', 'messages', 'runs', 'events', 'settings']) {
      assert.equal(sqlQuery(srv.dataDir, `SELECT count(*) FROM ${t} r WHERE strpos(r::text, '${LLM_KEY}') > 0`), '0', `not in ${t}`);
    }
  } else {
    assert.ok(stored.some((p) => p.endsWith('.db') || p.includes('db')), stored.join(' '));
  }
  for (const p of stored) assert.ok(!readFileSync(p).includes(LLM_KEY), `not in ${p} (the event log is in the database)`);
  const chats = (await call(srv, 'GET', '/v1/chats')).json.chats ?? [];
  for (const c of chats.slice(0, 20)) {
    const m = await call(srv, 'GET', `/v1/chats/${c.chat_id}/messages`);
    assert.ok(!m.buf.toString().includes(LLM_KEY));
  }
});

// A port nothing listens on.
async function freePort() {
  const s = createServer();
  await new Promise((r) => s.listen(0, '127.0.0.1', r));
  const port = s.address().port;
  await new Promise((r) => s.close(r));
  return port;
}

test('an unreachable model: model_unreachable, no stuck turn', async () => {
  const port = await freePort();
  const s2 = await startServer({ env: env({ url: `http://127.0.0.1:${port}/v1` }) });
  try {
    const chat = await newChat(s2);
    const page = await openPage(chat, 'tab', s2);
    const r = await ask(chat, 'hi', chat.token, s2);
    assert.equal(r.status, 201);
    const fin = await ended(page, r.json.answer_id);
    assert.equal(fin.data.state, 'error');
    assert.equal(fin.data.error.code, 'model_unreachable');
    assert.match(fin.data.error.message, /could not be reached/);
    assert.equal((await ask(chat, 'again', chat.token, s2)).status, 201);
    page.close();
    assert.ok(!s2.log.includes(LLM_KEY));
  } finally {
    await s2.stop();
  }
});

test("a turn's wall time (CEREA_LLM_TURN_S) ends it as turn_time_limit", async () => {
  const m2 = await startModelDouble();
  const s2 = await startServer({ env: env(m2, { CEREA_LLM_TURN_S: '1', CEREA_LLM_STALL_S: '30' }) });
  try {
    const chat = await newChat(s2);
    const page = await openPage(chat, 'tab', s2);
    m2.script.push({ text: 'a b c d e f g h i j', pieces: 10, delayMs: 400 });
    const r = await ask(chat, 'slow', chat.token, s2);
    const fin = await ended(page, r.json.answer_id);
    assert.equal(fin.data.error.code, 'turn_time_limit');
    assert.ok(fin.data.text.length > 0);
    page.close();
  } finally {
    await s2.stop();
    await m2.close();
  }
});

test('a server killed mid-answer: after its restart the answer says interrupted and the chat takes the next message', async () => {
  const m2 = await startModelDouble();
  let s2 = await startServer({ env: env(m2) });
  try {
    const chat = await newChat(s2);
    const page = await openPage(chat, 'tab', s2);
    m2.script.push({ text: 'a long answer that never ends here', pieces: 20, delayMs: 300 });
    const r = await ask(chat, 'long', chat.token, s2);
    await page.next((e) => e.event === 'message' && e.id === null && e.data.delta);
    page.close();
    await s2.stop('SIGKILL');
    s2 = await startServer({ dataDir: s2.dataDir, env: env(m2) });
    const list = await messages(chat, s2);
    assert.equal(list.at(-1).message_id, r.json.answer_id);
    assert.equal(list.at(-1).state, 'error');
    assert.equal(list.at(-1).error.code, 'interrupted');
    m2.script.push({ text: 'back' });
    assert.equal((await ask(chat, 'again', chat.token, s2)).status, 201);
  } finally {
    await s2.stop();
    await m2.close();
  }
});

test('a server killed while the model\'s tool run is held by the page: after its restart that run ends abandoned, never runs again; other runs still go', async () => {
  const m2 = await startModelDouble();
  let s2 = await startServer({ env: env(m2) });
  try {
    const chat = await newChat(s2);
    const page = await openPage(chat, 'tab', s2);
    m2.script.push({ code: 'print("a side effect")' });
    const r = await ask(chat, 'do it', chat.token, s2);
    assert.equal(r.status, 201);
    const tool = (await page.nextRun(10000)).data;
    assert.equal(tool.origin, 'tool');
    assert.equal((await page.started(tool)).status, 200);
    // the user's own run, queued behind it: it is no tool run of the turn and must still run
    const mine = await call(s2, 'POST', `/v1/chats/${chat.id}/runs`, { token: chat.token, body: { code: 'print("mine")', origin: 'user' } });
    assert.equal(mine.status, 201, mine.buf.toString());
    page.close();
    await s2.stop('SIGKILL');
    s2 = await startServer({ dataDir: s2.dataDir, env: env(m2) });
    const p2 = await openPage(chat, 'tab2', s2);
    const next = (await p2.nextRun(15000)).data;
    assert.equal(next.run_id, mine.json.run_id, `the next run dispatched is the user's, not the tool run again (got ${next.origin} attempt ${next.attempt})`);
    await p2.started(next);
    await p2.result(next, { stdout: 'mine\n' });
    const got = await call(s2, 'GET', `/v1/runs/${tool.run_id}?wait_s=10`, { token: chat.token });
    assert.equal(got.json.state, 'done');
    assert.equal(got.json.status, 'abandoned');
    assert.equal(got.json.attempts, 1, 'never dispatched again');
    assert.equal(got.json.error.type, 'Abandoned');
    assert.match(got.json.error.message, /restarted.*not run again/);
    await sleep(1500);
    assert.ok(!p2.events.some((e) => e.event === 'run' && e.data.run_id === tool.run_id), 'no dispatch of the tool run after the restart');
    const list = await messages(chat, s2);
    assert.equal(list.at(-1).message_id, r.json.answer_id);
    assert.equal(list.at(-1).error.code, 'interrupted');
    assert.deepEqual(list.at(-1).run_ids, [tool.run_id]);
    m2.script.push({ text: 'back' });
    const again = await ask(chat, 'again', chat.token, s2);
    assert.equal(again.status, 201, 'the chat takes the next message');
    await ended(p2, again.json.answer_id);
    // The interrupted answer is replayed as its text alone: its calls were to be stored with its end.
    const replay = m2.requests.at(-1).body.messages.filter((m) => m.role !== 'system');
    assert.deepEqual(replay.map((m) => m.role), ['user', 'user'], JSON.stringify(replay).slice(0, 400));
    p2.close();
  } finally {
    await s2.stop();
    await m2.close();
  }
});

test('without a model: /v1/config says null and a message is refused 503 no_model', async () => {
  const s2 = await startServer();
  try {
    assert.equal((await call(s2, 'GET', '/v1/config')).json.assistant, null);
    const chat = await newChat(s2);
    const r = await ask(chat, 'hi', chat.token, s2);
    assert.equal(r.status, 503);
    assert.equal(r.json.error.code, 'no_model');
    assert.match(r.json.error.message, /CEREA_LLM_URL/);
    assert.deepEqual((await call(s2, 'GET', `/v1/chats/${chat.id}/messages`, { token: chat.token })).json.messages, []);
  } finally {
    await s2.stop();
  }
});
