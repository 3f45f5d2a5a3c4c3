// app.test.mjs -- the reference web app as a user and an operator use it, in Chromium against the
// real orchestrator: create a chat from the app (operator key in Settings), open it from the chat
// list, attach a file, type code in the editor and run it, see the output and artifact cards with
// working previews (image, PDF via pdf.js, Word via docx-preview, HTML in a sandboxed frame whose
// scripts run with the bundled Tailwind but reach no network, no storage, cannot submit forms or
// navigate), and the admin page showing a live run and changing the retention setting.
// Screenshots of the views at desktop and phone widths go to test-results/.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { launch, orchestrator, backend, screenshot, watchConsole, newChatInApp, DESKTOP, PHONE } from './harness.mjs';

let orch, skipReason = null, api, browser, sentinel, hits = [];

before(async () => {
  orch = await orchestrator();
  if (orch.skip) { skipReason = orch.skip; return; }
  api = backend(orch.origin, orch.apiKey);
  sentinel = http.createServer((req, res) => { hits.push(`${req.method} ${req.url}`); res.end('x'); });
  sentinel.on('upgrade', (req, sock) => { hits.push(`ws ${req.url}`); sock.destroy(); });
  await new Promise((r) => sentinel.listen(0, '127.0.0.1', r));
  browser = await launch({ viewport: DESKTOP });
});
after(async () => {
  await browser?.close();
  sentinel?.closeAllConnections?.(); sentinel?.close();
  if (orch && !orch.skip) await orch.stop();
});
const need = (t) => { if (skipReason) { t.skip(`orchestrator unavailable: ${skipReason}`); return false; } return true; };

const artifactCode = (port) => String.raw`import zlib, struct, zipfile
def chunk(t, d):
    return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d) & 0xffffffff)
raw = b''.join(b'\x00' + bytes([220, 40, 40]) * 60 for _ in range(30))
png = b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', 60, 30, 8, 2, 0, 0, 0)) + chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND', b'')
open('/mnt/output/red.png', 'wb').write(png)
content = b'BT /F1 24 Tf 20 60 Td (Hello PDF preview) Tj ET'
objs = [b'<< /Type /Catalog /Pages 2 0 R >>', b'<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
        b'<< /Type /Page /Parent 2 0 R /MediaBox [0 0 320 144] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>',
        b'<< /Length %d >>\nstream\n' % len(content) + content + b'\nendstream',
        b'<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>']
pdf = b'%PDF-1.4\n'
offs = []
for i, o in enumerate(objs, 1):
    offs.append(len(pdf)); pdf += b'%d 0 obj\n' % i + o + b'\nendobj\n'
x = len(pdf)
pdf += b'xref\n0 %d\n0000000000 65535 f \n' % (len(objs) + 1) + b''.join(b'%010d 00000 n \n' % o for o in offs)
pdf += b'trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%EOF\n' % (len(objs) + 1, x)
open('/mnt/output/hello.pdf', 'wb').write(pdf)
W = 'http://schemas.openxmlformats.org/'
with zipfile.ZipFile('/mnt/output/report.docx', 'w') as z:
    z.writestr('[Content_Types].xml', '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="' + W + 'package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>')
    z.writestr('_rels/.rels', '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="' + W + 'package/2006/relationships"><Relationship Id="rId1" Type="' + W + 'officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>')
    z.writestr('word/document.xml', '<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="' + W + 'wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>Hello Word preview</w:t></w:r></w:p></w:body></w:document>')
S = 'http://127.0.0.1:${port}'
open('/mnt/output/page.html', 'w').write('''<!doctype html><html><head><script src="https://cdn.tailwindcss.com"></script></head>
<body><h1 id="t" class="text-3xl font-bold">Hello HTML preview</h1>
<img src="''' + S + '''/img.png"><form id="f" action="''' + S + '''/form" method="post"><input name="a" value="1"></form>
<script>
document.body.dataset.ran = '1';
fetch("''' + S + '''/fetch").then(() => { document.body.dataset.fetch = 'reached'; }, () => { document.body.dataset.fetch = 'blocked'; });
try { localStorage.setItem('x', '1'); document.body.dataset.storage = 'reached'; } catch (e) { document.body.dataset.storage = 'blocked'; }
try { document.cookie = 'a=1'; document.body.dataset.cookie = document.cookie ? 'reached' : 'blocked'; } catch (e) { document.body.dataset.cookie = 'blocked'; }
try { new WebSocket("''' + S.replace('http', 'ws') + '''/ws"); } catch (e) {}
try { document.getElementById('f').submit(); } catch (e) {}
try { top.location.href = "''' + S + '''/top"; } catch (e) {}
try { parent.document.title = 'owned'; document.body.dataset.parent = 'reached'; } catch (e) { document.body.dataset.parent = 'blocked'; }
</script></body></html>''')
print('made 4 artifacts')
`;

test('create a chat in the app, attach a file, type and run code, see output and artifact previews', async (t) => {
  if (!need(t)) return;
  const page = await browser.ctx.newPage();
  const errors = watchConsole(page);
  await newChatInApp(page, orch);
  const link = page.locator('#chat-list li a').first();
  await link.waitFor();
  await screenshot(page, 'index-desktop');
  await link.click();
  await page.waitForURL(/\/chat\//);
  await page.waitForFunction(() => window.cereaSession?.stream?.state === 'open', null, { timeout: 20_000 });
  await page.setInputFiles('#attach-input', { name: 'notes.txt', mimeType: 'text/plain', buffer: Buffer.from('attached by the user') });
  await page.locator('.chip[data-name="notes.txt"]').waitFor({ timeout: 10_000 });
  await page.click('#composer summary');
  await page.locator('#editor .cm-content').click();
  await page.keyboard.press('Control+a');
  await page.keyboard.press('Delete');
  await page.keyboard.type('print(open("/mnt/data/notes.txt").read().upper())');
  await page.keyboard.press('Escape');
  await page.keyboard.press('Control+Enter');
  const first = page.locator('.run-card[data-status=ok]').first();
  await first.waitFor({ timeout: 90_000 });
  assert.equal((await first.locator('[data-testid=stdout]').textContent()).trim(), 'ATTACHED BY THE USER');

  // Artifacts with previews.
  await page.evaluate((c) => window.cereaChatEditor.setCode(c), artifactCode(sentinel.address().port));
  await page.locator('#editor .cm-content').click();
  await page.keyboard.press('Control+Enter');
  const card = page.locator('.run-card', { hasText: 'made 4 artifacts' }).first();
  await card.waitFor({ timeout: 90_000 });
  await card.locator('.artifact').nth(3).waitFor();
  assert.equal(await card.getAttribute('data-status'), 'ok');
  assert.equal(await card.locator('details.code-fold').count(), 1, 'the code folds behind a disclosure when files are the answer');
  for (const d of await card.locator('details.preview-fold').all()) await d.evaluate((el) => { el.open = true; });
  const img = card.locator('.artifact[data-name="red.png"] img.preview-image');
  await img.waitFor();
  await page.waitForFunction((el) => el.complete && el.naturalWidth === 60, await img.elementHandle());
  const pdfCanvas = card.locator('.artifact[data-name="hello.pdf"] canvas.preview-pdf-page');
  await pdfCanvas.waitFor({ timeout: 20_000 });
  assert.ok(await pdfCanvas.evaluate((c) => c.width > 100 && c.height > 50));
  const docx = card.locator('.artifact[data-name="report.docx"] .preview-docx');
  await docx.getByText('Hello Word preview').waitFor({ timeout: 20_000 });
  const frameEl = card.locator('.artifact[data-name="page.html"] iframe.preview-html');
  await frameEl.waitFor();
  assert.equal(await frameEl.getAttribute('sandbox'), 'allow-scripts');
  const frame = await (await frameEl.elementHandle()).contentFrame();
  await frame.waitForFunction(() => document.body?.dataset.fetch, null, { timeout: 15_000 });
  const ds = await frame.evaluate(() => ({ ...document.body.dataset, font: getComputedStyle(document.getElementById('t')).fontSize }));
  assert.equal(ds.ran, '1', 'preview scripts run');
  assert.equal(ds.fetch, 'blocked');
  assert.equal(ds.storage, 'blocked');
  assert.equal(ds.cookie, 'blocked');
  assert.equal(ds.parent, 'blocked');
  assert.equal(ds.font, '30px', 'bundled Tailwind styled the preview (text-3xl)');
  await page.waitForTimeout(500);
  assert.deepEqual(hits, [], 'nothing from the preview reached another server');
  assert.equal(await page.title() !== 'owned', true);
  assert.match(page.url(), /\/chat\//, 'the page was not navigated away');
  await card.scrollIntoViewIfNeeded();
  await screenshot(page, 'chat-artifacts-desktop');
  assert.deepEqual(errors.filter((e) => !/favicon|Failed to load resource|^http 409 |Content Security Policy|Refused to|sandboxed|Blocked form submission|unsafe attempt/i.test(e)), []);

  // The same chat on a phone.
  const phone = await launch({ viewport: PHONE, isMobile: true });
  try {
    const p2 = await phone.ctx.newPage();
    await p2.goto(page.url());
    await p2.waitForFunction(() => window.cereaSession?.stream?.state === 'open', null, { timeout: 20_000 });
    await p2.locator('.chip[data-name="notes.txt"]').waitFor();
    await screenshot(p2, 'chat-phone-files');
  } finally { await phone.close(); }
  await page.close();
});

test('the admin page shows a live run and changes retention', async (t) => {
  if (!need(t)) return;
  const c = await api('POST', '/v1/chats', { title: 'admin test' });
  const chat = c.json;
  const page = await browser.ctx.newPage();
  await page.goto(`${orch.origin}/chat/${chat.chat_id}#token=${chat.page_token}`);
  await page.waitForFunction(() => window.cereaSupervisor?.state === 'ready', null, { timeout: 90_000 });
  const admin = await browser.ctx.newPage();
  await admin.goto(`${orch.origin}/admin`);
  await admin.fill('#apikey', orch.apiKey);
  await admin.click('#connect');
  await admin.locator('#pages tbody tr', { hasText: chat.chat_id.slice(-10) }).waitFor({ timeout: 10_000 });
  const run = await api('POST', `/v1/chats/${chat.chat_id}/runs`, { code: 'import time\nt=time.time()\nwhile time.time()-t < 6:\n    pass', origin: 'tool' });
  const row = admin.locator('#runs tbody tr', { hasText: run.json.run_id.slice(-10) });
  await row.filter({ hasText: 'running' }).waitFor({ timeout: 15_000 });
  await screenshot(admin, 'admin-desktop');
  await admin.fill('#retention', '7');
  await admin.click('#save-retention');
  await admin.getByText('Saved: run files are kept 7 days.').waitFor();
  const s = await api('GET', '/v1/admin/settings');
  assert.equal(s.json.retention_days, 7);
  // A failure case: the wrong key is refused and says so.
  await admin.fill('#apikey', 'wrong-key');
  await admin.click('#connect');
  await admin.getByText('The API key was refused.').waitFor();
  await admin.setViewportSize(PHONE);
  await admin.fill('#apikey', orch.apiKey);
  await admin.click('#connect');
  await admin.locator('#pages tbody tr', { hasText: chat.chat_id.slice(-10) }).waitFor();
  await screenshot(admin, 'admin-phone');
  await admin.close(); await page.close();
});

test('index page at phone width, settings dialog reachable by keyboard', async (t) => {
  if (!need(t)) return;
  const phone = await launch({ viewport: PHONE, isMobile: true });
  try {
    const page = await phone.ctx.newPage();
    await page.goto(`${orch.origin}/`);
    await page.locator('#open-settings:not([disabled])').waitFor(); // enabled once the dialog is wired
    await page.locator('#open-settings').focus();
    await page.keyboard.press('Enter');
    assert.equal(await page.locator('#settings').evaluate((d) => d.open), true);
    assert.equal(await page.isVisible('#pypi'), true, 'the PyPI toggle shows when the operator allows PyPI');
    await screenshot(page, 'settings-phone');
    await page.keyboard.press('Escape');
    const overflow = await page.evaluate((w) => Math.max(document.documentElement.scrollWidth, window.innerWidth) - w, PHONE.width);
    assert.ok(overflow <= 1, `no horizontal scroll (overflow ${overflow}px)`);
    await screenshot(page, 'index-phone');
  } finally { await phone.close(); }
});

test('the PyPI setting picks the worker (its CSP) and is hidden when the operator disabled PyPI', async (t) => {
  if (!need(t)) return;
  const page = await browser.ctx.newPage();
  const workers = [];
  page.on('worker', (w) => workers.push(new URL(w.url()).pathname));
  await page.goto(`${orch.origin}/playground`);
  await page.waitForFunction(() => window.cereaSupervisor?.state === 'ready', null, { timeout: 90_000 });
  assert.equal(workers[0], '/worker-pypi/kernel-worker.js', 'on by default: the worker whose CSP allows the PyPI hosts');
  const csp = (await fetch(`${orch.origin}/worker-pypi/kernel-worker.js`)).headers.get('content-security-policy');
  assert.match(csp, /pypi\.org/);
  await page.click('#open-settings');
  await page.uncheck('#pypi');
  await page.click('#settings button[value=ok]');
  await page.waitForFunction(() => window.cereaSupervisor?.state === 'ready' && window.cereaSupervisor.workerUrl.startsWith('/worker/'), null, { timeout: 90_000 });
  assert.ok(workers.includes('/worker/kernel-worker.js'), JSON.stringify(workers));
  await page.close();

  const off = await orchestrator({ env: { CHAT_PYODIDE_PYPI_DISABLED: 'true' } });
  if (off.skip) { t.diagnostic(`second orchestrator: ${off.skip}`); return; }
  try {
    const p2 = await browser.ctx.newPage();
    const w2 = [];
    p2.on('worker', (w) => w2.push(new URL(w.url()).pathname));
    await p2.goto(`${off.origin}/playground`);
    await p2.click('#open-settings');
    assert.equal(await p2.isVisible('#pypi'), false, 'the toggle is hidden');
    assert.equal(await p2.isVisible('#pypi-off'), true);
    await p2.keyboard.press('Escape');
    await p2.waitForFunction(() => window.cereaSupervisor?.state === 'ready', null, { timeout: 90_000 });
    assert.ok(w2.every((p) => p === '/worker/kernel-worker.js'), JSON.stringify(w2));
    const csp2 = (await fetch(`${off.origin}/worker-pypi/kernel-worker.js`)).headers.get('content-security-policy');
    assert.doesNotMatch(csp2 || '', /pypi\.org/, 'the operator switch also closes /worker-pypi/');
    await p2.close();
  } finally { await off.stop(); }
});
