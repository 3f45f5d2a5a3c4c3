// chat-list.test.mjs -- the app's chat list against the real orchestrator, in Chromium: a chat
// created from the list and renamed there is renamed on the server (PATCH /v1/chats/{chat} with
// the page token this browser holds), the new name survives a reload even when this browser's own
// copy is stale (the server's titles win), the chat page shows it, and a rename the server refuses
// says why and changes nothing.  The chat page takes its title from the server
// (GET /v1/chats/{chat} with its page token): a chat renamed through the API shows its name in a
// fresh browser profile that holds no copy, the copy kept in this browser is shown only when that
// call fails, and a rename from the chat list in another tab shows on the open chat page without a
// reload.  A chat created through the API (or the CLI) is listed as "elsewhere" and opens: the
// page link the operator key mints (POST /v1/chats/{chat}/page_link) gives this browser its token,
// kept so the list then opens it like its own; /chat/{id} without a token opens the same way.
// Run history after a reload is checked in chat.test.mjs.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, orchestrator, backend, watchConsole, newChatInApp, DESKTOP } from './harness.mjs';

const titleIs = (page, want, source) => page.waitForFunction(([w, s]) => {
  const el = document.getElementById('chat-title');
  return el?.textContent === w && el.dataset.source === s;
}, [want, source], { timeout: 10_000 });

let orch, skipReason = null, api, browser;

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
const need = (t) => { if (skipReason) { t.skip(`orchestrator unavailable: ${skipReason}`); return false; } return true; };

async function renameInUi(page, chatId, answer) {
  page.once('dialog', (d) => d.accept(answer));
  await page.click(`#chat-list li[data-chat-id="${chatId}"] button`);
}

test('a rename from the chat list is stored on the server and survives a reload', async (t) => {
  if (!need(t)) return;
  const page = await browser.ctx.newPage();
  const errors = watchConsole(page);
  await newChatInApp(page, orch);
  const item = page.locator('#chat-list li[data-chat-id]').first();
  await item.waitFor();
  const chatId = await item.getAttribute('data-chat-id');
  const link = page.locator(`#chat-list li[data-chat-id="${chatId}"] a`);

  await renameInUi(page, chatId, '  Quarterly numbers  ');
  await page.waitForFunction((id) => document.querySelector(`#chat-list li[data-chat-id="${id}"] a`)?.textContent === 'Quarterly numbers', chatId, { timeout: 10_000 });
  const listed = (await api('GET', '/v1/chats')).json.chats.find((c) => c.chat_id === chatId);
  assert.equal(listed?.title, 'Quarterly numbers', 'the server holds the new title');

  // This browser's copy goes stale (another device renamed it): the reload shows the server's.
  await page.evaluate((id) => {
    const chats = JSON.parse(localStorage.getItem('cerea.chats'));
    chats.find((c) => c.chat_id === id).title = 'stale local name';
    localStorage.setItem('cerea.chats', JSON.stringify(chats));
  }, chatId);
  await page.reload();
  await page.waitForFunction((id) => document.querySelector(`#chat-list li[data-chat-id="${id}"] a`)?.textContent === 'Quarterly numbers', chatId, { timeout: 10_000 });

  // A name the server refuses (over 200 characters) is reported and changes nothing.
  await renameInUi(page, chatId, 'x'.repeat(201));
  await page.waitForFunction(() => /Could not rename the chat: 400/.test(document.getElementById('chats-note').textContent), null, { timeout: 10_000 });
  assert.equal(await link.textContent(), 'Quarterly numbers');
  assert.equal((await api('GET', '/v1/chats')).json.chats.find((c) => c.chat_id === chatId).title, 'Quarterly numbers');

  // The chat page shows the name.
  await link.click();
  await page.waitForURL(/\/chat\//);
  await page.waitForFunction(() => document.getElementById('chat-title')?.textContent === 'Quarterly numbers', null, { timeout: 10_000 });
  // The refused PATCH is the only failed chat-list call (a presence 409 while the chat page's
  // stream connects is the page protocol's, as in app.test.mjs).
  const failed = errors.filter((e) => /^http /.test(e) && !/^http 409 POST \/v1\/chats\/[^/]+\/presence$/.test(e));
  assert.deepEqual(failed, [`http 400 PATCH /v1/chats/${chatId}`]);
  assert.deepEqual(errors.filter((e) => /^pageerror/.test(e)), [], 'no uncaught errors');
  await page.close();
});

test('the chat page shows the server\'s title in a fresh profile, the stored copy only when the call fails, and a rename from another tab', async (t) => {
  if (!need(t)) return;
  const created = await api('POST', '/v1/chats', { title: 'Created name' });
  assert.equal(created.status, 201);
  const { chat_id: chatId, page_token: token } = created.json;
  const renamed = await api('PATCH', `/v1/chats/${chatId}`, { title: 'Renamed through the API' });
  assert.equal(renamed.status, 200, renamed.text);

  const fresh = await launch({ viewport: DESKTOP });
  try {
    const page = await fresh.ctx.newPage();
    const errors = watchConsole(page);
    const chatUrl = `${orch.origin}/chat/${chatId}#token=${encodeURIComponent(token)}`;
    await page.goto(chatUrl);
    await titleIs(page, 'Renamed through the API', 'server');
    assert.equal(await page.evaluate(() => localStorage.getItem('cerea.chats')), null, 'this profile holds no copy of the chat list');
    assert.equal(await page.title(), 'Renamed through the API — Cerea sandbox');

    // The call fails (the server answers 503): the copy kept in this browser is shown.
    await page.evaluate(([id, tok]) => localStorage.setItem('cerea.chats', JSON.stringify([{ chat_id: id, page_token: tok, title: 'Kept in this browser' }])), [chatId, token]);
    const only = new RegExp(`/v1/chats/${chatId}$`);
    await page.route(only, (r) => (r.request().method() === 'GET' ? r.fulfill({ status: 503, body: '{}' }) : r.fallback()));
    await page.reload();
    await titleIs(page, 'Kept in this browser', 'local');
    await page.unroute(only);
    await page.reload();
    await titleIs(page, 'Renamed through the API', 'server');

    // A rename from the chat list in a second tab (PATCH with the page token kept here) shows on the
    // open chat page without a reload, and the server holds it.
    const list = await fresh.ctx.newPage();
    await list.goto(`${orch.origin}/`);
    await list.locator(`#chat-list li[data-chat-id="${chatId}"] a`).waitFor();
    await renameInUi(list, chatId, 'Renamed in the other tab');
    await titleIs(page, 'Renamed in the other tab', 'server');
    assert.equal((await api('GET', `/v1/chats/${chatId}`)).json.title, 'Renamed in the other tab');
    await list.close();

    const failed = errors.filter((e) => /^http /.test(e) && !/^http 409 POST \/v1\/chats\/[^/]+\/presence$/.test(e));
    assert.deepEqual(failed, [`http 503 GET /v1/chats/${chatId}`], 'only the refused title read failed');
    assert.deepEqual(errors.filter((e) => /^pageerror/.test(e)), [], 'no uncaught errors');
    await page.close();
  } finally {
    await fresh.close();
  }
});

test('a chat created through the API opens from the list (a page link minted with the operator key), and /chat/{id} without a token too', async (t) => {
  if (!need(t)) return;
  const made = await api('POST', '/v1/chats', { title: 'Made by the API' });
  assert.equal(made.status, 201, made.text);
  const chatId = made.json.chat_id;
  const probe = await api('POST', `/v1/chats/${chatId}/page_link`, {});
  if (probe.status === 404) {   // the chat exists: the route is what is missing
    t.skip('this orchestrator cannot mint page links (POST /v1/chats/{chat}/page_link 404): waits for the orchestrator side of issue 18');
    return;
  }
  assert.equal(probe.status, 200, probe.text);
  assert.match(probe.json.url, new RegExp(`/chat/${chatId}#token=`));
  const fresh = await launch({ viewport: DESKTOP });
  try {
    const page = await fresh.ctx.newPage();
    const errors = watchConsole(page);
    await page.goto(`${orch.origin}/`);
    await page.click('#open-settings');
    await page.fill('#apikey', orch.apiKey);
    await page.locator('#apikey').dispatchEvent('change');
    await page.click('#settings button[value=ok]');
    const item = page.locator(`#chat-list li[data-chat-id="${chatId}"][data-elsewhere]`);
    await item.waitFor({ timeout: 10_000 });
    assert.match(await item.textContent(), /Made by the API.*elsewhere/);
    await item.locator('a').click();
    await page.waitForURL(new RegExp(`/chat/${chatId}#token=`));
    await page.waitForFunction(() => window.cereaSession?.stream?.state === 'open', null, { timeout: 20_000 });
    await titleIs(page, 'Made by the API', 'server');
    // Kept in this browser: the list now opens it like its own.
    await page.goto(`${orch.origin}/`);
    await page.locator(`#chat-list li[data-chat-id="${chatId}"]:not([data-elsewhere]) a[href*="#token="]`).waitFor({ timeout: 10_000 });
    // Another chat of the API, opened at /chat/{id} with no token: the operator key mints one.
    const other = (await api('POST', '/v1/chats', { title: 'No token in the link' })).json.chat_id;
    await page.goto(`${orch.origin}/chat/${other}`);
    await page.waitForURL(new RegExp(`/chat/${other}#token=`), { timeout: 10_000 });
    await page.waitForFunction(() => window.cereaSession?.stream?.state === 'open', null, { timeout: 20_000 });
    await titleIs(page, 'No token in the link', 'server');
    assert.deepEqual(errors.filter((e) => /^pageerror/.test(e)), [], 'no uncaught errors');
    await page.close();
  } finally {
    await fresh.close();
  }
});
