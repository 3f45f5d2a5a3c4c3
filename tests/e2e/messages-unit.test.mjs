// messages-unit.test.mjs -- the page's conversation model (ui-adapter/src/messages.js MessageList) in
// Node, without a browser or a server: order (creation time, a turn's question before its answer,
// whatever order the parts arrive in), live deltas appended at their offset (an overlap dropped, a
// repeat ignored, a gap ignored until the next whole object, code points counted as the server
// counts them), whole objects never shortening a streaming text nor reopening an ended message,
// replay on attach then live, run_ids only growing, and the timeline that puts each message's runs
// under it in order and the runs of no message between messages by time, and the answer cut at its
// tool runs (parts) as deltas grow it.  The Chromium tests
// (assistant.test.mjs) run the same code against the real orchestrator.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MessageList, segments } from '../../ui-adapter/src/messages.js';

const user = (id, turn, at, text = 'q') => ({ message_id: id, chat_id: 'c', turn_id: turn, role: 'user', text, state: 'done', error: null, run_ids: [], created_at: at, updated_at: at });
const asst = (id, turn, at, over = {}) => ({ message_id: id, chat_id: 'c', turn_id: turn, role: 'assistant', text: '', state: 'streaming', error: null, run_ids: [], created_at: at, updated_at: at, ...over });
const durable = (data, id = 1) => ({ id: String(id), data });
const live = (data) => ({ id: null, data });
const delta = (id, offset, text) => live({ message_id: id, turn_id: 't', state: 'streaming', delta: { offset, text } });
const texts = (l) => l.list().map((m) => `${m.role}:${m.text}`);

test('order: creation time, the question before its answer at the same millisecond, any arrival order', () => {
  const l = new MessageList();
  l.apply(durable(asst('a2', 't2', 200, { text: 'second answer', state: 'done' }), 5));
  l.apply(durable(asst('a1', 't1', 100, { text: 'first answer', state: 'done' }), 2));
  l.apply(durable(user('u2', 't2', 200, 'second q'), 4));
  l.load([user('u1', 't1', 100, 'first q'), asst('a1', 't1', 100, { text: 'first answer', state: 'done' })]);
  assert.deepEqual(texts(l), ['user:first q', 'assistant:first answer', 'user:second q', 'assistant:second answer']);
  assert.equal(l.open(), null, 'no turn open');
  l.apply(durable(user('u3', 't3', 300), 6));
  l.apply(durable(asst('a3', 't3', 300), 7));
  assert.equal(l.open()?.message_id, 'a3');
});

test('deltas: appended at their offset, an overlap dropped, a repeat and a gap ignored, code points counted', () => {
  const l = new MessageList();
  const seen = [];
  l.on('message', (m) => seen.push(m.text));
  l.apply(durable(asst('a', 't', 1)));
  l.apply(delta('a', 0, 'Hel'));
  l.apply(delta('a', 0, 'Hel'));          // the same chunk again: nothing
  l.apply(delta('a', 1, 'ello'));         // overlaps 'el': only 'lo' is new
  l.apply(delta('a', 9, 'lost'));         // a gap: ignored
  assert.equal(l.get('a').text, 'Hello');
  l.apply(delta('a', 5, ' 🐍 '));          // a surrogate pair is one character
  l.apply(delta('a', 7, ' snake'));       // 'Hello 🐍' is 7 code points (8 UTF-16 units)
  assert.equal(l.get('a').text, 'Hello 🐍 snake');
  assert.deepEqual(seen, ['', 'Hel', 'Hello', 'Hello 🐍 ', 'Hello 🐍 snake'], 'one change event per change, none for the ignored ones');
  // The gap heals with the next whole object, which may be the final one.
  l.apply(durable(asst('a', 't', 1, { text: 'Hello 🐍 snake, lost and found', state: 'done' }), 3));
  assert.equal(l.get('a').text, 'Hello 🐍 snake, lost and found');
  assert.equal(l.apply(delta('a', 30, ' more')), null, 'an ended message takes no delta');
});

test('whole objects: a streaming one never shortens the text, an ended one is final and not reopened, run_ids only grow', () => {
  const l = new MessageList();
  l.apply(durable(asst('a', 't', 1)));
  l.apply(delta('a', 0, 'partial answer'));
  // A run joined: the durable event carries the text as stored, which may lag the deltas.
  l.apply(durable(asst('a', 't', 1, { text: 'partial', run_ids: ['r1'] }), 2));
  assert.equal(l.get('a').text, 'partial answer');
  assert.deepEqual(l.get('a').run_ids, ['r1']);
  // A list read before the run joined (older copy): run_ids do not shrink.
  l.load([asst('a', 't', 1, { text: 'partial answer', run_ids: [] })]);
  assert.deepEqual(l.get('a').run_ids, ['r1']);
  // The end: its text is the final one, even shorter (the server's word), its error kept.
  l.apply(durable(asst('a', 't', 1, { text: 'partial', state: 'error', run_ids: ['r1'], error: { code: 'model_stalled', message: 'no byte for 60 s' } }), 3));
  assert.equal(l.get('a').text, 'partial');
  assert.equal(l.get('a').error.code, 'model_stalled');
  // A late streaming copy (a replay, an attach's whole object) does not reopen it.
  assert.equal(l.apply(live(asst('a', 't', 1, { text: 'partial answer and more' }))), null);
  assert.equal(l.get('a').state, 'error');
});

test('replay then live: a fresh page reads the list, gets the attach\'s whole object and then the deltas, in any interleaving', () => {
  // The server's answer so far is 'The answer is'; deltas continue it.
  const events = [
    durable(user('u', 't', 10, 'what is 6*7?'), 1),
    durable(asst('a', 't', 10), 2),
    live(asst('a', 't', 10, { text: 'The answer is' })),   // sent once on attach, after replay
    delta('a', 13, ' 42'),
    delta('a', 16, '.'),
    durable(asst('a', 't', 10, { text: 'The answer is 42.', state: 'done' }), 3),
  ];
  const listed = [user('u', 't', 10, 'what is 6*7?'), asst('a', 't', 10, { text: 'The ans' })];   // read mid-stream
  for (let at = 0; at <= events.length; at++) {
    const l = new MessageList();
    events.slice(0, at).forEach((e) => l.apply(e));
    l.load(listed);                                 // the list answers at any point
    events.slice(at).forEach((e) => l.apply(e));
    assert.deepEqual(texts(l), ['user:what is 6*7?', 'assistant:The answer is 42.'], `list answered after ${at} events`);
    assert.equal(l.get('a').state, 'done');
  }
  // A delta whose message was never seen whole starts it only from offset 0.
  const l = new MessageList();
  assert.equal(l.apply(delta('x', 3, 'tail')), null);
  assert.equal(l.apply(delta('x', 0, 'head'))?.text, 'head');
  // Bad events change nothing.
  for (const bad of [null, {}, { message_id: 5 }, { message_id: 'y', delta: { offset: '0', text: 'a' } }]) assert.equal(l.apply({ id: null, data: bad }), null);
});

test('timeline: each message\'s runs under it in order (listed, then its turn\'s), other runs between messages by time', () => {
  const l = new MessageList();
  l.load([user('u1', 't1', 100), asst('a1', 't1', 101, { state: 'done', text: 'two blocks', run_ids: ['tool1', 'auto1', 'auto2'] }),
    user('u2', 't2', 300), asst('a2', 't2', 301)]);
  const runs = [
    { run_id: 'auto2', turn_id: 't1', created_at: 150 },
    { run_id: 'mine', origin: 'user', created_at: 200 },   // the user's own code, between the turns
    { run_id: 'auto1', turn_id: 't1', created_at: 149 },
    { run_id: 'tool1', turn_id: 't1', created_at: 120 },
    { run_id: 'late', turn_id: 't2', seen_at: 305 },        // its turn's, not listed yet
    { run_id: 'early', created_at: 50 },
  ];
  const tl = l.timeline(runs).map((i) => (i.kind === 'run' ? `run:${i.run_id}` : `${i.message.message_id}[${i.run_ids.join(',')}]`));
  assert.deepEqual(tl, ['run:early', 'u1[]', 'a1[tool1,auto1,auto2]', 'run:mine', 'u2[]', 'a2[late]']);
});

test('parts: the answer cut at its tool runs, the text after the last run growing with the deltas; parts never lose a run', () => {
  const l = new MessageList();
  const cut = (m) => segments(m).map((s) => (s.type === 'run' ? `[${s.run_id}]` : s.text));
  l.apply(durable(asst('a', 't', 1)));
  l.apply(delta('a', 0, 'Let me run it:'));
  assert.deepEqual(cut(l.get('a')), ['Let me run it:'], 'no parts yet: the text alone');
  // The run joins: the durable event's parts put it after the text so far.
  l.apply(durable(asst('a', 't', 1, { text: 'Let me run it:', run_ids: ['r1'], parts: [{ type: 'text', text: 'Let me run it:' }, { type: 'run', run_id: 'r1' }] }), 2));
  assert.deepEqual(cut(l.get('a')), ['Let me run it:', '[r1]']);
  l.apply(delta('a', 14, '\n\nIt printed 42 — ✓'));
  assert.deepEqual(cut(l.get('a')), ['Let me run it:', '[r1]', '\n\nIt printed 42 — ✓'], 'later text after the card');
  // An older copy (a list read before the run joined) does not take the run out of the text.
  l.load([asst('a', 't', 1, { text: 'Let me run it:', parts: [{ type: 'text', text: 'Let me run it:' }] })]);
  assert.deepEqual(cut(l.get('a')), ['Let me run it:', '[r1]', '\n\nIt printed 42 — ✓']);
  // A run before any text, two runs back to back, white space between them left out.
  assert.deepEqual(cut({ text: '\n\nDone.', parts: [{ type: 'run', run_id: 'x' }, { type: 'run', run_id: 'y' }, { type: 'text', text: '\n\nDone.' }] }), ['[x]', '[y]', '\n\nDone.']);
  assert.deepEqual(cut({ text: 'a\n\n', parts: [{ type: 'text', text: 'a' }, { type: 'run', run_id: 'x' }, { type: 'text', text: '\n\n' }, { type: 'run', run_id: 'y' }] }), ['a', '[x]', '[y]']);
  // Parts that run past the text held (the text lags them): the run goes at the text's end.
  assert.deepEqual(cut({ text: 'ab', parts: [{ type: 'text', text: 'abcd' }, { type: 'run', run_id: 'x' }] }), ['ab', '[x]']);
  // Bad parts are skipped, not fatal, in a whole object too.
  assert.notEqual(l.apply(durable(asst('a', 't', 1, { text: 'Let me run it:', parts: [null, { type: 'run', run_id: 'r1' }, 7, { type: 'run', run_id: 'r2' }] }), 3)), null);
  assert.deepEqual(cut(l.get('a')), ['[r1]', '[r2]', 'Let me run it:\n\nIt printed 42 — ✓']);
  assert.deepEqual(cut({ text: 'ab', parts: [{ type: 'run' }, { type: 'text', text: 5 }, null, 'x'] }), ['ab']);
});
