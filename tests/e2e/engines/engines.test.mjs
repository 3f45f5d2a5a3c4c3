// engines.test.mjs -- the engine-independent part of the e2e suite, once per engine (drivers.mjs):
// Chromium, Firefox ESR, WebKitGTK with SharedArrayBuffer (as Safari has it) and WebKitGTK without
// it (as it ships; an embedding webview or a proxy that strips COOP/COEP is the same page).  Each
// drives the reference chat page through the API against the real orchestrator (one for all
// engines) and checks: a run in the page (page open → first result, timed), the value and display()
// bundles on the card, live output, the time limit → restart → remount, Stop during time.sleep (the
// namespace kept with shared memory; without it the kernel is replaced at once and the card says
// why and that variables are lost), input() (answered from the card; without shared memory EOFError
// with its note), asyncio.run() (its value where the engine has JSPI, whichever way the kernel
// started; without JSPI a clear RuntimeError, never a hang), the escape probes (escape-probes.mjs,
// run in the chat's kernel), the chat page's conversation (a question asked in the page, the
// assistant's tool call run there) and a page reload (its event stream open well before the
// server's first heartbeat; the kernel restored from the kept image, asyncio.run() as before).  A missing engine is a printed skip on a developer
// machine and a failure where CI is set.  The assistant's model is a TEST DOUBLE (model-double.mjs,
// a scripted OpenAI-compatible server: no model runs here).  The figures are printed at the end.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { orchestrator, backend } from '../harness.mjs';
import { listenForProbe, probeCode, PROBE_REPORT } from '../escape-probes.mjs';
import { startModelDouble, byRole } from '../model-double.mjs';
import { ENGINES, missing, open } from './drivers.mjs';
import { NOTE, noteCode } from '../../../worker/notes.js';

let orch = null, api = null, orchSkip = null, sentinel = null, hits = [], model = null;
const figures = [];

before(async () => {
  model = await startModelDouble();
  orch = await orchestrator({ env: { CEREA_LLM_URL: model.url, CEREA_LLM_MODEL: 'double-model', CEREA_LLM_API_KEY: 'sk-double-0123456789' } });
  if (orch.skip) { orchSkip = orch.skip; return; }
  api = backend(orch.origin, orch.apiKey);
  sentinel = http.createServer((req, res) => { hits.push(`${req.method} ${req.url}`); res.end('reached'); });
  sentinel.on('upgrade', (req, sock) => { hits.push(`ws ${req.url}`); sock.destroy(); });
  await new Promise((r) => sentinel.listen(0, '127.0.0.1', r));
});
after(async () => {
  sentinel?.closeAllConnections?.(); sentinel?.close();
  if (orch && !orch.skip) await orch.stop();
  await model?.close();
  for (const f of figures) console.log(`# engines: ${f}`);
});

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const card = (runId) => `.run-card[data-run-id="${runId}"]`;
const RESTARTED = NOTE.restarted([]).split(':')[0];   // "The sandbox was restarted"

async function newChat() {
  const c = await api('POST', '/v1/chats', {});
  assert.equal(c.status, 201, c.text);
  return c.json;
}
async function createRun(chat, code, extra = {}) {
  const r = await api('POST', `/v1/chats/${chat.chat_id}/runs`, { code, origin: 'tool', ...extra });
  assert.ok(r.status === 201 || r.status === 200, r.text);
  return r.json.run_id;
}
// The run once done (a kernel load in WebKit on a loaded machine can outlast one wait_s).
async function result(runId, waitS = 180) {
  const t0 = Date.now();
  for (;;) {
    const r = (await api('GET', `/v1/runs/${runId}?wait_s=30`)).json;
    if (r.state === 'done' || Date.now() - t0 > waitS * 1000) return r;
  }
}
// The page's spare kernel loaded (a Stop or the time limit replaces the kernel from it).  Polled:
// WebKit's loads under a loaded machine outlast one WebDriver script.
async function spareReady(page) {
  await page.evaluate(() => { window.spareSeen = false; window.cereaSupervisor.whenSpareReady().then((ok) => { window.spareSeen = ok; }); });
  await page.waitForFunction(() => window.spareSeen, null, { timeout: 180_000 });
}
// The card's text once its status is one of `statuses`.
async function cardDone(page, runId, statuses = ['ok', 'error', 'cancelled', 'timeout', 'crashed'], timeout = 60_000) {
  return page.waitForFunction(([sel, st]) => {
    const c = document.querySelector(sel);
    return c && st.includes(c.dataset.status) ? { status: c.dataset.status, text: c.textContent,
      stdout: c.querySelector('[data-testid=stdout]')?.textContent || '',
      notes: [...c.querySelectorAll('[data-testid=note]')].map((n) => n.textContent),
      restart: c.querySelector('[data-testid=restart-note]')?.textContent || null } : null;
  }, [card(runId), statuses], { timeout });
}

for (const engine of ENGINES) {
  describe(engine.label, () => {
    let page = null, skip = null, chat = null;
    const lacking = missing(engine.id);

    before(async () => {
      if (orchSkip) { skip = `orchestrator unavailable: ${orchSkip}`; return; }
      if (lacking) {
        if (process.env.CI) throw new Error(`${engine.label}: ${lacking} (CI runs every engine)`);
        skip = lacking;
        console.log(`# engines: ${engine.id} skipped: ${lacking}`);
        return;
      }
      page = await open(engine.id);
    });
    after(async () => { await page?.close(); });
    const need = (t) => { if (skip) { t.skip(skip); return false; } return true; };

    test('a run in the page: page open → first result; the value and display() bundles on the card', async (t) => {
      if (!need(t)) return;
      chat = await newChat();
      const t0 = Date.now();
      await page.goto(`${orch.origin}/chat/${chat.chat_id}#token=${chat.page_token}`);
      const first = await createRun(chat, 'print("hello from", "the page")');
      const r = await result(first);
      const ms = Date.now() - t0;
      assert.equal(r.status, 'ok', JSON.stringify(r.error));
      assert.equal(r.stdout, 'hello from the page\n');
      const env = await page.evaluate(() => ({ coi: self.crossOriginIsolated, sab: typeof SharedArrayBuffer === 'function',
        jspi: typeof WebAssembly.Suspending === 'function' }));
      assert.equal(env.coi, true, 'the app page is cross-origin isolated');
      assert.equal(env.sab, engine.sab, `SharedArrayBuffer ${env.sab ? 'present' : 'absent'}`);
      figures.push(`${engine.id}: page open → first result ${ms} ms (SharedArrayBuffer ${env.sab ? 'yes' : 'no'}, JSPI ${env.jspi ? 'yes' : 'no'})`);
      t.diagnostic(`page open → first result ${ms} ms`);
      if (engine.id.startsWith('webkit')) assert.equal(env.jspi, false, 'WebKitGTK has no JSPI: the kernel loaded without it');

      const code = [
        'class Table:',
        '    def _repr_html_(self):',
        '        return "<table id=\'t\'><tr><td>cell</td></tr></table>"',
        'class Dot:',
        '    def _repr_svg_(self):',
        '        return \'<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><circle cx="5" cy="5" r="4"/></svg>\'',
        'display(Table())', 'display(Dot())', 'display("plain")', '6 * 7',
      ].join('\n');
      const runId = await createRun(chat, code);
      await cardDone(page, runId, ['ok']);
      const seen = await page.evaluate((sel) => {
        const c = document.querySelector(sel);
        const d = [...c.querySelectorAll('[data-testid=display]')];
        return { value: c.querySelector('[data-testid=value]')?.textContent, n: d.length,
          sandbox: d[0]?.querySelector('iframe')?.getAttribute('sandbox'), svg: d[1]?.querySelector('img')?.getAttribute('src')?.slice(0, 26),
          plain: d[2]?.textContent, inPage: !!document.getElementById('t') };
      }, card(runId));
      assert.deepEqual(seen, { value: '42', n: 3, sandbox: 'allow-scripts', svg: 'data:image/svg+xml;base64,', plain: "'plain'", inPage: false });
    });

    test('live output: a line a second for 3 s, the first line on the card >= 1.5 s before the end', async (t) => {
      if (!need(t)) return;
      const runId = await createRun(chat, 'import time\nfor i in range(3):\n    print("line", i)\n    time.sleep(1)');
      const seen = await page.evaluate(({ sel }) => new Promise((resolve) => {
        const t0 = performance.now();
        let first = null;
        const timer = setInterval(() => {
          const c = document.querySelector(sel);
          if (first === null && (c?.querySelector('[data-testid=stdout]')?.textContent || '').includes('line 0')) first = performance.now() - t0;
          if (c && c.dataset.status === 'ok') { clearInterval(timer); resolve({ first, end: performance.now() - t0 }); }
          if (performance.now() - t0 > 50_000) { clearInterval(timer); resolve({ first, end: null }); }
        }, 50);
      }), { sel: card(runId) });
      assert.ok(seen.end !== null, 'the run ended');
      assert.ok(seen.first !== null && seen.end - seen.first >= 1500, `first line at ${seen.first} ms, done at ${seen.end} ms`);
      assert.equal((await result(runId)).stdout, 'line 0\nline 1\nline 2\n');
    });

    test('the time limit: the kernel replaced, the chat\'s file remounted, the variables gone', async (t) => {
      if (!need(t)) return;
      const up = await api('POST', `/v1/chats/${chat.chat_id}/files?name=notes.txt`, Buffer.from('kept across restarts'));
      assert.ok(up.status === 201 || up.status === 200, up.text);
      await result(await createRun(chat, 'print(open("/mnt/data/notes.txt").read())'));
      await spareReady(page);
      // (Without shared memory the kernel's streams flush from their write path and before a
      // sleep: what a CPU loop's last ~50 ms wrote before it stops writing stays in Python, so
      // the run sleeps a moment before its loop, as the kernel tests do.)
      const runId = await createRun(chat, 'import time\nx = 41\nprint(open("/mnt/data/notes.txt").read())\ntime.sleep(0.2)\nwhile True: pass', { timeout_s: 3 });
      const r = await result(runId);
      assert.equal(r.status, 'timeout');
      assert.equal(r.stdout, 'kept across restarts\n', 'what it printed before the limit is kept');
      assert.equal(r.restarted, true);
      assert.deepEqual(r.remounted, ['notes.txt']);
      const shown = await cardDone(page, runId, ['timeout']);
      assert.match(shown.text, /time limit of 3 s/);
      assert.ok(shown.restart && shown.restart.startsWith(RESTARTED), `the card says the sandbox was restarted: ${shown.text}`);
      const next = await result(await createRun(chat, 'print(open("/mnt/data/notes.txt").read(), "x" in globals())'));
      assert.equal(next.stdout, 'kept across restarts False\n');
    });

    test(engine.sab ? 'Stop during time.sleep: cancelled within 1.5 s, the namespace kept'
      : 'Stop during time.sleep without shared memory: the kernel replaced within 2 s, the card says why and that variables are lost', async (t) => {
      if (!need(t)) return;
      await result(await createRun(chat, 'kept = "yes"'));
      await spareReady(page);
      const runId = await createRun(chat, 'import time\nprint("sleeping")\nwhile True:\n    time.sleep(1)');
      await page.waitForFunction((id) => window.cereaSession.current?.run_id === id && window.cereaSession.current.state === 'running', runId, { timeout: 30_000 });
      await sleep(500);
      const t0 = Date.now();
      await page.click(`${card(runId)} [data-testid=cancel]`);
      const r = await result(runId);
      const ms = Date.now() - t0;
      figures.push(`${engine.id}: Stop during time.sleep → cancelled result ${ms} ms (restarted: ${r.restarted})`);
      t.diagnostic(`Stop → result ${ms} ms`);
      assert.equal(r.status, 'cancelled');
      const shown = await cardDone(page, runId, ['cancelled']);
      const after = await result(await createRun(chat, 'print(globals().get("kept"))'));
      if (engine.sab) {
        assert.equal(r.restarted, false, JSON.stringify(r.notes));
        assert.ok(ms < 1500, `cancelled in ${ms} ms`);
        assert.equal(after.stdout, 'yes\n');
      } else {
        assert.equal(r.restarted, true);
        assert.ok(ms < 2000, `replaced in ${ms} ms`);
        assert.deepEqual(r.notes.map(noteCode), ['cancel_no_interrupt'], JSON.stringify(r.notes));
        assert.ok(shown.restart && /variables .* are gone/.test(shown.restart), `the card says variables are lost: ${shown.text}`);
        assert.equal(shown.notes.filter((n) => noteCode(n) === 'cancel_no_interrupt').length, 1, 'said once');
        assert.equal(after.stdout, 'None\n');
      }
    });

    test(engine.sab ? 'input() answered from the card\'s field' : 'input() without shared memory: EOFError at once, with its note', async (t) => {
      if (!need(t)) return;
      const runId = await createRun(chat, 'name = input("Name? ")\nprint("hi", name)');
      if (engine.sab) {
        await page.waitForSelector(`${card(runId)} [data-testid=input-field]`, { timeout: 30_000 });
        await page.fill(`${card(runId)} [data-testid=input-field]`, 'Ada');
        await page.click(`${card(runId)} [data-testid=input-send]`);
        const r = await result(runId);
        assert.equal(r.status, 'ok', JSON.stringify(r.error));
        assert.equal(r.stdout, 'Name? Ada\nhi Ada\n');
      } else {
        const r = await result(runId);
        assert.equal(r.status, 'error');
        assert.equal(r.error.type, 'EOFError');
        assert.deepEqual(r.notes.map(noteCode), ['input_unavailable']);
        const shown = await cardDone(page, runId, ['error']);
        assert.equal(shown.notes.filter((n) => noteCode(n) === 'input_unavailable').length, 1, shown.text);
      }
    });

    // asyncio.run() from a cell's synchronous code.  Whatever the start path: a kernel restored
    // from the memory image (made by setup in Node, which has no JSPI) suspends its stack where
    // the engine can, as a loaded one does (worker/stack-switching.js), and fails as a loaded one
    // does where it cannot.
    async function asyncioRun(t) {
      const runId = await createRun(chat, 'import asyncio\nasync def main():\n    await asyncio.sleep(0.1)\n    return 7\nprint(asyncio.run(main()))', { timeout_s: 20 });
      const r = await result(runId);
      const jspi = await page.evaluate(() => typeof WebAssembly.Suspending === 'function');
      const start = await page.evaluate(() => window.cereaSupervisor.kernel?.info?.snapshot);
      t.diagnostic(`JSPI ${jspi}, kernel start ${start}: ${r.status} ${r.stdout.trim()} ${r.error ? `${r.error.type}: ${r.error.message}` : ''}`);
      assert.equal(jspi, engine.id === 'chromium' || engine.id === 'firefox', 'JSPI in Chromium and Firefox, not in WebKitGTK');
      if (jspi) assert.equal(r.stdout, '7\n', `kernel start ${start}: ${JSON.stringify(r.error)}`);
      else {
        assert.equal(r.status, 'error', 'a clear error, not the time limit');
        assert.equal(`${r.error.type}: ${r.error.message}`, 'RuntimeError: WebAssembly stack switching not supported in this JavaScript runtime');
      }
    }

    test('asyncio.run() returns its value with JSPI (restored or loaded kernel), a clear RuntimeError without, never hangs', async (t) => {
      if (!need(t)) return;
      await asyncioRun(t);
      // The kernel is fine afterwards.
      assert.equal((await result(await createRun(chat, 'print(1 + 1)'))).stdout, '2\n');
    });

    test('the escape probes: every way out of the kernel is blocked, nothing reaches another server', async (t) => {
      if (!need(t)) return;
      hits.length = 0;
      await listenForProbe(page);
      const started = await result(await createRun(chat, probeCode(`http://127.0.0.1:${sentinel.address().port}`)));
      assert.match(started.stdout, /probes started/, JSON.stringify(started.error));
      await sleep(1500);   // the probes' promises settle
      const report = await result(await createRun(chat, PROBE_REPORT));
      const results = JSON.parse(report.stdout);
      const reached = Object.entries(results).filter(([, v]) => !v.startsWith('blocked') && v !== 'pending');
      assert.deepEqual(reached, [], `probes that escaped: ${JSON.stringify(reached)}`);
      assert.ok(Object.keys(results).length >= 15, JSON.stringify(results));
      assert.deepEqual(hits, [], 'the sentinel server saw no request');
      assert.deepEqual(await page.evaluate(() => window.bcGot), [], 'no BroadcastChannel message reached the page');
    });

    test('the conversation: a question asked in the page, the assistant\'s tool call run in the page, its answer shown', async (t) => {
      if (!need(t)) return;
      model.script((body, n) => (n === 0 ? { tool: { code: 'print(6 * 7)' } } : { text: 'The tool printed forty-two.' }));
      await page.waitForSelector('#ask:not([hidden]) #ask-text:not([disabled])', { timeout: 30_000 });
      await page.fill('#ask-text', 'What is six times seven?');
      await page.click('#ask-send');
      const shown = await page.waitForFunction(() => {
        const a = [...document.querySelectorAll('.msg[data-role=assistant]')].at(-1);
        return a && a.dataset.state === 'done' ? { text: a.querySelector('.msg-text').textContent.trim(),
          runs: [...a.querySelectorAll('.run-card')].map((c) => `${c.dataset.status}:${(c.querySelector('[data-testid=stdout]')?.textContent || '').trim()}`),
          asked: [...document.querySelectorAll('.msg[data-role=user] .msg-text')].at(-1)?.textContent.trim() } : null;
      }, null, { timeout: 90_000 });
      assert.deepEqual(shown, { text: 'The tool printed forty-two.', runs: ['ok:42'], asked: 'What is six times seven?' });
      assert.match(JSON.stringify(byRole(model.requests[1], 'tool')), /42/, 'the run\'s output reached the model');
    });

    test('a page reload: the kernel restored from the memory snapshot, the earlier cards back, a new run works, asyncio.run() as before', async (t) => {
      if (!need(t)) return;
      const t0 = Date.now();
      await page.reload();
      await page.waitForFunction(() => window.cereaSession?.stream?.state === 'open', null, { timeout: 30_000 });
      // The stream opens with the page, not with the server's first heartbeat 15 s later (Firefox's
      // fetch() resolves only once body bytes arrive: the stream's head goes with a comment).
      const opened = Date.now() - t0;
      figures.push(`${engine.id}: reload → event stream open ${opened} ms`);
      assert.ok(opened < 14_000, `the event stream opened ${opened} ms after the reload: it waited for the 15 s heartbeat`);
      await page.waitForText('.run-card [data-testid=stdout]', 'hello from the page', { timeout: 30_000 });
      // The run goes once the kernel is back: the orchestrator's watchdog counts a dispatched run's
      // time limit while the page loads it, and a reload is a whole kernel load (WebKit's take
      // tens of seconds on a loaded machine).
      await page.waitForFunction(() => window.cereaSupervisor?.state === 'ready', null, { timeout: 180_000 });
      // The spare of the first visit made the memory snapshot: this kernel is restored from it
      // (in WebKit's automation session, as in private browsing, IndexedDB refuses a Blob: the
      // image is kept as an ArrayBuffer there).
      assert.equal(await page.evaluate(() => window.cereaSupervisor.kernel?.info?.snapshot), 'restored');
      const r = await result(await createRun(chat, 'print("after reload")'));
      assert.equal(r.status, 'ok', JSON.stringify(r.error));
      assert.equal(r.stdout, 'after reload\n');
      await asyncioRun(t);
    });

  });
}
