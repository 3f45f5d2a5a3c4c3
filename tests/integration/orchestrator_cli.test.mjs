// orchestrator_cli.test.mjs -- `cerea-sandbox run` following a live run (issue 15) against the
// real binary with a scripted page: what the run prints is printed as it arrives (before the run
// ends), each character once; a time limit, a crash or a cancel after printing shows what was
// printed, with the documented exit codes; a run started again as a new attempt says so; input()
// is answered from standard input when the script is a file; display() and the cell's value are
// printed as their text.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { writeFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { BIN, startServer, call, newChat, tempDir, Page, sleep } from './lib.mjs';

let srv;
const dir = tempDir('clilive');
before(async () => { srv = await startServer({ env: { CODE_WATCHDOG_GRACE_MS: '800', PAGE_HEARTBEAT_MS: '500', PAGE_SILENT_MS: '4000' } }); });
after(async () => { await srv?.stop(); rmSync(dir, { recursive: true, force: true }); });

// The CLI, tracked by pid: its output as it comes ({stdout, stderr}), `done` with the exit code.
function cli(args, { input } = {}) {
  const env = { ...process.env };
  delete env.CEREA_API_KEY;
  const p = spawn(BIN, ['run', '--url', srv.base, '--key', srv.key, ...args], { cwd: dir, env, stdio: ['pipe', 'pipe', 'pipe'] });
  const o = { stdout: '', stderr: '', p };
  p.stdout.on('data', (d) => { o.stdout += d; });
  p.stderr.on('data', (d) => { o.stderr += d; });
  p.stdin.on('error', () => {});
  if (input !== undefined) p.stdin.write(input);
  o.done = new Promise((resolve, reject) => {
    const t = setTimeout(() => { process.kill(p.pid, 'SIGKILL'); reject(new Error(`cli still running:\n${o.stderr}`)); }, 30000);
    p.on('exit', (code) => { clearTimeout(t); resolve(code); });
  });
  return o;
}
const until = async (fn, ms = 5000) => {
  const t0 = Date.now();
  while (!fn()) { if (Date.now() - t0 > ms) throw new Error('not in time'); await sleep(20); }
};
const chunk = (offset, text, stream = 'stdout') => ({ stream, offset, text });

// A page of a new chat with its heartbeat, and the CLI running code there.
async function setup(args = [], opts = { input: 'print(1)\n' }) {
  const chat = await newChat(srv);
  const page = new Page(srv, chat, 'tab');
  await page.opened;
  page.heartbeat(500);
  const run = cli(['--chat', chat.id, ...args, ...(opts.input !== undefined ? ['-'] : [])], opts);
  if (opts.input !== undefined) run.p.stdin.end();
  const e = (await page.nextRun(10000)).data;
  await page.started(e);
  return { chat, page, run, e };
}

test('run prints output as it arrives, before the run ends, each character once', async () => {
  const { page, run, e } = await setup();
  await page.output(e, { chunks: [chunk(0, 'line 0\n')] });
  await until(() => run.stdout === 'line 0\n');
  await page.output(e, { chunks: [chunk(0, 'line 0\nline 1\n'), chunk(0, 'careful\n', 'stderr')] });
  await until(() => run.stdout === 'line 0\nline 1\n' && run.stderr.includes('careful\n'));
  assert.equal(run.p.exitCode, null, 'the run has not ended yet');
  await page.result(e, { stdout: 'line 0\nline 1\nline 2\n', stderr: 'careful\n' });
  assert.equal(await run.done, 0, run.stderr);
  assert.equal(run.stdout, 'line 0\nline 1\nline 2\n', 'the rest at the end; nothing twice');
  assert.equal(run.stderr.split('careful').length - 1, 1);
  page.close();
});

test('a time limit, a crash and a cancel after printing show what was printed (exit 124, 3, 130)', async () => {
  const t = await setup(['--timeout', '1']);
  await t.page.output(t.e, { chunks: [chunk(0, 'spinning\n')] });
  assert.equal(await t.run.done, 124, t.run.stderr); // the watchdog: 1 s + 0.8 s
  assert.equal(t.run.stdout, 'spinning\n');
  assert.match(t.run.stderr, /timeout/);
  t.page.close();
  const c = await setup();
  await c.page.output(c.e, { chunks: [chunk(0, 'before the crash\n')] });
  await until(() => c.run.stdout.length > 0);
  await call(srv, 'POST', `/v1/runs/${c.e.run_id}/result`, { token: c.chat.token, body: { attempt: 1, status: 'crashed', restarted: true } });
  assert.equal(await c.run.done, 3, c.run.stderr);
  assert.equal(c.run.stdout, 'before the crash\n');
  assert.match(c.run.stderr, /crashed/);
  c.page.close();
  const k = await setup();
  await k.page.output(k.e, { chunks: [chunk(0, 'working\n')] });
  await until(() => k.run.stdout.length > 0);
  assert.equal((await call(srv, 'POST', `/v1/runs/${k.e.run_id}/cancel`)).status, 202);
  await call(srv, 'POST', `/v1/runs/${k.e.run_id}/result`, { token: k.chat.token, body: { attempt: 1, status: 'cancelled' } });
  assert.equal(await k.run.done, 130, k.run.stderr);
  assert.equal(k.run.stdout, 'working\n');
  k.page.close();
});

test('a run started again as a new attempt says so and prints its output from the start', async () => {
  const { page, run, e } = await setup();
  await page.output(e, { chunks: [chunk(0, 'first try\n')] });
  await until(() => run.stdout === 'first try\n');
  await page.presence(false);
  await page.presence(true);
  const e2 = (await page.nextRun()).data;
  assert.equal(e2.attempt, 2);
  await page.started(e2);
  await page.output(e2, { chunks: [chunk(0, 'second try\n')] });
  await page.result(e2, { stdout: 'second try\n' });
  assert.equal(await run.done, 0, run.stderr);
  assert.equal(run.stdout, 'first try\nsecond try\n');
  assert.match(run.stderr, /started again as attempt 2/);
  page.close();
});

test('input(): a line of standard input answers it (script from a file); the prompt comes once, with stdout, as the page sends it', async () => {
  writeFileSync(join(dir, 'ask.py'), 'name = input("name? ")\nprint("hi", name)\n');
  const chat = await newChat(srv);
  const page = new Page(srv, chat, 'tab');
  await page.opened;
  page.heartbeat(500);
  const run = cli(['--chat', chat.id, 'ask.py'], { input: 'Ada\n' });
  const e = (await page.nextRun(10000)).data;
  await page.started(e);
  // As worker/ does: Python writes the prompt to stdout, then input() asks.
  await page.output(e, { chunks: [chunk(0, 'name? ')], input_request: { prompt: 'name? ' } });
  const given = await page.next('input', 10000);
  assert.equal(given.data.text, 'Ada');
  await page.output(e, { chunks: [chunk(6, 'Ada\nhi Ada\n')] });
  await page.result(e, { stdout: 'name? Ada\nhi Ada\n' });
  assert.equal(await run.done, 0, run.stderr);
  assert.equal(run.stdout, 'name? Ada\nhi Ada\n');
  assert.doesNotMatch(run.stderr, /name\? /, 'the prompt once, on stdout');
  page.close();
});

test('display() as its text when it comes, the cell\'s value at the end (stdout), each once', async () => {
  const { page, run, e } = await setup();
  const first = { 'text/plain': "{'a': 1}", 'application/json': { a: 1 } };
  await page.output(e, { displays: [{ index: 0, data: first }] });   // before any output
  await until(() => run.stdout === "{'a': 1}\n");
  await page.output(e, { chunks: [chunk(0, 'before\n')], displays: [{ index: 0, data: first }] });
  await until(() => run.stdout === "{'a': 1}\nbefore\n");
  await page.result(e, {
    stdout: 'before\n',
    displays: [{ 'text/plain': "{'a': 1}", 'application/json': { a: 1 } }, { 'text/plain': '<Table>', 'text/html': '<table></table>' }],
    value: { 'text/plain': '42', 'application/json': 42 },
  });
  assert.equal(await run.done, 0, run.stderr);
  assert.equal(run.stdout, "{'a': 1}\nbefore\n<Table>\n42\n");
  page.close();
});
