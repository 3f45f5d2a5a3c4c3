// progress.mjs -- live output through the MCP server: a scripted page POSTs output chunks one at
// a time while an MCP client (the official TypeScript SDK) waits on run_python with onprogress,
// and a backend follows the same run's event stream (GET /v1/runs/{run}/events) for comparison.
//
//   node bench/mcp/progress.mjs [--runs 10] [--chunks 150] [--text 40]     (CEREA_BIN=...)
//
// Starts the built server (tests/integration/lib.mjs: a free port, a temporary data directory;
// PAGE_SILENT_MS=0 so a page that only posts output is never taken for silent).  Each of --runs
// runs gets --chunks chunks of --text characters of stdout (within the 8,000-character cap),
// then its result.  Prints one JSON line: the latency from sending a chunk's POST to its
// notifications/progress at the SDK client and to its `output` event on the run stream
// (p50/p99/max, ms).
import { performance } from 'node:perf_hooks';
import { startServer, newChat, Page, runEvents, tempDir } from '../../tests/integration/lib.mjs';
import { mcpClient, runOf } from '../../tests/integration/mcp_lib.mjs';

const args = Object.fromEntries(process.argv.slice(2).reduce((a, v, i, all) => (v.startsWith('--') ? a.concat([[v.slice(2), all[i + 1]]]) : a), []));
const RUNS = Number(args.runs || 10), CHUNKS = Number(args.chunks || 150), TEXT = Number(args.text || 40);
if (CHUNKS * TEXT > 8000) throw new Error('--chunks x --text must stay within the 8,000-character cap');
const pct = (v, p) => v[Math.min(v.length - 1, Math.floor(v.length * p))];
const stats = (v) => { v.sort((a, b) => a - b); return { p50_ms: +pct(v, 0.5).toFixed(3), p99_ms: +pct(v, 0.99).toFixed(3), max_ms: +v[v.length - 1].toFixed(3) }; };

// Arrival times by offset, and a promise per offset that resolves when it arrived.
function arrivals() {
  const at = new Map(), waiters = new Map();
  return {
    seen(offset) { at.set(offset, performance.now()); waiters.get(offset)?.(); waiters.delete(offset); },
    when(offset) { return at.has(offset) ? Promise.resolve(at.get(offset)) : new Promise((r) => waiters.set(offset, () => r(at.get(offset)))); },
  };
}

const srv = await startServer({ dataDir: tempDir('bench-mcp'), env: { CODE_TIME_LIMIT_S: '300', PAGE_SILENT_MS: '0' } });
const toClient = [], toStream = [];
try {
  const c = await mcpClient(srv);
  for (let r = 0; r < RUNS; r++) {
    const chat = await newChat(srv);
    const page = new Page(srv, chat, 'p1');
    await page.opened;
    const prog = arrivals(), ev = arrivals();
    const pending = c.client.callTool({ name: 'run_python', arguments: { chat_id: chat.id, code: 'bench' } }, undefined,
      { timeout: 600000, onprogress: (p) => { const m = runOf(p); if (m.stream === 'stdout') prog.seen(m.offset); } });
    const run = (await page.nextRun()).data;
    const stream = runEvents(srv, run.run_id);
    stream.waiters.push((e) => { if (e.event === 'output') ev.seen(e.data.offset); return false; });
    await stream.opened;
    await page.started(run);
    const text = 'x'.repeat(TEXT - 1) + '\n';
    for (let i = 0, off = 0; i < CHUNKS; i++, off += TEXT) {
      const t0 = performance.now();
      await page.output(run, { chunks: [{ stream: 'stdout', offset: off, text }] });
      toClient.push((await prog.when(off)) - t0);
      toStream.push((await ev.when(off)) - t0);
    }
    await page.result(run, { stdout: text.repeat(CHUNKS) });
    await pending;
    stream.close();
    page.close();
  }
  await c.close();
} finally {
  await srv.stop('SIGTERM');
}
console.log(JSON.stringify({ runs: RUNS, chunks: RUNS * CHUNKS, text: TEXT, post_to_mcp_progress: stats(toClient), post_to_run_stream: stats(toStream) }));
