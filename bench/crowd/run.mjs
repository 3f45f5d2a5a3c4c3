// bench/crowd/run.mjs -- server mode under a crowd (issue 21 item 8): the real orchestrator with
// CEREA_HOSTS sandboxed headless hosts and real Pyodide; CHATS new chats at once, each a client
// posting RUNS runs one after another (POST with wait_s, as an assistant's tool calls come).
// Prints completion (status counts), per-run latency from POST to result (p50/p99/max), the time
// from a chat's creation to its first run's start (waiting for a slot and a kernel: p50/p99), the
// wall time, and the peak resident memory and thread count of the hosts (sampled from /proc
// every 250 ms over every process under the server), and the memory per kernel: the hosts' peak
// resident memory over the kernels they ran at once (the runtime's compiled wasm and the image's
// bytes in each host's main thread counted once per host, as the processes hold them).  Machine
// load is printed beside them.  KERNELS 'auto' (the default) leaves the count to the hosts' memory
// budget (hosts.c: CEREA_HOST_MEMORY_MB over CEREA_KERNEL_MEMORY_MB, MEMORY_MB here); kernels
// restore the served memory snapshot unless CEREA_KERNEL_SNAPSHOT=0 is in the environment.
//
//   node bench/crowd/run.mjs [CHATS=200] [RUNS=5] [HOSTS=2] [KERNELS=auto] [MEMORY_MB=512]
//   (CEREA_BIN picks the binary; CROWD_LOG=FILE writes the server's log there)
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { startStack, hostReady, newChat, call, descendants } from '../../tests/fullstack/lib.mjs';

const [CHATS = 200, RUNS = 5, HOSTS = 2] = process.argv.slice(2, 5).map(Number);
const KERNELS = process.argv[5] && process.argv[5] !== 'auto' ? Number(process.argv[5]) : 'auto';
const MEMORY_MB = Number(process.argv[6] || 512);
const q = (a, p) => a.slice().sort((x, y) => x - y)[Math.min(a.length - 1, Math.floor(p * a.length))];
const procStatus = (pid) => { try { return readFileSync(`/proc/${pid}/status`, 'utf8'); } catch { return ''; } };
const field = (s, k) => Number((s.match(new RegExp(`^${k}:\\s+(\\d+)`, 'm')) || [])[1] || 0);

const srv = await startStack({ env: { CEREA_HOSTS: String(HOSTS), CEREA_HOST_KERNELS: KERNELS === 'auto' ? '' : String(KERNELS),
  CEREA_KERNEL_MEMORY_MB: String(MEMORY_MB), CODE_TIME_LIMIT_S: '60', PAGE_GRACE_MS: '10000', CEREA_LOG: 'info' } });
// Each sample: the hosts' resident memory and threads.  Per kernel: the peak beyond the idle
// hosts (each with its spare), over the chat kernels the hosts hold at once when every slot is
// taken (the crowd outnumbers the slots).
let peakRss = 0, peakThreads = 0, idleHost = 0;
const samples = [];
const sampler = setInterval(() => {
  let rss = 0, threads = 0;
  for (const p of descendants(srv.pid)) { const s = procStatus(p); rss += field(s, 'VmRSS'); threads += field(s, 'Threads'); }
  peakRss = Math.max(peakRss, rss); peakThreads = Math.max(peakThreads, threads);
  samples.push({ rss, threads });
}, 250);
try {
  await hostReady(srv, HOSTS);
  await new Promise((r) => setTimeout(r, 1000));
  idleHost = samples.at(-1) || { rss: 0, threads: 0 };   // the hosts with their spares, before any chat
  const perHost = Number((srv.log.match(/(\d+) kernels per host besides its spare/) || [])[1] || KERNELS);
  const load0 = loadavg()[0];
  const t0 = Date.now();
  const lat = [], firstStart = [], statuses = {};
  let restartedRuns = 0;   // runs whose chat lost its kernel before them (detached between runs)
  await Promise.all(Array.from({ length: CHATS }, async (_, i) => {
    const chat = await newChat(srv);
    const born = Date.now();
    for (let j = 0; j < RUNS; j++) {
      const t = Date.now();
      // wait_s under 300: undici's fetch gives up on headers after 300 s; a run waits longer.
      let r = await call(srv, 'POST', `/v1/chats/${chat.id}/runs`, { body: { code: `x = ${j}\nprint(${i} * x)`, wait_s: 240 } });
      while (r.json && r.json.state !== 'done') r = await call(srv, 'GET', `/v1/runs/${r.json.run_id}?wait_s=240`);
      const st = r.json ? r.json.status : `http ${r.status}`;
      statuses[st] = (statuses[st] || 0) + 1;
      if (r.json && r.json.restarted) restartedRuns++;
      lat.push(Date.now() - t);
      if (j === 0 && r.json && r.json.started_at) firstStart.push(r.json.started_at - born);
    }
  }));
  const wall = Date.now() - t0;
  // srv.log holds each line of the server's stderr twice once the server is up
  // (tests/integration/lib.mjs reads it with two listeners): counted by the hosts' ready lines.
  const copies = Math.max(1, Math.round((srv.log.match(/host \d+ \(pid \d+\) ready/g) || []).length / HOSTS));
  const restored = (srv.log.match(/kernel restored from the served snapshot/g) || []).length / copies;
  const loaded = (srv.log.match(/kernel loaded in/g) || []).length / copies;
  console.log(JSON.stringify({
    chats: CHATS, runs_per_chat: RUNS, hosts: HOSTS, kernels_per_host: KERNELS,
    statuses, ok: `${statuses.ok || 0}/${CHATS * RUNS}`, wall_s: +(wall / 1000).toFixed(1),
    run_latency_ms: { p50: q(lat, 0.5), p99: q(lat, 0.99), max: Math.max(...lat) },
    first_run_start_ms: { p50: q(firstStart, 0.5), p99: q(firstStart, 0.99) },
    kernels_per_host: perHost, kernel_starts: { restored, loaded }, restarted_runs: restartedRuns,
    peak_rss_mib: Math.round(peakRss / 1024), peak_threads: peakThreads,
    idle_hosts_rss_mib: Math.round(idleHost.rss / 1024),
    // (peak - idle hosts) / live chat kernels at the peak, the spares' share in the idle figure
    mib_per_kernel: +(((peakRss - idleHost.rss) / 1024) / Math.max(1, Math.min(CHATS, perHost * HOSTS))).toFixed(1),
    loadavg_1m: { before: +load0.toFixed(2), after: +loadavg()[0].toFixed(2) },
  }, null, 1));
} finally { clearInterval(sampler); if (process.env.CROWD_LOG) writeFileSync(process.env.CROWD_LOG, srv.log); await srv.stop(); rmSync(srv.dataDir, { recursive: true, force: true }); }
