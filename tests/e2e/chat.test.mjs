// chat.test.mjs -- the chat page in Chromium against the REAL orchestrator (build/cerea-sandbox
// serve on a free 127.0.0.1 port, temp --data dir, started and stopped by pid; CEREA_BIN overrides
// the binary).  The test plays the assistant through the API; the page executes.  Covers: an
// attached CSV read back byte-identical; output files downloadable byte-identical (API and the
// page's Download); a run posted before the page registered still sees the chat's files; an
// infinite loop hits the time limit, the spare takes over, files are back, variables gone, the
// result says so; cancel keeps the namespace; a page frozen mid-run (CDP
// Page.setWebLifecycleState) pauses the run, which re-runs when the page is active again; an
// event stream dropped mid-run reconnects with Last-Event-ID without losing events; left-out
// files show why; screenshots at desktop and phone widths.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import https from 'node:https';
import { launch, orchestrator, backend, screenshot, watchConsole, selfSignedCert, background, foreground, DESKTOP, PHONE } from './harness.mjs';

let orch = null, skipReason = null, api, browser;
const sha = (b) => crypto.createHash('sha256').update(b).digest('hex');

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

function need(t) {
  if (skipReason) { t.skip(`orchestrator unavailable: ${skipReason}`); return false; }
  return true;
}

async function newChat(files = {}) {
  const c = await api('POST', '/v1/chats', {});
  assert.equal(c.status, 201, c.text);
  for (const [name, bytes] of Object.entries(files)) {
    const r = await api('POST', `/v1/chats/${c.json.chat_id}/files?name=${encodeURIComponent(name)}`, bytes);
    assert.ok(r.status === 201 || r.status === 200, r.text);
  }
  return c.json;
}

async function openChat(chat, ctx = browser.ctx) {
  const page = await ctx.newPage();
  const errors = watchConsole(page);
  await page.goto(`${orch.origin}/chat/${chat.chat_id}#token=${chat.page_token}`);
  await page.waitForFunction(() => window.cereaSession?.stream?.state === 'open', null, { timeout: 20_000 });
  return { page, errors };
}

async function kernelReady(page) {
  await page.waitForFunction(() => window.cereaSupervisor.state === 'ready', null, { timeout: 90_000 });
}

async function runCode(chat, code, extra = {}) {
  const r = await api('POST', `/v1/chats/${chat.chat_id}/runs`, { code, origin: 'tool', wait_s: 90, ...extra });
  assert.ok(r.status === 200 || r.status === 201, r.text);
  return r.json;
}

test('an attached CSV is read back byte-identical and output files download byte-identical', async (t) => {
  if (!need(t)) return;
  const csv = Buffer.from('name,city,amount\r\n"Zoë","Köln",1.5\r\nBob,"São Paulo",-2\r\n\u00ff\n', 'utf8');
  const chat = await newChat({ 'sales.csv': csv });
  const { page, errors } = await openChat(chat);
  await kernelReady(page);
  const code = `import hashlib
b = open('/mnt/data/sales.csv', 'rb').read()
print(hashlib.sha256(b).hexdigest(), len(b))
open('/mnt/output/copy.csv', 'wb').write(b)
open('/mnt/output/bytes.bin', 'wb').write(bytes(range(256)) * 3)
`;
  const run = await runCode(chat, code);
  assert.equal(run.status, 'ok', JSON.stringify(run));
  assert.equal(run.stdout.trim(), `${sha(csv)} ${csv.length}`);
  const names = run.files.map((f) => f.name).sort();
  assert.deepEqual(names, ['bytes.bin', 'copy.csv']);
  const bin = Buffer.concat([Buffer.from([...Array(256).keys()])]);
  const expectBin = Buffer.concat([bin, bin, bin]);
  for (const f of run.files) {
    const r = await fetch(`${orch.origin}/v1/files/${f.artifact_id}`, { headers: { Authorization: `Bearer ${chat.page_token}` } });
    assert.equal(r.status, 200);
    const got = Buffer.from(await r.arrayBuffer());
    assert.ok(got.equals(f.name === 'copy.csv' ? csv : expectBin), `${f.name} byte-identical through the API`);
    assert.equal(f.sha256, sha(got));
  }
  // The page shows the card; its Download gives the same bytes.
  const card = page.locator(`.run-card[data-run-id="${run.run_id}"]`);
  await card.waitFor();
  await card.locator('.artifact[data-name="bytes.bin"]').waitFor();
  const [dl] = await Promise.all([page.waitForEvent('download'),
    card.locator('.artifact[data-name="bytes.bin"] [data-testid=download]').click()]);
  assert.ok(fs.readFileSync(await dl.path()).equals(expectBin), 'page download byte-identical');
  // The file chips list the attachment and the outputs.
  await page.locator('.chip[data-name="sales.csv"]').waitFor();
  await screenshot(page, 'chat-desktop');
  console.log('# page errors:', JSON.stringify(errors));
  // 409 is part of the protocol (a stale attempt); anything else is a bug.
  assert.deepEqual(errors.filter((e) => !/favicon|Failed to load resource|^http 409 /.test(e)), []);
  await page.close();
});

test('a run posted before the page registered still sees the chat\'s files', async (t) => {
  if (!need(t)) return;
  const chat = await newChat({ 'early.txt': Buffer.from('here from the start') });
  const created = await api('POST', `/v1/chats/${chat.chat_id}/runs`, { code: 'print(open("/mnt/data/early.txt").read())', origin: 'auto' });
  assert.ok(created.status === 201 || created.status === 200, created.text);
  const { page } = await openChat(chat);
  const r = await api('GET', `/v1/runs/${created.json.run_id}?wait_s=90`);
  assert.equal(r.json.status, 'ok', r.text);
  assert.equal(r.json.stdout.trim(), 'here from the start');
  await page.close();
});

test('an infinite loop hits the time limit: spare takes over, files back, variables gone, result says so', async (t) => {
  if (!need(t)) return;
  const chat = await newChat({ 'keep.csv': Buffer.from('k,v\n1,2\n') });
  const { page } = await openChat(chat);
  await kernelReady(page);
  const r1 = await runCode(chat, 'secret = 41\nprint(secret + 1)');
  assert.equal(r1.stdout.trim(), '42');
  await page.evaluate(() => window.cereaSupervisor.whenSpareReady());
  const downloads = await page.evaluate(() => window.cereaSession.cache.downloads);
  const r2 = await runCode(chat, 'while True:\n    pass\n', { timeout_s: 2 });
  assert.equal(r2.status, 'timeout', JSON.stringify(r2));
  assert.equal(r2.restarted, true);
  assert.deepEqual(r2.remounted, ['keep.csv']);
  const swap = await page.evaluate(() => window.cereaSupervisor.lastRestartMs);
  console.log(`# time limit hit -> spare ready with files remounted: ${swap.toFixed(1)} ms`);
  const card = page.locator(`.run-card[data-run-id="${r2.run_id}"]`);
  await card.locator('[data-testid=restart-note]').waitFor();
  assert.match(await card.textContent(), /keep\.csv/);
  const r3 = await runCode(chat, 'print(open("/mnt/data/keep.csv").read().strip())\nprint("secret" in globals())');
  assert.equal(r3.status, 'ok', JSON.stringify(r3));
  assert.equal(r3.stdout.trim(), 'k,v\n1,2\nFalse');
  assert.equal(await page.evaluate(() => window.cereaSession.cache.downloads), downloads, 'the remount used the page\'s copies: no download');
  await page.close();
});

test('cancel interrupts Python and keeps the namespace', async (t) => {
  if (!need(t)) return;
  const chat = await newChat();
  const { page } = await openChat(chat);
  await kernelReady(page);
  const interrupt = await page.evaluate(() => crossOriginIsolated);
  assert.equal(interrupt, true, 'chat page is cross-origin isolated (SharedArrayBuffer interrupts)');
  await runCode(chat, 'kept = "still here"');
  const created = await api('POST', `/v1/chats/${chat.chat_id}/runs`, { code: 'n = 0\nwhile True:\n    n += 1\n', origin: 'tool' });
  const runId = created.json.run_id;
  // Python is executing the user's code (the kernel's `started` event): an interrupt can land.
  await page.waitForFunction((id) => window.cereaSession.current?.run_id === id && window.cereaSupervisor.current?.client?.running === id, runId, { timeout: 30_000 });
  await page.waitForTimeout(200);
  assert.equal(await page.evaluate(() => window.cereaSession.wakeLock.count), 1, 'the wake lock is asked for while the run goes');
  const c = await api('POST', `/v1/runs/${runId}/cancel`, {});
  assert.ok(c.status < 300, c.text);
  const r = await api('GET', `/v1/runs/${runId}?wait_s=30`);
  assert.equal(r.json.status, 'cancelled', r.text);
  assert.equal(r.json.restarted, false, 'the interrupt landed: no restart');
  const r2 = await runCode(chat, 'print(kept, n > 0)');
  assert.equal(r2.stdout.trim(), 'still here True');
  // Released once the page has its answer to the result POST (the API's waiter may answer first).
  await page.waitForFunction(() => window.cereaSession.wakeLock.count === 0, null, { timeout: 5000 });
  // A reload shows the chat's runs again (GET /v1/chats/{chat}/runs with the page token).
  await page.reload();
  await page.locator(`.run-card[data-run-id="${runId}"][data-status=cancelled]`).waitFor({ timeout: 20_000 });
  await page.close();
});

// Under Playwright's default launch, focus emulation keeps every page "visible" and Chromium then
// ignores Page.setWebLifecycleState 'frozen' (no freeze event, timers keep running).  The real
// lifecycle (a tab really hidden, then frozen by CDP, then resumed) is driven in
// lifecycle.test.mjs, over connectOverCDP without those defaults.  This quicker test sends the CDP
// freeze AND plays what a phone's OS does to the page: visibilityState becomes 'hidden', then visibilitychange and freeze fire; on return, resume
// and visibilitychange with 'visible'.  Everything after that (presence, pause, re-dispatch,
// superseding the old attempt) is the real code (harness.mjs: background, foreground).
test('a page frozen mid-run pauses the run; active again, the run re-runs and finishes', async (t) => {
  if (!need(t)) return;
  const chat = await newChat({ 'f.txt': Buffer.from('file survives') });
  const { page } = await openChat(chat);
  await kernelReady(page);
  const created = await api('POST', `/v1/chats/${chat.chat_id}/runs`, {
    code: 'import time\nt = time.time()\nwhile time.time() - t < 5:\n    pass\nprint(open("/mnt/data/f.txt").read())', origin: 'tool' });
  const runId = created.json.run_id;
  await page.waitForFunction((id) => window.cereaSession.current?.run_id === id && window.cereaSupervisor.state === 'busy', runId, { timeout: 30_000 });
  const cdp = await page.context().newCDPSession(page);
  await background(page, cdp);
  let paused = null;
  for (let i = 0; i < 100 && !paused; i++) {
    const r = await api('GET', `/v1/runs/${runId}`);
    if (r.json.state === 'paused') paused = r.json;
    else await new Promise((res) => setTimeout(res, 100));
  }
  assert.ok(paused, 'the run went to paused while the page was in the background');
  await screenshot(page, 'chat-paused');
  await foreground(page, cdp);
  const done = await api('GET', `/v1/runs/${runId}?wait_s=60`);
  assert.equal(done.json.status, 'ok', done.text);
  assert.equal(done.json.stdout.trim(), 'file survives');
  assert.ok(done.json.attempts >= 2, `re-dispatched as a new attempt (attempts ${done.json.attempts})`);
  await page.close();
});

test('an event stream dropped mid-run reconnects with Last-Event-ID and loses no event', async (t) => {
  if (!need(t)) return;
  const chat = await newChat();
  const { page } = await openChat(chat);
  await kernelReady(page);
  const created = await api('POST', `/v1/chats/${chat.chat_id}/runs`, {
    code: 'import time\nt = time.time()\nwhile time.time() - t < 1.5:\n    pass\nprint("one")', origin: 'tool' });
  await page.waitForFunction((id) => window.cereaSession.current?.run_id === id, created.json.run_id, { timeout: 30_000 });
  const lastBefore = await page.evaluate(() => window.cereaSession.stream.lastEventId);
  // Drop the stream for 1.5 s; a second run is created while the page is disconnected.
  await page.evaluate(() => window.cereaSession.stream.reconnectNow(1500));
  const second = await api('POST', `/v1/chats/${chat.chat_id}/runs`, { code: 'print("two")', origin: 'tool' });
  const r1 = await api('GET', `/v1/runs/${created.json.run_id}?wait_s=60`);
  const r2 = await api('GET', `/v1/runs/${second.json.run_id}?wait_s=60`);
  assert.equal(r1.json.status, 'ok', r1.text);
  assert.equal(r1.json.attempts, 1, 'the reconnect inside the grace period did not re-dispatch the run');
  assert.equal(r2.json.status, 'ok', r2.text);
  assert.equal(r2.json.stdout.trim(), 'two');
  const s = await page.evaluate(() => ({ connects: window.cereaSession.stream.connects, last: window.cereaSession.stream.lastEventId }));
  assert.ok(s.connects >= 2, 'reconnected');
  assert.ok(Number(s.last) > Number(lastBefore), 'event ids moved on');
  await page.close();
});

test('left-out files say why; the chat page at phone width', async (t) => {
  if (!need(t)) return;
  const big = Buffer.alloc(21 * 1024 * 1024, 7);
  const chat = await newChat({ 'small.txt': Buffer.from('s'), 'huge.bin': big });
  const phone = await launch({ viewport: PHONE, isMobile: true });
  try {
    const { page } = await openChat(chat, phone.ctx);
    const chip = page.locator('.chip[data-name="huge.bin"]');
    await chip.waitFor();
    assert.match(await chip.textContent(), /not in the sandbox: .*20/i);
    await kernelReady(page);
    const created = await api('POST', `/v1/chats/${chat.chat_id}/runs`, { code: 'import os, time\nprint(sorted(os.listdir("/mnt/data")))\ntime.sleep(2)', origin: 'tool' });
    await page.locator(`.run-card[data-run-id="${created.json.run_id}"] .keep-open`).waitFor({ timeout: 30_000 });
    await screenshot(page, 'chat-phone-running');
    const r = await api('GET', `/v1/runs/${created.json.run_id}?wait_s=60`);
    assert.equal(r.json.stdout.trim(), "['small.txt']");
    await page.locator(`.run-card[data-run-id="${created.json.run_id}"][data-status=ok]`).waitFor();
    const overflow = await page.evaluate((w) => Math.max(document.documentElement.scrollWidth, window.innerWidth) - w, PHONE.width);
    assert.ok(overflow <= 1, `no horizontal scroll at phone width (overflow ${overflow}px)`);
    await screenshot(page, 'chat-phone');
    await page.close();
  } finally { await phone.close(); }
});

test('switching chats gives a fresh interpreter without the old chat\'s files', async (t) => {
  if (!need(t)) return;
  const a = await newChat({ 'only-in-a.txt': Buffer.from('A') });
  const b = await newChat({ 'only-in-b.txt': Buffer.from('B') });
  const { page } = await openChat(a);
  await kernelReady(page);
  const r1 = await runCode(a, 'import os\nfrom_a = 1\nprint(sorted(os.listdir("/mnt/data")))');
  assert.equal(r1.stdout.trim(), "['only-in-a.txt']");
  await page.evaluate(({ id, tok }) => window.cereaSession.switchChat(id, tok), { id: b.chat_id, tok: b.page_token });
  await page.waitForFunction(() => window.cereaSession.stream.state === 'open' && window.cereaSupervisor.state === 'ready');
  const r2 = await runCode(b, 'import os\nprint(sorted(os.listdir("/mnt/data")), "from_a" in globals())');
  assert.equal(r2.status, 'ok', JSON.stringify(r2));
  assert.equal(r2.stdout.trim(), "['only-in-b.txt'] False");
  // The old chat no longer has this page: its runs wait (queued) instead of running here.
  const r3 = await api('POST', `/v1/chats/${a.chat_id}/runs`, { code: 'print(1)', origin: 'tool', wait_s: 2 });
  assert.notEqual(r3.json.status, 'ok', 'a run of the old chat does not execute on this page');
  await page.close();
});

test('a figure redrawn under the same name shows as the next version of one artifact', async (t) => {
  if (!need(t)) return;
  const chat = await newChat();
  const { page } = await openChat(chat);
  await kernelReady(page);
  // A 1x1 PNG written as figure-1.png twice (matplotlib is not shipped offline; the naming and
  // versioning are what this checks).
  const code = (shade) => `import zlib, struct
def c(t, d): return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d) & 0xffffffff)
png = b'\\x89PNG\\r\\n\\x1a\\n' + c(b'IHDR', struct.pack('>IIBBBBB', 1, 1, 8, 0, 0, 0, 0)) + c(b'IDAT', zlib.compress(bytes([0, ${shade}]))) + c(b'IEND', b'')
open('/mnt/output/figure-1.png', 'wb').write(png)`;
  const r1 = await runCode(chat, code(10));
  const r2 = await runCode(chat, code(200));
  assert.equal(r1.files[0].name, 'figure-1.png');
  assert.equal(r2.files[0].name, 'figure-1.png');
  assert.equal(r2.files[0].version, r1.files[0].version + 1);
  const card = page.locator(`.run-card[data-run-id="${r2.run_id}"] .artifact[data-name="figure-1.png"]`);
  await card.waitFor();
  assert.match(await card.textContent(), new RegExp(`v${r2.files[0].version}`));
  await page.close();
});

test('a stalled download is skipped after 5 s with a note, and mounted on the next run', async (t) => {
  if (!need(t)) return;
  const chat = await newChat({ 'slow.csv': Buffer.from('finally,here\n') });
  const { page } = await openChat(chat);
  await kernelReady(page);
  let stall = true;
  await page.route('**/v1/files/**', async (route) => {
    if (stall) { await new Promise((r) => setTimeout(r, 8000)); }
    await route.continue().catch(() => {});
  });
  const t0 = Date.now();
  const r1 = await runCode(chat, 'import os\nprint(os.path.exists("/mnt/data/slow.csv"))');
  const waited = Date.now() - t0;
  assert.equal(r1.status, 'ok', JSON.stringify(r1));
  assert.equal(r1.stdout.trim(), 'False', 'the run went ahead without the stalled file');
  assert.ok(r1.notes.some((n) => /slow\.csv: download did not finish within 5 s/.test(n)), JSON.stringify(r1.notes));
  assert.ok(waited < 7500, `the run waited ${waited} ms for files (at most 5 s plus the run)`);
  stall = false;
  const r2 = await runCode(chat, 'print(open("/mnt/data/slow.csv").read().strip())');
  assert.equal(r2.stdout.trim(), 'finally,here');
  await page.close();
});

test('output files in subfolders and with spaces keep their relative names', async (t) => {
  if (!need(t)) return;
  const chat = await newChat();
  const { page } = await openChat(chat);
  await kernelReady(page);
  const r = await runCode(chat, `import os
os.makedirs('/mnt/output/plots/2026', exist_ok=True)
open('/mnt/output/plots/2026/a b.txt', 'w').write('nested')
open('/mnt/output/résumé final.txt', 'w').write('accents')`);
  assert.equal(r.status, 'ok', JSON.stringify(r));
  assert.deepEqual(r.files.map((f) => f.name).sort(), ['plots/2026/a b.txt', 'résumé final.txt']);
  for (const f of r.files) {
    const got = await fetch(`${orch.origin}/v1/files/${f.artifact_id}`, { headers: { Authorization: `Bearer ${chat.page_token}` } });
    assert.equal(await got.text(), f.name.startsWith('plots') ? 'nested' : 'accents');
  }
  // Files the chat made are mounted at their relative path for the next run.
  const r2 = await runCode(chat, `print(open('/mnt/data/plots/2026/a b.txt').read())`);
  assert.equal(r2.stdout.trim(), 'nested', JSON.stringify(r2));
  await page.close();
});

test('over TLS the chat page speaks HTTP/2 (ALPN h2), stream and run included', async (t) => {
  if (!need(t)) return;
  const { cert, key, dir } = selfSignedCert();
  const tls = await orchestrator({ args: ['--tls-cert', cert, '--tls-key', key], scheme: 'https' });
  if (tls.skip) { fs.rmSync(dir, { recursive: true, force: true }); t.skip(`TLS orchestrator unavailable: ${tls.skip}`); return; }
  const b = await launch({ ignoreHTTPSErrors: true });
  try {
    const post = (p, body) => new Promise((resolve, reject) => {
      const data = Buffer.from(JSON.stringify(body));
      const req = https.request(`${tls.origin}${p}`, { method: 'POST', rejectUnauthorized: false,
        headers: { Authorization: `Bearer ${tls.apiKey}`, 'Content-Type': 'application/json', 'Content-Length': data.length } }, (res) => {
        let s = ''; res.on('data', (d) => { s += d; }); res.on('end', () => resolve(JSON.parse(s)));
      });
      req.on('error', reject); req.end(data);
    });
    const chat = await post('/v1/chats', {});
    const page = await b.ctx.newPage();
    const protocols = new Set();
    const cdp = await page.context().newCDPSession(page);
    await cdp.send('Network.enable');
    cdp.on('Network.responseReceived', (e) => { if (e.response.url.includes('/v1/')) protocols.add(e.response.protocol); });
    await page.goto(`${tls.origin}/chat/${chat.chat_id}#token=${chat.page_token}`);
    await page.waitForFunction(() => window.cereaSession?.stream?.state === 'open' && window.cereaSupervisor.state === 'ready', null, { timeout: 90_000 });
    assert.equal(await page.evaluate(() => crossOriginIsolated), true);
    const run = await post(`/v1/chats/${chat.chat_id}/runs`, { code: 'print(6 * 7)', origin: 'tool', wait_s: 60 });
    assert.equal(run.status, 'ok', JSON.stringify(run));
    assert.equal(run.stdout.trim(), '42');
    assert.deepEqual([...protocols], ['h2'], `API calls over ${[...protocols]}`);
    await page.close();
  } finally {
    await b.close(); await tls.stop(); fs.rmSync(dir, { recursive: true, force: true });
  }
});

// ---- links that do not reach their chat (issue 20) ------------------------------------------------
for (const [what, link, why] of [
  ['a wrong page token', (c) => `/chat/${c.chat_id}#token=${c.chat_id}.${'0'.repeat(64)}`, /wrong or incomplete/],
  ['an unknown chat', () => `/chat/${'f'.repeat(32)}#token=${'f'.repeat(32)}.${'0'.repeat(64)}`, /./],
]) {
  test(`${what}: a clear page instead of Attach and Run, and no Python left loading`, async (t) => {
    if (!need(t)) return;
    const chat = await newChat();
    const page = await browser.ctx.newPage();
    const errors = watchConsole(page);
    await page.goto(`${orch.origin}${link(chat)}`);
    const box = page.locator('[data-testid=bad-link]');
    await box.waitFor({ timeout: 10_000 });
    assert.match(await box.textContent(), /This chat link does not work/);
    assert.match(await box.textContent(), why);
    for (const sel of ['label[for=attach-input]', '#composer', '#chat-title', '#runtime'])
      assert.equal(await page.locator(sel).isVisible(), false, `${sel}: nothing offered that cannot work`);
    assert.equal(await page.evaluate(() => window.cereaSupervisor.state), 'disposed', 'the runtime it started loading is stopped');
    // A worker terminated mid-compile (boot.js starts it before this page's bundle runs) leaves
    // page.workers() once Chromium has torn it down: allowed a few seconds on a loaded machine.
    for (let i = 0; i < 50 && page.workers().length > 0; i++) await page.waitForTimeout(100);
    assert.equal(page.workers().length, 0, 'no kernel worker left');
    assert.deepEqual(errors.filter((e) => /pageerror/.test(e)), []);
    await screenshot(page, `chat-bad-link-${what.replace(/\W+/g, '-')}`);
    await page.close();
  });
}

// No page token and no one signed in: the chat's owner signs in first, and comes back to it.
test('no page token: the sign-in page, then back to the chat', async (t) => {
  if (!need(t)) return;
  const chat = await newChat();
  const page = await browser.ctx.newPage();
  const errors = watchConsole(page);
  await page.goto(`${orch.origin}/chat/${chat.chat_id}`);
  await page.waitForURL(`${orch.origin}/signin?next=${encodeURIComponent(`/chat/${chat.chat_id}`)}`, { timeout: 10_000 });
  await page.locator('#signin #name').waitFor();
  assert.equal(page.workers().length, 0, 'no kernel worker left');
  assert.deepEqual(errors.filter((e) => /pageerror/.test(e)), []);
  await page.close();
});

// ---- uploads (issue 20) ----------------------------------------------------------------------------
/** Drop `files` ([name, size]) on the chat page's drop zone; the bytes are made in the page. */
async function dropFiles(page, files) {
  await page.evaluate((list) => {
    const dt = new DataTransfer();
    for (const [name, size] of list) dt.items.add(new File([new Uint8Array(size)], name));
    document.getElementById('dropzone').dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
  }, files);
}

test('a file over the upload limit is refused at once, before a byte is sent', async (t) => {
  if (!need(t)) return;
  const chat = await newChat();
  const { page } = await openChat(chat);
  const posts = [];
  page.on('request', (r) => { if (r.method() === 'POST' && /\/files\?/.test(r.url())) posts.push(r.url()); });
  const t0 = Date.now();
  await dropFiles(page, [['big.bin', 60 * 1024 * 1024]]);
  await page.locator('#attach-status', { hasText: 'over the 50.0 MB upload limit' }).waitFor({ timeout: 5000 });
  const ms = Date.now() - t0;
  assert.ok(ms < 3000, `said at once (${ms} ms)`);
  assert.match(await page.locator('#attach-status').textContent(), /big\.bin is 60\.0 MB: over the 50\.0 MB upload limit of this deployment, so it was not sent/);
  assert.deepEqual(posts, [], 'no upload was started');
  await screenshot(page, 'chat-upload-too-large');
  await page.close();
});

test('a large upload shows its progress', async (t) => {
  if (!need(t)) return;
  const chat = await newChat();
  const { page } = await openChat(chat);
  // 4 MB at 1 MB/s: about four seconds of upload, so the bar is seen moving.
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Network.enable');
  await cdp.send('Network.emulateNetworkConditions', { offline: false, latency: 0, downloadThroughput: -1, uploadThroughput: 1024 * 1024 });
  await page.evaluate(() => {
    window.seen = [];
    const bar = document.getElementById('attach-progress');
    new MutationObserver(() => window.seen.push({ hidden: bar.hidden, value: bar.value, max: bar.max,
      text: document.getElementById('attach-status').textContent })).observe(bar, { attributes: true });
  });
  await dropFiles(page, [['four.bin', 4 * 1024 * 1024]]);
  await page.locator('#attach-status', { hasText: /Uploading four\.bin: [\d.]+ MB of 4\.0 MB/ }).waitFor({ timeout: 10_000 });
  await screenshot(page, 'chat-upload-progress');
  await page.locator('#attach-status', { hasText: 'four.bin is at /mnt/data/four.bin' }).waitFor({ timeout: 30_000 });
  await cdp.send('Network.emulateNetworkConditions', { offline: false, latency: 0, downloadThroughput: -1, uploadThroughput: -1 });
  const seen = await page.evaluate(() => window.seen);
  const moving = seen.filter((s) => !s.hidden && s.value > 0 && s.value < s.max);
  assert.ok(moving.length >= 1, `the bar showed part of the bytes sent: ${JSON.stringify(seen.slice(0, 8))}`);
  assert.ok(seen.some((s) => /Uploading four\.bin: [\d.]+ MB of 4\.0 MB/.test(s.text)), JSON.stringify(seen.map((s) => s.text).slice(0, 8)));
  assert.equal(await page.locator('#attach-progress').isHidden(), true, 'hidden once done');
  await page.locator('.chip[data-name="four.bin"]').waitFor();
  await page.close();
});
