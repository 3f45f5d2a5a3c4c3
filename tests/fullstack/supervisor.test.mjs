// supervisor.test.mjs -- orchestrator/hosts/hosts.c's supervision, with stand-in hosts (CEREA_NODE points
// at a small shell script instead of node; no Pyodide): the command line and credential a host
// gets, restart with backoff when one exits, chats spread over N hosts, no zombies, and every host
// killed by handle when the orchestrator stops.  The script lives in a folder of its own that
// everyone may read (a root server's hosts run as nobody; bubblewrap binds node's folder when it
// is not under /usr) and writes what it sees to its stderr, the server's log, so the same test
// runs sandboxed (bubblewrap) and trusted.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, writeFileSync, rmSync } from 'node:fs';
import { startStack, tempDir, newChat, call, sleep, descendants, BWRAP } from './lib.mjs';

const dirs = [];
after(() => { for (const d of dirs) rmSync(d, { recursive: true, force: true }); });

// A folder for a stand-in host, reachable by others.
function hostDir() {
  const dir = tempDir('fs-sup-host');
  dirs.push(dir);
  chmodSync(dir, 0o755);
  return dir;
}

// A stand-in host: logs its argv and every stdin line on stderr as `fake-host <page id>: ...`,
// says `ready`, and exits after EXIT_AFTER seconds when that is set (else runs until stdin closes).
function fakeHost(dataDir, { exitAfter = '' } = {}) {
  const path = `${hostDir()}/fake-node.sh`;
  writeFileSync(path, `#!/bin/sh
id=unknown
prev=
for a in "$@"; do [ "$prev" = "--page-id" ] && id=$a; prev=$a; done
say() { echo "fake-host $id: $*" >&2; }
say "argv $*"
say "view root=$(ls / | tr '\n' ,) db=$(test -e "${dataDir}/cerea.db" && echo yes || echo no) etc=$(ls /etc | tr '\n' ,)"
echo ready
if [ -n "${exitAfter}" ]; then sleep ${exitAfter}; exit 7; fi
while read -r line; do say "stdin $line"; done
`, { mode: 0o755 });
  return path;
}

// What host `id` said, each line once, without the prefix (srv.log holds the server's stderr
// twice over once it started: integration/lib.mjs appends it from two listeners).
const logOf = (srv, id) => [...new Set(srv.log.split('\n').filter((l) => l.startsWith(`fake-host ${id}: `))
  .map((l) => l.slice(`fake-host ${id}: `.length)))].join('\n');

function zombies(pid) {
  return descendants(pid).filter((p) => {
    try { return / Z /.test(readFileSync(`/proc/${p}/stat`, 'utf8').replace(/^.*\)/, ')')); } catch { return false; }
  });
}

test('hosts get the sandboxed command line and the credential on stdin; chats spread over N hosts; all killed by handle on stop', async () => {
  const dataDir = tempDir('fs-sup');
  dirs.push(dataDir);
  const node = fakeHost(dataDir);
  const srv = await startStack({ dataDir, env: { CEREA_NODE: node, CEREA_HOSTS: '2' } });
  try {
    for (let i = 0; i < 100 && (srv.log.match(/ready/g) || []).length < 2; i++) await sleep(50);
    const c1 = await newChat(srv), c2 = await newChat(srv);
    await call(srv, 'POST', `/v1/chats/${c1.id}/runs`, { body: { code: 'print(1)' } });
    await call(srv, 'POST', `/v1/chats/${c2.id}/runs`, { body: { code: 'print(2)' } });
    for (let i = 0; i < 100 && !(logOf(srv, 'host-0') + logOf(srv, 'host-1')).includes(c2.id); i++) await sleep(50);
    const h0 = logOf(srv, 'host-0'), h1 = logOf(srv, 'host-1');
    assert.match(h0, /^argv --disallow-code-generation-from-strings --experimental-permission --allow-worker --allow-fs-read=\S+\/worker --allow-fs-read=\S+\/kernel --allow-fs-read=\S+\/pyodide/m);
    assert.match(h0, /--orchestrator unix:\S+\/(sock|hosts)\/hosts\.sock --page-id host-0 --kernels 3 --control stdin/);
    // The hosts' own key (page-level calls only, new at every start), on stdin: never the API key,
    // never in argv or the environment.
    const key = /^stdin key ([0-9a-f]{64})$/m.exec(h0);
    assert.ok(key, h0);
    assert.notEqual(key[1], srv.key);
    assert.doesNotMatch(h0, new RegExp(`argv .*(${key[1]}|${srv.key})`));
    const asBackend = await call(srv, 'POST', '/v1/chats', { token: key[1], body: {} });
    assert.ok([401, 403].includes(asBackend.status), `the host key cannot create chats: ${asBackend.status}`);
    // It reaches the page protocol of every chat, but not what the person at the page does: a
    // host never posts a message (that spends the model), runs code, renames or mints a chat key.
    assert.equal((await call(srv, 'GET', `/v1/chats/${c1.id}/files`, { token: key[1] })).status, 200);
    for (const [method, path, body] of [
      ['POST', `/v1/chats/${c1.id}/messages`, { text: 'hello' }],
      ['GET', `/v1/chats/${c1.id}/messages`],
      ['POST', `/v1/chats/${c1.id}/runs`, { code: 'print(3)' }],
      ['PATCH', `/v1/chats/${c1.id}`, { title: 'renamed' }],
      ['POST', `/v1/chats/${c1.id}/chat_key`],
    ]) {
      const r = await call(srv, method, path, { token: key[1], body });
      assert.equal(r.status, 403, `${method} ${path} with the host key: ${r.status}`);
    }
    const attached = [h0, h1].map((l) => [...l.matchAll(/^stdin attach (\S+)$/gm)].map((m) => m[1]));
    assert.deepEqual(attached.flat().sort(), [c1.id, c2.id].sort());
    assert.equal(attached[0].length, 1, 'one chat per host: the least loaded ready host takes the next');
    if (BWRAP) {
      assert.match(srv.log, /host 0 started \(pid \d+, sandboxed, uid \d+ outside its namespace\)/);
      // What the sandbox sees of the machine: /usr and its symlinks, /dev, /proc, /tmp, our tree at
      // /cerea; not the database, not /root, /home or /etc beyond the loader cache.
      const view = /^view root=(\S*) db=(\w+) etc=(\S*)$/m.exec(h0);
      assert.ok(view, h0);
      assert.deepEqual(view[1].split(',').filter(Boolean).filter((d) => !['bin', 'cerea', 'dev', 'etc', 'lib', 'lib64', 'proc', 'sbin', 'tmp', 'usr'].includes(d)), []);
      assert.equal(view[2], 'no', 'the data dir (database, blobs, api_key) is not visible');
      assert.deepEqual(view[3].split(',').filter(Boolean), ['ld.so.cache']);
    }
    const kids = descendants(srv.pid);
    assert.ok(kids.length >= 2);
    const r = await srv.stop();
    assert.equal(r.code, 0);
    // bwrap's children die with it (--die-with-parent: SIGKILL as soon as bwrap is gone).
    const alive = () => kids.filter((p) => { try { process.kill(p, 0); return true; } catch { return false; } });
    for (let i = 0; i < 60 && alive().length; i++) await sleep(50);
    assert.deepEqual(alive(), [], 'no process outlived the orchestrator by 3 s');
  } finally { await srv.stop(); }
});

test('a host that keeps exiting is restarted with backoff (not in a tight loop) and leaves no zombies', async () => {
  const dataDir = tempDir('fs-sup');
  dirs.push(dataDir);
  const node = fakeHost(dataDir, { exitAfter: '0.1' });
  const srv = await startStack({ dataDir, env: { CEREA_NODE: node } });
  try {
    await sleep(3500);
    const starts = new Set([...srv.log.matchAll(/host 0 started \(pid (\d+)/g)].map((m) => m[1])).size;
    // 0.1 s of life, then 250, 500, 1000, 2000 ms of backoff: about 4-5 starts in 3.5 s, never 30.
    assert.ok(starts >= 3 && starts <= 6, `starts in 3.5 s: ${starts}\n${srv.log.slice(-1500)}`);
    assert.match(srv.log, /host 0 exited \(status 7, signal 0\)/);
    assert.deepEqual(zombies(srv.pid), []);
  } finally { await srv.stop(); }
});

test('a host that exits refusing its sandbox (status 3) is reported as such', async () => {
  const dataDir = tempDir('fs-sup');
  dirs.push(dataDir);
  const node = `${hostDir()}/refuse.sh`;
  writeFileSync(node, '#!/bin/sh\nexit 3\n', { mode: 0o755 });
  const srv = await startStack({ dataDir, env: { CEREA_NODE: node } });
  try {
    for (let i = 0; i < 60 && !/refused to run without its sandbox/.test(srv.log); i++) await sleep(50);
    assert.match(srv.log, /host 0 exited \(status 3, signal 0\) after \d+ ms: it refused to run without its sandbox/);
  } finally { await srv.stop(); }
});

test('a chat idle past CEREA_HOST_CHAT_IDLE_S is detached from its host', async () => {
  const dataDir = tempDir('fs-sup');
  dirs.push(dataDir);
  const node = fakeHost(dataDir);
  const srv = await startStack({ dataDir, env: { CEREA_NODE: node, CEREA_HOST_CHAT_IDLE_S: '1', CODE_CANCEL_GRACE_MS: '100' } });
  try {
    for (let i = 0; i < 100 && !/ready/.test(srv.log); i++) await sleep(50);
    const c = await newChat(srv);
    const r = await call(srv, 'POST', `/v1/chats/${c.id}/runs`, { body: { code: 'print(1)' } });
    for (let i = 0; i < 100 && !logOf(srv, 'host-0').includes(`attach ${c.id}`); i++) await sleep(50);
    assert.match(logOf(srv, 'host-0'), new RegExp(`^stdin attach ${c.id}$`, 'm'));
    await sleep(1500);
    assert.doesNotMatch(logOf(srv, 'host-0'), /detach/, 'not while the chat has a live run');
    await call(srv, 'POST', `/v1/runs/${r.json.run_id}/cancel`, { body: {} });
    for (let i = 0; i < 100 && !logOf(srv, 'host-0').includes('detach'); i++) await sleep(50);
    assert.match(logOf(srv, 'host-0'), new RegExp(`^stdin detach ${c.id}$`, 'm'));
  } finally { await srv.stop(); }
});
