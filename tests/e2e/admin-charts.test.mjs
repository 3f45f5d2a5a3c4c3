// admin-charts.test.mjs -- the admin page draws the last minutes of activity (charts.js over
// GET /v1/admin/history, uPlot bundled from npm): after a few runs in a chat page, the three
// charts are drawn with the server's intervals, in Chromium against the real orchestrator (the
// administrator signed in).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, orchestrator, backend, screenshot, watchConsole, signInAdmin } from './harness.mjs';

let orch, api, browser;
before(async () => {
  orch = await orchestrator();
  if (orch.skip) throw new Error(orch.skip);
  api = backend(orch.origin, orch.apiKey);
  browser = await launch();
});
after(async () => {
  await browser?.close();
  if (orch && !orch.skip) await orch.stop();
});

test('the admin page charts runs per second, run duration and live pages', async () => {
  const c = (await api('POST', '/v1/chats', {})).json;
  const page = await browser.ctx.newPage();
  await page.goto(`${orch.origin}/chat/${c.chat_id}#token=${c.page_token}`);
  await page.waitForFunction(() => window.cereaSupervisor?.state === 'ready', null, { timeout: 90_000 });
  for (let i = 0; i < 3; i++) {
    const r = await api('POST', `/v1/chats/${c.chat_id}/runs`, { code: `print(${i})`, origin: 'user', wait_s: 60 });
    assert.equal(r.json.status, 'ok', r.text);
  }
  // Wait for an interval that holds them (a sample every 5 s).
  let h;
  for (let i = 0; i < 40; i++) {
    h = (await api('GET', '/v1/admin/history')).json;
    if (h.samples.some((s) => s.runs_per_s > 0)) break;
    await new Promise((r) => setTimeout(r, 500));
  }
  assert.ok(h.samples.some((s) => s.runs_per_s > 0), JSON.stringify(h));
  const admin = await browser.ctx.newPage();
  const errors = watchConsole(admin);
  await signInAdmin(admin, orch, '/admin');
  await admin.locator('#charts[data-state=drawn]').waitFor({ timeout: 15_000 });
  for (const id of ['chart-rate', 'chart-latency', 'chart-pages']) {
    const chart = admin.locator(`#${id}`);
    assert.equal(await chart.locator('canvas').count(), 1, `${id} has its canvas`);
    assert.ok(Number(await chart.getAttribute('data-points')) >= 1, `${id} has points`);
  }
  assert.match(await admin.locator('#chart-rate .u-title').textContent(), /Runs ended per second/);
  assert.match(await admin.locator('#activity-note').textContent(), /intervals of 5 s/);
  assert.deepEqual(errors.filter((e) => /pageerror/.test(e)), [], 'no uncaught errors');
  await screenshot(admin, 'admin-charts');
  await admin.close();
  await page.close();
});
