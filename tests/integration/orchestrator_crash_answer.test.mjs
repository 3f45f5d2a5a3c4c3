// orchestrator_crash_answer.test.mjs -- an assistant answer cut while the model streams it: the
// real server killed (SIGKILL) or stopped (SIGTERM) mid-answer, then restarted on the same data
// directory and port.  The model is the TEST DOUBLE of model_double.mjs (a scripted
// OpenAI-compatible server streaming slowly; no model runs here), the page a scripted one reading
// the chat's live deltas.  After the restart the cut answer keeps the text that had streamed (the
// row is rewritten at most once a second while it streams: what is kept is at most about a second
// behind what the page saw before a kill, and all of it after a graceful stop), reads `error` with
// the code `interrupted` and a sentence saying it was cut, the conversation reads in order, and
// the chat takes the next message.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, call, newChat, Page, sleep } from './lib.mjs';
import { startModelDouble } from './model_double.mjs';

const env = (m) => ({ CEREA_LLM_URL: m.url, CEREA_LLM_MODEL: 'double-model', CEREA_LLM_API_KEY: 'sk-double-cut-0123456789', CEREA_LLM_STALL_S: '30' });
const WORDS = Array.from({ length: 80 }, (_, i) => `word${i}`);
const LONG = WORDS.join(' ');

// The answer's text as the page has it from the live deltas (each at its character offset).
function seenText(page, answerId) {
  let text = '';
  for (const e of page.events) {
    if (e.event !== 'message' || e.data.message_id !== answerId) continue;
    if (e.data.delta) {
      const have = [...text];
      text = have.slice(0, e.data.delta.offset).join('') + e.data.delta.text;
    } else if (typeof e.data.text === 'string') text = e.data.text;
  }
  return text;
}

async function cutMidAnswer(signal) {
  const model = await startModelDouble();
  let srv = await startServer({ env: env(model) });
  const port = srv.port, dataDir = srv.dataDir;
  try {
    const chat = await newChat(srv);
    const page = new Page(srv, chat, 'talk');
    await page.opened;
    // 80 pieces 150 ms apart: 12 s of streaming, cut after about 4 s of it.
    model.script.push({ text: LONG, pieces: 80, delayMs: 150 });
    const asked = await call(srv, 'POST', `/v1/chats/${chat.id}/messages`, { token: chat.token, body: { text: 'say many words' } });
    assert.equal(asked.status, 201, asked.buf.toString());
    const answerId = asked.json.answer_id;
    await page.next((e) => e.event === 'message' && e.data.message_id === answerId && e.data.delta, 20000);
    const firstAt = Date.now();
    const seen = []; // [ms since the first delta, the text the page had]
    while (Date.now() - firstAt < 4000) {
      seen.push([Date.now() - firstAt, seenText(page, answerId)]);
      await sleep(100);
    }
    const atKill = seenText(page, answerId);
    await srv.stop(signal);
    page.close();
    assert.ok(atKill.length > 0 && atKill.length < LONG.length, `the answer was streaming at the stop: ${atKill.length} characters`);

    srv = await startServer({ dataDir, env: env(model), port });
    const list = (await call(srv, 'GET', `/v1/chats/${chat.id}/messages`, { token: chat.token })).json.messages;
    assert.deepEqual(list.map((m) => [m.role, m.message_id]), [['user', asked.json.message_id], ['assistant', answerId]]);
    const cut = list[1];
    assert.equal(cut.state, 'error');
    assert.equal(cut.error.code, 'interrupted');
    assert.match(cut.error.message, /cut here/, 'the answer says it was cut');
    assert.ok(LONG.startsWith(cut.text), `what the cut answer kept is the start of what streamed: ${JSON.stringify(cut.text)}`);
    assert.deepEqual(cut.parts, cut.text ? [{ type: 'text', text: cut.text }] : []);
    console.log(`# ${signal}: the page had ${atKill.length} characters at the stop; the cut answer kept ${cut.text.length}: "${cut.error.message}"`);
    // A page that attaches after the restart is shown the same.
    const page2 = new Page(srv, chat, 'talk-2');
    await page2.opened;
    page2.close();
    const again = await call(srv, 'GET', `/v1/chats/${chat.id}/messages`, { token: chat.token });
    assert.equal(again.json.messages[1].text, cut.text);
    // The chat takes the next message.
    model.script.push({ text: 'Back again.' });
    const next = await call(srv, 'POST', `/v1/chats/${chat.id}/messages`, { token: chat.token, body: { text: 'again' } });
    assert.equal(next.status, 201, next.buf.toString());
    return { seen, atKill, kept: cut.text };
  } finally {
    await srv.stop();
    await model.close();
  }
}

test('kill -9 while the model streams an answer: after the restart the answer keeps what had streamed (at most about a second behind the page) and says it was cut', { timeout: 90000 }, async () => {
  const { seen, kept } = await cutMidAnswer('SIGKILL');
  assert.ok(kept.length > 0, 'the cut answer kept text');
  // What the page had 2.5 s before the kill was written by then (one write a second at most; the
  // margin is for a loaded machine).
  const before = seen.filter(([ms]) => ms <= 4000 - 2500).at(-1)[1];
  assert.ok(kept.startsWith(before), `kept ${JSON.stringify(kept)}, the page had ${JSON.stringify(before)} 2.5 s before the kill`);
});

test('a graceful stop (SIGTERM) while the model streams: the answer keeps every character the page had seen, and says it was cut', { timeout: 90000 }, async () => {
  const { atKill, kept } = await cutMidAnswer('SIGTERM');
  assert.ok(atKill.length > 0 && kept.startsWith(atKill), `kept ${JSON.stringify(kept)}, the page had ${JSON.stringify(atKill)}`);
});
