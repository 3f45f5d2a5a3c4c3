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
//   --only ours|floor   one variant alone (for experiments)
//   CEREA_BIN           the orchestrator binary (default build/cerea-sandbox)
//
// Per visit it prints: when the page created its kernel worker, when Python was ready (both from
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
} });
const WWW = path.resolve(opt.www);
const ROUNDS = Number(opt.rounds), SETTLE_MS = Number(opt['settle-ms']), TIMEOUT_MS = Number(opt['timeout-ms']);
const THROTTLE = opt.throttle ? opt.throttle.split(',').map(Number) : null;

// Read in the page: when the first Worker was made, when the status line first said ready.
const PROBE = `(() => {
  const W = window.Worker;
  window.__startup = { worker: null, ready: null };
  window.Worker = function (...a) { if (window.__startup.worker === null) window.__startup.worker = performance.now(); return new W(...a); };
  window.Worker.prototype = W.prototype;
  const check = () => {
    const el = document.querySelector('[data-testid=runtime-status]');
    if (window.__startup.ready === null && el && el.textContent.startsWith('Python ready')) window.__startup.ready = performance.now();
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

async function visit(profile, url) {
  const ctx = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: ARGS });
  try {
    await ctx.addInitScript(PROBE);
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
    await page.waitForTimeout(SETTLE_MS);
    return r;
  } finally { await ctx.close(); }
}

const median = (a) => { const s = a.slice().sort((x, y) => x - y); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };
const fmt = (ms) => `${(ms / 1000).toFixed(2)} s`;

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-startup-'));
let srv = null;
try {
  srv = await startServer(tmp, WWW);
  const urls = { ours: `${srv.origin}/playground`, floor: `${srv.origin}/assets/floor.html` };
  console.log(`== startup: ${ROUNDS} rounds, ours and the floor alternated; settle ${SETTLE_MS} ms` +
    `${THROTTLE ? `; throttled to ${THROTTLE[0]} Mbit/s, ${THROTTLE[1]} ms` : ''}; ${fs.readFileSync('/proc/loadavg', 'utf8').trim()}`);
  const res = { ours: { cold: [], warm: [], coldWorker: [], warmWorker: [], cache: [] }, floor: { cold: [], warm: [], coldWorker: [], warmWorker: [], cache: [] } };
  for (let round = 0; round < ROUNDS; round++) {
    for (const v of opt.only ? [opt.only] : round % 2 ? ['floor', 'ours'] : ['ours', 'floor']) {
      const profile = fs.mkdtempSync(path.join(tmp, `profile-${v}-`));
      const cold = await visit(profile, urls[v]);
      const cache = dirBytes(path.join(profile, 'Default', 'Code Cache', 'wasm'));
      const warm = await visit(profile, urls[v]);
      fs.rmSync(profile, { recursive: true, force: true });
      const r = res[v];
      r.cold.push(cold.ready); r.warm.push(warm.ready); r.coldWorker.push(cold.worker); r.warmWorker.push(warm.worker); r.cache.push(cache);
      console.log(`round ${round + 1} ${v.padEnd(5)}  cold ready ${fmt(cold.ready)} (worker at ${cold.worker.toFixed(0)} ms)  ` +
        `warm ready ${fmt(warm.ready)} (worker at ${warm.worker.toFixed(0)} ms)  wasm code cache after the first visit ${(cache / 1048576).toFixed(1)} MB`);
    }
  }
  const m = (v, k) => median(res[v][k]);
  console.log('== medians');
  for (const v of ['ours', 'floor'])
    console.log(`${v.padEnd(5)}  cold ${fmt(m(v, 'cold'))}  warm ${fmt(m(v, 'warm'))}  worker created at ${m(v, 'coldWorker').toFixed(0)} / ${m(v, 'warmWorker').toFixed(0)} ms  wasm code cache ${(m(v, 'cache') / 1048576).toFixed(1)} MB`);
  console.log(`ours : floor  cold ${(m('ours', 'cold') / m('floor', 'cold')).toFixed(2)}x  warm ${(m('ours', 'warm') / m('floor', 'warm')).toFixed(2)}x` +
    `   (ours warm / ours cold ${(m('ours', 'warm') / m('ours', 'cold')).toFixed(2)}, floor ${(m('floor', 'warm') / m('floor', 'cold')).toFixed(2)})`);
  console.log(JSON.stringify({ rounds: ROUNDS, throttle: THROTTLE, ...res }));
} finally {
  if (srv && srv.child.exitCode === null) { process.kill(srv.pid, 'SIGTERM'); await new Promise((r) => srv.child.once('exit', r)); }
  fs.rmSync(tmp, { recursive: true, force: true });
}
