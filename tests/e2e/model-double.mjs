// model-double.mjs -- a TEST DOUBLE of an OpenAI-compatible Chat Completions server (no model can
// run on this machine): `POST /v1/chat/completions` with `stream: true` answers Server-Sent Events
// in the API's chunk format (`choices[0].delta.content` pieces, or one `tool_calls` call of
// `run_python` whose arguments come in pieces, then `finish_reason` and `data: [DONE]`), from a
// script the test sets.  It records every request (body and Authorization header) so a test can
// check what reached the model (the tool's result text, the key).
//
// script(fn): fn(body, n) -> a reply for the n-th request (0-based):
//   {text, pieces?: [strings], gapMs?}   an answer streamed in pieces (default: ~8-character pieces)
//   {tool: {code, ...args}}              a run_python call
//   {text, tool}                         some text streamed first, then the run_python call
//   {status, message}                    an HTTP error with an OpenAI-style error body
//   {stallAfter: text}                   sends text, then nothing (the connection stays open)
// It does not implement anything else of the API (no non-streaming answers, no other routes).
import http from 'node:http';

const chunk = (delta, finish = null) => `data: ${JSON.stringify({ id: 'chatcmpl-double', object: 'chat.completion.chunk',
  created: 0, model: 'double', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const cut = (s, n = 8) => s.match(new RegExp(`[\\s\\S]{1,${n}}`, 'gu')) || [''];

export async function startModelDouble() {
  const requests = [];
  let fn = () => ({ text: 'The double has no script for this request.' });
  const open = new Set();
  const server = http.createServer(async (req, res) => {
    open.add(res);
    res.on('close', () => open.delete(res));
    let raw = '';
    for await (const d of req) raw += d;
    let body = null;
    try { body = JSON.parse(raw); } catch { /* recorded as null */ }
    const n = requests.length;
    requests.push({ path: req.url, auth: req.headers.authorization || null, body });
    if (req.method !== 'POST' || !req.url.endsWith('/chat/completions')) { res.writeHead(404).end(); return; }
    let reply;
    try { reply = fn(body, n); } catch (e) { reply = { status: 500, message: `double script threw: ${e.message}` }; }
    if (reply.status) {
      res.writeHead(reply.status, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ error: { message: reply.message || 'error', type: 'double_error' } }));
      return;
    }
    res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
    const gap = reply.gapMs ?? 30;
    if (reply.stallAfter !== undefined) {
      res.write(chunk({ role: 'assistant', content: reply.stallAfter }));
      return;   // never ends: the orchestrator's stall bound or a Stop ends it
    }
    if (reply.tool) {
      const args = JSON.stringify(reply.tool);
      if (reply.text) {
        res.write(chunk({ role: 'assistant', content: '' }));
        for (const p of reply.pieces || cut(reply.text)) { await sleep(gap); if (res.destroyed) return; res.write(chunk({ content: p })); }
      }
      res.write(chunk({ ...(reply.text ? {} : { role: 'assistant', content: null }), tool_calls: [{ index: 0, id: `call_${n}`, type: 'function', function: { name: 'run_python', arguments: '' } }] }));
      for (const p of cut(args, 16)) { await sleep(gap); res.write(chunk({ tool_calls: [{ index: 0, function: { arguments: p } }] })); }
      res.write(chunk({}, 'tool_calls'));
    } else {
      res.write(chunk({ role: 'assistant', content: '' }));
      for (const p of reply.pieces || cut(reply.text || '')) { await sleep(gap); if (res.destroyed) return; res.write(chunk({ content: p })); }
      res.write(chunk({}, 'stop'));
    }
    res.end('data: [DONE]\n\n');
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${server.address().port}/v1`;
  return {
    url, requests,
    script(f) { fn = f; requests.length = 0; },
    close: () => new Promise((r) => { for (const res of open) res.destroy(); server.close(() => r()); }),
  };
}

/** The messages of a recorded request with a role. */
export const byRole = (req, role) => (req?.body?.messages || []).filter((m) => m.role === role);
