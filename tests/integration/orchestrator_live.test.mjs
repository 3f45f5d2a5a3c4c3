// orchestrator_live.test.mjs -- live runs (issue 15) against the real binary with scripted pages:
// output while a run goes on the run stream (GET /v1/runs/{run}/events) and on the chat stream
// (live events, no id), the held output a page gets when it attaches, every ending keeping what
// was printed (time limit, cancel, abandonment), chunks for a stale attempt refused, repeated and
// out-of-order chunks neither lost nor doubled, the caps mid-stream, value and displays, input()
// (409 when not waiting, the watchdog not counting the wait), and malformed bodies (400).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, call, newChat, runEvents, sleep, helpers } from './lib.mjs';

// Runs that must hit their time limit ask for timeout_s: 1 (the watchdog: 1 s + 0.8 s).
const env = { CODE_PAUSED_WAIT_MS: '1500', CODE_WATCHDOG_GRACE_MS: '800', CODE_CANCEL_GRACE_MS: '600',
  PAGE_HEARTBEAT_MS: '500', PAGE_SILENT_MS: '4000' };
let srv;
before(async () => { srv = await startServer({ env }); });
after(async () => { await srv.stop(); });

const { createRun, getRun, openPage } = helpers(() => srv);
// A run created and taken by page p, reported started: the `run` event's data.
const startRun = async (chat, p, body) => {
  const r = await createRun(chat, body);
  assert.equal(r.status, 201);
  const e = await p.nextRun();
  assert.equal((await p.started(e.data)).status, 200);
  return e.data;
};
const out = (offset, text, stream = 'stdout') => ({ stream, offset, text });

test('a run printing a line a second for 3 s: its first line reaches the run stream and the chat stream >= 1.5 s before the end', async () => {
  const chat = await newChat(srv);
  const p = await openPage(chat, 'runner');
  p.heartbeat(500);
  const viewer = await openPage(chat, 'viewer', { visible: false }); // another tab of the chat
  const r = await createRun(chat, { code: 'for i in range(3): print(i); time.sleep(1)' });
  const runId = r.json.run_id;
  const stream = runEvents(srv, runId);
  await stream.opened;
  assert.equal(stream.status, 200);
  const run = (await p.nextRun()).data;
  await p.started(run);
  let text = '';
  for (let i = 0; i < 3; i++) {
    const line = `line ${i}\n`;
    const res = await p.output(run, { chunks: [out([...text].length, line)] });
    assert.equal(res.status, 200);
    text += line;
    assert.deepEqual(res.json, { stdout: [...text].length, stderr: 0, displays: 0 });
    await sleep(1000);
  }
  assert.equal((await p.result(run, { stdout: text })).status, 200);
  const end = await stream.next('end');
  await stream.ended;
  const firstRun = stream.events.find((e) => e.event === 'output');
  const firstChat = await viewer.next((e) => e.event === 'output' && e.data.run_id === runId);
  assert.equal(firstRun.data.text, 'line 0\n');
  assert.equal(firstChat.data.text, 'line 0\n');
  assert.ok(end.at - firstRun.at >= 1500, `run stream: ${end.at - firstRun.at} ms before the end`);
  assert.ok(end.at - firstChat.at >= 1500, `chat stream: ${end.at - firstChat.at} ms before the end`);
  assert.equal(firstChat.id, null, 'a live event carries no id');
  assert.equal(viewer.text('stdout', runId), text);
  assert.equal(stream.text('stdout'), text);
  assert.equal(end.data.stdout, text);
  assert.equal(end.data.state, 'done');
  // the run stream: ids per run, increasing; the current state first, `end` last
  const ids = stream.events.map((e) => e.id);
  assert.ok(ids.every((id, i) => i === 0 || id > ids[i - 1]), JSON.stringify(ids));
  assert.equal(stream.events[0].event, 'state');
  assert.deepEqual(stream.events.filter((e) => e.event === 'state').map((e) => e.data.state), ['dispatched', 'running', 'done']);
  assert.equal(stream.events.at(-1).event, 'end');
  p.close(); viewer.close();
});

test('the run stream: a finished run answers end at once; Last-Event-ID resumes; the page token reaches it, another chat\'s does not', async () => {
  const chat = await newChat(srv);
  const other = await newChat(srv);
  const p = await openPage(chat);
  p.heartbeat(500);
  const run = await startRun(chat, p);
  await p.output(run, { chunks: [out(0, 'a\n')] });
  await p.output(run, { chunks: [out(2, 'b\n')] });
  const s1 = runEvents(srv, run.run_id, { token: chat.token });
  await s1.opened;
  assert.equal(s1.status, 200);
  const first = await s1.next('state');
  assert.equal(first.data.state, 'running');
  const snap = await s1.next('output');
  assert.equal(snap.data.text, 'a\nb\n', 'a new stream gets the held output at once, from offset 0');
  assert.equal(snap.data.offset, 0);
  s1.close();
  await p.output(run, { chunks: [out(4, 'c\n')] });
  const s2 = runEvents(srv, run.run_id, { lastEventId: snap.id });
  await s2.opened;
  const resumed = await s2.next('output');
  assert.deepEqual([resumed.data.text, resumed.data.offset], ['c\n', 4]);
  assert.ok(resumed.id > snap.id);
  const denied = runEvents(srv, run.run_id, { token: other.token });
  await denied.opened;
  assert.equal(denied.status, 404);
  const bad = await call(srv, 'GET', `/v1/runs/${run.run_id}/events`, { headers: { 'last-event-id': 'x' } });
  assert.equal(bad.status, 400);
  await p.result(run, { stdout: 'a\nb\nc\n' });
  const end = await s2.next('end');
  assert.equal(end.data.stdout, 'a\nb\nc\n');
  await s2.ended;
  const after = runEvents(srv, run.run_id);
  await after.opened;
  await after.ended;
  assert.deepEqual(after.events.map((e) => e.event), ['end']);
  assert.equal(after.events[0].data.status, 'ok');
  p.close();
});

test('a page that attaches while a run is live is first sent its held output (offset 0, no id)', async () => {
  const chat = await newChat(srv);
  const p = await openPage(chat, 'runner');
  p.heartbeat(500);
  const run = await startRun(chat, p);
  await p.output(run, { chunks: [out(0, 'so far\n'), out(0, 'err\n', 'stderr')] });
  const late = await openPage(chat, 'late', { visible: false });
  const o1 = await late.next((e) => e.event === 'output' && e.data.stream === 'stdout');
  assert.deepEqual([o1.data.text, o1.data.offset, o1.id], ['so far\n', 0, null]);
  const o2 = await late.next((e) => e.event === 'output' && e.data.stream === 'stderr');
  assert.equal(o2.data.text, 'err\n');
  await p.result(run, { stdout: 'so far\n' });
  p.close(); late.close();
});

test('repeated and out-of-order chunks are neither lost nor doubled; the answer says where to resume', async () => {
  const chat = await newChat(srv);
  const p = await openPage(chat);
  p.heartbeat(500);
  const run = await startRun(chat, p);
  const gap = await p.output(run, { chunks: [out(6, 'world\n')] });
  assert.equal(gap.status, 200);
  assert.equal(gap.json.stdout, 0, 'a gap is not taken');
  const first = await p.output(run, { chunks: [out(0, 'hello\n'), out(6, 'wörld\n')] });
  assert.equal(first.json.stdout, 12);
  const again = await p.output(run, { chunks: [out(0, 'hello\nwör'), out(3, 'lo\nwörld\nbye\n')] });
  assert.equal(again.json.stdout, 16);
  const text = 'hello\nwörld\nbye\n';
  await sleep(100);
  assert.equal(p.text('stdout', run.run_id), text, 'the chat stream: each character once, in order');
  // a result that leaves stdout out keeps the held text
  const res = await call(srv, 'POST', `/v1/runs/${run.run_id}/result`, { token: chat.token, body: { attempt: run.attempt, status: 'ok' } });
  assert.equal(res.status, 200);
  assert.equal(res.json.stdout, text);
  p.close();
});

test('the caps hold mid-stream: 8,000 characters held and published per stream, the rest dropped and flagged', async () => {
  const chat = await newChat(srv);
  const p = await openPage(chat);
  p.heartbeat(500);
  const watcher = runEvents(srv, (await createRun(chat)).json.run_id);
  await watcher.opened;
  const run = (await p.nextRun()).data;
  await p.started(run);
  let held = 0;
  for (let i = 0; i < 9; i++) {
    const r = await p.output(run, { chunks: [out(held, '☃'.repeat(1000))] });
    assert.equal(r.status, 200);
    held = r.json.stdout;
  }
  assert.equal(held, 8000);
  await sleep(100);
  assert.equal([...p.text('stdout', run.run_id)].length, 8000);
  assert.equal([...watcher.text('stdout')].length, 8000);
  const res = await call(srv, 'POST', `/v1/runs/${run.run_id}/result`, { token: chat.token, body: { attempt: run.attempt, status: 'ok' } });
  assert.equal([...res.json.stdout].length, 8000);
  assert.equal(res.json.stdout_truncated, true);
  p.close(); watcher.close();
});

test('every printed character reaches the run stream as output before end: a fast run, a slow one, one past the cap, a crashed one', async () => {
  const chat = await newChat(srv);
  const p = await openPage(chat);
  p.heartbeat(500);
  const lines = (n, w = '') => Array.from({ length: n }, (_, i) => `${w}${i}\n`).join('');
  const head = '☃'.repeat(4000);
  const pastCap = `${head}\n… 100,000 characters left out …\n${'é'.repeat(3960)}`;
  const cases = [
    // a fast run: the page streamed nothing, its result carries everything
    { name: 'fast', chunks: [], result: { stdout: lines(1000), stderr: 'warned\n' } },
    // a slow run: streamed in part, the last batch not sent before the result
    { name: 'slow', chunks: [[out(0, 'line 0\n')], [out(7, 'line 1\n')]], result: { stdout: 'line 0\nline 1\nline 2\n' } },
    // past the cap: the head streamed, the marker and the tail only in the result
    { name: 'past the cap', chunks: [[out(0, head)]], result: { stdout: pastCap, stdout_truncated: true } },
    // a crash: what the page received before the kernel died, none of it streamed
    { name: 'crashed', chunks: [], result: { status: 'crashed', stdout: 'before the crash\n',
      error: { type: 'KernelCrashed', message: 'The sandbox stopped (worker error).', traceback: '' } } },
  ];
  for (const c of cases) {
    const runId = (await createRun(chat)).json.run_id;
    const stream = runEvents(srv, runId);
    await stream.opened;
    const run = (await p.nextRun()).data;
    assert.equal((await p.started(run)).status, 200);
    for (const chunks of c.chunks) assert.equal((await p.output(run, { chunks })).status, 200);
    assert.equal((await p.result(run, c.result)).status, 200, c.name);
    const end = await stream.next('end');
    await stream.ended;
    assert.equal(end.data.stdout, c.result.stdout, c.name);
    assert.equal(stream.text('stdout'), end.data.stdout, `${c.name}: the output events joined are the result's stdout`);
    assert.equal(stream.text('stderr'), end.data.stderr, `${c.name}: stderr`);
    const last = stream.events.findLastIndex((e) => e.event === 'output');
    assert.ok(last >= 0 && last < stream.events.length - 1 && stream.events.at(-1).event === 'end', `${c.name}: output before end`);
    // the chat's page got the same text live
    for (let t0 = Date.now(); p.text('stdout', runId) !== end.data.stdout && Date.now() - t0 < 3000;) await sleep(50);
    assert.equal(p.text('stdout', runId), end.data.stdout, `${c.name}: the chat stream`);
    stream.close();
  }
  p.close();
});

test('a chunk for a stale attempt is refused (409 stale_attempt); so is one for an ended run', async () => {
  const chat = await newChat(srv);
  const p = await openPage(chat, 'phone');
  const r1 = await startRun(chat, p);
  await p.presence(false);
  await p.presence(true);
  const r2 = (await p.nextRun()).data;
  assert.equal(r2.attempt, 2);
  const stale = await p.output(r1, { chunks: [out(0, 'old')] });
  assert.equal(stale.status, 409);
  assert.equal(stale.json.error.code, 'stale_attempt');
  assert.equal((await p.output(r2, { chunks: [out(0, 'new\n')] })).status, 200);
  await p.result(r2, { stdout: 'new\n' });
  assert.equal((await p.output(r2, { chunks: [out(4, 'late')] })).status, 409);
  p.close();
});

test('every ending keeps what was printed: the time limit, a cancel, abandonment', async () => {
  const chat = await newChat(srv);
  const p = await openPage(chat);
  p.heartbeat(400);
  // the time limit (the page never answers: the watchdog ends it)
  const r1 = await startRun(chat, p, { timeout_s: 1 });
  await p.output(r1, { chunks: [out(0, 'spinning\n'), out(0, 'warn\n', 'stderr')] });
  const g1 = await getRun(r1.run_id, 10);
  assert.equal(g1.json.status, 'timeout');
  assert.equal(g1.json.stdout, 'spinning\n');
  assert.equal(g1.json.stderr, 'warn\n');
  // a cancel the page does not answer
  const r2 = await startRun(chat, p);
  await p.output(r2, { chunks: [out(0, 'working\n')] });
  assert.equal((await call(srv, 'POST', `/v1/runs/${r2.run_id}/cancel`)).status, 202);
  const g2 = await getRun(r2.run_id, 10);
  assert.equal(g2.json.status, 'cancelled');
  assert.equal(g2.json.stdout, 'working\n');
  // abandoned: hidden past the pause wait
  const r3 = await startRun(chat, p);
  await p.output(r3, { chunks: [out(0, 'half way\n')] });
  p.stopHeartbeat();
  await p.presence(false);
  const g3 = await getRun(r3.run_id, 10);
  assert.equal(g3.json.status, 'abandoned');
  assert.equal(g3.json.stdout, 'half way\n');
  assert.match(g3.json.error.message, /keep the chat open/);
  p.close();
});

test('value and displays: published as they come, in the result and the run object; bad bundles are 400', async () => {
  const chat = await newChat(srv);
  const p = await openPage(chat);
  p.heartbeat(500);
  const run = await startRun(chat, p);
  const d0 = { 'text/plain': '1' };
  const d1 = { 'text/plain': '<table>', 'text/html': '<table><tr><td>1</td></tr></table>' };
  const r = await p.output(run, { displays: [{ index: 0, data: d0 }, { index: 1, data: d1 }] });
  assert.deepEqual(r.json, { stdout: 0, stderr: 0, displays: 2 });
  const ev = await p.next((e) => e.event === 'display' && e.data.index === 1);
  assert.deepEqual(ev.data.data, d1);
  assert.equal(ev.id, null);
  const value = { 'text/plain': "{'a': 1}", 'application/json': { a: 1 } };
  const bad = await p.result(run, { value: { 'text/html': 'no plain' } });
  assert.equal(bad.status, 400);
  assert.match(bad.json.error.message, /text\/plain/);
  const res = await p.result(run, { value, displays: [d0, d1] });
  assert.equal(res.status, 200);
  assert.deepEqual(res.json.value, value);
  assert.deepEqual(res.json.displays, [d0, d1]);
  const g = await getRun(run.run_id);
  assert.deepEqual(g.json.value, value);
  assert.deepEqual(g.json.displays, [d0, d1]);
  const none = await startRun(chat, p);
  const plain = await p.result(none, { value: null });
  assert.equal(plain.json.value, null);
  assert.deepEqual(plain.json.displays, []);
  p.close();
});

test('input(): 409 while the run does not wait; the wait is not counted by the watchdog; the answer reaches the page as a durable event', async () => {
  const chat = await newChat(srv);
  const p = await openPage(chat);
  p.heartbeat(400);
  const run = await startRun(chat, p, { timeout_s: 1 });
  const early = await call(srv, 'POST', `/v1/runs/${run.run_id}/input`, { body: { text: 'too soon' } });
  assert.equal(early.status, 409);
  assert.equal(early.json.error.code, 'not_waiting');
  const asked = await p.output(run, { chunks: [out(0, 'hi\n')], input_request: { prompt: 'name? ' } });
  assert.equal(asked.status, 200);
  const req = await p.next('input_request');
  assert.deepEqual([req.data.prompt, req.data.attempt, req.id], ['name? ', 1, null]);
  assert.equal((await getRun(run.run_id)).json.state, 'waiting_input');
  await sleep(3500); // the time limit is 1 s, the watchdog's grace 0.8 s: the wait does not count
  assert.equal((await getRun(run.run_id)).json.state, 'waiting_input');
  const given = await call(srv, 'POST', `/v1/runs/${run.run_id}/input`, { token: chat.token, body: { text: 'Ada' } });
  assert.equal(given.status, 200);
  assert.deepEqual(given.json, { delivered: true });
  const ev = await p.next('input');
  assert.deepEqual([ev.data.text, ev.data.attempt, ev.data.page_id], ['Ada', 1, 'tab']);
  assert.ok(ev.id > 0, 'durable: it has an id');
  assert.equal((await call(srv, 'POST', `/v1/runs/${run.run_id}/input`, { body: { text: 'twice' } })).status, 409);
  assert.equal((await getRun(run.run_id)).json.state, 'running');
  // the watchdog runs again with what it had left: the run times out soon after
  const g = await getRun(run.run_id, 10);
  assert.equal(g.json.status, 'timeout');
  assert.equal(g.json.stdout, 'hi\n');
  p.close();
});

test('malformed bodies are 400 and take nothing', async () => {
  const chat = await newChat(srv);
  const p = await openPage(chat);
  p.heartbeat(500);
  const run = await startRun(chat, p);
  const post = (path, body, raw) => call(srv, 'POST', `/v1/runs/${run.run_id}/${path}`, { token: chat.token, ...(raw !== undefined ? { raw, headers: { 'content-type': 'application/json' } } : { body }) });
  const cases = [
    ['output', null, '{"attempt":1,'],
    ['output', { chunks: [] }],
    ['output', { attempt: 0 }],
    ['output', { attempt: 1, chunks: {} }],
    ['output', { attempt: 1, chunks: [{ stream: 'stdin', offset: 0, text: 'x' }] }],
    ['output', { attempt: 1, chunks: [{ stream: 'stdout', offset: -1, text: 'x' }] }],
    ['output', { attempt: 1, chunks: [{ stream: 'stdout', offset: 0, text: 5 }] }],
    ['output', { attempt: 1, chunks: [{ stream: 'stdout', offset: 0, text: 'ok' }], displays: [{ index: 0, data: { 'text/html': 'x' } }] }],
    ['output', { attempt: 1, displays: [{ index: 0, data: { 'text/plain': 1 } }] }],
    ['output', { attempt: 1, displays: [{ index: 0, data: { 'not a type': 'x', 'text/plain': 'x' } }] }],
    ['output', { attempt: 1, input_request: 'name?' }],
    ['output', { attempt: 1, input_request: { prompt: 3 } }],
    ['input', {}],
    ['input', { text: 3 }],
    ['input', { text: 'x'.repeat(65537) }],
    ['input', null, 'not json'],
    ['result', { attempt: 1, status: 'ok', displays: [{ 'text/plain': 'a' }, 'b'] }],
    ['result', { attempt: 1, status: 'ok', value: 'a string' }],
  ];
  for (const [path, body, raw] of cases) {
    const r = await post(path, body, raw);
    assert.equal(r.status, 400, `${path} ${raw ?? JSON.stringify(body).slice(0, 120)}: ${r.status} ${r.buf}`);
    assert.ok(r.json && r.json.error && r.json.error.code, 'an error body');
  }
  const held = await p.output(run, {});
  assert.deepEqual(held.json, { stdout: 0, stderr: 0, displays: 0 }, 'nothing of them was taken');
  assert.equal((await getRun(run.run_id)).json.state, 'running');
  p.close();
});

test('a run whose code is larger than 256 KiB still reaches its page', async () => {
  const chat = await newChat(srv);
  const p = await openPage(chat);
  const code = `# ${'x'.repeat(1 << 20)}\nprint(1)`;
  const r = await createRun(chat, { code });
  assert.equal(r.status, 201);
  const e = await p.nextRun(5000);
  assert.equal(e.data.code.length, code.length);
  await p.result(e.data);
  p.close();
});
