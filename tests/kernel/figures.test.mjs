// figures.test.mjs -- the guide's "Charts" section.  Real matplotlib is needed for the real thing:
// this deployment has it only when an operator synced a full Pyodide distribution
// (PYODIDE_DIST_DIR); otherwise those tests report skipped with the reason.  The sweep logic is
// additionally exercised through FakePyplot, a clearly named test double of pyplot's figure
// registry (get_fignums / figure / close, Figure.savefig), never instead of the real one.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { newNodeKernel, run, names, hasPackage } from './helpers.mjs';

let k;
before(async () => { k = newNodeKernel(); await k.ready; });
after(() => k && k.terminate('cancelled'));

const NO_MPL = hasPackage('matplotlib') ? false
  : 'matplotlib is not served by this deployment (no full Pyodide distribution: set PYODIDE_DIST_DIR and rerun scripts/setup.d/50-wheels.sh)';
const isPng = (f) => f.data[0] === 0x89 && f.data[1] === 0x50;

// ---- real matplotlib ---------------------------------------------------------------------------
test('"Code that mentions matplotlib, pylab or seaborn gets matplotlib imported before it runs, on the non-interactive Agg backend"', { skip: NO_MPL }, async () => {
  const r = await run(k, '# a chart with pylab\nimport sys\nprint("matplotlib" in sys.modules, sys.modules["matplotlib"].get_backend().lower())');
  assert.equal(r.stdout, 'True agg\n');
});

test('"plt.show() is replaced by save every open figure as figure-<n>.png ... then close it" (real matplotlib)', { skip: NO_MPL }, async () => {
  const r = await run(k, 'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.figure(); plt.bar([1], [2])\nplt.show()\nprint(plt.get_fignums())');
  assert.equal(r.stdout, '[]\n');
  assert.deepEqual(names(r), ['figure-1.png', 'figure-2.png']);
  assert.ok(r.files.every((f) => f.kind === 'figure' && isPng(f)));
});

test('"A figure the code saves itself with savefig is left out of that sweep"; "Any figure still open when the run ends, even one that failed part-way, is saved" (real matplotlib)', { skip: NO_MPL }, async () => {
  const r = await run(k, 'import matplotlib.pyplot as plt\nf = plt.figure(); plt.plot([1]); f.savefig("/mnt/output/vendite-2026.png")\nplt.figure(); plt.plot([2])\nraise ValueError("part-way")');
  assert.equal(r.status, 'error');
  assert.deepEqual(r.files.map((f) => [f.name, f.kind]), [['vendite-2026.png', 'file'], ['figure-1.png', 'figure']]);
});

// ---- capture failure (before any capture is installed in this kernel) ----------------------------
test('"No chart appeared? The automatic capture could not start in that run, though the code still ran" — note in notes', { skip: NO_MPL ? false : 'matplotlib is served: capture starts, so this failure path cannot be reached here' }, async () => {
  const r = await run(k, '# draw with matplotlib later\nprint("still ran")');
  assert.equal(r.status, 'ok');
  assert.equal(r.stdout, 'still ran\n');
  assert.ok(r.notes.some((n) => /figure capture could not start/.test(n)), JSON.stringify(r.notes));
});

// ---- FakePyplot: a test double of pyplot's registry, for the sweep logic -----------------------------
const FAKE = `
import itertools
class FakeFigure:
    def __init__(self, num): self.num = num; self.drawn = []
    def savefig(self, path, format=None, **kw):
        with open(path, 'wb') as f: f.write(b'\\x89PNG fake ' + repr((self.num, self.drawn)).encode())
class FakePyplot:
    def __init__(self): self.figs = {}; self.next = itertools.count(1)
    def get_fignums(self): return sorted(self.figs)
    def figure(self, num=None):
        if num is None: num = next(self.next)
        return self.figs.setdefault(num, FakeFigure(num))
    def close(self, fig):
        if fig == 'all': self.figs.clear()
        else: self.figs.pop(fig.num, None)
    def show(self): raise AssertionError('FakePyplot.show was not replaced')
fake_plt = FakePyplot()
from cerea_kernel import figures
figures.install(fake_plt, FakeFigure)
`;

test('FakePyplot double: plt.show() saves every open figure as figure-<n>.png, closes it; kind figure', async () => {
  let r = await run(k, FAKE);
  assert.equal(r.status, 'ok', JSON.stringify(r.error));
  r = await run(k, 'a = fake_plt.figure(); a.drawn.append("bars")\nb = fake_plt.figure()\nfake_plt.show()\nprint(fake_plt.get_fignums())');
  assert.equal(r.stdout, '[]\n');
  assert.deepEqual(r.files.map((f) => [f.name, f.kind]), [['figure-1.png', 'figure'], ['figure-2.png', 'figure']]);
});

test('FakePyplot double: "The count restarts every run": a redraw is figure-1.png again (next version of the same artifact)', async () => {
  const r = await run(k, 'c = fake_plt.figure(); c.drawn.append("redraw")\nfake_plt.show()');
  assert.deepEqual(names(r), ['figure-1.png']);
});

test('FakePyplot double: a savefig\'d figure is not swept again; its own file is kind file', async () => {
  const r = await run(k, 'd = fake_plt.figure(); d.savefig("/mnt/output/vendite-2026.png")\ne = fake_plt.figure()\nfake_plt.show()');
  assert.deepEqual(r.files.map((f) => [f.name, f.kind]), [['vendite-2026.png', 'file'], ['figure-1.png', 'figure']]);
});

test('FakePyplot double: figures still open at the end are saved, even after an error', async () => {
  const r = await run(k, 'g = fake_plt.figure(); g.drawn.append("half")\n1/0');
  assert.equal(r.status, 'error');
  assert.equal(r.error.type, 'ZeroDivisionError');
  assert.deepEqual(r.files.map((f) => [f.name, f.kind]), [['figure-1.png', 'figure']]);
  assert.equal((await run(k, 'print(fake_plt.get_fignums())')).stdout, '[]\n');
});

test('FakePyplot double: "At most 20 charts per run ... past 20, later ones are discarded with a note on stderr"', async () => {
  const r = await run(k, 'for i in range(25):\n    fake_plt.figure().drawn.append(i)\nfake_plt.show()\nprint("after")');
  assert.equal(r.files.length, 20);
  assert.equal(r.files[19].name, 'figure-20.png');
  assert.equal(r.figures_dropped, 5);
  assert.match(r.stderr, /5 figure\(s\) dropped: at most 20 figures/);
  assert.equal(r.stdout, 'after\n');
});

test('FakePyplot double: the figure cap counts per run (show twice in one run continues the numbering)', async () => {
  const r = await run(k, 'fake_plt.figure(); fake_plt.show()\nfake_plt.figure(); fake_plt.show()');
  assert.deepEqual(names(r), ['figure-1.png', 'figure-2.png']);
  assert.equal(r.figures_dropped, 0);
});
