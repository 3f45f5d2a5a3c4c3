// mcp_clients.test.mjs -- two more real MCP clients beside the SDK, both from npm (package.json):
// mcp-remote (the stdio bridge Claude Desktop users run for a remote server; here driven by the
// SDK's stdio client, as a desktop app drives it) and @modelcontextprotocol/inspector-cli (the
// Inspector's command line).  Each lists the tools and completes a run_python call, answered by
// a scripted page (lib.mjs).  Every address is 127.0.0.1; mcp-remote's state goes to a temp dir.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { startServer, newChat, Page, tempDir, ROOT } from './lib.mjs';
import { textOf } from './mcp_lib.mjs';

let srv;
before(async () => { srv = await startServer({ dataDir: tempDir('mcp-clients'), env: { CODE_TIME_LIMIT_S: '20' } }); });
after(async () => { await srv?.stop('SIGTERM'); });

// A chat whose scripted page answers its next run with stdout.
async function pageAnswering(stdout) {
  const chat = await newChat(srv);
  const page = new Page(srv, chat, 'p1');
  await page.opened;
  page.heartbeat(500);
  const done = (async () => {
    const ev = await page.nextRun(30000);
    await page.started(ev.data);
    await page.result(ev.data, { stdout });
    return ev.data;
  })();
  return { chat, page, done };
}

test('mcp-remote (stdio bridge): lists the tools and completes a run_python call', async () => {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [join(ROOT, 'node_modules', 'mcp-remote', 'dist', 'proxy.js'), `${srv.base}/mcp`,
      '--header', `Authorization:Bearer ${srv.key}`, '--transport', 'http-only'],
    env: { ...process.env, MCP_REMOTE_CONFIG_DIR: tempDir('mcp-remote-config') },
    stderr: 'pipe',
  });
  let log = '';
  transport.stderr?.on('data', (d) => { log += d; });
  const client = new Client({ name: 'cerea-mcp-remote-test', version: '1.0.0' });
  try {
    await client.connect(transport);
    const tools = (await client.listTools()).tools.map((t) => t.name);
    assert.deepEqual(tools, ['run_python', 'list_files', 'add_file', 'wait_for_run', 'cancel_run'], log);
    const { chat, page, done } = await pageAnswering('42 via mcp-remote\n');
    const r = await client.callTool({ name: 'run_python', arguments: { chat_id: chat.id, code: 'print(6*7)' } }, undefined, { timeout: 60000 });
    const run = await done;
    assert.equal(r.isError, false, textOf(r));
    assert.match(textOf(r), /stdout:\n42 via mcp-remote\n/);
    assert.equal(r.structuredContent.run_id, run.run_id);
    page.close();
  } finally {
    await client.close();
  }
});

// One inspector-cli command: its JSON output.  It reads its own package.json by a path that
// only resolves from its build directory, so it runs there.
function inspector(args) {
  const dir = join(ROOT, 'node_modules', '@modelcontextprotocol', 'inspector-cli', 'build');
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, ['cli.js', '--cli', `${srv.base}/mcp`, '--transport', 'http',
      '--header', `Authorization: Bearer ${srv.key}`, ...args], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '', err = '';
    p.stdout.on('data', (d) => { out += d; });
    p.stderr.on('data', (d) => { err += d; });
    const t = setTimeout(() => { p.kill('SIGKILL'); reject(new Error(`inspector-cli timed out:\n${out}\n${err}`)); }, 60000);
    p.on('exit', (code) => {
      clearTimeout(t);
      const json = out.slice(out.indexOf('{'));
      try { resolve(JSON.parse(json)); } catch { reject(new Error(`inspector-cli exited ${code}:\n${out}\n${err}`)); }
    });
  });
}

test('@modelcontextprotocol/inspector-cli: lists the tools and completes a run_python call', async () => {
  const list = await inspector(['--method', 'tools/list']);
  assert.deepEqual(list.tools.map((t) => t.name), ['run_python', 'list_files', 'add_file', 'wait_for_run', 'cancel_run']);
  const { chat, page, done } = await pageAnswering('42 via inspector\n');
  const r = await inspector(['--method', 'tools/call', '--tool-name', 'run_python', '--tool-arg', `chat_id=${chat.id}`, '--tool-arg', 'code=print(6*7)']);
  const run = await done;
  assert.equal(r.isError, false, JSON.stringify(r));
  assert.match(textOf(r), /stdout:\n42 via inspector\n/);
  assert.equal(r.structuredContent.run_id, run.run_id);
  page.close();
});
