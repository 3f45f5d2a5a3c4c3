// orchestrator_crash.test.mjs -- kill -9 of the real server under load, with real clients in the
// middle of what they do, then a restart on the same data directory and port:
// - an assistant answer streaming (the model is the TEST DOUBLE of model_double.mjs: a scripted
//   OpenAI-compatible server; no model runs here) to a scripted page;
// - an MCP tools/call with progress from the official SDK client (@modelcontextprotocol/sdk),
//   its run held and printing on a scripted page;
// - a run printing live (a scripted page posting output, a run stream reading it);
// - beside them a storm: scripted pages in other chats running every run a backend creates and
//   uploads it makes, each acknowledged result and file recorded.
// After the restart: every acknowledged result, file and message is there; the conversation reads
// in order with the cut answer `error`/`interrupted`; the clients got an error (not a hang); the
// runs held by pages go out again (attempt 2, docs/api.md) and end with their new page's result;
// the MCP client resumes with wait_for_run; the store passes its integrity check.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, call, newChat, upload, Page, runEvents, sleep, PG, sqlQuery } from './lib.mjs';
import { startModelDouble } from './model_double.mjs';
import { mcpClient, textOf, runOf } from './mcp_lib.mjs';

const env = (m) => ({ CEREA_LLM_URL: m.url, CEREA_LLM_MODEL: 'double-model', CEREA_LLM_API_KEY: 'sk-double-crash-0123456789', CEREA_LLM_STALL_S: '30' });
// p, or a failure naming what hung after ms.
function within(p, ms, what) {
  let t;
  const late = new Promise((_, reject) => { t = setTimeout(() => reject(new Error(`${what}: nothing within ${ms} ms`)), ms); });
  return Promise.race([p, late]).finally(() => clearTimeout(t));
}

// A chat whose page runs every run it is sent and whose backend keeps creating runs and uploading
// files; what the server acknowledged is kept in acked.
function storm(srv, chat, acked, tag) {
  const page = new Page(srv, chat, `storm-${tag}`);
  const state = { stop: false, page };
  const runner = (async () => {
    await page.opened;
    while (!state.stop) {
      let ev;
      try { ev = await page.nextRun(2000); } catch { continue; /* none yet: stopped? */ }
      const run = ev.data, stdout = `done ${run.code}\n`;
      try {
        if ((await page.started(run)).status !== 200) continue;
        if ((await page.result(run, { stdout })).status === 200) acked.runs.push({ id: run.run_id, stdout });
      } catch { return; /* the server is gone */ }
    }
  })();
  const maker = (async () => {
    await page.opened;
    for (let i = 0; !state.stop; i++) {
      try {
        const r = await call(srv, 'POST', `/v1/chats/${chat.id}/runs`, { body: { code: `print(${tag}${i})` } });
        if (r.status !== 201) await sleep(50);
        if (i % 4 === 0) {
          const bytes = Buffer.from(`file ${tag} ${i} ${'x'.repeat(i % 50)}\n`);
          const u = await upload(srv, chat, `f-${tag}-${i}.txt`, bytes);
          if (u.status === 201) acked.files.push({ id: u.json.file_id, bytes });
        }
      } catch { return; }
    }
  })();
  state.done = Promise.all([runner, maker]);
  return state;
}

test('kill -9 mid-answer, mid-MCP-call with progress and mid-live-output, under a storm: nothing acknowledged lost, each in a clear state, clients told, the store intact', { timeout: 180000 }, async () => {
  const model = await startModelDouble();
  let srv = await startServer({ env: env(model) });
  const port = srv.port, dataDir = srv.dataDir;
  const acked = { runs: [], files: [] };
  const storms = [];
  let mcp;
  try {
    // ---- the load
    for (const tag of ['a', 'b', 'c']) storms.push(storm(srv, await newChat(srv), acked, tag));

    // ---- the conversation: one whole turn, then an answer cut while it streams
    const talk = await newChat(srv);
    const talkPage = new Page(srv, talk, 'talk');
    await talkPage.opened;
    model.script.push({ text: 'The first answer, whole.', pieces: 3, delayMs: 20 });
    const first = await call(srv, 'POST', `/v1/chats/${talk.id}/messages`, { token: talk.token, body: { text: 'first question' } });
    assert.equal(first.status, 201, first.buf.toString());
    await talkPage.next((e) => e.event === 'message' && e.id !== null && e.data.message_id === first.json.answer_id && e.data.state === 'done', 20000);
    const longText = Array.from({ length: 40 }, (_, i) => `word${i}`).join(' ');
    model.script.push({ text: longText, pieces: 40, delayMs: 250 });
    const second = await call(srv, 'POST', `/v1/chats/${talk.id}/messages`, { token: talk.token, body: { text: 'second question' } });
    assert.equal(second.status, 201, second.buf.toString());
    await talkPage.next((e) => e.event === 'message' && e.id === null && e.data.message_id === second.json.answer_id && e.data.delta, 20000);

    // ---- an MCP call with progress, its run held and printing on a page
    const toolChat = await newChat(srv);
    const toolPage = new Page(srv, toolChat, 'tool-page');
    await toolPage.opened;
    mcp = await mcpClient(srv);
    const transportErrors = [];
    mcp.client.onerror = (e) => transportErrors.push({ at: Date.now(), message: e.message });
    const progress = [];
    // The SDK (1.32) does not end a request whose SSE stream broke before its response: it reports
    // the break to onerror and the request ends at its own timeout, set short here.
    const pending = mcp.client.callTool({ name: 'run_python', arguments: { chat_id: toolChat.id, code: 'for i in range(100): print(i)' } },
      undefined, { onprogress: (p) => progress.push(p), timeout: 20000 });
    const settledCall = pending.then((r) => ({ result: r }), (error) => ({ error }));
    const toolRun = (await toolPage.nextRun(20000)).data;
    assert.equal((await toolPage.started(toolRun)).status, 200);
    assert.equal((await toolPage.output(toolRun, { chunks: [{ stream: 'stdout', offset: 0, text: '0\n1\n' }] })).status, 200);
    for (let i = 0; !progress.some((p) => runOf(p)?.text?.includes('1\n')); i++) {
      assert.ok(i < 200, `the SDK client got no progress with the output: ${JSON.stringify(progress)}`);
      await sleep(50);
    }

    // ---- a run printing live, read by a run stream
    const liveChat = await newChat(srv);
    const livePage = new Page(srv, liveChat, 'live-page');
    await livePage.opened;
    const created = await call(srv, 'POST', `/v1/chats/${liveChat.id}/runs`, { body: { code: 'while True: print("tick")' } });
    assert.equal(created.status, 201);
    const liveRun = (await livePage.nextRun(20000)).data;
    assert.equal(liveRun.run_id, created.json.run_id);
    assert.equal((await livePage.started(liveRun)).status, 200);
    const watcher = runEvents(srv, liveRun.run_id);
    await watcher.opened;
    let printed = 0;
    const printer = (async () => {
      for (;;) {
        try { await livePage.output(liveRun, { chunks: [{ stream: 'stdout', offset: printed, text: 'tick\n' }] }); } catch { return; }
        printed += 5;
        await sleep(100);
      }
    })();
    await watcher.next((e) => e.event === 'output' && e.data.text.includes('tick'), 20000);

    // ---- the kill, with all of it in flight and the storm going
    await sleep(300);
    const ackedBefore = { runs: acked.runs.length, files: acked.files.length };
    assert.ok(ackedBefore.runs > 0, 'the storm had results acknowledged before the kill');
    const killedAt = Date.now();
    await srv.stop('SIGKILL');
    storms.forEach((s) => { s.stop = true; });

    // Every client hears of it: no hang.
    for (let i = 0; !transportErrors.some((e) => /disconnected|terminated|fetch failed/i.test(e.message)); i++) {
      assert.ok(i < 200, `the SDK client's transport reported no break: ${JSON.stringify(transportErrors)}`);
      await sleep(50);
    }
    console.log(`# the SDK client's transport: "${transportErrors[0].message}" ${transportErrors[0].at - killedAt} ms after the kill`);
    const told = await within(settledCall, 40000, 'the MCP client after the kill');
    assert.ok(told.error, `the SDK client's call failed (it got ${JSON.stringify(told.result)?.slice(0, 200)})`);
    assert.equal(told.error.code, -32001, `the call ended by its timeout: ${told.error.message}`);
    await within(watcher.ended, 10000, 'the run stream after the kill');
    await within(talkPage.ended, 10000, 'the chat stream after the kill');
    await within(printer, 10000, 'the printing page after the kill');
    await within(Promise.all(storms.map((s) => s.done)), 30000, 'the storm after the kill');
    storms.forEach((s) => s.page.close());
    for (const p of [talkPage, toolPage, livePage]) p.close();
    watcher.close();

    // ---- the restart on the same data directory and port
    srv = await startServer({ dataDir, env: env(model), port });
    assert.equal(srv.port, port);

    // Nothing acknowledged is lost.
    for (const r of acked.runs) {
      const got = await call(srv, 'GET', `/v1/runs/${r.id}`);
      assert.equal(got.status, 200);
      assert.equal(got.json.state, 'done', `acknowledged run ${r.id}`);
      assert.equal(got.json.status, 'ok');
      assert.equal(got.json.stdout, r.stdout);
    }
    for (const f of acked.files) {
      const got = await call(srv, 'GET', `/v1/files/${f.id}`);
      assert.equal(got.status, 200, `acknowledged file ${f.id}`);
      assert.deepEqual(got.buf, f.bytes);
    }
    console.log(`# acknowledged before the kill: ${acked.runs.length} results, ${acked.files.length} files; all there after the restart`);

    // The conversation reads in order; the cut answer says so; the chat takes the next message.
    const list = (await call(srv, 'GET', `/v1/chats/${talk.id}/messages`, { token: talk.token })).json.messages;
    assert.deepEqual(list.map((m) => [m.role, m.message_id]), [
      ['user', first.json.message_id], ['assistant', first.json.answer_id],
      ['user', second.json.message_id], ['assistant', second.json.answer_id]]);
    assert.equal(list[1].state, 'done');
    assert.equal(list[1].text, 'The first answer, whole.');
    assert.equal(list[2].text, 'second question');
    assert.equal(list[3].state, 'error');
    assert.equal(list[3].error.code, 'interrupted');
    assert.ok(longText.startsWith(list[3].text ?? ''), `what the cut answer kept is the start of what streamed: ${JSON.stringify(list[3].text)}`);
    console.log(`# the cut answer: ${list[3].state} ${list[3].error.code} "${list[3].error.message}", text kept ${JSON.stringify(list[3].text)}`);
    model.script.push({ text: 'Back again.' });
    const third = await call(srv, 'POST', `/v1/chats/${talk.id}/messages`, { token: talk.token, body: { text: 'third question' } });
    assert.equal(third.status, 201, third.buf.toString());

    // The MCP session died with the server: a clear error, then a new client resumes the run.
    await assert.rejects(within(mcp.client.callTool({ name: 'list_files', arguments: { chat_id: toolChat.id } }), 20000, 'the old MCP session'),
      (e) => /session|404|-32004/i.test(`${e.message} ${e.code}`), 'the old session is refused');
    await mcp.close().catch(() => {});
    mcp = await mcpClient(srv);
    const toolPage2 = new Page(srv, toolChat, 'tool-page-2');
    await toolPage2.opened;
    const again = (await toolPage2.nextRun(20000)).data;
    assert.equal(again.run_id, toolRun.run_id);
    assert.equal(again.attempt, 2, 'the run held when the server died goes out again');
    await toolPage2.started(again);
    assert.equal((await toolPage2.result(again, { stdout: '0\n1\n2\n' })).status, 200);
    const waited = await mcp.client.callTool({ name: 'wait_for_run', arguments: { run_id: toolRun.run_id, wait_s: 8 } });
    assert.equal(waited.isError, false, textOf(waited));
    assert.equal(waited.structuredContent.status, 'ok');
    assert.equal(waited.structuredContent.stdout, '0\n1\n2\n');
    toolPage2.close();

    // The live run goes out again, and its new attempt streams to a new run stream.
    const livePage2 = new Page(srv, liveChat, 'live-page-2');
    await livePage2.opened;
    const live2 = (await livePage2.nextRun(20000)).data;
    assert.equal(live2.run_id, liveRun.run_id);
    assert.equal(live2.attempt, 2);
    const watcher2 = runEvents(srv, liveRun.run_id);
    await watcher2.opened;
    await livePage2.started(live2);
    await livePage2.output(live2, { chunks: [{ stream: 'stdout', offset: 0, text: 'tock\n' }] });
    await watcher2.next((e) => e.event === 'output' && e.data.attempt === 2 && e.data.text === 'tock\n', 10000);
    await livePage2.result(live2, { stdout: 'tock\n' });
    await watcher2.next('end', 10000);
    const liveDone = await call(srv, 'GET', `/v1/runs/${liveRun.run_id}`);
    assert.equal(liveDone.json.status, 'ok');
    assert.equal(liveDone.json.stdout, 'tock\n');
    watcher2.close();
    livePage2.close();
  } finally {
    await mcp?.close().catch(() => {});
    storms.forEach((s) => { s.stop = true; s.page.close(); });
    await srv.stop();
    await model.close();
  }
  // The store after all of it: SQLite's integrity check (PostgreSQL keeps its own; there the rows
  // that name a chat must find it).
  if (PG) {
    assert.equal(sqlQuery(dataDir, 'SELECT count(*) FROM runs WHERE chat_id NOT IN (SELECT id FROM chats)'), '0');
  } else {
    assert.equal(sqlQuery(dataDir, 'PRAGMA integrity_check'), 'ok');
    assert.equal(sqlQuery(dataDir, 'PRAGMA foreign_key_check'), '');
  }
});
