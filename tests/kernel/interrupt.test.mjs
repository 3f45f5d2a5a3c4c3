// interrupt.test.mjs -- stopping Python (DESIGN "The kernel's life: Stop"): interrupts through
// the SharedArrayBuffer read with an atomic exchange (0 lost in 300), cancel keeps the namespace
// when Python stops within the grace and replaces the kernel when it does not (time.sleep is not
// interruptible), terminate during `while True: pass`, and the pool's restart onto a pre-loaded
// spare with every mounted file back ("After a restart the files are back").
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { newNodePool, text } from './helpers.mjs';

let pool;
before(async () => { pool = newNodePool(); await pool.active(); });
after(() => pool && pool.dispose());

function startedOnce(k) {
  return new Promise((resolve) => { const off = k.onEvent((e) => { if (e.event === 'started') { off(); resolve(e); } }); });
}

test('interrupts: 0 lost in 300 (KeyboardInterrupt each time, status cancelled, namespace kept)', async () => {
  const k = await pool.active();
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
  const k = await pool.active();
  assert.equal(k.interrupt(), false);
  const r = await k.run({ run_id: 'quiet', code: 'for i in range(200000): pass\nprint("done")' });
  assert.equal(r.status, 'ok');
  assert.equal(r.stdout, 'done\n');
});

test('cancel: interrupt first and keep the namespace when Python stops within the grace', async () => {
  const k = await pool.active();
  const started = startedOnce(k);
  const p = k.run({ run_id: 'c1', code: 'while True:\n    pass' });
  await started;
  assert.equal(await k.cancel({ graceMs: 2000 }), 'interrupted');
  assert.equal((await p).status, 'cancelled');
  assert.equal((await k.run({ run_id: 'c2', code: 'print(kept)' })).stdout, 'yes\n');
});

test('cancel: time.sleep() is not interruptible — after the grace the kernel is terminated (status cancelled)', async () => {
  const k = await pool.active();
  const started = startedOnce(k);
  const p = k.run({ run_id: 'c3', code: 'import time\ntime.sleep(30)' });
  await started;
  const t0 = performance.now();
  assert.equal(await k.cancel({ graceMs: 300 }), 'terminated');
  const r = await p;
  assert.equal(r.status, 'cancelled');
  assert.ok(performance.now() - t0 < 2000);
  assert.equal(k.state, 'dead');
});

test('"A longer run is stopped and the sandbox restarts": terminate during while True, spare swapped in, files remounted, namespace gone', async () => {
  // The previous test killed the active kernel: replace() brings the spare in.
  let { client: k } = await pool.replace('cancelled');
  await pool.mount([{ name: 'data.csv', version: 1, size: 3, sha256: 'h1', data: text('1,2') },
    { name: 'notes.txt', version: 2, size: 2, sha256: 'h2', data: text('hi') }]);
  await pool.spare.ready;   // a spare is pre-loaded beside the active kernel
  await k.run({ run_id: 'v', code: 'lost = 1' });
  const started = startedOnce(k);
  const p = k.run({ run_id: 'loop', code: 'while True:\n    pass' });
  await started;
  const t0 = performance.now();
  const { client: k2, remounted } = await pool.replace('timeout');
  const r = await p;
  assert.equal(r.status, 'timeout');
  assert.equal(k.state, 'dead');
  assert.notEqual(k2, k);
  assert.deepEqual(remounted.sort(), ['data.csv', 'notes.txt']);
  const r2 = await k2.run({ run_id: 'next', code: 'import os\nprint(sorted(os.listdir("/mnt/data")), "lost" in globals())' });
  const ms = performance.now() - t0;
  assert.equal(r2.stdout, "['data.csv', 'notes.txt'] False\n");
  assert.ok(ms < 5000, `restart took ${ms} ms`);
});

test('a worker that dies by itself resolves its run as crashed', async () => {
  const k = await pool.active();
  const started = startedOnce(k);
  const p = k.run({ run_id: 'die', code: 'import time\ntime.sleep(5)' });
  await started;
  k.worker.terminate();   // not through k.terminate: the client learns of it from the exit event
  const r = await p;
  assert.equal(r.status, 'crashed');
  assert.equal(r.error.type, 'KernelCrashed');
});

test('user code calling the host hooks cannot re-send "started" (the time limit starts once per run)', async () => {
  const k = await pool.active();
  const starts = [];
  const off = k.onEvent((e) => { if (e.event === 'started') starts.push(e.ref); });
  const r = await k.run({ run_id: 'hooks', code: 'import cerea_host\nfor _ in range(5):\n    cerea_host.arm()\ncerea_host.disarm()\nprint("ok")' });
  off();
  assert.equal(r.stdout, 'ok\n');
  assert.deepEqual(starts, ['hooks']);
});
