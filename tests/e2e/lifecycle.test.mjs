// lifecycle.test.mjs -- the chat page taken to the background and frozen by Chromium itself (no
// events faked by the test) against the REAL orchestrator: the run is paused, and when the page is
// active and in front again the run is re-dispatched as a new attempt and finishes.
//
// Why this file launches Chromium itself (cdp.mjs) instead of harness.launch(): Playwright turns on
// Emulation.setFocusEmulationEnabled for every page it drives, and while that is on Chromium keeps
// the page "visible" (a second tab in front does not hide it, and Page.setWebLifecycleState
// 'frozen' then does nothing: no freeze event, timers keep running -- observed on Chromium 156;
// sending setFocusEmulationEnabled {enabled: true} in the set-up below brings that back).
// Connected over CDP with {noDefaults: true} Playwright leaves that override off, so a second tab
// brought to the front really hides the chat page (visibilitychange 'hidden'), the CDP freeze
// really freezes it (freeze event, timers stop), and 'active' + bringToFront gives resume and
// visibilitychange 'visible'.  The browser is started by pid with a temp profile and stopped by
// pid.  chat.test.mjs keeps its own variant of this test (events played by the test); this one is
// the real path.  It does not test a phone OS's own freezing (only what Chromium does on CDP).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { orchestrator, backend, screenshot } from './harness.mjs';
import { launchCdp } from './cdp.mjs';

let orch = null, skipReason = null, api, browser = null, chrome = null;

before(async () => {
  orch = await orchestrator();
  if (orch.skip) { skipReason = orch.skip; return; }
  api = backend(orch.origin, orch.apiKey);
  chrome = await launchCdp();
  if (chrome.skip) { skipReason = chrome.skip; return; }
  browser = chrome.browser;
});
after(async () => {
  await chrome?.stop?.();
  if (orch && !orch.skip) await orch.stop();
});

async function runState(runId) {
  const r = await api('GET', `/v1/runs/${runId}`);
  assert.equal(r.status, 200, r.text);
  return r.json;
}

test('a page hidden and frozen by Chromium mid-run pauses the run; in front again, the run re-runs and finishes', async (t) => {
  if (skipReason) { t.skip(`unavailable: ${skipReason}`); return; }
  const ctx = browser.contexts()[0];
  const c = await api('POST', '/v1/chats', {});
  assert.equal(c.status, 201, c.text);
  const chat = c.json;
  const up = await api('POST', `/v1/chats/${chat.chat_id}/files?name=f.txt`, Buffer.from('file survives'));
  assert.ok(up.status === 201 || up.status === 200, up.text);

  const page = await ctx.newPage();
  await page.goto(`${orch.origin}/chat/${chat.chat_id}#token=${chat.page_token}`);
  await page.waitForFunction(() => window.cereaSession?.stream?.state === 'open', null, { timeout: 20_000 });
  await page.waitForFunction(() => window.cereaSupervisor.state === 'ready', null, { timeout: 90_000 });
  assert.equal(await page.evaluate(() => document.visibilityState), 'visible');
  // Record what Chromium fires (observation only: the page's own listeners do the work).
  await page.evaluate(() => {
    window.lifecycleLog = [];
    for (const ev of ['visibilitychange', 'freeze', 'resume']) {
      document.addEventListener(ev, () => window.lifecycleLog.push(`${ev}:${document.visibilityState}`));
    }
  });

  const created = await api('POST', `/v1/chats/${chat.chat_id}/runs`, {
    code: 'import time\nt = time.time()\nwhile time.time() - t < 5:\n    pass\nprint(open("/mnt/data/f.txt").read())', origin: 'tool' });
  assert.ok(created.status === 201 || created.status === 200, created.text);
  const runId = created.json.run_id;
  await page.waitForFunction((id) => window.cereaSession.current?.run_id === id && window.cereaSupervisor.state === 'busy', runId, { timeout: 30_000 });

  // Another tab in front: Chromium hides the chat page; then the CDP freeze.
  const other = await ctx.newPage();
  await other.bringToFront();
  await page.waitForFunction(() => document.visibilityState === 'hidden', null, { timeout: 5000 });
  const cdp = await ctx.newCDPSession(page);
  await cdp.send('Page.setWebLifecycleState', { state: 'frozen' });

  const t0 = Date.now();
  let paused = null;
  for (let i = 0; i < 100 && !paused; i++) {
    const r = await runState(runId);
    assert.notEqual(r.status, 'ok', 'the run did not finish on the frozen page');
    if (r.state === 'paused') paused = r;
    else await new Promise((res) => setTimeout(res, 100));
  }
  assert.ok(paused, 'the run went to paused while the page was hidden and frozen');
  const pausedMs = Date.now() - t0;
  // Frozen for real: the page's timers do not run (a 100 ms timer set now has not fired 1 s later).
  const frozenTimer = await page.evaluate(() => { window.tick = 0; setTimeout(() => { window.tick = 1; }, 100); return 0; });
  await new Promise((res) => setTimeout(res, 1000));
  assert.equal(frozenTimer, 0);
  assert.equal(await page.evaluate(() => window.tick), 0, 'timers do not run while the page is frozen');
  assert.equal((await runState(runId)).state, 'paused', 'still paused while frozen');

  await cdp.send('Page.setWebLifecycleState', { state: 'active' });
  await page.bringToFront();
  await page.waitForFunction(() => document.visibilityState === 'visible', null, { timeout: 5000 });
  const log = await page.evaluate(() => window.lifecycleLog);
  assert.deepEqual(log, ['visibilitychange:hidden', 'freeze:hidden', 'resume:hidden', 'visibilitychange:visible'],
    'Chromium fired the real lifecycle events');

  const done = await api('GET', `/v1/runs/${runId}?wait_s=60`);
  assert.equal(done.json.status, 'ok', done.text);
  assert.equal(done.json.stdout.trim(), 'file survives');
  assert.ok(done.json.attempts >= 2, `re-dispatched as a new attempt (attempts ${done.json.attempts})`);
  console.log(`# frozen -> run paused seen in ${pausedMs} ms; finished after attempt ${done.json.attempts}`);
  await page.locator(`.run-card[data-run-id="${runId}"][data-status=ok]`).waitFor({ timeout: 20_000 });
  await screenshot(page, 'lifecycle-resumed');
  await other.close();
  await page.close();
});
