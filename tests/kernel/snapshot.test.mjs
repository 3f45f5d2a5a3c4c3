// snapshot.test.mjs -- the served memory snapshot (worker/snapshot.js) in Node kernels: the image
// setup made (scripts/make_snapshot.mjs, in a Node kernel of this build) restores, in the plain
// and the headless host's locked-down worker, with the lock-down complete and Python right; each
// restored kernel draws its own random numbers; the progress line says which start ran; an image
// with one byte changed, one from another build, one the lock does not vouch for, and a lock
// naming a file outside the runtime are each refused with a log line, and the kernel loads
// normally.  That the same image restores in Chromium is tests/kernel/browser.test.mjs's.
// The other kernel tests run on whichever path CEREA_KERNEL_SNAPSHOT picks (stage 30 runs both).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { newNodeKernel, PYODIDE_DIR, ROOT, buildKey } from '../../worker/node-kernel.js';
import { LOCK_FIELD, HEADER_BYTES, wrapImage } from '../../worker/snapshot.js';
import { START } from '../../worker/notes.js';
import { run } from './helpers.mjs';

const lock = JSON.parse(fs.readFileSync(path.join(PYODIDE_DIR, 'pyodide-lock.json'), 'utf8'));
const entry = lock[LOCK_FIELD];
const skip = entry ? false : 'the served lock lists no memory snapshot: run scripts/setup.sh (55-snapshot.sh makes it)';
const sha256 = (b) => crypto.createHash('sha256').update(b).digest('hex');

// A runtime folder of its own: every file of the served one linked, the image and the lock
// replaced by what `spoil` makes of them (so the build key, over the runtime's files, is the same).
const dirs = [];
function runtimeWith(spoil) {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'snapshot-test-'));
  dirs.push(d);
  for (const f of fs.readdirSync(PYODIDE_DIR)) if (f !== 'pyodide-lock.json' && f !== entry.file_name) fs.symlinkSync(path.join(PYODIDE_DIR, f), path.join(d, f));
  const image = new Uint8Array(fs.readFileSync(path.join(PYODIDE_DIR, entry.file_name)));
  const l = structuredClone(lock);
  const out = spoil(image, l[LOCK_FIELD]) || image;
  fs.writeFileSync(path.join(d, entry.file_name), out);
  fs.writeFileSync(path.join(d, 'pyodide-lock.json'), JSON.stringify(l));
  return d;
}
after(() => { for (const d of dirs) fs.rmSync(d, { recursive: true, force: true }); });

// asyncio.run() from a cell's synchronous code: Node 20 has no JSPI, so it fails at once with
// Pyodide's own error, restored or loaded alike (worker/stack-switching.js; that a kernel restored
// from this Node-made image suspends where the engine can is tests/kernel/browser.test.mjs's).
const SUSPENDING = 'import asyncio\nasync def main():\n    return 7\nprint(asyncio.run(main()))';
const NO_JSPI = typeof WebAssembly.Suspending === 'function' ? null
  : 'RuntimeError: WebAssembly stack switching not supported in this JavaScript runtime';

// A kernel's start: its info, the log lines and progress messages it sent, a run's stdout.
async function start(opts) {
  const k = newNodeKernel({ loadTimeoutMs: 120000, ...opts });
  const logs = [], progress = [];
  k.onEvent((e) => { if (e.event === 'log') logs.push(e.message); if (e.event === 'progress') progress.push(e.message); });
  try {
    const info = await k.ready;
    const r = await run(k, 'import random, sys\nprint(sum(range(10)), random.random())');
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    const [sum, rnd] = r.stdout.trim().split(' ');
    assert.equal(sum, '45');
    const s = await run(k, SUSPENDING);
    return { info, logs, progress, random: rnd, suspended: s.error ? `${s.error.type}: ${s.error.message}` : s.stdout };
  } finally { k.terminate('cancelled'); }
}

test('the served image: its lock entry names this build and its bytes', { skip }, () => {
  const bytes = fs.readFileSync(path.join(PYODIDE_DIR, entry.file_name));
  assert.equal(entry.key, buildKey());
  assert.equal(entry.sha256, sha256(bytes));
  assert.equal(entry.size, bytes.length);
  assert.ok(bytes.length > 8e6, `an image of the runtime's memory: ${bytes.length} bytes`);
  for (const ext of ['.br', '.gz']) assert.ok(fs.statSync(path.join(PYODIDE_DIR, entry.file_name + ext)).size < bytes.length / 3, `${ext} beside it`);
});

test('a Node kernel restores the served image: Python right, the progress line says so, two kernels draw different random numbers, asyncio.run() fails as in a loaded one', { skip }, async () => {
  const a = await start({ restore: true });
  const b = await start({ restore: true });
  for (const s of [a, b]) {
    assert.equal(s.info.snapshot, 'served');
    assert.deepEqual(s.logs, []);
    assert.equal(s.progress[0], START.restoring('served'));
    assert.deepEqual(s.info.lockdown, []);
    if (NO_JSPI) assert.equal(s.suspended, NO_JSPI);
  }
  assert.notEqual(a.random, b.random, 'random is seeded again after a restore');
});

test('the headless host\'s locked-down worker restores it too, with its Node lock-down complete', { skip }, async () => {
  const s = await start({ restore: true, entry: 'sandbox' });
  assert.equal(s.info.snapshot, 'served');
  assert.deepEqual(s.info.lockdown, []);
  assert.ok(s.info.node_lockdown.removed.includes('process'));
});

test('a restored kernel has the kernel modules of the image (made with them imported), a loaded one imports them', { skip }, async () => {
  const restored = await start({ restore: true });
  assert.equal(restored.info.kernel_modules, 'image');
  const loaded = await start({ restore: false });
  assert.equal(loaded.info.kernel_modules, 'source');
});

test('kernel sources other than the image\'s: the image\'s modules are dropped, these imported, with a log line', { skip }, async () => {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'snapshot-kernel-'));
  dirs.push(d);
  const src = path.join(ROOT, 'kernel');
  for (const f of fs.readdirSync(src)) if (f.endsWith('.py')) fs.copyFileSync(path.join(src, f), path.join(d, f));
  fs.appendFileSync(path.join(d, 'values.py'), '\nCEREA_TEST_MARK = "these sources"\n');
  const k = newNodeKernel({ loadTimeoutMs: 120000, restore: true, init: { kernelURL: d + '/' } });
  const logs = [];
  k.onEvent((e) => { if (e.event === 'log') logs.push(e.message); });
  try {
    const info = await k.ready;
    assert.equal(info.snapshot, 'served');
    assert.equal(info.kernel_modules, 'stale');
    assert.deepEqual(logs, ["the image's kernel modules are not these sources: imported from source"]);
    assert.deepEqual(info.lockdown, []);
    const r = await run(k, 'import cerea_kernel.values as v, cerea_kernel.runner as r\nprint(v.CEREA_TEST_MARK, r.values is v)');
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    assert.equal(r.stdout.trim(), 'these sources True');
  } finally { k.terminate('cancelled'); }
});

test('without restore (CEREA_KERNEL_SNAPSHOT=0) a kernel loads and says so; asyncio.run() fails as in a restored one', { skip }, async () => {
  const s = await start({ restore: false });
  assert.equal(s.info.snapshot, 'none');
  assert.equal(s.progress[0], START.loading());
  if (NO_JSPI) assert.equal(s.suspended, NO_JSPI);
});

const refusedThenLoaded = (s, why) => {
  assert.equal(s.info.snapshot, `refused: ${why}`);
  assert.deepEqual(s.logs, [`memory snapshot refused: ${why}: loaded normally`]);
  assert.equal(s.progress[0], START.restoring('served'));
  assert.ok(s.progress.includes(START.loadingInstead()), JSON.stringify(s.progress));
  assert.deepEqual(s.info.lockdown, []);
};

test('an image with one byte changed is refused (its sha256 is not the lock\'s) and the kernel loads normally', { skip }, async () => {
  const d = runtimeWith((image) => { image[HEADER_BYTES + (image.length >> 1)] ^= 1; });
  refusedThenLoaded(await start({ restore: true, pyodideDir: d }), 'its bytes do not match the sha256 of the served lock');
  // the same in the headless host's worker
  refusedThenLoaded(await start({ restore: true, entry: 'sandbox', pyodideDir: d }), 'its bytes do not match the sha256 of the served lock');
});

test('an image of another build is refused even when the lock vouches for its bytes', { skip }, async () => {
  const d = runtimeWith((image, e) => {
    const other = wrapImage('0'.repeat(64), image.subarray(HEADER_BYTES));
    e.sha256 = sha256(other); e.size = other.length;
    return other;
  });
  refusedThenLoaded(await start({ restore: true, pyodideDir: d }), 'made by another build');
});

test('a lock naming a file outside the runtime is refused', { skip }, async () => {
  const d = runtimeWith((image, e) => { e.file_name = '../pyodide/' + e.file_name; });
  refusedThenLoaded(await start({ restore: true, pyodideDir: d }), 'the served lock names no file beside the runtime');
});
