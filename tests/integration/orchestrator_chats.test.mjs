// orchestrator_chats.test.mjs -- the chat list calls over real HTTP: GET /v1/chats/{chat} (one
// chat, page token of that chat or API key), PATCH /v1/chats/{chat}
// (rename: trimmed, 1..200 characters, no control characters; page token of that chat or API key)
// and GET /v1/chats/{chat}/runs (the chat's runs newest first, limit 1..200, default 50), their
// refusals (bad title, unknown chat, another chat's token, no or wrong credential, limit bounds),
// and both surviving a restart on the same data dir.  Run: node --test tests/integration/
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, call, newChat, Page, tempDir } from './lib.mjs';

let srv;
const dataDir = tempDir('chats');
before(async () => { srv = await startServer({ dataDir }); });
after(async () => { await srv?.stop('SIGTERM'); });

const rename = (chat, title, opts = {}) => call(srv, 'PATCH', `/v1/chats/${chat.id}`, { body: { title }, token: chat.token, ...opts });
const listed = async (chatId) => (await call(srv, 'GET', '/v1/chats')).json.chats.find((c) => c.chat_id === chatId);

test('rename with the page token or the API key: trimmed, stored, listed by GET /v1/chats', async () => {
  const chat = await newChat(srv);
  assert.equal((await listed(chat.id)).title, null, 'a chat created without a title lists title null');
  const r = await rename(chat, '  Budget ☃ 2026\t');
  assert.equal(r.status, 200, r.buf.toString());
  assert.equal(r.json.chat_id, chat.id);
  assert.equal(r.json.title, 'Budget ☃ 2026');
  assert.equal(typeof r.json.created_at, 'number');
  assert.deepEqual(Object.keys(r.json).sort(), ['chat_id', 'created_at', 'owner', 'title']);
  assert.equal((await listed(chat.id)).title, 'Budget ☃ 2026');
  const k = await rename(chat, 'By the operator', { token: undefined });
  assert.equal(k.status, 200);
  assert.equal(k.json.title, 'By the operator');
  assert.equal(k.json.created_at, r.json.created_at);
  // 200 characters (code points, not bytes) is the most; 201 is refused.
  const max = await rename(chat, '☃'.repeat(200));
  assert.equal(max.status, 200);
  assert.equal(max.json.title.length, 200);
  assert.equal((await rename(chat, '☃'.repeat(201))).status, 400);
  assert.equal((await listed(chat.id)).title, '☃'.repeat(200), 'a refused rename changes nothing');
});

test('bad titles are refused with 400 and leave the title as it was', async () => {
  const chat = await newChat(srv);
  assert.equal((await rename(chat, 'Kept')).status, 200);
  const bad = ['', '   ', '\t\n', 'x'.repeat(201), 'a\nb', 'a\rb', 'tab\tinside', 'nul\u0000byte', 'del\u007f',
    'c1\u0085', 'line\u2028sep', 'para\u2029sep', 42, null, true, ['x'], { t: 'x' }];
  for (const title of bad) {
    const r = await rename(chat, title);
    assert.equal(r.status, 400, `title ${JSON.stringify(title)}: ${r.buf}`);
    // A NUL is refused by the JSON parser itself (jansson decodes without JSON_ALLOW_NUL).
    assert.equal(r.json.error.code, String(title).includes('\u0000') ? 'malformed_json' : 'invalid_field', JSON.stringify(title));
  }
  for (const raw of ['{}', '{"title": "x"', '"just a string"', '[]', 'not json']) {
    const r = await call(srv, 'PATCH', `/v1/chats/${chat.id}`, { token: chat.token, raw, headers: { 'content-type': 'application/json' } });
    assert.equal(r.status, 400, `body ${raw}: ${r.buf}`);
  }
  assert.equal((await listed(chat.id)).title, 'Kept');
});

test('rename refusals: unknown chat, another chat\'s token, no or wrong credential', async () => {
  const a = await newChat(srv), b = await newChat(srv);
  assert.equal((await rename(a, 'A')).status, 200);
  const unknown = { id: '0'.repeat(32), token: undefined };
  assert.equal((await rename(unknown, 'x')).status, 404);
  assert.equal((await rename({ id: 'no-such-chat', token: undefined }, 'x')).status, 404);
  const other = await rename(a, 'stolen', { token: b.token });
  assert.equal(other.status, 403, other.buf.toString());
  assert.equal((await rename(a, 'x', { token: null })).status, 401);
  assert.equal((await rename(a, 'x', { token: 'wrong-key' })).status, 401);
  assert.equal((await rename(a, 'x', { token: `${a.id}.${'0'.repeat(64)}` })).status, 401, 'a forged token for the right chat');
  assert.equal((await listed(a.id)).title, 'A', 'no refused call changed the title');
  // GET /v1/chats stays an API-key call.
  assert.equal((await call(srv, 'GET', '/v1/chats', { token: a.token })).status, 403);
  assert.equal((await call(srv, 'GET', '/v1/chats', { token: null })).status, 401);
});

test('GET /v1/chats/{chat} with the page token or the API key: the object PATCH answers', async () => {
  const chat = await newChat(srv);
  const fresh = await call(srv, 'GET', `/v1/chats/${chat.id}`, { token: chat.token });
  assert.equal(fresh.status, 200, fresh.buf.toString());
  assert.deepEqual(Object.keys(fresh.json).sort(), ['chat_id', 'created_at', 'owner', 'title']);
  assert.equal(fresh.json.chat_id, chat.id);
  assert.equal(fresh.json.title, null, 'a chat created without a title reads title null');
  assert.equal(typeof fresh.json.created_at, 'number');
  const renamed = await rename(chat, '  Read back ☃ ');
  assert.equal(renamed.status, 200);
  const byPage = await call(srv, 'GET', `/v1/chats/${chat.id}`, { token: chat.token });
  assert.equal(byPage.status, 200);
  assert.deepEqual(byPage.json, renamed.json, 'the same object PATCH answered');
  const byKey = await call(srv, 'GET', `/v1/chats/${chat.id}`);
  assert.equal(byKey.status, 200, byKey.buf.toString());
  assert.deepEqual(byKey.json, renamed.json);
  assert.equal(byKey.json.title, 'Read back ☃');
  // The neighbouring routes still answer their own objects.
  assert.ok(Array.isArray((await call(srv, 'GET', '/v1/chats')).json.chats), 'GET /v1/chats is still the list');
  assert.deepEqual((await call(srv, 'GET', `/v1/chats/${chat.id}/runs`, { token: chat.token })).json, { runs: [] });
  // A title set at creation reads back too.
  const titled = await call(srv, 'POST', '/v1/chats', { body: { title: 'From the start' } });
  assert.equal(titled.status, 201);
  const t = await call(srv, 'GET', `/v1/chats/${titled.json.chat_id}`, { token: titled.json.page_token });
  assert.equal(t.json.title, 'From the start');
});

test('GET /v1/chats/{chat} refusals: unknown chat, another chat\'s token, no or wrong credential', async () => {
  const a = await newChat(srv), b = await newChat(srv);
  const unknown = await call(srv, 'GET', `/v1/chats/${'0'.repeat(32)}`);
  assert.equal(unknown.status, 404, unknown.buf.toString());
  assert.equal(unknown.json.error.code, 'not_found');
  assert.equal((await call(srv, 'GET', '/v1/chats/no-such-chat')).status, 404);
  const other = await call(srv, 'GET', `/v1/chats/${a.id}`, { token: b.token });
  assert.equal(other.status, 403, other.buf.toString());
  assert.equal(other.json.error.code, 'forbidden');
  assert.ok(!other.buf.toString().includes(a.id), 'the refusal does not echo the other chat');
  assert.equal((await call(srv, 'GET', `/v1/chats/${a.id}`, { token: null })).status, 401);
  assert.equal((await call(srv, 'GET', `/v1/chats/${a.id}`, { token: 'wrong-key' })).status, 401);
  assert.equal((await call(srv, 'GET', `/v1/chats/${a.id}`, { token: `${a.id}.${'0'.repeat(64)}` })).status, 401, 'a forged token for the right chat');
});

test('GET /v1/chats/{chat}/runs: run objects newest first, live and finished, only that chat', async () => {
  const chat = await newChat(srv), other = await newChat(srv);
  const empty = await call(srv, 'GET', `/v1/chats/${chat.id}/runs`, { token: chat.token });
  assert.equal(empty.status, 200);
  assert.deepEqual(empty.json, { runs: [] });
  // One run finished by a scripted page, then two more left waiting (no page).
  const page = new Page(srv, chat, 'page-h');
  await page.opened;
  const pending = call(srv, 'POST', `/v1/chats/${chat.id}/runs`, { body: { code: 'print(1)', wait_s: 10 } });
  const ev = await page.nextRun();
  assert.equal((await page.started(ev.data)).status, 200);
  assert.equal((await page.result(ev.data, { stdout: 'one\n' })).status, 200);
  const first = (await pending).json;
  assert.equal(first.status, 'ok');
  page.close();
  await call(srv, 'POST', `/v1/chats/${other.id}/runs`, { body: { code: 'print("other")' } });
  const ids = [first.run_id];
  for (const code of ['print(2)', 'print(3)']) {
    const r = await call(srv, 'POST', `/v1/chats/${chat.id}/runs`, { body: { code } });
    assert.equal(r.status, 201, r.buf.toString());
    ids.push(r.json.run_id);
  }
  const got = await call(srv, 'GET', `/v1/chats/${chat.id}/runs`, { token: chat.token });
  assert.equal(got.status, 200, got.buf.toString());
  assert.deepEqual(got.json.runs.map((r) => r.run_id), [...ids].reverse(), 'newest first, only this chat');
  const done = got.json.runs[2];
  assert.equal(done.status, 'ok');
  assert.equal(done.stdout, 'one\n');
  assert.equal(done.chat_id, chat.id);
  // The same object GET /v1/runs/{run} answers.
  const single = await call(srv, 'GET', `/v1/runs/${first.run_id}`, { token: chat.token });
  assert.deepEqual(done, single.json);
  assert.equal(got.json.runs[0].status, null, 'a run not yet done is listed with status null');
  // The API key reads it too; limit picks the newest.
  const two = await call(srv, 'GET', `/v1/chats/${chat.id}/runs?limit=2`);
  assert.equal(two.status, 200);
  assert.deepEqual(two.json.runs.map((r) => r.run_id), [ids[2], ids[1]]);
  assert.equal((await call(srv, 'GET', `/v1/chats/${chat.id}/runs?limit=1`)).json.runs.length, 1);
  assert.equal((await call(srv, 'GET', `/v1/chats/${chat.id}/runs?limit=200`)).json.runs.length, 3);
});

test('GET /v1/chats/{chat}/runs refusals: limit bounds, unknown chat, another chat\'s token, credentials', async () => {
  const a = await newChat(srv), b = await newChat(srv);
  for (const limit of ['0', '201', '-1', 'abc', '', '5x', '1e2', '99999999999999999999']) {
    const r = await call(srv, 'GET', `/v1/chats/${a.id}/runs?limit=${encodeURIComponent(limit)}`, { token: a.token });
    assert.equal(r.status, 400, `limit=${limit}: ${r.buf}`);
    assert.equal(r.json.error.code, 'invalid_field');
  }
  assert.equal((await call(srv, 'GET', `/v1/chats/${'0'.repeat(32)}/runs`)).status, 404);
  const other = await call(srv, 'GET', `/v1/chats/${a.id}/runs`, { token: b.token });
  assert.equal(other.status, 403);
  assert.equal((await call(srv, 'GET', `/v1/chats/${a.id}/runs`, { token: null })).status, 401);
  assert.equal((await call(srv, 'GET', `/v1/chats/${a.id}/runs`, { token: 'wrong' })).status, 401);
});

test('titles and run history survive a restart on the same data dir', async () => {
  const chat = await newChat(srv);
  assert.equal((await rename(chat, 'Before restart')).status, 200);
  const run = await call(srv, 'POST', `/v1/chats/${chat.id}/runs`, { body: { code: 'print(9)' } });
  assert.equal(run.status, 201);
  await srv.stop('SIGKILL');
  srv = await startServer({ dataDir });
  assert.equal((await listed(chat.id)).title, 'Before restart');
  assert.equal((await call(srv, 'GET', `/v1/chats/${chat.id}`, { token: chat.token })).json.title, 'Before restart');
  const got = await call(srv, 'GET', `/v1/chats/${chat.id}/runs`, { token: chat.token });
  assert.equal(got.status, 200);
  assert.deepEqual(got.json.runs.map((r) => r.run_id), [run.json.run_id]);
  assert.equal((await rename(chat, 'After restart')).status, 200, 'the page token still renames');
});
