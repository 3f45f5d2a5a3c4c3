// snapshot-key.js -- the build key of memory snapshots (worker/snapshot.js), in Node: SHA-256 over
// the runtime files an image depends on and the sources of the worker and the kernel, each named
// by where it sits in a deployment (pyodide/F, worker/F, kernel/F), so the same files give the
// same key wherever they are copied (a checkout's build/www/pyodide, the copy a root orchestrator
// gives its hosts at /cerea/pyodide).  ui-adapter/build.mjs compiles the same key into the browser
// worker; the setup step (scripts/make_snapshot.mjs) writes it into the image; a Node kernel host
// computes it once per process from the files it runs (node-kernel.js).  Only files a sandboxed
// host may read are inputs (worker/*.js, kernel/*.py, the runtime): worker/host/ and ui-adapter/
// are not, as nothing in them is in an image.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

export const RUNTIME_FILES = Object.freeze(['pyodide.asm.wasm', 'pyodide.asm.mjs', 'python_stdlib.zip', 'pyodide.mjs']);

// The inputs as [name, absolute path], in the key's order.
export function keyInputs(root, pyodideDir) {
  const sources = (d, ext) => fs.readdirSync(path.join(root, d)).filter((f) => f.endsWith(ext)).sort().map((f) => [`${d}/${f}`, path.join(root, d, f)]);
  return [...RUNTIME_FILES.map((f) => [`pyodide/${f}`, path.join(pyodideDir, f)]), ...sources('worker', '.js'), ...sources('kernel', '.py')];
}

// → the 64-hex key, or '' when an input is missing (no runtime synced: no snapshots).
export function snapshotKey(root, pyodideDir) {
  let inputs;
  try { inputs = keyInputs(root, pyodideDir); } catch { return ''; }
  const h = crypto.createHash('sha256');
  for (const [name, file] of inputs) {
    let bytes;
    try { bytes = fs.readFileSync(file); } catch { return ''; }
    h.update(`${name}\0${bytes.length}\0`).update(bytes);
  }
  return h.digest('hex');
}
