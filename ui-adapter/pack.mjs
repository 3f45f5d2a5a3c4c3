// pack.mjs -- makes the ui-adapter library an npm package: build/ui-adapter/cerea-ui-adapter-V.tgz
// (run by scripts/setup.d/70-package.sh, after the app build; idempotent).
//
// What goes in: the library's sources as they are (ESM, unbundled: the embedding page's bundler
// takes them), laid out as in this tree so their relative imports hold -- lib/ui-adapter/src/ and
// the worker/ modules they import, lib/worker/ -- each with the TypeScript declarations tsc
// generates from its JSDoc (ui-adapter/tsconfig.json); dist/kernel-worker.js, the kernel worker as
// built for our own pages (ui-adapter/build.mjs: worker/core.js with kernel/*.py inside), for a
// deployment that serves the worker itself; package.json (ui-adapter/package.json: name, version,
// `exports`) and a README.  Which sources: exactly those tsc emitted a declaration for, i.e. the
// import closure of src/index.js.  The Pyodide runtime is not in it: the page loads it from
// /pyodide/ on its own origin (docs/ui-adapter.md, "Embedding it": serve ours behind your proxy).
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const out = path.join(root, 'build', 'ui-adapter');
const pkg = path.join(out, 'package');
const meta = JSON.parse(fs.readFileSync(path.join(root, 'ui-adapter', 'package.json'), 'utf8'));

// Nothing to do when the inputs are what the last tarball was made from (setup runs on every
// `scripts/run.sh`; tsc takes half a minute).
const inputs = crypto.createHash('sha256');
for (const dir of ['ui-adapter/src', 'worker']) {
  for (const f of fs.readdirSync(path.join(root, dir)).sort()) if (f.endsWith('.js')) inputs.update(f).update(fs.readFileSync(path.join(root, dir, f)));
}
for (const f of ['ui-adapter/package.json', 'ui-adapter/tsconfig.json', 'ui-adapter/pack.mjs', 'build/www/worker/kernel-worker.js']) {
  if (fs.existsSync(path.join(root, f))) inputs.update(f).update(fs.readFileSync(path.join(root, f)));
}
const stamp = path.join(out, 'inputs.sha256'), digest = inputs.digest('hex');
const tarball = path.join(out, `cerea-ui-adapter-${meta.version}.tgz`);
if (fs.existsSync(tarball) && fs.existsSync(stamp) && fs.readFileSync(stamp, 'utf8') === digest) {
  console.log(`pack: build/ui-adapter/${path.basename(tarball)} is up to date`);
  process.exit(0);
}

fs.rmSync(pkg, { recursive: true, force: true });
fs.mkdirSync(pkg, { recursive: true });
// Declarations (tsc writes them under package/lib, mirroring the tree from the repository root).
execFileSync(path.join(root, 'node_modules', '.bin', 'tsc'), ['-p', path.join(root, 'ui-adapter', 'tsconfig.json')], { stdio: 'inherit' });
const declared = [];
const walk = (d) => { for (const f of fs.readdirSync(d)) { const p = path.join(d, f); if (fs.statSync(p).isDirectory()) walk(p); else if (f.endsWith('.d.ts')) declared.push(p); } };
walk(path.join(pkg, 'lib'));
for (const d of declared) {
  const rel = path.relative(path.join(pkg, 'lib'), d).replace(/\.d\.ts$/, '.js');
  fs.copyFileSync(path.join(root, rel), path.join(pkg, 'lib', rel));
}
const worker = path.join(root, 'build', 'www', 'worker', 'kernel-worker.js');
if (!fs.existsSync(worker)) throw new Error(`${worker} is missing: run node ui-adapter/build.mjs first`);
fs.mkdirSync(path.join(pkg, 'dist'));
fs.copyFileSync(worker, path.join(pkg, 'dist', 'kernel-worker.js'));
fs.copyFileSync(path.join(root, 'ui-adapter', 'package.json'), path.join(pkg, 'package.json'));
fs.writeFileSync(path.join(pkg, 'README.md'), `# ${meta.name}\n\n${meta.description}\n\n` +
  'The quickstart, the API and how to serve the kernel worker and the Python runtime are in the\n' +
  "cerea-sandbox repository's docs/ui-adapter.md (\"Embedding it\").\n");

for (const f of fs.readdirSync(out)) if (f.endsWith('.tgz')) fs.rmSync(path.join(out, f));
const name = execFileSync('npm', ['pack', '--silent', '--pack-destination', out], { cwd: pkg, encoding: 'utf8' }).trim().split('\n').pop();
fs.writeFileSync(stamp, digest);
console.log(`pack: ${meta.name}@${meta.version} -> build/ui-adapter/${name} (${declared.length} modules with declarations)`);
