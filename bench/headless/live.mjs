// bench/headless/live.mjs -- live output latency of the headless host's page session: from `print`
// in a real Pyodide kernel (Node worker thread, worker/node-kernel.js) to the moment the session's
// `POST /v1/runs/{run}/output` carrying that line reaches the orchestrator, p50/p99, for prints
// followed by a sleep and for prints inside a CPU loop (the flush signal hands those on).  The
// orchestrator is a scripted client in this process (a stand-in that answers the calls as the
// contract says), so the figure is the page side's alone; end to end to a backend through the real
// orchestrator: bench/live-e2e.mjs.
// Usage: node bench/headless/live.mjs [N=100]    It tests nothing: tests/ do.
import { newNodeSupervisor } from '../../worker/node-kernel.js';
import { PageSession } from '../../worker/session.js';

const N = Number(process.argv[2] || 100);
const pct = (a, p) => { const s = [...a].sort((x, y) => x - y); return +s[Math.min(s.length - 1, Math.floor(s.length * p))].toFixed(2); };

// The orchestrator's side, scripted: one event stream, output calls answered with what it holds.
class Orch {
  constructor() { this.held = { stdout: 0, stderr: 0, displays: 0 }; this.got = []; this.done = null; this.calls = 0; }
  connect(o) { this.stream = o; o.onOpen(200); return new Promise((_, reject) => o.signal.addEventListener('abort', () => reject(new Error('closed')))); }
  send(event, data, id) { this.stream.onText(`id: ${id}\nevent: ${event}\ndata: ${JSON.stringify(data)}\n\n`); }
  async json(method, path, body) {
    if (path.endsWith('/output')) {
      this.calls++;
      const now = Date.now();
      for (const c of body.chunks || []) {
        if (c.offset > this.held[c.stream]) continue;
        const fresh = [...c.text].slice(this.held[c.stream] - c.offset).join('');
        this.held[c.stream] += [...fresh].length;
        for (const line of fresh.split('\n')) if (/^t=/.test(line)) this.got.push(now - Number(line.slice(2)) * 1000);
      }
      return { status: 200, data: { ...this.held } };
    }
    if (path.endsWith('/result')) this.done?.();
    return { status: 200, data: {} };
  }
  async upload() { return { status: 201, data: {} }; }
  async download() { return { status: 404, bytes: null }; }
}

const sup = newNodeSupervisor();
await sup.start();
const out = {};
let seq = 0;
for (const [name, body] of [
  ['sleeping', 'time.sleep(0.03)'],
  ['cpu_loop', 't = time.time()\n    while time.time() - t < 0.03:\n        pass'],
]) {
  const orch = new Orch();
  const session = new PageSession({ chatId: 'bench', pageId: 'p1', client: orch, supervisor: sup, verifyFiles: false });
  session.attach();
  const finished = new Promise((r) => { orch.done = r; });
  orch.send('run', { run_id: `live-${++seq}`, attempt: 1, page_id: 'p1', code: `import time\nfor i in range(${N}):\n    print("t=%r" % time.time())\n    ${body}`,
    timeout_s: 60, mounts: [], heartbeat_ms: 2000, limits: {} }, seq);
  await finished;
  session.detach();
  out[name] = { n: orch.got.length, calls: orch.calls, p50: pct(orch.got, 0.5), p99: pct(orch.got, 0.99) };
}
sup.dispose();
sup.pool.dispose();
console.log(JSON.stringify({ print_to_output_post_ms: out }, null, 1));
