// browser.test.mjs -- the same kernel in a real browser worker: the app's worker entry
// (ui-adapter/src/kernel-worker.js as ui-adapter/build.mjs bundles it into build/www/worker/, the
// kernel's Python inside) as a module Web Worker in Debian's Chromium (playwright-core, never a
// downloaded browser), driven by worker/kernel-client.js from the page, served from 127.0.0.1 with
// COOP/COEP (cross-origin isolation, so the interrupt buffer is shared) and the worker's own CSP
// (connect-src the runtime's path only).  Checks what only a real WorkerGlobalScope shows: the lock-down along its
// prototype chain (fetch, importScripts, indexedDB, caches live on WorkerGlobalScope.prototype),
// wheels loaded through the guarded fetch from /pyodide/, eval refused by the CSP, SharedArrayBuffer
// interrupts, download progress events.  The chat page's own end-to-end tests (stage 60) build on the same core.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT, PYODIDE_DIR } from '../../worker/node-kernel.js';

const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const WORKER_DIR = path.join(ROOT, 'build', 'www', 'worker');
const skip = !fs.existsSync(CHROMIUM) ? `no browser at ${CHROMIUM} (Debian package chromium, installed by setup)`
  : !fs.existsSync(path.join(WORKER_DIR, 'kernel-worker.js')) ? `no ${WORKER_DIR}/kernel-worker.js: run scripts/setup.sh (ui-adapter/build.mjs bundles it)` : false;
// /worker/: the bundled entry as the app serves it; /src/worker/: the controller's modules, for the page.
const MAP = [['/pyodide/', PYODIDE_DIR + '/'], ['/worker/', WORKER_DIR + '/'], ['/src/worker/', path.join(ROOT, 'worker') + '/']];
const TYPES = { '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm', '.json': 'application/json', '.py': 'text/plain' };

let server, base, browser, page;
const hits = [];
before(async () => {
  if (skip) return;
  server = http.createServer((req, res) => {
    const u = new URL(req.url, 'http://x');
    hits.push(u.pathname);
    const h = { 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp', 'Cross-Origin-Resource-Policy': 'same-origin' };
    if (u.pathname === '/') { res.writeHead(200, { ...h, 'content-type': 'text/html' }); res.end('<!DOCTYPE html><title>kernel</title>'); return; }
    // /pyodide/tampered/: the runtime as served, but the memory image with one byte changed;
    // /pyodide/slow/: the image sent at ~1.3 MB/s (a slow link: the rest would take seconds).
    const variant = /^\/pyodide\/(tampered|slow)\//.exec(u.pathname);
    if (variant) {
      const f = path.basename(u.pathname);
      if (!fs.existsSync(path.join(PYODIDE_DIR, f))) { res.writeHead(404, h); res.end(); return; }
      const body = fs.readFileSync(path.join(PYODIDE_DIR, f));
      const image = /^cerea-snapshot-.*\.bin$/.test(f);
      if (image && variant[1] === 'tampered') body[body.length >> 1] ^= 1;
      res.writeHead(200, { ...h, 'content-type': TYPES[path.extname(f)] || 'application/octet-stream', 'content-length': body.length });
      if (!(image && variant[1] === 'slow')) { res.end(body); return; }
      let at = 0;
      const tick = setInterval(() => {
        if (res.destroyed || at >= body.length) { clearInterval(tick); res.end(); return; }
        res.write(body.subarray(at, at += 65536));
      }, 50);
      res.on('close', () => clearInterval(tick));
      return;
    }
    for (const [p, d] of MAP) {
      if (!u.pathname.startsWith(p)) continue;
      const f = path.join(d, path.normalize(u.pathname.slice(p.length)));
      if (!f.startsWith(d) || !fs.existsSync(f) || !fs.statSync(f).isFile()) break;
      const csp = p === '/worker/' ? { 'Content-Security-Policy': `default-src 'none'; script-src 'self' 'wasm-unsafe-eval'; connect-src ${base}/pyodide/` } : {};
      const body = fs.readFileSync(f);
      res.writeHead(200, { ...h, ...csp, 'content-type': TYPES[path.extname(f)] || 'application/octet-stream', 'content-length': body.length });
      res.end(body);
      return;
    }
    res.writeHead(404, h); res.end();
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${server.address().port}`;
  const { chromium } = await import('playwright-core');
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  page = await browser.newPage();
  await page.goto(base + '/');
});
after(async () => { if (browser) await browser.close(); if (server) server.close(); });

test('browser worker: loads from /pyodide/ only, lock-down clean, probes refused, wheels load, interrupt works', { skip }, async () => {
  const out = await page.evaluate(async (base) => {
    const { KernelClient } = await import(base + '/src/worker/kernel-client.js');
    const k = new KernelClient({ createWorker: () => new Worker(base + '/worker/kernel-worker.js', { type: 'module' }),
      init: { indexURL: base + '/pyodide/', packageBaseUrl: base + '/pyodide/', lockFileURL: base + '/pyodide/pyodide-lock.json',
        kernelURL: 'bundled:kernel/', deploymentURL: base + '/pyodide/deployment.json' } });
    const downloads = [];
    k.onEvent((e) => { if (e.event === 'progress' && e.stage === 'download') downloads.push([e.loaded, e.total]); });
    const info = await k.ready;
    const r = await k.run({ code: `import js, pyodide.http
print([n for n in ['XMLHttpRequest','WebSocket','importScripts','indexedDB','caches','BroadcastChannel','EventSource','postMessage','Worker'] if getattr(js, n, None) is not None])
for label, url in [('fetch', '${base}/leak'), ('fetch-api', '${base}/v1/chats'), ('fetch-up', '${base}/pyodide/../leak')]:
    try:
        await js.fetch(url); print(label, 'REACHED')
    except Exception: print(label, 'refused')
try:
    await pyodide.http.pyfetch('${base}/leak'); print('pyfetch REACHED')
except Exception: print('pyfetch refused')
try:
    js.eval('1'); print('eval REACHED')
except Exception: print('eval refused')
import xlsxwriter, openpyxl
wb = xlsxwriter.Workbook('/mnt/output/a.xlsx'); wb.add_worksheet().write(0, 0, 'hi'); wb.close()
print(openpyxl.load_workbook('/mnt/output/a.xlsx').active['A1'].value)` });
    const started = new Promise((res) => k.onEvent((e) => e.event === 'started' && res()));
    const p = k.run({ code: 'while True:\n    pass' });
    await started;
    k.interrupt();
    const r2 = await p;
    k.terminate('cancelled');
    return { downloads, lockdown: info.lockdown, interrupts: info.interrupts, stdout: r.stdout, error: r.error,
      files: r.files.map((f) => [f.name, f.kind, f.data[0]]), cancelled: r2.status, isolated: crossOriginIsolated };
  }, base);
  assert.equal(out.isolated, true);
  // One figure over the runtime's files (the wasm and the stdlib, ~12 MB): the total known from
  // the first event on, the bytes only growing, every byte in at the end.
  const [first, last] = [out.downloads[0], out.downloads.at(-1)];
  assert.ok(first && first[1] > 10e6 && out.downloads.every(([, total]) => total === first[1]), `download progress: ${JSON.stringify(out.downloads)}`);
  assert.ok(out.downloads.every(([n], i) => i === 0 || n >= out.downloads[i - 1][0]), 'the bytes only grow');
  assert.equal(last[0], last[1], 'every byte of the runtime counted');
  assert.deepEqual(out.lockdown, []);
  assert.equal(out.interrupts, true);
  assert.equal(out.error, null);
  assert.equal(out.stdout, '[]\nfetch refused\nfetch-api refused\nfetch-up refused\npyfetch refused\neval refused\nhi\n');
  assert.deepEqual(out.files, [['a.xlsx', 'file', 0x50]]);
  assert.equal(out.cancelled, 'cancelled');
  assert.ok(!hits.some((h) => h === '/leak' || h.startsWith('/v1/')), 'no probe reached the server');
  assert.ok(hits.some((h) => h.startsWith('/pyodide/wheels/')), 'wheels came through the guarded fetch');
});

test('browser worker: a memory snapshot of another build is refused (a normal load, said in a log event), and none is made for another build\'s key', { skip }, async () => {
  const out = await page.evaluate(async (base) => {
    const { KernelClient } = await import(base + '/src/worker/kernel-client.js');
    const events = [];
    const k = new KernelClient({ createWorker: () => new Worker(base + '/worker/kernel-worker.js', { type: 'module' }),
      init: { indexURL: base + '/pyodide/', packageBaseUrl: base + '/pyodide/', lockFileURL: base + '/pyodide/pyodide-lock.json',
        kernelURL: 'bundled:kernel/', snapshot: { key: 'another-build', sha256: '00', bytes: new Uint8Array(64) }, makeSnapshot: 'another-build' } });
    k.onEvent((e) => { if (e.event === 'log' || e.event === 'snapshot') events.push([e.event, e.message || '']); });
    const info = await k.ready;
    const r = await k.run({ code: 'print(6 * 7)' });
    k.terminate('cancelled');
    return { snapshot: info.snapshot, lockdown: info.lockdown, stdout: r.stdout, events };
  }, base);
  assert.equal(out.snapshot, 'refused: made by another build');
  assert.deepEqual(out.lockdown, []);
  assert.equal(out.stdout, '42\n');
  assert.deepEqual(out.events, [['log', 'memory snapshot refused: made by another build: loaded normally']]);
});

// The image setup made in Node (scripts/make_snapshot.mjs) restores in Chromium's worker as well:
// one image for every host, and the restored kernel suspends its stack (JSPI) as a loaded one does,
// though Node, which made the image, cannot.  And one byte changed in it: refused before Pyodide
// sees it, a load.
const SUSPENDING = `import asyncio, js
from pyodide.ffi import run_sync
async def main():
    await asyncio.sleep(0.01)
    return 7
print(asyncio.run(main()), run_sync(js.Promise.resolve(5)))`;
const SERVED = (() => { try { return JSON.parse(fs.readFileSync(path.join(PYODIDE_DIR, 'pyodide-lock.json'), 'utf8')).cerea_snapshot; } catch { return null; } })();
test('browser worker: the served image (made by setup in Node) restores, the lock-down intact and the progress counting it; one byte changed in it means a normal load', { skip: skip || (!SERVED && 'the served lock lists no memory snapshot: run scripts/setup.sh') }, async () => {
  const out = await page.evaluate(async ({ base, SUSPENDING }) => {
    const { KernelClient } = await import(base + '/src/worker/kernel-client.js');
    const start = async (dir) => {
      const events = [];
      const k = new KernelClient({ createWorker: () => new Worker(base + '/worker/kernel-worker.js', { type: 'module' }),
        init: { indexURL: base + dir, packageBaseUrl: base + dir, lockFileURL: base + dir + 'pyodide-lock.json',
          kernelURL: 'bundled:kernel/', servedSnapshot: { budgetMs: 600000 } } });   // a loaded machine never makes it a load
      k.onEvent((e) => { if (e.event === 'log') events.push(e.message); if (e.event === 'progress' && e.stage === 'runtime') events.push(`progress: ${e.message}`); if (e.event === 'progress' && e.stage === 'download') events.total = e.total; });
      const t0 = performance.now();
      const info = await k.ready;
      const ms = performance.now() - t0;
      const r = await k.run({ code: `import js, random
print(sum(range(10)), [n for n in ['XMLHttpRequest','WebSocket','importScripts','indexedDB','caches','postMessage'] if getattr(js, n, None) is not None])
try:
    js.eval('1'); print('eval REACHED')
except Exception: print('eval refused')
try:
    await js.fetch('${base}/leak'); print('fetch REACHED')
except Exception: print('fetch refused')` });
      // Stack switching (JSPI) from a cell's synchronous code: asyncio.run() and run_sync() of a
      // JS promise (worker/stack-switching.js: the image's word on it was Node's).
      const s = await k.run({ code: SUSPENDING });
      k.terminate('cancelled');
      return { snapshot: info.snapshot, lockdown: info.lockdown, stdout: r.stdout, events, total: events.total, ms,
        suspended: s.error ? `${s.error.type}: ${s.error.message}` : s.stdout };
    };
    return { served: await start('/pyodide/'), tampered: await start('/pyodide/tampered/') };
  }, { base, SUSPENDING });
  const { served, tampered } = out;
  assert.equal(served.snapshot, 'served', JSON.stringify(served));
  assert.deepEqual(served.lockdown, []);
  assert.equal(served.stdout, '45 []\neval refused\nfetch refused\n');
  assert.deepEqual(served.events, ["progress: restoring the Python runtime from the server's snapshot"]);
  assert.ok(served.total > SERVED.size, `the download total counts the image: ${served.total}`);
  assert.equal(served.suspended, '7 5\n', 'the restored kernel suspends its stack as a loaded one does');
  assert.equal(tampered.snapshot, 'refused: its bytes do not match the sha256 of the served lock');
  assert.equal(tampered.suspended, '7 5\n', 'the loaded kernel suspends its stack');
  assert.deepEqual(tampered.lockdown, []);
  assert.equal(tampered.stdout, served.stdout);
  assert.deepEqual(tampered.events, ["progress: restoring the Python runtime from the server's snapshot",
    'memory snapshot refused: its bytes do not match the sha256 of the served lock: loaded normally',
    'progress: loading the Python runtime (its snapshot could not be used)']);
  assert.ok(!hits.includes('/leak'), 'no probe reached the server');
  console.log(`# Chromium worker: restored from the served image in ${(served.ms / 1000).toFixed(2)} s, loaded (tampered image) in ${(tampered.ms / 1000).toFixed(2)} s`);
});

// The page's kept image is restored only as a copy of the served file (provenance: a script on
// the origin can write IndexedDB, but not bytes that hash to the served lock's sha256); a first
// visit whose link is too slow for the image gives it up and loads; asked to, a kernel that
// restored the served image hands the very file over for the page to keep.
test('browser worker: a planted kept image is refused; a link too slow for the image means a load; the served file is handed over to be kept', { skip: skip || (!SERVED && 'the served lock lists no memory snapshot: run scripts/setup.sh') }, async () => {
  const out = await page.evaluate(async ({ base, name, key }) => {
    const { KernelClient } = await import(base + '/src/worker/kernel-client.js');
    const file = new Uint8Array(await (await fetch(base + '/pyodide/' + name)).arrayBuffer());
    const hex = async (b) => Array.from(new Uint8Array(await crypto.subtle.digest('SHA-256', b)), (x) => x.toString(16).padStart(2, '0')).join('');
    const start = async (fields) => {
      const logs = [], kept = [];
      const dir = fields.dir || '/pyodide/';
      delete fields.dir;
      const k = new KernelClient({ createWorker: () => new Worker(base + '/worker/kernel-worker.js', { type: 'module' }),
        init: { indexURL: base + dir, packageBaseUrl: base + dir, lockFileURL: base + dir + 'pyodide-lock.json', kernelURL: 'bundled:kernel/', ...fields } });
      k.onEvent((e) => { if (e.event === 'log') logs.push(e.message); if (e.event === 'progress' && e.stage === 'runtime') logs.push(`progress: ${e.message}`); if (e.event === 'snapshot') kept.push(e.bytes); });
      const info = await k.ready;
      const r = await k.run({ code: 'print(6 * 7)' });
      k.terminate('cancelled');
      return { snapshot: info.snapshot, lockdown: info.lockdown, stdout: r.stdout, logs, kept: await Promise.all(kept.map(hex)) };
    };
    // A planted image: this build's key in its header, its own sha256 stored with it, not the served bytes.
    const planted = file.slice(); planted[planted.length - 7] ^= 1;
    return {
      planted: await start({ snapshot: { key, sha256: await hex(planted), bytes: planted }, servedSnapshot: true }),
      slow: await start({ dir: '/pyodide/slow/', servedSnapshot: true, makeSnapshot: key }),
      kept: await start({ servedSnapshot: { budgetMs: 600000 }, makeSnapshot: key }),
      fileSha: await hex(file),
    };
  }, { base, name: SERVED.file_name, key: SERVED.key });
  assert.equal(out.planted.snapshot, "refused: its bytes do not match the served image's sha256");
  assert.ok(out.planted.logs.includes("memory snapshot refused: its bytes do not match the served image's sha256: loaded normally"), JSON.stringify(out.planted.logs));
  assert.equal(out.planted.stdout, '42\n');
  assert.deepEqual(out.planted.lockdown, []);
  assert.match(out.slow.snapshot, /^skipped: the rest of it would take [\d.]+ s here, more than a load's 1\.5 s$/);
  assert.deepEqual(out.slow.logs.filter((l) => l.startsWith('progress')), ["progress: restoring the Python runtime from the server's snapshot",
    'progress: loading the Python runtime (faster than downloading its snapshot on this connection)']);
  assert.deepEqual(out.slow.kept, [], 'nothing to keep from a load');
  assert.equal(out.slow.stdout, '42\n');
  assert.equal(out.kept.snapshot, 'served');
  assert.deepEqual(out.kept.kept, [out.fileSha], 'the served file, as served');
  assert.equal(out.fileSha, SERVED.sha256);
});
