// reload.test.mjs -- the chat page reloaded while its run executes, in Chromium against the real
// orchestrator with PAGE_GRACE_MS at 30 s.  The page's pagehide says it is leaving (a keepalive
// presence), so the run goes out again as attempt 2 as soon as the reloaded page is there, not
// after the old page's grace; the reloaded page's card says in plain words why it runs again,
// shows the code, and ends with the whole output of the new attempt.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, orchestrator, backend, screenshot, watchConsole } from './harness.mjs';

const GRACE_MS = 30000;
let orch, api, browser;

before(async () => {
  orch = await orchestrator({ env: { PAGE_GRACE_MS: String(GRACE_MS) } });
  if (orch.skip) throw new Error(orch.skip);
  api = backend(orch.origin, orch.apiKey);
  browser = await launch();
});
after(async () => {
  await browser?.close();
  if (orch && !orch.skip) await orch.stop();
});

const runOf = async (id) => (await api('GET', `/v1/runs/${id}`)).json;
async function until(pred, ms, what) {
  const t0 = Date.now();
  for (;;) {
    const v = await pred();
    if (v) return v;
    if (Date.now() - t0 > ms) throw new Error(`${what} not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

test('a reload mid-run: the run goes out again at once, and its card says why', async () => {
  const c = (await api('POST', '/v1/chats', {})).json;
  const page = await browser.ctx.newPage();
  const errors = watchConsole(page);
  await page.goto(`${orch.origin}/chat/${c.chat_id}#token=${c.page_token}`);
  await page.waitForFunction(() => window.cereaSupervisor?.state === 'ready', null, { timeout: 90_000 });
  const code = 'import time\nprint("start", flush=True)\ntime.sleep(2)\nprint("done")';
  const created = await api('POST', `/v1/chats/${c.chat_id}/runs`, { code, origin: 'user' });
  assert.equal(created.status, 201, created.text);
  const id = created.json.run_id;
  await until(async () => (await runOf(id)).state === 'running', 60_000, 'the first attempt running');

  const t0 = Date.now();
  await page.reload();
  const again = await until(async () => { const r = await runOf(id); return r.attempts >= 2 && r.state !== 'paused' ? r : null; }, GRACE_MS - 5000, 'attempt 2 dispatched');
  const waited = Date.now() - t0;
  console.log(`# reload -> attempt 2 dispatched in ${waited} ms (the page's grace is ${GRACE_MS} ms)`);
  assert.ok(waited < GRACE_MS / 2, `re-dispatched after ${waited} ms: it waited for the grace`);
  assert.equal(again.attempts, 2);

  await page.waitForFunction(() => window.cereaSupervisor?.state !== undefined, null, { timeout: 30_000 });
  const card = page.locator(`.run-card[data-run-id="${id}"]`);
  await card.locator('[data-testid=rerun-note]').waitFor({ timeout: 90_000 });
  assert.equal(await card.locator('[data-testid=rerun-note]').textContent(),
    'The page was reloaded while this ran: it is running again from the start — attempt 2.');
  assert.equal((await card.locator('pre.code').textContent()).trim(), code, 'the card shows the code it runs');
  await page.waitForFunction((rid) => document.querySelector(`.run-card[data-run-id="${rid}"]`)?.dataset.status === 'ok', id, { timeout: 90_000 });
  assert.equal((await card.locator('[data-testid=stdout]').textContent()).trim(), 'start\ndone');
  const done = await runOf(id);
  assert.equal(done.status, 'ok');
  assert.equal(done.stdout, 'start\ndone\n');
  assert.deepEqual(errors.filter((e) => /pageerror/.test(e)), [], 'no uncaught errors');
  await screenshot(page, 'reload-mid-run');
  await page.close();
});
