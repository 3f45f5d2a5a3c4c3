// packages.test.mjs -- imports resolved before the run (guide: "Installing more packages"): the
// office wheels load by themselves from imports (openpyxl, XlsxWriter, pypdf round trips), a
// package this deployment lacks raises the ordinary ModuleNotFoundError plus a note naming the
// reason, an unknown module raises ModuleNotFoundError with no note, and a package is installed
// once per interpreter.  Needs the wheel sync (scripts/setup.d/50-wheels.sh).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { newNodeKernel, run, deployment, hasPackage } from './helpers.mjs';

let k;
const events = [];
before(async () => { k = newNodeKernel(); await k.ready; k.onEvent((e) => events.push(e)); });
after(() => k && k.terminate('cancelled'));

const need = (name) => (hasPackage(name) ? false : `${name} is not in build/www/pyodide/deployment.json: run scripts/setup.d/50-wheels.sh`);

test('the kernel knows what this deployment has and lacks (setup reports it)', async () => {
  const info = await k.ready;
  const d = deployment();
  assert.deepEqual(info.packages.has.map((p) => p.name), d.has.map((p) => p.name));
  assert.equal(info.packages.has.length + info.packages.lacks.length, 11, 'the guide names 11 packages');
});

test('"from openpyxl import ..." works with no micropip.install: XlsxWriter writes, openpyxl reads back', { skip: need('openpyxl') || need('xlsxwriter') }, async () => {
  events.length = 0;
  const r = await run(k, `import xlsxwriter
wb = xlsxwriter.Workbook('/mnt/output/sales.xlsx')
ws = wb.add_worksheet('Sales')
for i, (m, v) in enumerate([('Jan', 10), ('Feb', 32), ('Mar', 7)]):
    ws.write(i, 0, m); ws.write(i, 1, v)
ws.write(3, 1, '=SUM(B1:B3)')
wb.close()
from openpyxl import load_workbook
wb2 = load_workbook('/mnt/output/sales.xlsx')
s = wb2['Sales']
print([(r[0].value, r[1].value) for r in s.iter_rows(max_row=3)], s['B4'].value)
wb2.create_sheet('More')['A1'] = 'hello'
wb2.save('/mnt/output/sales2.xlsx')
print(load_workbook('/mnt/output/sales2.xlsx')['More']['A1'].value)`);
  assert.equal(r.status, 'ok', JSON.stringify(r.error));
  assert.equal(r.stdout, "[('Jan', 10), ('Feb', 32), ('Mar', 7)] =SUM(B1:B3)\nhello\n");
  const pk = events.find((e) => e.event === 'packages');
  assert.ok(pk, 'a packages event was sent');
  assert.deepEqual(pk.loaded.sort(), ['openpyxl', 'xlsxwriter'], 'both imports found by the scan, loaded before the run');
  assert.deepEqual(pk.failed, []);
  assert.deepEqual(r.files.map((f) => f.name), ['sales.xlsx', 'sales2.xlsx']);
  assert.equal(r.files[0].data[0], 0x50, 'xlsx is a zip (PK)');
});

test('pypdf round trip: write a PDF, read it back (loaded from the import)', { skip: need('pypdf') }, async () => {
  const r = await run(k, `from pypdf import PdfWriter, PdfReader
w = PdfWriter()
w.add_blank_page(width=200, height=100)
w.add_blank_page(width=300, height=150)
w.add_metadata({'/Title': 'cerea'})
with open('/mnt/output/blank.pdf', 'wb') as f:
    w.write(f)
rd = PdfReader('/mnt/output/blank.pdf')
print(len(rd.pages), rd.metadata.title, float(rd.pages[1].mediabox.width))`);
  assert.equal(r.status, 'ok', JSON.stringify(r.error));
  assert.equal(r.stdout, '2 cerea 300.0\n');
  assert.equal(new TextDecoder().decode(r.files[0].data.subarray(0, 5)), '%PDF-');
});

test('a package is installed once per interpreter: no load on the second import', { skip: need('openpyxl') }, async () => {
  events.length = 0;
  const r = await run(k, 'import openpyxl\nprint(openpyxl.__version__)');
  assert.equal(r.stdout, '3.0.9\n');
  assert.equal(events.filter((e) => e.event === 'packages').length, 0);
});

test('"If the answer shows ModuleNotFoundError, the package isn\'t available here": unknown module, no note', async () => {
  const r = await run(k, 'import surely_not_a_module_xyz');
  assert.equal(r.status, 'error');
  assert.equal(r.error.type, 'ModuleNotFoundError');
  assert.match(r.error.message, /surely_not_a_module_xyz/);
  assert.deepEqual(r.notes, []);
});

test('a guide package this deployment lacks: ordinary ModuleNotFoundError plus a note naming the reason', async (t) => {
  const lacking = deployment().lacks.find((l) => l.name === 'python-docx') || deployment().lacks[0];
  if (!lacking) { t.skip('this deployment ships every guide package'); return; }
  const imp = lacking.imports[0];
  const r = await run(k, `print("before")\nimport ${imp}`);
  assert.equal(r.status, 'error');
  assert.equal(r.error.type, 'ModuleNotFoundError');
  assert.match(r.error.message, new RegExp(`No module named '${imp}'`));
  assert.equal(r.stdout, 'before\n', 'the code ran up to the import');
  assert.ok(r.notes.some((n) => n.includes(lacking.name) && n.includes('not')), JSON.stringify(r.notes));
});

test('micropip.install works for everything shipped (when micropip is served); else ModuleNotFoundError with a note', async () => {
  if (hasPackage('micropip')) {
    const r = await run(k, 'import micropip\nawait micropip.install("pypdf")\nimport pypdf\nprint("ok")');
    assert.equal(r.stdout, 'ok\n', JSON.stringify(r.error));
  } else {
    const r = await run(k, 'import micropip');
    assert.equal(r.error.type, 'ModuleNotFoundError');
    assert.ok(r.notes.some((n) => /micropip/.test(n)));
  }
});

test('a lock-file package that fails to load is reported (note + packages event), not swallowed', async () => {
  const fs = await import('node:fs');
  const os = await import('node:os');
  const path = await import('node:path');
  const { PYODIDE_DIR } = await import('./helpers.mjs');
  const { KernelClient } = await import('../../worker/kernel-client.js');
  const { createNodeWorker, nodeInitOptions } = await import('../../worker/node-kernel.js');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cerea-lock-'));
  const lock = JSON.parse(fs.readFileSync(path.join(PYODIDE_DIR, 'pyodide-lock.json'), 'utf8'));
  lock.packages.ghost = { name: 'ghost', version: '1.0', file_name: 'wheels/ghost-1.0-py3-none-any.whl', install_dir: 'site',
    sha256: '0'.repeat(64), package_type: 'package', imports: ['ghost'], depends: [], unvendored_tests: false };
  fs.writeFileSync(path.join(dir, 'pyodide-lock.json'), JSON.stringify(lock));
  const g = new KernelClient({ createWorker: createNodeWorker(), init: { ...nodeInitOptions(), lockFileURL: path.join(dir, 'pyodide-lock.json') } });
  try {
    await g.ready;
    const evs = [];
    g.onEvent((e) => evs.push(e));
    const r = await g.run({ run_id: 'ghost', code: 'import ghost' });
    assert.equal(r.status, 'error');
    assert.equal(r.error.type, 'ModuleNotFoundError');
    assert.ok(r.notes.some((n) => /package ghost could not be loaded/.test(n)), JSON.stringify(r.notes));
    const pk = evs.find((e) => e.event === 'packages');
    assert.deepEqual(pk.failed.map((f) => f.name), ['ghost']);
  } finally {
    g.terminate('cancelled');
    fs.rmSync(dir, { recursive: true });
  }
});
