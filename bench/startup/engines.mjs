// bench/startup/engines.mjs -- start-up per engine: how long the web app (the playground) takes to
// get Python ready in each engine of the cross-engine set (tests/e2e/engines/drivers.mjs:
// Chromium, Firefox ESR, WebKitGTK with and without SharedArrayBuffer), beside the floor on the
// same engine (floor.mjs: a bare page loading the same runtime with Pyodide's own loader), on a
// first visit (cold: a fresh profile) and a repeat one (warm).  Ours and the floor alternate within
// each round (ours first in odd rounds, the floor first in even ones), so machine load hits both
// alike; each round gives a ratio ours : floor of its own.  Per engine it prints the medians with
// their spread (min–max over the rounds), the median of the rounds' ratios with theirs, and the
// goal each is read against (issue 28: a first visit within 1.2x the floor, a repeat visit at most
// 1.0x), with the load average before and after.
//
//   node bench/startup/engines.mjs [--rounds 5] [--engines "chromium firefox webkit-sab webkit"] [--settle-ms 3000] [--page playground|chat]
//
// --page chat measures the chat page of a chat made for each visit pair instead of the playground:
// the same "Python ready", and also when its event stream is open ("connected"), printed beside.
//
// Warm: Chromium and Firefox, a new browser on the first visit's profile (ours: once its spare
// kernel loaded, which makes the memory snapshot a repeat visit restores); WebKitGTK (its
// automation sessions keep no profile), the same page loaded again in the same browser.  "Python
// ready" is read in the page from the navigation's start to the status line saying so (an
// observer put in the page once it loaded, long before Python is ready; a visit whose status was
// already ready then counts the time it was seen).  Prints each visit, the medians and the ratios;
// asserts nothing: the machine is shared, read ranges.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { startServer } from './floor.mjs';
import { open, missing } from '../../tests/e2e/engines/drivers.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const { values: opt } = parseArgs({ options: {
  rounds: { type: 'string', default: '5' }, engines: { type: 'string', default: 'chromium firefox webkit-sab webkit' },
  'settle-ms': { type: 'string', default: '3000' }, page: { type: 'string', default: 'playground' },
} });
const KEY = 'bench-startup-key-0123456789';   // floor.mjs's server's API key
const ROUNDS = Number(opt.rounds), SETTLE_MS = Number(opt['settle-ms']);

async function ready(page, url) {
  await page.goto(url);
  await page.evaluate(() => {
    const say = () => document.querySelector('[data-testid=runtime-status]')?.textContent.startsWith('Python ready');
    window.__ready = say() ? performance.now() : null;
    // The chat page's event stream: when it is seen open (checked every 50 ms from here on).
    const open = () => window.cereaSession?.stream?.state === 'open';
    window.__open = open() ? performance.now() : null;
    if (window.__open === null) { const t = setInterval(() => { if (open()) { window.__open = performance.now(); clearInterval(t); } }, 50); }
    if (window.__ready === null) {
      new MutationObserver(() => { if (window.__ready === null && say()) window.__ready = performance.now(); })
        .observe(document, { subtree: true, childList: true, characterData: true });
    }
  });
  return page.waitForFunction(() => window.__ready, null, { timeout: 300_000, polling: 100 });
}

// Ours keeps a memory snapshot for the repeat visit, made by its spare kernel once that loaded:
// the first visit lasts until then (a person who stayed as long), and the repeat visit says
// whether its kernel was restored from it.
async function spareDone(page) {
  await page.evaluate(() => { window.__spare = false; window.cereaSupervisor.whenSpareReady().then(() => { window.__spare = true; }); });
  await page.waitForFunction(() => window.__spare, null, { timeout: 300_000, polling: 200 });
}

// The chat page keeps its own connection: the time its event stream is open, read with "ready".
const connected = (page) => (opt.page === 'chat' ? page.waitForFunction(() => window.__open, null, { timeout: 300_000, polling: 100 }) : null);

// A URL to visit: ours (a new chat's page for --page chat) or the floor.
async function target(origin, v) {
  if (v === 'floor') return `${origin}/assets/floor.html`;
  if (opt.page !== 'chat') return `${origin}/playground`;
  const r = await fetch(`${origin}/v1/chats`, { method: 'POST', headers: { Authorization: `Bearer ${KEY}`, 'Content-Type': 'application/json' }, body: '{}' });
  const c = await r.json();
  return `${origin}/chat/${c.chat_id}#token=${c.page_token}`;
}

// A closed Firefox may still be writing into its profile for a moment (ENOTEMPTY): retried.
const rmTree = (dir) => fs.rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 });

async function visits(engine, url, tmp, ours) {
  const profile = fs.mkdtempSync(path.join(tmp, `profile-${engine}-`));
  let page = await open(engine, { profile });
  try {
    const cold = await ready(page, url);
    const coldOpen = ours ? await connected(page) : null;
    if (ours) await spareDone(page);
    await page.waitForTimeout(SETTLE_MS);   // the engine writes its compiled-code cache after compiling
    if (!engine.startsWith('webkit')) { await page.close(); page = await open(engine, { profile }); }
    const warm = await ready(page, url);
    const warmOpen = ours ? await connected(page) : null;
    const snapshot = ours ? await page.evaluate(() => window.cereaSupervisor.kernel?.info?.snapshot || null) : null;
    return { cold, warm, snapshot, coldOpen, warmOpen };
  } finally { await page.close(); rmTree(profile); }
}

const GOAL = { cold: 1.2, warm: 1.0 };   // ours : floor, issue 28
const loadavg = () => fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
const median = (a) => { const s = a.slice().sort((x, y) => x - y); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };
const fmt = (ms) => `${(ms / 1000).toFixed(2)} s`;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-startup-engines-'));
let srv = null;
try {
  srv = await startServer(tmp, path.join(ROOT, 'build', 'www'));
  const all = { page: opt.page };
  for (const engine of opt.engines.split(/[\s,]+/).filter(Boolean)) {
    const lacking = missing(engine);
    if (lacking) { console.log(`== ${engine}: skipped (${lacking})`); continue; }
    const load = loadavg();
    console.log(`== ${engine}: ${ROUNDS} rounds, ours and the floor alternated; load ${load}`);
    const res = all[engine] = { ours: { cold: [], warm: [] }, floor: { cold: [], warm: [] } };
    for (let round = 0; round < ROUNDS; round++) {
      for (const v of round % 2 ? ['floor', 'ours'] : ['ours', 'floor']) {
        const r = await visits(engine, await target(srv.origin, v), tmp, v === 'ours');
        res[v].cold.push(r.cold); res[v].warm.push(r.warm);
        if (r.coldOpen) (res.connected ||= { cold: [], warm: [] }).cold.push(r.coldOpen);
        if (r.warmOpen) res.connected.warm.push(r.warmOpen);
        const open = r.coldOpen ? `  connected ${fmt(r.coldOpen)} / ${fmt(r.warmOpen)}` : '';
        console.log(`${engine} round ${round + 1} ${v.padEnd(5)}  cold ${fmt(r.cold)}  warm ${fmt(r.warm)}${open}${r.snapshot ? `  (repeat visit's kernel: snapshot ${r.snapshot})` : ''}`);
      }
    }
    res.load = { before: load, after: loadavg() };
    const spread = (a, f) => `${f(median(a))} (${f(Math.min(...a))}–${f(Math.max(...a))})`;
    const x = (r) => `${r.toFixed(2)}x`;
    for (const k of ['cold', 'warm']) {
      const ratios = res.ours[k].map((o, i) => o / res.floor[k][i]);
      res[`ratio_${k}`] = ratios;
      const goal = GOAL[k], m = median(ratios);
      console.log(`${engine} ${k === 'cold' ? 'first visit' : 'repeat visit'}: ours ${spread(res.ours[k], fmt)}, floor ${spread(res.floor[k], fmt)}; ` +
        `ours : floor per round ${spread(ratios, x)} — goal ≤ ${goal.toFixed(1)}x: ${m <= goal ? 'met' : 'NOT met'} (median)`);
    }
    if (res.connected) console.log(`${engine} chat page connected: first visit ${spread(res.connected.cold, fmt)}, repeat visit ${spread(res.connected.warm, fmt)}`);
    console.log(`${engine} load average: ${res.load.before} before, ${res.load.after} after`);
  }
  console.log(JSON.stringify({ rounds: ROUNDS, ...all }));
} finally {
  if (srv && srv.child.exitCode === null) { process.kill(srv.pid, 'SIGTERM'); await new Promise((r) => srv.child.once('exit', r)); }
  rmTree(tmp);
}
