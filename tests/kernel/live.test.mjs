// live.test.mjs -- live runs (issue 15) at the kernel supervisor (worker/supervisor.js over real
// Pyodide kernels in worker threads): output streamed while Python runs, batched and capped;
// every ending keeps what was printed (time limit, a cancel the kernel did not honour, a crash);
// the cell's value and display() as MIME bundles; input() answered, EOFError past the input
// wait, its time not counted against the time limit; and a Stop that wakes time.sleep,
// asyncio.sleep, input() and an awaited JS promise at once with the namespace kept.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { newNodeKernel, newNodeSupervisor } from './helpers.mjs';
import { NOTE, noteCode } from '../../worker/notes.js';

let sup;
before(async () => { sup = newNodeSupervisor({}, { cancelGraceMs: 2000 }); await sup.start(); });
after(() => { if (sup) { sup.dispose(); sup.pool.dispose(); } });

let seq = 0;
// Runs code on the supervisor, recording its events with their time (ms since the call).
async function live(code, opts = {}, during = () => {}) {
  const runId = `live-${++seq}`;
  const t0 = performance.now();
  const events = [];
  const offs = ['output', 'display', 'input_request', 'input_end', 'executing'].map((type) =>
    sup.on(type, (e) => { if (e.run_id === runId) { events.push({ type, at: performance.now() - t0, ...e }); during(type, e, runId); } }));
  try {
    const result = await sup.run({ runId, code, ...opts });
    return { result, events, ms: performance.now() - t0, outputs: events.filter((e) => e.type === 'output') };
  } finally { for (const off of offs) off(); }
}
const joined = (outputs, stream) => outputs.filter((e) => e.stream === stream).map((e) => e.text).join('');
const cancelAt = (ms) => (type) => { if (type === 'executing') setTimeout(() => sup.cancel(), ms); };

test('streaming: a line a second for 3 s — the first line reaches the supervisor ≥ 1.5 s before the end', async () => {
  const { result, outputs, ms } = await live('import time\nfor i in range(3):\n    print("line", i)\n    time.sleep(1)\n');
  assert.equal(result.status, 'ok');
  assert.equal(result.stdout, 'line 0\nline 1\nline 2\n');
  assert.ok(outputs.length >= 3, `${outputs.length} chunks`);
  assert.equal(outputs[0].text, 'line 0\n');
  assert.ok(ms - outputs[0].at >= 1500, `first line ${Math.round(outputs[0].at)} ms, end ${Math.round(ms)} ms`);
  assert.equal(joined(outputs, 'stdout'), result.stdout, 'the chunks joined are the result');
});

test('streaming without Python\'s cooperation: output before a CPU loop arrives while the loop runs (the flush signal)', async () => {
  const code = 'import time\nprint("before the loop")\nt = time.time()\nwhile time.time() - t < 2:\n    pass\nprint("after")';
  const { result, outputs, ms } = await live(code);
  assert.equal(result.stdout, 'before the loop\nafter\n');
  assert.equal(outputs[0].text, 'before the loop\n');
  assert.ok(ms - outputs[0].at >= 1500, `first chunk ${Math.round(outputs[0].at)} ms, end ${Math.round(ms)} ms`);
});

test('batched: 6,000 prints over ~1 s arrive in a few dozen chunks, never one message per print', async () => {
  const code = 'import time\nfor i in range(6000):\n    print(".", end="")\n    if i % 60 == 0:\n        time.sleep(0.01)';
  const { result, outputs, ms } = await live(code);
  assert.equal(result.status, 'ok');
  assert.equal(result.stdout, '.'.repeat(6000));
  assert.ok(outputs.length >= 3 && outputs.length <= ms / 25 + 3, `${outputs.length} chunks in ${Math.round(ms)} ms`);
  assert.equal(joined(outputs, 'stdout'), result.stdout);
});

test('an explicit flush hands the text on at once: flush=True before a long computation arrives while it runs', async () => {
  const code = 'import time\nprint("flushed", flush=True)\nt = time.time()\nwhile time.time() - t < 2:\n    pass\nprint("after")';
  const { result, outputs, ms } = await live(code);
  assert.equal(result.stdout, 'flushed\nafter\n');
  assert.equal(outputs[0].text, 'flushed\n');
  assert.ok(ms - outputs[0].at >= 1500, `first chunk ${Math.round(outputs[0].at)} ms, end ${Math.round(ms)} ms`);
});

test('a crash right after print(..., flush=True) keeps the line, and none of the kernel\'s crash report lands in stdout', async () => {
  await sup.whenSpareReady();
  const { result, outputs } = await live('import os\nprint("flushed", flush=True)\nos.abort()');
  assert.equal(result.status, 'crashed');
  assert.equal(result.stdout, 'flushed\n');
  assert.equal(result.stderr, '');
  assert.equal(joined(outputs, 'stdout'), 'flushed\n');
});

test('caps hold mid-stream: never more than 8,000 characters streamed per stream, in code points; the last chunk says truncated', async () => {
  const code = 'import sys, time\nfor i in range(3000):\n    print("é" * 9)\n    if i % 500 == 0: time.sleep(0.06)\nsys.stderr.write("x" * 8000)\nsys.stderr.flush()\ntime.sleep(0.1)\nprint("tail")';
  const { result, outputs } = await live(code);
  const out = joined(outputs, 'stdout');
  assert.equal([...out].length, 8000);
  assert.equal(out, result.stdout);
  assert.equal(result.stdout_truncated, true);
  assert.equal(outputs.filter((e) => e.stream === 'stdout').at(-1).truncated, true);
  assert.equal(joined(outputs, 'stderr').length, 8000, 'exactly at the cap');
  assert.equal(result.stderr_truncated, false);
  let offset = 0;
  for (const e of outputs.filter((x) => x.stream === 'stdout')) { assert.equal(e.offset, offset); offset += [...e.text].length; }
  assert.deepEqual(result.notes.map(noteCode), ['output_cut']);
});

test('every ending keeps what was printed: the time limit (the kernel replaced)', async () => {
  await sup.whenSpareReady();
  const { result } = await live('x = 41\nprint("spinning")\nwhile True:\n    pass', { timeoutS: 1 });
  assert.equal(result.status, 'timeout');
  assert.equal(result.restarted, true);
  assert.equal(result.stdout, 'spinning\n');
  assert.equal(result.value, null);
});

test('every ending keeps what was printed: a cancel Python does not honour (a long C call: replaced past the grace)', async () => {
  await sup.whenSpareReady();
  sup.cancelGraceMs = 300;
  try {
    // (Output still in Python's buffer when a long C call starts is flushed by nothing: the print
    // here is followed by a sleep, which flushes, as the output of the ~50 ms before would be.)
    const { result } = await live('import sys, time\nprint("working")\nprint("warn", file=sys.stderr)\ntime.sleep(0.1)\nsum(range(10**12))', {}, cancelAt(250));
    assert.equal(result.status, 'cancelled');
    assert.equal(result.restarted, true);
    assert.equal(result.stdout, 'working\n');
    assert.equal(result.stderr, 'warn\n');
    assert.deepEqual(result.notes, [NOTE.cancelReplaced(300)]);
  } finally { sup.cancelGraceMs = 2000; }
});

test('every ending keeps what was printed: a crash (the worker dies), with the displays received', async () => {
  await sup.whenSpareReady();
  const k = sup.kernel;
  const { result } = await live('import time\ndisplay({"a": 1})\nprint("before the crash")\ntime.sleep(0.1)\nsum(range(10**12))', {},
    (type, e) => { if (type === 'output') setTimeout(() => k.worker.terminate(), 150); });
  assert.equal(result.status, 'crashed');
  assert.equal(result.stdout, 'before the crash\n');
  assert.deepEqual(result.displays, [{ 'text/plain': "{'a': 1}", 'application/json': { a: 1 } }]);
});

test('values (Jupyter\'s rule): an int, a dict, an object with _repr_html_, a statement and None', async () => {
  const value = async (code) => (await live(code)).result.value;
  assert.deepEqual(await value('6 * 7'), { 'text/plain': '42', 'application/json': 42 });
  assert.deepEqual(await value('d = {"a": [1, 2], "b": None}\nd'), { 'text/plain': "{'a': [1, 2], 'b': None}", 'application/json': { a: [1, 2], b: null } });
  const html = await value('class T:\n    def _repr_html_(self):\n        return "<table><tr><td>1</td></tr></table>"\n    def __repr__(self):\n        return "T()"\nT()');
  assert.deepEqual(html, { 'text/plain': 'T()', 'text/html': '<table><tr><td>1</td></tr></table>' });
  assert.equal(await value('y = 1'), null, 'a statement');
  assert.equal(await value('None'), null, 'None');
  assert.equal(await value('print("x")'), null, 'an expression whose value is None');
  assert.equal(await value('6 * 7;'), null, 'a trailing semicolon shows nothing');
  assert.deepEqual(await value('import asyncio\nasync def f():\n    await asyncio.sleep(0)\n    return "v"\nawait f()'), { 'text/plain': "'v'", 'application/json': 'v' });
  const png = await value('class P:\n    def _repr_png_(self):\n        return b"\\x89PNG"\nP()');
  assert.equal(png['image/png'], Buffer.from('\x89PNG', 'latin1').toString('base64'));
  const long = await value('"x" * 20000');
  assert.equal(long['text/plain'].length, 8000, 'text/plain capped');
  assert.ok(!('application/json' in long), 'JSON over the cap is left out');
  assert.deepEqual(Object.keys(await value('["é"] * 1500')), ['text/plain', 'application/json'], 'JSON text within the cap is kept');
});

test('bundles within the orchestrator\'s bounds: rich parts over 256 KiB, or past the run\'s 1 MiB, are kept as text only, with a note', async () => {
  const code = 'class Big:\n    def __init__(self, n): self.n = n\n    def _repr_html_(self): return "x" * self.n\n    def __repr__(self): return "Big(%d)" % self.n\n' +
    'display(Big(300 * 1024))\nfor i in range(4):\n    display(Big(255 * 1024))\nBig(10 * 1024)';
  const { result } = await live(code);
  assert.deepEqual(result.displays[0], { 'text/plain': 'Big(307200)' });
  assert.equal(result.displays.filter((d) => d['text/html']).length, 4, 'four of 255 KiB fit the 1 MiB');
  assert.deepEqual(result.displays[4], { 'text/plain': 'Big(261120)', 'text/html': 'x'.repeat(255 * 1024) });
  assert.deepEqual(result.value, { 'text/plain': 'Big(10240)' }, 'the run\'s 1 MiB is used up');
  assert.deepEqual(result.notes, [NOTE.textOnly('display 1', 301, false), NOTE.textOnly('the value', 11, true)]);
  assert.ok(JSON.stringify(result).length < 1.2 * 1048576);
});

test('display(): bundles in order, each sent while the run goes; at most 20 per run, the rest counted in a note', async () => {
  const code = 'import time\nfor i in range(25):\n    display(i)\n    if i == 0:\n        time.sleep(0.5)';
  const { result, events, ms } = await live(code);
  const shown = events.filter((e) => e.type === 'display');
  assert.deepEqual(shown.map((e) => e.index), [...Array(20).keys()]);
  assert.deepEqual(shown.map((e) => e.data['text/plain']), [...Array(20).keys()].map(String));
  assert.ok(ms - shown[0].at >= 400, 'the first display came before the end');
  assert.equal(result.displays.length, 20);
  assert.deepEqual(result.displays[3], { 'text/plain': '3', 'application/json': 3 });
  assert.deepEqual(result.notes, [NOTE.displaysDropped(5, 20)]);
  assert.equal(noteCode(result.notes[0]), 'displays_dropped');
});

test('input(): answered while the run waits; the prompt and the answer read like a terminal', async () => {
  const { result, events } = await live('name = input("Name? ")\nprint("hi", name)', {},
    (type, e, runId) => { if (type === 'input_request') setTimeout(() => assert.equal(sup.answer(runId, 'Ada\n'), true), 100); });
  assert.equal(result.status, 'ok', JSON.stringify(result.error));
  assert.equal(result.stdout, 'Name? Ada\nhi Ada\n');
  const req = events.find((e) => e.type === 'input_request');
  assert.equal(req.prompt, 'Name? ');
  assert.equal(events.find((e) => e.type === 'output').text, 'Name? ', 'the prompt went out before the wait');
  assert.equal(events.find((e) => e.type === 'input_end').how, 'answered');
  assert.equal(sup.answer(`live-${seq}`, 'late'), false, 'no run waits any more');
});

test('input(): the time spent waiting is not counted against the time limit', async () => {
  const code = 'import time\nt = time.time()\nwhile time.time() - t < 0.4:\n    pass\nv = input()\nt = time.time()\nwhile time.time() - t < 0.4:\n    pass\nprint(v)';
  const { result, ms } = await live(code, { timeoutS: 1 },
    (type, e, runId) => { if (type === 'input_request') setTimeout(() => sup.answer(runId, 'late answer'), 1500); });
  assert.equal(result.status, 'ok', `${result.status}: ${JSON.stringify(result.error)}`);
  assert.equal(result.stdout, 'late answer\nlate answer\n');
  assert.ok(ms >= 2000, `${Math.round(ms)} ms: longer than the limit, the wait excluded`);
});

test('input(): EOFError past the input wait, with a note; the run goes on and can catch it', async () => {
  const code = 'try:\n    input("? ")\nexcept EOFError as e:\n    print("eof:", e)\ninput()';
  const { result, events } = await live(code, { limits: { input_wait_s: 0.5 } });
  assert.equal(result.status, 'error');
  assert.equal(result.error.type, 'EOFError');
  assert.equal(result.stdout, '? eof: EOF when reading a line\n');
  assert.deepEqual(result.notes, [NOTE.inputTimedOut(0.5), NOTE.inputTimedOut(0.5)]);
  assert.deepEqual(events.filter((e) => e.type === 'input_end').map((e) => e.how), ['eof', 'eof']);
});

test('Stop during time.sleep: cancelled within a second, the namespace kept (no restart)', async () => {
  await live('kept = "yes"');
  const k = sup.kernel;
  const t0 = performance.now();
  const { result } = await live('import time\nfor i in range(100):\n    time.sleep(1)\n    print(i)', {}, cancelAt(300));
  const ms = performance.now() - t0;
  assert.equal(result.status, 'cancelled');
  assert.equal(result.restarted, false);
  assert.deepEqual(result.notes, [NOTE.cancelKept()]);
  assert.ok(ms < 1300, `${Math.round(ms)} ms`);
  assert.match(result.error.traceback, /time\.sleep\(1\)/);
  assert.doesNotMatch(result.error.traceback, /cerea_kernel|core\.js/, 'the kernel\'s own frames are cut');
  assert.equal(sup.kernel, k);
  assert.equal((await live('print(kept)')).result.stdout, 'yes\n');
});

test('Stop during asyncio.sleep (also inside gather): cancelled within a second, namespace kept', async () => {
  const t0 = performance.now();
  const { result } = await live('import asyncio\nprint("start")\nawait asyncio.gather(asyncio.sleep(30), asyncio.sleep(30))', {}, cancelAt(300));
  assert.equal(result.status, 'cancelled', JSON.stringify(result.error));
  assert.equal(result.error.type, 'KeyboardInterrupt');
  assert.equal(result.restarted, false);
  assert.ok(performance.now() - t0 < 1300);
  assert.equal((await live('print(kept)')).result.stdout, 'yes\n');
  assert.equal((await live('import asyncio\nawait asyncio.sleep(0.01)\nprint("loop fine")')).result.stdout, 'loop fine\n');
});

test('Stop during an awaited JS promise that never settles: cancelled at once, namespace kept', async () => {
  const { result } = await live('import js\nawait js.Promise.new(lambda resolve, reject: None)', {}, cancelAt(200));
  assert.equal(result.status, 'cancelled', JSON.stringify(result.error));
  assert.equal(result.restarted, false);
  assert.equal((await live('print(kept)')).result.stdout, 'yes\n');
});

test('Stop during input(): cancelled at once, namespace kept', async () => {
  const { result } = await live('input("wait: ")', {}, (type, e) => { if (type === 'input_request') setTimeout(() => sup.cancel(), 100); });
  assert.equal(result.status, 'cancelled');
  assert.equal(result.restarted, false);
  assert.equal((await live('print(kept)')).result.stdout, 'yes\n');
});

test('time.sleep keeps its own rules (TypeError, ValueError) and sleeps as long as asked', async () => {
  const { result } = await live('import time\nerrs = []\nfor bad in ("1", -1, float("nan")):\n    try:\n        time.sleep(bad)\n    except (TypeError, ValueError) as e:\n        errs.append(type(e).__name__)\nt = time.perf_counter()\ntime.sleep(0.2)\nprint(errs, round(time.perf_counter() - t, 1))');
  assert.equal(result.stdout, "['TypeError', 'ValueError', 'ValueError'] 0.2\n");
});

test('without shared memory (a page that is not cross-origin isolated): input() raises EOFError at once, with a note', async () => {
  const k = newNodeKernel({ interrupts: false });
  try {
    await k.ready;
    const r = await k.run({ run_id: 'no-sab', code: 'import time\ntime.sleep(0.05)\ninput("? ")' });
    assert.equal(r.status, 'error');
    assert.equal(r.error.type, 'EOFError');
    assert.equal(r.stdout, '? ');
    assert.deepEqual(r.notes, [NOTE.inputUnavailable()]);
    assert.equal(noteCode(r.notes[0]), 'input_unavailable');
  } finally { k.terminate('cancelled'); }
});

test('without shared memory: Stop during time.sleep replaces the kernel at once (no interrupt grace to wait out), and says why', async () => {
  const bare = newNodeSupervisor({ interrupts: false }, { cancelGraceMs: 5000 });
  try {
    await bare.start();
    assert.equal(bare.kernel.canInterrupt, false);
    await bare.run({ runId: 'ns', code: 'kept = "yes"' });
    await bare.whenSpareReady();
    let asked = 0;
    bare.once('executing', () => setTimeout(() => { asked = performance.now(); bare.cancel(); }, 300));
    const r = await bare.run({ runId: 'nosab-stop', code: 'import time\nprint("sleeping")\nwhile True:\n    time.sleep(1)' });
    const ms = performance.now() - asked;
    assert.equal(r.status, 'cancelled');
    assert.equal(r.restarted, true);
    assert.ok(ms < 2000, `replaced ${Math.round(ms)} ms after the Stop (the grace is 5 s)`);
    assert.deepEqual(r.notes.map(noteCode), ['cancel_no_interrupt']);
    assert.equal((await bare.run({ runId: 'after', code: 'print(globals().get("kept"))' })).stdout, 'None\n');
  } finally { bare.dispose(); bare.pool.dispose(); }
});

// A kernel without the shared control buffer: no flush signal reaches Python while it runs.
async function liveOn(k, code) {
  const runId = `nosab-${++seq}`;
  const t0 = performance.now();
  const outputs = [];
  const off = k.onEvent((e) => { if (e.event === 'output' && e.ref === runId) outputs.push({ at: performance.now() - t0, ...e }); });
  try {
    const result = await k.run({ run_id: runId, code });
    return { result, outputs, ms: performance.now() - t0 };
  } finally { off(); }
}

test('without shared memory, output still streams: before a sleep, after an explicit flush, and from the write path by time', async () => {
  const k = newNodeKernel({ interrupts: false });
  try {
    await k.ready;
    // issue 28: `early`, then a 3 s sleep
    let r = await liveOn(k, 'import time\nprint("early")\ntime.sleep(3)\nprint("late")');
    assert.equal(r.result.stdout, 'early\nlate\n');
    assert.equal(joined(r.outputs.filter((e) => e.at <= r.ms - 2000), 'stdout'), 'early\n', `chunks at ${r.outputs.map((e) => Math.round(e.at))} ms, end ${Math.round(r.ms)} ms`);
    assert.equal(joined(r.outputs, 'stdout'), r.result.stdout);
    // a flush, then a long computation that writes nothing
    r = await liveOn(k, 'import time\nprint("flushed", flush=True)\nt = time.time()\nwhile time.time() - t < 2:\n    pass');
    assert.equal(joined(r.outputs.filter((e) => e.at <= r.ms - 1500), 'stdout'), 'flushed\n', `chunks at ${r.outputs.map((e) => Math.round(e.at))} ms, end ${Math.round(r.ms)} ms`);
    // a computation that prints a line every ~0.4 s: the lines come while it runs, batched by time
    r = await liveOn(k, 'import time\nt = time.time()\nn = 0\nwhile time.time() - t < 2.4:\n    if time.time() - t > 0.4 * n:\n        print("tick", n)\n        n += 1');
    assert.equal(joined(r.outputs, 'stdout'), r.result.stdout);
    const early = r.outputs.filter((e) => e.at < r.ms - 1000);
    assert.ok(early.length >= 2, `chunks at ${r.outputs.map((e) => Math.round(e.at))} ms, end ${Math.round(r.ms)} ms`);
    assert.ok(r.outputs.length <= 12, `${r.outputs.length} chunks: batched, not one per print`);
  } finally { k.terminate('cancelled'); }
});
