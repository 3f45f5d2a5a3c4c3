// toolcall.mjs -- the assistant's tool-call round trip through the orchestrator: from the model's
// tool call (the last byte of its streamed response, sent by the model TEST DOUBLE of
// tests/integration/model_double.mjs: no model runs) to the run's result reaching the model (the
// next request arriving at the double), with an instant page (a scripted page that reports
// `started` and its result as soon as the run event comes).  What it covers: the connector's
// parse of the stream, the tool run's creation (durable), its dispatch on the chat stream, the
// page's two calls, the result text, the next request's build and send.
//
//   node bench/assistant/toolcall.mjs --port P --key K --model-port-file F [--turns 200]
//
// It starts the double first and writes its port to F; the orchestrator is then started on port P
// with CEREA_LLM_URL pointing at it (bench/assistant/latency.sh does both).  Prints one JSON line:
// p50/p99/max in ms.
import { writeFileSync } from 'node:fs';
import { call, newChat, Page } from '../../tests/integration/lib.mjs';
import { startModelDouble } from '../../tests/integration/model_double.mjs';

const args = Object.fromEntries(process.argv.slice(2).reduce((a, v, i, all) => (v.startsWith('--') ? a.concat([[v.slice(2), all[i + 1]]]) : a), []));
const TURNS = Number(args.turns || 200);
const pct = (v, p) => v[Math.min(v.length - 1, Math.floor(v.length * p))];
const stats = (v) => { v.sort((a, b) => a - b); return { p50_ms: +pct(v, 0.5).toFixed(3), p99_ms: +pct(v, 0.99).toFixed(3), max_ms: +v[v.length - 1].toFixed(3) }; };

const model = await startModelDouble();
writeFileSync(args['model-port-file'], String(model.port));
const srv = { base: `http://127.0.0.1:${Number(args.port)}`, key: args.key };
for (let i = 0; i < 100; i++) { // the server is started by latency.sh once the double's port is known
  try { if ((await call(srv, 'GET', '/healthz')).status === 200) break; } catch { /* not yet */ }
  await new Promise((r) => setTimeout(r, 100));
}

const lat = [];
let chat, page;
for (let t = 0; t < TURNS; t++) {
  if (t % 50 === 0) { // a fresh chat every 50 turns: the conversation sent back stays small
    page?.close();
    chat = await newChat(srv);
    page = new Page(srv, chat, 'bench');
    await page.opened;
  }
  model.script.push({ code: `print(${t})` }, { text: 'done' });
  const n0 = model.requests.length;
  const r = await call(srv, 'POST', `/v1/chats/${chat.id}/messages`, { token: chat.token, body: { text: `turn ${t}` } });
  if (r.status !== 201) throw new Error(`ask: ${r.status} ${r.buf}`);
  const run = (await page.nextRun(10000)).data; // the instant page
  await page.started(run);
  await page.result(run, { stdout: `${t}\n` });
  await model.waitRequests(n0 + 2);
  lat.push(model.requests[n0 + 1].hr - model.requests[n0].endHr);
  await page.next((e) => e.event === 'message' && e.id !== null && e.data.message_id === r.json.answer_id && e.data.state !== 'streaming', 10000);
  page.events.length = 0;
}
page.close();
console.log(JSON.stringify({ result: { turns: TURNS, tool_call_to_result_at_model: stats(lat) } }));
await model.close();
