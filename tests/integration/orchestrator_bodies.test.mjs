// orchestrator_bodies.test.mjs -- request bodies as the orchestrator reads them (jansson, then
// one pass over an object's keys for its fields): every field of a result stored and answered as
// sent; the result hash independent of key order and whitespace (the same result again is 200,
// another one 409); bodies with reals, \u0000 and 19-digit integers read; malformed bodies
// (duplicate keys, text after the object, bad UTF-8, lone surrogates) 400 malformed_json with
// jansson's message.
// Run: node --test tests/integration/orchestrator_bodies.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, call, newChat, Page } from './lib.mjs';

let srv;
before(async () => { srv = await startServer(); });
after(async () => { await srv?.stop('SIGTERM'); });

async function chatWithRun(pageId = 'p1', create = { code: 'print(1)' }) {
  const chat = await newChat(srv);
  const page = new Page(srv, chat, pageId);
  await page.opened;
  await page.presence(true, 'ready');
  const cr = await call(srv, 'POST', `/v1/chats/${chat.id}/runs`, { body: create });
  assert.equal(cr.status, 201, cr.buf.toString());
  const ev = await page.nextRun();
  return { chat, page, run: ev.data, runId: cr.json.run_id };
}

const post = (b, text) => call(srv, 'POST', `/v1/runs/${b.runId}/result`, { token: b.chat.token, body: text });

test('every field of a result is stored and answered as sent; key order and spacing do not change its hash', async () => {
  const b = await chatWithRun();
  const a = b.run.attempt;
  const text = `{"attempt":${a},"status":"error","stdout":"h\\u00e9 \\ud83d\\ude00 \u2603\\n","stderr":"e\\t\\"q\\"",` +
    '"stdout_truncated":true,"stderr_truncated":false,"error":{"type":"ValueError","message":"bad","traceback":"tb"},' +
    '"files":[],"files_unlisted":3,"figures_dropped":2,"notes":["n1","n2"],"restarted":true,"remounted":["a.csv"]}';
  const r = await post(b, text);
  assert.equal(r.status, 200, r.buf.toString());
  const want = {
    status: 'error', stdout: 'hé 😀 ☃\n', stderr: 'e\t"q"', stdout_truncated: true, stderr_truncated: false,
    error: { type: 'ValueError', message: 'bad', traceback: 'tb' }, files_unlisted: 3, figures_dropped: 2,
    notes: ['n1', 'n2'], restarted: true, remounted: ['a.csv'],
  };
  for (const [k, v] of Object.entries(want)) assert.deepEqual(r.json[k], v, k);
  const g = await call(srv, 'GET', `/v1/runs/${b.runId}`);
  for (const [k, v] of Object.entries(want)) assert.deepEqual(g.json[k], v, `GET ${k}`);
  // the same result, keys reversed and spaced, escapes written differently: the same answer
  const obj = JSON.parse(text);
  const again = '{ ' + Object.keys(obj).reverse().map((k) => `${JSON.stringify(k)} : ${JSON.stringify(obj[k], null, 1)}`).join(' ,\n ') + ' }';
  const r2 = await post(b, again);
  assert.equal(r2.status, 200, r2.buf.toString());
  assert.equal(r2.json.stdout, want.stdout);
  const r3 = await post(b, text.replace('"figures_dropped":2', '"figures_dropped":1'));
  assert.equal(r3.status, 409, r3.buf.toString());
  b.page.close();
});

test('NUL in program output (left to jansson) is kept as U+FFFD; 19-digit and real numbers are read as before', async () => {
  const b = await chatWithRun('p2', { code: 'x', wait_s: 0.5, timeout_s: 5 });
  const r = await post(b, `{"attempt":${b.run.attempt},"status":"ok","stdout":"a\\u0000b","stderr":"","files":[]}`);
  assert.equal(r.status, 200, r.buf.toString());
  assert.equal(r.json.stdout, 'a\ufffdb');
  const chat = await newChat(srv);
  const big = await call(srv, 'POST', `/v1/chats/${chat.id}/runs`, { body: '{"code":"x","timeout_s":1234567890123456789}' });
  assert.equal(big.status, 400);
  assert.equal(big.json.error.code, 'invalid_field');
  const huge = await call(srv, 'POST', `/v1/chats/${chat.id}/runs`, { body: '{"code":"x","timeout_s":99999999999999999999}' });
  assert.equal(huge.status, 400);
  assert.equal(huge.json.error.code, 'malformed_json');
  assert.match(huge.json.error.message, /too big integer/);
  b.page.close();
});

test('malformed bodies are 400 malformed_json with jansson\'s message, and create nothing', async () => {
  const chat = await newChat(srv);
  const cases = [
    ['{"code":"x","code":"y"}', /duplicate object key/],
    ['{"code":"x"} {}', /end of file expected/],
    ['{"code":"x",}', /string or '}' expected/],
    ['{"code":"\\ud800"}', /invalid Unicode/],
    [Buffer.from('{"code":"\xff"}', 'latin1'), /unable to decode byte/],
    ['{"code":"x\u0001"}', /control character/],
    ['[{"code":"x"}]', /must be a JSON object/],
    ['{"code":01}', /invalid token|malformed/],
  ];
  for (const [body, msg] of cases) {
    const r = await call(srv, 'POST', `/v1/chats/${chat.id}/runs`, { raw: body, headers: { 'content-type': 'application/json' } });
    assert.equal(r.status, 400, String(body));
    assert.equal(r.json.error.code, 'malformed_json', String(body));
    assert.match(r.json.error.message, msg, String(body));
  }
  const list = await call(srv, 'GET', `/v1/chats/${chat.id}/runs`);
  assert.equal(list.status, 200);
  assert.equal((list.json.runs ?? list.json).length, 0);
});
