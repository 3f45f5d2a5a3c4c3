// accounts.test.mjs -- people and their chats in the web app, in Chromium against the real
// orchestrator: the first start's administrator signs in with the printed password (a wrong one
// first, said plainly), chooses their own, adds a person on the admin page (the one-time password
// shown once), who signs in in another browser context; neither sees the other's chats (the list,
// and the other's chat page answers "no such chat"); the sidebar marks the chat on screen, New chat
// opens the new chat at once, rename in place, delete after a confirm (Cancel keeps it); the
// "Connect an assistant" control's key is accepted by the MCP SDK and runs code in that chat's
// page; sign-out, then the back button shows nothing private; a phone (390×844) with the chat list
// as a drawer; the PyPI setting kept per person by the server; the API key appears in no page, no
// storage and no URL of the whole walk.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { launch, orchestrator, backend, screenshot, watchConsole, firstAdminPassword, signIn, DESKTOP, PHONE } from './harness.mjs';

let orch, skipReason = null, api;
const seen = { urls: [], pages: [], storage: [] }; // everything the walk showed, searched for the API key

before(async () => {
  orch = await orchestrator();
  if (orch.skip) { skipReason = orch.skip; return; }
  api = backend(orch.origin, orch.apiKey);
  const probe = await fetch(`${orch.origin}/v1/me`);
  if (probe.status === 404) { await orch.stop(); skipReason = 'this orchestrator has no accounts (GET /v1/me 404): the server side of issue 32'; }
});
after(async () => { if (orch && !orch.skip && !skipReason) await orch.stop(); });
const need = (t) => { if (skipReason) { t.skip(skipReason); return false; } return true; };

/** Records what a page holds now: its URL, its document, its storage (searched for the API key at the end). */
async function record(page) {
  seen.urls.push(page.url());
  seen.pages.push(await page.content());
  seen.storage.push(await page.evaluate(() => JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage })));
}
function watchUrls(page) { page.on('request', (r) => seen.urls.push(r.url())); page.on('framenavigated', (f) => seen.urls.push(f.url())); }

const listed = (page) => page.$$eval('#chat-list li[data-chat-id]', (lis) => lis.map((li) => li.dataset.chatId));

test('first start → sign in → change the password → add a person → each sees only their own chats → sidebar, rename, delete → connect an assistant → sign out and back', async (t) => {
  if (!need(t)) return;
  const A = await launch({ viewport: DESKTOP });
  const B = await launch({ viewport: DESKTOP });
  try {
    // The administrator, at first start.
    const pa = await A.ctx.newPage();
    const errorsA = watchConsole(pa);
    watchUrls(pa);
    await pa.goto(`${orch.origin}/admin`);
    await pa.waitForURL(/\/signin\?next=%2Fadmin$/);
    await pa.fill('#name', 'admin');
    await pa.fill('#password', 'not-the-password');
    await pa.click('#signin-go');
    await pa.locator('#signin-error[data-code=signin_wrong]').waitFor({ timeout: 10_000 });
    assert.match(await pa.textContent('#signin-error'), /do not match/);
    const printed = await firstAdminPassword(orch);
    await pa.fill('#password', printed);
    await pa.click('#signin-go');
    await pa.locator('#change:not([hidden])').waitFor({ timeout: 10_000 });
    assert.equal(await pa.getAttribute('#change-why', 'data-code'), 'password_must_change');
    await pa.fill('#new1', 'admin-own-password-1');
    await pa.fill('#new2', 'admin-own-password-2');
    await pa.click('#change-go');
    await pa.locator('#change-error[data-code=password_mismatch]').waitFor();
    await pa.fill('#new2', 'admin-own-password-1');
    await pa.click('#change-go');
    await pa.waitForURL(`${orch.origin}/admin`, { timeout: 10_000 });
    const signinAgain = await fetch(`${orch.origin}/v1/signin`, { method: 'POST', headers: { 'Content-Type': 'application/json', Origin: orch.origin }, body: JSON.stringify({ name: 'admin', password: printed }) });
    assert.equal(signinAgain.status, 401, 'the printed password no longer signs in');

    // The admin page adds a person: the one-time password is shown once.
    await pa.fill('#person-name', 'bea');
    await pa.click('#add-person');
    const otp = pa.locator('[data-testid=one-time-password]');
    await otp.waitFor({ timeout: 10_000 });
    const beaPassword = (await otp.textContent()).trim();
    assert.ok(beaPassword.length >= 8, beaPassword);
    await pa.locator('#people tbody tr[data-name=bea]').waitFor();
    await screenshot(pa, 'accounts-admin-people');
    await record(pa);
    await pa.reload();
    await pa.locator('#people tbody tr[data-name=bea]').waitFor();
    assert.equal(await pa.locator('[data-testid=one-time-password]').count(), 0, 'shown only once');

    // The administrator's own chat, from the sidebar: New chat opens it at once.
    await pa.goto(`${orch.origin}/`);
    await pa.click('#new-chat');
    await pa.waitForURL(/\/chat\/[0-9a-f]+$/, { timeout: 15_000 });
    const adminChat = decodeURIComponent(new URL(pa.url()).pathname.split('/')[2]);
    await pa.waitForFunction(() => window.cereaSession?.stream?.state === 'open', null, { timeout: 20_000 });
    assert.equal(await pa.getAttribute(`#chat-list li[data-chat-id="${adminChat}"] a`, 'aria-current'), 'page');
    assert.doesNotMatch(pa.url(), /token=/, 'the owner\'s chat page keeps its token in memory, not in the address');
    await record(pa);

    // The person signs in in another context: their own password first.
    const pb = await B.ctx.newPage();
    const errorsB = watchConsole(pb);
    watchUrls(pb);
    await signIn(pb, orch.origin, { name: 'bea', password: beaPassword, newPassword: 'bea-own-password' });
    await pb.locator('#chats-note[data-code=chats_empty]').waitFor({ timeout: 10_000 });
    assert.deepEqual(await listed(pb), [], 'bea does not see the administrator\'s chat');
    // The administrator's chat is no chat of hers.
    await pb.goto(`${orch.origin}/chat/${adminChat}`);
    await pb.locator('[data-testid=bad-link] [data-code=link_no_chat]').waitFor({ timeout: 15_000 });

    // Two chats of hers: each opens at once, the one on screen marked.
    await pb.goto(`${orch.origin}/`);
    await pb.click('#new-chat');
    await pb.waitForURL(/\/chat\/[0-9a-f]+$/, { timeout: 15_000 });
    const first = decodeURIComponent(new URL(pb.url()).pathname.split('/')[2]);
    await pb.locator(`#chat-list li[data-chat-id="${first}"]`).waitFor();
    await pb.click('#new-chat');
    await pb.waitForURL((u) => /\/chat\/[0-9a-f]+$/.test(u.pathname) && !u.pathname.endsWith(first), { timeout: 15_000 });
    const second = decodeURIComponent(new URL(pb.url()).pathname.split('/')[2]);
    await pb.waitForFunction(([a, b]) => [...document.querySelectorAll('#chat-list li[data-chat-id]')].map((li) => li.dataset.chatId).join() === [b, a].join(), [first, second], { timeout: 10_000 });
    assert.equal(await pb.getAttribute(`#chat-list li[data-chat-id="${second}"] a`, 'aria-current'), 'page');
    assert.equal(await pb.getAttribute(`#chat-list li[data-chat-id="${first}"] a`, 'aria-current'), null);

    // Rename the first in place: Escape gives up, Enter saves on the server.
    const row = (id) => pb.locator(`#chat-list li[data-chat-id="${id}"]`);
    await row(first).locator('[data-action=rename]').click();
    await pb.keyboard.type('Thrown away');
    await pb.keyboard.press('Escape');
    await row(first).locator('a').waitFor();
    assert.doesNotMatch(await row(first).textContent(), /Thrown away/);
    await row(first).locator('[data-action=rename]').click();
    await pb.keyboard.press('Control+a');
    await pb.keyboard.type('Bea’s numbers');
    await pb.keyboard.press('Enter');
    await pb.waitForFunction((id) => document.querySelector(`#chat-list li[data-chat-id="${id}"] a`)?.textContent === 'Bea’s numbers', first, { timeout: 10_000 });
    assert.equal((await api('GET', `/v1/chats/${first}`)).json.title, 'Bea’s numbers');

    // Delete the second (the one on screen) after a confirm; Cancel keeps it.
    await row(second).locator('[data-action=delete]').click();
    await pb.locator('#confirm-delete[open]').waitFor();
    assert.equal(await pb.getAttribute('#confirm-delete p', 'data-code'), 'chat_delete_ask');
    await pb.click('#confirm-delete button[value=cancel]');
    assert.equal((await api('GET', `/v1/chats/${second}`)).status, 200, 'Cancel deleted nothing');
    await row(second).locator('[data-action=delete]').click();
    await pb.click('[data-testid=confirm-delete]');
    await pb.waitForURL(`${orch.origin}/`, { timeout: 10_000 });
    await pb.waitForFunction((id) => [...document.querySelectorAll('#chat-list li[data-chat-id]')].map((li) => li.dataset.chatId).join() === id, first, { timeout: 10_000 });
    assert.equal((await api('GET', `/v1/chats/${second}`)).status, 404, 'the deleted chat is gone from the server');

    // The administrator's list holds only the administrator's chat.
    await pa.goto(`${orch.origin}/`);
    await pa.locator(`#chat-list li[data-chat-id="${adminChat}"]`).waitFor({ timeout: 10_000 });
    assert.deepEqual(await listed(pa), [adminChat]);

    // Connect an assistant to her chat: the key the control shows is taken by the MCP SDK, and its
    // run_python runs in the open page.
    await pb.click(`#chat-list li[data-chat-id="${first}"] a`);
    await pb.waitForURL(new RegExp(`/chat/${first}$`));
    await pb.waitForFunction(() => window.cereaSupervisor?.state === 'ready' && window.cereaSession?.stream?.state === 'open', null, { timeout: 90_000 });
    await pb.click('#connect');
    await pb.locator('#chat-key').waitFor({ timeout: 10_000 });
    const key = await pb.inputValue('#chat-key');
    const mcpUrl = await pb.inputValue('#mcp-url');
    assert.equal(mcpUrl, `${orch.origin}/mcp`);
    assert.match(key, new RegExp(`^mcp\\.${first}\\.`));
    await pb.click('#connect-dialog summary:has-text("LibreChat")');
    assert.match(await pb.inputValue('#librechat-yaml'), new RegExp(`url: ${orch.origin}/mcp`));
    await screenshot(pb, 'accounts-connect');
    await record(pb);
    const transport = new StreamableHTTPClientTransport(new URL(mcpUrl), { requestInit: { headers: { authorization: `Bearer ${key}` } } });
    const client = new Client({ name: 'cerea-e2e-connect', version: '1.0.0' });
    await client.connect(transport);
    try {
      const tools = await client.listTools();
      assert.ok(tools.tools.some((x) => x.name === 'run_python'), JSON.stringify(tools.tools.map((x) => x.name)));
      const r = await client.callTool({ name: 'run_python', arguments: { code: 'print(6 * 7)' } }, undefined, { timeout: 90_000 });
      assert.notEqual(r.isError, true, JSON.stringify(r));
      assert.match(r.content.find((c) => c.type === 'text').text, /42/);
    } finally { await client.close(); }
    await pb.keyboard.press('Escape');

    // Sign out; the back button shows nothing private.
    await pb.click('#sign-out');
    await pb.waitForURL(/\/signin/, { timeout: 10_000 });
    assert.equal((await pb.evaluate(() => fetch('/v1/me').then((r) => r.status))), 401);
    await pb.goBack().catch(() => {}); // to her chat's page, which sends her to the sign-in page
    await pb.waitForURL(`${orch.origin}/signin?next=${encodeURIComponent(`/chat/${first}`)}`, { timeout: 10_000 });
    assert.equal(await pb.locator('#chat-list li[data-chat-id]').count(), 0, 'no chat list after the back button');
    assert.doesNotMatch(await pb.content(), /Bea’s numbers/, 'no chat title after the back button');
    await record(pb);

    for (const errors of [errorsA, errorsB]) assert.deepEqual(errors.filter((e) => /^pageerror/.test(e)), [], 'no uncaught errors');
  } finally { await A.close(); await B.close(); }
});

test('a phone (390×844): the chat list is a drawer over the chat', async (t) => {
  if (!need(t)) return;
  const { password } = (await api('POST', '/v1/admin/people', { name: 'phone-person' })).json;
  const P = await launch({ viewport: PHONE, isMobile: true });
  try {
    const page = await P.ctx.newPage();
    watchUrls(page);
    await signIn(page, orch.origin, { name: 'phone-person', password, newPassword: 'phone-own-password' });
    await page.click('#open-chats');
    await page.locator('#chats.open').waitFor();
    await page.click('#new-chat');
    await page.waitForURL(/\/chat\/[0-9a-f]+$/, { timeout: 15_000 });
    const chat = decodeURIComponent(new URL(page.url()).pathname.split('/')[2]);
    // Closed at first: the chat has the screen.
    const side = page.locator('#chats');
    assert.equal(await side.isVisible(), false, 'the drawer starts closed');
    await page.click('#open-chats');
    await page.locator(`#chats.open li[data-chat-id="${chat}"] a[aria-current=page]`).waitFor();
    await page.waitForFunction(() => { const r = document.getElementById('chats').getBoundingClientRect(); return r.left >= -1 && r.width <= 390; });
    const box = await side.boundingBox();
    assert.ok(box.x >= -1 && box.width <= PHONE.width && box.height >= PHONE.height - 2, JSON.stringify(box));
    await screenshot(page, 'accounts-phone-drawer');
    await page.keyboard.press('Escape');
    await page.waitForFunction(() => !document.getElementById('chats').classList.contains('open'));
    assert.equal(await page.getAttribute('#open-chats', 'aria-expanded'), 'false');
    const overflow = await page.evaluate((w) => Math.max(document.documentElement.scrollWidth, window.innerWidth) - w, PHONE.width);
    assert.ok(overflow <= 1, `no horizontal scroll (overflow ${overflow}px)`);
    await record(page);

    // Signed out elsewhere, then this page is shown again from the back/forward cache (Chromium
    // does not keep these pages there, so the cache's pageshow is dispatched as it would come): it
    // asks /v1/me again, shows nothing of the chat list, and goes to the sign-in page.
    assert.equal(await page.evaluate(() => fetch('/v1/signout', { method: 'POST' }).then((r) => r.status)), 200);
    await page.evaluate(() => dispatchEvent(new PageTransitionEvent('pageshow', { persisted: true })));
    await page.waitForURL(`${orch.origin}/signin?next=${encodeURIComponent(`/chat/${chat}`)}`, { timeout: 10_000, waitUntil: 'commit' });
  } finally { await P.close(); }
});

test('sign-in: too many wrong passwords say how long to wait (the server\'s Retry-After), then the form works again', async (t) => {
  if (!need(t)) return;
  const P = await launch({ viewport: DESKTOP });
  try {
    const page = await P.ctx.newPage();
    watchUrls(page);
    await page.goto(`${orch.origin}/signin`);
    const err = page.locator('#signin-error');
    let code = null;
    for (let i = 0; i < 10 && code !== 'signin_throttled'; i++) {
      await page.locator('#signin-go:not([disabled])').waitFor({ timeout: 15_000 });
      await page.fill('#name', 'nobody-here');
      await page.fill('#password', `wrong-${i}`);
      await page.evaluate(() => { delete document.getElementById('signin-error').dataset.code; });
      await page.click('#signin-go');
      await page.waitForFunction(() => document.getElementById('signin-error').dataset.code, null, { timeout: 15_000 });
      code = await err.getAttribute('data-code');
      assert.ok(['signin_wrong', 'signin_throttled'].includes(code), code);
    }
    assert.equal(code, 'signin_throttled', 'throttled within 10 attempts (5 per name)');
    assert.match(await err.textContent(), /^Too many attempts: try again in \d+ seconds?\.$/);
    assert.equal(await page.isDisabled('#signin-go'), true, 'no attempt while the wait runs');
    await page.locator('#signin-go:not([disabled])').waitFor({ timeout: 15_000 });
    assert.equal(await err.textContent(), '', 'the wait said, then cleared');
    await screenshot(page, 'accounts-signin');
  } finally { await P.close(); }
});

test('the PyPI setting is the person\'s: read from GET /v1/me, saved with PATCH /v1/me/settings', async (t) => {
  if (!need(t)) return;
  const cfg = (await api('GET', '/v1/config')).json;
  const { password } = (await api('POST', '/v1/admin/people', { name: 'pypi-person' })).json;
  const P = await launch({ viewport: DESKTOP });
  try {
    const page = await P.ctx.newPage();
    watchUrls(page);
    await signIn(page, orch.origin, { name: 'pypi-person', password, newPassword: 'pypi-own-password' });
    const me = () => page.evaluate(() => fetch('/v1/me').then((r) => r.json()));
    assert.equal((await me()).settings.pypi, true, 'on by default');
    await page.locator('#open-settings:not([disabled])').waitFor();
    await page.click('#open-settings');
    if (cfg.pypi_available) {
      assert.equal(await page.isChecked('#pypi'), true);
      await page.uncheck('#pypi');
      await page.waitForFunction(() => fetch('/v1/me').then((r) => r.json()).then((m) => m.settings.pypi === false), null, { timeout: 10_000 });
    } else {
      // No micropip here: the toggle cannot work and is off; the person's setting is still theirs.
      assert.equal(await page.isDisabled('#pypi'), true);
      const r = await page.evaluate(() => fetch('/v1/me/settings', { method: 'PATCH', headers: { 'Content-Type': 'application/json' }, body: '{"pypi":false}' }).then((x) => x.status));
      assert.equal(r, 200);
    }
    assert.equal((await me()).settings.pypi, false);
    // Another browser of the same person starts from the server's value (boot.js's hint follows it).
    const Q = await launch({ viewport: DESKTOP });
    try {
      const q = await Q.ctx.newPage();
      await signIn(q, orch.origin, { name: 'pypi-person', password: 'pypi-own-password' });
      await q.waitForFunction(() => JSON.parse(localStorage.getItem('cerea.settings') || '{}').pypi === false, null, { timeout: 10_000 });
      await q.locator('#open-settings:not([disabled])').waitFor();
      await q.click('#open-settings');
      assert.equal(await q.isChecked('#pypi'), false);
    } finally { await Q.close(); }
    await record(page);
  } finally { await P.close(); }
});

test('the API key appears in no page, no storage and no URL of the walk', (t) => {
  if (!need(t)) return;
  assert.ok(seen.pages.length >= 5 && seen.urls.length > 20, `the walk was recorded (${seen.pages.length} pages, ${seen.urls.length} URLs)`);
  for (const [what, list] of Object.entries(seen)) {
    for (const x of list) assert.ok(!x.includes(orch.apiKey), `the API key in a ${what} entry: ${x.slice(0, 200)}`);
  }
});
