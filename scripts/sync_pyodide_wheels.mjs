// sync_pyodide_wheels.mjs -- adds this deployment's packages to the served runtime
// (build/www/pyodide/, made by scripts/sync_pyodide.mjs) and writes the merged lock file.
//
//  1. The wheel list (default wheelhouse/wheels.json from scripts/build_wheels.py, or WHEEL_LIST):
//     [{name, version, file_name, sha256, source, licence, imports, depends}].  Each wheel's sha256
//     is verified here (Pyodide in Node does not check it), then it is copied to
//     build/www/pyodide/wheels/ and listed in the lock with file_name `wheels/<file>`.
//  2. An operator-supplied full Pyodide distribution (PYODIDE_DIST_DIR: the unpacked pyodide/
//     folder of the release archive pyodide-<version>.tar.bz2 of the same version as the npm
//     package, holding its pyodide-lock.json and the package files): every package file present
//     there is verified against the sha256 of the lock that came with the pinned npm package and
//     copied beside pyodide-lock.json (numpy, pandas, matplotlib, micropip, lxml, ...).  A folder
//     without a lock, of another Pyodide version, or holding none of the lock's files stops the
//     sync with a message saying so (docs/configuration.md, "Python packages").
//  3. build/www/pyodide/pyodide-lock.json = the upstream lock (pyodide-lock.upstream.json) with
//     only the packages whose files are served (and whose dependencies are), plus the wheels.
//     A package listed but absent would make loadPackage fail at run time; pruned, its import
//     raises the ordinary ModuleNotFoundError and the kernel adds a note from deployment.json.
//  4. A PEP 503 page simple/<name>/index.html per served package (micropip's index), and
//     wheels/NOTICE.txt with each added wheel's source and licence.
//  5. deployment.json: which of the guide's packages this deployment has and lacks (with the
//     reason), read by the kernel at start-up; the same report is printed.
// Idempotent: unchanged files are not rewritten.  It never touches the network.
//
// usage: node scripts/sync_pyodide_wheels.mjs   (env: WHEEL_LIST, PYODIDE_DIST_DIR)
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dst = process.env.PYODIDE_OUT_DIR || path.join(root, 'build', 'www', 'pyodide');
const wheelList = process.env.WHEEL_LIST || path.join(root, 'wheelhouse', 'wheels.json');
const distDir = process.env.PYODIDE_DIST_DIR || '';

// The guide's packages (seeds/000: "What you can do"), their import names, and why each may lack.
export const GUIDE = [
  { name: 'numpy', imports: ['numpy'], needs: 'compiled: numpy' },
  { name: 'pandas', imports: ['pandas'], needs: 'compiled: numpy, pandas' },
  { name: 'matplotlib', imports: ['matplotlib', 'pylab', 'mpl_toolkits'], needs: 'compiled: numpy, pillow, kiwisolver, contourpy' },
  { name: 'python-docx', imports: ['docx'], needs: 'compiled dependency lxml' },
  { name: 'openpyxl', imports: ['openpyxl'], needs: 'pure Python' },
  { name: 'pypdf', imports: ['pypdf'], needs: 'pure Python' },
  { name: 'python-pptx', imports: ['pptx'], needs: 'compiled dependencies lxml, pillow' },
  { name: 'xlsxwriter', imports: ['xlsxwriter'], needs: 'pure Python' },
  { name: 'reportlab', imports: ['reportlab'], needs: 'compiled dependency pillow' },
  { name: 'seaborn', imports: ['seaborn'], needs: 'compiled dependencies numpy, pandas, matplotlib' },
  { name: 'micropip', imports: ['micropip'], needs: 'the wheel from a full Pyodide distribution' },
];

const sha256 = (file) => crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');
function writeIfChanged(file, data) {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  if (fs.existsSync(file) && fs.readFileSync(file).equals(Buffer.from(data))) return false;
  fs.writeFileSync(file, data);
  return true;
}
function copyVerified(from, to, want) {
  const got = sha256(from);
  if (got !== want) throw new Error(`sha256 mismatch for ${from}: list says ${want}, file is ${got}`);
  if (fs.existsSync(to) && fs.statSync(to).size === fs.statSync(from).size && sha256(to) === want) return false;
  fs.mkdirSync(path.dirname(to), { recursive: true });
  fs.copyFileSync(from, to);
  return true;
}
const norm = (n) => n.toLowerCase().replace(/[-_.]+/g, '-');

function main() {
  const upstreamFile = path.join(dst, 'pyodide-lock.upstream.json');
  if (!fs.existsSync(upstreamFile)) {
    console.error('sync_pyodide_wheels: run scripts/sync_pyodide.mjs first (no pyodide-lock.upstream.json)');
    process.exit(1);
  }
  const upstream = JSON.parse(fs.readFileSync(upstreamFile, 'utf8'));
  let copied = 0;

  // 2. the operator's full distribution
  let fromDist = 0;
  if (distDir) {
    const distLockFile = path.join(distDir, 'pyodide-lock.json');
    if (!fs.existsSync(distLockFile))
      throw new Error(`PYODIDE_DIST_DIR=${distDir} has no pyodide-lock.json: it must be the unpacked pyodide/ folder of the full distribution (pyodide-<version>.tar.bz2)`);
    const distLock = JSON.parse(fs.readFileSync(distLockFile, 'utf8'));
    for (const k of ['version', 'abi_version', 'platform', 'python'])
      if (distLock.info?.[k] && upstream.info?.[k] && distLock.info[k] !== upstream.info[k])
        throw new Error(`PYODIDE_DIST_DIR=${distDir} is for ${k} ${distLock.info[k]}, the served runtime is ${upstream.info[k]}: use the full distribution of the same Pyodide release as the npm package`);
    for (const p of Object.values(upstream.packages)) {
      const from = path.join(distDir, p.file_name);
      if (!fs.existsSync(from)) continue;
      fromDist++;
      if (copyVerified(from, path.join(dst, p.file_name), p.sha256)) copied++;
    }
    if (fromDist === 0)
      throw new Error(`PYODIDE_DIST_DIR=${distDir} holds none of the lock's package files: is it the full distribution (pyodide-<version>.tar.bz2), not the core one?`);
  }

  // 3. prune upstream entries whose file is not served, then those whose dependencies are gone
  const packages = {};
  for (const [k, p] of Object.entries(upstream.packages))
    if (fs.existsSync(path.join(dst, p.file_name))) packages[k] = p;

  // 1. the wheel list
  const wheels = fs.existsSync(wheelList) ? JSON.parse(fs.readFileSync(wheelList, 'utf8')) : [];
  if (!fs.existsSync(wheelList)) console.warn(`sync_pyodide_wheels: no wheel list at ${path.relative(root, wheelList)} (run scripts/build_wheels.py)`);
  const listDir = path.dirname(wheelList);
  for (const w of wheels) {
    for (const k of ['name', 'version', 'file_name', 'sha256', 'source', 'licence'])
      if (!w[k]) throw new Error(`wheel list entry ${JSON.stringify(w.name)} lacks ${k}`);
    const from = path.isAbsolute(w.file_name) ? w.file_name : path.join(listDir, w.file_name);
    const base = path.basename(w.file_name);
    if (copyVerified(from, path.join(dst, 'wheels', base), w.sha256)) copied++;
    const name = norm(w.name);
    packages[name] = {
      name, version: w.version, file_name: `wheels/${base}`, install_dir: 'site', sha256: w.sha256,
      package_type: 'package', imports: w.imports || [name.replace(/-/g, '_')], depends: (w.depends || []).map(norm),
      unvendored_tests: false, shared_library: false,
    };
  }
  for (let changed = true; changed;) {
    changed = false;
    for (const [k, p] of Object.entries(packages))
      if ((p.depends || []).some((d) => !packages[d])) { delete packages[k]; changed = true; }
  }
  const lock = { ...upstream, packages };
  const wroteLock = writeIfChanged(path.join(dst, 'pyodide-lock.json'), JSON.stringify(lock, null, 1) + '\n');

  // 4. PEP 503 pages and the NOTICE
  let pages = 0;
  const simple = path.join(dst, 'simple');
  const index = [];
  for (const p of Object.values(packages).sort((a, b) => a.name.localeCompare(b.name))) {
    if (p.package_type !== 'package' || !p.file_name.endsWith('.whl')) continue;
    const n = norm(p.name);
    index.push(`<a href="${n}/">${n}</a><br>`);
    const href = `../../${p.file_name}#sha256=${p.sha256}`;
    if (writeIfChanged(path.join(simple, n, 'index.html'), `<!DOCTYPE html>\n<html><head><meta name="pypi:repository-version" content="1.0"><title>Links for ${n}</title></head><body>\n<h1>Links for ${n}</h1>\n<a href="${href}">${path.basename(p.file_name)}</a><br>\n</body></html>\n`)) pages++;
  }
  writeIfChanged(path.join(simple, 'index.html'), `<!DOCTYPE html>\n<html><head><meta name="pypi:repository-version" content="1.0"><title>Simple index</title></head><body>\n${index.join('\n')}\n</body></html>\n`);
  const notice = ['Extra wheels served by this deployment, beside Pyodide\'s own packages (see ../NOTICE.txt).',
    'Each is unmodified upstream code repackaged as a wheel; its licence text is inside the wheel', '(<dist>.dist-info/LICENSE).', ''];
  for (const w of wheels) notice.push(`${path.basename(w.file_name)}\n  package: ${w.name} ${w.version}\n  licence: ${w.licence}\n  source:  ${w.source}\n  sha256:  ${w.sha256}\n`);
  writeIfChanged(path.join(dst, 'wheels', 'NOTICE.txt'), notice.join('\n'));

  // 5. has / lacks
  const has = [], lacks = [];
  for (const g of GUIDE) {
    const p = packages[g.name];
    if (p) has.push({ name: g.name, version: p.version, imports: g.imports, source: p.file_name.startsWith('wheels/') ? 'wheel list' : 'pyodide distribution' });
    else {
      const inUpstream = !!upstream.packages[g.name];
      const reason = inUpstream
        ? `part of Pyodide's distribution but not shipped here (${g.needs}); an operator adds it with PYODIDE_DIST_DIR`
        : `not shipped by this deployment (${g.needs}; needs a full Pyodide distribution)`;
      lacks.push({ name: g.name, imports: g.imports, reason });
    }
  }
  writeIfChanged(path.join(dst, 'deployment.json'), JSON.stringify({ pyodide: upstream.info, has, lacks,
    served_packages: Object.keys(packages).length }, null, 1) + '\n');
  console.log(`sync_pyodide_wheels: ${Object.keys(packages).length} packages served (${copied} files copied, ${pages} index pages written, lock ${wroteLock ? 'rewritten' : 'unchanged'})`);
  if (distDir) console.log(`  from PYODIDE_DIST_DIR: ${fromDist} package files, each matching the sha256 of the pinned lock`);
  console.log(`  guide packages present: ${has.map((h) => `${h.name} ${h.version}`).join(', ') || 'none'}`);
  console.log(`  guide packages lacking: ${lacks.map((l) => l.name).join(', ') || 'none'}${lacks.length && !distDir ? ' (set PYODIDE_DIST_DIR to a full Pyodide distribution to add them)' : ''}`);
}

try {
  main();
} catch (e) {
  console.error(`sync_pyodide_wheels: ${e.message}`);
  process.exit(1);
}
