// reload-code.test.mjs -- the chat page in Chromium against the real orchestrator: runs the API
// made (a backend's run of the API's default origin, an auto run, a user run) show their code on
// their cards after the page is reloaded, from the chat's run list (the run object's `code`):
// shown whole for a run without files, behind the "Code" toggle for one whose files are the
// answer.  A display of IPython's Markdown is drawn as sanitized markdown on its card, live and
// after the reload: the hostile HTML inside it (a script, an onerror handler, javascript: links)
// does not run and is not left in the page.
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

// Markdown with everything a hostile document could try (a model that read a web page, a file).
const HOSTILE = [
  '# Sales', '', '**bold** and `code` and [safe](https://example.org/y) and [bad](javascript:window.pwned=3)', '',
  '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>',
  '<a href="javascript:window.pwned=4" id="jslink">click</a> <svg><a href="javascript:window.pwned=5"><text>svg</text></a></svg>',
  '<p onclick="window.pwned=6" id="clicky">press</p>',
].join('\n');

// The run's display drawn as markdown, with nothing of the hostile part left to run.
async function markdownShown(page, runId, when) {
  const md = page.locator(`.run-card[data-run-id="${runId}"] [data-testid=display] .bundle-markdown`);
  await md.waitFor({ timeout: 20_000 });
  assert.equal(await md.locator('h1').textContent(), 'Sales', when);
  assert.equal(await md.locator('strong').textContent(), 'bold', when);
  assert.equal(await md.locator('a[href="https://example.org/y"]').getAttribute('rel'), 'noopener noreferrer', when);
  const bad = await md.evaluate((el) => ({
    scripts: el.querySelectorAll('script').length,
    handlers: [...el.querySelectorAll('*')].filter((x) => [...x.attributes].some((a) => /^on/i.test(a.name))).length,
    jsLinks: [...el.querySelectorAll('[href], [xlink\\:href]')].filter((x) => /^\s*javascript:/i.test(x.getAttribute('href') || x.getAttribute('xlink:href') || '')).length,
    remoteImages: el.querySelectorAll('img[src=x]').length,
  }));
  assert.deepEqual(bad, { scripts: 0, handlers: 0, jsLinks: 0, remoteImages: 0 }, `${when}: nothing hostile left`);
  // What is left of the hostile parts, clicked, does nothing.
  for (const sel of ['text=bad', '#jslink', '#clicky']) if (await md.locator(sel).count()) await md.locator(sel).first().click();
  assert.equal(await page.evaluate(() => window.pwned), undefined, `${when}: no hostile code ran`);
}

test('after a reload, the cards of API runs show the code they ran; a markdown display is drawn sanitized, live and after the reload', async (t) => {
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
  const md = `from IPython.display import display, Markdown\ndisplay(Markdown(${JSON.stringify(HOSTILE)}))\n`;
  const runs = [];
  // The first as a backend makes it, origin left to the API (its default, tool).
  for (const [code, origin] of [[plain, undefined], [withFile, 'auto'], [md, 'user']]) {
    const r = await api('POST', `/v1/chats/${chat.chat_id}/runs`, { code, ...(origin ? { origin } : {}), wait_s: 90 });
    assert.ok(r.status === 201 || r.status === 200, r.text);
    assert.equal(r.json.status, 'ok', JSON.stringify(r.json));
    runs.push({ id: r.json.run_id, code });
  }
  await markdownShown(page, runs[2].id, 'live');
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
  await markdownShown(page, runs[2].id, 'after a reload');
  assert.equal(await page.locator(`.run-card[data-run-id="${runs[2].id}"] pre.code`).textContent(), md, 'a user run: its code shown');
  assert.deepEqual(errors.filter((e) => !/favicon|Failed to load resource|^http 409 /.test(e)), []);
  await page.close();
});
