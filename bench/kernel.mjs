// bench/kernel.mjs -- figures of the Pyodide kernel in Node worker_threads (real runtime from
// build/www/pyodide), for docs/benchmarks.md:
//   1. cold start: new KernelClient → ready (Pyodide + kernel package + lock-down)
//   2. empty-run round trip: run({code: 'pass'}) on a warm kernel (full path: prepare, arm,
//      execute, flush, /mnt/output diff), median and p95
//   3. 1e5 prints through the capped capture vs Python printing into a StringIO, same run
//      (target ≤ 1.1×)
//   4. restart with a remount of 100 MB (5 × 20 MB): the supervisor's replace() onto the
//      pre-loaded spare, measured from terminate to every file mounted (target ≤ 200 ms)
//   5. restart onto a pre-loaded spare: terminate → the next run executing (its 'started' event)
//      and → its result (target ≤ 20 ms)
//   6. live output: from `print` in the kernel to the supervisor's `output` event, p50/p99, for a
//      print followed by a sleep (the sleep hands it on) and for a print inside a CPU loop (the
//      controller's flush signal, every 50 ms, hands it on)
// (3 runs with live output on: the controller posts its flush signal every 50 ms meanwhile.)
// usage: node bench/kernel.mjs [--json]      (takes ~1 minute; CPU-bound, noisy on shared machines)
// It tests nothing: tests/kernel/ does.
import { newNodeKernel, newNodeSupervisor } from '../worker/node-kernel.js';

const json = process.argv.includes('--json');
const out = {};
const median = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };
const pct = (a, p) => { const s = [...a].sort((x, y) => x - y); return s[Math.min(s.length - 1, Math.floor(s.length * p))]; };
const r2 = (x) => Math.round(x * 100) / 100;
const log = (...a) => { if (!json) console.log(...a); };

// 1. cold start
const cold = [];
for (let i = 0; i < 2; i++) {
  const t0 = performance.now();
  const k = newNodeKernel();
  await k.ready;
  cold.push(performance.now() - t0);
  k.terminate('cancelled');
}
out.cold_start_ms = cold.map(Math.round);
log(`cold start: ${out.cold_start_ms.join(', ')} ms`);

// 2. empty-run round trip
const k = newNodeKernel();
await k.ready;
for (let i = 0; i < 20; i++) await k.run({ code: 'pass' });
const rt = [];
for (let i = 0; i < 300; i++) { const t0 = performance.now(); await k.run({ code: 'pass' }); rt.push(performance.now() - t0); }
out.empty_run_ms = { median: r2(median(rt)), p95: r2(pct(rt, 0.95)) };
log(`empty run round trip: median ${out.empty_run_ms.median} ms, p95 ${out.empty_run_ms.p95} ms`);

// 3. 1e5 prints: capped capture vs StringIO
const printCode = `import io, sys, time
def capture():
    t0 = time.perf_counter()
    for i in range(100000):
        print("line", i)
    sys.stdout.flush()
    return time.perf_counter() - t0
def stringio():
    s = io.StringIO()
    t0 = time.perf_counter()
    for i in range(100000):
        print("line", i, file=s)
    return time.perf_counter() - t0
a, b = [], []
for _ in range(5):
    a.append(capture()); b.append(stringio())
a.sort(); b.sort()
sys.stderr.write("%f %f\\n" % (a[2], b[2]))`;
const pr = await k.run({ code: printCode });
const [cap, sio] = pr.stderr.trim().split(' ').map(Number);
out.prints_1e5 = { capture_ms: r2(cap * 1000), stringio_ms: r2(sio * 1000), ratio: r2(cap / sio), stdout_truncated: pr.stdout_truncated, run_total_ms: Math.round(pr.timing.total_ms) };
log(`1e5 prints: capture ${out.prints_1e5.capture_ms} ms vs StringIO ${out.prints_1e5.stringio_ms} ms (×${out.prints_1e5.ratio}; median of 5)`);
k.terminate('cancelled');

// 4 + 5. supervisor (one kernel and a spare, the page's pool): remount 100 MB onto a fresh kernel;
// restart onto a pre-loaded spare
const sup = newNodeSupervisor();
await sup.start();
const files = [];
for (let i = 0; i < 5; i++) {
  const data = new Uint8Array(20 * 1048576); data.fill(i + 1);
  files.push({ name: `part-${i}.bin`, version: 1, size: data.length, sha256: `h${i}`, data });
}
let t0;
const restarts = [], remounts = [], firstResult = [];
for (let i = 0; i < 3; i++) {
  await sup.whenSpareReady();
  const cur = sup.kernel;
  const spare = sup.pool.spare;
  const started = new Promise((res) => spare.onEvent((e) => { if (e.event === 'started' && e.ref === `after-${i}`) res(performance.now()); }));
  t0 = performance.now();                 // 5: restart alone (no files)
  await sup.replace('timeout');
  const p = sup.run({ runId: `after-${i}`, code: 'pass' });
  const ts = await started;
  await p;
  restarts.push(ts - t0); firstResult.push(performance.now() - t0);
  assertDead(cur);
}
// 4: remount 100 MB after a restart: replace() onto the pre-loaded spare with the files the
// supervisor holds (bytes kept in shared memory), measured to the end of the remount.
t0 = performance.now();
await sup.mount(files);
out.mount_100mb_first_ms = Math.round(performance.now() - t0);
for (let i = 0; i < 3; i++) {
  await sup.whenSpareReady();
  const t1 = performance.now();
  const { remounted } = await sup.replace('timeout');
  remounts.push(performance.now() - t1);
  if (remounted.length !== 5) throw new Error('remount incomplete');
}
out.restart_to_started_ms = restarts.map(r2);
out.restart_to_result_ms = firstResult.map(r2);
out.remount_100mb_ms = remounts.map(Math.round);
log(`restart onto spare: terminate → next run started ${out.restart_to_started_ms.join(', ')} ms; → result ${out.restart_to_result_ms.join(', ')} ms`);
log(`restart + remount 100 MB (5 × 20 MB): ${out.remount_100mb_ms.join(', ')} ms (first mount, with the copy into shared memory: ${out.mount_100mb_first_ms} ms)`);
// 6. print → output event at the supervisor.  Python's time.time() and the JS Date.now() read one clock.
const lat = async (code) => {
  const got = [];
  const off = sup.on('output', (e) => {
    const now = Date.now();
    for (const line of e.text.split('\n')) if (/^t=/.test(line)) got.push(now - Number(line.slice(2)) * 1000);
  });
  try { await sup.run({ runId: `lat-${got.length}`, code }); } finally { off(); }
  return { n: got.length, p50: r2(pct(got, 0.5)), p99: r2(pct(got, 0.99)) };
};
out.print_to_event_ms = {
  sleeping: await lat('import time\nfor i in range(100):\n    print("t=%r" % time.time())\n    time.sleep(0.03)'),
  cpu_loop: await lat('import time\nfor i in range(100):\n    print("t=%r" % time.time())\n    t = time.time()\n    while time.time() - t < 0.03:\n        pass'),
};
log(`print → output event at the supervisor: after a sleep p50 ${out.print_to_event_ms.sleeping.p50} ms, p99 ${out.print_to_event_ms.sleeping.p99} ms; in a CPU loop p50 ${out.print_to_event_ms.cpu_loop.p50} ms, p99 ${out.print_to_event_ms.cpu_loop.p99} ms (n=${out.print_to_event_ms.cpu_loop.n})`);
sup.dispose();
sup.pool.dispose();
if (json) console.log(JSON.stringify(out, null, 1));

function assertDead(c) { if (c.state !== 'dead') throw new Error('replaced kernel still alive'); }
