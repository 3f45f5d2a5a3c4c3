// app.test.mjs -- the reference web app as a user and an operator use it, in Chromium against the
// real orchestrator: create a chat from the app (signed in as the administrator: New chat opens it
// at once), attach a file, type code in the editor and run it, see the output and artifact cards with
// working previews (image, PDF via pdf.js, Word via docx-preview, HTML in a sandboxed frame whose
// scripts run with the bundled Tailwind but reach no network, no storage, cannot submit forms or
// navigate), and the admin page showing a live run and changing the retention setting.  What a new
// user trips on (issue 20): the library set said plainly (playground line, settings, /v1/config,
// admin), the PyPI toggle disabled with its reason when micropip is not served, the admin page
// without a session going to the sign-in page and back, finished runs' origin and restart, "1
// paused turn", a person who is not an administrator told so, tables on a phone; New chat after
// the session ended goes to the sign-in page; a long chat name stays inside the list; a mistyped
// URL gets an HTML page (JSON for API clients).
// Screenshots of the views at desktop and phone widths go to test-results/.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { launch, orchestrator, backend, screenshot, watchConsole, signInAdmin, signIn, addPerson, DESKTOP, PHONE } from './harness.mjs';

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
  await signInAdmin(page, orch, '/');
  await page.locator('#new-chat:not([hidden])').waitFor();
  await screenshot(page, 'index-desktop');
  await page.click('#new-chat');
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
  const docx = card.locator('.artifact[data-name="report.docx"] iframe.preview-docx');
  assert.equal(await docx.getAttribute('sandbox', { timeout: 20_000 }), 'allow-scripts', 'Word renders in a sandboxed frame');
  await docx.contentFrame().getByText('Hello Word preview').waitFor({ timeout: 20_000 });
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
  assert.deepEqual(errors.filter((e) => !/favicon|Failed to load resource|^http 409 |^http 401 GET \/v1\/me$|Content Security Policy|Refused to|sandboxed|Blocked form submission|unsafe attempt/i.test(e)), []);

  // The same chat on a phone.
  const phone = await launch({ viewport: PHONE, isMobile: true });
  try {
    const p2 = await phone.ctx.newPage();
    await signInAdmin(p2, orch, new URL(page.url()).pathname);
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
  await signInAdmin(admin, orch, '/admin');
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
  // A failure case: a retention the server refuses changes nothing.
  await admin.fill('#retention', '0');
  await admin.click('#save-retention');
  await admin.getByText('Enter a whole number of days.').waitFor();
  assert.equal((await api('GET', '/v1/admin/settings')).json.retention_days, 7);
  await admin.setViewportSize(PHONE);
  await admin.reload();
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

test('the PyPI setting: disabled with its reason without micropip; picks the worker (its CSP) when it can work; hidden when the operator disabled PyPI', async (t) => {
  if (!need(t)) return;
  const cfg = (await api('GET', '/v1/config')).json;
  const page = await browser.ctx.newPage();
  const workers = [];
  page.on('worker', (w) => workers.push(new URL(w.url()).pathname));
  await page.goto(`${orch.origin}/playground`);
  await page.waitForFunction(() => window.cereaSupervisor?.state === 'ready', null, { timeout: 90_000 });
  await page.click('#open-settings');
  if (!cfg.pypi_available) {
    // This deployment serves no micropip: the toggle cannot work, so it is off, disabled, and says why.
    assert.ok(cfg.packages.lacks.some((p) => p.name === 'micropip'), JSON.stringify(cfg.packages));
    assert.equal(await page.isDisabled('#pypi'), true);
    assert.equal(await page.isChecked('#pypi'), false);
    assert.match(await page.locator('#pypi-unavailable').textContent(), /needs micropip/);
    assert.equal(await page.isVisible('#pypi-unavailable'), true);
    assert.equal(workers[0], '/worker/kernel-worker.js', 'no PyPI hosts in the worker CSP for a setting that cannot work');
    await screenshot(page, 'settings-pypi-unavailable');
    await page.keyboard.press('Escape');
  } else {
    assert.equal(workers[0], '/worker-pypi/kernel-worker.js', 'on by default: the worker whose CSP allows the PyPI hosts');
    const csp = (await fetch(`${orch.origin}/worker-pypi/kernel-worker.js`)).headers.get('content-security-policy');
    assert.match(csp, /pypi\.org/);
    await page.uncheck('#pypi');
    await page.click('#settings button[value=ok]');
    await page.waitForFunction(() => window.cereaSupervisor?.state === 'ready' && window.cereaSupervisor.workerUrl.startsWith('/worker/'), null, { timeout: 90_000 });
    assert.ok(workers.includes('/worker/kernel-worker.js'), JSON.stringify(workers));
  }
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

test('the library set is said plainly: /v1/config lists what is served and lacking, the playground says it, the admin page lists it', async (t) => {
  if (!need(t)) return;
  const cfg = (await api('GET', '/v1/config')).json;
  assert.ok(Array.isArray(cfg.packages?.has) && Array.isArray(cfg.packages?.lacks), JSON.stringify(cfg));
  assert.equal(cfg.packages.has.length + cfg.packages.lacks.length, 11, 'the guide names 11 packages');
  assert.ok(cfg.packages.has.some((p) => p.name === 'openpyxl' && p.version), JSON.stringify(cfg.packages.has));
  assert.equal(typeof cfg.pypi_available, 'boolean');
  assert.equal(cfg.limits.upload_bytes, 50 * 1024 * 1024);
  const page = await browser.ctx.newPage();
  await page.goto(`${orch.origin}/playground`);
  const line = page.locator('[data-testid=libraries]');
  await line.waitFor();
  const text = await line.textContent();
  assert.match(text, /openpyxl/);
  for (const l of cfg.packages.lacks.filter((p) => p.name !== 'micropip')) assert.match(text, new RegExp(`Not available on this deployment:.*${l.name}`));
  assert.doesNotMatch(text, /PYODIDE_DIST_DIR|operator/i, 'no operator jargon for users');
  const admin = await browser.ctx.newPage();
  await signInAdmin(admin, orch, '/admin');
  await admin.locator('#packages-has tbody tr', { hasText: 'openpyxl' }).waitFor();
  for (const l of cfg.packages.lacks) await admin.locator('#packages-lacks tbody tr', { hasText: l.name }).first().waitFor();
  assert.match(await admin.locator('#pypi-state').textContent(), cfg.pypi_available ? /allowed/ : /not possible \(micropip is not served\)/);
  await admin.close(); await page.close();
});

test('admin without a session: the sign-in page first, then back to the admin page (no exception)', async (t) => {
  if (!need(t)) return;
  const ctx = await launch({ viewport: DESKTOP });
  try {
    const admin = await ctx.ctx.newPage();
    const errors = watchConsole(admin);
    await admin.goto(`${orch.origin}/admin`);
    await admin.waitForURL(`${orch.origin}/signin?next=%2Fadmin`, { timeout: 10_000 });
    assert.equal(await admin.locator('#retention').count(), 0, 'nothing of the admin page before signing in');
    await signInAdmin(admin, orch, '/admin');
    await admin.waitForURL(`${orch.origin}/admin`);
    await admin.fill('#retention', '9');
    await admin.click('#save-retention');
    await admin.getByText('Saved: run files are kept 9 days.').waitFor({ timeout: 5000 });
    assert.deepEqual(errors.filter((e) => /pageerror/.test(e)), [], 'no exception');
  } finally { await ctx.close(); }
});

test('admin: a person who is not an administrator is told so, and their New chat works', async (t) => {
  if (!need(t)) return;
  const ctx = await launch({ viewport: DESKTOP });
  try {
    const who = await addPerson(orch, 'not-an-admin');
    const admin = await ctx.ctx.newPage();
    await signIn(admin, orch.origin, { name: who.name, password: who.password, next: '/admin' });
    await admin.locator('#admin-status[data-code=admin_only]').waitFor({ timeout: 10_000 });
    assert.equal(await admin.isVisible('#people-panel'), false);
    assert.equal(await admin.isVisible('#runs'), false);
    assert.equal((await admin.evaluate(() => fetch('/v1/admin/people').then((r) => r.status))), 403, 'the server refuses them too');
    await admin.goto(`${orch.origin}/`);
    await admin.click('#new-chat');
    await admin.waitForURL(/\/chat\//, { timeout: 10_000 });
    // Sign out from the admin page.
    await admin.goto(`${orch.origin}/admin`);
    await admin.click('#sign-out');
    await admin.waitForURL(`${orch.origin}/signin`);
    assert.equal(await admin.evaluate(() => fetch('/v1/me').then((r) => r.status)), 401);
  } finally { await ctx.close(); }
});

test('admin: one paused run reads "1 paused turn"', async (t) => {
  if (!need(t)) return;
  // A server of its own: runs the other tests left paused would change the count.
  const orch = await orchestrator();
  if (orch.skip) { t.skip(orch.skip); return; }
  const api = backend(orch.origin, orch.apiKey);
  const ctx = await launch({ viewport: DESKTOP });
  try {
    const c = await api('POST', '/v1/chats', { title: 'paused one' });
    const run = await api('POST', `/v1/chats/${c.json.chat_id}/runs`, { code: 'print(1)', origin: 'tool' });
    const admin = await ctx.ctx.newPage();
    await signInAdmin(admin, orch, '/admin');
    await admin.locator('#runs tbody tr', { hasText: run.json.run_id.slice(-10) }).filter({ hasText: 'paused' }).waitFor({ timeout: 10_000 });
    await admin.waitForFunction(() => /\(1 paused turn waiting/.test(document.getElementById('runs-summary').textContent), null, { timeout: 5000 })
      .catch(async (e) => { throw new Error(`${e.message}: ${await admin.locator('#runs-summary').textContent()}`); });
    await api('POST', `/v1/runs/${run.json.run_id}/cancel`, {});
  } finally { await ctx.close(); await orch.stop(); }
});

test('admin: finished runs show their origin and whether the sandbox restarted', async (t) => {
  if (!need(t)) return;
  const c = await api('POST', '/v1/chats', { title: 'finished runs' });
  const chat = c.json;
  const page = await browser.ctx.newPage();
  await page.goto(`${orch.origin}/chat/${chat.chat_id}#token=${chat.page_token}`);
  await page.waitForFunction(() => window.cereaSupervisor?.state === 'ready', null, { timeout: 90_000 });
  const ok = await api('POST', `/v1/chats/${chat.chat_id}/runs`, { code: 'print(2)', origin: 'auto', wait_s: 60 });
  assert.equal(ok.json.status, 'ok', ok.text);
  await page.evaluate(() => window.cereaSupervisor.whenSpareReady());
  const slow = await api('POST', `/v1/chats/${chat.chat_id}/runs`, { code: 'while True:\n    pass', origin: 'tool', timeout_s: 1, wait_s: 60 });
  assert.equal(slow.json.status, 'timeout', slow.text);
  assert.equal(slow.json.restarted, true);
  await page.close();
  const admin = await browser.ctx.newPage();
  await signInAdmin(admin, orch, '/admin');
  const row = (id) => admin.locator('#runs tbody tr', { hasText: id.slice(-10) });
  await admin.waitForFunction((ids) => ids.every((id) => [...document.querySelectorAll('#runs tbody tr')].some((tr) => tr.textContent.includes(id) && tr.cells[2].textContent && tr.cells[6].textContent)),
    [ok.json.run_id.slice(-10), slow.json.run_id.slice(-10)], { timeout: 10_000 });
  const a = await row(ok.json.run_id).locator('td').allTextContents(), b = await row(slow.json.run_id).locator('td').allTextContents();
  assert.equal(a[2], 'auto'); assert.equal(a[6], 'no');
  assert.equal(b[2], 'tool'); assert.equal(b[6], 'yes');
  await admin.close();
});

test('admin on a phone: ids stay on one line (the table scrolls in its frame), no page-wide overflow', async (t) => {
  if (!need(t)) return;
  const c = await api('POST', '/v1/chats', { title: 'phone table' });
  await api('POST', `/v1/chats/${c.json.chat_id}/runs`, { code: 'print(3)', origin: 'tool' });
  const phone = await launch({ viewport: PHONE, isMobile: true });
  try {
    const admin = await phone.ctx.newPage();
    await signInAdmin(admin, orch, '/admin');
    await admin.locator('#runs tbody td code').first().waitFor({ timeout: 10_000 });
    const heights = await admin.$$eval('#runs tbody td code, #pages tbody td code', (els) => els.map((e) => e.getBoundingClientRect().height));
    const line = await admin.$eval('#runs tbody td', (td) => parseFloat(getComputedStyle(td).lineHeight) || 20);
    assert.ok(heights.length > 0 && heights.every((x) => x < line * 1.5), `one line each: ${heights} (line ${line})`);
    const overflow = await admin.evaluate((w) => Math.max(document.documentElement.scrollWidth, window.innerWidth) - w, PHONE.width);
    assert.ok(overflow <= 1, `no page-wide horizontal scroll (overflow ${overflow}px)`);
    await screenshot(admin, 'admin-phone-tables');
  } finally { await phone.close(); }
});

test('New chat after the session ended (signed out in another tab) goes to the sign-in page', async (t) => {
  if (!need(t)) return;
  const b = await launch({ viewport: DESKTOP });
  try {
    const page = await b.ctx.newPage();
    await signInAdmin(page, orch, '/');
    await page.locator('#new-chat:not([hidden])').waitFor();
    const other = await b.ctx.newPage();
    await other.goto(`${orch.origin}/`);
    await other.click('#sign-out');
    await other.waitForURL(/\/signin/);
    await page.click('#new-chat');
    await page.waitForURL(`${orch.origin}/signin?next=%2F`, { timeout: 10_000 });
    await screenshot(page, 'chat-list-session-ended');
  } finally { await b.close(); }
});

test('a long chat name stays inside the chat list (Rename inside the sidebar, no page overflow)', async (t) => {
  if (!need(t)) return;
  const long = 'Quarterly_revenue_analysis_for_the_northern_sales_region_of_2026_with_forecasts';
  const c = await api('POST', '/v1/chats', { title: long, owner: 'admin' });
  assert.equal(c.status, 201, c.text);
  for (const [viewport, isMobile, tag] of [[DESKTOP, false, 'desktop'], [PHONE, true, 'phone']]) {
    const b = await launch({ viewport, isMobile });
    try {
      const page = await b.ctx.newPage();
      await signInAdmin(page, orch, '/');
      const li = page.locator(`#chat-list li[data-chat-id="${c.json.chat_id}"]`);
      await li.waitFor({ state: 'attached' });
      if (isMobile) { await page.click('#open-chats'); await page.locator('#chats.open').waitFor(); await page.waitForTimeout(400); } // the drawer slides in
      const side = await page.locator('.side').boundingBox();
      for (const action of ['rename', 'delete']) {
        const btn = await li.locator(`[data-action=${action}]`).boundingBox();
        assert.ok(btn.x + btn.width <= side.x + side.width + 0.5, `${tag}: ${action} inside the list (${btn.x + btn.width} > ${side.x + side.width})`);
      }
      const overflow = await page.evaluate((w) => Math.max(document.documentElement.scrollWidth, window.innerWidth) - w, viewport.width);
      assert.ok(overflow <= 1, `${tag}: no horizontal scroll (overflow ${overflow}px)`);
      await screenshot(page, `chat-list-long-name-${tag}`);
    } finally { await b.close(); }
  }
});

test('a mistyped URL: an HTML page for a browser, JSON for API clients', async (t) => {
  if (!need(t)) return;
  const page = await browser.ctx.newPage();
  const res = await page.goto(`${orch.origin}/chats/typo`);
  assert.equal(res.status(), 404);
  assert.match(res.headers()['content-type'], /text\/html/);
  await page.getByRole('heading', { name: 'Page not found' }).waitFor();
  assert.match(await page.textContent('main'), /There is no page at \/chats\/typo/);
  await page.getByRole('link', { name: 'Playground and chats' }).click();
  await page.waitForURL(`${orch.origin}/`);
  const api404 = await fetch(`${orch.origin}/chats/typo`);
  assert.equal(api404.status, 404);
  assert.deepEqual(await api404.json(), { error: { code: 'not_found', message: 'no such path' } });
  const esc = await fetch(`${orch.origin}/x%3Cscript%3E`, { headers: { Accept: 'text/html' } });
  assert.doesNotMatch(await esc.text(), /<script>/, 'the path is escaped');
  await page.close();
});
