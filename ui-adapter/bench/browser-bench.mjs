// browser-bench.mjs -- browser-side figures for docs/benchmarks.md, in Debian's Chromium
// (playwright-core, headless) against the real orchestrator (or the static test server when the
// binary is missing):
//   1. time-limit hit → the next run executing on the spare kernel (files remounted): from the
//      moment the supervisor's timer fires to the next run's Python start ('executing'), N times;
//   2. runtime first load (page load → kernel ready) with a cold HTTP cache (fresh profile) and a
//      warm one (same profile, page reloaded: /pyodide/ is served immutable);
//   3. live output: from `print` in the kernel (a module Web Worker) to the page's supervisor
//      `output` event, p50/p99, for prints followed by a sleep and prints inside a CPU loop (the
//      flush signal, every 50 ms, hands those on).
// Usage: node ui-adapter/bench/browser-bench.mjs [N=10]   (CEREA_BIN overrides the binary)
import { launch, orchestrator, staticServer } from '../../tests/e2e/harness.mjs';

const N = Number(process.argv[2] || 10);
const stats = (a) => { const s = [...a].sort((x, y) => x - y); return { n: s.length, min: s[0], p50: s[Math.floor(s.length / 2)], max: s.at(-1) }; };
const fmt = (o) => `n=${o.n} min ${o.min.toFixed(1)} ms, p50 ${o.p50.toFixed(1)} ms, max ${o.max.toFixed(1)} ms`;

let server = await orchestrator();
let kind = 'orchestrator';
if (server.skip) { console.log(`(orchestrator unavailable: ${server.skip}; static server instead)`); server = await staticServer(); kind = 'static'; }
const origin = server.origin;

const loads = { cold: [], warm: [] };
for (let i = 0; i < 3; i++) {
  const b = await launch();
  const page = await b.ctx.newPage();
  for (const phase of ['cold', 'warm']) {
    const t0 = Date.now();
    if (phase === 'cold') await page.goto(`${origin}/playground`); else await page.reload();
    await page.waitForFunction(() => window.cereaSupervisor?.state === 'ready', null, { timeout: 120_000 });
    loads[phase].push(Date.now() - t0);
  }
  await b.close();
}

const b = await launch();
const page = await b.ctx.newPage();
await page.goto(`${origin}/playground`);
await page.waitForFunction(() => window.cereaSupervisor?.state === 'ready', null, { timeout: 120_000 });
const swaps = await page.evaluate(async (n) => {
  const sup = window.cereaSupervisor;
  const files = [{ name: 'data.csv', bytes: new TextEncoder().encode('a,b\n'.repeat(1000)), sha256: 'x' }];
  await sup.mount(files);
  const out = [];
  for (let i = 0; i < n; i++) {
    await sup.whenSpareReady();
    const r = await sup.run({ code: 'while True:\n    pass\n', timeoutS: 0.3 });
    if (r.status !== 'timeout') throw new Error(`expected timeout, got ${r.status}`);
    const started = new Promise((res) => sup.once('executing', (e) => res(e.at)));
    const next = sup.run({ code: 'import os\nassert os.path.exists("/mnt/data/data.csv")\n' });
    const at = await started;
    const r2 = await next;
    if (r2.status !== 'ok') throw new Error(`next run: ${r2.status} ${r2.stderr}`);
    out.push({ hitToNext: at - sup.lastTimeoutAt, swap: sup.lastRestartMs });
  }
  return out;
}, N);
const live = await page.evaluate(async () => {
  const sup = window.cereaSupervisor;
  const q = (a, p) => { const x = [...a].sort((m, n) => m - n); return +x[Math.min(x.length - 1, Math.floor(x.length * p))].toFixed(1); };
  const lat = async (body) => {
    const got = [];
    const off = sup.on('output', (e) => { const now = Date.now(); for (const l of e.text.split('\n')) if (l.startsWith('t=')) got.push(now - Number(l.slice(2)) * 1000); });
    try { await sup.run({ code: `import time\nfor i in range(100):\n    print("t=%r" % time.time())\n    ${body}` }); } finally { off(); }
    return { n: got.length, p50: q(got, 0.5), p99: q(got, 0.99) };
  };
  return { sleeping: await lat('time.sleep(0.03)'), cpu_loop: await lat('t = time.time()\n    while time.time() - t < 0.03:\n        pass') };
});
await b.close();
if (server.stop) await server.stop(); else await server.close();

console.log(`server: ${kind}`);
console.log(`runtime first load, cold HTTP cache: ${fmt(stats(loads.cold))}`);
console.log(`runtime first load, warm HTTP cache: ${fmt(stats(loads.warm))}`);
console.log(`time limit hit -> next run executing (spare, 1 file remounted): ${fmt(stats(swaps.map((s) => s.hitToNext)))}`);
console.log(`  of which terminate + swap + remount: ${fmt(stats(swaps.map((s) => s.swap)))}`);
console.log(`print -> output event in the page: after a sleep p50 ${live.sleeping.p50} ms, p99 ${live.sleeping.p99} ms; in a CPU loop p50 ${live.cpu_loop.p50} ms, p99 ${live.cpu_loop.p99} ms (n=${live.cpu_loop.n})`);
