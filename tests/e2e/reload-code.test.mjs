// reload-code.test.mjs -- the chat page in Chromium against the real orchestrator: runs the API
// made (a backend playing the assistant, tool and auto origins) show their code on their cards
// after the page is reloaded, from the chat's run list (the run object's `code`): shown whole for
// a run without files, behind the "Code" toggle for one whose files are the answer.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, orchestrator, backend, watchConsole, DESKTOP } from './harness.mjs';

let orch = null, skipReason = null, api, browser;

before(async () => {
  orch = await orchestrator();
  if (orch.skip) { skipReason = orch.skip; return; }
  api = backend(orch.origin, orch.apiKey);
  browser = await launch({ viewport: DESKTOP });
});
after(async () => {
  await browser?.close();
  if (orch && !orch.skip) await orch.stop();
});

test('after a reload, the cards of API runs show the code they ran', async (t) => {
  if (skipReason) { t.skip(`orchestrator unavailable: ${skipReason}`); return; }
  const c = await api('POST', '/v1/chats', {});
  assert.equal(c.status, 201, c.text);
  const chat = c.json;
  const page = await browser.ctx.newPage();
  const errors = watchConsole(page);
  const open = async () => {
    await page.goto(`${orch.origin}/chat/${chat.chat_id}#token=${chat.page_token}`);
    await page.waitForFunction(() => window.cereaSession?.stream?.state === 'open', null, { timeout: 20_000 });
  };
  await open();
  await page.waitForFunction(() => window.cereaSupervisor.state === 'ready', null, { timeout: 90_000 });
  const plain = 'total = sum(range(10))\nprint("total", total)\n';
  const withFile = 'open("/mnt/output/result.txt", "w").write("42\\n")\nprint("saved")\n';
  const runs = [];
  for (const [code, origin] of [[plain, 'tool'], [withFile, 'auto']]) {
    const r = await api('POST', `/v1/chats/${chat.chat_id}/runs`, { code, origin, wait_s: 90 });
    assert.ok(r.status === 201 || r.status === 200, r.text);
    assert.equal(r.json.status, 'ok', JSON.stringify(r.json));
    runs.push({ id: r.json.run_id, code });
  }
  await page.reload();
  await page.waitForFunction(() => window.cereaSession?.stream?.state === 'open', null, { timeout: 20_000 });
  const first = page.locator(`.run-card[data-run-id="${runs[0].id}"]`);
  await first.locator('[data-testid=stdout]').waitFor({ timeout: 20_000 });
  assert.equal(await first.locator('pre.code').textContent(), plain, 'a run without files: its code shown');
  const second = page.locator(`.run-card[data-run-id="${runs[1].id}"]`);
  await second.locator('.artifact[data-name="result.txt"]').waitFor({ timeout: 20_000 });
  const fold = second.locator('details.code-fold');
  assert.equal(await fold.locator('summary').textContent(), 'Code');
  await fold.locator('summary').click();
  assert.equal(await fold.locator('pre.code').textContent(), withFile, 'a run with files: its code behind the toggle');
  assert.deepEqual(errors.filter((e) => !/favicon|Failed to load resource|^http 409 /.test(e)), []);
  await page.close();
});
