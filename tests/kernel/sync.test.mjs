// sync.test.mjs -- scripts/sync_pyodide_wheels.mjs on a scratch output directory (no Pyodide
// load): wheels verified by sha256 before they are served, a mismatch refused; an operator's
// full distribution (PYODIDE_DIST_DIR) adds the packages whose files it holds, verified against
// the lock; lock entries whose file (or a dependency) is missing are pruned; PEP 503 pages,
// NOTICE and deployment.json (has / lacks with reasons) written; a second run changes nothing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const SCRIPT = path.join(ROOT, 'scripts', 'sync_pyodide_wheels.mjs');
const sha = (b) => crypto.createHash('sha256').update(b).digest('hex');

function scratch() {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'cerea-sync-'));
  const out = path.join(d, 'out'), dist = path.join(d, 'dist'), house = path.join(d, 'house');
  for (const x of [out, dist, house]) fs.mkdirSync(x);
  const numpy = Buffer.from('numpy wheel bytes'), micropip = Buffer.from('micropip wheel bytes');
  const upstream = { info: { python: '3.14.2' }, packages: {
    numpy: { name: 'numpy', version: '2.0', file_name: 'numpy-2.0-cp314.whl', sha256: sha(numpy), imports: ['numpy'], depends: [], package_type: 'package', install_dir: 'site' },
    pandas: { name: 'pandas', version: '2.2', file_name: 'pandas-2.2-cp314.whl', sha256: 'f'.repeat(64), imports: ['pandas'], depends: ['numpy'], package_type: 'package', install_dir: 'site' },
    micropip: { name: 'micropip', version: '0.11', file_name: 'micropip-0.11-py3-none-any.whl', sha256: sha(micropip), imports: ['micropip'], depends: ['missing-dep'], package_type: 'package', install_dir: 'site' },
  } };
  fs.writeFileSync(path.join(out, 'pyodide-lock.upstream.json'), JSON.stringify(upstream));
  fs.writeFileSync(path.join(dist, 'pyodide-lock.json'), JSON.stringify(upstream));
  fs.writeFileSync(path.join(dist, 'numpy-2.0-cp314.whl'), numpy);
  fs.writeFileSync(path.join(dist, 'micropip-0.11-py3-none-any.whl'), micropip);
  const whl = Buffer.from('PK fake openpyxl wheel');
  fs.writeFileSync(path.join(house, 'openpyxl-3.0.9-py3-none-any.whl'), whl);
  const list = [{ name: 'openpyxl', version: '3.0.9', file_name: 'openpyxl-3.0.9-py3-none-any.whl', sha256: sha(whl), source: 'test', licence: 'MIT', imports: ['openpyxl'], depends: [] }];
  fs.writeFileSync(path.join(house, 'wheels.json'), JSON.stringify(list));
  return { d, out, dist, house, list };
}
const runSync = (env) => spawnSync(process.execPath, [SCRIPT], { env: { ...process.env, ...env }, encoding: 'utf8' });

test('wheels and a full distribution are verified, copied and merged; missing files and broken dependencies pruned', () => {
  const s = scratch();
  const env = { PYODIDE_OUT_DIR: s.out, WHEEL_LIST: path.join(s.house, 'wheels.json'), PYODIDE_DIST_DIR: s.dist };
  const r = runSync(env);
  assert.equal(r.status, 0, r.stderr);
  const lock = JSON.parse(fs.readFileSync(path.join(s.out, 'pyodide-lock.json'), 'utf8'));
  assert.deepEqual(Object.keys(lock.packages).sort(), ['numpy', 'openpyxl']);
  assert.equal(lock.packages.openpyxl.file_name, 'wheels/openpyxl-3.0.9-py3-none-any.whl');
  assert.ok(fs.existsSync(path.join(s.out, 'numpy-2.0-cp314.whl')));
  assert.ok(fs.existsSync(path.join(s.out, 'wheels', 'openpyxl-3.0.9-py3-none-any.whl')));
  const page = fs.readFileSync(path.join(s.out, 'simple', 'openpyxl', 'index.html'), 'utf8');
  assert.match(page, new RegExp(`href="../../wheels/openpyxl-3.0.9-py3-none-any.whl#sha256=${s.list[0].sha256}"`));
  assert.match(fs.readFileSync(path.join(s.out, 'wheels', 'NOTICE.txt'), 'utf8'), /openpyxl 3\.0\.9\n\s+licence: MIT/);
  const dep = JSON.parse(fs.readFileSync(path.join(s.out, 'deployment.json'), 'utf8'));
  assert.deepEqual(dep.has.map((h) => h.name).sort(), ['numpy', 'openpyxl']);
  const pandas = dep.lacks.find((l) => l.name === 'pandas');
  assert.match(pandas.reason, /PYODIDE_DIST_DIR/);
  assert.match(dep.lacks.find((l) => l.name === 'python-docx').reason, /lxml/);
  assert.match(r.stdout, /guide packages lacking: pandas/);
  // idempotent
  const again = runSync(env);
  assert.equal(again.status, 0);
  assert.match(again.stdout, /0 files copied, 0 index pages written, lock unchanged/);
  fs.rmSync(s.d, { recursive: true });
});

test('a wheel whose bytes do not match the list\'s sha256 is refused (nothing served)', () => {
  const s = scratch();
  fs.writeFileSync(path.join(s.house, 'openpyxl-3.0.9-py3-none-any.whl'), 'tampered');
  const r = runSync({ PYODIDE_OUT_DIR: s.out, WHEEL_LIST: path.join(s.house, 'wheels.json'), PYODIDE_DIST_DIR: '' });
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /sha256 mismatch/);
  assert.ok(!fs.existsSync(path.join(s.out, 'wheels', 'openpyxl-3.0.9-py3-none-any.whl')));
  fs.rmSync(s.d, { recursive: true });
});

test('a distribution file that does not match the lock\'s sha256 is refused', () => {
  const s = scratch();
  fs.writeFileSync(path.join(s.dist, 'numpy-2.0-cp314.whl'), 'not numpy');
  const r = runSync({ PYODIDE_OUT_DIR: s.out, WHEEL_LIST: path.join(s.house, 'wheels.json'), PYODIDE_DIST_DIR: s.dist });
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /sha256 mismatch/);
  assert.ok(!fs.existsSync(path.join(s.out, 'numpy-2.0-cp314.whl')));
  fs.rmSync(s.d, { recursive: true });
});

test('build_wheels.py is deterministic: a rebuild gives the same sha256 (the sync stays idempotent)', () => {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'cerea-wheels-'));
  execFileSync('python3', [path.join(ROOT, 'scripts', 'build_wheels.py'), '--out', d]);
  const a = JSON.parse(fs.readFileSync(path.join(d, 'wheels.json'), 'utf8'));
  const out = execFileSync('python3', [path.join(ROOT, 'scripts', 'build_wheels.py'), '--out', d], { encoding: 'utf8' });
  assert.match(out, /\(0 rebuilt\)/);
  const b = JSON.parse(fs.readFileSync(path.join(d, 'wheels.json'), 'utf8'));
  assert.deepEqual(a.map((w) => w.sha256), b.map((w) => w.sha256));
  for (const w of a) {
    const names = execFileSync('python3', ['-c', `import zipfile,sys; print("\\n".join(zipfile.ZipFile(sys.argv[1]).namelist()))`, path.join(d, w.file_name)], { encoding: 'utf8' });
    assert.match(names, /\.dist-info\/METADATA/);
    assert.match(names, /\.dist-info\/WHEEL/);
    assert.match(names, /\.dist-info\/RECORD/);
    assert.doesNotMatch(names, /__pycache__|\.pyc/);
  }
  fs.rmSync(d, { recursive: true });
});
