// chunks.mjs -- live output through the orchestrator: a scripted page POSTs output chunks, one at
// a time, while a backend follows the run on its event stream (GET /v1/runs/{run}/events) and the
// page's own chat stream receives them too (live events).
//
//   node bench/output/chunks.mjs --port P --key K [--runs 20] [--chunks 150] [--text 40]
//                                [--server-pid PID]
//
// Each of --runs runs gets --chunks chunks of --text characters of stdout (kept under the 8,000-
// character cap, so every chunk is held and published), then its result.  Prints one JSON line:
// the latency from sending a chunk's POST to its `output` event at the backend's run stream and at
// the chat stream (p50/p99/max, ms), the POST's own round trip, and with --server-pid the server's
// CPU per chunk (from /proc/PID/stat: coarse; bench/output/callgrind.sh counts instructions).
import { readFileSync } from 'node:fs';
import { call, newChat, Page, runEvents } from '../../tests/integration/lib.mjs';

const args = Object.fromEntries(process.argv.slice(2).reduce((a, v, i, all) => (v.startsWith('--') ? a.concat([[v.slice(2), all[i + 1]]]) : a), []));
const srv = { base: `http://127.0.0.1:${Number(args.port)}`, key: args.key };
const RUNS = Number(args.runs || 20), CHUNKS = Number(args.chunks || 150), TEXT = Number(args.text || 40);
const PID = args['server-pid'] ? Number(args['server-pid']) : null;
if (CHUNKS * TEXT > 8000) throw new Error('--chunks x --text must stay within the 8,000-character cap');

const cpuTicks = () => {
  const stat = readFileSync(`/proc/${PID}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(f[11]) + Number(f[12]); // utime + stime, USER_HZ 100
};
const pct = (v, p) => v[Math.min(v.length - 1, Math.floor(v.length * p))];
const stats = (v) => { v.sort((a, b) => a - b); return { p50_ms: +pct(v, 0.5).toFixed(3), p99_ms: +pct(v, 0.99).toFixed(3), max_ms: +v[v.length - 1].toFixed(3) }; };

// Resolves when the stream holds an `output` of run `id` at `offset`; the time it arrived.
function arrival(stream, id, offset) {
  const hit = (e) => e.event === 'output' && e.data.run_id === id && e.data.offset === offset;
  const found = stream.events.find(hit);
  if (found) return Promise.resolve(found.hr);
  return new Promise((resolve) => stream.waiters.push((e) => (hit(e) ? (resolve(e.hr), true) : false)));
}
// Stamps each event with a high-resolution arrival time.
function stamp(stream) {
  const push = stream.events.push.bind(stream.events);
  stream.events.push = (e) => { e.hr = performance.now(); return push(e); };
}

const chat = await newChat(srv);
const page = new Page(srv, chat, 'bench');
await page.opened;
stamp(page);
const toRun = [], toChat = [], post = [];
const line = 'x'.repeat(TEXT - 1) + '\n';
const cpu0 = PID ? cpuTicks() : 0;
const t0 = performance.now();
for (let r = 0; r < RUNS; r++) {
  const created = await call(srv, 'POST', `/v1/chats/${chat.id}/runs`, { body: { code: 'print()' } });
  const stream = runEvents(srv, created.json.run_id);
  await stream.opened;
  stamp(stream);
  const run = (await page.nextRun(10000)).data;
  await page.started(run);
  for (let i = 0; i < CHUNKS; i++) {
    const offset = i * TEXT;
    const atRun = arrival(stream, run.run_id, offset), atChat = arrival(page, run.run_id, offset);
    const sent = performance.now();
    const res = await page.output(run, { chunks: [{ stream: 'stdout', offset, text: line }] });
    if (res.status !== 200) throw new Error(`output: ${res.status} ${res.buf}`);
    post.push(performance.now() - sent);
    toRun.push((await atRun) - sent);
    toChat.push((await atChat) - sent);
  }
  await page.result(run, { stdout: line.repeat(CHUNKS) });
  await stream.ended;
  page.events.length = 0; // what was measured goes
}
const ms = performance.now() - t0;
const n = RUNS * CHUNKS;
const out = { chunks: n, runs: RUNS, text_chars: TEXT, chunks_per_s: +(n / (ms / 1000)).toFixed(1),
  to_run_stream: stats(toRun), to_chat_stream: stats(toChat), post_round_trip: stats(post) };
if (PID) out.server_cpu_us_per_chunk_incl_runs = +(((cpuTicks() - cpu0) * 10 * 1000) / n).toFixed(1);
console.log(JSON.stringify({ result: out }));
page.close();
