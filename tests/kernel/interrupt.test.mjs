// interrupt.test.mjs -- stopping Python (DESIGN "The kernel's life: Stop") through the one kernel
// supervisor (worker/supervisor.js) over real kernels: interrupts through the SharedArrayBuffer
// read with an atomic exchange (0 lost in 300), the cancel ladder (the namespace kept when Python
// stops within the grace, the kernel replaced when it does not: a long C call such as
// sum(range(10**10)) reads no signal; time.sleep does, see live.test.mjs),
// the time limit during `while True: pass` (terminate, the pre-loaded spare swapped in, every
// mounted file back: "After a restart the files are back"), a kernel dying during a run (crashed)
// and between runs (the next run says so), and reset() for a chat switch.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { newNodeSupervisor, text } from './helpers.mjs';
import { NOTE } from '../../worker/notes.js';

let sup;
before(async () => { sup = newNodeSupervisor({}, { cancelGraceMs: 2000 }); await sup.start(); });
after(() => { if (sup) { sup.dispose(); sup.pool.dispose(); } });

function startedOnce(k) {
  return new Promise((resolve) => { const off = k.onEvent((e) => { if (e.event === 'started') { off(); resolve(e); } }); });
}
// Cancel (the ladder) once Python runs the user's code.
function cancelWhenStarted(s, opts) {
  s.once('executing', () => setTimeout(() => s.cancel(opts), 50));
}

test('interrupts: 0 lost in 300 (KeyboardInterrupt each time, status cancelled, namespace kept)', async () => {
  const k = sup.kernel;
  await k.run({ run_id: 'setup', code: 'kept = "yes"' });
  let lost = 0, cancelled = 0;
  const code = 'import time\nt0 = time.time()\nwhile time.time() - t0 < 3:\n    pass';
  for (let i = 0; i < 300; i++) {
    const started = startedOnce(k);
    const p = k.run({ run_id: `i${i}`, code });
    await started;
    if (i % 3) await new Promise((r) => setTimeout(r, i % 4));   // inside the loop, not only at its start
    assert.equal(k.interrupt(), true);
    const r = await p;
    if (r.status === 'cancelled' && r.error.type === 'KeyboardInterrupt') cancelled++; else lost++;
  }
  assert.equal(lost, 0);
  assert.equal(cancelled, 300);
  const r = await k.run({ run_id: 'after', code: 'print(kept)' });
  assert.equal(r.stdout, 'yes\n');
});

test('interrupt outside a run writes nothing (no stale signal for the next run)', async () => {
  const k = sup.kernel;
  assert.equal(k.interrupt(), false);
  const r = await k.run({ run_id: 'quiet', code: 'for i in range(200000): pass\nprint("done")' });
  assert.equal(r.status, 'ok');
  assert.equal(r.stdout, 'done\n');
});

test('cancel: interrupt first and keep the namespace when Python stops within the grace', async () => {
  const k = sup.kernel;
  cancelWhenStarted(sup);
  const r = await sup.run({ runId: 'c1', code: 'while True:\n    pass' });
  assert.equal(r.status, 'cancelled');
  assert.equal(r.restarted, false);
  assert.deepEqual(r.notes, [NOTE.cancelKept()]);
  assert.equal(sup.kernel, k, 'the same kernel');
  assert.equal((await sup.run({ runId: 'c2', code: 'print(kept)' })).stdout, 'yes\n');
});

test('cancel: a long C call reads no interrupt — past the grace the kernel is replaced (status cancelled, restarted)', async () => {
  await sup.whenSpareReady();
  const k = sup.kernel;
  sup.cancelGraceMs = 300;
  try {
    const t0 = performance.now();
    cancelWhenStarted(sup);
    const r = await sup.run({ runId: 'c3', code: 'sum(range(10**12))' });
    assert.equal(r.status, 'cancelled');
    assert.equal(r.restarted, true);
    assert.deepEqual(r.notes, [NOTE.cancelReplaced(300)]);
    assert.ok(performance.now() - t0 < 3000, `took ${performance.now() - t0} ms`);
    assert.equal(k.state, 'dead');
    assert.notEqual(sup.kernel, k);
    assert.equal(sup.state, 'ready');
  } finally { sup.cancelGraceMs = 2000; }
});

test('"A longer run is stopped and the sandbox restarts": the time limit (from `started`) replaces the kernel by the spare, files remounted, namespace gone', async () => {
  await sup.mount([{ name: 'data.csv', version: 1, size: 3, sha256: 'h1', data: text('1,2') },
    { name: 'notes.txt', version: 2, size: 2, sha256: 'h2', data: text('hi') }]);
  assert.equal(await sup.whenSpareReady(), true, 'a spare is pre-loaded beside the active kernel');
  await sup.run({ runId: 'v', code: 'lost = 1' });
  const k = sup.kernel;
  const loads = sup.loads;
  const r = await sup.run({ runId: 'loop', code: 'while True:\n    pass', timeoutS: 1 });
  assert.equal(r.status, 'timeout');
  assert.deepEqual(r.error, { type: 'TimeoutError', message: 'The run did not finish within its time limit of 1 s.', traceback: '' });
  assert.equal(r.restarted, true);
  assert.deepEqual(r.remounted.slice().sort(), ['data.csv', 'notes.txt']);
  assert.deepEqual(r.notes, [], 'the restart is told by restarted + remounted, not by a note');
  assert.ok(r.duration_ms >= 1000 && r.duration_ms < 3000, `counted from started: ${r.duration_ms} ms`);
  assert.ok(r.restart_ms < 2000, `restart onto the spare took ${r.restart_ms} ms`);
  assert.equal(k.state, 'dead');
  assert.equal(sup.loads, loads, 'the spare was taken: no load on the restart path');
  const r2 = await sup.run({ runId: 'next', code: 'import os\nprint(sorted(os.listdir("/mnt/data")), "lost" in globals())' });
  assert.equal(r2.stdout, "['data.csv', 'notes.txt'] False\n");
  assert.equal(r2.restarted, false, 'said once, by the run that hit the limit');
});

test('a worker that dies by itself during a run: crashed, replaced, files remounted', async () => {
  await sup.whenSpareReady();
  const k = sup.kernel;
  sup.once('executing', () => setTimeout(() => k.worker.terminate(), 50));   // not through k.terminate
  const r = await sup.run({ runId: 'die', code: 'import time\ntime.sleep(5)' });
  assert.equal(r.stdout, '');
  assert.equal(r.status, 'crashed');
  assert.equal(r.error.type, 'KernelCrashed');
  assert.match(r.error.message, /^The sandbox stopped \(worker exited/);
  assert.equal(r.restarted, true);
  assert.deepEqual(r.remounted.slice().sort(), ['data.csv', 'notes.txt']);
});

test('a kernel that dies between runs: the next run gets a fresh one and says why, with the remounted files', async () => {
  await sup.whenSpareReady();
  await sup.run({ runId: 'set', code: 'gone = 1' });
  const k = sup.kernel;
  const idle = new Promise((r) => sup.once('state', r));
  k.worker.terminate();
  assert.equal((await idle).state, 'idle');
  const r = await sup.run({ runId: 'after-death', code: 'import os\nprint("gone" in globals(), sorted(os.listdir("/mnt/data")))' });
  assert.equal(r.status, 'ok');
  assert.equal(r.stdout, "False ['data.csv', 'notes.txt']\n");
  assert.equal(r.restarted, true);
  assert.deepEqual(r.remounted.slice().sort(), ['data.csv', 'notes.txt']);
  assert.equal(r.notes.length, 1);
  assert.match(r.notes[0], /^Before this run, the kernel stopped by itself \(worker exited/);
});

test('reset (a chat switch): a fresh interpreter with only the files kept', async () => {
  await sup.whenSpareReady();
  await sup.run({ runId: 'old-chat', code: 'old = 1' });
  await sup.reset(['notes.txt']);
  const r = await sup.run({ runId: 'new-chat', code: 'import os\nprint("old" in globals(), sorted(os.listdir("/mnt/data")))' });
  assert.equal(r.stdout, "False ['notes.txt']\n");
  assert.equal(r.restarted, false, 'a chat switch is no restart of this chat');
});

test('user code calling the host hooks cannot re-send "started" (the time limit starts once per run)', async () => {
  const k = sup.kernel;
  const starts = [];
  const off = k.onEvent((e) => { if (e.event === 'started') starts.push(e.ref); });
  const r = await k.run({ run_id: 'hooks', code: 'import cerea_host\nfor _ in range(5):\n    cerea_host.arm()\ncerea_host.disarm()\nprint("ok")' });
  off();
  assert.equal(r.stdout, 'ok\n');
  assert.deepEqual(starts, ['hooks']);
});
