// basic.test.mjs -- the protocol and execution behaviours of the kernel, against real Pyodide in a
// worker thread: start-up, persistent namespace, errors with the user's line numbers, SyntaxError
// before package loading, top-level await, output caps, MemoryError recovery.  Each test names
// the guide (seeds/000) or DESIGN sentence it checks.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { newNodeKernel, run } from './helpers.mjs';
import { NOTE } from '../../worker/notes.js';

let k;
before(async () => { k = newNodeKernel(); await k.ready; });
after(() => k && k.terminate('cancelled'));

test('start-up: ready promise gives runtime info; lock-down reported clean', async () => {
  const info = await k.ready;
  assert.equal(info.pyodide, '314.0.7');
  assert.match(info.python, /^3\.14/);
  assert.equal(info.interrupts, true);
  assert.deepEqual(info.lockdown, [], 'every lock-down patch applied');
});

test('bad command is refused with bad_message, kernel stays usable', async () => {
  await assert.rejects(k.send({ cmd: 'nope' }), /unknown cmd/);
  await assert.rejects(k.send({ cmd: 'run', code: 5 }), /code must be a string/);
  const r = await run(k, 'print(1)');
  assert.equal(r.stdout, '1\n');
});

test('DESIGN: execute in the chat\'s namespace — variables persist between runs', async () => {
  let r = await run(k, 'counter = 10\ndef bump():\n    global counter\n    counter += 1\n    return counter');
  assert.equal(r.status, 'ok');
  r = await run(k, 'print(bump(), counter)');
  assert.equal(r.stdout, '11 11\n');
});

test('errors are {type, message, traceback} with the user\'s line numbers', async () => {
  const r = await run(k, 'a = 1\nb = 2\n\ndef g(x):\n    return x[5]\ng([1])\n');
  assert.equal(r.status, 'error');
  assert.equal(r.error.type, 'IndexError');
  assert.equal(r.error.message, 'list index out of range');
  assert.match(r.error.traceback, /File "<cell-\d+>", line 6, in <module>/);
  assert.match(r.error.traceback, /line 5, in g\n\s+return x\[5\]/);
  assert.doesNotMatch(r.error.traceback, /cerea_kernel|_pyodide/, 'kernel frames are cut');
  // a function defined by an earlier cell keeps that cell's lines
  const r2 = await run(k, '\n\ng(None)');
  assert.match(r2.error.traceback, /line 5, in g\n\s+return x\[5\]/);
  assert.match(r2.error.traceback, /line 3, in <module>/);
});

test('SyntaxError is reported before any package loads (no packages event, no execution)', async () => {
  const events = [];
  const off = k.onEvent((e) => events.push(e));
  const r = await run(k, 'import openpyxl\nprint("ran")\nx = (1,\n');
  off();
  assert.equal(r.status, 'error');
  assert.equal(r.error.type, 'SyntaxError');
  assert.match(r.error.message, /line 3/);
  assert.equal(r.stdout, '');
  assert.equal(events.filter((e) => e.event === 'packages' || e.event === 'started').length, 0);
});

test('top-level await is allowed', async () => {
  const r = await run(k, 'import asyncio\nawait asyncio.sleep(0.001)\nv = await asyncio.gather(asyncio.sleep(0, "a"), asyncio.sleep(0, "b"))\nprint(v)');
  assert.equal(r.status, 'ok', JSON.stringify(r.error));
  assert.equal(r.stdout, "['a', 'b']\n");
});

test('Output: 8,000 characters per stream, its start and its end — flag set, note in notes, one gap line in the stream', async () => {
  const r = await run(k, 'import sys\nfor i in range(3000): print("é" * 9)\nsys.stderr.write("x" * 8000)\nprint("tail", end="")');
  assert.equal(r.stdout_truncated, true);
  assert.equal([...r.stdout].length, 8000);
  const [head, rest] = r.stdout.split(/\n\[… [\d,]+ characters left out …\]\n/);
  assert.equal([...head].length, 4000, 'the first 4,000 characters');
  assert.equal(head, `${'é'.repeat(9)}\n`.repeat(400));
  assert.ok(rest.endsWith(`${'é'.repeat(9)}\ntail`), 'the end is kept: the last line printed');
  const gap = r.stdout.slice(head.length, r.stdout.length - rest.length);
  assert.equal(gap, NOTE.outputGap(30004 - 4000 - [...rest].length));
  assert.doesNotMatch(r.stdout, /cut|truncat/);
  assert.equal(r.stderr.length, 8000, 'exactly at the cap is not truncated');
  assert.equal(r.stderr_truncated, false);
  assert.ok(r.notes.some((n) => /stdout was cut to 8,000 characters/.test(n)));
  assert.ok(!r.notes.some((n) => /stderr/.test(n)));
});

test('Output: a partial last line is delivered; under the cap nothing is flagged', async () => {
  const r = await run(k, 'print("a")\nprint("partial", end="")');
  assert.equal(r.stdout, 'a\npartial');
  assert.equal(r.stdout_truncated, false);
  assert.deepEqual(r.notes, []);
});

test('Output: a sys.stdout replaced by the previous run is restored', async () => {
  await run(k, 'import sys, io\nsys.stdout = io.StringIO()');
  const r = await run(k, 'print("visible")');
  assert.equal(r.stdout, 'visible\n');
});

test('Memory: running out raises MemoryError, and the kernel stays usable', async () => {
  const r = await run(k, 'big = []\nwhile True:\n    big.append(bytearray(256 * 1024 * 1024))');
  assert.equal(r.status, 'error');
  assert.equal(r.error.type, 'MemoryError');
  const r2 = await run(k, 'del big\nprint(counter + 1)');
  assert.equal(r2.status, 'ok', JSON.stringify(r2.error));
  assert.equal(r2.stdout, '12\n', 'namespace survived');
});

test('SystemExit ends the run as an error, kernel alive', async () => {
  const r = await run(k, 'raise SystemExit(3)');
  assert.equal(r.status, 'error');
  assert.equal(r.error.type, 'SystemExit');
  assert.equal((await run(k, 'print(2)')).stdout, '2\n');
});

test('dispose forgets the chat (switch on a warm kernel): namespace, files, scratch, JS globals; safe twice', async () => {
  await run(k, `import js, os
js.globalThis.leftBehind = 'secret'
open('scratch.txt', 'w').write('s'); open('/tmp/t.txt', 'w').write('t'); open('/mnt/output/o.txt', 'w').write('o')`);
  await k.dispose();
  await k.dispose();
  const r = await run(k, 'print(counter)');
  assert.equal(r.error.type, 'NameError');
  const r2 = await run(k, `import js, os
print(hasattr(js, 'leftBehind'), os.listdir('.'), os.path.exists('/tmp/t.txt'), os.listdir('/mnt/output'), os.listdir('/mnt/data'))`);
  assert.equal(r2.stdout, 'False [] False [] []\n');
  assert.equal((await run(k, 'import json\nprint(json.dumps(1))')).stdout, '1\n', 'the kernel still works');
});

test('start-up failure: a runtime that cannot be read rejects ready with load_failed and the worker is gone', async () => {
  const { KernelClient } = await import('../../worker/kernel-client.js');
  const { createNodeWorker, nodeInitOptions } = await import('../../worker/node-kernel.js');
  const bad = new KernelClient({ createWorker: createNodeWorker(), init: { ...nodeInitOptions(), lockFileURL: '/nonexistent/pyodide-lock.json' } });
  await assert.rejects(bad.ready, (e) => e.code === 'load_failed' && /nonexistent/.test(e.message));
  assert.equal(bad.state, 'dead');
  await assert.rejects(bad.run({ code: 'print(1)' }), /load_failed|nonexistent|dead/);
});

test('start-up: the load timeout bounds a load that does not finish (Pyodide hangs rather than failing)', async () => {
  const { KernelClient } = await import('../../worker/kernel-client.js');
  const { createNodeWorker, nodeInitOptions } = await import('../../worker/node-kernel.js');
  const slow = new KernelClient({ createWorker: createNodeWorker(), init: nodeInitOptions(), loadTimeoutMs: 50 });
  const t0 = performance.now();
  await assert.rejects(slow.ready, (e) => e.code === 'load_timeout');
  assert.ok(performance.now() - t0 < 3000);
  assert.equal(slow.state, 'dead');
});

test('input() waits for the controller (its input_request event); EOF from it raises EOFError (live.test.mjs: answers)', async () => {
  const off = k.onEvent((e) => { if (e.event === 'input_request') setTimeout(() => assert.equal(k.eof(), true), 50); });
  const t0 = performance.now();
  const r = await run(k, 'try:\n    input("name? ")\nexcept Exception as e:\n    print(type(e).__name__)');
  off();
  assert.equal(r.status, 'ok');
  assert.equal(r.stdout, 'name? EOFError\n');
  assert.ok(performance.now() - t0 < 2000);
  assert.equal(k.eof(), false, 'no run waits');
});

test('run limits from the event may lower the caps, never raise them', async () => {
  const low = await run(k, 'print("x" * 500)', { limits: { out_chars: 100 } });
  assert.equal(low.stdout.length, 100);
  assert.equal(low.stdout_truncated, true);
  assert.ok(low.notes.some((n) => /cut to 100 characters/.test(n)));
  const high = await run(k, 'print("y" * 9000)', { limits: { out_chars: 1e6 } });
  assert.equal(high.stdout.length, 8000);
  assert.equal(high.stdout_truncated, true);
});
