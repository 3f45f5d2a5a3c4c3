// model_double.mjs -- a TEST DOUBLE for the assistant's model: a scripted OpenAI-compatible Chat
// Completions server on 127.0.0.1 (a free port).  No model runs here; each request to
// POST /v1/chat/completions takes the next step of the script and streams it as an OpenAI server
// does (SSE `data:` chunks, `data: [DONE]`), or answers an HTTP error, or stalls.  Every request
// (headers and body, when it came and when its answer was sent, in performance.now() ms) is kept
// for the test (and bench/assistant) to look at.
//
// Steps:  {text, pieces?, delayMs?}   the answer's text, streamed in `pieces` chunks
//         {code, id?, text?}          a run_python tool call (arguments streamed in two pieces)
//         {code, name, args?}         a call of the tool `name` (arguments: args, else {code})
//         {status, body}              an HTTP error with that body
//         {stall: true}               the head and one chunk, then silence until the test ends
import { createServer } from 'node:http';

const chunk = (delta, finish = null) =>
  `data: ${JSON.stringify({ id: 'cmpl-double', object: 'chat.completion.chunk', model: 'double', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function pieces(s, n) {
  const chars = [...s], out = [], size = Math.max(1, Math.ceil(chars.length / n));
  for (let i = 0; i < chars.length; i += size) out.push(chars.slice(i, i + size).join(''));
  return out;
}

export async function startModelDouble() {
  const d = { requests: [], script: [], open: new Set(), waiters: [] };
  const server = createServer(async (req, res) => {
    let body = '';
    for await (const c of req) body += c;
    const rec = { method: req.method, url: req.url, headers: req.headers, body: JSON.parse(body || 'null'), at: Date.now(), hr: performance.now() };
    d.requests.push(rec);
    d.waiters = d.waiters.filter((w) => !w());
    if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":{"message":"not here"}}');
      return;
    }
    const step = d.script.shift() ?? { text: 'The script of the test double ran out.' };
    if (step.status) {
      res.writeHead(step.status, { 'content-type': 'application/json' }).end(JSON.stringify(step.body ?? {}));
      return;
    }
    d.open.add(res);
    res.on('close', () => { d.open.delete(res); rec.closed = Date.now(); });
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    res.write(chunk({ role: 'assistant', content: '' }));
    if (step.stall) return; /* nothing more: the orchestrator's stall bound ends it */
    if (step.code !== undefined) {
      if (step.text) res.write(chunk({ content: step.text }));
      const args = JSON.stringify(step.args ?? { code: step.code });
      const half = Math.floor(args.length / 2);
      const id = step.id ?? `call_${d.requests.length}`;
      res.write(chunk({ tool_calls: [{ index: 0, id, type: 'function', function: { name: step.name ?? 'run_python', arguments: args.slice(0, half) } }] }));
      res.write(chunk({ tool_calls: [{ index: 0, function: { arguments: args.slice(half) } }] }));
      res.write(chunk({}, 'tool_calls'));
    } else {
      for (const p of pieces(step.text, step.pieces ?? 3)) {
        if (res.destroyed) return;
        res.write(chunk({ content: p }));
        if (step.delayMs) await sleep(step.delayMs);
      }
      res.write(chunk({}, 'stop'));
    }
    res.end('data: [DONE]\n\n');
    rec.endHr = performance.now(); /* the answer's last byte handed to the socket */
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  d.port = server.address().port;
  d.url = `http://127.0.0.1:${d.port}/v1`;
  // Resolves once n requests came in all.
  d.waitRequests = (n, timeoutMs = 10000) => new Promise((resolve, reject) => {
    const check = () => { if (d.requests.length >= n) { clearTimeout(t); resolve(d.requests[n - 1]); return true; } return false; };
    const t = setTimeout(() => reject(new Error(`model double: ${d.requests.length} requests, wanted ${n}`)), timeoutMs);
    if (!check()) d.waiters.push(check);
  });
  d.close = async () => {
    for (const res of d.open) res.destroy();
    await new Promise((r) => server.close(r));
  };
  return d;
}
