// startup.test.mjs -- how the app starts Python, in Chromium against the real orchestrator (its
// caching headers matter here): the runtime bar is one percentage over the runtime's total bytes
// that only grows and never names a file; the page makes its kernel worker before it even
// requests its own bundle (editor, cards); a first visit makes its worker once /v1/config said
// whether PyPI can be used (the runtime's files fetched meanwhile), a repeat visit (the server said no last time, kept in localStorage)
// makes the strict worker without waiting for it; Pyodide compiles the wasm from the Response the
// network stack gave it, so a first visit leaves the compiled runtime in the profile's wasm code
// cache, and a repeat visit (same profile, new browser process) takes it from there (V8 traces a
// wasm.Deserialize), takes every runtime byte from the HTTP cache (/pyodide/ is immutable, with
// an ETag) and asks again only for the two files that change in place (the lock file,
// deployment.json: a 304 as a rule); boot.js is inlined in the page, its content-hashed chunks are
// immutable and the worker script has a strong ETag, so a repeat visit asks the server for no
// chunk and gets a 304 for the worker script; a first visit restores the served memory snapshot
// and keeps it, and a repeat visit restores the kept copy (the page's first inline script made its
// worker, adopted) with every escape probe still blocked, while another build's means the served
// one, and a corrupt or a truncated copy (not the served image's bytes) a normal load.  No timing is asserted (bench/startup does the measuring); the download is
// slowed with CDP network emulation only so that the bar has several steps to check.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { launch, orchestrator, screenshot, DESKTOP } from './harness.mjs';
import { escapeProbes, runAndWait, setCode } from './escape-probes.mjs';

let orch, skipReason = null;
before(async () => {
  orch = await orchestrator();
  if (orch.skip) skipReason = orch.skip;
});
after(async () => { if (orch && !orch.skip) await orch.stop(); });
const need = (t) => { if (skipReason) { t.skip(`orchestrator unavailable: ${skipReason}`); return false; } return true; };

// Every text the status line shows and the bar's value/max at each, from the page's first script
// on; when the page made its first worker (performance.now()).
const RECORD = `(() => {
  const seen = window.__startup = { labels: [], bars: [], worker: null };
  const W = window.Worker;
  window.Worker = function (...a) { if (seen.worker === null) seen.worker = performance.now(); return new W(...a); };
  window.Worker.prototype = W.prototype;
  new MutationObserver(() => {
    const el = document.querySelector('[data-testid=runtime-status]');
    const bar = document.querySelector('#runtime progress');
    if (!el) return;
    if (seen.labels.at(-1) !== el.textContent) seen.labels.push(el.textContent);
    if (bar && bar.hasAttribute('value')) seen.bars.push([bar.value, bar.max]);
  }).observe(document, { subtree: true, childList: true, characterData: true, attributes: true });
})();`;

function dirBytes(p) {
  if (!fs.existsSync(p)) return 0;
  let n = 0;
  for (const e of fs.readdirSync(p, { withFileTypes: true })) n += e.isDirectory() ? dirBytes(path.join(p, e.name)) : fs.statSync(path.join(p, e.name)).size;
  return n;
}
const wasmCache = (profile) => path.join(profile, 'Default', 'Code Cache', 'wasm');

// Holds the page's /v1/config request until the page makes a worker or `ms` pass, whichever
// comes first (once).  → (once the hold is set) {made: Promise: did a worker come while
// /v1/config was held?}.  Held with CDP's Fetch domain for that one URL, not Playwright's page.route: while a route is
// set Playwright turns the HTTP cache off for the page (Network.setCacheDisabled), so whatever
// the worker asked for before the route was lifted (a CDP round trip after the worker came: long
// under load) bypassed the cache and came again from the server.  A wasm fetched again gets a
// new response time, and Chromium's wasm code cache keeps only an entry made from the HTTP cache
// entry it is given (same response time): the repeat visit compiled again, no wasm.Deserialize
// (3 in 10 beside two CPU burners), and the small files it asked first came back whole instead
// of 304 (about 1 in 5, docs/benchmarks.md).  Fetch interception by pattern leaves the cache on.
async function holdConfig(ctx, page, ms) {
  const worker = new Promise((r) => page.on('worker', () => r(true)));
  const cdp = await ctx.newCDPSession(page);
  let resolve;
  const made = new Promise((r) => { resolve = r; });
  cdp.on('Fetch.requestPaused', async (e) => {
    const got = await Promise.race([worker, new Promise((r) => setTimeout(() => r(false), ms))]);
    resolve(got);
    await cdp.send('Fetch.continueRequest', { requestId: e.requestId }).catch(() => {});
    await cdp.send('Fetch.disable').catch(() => {});
  });
  await cdp.send('Fetch.enable', { patterns: [{ urlPattern: '*/v1/config*', requestStage: 'Request' }] });
  return { made };
}
// Records V8's wasm trace events of the page and its workers.  → stop(): Promise of the events'
// names.
async function traceWasm(ctx, page) {
  const cdp = await ctx.newCDPSession(page);
  const names = [];
  cdp.on('Tracing.dataCollected', (d) => { for (const e of d.value) names.push(e.name); });
  await cdp.send('Tracing.start', { traceConfig: { includedCategories: ['v8.wasm'] }, transferMode: 'ReportEvents' });
  return async () => {
    const done = new Promise((r) => cdp.once('Tracing.tracingComplete', r));
    await cdp.send('Tracing.end');
    await done;
    return names;
  };
}
// Records the page's requests (its workers' too) over CDP.  → Map requestId → {url, network: the
// status the server sent (none: answered from the browser's cache without asking), cached: taken
// from the disk or memory cache}.
async function networkLog(ctx, page) {
  const cdp = await ctx.newCDPSession(page);
  const reqs = new Map();
  const of = (id) => { if (!reqs.has(id)) reqs.set(id, { url: '', network: null, cached: false }); return reqs.get(id); };
  cdp.on('Network.requestWillBeSent', (e) => { of(e.requestId).url = e.request.url; });
  cdp.on('Network.responseReceivedExtraInfo', (e) => { of(e.requestId).network = e.statusCode; });
  cdp.on('Network.requestServedFromCache', (e) => { of(e.requestId).cached = true; });
  cdp.on('Network.responseReceived', (e) => {
    const r = of(e.requestId);
    if (!r.url) r.url = e.response.url;
    if (e.response.fromDiskCache) r.cached = true;
  });
  await cdp.send('Network.enable');
  return reqs;
}
const verdict = (page) => page.evaluate(() => localStorage.getItem('cerea.boot.pypi'));

async function openReady(ctx, { throttle = null } = {}) {
  await ctx.addInitScript(RECORD);
  const page = ctx.pages()[0] || await ctx.newPage();
  if (throttle) {
    const cdp = await ctx.newCDPSession(page);
    await cdp.send('Network.enable');
    await cdp.send('Network.emulateNetworkConditions', { offline: false, latency: throttle.latencyMs,
      downloadThroughput: throttle.mbit * 125000, uploadThroughput: throttle.mbit * 125000 });
  }
  // Not the load event: the throttled link is shared with the runtime's download; ready is awaited below.
  await page.goto(`${orch.origin}/playground`, { waitUntil: 'commit' });
  await page.waitForFunction(() => document.getElementById('runtime')?.dataset.state === 'ready', null, { timeout: 120_000 });
  return page;
}

test('the runtime bar: one percentage over the total bytes, only growing, never a file name; the worker comes before the page bundle', async (t) => {
  if (!need(t)) return;
  const b = await launch({ viewport: DESKTOP });
  try {
    // ~6 MB on the wire at 40 Mbit/s: over a second of download, many steps of the bar.
    const page = await openReady(b.ctx, { throttle: { mbit: 40, latencyMs: 20 } });
    const seen = await page.evaluate(() => window.__startup);
    const pcts = seen.labels.map((l) => /(\d+) %/.exec(l)).filter(Boolean).map((m) => Number(m[1]));
    assert.ok(pcts.length >= 3 && pcts.some((p) => p > 0 && p < 100), `a percentage in several steps: ${JSON.stringify(seen.labels)}`);
    assert.ok(pcts.every((p, i) => i === 0 || p >= pcts[i - 1]), `the percentage only grows: ${pcts}`);
    // The total: the runtime's files and, when this visit restores it, the served memory image
    // (~30 MB decoded); an image given up on a slow link (a loaded machine reads it slowly too)
    // leaves the total once, with what of it came (docs/ui-adapter.md).
    assert.equal(pcts.at(-1), 100, 'every byte in before Python is ready');
    assert.ok(seen.labels.every((l) => !/pyodide\.asm|python_stdlib|\.wasm|\.zip/.test(l)), `no file names: ${JSON.stringify(seen.labels)}`);
    const max = seen.bars[0][1];
    const maxes = [...new Set(seen.bars.map(([, m]) => m))];
    assert.ok(max > 10e6 && maxes.length <= 2 && maxes.every((m) => m <= max && m > 10e6) &&
      seen.bars.every(([v, m], i) => v <= m && (i === 0 || v >= seen.bars[i - 1][0])),
      `one bar over the runtime (with the image, or without it once given up), only growing: ${JSON.stringify(seen.bars.slice(0, 5))}… totals ${maxes}`);
    assert.match(seen.labels.at(-1), /^Python ready/);
    // The kernel worker is made before the page's own bundle (the editor's code) is even asked for.
    const app = await page.evaluate(() => performance.getEntriesByType('resource').find((r) => r.name.endsWith('/assets/app.js'))?.startTime);
    assert.ok(seen.worker !== null && app !== undefined && seen.worker < app, `worker at ${seen.worker} ms, app.js requested at ${app} ms`);
    await screenshot(page, 'startup-ready');
  } finally { await b.close(); }
});

test('a first visit leaves the compiled runtime in the wasm code cache; a repeat visit takes the runtime from the HTTP cache, revalidates the lock', async (t) => {
  if (!need(t)) return;
  // What the caches need from /pyodide/: a long-lived, immutable response with a validator.
  const head = await fetch(`${orch.origin}/pyodide/pyodide.asm.wasm`, { headers: { 'accept-encoding': 'br, gzip' } });
  assert.equal(head.status, 200);
  assert.match(head.headers.get('cache-control') || '', /max-age=\d{7,}/);
  assert.match(head.headers.get('cache-control') || '', /immutable/);
  assert.ok(head.headers.get('etag'), 'an ETag');
  assert.equal(head.headers.get('content-type'), 'application/wasm', 'streaming compilation needs the wasm type');
  await head.arrayBuffer();

  const first = await launch({ viewport: DESKTOP });
  const profile = first.dir;
  try {
    // This deployment has no micropip: the first visit makes its worker only once /v1/config
    // said so (held 3 s here: no worker meanwhile), and keeps the verdict for the next visit.
    const firstHeld = (await holdConfig(first.ctx, first.ctx.pages()[0], 3000)).made;
    // ... while the page fetches the runtime's files that either worker needs (prefetchRuntime):
    // the download does not wait for the answer.
    const early = new Set();
    let configAnswered = false;
    first.ctx.pages()[0].on('request', (r) => { if (!configAnswered && /\/pyodide\/[^/]+$/.test(r.url())) early.add(r.url().split('/').pop()); });
    firstHeld.then(() => { configAnswered = true; });
    const firstPage = await openReady(first.ctx);
    assert.equal(await firstHeld, false, 'a first visit waits for /v1/config before it makes the worker');
    assert.ok(['pyodide.asm.wasm', 'python_stdlib.zip', 'pyodide.asm.mjs'].every((f) => early.has(f)),
      `the runtime's files asked for while /v1/config was held: ${[...early]}`);
    assert.equal(await verdict(firstPage), 'unavailable', 'the server\'s word on PyPI kept for the next visit');
    // Chromium writes compiled code a little after compiling (once the hot functions are
    // optimized), and writes it again as the spare kernel tiers up: wait (up to 120 s) until the
    // cache holds the runtime and has not changed for 8 s, then close the browser.  Closed while
    // an entry is being written, the next visit finds no usable entry; on a loaded machine the
    // tier-up, and so the next write, can come more than 3 s after the last (seen: 1 run in 2 at
    // a load average of 17 failed with 3 s).  V8 hands Chromium the module to cache only once
    // enough of it was optimized (tiered up), and what tiers up is what runs: a page that only
    // started Python (from the memory image, which skips Python's own start) and then sat idle
    // beside two CPU burners had written nothing in 90 s (1 run in 3).  So until the cache holds
    // the runtime, the page runs Python as a user would, a run at a time.
    const HOT = 'import json, re\ns = 0\nfor i in range(100000):\n    s += len(json.dumps({"k": str(i)})) + len(re.findall("[0-9]", str(i)))\nprint(s)\n';
    const settle = async () => {
      const deadline = Date.now() + 120_000;
      for (let last = -1, still = 0, runs = 0; still < 8 && Date.now() < deadline;) {
        await new Promise((r) => setTimeout(r, 1000));
        const n = dirBytes(wasmCache(profile));
        if (n < 512 * 1024 && runs < 20) {
          await setCode(firstPage, HOT);
          assert.equal((await runAndWait(firstPage)).status, 'ok');
          runs++;
        }
        still = n >= 512 * 1024 && n === last ? still + 1 : 0;
        last = n;
      }
    };
    await settle();
    await first.ctx.close();
    const bytes = dirBytes(wasmCache(profile));
    assert.ok(bytes >= 512 * 1024, `the profile's Code Cache/wasm holds ${bytes} bytes after a first visit`);

    // The repeat visit: one, no second chance (holdConfig says why one was once needed).
    const again = await launch({ viewport: DESKTOP, profile });
    const againHeld = (await holdConfig(again.ctx, again.ctx.pages()[0], 60_000)).made;
    const stopTrace = await traceWasm(again.ctx, again.ctx.pages()[0]);
    const page = await openReady(again.ctx);
    const traced = await stopTrace();
    try {
      assert.ok(traced.includes('wasm.Deserialize'), `a repeat visit takes the compiled runtime from the code cache (V8 traced ${traced.length} wasm events, no wasm.Deserialize)`);
      assert.equal(await againHeld, true, 'a repeat visit makes the strict worker while /v1/config is still unanswered');
      const worker = page.workers().find((w) => w.url().includes('/kernel-worker.js'));
      const sent = Object.fromEntries(await worker.evaluate(() => performance.getEntriesByType('resource')
        .map((r) => [r.name.split('/').pop(), r.transferSize])));
      console.log(`# repeat visit: ${traced.filter((n) => n === 'wasm.Deserialize').length} wasm.Deserialize; bytes over the wire: ${JSON.stringify(sent)}`);
      const runtime = ['pyodide.asm.wasm', 'python_stdlib.zip', 'pyodide.asm.mjs'];
      assert.ok(runtime.every((f) => sent[f] === 0), `every runtime byte from the HTTP cache on a repeat visit: ${JSON.stringify(sent)}`);
      // The files that change in place (an operator adds packages) are asked again, not taken
      // from the cache: a 304 as a rule (the full answers once seen about once in five came from
      // Playwright's routing turning the cache off: holdConfig).
      assert.ok(['pyodide-lock.json', 'deployment.json'].every((f) => sent[f] > 0),
        `the lock file and deployment.json asked again: ${JSON.stringify(sent)}`);
    } finally { await again.ctx.close(); }
  } finally {
    await first.ctx.close().catch(() => {});
    fs.rmSync(profile, { recursive: true, force: true });
  }
});

test('hashed chunks are immutable and the worker script has a strong ETag: a repeat visit asks for no chunk before the worker, and gets a 304 for it', async (t) => {
  if (!need(t)) return;
  const html = await (await fetch(`${orch.origin}/playground`)).text();
  assert.ok(!html.includes('src="/assets/boot.js"'), 'boot.js is inlined into the page');
  const chunks = [...html.matchAll(/<link rel="modulepreload" href="(\/assets\/chunks\/[^"]+)">/g)].map((m) => m[1]);
  assert.ok(chunks.length >= 1, 'the page preloads boot\'s chunks');
  const chunk = await fetch(`${orch.origin}${chunks[0]}`);
  assert.equal(chunk.status, 200);
  assert.equal(chunk.headers.get('cache-control'), 'public, max-age=31536000, immutable');
  await chunk.arrayBuffer();
  const app = await fetch(`${orch.origin}/assets/app.js`);
  assert.equal(app.headers.get('cache-control'), 'no-cache', 'an entry keeps its name: revalidated');
  await app.arrayBuffer();

  // The worker script: its CSP exact (the lock-down rests on it), no-cache, a strong ETag; the
  // same answer as a 304 when the tag is named, and another tag for the other CSP.
  const host = new URL(orch.origin).host;
  const CSP = `default-src 'none'; script-src 'self' 'wasm-unsafe-eval'; connect-src http://${host}/pyodide/ https://${host}/pyodide/`;
  const w = await fetch(`${orch.origin}/worker/kernel-worker.js`);
  assert.equal(w.status, 200);
  await w.arrayBuffer();
  const tag = w.headers.get('etag');
  assert.match(tag || '', /^"[0-9a-f]{32}"$/, 'a strong ETag');
  assert.equal(w.headers.get('content-security-policy'), CSP);
  assert.equal(w.headers.get('cache-control'), 'no-cache');
  const w304 = await fetch(`${orch.origin}/worker/kernel-worker.js`, { headers: { 'if-none-match': `"x", ${tag}` } });
  assert.equal(w304.status, 304);
  assert.equal(w304.headers.get('etag'), tag);
  assert.equal(w304.headers.get('content-security-policy'), CSP, 'a 304 carries the same CSP');
  const pypi = await fetch(`${orch.origin}/worker-pypi/kernel-worker.js`, { headers: { 'if-none-match': tag } });
  assert.equal(pypi.status, 200, 'the PyPI worker\'s CSP differs: so does its tag');
  assert.notEqual(pypi.headers.get('etag'), tag);
  assert.match(pypi.headers.get('content-security-policy'), /connect-src [^;]*https:\/\/pypi\.org/);
  await pypi.arrayBuffer();

  const first = await launch({ viewport: DESKTOP });
  const profile = first.dir;
  try {
    await openReady(first.ctx);
    await first.ctx.close();
    const again = await launch({ viewport: DESKTOP, profile });
    try {
      const reqs = await networkLog(again.ctx, again.ctx.pages()[0]);
      await openReady(again.ctx);
      const all = [...reqs.values()].map((r) => ({ ...r, path: r.url.startsWith(orch.origin) ? new URL(r.url).pathname : r.url }));
      const asked = all.filter((r) => r.path.startsWith('/assets/chunks/'));
      assert.ok(chunks.every((c) => asked.some((r) => r.path === c)), `boot's chunks were loaded: ${JSON.stringify(asked)}`);
      assert.ok(asked.every((r) => r.network === null && r.cached), `no chunk asked of the server: ${JSON.stringify(asked)}`);
      const worker = all.filter((r) => r.path === '/worker/kernel-worker.js');
      assert.ok(worker.length === 1 && worker[0].network === 304, `the worker script revalidated (304): ${JSON.stringify(worker)}`);
    } finally { await again.ctx.close(); }
  } finally {
    await first.ctx.close().catch(() => {});
    fs.rmSync(profile, { recursive: true, force: true });
  }
});

// The page's kept memory snapshot (ui-adapter/src/snapshot.js's IndexedDB record), read or changed
// in the page: → {key, sha256, size, intact: its bytes hash to its sha256} or null.
const readImage = (page) => page.evaluate(async () => {
  const db = await new Promise((res, rej) => { const r = indexedDB.open('cerea-kernel', 1); r.onupgradeneeded = () => r.result.createObjectStore('snapshots'); r.onsuccess = () => res(r.result); r.onerror = () => rej(r.error); });
  const rec = await new Promise((res, rej) => { const r = db.transaction('snapshots').objectStore('snapshots').get('runtime'); r.onsuccess = () => res(r.result); r.onerror = () => rej(r.error); });
  db.close();
  if (!rec) return null;
  const hex = Array.from(new Uint8Array(await crypto.subtle.digest('SHA-256', await rec.blob.arrayBuffer())), (b) => b.toString(16).padStart(2, '0')).join('');
  return { key: rec.key, sha256: rec.sha256, size: rec.blob.size, intact: hex === rec.sha256 };
});
// how: 'key' (another build's), 'bytes' (bytes flipped, its hash kept), 'truncated' (cut, with
// the hash of what is left: only restoring it can fail).
const spoilImage = (page, how) => page.evaluate(async (how) => {
  const db = await new Promise((res, rej) => { const r = indexedDB.open('cerea-kernel', 1); r.onsuccess = () => res(r.result); r.onerror = () => rej(r.error); });
  const store = () => db.transaction('snapshots', 'readwrite').objectStore('snapshots');
  const rec = await new Promise((res) => { const r = store().get('runtime'); r.onsuccess = () => res(r.result); });
  let bytes = new Uint8Array(await rec.blob.arrayBuffer());
  if (how === 'key') rec.key = 'another-build';
  if (how === 'bytes') { for (let i = 1 << 20; i < bytes.length; i += 1 << 20) bytes[i] ^= 0x5a; }
  if (how === 'truncated') {
    bytes = bytes.slice(0, 1 << 20);
    rec.sha256 = Array.from(new Uint8Array(await crypto.subtle.digest('SHA-256', bytes)), (b) => b.toString(16).padStart(2, '0')).join('');
  }
  rec.blob = new Blob([bytes]);
  await new Promise((res, rej) => { const t = store().transaction; t.objectStore('snapshots').put(rec, 'runtime'); t.oncomplete = res; t.onerror = () => rej(t.error); });
  db.close();
}, how);
async function waitImage(page, ok, what) {
  const deadline = Date.now() + 90_000;
  let img = null;
  while (Date.now() < deadline) {
    img = await readImage(page);
    if (ok(img)) return img;
    await new Promise((r) => setTimeout(r, 500));
  }
  assert.fail(`${what}: the kept image is ${JSON.stringify(img)}`);
}

test('a first visit restores the served memory snapshot and keeps it; a repeat visit restores the kept copy, with the lock-down intact; another build\'s means the served one, a corrupt or a truncated copy a normal load', async (t) => {
  if (!need(t)) return;
  const hits = [];
  const sentinel = http.createServer((req, res) => { hits.push(req.url); res.end('reached'); });
  sentinel.on('upgrade', (req, sock) => { hits.push(`ws ${req.url}`); sock.destroy(); });
  await new Promise((r) => sentinel.listen(0, '127.0.0.1', r));
  const first = await launch({ viewport: DESKTOP });
  const profile = first.dir;
  let open = null;   // the last visit's browser: closed before its profile goes, whatever failed
  // One visit on the profile: → {page, logs (the page's console), close}.
  const visit = async () => {
    const b = await launch({ viewport: DESKTOP, profile });
    const logs = [];
    b.ctx.pages()[0].on('console', (m) => logs.push(m.text()));
    open = b.ctx;
    const page = await openReady(b.ctx);
    return { page, logs, atReady: logs.slice(), close: () => b.ctx.close() };
  };
  const python = async (page) => {
    await setCode(page, 'import sys, json\nprint(sum(range(10)), json.dumps(sys.version_info[:2]))\n');
    const r = await runAndWait(page);
    assert.equal(r.status, 'ok', r.text);
    assert.match(r.stdout, /^45 \[3, 1\d\]/);
  };
  const RESTORED = 'kernel: started from the memory snapshot';
  try {
    // A first visit (loopback: the image is faster than a load, unless the machine is so loaded
    // that even loopback reads slowly: then a load, said so): the served image restored; a kernel
    // that restored it (this one, or the spare, which takes it whatever the link) hands the file
    // over and the page keeps it.
    const logs1 = [];
    first.ctx.pages()[0].on('console', (m) => logs1.push(m.text()));
    const page1 = await openReady(first.ctx);
    assert.ok(logs1.includes("kernel: started from the server's memory snapshot") ||
      logs1.some((l) => /^kernel: Python loaded \(memory snapshot: skipped: the rest of it would take/.test(l)), JSON.stringify(logs1));
    const made = await waitImage(page1, (i) => i && i.intact, 'after a first visit');
    assert.match(made.key, /^[0-9a-f]{64}$/);
    assert.ok(made.size > 8e6, `an image of the runtime's memory: ${made.size} bytes`);
    await first.ctx.close();

    // A repeat visit: restored, Python right, every escape probe still blocked, the image unchanged.
    let v = await visit();
    assert.ok(v.atReady.includes(RESTORED), `restored before ready: ${JSON.stringify(v.atReady)}`);
    // The worker the page's first inline script made is the kernel's (adopted, not a third one):
    // with the spare, two kernel workers.
    const kernels = () => v.page.workers().filter((w) => w.url().endsWith('/kernel-worker.js')).length;
    for (const until = Date.now() + 60_000; kernels() < 2 && Date.now() < until;) await new Promise((r) => setTimeout(r, 200));
    await new Promise((r) => setTimeout(r, 2000));
    assert.equal(kernels(), 2, 'the kernel and its spare');
    await python(v.page);
    // A package loads into a restored runtime (through the guarded fetch, from /pyodide/).
    await setCode(v.page, 'import openpyxl\nwb = openpyxl.Workbook()\nwb.active["A1"] = 7\nwb.save("/mnt/output/r.xlsx")\n' +
      'print(openpyxl.load_workbook("/mnt/output/r.xlsx").active["A1"].value)\n');
    const xl = await runAndWait(v.page);
    assert.equal(xl.status, 'ok', xl.text);
    assert.equal(xl.stdout.trim(), '7');
    const { results, bcGot } = await escapeProbes(v.page, `http://127.0.0.1:${sentinel.address().port}`);
    const reached = Object.entries(results).filter(([, r]) => !r.startsWith('blocked') && r !== 'pending');
    assert.deepEqual(reached, [], `probes that escaped a restored kernel: ${JSON.stringify(reached)}`);
    assert.ok(Object.keys(results).length >= 15, JSON.stringify(results));
    assert.deepEqual(hits, [], 'the sentinel server saw no request');
    assert.deepEqual(bcGot, []);
    assert.deepEqual(await readImage(v.page), made, 'Python (IndexedDB probe included) did not touch the kept image');

    // Another build's image: not sent; the served one restored, and kept in its place.
    await spoilImage(v.page, 'key');
    await v.close();
    v = await visit();
    assert.ok(!v.atReady.includes(RESTORED) && v.atReady.some((l) => /another build's: the served one instead/.test(l)) &&
      v.atReady.includes("kernel: started from the server's memory snapshot"), JSON.stringify(v.atReady));
    await python(v.page);
    await waitImage(v.page, (i) => i && i.key === made.key && i.intact, 'after another build\'s image');

    // Bytes that are not the served image's: the worker refuses them, loads normally, says so.
    await spoilImage(v.page, 'bytes');
    await v.close();
    v = await visit();
    assert.ok(!v.atReady.includes(RESTORED) && v.atReady.some((l) => /memory snapshot refused: its bytes do not match the served image's sha256: loaded normally/.test(l)), JSON.stringify(v.atReady));
    await python(v.page);
    await waitImage(v.page, (i) => i && i.intact, 'after a corrupt image');

    // A cut copy with the hash of what is left (the page's record consistent): not the served image.
    await spoilImage(v.page, 'truncated');
    await v.close();
    v = await visit();
    assert.ok(!v.atReady.includes(RESTORED) && v.atReady.some((l) => /memory snapshot refused: its size is \d+, the served lock says \d+: loaded normally/.test(l)), JSON.stringify(v.atReady));
    await python(v.page);
    await waitImage(v.page, (i) => i && i.intact && i.size > 8e6, 'after a truncated image');
    await v.close();
  } finally {
    await first.ctx.close().catch(() => {});
    if (open) await open.close().catch(() => {});
    sentinel.closeAllConnections?.(); sentinel.close();
    fs.rmSync(profile, { recursive: true, force: true, maxRetries: 5 });
  }
});
