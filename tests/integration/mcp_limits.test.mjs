// mcp_limits.test.mjs -- what one caller of the MCP endpoint can do to the others, over real HTTP:
// a chat key flooding initialize (the session budget is per credential), an oversized
// progressToken (refused before any run starts), and requests whose Host or Origin is another
// site's (DNS rebinding: refused).  The client is the official TypeScript SDK where it can say
// what is tested, raw POSTs where the SDK would never send it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
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
