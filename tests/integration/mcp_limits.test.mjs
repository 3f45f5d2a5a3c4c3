// mcp_limits.test.mjs -- what one caller of the MCP endpoint can do to the others, over real HTTP:
// a chat key flooding initialize (the session budget is per credential), an oversized
// progressToken (refused before any run starts), and requests whose Host or Origin is another
// site's (DNS rebinding: refused).  The client is the official TypeScript SDK where it can say
// what is tested, raw POSTs where the SDK would never send it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { startServer, call, newChat, tempDir } from './lib.mjs';
import { mcpClient, rpc, initialize } from './mcp_lib.mjs';

let srv;
before(async () => { srv = await startServer({ dataDir: tempDir('mcp-limits') }); });
after(async () => { await srv?.stop('SIGTERM'); });

const ping = { jsonrpc: '2.0', id: 7, method: 'ping' };
const chatKey = async (chat) => (await call(srv, 'POST', `/v1/chats/${chat.id}/chat_key`)).json.key;

test('one chat key flooding initialize ends only its own sessions: the API key\'s and another chat key\'s still answer', async () => {
  const [a, b] = [await newChat(srv), await newChat(srv)];
  const [flooder, other] = [await chatKey(a), await chatKey(b)];
  const api = await mcpClient(srv);
  const theirs = await mcpClient(srv, { key: other });
  const firstOfFlood = (await initialize(srv, '2025-11-25', { key: flooder })).session;
  // 4,200 initializes, eight at a time (past the old global cap of 4,096).
  let n = 0, refused = 0;
  const t0 = Date.now();
  await Promise.all(Array.from({ length: 8 }, async () => {
    while (n < 4200) {
      n++;
      const r = await initialize(srv, '2025-11-25', { key: flooder });
      if (r.status !== 200) refused++;
    }
  }));
  console.log(`# 4,200 initializes with one chat key in ${Date.now() - t0} ms`);
  assert.equal(refused, 0, 'idle sessions of its own make room: none refused');
  await api.client.ping();
  await theirs.client.ping();
  assert.equal((await api.client.listTools()).tools[0].name, 'run_python');
  assert.equal((await rpc(srv, ping, { key: flooder, session: firstOfFlood })).status, 404, 'the flooder\'s own oldest session went');
  await api.close();
  await theirs.close();
});

// CPU seconds the server process has used so far (user + system, from /proc).
function cpuSeconds(pid) {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) / 100;
}

test('an oversized progressToken (11 MiB) is refused with -32602 at once and starts no run; 256 bytes is taken', { timeout: 60000 }, async () => {
  const chat = await newChat(srv);
  const { session } = await initialize(srv);
  const callWith = (token, id) => rpc(srv, { jsonrpc: '2.0', id, method: 'tools/call',
    params: { name: 'run_python', arguments: { chat_id: chat.id, code: 'print(1)' }, _meta: { progressToken: token } } },
  { session });
  const cpu0 = cpuSeconds(srv.pid), t0 = Date.now();
  const r = await callWith('t'.repeat(11 * 1024 * 1024), 1);
  const ms = Date.now() - t0, cpu = cpuSeconds(srv.pid) - cpu0;
  console.log(`# an 11 MiB progressToken refused in ${ms} ms, ${cpu.toFixed(2)} s of server CPU`);
  assert.equal(r.status, 200);
  assert.equal(r.json.error.code, -32602, r.text.slice(0, 300));
  assert.match(r.json.error.message, /progressToken is 11534336 bytes; at most 256/);
  assert.equal((await call(srv, 'GET', `/v1/chats/${chat.id}/runs`)).json.runs.length, 0, 'no run was made');
  // At the bound: taken (the call waits for the page; cancelled by closing it).
  const ac = new AbortController();
  const held = fetch(`${srv.base}/mcp`, { method: 'POST', signal: ac.signal,
    headers: { authorization: `Bearer ${srv.key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': session },
    body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'run_python', arguments: { chat_id: chat.id, code: 'x' }, _meta: { progressToken: 'k'.repeat(256) } } }) });
  const res = await held;
  assert.equal(res.headers.get('content-type'), 'text/event-stream');
  const reader = res.body.getReader();
  let seen = '';
  while (!seen.includes('notifications/progress')) {
    const { value, done } = await reader.read();
    assert.ok(!done, `the stream ended: ${seen}`);
    seen += new TextDecoder().decode(value);
  }
  assert.match(seen, new RegExp(`"progressToken":"${'k'.repeat(256)}"`));
  ac.abort();
  await reader.cancel().catch(() => {});
});

// One POST of an initialize to s's /mcp with these headers (Host included, which fetch does not
// let a caller set): {status, json}.
function postAs(s, headers) {
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25' } });
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port: s.port, method: 'POST', path: '/mcp', agent: false,
      headers: { authorization: `Bearer ${s.key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'content-length': Buffer.byteLength(body), ...headers } }, (res) => {
      let text = '';
      res.on('data', (d) => { text += d; });
      res.on('end', () => { let json = null; try { json = JSON.parse(text); } catch { /* not JSON */ } resolve({ status: res.statusCode, json, text }); });
    });
    req.on('error', reject);
    req.end(body);
  });
}

test('DNS rebinding: a Host that is not this server\'s (or an Origin of another site) is refused with 403 -32003; IP literals and localhost are served', async () => {
  const p = srv.port;
  // (The port tells no rebound page: a request another node forwards keeps its client's Host.)
  for (const host of [`127.0.0.1:${p}`, `localhost:${p}`, `LOCALHOST:${p}`, `[::1]:${p}`, '127.0.0.1', 'localhost', `127.0.0.1:${p + 1}`, `10.1.2.3:${p}`]) {
    const r = await postAs(srv, { host });
    assert.equal(r.status, 200, `${host}: ${r.text}`);
    assert.equal(r.json.result.protocolVersion, '2025-11-25');
  }
  for (const host of [`evil.example:${p}`, 'evil.example', `localhost.evil.example:${p}`, `127.0.0.1.evil.example:${p}`, `[::1`, `localhost:x`]) {
    const r = await postAs(srv, { host });
    assert.equal(r.status, 403, `${host}: ${r.text}`);
    assert.equal(r.json.jsonrpc, '2.0');
    assert.equal(r.json.error.code, -32003, host);
    assert.match(r.json.error.message, /is not one this server answers to/);
  }
  // The rebound page: its name in Host and in Origin.
  const rebound = await postAs(srv, { host: `rebind.example:${p}`, origin: `http://rebind.example:${p}` });
  assert.equal(rebound.status, 403);
  // Our Host, another site's Origin.
  const evil = await postAs(srv, { host: `127.0.0.1:${p}`, origin: 'http://evil.example' });
  assert.equal(evil.status, 403);
  assert.equal(evil.json.error.code, -32003);
  assert.match(evil.json.error.message, /another origin/);
  assert.equal((await postAs(srv, { host: `localhost:${p}`, origin: `http://localhost:${p}` })).status, 200, 'our own origin');
});

test('CEREA_PUBLIC_URL names the host a proxy in front sends: served, with its Origin; other names still refused', async () => {
  const own = await startServer({ env: { CEREA_PUBLIC_URL: 'https://Sandbox.Example.com' } });
  try {
    assert.equal((await postAs(own, { host: 'sandbox.example.com' })).status, 200);
    assert.equal((await postAs(own, { host: 'sandbox.example.com:443', origin: 'https://sandbox.example.com:443' })).status, 200);
    assert.equal((await postAs(own, { host: 'sandbox.example.com', origin: 'https://evil.example' })).status, 403);
    assert.equal((await postAs(own, { host: 'other.example.com' })).status, 403);
    assert.equal((await postAs(own, { host: `127.0.0.1:${own.port}` })).status, 200, 'its listening address too');
  } finally { await own.stop(); }
  // A malformed value stops the server with one line.
  await assert.rejects(startServer({ env: { CEREA_PUBLIC_URL: 'sandbox.example.com' } }), /CEREA_PUBLIC_URL=sandbox\.example\.com: expected http:\/\/HOST\[:PORT\]/);
});
