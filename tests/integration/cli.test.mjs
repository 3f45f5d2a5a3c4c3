// cli.test.mjs -- `cerea-sandbox run` and `status` as a new user meets them, against the real
// binary on 127.0.0.1 (lib.mjs: free port, own data dir, stopped by pid).  The test plays the
// browser page with a scripted Page (lib.mjs) where a run must end, so no Pyodide is needed.
// Covers the documented exit codes (a refused key, a server that is down, a missing script or
// --attach file: 2; a Python error: 1 with its traceback; --wait running out: 4 with what to do
// next), unknown flags refused with the usage, --help without a key listing every flag, no page
// token in default output (only with --page-url), clean saved paths, and a restart with nothing
// to remount.  The CLI runs in a temp directory with CEREA_API_KEY unset, so no ./var/api_key or
// environment key is picked up by accident.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { writeFileSync, readFileSync, existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { BIN, ROOT, startServer, call, newChat, tempDir, Page } from './lib.mjs';

let srv;
const dir = tempDir('cli');
const TOKEN = /[0-9a-f]{32}\.[0-9a-f]{64}/;

before(async () => { srv = await startServer(); });
after(async () => { await srv?.stop(); rmSync(dir, { recursive: true, force: true }); });

const env = () => { const e = { ...process.env }; delete e.CEREA_API_KEY; return e; };

// Runs the CLI (tracked by pid, killed by pid if it outlives timeoutMs): {code, stdout, stderr}.
function cli(args, { input = '', timeoutMs = 30000 } = {}) {
  return new Promise((resolve, reject) => {
    const p = spawn(BIN, args, { cwd: dir, env: env(), stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '', stderr = '';
    p.stdout.on('data', (d) => { stdout += d; });
    p.stderr.on('data', (d) => { stderr += d; });
    const t = setTimeout(() => { process.kill(p.pid, 'SIGKILL'); reject(new Error(`cli ${args.join(' ')} still running after ${timeoutMs} ms:\n${stderr}`)); }, timeoutMs);
    p.on('exit', (code) => { clearTimeout(t); resolve({ code, stdout, stderr, all: stdout + stderr }); });
    p.stdin.on('error', () => {}); // the CLI may exit before it reads its input
    p.stdin.end(input);
  });
}
const base = () => ['--url', srv.base, '--key', srv.key];
const chatCount = async () => (await call(srv, 'GET', '/v1/chats')).json.chats.length;

// A page of `chat` that answers the next run with `result` (after optional files).
async function pageAnswering(chat, result, files = {}) {
  const page = new Page(srv, chat, 'cli-page');
  await page.opened;
  assert.equal((await page.presence(true, 'ready')).status, 200);
  const done = (async () => {
    const ev = await page.nextRun(20000);
    await page.started(ev.data);
    for (const [name, data] of Object.entries(files)) assert.equal((await page.putFile(ev.data, name, data)).status, 201);
    const r = await page.result(ev.data, result);
    assert.equal(r.status, 200, r.buf.toString());
    return ev.data;
  })();
  return { page, done };
}

test('--help works without a key and lists every flag; so does `status --help`', async () => {
  const r = await cli(['run', '--help']);
  assert.equal(r.code, 0, r.all);
  for (const f of ['--url', '--server', '--key', '--api-key', '--data', '--chat', '--attach', '--out', '--timeout', '--wait', '--page-url', '--help'])
    assert.ok(r.stdout.includes(f), `${f} in the help:\n${r.stdout}`);
  assert.match(r.stdout, /exit status/);
  const s = await cli(['status', '-h']);
  assert.equal(s.code, 0, s.all);
  assert.match(s.stdout, /cerea-sandbox status/);
});

test('an unknown flag is refused with the usage, before anything is created (exit 2)', async () => {
  writeFileSync(join(dir, 'job.py'), 'print(1)\n');
  const n = await chatCount();
  const r = await cli(['run', ...base(), '--atach', 'sales.csv', 'job.py']);
  assert.equal(r.code, 2, r.all);
  assert.match(r.stderr, /unknown option --atach/);
  assert.match(r.stderr, /usage: cerea-sandbox run/);
  assert.equal(await chatCount(), n, 'no chat was created');
  const v = await cli(['run', ...base(), '--timeout', 'soon', 'job.py']);
  assert.equal(v.code, 2, v.all);
  assert.match(v.stderr, /--timeout soon: expected whole seconds/);
  const s = await cli(['status', ...base(), '--chat', 'x']);
  assert.equal(s.code, 2, 'status has no --chat');
});

test('a refused key, a server that is down and a missing script exit 2, not 1 like a Python error', async () => {
  const wrong = await cli(['run', '--url', srv.base, '--key', 'wrong-key-0123456789abcdef', '-'], { input: 'print(1)\n' });
  assert.equal(wrong.code, 2, wrong.all);
  assert.match(wrong.stderr, /refused the API key \(401\)/);
  const down = await cli(['run', '--url', 'http://127.0.0.1:1', '--key', srv.key, '-'], { input: 'print(1)\n' });
  assert.equal(down.code, 2, down.all);
  assert.match(down.stderr, /cannot connect to 127\.0\.0\.1:1/);
  const missing = await cli(['run', ...base(), 'no-such-script.py']);
  assert.equal(missing.code, 2, missing.all);
  assert.match(missing.stderr, /cannot read no-such-script\.py/);
  const st = await cli(['status', '--url', 'http://127.0.0.1:1']);
  assert.equal(st.code, 2, st.all);
  const stKey = await cli(['status', '--url', srv.base, '--key', 'wrong-key-0123456789abcdef']);
  assert.equal(stKey.code, 2, stKey.all);
  assert.match(stKey.stderr, /refused the API key/);
});

test('a missing --attach file fails before a chat is created', async () => {
  const n = await chatCount();
  const r = await cli(['run', ...base(), '--attach', 'nope.csv', '-'], { input: 'print(1)\n' });
  assert.equal(r.code, 2, r.all);
  assert.match(r.stderr, /--attach nope\.csv: No such file/);
  assert.equal(await chatCount(), n, 'no chat was created');
});

test('no page token in default output; --page-url prints the link; --wait running out says what to do next (exit 4)', async () => {
  const r = await cli(['run', ...base(), '--wait', '1', '-'], { input: 'print(1)\n' });
  assert.equal(r.code, 4, r.all);
  assert.doesNotMatch(r.all, TOKEN, 'no page token in the default output');
  assert.doesNotMatch(r.all, /#token=/);
  assert.match(r.stderr, /--page-url prints its link/);
  const runId = /run (\w+) is still (?:queued|paused) after --wait 1 s/.exec(r.stderr)?.[1];
  assert.ok(runId, r.stderr);
  assert.match(r.stderr, /it goes on on the server/);
  assert.match(r.stderr, new RegExp(`/v1/runs/${runId}\\?wait_s=600`));
  assert.match(r.stderr, /waits for a browser page/);
  const u = await cli(['run', ...base(), '--page-url', '--wait', '0', '-'], { input: 'print(1)\n' });
  assert.equal(u.code, 4, u.all);
  assert.match(u.stderr, new RegExp(`open ${srv.base.replace(/[.]/g, '\\.')}/chat/\\w+#token=`));
  const both = await cli(['run', ...base(), '--page-url', '--chat', 'abc', '-'], { input: 'print(1)\n' });
  assert.equal(both.code, 2, 'a page token comes only with a new chat');
});

test('a Python error prints its traceback and exits 1', async () => {
  const chat = await newChat(srv);
  const tb = 'Traceback (most recent call last):\n  File "<cell-1>", line 2, in <module>\n    fail()\n  File "<cell-1>", line 1, in fail\nValueError: boom\n';
  const { page, done } = await pageAnswering(chat, { status: 'error', stdout: 'before\n', error: { type: 'ValueError', message: 'boom', traceback: tb } });
  try {
    const r = await cli(['run', ...base(), '--chat', chat.id, '-'], { input: 'def fail(): raise ValueError("boom")\nfail()\n' });
    await done;
    assert.equal(r.code, 1, r.all);
    assert.equal(r.stdout, 'before\n');
    assert.ok(r.stderr.includes(tb), `the whole traceback on stderr:\n${r.stderr}`);
    assert.match(r.stderr, /run \w+: error: boom/);
    assert.doesNotMatch(r.all, TOKEN);
  } finally { page.close(); }
});

test('saved paths print cleanly with --out DIR/; a timeout with nothing to remount prints no empty list', async () => {
  const chat = await newChat(srv);
  const bytes = Buffer.from('PK fake xlsx bytes');
  const sha = (await import('node:crypto')).createHash('sha256').update(bytes).digest('hex');
  const a = await pageAnswering(chat, { files: [{ name: 'by_region.xlsx', size: bytes.length, sha256: sha, kind: 'file' }] }, { 'by_region.xlsx': bytes });
  try {
    const r = await cli(['run', ...base(), '--chat', chat.id, '--out', 'out/', '-'], { input: 'make()\n' });
    await a.done;
    assert.equal(r.code, 0, r.all);
    assert.match(r.stderr, /^saved out\/by_region\.xlsx \(18 bytes\)$/m);
    assert.doesNotMatch(r.stderr, /\/\//);
    assert.ok(readFileSync(join(dir, 'out', 'by_region.xlsx')).equals(bytes));
  } finally { a.page.close(); }
  const t = await pageAnswering(chat, { status: 'timeout', restarted: true, remounted: [], error: { type: 'TimeoutError', message: 'time limit', traceback: null } });
  try {
    const r = await cli(['run', ...base(), '--chat', chat.id, '--timeout', '2', '-'], { input: 'while True: pass\n' });
    await t.done;
    assert.equal(r.code, 124, r.all);
    assert.match(r.stderr, /restarted; no files to remount/);
    assert.doesNotMatch(r.stderr, /remounted:\s*$/m, 'no empty remounted list');
  } finally { t.page.close(); }
  assert.ok(existsSync(join(dir, 'out')));
});

test('serve prints the URL to open; `scripts/run.sh --listen` replaces 8080 instead of adding to it', async () => {
  const net = await import('node:net');
  assert.match(srv.log, new RegExp(`open http://127\\.0\\.0\\.1:${srv.port}/ for the playground`), srv.log);
  assert.match(srv.log, new RegExp(`http://127\\.0\\.0\\.1:${srv.port}/admin for operators`));
  // Hold 8080 for the time of the test (when someone else holds it already, it is taken all the same).
  const blocker = net.createServer();
  await new Promise((r) => { blocker.once('error', r); blocker.listen(8080, '127.0.0.1', r); });
  const port = await new Promise((r) => { const s = net.createServer().listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => r(p)); }); });
  const data = tempDir('runsh');
  const p = spawn('bash', [join(ROOT, 'scripts', 'run.sh'), '--listen', `127.0.0.1:${port}`, '--data', data], {
    cwd: ROOT, env: { ...env(), RUN_NO_SETUP: '1', CEREA_BIN: '', CEREA_API_KEY: 'run-sh-test-key-0123456789' }, stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  p.stderr.on('data', (d) => { log += d; });
  const exited = new Promise((r) => p.on('exit', (code) => r(code)));
  try {
    let up = false;
    for (let i = 0; i < 100 && !up && p.exitCode === null; i++) {
      try { up = (await fetch(`http://127.0.0.1:${port}/healthz`)).ok; } catch { await new Promise((r) => setTimeout(r, 100)); }
    }
    assert.ok(up, `run.sh --listen 127.0.0.1:${port} came up while 8080 was taken:\n${log}`);
    assert.match(log, new RegExp(`open http://127\\.0\\.0\\.1:${port}/`));
    assert.doesNotMatch(log, /8080/, 'no listener on 8080 was tried');
  } finally {
    if (p.exitCode === null) process.kill(p.pid, 'SIGTERM');
    await exited;
    blocker.close();
    rmSync(data, { recursive: true, force: true });
  }
});
