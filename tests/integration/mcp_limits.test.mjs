// mcp_limits.test.mjs -- what one caller of the MCP endpoint can do to the others, over real HTTP:
// a chat key flooding initialize (the session budget is per credential), an oversized
// progressToken (refused before any run starts), and requests whose Host or Origin is another
// site's (DNS rebinding: refused).  The client is the official TypeScript SDK where it can say
// what is tested, raw POSTs where the SDK would never send it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
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
