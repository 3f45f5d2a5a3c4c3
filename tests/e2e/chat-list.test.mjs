// chat-list.test.mjs -- the signed-in person's chat list against the real orchestrator, in
// Chromium: a chat renamed in place in the list is renamed on the server (PATCH /v1/chats/{chat}
// with the session), the new name survives a reload and shows on the chat page at once, and a
// rename the server refuses says why and changes nothing.  The chat page takes its title from the
// server (GET /v1/chats/{chat} with its page token): a chat renamed through the API shows its name
// in a fresh browser profile opened from its page link (which keeps nothing in the browser's
// storage), the page keeps working when that call fails, and a rename from the list in another
// tab shows on the open chat page without a reload.  A chat made through the API for a person
// (`owner`) is in their list and opens at /chat/{id} with the session alone; a backend chat with
// no owner is in nobody's list, and its page says there is no such chat.
// Run history after a reload is checked in chat.test.mjs.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, orchestrator, backend, watchConsole, newChatInApp, signInAdmin, DESKTOP } from './harness.mjs';

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
  await page.click(`#chat-list li[data-chat-id="${chatId}"] [data-action=rename]`);
  const input = page.locator(`#chat-list li[data-chat-id="${chatId}"] input.rename`);
  await input.fill(answer);
  await input.press('Enter');
}
const linkText = (page, id, want) => page.waitForFunction(([i, w]) => document.querySelector(`#chat-list li[data-chat-id="${i}"] a`)?.textContent === w, [id, want], { timeout: 10_000 });
const chatOf = (page) => decodeURIComponent(new URL(page.url()).pathname.split('/')[2]);
const unexpected = (errors) => errors.filter((e) => /^http /.test(e) && !/^http 409 POST \/v1\/chats\/[^/]+\/presence$/.test(e));

test('a rename in the chat list is stored on the server, survives a reload and shows on the chat page; a refused one changes nothing', async (t) => {
  if (!need(t)) return;
  const page = await browser.ctx.newPage();
  await newChatInApp(page, orch);
  const errors = watchConsole(page);
  const chatId = chatOf(page);
  await page.locator(`#chat-list li[data-chat-id="${chatId}"] a[aria-current=page]`).waitFor({ timeout: 10_000 });

  await renameInUi(page, chatId, '  Quarterly numbers  ');
  await linkText(page, chatId, 'Quarterly numbers');
  await titleIs(page, 'Quarterly numbers', 'server'); // the chat on screen follows at once
  const listed = (await api('GET', `/v1/chats/${chatId}`)).json;
  assert.equal(listed?.title, 'Quarterly numbers', 'the server holds the new title');
  await page.reload();
  await linkText(page, chatId, 'Quarterly numbers');

  // A name the server refuses (over 200 characters) is reported and changes nothing.
  await renameInUi(page, chatId, 'x'.repeat(201));
  await page.waitForFunction(() => /Could not rename the chat: 400/.test(document.getElementById('chats-note').textContent), null, { timeout: 10_000 });
  assert.equal(await page.getAttribute('#chats-note', 'data-code'), 'chat_not_renamed');
  await linkText(page, chatId, 'Quarterly numbers');
  assert.equal((await api('GET', `/v1/chats/${chatId}`)).json.title, 'Quarterly numbers');
  assert.deepEqual(unexpected(errors), [`http 400 PATCH /v1/chats/${chatId}`], 'the refused PATCH is the only failed call');
  assert.deepEqual(errors.filter((e) => /^pageerror/.test(e)), [], 'no uncaught errors');
  await page.close();
});

test('the chat page shows the server\'s title from a page link in a fresh profile, keeps working when that call fails, and follows a rename from another tab', async (t) => {
  if (!need(t)) return;
  const created = await api('POST', '/v1/chats', { title: 'Created name', owner: 'admin' });
  assert.equal(created.status, 201, created.text);
  const { chat_id: chatId, page_token: token } = created.json;
  const renamed = await api('PATCH', `/v1/chats/${chatId}`, { title: 'Renamed through the API' });
  assert.equal(renamed.status, 200, renamed.text);

  const fresh = await launch({ viewport: DESKTOP });
  try {
    const page = await fresh.ctx.newPage();
    const errors = watchConsole(page);
    await page.goto(`${orch.origin}/chat/${chatId}#token=${encodeURIComponent(token)}`);
    await titleIs(page, 'Renamed through the API', 'server');
    assert.equal(await page.title(), 'Renamed through the API — Cerea sandbox');
    assert.equal(await page.evaluate((tok) => JSON.stringify({ ...localStorage }).includes(tok), token), false, 'the page token is in no storage');
    assert.equal(await page.isVisible('#chats'), false, 'a page link shows no chat list');

    // The title call fails (the server answers 503): the page keeps its own title and works.
    const only = new RegExp(`/v1/chats/${chatId}$`);
    await page.route(only, (r) => (r.request().method() === 'GET' ? r.fulfill({ status: 503, body: '{}' }) : r.fallback()));
    await page.reload();
    await page.waitForFunction(() => window.cereaSession?.stream?.state === 'open', null, { timeout: 20_000 });
    assert.match(await page.textContent('#chat-title'), /^Chat /);
    await page.unroute(only);
    await page.reload();
    await titleIs(page, 'Renamed through the API', 'server');

    // A rename from the chat list in a second tab, signed in, shows on the open chat page without a reload.
    const list = await fresh.ctx.newPage();
    await signInAdmin(list, orch, '/');
    await list.locator(`#chat-list li[data-chat-id="${chatId}"] a`).waitFor({ timeout: 10_000 });
    await renameInUi(list, chatId, 'Renamed in the other tab');
    await titleIs(page, 'Renamed in the other tab', 'server');
    assert.equal((await api('GET', `/v1/chats/${chatId}`)).json.title, 'Renamed in the other tab');
    await list.close();

    assert.deepEqual(unexpected(errors), [`http 503 GET /v1/chats/${chatId}`], 'only the refused title read failed');
    assert.deepEqual(errors.filter((e) => /^pageerror/.test(e)), [], 'no uncaught errors');
    await page.close();
  } finally {
    await fresh.close();
  }
});

test('a chat made through the API for a person is in their list and opens with the session alone; one with no owner is nobody\'s', async (t) => {
  if (!need(t)) return;
  const made = await api('POST', '/v1/chats', { title: 'Made by the API', owner: 'admin' });
  assert.equal(made.status, 201, made.text);
  assert.equal(made.json.owner?.name, 'admin', made.text);
  const chatId = made.json.chat_id;
  const nobodys = (await api('POST', '/v1/chats', { title: 'A backend chat' })).json;
  assert.equal(nobodys.owner ?? null, null);
  const fresh = await launch({ viewport: DESKTOP });
  try {
    const page = await fresh.ctx.newPage();
    await signInAdmin(page, orch, '/');
    const errors = watchConsole(page);
    const item = page.locator(`#chat-list li[data-chat-id="${chatId}"]`);
    await item.waitFor({ timeout: 10_000 });
    assert.equal(await page.locator(`#chat-list li[data-chat-id="${nobodys.chat_id}"]`).count(), 0, 'the backend\'s chat is in nobody\'s list');
    await item.locator('a').click();
    await page.waitForURL(`${orch.origin}/chat/${chatId}`);
    await page.waitForFunction(() => window.cereaSession?.stream?.state === 'open', null, { timeout: 20_000 });
    await titleIs(page, 'Made by the API', 'server');
    assert.doesNotMatch(page.url(), /token=/);
    await page.goto(`${orch.origin}/chat/${nobodys.chat_id}`);
    await page.locator('[data-testid=bad-link] [data-code=link_no_chat]').waitFor({ timeout: 15_000 });
    assert.deepEqual(errors.filter((e) => /^pageerror/.test(e)), [], 'no uncaught errors');
    await page.close();
  } finally {
    await fresh.close();
  }
});
