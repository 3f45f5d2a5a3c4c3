// mcp_stateless.test.mjs -- MCP's stateless revision (2026-07-28) beside the session ones, chosen
// per request: server/discover without a handshake, the per-request _meta, the headers that must
// say what the body says, the version error, the removed methods, caching hints, and a
// run_python call with no session; the session revisions answer as before.  Raw POSTs: the
// SDK here speaks only the session revisions.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, call, newChat, Page, tempDir } from './lib.mjs';
import { rpc, initialize, textOf } from './mcp_lib.mjs';

let srv;
before(async () => { srv = await startServer({ dataDir: tempDir('mcp-stateless'), env: { CODE_TIME_LIMIT_S: '20' } }); });
after(async () => { await srv?.stop('SIGTERM'); });

const V = '2026-07-28';
const meta = (extra = {}) => ({ 'io.modelcontextprotocol/protocolVersion': V, 'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' }, 'io.modelcontextprotocol/clientCapabilities': {}, ...extra });
// A stateless request with the headers a conforming client sends (overridable).
function stateless(method, params, { id = 1, headers = {}, key } = {}) {
  const h = { 'mcp-method': method, ...headers };
  const name = params?.name ?? params?.uri;
  if (name !== undefined && !('mcp-name' in h)) h['mcp-name'] = name;
  for (const k of Object.keys(h)) if (h[k] === undefined) delete h[k];
  const version = 'mcp-protocol-version' in h ? undefined : V;
  return rpc(srv, { jsonrpc: '2.0', id, method, params }, { version, headers: h, key });
}

test('server/discover answers without a handshake: the revisions spoken, the capabilities, this server in _meta, caching hints, no session', async () => {
  const r = await stateless('server/discover', { _meta: meta() }, { id: 'd-1' });
  assert.equal(r.status, 200);
  assert.equal(r.headers.get('mcp-session-id'), null, 'no session minted');
  assert.equal(r.json.id, 'd-1');
  const res = r.json.result;
  assert.equal(res.resultType, 'complete');
  assert.deepEqual(res.supportedVersions, ['2026-07-28', '2025-11-25', '2025-06-18']);
  assert.deepEqual(res.capabilities, { tools: { listChanged: false }, extensions: { 'io.modelcontextprotocol/tasks': {} } });
  assert.equal(res._meta['io.modelcontextprotocol/serverInfo'].name, 'cerea-sandbox');
  assert.match(res.instructions, /run_python/);
  assert.equal(res.cacheScope, 'private');
  assert.ok(Number.isInteger(res.ttlMs) && res.ttlMs > 0);
  // clientInfo is a SHOULD: its absence is served.
  const m = meta();
  delete m['io.modelcontextprotocol/clientInfo'];
  assert.equal((await stateless('server/discover', { _meta: m })).status, 200);
});

test('_meta is required (400 -32602, the id echoed); the headers must match the body (400 -32020); a revision not spoken is 400 -32022 naming those that are', async () => {
  const noCaps = meta();
  delete noCaps['io.modelcontextprotocol/clientCapabilities'];
  const noVersion = meta();
  delete noVersion['io.modelcontextprotocol/protocolVersion'];
  for (const [params, why] of [[{}, /params._meta is missing/], [undefined, /params._meta is missing/],
    [{ _meta: noCaps }, /clientCapabilities is missing/], [{ _meta: noVersion }, /protocolVersion is missing/]]) {
    const r = await stateless('tools/list', params, { id: 41 });
    assert.equal(r.status, 400, JSON.stringify(params));
    assert.equal(r.json.id, 41);
    assert.equal(r.json.error.code, -32602);
    assert.match(r.json.error.message, why);
  }
  const mismatches = [
    ['server/discover', { _meta: meta({ 'io.modelcontextprotocol/protocolVersion': '2099-01-01' }) }, {}, /MCP-Protocol-Version 2026-07-28 does not match/],
    ['server/discover', { _meta: meta() }, { 'mcp-protocol-version': undefined }, /MCP-Protocol-Version \(missing\)/],
    ['tools/list', { _meta: meta() }, { 'mcp-method': undefined }, /Mcp-Method \(missing\)/],
    ['tools/list', { _meta: meta() }, { 'mcp-method': 'server/discover' }, /Mcp-Method server\/discover does not match/],
    ['tools/call', { name: 'list_files', arguments: {}, _meta: meta() }, { 'mcp-name': undefined }, /Mcp-Name \(missing\)/],
    ['tools/call', { name: 'list_files', arguments: {}, _meta: meta() }, { 'mcp-name': 'add_file' }, /Mcp-Name add_file does not match/],
    ['tools/call', { name: 'list_files', arguments: {}, _meta: meta() }, { 'mcp-name': '=?base64?YWRkX2ZpbGU=?=' }, /does not match/],
    ['tools/call', { name: 'list_files', arguments: {}, _meta: meta() }, { 'mcp-name': '=?base64?!!!!?=' }, /does not match/],
  ];
  for (const [method, params, headers, why] of mismatches) {
    const all = { 'mcp-protocol-version': V, 'mcp-method': method, 'mcp-name': params.name, ...headers };
    const r = await rpc(srv, { jsonrpc: '2.0', id: 9, method, params }, {
      headers: Object.fromEntries(Object.entries(all).filter(([, v]) => v !== undefined)),
    });
    assert.equal(r.status, 400, `${method} ${JSON.stringify(headers)}: ${r.text}`);
    assert.equal(r.json.error.code, -32020, r.text);
    assert.match(r.json.error.message, why);
  }
  // The Base64 sentinel decoded: the name matches.
  const b64 = await stateless('tools/call', { name: 'list_files', arguments: {}, _meta: meta() }, { headers: { 'mcp-name': `=?base64?${Buffer.from('list_files').toString('base64')}?=` } });
  assert.equal(b64.status, 200, b64.text);
  const bad = await rpc(srv, { jsonrpc: '2.0', id: 301, method: 'server/discover', params: { _meta: meta({ 'io.modelcontextprotocol/protocolVersion': 'v999.0.0' }) } },
    { version: 'v999.0.0', headers: { 'mcp-method': 'server/discover' } });
  assert.equal(bad.status, 400);
  assert.equal(bad.json.id, 301);
  assert.equal(bad.json.error.code, -32022);
  assert.deepEqual(bad.json.error.data, { supported: ['2026-07-28', '2025-11-25', '2025-06-18'], requested: 'v999.0.0' });
});

test('the methods 2026-07-28 removed, and unknown ones, are 404 -32601; notifications 202', async () => {
  for (const method of ['initialize', 'ping', 'logging/setLevel', 'resources/subscribe', 'resources/unsubscribe', 'unknown/method']) {
    const r = await stateless(method, { _meta: meta() }, { id: 500 });
    assert.equal(r.status, 404, method);
    assert.equal(r.json.id, 500);
    assert.equal(r.json.error.code, -32601);
  }
  const note = await rpc(srv, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1, _meta: meta() } }, { version: V, headers: { 'mcp-method': 'notifications/cancelled' } });
  assert.equal(note.status, 202);
});

test('tools/list and a run_python call without a session: the same tools, caching hints, resultType; a chat key sees its own chat', async () => {
  const list = await stateless('tools/list', { _meta: meta() });
  assert.equal(list.status, 200);
  assert.deepEqual(list.json.result.tools.map((t) => t.name), ['run_python', 'list_files', 'add_file', 'wait_for_run', 'cancel_run']);
  assert.equal(list.json.result.resultType, 'complete');
  assert.equal(list.json.result.cacheScope, 'private');
  assert.ok(list.json.result.ttlMs > 0);
  const chat = await newChat(srv);
  const key = (await call(srv, 'POST', `/v1/chats/${chat.id}/chat_key`)).json.key;
  const scoped = await stateless('tools/list', { _meta: meta() }, { key });
  assert.equal(scoped.json.result.tools.find((t) => t.name === 'run_python').inputSchema.properties.chat_id, undefined, 'a chat key names no chat');
  const page = new Page(srv, chat, 'p1');
  await page.opened;
  const pending = stateless('tools/call', { name: 'run_python', arguments: { code: 'print(6*7)' }, _meta: meta() }, { key, id: 'call-1' });
  const ev = await page.nextRun();
  await page.started(ev.data);
  assert.equal((await page.result(ev.data, { stdout: '42\n' })).status, 200);
  const r = await pending;
  assert.equal(r.status, 200, r.text);
  assert.equal(r.headers.get('mcp-session-id'), null);
  assert.equal(r.json.id, 'call-1');
  assert.equal(r.json.result.resultType, 'complete');
  assert.equal(r.json.result._meta['io.modelcontextprotocol/serverInfo'].name, 'cerea-sandbox');
  assert.equal(r.json.result.isError, false);
  assert.match(textOf(r.json.result), /stdout:\n42\n/);
  page.close();
});

test('the session revisions are unchanged beside it: initialize without a version header, a request without a session is 400 -32600', async () => {
  const init = await initialize(srv);
  assert.equal(init.status, 200);
  assert.equal(init.version, '2025-11-25');
  assert.match(init.session, /^[0-9a-f]{64}$/);
  const ping = { jsonrpc: '2.0', id: 7, method: 'ping' };
  assert.deepEqual((await rpc(srv, ping, { session: init.session, version: '2025-11-25' })).json.result, {});
  const none = await rpc(srv, ping, { version: '2025-11-25' });
  assert.equal(none.status, 400);
  assert.equal(none.json.error.code, -32600);
  // A session id with a stateless version header stays in its session (and refuses the header).
  const mixed = await rpc(srv, ping, { session: init.session, version: V });
  assert.equal(mixed.status, 400);
  assert.match(mixed.json.error.message, /2026-07-28 is not supported/);
});
