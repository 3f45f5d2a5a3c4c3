// bench/live-e2e.mjs -- live output end to end: from `print` in a real Pyodide kernel through the
// page session and the real orchestrator to the `output` event at a backend following
// GET /v1/runs/{run}/events, p50/p99, for prints followed by a sleep and for prints inside a CPU
// loop, with the kernel in
//   headless: `server` mode, a sandboxed headless host (tests/fullstack/lib.mjs's stack);
//   chromium: `browser` mode, a chat page in Debian's Chromium (tests/e2e/harness.mjs).
// Each line carries Python's time.time() and the backend subtracts it from its own clock on
// arrival (one machine, one wall clock; 1 ms resolution); lines the stream's `output` events did
// not carry (printed after the page's last output call) are timed at the `end` that holds them.  The page side alone:
// bench/headless/live.mjs, bench/kernel.mjs; the orchestrator alone: bench/output/.
// Usage: node bench/live-e2e.mjs headless|chromium [N=100]   (CEREA_BIN picks the binary)
// It tests nothing: tests/ do.
import { startStack, hostReady, newChat, call, runEvents } from '../tests/fullstack/lib.mjs';
import { launch, orchestrator } from '../tests/e2e/harness.mjs';

const MODE = process.argv[2];
const N = Number(process.argv[3] || 100);
if (MODE !== 'headless' && MODE !== 'chromium') { console.error('usage: node bench/live-e2e.mjs headless|chromium [N]'); process.exit(2); }
const pct = (a, p) => { const s = [...a].sort((x, y) => x - y); return +s[Math.min(s.length - 1, Math.floor(s.length * p))].toFixed(1); };

// srv: {base, key} of the orchestrator; chatId: a chat whose kernel is ready.
async function measure(srv, chatId) {
  const out = {};
  for (const [name, body] of [
    ['sleeping', 'time.sleep(0.03)'],
    ['cpu_loop', 't = time.time()\n    while time.time() - t < 0.03:\n        pass'],
  ]) {
    const code = `import time\nfor i in range(${N}):\n    print("t=%r" % time.time())\n    ${body}`;
    const created = await call(srv, 'POST', `/v1/chats/${chatId}/runs`, { body: { code } });
    const got = [];
    let events = 0, held = '', atEnd = 0;   // stdout so far (a line may come in two events)
    // The lines `text` completes in stdout, timed now.
    const take = (offset, text) => {
      const now = Date.now();
      const done = held.lastIndexOf('\n') + 1;
      held = held.slice(0, offset) + text;
      const lines = held.slice(done, held.lastIndexOf('\n') + 1).split('\n').filter((l) => /^t=/.test(l));
      for (const line of lines) got.push(now - Number(line.slice(2)) * 1000);
      return lines.length;
    };
    await runEvents(srv, created.json.run_id, (ev) => {
      if (ev.type === 'output' && ev.data.stream === 'stdout' && ev.data.offset <= held.length) { events++; take(ev.data.offset, ev.data.text); }
      if (ev.type !== 'end') return;
      // What the page printed after its last output call comes with the result: the end's run.
      if (ev.data.status !== 'ok') throw new Error(JSON.stringify(ev.data));
      atEnd = take(0, ev.data.stdout);
    });
    out[name] = { n: got.length, output_events: events, lines_with_end: atEnd, p50: pct(got, 0.5), p99: pct(got, 0.99), max: pct(got, 1) };
  }
  return out;
}

let result;
if (MODE === 'headless') {
  const srv = await startStack({ env: { CODE_TIME_LIMIT_S: '60' } });
  try {
    await hostReady(srv);
    const chat = await newChat(srv);
    await call(srv, 'POST', `/v1/chats/${chat.id}/runs`, { body: { code: 'pass', wait_s: 240 } });
    result = await measure(srv, chat.id);
  } finally { await srv.stop(); }
} else {
  const orch = await orchestrator();
  if (orch.skip) { console.error(orch.skip); process.exit(1); }
  const browser = await launch();
  try {
    const srv = { base: orch.origin, key: orch.apiKey };
    const c = (await call(srv, 'POST', '/v1/chats', { body: {} })).json;
    const page = await browser.ctx.newPage();
    await page.goto(`${orch.origin}/chat/${c.chat_id}#token=${c.page_token}`);
    await page.waitForFunction(() => window.cereaSupervisor?.state === 'ready', null, { timeout: 120_000 });
    result = await measure(srv, c.chat_id);
  } finally { await browser.close(); await orch.stop(); }
}
console.log(JSON.stringify({ mode: MODE, print_to_backend_output_event_ms: result }, null, 1));
