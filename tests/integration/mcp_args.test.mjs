// mcp_args.test.mjs -- tool-call arguments a reason quotes, over real HTTP: a refused argument is
// quoted back in the reason (cut to its first 80 bytes); the cut must fall between characters, or
// the reason is no longer UTF-8, no JSON string can carry it and the call answered 500 "out of
// memory" (found by tests/fuzz/fuzz_tools.c; corpus/tools/regress-*-cut-in-a-character).  Through
// POST /v1/tools/call, MCP's tools/call in 2025-11-25 (a tool result) and 2025-06-18 (-32602).
// Likewise a name MCP quotes in a JSON-RPC error message ("Unknown tool: %.200s": a 500 before).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, call, tempDir } from './lib.mjs';
import { rpc, initialize } from './mcp_lib.mjs';

let srv;
before(async () => { srv = await startServer({ dataDir: tempDir('mcp-args') }); });
after(async () => { await srv?.stop('SIGTERM'); });

// 50 two-byte characters after one ASCII byte: byte 80 falls inside a character.
const cutInside = '(' + 'é'.repeat(50);
const calls = [
  ['run_python', { chat_id: cutInside, code: 'x' }, 'chat_id: no chat \\(é{39} \\(a chat id is 32 hex digits\\)'],
  ['wait_for_run', { run_id: cutInside }, 'run_id: no run \\(é{39} \\(a run id is 32 hex digits\\)'],
];
const asResult = (reason) => new RegExp(`^The call was refused: ${reason}\\.$`);

test('POST /v1/tools/call: a quoted argument cut at 80 bytes is cut between characters', async () => {
  for (const [name, args, want] of calls) {
    const r = await call(srv, 'POST', '/v1/tools/call', { body: { name, arguments: args } });
    assert.equal(r.status, 200, `${name}: ${r.buf}`);
    assert.equal(r.json.isError, true);
    assert.match(r.json.text, asResult(want));
  }
});

test('MCP tools/call: the same refusal as a tool result (2025-11-25) and as -32602 (2025-06-18)', async () => {
  for (const version of ['2025-11-25', '2025-06-18']) {
    const { session } = await initialize(srv, version);
    assert.ok(session);
    for (const [name, args, want] of calls) {
      const r = await rpc(srv, { jsonrpc: '2.0', id: 5, method: 'tools/call', params: { name, arguments: args } }, { session, version });
      assert.equal(r.status, 200, `${version} ${name}: ${r.text}`);
      assert.equal(r.json.id, 5);
      if (version === '2025-11-25') {
        assert.equal(r.json.result.isError, true);
        assert.match(r.json.result.content[0].text, asResult(want));
      } else {
        assert.equal(r.json.error.code, -32602);
        assert.match(r.json.error.message, new RegExp(`^${name}: ${want}$`));
      }
    }
  }
});

test('MCP: a name quoted in a JSON-RPC error (cut at 200 bytes) is cut between characters', async () => {
  // One ASCII byte, then two-byte characters: byte 200 falls inside one.
  const name = 'x' + 'é'.repeat(120);
  const { session } = await initialize(srv, '2025-11-25');
  const r = await rpc(srv, { jsonrpc: '2.0', id: 6, method: 'tools/call', params: { name, arguments: {} } }, { session, version: '2025-11-25' });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.id, 6);
  assert.match(r.json.error.message, /^Unknown tool: xé{99}$/);
});
