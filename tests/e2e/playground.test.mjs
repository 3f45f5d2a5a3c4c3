// playground.test.mjs -- the playground page in Chromium against the static test server (no
// orchestrator: the playground runs the user's own code in a local kernel worker): real Python runs
// and hands back an artifact; every escape probe from Python fails (and a sentinel server on
// another port sees no request); the editor shows completion, hover signatures and syntax
// diagnostics (cleared when the language changes), ranks the code's own names above builtins and
// indents Python by 4 spaces; a share link reproduces the code and its language; Ctrl+Enter runs;
// the time limit swaps in the spare; a missing library is explained in plain words, once; a cut
// stream is said once; screenshots at desktop and phone widths.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import fs from 'node:fs';
import { launch, staticServer, screenshot, watchConsole, DESKTOP, PHONE, RESULTS, WWW } from './harness.mjs';
import { escapeProbes, runAndWait, setCode } from './escape-probes.mjs';

let srv, browser, sentinel, sentinelHits = [];

before(async () => {
  srv = await staticServer();
  sentinel = http.createServer((req, res) => { sentinelHits.push(req.url); res.end('reached'); });
  sentinel.on('upgrade', (req, sock) => { sentinelHits.push('ws ' + req.url); sock.destroy(); });
  await new Promise((r) => sentinel.listen(0, '127.0.0.1', r));
  browser = await launch({ viewport: DESKTOP });
});
after(async () => {
  await browser?.close();
  await srv?.close();
  sentinel?.closeAllConnections?.(); sentinel?.close();
});

async function openPlayground(hash = '') {
  const page = await browser.ctx.newPage();
  const errors = watchConsole(page);
  await page.goto(`${srv.origin}/playground${hash}`);
  await page.waitForFunction(() => document.getElementById('runtime').dataset.state === 'ready', null, { timeout: 90_000 });
  return { page, errors };
}

test('the playground runs Python in the real kernel and returns an artifact', async () => {
  const { page, errors } = await openPlayground();
  assert.equal(await page.evaluate(() => crossOriginIsolated), true, 'page is cross-origin isolated');
  await setCode(page, 'import sys\nx = 6 * 7\nprint("answer", x, sys.version_info[:2])\n' +
    'open("/mnt/output/result.csv", "w").write("a,b\\n1,2\\n")\nopen("/tmp/scratch.txt", "w").write("no card")\n');
  const r = await runAndWait(page);
  assert.equal(r.status, 'ok', r.text);
  assert.match(r.stdout, /answer 42 \(3, 1\d\)/);
  assert.equal(await r.card.locator('.artifact').count(), 1, 'only /mnt/output files become cards');
  assert.equal(await r.card.locator('.artifact').getAttribute('data-name'), 'result.csv');
  // The namespace persists between runs; an exception is reported as an error with its type.
  await setCode(page, 'print(x + 1)\n1/0\n');
  const r2 = await runAndWait(page);
  assert.equal(r2.status, 'error');
  assert.match(r2.stdout, /43/);
  assert.match(r2.text, /ZeroDivisionError/);
  // Download is byte-identical.
  const [dl] = await Promise.all([page.waitForEvent('download'), page.locator('.artifact[data-name="result.csv"] [data-testid=download]').click()]);
  const path = await dl.path();
  assert.equal(fs.readFileSync(path, 'utf8'), 'a,b\n1,2\n');
  await screenshot(page, 'playground-desktop');
  // No one is signed in: the chat list's GET /v1/me answers 401, as the API says.
  assert.deepEqual(errors.filter((e) => !/favicon|^http 401 GET \/v1\/me$|status of 401/.test(e)), []);
  await page.close();
});

test('from Python every escape probe fails and nothing reaches another server', async () => {
  const { page } = await openPlayground();
  const { results, bcGot } = await escapeProbes(page, `http://127.0.0.1:${sentinel.address().port}`);
  const reached = Object.entries(results).filter(([, v]) => !v.startsWith('blocked') && v !== 'pending');
  assert.deepEqual(reached, [], `probes that escaped: ${JSON.stringify(reached)}`);
  assert.ok(Object.keys(results).length >= 15, JSON.stringify(results));
  assert.deepEqual(sentinelHits, [], 'the sentinel server saw no request');
  assert.deepEqual(bcGot, [], 'no BroadcastChannel message reached the page');
  await page.close();
});

test('editor: completion, hover signature and syntax diagnostics appear', async () => {
  const { page } = await openPlayground();
  await setCode(page, '');
  await page.click('.cm-content');
  await page.keyboard.type('total_amount = 3\nprin');
  const tip = page.locator('.cm-tooltip-autocomplete');
  await tip.waitFor({ timeout: 5000 });
  assert.match(await tip.textContent(), /print/, 'builtin from the reference');
  await page.keyboard.press('Escape');
  await page.keyboard.type('t(tot');
  await tip.waitFor({ timeout: 5000 });
  assert.match(await tip.textContent(), /total_amount/, 'local name');
  await page.keyboard.press('Escape');
  // Snippet and dotted reference.
  await setCode(page, 'import json\njson.du');
  await page.click('.cm-content'); await page.keyboard.press('Control+End');
  await page.keyboard.press('Control+Space');
  await tip.waitFor({ timeout: 5000 });
  assert.match(await tip.textContent(), /dumps/);
  await page.keyboard.press('Escape');
  // Hover signature.
  await setCode(page, 'print("hi")\n');
  const box = await page.locator('.cm-line').first().boundingBox();
  await page.mouse.move(box.x + 15, box.y + box.height / 2);
  const sig = page.locator('.cm-tooltip .cm-sig');
  await sig.waitFor({ timeout: 5000 });
  assert.match(await sig.textContent(), /print\(\*objects/);
  // Syntax diagnostics.
  await setCode(page, 'def broken(:\n    return 1\n');
  await page.locator('.cm-lintRange-error').first().waitFor({ timeout: 5000 });
  await page.locator('.cm-lint-marker-error').first().waitFor({ timeout: 5000 });
  await page.mouse.move(5, 800);
  await page.locator('.cm-lintRange-error').first().hover();
  await page.locator('.cm-tooltip-lint').waitFor({ timeout: 5000 });
  assert.match(await page.locator('.cm-tooltip-lint').textContent(), /Syntax error/);
  await screenshot(page, 'playground-diagnostics');
  // Valid code: no diagnostics.
  await setCode(page, 'def fine(a):\n    return a\n');
  await page.waitForTimeout(800);
  assert.equal(await page.locator('.cm-lintRange-error').count(), 0);
  // Ruby and Lua view modes: highlighted, Run disabled.
  await page.selectOption('#lang', 'ruby');
  await setCode(page, 'def hi\n  puts "x"\nend\n');
  assert.equal(await page.isDisabled('#run'), true);
  assert.ok(await page.locator('.cm-line span').count() > 0, 'ruby tokens are styled');
  await page.selectOption('#lang', 'lua');
  await setCode(page, 'local x = 1\nprint(x)\n');
  assert.ok(await page.locator('.cm-line span').count() > 0, 'lua tokens are styled');
  await page.close();
});

test('a share link reproduces the code and runs it at once; Ctrl+Enter runs', async () => {
  const { page } = await openPlayground();
  const code = 'msg = "ünïcode ✓ & #hash"\nprint(msg[::-1])\n';
  await setCode(page, code);
  await page.click('#share');
  const href = await page.locator('[data-testid=share-link]').getAttribute('href');
  assert.match(href, /\/playground#lang=python&code=/);
  await page.close();
  const { page: p2 } = await openPlayground(href.slice(href.indexOf('#')));
  assert.equal(await p2.evaluate(() => window.cereaEditor.getCode()), code);
  const r = await runAndWait(p2, { via: 'keys' });
  assert.equal(r.status, 'ok');
  assert.equal(r.stdout.trim(), [...'ünïcode ✓ & #hash'].reverse().join(''));
  // A broken link opens the editor without crashing.
  const p3 = await browser.ctx.newPage();
  await p3.goto(`${srv.origin}/playground#code=%%%not-base64`);
  await p3.waitForSelector('.cm-content');
  await p2.close(); await p3.close();
});

test('an infinite loop hits the time limit: the spare takes over, files are back, variables gone', async () => {
  const { page } = await openPlayground();
  // Attach a file through the file input (the same path as drag and drop).
  await page.setInputFiles('#attach-input', { name: 'data.csv', mimeType: 'text/csv', buffer: Buffer.from('x,y\n1,2\n') });
  await page.evaluate(() => { window.cereaSupervisor.timeLimitOverrideS = 2; });
  await setCode(page, 'keep = 1\nprint(open("/mnt/data/data.csv").read())\n');
  const r1 = await runAndWait(page);
  assert.equal(r1.status, 'ok', r1.text);
  assert.match(r1.stdout, /x,y/);
  await page.evaluate(() => window.cereaSupervisor.whenSpareReady());
  await setCode(page, 'while True:\n    pass\n');
  const r2 = await runAndWait(page);
  assert.equal(r2.status, 'timeout', r2.text);
  assert.match(r2.text, /restarted/i);
  assert.match(await r2.card.locator('[data-testid=restart-note]').textContent(), /data\.csv/);
  const swap = await page.evaluate(() => window.cereaSupervisor.lastRestartMs);
  console.log(`# time limit -> spare ready and remounted in ${swap.toFixed(1)} ms`);
  await setCode(page, 'print(open("/mnt/data/data.csv").read())\nprint("keep" in globals())\n');
  const r3 = await runAndWait(page);
  assert.equal(r3.status, 'ok', r3.text);
  assert.match(r3.stdout, /x,y\n1,2\n\s*False/);
  await page.close();
});

test('cards show a SyntaxError, and the truncation note when output passes 8,000 characters', async () => {
  const { page } = await openPlayground();
  await setCode(page, 'print("before")\ndef broken(:\n    pass\n');
  let r = await runAndWait(page);
  assert.equal(r.status, 'error');
  assert.match(r.text, /SyntaxError/);
  assert.doesNotMatch(r.stdout, /before/, 'nothing ran: the code is compiled first');
  await setCode(page, 'print("é" * 9000)\nimport sys\nprint("x" * 9000, file=sys.stderr)');
  r = await runAndWait(page);
  assert.equal(r.status, 'ok');
  assert.equal([...r.stdout].length, 8000, 'capped at 8,000 characters, not bytes');
  assert.match(r.stdout, /^é{4000}\n\[… [\d,]+ characters left out …\]\né+\n$/, 'its start and its end, the middle left out');
  assert.match(r.text, /Output truncated at 8,000 characters/);
  assert.match(r.text, /Error output truncated at 8,000 characters/);
  assert.equal((r.text.match(/truncated|was cut/gi) || []).length, 2, `each cut stream is said once: ${r.text.slice(-400)}`);
  await page.close();
});

test('Stop interrupts a running loop and keeps the variables', async () => {
  const { page } = await openPlayground();
  await setCode(page, 'kept = "yes"\nn = 0\nwhile True:\n    n += 1\n');
  await page.click('#run');
  await page.waitForFunction(() => window.cereaSupervisor.state === 'busy' && window.cereaSupervisor.current?.client?.running);
  await page.waitForTimeout(200);
  assert.equal(await page.isVisible('#cancel'), true);
  await page.click('#cancel');
  await page.locator('.run-card[data-status=cancelled]').first().waitFor({ timeout: 10_000 });
  assert.equal(await page.isVisible('#cancel'), false);
  await setCode(page, 'print(kept, n > 0)');
  const r = await runAndWait(page);
  assert.equal(r.stdout.trim(), 'yes True', r.text);
  await page.close();
});

test('files dropped on the editor are attached and mounted at /mnt/data', async () => {
  const { page } = await openPlayground();
  await page.evaluate(() => {
    const dt = new DataTransfer();
    dt.items.add(new File(['dropped,bytes\n'], 'dropped.csv', { type: 'text/csv' }));
    dt.items.add(new File(['again'], 'dropped.csv', { type: 'text/csv' }));
    const dz = document.getElementById('dropzone');
    dz.dispatchEvent(new DragEvent('dragover', { dataTransfer: dt, bubbles: true, cancelable: true }));
    dz.dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
  });
  await page.locator('.chip', { hasText: 'dropped (2).csv' }).waitFor({ timeout: 5000 });
  await setCode(page, 'import os\nprint(sorted(os.listdir("/mnt/data")), open("/mnt/data/dropped.csv").read().strip())');
  const r = await runAndWait(page);
  assert.equal(r.status, 'ok', r.text);
  assert.equal(r.stdout.trim(), "['dropped (2).csv', 'dropped.csv'] dropped,bytes");
  await page.close();
});

test('HTML previews get the bundled React and Mermaid in place of their CDN tags', async () => {
  const { page, errors } = await openPlayground();
  const html = `<!doctype html><html><head>
<script src="https://unpkg.com/react@18/umd/react.production.min.js"></script>
<script src="https://unpkg.com/react-dom@18/umd/react-dom.production.min.js"></script>
<script src="https://cdn.jsdelivr.net/npm/mermaid/dist/mermaid.min.js"></script>
<script src="https://evil.example/steal.js"></script></head><body>
<div id="root"></div><pre class="mermaid">graph TD; A-->B;</pre>
<script>
ReactDOM.createRoot(document.getElementById('root')).render(React.createElement('p', {id: 'r'}, 'rendered by React ' + React.version));
mermaid.initialize({ startOnLoad: false });
mermaid.run().then(() => { document.body.dataset.mermaid = document.querySelector('.mermaid svg') ? 'svg' : 'none'; },
  (e) => { document.body.dataset.mermaid = 'error ' + e; });
</script></body></html>`;
  await setCode(page, `open('/mnt/output/app.html', 'w').write(${JSON.stringify(html)})`);
  const r = await runAndWait(page);
  assert.equal(r.status, 'ok', r.text);
  const frameEl = r.card.locator('iframe.preview-html');
  await frameEl.waitFor({ timeout: 10_000 });
  const frame = await (await frameEl.elementHandle()).contentFrame();
  await frame.waitForFunction(() => document.getElementById('r') && document.body.dataset.mermaid, null, { timeout: 20_000 });
  assert.match(await frame.textContent('#r'), /rendered by React 19\./);
  assert.equal(await frame.evaluate(() => document.body.dataset.mermaid), 'svg');
  assert.equal(await frame.evaluate(() => [...document.scripts].some((s) => s.src)), false, 'no external script left');
  assert.deepEqual(errors.filter((e) => /^http [45]/.test(e) && !/favicon|^http 401 GET \/v1\/me$/.test(e)), [], 'nothing fetched for the preview');
  await r.card.screenshot({ path: `${RESULTS}/preview-react-mermaid.png` });
  await page.close();
});

test('screenshots at phone width', async () => {
  const phone = await launch({ viewport: PHONE, isMobile: true });
  try {
    const page = await phone.ctx.newPage();
    await page.goto(`${srv.origin}/playground`);
    await page.waitForFunction(() => document.getElementById('runtime').dataset.state === 'ready', null, { timeout: 90_000 });
    await page.click('#run');
    await page.waitForSelector('.run-card[data-status=ok]', { timeout: 60_000 });
    const overflow = await page.evaluate((w) => Math.max(document.documentElement.scrollWidth, window.innerWidth) - w, PHONE.width);
    assert.ok(overflow <= 1, `no horizontal scroll at phone width (overflow ${overflow}px)`);
    await screenshot(page, 'playground-phone');
  } finally { await phone.close(); }
});

test('editor: a Python lint marker goes when the language changes to Ruby or Lua', async () => {
  const { page } = await openPlayground();
  await setCode(page, 'def broken(:\n    return 1\n');
  await page.locator('.cm-lint-marker-error').first().waitFor({ timeout: 5000 });
  await page.selectOption('#lang', 'ruby');
  await page.waitForTimeout(400);
  assert.equal(await page.locator('.cm-lint-marker-error, .cm-lintRange-error').count(), 0, 'no Python marker on Ruby code');
  await page.selectOption('#lang', 'python');
  await page.locator('.cm-lint-marker-error').first().waitFor({ timeout: 5000 }); // back for Python
  await page.selectOption('#lang', 'lua');
  await page.waitForTimeout(400);
  assert.equal(await page.locator('.cm-lint-marker-error, .cm-lintRange-error').count(), 0, 'no Python marker on Lua code');
  await page.close();
});

test('editor: the code\'s own names rank above builtins (Enter inserts revenue_total, not reversed)', async () => {
  const { page } = await openPlayground();
  await setCode(page, '');
  await page.click('.cm-content');
  await page.keyboard.type('revenue_total = 3\nrev');
  const first = page.locator('.cm-tooltip-autocomplete li').first();
  await first.waitFor({ timeout: 5000 });
  assert.equal(await first.locator('.cm-completionLabel').textContent(), 'revenue_total');
  assert.ok(await page.locator('.cm-tooltip-autocomplete li', { hasText: 'reversed' }).count() >= 1, 'the builtin is still offered');
  await screenshot(page, 'playground-editor-ranking');
  await page.keyboard.press('Enter');
  assert.equal(await page.evaluate(() => window.cereaEditor.getCode()), 'revenue_total = 3\nrevenue_total');
  await page.close();
});

test('editor: Python indents by 4 spaces', async () => {
  const { page } = await openPlayground();
  await setCode(page, '');
  await page.click('.cm-content');
  await page.keyboard.type('def f():');
  await page.keyboard.press('Enter');
  await page.keyboard.type('if True:');
  await page.keyboard.press('Enter');
  await page.keyboard.type('return 1');
  assert.equal(await page.evaluate(() => window.cereaEditor.getCode()), 'def f():\n    if True:\n        return 1');
  await page.close();
});

test('a share link keeps the language', async () => {
  const { page } = await openPlayground();
  await page.selectOption('#lang', 'ruby');
  await setCode(page, 'def hi\n  puts "x"\nend\n');
  await page.click('#share');
  const href = await page.locator('[data-testid=share-link]').getAttribute('href');
  assert.match(href, /#lang=ruby&code=/);
  await page.close();
  const { page: p2 } = await openPlayground(href.slice(href.indexOf('#')));
  assert.equal(await p2.locator('#lang').inputValue(), 'ruby');
  assert.equal(await p2.isDisabled('#run'), true, 'Ruby is view only');
  assert.equal(await p2.evaluate(() => window.cereaEditor.getCode()), 'def hi\n  puts "x"\nend\n');
  await p2.close();
});

test('a library this deployment lacks is explained in plain words, once (no operator jargon, no savefig, no "still ran")', async (t) => {
  const dep = JSON.parse(fs.readFileSync(`${WWW}/pyodide/deployment.json`, 'utf8'));
  if (dep.has.some((p) => p.name === 'matplotlib')) { t.skip('matplotlib is served by this deployment'); return; }
  const { page } = await openPlayground();
  await setCode(page, 'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()\n');
  const r = await runAndWait(page);
  assert.equal(r.status, 'error', r.text);
  assert.match(r.text, /ModuleNotFoundError/);
  const notes = await r.card.locator('[data-testid=note]').allTextContents();
  assert.equal(notes.length, 1, JSON.stringify(notes));
  assert.match(notes[0], /^matplotlib is not available on this deployment/);
  assert.match(notes[0], /charts cannot be drawn here/);
  for (const bad of [/PYODIDE_DIST_DIR/, /operator/i, /savefig/, /still ran/])
    assert.doesNotMatch(r.text, bad, `the card says ${bad}`);
  await setCode(page, 'import pandas as pd\n');
  const r2 = await runAndWait(page);
  assert.match(r2.text, /pandas is not available on this deployment.*Instead, use the csv module/);
  await page.close();
});
