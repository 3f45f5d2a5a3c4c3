// review.test.mjs -- what a hostile program can put in front of the chat page, in Chromium against
// the real orchestrator: an output file whose NAME is markup, stdout and an error message that are
// markup, and an HTML artifact whose script tries to reach the page, the API and another site.
// Asserts nothing of it runs in the page (no innerHTML anywhere), the preview frame is opaque and
// cut off from the network (CSP connect-src 'none', the page's frame-src 'none' stops it navigating
// away), and the page token never appears in a URL the page or its workers request (it travels in
// the fragment and as a bearer header only).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, orchestrator, backend, watchConsole } from './harness.mjs';

let orch = null, skipReason = null, api, browser;
before(async () => {
  orch = await orchestrator();
  if (orch.skip) { skipReason = orch.skip; return; }
  api = backend(orch.origin, orch.apiKey);
  browser = await launch();
});
after(async () => {
  await browser?.close();
  if (orch && !orch.skip) await orch.stop();
});

test('markup in file names, stdout and errors stays text; an HTML artifact reaches neither the page nor the network; the token is in no URL', async (t) => {
  if (skipReason) { t.skip(`orchestrator unavailable: ${skipReason}`); return; }
  const c = await api('POST', '/v1/chats', {});
  assert.equal(c.status, 201, c.text);
  const chat = c.json;
  const page = await browser.ctx.newPage();
  const errors = watchConsole(page);
  const urls = [];
  page.on('request', (r) => urls.push(r.url()));
  browser.ctx.on('request', (r) => urls.push(r.url()));
  page.on('worker', (w) => urls.push(w.url()));
  await page.exposeFunction('__reportFrame', (m) => { urls.push(`frame-message:${m}`); });
  await page.addInitScript(() => {
    window.addEventListener('message', (e) => { if (typeof e.data === 'string' && e.data.startsWith('probe:')) window.__reportFrame(e.data); });
  });
  await page.goto(`${orch.origin}/chat/${chat.chat_id}#token=${chat.page_token}`);
  await page.waitForFunction(() => window.cereaSession?.stream?.state === 'open', null, { timeout: 20_000 });
  await page.waitForFunction(() => window.cereaSupervisor.state === 'ready', null, { timeout: 90_000 });
  const evilName = '<img src=x onerror="window.__xss=1">.html';
  const frameHtml = `<!doctype html><html><body><p id=inside>inside</p><script>
try { parent.document.body.dataset.owned = '1'; parent.postMessage('probe:parent-dom-reached', '*'); } catch (e) { parent.postMessage('probe:parent-dom-blocked', '*'); }
fetch('/v1/admin/runs').then(() => parent.postMessage('probe:fetch-ok', '*'), () => parent.postMessage('probe:fetch-blocked', '*'));
setTimeout(() => { location.href = 'http://127.0.0.1:9/away'; }, 50);
</script></body></html>`;
  const code = `open('/mnt/output/' + ${JSON.stringify(evilName)}, 'w').write(${JSON.stringify(frameHtml)})
print('<b id="evil-out">bold</b><img src=x onerror="window.__xss=2">')
raise ValueError('<img src=x onerror="window.__xss=3">')
`;
  const r = await api('POST', `/v1/chats/${chat.chat_id}/runs`, { code, origin: 'tool', wait_s: 90 });
  assert.ok(r.status === 200 || r.status === 201, r.text);
  assert.equal(r.json.status, 'error', r.text);
  assert.deepEqual(r.json.files.map((f) => f.name), [evilName]);
  // The run's card: the name, stdout and error shown as text.
  await page.waitForFunction((n) => [...document.querySelectorAll('.artifact-name')].some((e) => e.textContent === n), evilName, { timeout: 20_000 });
  await page.waitForFunction(() => [...document.querySelectorAll('[data-testid=stdout]')].some((e) => e.textContent.includes('<b id="evil-out">')), null, { timeout: 20_000 });
  const dom = await page.evaluate(() => ({
    xss: window.__xss, evil: !!document.getElementById('evil-out'), owned: document.body.dataset.owned || null,
    imgs: [...document.querySelectorAll('img')].filter((i) => i.getAttribute('src') === 'x').length,
    error: [...document.querySelectorAll('[data-testid=error]')].map((e) => e.textContent).join('|'),
  }));
  assert.equal(dom.xss, undefined, 'no markup from the run executed in the page');
  assert.equal(dom.evil, false);
  assert.equal(dom.imgs, 0);
  assert.match(dom.error, /ValueError: <img src=x onerror=/);
  // The HTML preview: open it (the first artifact opens by itself) and let its script try.
  await page.evaluate(() => { const d = document.querySelector('.preview-fold'); if (d && !d.open) d.open = true; });
  await page.waitForSelector('iframe.preview-html', { timeout: 20_000 });
  await page.waitForTimeout(1500);
  const frame = await page.$eval('iframe.preview-html', (f) => ({ sandbox: f.getAttribute('sandbox'), csp: /connect-src 'none'/.test(f.srcdoc) }));
  assert.equal(frame.sandbox, 'allow-scripts', 'opaque origin: no allow-same-origin');
  assert.equal(frame.csp, true);
  assert.equal(await page.evaluate(() => document.body.dataset.owned || null), null);
  // The frame's script did run (so the refusals below are real): it reported both blocks.
  assert.ok(urls.includes('frame-message:probe:parent-dom-blocked'), `frame script ran: ${urls.filter((u) => u.startsWith('frame'))}`);
  assert.ok(urls.includes('frame-message:probe:fetch-blocked'), 'fetch from the frame was refused');
  assert.ok(!urls.includes('frame-message:probe:parent-dom-reached'), 'the frame reached the page');
  assert.ok(!urls.includes('frame-message:probe:fetch-ok'), 'the frame reached the API');
  assert.ok(!urls.some((u) => u.includes('127.0.0.1:9/away')), `the frame navigated away: ${urls.filter((u) => u.includes(':9/'))}`);
  // The token: only ever in the fragment of the page's own URL.
  const leaked = urls.filter((u) => u.includes(chat.page_token) && !u.startsWith(`${orch.origin}/chat/${chat.chat_id}#token=`));
  assert.deepEqual(leaked, [], 'the page token travelled in a URL');
  assert.ok(urls.length > 5, 'requests were observed');
  await page.close();
  assert.deepEqual(errors.filter((e) => /Uncaught|TypeError/.test(e)), []);
});
