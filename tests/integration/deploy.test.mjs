// deploy.test.mjs -- scripts/cerea-sandbox.service, the hardened systemd unit docs/deploy.md
// installs.  systemd itself does not run here (no PID 1 of ours), so the unit is held to what can
// be checked without it: `systemd-analyze verify` finds no error or warning in it (with the
// checkout standing in for /opt/cerea-sandbox, so its ExecStart names a real binary); the
// hardening docs/deploy.md promises is there, directive by directive; `systemd-analyze security`
// rates it; and its ExecStart line, started as the unit would start it (paths mapped onto the
// checkout and a temp data dir, a free port), brings up a server that answers /healthz.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync, spawn } from 'node:child_process';
import { readFileSync, writeFileSync, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { createServer } from 'node:net';
import { BIN, ROOT, tempDir, sleep } from './lib.mjs';

const UNIT = join(ROOT, 'scripts', 'cerea-sandbox.service');
const text = readFileSync(UNIT, 'utf8');

// KEY=VALUE pairs of one section, in order (a key may repeat).
function section(name) {
  const out = [];
  let cur = null;
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const m = /^\[(.+)\]$/.exec(line);
    if (m) { cur = m[1]; continue; }
    if (cur !== name) continue;
    const eq = line.indexOf('=');
    out.push([line.slice(0, eq), line.slice(eq + 1)]);
  }
  return out;
}
const service = section('Service');
const value = (k) => service.filter(([key]) => key === k).map(([, v]) => v).pop();

const analyze = spawnSync('systemd-analyze', ['--version'], { encoding: 'utf8' });
const noAnalyze = analyze.error ? 'systemd-analyze is not installed (Debian package systemd)' : false;
if (noAnalyze && process.env.CI) throw new Error(`${noAnalyze}: setup installs it, so CI must have it`);

test('the unit has the hardening docs/deploy.md promises', () => {
  const want = {
    DynamicUser: 'yes', ProtectSystem: 'strict', ReadWritePaths: '/var/lib/cerea-sandbox',
    NoNewPrivileges: 'yes', CapabilityBoundingSet: '', AmbientCapabilities: '', ProtectHome: 'yes',
    PrivateTmp: 'yes', PrivateDevices: 'yes', ProtectKernelTunables: 'yes', ProtectKernelModules: 'yes',
    ProtectControlGroups: 'yes', RestrictSUIDSGID: 'yes', LockPersonality: 'yes', UMask: '0077',
    RestrictAddressFamilies: 'AF_UNIX AF_INET AF_INET6 AF_NETLINK',
  };
  for (const [k, v] of Object.entries(want)) assert.equal(value(k), v, `${k}=${v}`);
  // V8 needs writable+executable pages for its JIT and WebAssembly: this must never be set.
  assert.equal(value('MemoryDenyWriteExecute'), undefined);
  assert.match(value('ExecStart'), /^\/opt\/cerea-sandbox\/build\/cerea-sandbox serve /);
  assert.match(value('ExecStart'), /--data \/var\/lib\/cerea-sandbox(\s|$)/);
});

test('systemd-analyze verify finds nothing to say about the unit', { skip: noAnalyze }, () => {
  // The unit as installed names /opt/cerea-sandbox: point that at this checkout, so verify checks
  // a real executable (it refuses a missing one).
  const dir = tempDir('unit');
  try {
    const unit = join(dir, 'cerea-sandbox.service');
    writeFileSync(unit, text.replaceAll('/opt/cerea-sandbox', ROOT));
    const r = spawnSync('systemd-analyze', ['verify', unit], { encoding: 'utf8' });
    const said = (r.stdout + r.stderr).split('\n').filter((l) => l.trim() &&
      !/^Unit .* not found\.?$/.test(l.trim())); // verify looks up the [Install] target's units, absent in a container
    assert.equal(r.status, 0, said.join('\n'));
    assert.deepEqual(said, [], 'verify warned');
    const sec = spawnSync('systemd-analyze', ['security', '--offline=yes', unit], { encoding: 'utf8' });
    const m = /Overall exposure level for .*: ([0-9.]+)/.exec(sec.stdout + sec.stderr);
    assert.ok(m, sec.stdout + sec.stderr);
    // 0 is locked down, 10 is unprotected; what server mode's bubblewrap needs keeps it above 2.
    assert.ok(Number(m[1]) <= 3.0, `exposure ${m[1]}`);
  } finally { rmSync(dir, { recursive: true, force: true }); }
});

const freePort = () => new Promise((resolve) => {
  const s = createServer().listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
});

test("the unit's ExecStart brings up a server", async () => {
  const dir = tempDir('unit-run');
  const data = join(dir, 'state');
  mkdirSync(data, { mode: 0o700 });
  const port = await freePort();
  const argv = value('ExecStart').replaceAll('/opt/cerea-sandbox', ROOT)
    .replace('/var/lib/cerea-sandbox', data).replace('127.0.0.1:8080', `127.0.0.1:${port}`).split(/\s+/);
  assert.equal(argv[0], join(ROOT, 'build', 'cerea-sandbox'));
  const env = { ...process.env, CEREA_API_KEY: 'unit-test-key-0123456789abcdef' };
  const p = spawn(process.env.CEREA_BIN || argv[0], argv.slice(1), { cwd: value('WorkingDirectory').replace('/opt/cerea-sandbox', ROOT), env, stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  p.stderr.on('data', (d) => { log += d; });
  try {
    let ok = false;
    for (let i = 0; i < 100 && !ok && p.exitCode === null; i++) {
      try { ok = (await fetch(`http://127.0.0.1:${port}/healthz`)).status === 200; } catch { await sleep(100); }
    }
    assert.ok(ok, `no /healthz from the unit's command line:\n${log}`);
  } finally {
    if (p.exitCode === null) { process.kill(p.pid, 'SIGTERM'); await new Promise((r) => p.on('exit', r)); }
    rmSync(dir, { recursive: true, force: true });
  }
});
