// run_bench.mjs -- runs end to end under load over HTTP/2 (h2c), against a running orchestrator.
//
//   node bench/runs/run_bench.mjs --port P --key K --server-pid PID [--chats 1000] [--assistants 64]
//                                 [--duration 10] [--low 2000] [--db-pid PID]
//
// Several nodes (bench/nodes.sh): --port P1,P2,P3 --server-pid PID1,PID2,PID3: chat i is created on
// node i mod n, and its page and its assistant's runs go to that node (a balancer hashing on the
// chat id, as docs/scale.md's, reaching the owner); the server CPU is the nodes' together.
// --db-pid: a PostgreSQL postmaster, whose CPU and its backends' is printed per run beside it.
//
// Acts as N pages (one per chat, each an event stream; on `run` it POSTs the result at once) and
// M assistants (each POSTs a run with wait_s to its own chats in turn and waits for the answer).
// One run = create (durable) -> `run` event (durable) -> result (durable) -> the create answers.
// Prints, for a low-load phase (one assistant, sequential) and a loaded phase (M assistants for
// --duration s): runs/s, p50/p99/max round trip, and the server's CPU time per run (from
// /proc/PID/stat).  Pages spread over sessions of <= 50 streams (the server advertises <= 100).
import http2 from 'node:http2';
import { readFileSync, readdirSync } from 'node:fs';

const args = Object.fromEntries(process.argv.slice(2).reduce((a, v, i, all) => (v.startsWith('--') ? a.concat([[v.slice(2), all[i + 1]]]) : a), []));
const PORTS = String(args.port).split(',').map(Number), KEY = args.key;
const PIDS = String(args['server-pid']).split(',').map(Number), DB_PID = Number(args['db-pid'] || 0);
const CHATS = Number(args.chats || 1000), ASSIST = Number(args.assistants || 64);
const DURATION = Number(args.duration || 10), LOW = Number(args.low || 2000);
const PAGES_PER_SESSION = 50;

function session(node = 0) {
  const s = http2.connect(`http://127.0.0.1:${PORTS[node]}`);
  s.on('error', (e) => { console.error('session error', e.message); process.exit(1); });
  return s;
}

function request(s, method, path, auth, body) {
  return new Promise((resolve, reject) => {
    const req = s.request({ ':method': method, ':path': path, authorization: `Bearer ${auth}`, 'content-type': 'application/json' });
    const chunks = [];
    let status = 0;
    req.on('response', (h) => { status = h[':status']; });
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => resolve({ status, body: Buffer.concat(chunks).toString() }));
    req.on('error', reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

// utime + stime (fields 14, 15) of a process, and its ppid (field 4); null when it is gone
function stat(pid) {
  let f;
  try { f = readFileSync(`/proc/${pid}/stat`, 'utf8'); } catch { return null; }
  const rest = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return { ticks: Number(rest[11]) + Number(rest[12]), ppid: Number(rest[1]) };
}
function cpuTicks() { return PIDS.reduce((t, p) => t + stat(p).ticks, 0); }
// the postmaster and its live backends (the nodes' connections stay open through a phase)
function dbTicks() {
  if (!DB_PID) return 0;
  let t = stat(DB_PID).ticks;
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    const s = stat(d);
    if (s && s.ppid === DB_PID) t += s.ticks;
  }
  return t;
}
const TICK_MS = 10; // USER_HZ 100 on Linux

function pct(sorted, p) { return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]; }
function summary(name, lat, ms, cpu0, cpu1, db0, db1) {
  lat.sort((a, b) => a - b);
  const n = lat.length;
  const cpuPerRun = ((cpu1 - cpu0) * TICK_MS * 1000) / Math.max(1, n);
  const line = { phase: name, runs: n, runs_per_s: +(n / (ms / 1000)).toFixed(1),
    p50_ms: +pct(lat, 0.5).toFixed(3), p99_ms: +pct(lat, 0.99).toFixed(3), max_ms: +lat[n - 1].toFixed(3),
    server_cpu_us_per_run: +cpuPerRun.toFixed(1) };
  if (DB_PID) line.db_cpu_us_per_run = +(((db1 - db0) * TICK_MS * 1000) / Math.max(1, n)).toFixed(1);
  console.log(JSON.stringify(line));
  return line;
}

async function main() {
  // chats
  const admins = PORTS.map((_, n) => session(n));
  const chats = [];
  for (let i = 0; i < CHATS; i += 50) {
    const batch = await Promise.all(Array.from({ length: Math.min(50, CHATS - i) }, (_, k) => {
      const node = (i + k) % PORTS.length;
      return request(admins[node], 'POST', '/v1/chats', KEY, {}).then((r) => ({ ...r, node }));
    }));
    for (const r of batch) { if (r.status !== 201) throw new Error(`chat: ${r.status} ${r.body}`); chats.push({ ...JSON.parse(r.body), node: r.node }); }
  }
  // pages
  const pageSessions = [];
  const open = PORTS.map(() => ({ s: null, n: 0 })); // each node's session taking pages
  let attached = 0;
  await new Promise((resolveAll) => {
    chats.forEach((c) => {
      const o = open[c.node];
      if (o.s === null || o.n++ === PAGES_PER_SESSION) { o.s = session(c.node); o.n = 1; pageSessions.push(o.s); }
      const s = o.s;
      const req = s.request({ ':method': 'GET', ':path': `/v1/chats/${c.chat_id}/events?page_id=bench`, authorization: `Bearer ${c.page_token}` });
      let buf = '';
      req.setEncoding('utf8');
      req.on('response', (h) => { if (h[':status'] !== 200) throw new Error(`events ${h[':status']}`); if (++attached === chats.length) resolveAll(); });
      req.on('data', (d) => {
        buf += d;
        let k;
        while ((k = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, k); buf = buf.slice(k + 2);
          if (!block.includes('event: run')) continue;
          const data = JSON.parse(block.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('\n'));
          request(s, 'POST', `/v1/runs/${data.run_id}/result`, c.page_token, { attempt: data.attempt, status: 'ok', stdout: '', stderr: '', files: [] })
            .then((r) => { if (r.status !== 200) console.error('result', r.status, r.body); });
        }
      });
    });
  });
  console.log(JSON.stringify({ chats: chats.length, pages_attached: attached, page_sessions: pageSessions.length }));

  const perNode = Math.max(1, Math.ceil(ASSIST / 50));
  const asSessions = PORTS.map((_, n) => Array.from({ length: perNode }, () => session(n)));
  async function oneRun(a, c) {
    const list = asSessions[c.node], s = list[a % list.length];
    const t0 = process.hrtime.bigint();
    const r = await request(s, 'POST', `/v1/chats/${c.chat_id}/runs`, KEY, { code: 'pass', wait_s: 30 });
    const ms = Number(process.hrtime.bigint() - t0) / 1e6;
    if (r.status !== 201 || !r.body.includes('"status":"ok"')) throw new Error(`run: ${r.status} ${r.body.slice(0, 200)}`);
    return ms;
  }
  // warm-up
  for (let i = 0; i < 50; i++) await oneRun(0, chats[i % chats.length]);
  // low load: one assistant, sequential
  let lat = [], cpu0 = cpuTicks(), db0 = dbTicks(), t0 = Date.now();
  for (let i = 0; i < LOW; i++) lat.push(await oneRun(0, chats[i % chats.length]));
  const low = summary('low_load_1_assistant', lat, Date.now() - t0, cpu0, cpuTicks(), db0, dbTicks());
  // loaded: M assistants, each on its own chats (runs of one chat are sequential by design)
  lat = []; cpu0 = cpuTicks(); db0 = dbTicks(); t0 = Date.now();
  const end = t0 + DURATION * 1000;
  await Promise.all(Array.from({ length: ASSIST }, async (_, a) => {
    for (let i = a; Date.now() < end; i += ASSIST) lat.push(await oneRun(a, chats[i % chats.length]));
  }));
  const loaded = summary(`loaded_${ASSIST}_assistants`, lat, Date.now() - t0, cpu0, cpuTicks(), db0, dbTicks());
  for (const s of [...admins, ...pageSessions, ...asSessions.flat()]) s.close();
  console.log(JSON.stringify({ result: { low, loaded } }));
  setTimeout(() => process.exit(0), 200).unref();
}
main().catch((e) => { console.error(e); process.exit(1); });
