// headless-host.js -- a kernel host without a screen: attaches chats to the orchestrator exactly as
// a page does (worker/session.js, one PageSession per chat, over host/http.js) and runs their
// Python in Pyodide kernels, one worker thread per chat (worker/supervisor.js, one KernelSupervisor
// per chat, all over one KernelPool: at most --kernels live kernels, the least recently used idle
// one evicted, one pre-loaded spare shared by every chat).  The orchestrator spawns and supervises
// these in `server` mode (orchestrator/hosts/hosts.c); operators and tests can also start one by hand.
//
//   node [sandbox flags] worker/headless-host.js --orchestrator unix:/path|http://127.0.0.1:PORT
//        [--page-id ID] [--kernels N] [--chat CHAT]... [--control stdin]
//
// Credential: CEREA_HOST_CREDENTIAL (a page token or the API key), or a `key K` line on stdin.
// Control channel (--control stdin, what hosts.c uses): one command a line on stdin —
//   key K         the bearer credential for every call
//   attach CHAT   attach that chat (idempotent)          → stdout "attached CHAT"
//   detach CHAT   close its stream and kernel            → stdout "detached CHAT"
// and the host writes "ready" on stdout once its spare kernel is loaded.  EOF on stdin (the
// orchestrator went away) ends the host.
//
// Sandbox (docs/server-mode.md, "The sandbox"): the host refuses to start unless it runs
// with --disallow-code-generation-from-strings, Node's permission model (no child processes, no
// fs writes, reads limited to the runtime and our sources), as a uid other than root with no
// capability, no_new_privs and a seccomp filter, and inside a network namespace (no interface but
// loopback), unless CEREA_SERVER_TRUSTED=1 says the code it runs is trusted.  The
// kernels' worker scope also loses Node's globals (worker/host/sandbox-worker.js).
//
// What it does not do: decide which chats it serves (the orchestrator assigns them) or restart
// itself (its supervisor does).
import os from 'node:os';
import { readFileSync } from 'node:fs';
import readline from 'node:readline';
import { newNodePool } from './node-kernel.js';
import { OrchClient } from './host/http.js';
import { KernelSupervisor } from './supervisor.js';
import { PageSession } from './session.js';

// What the sandbox lacks, as a list of reasons ([] when every layer is in place).
export function sandboxProblems() {
  const problems = [];
  if (!process.execArgv.includes('--disallow-code-generation-from-strings'))
    problems.push('V8 code generation from strings is allowed (start node with --disallow-code-generation-from-strings)');
  const perm = process.permission;
  if (!perm || typeof perm.has !== 'function') {
    problems.push("Node's permission model is off (start node with --experimental-permission)");
  } else {
    if (perm.has('child')) problems.push('child processes are allowed');
    if (perm.has('fs.write')) problems.push('file system writes are allowed');
    if (['/etc/passwd', '/root', '/home', '/tmp'].some((p) => perm.has('fs.read', p))) problems.push('file system reads are not limited');
  }
  // The process itself (bubblewrap's user namespace, --cap-drop ALL, --seccomp; hosts.c grants
  // the read of this one file): not root, no capability, a seccomp filter, no gaining privileges.
  let status = null;
  try { status = readFileSync('/proc/self/status', 'utf8'); } catch (e) {
    problems.push(`its privileges cannot be checked: /proc/self/status is unreadable (${e.code || e.message}; start node with --allow-fs-read=/proc/self/status)`);
  }
  if (status !== null) {
    const field = (name) => ((status.match(new RegExp(`^${name}:\\s*(.*)$`, 'm')) || [])[1] || '').trim();
    if (field('Uid').split(/\s+/).includes('0')) problems.push(`it runs as root (Uid ${field('Uid')}): run it in a user namespace as another uid (bwrap --unshare-user --uid)`);
    for (const set of ['CapEff', 'CapPrm', 'CapBnd'])
      if (!/^0+$/.test(field(set))) problems.push(`it holds capabilities (${set} ${field(set)}): drop them (bwrap --cap-drop ALL)`);
    if (field('NoNewPrivs') !== '1') problems.push('it could gain privileges (NoNewPrivs is not 1)');
    if (field('Seccomp') !== '2') problems.push('no seccomp filter is installed (bwrap --seccomp)');
  }
  const ifaces = os.networkInterfaces();
  const outside = Object.entries(ifaces).filter(([, addrs]) => addrs.some((a) => !a.internal)).map(([n]) => n);
  if (outside.length) problems.push(`network interfaces beyond loopback are reachable (${outside.join(', ')}): run inside a network namespace (bwrap --unshare-net)`);
  return problems;
}

function parseArgs(argv) {
  const o = { orchestrator: null, pageId: `host-${process.pid}`, kernels: 2, chats: [], control: null };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i], v = argv[i + 1];
    if (a === '--orchestrator') { o.orchestrator = v; i++; }
    else if (a === '--page-id') { o.pageId = v; i++; }
    else if (a === '--kernels') { o.kernels = Math.max(1, parseInt(v, 10) || 1); i++; }
    else if (a === '--chat') { o.chats.push(v); i++; }
    else if (a === '--control') { o.control = v; i++; }
    else throw new Error(`unknown argument ${a}`);
  }
  if (!o.orchestrator) throw new Error('--orchestrator unix:PATH|http://HOST:PORT is required');
  if (!/^[A-Za-z0-9._-]{1,64}$/.test(o.pageId)) throw new Error('--page-id: 1 to 64 of A-Z a-z 0-9 . _ -');
  return o;
}

export async function main(argv = process.argv.slice(2)) {
  const say = (line) => process.stdout.write(line + '\n');
  const log = (line) => process.stderr.write(`headless-host[${process.pid}]: ${line}\n`);
  let opts;
  try { opts = parseArgs(argv); } catch (e) { log(e.message); process.exit(2); }
  const problems = sandboxProblems();
  if (problems.length && process.env.CEREA_SERVER_TRUSTED !== '1') {
    log(`refusing to run untrusted code without a sandbox: ${problems.join('; ')} (CEREA_SERVER_TRUSTED=1 runs it anyway)`);
    process.exit(3);
  }
  if (problems.length) log(`running TRUSTED code without a full sandbox: ${problems.join('; ')}`);

  const client = new OrchClient(opts.orchestrator, process.env.CEREA_HOST_CREDENTIAL || null);
  // The kernels run in host/sandbox-worker.js (Node's globals removed once the kernel loaded),
  // each with a JavaScript heap of its own bounded: a kernel over it is ended alone
  // (ERR_WORKER_OUT_OF_MEMORY, reported crashed), never the host.
  const heapMb = Math.max(64, parseInt(process.env.CEREA_KERNEL_JS_HEAP_MB || '', 10) || 256);
  const resourceLimits = { maxOldGenerationSizeMb: heapMb, maxYoungGenerationSizeMb: 32 };
  const pool = newNodePool({ entry: 'sandbox', loadTimeoutMs: 120000, workerOptions: { resourceLimits } },
    { max: opts.kernels, spare: true, log });
  const chats = new Map();     // chat id → {session, supervisor}
  const dropped = new Set();   // chats detached after their kernel existed: their next run says restarted
  const attach = (id) => {
    if (!/^[A-Za-z0-9._-]{1,80}$/.test(id)) { log(`attach: bad chat id ${JSON.stringify(id)}`); return; }
    const have = chats.get(id);
    if (have && have.session.state === 'attached' && have.session.stream.state !== 'failed') { say(`attached ${id}`); return; }
    if (have) { have.session.detach(); have.supervisor.dispose(); }
    const supervisor = new KernelSupervisor({ pool, id: `chat ${id}`, cancelGraceMs: 2000, lost: dropped.delete(id) ? 'detached' : null, log });
    // The Unix socket is local and the orchestrator stored the bytes by their sha256: no re-hash here.
    const session = new PageSession({ chatId: id, pageId: opts.pageId, client, supervisor, visible: true, verifyFiles: false,
      initialBackoffMs: 100, maxBackoffMs: 2000, log });
    chats.set(id, { session, supervisor });
    session.attach();
    say(`attached ${id}`);
  };
  const detach = (id) => {
    const c = chats.get(id);
    if (c) {
      if (c.supervisor.kernel || c.supervisor.lost) dropped.add(id);
      c.session.detach(); c.supervisor.dispose(); chats.delete(id);
    }
    say(`detached ${id}`);
  };
  let stopping = false;
  const stop = (why) => {
    if (stopping) return;
    stopping = true;
    log(`stopping (${why})`);
    for (const c of chats.values()) { try { c.session.detach(); c.supervisor.dispose(); } catch { /* already closed */ } }
    pool.dispose();
    client.close();
    setTimeout(() => process.exit(0), 50).unref();
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));

  pool.startSpare();
  pool.spare.ready.then(() => say('ready'), (e) => { log(`the kernel does not load: ${e.message}`); process.exit(4); });
  for (const id of opts.chats) attach(id);

  if (opts.control === 'stdin') {
    const rl = readline.createInterface({ input: process.stdin });
    rl.on('line', (line) => {
      const [cmd, arg] = line.trim().split(/\s+/, 2);
      if (cmd === 'key') client.credential = arg;
      else if (cmd === 'attach') attach(arg);
      else if (cmd === 'detach') detach(arg);
      else if (cmd === 'quit') stop('quit');
      else if (cmd) log(`unknown control command ${cmd}`);
    });
    rl.on('close', () => stop('control channel closed'));
  }
}

main();
