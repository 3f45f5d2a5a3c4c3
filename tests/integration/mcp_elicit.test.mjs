// mcp_elicit.test.mjs -- input() through the protocol: a client that declared elicitation at
// initialize (the official SDK's Client with capabilities.elicitation and a handler for
// elicitation/create) is asked input()'s prompt on the call's own stream, and its answer is the
// run's input; a client that declines leaves it to the page; one that never answers meets the
// run's input wait; a client without elicitation is never asked.  Scripted pages (lib.mjs).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { startServer, call, newChat, Page, tempDir } from './lib.mjs';
import { mcpClient, textOf } from './mcp_lib.mjs';

let srv;
before(async () => {
  srv = await startServer({ dataDir: tempDir('mcp-elicit'), env: { CODE_TIME_LIMIT_S: '5', CODE_INPUT_WAIT_S: '3', CODE_WATCHDOG_GRACE_MS: '1000' } });
});
after(async () => { await srv?.stop('SIGTERM'); });

// An SDK client that declares elicitation; answer(request) is its handler.
async function elicitingClient(answer) {
  const transport = new StreamableHTTPClientTransport(new URL(`${srv.base}/mcp`), {
    requestInit: { headers: { authorization: `Bearer ${srv.key}` } },
  });
  const client = new Client({ name: 'cerea-elicit-test', version: '1.0.0' }, { capabilities: { elicitation: {} } });
  const asked = [];
  client.setRequestHandler(ElicitRequestSchema, (req) => { asked.push(req.params); return answer(req.params); });
  await client.connect(transport);
  return { client, asked, close: () => client.close() };
}

async function runWithInput(c, prompt) {
  const chat = await newChat(srv);
  const page = new Page(srv, chat, 'p1');
  await page.opened;
  page.heartbeat(500); // a live page: the run is not paused as silent
  const pending = c.client.callTool({ name: 'run_python', arguments: { chat_id: chat.id, code: `input(${JSON.stringify(prompt)})` } }, undefined, { timeout: 60000 });
  const ev = await page.nextRun();
  await page.started(ev.data);
  await page.output(ev.data, { input_request: { prompt } });
  return { chat, page, pending, run: ev.data };
}

test('a client that declared elicitation is asked input()\'s prompt; its accepted answer is the run\'s input', async () => {
  const c = await elicitingClient(async () => ({ action: 'accept', content: { answer: 'Ada' } }));
  const { page, pending, run } = await runWithInput(c, 'Your name? ');
  const given = await page.next('input', 10000);
  assert.equal(given.data.text, 'Ada', 'the page hears the answer as if the person had typed it');
  assert.equal(c.asked.length, 1);
  assert.match(c.asked[0].message, /Your name\? /);
  assert.deepEqual(c.asked[0].requestedSchema.required, ['answer']);
  await page.result(run, { stdout: 'hello Ada\n' });
  const r = await pending;
  assert.equal(r.isError, false);
  assert.match(textOf(r), /hello Ada/);
  page.close();
  await c.close();
});

test('declined: nothing is given, the page may still answer; never answered: the run\'s input wait ends it', async () => {
  const declining = await elicitingClient(async () => ({ action: 'decline' }));
  const a = await runWithInput(declining, 'sure? ');
  for (let i = 0; i < 50 && declining.asked.length === 0; i++) await new Promise((r) => setTimeout(r, 50));
  assert.equal(declining.asked.length, 1);
  assert.equal((await call(srv, 'GET', `/v1/runs/${a.run.run_id}`)).json.state, 'waiting_input', 'a decline gives no input');
  assert.equal((await call(srv, 'POST', `/v1/runs/${a.run.run_id}/input`, { token: a.chat.token, body: { text: 'yes' } })).status, 200);
  assert.equal((await a.page.next('input', 10000)).data.text, 'yes');
  await a.page.result(a.run, { stdout: 'yes\n' });
  assert.match(textOf(await a.pending), /yes/);
  a.page.close();
  await declining.close();

  const silent = await elicitingClient(() => new Promise(() => {})); // never answers
  const b = await runWithInput(silent, 'anyone? ');
  const t0 = Date.now();
  const r = await b.pending; // the input wait (3 s and the watchdog's 1 s), then the time limit's 5 s
  assert.ok(Date.now() - t0 < 30000);
  assert.equal(silent.asked.length, 1);
  const end = (await call(srv, 'GET', `/v1/runs/${b.run.run_id}`)).json;
  assert.notEqual(end.state, 'waiting_input');
  assert.equal(r.structuredContent.run_id, b.run.run_id);
  assert.notEqual(r.structuredContent.status, 'ok', `the run ended by its input wait: ${textOf(r)}`);
  b.page.close();
  await silent.close();
});

test('a client without elicitation is never asked: the page answers, as before', async () => {
  const c = await mcpClient(srv);
  let asked = 0;
  c.client.fallbackRequestHandler = async () => { asked++; return {}; };
  const { page, pending, run, chat } = await runWithInput(c, 'name? ');
  await new Promise((r) => setTimeout(r, 500));
  assert.equal((await call(srv, 'GET', `/v1/runs/${run.run_id}`)).json.state, 'waiting_input');
  assert.equal((await call(srv, 'POST', `/v1/runs/${run.run_id}/input`, { token: chat.token, body: { text: 'Bo' } })).status, 200);
  await page.next('input', 10000);
  await page.result(run, { stdout: 'Bo\n' });
  assert.match(textOf(await pending), /Bo/);
  assert.equal(asked, 0);
  page.close();
  await c.close();
});
