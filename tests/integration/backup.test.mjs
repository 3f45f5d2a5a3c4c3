// backup.test.mjs -- `cerea-sandbox backup` and `restore` (persistence/backup.c) against the real
// binary.  Under load: scripted pages (lib.mjs) keep uploading attachments and reporting runs with
// output files in four chats while the backup is taken; the backup is restored into a fresh data
// directory and a second server started on it, which must hold every upload and every run result
// (with its output file) that was acknowledged before the backup began, byte for byte by sha256,
// with the database passing integrity_check and the backup passing `sha256sum -c`.  Then what an
// operator gets wrong: a backup into a folder that is not empty or cannot be written, a restore
// from a backup that was cut short, changed by one byte, given a file it never had, or has no
// manifest, a restore into a folder that is not empty or that a running server holds: each
// refused with one line saying why, and nothing written.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync, readdirSync, existsSync, rmSync, mkdirSync, cpSync, truncateSync, statSync } from 'node:fs';
import { join, dirname, basename } from 'node:path';
import { BIN, startServer, call, newChat, upload, tempDir, Page, sleep } from './lib.mjs';

const sha = (b) => createHash('sha256').update(b).digest('hex');
const work = tempDir('backup');
let srv;

before(async () => { srv = await startServer(); });
after(async () => { await srv?.stop(); rmSync(work, { recursive: true, force: true }); });

// The CLI, tracked by pid: {code, stdout, stderr}.
function cli(args, timeoutMs = 120000) {
  return new Promise((resolve, reject) => {
    const p = spawn(BIN, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '', stderr = '';
    p.stdout.on('data', (d) => { stdout += d; });
    p.stderr.on('data', (d) => { stderr += d; });
    const t = setTimeout(() => { process.kill(p.pid, 'SIGKILL'); reject(new Error(`${args[0]} still running after ${timeoutMs} ms`)); }, timeoutMs);
    p.on('exit', (code) => { clearTimeout(t); resolve({ code, stdout, stderr }); });
  });
}

// One chat's storm: upload, run, output file, result, over and over until stop().  Every
// acknowledgement is recorded with the time it came back.
function storm(chat, page) {
  const acked = { files: [], runs: [] };
  let stopped = false;
  const loop = (async () => {
    for (let i = 0; !stopped; i++) {
      const att = randomBytes(4096 + (i % 7) * 1000);
      const up = await upload(srv, chat, `in-${i}.bin`, att);
      if (up.status === 201 || up.status === 200) acked.files.push({ id: up.json.file_id, sha: sha(att), at: Date.now() });
      const cr = await call(srv, 'POST', `/v1/chats/${chat.id}/runs`, { body: { code: `print(${i})`, origin: 'user' } });
      assert.equal(cr.status, 201, String(cr.buf));
      const run = await page.nextRun(20000);
      await page.started(run.data);
      const out = randomBytes(2048);
      const put = await page.putFile(run.data, `out-${i}.bin`, out);
      assert.ok(put.status === 200 || put.status === 201, `put ${put.status}`);
      const res = await page.result(run.data, { stdout: `run ${i} of ${chat.id}\n`, files: [{ name: `out-${i}.bin`, size: out.length, sha256: sha(out), kind: 'file' }] });
      if (res.status === 200) acked.runs.push({ id: cr.json.run_id, stdout: `run ${i} of ${chat.id}\n`, out: sha(out), at: Date.now() });
    }
  })();
  return { acked, stop: async () => { stopped = true; await loop; } };
}

test('a backup taken during a storm of runs and uploads restores every acknowledged result and file', async () => {
  const chats = [];
  for (let c = 0; c < 4; c++) {
    const chat = await newChat(srv);
    const page = new Page(srv, chat, `p${c}`);
    await page.opened;
    await page.presence(true, 'ready');
    chats.push({ chat, page });
  }
  const storms = chats.map(({ chat, page }) => storm(chat, page));
  await sleep(2500); // some history first
  const dest = join(work, 'b1');
  const began = Date.now();
  const b = await cli(['backup', dest, '--data', srv.dataDir]);
  const ended = Date.now();
  await sleep(500);
  for (const s of storms) await s.stop();
  for (const { page } of chats) page.close();
  assert.equal(b.code, 0, b.stderr);
  assert.match(b.stdout, /schema version \d+/);

  const before = { files: [], runs: [] }, during = { files: 0, runs: 0 };
  for (const s of storms) {
    before.files.push(...s.acked.files.filter((f) => f.at < began));
    before.runs.push(...s.acked.runs.filter((r) => r.at < began));
    during.files += s.acked.files.filter((f) => f.at >= began && f.at <= ended).length;
    during.runs += s.acked.runs.filter((r) => r.at >= began && r.at <= ended).length;
  }
  assert.ok(before.runs.length >= 8, `only ${before.runs.length} runs before the backup`);
  console.log(`# backup took ${ended - began} ms; acknowledged before it: ${before.files.length} uploads, ${before.runs.length} runs; during it: ${during.files} uploads, ${during.runs} runs`);

  // The backup checks by hand with coreutils, as its line says.
  execFileSync('sha256sum', ['-c', '--quiet', 'manifest.sha256'], { cwd: dest });

  const data = join(work, 'restored');
  const r = await cli(['restore', dest, '--data', data]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(execFileSync('sqlite3', [join(data, 'cerea.db'), 'PRAGMA integrity_check'], { encoding: 'utf8' }).trim(), 'ok');

  const srv2 = await startServer({ dataDir: data });
  try {
    for (const f of before.files) {
      const got = await call(srv2, 'GET', `/v1/files/${f.id}`);
      assert.equal(got.status, 200, `upload ${f.id}`);
      assert.equal(sha(got.buf), f.sha, `upload ${f.id}'s bytes`);
    }
    for (const run of before.runs) {
      const got = await call(srv2, 'GET', `/v1/runs/${run.id}`);
      assert.equal(got.status, 200, `run ${run.id}`);
      assert.equal(got.json.status, 'ok');
      assert.equal(got.json.stdout, run.stdout);
      assert.equal(got.json.files.length, 1);
      const file = await call(srv2, 'GET', `/v1/files/${got.json.files[0].artifact_id}`);
      assert.equal(sha(file.buf), run.out, `run ${run.id}'s output file`);
    }
  } finally { await srv2.stop(); }
});

test('a backup goes only into a new or empty folder it can write', async () => {
  const full = join(work, 'full');
  mkdirSync(full);
  writeFileSync(join(full, 'keep.txt'), 'mine');
  const r = await cli(['backup', full, '--data', srv.dataDir]);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /is not empty/);
  assert.deepEqual(readdirSync(full), ['keep.txt']);
  assert.equal(readFileSync(join(full, 'keep.txt'), 'utf8'), 'mine');

  // Root may write anywhere on an ordinary file system; /sys refuses even root.
  const r2 = await cli(['backup', '/sys/cerea-backup-test', '--data', srv.dataDir]);
  assert.equal(r2.code, 1);
  assert.match(r2.stderr, /cannot make \/sys\/cerea-backup-test|not writable/);

  const r3 = await cli(['backup', join(work, 'nope'), '--data', join(work, 'no-such-data')]);
  assert.equal(r3.code, 1);
  assert.match(r3.stderr, /no database here/);
  assert.ok(!existsSync(join(work, 'nope')), 'a failed backup leaves no folder behind');

  const r4 = await cli(['backup']);
  assert.equal(r4.code, 2);
  assert.match(r4.stderr, /usage: cerea-sandbox backup DEST/);
});

test('a restore refuses a backup that was cut short, changed, added to or never finished, and writes nothing', async () => {
  const chat = await newChat(srv);
  for (let i = 0; i < 3; i++) assert.equal((await upload(srv, chat, `f${i}.bin`, randomBytes(30000))).status, 201);
  const good = join(work, 'good');
  assert.equal((await cli(['backup', good, '--data', srv.dataDir])).code, 0);
  const manifest = readFileSync(join(good, 'manifest.sha256'), 'utf8');
  const blob = manifest.split('\n').find((l) => l.includes('  blobs/')).slice(66);

  const cases = [
    ['a blob cut short', (d) => truncateSync(join(d, blob), statSync(join(d, blob)).size - 1), new RegExp(`${blob.replace(/\//g, '\\/')} does not match its sha256`)],
    ['the database with one byte changed', (d) => {
      const p = join(d, 'cerea.db'), b = readFileSync(p);
      b[b.length - 100] ^= 0x01;
      writeFileSync(p, b);
    }, /cerea\.db does not match its sha256/],
    ['a file the manifest does not list', (d) => writeFileSync(join(d, 'extra'), 'x'), /extra is in the backup but not in its manifest/],
    ['a blob the manifest lists missing', (d) => rmSync(join(d, blob)), /is in the manifest but not in the backup/],
    ['no manifest (an unfinished backup)', (d) => rmSync(join(d, 'manifest.sha256')), /not a backup, or one that did not finish/],
    ['a manifest line naming another path', (d) => writeFileSync(join(d, 'manifest.sha256'), manifest + `${'0'.repeat(64)}  ../../etc/passwd\n`), /a line this program never writes/],
  ];
  for (const [name, spoil, why] of cases) {
    const bad = join(work, `bad-${cases.indexOf(cases.find((c) => c[0] === name))}`);
    cpSync(good, bad, { recursive: true });
    spoil(bad);
    const target = join(work, `target-${basename(bad)}`);
    const r = await cli(['restore', bad, '--data', target]);
    assert.equal(r.code, 1, name);
    assert.match(r.stderr, why, name);
    assert.ok(!existsSync(target), `${name}: nothing restored`);
    assert.deepEqual(readdirSync(work).filter((n) => n.includes('.restore-')), [], `${name}: no temporary folder left`);
  }

  // Into a folder that holds something, or that a running server holds: refused, untouched.
  const r = await cli(['restore', good, '--data', srv.dataDir]);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /in use by a running server/);
  assert.equal((await call(srv, 'GET', `/v1/chats/${chat.id}/files`)).json.files.length, 3);
  const other = join(work, 'other');
  mkdirSync(other);
  writeFileSync(join(other, 'cerea.db'), 'not ours');
  const r2 = await cli(['restore', good, '--data', other]);
  assert.equal(r2.code, 1);
  assert.match(r2.stderr, /is not empty/);
  assert.equal(readFileSync(join(other, 'cerea.db'), 'utf8'), 'not ours');

  // The good one restores, into an empty folder too.
  const empty = join(work, 'empty');
  mkdirSync(empty);
  const ok = await cli(['restore', good, '--data', empty]);
  assert.equal(ok.code, 0, ok.stderr);
  assert.match(ok.stdout, /restored .* blobs/);
});

test('a backup killed half-way (SIGKILL) leaves no manifest: the restore refuses it as unfinished, and a new backup goes elsewhere', async () => {
  // Enough content that the copy takes a while: 120 files of 256 KiB.
  const chat = await newChat(srv);
  for (let i = 0; i < 120; i++) assert.equal((await upload(srv, chat, `big-${i}.bin`, randomBytes(256 * 1024))).status, 201);
  const dest = join(work, 'killed');
  const p = spawn(BIN, ['backup', dest, '--data', srv.dataDir], { stdio: 'ignore' });
  // Kill it once it has started copying blobs, before it could have finished.
  for (let i = 0; i < 200 && !(existsSync(join(dest, 'blobs')) && readdirSync(join(dest, 'blobs')).length > 3); i++) await sleep(5);
  process.kill(p.pid, 'SIGKILL');
  await new Promise((r) => p.on('exit', r));
  assert.ok(existsSync(dest), 'the backup had begun');
  assert.ok(!existsSync(join(dest, 'manifest.sha256')), 'killed before its last step: no manifest');
  const r = await cli(['restore', dest, '--data', join(work, 'from-killed')]);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /not a backup, or one that did not finish/);
  assert.ok(!existsSync(join(work, 'from-killed')));
  const again = await cli(['backup', dest, '--data', srv.dataDir]);
  assert.equal(again.code, 1, 'the half-made folder is not overwritten');
  assert.match(again.stderr, /is not empty/);
  // The server it ran beside did not notice.
  assert.equal((await call(srv, 'GET', `/v1/chats/${chat.id}/files`)).json.files.length, 120);
  const fresh = await cli(['backup', join(work, 'after-kill'), '--data', srv.dataDir]);
  assert.equal(fresh.code, 0, fresh.stderr);
});
