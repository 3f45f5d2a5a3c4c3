// orchestrator_quota.test.mjs -- what users add to a chat is bounded per chat
// (CHAT_ATTACHMENT_QUOTA_MB, here 1 MiB): uploads of every non-output source and add_file through
// a chat key are refused past it with 413 over_quota in the API's error shape, nothing of the
// refused file kept and nothing else lost; under it they are accepted; the quota is per chat.
// They expire after the retention period (ARTIFACT_RETENTION_DAYS), as run outputs do.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, call, newChat, upload, tempDir } from './lib.mjs';

let srv;
before(async () => { srv = await startServer({ dataDir: tempDir('quota'), env: { CHAT_ATTACHMENT_QUOTA_MB: '1' } }); });
after(async () => { await srv.stop(); });

const KiB = 1024;
const bytes = (n, fill) => Buffer.alloc(n, fill);
const files = async (chat) => (await call(srv, 'GET', `/v1/chats/${chat.id}/files?all_versions=1`)).json.files;

test('uploads past the chat quota are refused (413 over_quota), under it accepted, per chat', async () => {
  const a = await newChat(srv), b = await newChat(srv);
  const first = await upload(srv, a, 'a.bin', bytes(600 * KiB, 1), { token: a.token });
  assert.equal(first.status, 201);
  const over = await upload(srv, a, 'b.bin', bytes(600 * KiB, 2), { token: a.token });
  assert.equal(over.status, 413);
  assert.equal(over.json.error.code, 'over_quota');
  assert.match(over.json.error.message, /this chat's files take 0\.6 MB of the 1 MB it may keep \(CHAT_ATTACHMENT_QUOTA_MB\)/);
  assert.match(over.json.error.message, /this file \(0\.6 MB\)/);
  assert.deepEqual((await files(a)).map((f) => f.name), ['a.bin'], 'nothing of the refused file kept, nothing lost');
  // The same content again adds nothing: not refused.
  assert.equal((await upload(srv, a, 'a.bin', bytes(600 * KiB, 1), { token: a.token })).status, 200);
  // Under what is left: accepted (600 + 400 KiB is within 1 MiB).
  assert.equal((await upload(srv, a, 'c.bin', bytes(400 * KiB, 3), { token: a.token })).status, 201);
  // Other non-output sources count as well.
  const k = await upload(srv, a, 'kb.txt', bytes(30 * KiB, 4), { source: 'knowledge' });
  assert.equal(k.status, 413);
  assert.equal(k.json.error.code, 'over_quota');
  const t = await upload(srv, a, 'tool.txt', bytes(30 * KiB, 5), { source: 'tool' });
  assert.equal(t.status, 413);
  // Another chat has its own quota.
  assert.equal((await upload(srv, b, 'a.bin', bytes(600 * KiB, 2), { token: b.token })).status, 201);
  assert.equal((await upload(srv, b, 'b.bin', bytes(300 * KiB, 6), { token: b.token })).status, 201);
  assert.deepEqual((await files(a)).map((f) => f.name).sort(), ['a.bin', 'c.bin']);
  const m = await call(srv, 'GET', '/metrics', { token: null });
  assert.match(m.buf.toString(), /cerea_files_refused_quota_total 3\b/);
  const cfg = await call(srv, 'GET', '/v1/config', { token: null });
  assert.equal(cfg.json.limits.chat_attachment_bytes, 1024 * 1024);
});

test('add_file through a chat key goes through the same quota', async () => {
  const chat = await newChat(srv);
  const key = (await call(srv, 'POST', `/v1/chats/${chat.id}/chat_key`)).json.key;
  assert.ok(key, 'a chat key');
  const add = (name, text) => call(srv, 'POST', '/v1/tools/call', { token: key, body: { name: 'add_file', arguments: { name, text } } });
  const ok = await add('notes.txt', 'n'.repeat(700 * KiB));
  assert.equal(ok.status, 200);
  assert.notEqual(ok.json.isError, true, JSON.stringify(ok.json).slice(0, 300));
  const refused = await add('more.txt', 'm'.repeat(700 * KiB));
  assert.equal(refused.status, 200);
  assert.equal(refused.json.isError, true);
  assert.match(JSON.stringify(refused.json.content), /The file was not added: this chat's files take 0\.7 MB of the 1 MB/);
  assert.deepEqual((await files(chat)).map((f) => f.name), ['notes.txt']);
});

test('what users add expires after the retention period, as run outputs do, and follows its changes', async () => {
  const chat = await newChat(srv);
  const t0 = Date.now();
  const up = await upload(srv, chat, 'kept.csv', 'a,b\n1,2\n', { token: chat.token });
  assert.equal(up.status, 201);
  const day = 86400000;
  assert.ok(up.json.expires_at >= t0 + 30 * day && up.json.expires_at <= Date.now() + 30 * day, `expires_at ${up.json.expires_at}`);
  const put = await call(srv, 'PUT', '/v1/admin/settings', { body: { retention_days: 7 } });
  assert.equal(put.status, 200, put.buf.toString());
  const [f] = (await files(chat)).filter((x) => x.name === 'kept.csv');
  assert.equal(f.expires_at, f.created_at + 7 * day, 're-dated with the retention change');
  const later = await upload(srv, chat, 'later.txt', 'x', { token: chat.token });
  assert.ok(later.json.expires_at <= Date.now() + 7 * day && later.json.expires_at >= later.json.created_at + 7 * day - 1000);
});
