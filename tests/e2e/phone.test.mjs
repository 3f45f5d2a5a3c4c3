// phone.test.mjs -- issue 16 in Chromium against the REAL orchestrator: what a phone does to a chat
// page, played by Chromium itself (started by pid, attached with connectOverCDP(…, {noDefaults:
// true}): cdp.mjs), never by events the test fakes on the page:
//   - hidden (another tab in front) and then frozen while a time.sleep loop runs: the run pauses,
//     and back in front it re-runs and ends ok at attempt >= 2, with no Pyodide fatal error and no
//     unhandled page error; the card says why it started again;
//   - hidden but not frozen (a desktop tab switch, a phone's first seconds in the background) while
//     the run sleeps in time.sleep, asyncio.sleep, an awaited JS promise or asyncio.run() (which
//     Pyodide runs by suspending the cell), or downloads its files:
//     the superseded attempt is stopped before the next one starts (no fatal error), the re-run ok;
//   - frozen WITHOUT any event reaching the page's code (an init script keeps visibilitychange,
//     freeze and the rest from it, as a phone that drops its network first): paused by silence
//     within PAGE_SILENT_MS + 2 s, then active → re-run ok;
//   - the presence calls blocked (request interception) while the page goes to the background and
//     freezes: still paused, by silence;
//   - a long CPU loop in the worker never looks silent (the heartbeat comes from the page);
//   - the wake lock is held while a run goes and released after.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { orchestrator, backend, screenshot } from './harness.mjs';
import { launchCdp } from './cdp.mjs';

const SILENT_MS = 4000;
let orch = null, skipReason = null, api, chrome = null, ctx = null;

before(async () => {
  orch = await orchestrator({ env: { PAGE_SILENT_MS: String(SILENT_MS), PAGE_HEARTBEAT_MS: '1000' } });
  if (orch.skip) { skipReason = orch.skip; return; }
  api = backend(orch.origin, orch.apiKey);
  chrome = await launchCdp();
  if (chrome.skip) { skipReason = chrome.skip; return; }
  ctx = chrome.browser.contexts()[0];
});
after(async () => {
  await chrome?.stop?.();
  if (orch && !orch.skip) await orch.stop();
});

function need(t) {
  if (skipReason) { t.skip(`unavailable: ${skipReason}`); return false; }
  return true;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// A chat page with every console line of the page and of its workers, and its page errors.
async function openChat({ files = {}, init = null } = {}) {
  const c = await api('POST', '/v1/chats', {});
  assert.equal(c.status, 201, c.text);
  for (const [name, bytes] of Object.entries(files)) {
    const r = await api('POST', `/v1/chats/${c.json.chat_id}/files?name=${encodeURIComponent(name)}`, bytes);
    assert.ok(r.status === 201 || r.status === 200, r.text);
  }
  const page = await ctx.newPage();
  const logs = [];
  page.on('console', (m) => logs.push(`page ${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => logs.push(`pageerror: ${e.message}`));
  page.on('worker', (w) => w.on('console', (m) => logs.push(`worker ${m.type()}: ${m.text()}`)));
  if (init) await page.addInitScript(init);
  await page.goto(`${orch.origin}/chat/${c.json.chat_id}#token=${c.json.page_token}`);
  await page.waitForFunction(() => window.cereaSession?.stream?.state === 'open', null, { timeout: 20_000 });
  await page.waitForFunction(() => window.cereaSupervisor.state === 'ready', null, { timeout: 90_000 });
  return { chat: c.json, page, logs };
}

async function startRun(chat, page, code) {
  const r = await api('POST', `/v1/chats/${chat.chat_id}/runs`, { code, origin: 'tool' });
  assert.ok(r.status === 201 || r.status === 200, r.text);
  const runId = r.json.run_id;
  await page.waitForFunction((id) => window.cereaSession.current?.run_id === id && window.cereaSupervisor.state === 'busy', runId, { timeout: 30_000 });
  return runId;
}

const runState = async (runId) => (await api('GET', `/v1/runs/${runId}`)).json;

async function waitPaused(runId, withinMs) {
  const t0 = Date.now();
  for (;;) {
    const r = await runState(runId);
    assert.notEqual(r.status, 'ok', 'the run did not finish while the page was away');
    if (r.state === 'paused') return Date.now() - t0;
    if (Date.now() - t0 > withinMs) assert.fail(`not paused within ${withinMs} ms (state ${r.state})`);
    await sleep(100);
  }
}

async function hide(page) {
  const other = await ctx.newPage();
  await other.bringToFront();
  await page.waitForFunction(() => document.visibilityState === 'hidden', null, { timeout: 5000 });
  return other;
}

async function show(page, other) {
  await page.bringToFront();
  await other.close();
}

// The run's end: ok, re-run as a new attempt, its output, and nothing fatal said anywhere.
async function endsOk(runId, logs, stdout) {
  const done = (await api('GET', `/v1/runs/${runId}?wait_s=60`)).json;
  assert.equal(done.status, 'ok', JSON.stringify({ status: done.status, error: done.error, notes: done.notes }));
  assert.ok(done.attempts >= 2, `re-dispatched (attempts ${done.attempts})`);
  if (stdout !== undefined) assert.equal(done.stdout, stdout);
  const bad = logs.filter((l) => /fatal error|SuspendError|pageerror|PythonError|Uncaught/i.test(l));
  assert.deepEqual(bad, [], 'no Pyodide fatal error, no unhandled page error');
  return done;
}

const SLEEP_LOOP = 'import time\nfor i in range(6):\n    time.sleep(1)\n    print(i)';
const PRINTED = '0\n1\n2\n3\n4\n5\n';

test('hidden, then frozen by Chromium during a time.sleep loop: paused; active and in front again, it re-runs ok at attempt >= 2, no fatal error, the card says why', async (t) => {
  if (!need(t)) return;
  const { chat, page, logs } = await openChat();
  const runId = await startRun(chat, page, SLEEP_LOOP);
  await sleep(1200);
  const other = await hide(page);
  const cdp = await ctx.newCDPSession(page);
  await cdp.send('Page.setWebLifecycleState', { state: 'frozen' });
  await waitPaused(runId, 10_000);
  await sleep(1500);
  await cdp.send('Page.setWebLifecycleState', { state: 'active' });
  await show(page, other);
  const done = await endsOk(runId, logs, PRINTED);
  const card = page.locator(`.run-card[data-run-id="${runId}"][data-status=ok]`);
  await card.waitFor({ timeout: 20_000 });
  assert.match(await card.locator('[data-testid=rerun-note]').textContent(), new RegExp(`attempt ${done.attempts}\\): this page went to the background`));
  await screenshot(page, 'phone-rerun');
  await page.close();
});

for (const [what, code, expect] of [
  ['time.sleep', SLEEP_LOOP, PRINTED],
  ['asyncio.sleep', 'import asyncio\nfor i in range(6):\n    await asyncio.sleep(1)\n    print(i)', PRINTED],
  ['an awaited JS promise', 'import js\nfor i in range(3):\n    await js.Promise.new(lambda resolve, reject: js.setTimeout(resolve, 2000))\n    print(i)', '0\n1\n2\n'],
  ['asyncio.run() (a synchronous cell suspended by stack switching)', 'import asyncio\nasync def main():\n    for i in range(6):\n        await asyncio.sleep(1)\n        print(i)\nasyncio.run(main())', PRINTED],
]) {
  test(`hidden but not frozen while the run waits in ${what}: the superseded attempt stops before the next starts; the re-run ends ok, no fatal error`, async (t) => {
    if (!need(t)) return;
    const { chat, page, logs } = await openChat();
    const runId = await startRun(chat, page, code);
    await sleep(1200);
    const other = await hide(page);
    await waitPaused(runId, 10_000);
    await sleep(2000);   // the page's JavaScript and its kernel keep running meanwhile
    await show(page, other);
    const done = await endsOk(runId, logs, expect);
    // The superseded attempt was interrupted (not killed): the kernel it leaves is the same one.
    assert.equal(done.restarted, false, JSON.stringify(done.notes));
    assert.deepEqual(done.notes, []);
    await page.close();
  });
}

test('hidden but not frozen while the run downloads its files: the download is dropped, the re-run mounts the file and ends ok', async (t) => {
  if (!need(t)) return;
  const data = Buffer.alloc(256 * 1024, 65);
  const c = await api('POST', '/v1/chats', {});
  const up = await api('POST', `/v1/chats/${c.json.chat_id}/files?name=big.txt`, data);
  assert.ok(up.status === 201 || up.status === 200, up.text);
  const page = await ctx.newPage();
  const logs = [];
  page.on('pageerror', (e) => logs.push(`pageerror: ${e.message}`));
  page.on('worker', (w) => w.on('console', (m) => logs.push(`worker ${m.type()}: ${m.text()}`)));
  // The first download of the file stalls (held back by the test) until the page is back.
  let release = null;
  await page.route('**/v1/files/**', async (route) => {
    if (release === null) {
      await new Promise((r) => { release = r; });
      await route.abort().catch(() => {});   // the page dropped it already
      return;
    }
    await route.continue();
  });
  await page.goto(`${orch.origin}/chat/${c.json.chat_id}#token=${c.json.page_token}`);
  await page.waitForFunction(() => window.cereaSupervisor?.state === 'ready', null, { timeout: 90_000 });
  const r = await api('POST', `/v1/chats/${c.json.chat_id}/runs`, { code: 'print(len(open("/mnt/data/big.txt").read()))', origin: 'tool' });
  const runId = r.json.run_id;
  await page.waitForFunction((id) => window.cereaSession.current?.run_id === id && window.cereaSession.current.state === 'fetching', runId, { timeout: 20_000 });
  const other = await hide(page);
  await waitPaused(runId, 10_000);
  await show(page, other);
  await page.waitForFunction((id) => window.cereaSession.current?.run_id === id && window.cereaSession.current.attempt >= 2, runId, { timeout: 20_000 });
  release();
  const done = await endsOk(runId, logs, `${data.length}\n`);
  assert.ok(done.attempts >= 2);
  await page.close();
});

test('frozen WITHOUT hiding and no event reaching the page: paused by silence within PAGE_SILENT_MS + 2 s; active again, the run re-runs ok', async (t) => {
  if (!need(t)) return;
  // As a phone that froze the page before its visibility report left: the page's own code never
  // hears of it (these events stop at the window, before the document's listeners).
  const init = () => {
    for (const ev of ['visibilitychange', 'freeze', 'resume', 'pagehide', 'pageshow'])
      window.addEventListener(ev, (e) => e.stopImmediatePropagation(), { capture: true });
  };
  const { chat, page, logs } = await openChat({ init });
  const runId = await startRun(chat, page, SLEEP_LOOP);
  await sleep(500);
  const cdp = await ctx.newCDPSession(page);
  await cdp.send('Page.setWebLifecycleState', { state: 'frozen' });
  const ms = await waitPaused(runId, SILENT_MS + 2000 + 1000);
  assert.ok(ms <= SILENT_MS + 2000 + 500, `paused ${ms} ms after the freeze`);
  await cdp.send('Page.setWebLifecycleState', { state: 'active' });
  await page.bringToFront();
  await endsOk(runId, logs, PRINTED);
  const m = await fetch(`${orch.origin}/metrics`).then((r) => r.text());
  assert.match(m, /cerea_runs_paused_by_silence_total [1-9]/);
  await page.close();
});

test('the presence calls blocked while the page goes to the background and freezes: still paused, by silence', async (t) => {
  if (!need(t)) return;
  const { chat, page, logs } = await openChat();
  const runId = await startRun(chat, page, SLEEP_LOOP);
  await page.route('**/presence', (route) => route.abort());
  const other = await hide(page);
  const cdp = await ctx.newCDPSession(page);
  await cdp.send('Page.setWebLifecycleState', { state: 'frozen' });
  await waitPaused(runId, SILENT_MS + 3000);
  await page.unroute('**/presence');
  await cdp.send('Page.setWebLifecycleState', { state: 'active' });
  await show(page, other);
  await endsOk(runId, logs, PRINTED);
  await page.close();
});

test('a long CPU loop in the worker never looks silent: the heartbeat comes from the page; the run ends ok at attempt 1', async (t) => {
  if (!need(t)) return;
  const { chat, page, logs } = await openChat();
  const runId = await startRun(chat, page, 'import time\nt = time.time()\nwhile time.time() - t < 10:\n    pass\nprint("done")');
  const states = new Set();
  for (;;) {
    const r = await runState(runId);
    states.add(r.state);
    if (r.status) { assert.equal(r.status, 'ok'); assert.equal(r.attempts, 1); break; }
    await sleep(250);
  }
  assert.ok(!states.has('paused'), `never paused (${[...states]})`);
  const beats = await page.evaluate(() => window.cereaSession.page.stats.heartbeats);
  assert.ok(beats >= 4, `${beats} heartbeats during ~10 s`);
  assert.deepEqual(logs.filter((l) => /pageerror|fatal/i.test(l)), []);
  await page.close();
});

test('the wake lock is held while a run goes and released after', async (t) => {
  if (!need(t)) return;
  const cdp = await chrome.browser.newBrowserCDPSession();
  await cdp.send('Browser.setPermission', { permission: { name: 'screen-wake-lock' }, setting: 'granted', origin: orch.origin });
  const { chat, page } = await openChat();
  await startRun(chat, page, 'import time\ntime.sleep(2)');
  await page.waitForFunction(() => window.cereaSession.wakeLock.held, null, { timeout: 5000 });
  assert.equal(await page.evaluate(() => window.cereaSession.wakeLock.lastError), null);
  await page.waitForFunction(() => !window.cereaSession.current, null, { timeout: 30_000 });
  assert.equal(await page.evaluate(() => window.cereaSession.wakeLock.held), false);
  assert.equal(await page.evaluate(() => window.cereaSession.wakeLock.count), 0);
  await page.close();
});
