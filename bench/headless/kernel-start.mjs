// bench/headless/kernel-start.mjs -- a headless kernel's start, spawn → ready, as the headless host
// makes its kernels (worker/host/sandbox-worker.js with the host's resourceLimits, through
// node-kernel.js): restored from the served memory snapshot against loaded from scratch,
// alternated in one run so that the machine's load hits both alike.  "ready" is the kernel's init
// reply (Pyodide, the kernel package, the lock-down); "warm" adds the pool's warm-up run (what a
// spare has done before the pool lends it).  The first restore of the process also reads and
// hashes the image and compiles the wasm once (printed apart: a host pays it once).
//
//   node bench/headless/kernel-start.mjs [N=10]
import { loadavg } from 'node:os';
import { newNodeKernel, servedRuntime } from '../../worker/node-kernel.js';

const N = Number(process.argv[2] || 10);
const median = (a) => { const s = a.slice().sort((x, y) => x - y); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };
const resourceLimits = { maxOldGenerationSizeMb: 256, maxYoungGenerationSizeMb: 32 };

async function once(restore) {
  const t0 = performance.now();
  const k = newNodeKernel({ entry: 'sandbox', restore, loadTimeoutMs: 120000, workerOptions: { resourceLimits } });
  const info = await k.ready;
  const ready = performance.now() - t0;
  await k.run({ run_id: 'warm-up', code: 'pass' });
  const warm = performance.now() - t0;
  k.terminate('cancelled');
  if (info.snapshot !== (restore ? 'served' : 'none')) throw new Error(`expected ${restore ? 'a restore' : 'a load'}, got ${info.snapshot}`);
  return { ready, warm };
}

const load0 = loadavg();
let t = performance.now();
const shared = await servedRuntime();
const sharedMs = performance.now() - t;
if (!shared.image || shared.image.refused) throw new Error(`no served image to restore: ${JSON.stringify(shared.image)} (run scripts/setup.sh)`);
const res = { restored: { ready: [], warm: [] }, loaded: { ready: [], warm: [] } };
for (let i = 0; i < N; i++) {
  for (const restore of i % 2 ? [false, true] : [true, false]) {
    const r = await once(restore);
    const v = res[restore ? 'restored' : 'loaded'];
    v.ready.push(r.ready); v.warm.push(r.warm);
  }
}
const f = (ms) => `${(ms / 1000).toFixed(3)} s`;
const out = {
  n: N, once_per_host_ms: Math.round(sharedMs),
  restored: { ready_median_s: +(median(res.restored.ready) / 1000).toFixed(3), warm_median_s: +(median(res.restored.warm) / 1000).toFixed(3) },
  loaded: { ready_median_s: +(median(res.loaded.ready) / 1000).toFixed(3), warm_median_s: +(median(res.loaded.warm) / 1000).toFixed(3) },
  loadavg: { before: load0.map((x) => +x.toFixed(2)), after: loadavg().map((x) => +x.toFixed(2)) },
};
console.log(`headless kernel start, ${N} each, alternated (sandbox worker); load average before ${out.loadavg.before.join(' ')}, after ${out.loadavg.after.join(' ')}`);
console.log(`  once per host: read + hash the image, compile the wasm: ${sharedMs.toFixed(0)} ms`);
console.log(`  restored: spawn → ready ${f(median(res.restored.ready))} median (→ warm ${f(median(res.restored.warm))})`);
console.log(`  loaded:   spawn → ready ${f(median(res.loaded.ready))} median (→ warm ${f(median(res.loaded.warm))})`);
console.log(JSON.stringify(out));
