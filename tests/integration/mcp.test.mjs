// mcp.test.mjs -- the MCP server and /v1/tools over real HTTP, in browser mode with scripted pages
// (tests/integration/lib.mjs's Page: the page protocol driven by the test, so every state a run
// passes through, hidden pages included, happens when the test says).  The client is the official
// TypeScript SDK (Client + StreamableHTTPClientTransport) where it can say what is tested, raw
// POSTs where the SDK would never send it.  Real Pyodide runs are tests/fullstack/mcp.test.mjs.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { startServer, call, newChat, upload, Page, runEvents, sleep, tempDir } from './lib.mjs';
import { mcpClient, rpc, initialize, textOf, runOf } from './mcp_lib.mjs';

let srv;
const dataDir = tempDir('mcp');
before(async () => { srv = await startServer({ dataDir, env: { CODE_TIME_LIMIT_S: '7', CODE_PAUSED_WAIT_MS: '60000' } }); });
after(async () => { await srv?.stop('SIGTERM'); });

const PNG = Buffer.from('89504e470d0a1a0a0000000d4948445200000001000000010806000000' +
  '1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082', 'hex');

// Waits until the progress list holds n notifications of that state (and returns the n-th).
async function sawState(progress, state, n = 1, timeoutMs = 10000) {
  const t0 = Date.now();
  for (;;) {
    const p = progress.filter((x) => runOf(x)?.state === state)[n - 1];
    if (p) return p;
    if (Date.now() - t0 > timeoutMs) throw new Error(`no progress "${state}" in ${timeoutMs} ms: ${JSON.stringify(progress.map((x) => runOf(x)?.state))}`);
    await sleep(20);
  }
}

// A new chat with its page open, and a run_python call in it whose progress is collected.
async function callWithPage(code, opts = {}) {
  const chat = await newChat(srv);
  const page = new Page(srv, chat, 'p1');
  await page.opened;
  const c = await mcpClient(srv);
  const progress = [];
  const pending = c.client.callTool({ name: 'run_python', arguments: { chat_id: chat.id, code } },
    undefined, { onprogress: (p) => progress.push(p), timeout: 60000, ...opts });
  return { chat, page, c, progress, pending };
}

// Waits until f() is truthy (and returns what it returned).
async function waitFor(f, timeoutMs = 10000) {
  const t0 = Date.now();
  for (;;) {
    const v = f();
    if (v) return v;
    if (Date.now() - t0 > timeoutMs) throw new Error(`not within ${timeoutMs} ms: ${f}`);
    await sleep(20);
  }
}

test('initialize negotiates the version: 2025-11-25 and 2025-06-18 as asked, an unknown one gets the newest', async () => {
  const c = await mcpClient(srv);
  assert.equal(c.transport.protocolVersion, '2025-11-25');
  assert.match(c.transport.sessionId, /^[0-9a-f]{64}$/);
  assert.equal(c.client.getServerVersion().name, 'cerea-sandbox');
  assert.deepEqual(c.client.getServerCapabilities().tools, { listChanged: false });
  assert.match(c.client.getInstructions(), /run_python/);
  await c.client.ping();
  await c.close();
  const old = await mcpClient(srv, { version: '2025-06-18' });
  assert.equal(old.transport.protocolVersion, '2025-06-18', 'the SDK took the older version we answered');
  assert.equal((await old.client.listTools()).tools.length, 5);
  await old.close();
  for (const asked of ['2099-01-01', '2024-11-05', 'not a date']) {
    const r = await initialize(srv, asked);
    assert.equal(r.status, 200);
    assert.equal(r.version, '2025-11-25', `asked ${asked}`);
    assert.match(r.session, /^[0-9a-f]{64}$/);
  }
});

test('sessions: required after initialize (400), unknown or ended (404), bound to the credential; MCP-Protocol-Version checked (400); DELETE ends one; GET is 405', async () => {
  const { session } = await initialize(srv);
  const ping = { jsonrpc: '2.0', id: 7, method: 'ping' };
  assert.equal((await rpc(srv, ping, { session })).status, 200);
  assert.deepEqual((await rpc(srv, ping, { session, version: '2025-06-18' })).json.result, {});
  const none = await rpc(srv, ping);
  assert.equal(none.status, 400);
  assert.equal(none.json.error.code, -32600);
  const unknown = await rpc(srv, ping, { session: 'f'.repeat(64) });
  assert.equal(unknown.status, 404);
  assert.equal(unknown.json.error.code, -32004);
  const badVersion = await rpc(srv, ping, { session, version: '2024-11-05' });
  assert.equal(badVersion.status, 400);
  assert.match(badVersion.json.error.message, /2024-11-05 is not supported/);
  // Another credential naming the session: as if there were none.
  const chat = await newChat(srv);
  const key = (await call(srv, 'POST', `/v1/chats/${chat.id}/chat_key`)).json.key;
  assert.equal((await rpc(srv, ping, { session, key })).status, 404);
  // GET: no server-initiated stream here.
  const get = await fetch(`${srv.base}/mcp`, { headers: { authorization: `Bearer ${srv.key}`, accept: 'text/event-stream' } });
  assert.equal(get.status, 405);
  assert.match(get.headers.get('allow'), /POST/);
  await get.text();
  // DELETE ends it; the SDK's terminateSession does the same.
  const del = await fetch(`${srv.base}/mcp`, { method: 'DELETE', headers: { authorization: `Bearer ${srv.key}`, 'mcp-session-id': session } });
  assert.equal(del.status, 200);
  assert.equal((await rpc(srv, ping, { session })).status, 404);
  const c = await mcpClient(srv);
  const sid = c.transport.sessionId;
  await c.transport.terminateSession();
  assert.equal((await rpc(srv, ping, { session: sid })).status, 404);
  await c.close();
});

test('notifications and responses get 202 with no body', async () => {
  const { session } = await initialize(srv);
  for (const m of [{ jsonrpc: '2.0', method: 'notifications/initialized' },
    { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 99 } },
    { jsonrpc: '2.0', method: 'notifications/something_else' },
    { jsonrpc: '2.0', id: 5, result: {} }]) {
    const r = await rpc(srv, m, { session });
    assert.equal(r.status, 202, JSON.stringify(m));
    assert.equal(r.text, '');
  }
});

test('malformed JSON-RPC: parse error, batches, not 2.0, a null id (400); unknown method (-32601); invalid params (-32602)', async () => {
  const { session } = await initialize(srv);
  const cases = [
    ['{"jsonrpc": "2.0", "id": 1, "method": ', 400, -32700],
    ['', 400, -32700],
    ['[{"jsonrpc":"2.0","id":1,"method":"ping"}]', 400, -32600],
    ['{"jsonrpc":"1.0","id":1,"method":"ping"}', 400, -32600],
    ['{"id":1,"method":"ping"}', 400, -32600],
    ['{"jsonrpc":"2.0","id":null,"method":"ping"}', 400, -32600],
    ['{"jsonrpc":"2.0","id":1.5,"method":"ping"}', 400, -32600],
    ['{"jsonrpc":"2.0","id":1,"method":7}', 400, -32600],
    ['"just a string"', 400, -32600],
    ['{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}', 400, -32700],
    ['{"jsonrpc":"2.0","id":1,"method":"resources/list"}', 200, -32601],
    ['{"jsonrpc":"2.0","id":"a","method":"no/such"}', 200, -32601],
    ['{"jsonrpc":"2.0","id":1,"method":"tools/list","params":[1]}', 200, -32602],
    ['{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}', 200, -32602],
    ['{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_python","arguments":[1]}}', 200, -32602],
    ['{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"rm_rf","arguments":{}}}', 200, -32602],
    ['{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}', 200, -32602],
  ];
  for (const [body, status, code] of cases) {
    const r = await rpc(srv, body, { session });
    assert.equal(r.status, status, `${body}: ${r.text}`);
    assert.equal(r.json.jsonrpc, '2.0');
    assert.equal(r.json.error.code, code, `${body}: ${r.text}`);
  }
  const unknownTool = await rpc(srv, cases[15][0], { session });
  assert.equal(unknownTool.json.error.message, 'Unknown tool: rm_rf');
  assert.equal(unknownTool.json.id, 1, 'the error answers the request id');
  // Through the SDK: an unknown tool is an McpError with the spec's code.
  const c = await mcpClient(srv);
  await assert.rejects(c.client.callTool({ name: 'nope', arguments: {} }), (e) => e.code === -32602);
  await assert.rejects(c.client.request({ method: 'prompts/list' }, (await import('@modelcontextprotocol/sdk/types.js')).ListPromptsResultSchema), (e) => e.code === -32601);
  await c.close();
});

test('credentials: none or wrong -> 401 (WWW-Authenticate), a page token -> 403, another origin -> 403, ours is fine', async () => {
  const chat = await newChat(srv);
  const init = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25' } };
  const none = await rpc(srv, init, { key: null });
  assert.equal(none.status, 401);
  assert.match(none.headers.get('www-authenticate'), /^Bearer/);
  assert.equal(none.json.error.code, -32001);
  assert.equal((await rpc(srv, init, { key: 'wrong-key-0123456789' })).status, 401);
  assert.equal((await rpc(srv, init, { key: chat.token })).status, 403, 'a page token is not for assistants');
  assert.equal((await rpc(srv, init, { key: `mcp.${chat.id}.${'0'.repeat(64)}` })).status, 401, 'a forged chat key');
  assert.equal((await rpc(srv, init, { key: `${chat.id}.${'0'.repeat(64)}` })).status, 401, 'a forged page token');
  await assert.rejects(mcpClient(srv, { key: 'wrong-key-0123456789' }), (e) => e.code === 401);
  const evil = await rpc(srv, init, { headers: { origin: 'http://evil.example' } });
  assert.equal(evil.status, 403);
  assert.equal(evil.json.error.code, -32003);
  assert.equal((await rpc(srv, init, { headers: { origin: 'null' } })).status, 403, 'an opaque origin (a sandboxed frame)');
  assert.equal((await rpc(srv, init, { headers: { origin: `http://127.0.0.1:${srv.port + 1}` } })).status, 403, 'another port');
  assert.equal((await rpc(srv, init, { headers: { origin: `http://127.0.0.1:${srv.port}` } })).status, 200, 'our own origin');
  assert.equal((await call(srv, 'GET', '/v1/tools', { token: null })).status, 401);
  assert.equal((await call(srv, 'GET', '/v1/tools', { token: chat.token })).status, 403);
});

test('oversized bodies are refused with 413 before they are read whole', async () => {
  const { session } = await initialize(srv);
  // Announced past 12 MiB: answered 413 on the Content-Length, before a byte of the body (a
  // client still writing when the server closes would see a reset instead).
  for (const path of ['/mcp', '/v1/tools/call']) {
    const status = await new Promise((resolve, reject) => {
      const req = httpRequest({ host: '127.0.0.1', port: srv.port, method: 'POST', path, agent: false,
        headers: { authorization: `Bearer ${srv.key}`, 'mcp-session-id': session, 'content-type': 'application/json', 'content-length': 12 * 1024 * 1024 + 1 } });
      req.on('response', (res) => { resolve(res.statusCode); res.resume(); req.destroy(); });
      req.on('error', reject);
      req.flushHeaders();
    });
    assert.equal(status, 413, path);
  }
  // Within the body limit but over add_file's: refused by the tool, with the reason.
  const c = await mcpClient(srv);
  const chat = await newChat(srv);
  const r = await c.client.callTool({ name: 'add_file', arguments: { chat_id: chat.id, name: 'big.txt', text: 'y'.repeat(9 * 1024 * 1024) } });
  assert.equal(r.isError, true);
  assert.match(textOf(r), /over 8 MB/);
  await c.close();
});

test('tools/list: five tools with input schemas; the descriptions carry the deployment\'s limit and packages; GET /v1/tools says the same as OpenAI functions', async () => {
  const c = await mcpClient(srv);
  const { tools } = await c.client.listTools();
  assert.deepEqual(tools.map((t) => t.name), ['run_python', 'list_files', 'add_file', 'wait_for_run', 'cancel_run']);
  const run = tools[0];
  assert.equal(run.inputSchema.type, 'object');
  assert.deepEqual(run.inputSchema.required, ['code', 'chat_id']);
  assert.equal(run.inputSchema.properties.timeout_s.maximum, 7, 'CODE_TIME_LIMIT_S of this server');
  assert.match(run.description, /Time limit: 7 s per run/);
  assert.match(run.description, /\/mnt\/data/);
  assert.match(run.description, /\/mnt\/output/);
  assert.match(run.description, /Network: none/);
  assert.match(run.description, /openpyxl/, 'a package this deployment serves');
  assert.match(run.description, /Not available here[^\n]*numpy/, 'one it lacks');
  assert.match(run.description, /page must be open/, 'browser mode');
  assert.equal(run.annotations.readOnlyHint, false);
  assert.equal(tools[1].annotations.readOnlyHint, true);
  assert.deepEqual(tools[2].inputSchema.required, ['chat_id', 'name']);
  const http = await call(srv, 'GET', '/v1/tools');
  assert.equal(http.status, 200);
  assert.deepEqual(http.json.tools.map((t) => t.type), ['function', 'function', 'function', 'function', 'function']);
  assert.deepEqual(http.json.tools.map((t) => ({ name: t.function.name, description: t.function.description, parameters: t.function.parameters })),
    tools.map((t) => ({ name: t.name, description: t.description, parameters: t.inputSchema })));
  // After an operator changes the time limit, the words follow.
  assert.equal((await call(srv, 'PUT', '/v1/admin/settings', { body: { time_limit_s: 5 } })).status, 200);
  const again = (await c.client.listTools()).tools[0];
  assert.match(again.description, /Time limit: 5 s per run/);
  assert.equal((await call(srv, 'PUT', '/v1/admin/settings', { body: { time_limit_s: 7 } })).status, 200);
  await c.close();
});

test('run_python: progress states (waiting for the page, starting, running, paused in the background, running again) before a result written for the model', async () => {
  const chat = await newChat(srv);
  const c = await mcpClient(srv);
  const progress = [];
  const pending = c.client.callTool({ name: 'run_python', arguments: { chat_id: chat.id, code: 'print(6 * 7)' } },
    undefined, { onprogress: (p) => progress.push(p), timeout: 60000 });
  const waiting = await sawState(progress, 'waiting_for_page');
  assert.match(waiting.message, /page to be open/);
  const runId = runOf(waiting).run_id;
  const page = new Page(srv, chat, 'p1');
  let ev = await page.nextRun();
  assert.equal(ev.data.run_id, runId);
  assert.equal(ev.data.origin, 'tool', 'a tool run, as POST /v1/chats/{chat}/runs makes one');
  await sawState(progress, 'starting');
  await page.started(ev.data);
  await sawState(progress, 'running');
  await page.presence(false);
  const paused = await sawState(progress, 'paused');
  assert.match(paused.message, /background/);
  await page.presence(true);
  ev = await page.nextRun();
  assert.equal(ev.data.attempt, 2);
  assert.equal(runOf(await sawState(progress, 'starting', 2)).attempt, 2);
  await page.started(ev.data);
  await sawState(progress, 'running', 2);
  assert.deepEqual(progress.map((p) => runOf(p).state), ['waiting_for_page', 'starting', 'running', 'paused', 'starting', 'running']);
  assert.deepEqual(progress.map((p) => p.progress), [1, 2, 3, 4, 5, 6], 'progress increases');
  assert.equal((await page.result(ev.data, { stdout: '42\n' })).status, 200);
  const r = await pending;
  assert.equal(r.isError, false);
  assert.match(textOf(r), /^The code ran to the end/);
  assert.match(textOf(r), /stdout:\n42\n/);
  assert.equal(r.structuredContent.run_id, runId);
  assert.equal(r.structuredContent.status, 'ok');
  assert.equal(r.structuredContent.attempts, 2);
  page.close();
  await c.close();
});

test('run_python: progress carries the live output as the run stream sends it (stdout and stderr chunks by offset, a display, an input() prompt and waiting_input) before a result with the value and what display() showed', async () => {
  const { page, c, progress, pending } = await callWithPage('live');
  const ev = await page.nextRun();
  const runId = ev.data.run_id;
  const stream = runEvents(srv, runId);
  await stream.opened;
  await page.started(ev.data);
  await sawState(progress, 'running');
  const outputs = () => progress.filter((p) => runOf(p).stream);
  const chunk = (stream, offset, text) => ({ stream, offset, text });
  assert.equal((await page.output(ev.data, { chunks: [chunk('stdout', 0, 'step 1\n')] })).status, 200);
  await waitFor(() => outputs().length === 1);
  // The page resends what it sent (an overlap): only what is new goes out.
  await page.output(ev.data, { chunks: [chunk('stdout', 0, 'step 1\nstep 2 ✓\n'), chunk('stderr', 0, 'careful\n')] });
  await waitFor(() => outputs().length === 3);
  assert.deepEqual(outputs().map((p) => [runOf(p).stream, runOf(p).offset, runOf(p).text, runOf(p).state]),
    [['stdout', 0, 'step 1\n', 'running'], ['stdout', 7, 'step 2 ✓\n', 'running'], ['stderr', 0, 'careful\n', 'running']]);
  assert.deepEqual(outputs().map((p) => p.message), ['step 1\n', 'step 2 ✓\n', '[stderr] careful\n'], 'the message is the text itself');
  const png = PNG.toString('base64');
  await page.output(ev.data, { displays: [{ index: 0, data: { 'text/plain': '<Figure 1>', 'image/png': png } }] });
  const shown = await waitFor(() => progress.find((p) => runOf(p).display === 0));
  assert.equal(runOf(shown).text, '<Figure 1>');
  assert.equal(shown.message, 'display(): <Figure 1>');
  await page.output(ev.data, { input_request: { prompt: 'Your name? ' } });
  const waiting = await sawState(progress, 'waiting_input');
  assert.match(waiting.message, /input\(\)/);
  const asked = await waitFor(() => progress.find((p) => runOf(p).prompt !== undefined));
  assert.equal(runOf(asked).prompt, 'Your name? ');
  assert.equal(asked.message, 'input() asks: Your name? ');
  assert.equal((await call(srv, 'POST', `/v1/runs/${runId}/input`, { body: { text: 'Ada' } })).status, 200);
  await page.next('input');
  await sawState(progress, 'running', 2);
  await page.output(ev.data, { chunks: [chunk('stdout', 15, 'hello Ada\n')] });
  await waitFor(() => outputs().length === 4);
  // The same live output as the run stream (GET /v1/runs/{run}/events) sends.
  await waitFor(() => stream.events.filter((e) => e.event === 'output').length === 4);
  assert.deepEqual(outputs().map((p) => ({ stream: runOf(p).stream, offset: runOf(p).offset, text: runOf(p).text })),
    stream.events.filter((e) => e.event === 'output').map((e) => ({ stream: e.data.stream, offset: e.data.offset, text: e.data.text })));
  assert.deepEqual(progress.map((p) => p.progress), progress.map((_, i) => i + 1), 'progress increases');
  const before = progress.length;
  await page.result(ev.data, { stdout: 'step 1\nstep 2 ✓\nhello Ada\n', stderr: 'careful\n',
    value: { 'text/plain': "{'answer': 42}" }, displays: [{ 'text/plain': '<Figure 1>', 'image/png': png }] });
  const r = await pending;
  assert.ok(progress.length >= before && progress.slice(0, before).every((p) => runOf(p).run_id === runId), 'every notification came before the result');
  assert.equal(r.isError, false);
  const text = textOf(r);
  assert.ok(text.includes('\nstdout:\nstep 1\nstep 2 ✓\nhello Ada\n\nstderr:\ncareful\n'), text);
  assert.ok(text.includes('\ndisplay() 1 of 1:\n<Figure 1>\n'), text);
  assert.ok(text.includes("\nValue of the last expression:\n{'answer': 42}\n"), text);
  assert.doesNotMatch(text, /printed nothing/);
  const images = r.content.filter((x) => x.type === 'image');
  assert.deepEqual(images, [{ type: 'image', data: png, mimeType: 'image/png' }], "the display's PNG is an image item");
  assert.deepEqual(r.structuredContent.value, { 'text/plain': "{'answer': 42}" });
  stream.close();
  page.close();
  await c.close();
});

test('cancel while input() waits: the SDK\'s AbortSignal cancels the run', async () => {
  const ctrl = new AbortController();
  const { page, c, progress, pending } = await callWithPage('input("ok? ")', { signal: ctrl.signal });
  const ev = await page.nextRun();
  await page.started(ev.data);
  await page.output(ev.data, { input_request: { prompt: 'ok? ' } });
  await sawState(progress, 'waiting_input');
  ctrl.abort('the user pressed stop');
  await assert.rejects(pending);
  assert.equal((await page.next('cancel')).data.run_id, ev.data.run_id, 'the page is told to stop it');
  await page.result(ev.data, { status: 'cancelled' });
  assert.equal((await call(srv, 'GET', `/v1/runs/${ev.data.run_id}?wait_s=10`)).json.status, 'cancelled');
  page.close();
  await c.close();
});

test('run_python: a page that goes silent pauses the run (progress says the page stopped answering); its next sign of life runs it again', async () => {
  const { page, c, progress, pending } = await callWithPage('print(1)');
  let ev = await page.nextRun();
  await page.started(ev.data);
  await sawState(progress, 'running');
  // No heartbeat: past PAGE_SILENT_MS (6 s by default) the page counts as hidden.
  const paused = await sawState(progress, 'paused', 1, 30000);
  assert.match(paused.message, /stopped answering/);
  await page.presence(true);
  ev = await page.nextRun();
  assert.equal(ev.data.attempt, 2);
  await page.started(ev.data);
  await sawState(progress, 'running', 2);
  await page.result(ev.data, { stdout: '1\n' });
  const r = await pending;
  assert.match(textOf(r), /stdout:\n1\n/);
  assert.equal(r.structuredContent.attempts, 2);
  page.close();
  await c.close();
});

test('run_python results: an error with its traceback (isError), a timeout tells of the restart and the remounted files, output files as an image and links that download with the caller\'s credential', async () => {
  const chat = await newChat(srv);
  await upload(srv, chat, 'data.csv', Buffer.from('a,b\n1,2\n'));
  const page = new Page(srv, chat, 'p1');
  await page.opened;
  const c = await mcpClient(srv);
  const call1 = c.client.callTool({ name: 'run_python', arguments: { chat_id: chat.id, code: '1/0' } });
  let ev = await page.nextRun();
  await page.started(ev.data);
  const tb = 'Traceback (most recent call last):\n  File "<exec>", line 1, in <module>\nZeroDivisionError: division by zero\n';
  await page.result(ev.data, { status: 'error', error: { type: 'ZeroDivisionError', message: 'division by zero', traceback: tb } });
  let r = await call1;
  assert.equal(r.isError, true);
  assert.match(textOf(r), /raised an exception \(status error\)/);
  assert.ok(textOf(r).includes(tb), textOf(r));

  const call2 = c.client.callTool({ name: 'run_python', arguments: { chat_id: chat.id, code: 'while True: pass', timeout_s: 2 } });
  ev = await page.nextRun();
  assert.equal(ev.data.timeout_s, 2);
  await page.started(ev.data);
  await page.result(ev.data, { status: 'timeout', restarted: true, remounted: ['data.csv'], error: { type: 'TimeoutError', message: 'The run did not finish within its time limit of 2 s.', traceback: '' } });
  r = await call2;
  assert.equal(r.isError, true);
  assert.match(textOf(r), /stopped by the time limit/);
  assert.match(textOf(r), /time limit of 2 s/);
  assert.match(textOf(r), /The sandbox was restarted: variables and files written outside \/mnt\/output are gone\. Files back in \/mnt\/data: data\.csv\./);

  const call3 = c.client.callTool({ name: 'run_python', arguments: { chat_id: chat.id, code: 'make files' } });
  ev = await page.nextRun();
  await page.started(ev.data);
  const csv = Buffer.from('x,y\n3,4\n');
  assert.equal((await page.putFile(ev.data, 'figure-1.png', PNG)).status, 201);
  assert.equal((await page.putFile(ev.data, 'out/table.csv', csv)).status, 201);
  assert.equal((await page.putFile(ev.data, 'fake.png', Buffer.from('not a png'))).status, 201);
  await page.result(ev.data, { files: [
    { name: 'figure-1.png', size: PNG.length, sha256: (await import('node:crypto')).createHash('sha256').update(PNG).digest('hex'), kind: 'figure' },
    { name: 'out/table.csv', size: csv.length, sha256: (await import('node:crypto')).createHash('sha256').update(csv).digest('hex'), kind: 'file' },
    { name: 'fake.png', size: 9, sha256: (await import('node:crypto')).createHash('sha256').update('not a png').digest('hex'), kind: 'file' },
  ] });
  r = await call3;
  assert.equal(r.isError, false, textOf(r));
  const images = r.content.filter((x) => x.type === 'image');
  assert.equal(images.length, 1);
  assert.equal(images[0].mimeType, 'image/png');
  assert.ok(Buffer.from(images[0].data, 'base64').equals(PNG));
  const links = r.content.filter((x) => x.type === 'resource_link');
  assert.deepEqual(links.map((l) => l.name), ['out/table.csv', 'fake.png'], 'a file named .png that is not one is a link');
  assert.equal(links[0].mimeType, 'text/csv; charset=utf-8');
  assert.ok(links[0].uri.startsWith(`${srv.base}/v1/files/`), links[0].uri);
  const text = textOf(r);
  assert.match(text, /figure-1\.png \(\d+ bytes, a figure\): shown below as an image\. A later run gets it at \/mnt\/data\/figure-1\.png when its code names it\./);
  assert.match(text, /out\/table\.csv \(8 bytes\): The file is available to code at \/mnt\/data\/out\/table\.csv \(its latest version, if it has been edited\)\./);
  const dl = await fetch(links[0].uri, { headers: { authorization: `Bearer ${srv.key}` } });
  assert.equal(dl.status, 200);
  assert.ok(Buffer.from(await dl.arrayBuffer()).equals(csv));
  assert.equal((await fetch(links[0].uri)).status, 401, 'the link needs the credential');
  page.close();
  await c.close();
});

test('cancel: the SDK\'s AbortSignal sends notifications/cancelled and the run ends cancelled; a client that goes away cancels its run too', async () => {
  const ctrl = new AbortController();
  const { chat, page, c, progress, pending } = await callWithPage('import time; time.sleep(60)', { signal: ctrl.signal });
  const ev = await page.nextRun();
  await page.started(ev.data);
  await sawState(progress, 'running');
  ctrl.abort('the user pressed stop');
  await assert.rejects(pending);
  const cancel = await page.next('cancel');
  assert.equal(cancel.data.run_id, ev.data.run_id);
  await page.result(ev.data, { status: 'cancelled', notes: ['Cancelled: Python was interrupted; variables are kept.'] });
  const run = (await call(srv, 'GET', `/v1/runs/${ev.data.run_id}?wait_s=10`)).json;
  assert.equal(run.status, 'cancelled');
  assert.equal(run.origin, 'tool');

  // The HTTP request dropped mid-call (no notification at all): the run is cancelled.
  const { session } = await initialize(srv);
  const ac = new AbortController();
  const dropped = fetch(`${srv.base}/mcp`, { method: 'POST', signal: ac.signal, headers: { authorization: `Bearer ${srv.key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': session },
    body: JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'run_python', arguments: { chat_id: chat.id, code: 'queued then dropped' } } }) }).catch(() => null);
  const ev2 = await page.nextRun();
  await page.started(ev2.data);
  ac.abort();
  await dropped;
  const cancel2 = await page.next((e) => e.event === 'cancel' && e.data.run_id === ev2.data.run_id);
  assert.ok(cancel2);
  await page.result(ev2.data, { status: 'cancelled' });
  assert.equal((await call(srv, 'GET', `/v1/runs/${ev2.data.run_id}?wait_s=10`)).json.status, 'cancelled');
  // A queued run whose request is cancelled ends at once, without a page.
  const lone = await newChat(srv);
  const ctrl2 = new AbortController();
  const p2 = [];
  const q = c.client.callTool({ name: 'run_python', arguments: { chat_id: lone.id, code: 'x' } }, undefined, { signal: ctrl2.signal, onprogress: (p) => p2.push(p) });
  const w = await sawState(p2, 'waiting_for_page');
  ctrl2.abort();
  await assert.rejects(q);
  assert.equal((await call(srv, 'GET', `/v1/runs/${runOf(w).run_id}?wait_s=10`)).json.status, 'cancelled');
  page.close();
  await c.close();
});

test('list_files and add_file: text and base64, the naming rules, sizes and where code sees each file', async () => {
  const chat = await newChat(srv);
  const c = await mcpClient(srv);
  let r = await c.client.callTool({ name: 'list_files', arguments: { chat_id: chat.id } });
  assert.match(textOf(r), /has no files yet/);
  r = await c.client.callTool({ name: 'add_file', arguments: { chat_id: chat.id, name: 'notes.txt', text: 'hello' } });
  assert.equal(r.isError, false, textOf(r));
  assert.match(textOf(r), /^Added notes\.txt \(5 bytes\)\. The file is available to code at \/mnt\/data\/notes\.txt/);
  assert.equal(r.structuredContent.path, '/mnt/data/notes.txt');
  r = await c.client.callTool({ name: 'add_file', arguments: { chat_id: chat.id, name: 'notes.txt', base64: Buffer.from('other').toString('base64') } });
  assert.match(textOf(r), /another file named notes\.txt, so this one is notes \(2\)\.txt/);
  r = await c.client.callTool({ name: 'add_file', arguments: { chat_id: chat.id, name: 'notes.txt', text: 'hello' } });
  assert.match(textOf(r), /already has this content as notes\.txt/);
  r = await c.client.callTool({ name: 'add_file', arguments: { chat_id: chat.id, name: 'bad.bin', base64: '@@@not base64@@@' } });
  assert.equal(r.isError, true);
  assert.match(textOf(r), /not valid base64/);
  r = await c.client.callTool({ name: 'add_file', arguments: { chat_id: chat.id, name: '../up', text: 'x' } });
  assert.equal(r.isError, true);
  assert.match(textOf(r), /name:/);
  await upload(srv, chat, 'huge.bin', Buffer.alloc(20 * 1024 * 1024 + 1));
  r = await c.client.callTool({ name: 'list_files', arguments: { chat_id: chat.id } });
  const text = textOf(r);
  assert.match(text, /has 3 files/);
  assert.match(text, /- notes\.txt \(5 bytes, attachment\): at \/mnt\/data\/notes\.txt/);
  assert.match(text, /- huge\.bin \(20\.0 MB, attachment\): left out \(over the 20 MB per-file limit for mounted files\): code cannot open it/);
  assert.deepEqual(r.structuredContent.files.map((f) => f.name).sort(), ['huge.bin', 'notes (2).txt', 'notes.txt']);
  const files = (await call(srv, 'GET', `/v1/chats/${chat.id}/files`)).json.files;
  assert.equal(files.length, 3, 'the same files the API lists');
  // The page hears of a new file (the files event), as for an upload.
  const page = new Page(srv, chat, 'p1');
  await page.opened;
  await c.client.callTool({ name: 'add_file', arguments: { chat_id: chat.id, name: 'late.txt', text: 'late' } });
  assert.equal((await page.next('files')).data.name, 'late.txt');
  page.close();
  await c.close();
});

test('argument errors: a tool result with isError in 2025-11-25, a -32602 error in 2025-06-18', async () => {
  const chat = await newChat(srv);
  const bad = [
    [{ chat_id: chat.id }, /code: required/],
    [{ chat_id: chat.id, code: 5 }, /code: must be a string/],
    [{ code: 'x' }, /chat_id: required/],
    [{ chat_id: 'nope', code: 'x' }, /chat_id: no chat nope/],
    [{ chat_id: 'f'.repeat(32), code: 'x' }, /chat_id: no chat f{32}/],
    [{ chat_id: chat.id, code: 'x', timeout_s: 8 }, /timeout_s: whole seconds from 1 to 7/],
    [{ chat_id: chat.id, code: 'x', timeout_s: 1.5 }, /timeout_s/],
  ];
  const nw = await mcpClient(srv);
  const old = await mcpClient(srv, { version: '2025-06-18' });
  for (const [args, why] of bad) {
    const r = await nw.client.callTool({ name: 'run_python', arguments: args });
    assert.equal(r.isError, true, JSON.stringify(args));
    assert.match(textOf(r), why);
    await assert.rejects(old.client.callTool({ name: 'run_python', arguments: args }), (e) => e.code === -32602 && why.test(e.message), JSON.stringify(args));
  }
  await nw.close();
  await old.close();
});

test('a chat key reaches its chat\'s tools and files and nothing else; rotating the secret revokes it', async () => {
  const a = await newChat(srv), b = await newChat(srv);
  const minted = await call(srv, 'POST', `/v1/chats/${a.id}/chat_key`);
  assert.equal(minted.status, 201);
  assert.equal(minted.json.chat_id, a.id);
  assert.match(minted.json.key, new RegExp(`^mcp\\.${a.id}\\.[0-9a-f]{64}$`));
  assert.equal(minted.json.mcp_url, `${srv.base}/mcp`);
  const byPage = await call(srv, 'POST', `/v1/chats/${a.id}/chat_key`, { token: a.token });
  assert.equal(byPage.json.key, minted.json.key, 'the page may get its own chat\'s key: the same key');
  assert.equal((await call(srv, 'POST', `/v1/chats/${b.id}/chat_key`, { token: a.token })).status, 403);
  const key = minted.json.key;
  const c = await mcpClient(srv, { key });
  const { tools } = await c.client.listTools();
  assert.deepEqual(tools[0].inputSchema.required, ['code'], 'no chat_id to give');
  assert.equal(tools[0].inputSchema.properties.chat_id, undefined);
  assert.match(tools[0].description, new RegExp(`reaches chat ${a.id} only`));
  assert.match(c.client.getInstructions(), new RegExp(a.id));
  let r = await c.client.callTool({ name: 'add_file', arguments: { name: 'mine.txt', text: 'mine' } });
  assert.equal(r.isError, false, textOf(r));
  r = await c.client.callTool({ name: 'list_files', arguments: { chat_id: b.id } });
  assert.equal(r.isError, true);
  assert.match(textOf(r), new RegExp(`reaches chat ${a.id} only`));
  r = await c.client.callTool({ name: 'list_files', arguments: { chat_id: a.id } });
  assert.match(textOf(r), /mine\.txt/, 'its own chat named explicitly is fine');
  // Its own chat's files download with it; another chat's do not; the API does not take it.
  const mine = r.structuredContent.files[0].file_id;
  const up = await upload(srv, b, 'theirs.txt', Buffer.from('theirs'));
  assert.equal((await call(srv, 'GET', `/v1/files/${mine}`, { token: key })).status, 200);
  assert.equal((await call(srv, 'GET', `/v1/files/${up.json.file_id}`, { token: key })).status, 404);
  assert.equal((await call(srv, 'GET', `/v1/chats/${a.id}/files`, { token: key })).status, 401);
  assert.equal((await call(srv, 'POST', `/v1/chats/${a.id}/runs`, { token: key, body: { code: 'x' } })).status, 401);
  assert.equal((await call(srv, 'GET', `/v1/chats/${a.id}/events?page_id=x`, { token: key })).status, 401);
  assert.equal((await call(srv, 'POST', '/v1/chats', { token: key, body: {} })).status, 401);
  // run_python without chat_id goes to the key's chat.
  const page = new Page(srv, a, 'p1');
  await page.opened;
  const pending = c.client.callTool({ name: 'run_python', arguments: { code: 'print(1)' } });
  const ev = await page.nextRun();
  assert.equal(ev.data.chat_id, a.id);
  await page.result(ev.data, { stdout: '1\n' });
  assert.match(textOf(await pending), /stdout:\n1\n/);
  page.close();
  // Rotation: every chat key stops at once (the open session with it too); new keys work.
  assert.equal((await call(srv, 'POST', '/v1/admin/chat_keys/rotate', { token: a.token })).status, 403);
  assert.equal((await call(srv, 'POST', '/v1/admin/chat_keys/rotate')).status, 200);
  await assert.rejects(c.client.listTools(), (e) => e.code === 401);
  assert.equal((await call(srv, 'GET', '/v1/tools', { token: key })).status, 401);
  const fresh = (await call(srv, 'POST', `/v1/chats/${a.id}/chat_key`)).json.key;
  assert.notEqual(fresh, key);
  assert.equal((await call(srv, 'GET', '/v1/tools', { token: fresh })).status, 200);
  await c.close();
});

test('POST /v1/tools/call: the same tools and result text over plain HTTP; arguments as an object or as OpenAI\'s JSON string', async () => {
  const chat = await newChat(srv);
  let r = await call(srv, 'POST', '/v1/tools/call', { body: { name: 'add_file', arguments: { chat_id: chat.id, name: 'a.txt', text: 'abc' } } });
  assert.equal(r.status, 200);
  assert.equal(r.json.isError, false);
  assert.match(r.json.text, /^Added a\.txt/);
  assert.equal(r.json.text, r.json.content[0].text);
  r = await call(srv, 'POST', '/v1/tools/call', { body: { name: 'list_files', arguments: JSON.stringify({ chat_id: chat.id }) } });
  assert.match(r.json.text, /a\.txt \(3 bytes/);
  r = await call(srv, 'POST', '/v1/tools/call', { body: { name: 'run_python', arguments: { chat_id: chat.id } } });
  assert.equal(r.status, 200);
  assert.equal(r.json.isError, true);
  assert.match(r.json.text, /code: required/);
  assert.equal((await call(srv, 'POST', '/v1/tools/call', { body: { name: 'nope' } })).status, 404);
  assert.equal((await call(srv, 'POST', '/v1/tools/call', { body: { arguments: {} } })).status, 400);
  assert.equal((await call(srv, 'POST', '/v1/tools/call', { body: { name: 'list_files', arguments: '[1' } })).status, 400);
  assert.equal((await call(srv, 'POST', '/v1/tools/call', { body: { name: 'list_files', arguments: 5 } })).status, 400);
  const page = new Page(srv, chat, 'p1');
  await page.opened;
  const pending = call(srv, 'POST', '/v1/tools/call', { body: { name: 'run_python', arguments: JSON.stringify({ chat_id: chat.id, code: 'print("hi")' }) } });
  const ev = await page.nextRun();
  await page.result(ev.data, { stdout: 'hi\n', value: { 'text/plain': '7' } });
  r = await pending;
  assert.equal(r.status, 200);
  assert.match(r.json.text, /stdout:\nhi\n\nValue of the last expression:\n7\n/, 'the value, as the MCP result says it');
  assert.equal(r.json.text, r.json.content[0].text);
  assert.equal(r.json.structuredContent.status, 'ok');
  page.close();
});

test('with CHAT_CODE_EXECUTION=off the tool says the code was not run, and why', async () => {
  const own = await startServer({ env: { CHAT_CODE_EXECUTION: 'off' } });
  try {
    const chat = await newChat(own);
    const c = await mcpClient(own);
    const { tools } = await c.client.listTools();
    assert.match(tools[0].description, /turned off on this deployment/);
    const r = await c.client.callTool({ name: 'run_python', arguments: { chat_id: chat.id, code: 'print(1)' } });
    assert.equal(r.isError, true);
    assert.equal(r.structuredContent.status, 'rejected');
    assert.match(textOf(r), /The code was not run \(status rejected\)\.\n\nExecutionDisabled: Code execution is turned off on this deployment/);
    const added = await c.client.callTool({ name: 'add_file', arguments: { chat_id: chat.id, name: 'a.txt', text: 'x' } });
    assert.equal(added.isError, false, 'files can still be added');
    await c.close();
  } finally { await own.stop(); }
});
