// keepalive.mjs -- what the MCP keepalive costs, and the gaps a client sees: --calls quiet
// run_python calls at once (each started by a scripted page that then prints nothing) held for
// --hold seconds, first with a progress token (the server sends the run's state every
// ORCH_MCP_KEEPALIVE_MS = 10 s while nothing else is said), then the same without one (no
// keepalive: the call waits silently; --hold stays under the 50 s hand-off).  The server's CPU
// time over each hold comes from /proc/<pid>/stat; the difference over the keepalives sent is the
// cost of one.
//
//   node bench/mcp/keepalive.mjs [--calls 50] [--hold 35]      (CEREA_BIN=...)
//
// Prints one JSON line: keepalives received, the largest and median gap between two
// notifications of a call at the client, the bytes of one keepalive (its SSE frame's JSON), and
// the server's CPU per hold and per keepalive.
import { readFileSync } from 'node:fs';
import { startServer, newChat, Page, tempDir, sleep } from '../../tests/integration/lib.mjs';
import { mcpClient, runOf } from '../../tests/integration/mcp_lib.mjs';

const args = Object.fromEntries(process.argv.slice(2).reduce((a, v, i, all) => (v.startsWith('--') ? a.concat([[v.slice(2), all[i + 1]]]) : a), []));
const CALLS = Number(args.calls || 50), HOLD_S = Number(args.hold || 35);
if (HOLD_S >= 50) throw new Error('--hold must stay under the 50 s hand-off (CEREA_MCP_HANDOFF_S)');
const ticks = Number(process.env.CLK_TCK || 100);
const cpuMs = (pid) => { const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' '); return (Number(f[11]) + Number(f[12])) * 1000 / ticks; };

const srv = await startServer({ dataDir: tempDir('bench-keepalive'), env: { CODE_TIME_LIMIT_S: '300', PAGE_SILENT_MS: '0' } });
try {
  async function hold(withToken) {
    const pages = [], pendings = [], seen = [], clients = [];
    for (let i = 0; i < CALLS; i++) {
      const c = await mcpClient(srv); // a session each (at most 16 calls in flight per session)
      clients.push(c);
      const chat = await newChat(srv);
      const page = new Page(srv, chat, 'p1');
      await page.opened;
      const times = [];
      seen.push(times);
      pendings.push(c.client.callTool({ name: 'run_python', arguments: { chat_id: chat.id, code: 'quiet' } }, undefined,
        { timeout: 600000, ...(withToken ? { onprogress: (p) => times.push({ t: Date.now(), p }), resetTimeoutOnProgress: true } : {}) }).catch(() => {}));
      const run = (await page.nextRun()).data;
      await page.started(run);
      pages.push({ page, run });
    }
    await sleep(2000); // the last starts' notifications are out
    const cpu0 = cpuMs(srv.pid), t0 = Date.now();
    await sleep(HOLD_S * 1000);
    const cpu = cpuMs(srv.pid) - cpu0, held = Date.now() - t0;
    for (const { page, run } of pages) { await page.result(run, { stdout: '' }); page.close(); }
    await Promise.all(pendings);
    for (const c of clients) await c.close();
    return { cpu, held, seen };
  }
  const on = await hold(true);
  const off = await hold(false);
  const keep = on.seen.flatMap((v) => v.filter((x) => runOf(x.p)?.keepalive));
  const gaps = on.seen.flatMap((v) => v.slice(1).map((x, i) => x.t - v[i].t)).sort((a, b) => a - b);
  const frame = JSON.stringify({ jsonrpc: '2.0', method: 'notifications/progress', params: keep[0]?.p });
  console.log(JSON.stringify({
    calls: CALLS, hold_s: HOLD_S, keepalives: keep.length,
    gap_max_ms: gaps[gaps.length - 1], gap_p50_ms: gaps[Math.floor(gaps.length / 2)],
    keepalive_bytes: frame.length,
    cpu_ms_with: +on.cpu.toFixed(1), cpu_ms_without: +off.cpu.toFixed(1),
    cpu_ms_per_keepalive: keep.length ? +((on.cpu - off.cpu) / keep.length).toFixed(3) : null,
  }));
} finally {
  await srv.stop('SIGTERM');
}
