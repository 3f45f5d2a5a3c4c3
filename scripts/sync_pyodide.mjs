// sync_pyodide.mjs -- copies the Pyodide runtime from the pinned npm package (node_modules/pyodide)
// into the served static tree build/www/pyodide/, writes NOTICE.txt with Pyodide's licence and
// attribution, and precompresses the large files (FILE.gz, FILE.br) so the server can send the
// compressed variant to clients that accept it.  Idempotent: unchanged files are not rewritten.
//
// The extra wheels (office libraries) and the merged lock file are added by
// scripts/sync_pyodide_wheels.mjs, which runs after this one.
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const src = path.join(root, 'node_modules', 'pyodide');
const dst = path.join(root, 'build', 'www', 'pyodide');

if (!fs.existsSync(path.join(src, 'package.json'))) {
  console.error('sync_pyodide: node_modules/pyodide is missing: run `npm ci` (scripts/setup.sh) first');
  process.exit(1);
}
const version = JSON.parse(fs.readFileSync(path.join(src, 'package.json'), 'utf8')).version;
fs.mkdirSync(dst, { recursive: true });

// The runtime proper.  Source maps, type declarations and the demo consoles are not served.
const files = ['pyodide.mjs', 'pyodide.js', 'pyodide.asm.mjs', 'pyodide.asm.wasm', 'python_stdlib.zip',
  'pyodide-lock.json', 'package.json'];
const compress = new Set(['pyodide.asm.wasm', 'python_stdlib.zip', 'pyodide.asm.mjs', 'pyodide.mjs',
  'pyodide.js', 'pyodide-lock.json']);

let copied = 0, compressed = 0;
function fresh(out, input) {
  return fs.existsSync(out) && fs.statSync(out).mtimeMs >= fs.statSync(input).mtimeMs;
}
for (const f of files) {
  const from = path.join(src, f);
  const to = path.join(dst, f === 'pyodide-lock.json' ? 'pyodide-lock.upstream.json' : f);
  if (!fs.existsSync(from)) { console.error(`sync_pyodide: ${f} missing from the npm package`); process.exit(1); }
  if (!fresh(to, from)) { fs.copyFileSync(from, to); copied++; }
}
// Until the wheel sync merges its wheels in, the served lock is the upstream one.
const lock = path.join(dst, 'pyodide-lock.json');
if (!fs.existsSync(lock)) fs.copyFileSync(path.join(dst, 'pyodide-lock.upstream.json'), lock);

export function precompress(file) {
  let n = 0;
  const gz = file + '.gz', br = file + '.br';
  if (!fresh(gz, file)) {
    fs.writeFileSync(gz, zlib.gzipSync(fs.readFileSync(file), { level: 9 })); n++;
  }
  if (!fresh(br, file)) {
    fs.writeFileSync(br, zlib.brotliCompressSync(fs.readFileSync(file), {
      params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 9 } })); n++;
  }
  return n;
}
for (const f of compress) {
  const p = path.join(dst, f === 'pyodide-lock.json' ? 'pyodide-lock.upstream.json' : f);
  compressed += precompress(p);
}

fs.writeFileSync(path.join(dst, 'NOTICE.txt'), `Pyodide ${version}
https://pyodide.org -- https://github.com/pyodide/pyodide

These files are Pyodide's runtime, taken unmodified from the npm package "pyodide@${version}"
and served as static files: pyodide.mjs, pyodide.js, pyodide.asm.mjs, pyodide.asm.wasm,
python_stdlib.zip, pyodide-lock.json (the lock is merged with this deployment's extra wheels,
see wheels/NOTICE.txt).  The .gz and .br files are compressed copies of the same bytes.

Pyodide is distributed under the Mozilla Public License 2.0 (MPL-2.0),
https://www.mozilla.org/en-US/MPL/2.0/ .  Its source code is available at the address above.
Copyright (c) 2019-2026 Pyodide contributors and Mozilla.

Pyodide includes CPython (Python Software Foundation License) and code compiled with
Emscripten (MIT / University of Illinois/NCSA licence); their licences apply to those parts.
`);
console.log(`sync_pyodide: pyodide ${version} -> ${path.relative(root, dst)} (${copied} copied, ${compressed} compressed)`);
