// make_snapshot.mjs -- the served memory snapshot (worker/snapshot.js): a Node kernel of this
// checkout (worker/node-worker.js over worker/core.js, the same code that hosts every kernel)
// loads the synced runtime in build/www/pyodide/ and takes the image exactly as a browser kernel
// does (init's makeSnapshot: the heap of a runtime with the kernel's modules imported and nothing
// of ours run), which is written
// beside the runtime as cerea-snapshot-<key>.bin with its header (the build key), precompressed
// (.br, .gz: browsers take those), and listed in the served lock (pyodide-lock.json, field
// cerea_snapshot: file name, sha256, key, size).  Images of other builds are removed.
// tests/kernel/snapshot.test.mjs proves that the image restores in Node and in Chromium.
//
// Idempotent and quick when nothing changed: the key is the hash of every input (the runtime's
// files, the worker's and the kernel's sources), so an image whose header holds this key is this
// build's and is kept; only the lock entry is written again (scripts/sync_pyodide_wheels.mjs
// rewrites the lock before this runs).  Run by scripts/setup.d/55-snapshot.sh.
//
//   node scripts/make_snapshot.mjs [--force]
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { newNodeKernel, PYODIDE_DIR, ROOT, buildKey } from '../worker/node-kernel.js';
import { EVENT } from '../worker/protocol.js';
import { LOCK_FIELD, fileName, imageKey, wrapImage } from '../worker/snapshot.js';

const dir = PYODIDE_DIR;
const lockFile = path.join(dir, 'pyodide-lock.json');
const key = buildKey(dir);
if (!key || !fs.existsSync(lockFile)) {
  console.error('make_snapshot: the runtime is not synced into build/www/pyodide/ (scripts/sync_pyodide.mjs runs first)');
  process.exit(1);
}
const name = fileName(key);
const file = path.join(dir, name);
const sha256 = (b) => crypto.createHash('sha256').update(b).digest('hex');

function headerKey(f) {
  try {
    const fd = fs.openSync(f, 'r');
    const b = Buffer.alloc(256);
    fs.readSync(fd, b, 0, 256, 0);
    fs.closeSync(fd);
    return imageKey(new Uint8Array(b.buffer, b.byteOffset, b.length)).key || null;
  } catch { return null; }
}

async function make() {
  const t0 = Date.now();
  const k = newNodeKernel({ restore: false, init: { makeSnapshot: key }, loadTimeoutMs: 600000 });
  let image = null;
  k.onEvent((e) => { if (e.event === EVENT.SNAPSHOT && e.key === key) image = e.bytes; });
  try {
    const info = await k.ready;
    if (info.snapshot !== 'made' || !(image instanceof Uint8Array)) throw new Error(`the kernel made no image (snapshot: ${info.snapshot})`);
  } finally { k.terminate('cancelled'); }
  const bytes = wrapImage(key, image);
  // Written under a temporary name, renamed into place: a reader never sees half an image.
  const tmp = `${file}.tmp`;
  fs.writeFileSync(tmp, bytes);
  fs.renameSync(tmp, file);
  console.log(`make_snapshot: ${name} made in ${((Date.now() - t0) / 1000).toFixed(1)} s (${(bytes.length / 1048576).toFixed(1)} MB)`);
}

const fresh = !process.argv.includes('--force') && headerKey(file) === key;
if (!fresh) await make();
else console.log(`make_snapshot: ${name} is this build's (key ${key.slice(0, 16)}…): kept`);

// The compressed copies browsers are sent (the server picks them by Accept-Encoding), remade
// when older than the image.
const bytes = fs.readFileSync(file);
const stale = (f) => !fs.existsSync(f) || fs.statSync(f).mtimeMs < fs.statSync(file).mtimeMs;
if (stale(`${file}.gz`)) fs.writeFileSync(`${file}.gz`, zlib.gzipSync(bytes, { level: 9 }));
if (stale(`${file}.br`)) {
  fs.writeFileSync(`${file}.br`, zlib.brotliCompressSync(bytes, { params: {
    [zlib.constants.BROTLI_PARAM_QUALITY]: 9, [zlib.constants.BROTLI_PARAM_SIZE_HINT]: bytes.length } }));
}

// Images of other builds go (a page of an older build asks for its own file name, which then
// answers 404: that page loads normally).
for (const f of fs.readdirSync(dir)) {
  if (/^cerea-snapshot-[0-9a-f]{16}\.bin(\.br|\.gz|\.tmp)?$/.test(f) && !f.startsWith(name)) fs.rmSync(path.join(dir, f));
}

// How many bytes of each encoding travel per MiB of the image (cumulative, one figure per MiB):
// a browser reading the decoded stream tells from it how much of the transfer is done (the heap
// compresses very unevenly: its first MiB are mostly zeros), and so how long the rest will take.
// Each MiB compressed alone, scaled to the real file's size: an estimate, which is all it needs.
function profile(compress, total) {
  const MIB = 1048576, sizes = [];
  for (let at = 0; at < bytes.length; at += MIB) sizes.push(compress(bytes.subarray(at, at + MIB)).length);
  const sum = sizes.reduce((a, b) => a + b, 0);
  let run = 0;
  return sizes.map((n) => Math.round((run += n) * total / sum));
}
const lock = JSON.parse(fs.readFileSync(lockFile, 'utf8'));
const old = lock[LOCK_FIELD];
const fastGz = (b) => zlib.gzipSync(b, { level: 1 });
const fastBr = (b) => zlib.brotliCompressSync(b, { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 1 } });
const hash = sha256(bytes);
const wire = old && old.sha256 === hash && old.wire ? old.wire : {
  gzip: profile(fastGz, fs.statSync(`${file}.gz`).size), br: profile(fastBr, fs.statSync(`${file}.br`).size) };
const entry = { file_name: name, sha256: hash, key, size: bytes.length, wire };
if (JSON.stringify(lock[LOCK_FIELD]) !== JSON.stringify(entry)) {
  lock[LOCK_FIELD] = entry;
  fs.writeFileSync(`${lockFile}.tmp`, JSON.stringify(lock, null, 1) + '\n');
  fs.renameSync(`${lockFile}.tmp`, lockFile);
}
console.log(`make_snapshot: listed in ${path.relative(ROOT, lockFile)} (sha256 ${entry.sha256.slice(0, 16)}…, ` +
  `${(bytes.length / 1048576).toFixed(1)} MB, br ${(fs.statSync(`${file}.br`).size / 1048576).toFixed(1)} MB)`);
