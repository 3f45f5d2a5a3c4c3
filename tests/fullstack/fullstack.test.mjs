// fullstack.test.mjs -- the guide's behaviours that cross the whole stack, end to end: the real
// orchestrator binary in `server` mode (real SQLite files), its real headless host (Node, under
// bubblewrap and the permission model) running real Pyodide.  One server for the file (each
// Pyodide load costs ~3 s of CPU); tests run in order and some build on earlier ones (noted).
// CODE_TIME_LIMIT_S=3 keeps the time-limit cases short.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import {
  BWRAP, NO_BWRAP, needTool, startStack, hostReady, call, newChat, upload, run, waitRun, waitState, sha256, sleep,
  hostNodePids, descendants, netns, cmdline, tempDir,
} from './lib.mjs';
import { NOTE } from '../../worker/notes.js';

let srv, A, B, C;
const blob = randomBytes(300 * 1024);   // every byte value, binary: read back byte-identical

before(async () => {
  srv = await startStack();
  cleanup.push(srv.dataDir);
  await hostReady(srv);
  A = await newChat(srv);
  B = await newChat(srv);
});
after(async () => {
  if (srv) await srv.stop();
  const { rmSync } = await import('node:fs');
  for (const d of cleanup) rmSync(d, { recursive: true, force: true });   // 100+ MB of blobs
});
const cleanup = [];

const py = (lines) => lines.join('\n');

test('an attachment is read back byte-identical from /mnt/data; a run sees files attached before it', async () => {
  const up = await upload(srv, A, 'blob.bin', blob);
  assert.equal(up.status, 201);
  assert.equal(up.json.path, '/mnt/data/blob.bin');
  const r = await run(srv, A, py([
    'import hashlib',
    "data = open('/mnt/data/blob.bin','rb').read()",
    'print(len(data), hashlib.sha256(data).hexdigest())',
    'kept = 42',
  ]));
  assert.equal(r.status, 'ok', JSON.stringify(r));
  assert.equal(r.stdout.trim(), `${blob.length} ${sha256(blob)}`);
  assert.equal(r.restarted, false);
});

test('same content again adds no copy; same name with other content becomes "name (2).ext"; both mounted', async () => {
  const a1 = await upload(srv, A, 'report.txt', Buffer.from('first report\n'));
  const a2 = await upload(srv, A, 'report.txt', Buffer.from('first report\n'));
  const b = await upload(srv, A, 'report.txt', Buffer.from('second report\n'));
  assert.equal(a1.status, 201);
  assert.equal(a2.status, 200, 'the same bytes again: no copy');
  assert.equal(a2.json.file_id, a1.json.file_id);
  assert.equal(b.status, 201);
  assert.equal(b.json.name, 'report (2).txt');
  const r = await run(srv, A, py([
    'import os',
    "print(sorted(n for n in os.listdir('/mnt/data') if n.startswith('report')))",
    "print(open('/mnt/data/report.txt').read().strip(), '|', open('/mnt/data/report (2).txt').read().strip())",
  ]));
  assert.equal(r.status, 'ok', JSON.stringify(r));
  assert.deepEqual(r.stdout.trim().split('\n'), ["['report (2).txt', 'report.txt']", 'first report | second report']);
});

test('size caps: over 20 MB and past 100 MB in all are stored, not mounted, with a reason and no path', async () => {
  C = await newChat(srv);
  const MB = 1048576;
  const big = await upload(srv, C, 'big.bin', Buffer.alloc(20 * MB + 1, 1));
  assert.equal(big.status, 201);
  assert.equal(big.json.mounted, false);
  assert.match(big.json.left_out_reason, /20 MB/);
  assert.equal(big.json.path, null);
  for (let i = 0; i < 5; i++) {
    const f = await upload(srv, C, `part${i}.bin`, Buffer.alloc(20 * MB, 65 + i));
    assert.equal(f.status, 201);
    assert.equal(f.json.mounted, true, `part${i}: 100 MB in all is still within the cap`);
  }
  const over = await upload(srv, C, 'one-more.txt', Buffer.from('x'));
  assert.equal(over.json.mounted, false);
  assert.match(over.json.left_out_reason, /100 MB/);
  assert.equal(over.json.path, null);
  const r = await run(srv, C, py([
    'import os',
    "print(sorted((n, os.path.getsize('/mnt/data/'+n)) for n in os.listdir('/mnt/data')))",
  ]));
  assert.equal(r.status, 'ok', JSON.stringify(r));
  assert.equal(r.stdout.trim(), `[${[0, 1, 2, 3, 4].map((i) => `('part${i}.bin', ${20 * MB})`).join(', ')}]`);
  const list = await call(srv, 'GET', `/v1/chats/${C.id}/files`);
  const left = (list.json.files || list.json).filter((f) => !f.mounted).map((f) => [f.name, f.path]);
  assert.deepEqual(left.sort(), [['big.bin', null], ['one-more.txt', null]]);
});

let firstOut;
test('only created or changed /mnt/output files become artifacts, downloadable byte-identical; earlier outputs are at /mnt/data next run', async () => {
  const r1 = await run(srv, A, py([
    "open('/mnt/output/a.txt','w').write('version one')",
    "open('/mnt/output/keep.txt','w').write('unchanged')",
    "import os; os.makedirs('/mnt/output/plots', exist_ok=True)",
    "open('/mnt/output/plots/p.bin','wb').write(bytes(range(256))*4)",
    "open('/tmp/scratch.txt','w').write('scratch')",
    "open('scratch-cwd.txt','w').write('scratch')",
  ]));
  assert.equal(r1.status, 'ok', JSON.stringify(r1));
  assert.deepEqual(r1.files.map((f) => f.name), ['a.txt', 'keep.txt', 'plots/p.bin']);
  const p = r1.files.find((f) => f.name === 'plots/p.bin');
  const dl = await call(srv, 'GET', `/v1/files/${p.artifact_id}`);
  assert.equal(dl.status, 200);
  assert.ok(dl.buf.equals(Buffer.concat(Array(4).fill(Buffer.from([...Array(256).keys()])))), 'artifact bytes identical');
  firstOut = r1;

  const r2 = await run(srv, A, py([
    "open('/mnt/output/a.txt','w').write('version two')",
    "open('/mnt/output/keep.txt','w').write('unchanged')",    // identical rewrite: not changed
    "open('/mnt/output/new.bin','wb').write(b'\\x00\\xff' * 10)",
    "print(open('/mnt/data/keep.txt').read(), open('/mnt/data/plots/p.bin','rb').read()[:3])",
  ]));
  assert.equal(r2.status, 'ok', JSON.stringify(r2));
  assert.deepEqual(r2.files.map((f) => f.name), ['a.txt', 'new.bin']);
  assert.equal(r2.files[0].version, 2, 'a redraw of a name is its next version');
  assert.equal(r2.stdout.trim(), "unchanged b'\\x00\\x01\\x02'");
  const a2 = await call(srv, 'GET', `/v1/files/${r2.files[0].artifact_id}`);
  assert.equal(a2.buf.toString(), 'version two');
});

test("a turn's python blocks run in order, as auto runs", async () => {
  const t = await call(srv, 'POST', `/v1/chats/${A.id}/turns`, { body: {} });
  assert.equal(t.status, 201);
  const answer = 'Here:\n\n```python\norder = [1]\n```\n\ntext\n\n```python\norder.append(2)\nprint(order)\n```\n';
  const f = await call(srv, 'POST', `/v1/turns/${t.json.turn_id}/finish`, { body: { answer } });
  assert.equal(f.status, 200, JSON.stringify(f.json));
  assert.equal(f.json.runs.length, 2);
  const r1 = await waitRun(srv, f.json.runs[0]);
  const r2 = await waitRun(srv, f.json.runs[1]);
  assert.equal(r1.origin, 'auto');
  assert.equal(r1.status, 'ok');
  assert.equal(r2.status, 'ok', JSON.stringify(r2));
  assert.equal(r2.stdout.trim(), '[1, 2]');
});

test('cancel interrupts first: the run ends cancelled and the namespace survives', async () => {
  const r = await call(srv, 'POST', `/v1/chats/${A.id}/runs`, { body: { code: 'survivor = 7\nwhile True:\n    pass' } });
  assert.equal(r.status, 201);
  await waitState(srv, r.json.run_id, 'running');
  const c = await call(srv, 'POST', `/v1/runs/${r.json.run_id}/cancel`, { body: {} });
  assert.ok([200, 202].includes(c.status), `cancel: ${c.status} ${c.buf}`);
  const done = await waitRun(srv, r.json.run_id);
  assert.equal(done.status, 'cancelled', JSON.stringify(done));
  assert.equal(done.restarted, false, 'interrupted within the grace: no restart');
  const after = await run(srv, A, 'print(survivor, kept)');
  assert.equal(after.stdout.trim(), '7 42');
});

test('time limit: the kernel is replaced, every file remounted, variables gone, and the result says so with the list', async () => {
  const r = await run(srv, A, 'doomed = 1\nwhile True:\n    pass');
  assert.equal(r.status, 'timeout', JSON.stringify(r));
  assert.equal(r.restarted, true);
  for (const n of ['blob.bin', 'report.txt', 'report (2).txt', 'a.txt', 'keep.txt', 'new.bin'])
    assert.ok(r.remounted.includes(n), `${n} remounted: ${JSON.stringify(r.remounted)}`);
  const next = await run(srv, A, py([
    'import hashlib, os',
    "print('kept' in globals(), 'doomed' in globals())",
    "print(hashlib.sha256(open('/mnt/data/blob.bin','rb').read()).hexdigest())",
  ]));
  assert.equal(next.status, 'ok', JSON.stringify(next));
  assert.deepEqual(next.stdout.trim().split('\n'), ['False False', sha256(blob)]);
});

test("chat isolation: another chat sees none of this chat's files or variables", async () => {
  await upload(srv, B, 'b-only.txt', Buffer.from('b'));
  const r = await run(srv, B, py([
    'import os',
    "print(sorted(os.listdir('/mnt/data')), 'kept' in globals(), os.path.exists('/mnt/data/blob.bin'))",
  ]));
  assert.equal(r.status, 'ok', JSON.stringify(r));
  assert.equal(r.stdout.trim(), "['b-only.txt'] False False");
});

test('sandbox, from Python: no Node built-ins, no code generation from strings', async () => {
  const r = await run(srv, B, py([
    'import js, pyodide_js',
    "print([n for n in ('process', 'Buffer', 'require', 'global', 'Worker', 'WebSocket') if getattr(js, n, None) is not None])",
    'def tries(f):',
    '    try:',
    '        f(); return "REACHED"',
    '    except Exception as e:',
    '        return type(e).__name__',
    "print(tries(lambda: js.eval('1+1')), tries(lambda: js.Function('return 1')()))",
    'from pyodide.code import run_js',
    "print(tries(lambda: run_js('import(\"node:child_process\")')))",
    'import subprocess',
    "print(tries(lambda: subprocess.run(['/bin/true'], check=True)))",
  ]));
  assert.equal(r.status, 'ok', JSON.stringify(r));
  const [globalsSeen, codegen, runjs, sub] = r.stdout.trim().split('\n');
  assert.equal(globalsSeen, '[]');
  assert.doesNotMatch(codegen, /REACHED/);
  assert.doesNotMatch(runjs, /REACHED/);
  assert.doesNotMatch(sub, /REACHED/);
});

test('sandbox, from Python: no child processes (Emscripten system() reaches child_process in Node: the permission model stops it)', async () => {
  // The only directory the host may write to is the socket's (bound into the sandbox); a shell
  // that ran would leave a file there.
  const proof = `${srv.dataDir}/hosts/proof-${process.pid}`;
  const r = await run(srv, B, `import os\nprint(os.system('touch ${proof}'))`);
  assert.ok(['crashed', 'error'].includes(r.status) || !/^0$/m.test(r.stdout), JSON.stringify(r));
  const { existsSync } = await import('node:fs');
  assert.equal(existsSync(proof), false, 'no process was started');
  if (r.status === 'crashed') assert.equal(r.restarted, true, 'a crashed kernel is replaced');
  const next = await run(srv, B, "print('alive')");
  assert.equal(next.stdout.trim(), 'alive');
});

test('sandbox, from Python: no files outside the sandbox (even through NODEFS), no writes', async (t) => {
  const r = await run(srv, B, py([
    'import pyodide_js, os',
    'def tries(f):',
    '    try:',
    '        return "REACHED " + repr(f())[:40]',
    '    except BaseException as e:',
    '        return type(e).__name__',
    "print(tries(lambda: open('/etc/passwd').read()))",
    'import js',
    'from pyodide.ffi import to_js',
    "print(tries(lambda: pyodide_js.FS.mount(pyodide_js.FS.filesystems.NODEFS, to_js({'root': '/'}, dict_converter=js.Object.fromEntries), '/host')))",
    "print(tries(lambda: open('/host/etc/passwd').read()))",
    `print(tries(lambda: open('/host${srv.dataDir}/api_key').read()))`,
    "print(tries(lambda: open('/host/tmp/cerea-escape.txt','w').write('x')))",
  ]));
  assert.equal(r.status, 'ok', JSON.stringify(r));
  const lines = r.stdout.trim().split('\n');
  t.diagnostic(`probes: ${lines.join(' | ')}`);
  assert.equal(lines[0], 'FileNotFoundError', 'the kernel sees only its own in-memory file system');
  // Mounting the host file system may or may not succeed; reading through it must not.
  for (const l of lines.slice(2)) assert.doesNotMatch(l, /REACHED/, `escaped: ${lines.join(' / ')}`);
});

test('sandbox, from Python: no network beyond the orchestrator (fetch, sockets refused; the host is in its own network namespace)', async (t) => {
  const r = await run(srv, B, py([
    'import js, socket',
    'from pyodide.ffi import run_sync',
    'def tries(f):',
    '    try:',
    '        f(); return "REACHED"',
    '    except BaseException as e:',
    '        return type(e).__name__',
    `print(tries(lambda: run_sync(js.fetch('http://127.0.0.1:${srv.port}/healthz'))))`,
    `print(tries(lambda: socket.create_connection(('127.0.0.1', ${srv.port}), timeout=2)))`,
  ]));
  assert.equal(r.status, 'ok', JSON.stringify(r));
  for (const l of r.stdout.trim().split('\n')) assert.notEqual(l, 'REACHED', r.stdout);
  if (!needTool(t, !BWRAP && NO_BWRAP)) return;
  const pids = hostNodePids(srv);
  assert.equal(pids.length, 1, `one host node process: ${pids}`);
  assert.ok(netns(pids[0]) && netns(pids[0]) !== netns(process.pid), 'the host runs in a network namespace of its own');
  assert.ok(cmdline(pids[0]).includes('--experimental-permission'));
  assert.ok(cmdline(pids[0]).includes('--disallow-code-generation-from-strings'));
});

test('CLI: `cerea-sandbox run` creates a chat, attaches, runs, prints, saves artifacts; its exit status reflects the run', async () => {
  const { spawnSync } = await import('node:child_process');
  const { writeFileSync, readFileSync } = await import('node:fs');
  const { BIN } = await import('../integration/lib.mjs');
  const dir = tempDir('fs-cli');
  cleanup.push(dir);
  writeFileSync(`${dir}/in.bin`, blob);
  writeFileSync(`${dir}/job.py`, py([
    'import hashlib, shutil',
    "print(hashlib.sha256(open('/mnt/data/in.bin','rb').read()).hexdigest())",
    "shutil.copy('/mnt/data/in.bin', '/mnt/output/copy.bin')",
    "import sys; print('to stderr', file=sys.stderr)",
  ]));
  const cli = (args, input) => spawnSync(BIN, args, { encoding: 'utf8', input, timeout: 240000 });
  const base = ['run', '--server', srv.base, '--api-key', srv.key];
  const r = cli([...base, '--attach', `${dir}/in.bin`, '--out', `${dir}/out`, `${dir}/job.py`]);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout.trim(), sha256(blob));
  assert.match(r.stderr, /attached .*in\.bin as in\.bin/);
  assert.match(r.stderr, /to stderr/);
  assert.ok(readFileSync(`${dir}/out/copy.bin`).equals(blob), 'the artifact saved byte-identical');
  const chatId = /chat (\w+)/.exec(r.stderr)[1];
  const e = cli([...base, '--chat', chatId, '-'], 'raise ValueError("boom")\n');
  assert.equal(e.status, 1, e.stderr);
  assert.match(e.stderr, /boom/);
  const t = cli([...base, '--chat', chatId, '-'], 'while True:\n    pass\n');
  assert.equal(t.status, 124, t.stderr);
  assert.match(t.stderr, /restarted; remounted:.*in\.bin/);
  const st = spawnSync(BIN, ['status', '--server', srv.base, '--api-key', srv.key], { encoding: 'utf8' });
  assert.equal(st.status, 0);
  assert.match(st.stdout, /host-0/);
  const bad = cli(['run', '--server', srv.base, '--api-key', 'wrong-key-0123456789', '-'], 'print(1)\n');
  assert.notEqual(bad.status, 0);
});

test('capacity (CEREA_HOST_KERNELS=3): the chat idle longest gave its slot up to a waiting chat; its next run says restarted, with a note and every file remounted', async () => {
  // Chats so far, least recently used first: C (size caps), A, B, then the CLI's chat waited for
  // a slot, and C (idle longest) was detached for it (hosts.c).
  const r = await run(srv, C, "import os\nprint(len(os.listdir('/mnt/data')))");
  assert.equal(r.status, 'ok', JSON.stringify(r));
  assert.equal(r.stdout.trim(), '5');
  assert.equal(r.restarted, true);
  assert.deepEqual(r.notes, [NOTE.detached()]);
  assert.deepEqual(r.remounted.slice().sort(), ['part0.bin', 'part1.bin', 'part2.bin', 'part3.bin', 'part4.bin']);
});

test('a host killed mid-run is restarted; the run is re-dispatched (new attempt) and ends ok; nothing is lost', async () => {
  const [oldPid] = hostNodePids(srv);
  const r = await call(srv, 'POST', `/v1/chats/${A.id}/runs`, { body: { code: "import time\ntime.sleep(1.5)\nprint('finished', open('/mnt/data/a.txt').read())" } });
  await waitState(srv, r.json.run_id, 'running');
  process.kill(oldPid, 'SIGKILL');
  const done = await waitRun(srv, r.json.run_id, 300);
  assert.equal(done.status, 'ok', JSON.stringify(done));
  assert.equal(done.stdout.trim(), 'finished version two');
  assert.ok(done.attempts >= 2, `attempts ${done.attempts}`);
  const [newPid] = hostNodePids(srv);
  assert.ok(newPid && newPid !== oldPid, 'a new host process');
  const earlier = await call(srv, 'GET', `/v1/runs/${firstOut.run_id}`);
  assert.deepEqual(earlier.json.files.map((f) => f.sha256), firstOut.files.map((f) => f.sha256));
});

test('the orchestrator SIGKILLed and restarted: persisted results intact, hosts reattach, queued runs go on', async () => {
  const before = await call(srv, 'GET', `/v1/runs/${firstOut.run_id}`);
  const hostPids = descendants(srv.pid);
  const q1 = await call(srv, 'POST', `/v1/chats/${A.id}/runs`, { body: { code: "import time\ntime.sleep(1)\nprint('q1')" } });
  const q2 = await call(srv, 'POST', `/v1/chats/${A.id}/runs`, { body: { code: "print('q2', open('/mnt/data/keep.txt').read())" } });
  assert.equal(q1.status, 201);
  assert.equal(q2.status, 201);
  srv.stopping = true;
  process.kill(srv.pid, 'SIGKILL');
  await srv.exited;
  // The hosts die with their parent (bwrap --die-with-parent; stdin EOF when trusted).
  for (let i = 0; i < 100 && hostPids.some((p) => { try { process.kill(p, 0); return true; } catch { return false; } }); i++) await sleep(50);
  for (const p of hostPids) assert.throws(() => process.kill(p, 0), `host process ${p} outlived the orchestrator`);
  const dataDir = srv.dataDir;
  srv = await startStack({ dataDir });
  await hostReady(srv);
  const again = await call(srv, 'GET', `/v1/runs/${firstOut.run_id}`);
  assert.deepEqual(again.json, before.json, 'a persisted result is intact');
  const dl = await call(srv, 'GET', `/v1/files/${firstOut.files[2].artifact_id}`);
  assert.equal(sha256(dl.buf), firstOut.files[2].sha256);
  const r1 = await waitRun(srv, q1.json.run_id, 300);
  const r2 = await waitRun(srv, q2.json.run_id, 300);
  assert.equal(r1.status, 'ok', JSON.stringify(r1));
  assert.equal(r1.stdout.trim(), 'q1');
  assert.equal(r2.status, 'ok', JSON.stringify(r2));
  assert.equal(r2.stdout.trim(), 'q2 unchanged');
});
