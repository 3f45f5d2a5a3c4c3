// orchestrator_history.test.mjs -- GET /v1/admin/history, the last minutes of activity the admin
// page charts (orchestrator/metrics.c: a sample every 5 s).  Runs that each take ~0.3 s from
// started to result (a scripted page) must show as runs ended per second and as a p50/p95 inside
// the histogram bucket (0.25 s, 0.5 s] they fell in, with the pages attached; only the operator's
// key reaches it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, call, newChat, helpers, sleep } from './lib.mjs';

let srv;
const { createRun, openPage } = helpers(() => srv);
before(async () => { srv = await startServer(); });
after(async () => { await srv?.stop(); });

test('runs, their durations and the pages attached show in the history, interval by interval', async () => {
  const chat = await newChat(srv);
  const page = await openPage(chat, 'tab');
  await page.presence(true, 'ready');
  const first = await call(srv, 'GET', '/v1/admin/history');
  assert.equal(first.status, 200, String(first.buf));
  assert.equal(first.json.interval_s, 5);
  assert.ok(Array.isArray(first.json.samples));
  // Six runs of ~0.3 s each, spread over a few seconds, so at least one interval holds them.
  for (let i = 0; i < 6; i++) {
    const cr = await createRun(chat, { code: `print(${i})`, origin: 'user' });
    const ev = await page.nextRun(5000);
    await page.started(ev.data);
    await sleep(300);
    assert.equal((await page.result(ev.data)).status, 200);
    assert.ok(cr.json.run_id);
  }
  // Two more sample times at most (5 s each), plus margin for a loaded machine.
  let h = null;
  for (let i = 0; i < 30; i++) {
    h = (await call(srv, 'GET', '/v1/admin/history')).json;
    const ended = h.samples.reduce((n, s) => n + s.runs_per_s * h.interval_s, 0);
    if (Math.round(ended) >= 6) break;
    await sleep(500);
  }
  const busy = h.samples.filter((s) => s.runs_per_s > 0);
  assert.ok(busy.length >= 1, JSON.stringify(h.samples));
  const ended = busy.reduce((n, s) => n + s.runs_per_s * h.interval_s, 0);
  assert.ok(Math.abs(ended - 6) < 0.6, `six runs ended, the rates say ${ended}`);
  for (const s of busy) {
    assert.ok(s.p50_s > 0.25 && s.p50_s <= 0.5, `p50 ${s.p50_s} in the (0.25, 0.5] bucket`);
    assert.ok(s.p95_s >= s.p50_s && s.p95_s <= 0.5, `p95 ${s.p95_s}`);
    assert.equal(s.pages, 1);
  }
  for (const s of h.samples.filter((x) => x.runs_per_s === 0)) {
    assert.equal(s.p50_s, null, 'no run ended: no quantile');
  }
  assert.ok(h.samples.every((s, i) => i === 0 || s.at > h.samples[i - 1].at), 'oldest first');
  page.close();
});

test('only the operator key reads the history', async () => {
  const chat = await newChat(srv);
  const r = await call(srv, 'GET', '/v1/admin/history', { token: chat.token });
  assert.ok(r.status === 401 || r.status === 403, `a page token: ${r.status}`);
  assert.equal((await call(srv, 'GET', '/v1/admin/history', { token: 'nope' })).status, 401);
});
