// bench/startup/run.mjs -- how long the web app takes to get Python ready in Debian's Chromium, on a
// first visit (cold: a fresh profile, nothing cached) and on a repeat visit (warm: the same
// profile, a new browser process), beside the floor: a bare page on the same server that loads the
// same runtime with Pyodide's own loader in a module worker (no CSP, no lock-down, no progress, no
// app).  Ours and the floor alternate in one run, so machine load hits both alike.
//
//   node bench/startup/run.mjs [--rounds 5] [--settle-ms 4000] [--throttle 10,60] [--www DIR]
//
//   --throttle MBIT,MS  emulate a link of MBIT Mbit/s down and MS ms of latency (CDP
//                       Network.emulateNetworkConditions on the page, which Chromium applies to
//                       the page's dedicated workers' fetches too)
//   --settle-ms         time a visit stays open after ready before the browser is closed (Chromium
//                       writes compiled wasm to its code cache a little after compiling)
//   --www DIR           the built static tree to serve (default build/www; another checkout's, to
//                       compare two versions of the app against the same floor)
//   --before DIR        a third variant, "before": the app of another built tree (e.g. main's
//                       build/www) on a second server, alternated with ours and the floor, so a
//                       change is measured before/after in one run (ratios against the floor)
//   --only ours|floor   one variant alone (for experiments)
//   --trace             print each first visit's status-line phases and its requests (the page's
//                       and its workers'): when each was sent, answered and ended (ms from the
//                       navigation), its bytes on the wire (Playwright's encoded body size; 0 or
//                       less: nothing came over the wire for it, e.g. it joined another request's
//                       transfer in the HTTP cache; an aborted one: what its headers announced),
//                       and when each kernel worker was made
//   CEREA_BIN           the orchestrator binary (default build/cerea-sandbox)
//
// Per visit it prints: when the page created its kernel worker, when the runtime's last byte was
// in on a first visit (the link's share of it, read from the worker's resource timing), when
// Python was ready (both from
// the navigation's start, read in the page), and the size of the profile's wasm code cache after
// the visit.  At the end: medians per variant and the ratios ours : floor.  "Python ready" is the
// runtime status line saying so (ours: the supervisor's ready, after the lock-down and the
// warm-up run; the floor: loadPyodide resolved and one runPython).  The orchestrator runs with a
// temporary --data dir and a --static dir that is build/www plus the floor's two files; it is
// started and stopped by pid.  It does not assert anything: read ranges, the machine is shared.
import { chromium } from 'playwright-core';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { startServer } from './floor.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync'];

const { values: opt } = parseArgs({ options: {
  rounds: { type: 'string', default: '5' }, 'settle-ms': { type: 'string', default: '4000' },
  throttle: { type: 'string' }, 'timeout-ms': { type: 'string', default: '90000' },
  www: { type: 'string', default: path.join(ROOT, 'build', 'www') }, only: { type: 'string' },
  before: { type: 'string' },
  trace: { type: 'boolean', default: false },
} });
const WWW = path.resolve(opt.www);
const ROUNDS = Number(opt.rounds), SETTLE_MS = Number(opt['settle-ms']), TIMEOUT_MS = Number(opt['timeout-ms']);
const THROTTLE = opt.throttle ? opt.throttle.split(',').map(Number) : null;

// Read in the page: when the first Worker was made, when the status line first said ready.
const PROBE = `(() => {
  const W = window.Worker;
  window.__startup = { worker: null, ready: null, workers: [], labels: [] };
  window.Worker = function (...a) {
    if (window.__startup.worker === null) window.__startup.worker = performance.now();
    window.__startup.workers.push(Math.round(performance.now()));
    return new W(...a);
  };
  window.Worker.prototype = W.prototype;
  const check = () => {
    const el = document.querySelector('[data-testid=runtime-status]');
    if (window.__startup.ready === null && el && el.textContent.startsWith('Python ready')) window.__startup.ready = performance.now();
    // --trace: the status line's phases (not each download step) with their times
    const text = el && el.textContent.replace(/:\\s*\\d+\\s*%.*/, ': downloading');
    if (text && window.__startup.labels.at(-1)?.[1] !== text) window.__startup.labels.push([Math.round(performance.now()), text]);
  };
  new MutationObserver(check).observe(document, { subtree: true, childList: true, characterData: true });
})();`;

function dirBytes(p) {
  if (!fs.existsSync(p)) return 0;
  let n = 0;
  for (const e of fs.readdirSync(p, { withFileTypes: true })) {
    const f = path.join(p, e.name);
    n += e.isDirectory() ? dirBytes(f) : fs.statSync(f).size;
  }
  return n;
}

// --trace: every request of the visit, the page's and its workers' (Playwright reports both on the
// context), → rows {url, start, first (the response's start), end, bytes, failed} with times in ms
// from the navigation's start.
function traceRequests(ctx) {
  const rows = [];
  const row = (req) => {
    let r = rows.find((x) => x.req === req);
    if (!r) rows.push(r = { req, url: req.url(), start: null, end: null, bytes: null, failed: null });
    return r;
  };
  ctx.on('request', (req) => { row(req).seen = Date.now(); });
  const finish = async (req, failed) => {
    const r = row(req), t = req.timing();
    r.start = t.startTime; r.end = t.responseEnd >= 0 ? t.startTime + t.responseEnd : Date.now();
    r.first = t.responseStart >= 0 ? t.startTime + t.responseStart : null;
    r.failed = failed;
    try { r.bytes = (await req.sizes()).responseBodySize; } catch { r.bytes = null; }
  };
  ctx.on('requestfinished', (req) => finish(req, null));
  ctx.on('requestfailed', (req) => finish(req, req.failure()?.errorText || 'failed'));
  return rows;
}

function printTrace(rows, t0, r) {
  const short = (u) => u.replace(/^https?:\/\/[^/]+/, '').slice(0, 70);
  console.log(`  trace: workers made at ${r.workers.join(', ')} ms, ready at ${Math.round(r.ready)} ms (page clock)`);
  for (const [t, text] of r.labels) console.log(`  ${String(t).padStart(6)} ms  status: ${text.slice(0, 90)}`);
  for (const x of rows.slice().sort((a, b) => (a.start ?? a.seen) - (b.start ?? b.seen))) {
    const s = Math.round((x.start ?? x.seen) - t0), e = x.end ? Math.round(x.end - t0) : null;
    const f = x.first ? Math.round(x.first - t0) : '-';
    console.log(`  ${String(s).padStart(6)} → ${String(f).padStart(6)} → ${String(e ?? '-').padStart(6)} ms ${String(x.bytes ?? '?').padStart(9)} B  ${short(x.url)}${x.failed ? `  (${x.failed})` : ''}`);
  }
}

// When the runtime's last byte was in (pyodide.asm.wasm and python_stdlib.zip, as the first kernel
// worker fetched them), in ms on the page's clock: the link's share of a visit, apart from the
// CPU's.  null when the worker is gone or took nothing over the network.
async function runtimeIn(page) {
  const w = page.workers()[0];
  if (!w) return null;
  try {
    const [origin, ends] = await w.evaluate(() => [performance.timeOrigin, performance.getEntriesByType('resource')
      .filter((e) => /\/(pyodide\.asm\.wasm|python_stdlib\.zip)$/.test(e.name)).map((e) => e.responseEnd)]);
    const pageOrigin = await page.evaluate(() => performance.timeOrigin);
    return ends.length ? Math.max(...ends) + origin - pageOrigin : null;
  } catch { return null; }
}

async function visit(profile, url, trace = false) {
  const ctx = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: ARGS });
  try {
    await ctx.addInitScript(PROBE);
    const rows = trace ? traceRequests(ctx) : null;
    const page = ctx.pages()[0] || await ctx.newPage();
    if (THROTTLE) {
      const cdp = await ctx.newCDPSession(page);
      const conditions = { offline: false, latency: THROTTLE[1], downloadThroughput: THROTTLE[0] * 125000, uploadThroughput: THROTTLE[0] * 125000 };
      await cdp.send('Network.enable');
      await cdp.send('Network.emulateNetworkConditions', conditions);
    }
    await page.goto(url);
    await page.waitForFunction(() => window.__startup && window.__startup.ready !== null, null, { timeout: TIMEOUT_MS, polling: 50 });
    const r = await page.evaluate(() => window.__startup);
    r.runtimeIn = await runtimeIn(page);
    const t0 = rows ? await page.evaluate(() => performance.timeOrigin) : 0;
    await page.waitForTimeout(SETTLE_MS);
    if (rows) printTrace(rows, t0, r);
    return r;
  } finally { await ctx.close(); }
}

const median = (a) => { const s = a.slice().sort((x, y) => x - y); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };
const fmt = (ms) => `${(ms / 1000).toFixed(2)} s`;

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-startup-'));
let srv = null, srvBefore = null;
try {
  srv = await startServer(tmp, WWW);
  const urls = { ours: `${srv.origin}/playground`, floor: `${srv.origin}/assets/floor.html` };
  if (opt.before) {
    const dir = path.join(tmp, 'before'); fs.mkdirSync(dir);
    srvBefore = await startServer(dir, path.resolve(opt.before));
    urls.before = `${srvBefore.origin}/playground`;
  }
  const VARIANTS = Object.keys(urls).sort((a, b) => ['ours', 'before', 'floor'].indexOf(a) - ['ours', 'before', 'floor'].indexOf(b));
  console.log(`== startup: ${ROUNDS} rounds, ours and the floor alternated; settle ${SETTLE_MS} ms` +
    `${THROTTLE ? `; throttled to ${THROTTLE[0]} Mbit/s, ${THROTTLE[1]} ms` : ''}; ${fs.readFileSync('/proc/loadavg', 'utf8').trim()}`);
  const res = Object.fromEntries(VARIANTS.map((v) => [v, { cold: [], warm: [], coldWorker: [], warmWorker: [], cache: [], coldIn: [] }]));
  for (let round = 0; round < ROUNDS; round++) {
    // The order turns each round (ours, before, floor; before, floor, ours; …).
    for (const v of opt.only ? [opt.only] : VARIANTS.map((_, i) => VARIANTS[(i + round) % VARIANTS.length])) {
      const profile = fs.mkdtempSync(path.join(tmp, `profile-${v}-`));
      const cold = await visit(profile, urls[v], opt.trace);
      const cache = dirBytes(path.join(profile, 'Default', 'Code Cache', 'wasm'));
      const warm = await visit(profile, urls[v]);
      fs.rmSync(profile, { recursive: true, force: true });
      const r = res[v];
      r.cold.push(cold.ready); r.warm.push(warm.ready); r.coldWorker.push(cold.worker); r.warmWorker.push(warm.worker); r.cache.push(cache);
      r.coldIn.push(cold.runtimeIn);
      console.log(`round ${round + 1} ${v.padEnd(5)}  cold ready ${fmt(cold.ready)} (worker at ${cold.worker.toFixed(0)} ms, runtime in at ${cold.runtimeIn === null ? '?' : fmt(cold.runtimeIn)})  ` +
        `warm ready ${fmt(warm.ready)} (worker at ${warm.worker.toFixed(0)} ms)  wasm code cache after the first visit ${(cache / 1048576).toFixed(1)} MB`);
    }
  }
  const m = (v, k) => median(res[v][k]);
  console.log('== medians');
  for (const v of VARIANTS)
    console.log(`${v.padEnd(5)}  cold ${fmt(m(v, 'cold'))}  warm ${fmt(m(v, 'warm'))}  worker created at ${m(v, 'coldWorker').toFixed(0)} / ${m(v, 'warmWorker').toFixed(0)} ms  wasm code cache ${(m(v, 'cache') / 1048576).toFixed(1)} MB`);
  const inMedian = (v) => { const a = res[v].coldIn.filter((x) => x !== null); return a.length ? median(a) : NaN; };
  console.log(`first visit, the runtime's last byte in at (median): ${VARIANTS.map((v) => `${v} ${fmt(inMedian(v))}`).join(', ')}`);
  console.log(`ours : floor  cold ${(m('ours', 'cold') / m('floor', 'cold')).toFixed(2)}x  warm ${(m('ours', 'warm') / m('floor', 'warm')).toFixed(2)}x` +
    `   (ours warm / ours cold ${(m('ours', 'warm') / m('ours', 'cold')).toFixed(2)}, floor ${(m('floor', 'warm') / m('floor', 'cold')).toFixed(2)})`);
  if (res.before) console.log(`before : floor  cold ${(m('before', 'cold') / m('floor', 'cold')).toFixed(2)}x  warm ${(m('before', 'warm') / m('floor', 'warm')).toFixed(2)}x`);
  console.log(`load average at the end: ${fs.readFileSync('/proc/loadavg', 'utf8').trim()}`);
  console.log(JSON.stringify({ rounds: ROUNDS, throttle: THROTTLE, ...res }));
} finally {
  for (const s of [srv, srvBefore]) {
    if (s && s.child.exitCode === null) { process.kill(s.pid, 'SIGTERM'); await new Promise((r) => s.child.once('exit', r)); }
  }
  fs.rmSync(tmp, { recursive: true, force: true });
}
