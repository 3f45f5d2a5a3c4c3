// files.test.mjs -- /mnt/data mounts and /mnt/output change detection (guide: "Files you attach",
// "Ask for a file back", Limits), against real Pyodide: mounts write, replace versions and remove
// old files; only files a run created or changed are listed, in the order written (same-size
// rewrite within 1 ms, identical rewrite, delete, nested folders, scratch files elsewhere);
// 200 files listed + the count of the rest; 50 MB per file loaded or returned.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { newNodeKernel, run, text, names } from './helpers.mjs';

let k;
before(async () => { k = newNodeKernel(); await k.ready; });
after(() => k && k.terminate('cancelled'));

const file = (name, content, version = 1) => {
  const data = typeof content === 'string' ? text(content) : content;
  return { name, version, size: data.length, sha256: crypto.createHash('sha256').update(data).digest('hex'), data };
};

test('"Each one is at /mnt/data/<its original name> with its original bytes"; extracted text beside as <name>.md', async () => {
  const bin = new Uint8Array(256).map((_, i) => i);
  const m = await k.mount([file('sales.bin', bin), file('report.pdf', '%PDF-fake'), file('report.pdf.md', '# text')]);
  assert.deepEqual(m.written.sort(), ['report.pdf', 'report.pdf.md', 'sales.bin']);
  const r = await run(k, `import hashlib, os
print(sorted(os.listdir('/mnt/data')))
print(hashlib.sha256(open('/mnt/data/sales.bin','rb').read()).hexdigest())`);
  assert.equal(r.stdout, `['report.pdf', 'report.pdf.md', 'sales.bin']\n${crypto.createHash('sha256').update(bin).digest('hex')}\n`);
});

test('"a version saved between two runs replaces the older one"; files no longer mounted are removed; unchanged kept', async () => {
  const m = await k.mount([file('sales.bin', 'v2 bytes', 2), file('report.pdf', '%PDF-fake'), file('plots/fig.png', 'png')]);
  assert.deepEqual(m.written.sort(), ['plots/fig.png', 'sales.bin']);
  assert.deepEqual(m.kept, ['report.pdf']);
  assert.deepEqual(m.removed, ['report.pdf.md']);
  const r = await run(k, `import os
print(open('/mnt/data/sales.bin').read(), sorted(os.listdir('/mnt/data')), os.listdir('/mnt/data/plots'))`);
  assert.equal(r.stdout, "v2 bytes ['plots', 'report.pdf', 'sales.bin'] ['fig.png']\n");
});

test('"Switching chats takes that chat\'s files out of the sandbox": an empty manifest removes everything', async () => {
  const m = await k.mount([]);
  assert.deepEqual(m.removed.sort(), ['plots/fig.png', 'report.pdf', 'sales.bin']);
  const r = await run(k, 'import os\nprint(os.listdir("/mnt/data"))');
  assert.equal(r.stdout, '[]\n');
});

test('mount refuses bad names (.., absolute, empty segments) and files over the 50 MB cap', async () => {
  const big = { name: 'huge.bin', version: 1, size: 50 * 1048576 + 1, sha256: 'x', data: new Uint8Array(8) };
  const m = await k.mount([file('../escape', 'x'), file('/etc/passwd', 'x'), file('a//b', 'x'), big, file('ok.txt', 'ok')]);
  assert.deepEqual(m.written, ['ok.txt']);
  assert.deepEqual(m.refused.map((r) => r.name).sort(), ['../escape', '/etc/passwd', 'a//b', 'huge.bin']);
  assert.match(m.refused.find((r) => r.name === 'huge.bin').reason, /50 MB/);
  const r = await run(k, 'import os\nprint(os.path.exists("/mnt/escape"), os.listdir("/mnt/data"))');
  assert.equal(r.stdout, "False ['ok.txt']\n");
});

test('a run can carry its files: mounted before the code runs', async () => {
  const r = await run(k, 'print(open("/mnt/data/late.csv").read())', { files: [file('late.csv', 'a,b\n1,2')] });
  assert.equal(r.stdout, 'a,b\n1,2\n');
});

test('"Only files the code saves to /mnt/output are offered; scratch files ... never become cards"', async () => {
  const r = await run(k, `open('scratch.txt','w').write('s')
open('/tmp/t.txt','w').write('t')
open('/mnt/output/keep.txt','w').write('k')`);
  assert.deepEqual(names(r), ['keep.txt']);
  assert.equal(r.files[0].kind, 'file');
  assert.equal(r.files[0].sha256, crypto.createHash('sha256').update('k').digest('hex'));
  assert.equal(new TextDecoder().decode(r.files[0].data), 'k');
});

test('"A run lists only the files it created or changed": untouched, identical rewrite and deleted files are not listed', async () => {
  await run(k, `for n in 'abcd': open('/mnt/output/%s.txt' % n, 'w').write(n * 10)`);
  const r = await run(k, `import os
open('/mnt/output/a.txt','w').write('a' * 10)      # identical rewrite
open('/mnt/output/b.txt','w').write('B' * 10)      # same size, other bytes, within the same ms
os.remove('/mnt/output/c.txt')                      # deleted
os.remove('/mnt/output/d.txt'); open('/mnt/output/d.txt','w').write('d' * 10)  # recreated identical`);
  assert.deepEqual(names(r), ['b.txt']);
});

test('nested folders are listed with their relative path; a same-size rewrite right after the previous run is seen', async () => {
  const r1 = await run(k, `import os\nos.makedirs('/mnt/output/plots/2026', exist_ok=True)\nopen('/mnt/output/plots/2026/x.csv','w').write('1,2')`);
  assert.deepEqual(names(r1), ['plots/2026/x.csv']);
  const r2 = await run(k, `open('/mnt/output/plots/2026/x.csv','w').write('3,4')`);
  assert.deepEqual(names(r2), ['plots/2026/x.csv']);
});

test('"files are listed in the order they were written" (not by name)', async () => {
  const r = await run(k, `for n in ['zeta', 'alpha', 'mid']:
    open('/mnt/output/%s.txt' % n, 'w').write(n)
open('/mnt/output/first.txt', 'w').write('w')`);
  assert.deepEqual(names(r), ['zeta.txt', 'alpha.txt', 'mid.txt', 'first.txt']);
});

test('"at most 200 files listed per run": the first 200 listed, the rest counted, a note says so', async () => {
  const r = await run(k, `import os\nos.makedirs('/mnt/output/many', exist_ok=True)
for i in range(230):
    open('/mnt/output/many/f%03d.txt' % i, 'w').write(str(i))`);
  assert.equal(r.files.length, 200);
  assert.equal(r.files_unlisted, 30);
  assert.equal(r.files[0].name, 'many/f000.txt');
  assert.equal(r.files[199].name, 'many/f199.txt');
  assert.ok(r.notes.some((n) => /230 files .* first 200/.test(n)));
  await run(k, 'import shutil\nshutil.rmtree("/mnt/output/many")');
});

test('"50 MB per file": a returned file over 50 MB is not kept (note); one at 50 MB is', async () => {
  const r = await run(k, `with open('/mnt/output/at_cap.bin','wb') as f: f.truncate(50 * 1048576)
with open('/mnt/output/over_cap.bin','wb') as f: f.truncate(50 * 1048576 + 1)`);
  assert.deepEqual(names(r), ['at_cap.bin']);
  assert.equal(r.files[0].data.length, 50 * 1048576);
  assert.ok(r.notes.some((n) => /over_cap\.bin .* over the 50 MB cap/.test(n)), JSON.stringify(r.notes));
  await run(k, 'import os\nos.remove("/mnt/output/at_cap.bin"); os.remove("/mnt/output/over_cap.bin")');
});

test('"An earlier run\'s figure-<n>.png can be read back from the output directory"', async () => {
  await run(k, 'open("/mnt/output/figure-1.png","wb").write(b"\\x89PNG old")');
  const r = await run(k, 'print(open("/mnt/output/figure-1.png","rb").read())');
  assert.equal(r.stdout, "b'\\x89PNG old'\n");
  assert.deepEqual(r.files, []);
});
