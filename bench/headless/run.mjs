// bench/headless/run.mjs -- what `server` mode costs, measured end to end through the real
// orchestrator (server mode, one sandboxed headless host) and real Pyodide:
//   host start → ready (spare loaded), first run of a chat (takes the spare), warm run round trip
//   (POST run with wait_s → result; p50/p95 over N), time limit → fresh kernel from the spare →
//   remount → next run.  Usage: node bench/headless/run.mjs [N=50]   (CEREA_BIN picks the binary)
import { startStack, hostReady, newChat, upload, run } from '../../tests/fullstack/lib.mjs';

const N = Number(process.argv[2] || 50);
const q = (a, p) => a.slice().sort((x, y) => x - y)[Math.min(a.length - 1, Math.floor(p * a.length))];
const t0 = Date.now();
const srv = await startStack({ env: { CODE_TIME_LIMIT_S: '1' } });
try {
  await hostReady(srv);
  const ready = Date.now() - t0;
  const chat = await newChat(srv);
  await upload(srv, chat, 'data.bin', Buffer.alloc(5 * 1048576, 7));
  let t = Date.now();
  await run(srv, chat, 'x = 1');
  const first = Date.now() - t;
  const lat = [];
  for (let i = 0; i < N; i++) { t = performance.now(); const r = await run(srv, chat, 'x += 1'); if (r.status !== 'ok') throw new Error(JSON.stringify(r)); lat.push(performance.now() - t); }
  await new Promise((r) => setTimeout(r, 15000)); // let the next spare finish loading
  t = Date.now();
  const to = await run(srv, chat, 'while True: pass');
  const limitTotal = Date.now() - t;
  t = Date.now();
  await run(srv, chat, "open('/mnt/data/data.bin','rb').read(1)");
  const after = Date.now() - t;
  console.log(JSON.stringify({
    host_ready_ms: ready, first_run_ms: first,
    warm_run_ms: { n: N, p50: +q(lat, 0.5).toFixed(2), p95: +q(lat, 0.95).toFixed(2), max: +Math.max(...lat).toFixed(2) },
    time_limit_run_ms: { total: limitTotal, limit_ms: 1000, restart_and_remount_ms_beyond_limit: limitTotal - 1000, status: to.status, remounted: to.remounted },
    next_run_after_restart_ms: after,
  }, null, 1));
} finally { await srv.stop(); }
