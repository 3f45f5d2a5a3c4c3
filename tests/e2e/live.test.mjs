// live.test.mjs -- issue 15 in Chromium: the chat page against the REAL orchestrator, and the
// playground (its own kernel, no orchestrator).  A running card shows its output as it comes
// (a line a second for 3 s: the first line on the card >= 1.5 s before the end; what a run printed
// before its time limit stays on the card), the time used against the limit, the cell's value and its display() bundles (HTML only inside a sandboxed
// frame with the artifacts' CSP, never in the page; SVG as an image), the card's Cancel on a sleeping
// loop ends cancelled within a second with the namespace kept, input() is answered from the card's
// field (POST /v1/runs/{run}/input), and another tab of the chat sees the output live (the chat
// stream's `output` events).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, orchestrator, staticServer, backend, screenshot, watchConsole } from './harness.mjs';

let orch = null, skipReason = null, api, browser, statics = null;

before(async () => {
  browser = await launch();
  statics = await staticServer();
  orch = await orchestrator();
  if (orch.skip) { skipReason = orch.skip; return; }
  api = backend(orch.origin, orch.apiKey);
});
after(async () => {
  await browser?.close();
  await statics?.close?.();
  if (orch && !orch.skip) await orch.stop();
});

function need(t) {
  if (skipReason) { t.skip(`orchestrator unavailable: ${skipReason}`); return false; }
  return true;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function openChat(chat) {
  const page = await browser.ctx.newPage();
  const errors = watchConsole(page);
  await page.goto(`${orch.origin}/chat/${chat.chat_id}#token=${chat.page_token}`);
  await page.waitForFunction(() => window.cereaSession?.stream?.state === 'open', null, { timeout: 20_000 });
  await page.waitForFunction(() => window.cereaSupervisor.state === 'ready', null, { timeout: 90_000 });
  return { page, errors };
}

async function newChat() {
  const c = await api('POST', '/v1/chats', {});
  assert.equal(c.status, 201, c.text);
  return c.json;
}

async function createRun(chat, code, extra = {}) {
  const r = await api('POST', `/v1/chats/${chat.chat_id}/runs`, { code, origin: 'tool', ...extra });
  assert.ok(r.status === 201 || r.status === 200, r.text);
  return r.json.run_id;
}

// Records when the card of runId first shows `text` in its output, and when it is done.
function watchCard(page, runId, text) {
  return page.evaluate(({ runId, text }) => new Promise((resolve) => {
    const t0 = performance.now();
    let first = null;
    const check = () => {
      const card = document.querySelector(`.run-card[data-run-id="${runId}"]`);
      const out = card?.querySelector('[data-testid=stdout]')?.textContent || '';
      if (first === null && out.includes(text)) first = performance.now() - t0;
      const elapsed = card?.querySelector('[data-testid=run-elapsed]')?.textContent || null;
      if (elapsed) window.lastElapsed = elapsed;
      if (card && card.dataset.status === 'ok') { resolve({ first, end: performance.now() - t0, elapsed: window.lastElapsed }); return; }
      requestAnimationFrame(check);
    };
    check();
  }), { runId, text });
}

test('a line a second for 3 s: the card shows the first line >= 1.5 s before the end, and the time used against the limit', async (t) => {
  if (!need(t)) return;
  const chat = await newChat();
  const { page } = await openChat(chat);
  const runId = await createRun(chat, 'import time\nfor i in range(3):\n    print("line", i)\n    time.sleep(1)');
  const seen = await watchCard(page, runId, 'line 0');
  assert.ok(seen.first !== null, 'the first line was on the card');
  assert.ok(seen.end - seen.first >= 1500, `first line ${Math.round(seen.first)} ms, done ${Math.round(seen.end)} ms`);
  assert.match(seen.elapsed || '', /^\d+ s of 60 s$/, `elapsed shown: ${seen.elapsed}`);
  const run = (await api('GET', `/v1/runs/${runId}?wait_s=30`)).json;
  assert.equal(run.stdout, 'line 0\nline 1\nline 2\n');
  await page.close();
});

test('x=41; print("spinning"); while True: pass — the card shows "spinning" while it runs and keeps it after the time limit', async (t) => {
  if (!need(t)) return;
  const chat = await newChat();
  const { page, errors } = await openChat(chat);
  const runId = await createRun(chat, 'x=41; print("spinning")\nwhile True: pass', { timeout_s: 3 });
  const card = page.locator(`.run-card[data-run-id="${runId}"]`);
  await page.locator(`.run-card[data-run-id="${runId}"][data-status=running] [data-testid=stdout]`).waitFor({ timeout: 30_000 });
  assert.equal(await card.locator('[data-testid=stdout]').textContent(), 'spinning\n', 'shown during the run');
  await page.locator(`.run-card[data-run-id="${runId}"][data-status=timeout]`).waitFor({ timeout: 30_000 });
  assert.equal(await card.locator('[data-testid=stdout]').textContent(), 'spinning\n', 'kept after the time limit');
  assert.match(await card.locator('[data-testid=error]').textContent(), /time limit of 3 s/);
  const run = (await api('GET', `/v1/runs/${runId}`)).json;
  assert.equal(run.status, 'timeout');
  assert.equal(run.stdout, 'spinning\n');
  assert.deepEqual(errors.filter((e) => /pageerror/.test(e)), []);
  await page.close();
});

test('values and displays on the card: text, an SVG as an image, HTML only inside a sandboxed frame with the artifacts\' CSP', async (t) => {
  if (!need(t)) return;
  const chat = await newChat();
  const { page } = await openChat(chat);
  const code = [
    'class Table:',
    '    def _repr_html_(self):',
    '        return "<table id=\'t\'><tr><td>cell</td></tr></table><script>parent.document.title = \'escaped\'</script>"',
    'class Dot:',
    '    def _repr_svg_(self):',
    '        return \'<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><circle cx="5" cy="5" r="4"/></svg>\'',
    'display(Table())',
    'display(Dot())',
    'display("plain")',
    '6 * 7',
  ].join('\n');
  const runId = await createRun(chat, code);
  const card = page.locator(`.run-card[data-run-id="${runId}"][data-status=ok]`);
  await card.waitFor({ timeout: 30_000 });
  assert.equal(await card.locator('[data-testid=value]').textContent(), '42');
  const displays = card.locator('[data-testid=display]');
  assert.equal(await displays.count(), 3);
  const frame = displays.nth(0).locator('iframe');
  assert.equal(await frame.getAttribute('sandbox'), 'allow-scripts');
  assert.match(await frame.getAttribute('srcdoc'), /Content-Security-Policy[^>]*connect-src 'none'/);
  assert.equal(await page.frameLocator(`.run-card[data-run-id="${runId}"] [data-testid=display] iframe`).locator('#t td').textContent(), 'cell');
  assert.equal(await page.locator('#t').count(), 0, 'the HTML is not in the page');
  assert.notEqual(await page.title(), 'escaped', 'the frame cannot reach the page');
  assert.match(await displays.nth(1).locator('img').getAttribute('src'), /^data:image\/svg\+xml;base64,/);
  assert.equal(await displays.nth(2).textContent(), "'plain'");
  const run = (await api('GET', `/v1/runs/${runId}`)).json;
  assert.deepEqual(run.value, { 'text/plain': '42', 'application/json': 42 });
  assert.equal(run.displays.length, 3);
  await screenshot(page, 'live-values');
  await page.close();
});

test('Stop (the card\'s Cancel) on a sleeping loop (browser): cancelled within a second, the namespace kept', async (t) => {
  if (!need(t)) return;
  const chat = await newChat();
  const { page } = await openChat(chat);
  const setup = await createRun(chat, 'kept = "yes"');
  await api('GET', `/v1/runs/${setup}?wait_s=30`);
  const runId = await createRun(chat, 'import time\nwhile True:\n    time.sleep(1)');
  await page.waitForFunction((id) => window.cereaSession.current?.run_id === id && window.cereaSession.current.state === 'running', runId, { timeout: 30_000 });
  await sleep(500);
  const t0 = Date.now();
  await page.locator(`.run-card[data-run-id="${runId}"] button`, { hasText: 'Cancel' }).click();
  const done = (await api('GET', `/v1/runs/${runId}?wait_s=30`)).json;
  const ms = Date.now() - t0;
  assert.equal(done.status, 'cancelled');
  assert.equal(done.restarted, false, JSON.stringify(done.notes));
  assert.ok(ms < 1000 + 500, `cancelled in ${ms} ms`);
  const after = await createRun(chat, 'print(kept)');
  assert.equal((await api('GET', `/v1/runs/${after}?wait_s=30`)).json.stdout, 'yes\n');
  await page.close();
});

test('input() answered from the card\'s field (chat page, POST /v1/runs/{run}/input)', async (t) => {
  if (!need(t)) return;
  const chat = await newChat();
  const { page } = await openChat(chat);
  const runId = await createRun(chat, 'name = input("Name? ")\nprint("hi", name)');
  const card = page.locator(`.run-card[data-run-id="${runId}"]`);
  await card.locator('[data-testid=input-field]').waitFor({ timeout: 30_000 });
  assert.equal(await card.locator('[data-testid=run-status]').textContent(), 'Waiting for input…');
  // The prompt shows once: input() printed it to the output; the field does not say it again.
  await page.waitForFunction((id) => /Name\? /.test(document.querySelector(`.run-card[data-run-id="${id}"] [data-testid=stdout]`)?.textContent || ''), runId, { timeout: 30_000 });
  assert.equal((await card.locator('[data-testid=stdout]').textContent()).split('Name? ').length - 1, 1, 'the prompt in the output, once');
  assert.doesNotMatch(await card.locator('.input-prompt').textContent(), /Name\?/, 'the field does not repeat it');
  await card.locator('[data-testid=input-field]').fill('Ada');
  // The chat stream's copy of the request (the orchestrator publishes it once the page's output
  // call told it) may come after the person typed, as it did under load: what was typed stays.
  await page.evaluate((id) => window.cereaSession.page.emit('event', { type: 'input_request', id: null, data: { run_id: id, attempt: 1, prompt: 'Name? ' } }), runId);
  assert.equal(await card.locator('[data-testid=input-field]').inputValue(), 'Ada');
  await card.locator('[data-testid=input-send]').click();
  const done = (await api('GET', `/v1/runs/${runId}?wait_s=30`)).json;
  assert.equal(done.status, 'ok', JSON.stringify(done.error));
  assert.equal(done.stdout, 'Name? Ada\nhi Ada\n');
  await page.close();
});

test('another tab of the chat sees the run\'s output live (the chat stream\'s output events)', async (t) => {
  if (!need(t)) return;
  const chat = await newChat();
  const { page } = await openChat(chat);
  const viewer = await browser.ctx.newPage();
  await viewer.goto(`${orch.origin}/chat/${chat.chat_id}#token=${chat.page_token}`);
  await viewer.waitForFunction(() => window.cereaSession?.stream?.state === 'open', null, { timeout: 20_000 });
  await page.bringToFront();
  const runId = await createRun(chat, 'import time\nfor i in range(3):\n    print("line", i)\n    time.sleep(1)');
  const seen = await watchCard(viewer, runId, 'line 0');
  assert.ok(seen.first !== null && seen.end - seen.first >= 1500, JSON.stringify(seen));
  await viewer.close();
  await page.close();
});

test('playground: input() answered from the card\'s field; the wait shown, the answer echoed like a terminal', async () => {
  const page = await browser.ctx.newPage();
  const errors = watchConsole(page);
  await page.goto(`${statics.origin}/playground`);
  await page.waitForFunction(() => document.getElementById('runtime').dataset.state === 'ready', null, { timeout: 90_000 });
  await page.evaluate(() => window.cereaEditor.setCode('name = input("Name? ")\nprint("hi", name)\nname.upper()'));
  await page.click('#run');
  const card = page.locator('.run-card').first();
  await card.locator('[data-testid=input-field]').waitFor({ timeout: 30_000 });
  assert.equal(await card.getAttribute('data-input'), 'waiting');
  assert.equal(await card.locator('[data-testid=stdout]').textContent(), 'Name? ');
  await card.locator('[data-testid=input-field]').fill('Ada');
  await card.locator('[data-testid=input-field]').press('Enter');
  await page.locator('.run-card[data-status=ok]').first().waitFor({ timeout: 30_000 });
  assert.equal(await card.locator('[data-testid=stdout]').textContent(), 'Name? Ada\nhi Ada\n');
  assert.equal(await card.locator('[data-testid=value]').textContent(), "'ADA'");
  assert.deepEqual(errors.filter((e) => /pageerror/.test(e)), []);
  await page.close();
});

// A page that is not cross-origin isolated (WebKitGTK's default, an embedding webview, a proxy that
// strips COOP/COEP): the chat page's document is served here without its COOP/COEP headers, so
// the page and its worker have no SharedArrayBuffer and no flush signal reaches Python.
test('without shared memory (COOP/COEP stripped): `early`, then a 3 s sleep — the card shows early >= 2 s before the end', async (t) => {
  if (!need(t)) return;
  const chat = await newChat();
  const page = await browser.ctx.newPage();
  await page.route('**/*', async (route) => {
    if (route.request().resourceType() !== 'document') return route.continue();
    const res = await route.fetch();
    const headers = { ...res.headers() };
    delete headers['cross-origin-opener-policy'];
    delete headers['cross-origin-embedder-policy'];
    return route.fulfill({ response: res, headers });
  });
  try {
    await page.goto(`${orch.origin}/chat/${chat.chat_id}#token=${chat.page_token}`);
    assert.equal(await page.evaluate(() => crossOriginIsolated || typeof SharedArrayBuffer === 'function'), false, 'the page has no shared memory');
    await page.waitForFunction(() => window.cereaSession?.stream?.state === 'open', null, { timeout: 20_000 });
    await page.waitForFunction(() => window.cereaSupervisor.state === 'ready', null, { timeout: 90_000 });
    const runId = await createRun(chat, 'import time\nprint("early")\ntime.sleep(3)\nprint("late")');
    const seen = await watchCard(page, runId, 'early');
    assert.ok(seen.first !== null, 'early was on the card');
    assert.ok(seen.end - seen.first >= 2000, `early at ${Math.round(seen.first)} ms, end at ${Math.round(seen.end)} ms`);
    const run = await api('GET', `/v1/runs/${runId}`);
    assert.equal(run.json.stdout, 'early\nlate\n');
  } finally { await page.close(); }
});
