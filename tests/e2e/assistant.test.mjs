// assistant.test.mjs -- issue 18 in Chromium: the chat page as a conversation against the REAL
// orchestrator, whose model is a TEST DOUBLE (model-double.mjs: a scripted OpenAI-compatible
// server; no model runs here).  A plain answer streams in as sanitized markdown under the question,
// the composer disabled meanwhile; a tool call runs in the page, under the answer, and its result
// reaches the model before the answer; an answer's two python blocks auto-run in order and show in
// order, below the earlier turn; a second tab sees the same conversation live and after a reload;
// the tool card sits between the texts around the call, live and after a reload; a model error is
// shown as such; Stop ends a stalled answer keeping its text; the page sent to
// the background during a tool run pauses it and the turn waits, back in front the run starts again
// and the turn finishes; on a phone the
// tool run's card says to keep the page open.  Without a model the page says so and keeps "run your
// own code".  What needs the orchestrator's side of issue 18 skips, saying so, on an orchestrator
// without it (GET /v1/chats/{chat}/messages answers 404).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, orchestrator, backend, screenshot, watchConsole, background, foreground, PHONE } from './harness.mjs';
import { startModelDouble, byRole } from './model-double.mjs';

const KEY = 'sk-double-secret-0123456789';
let orch = null, plain = null, skipReason = null, api, browser, model, phone;

before(async () => {
  model = await startModelDouble();
  browser = await launch();
  orch = await orchestrator({ env: { CEREA_LLM_URL: model.url, CEREA_LLM_MODEL: 'double-model', CEREA_LLM_API_KEY: KEY, CEREA_LLM_STALL_S: '30' } });
  if (orch.skip) { skipReason = `orchestrator unavailable: ${orch.skip}`; return; }
  api = backend(orch.origin, orch.apiKey);
  const c = await api('POST', '/v1/chats', {});
  const m = await api('GET', `/v1/chats/${c.json.chat_id}/messages`);
  if (m.status === 404) skipReason = 'this orchestrator has no messages API (GET /v1/chats/{chat}/messages 404): waits for the orchestrator side of issue 18';
});
after(async () => {
  await browser?.close();
  await phone?.close();
  if (orch && !orch.skip) await orch.stop();
  if (plain && !plain.skip) await plain.stop();
  await model?.close();
});

const need = (t) => { if (skipReason) { t.skip(skipReason); return false; } return true; };

async function newChat(on = api) {
  const c = await on('POST', '/v1/chats', {});
  assert.equal(c.status, 201, c.text);
  return c.json;
}

async function openChat(chat, { ctx = browser.ctx, origin = orch.origin, kernel = true } = {}) {
  const page = await ctx.newPage();
  const errors = watchConsole(page);
  await page.goto(`${origin}/chat/${chat.chat_id}#token=${chat.page_token}`);
  await page.waitForFunction(() => window.cereaSession?.stream?.state === 'open', null, { timeout: 20_000 });
  if (kernel) await page.waitForFunction(() => window.cereaSupervisor.state === 'ready', null, { timeout: 90_000 });
  return { page, errors };
}

async function ask(page, text) {
  await page.locator('#ask:not([hidden]) #ask-send:not([disabled])').waitFor({ timeout: 10_000 });
  await page.fill('#ask-text', text);
  await page.press('#ask-text', 'Enter');
}

const assistantDone = (page, n = 1) => page.waitForFunction((i) => document.querySelectorAll('.msg[data-role=assistant]')[i]?.dataset.state === 'done', n - 1, { timeout: 60_000 });
// The conversation as the page shows it: role, state, text, and each run's origin/status/stdout.
const shown = (page) => page.$$eval('#conversation > *', (els) => els.map((el) => el.classList.contains('msg')
  ? { role: el.dataset.role, state: el.dataset.state, text: el.querySelector('.msg-text').textContent.trim(),
    runs: [...el.querySelectorAll('.run-card')].map((c) => `${c.dataset.status}:${(c.querySelector('[data-testid=stdout]')?.textContent || '').trim()}`) }
  : { run: el.dataset.status }));
const pageErrors = (errors) => errors.filter((e) => /pageerror/.test(e));
// The end of a test's page: no uncaught error, a screenshot, closed.
async function finish(page, errors, name) {
  assert.deepEqual(pageErrors(errors), [], 'no uncaught errors');
  await screenshot(page, name);
  await page.close();
}

test('a plain answer streams in as sanitized markdown under the question; Send waits meanwhile', async (t) => {
  if (!need(t)) return;
  model.script(() => ({ text: 'Here is **bold**, `code`, a [link](https://example.org/x) and <img src=x onerror="window.pwned=1"><script>window.pwned=2</script> done.', gapMs: 200 }));
  const chat = await newChat();
  const { page, errors } = await openChat(chat, { kernel: false });
  await ask(page, 'Say something\nin two lines');
  await page.locator('.msg[data-role=user]').waitFor();
  assert.equal(await page.locator('.msg[data-role=user] .msg-text').textContent(), 'Say something\nin two lines', 'Shift-less Enter sent; the text as typed');
  await page.locator('.msg[data-role=assistant][data-state=streaming]').waitFor({ timeout: 20_000 });
  assert.equal(await page.inputValue('#ask-text'), '', 'the sent message left the box');
  assert.equal(await page.locator('#ask-send').isDisabled(), true, 'no second question while the turn is open');
  assert.equal(await page.locator('#ask-stop').isVisible(), true);
  await assistantDone(page);
  const msg = page.locator('.msg[data-role=assistant]');
  assert.equal(await msg.locator('strong').textContent(), 'bold');
  assert.equal(await msg.locator('.msg-text code').textContent(), 'code');
  const a = msg.locator('a[href="https://example.org/x"]');
  assert.equal(await a.getAttribute('target'), '_blank');
  assert.equal(await a.getAttribute('rel'), 'noopener noreferrer');
  assert.equal(await msg.locator('script, [onerror], img[src=x]').count(), 0, 'script, handlers and a remote image are gone');
  assert.equal(await page.evaluate(() => window.pwned), undefined);
  assert.equal(await page.locator('#ask-text').isDisabled(), false);
  assert.equal(await page.locator('#ask-stop').isVisible(), false);
  // What reached the model.
  const req = model.requests[0];
  assert.equal(req.auth, `Bearer ${KEY}`);
  assert.equal(req.body.model, 'double-model');
  assert.equal(req.body.stream, true);
  assert.ok(req.body.tools.some((x) => x.function?.name === 'run_python'), 'the run_python tool is offered');
  assert.equal(byRole(req, 'user').at(-1).content.includes('Say something'), true);
  // Shift+Enter is a new line, not a send.
  await page.locator('#ask-text').focus();
  await page.keyboard.type('line one');
  await page.keyboard.press('Shift+Enter');
  await page.keyboard.type('line two');
  assert.equal(await page.inputValue('#ask-text'), 'line one\nline two');
  assert.equal(await page.locator('.msg').count(), 2);
  await finish(page, errors, 'assistant-plain');
});

test('a tool call runs in the page under the answer, its result reaches the model, then the answer', async (t) => {
  if (!need(t)) return;
  model.script((body) => (byRole({ body }, 'tool').length ? { text: 'The result is 42.' } : { tool: { code: 'print(6 * 7)' } }));
  const chat = await newChat();
  const { page, errors } = await openChat(chat);
  await ask(page, 'What is 6 * 7? Use Python.');
  await assistantDone(page);
  const conv = await shown(page);
  assert.deepEqual(conv.map((x) => x.role || 'run'), ['user', 'assistant'], JSON.stringify(conv));
  assert.deepEqual(conv[1].runs, ['ok:42'], 'the tool run under the answer');
  assert.equal(conv[1].text, 'The result is 42.');
  assert.equal(model.requests.length, 2);
  const toolMsg = byRole(model.requests[1], 'tool')[0];
  assert.match(String(toolMsg?.content ?? JSON.stringify(toolMsg)), /42/, 'the run\'s output reached the model');
  const card = page.locator('.msg[data-role=assistant] .run-card');
  assert.match(await card.textContent(), /tool run/);
  await finish(page, errors, 'assistant-tool');
});

// The answer's flow as the page shows it: each text piece and each card, in order.
const flowOf = (page) => page.$$eval('.msg[data-role=assistant] .msg-flow > *', (els) => els.map((el) => (el.classList.contains('run-card')
  ? `card:${el.dataset.status}:${(el.querySelector('pre.code')?.textContent || '').trim()}` : `text:${el.textContent.trim()}`)));

test('the tool card sits where the call happened, between the texts around it: live as the answer streams, and after a reload', async (t) => {
  if (!need(t)) return;
  const code = 'import time\ntime.sleep(1)\nprint(6 * 7)';
  model.script((body) => (byRole({ body }, 'tool').length
    ? { text: 'So the answer is 42, as printed above.', gapMs: 120 }
    : { text: 'Here is what the run printed:', tool: { code } }));
  const chat = await newChat();
  const { page, errors } = await openChat(chat);
  await ask(page, 'What is 6 * 7? Show the run.');
  // Live: the card comes after the first text while it runs ...
  await page.waitForFunction(() => document.querySelector('.msg[data-role=assistant] .msg-flow > .run-card'), null, { timeout: 30_000 });
  const running = await flowOf(page);
  assert.equal(running[0], 'text:Here is what the run printed:', running.join(' | '));
  assert.match(running[1], /^card:/, running.join(' | '));
  // ... and the text after the call streams in below the card, not above it.
  const streaming = await page.waitForFunction(() => {
    const m = document.querySelector('.msg[data-role=assistant]');
    const flow = [...m.querySelectorAll('.msg-flow > *')];
    return m.dataset.state === 'streaming' && flow.length === 3 && flow[2].textContent.trim().length > 0
      ? flow.map((el) => (el.classList.contains('run-card') ? 'card' : 'text')) : null;
  }, null, { timeout: 30_000 });
  assert.deepEqual(await streaming.jsonValue(), ['text', 'card', 'text'], 'the later text grows under the card');
  await assistantDone(page);
  const want = ['text:Here is what the run printed:', `card:ok:${code}`, 'text:So the answer is 42, as printed above.'];
  assert.deepEqual(await flowOf(page), want, 'live');
  assert.equal((await page.locator('.msg[data-role=assistant] .run-card [data-testid=stdout]').textContent()).trim(), '42');
  // The server's record says the same.
  const msg = (await api('GET', `/v1/chats/${chat.chat_id}/messages`)).json.messages.at(-1);
  assert.deepEqual(msg.parts.map((p) => p.type), ['text', 'run', 'text'], JSON.stringify(msg.parts));
  await page.reload();
  await page.waitForFunction(() => window.cereaSession?.stream?.state === 'open', null, { timeout: 20_000 });
  await page.locator('.msg[data-role=assistant][data-state=done] .run-card[data-status=ok] pre.code').waitFor({ timeout: 20_000 });
  assert.deepEqual(await flowOf(page), want, 'after a reload');
  await finish(page, errors, 'assistant-tool-in-place');
});

test('an answer\'s two python blocks auto-run in order and show in order, below the earlier turn', async (t) => {
  if (!need(t)) return;
  const answer = 'First:\n```python\nimport time\ntime.sleep(0.3)\nprint("one")\n```\nThen:\n```python\nprint("two")\n```\n';
  model.script((body) => (byRole({ body }, 'user').length > 1 ? { text: answer } : { text: 'Hello.' }));
  const chat = await newChat();
  const { page, errors } = await openChat(chat);
  await ask(page, 'hi');
  await assistantDone(page, 1);
  await ask(page, 'two blocks please');
  await assistantDone(page, 2);
  await page.waitForFunction(() => [...document.querySelectorAll('.msg')[3].querySelectorAll('.run-card')].filter((c) => c.dataset.status === 'ok').length === 2, null, { timeout: 60_000 });
  const conv = await shown(page);
  assert.deepEqual(conv.map((x) => `${x.role}:${x.text.split('\n')[0]}`), ['user:hi', 'assistant:Hello.', 'user:two blocks please', 'assistant:First:']);
  assert.deepEqual(conv[1].runs, []);
  assert.deepEqual(conv[3].runs, ['ok:one', 'ok:two'], 'first block first');
  const runs = (await api('GET', `/v1/chats/${chat.chat_id}/messages`)).json.messages.at(-1).run_ids;
  assert.equal(runs.length, 2);
  assert.deepEqual(await page.evaluate(() => [...document.querySelectorAll('.msg')[3].querySelectorAll('.run-card')].map((c) => c.dataset.runId)), runs, 'in run_ids order');
  // The answer's code blocks in syntax colours: the same text, in spans of the highlighter's classes.
  const blocks = await page.$$eval('.msg[data-role=assistant] .msg-text pre > code', (els) => els.map((c) => ({
    text: c.textContent, keyword: [...c.querySelectorAll('.tok-keyword')].map((x) => x.textContent),
    strings: [...c.querySelectorAll('.tok-string')].map((x) => x.textContent), tags: [...new Set([...c.querySelectorAll('*')].map((x) => x.tagName))] })));
  assert.equal(blocks[0].text, 'import time\ntime.sleep(0.3)\nprint("one")\n');
  assert.deepEqual(blocks[0].keyword, ['import']);
  assert.deepEqual(blocks[1].strings, ['"two"']);
  assert.deepEqual([...new Set(blocks.flatMap((b) => b.tags))], ['SPAN'], 'colouring adds spans only');
  // After a reload the auto runs' cards still show the code they ran (the run object's `code`).
  await page.reload();
  await page.waitForFunction(() => window.cereaSession?.stream?.state === 'open', null, { timeout: 20_000 });
  await page.waitForFunction(() => [...document.querySelectorAll('.msg')[3]?.querySelectorAll('.run-card pre.code') || []].length === 2, null, { timeout: 20_000 });
  assert.deepEqual(await page.$$eval('.msg:nth-child(4) .run-card pre.code', (els) => els.map((e) => e.textContent)),
    ['import time\ntime.sleep(0.3)\nprint("one")', 'print("two")'], 'the auto runs\' code, after a reload');
  await finish(page, errors, 'assistant-two-blocks');
});

test('a second tab sees the same conversation live, and again after a reload', async (t) => {
  if (!need(t)) return;
  const text = 'This answer comes in slowly, piece by piece, so the other tab sees it grow.';
  model.script(() => ({ text, gapMs: 500 }));
  const chat = await newChat();
  const { page } = await openChat(chat, { kernel: false });
  const { page: other, errors } = await openChat(chat, { kernel: false });
  const grew = other.evaluate(() => new Promise((resolve) => {
    const seen = new Set();
    const check = () => {
      const m = document.querySelector('.msg[data-role=assistant]');
      if (m) seen.add(`${m.dataset.state}:${m.querySelector('.msg-text').textContent.length}`);
      if (m?.dataset.state === 'done') { resolve([...seen]); return; }
      requestAnimationFrame(check);
    };
    check();
  }));
  await page.bringToFront();
  await ask(page, 'Tell me slowly');
  await other.locator('.msg[data-role=user]').waitFor({ timeout: 20_000 });
  await other.locator('.msg[data-role=assistant][data-state=streaming]').waitFor({ timeout: 20_000 });
  assert.equal(await other.locator('#ask-send').isDisabled(), true, 'the other tab cannot open a second turn');
  const states = await grew;
  const partial = states.filter((s) => s.startsWith('streaming:') && Number(s.split(':')[1]) > 0 && Number(s.split(':')[1]) < text.length);
  assert.ok(partial.length >= 2, `the other tab saw the answer grow: ${states.join(' ')}`);
  const want = await shown(page);
  assert.deepEqual(await shown(other), want);
  await other.reload();
  await other.locator('.msg[data-role=assistant][data-state=done]').waitFor({ timeout: 20_000 });
  assert.deepEqual(await shown(other), want, 'the conversation comes back after a reload');
  assert.equal(want[1].text, text);
  assert.deepEqual(pageErrors(errors), []);
  await other.close();
  await page.close();
});

test('a model error is shown in the chat as such, and the next question can be asked', async (t) => {
  if (!need(t)) return;
  model.script(() => ({ status: 500, message: 'the double is down' }));
  const chat = await newChat();
  const { page } = await openChat(chat, { kernel: false });
  await ask(page, 'Are you there?');
  const msg = page.locator('.msg[data-role=assistant][data-state=error]');
  await msg.waitFor({ timeout: 30_000 });
  const status = await msg.locator('[data-testid=message-status]').textContent();
  assert.match(status, /^The model answered HTTP 500: .*the double is down/);
  assert.doesNotMatch(status, /answered.*answered/, 'said once');
  assert.doesNotMatch(status, new RegExp(KEY));
  assert.equal(await page.locator('#ask-text').isDisabled(), false);
  await screenshot(page, 'assistant-model-error');
  await page.close();
});

test('Stop ends an answer that stalls: the text so far stays, the message says it stopped; the next message can be drafted meanwhile', async (t) => {
  if (!need(t)) return;
  model.script(() => ({ stallAfter: 'I was about to' }));
  const chat = await newChat();
  const { page } = await openChat(chat, { kernel: false });
  await ask(page, 'Start and stall');
  await page.locator('.msg[data-role=assistant] .msg-text', { hasText: 'I was about to' }).waitFor({ timeout: 20_000 });
  // The box takes a draft while the answer is open; Send waits, and Enter says why.
  assert.equal(await page.locator('#ask-send').isDisabled(), true, 'no second question while the turn is open');
  await page.locator('#ask-text').focus();
  await page.keyboard.type('a draft');
  assert.equal(await page.inputValue('#ask-text'), 'a draft', 'typing works while the answer is open');
  await page.keyboard.press('Enter');
  assert.match(await page.locator('#ask-status').textContent(), /still being written: your message stays here/);
  assert.equal(await page.inputValue('#ask-text'), 'a draft', 'Enter while the answer is open keeps the draft');
  assert.equal(await page.locator('.msg[data-role=user]').count(), 1, 'the draft was not sent');
  await page.click('#ask-stop');
  const msg = page.locator('.msg[data-role=assistant][data-state=stopped]');
  await msg.waitFor({ timeout: 10_000 });
  assert.equal((await msg.locator('.msg-text').textContent()).trim(), 'I was about to');
  assert.match(await msg.locator('[data-testid=message-status]').textContent(), /Stopped/);
  await page.locator('#ask-send:not([disabled])').waitFor({ timeout: 10_000 });
  assert.equal(await page.locator('#ask-status').textContent(), '', 'the waiting note goes once Send works again');
  assert.equal(await page.inputValue('#ask-text'), 'a draft', 'the draft is still there to send');
  await page.close();
});

test('on a phone: the tool run under the answer says to keep the page open while it runs', async (t) => {
  if (!need(t)) return;
  phone ||= await launch({ viewport: PHONE, isMobile: true });
  model.script((body) => (byRole({ body }, 'tool').length ? { text: 'Slept.' } : { tool: { code: 'import time\ntime.sleep(2)\nprint("awake")' } }));
  const chat = await newChat();
  const { page, errors } = await openChat(chat, { ctx: phone.ctx });
  await ask(page, 'Sleep two seconds');
  await page.locator('.msg[data-role=assistant] .run-card .keep-open').waitFor({ timeout: 30_000 });
  await assistantDone(page);
  assert.deepEqual((await shown(page))[1].runs, ['ok:awake']);
  assert.equal(await page.locator('.keep-open').count(), 0, 'gone once the run ended');
  const width = await page.evaluate(() => document.documentElement.scrollWidth);
  assert.ok(width <= 390, `no sideways scroll on a phone (${width} px)`);
  await finish(page, errors, 'assistant-phone');
});

test('the page in the background during a tool run: the run pauses and the turn waits; back in front, it runs again and the turn finishes', async (t) => {
  if (!need(t)) return;
  model.script((body) => (byRole({ body }, 'tool').length ? { text: 'Finished after the pause.' }
    : { tool: { code: 'import time\nt = time.time()\nwhile time.time() - t < 4:\n    pass\nprint("back")' } }));
  const chat = await newChat();
  const { page, errors } = await openChat(chat);
  await ask(page, 'Run something long');
  await page.waitForFunction(() => window.cereaSession.current?.state === 'running' && window.cereaSupervisor.state === 'busy', null, { timeout: 30_000 })
    .catch(async (e) => {   // say where the turn was, so a failure explains itself
      const runs = (await api('GET', `/v1/chats/${chat.chat_id}/runs`)).json?.runs?.map((r) => `${r.origin}:${r.state}:${r.status}:${r.attempts}`);
      const here = await page.evaluate(() => ({ current: window.cereaSession.current && { state: window.cereaSession.current.state }, kernel: window.cereaSupervisor.state, visible: document.visibilityState }));
      throw new Error(`${e.message}; runs ${JSON.stringify(runs)}; page ${JSON.stringify(here)}; model requests ${model.requests.length}`);
    });
  const runId = await page.evaluate(() => window.cereaSession.current.run_id);
  const cdp = await page.context().newCDPSession(page);
  await background(page, cdp);
  let paused = false;
  for (let i = 0; i < 100 && !paused; i++) {
    paused = (await api('GET', `/v1/runs/${runId}`)).json.state === 'paused';
    if (!paused) await new Promise((r) => setTimeout(r, 100));
  }
  assert.ok(paused, 'the tool run paused while the page was in the background');
  const waiting = (await api('GET', `/v1/chats/${chat.chat_id}/messages`)).json.messages.at(-1);
  assert.equal(waiting.state, 'streaming', 'the turn waits');
  assert.equal(model.requests.length, 1, 'nothing went back to the model meanwhile');
  await foreground(page, cdp);
  await assistantDone(page);
  const conv = await shown(page);
  assert.deepEqual(conv[1].runs, ['ok:back']);
  assert.equal(conv[1].text, 'Finished after the pause.');
  assert.ok((await api('GET', `/v1/runs/${runId}`)).json.attempts >= 2, 'run again as a new attempt');
  assert.match(String(byRole(model.requests[1], 'tool')[0]?.content), /back/);
  await finish(page, errors, 'assistant-paused');
});

test('no model configured: the page says so plainly and keeps "run your own code"', async () => {
  plain = await orchestrator();
  if (plain.skip) throw new Error(plain.skip);
  const papi = backend(plain.origin, plain.apiKey);
  const cfg = await (await fetch(`${plain.origin}/v1/config`)).json();
  assert.ok(!cfg.assistant, `no assistant in /v1/config: ${JSON.stringify(cfg.assistant)}`);
  const chat = await newChat(papi);
  const { page, errors } = await openChat(chat, { origin: plain.origin });
  const note = page.locator('[data-testid=no-model]');
  await note.waitFor({ state: 'visible', timeout: 10_000 });
  assert.match(await note.textContent(), /No assistant model is configured on this deployment/);
  assert.equal(await page.locator('#ask').isVisible(), false, 'no message box that cannot work');
  await page.click('#composer summary');
  await page.waitForFunction(() => window.cereaChatEditor);   // made when the disclosure opens
  await page.evaluate(() => window.cereaChatEditor.setCode('print("mine")'));
  await page.click('#run');
  const card = page.locator('#conversation > .run-card[data-status=ok]');
  await card.waitFor({ timeout: 60_000 });
  assert.equal((await card.locator('[data-testid=stdout]').textContent()).trim(), 'mine');
  await finish(page, errors, 'assistant-no-model');
});
