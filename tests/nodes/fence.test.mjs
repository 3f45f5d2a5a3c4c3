// fence.test.mjs -- who writes a chat's rows, with three real nodes on a real PostgreSQL
// (CEREA_TEST_PG).  Each node connects under its own application_name, and a trigger logs every
// run and event row written with the application that wrote it and the chat's lease holder at
// that moment, inside the writing transaction: "only the holder writes a chat" is then a query.
//  - a run created through a node that does not hold its chat is in the owner's memory (its live
//    runs) and its row the moment the 201 comes, and no other node ever wrote a row of that chat:
//    the reason no wake-up of runs is needed across nodes (docs/scale.md);
//  - fencing by lease epoch: the owner SIGSTOPped past CEREA_LEASE_MS, another node takes the chat
//    over and accepts runs, the old owner SIGCONTed with requests and writes of its own pending:
//    nothing it writes for the chat lands (the log), it stops with one line, and its page goes on
//    through another node to the new owner, where every accepted run ends.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { PG, newSchema, startNode, freePort, req, sleep, sql, overlappingLeases, RoamingPage } from './cluster.mjs';

const skip = PG ? false : 'set CEREA_TEST_PG (scripts/test.d/45-postgres.sh starts a server)';

// Three nodes, each under application_name n<port>, and the write log.
async function cluster(tag) {
  const { url } = newSchema(tag);
  const nodes = [];
  for (let i = 0; i < 3; i++) {
    const port = await freePort();
    nodes.push(await startNode({ schemaUrl: `${url}&application_name=n${port}`, port }));
  }
  sql(url, `CREATE TABLE write_log(at timestamptz, app text, tbl text, op text, chat_id text, holder text, epoch bigint);
    CREATE FUNCTION log_write() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
      INSERT INTO write_log SELECT clock_timestamp(), current_setting('application_name'), TG_TABLE_NAME, TG_OP,
        NEW.chat_id, l.node_url, l.epoch FROM (SELECT 1) o LEFT JOIN chat_leases l ON l.chat_id = NEW.chat_id;
      RETURN NEW; END $$;
    CREATE TRIGGER runs_log AFTER INSERT OR UPDATE ON runs FOR EACH ROW EXECUTE FUNCTION log_write();
    CREATE TRIGGER events_log AFTER INSERT ON events FOR EACH ROW EXECUTE FUNCTION log_write();`);
  return { url, nodes };
}

// Rows written by a node that did not hold the chat's lease then (none, ever), for the message.
function foreignWrites(url) {
  return sql(url, "SELECT app || ' wrote ' || tbl || ' ' || op || ' of ' || chat_id || ' held by ' || COALESCE(holder, 'nobody') " +
    "FROM write_log WHERE holder IS NULL OR app <> 'n' || split_part(holder, ':', 3) LIMIT 5");
}

const liveRuns = async (node) => (await req(node, 'GET', '/v1/admin/runs')).json.live.map((r) => r.run_id);

test('a run created through a node that does not hold its chat: in the owner\'s memory and its row at once; only the holder ever writes a chat', { skip, timeout: 60000 }, async () => {
  const { url, nodes } = await cluster('writers');
  const [A, B, C] = nodes;
  try {
    const made = await req(A, 'POST', '/v1/chats', { body: {} });
    assert.equal(made.status, 201, made.text);
    const chat = made.json.chat_id;
    for (const via of [B, C, B, C]) { // no page: each run stays queued, live on the owner
      const r = await req(via, 'POST', `/v1/chats/${chat}/runs`, { body: { code: 'print(1)' } });
      assert.equal(r.status, 201, r.text);
      const id = r.json.run_id;
      assert.equal(sql(url, `SELECT chat_id FROM runs WHERE id = '${id}'`), chat, 'its row, before the 201');
      assert.ok((await liveRuns(A)).includes(id), 'live on the owner');
      for (const other of [B, C]) assert.ok(!(await liveRuns(other)).includes(id), `not live on ${other.port}`);
    }
    assert.ok(Number(sql(url, "SELECT count(*) FROM write_log WHERE tbl = 'runs'")) >= 4);
    assert.equal(foreignWrites(url), '');
  } finally {
    for (const n of nodes) await n.stop();
  }
});

test('fencing by lease epoch: an owner resuming after a pause past its lease writes nothing for the chat another node took; its page goes on to the new owner', { skip, timeout: 120000 }, async () => {
  const { url, nodes } = await cluster('fence');
  const [A, B, C] = nodes;
  const log = { accepted: [], acked: [] };
  let page;
  try {
    const made = await req(A, 'POST', '/v1/chats', { body: {} });
    assert.equal(made.status, 201, made.text);
    const chat = { id: made.json.chat_id, token: made.json.page_token };
    page = new RoamingPage(nodes, chat, 2, log); // reads through C; answers every run
    // load on the owner: runs created on A itself, one after another
    let creating = true;
    const loader = (async () => {
      while (creating) {
        const r = await req(A, 'POST', `/v1/chats/${chat.id}/runs`, { body: { code: 'print(1)' }, timeoutMs: 60000 });
        if (r.status === 201) log.accepted.push(r.json.run_id);
        await sleep(20);
      }
    })();
    await sleep(2000);
    // five connections to A kept open, so that the requests sent on them while it is stopped
    // are read the moment it resumes (before its timers run)
    await Promise.all([0, 1, 2, 3, 4].map(() => req(A, 'GET', '/v1/node')));
    // and a burst of runs, so that A's writer has writes of the chat in hand when it stops
    const burst = [];
    for (let i = 0; i < 20; i++)
      burst.push(req(A, 'POST', `/v1/chats/${chat.id}/runs`, { body: { code: 'print(2)' }, timeoutMs: 60000 }));
    await sleep(15);
    process.kill(A.pid, 'SIGSTOP');
    creating = false;
    // requests for the chat waiting in A's sockets: it runs them when it resumes
    const pending = [];
    for (let i = 0; i < 5; i++)
      pending.push(req(A, 'POST', `/v1/chats/${chat.id}/runs`, { body: { code: `print(${i})` }, timeoutMs: 60000 }));
    await sleep(2500); // A's lease (2 s) has run out
    // B takes the chat over (once A's writer session, if it sat in a transaction, is ended)
    let taken = null;
    for (const end = Date.now() + 30000; !taken; await sleep(200)) {
      const r = await req(B, 'POST', `/v1/chats/${chat.id}/runs`, { body: { code: 'print("b")' } });
      if (r.status === 201) taken = r.json.run_id;
      else assert.ok(Date.now() < end, `B never took the chat: ${r.status} ${r.text}`);
    }
    log.accepted.push(taken);
    // the new holder: B, or C when the page's event stream (through C) came back first and C
    // took the lease (B's call was then forwarded to C); never A
    const [bId, cId] = await Promise.all([B, C].map(async (n) => (await req(n, 'GET', '/v1/node')).json?.node_id));
    const holder = sql(url, `SELECT node_id FROM chat_leases WHERE chat_id = '${chat.id}'`);
    assert.ok([bId, cId].includes(holder), `held by ${holder}; B ${bId}, C ${cId}`);
    for (let i = 0; i < 3; i++) {
      const r = await req(C, 'POST', `/v1/chats/${chat.id}/runs`, { body: { code: 'print("c")' } });
      assert.equal(r.status, 201, r.text);
      log.accepted.push(r.json.run_id);
    }
    const before = Number(sql(url, 'SELECT count(*) FROM write_log'));
    process.kill(A.pid, 'SIGCONT');
    const exited = await Promise.race([A.exited, sleep(20000).then(() => null)]);
    assert.ok(exited, `A did not stop after it resumed:\n${A.log.slice(-3000)}`);
    A.alive = false;
    assert.equal(exited.code, 1, A.log.slice(-3000));
    const lines = A.log.split('\n').filter((l) => l.startsWith('cerea-sandbox: node '));
    assert.equal(lines.length, 1, A.log.slice(-3000));
    assert.match(lines[0], /refused|renew/);
    await loader;
    for (const r of await Promise.all(burst)) if (r.status === 201) log.accepted.push(r.json.run_id);
    for (const r of await Promise.all(pending)) // none was accepted by the paused node
      assert.notEqual(r.status, 201, `A accepted a run after it lost the chat: ${r.text}`);
    // nothing A tried after it resumed landed: every row of the log was written by the holder
    assert.equal(foreignWrites(url), '', `written by a node that did not hold the chat\n${A.log.slice(-3000)}`);
    console.log(`fence: ${log.accepted.length} runs accepted, ${Number(sql(url, 'SELECT count(*) FROM write_log')) - before} rows ` +
      `written (by their holders) after A resumed (A: ${(A.log.match(/refused/g) || []).length} refusals logged); A said: ${lines[0].replace(/^cerea-sandbox: node \S+ \(\S+\): /, '')}`);
    // the page went on through another node to B, and every accepted run ends
    const ids = log.accepted.map((id) => `'${id}'`).join(',');
    for (const end = Date.now() + 60000; ; await sleep(250)) {
      const open = sql(url, `SELECT id || ' ' || state FROM runs WHERE id IN (${ids}) AND state <> 'done' LIMIT 3`);
      if (!open) break;
      assert.ok(Date.now() < end, `runs did not end: ${open}; page reconnects ${page.reconnects}\n${B.log.slice(-2000)}`);
    }
    assert.equal(Number(sql(url, `SELECT count(*) FROM runs WHERE id IN (${ids}) AND status = 'ok'`)), log.accepted.length);
    assert.ok(page.reconnects > 0, 'the page reconnected');
    assert.equal(overlappingLeases(url), 0);
    assert.equal(foreignWrites(url), '');
  } finally {
    page?.close();
    if (A.alive) { try { process.kill(A.pid, 'SIGCONT'); } catch { /* gone */ } }
    for (const n of nodes) await n.stop().catch(() => {});
  }
});

test('a lease take that meets a held lock: 503 unavailable with Retry-After and the API\'s error body, then the chat is served', { skip, timeout: 60000 }, async () => {
  const { url } = newSchema('busy');
  const A = await startNode({ schemaUrl: url });
  const B = await startNode({ schemaUrl: url });
  let locker;
  try {
    const made = await req(A, 'POST', '/v1/chats', { body: {} });
    assert.equal(made.status, 201, made.text);
    const chat = made.json.chat_id;
    await A.stop(); // its lease lapses within CEREA_LEASE_MS
    for (const end = Date.now() + 20000; sql(url, `SELECT count(*) FROM chat_leases WHERE chat_id = '${chat}' AND expires_at > now()`) !== '0'; await sleep(100))
      assert.ok(Date.now() < end, 'the stopped node\'s lease did not lapse');
    // Another session holds the lease row (as a writer's fence does until its commit) for 6 s.
    locker = spawn('psql', [url, '-tAqX', '-c', `BEGIN; SELECT 1 FROM chat_leases WHERE chat_id = '${chat}' FOR UPDATE; SELECT pg_sleep(6); COMMIT;`], { stdio: 'ignore' });
    const lockerDone = new Promise((r) => locker.on('close', r));
    for (const end = Date.now() + 10000; sql(url, "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(6)%' AND pid <> pg_backend_pid()") === '0'; await sleep(50))
      assert.ok(Date.now() < end, 'the locking session did not start');
    const r = await req(B, 'GET', `/v1/chats/${chat}`);
    assert.equal(r.status, 503, r.text);
    assert.equal(r.json?.error?.code, 'unavailable', r.text);
    assert.match(r.json.error.message, /try again/);
    assert.ok(Number(r.headers.get('retry-after')) >= 1, `Retry-After: ${r.headers.get('retry-after')}`);
    await lockerDone;
    const again = await req(B, 'GET', `/v1/chats/${chat}`);
    assert.equal(again.status, 200, again.text);
  } finally {
    if (locker && locker.exitCode === null) locker.kill();
    await A.stop().catch(() => {});
    await B.stop().catch(() => {});
  }
});
