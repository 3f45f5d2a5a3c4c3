// sandbox.test.mjs -- the headless host's sandbox, layer by layer (docs/server-mode.md), against the
// real orchestrator in `server` mode:
//   - the process (bubblewrap as hosts.c starts it): a stand-in host runs Python (the machine's
//     python3, inside the very sandbox and seccomp filter a real host gets) that reads
//     /proc/self/status and tries the system calls an escape from Node would use; and the real
//     Node host's status read from outside (its own user namespace, no capability, seccomp,
//     no_new_privs, the RLIMIT_DATA bound);
//   - Python in the real kernel (Pyodide under Node) reaches neither Pyodide's JS internals nor
//     Node's modules (useNodeSockFS, _nodeSock, import()), sandboxed and trusted alike, in kernels
//     restored from the served memory snapshot and in kernels loaded from scratch;
//   - memory: a kernel that a run leaves over its limit is replaced with a note, and the next run
//     of the chat runs in a fresh kernel.
// Processes are started and stopped by pid (lib.mjs).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { chmodSync, cpSync, readdirSync, statSync, writeFileSync, readFileSync, readlinkSync, existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { BWRAP, NO_BWRAP, ROOT, cmdline, descendants, needTool, startStack, hostReady, newChat, run, upload, sleep, tempDir, hostNodePids } from './lib.mjs';

const dirs = [];
after(() => { for (const d of dirs) rmSync(d, { recursive: true, force: true }); });
const status = (pid) => Object.fromEntries(readFileSync(`/proc/${pid}/status`, 'utf8').trim().split('\n')
  .map((l) => l.split(':')).map(([k, ...v]) => [k, v.join(':').trim()]));

// What a process in the sandbox tries, from Python (ctypes): each call must fail with EPERM.
const PROBE = String.raw`
import ctypes, errno, json, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
def sc(nr, *args):
    r = libc.syscall(nr, *[ctypes.c_long(a) for a in args])
    return 'ok' if r >= 0 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
out = {'status': {}}
for line in open('/proc/self/status'):
    k, _, v = line.partition(':')
    if k in ('Uid', 'Gid', 'CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb', 'NoNewPrivs', 'Seccomp'):
        out['status'][k] = v.split()
# x86_64 numbers: ptrace 101, mount 165, umount2 166, unshare 272, setns 308, keyctl 250, bpf 321,
# perf_event_open 298, kexec_load 246, init_module 175, finit_module 313, delete_module 176,
# pivot_root 155, chroot 161, userfaultfd 323, io_uring_setup 425, setuid 105, clone 56
CLONE_NEWUSER, CLONE_NEWNET, SIGCHLD = 0x10000000, 0x40000000, 17
calls = {'ptrace': (101, 0, 0, 0, 0), 'mount': (165, 0, 0, 0, 0, 0), 'umount2': (166, 0, 0),
         'unshare_user': (272, CLONE_NEWUSER), 'unshare_net': (272, CLONE_NEWNET), 'setns': (308, 0, 0),
         'keyctl': (250, 0, 0, 0, 0, 0), 'bpf': (321, 0, 0, 0), 'perf_event_open': (298, 0, 0, 0, 0, 0),
         'kexec_load': (246, 0, 0, 0, 0), 'init_module': (175, 0, 0, 0), 'finit_module': (313, 0, 0, 0),
         'delete_module': (176, 0, 0), 'pivot_root': (155, 0, 0), 'chroot': (161, 0),
         'userfaultfd': (323, 0), 'io_uring_setup': (425, 0, 0), 'setuid': (105, 0)}
out['calls'] = {k: sc(*v) for k, v in calls.items()}
pid = libc.syscall(56, ctypes.c_long(CLONE_NEWNET | SIGCHLD), ctypes.c_long(0), ctypes.c_long(0), ctypes.c_long(0), ctypes.c_long(0))
if pid == 0:
    os._exit(0)
out['calls']['clone_newnet'] = 'ok' if pid > 0 else errno.errorcode.get(ctypes.get_errno())
def sock(*a):
    try:
        socket.socket(*a).close(); return 'ok'
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
out['sockets'] = {'packet': sock(socket.AF_PACKET, socket.SOCK_RAW), 'raw': sock(socket.AF_INET, socket.SOCK_RAW, 1),
                  'raw6': sock(socket.AF_INET6, socket.SOCK_RAW, 58), 'unix': sock(socket.AF_UNIX, socket.SOCK_STREAM),
                  'tcp': sock(socket.AF_INET, socket.SOCK_STREAM)}
try:
    child = os.fork()
    if child == 0:
        os._exit(0)
    os.waitpid(child, 0)
    out['fork'] = 'ok'
except OSError as e:
    out['fork'] = errno.errorcode.get(e.errno, str(e.errno))
print('probe: ' + json.dumps(out), file=sys.stderr, flush=True)
print('ready', flush=True)
sys.stdin.read()
`;

test('the host process (from Python inside the real sandbox): uid 65534 in its own user namespace, no capability, seccomp, no_new_privs; the calls of an escape fail', async (t) => {
  if (!needTool(t, !BWRAP && NO_BWRAP)) return;
  if (process.arch !== 'x64') { t.skip(`the probe names x86_64 system call numbers; this is ${process.arch}`); return; }
  // A stand-in for node (CEREA_NODE): runs the probe in the sandbox hosts.c made (its folder is
  // bound read-only, as an install of node outside /usr is), prints what it found on stderr (the
  // server's log), then says ready.
  const probeDir = tempDir('fs-probe');
  dirs.push(probeDir);
  chmodSync(probeDir, 0o755);   // a root server's hosts run as nobody, who must reach it
  writeFileSync(`${probeDir}/probe.py`, PROBE, { mode: 0o644 });
  writeFileSync(`${probeDir}/probe-node.sh`, `#!/bin/sh\nexec /usr/bin/python3 ${probeDir}/probe.py\n`, { mode: 0o755 });
  const srv = await startStack({ env: { CEREA_NODE: `${probeDir}/probe-node.sh` } });
  dirs.push(srv.dataDir);
  try {
    for (let i = 0; i < 200 && !/probe: \{/.test(srv.log); i++) await sleep(50);
    const found = /probe: (\{.*\})/.exec(srv.log);
    assert.ok(found, `the probe printed nothing:\n${srv.log.slice(-2000)}`);
    const p = JSON.parse(found[1]);
    t.diagnostic(JSON.stringify(p));
    assert.deepEqual(p.status.Uid, ['65534', '65534', '65534', '65534']);
    assert.deepEqual(p.status.Gid, ['65534', '65534', '65534', '65534']);
    // outside (its status seen from here): nobody when the server is root, never root; else the
    // server's own uid
    const outside = process.getuid() === 0 ? '65534' : String(process.getuid());
    const probe = descendants(srv.pid).find((pid) => cmdline(pid).some((a) => a.endsWith('/probe.py')));
    assert.ok(probe, 'the probe process');
    assert.deepEqual(status(probe).Uid.split(/\s+/), [outside, outside, outside, outside], 'uid outside its namespace');
    for (const set of ['CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb']) assert.deepEqual(p.status[set], ['0000000000000000'], set);
    assert.deepEqual(p.status.NoNewPrivs, ['1']);
    assert.deepEqual(p.status.Seccomp, ['2']);
    for (const [call, res] of Object.entries(p.calls)) assert.equal(res, 'EPERM', `${call}: ${res}`);
    assert.deepEqual(p.sockets, { packet: 'EPERM', raw: 'EPERM', raw6: 'EPERM', unix: 'ok', tcp: 'ok' });
    assert.equal(p.fork, 'ok', 'what the filter allows still works (a process of the sandbox may fork; Node\'s permission model forbids it)');
  } finally { await srv.stop(); }
});

test('a test that needs a tool setup installs skips with the reason, and fails with it when CI is set', (t) => {
  const skipped = [];
  const fake = { skip: (why) => skipped.push(why) };
  const saved = process.env.CI;
  try {
    delete process.env.CI;
    assert.equal(needTool(fake, 'no bwrap here'), false);
    process.env.CI = 'false';
    assert.equal(needTool(fake, 'no bwrap here'), false);
    assert.deepEqual(skipped, ['no bwrap here', 'no bwrap here']);
    process.env.CI = 'true';
    assert.throws(() => needTool(fake, 'no bwrap here'), /^AssertionError.*no bwrap here \(CI is set: setup installs it/);
    assert.equal(needTool(fake, false), true);
    assert.equal(skipped.length, 2);
  } finally {
    if (saved === undefined) delete process.env.CI; else process.env.CI = saved;
  }
});

// One real server for the rest: a real Node host with real Pyodide.
const KERNEL_MB = 256;
const HOST_MB = 3 * (KERNEL_MB + 256) + 512;   // its RLIMIT_DATA: (kernels + 1) x (kernel + JS heap) + 512
let srv = null;
async function stack(t) {
  if (srv) return srv;
  // A time limit no load on the machine reaches: the memory tests' runs end by memory, not time.
  srv = await startStack({ env: { CEREA_KERNEL_MEMORY_MB: String(KERNEL_MB), CEREA_HOST_KERNELS: '2', CODE_TIME_LIMIT_S: '120' } });
  await hostReady(srv);
  return srv;
}
after(async () => { if (srv) { dirs.push(srv.dataDir); await srv.stop(); } });

test('the real Node host, seen from outside: its own user and cgroup namespaces, no capability, seccomp, no_new_privs, RLIMIT_DATA', async (t) => {
  const s = await stack(t);
  const c = await newChat(s);
  const r = await run(s, c, 'print(6 * 7)');
  assert.equal(r.status, 'ok', JSON.stringify(r));
  if (!needTool(t, !BWRAP && NO_BWRAP)) return;
  const [pid] = hostNodePids(s);
  assert.ok(pid, 'the host node process');
  const st = status(pid);
  for (const set of ['CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb']) assert.equal(st[set], '0000000000000000', set);
  assert.equal(st.NoNewPrivs, '1');
  assert.equal(st.Seccomp, '2');
  assert.notEqual(readlinkSync(`/proc/${pid}/ns/user`), readlinkSync('/proc/self/ns/user'), 'a user namespace of its own');
  for (const ns of ['net', 'pid', 'cgroup']) assert.notEqual(readlinkSync(`/proc/${pid}/ns/${ns}`), readlinkSync(`/proc/self/ns/${ns}`), ns);
  assert.equal(readFileSync(`/proc/${pid}/uid_map`, 'utf8').trim().split(/\s+/)[0], '65534', 'uid 65534 inside');
  // (kernels + 1) x (kernel limit + 256 MiB of JS heap) + 512 MiB for the rest of the host.
  const limit = readFileSync(`/proc/${pid}/limits`, 'utf8').split('\n').find((l) => l.startsWith('Max data size'));
  assert.equal(limit.split(/\s{2,}/)[1], String(HOST_MB * 1048576), limit);
});

test('the real Node host, seen from outside: a root orchestrator starts it as uid 65534, so an escape from its namespace is nobody, not root', async (t) => {
  const s = await stack(t);
  if (!needTool(t, !BWRAP && NO_BWRAP)) return;
  if (process.getuid() !== 0) { t.skip(`the tests run as uid ${process.getuid()}, not root: hosts run as that uid outside`); return; }
  const [pid] = hostNodePids(s);
  assert.ok(pid, 'the host node process');
  const st = status(pid);
  assert.deepEqual(st.Uid.split(/\s+/), ['65534', '65534', '65534', '65534'], 'uid outside the namespace');
  assert.deepEqual(st.Gid.split(/\s+/), ['65534', '65534', '65534', '65534'], 'gid outside the namespace');
  assert.equal(st.Groups, '', 'no supplementary group');
  assert.equal(readFileSync(`/proc/${pid}/uid_map`, 'utf8').trim().split(/\s+/).join(' '), '65534 65534 1', 'uid 65534 inside is 65534 outside');
  assert.match(s.log, /host 0 started \(pid \d+, sandboxed, uid 65534 outside its namespace\)/);
  const c = await newChat(s);
  const r = await run(s, c, 'print(6 * 7)');
  assert.equal(r.stdout.trim(), '42', JSON.stringify(r));
});

// A checkout nobody may read: in a `mktemp -d` folder (0700, what CI's clone is), its files 0600
// and its folders 0700 (a clone made with umask 077), the server pointed at that tree's files
// (CEREA_STATIC_DIR=CLONE/build/www, so ROOT=CLONE).  The real host still runs as uid 65534
// inside its namespace and, under a root server, outside it (never root), from the copy the
// orchestrator made; the folder of the copy goes when the server stops.
test('a checkout nobody may read (0700 folder, 0600 files): the real host runs as uid 65534 inside and outside, and Python runs', async (t) => {
  if (!needTool(t, !BWRAP && NO_BWRAP)) return;
  const clone = tempDir('fs-clone');
  dirs.push(clone);
  for (const part of ['package.json', 'worker', 'kernel']) cpSync(join(ROOT, part), join(clone, part), { recursive: true });
  cpSync(join(ROOT, 'build', 'www', 'pyodide'), join(clone, 'build', 'www', 'pyodide'), { recursive: true });
  const lock = (p) => {
    const st = statSync(p);
    chmodSync(p, st.isDirectory() ? 0o700 : 0o600);
    if (st.isDirectory()) for (const e of readdirSync(p)) lock(join(p, e));
  };
  lock(clone);
  assert.equal(statSync(clone).mode & 0o777, 0o700);
  assert.equal(statSync(join(clone, 'worker', 'headless-host.js')).mode & 0o777, 0o600);
  const s = await startStack({ env: { CEREA_STATIC_DIR: join(clone, 'build', 'www'), CEREA_HOST_KERNELS: '1' } });
  dirs.push(s.dataDir);
  let base = null;
  try {
    await hostReady(s);
    const c = await newChat(s);
    const r = await run(s, c, 'print(6 * 7)');
    assert.equal(r.status, 'ok', `${JSON.stringify(r)}\n${s.log.slice(-2000)}`);
    assert.equal(r.stdout.trim(), '42');
    const [pid] = hostNodePids(s);
    assert.ok(pid, 'the host node process');
    const outside = process.getuid() === 0 ? '65534' : String(process.getuid());
    assert.deepEqual(status(pid).Uid.split(/\s+/), [outside, outside, outside, outside], 'uid outside the namespace');
    assert.equal(readFileSync(`/proc/${pid}/uid_map`, 'utf8').trim().split(/\s+/).join(' '), `65534 ${outside} 1`, 'uid 65534 inside');
    assert.ok(cmdline(pid).includes('/cerea/worker/headless-host.js'), cmdline(pid).join(' '));
    base = /^unix:(\/tmp\/cerea-hosts-[^/]+)\/sock\/hosts\.sock$/.exec(cmdline(pid).find((a) => a.startsWith('unix:')))?.[1] ?? null;
    if (process.getuid() === 0) assert.ok(base, `a root server's hosts have their socket in /tmp: ${cmdline(pid).join(' ')}`);
    assert.match(s.log, new RegExp(`host 0 started \\(pid \\d+, sandboxed, uid ${outside} outside its namespace\\)`));
    assert.doesNotMatch(s.log, /as root|refusing/);
  } finally { await s.stop(); }
  if (base) assert.equal(existsSync(base), false, `${base} (the copy for the hosts) is removed when the server stops`);
});

// Probes from Python in the real kernel; every line must say refused.
const ESCAPES = (port) => [
  'import js, sys',
  'def tries(label, f):',
  '    try:',
  '        r = f()',
  '        print(label, "REACHED", repr(r)[:40])',
  '    except BaseException as e:',
  '        print(label, "refused", type(e).__name__)',
  'async def atries(label, f):',
  '    try:',
  '        r = await f()',
  '        print(label, "REACHED", repr(r)[:40])',
  '    except BaseException as e:',
  '        print(label, "refused", type(e).__name__)',
  'import pyodide_js',
  'await atries("useNodeSockFS", lambda: pyodide_js.useNodeSockFS())',
  'tries("_nodeSock", lambda: __import__("pyodide_js._api", fromlist=["_nodeSock"])._nodeSock.connect)',
  'tries("_module", lambda: pyodide_js._module)',
  'tries("FS", lambda: pyodide_js.FS)',
  'tries("loadPackage", lambda: pyodide_js.loadPackage)',
  'tries("registered", lambda: __import__("_pyodide._importhook", fromlist=["jsfinder"]).jsfinder.jsproxies["pyodide_js"])',
  'from pyodide.code import run_js',
  'await atries("import node:net", lambda: run_js(\'import("node:net")\'))',
  'await atries("Function import", lambda: js.Function(\'return import("node:tls")\')())',
  'tries("require", lambda: js.require("node:net"))',
  'tries("process", lambda: js.process.binding("tcp_wrap"))',
  'import socket, _socket',
  `tries("socket", lambda: socket.create_connection(("127.0.0.1", ${port}), timeout=2))`,
  `tries("_socket", lambda: _socket.socket().connect(("127.0.0.1", ${port})))`,
  `await atries("fetch", lambda: js.fetch("http://127.0.0.1:${port}/"))`,
].join('\n');

async function probeEscapes(s, t) {
  let hits = 0;
  const server = http.createServer((req, res) => { hits++; res.end('leak'); });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  try {
    const c = await newChat(s);
    const r = await run(s, c, ESCAPES(server.address().port));
    assert.equal(r.status, 'ok', JSON.stringify(r));
    const lines = r.stdout.trim().split('\n');
    t.diagnostic(lines.join(' | '));
    assert.equal(lines.length, 13, r.stdout);
    for (const l of lines) assert.match(l, / refused /, l);
    assert.equal(hits, 0, 'nothing reached the local server');
  } finally { server.close(); }
}

// The host's kernels restore the served memory snapshot (worker/snapshot.js) unless
// CEREA_KERNEL_SNAPSHOT=0: the probes run on both paths, and the log says which one each kernel took.
const RESTORED = /kernel restored from the served snapshot in \d+ ms/, LOADED = /kernel loaded in \d+ ms/;
test('Python reaches neither Pyodide\'s JS internals nor Node\'s modules or sockets (sandboxed host, kernels restored from the served snapshot)', async (t) => {
  const s = await stack(t);
  await probeEscapes(s, t);
  assert.match(s.log, RESTORED);
  assert.doesNotMatch(s.log, LOADED);
  assert.doesNotMatch(s.log, /memory snapshot refused/);
});

test('... nor on a host whose kernels load Python from scratch (CEREA_KERNEL_SNAPSHOT=0)', async (t) => {
  const s = await startStack({ env: { CEREA_KERNEL_SNAPSHOT: '0' } });
  dirs.push(s.dataDir);
  try {
    await hostReady(s);
    await probeEscapes(s, t);
    assert.match(s.log, LOADED);
    assert.doesNotMatch(s.log, RESTORED);
  } finally { await s.stop(); }
});

test('... nor with CEREA_SERVER_TRUSTED=1 (no bubblewrap: the kernel\'s own lock-down holds)', async (t) => {
  const s = await startStack({ env: { CEREA_SERVER_TRUSTED: '1' } });
  dirs.push(s.dataDir);
  try {
    await hostReady(s);
    assert.match(s.log, /TRUSTED: no bubblewrap/);
    await probeEscapes(s, t);
  } finally { await s.stop(); }
});

test('memory: a run that leaves its kernel over the limit ends crashed with the note; the kernel is replaced and the files remounted', async (t) => {
  const s = await stack(t);
  const c = await newChat(s);
  const up = await upload(s, c, 'keep.txt', Buffer.from('still here'));
  assert.ok([200, 201].includes(up.status), `upload: ${up.status}`);
  const chunk = Math.floor(KERNEL_MB / 3);
  // A message's copy is made where it arrives, past every constructor: only the run's end sees it.
  const r = await run(s, c, ['import js, asyncio', 'x = 1', `a = js.Uint8Array.new(${chunk} * 1024 * 1024)`,
    'ch = js.MessageChannel.new()', 'got = []', 'ch.port2.onmessage = lambda e: got.append(e.data)',
    'for _ in range(3):\n    ch.port1.postMessage(a)',
    'for _ in range(100):\n    if len(got) == 3:\n        break\n    await asyncio.sleep(0.05)',
    'ch.port2.close()', 'keep = [a, *got]', "print('kept', len(keep))"].join('\n'));
  assert.equal(r.status, 'crashed', JSON.stringify(r));
  assert.equal(r.error.message, `the sandbox ran out of memory (limit ${KERNEL_MB} MiB) and was restarted`);
  assert.equal(r.stdout, 'kept 4\n');
  assert.equal(r.restarted, true);
  assert.deepEqual(r.remounted, ['keep.txt']);
  const next = await run(s, c, "print('x' in globals(), open('/mnt/data/keep.txt').read())");
  assert.equal(next.status, 'ok', JSON.stringify(next));
  assert.equal(next.stdout.trim(), 'False still here');
  const heap = await run(s, c, `b = bytearray(${KERNEL_MB + 32} * 1024 * 1024)`);
  assert.equal(heap.status, 'error');
  assert.equal(heap.error.type, 'MemoryError');
});

// 900 KB pieces, each under what the guard once looked at (1 MiB), enough to pass the whole host's
// RLIMIT_DATA, not only the kernel's cap: files in the kernel's in-memory /tmp, then arrays kept
// from Python.  The run's kernel stops at its cap (a full disk, a refused array), and the host
// process and the other chat on it (its namespace) live on.
test('memory: one chat past its kernel\'s cap in 900 KB pieces (files in /tmp, arrays kept) stops alone; the host and the other chat\'s namespace live on', async (t) => {
  const s = await stack(t);
  const other = await newChat(s);
  assert.equal((await run(s, other, 'x = 41')).status, 'ok');
  const [host] = hostNodePids(s);
  assert.ok(host, 'the host node process');
  const hog = await newChat(s);
  const pieces = Math.ceil((HOST_MB * 1.25 * 1048576) / 900_000);
  const files = await run(s, hog, ['n = 0', 'try:', `    for i in range(${pieces}):`,
    "        open(f'/tmp/f{i}', 'wb').write(b'x' * 900_000)", '        n += 1',
    'except OSError as e:', "    print('files stopped', n, e.strerror)"].join('\n'));
  assert.equal(files.status, 'ok', JSON.stringify(files));
  const f = /^files stopped (\d+) No space left on device$/m.exec(files.stdout);
  assert.ok(f && Number(f[1]) * 900_000 < KERNEL_MB * 1048576, files.stdout);
  const arrays = await run(s, hog, ['import js, os', "for name in os.listdir('/tmp'):\n    os.remove('/tmp/' + name)",
    'keep = []', 'try:', `    for i in range(${pieces}):`, '        keep.append(js.Uint8Array.new(900_000))',
    'except Exception as e:', "    print('arrays stopped', len(keep), type(e).__name__)"].join('\n'));
  assert.equal(arrays.status, 'ok', JSON.stringify(arrays));
  const a = /^arrays stopped (\d+) JsException$/m.exec(arrays.stdout);
  assert.ok(a && Number(a[1]) * 900_000 < KERNEL_MB * 1048576, arrays.stdout);
  const answer = await run(s, other, 'print(x + 1)');
  assert.equal(answer.status, 'ok', JSON.stringify(answer));
  assert.equal(answer.stdout.trim(), '42');
  assert.equal(answer.restarted, false);
  assert.deepEqual(hostNodePids(s), [host], 'the same host process');
  const st = status(host);
  t.diagnostic(`files stopped at ${f[1]}, arrays at ${a[1]} pieces of 900 KB; host VmHWM ${st.VmHWM}, VmRSS ${st.VmRSS}, limit ${HOST_MB} MiB`);
});
