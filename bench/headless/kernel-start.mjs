// bench/headless/kernel-start.mjs -- a headless kernel's start, spawn → ready, as the headless host
// makes its kernels (worker/host/sandbox-worker.js with the host's resourceLimits, through
// node-kernel.js): restored from the served memory snapshot against loaded from scratch,
// alternated in one run so that the machine's load hits both alike.  "ready" is the kernel's init
// reply (Pyodide, the kernel package, the lock-down); "warm" adds the pool's warm-up run (what a
// spare has done before the pool lends it).  The first restore of the process also reads and
// hashes the image and compiles the wasm once (printed apart: a host pays it once).
// Each kernel traces its start (sandbox-worker.js start_trace): the median time of each step, and
// the CPU time it took (the kernel's thread, /proc/thread-self/schedstat) — a figure the machine's
// load changes little — and the process's CPU time per start (process.cpuUsage: every thread).
//
//
//   node bench/headless/kernel-start.mjs [N=10] [--restored-only]
import { loadavg } from 'node:os';
import { newNodeKernel, servedRuntime } from '../../worker/node-kernel.js';

const args = process.argv.slice(2);
const N = Number(args.find((a) => /^\d+$/.test(a)) || 10);
const MODES = args.includes('--restored-only') ? ['restored'] : ['restored', 'loaded'];
const median = (a) => { const s = a.slice().sort((x, y) => x - y); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };
const resourceLimits = { maxOldGenerationSizeMb: 256, maxYoungGenerationSizeMb: 32 };

// The steps of a start, in order, as sandbox-worker.js marks them (each from the one before).
const STEPS = [
  ['entry', 'the worker thread starts, its modules load (sandbox-worker.js, core.js)'],
  ['runtime', 'init arrives (the image copied and sent)'],
  ['imported', "pyodide.mjs imported"],
  ['instantiate', 'Pyodide JS: pyodide.asm.mjs loaded, settings'],
  ['instantiated', 'wasm instantiated'],
  ['loaded', 'heap restored, runtime up (loadPyodide returns)'],
  ['kernel', 'checks (1 + 1, random), the lock read'],
  ['lockdown', 'kernel modules written and imported'],
  ['reply', 'lock-down (JS scope), runner.init'],
  ['hide_js_api', 'Node lock-down: hide_js_api (kernel/lockdown.py)'],
  ['module_loading', 'Node lock-down: module loading closed (register(): its hooks thread)'],
  ['node_lockdown', 'Node lock-down: memory guards, Node globals'],
  ['ready', 'the reply reaches the host'],
  ['warm', 'the warm-up run'],
];
const now = () => performance.timeOrigin + performance.now();
async function once(mode) {
  const restore = mode !== 'loaded';
  const workerData = { trace: true };
  const cpu0 = process.cpuUsage();
  const t0 = now();
  const k = newNodeKernel({ entry: 'sandbox', restore, loadTimeoutMs: 120000, workerOptions: { resourceLimits, workerData } });
  const info = await k.ready;
  const tReady = now();
  await k.run({ run_id: 'warm-up', code: 'pass' });
  const tWarm = now();
  const cpu = process.cpuUsage(cpu0);
  k.terminate('cancelled');
  if (info.snapshot !== (restore ? 'served' : 'none')) throw new Error(`expected ${restore ? 'a restore' : 'a load'}, got ${info.snapshot}`);
  const tr = { ...(info.start_trace || {}), spawn: t0, ready: tReady, warm: tWarm };
  const steps = {}, cpus = {};
  let prev = 'spawn';
  for (const [name] of STEPS) {
    if (tr[name] === undefined) continue;
    steps[name] = tr[name] - tr[prev];
    if (tr[`${name}_cpu`] !== undefined && tr[`${prev}_cpu`] !== undefined) cpus[name] = tr[`${name}_cpu`] - tr[`${prev}_cpu`];
    prev = name;
  }
  cpus.entry = tr.entry_cpu;   // the thread's CPU from its start
  return { ready: tReady - t0, warm: tWarm - t0, steps, cpus, threadCpu: tr.node_lockdown_cpu, processCpu: (cpu.user + cpu.system) / 1000 };
}

const load0 = loadavg();
let t = performance.now();
const shared = await servedRuntime();
const sharedMs = performance.now() - t;
if (!shared.image || shared.image.refused) throw new Error(`no served image to restore: ${JSON.stringify(shared.image)} (run scripts/setup.sh)`);
const blank = () => ({ ready: [], warm: [], threadCpu: [], processCpu: [], steps: {}, cpus: {} });
const res = Object.fromEntries(MODES.map((m) => [m, blank()]));
for (let i = 0; i < N; i++) {
  for (const mode of i % 2 ? MODES.slice().reverse() : MODES) {
    const r = await once(mode);
    const v = res[mode];
    v.ready.push(r.ready); v.warm.push(r.warm); v.threadCpu.push(r.threadCpu); v.processCpu.push(r.processCpu);
    for (const [k, x] of Object.entries(r.steps)) (v.steps[k] ||= []).push(x);
    for (const [k, x] of Object.entries(r.cpus)) (v.cpus[k] ||= []).push(x);
  }
}
const f = (ms) => `${(ms / 1000).toFixed(3)} s`;
const ms = (a) => (a && a.length ? Math.round(median(a)) : null);
const summary = (v) => ({
  ready_median_s: +(median(v.ready) / 1000).toFixed(3), warm_median_s: +(median(v.warm) / 1000).toFixed(3),
  kernel_thread_cpu_ms: ms(v.threadCpu), process_cpu_ms_per_start: ms(v.processCpu),
  steps_ms: Object.fromEntries(Object.entries(v.steps).map(([k, a]) => [k, ms(a)])),
  steps_cpu_ms: Object.fromEntries(Object.entries(v.cpus).map(([k, a]) => [k, ms(a)])),
});
const out = {
  n: N, once_per_host_ms: Math.round(sharedMs),
  ...Object.fromEntries(MODES.map((m) => [m, summary(res[m])])),
  loadavg: { before: load0.map((x) => +x.toFixed(2)), after: loadavg().map((x) => +x.toFixed(2)) },
};
console.log(`headless kernel start, ${N} each, alternated (sandbox worker); load average before ${out.loadavg.before.join(' ')}, after ${out.loadavg.after.join(' ')}`);
console.log(`  once per host: read + hash the image, compile the wasm: ${sharedMs.toFixed(0)} ms`);
for (const m of MODES) console.log(`  ${m}: spawn → ready ${f(median(res[m].ready))} median (→ warm ${f(median(res[m].warm))})`);
for (const which of MODES) {
  const s = out[which];
  console.log(`  ${which}: CPU per start ${s.process_cpu_ms_per_start} ms (the process), ${s.kernel_thread_cpu_ms} ms (the kernel's thread); median of each step, wall (CPU of the kernel's thread):`);
  for (const [name, what] of STEPS) if (s.steps_ms[name] !== undefined)
    console.log(`    ${String(s.steps_ms[name]).padStart(5)} ms (${s.steps_cpu_ms[name] === undefined ? '   -' : String(s.steps_cpu_ms[name]).padStart(4)})  ${what}`);
}
console.log(JSON.stringify(out));
