// mcp_words.test.mjs -- the model is told what it has (issue 27): the tools' words are built from
// what this deployment serves (charts only where matplotlib is served) and name only the tools the
// caller is offered.  The built-in assistant's model is a TEST DOUBLE (model_double.mjs, a
// scripted OpenAI-compatible server): it calls every tool its request names, and none of those
// calls is answered "Unknown tool".
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, call, newChat, Page } from './lib.mjs';
import { startModelDouble } from './model_double.mjs';

const TOOLS = ['run_python', 'list_files', 'add_file', 'wait_for_run', 'cancel_run'];
let srv, model;
before(async () => {
  model = await startModelDouble();
  srv = await startServer({ env: { CEREA_LLM_URL: model.url, CEREA_LLM_MODEL: 'double-model' } });
});
after(async () => { await srv?.stop(); await model?.close(); });

test('the run_python description speaks of charts exactly where matplotlib is served; each tool named in /v1/tools is listed there', async () => {
  const cfg = (await call(srv, 'GET', '/v1/config')).json;
  const served = (cfg.packages?.has ?? []).some((p) => p.name === 'matplotlib');
  const tools = (await call(srv, 'GET', '/v1/tools')).json.tools.map((t) => t.function);
  const run = tools.find((t) => t.name === 'run_python');
  assert.equal(/plt\.show\(\)/.test(run.description), served, `matplotlib served: ${served}`);
  if (!served) assert.match(run.description, /Not available here[^\n]*matplotlib/);
  const listed = tools.map((t) => t.name);
  for (const t of tools) for (const name of TOOLS) if (t.description.includes(name)) assert.ok(listed.includes(name), `${t.name} names ${name}`);
});

test('the built-in assistant: a model that calls every tool its request names never hears "Unknown tool"', { timeout: 60000 }, async () => {
  const chat = await newChat(srv);
  const page = new Page(srv, chat, 'tab');
  await page.opened;
  (async () => { // the page runs what it is sent
    for (;;) {
      let ev;
      try { ev = await page.nextRun(30000); } catch { return; }
      await page.started(ev.data);
      await page.result(ev.data, { stdout: 'ran\n' });
    }
  })();
  const ask = async (text) => {
    const r = await call(srv, 'POST', `/v1/chats/${chat.id}/messages`, { token: chat.token, body: { text } });
    assert.equal(r.status, 201, r.buf.toString());
    await page.next((e) => e.event === 'message' && e.data.role === 'assistant' && e.data.state !== 'streaming', 30000);
  };
  const n0 = model.requests.length;
  model.script.push({ text: 'Hello.' });
  await ask('hello');
  const first = model.requests[n0].body;
  const words = JSON.stringify([first.messages.find((m) => m.role === 'system'), first.tools]);
  const named = TOOLS.filter((n) => words.includes(n));
  assert.ok(named.includes('run_python'), named.join());
  const offered = first.tools.map((t) => t.function.name);
  const n1 = model.requests.length;
  for (const name of named) model.script.push({ name, code: 'print(1)', args: { code: 'print(1)', run_id: '0'.repeat(32), name: 'a.txt', text: 'a' } });
  model.script.push({ text: 'Done.' });
  await ask('use every tool you were told of');
  const answers = model.requests.slice(n1).flatMap((r) => r.body.messages.filter((m) => m.role === 'tool').map((m) => m.content));
  console.log(`# offered ${offered.join(', ')}; named ${named.join(', ')}; ${answers.length} tool answers`);
  assert.ok(answers.length >= named.length, `${answers.length} answers for ${named.length} calls`);
  for (const a of answers) assert.doesNotMatch(a, /Unknown tool/);
  page.close();
});
