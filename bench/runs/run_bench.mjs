// run_bench.mjs -- runs end to end under load over HTTP/2 (h2c), against a running orchestrator.
//
//   node bench/runs/run_bench.mjs --port P --key K --server-pid PID [--chats 1000] [--assistants 64]
//                                 [--duration 10] [--low 2000]
//
// Acts as N pages (one per chat, each an event stream; on `run` it POSTs the result at once) and
// M assistants (each POSTs a run with wait_s to its own chats in turn and waits for the answer).
// One run = create (durable) -> `run` event (durable) -> result (durable) -> the create answers.
// Prints, for a low-load phase (one assistant, sequential) and a loaded phase (M assistants for
// --duration s): runs/s, p50/p99/max round trip, and the server's CPU time per run (from
// /proc/PID/stat).  Pages spread over sessions of <= 50 streams (the server advertises <= 100).
import http2 from 'node:http2';
import { readFileSync } from 'node:fs';

const args = Object.fromEntries(process.argv.slice(2).reduce((a, v, i, all) => (v.startsWith('--') ? a.concat([[v.slice(2), all[i + 1]]]) : a), []));
const PORT = Number(args.port), KEY = args.key, PID = Number(args['server-pid']);
const CHATS = Number(args.chats || 1000), ASSIST = Number(args.assistants || 64);
const DURATION = Number(args.duration || 10), LOW = Number(args.low || 2000);
const PAGES_PER_SESSION = 50;
const ORIGIN = `http://127.0.0.1:${PORT}`;

function session() {
  const s = http2.connect(ORIGIN);
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

function cpuTicks() {
  const f = readFileSync(`/proc/${PID}/stat`, 'utf8');
  const rest = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return Number(rest[11]) + Number(rest[12]); // utime + stime (fields 14, 15)
}
const TICK_MS = 10; // USER_HZ 100 on Linux

function pct(sorted, p) { return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]; }
function summary(name, lat, ms, cpu0, cpu1) {
  lat.sort((a, b) => a - b);
  const n = lat.length;
  const cpuPerRun = ((cpu1 - cpu0) * TICK_MS * 1000) / Math.max(1, n);
  const line = { phase: name, runs: n, runs_per_s: +(n / (ms / 1000)).toFixed(1),
    p50_ms: +pct(lat, 0.5).toFixed(3), p99_ms: +pct(lat, 0.99).toFixed(3), max_ms: +lat[n - 1].toFixed(3),
    server_cpu_us_per_run: +cpuPerRun.toFixed(1) };
  console.log(JSON.stringify(line));
  return line;
}

async function main() {
  // chats
  const admin = session();
  const chats = [];
  for (let i = 0; i < CHATS; i += 50) {
    const batch = await Promise.all(Array.from({ length: Math.min(50, CHATS - i) }, () => request(admin, 'POST', '/v1/chats', KEY, {})));
    for (const r of batch) { if (r.status !== 201) throw new Error(`chat: ${r.status} ${r.body}`); chats.push(JSON.parse(r.body)); }
  }
  // pages
  const pageSessions = [];
  let attached = 0;
  await new Promise((resolveAll) => {
    chats.forEach((c, i) => {
      if (i % PAGES_PER_SESSION === 0) pageSessions.push(session());
      const s = pageSessions[pageSessions.length - 1];
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

  const asSessions = Array.from({ length: Math.max(1, Math.ceil(ASSIST / 50)) }, session);
  async function oneRun(s, c) {
    const t0 = process.hrtime.bigint();
    const r = await request(s, 'POST', `/v1/chats/${c.chat_id}/runs`, KEY, { code: 'pass', wait_s: 30 });
    const ms = Number(process.hrtime.bigint() - t0) / 1e6;
    if (r.status !== 201 || !r.body.includes('"status":"ok"')) throw new Error(`run: ${r.status} ${r.body.slice(0, 200)}`);
    return ms;
  }
  // warm-up
  for (let i = 0; i < 50; i++) await oneRun(asSessions[0], chats[i % chats.length]);
  // low load: one assistant, sequential
  let lat = [], cpu0 = cpuTicks(), t0 = Date.now();
  for (let i = 0; i < LOW; i++) lat.push(await oneRun(asSessions[0], chats[i % chats.length]));
  const low = summary('low_load_1_assistant', lat, Date.now() - t0, cpu0, cpuTicks());
  // loaded: M assistants, each on its own chats (runs of one chat are sequential by design)
  lat = []; cpu0 = cpuTicks(); t0 = Date.now();
  const end = t0 + DURATION * 1000;
  await Promise.all(Array.from({ length: ASSIST }, async (_, a) => {
    const s = asSessions[a % asSessions.length];
    for (let i = a; Date.now() < end; i += ASSIST) lat.push(await oneRun(s, chats[i % chats.length]));
  }));
  const loaded = summary(`loaded_${ASSIST}_assistants`, lat, Date.now() - t0, cpu0, cpuTicks());
  for (const s of [admin, ...pageSessions, ...asSessions]) s.close();
  console.log(JSON.stringify({ result: { low, loaded } }));
  setTimeout(() => process.exit(0), 200).unref();
}
main().catch((e) => { console.error(e); process.exit(1); });
