// nodes.test.mjs -- several orchestrators (nodes) on one PostgreSQL store, against a real server
// (CEREA_TEST_PG, started by scripts/test.d/45-postgres.sh) and real binaries on loopback.
//  - bad configuration: an unreachable database, a wrong password, a node URL that does not reach
//    the node (nothing listens there, or another node answers), a node URL without a database:
//    one clear line and exit status 1, the node never serving anything;
//  - failover under load: three nodes, chats owned by each, scripted pages whose event streams go
//    through another node than the owner (forwarded), assistants creating runs through a third;
//    the owner of some chats SIGKILLed mid-load: no acknowledged result lost, every accepted run
//    ends, every page reconnects (to whatever node) and misses no event of its chat, no lease ever
//    held by two nodes at once (the database's lease log), and the killed node, restarted, rejoins;
//  - a live run across nodes: the page's stream and reports through one node, the run created,
//    followed (its own event stream) and answered (input) through another, the chat's owner a
//    third: every event of each stream arrives, in order;
//  - the chat routes of the assistant and the tools (messages, page links, chat keys, tool calls)
//    through nodes that do not hold the chat: the owner answers; its chat keys and page links are
//    good on every node when the nodes share DATA/chat_key_secret.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PG, PG_TCP, newSchema, startNode, startSharedNodes, req, sleep, sql, freePort, overlappingLeases, RoamingPage } from './cluster.mjs';
import { Page, runEvents } from '../integration/lib.mjs';

const skip = PG ? false : 'set CEREA_TEST_PG (scripts/test.d/45-postgres.sh starts a server)';

async function mustFail(opts, pattern, forbidden) {
  const node = await startNode({ ...opts, wait: false });
  const r = await Promise.race([node.exited, sleep(20000).then(() => null)]);
  if (r === null) { await node.kill(); assert.fail(`the node did not exit:\n${node.log}`); }
  assert.equal(r.code, 1, node.log);
  const lines = node.log.split('\n').filter((l) => l.startsWith('cerea-sandbox: ') && !/listening on|open http/.test(l));
  assert.equal(lines.length, 1, `one line, got:\n${node.log}`);
  assert.match(lines[0], pattern);
  if (forbidden) assert.doesNotMatch(node.log, forbidden);
  return node;
}

test('bad configuration: one line and exit, never a half-started node', { skip }, async () => {
  const { url } = newSchema('bad');
  await mustFail({ schemaUrl: 'postgresql://cerea:secret-pw@127.0.0.1:1/cerea' },
    /database cerea@127\.0\.0\.1:1\/cerea: .*refused/, /secret-pw/);
  if (PG_TCP) {
    const wrong = PG_TCP.replace(/:\/\/([^:]+):[^@]+@/, '://$1:wrong-pw@');
    await mustFail({ schemaUrl: wrong }, /password authentication failed/, /wrong-pw/);
  }
  // a node URL nothing listens on: the node cannot check it, and says so before serving a chat
  const nobody = await freePort();
  const n = await mustFail({ schemaUrl: url, env: { CEREA_NODE_URL: `http://127.0.0.1:${nobody}` } },
    /CEREA_NODE_URL does not reach this node/);
  assert.match(n.log, new RegExp(`127\\.0\\.0\\.1:${nobody}`));
  // a node URL that another node answers
  const a = await startNode({ schemaUrl: url });
  try {
    await mustFail({ schemaUrl: url, env: { CEREA_NODE_URL: a.base } }, /another node answered/);
  } finally { await a.stop(); }
  assert.equal(Number(sql(url, 'SELECT count(*) FROM chat_leases')), 0); // none was ever taken
  await mustFail({ env: { CEREA_DATABASE_URL: null } }, /set CEREA_DATABASE_URL/);
  await mustFail({ schemaUrl: url, env: { CEREA_API_KEY: null } }, /every node needs the same CEREA_API_KEY/);
  await mustFail({ schemaUrl: url, env: { CEREA_NODE_URL: 'ftp://x' } }, /CEREA_NODE_URL=ftp:\/\/x: expected http/);
});

test('failover under load: a SIGKILLed node\'s chats go on elsewhere, nothing acknowledged lost', { skip, timeout: 180000 }, async () => {
  const { url } = newSchema('fail');
  const ports = [await freePort(), await freePort(), await freePort()];
  const nodes = [];
  // Leases of 6 s, not cluster.mjs's 2 s: a node that cannot renew for a lease less its margin
  // stops itself (nodes.c), and under load a renewal can wait 1 s on a row lock of a takeover
  // (PG_LEASE_LOCK_MS): seen with two CPU burners, both survivors stopped that way within 4 s.
  const LEASE_MS = 6000, leaseEnv = { CEREA_LEASE_MS: String(LEASE_MS) };
  for (const port of ports) nodes.push(await startNode({ schemaUrl: url, port, env: leaseEnv }));
  const log = { accepted: [], acked: [] };
  const pages = [];
  try {
    // two chats owned by each node (created there), pages reading through the next node
    const chats = [];
    for (let i = 0; i < 6; i++) {
      const owner = nodes[i % 3];
      const r = await req(owner, 'POST', '/v1/chats', { body: {} });
      assert.equal(r.status, 201, r.text);
      chats.push({ id: r.json.chat_id, token: r.json.page_token, owner: i % 3 });
    }
    assert.equal(Number(sql(url, 'SELECT count(DISTINCT node_id) FROM chat_leases')), 3);
    for (const c of chats) pages.push(new RoamingPage(nodes, c, c.owner + 1, log));
    // assistants: runs created through the third node, one after another per chat
    let creating = true;
    const assistants = chats.map(async (c) => {
      let via = c.owner + 2;
      while (creating) {
        const node = nodes[via % 3];
        if (!node.alive) { via++; if (nodes.every((n) => !n.alive)) await sleep(200); continue; }
        const r = await req(node, 'POST', `/v1/chats/${c.id}/runs`, { body: { code: 'print(1)' } });
        if (r.status === 201) log.accepted.push(r.json.run_id);
        else await sleep(100);
        await sleep(40);
      }
    });
    await sleep(3000);
    const before = log.accepted.length;
    const killed = nodes[0];
    await killed.kill(); // its two chats' leases run out in LEASE_MS, then the others take them
    const survivors = () => nodes.slice(1).map((n) => `--- node ${n.port} alive ${n.alive}\n${n.log.slice(-3000)}`).join('\n');
    for (const deadline = Date.now() + 6 * LEASE_MS; ;) {
      const held = Number(sql(url, `SELECT count(*) FROM chat_leases WHERE node_url = '${killed.base}'`));
      const after = log.accepted.length - before;
      if (held === 0 && after > 6) break; // its chats moved, and runs go on through the others
      assert.ok(Date.now() < deadline, `6 leases after the kill: ${held} chats still on the dead node, ${after} runs accepted since\n${survivors()}`);
      assert.ok(nodes.slice(1).every((n) => n.alive), `a surviving node stopped\n${survivors()}`);
      await sleep(250);
    }
    creating = false;
    await Promise.all(assistants);

    // every accepted run ends (the killed node's dispatched ones as new attempts elsewhere)
    const ids = log.accepted.map((id) => `'${id}'`).join(',');
    const deadline = Date.now() + 60000;
    for (;;) {
      const open = sql(url, `SELECT id, chat_id, state, attempts FROM runs WHERE id IN (${ids}) AND state <> 'done' LIMIT 5`);
      if (!open) break;
      if (Date.now() >= deadline) {
        const chat = open.split('|')[1];
        const lease = sql(url, `SELECT node_url, epoch, expires_at, clock_timestamp() FROM chat_leases WHERE chat_id = '${chat}'`);
        const p = pages.find((x) => x.chat.id === chat);
        assert.fail(`runs did not end:\n${open}\nlease: ${lease}\npage via ${p?.via} reconnects ` +
          `${p?.reconnects}\n` + nodes.map((n) => `--- node ${n.port} ${n.alive}\n${n.log.slice(-3000)}`).join('\n'));
      }
      await sleep(250);
    }
    assert.equal(Number(sql(url, `SELECT count(*) FROM runs WHERE id IN (${ids}) AND status = 'ok'`)), log.accepted.length);
    // every acknowledged result is the one stored
    for (const a of log.acked) {
      const stdout = sql(url, `SELECT stdout_text FROM runs WHERE id = '${a.run}' AND status = 'ok'`);
      assert.equal(stdout + '\n', a.stdout, `acknowledged result of ${a.run} lost`);
    }
    // the killed node's chats moved; each page saw every event of its chat
    for (const c of chats) {
      const holder = sql(url, `SELECT node_url FROM chat_leases WHERE chat_id = '${c.id}'`);
      if (c.owner === 0) assert.notEqual(holder, killed.base, `chat ${c.id} still on the dead node`);
    }
    await sleep(500);
    for (const p of pages) {
      const max = Number(sql(url, `SELECT COALESCE(max(seq), 0) FROM events WHERE chat_id = '${p.chat.id}'`));
      const missing = [];
      for (let s = 1; s <= max; s++) if (!p.ids.has(s)) missing.push(s);
      assert.deepEqual(missing, [], `page of chat ${p.chat.id} missed events (max ${max}, reconnects ${p.reconnects})`);
    }
    assert.ok(pages.some((p) => p.reconnects > 0), 'pages did reconnect');
    assert.equal(overlappingLeases(url), 0, 'a lease held by two nodes at once');
    const moved = Number(sql(url, 'SELECT count(*) FROM (SELECT chat_id FROM lease_log GROUP BY chat_id HAVING count(*) > 1) m'));
    assert.ok(moved >= 2, `the killed node's chats changed hands (${moved})`);
    console.log(`failover: ${log.accepted.length} runs accepted, ${log.acked.length} results acknowledged, ` +
      `${pages.reduce((n, p) => n + p.reconnects, 0)} page reconnects, ${moved} chats moved`);

    // the killed node restarts on its address and rejoins: it serves new chats and forwards
    const back = await startNode({ schemaUrl: url, port: killed.port, dataDir: killed.dataDir, env: leaseEnv });
    nodes[0] = back;
    const r = await req(back, 'POST', '/v1/chats', { body: {} });
    assert.equal(r.status, 201, r.text);
    const other = chats.find((c) => c.owner === 1);
    const g = await req(back, 'GET', `/v1/chats/${other.id}`);
    assert.equal(g.status, 200, g.text);
    assert.equal(overlappingLeases(url), 0);
  } finally {
    for (const p of pages) p.close();
    for (const n of nodes) await n.stop().catch(() => {});
  }
});

test('a live run across nodes: output, input() and the run\'s own stream forwarded to the owner', { skip, timeout: 60000 }, async () => {
  const { url } = newSchema('live');
  const nodes = [];
  for (let i = 0; i < 3; i++) nodes.push(await startNode({ schemaUrl: url }));
  const [owner, pageVia, backendVia] = nodes;
  let page, follow;
  try {
    const r = await req(owner, 'POST', '/v1/chats', { body: {} });
    assert.equal(r.status, 201, r.text);
    const chat = { id: r.json.chat_id, token: r.json.page_token };
    page = new Page(pageVia, chat, 'live-page');
    await page.opened;
    assert.equal(page.status, 200);
    const created = await req(backendVia, 'POST', `/v1/chats/${chat.id}/runs`, { body: { code: 'print("hello"); input("name? ")' } });
    assert.equal(created.status, 201, created.text);
    const runId = created.json.run_id;
    follow = runEvents(backendVia, runId);
    await follow.opened;
    assert.equal(follow.status, 200);
    const run = (await page.nextRun(10000)).data;
    assert.equal((await page.started(run)).status, 200);
    const out = await page.output(run, { chunks: [{ stream: 'stdout', offset: 0, text: 'hello\n' }], input_request: { prompt: 'name? ' } });
    assert.equal(out.status, 200, JSON.stringify(out.json));
    assert.equal((await follow.next('input_request', 10000)).data.prompt, 'name? ');
    assert.equal(follow.text('stdout'), 'hello\n');
    const answered = await req(backendVia, 'POST', `/v1/runs/${runId}/input`, { body: { text: 'ada' } });
    assert.equal(answered.status, 200, answered.text);
    assert.equal((await page.next((e) => e.event === 'input' && e.data.run_id === runId, 10000)).data.text, 'ada');
    assert.equal((await page.result(run, { stdout: 'hello\nname? ada\n' })).status, 200);
    const end = await follow.next('end', 10000);
    assert.equal(end.data.status, 'ok');
    assert.equal(end.data.stdout, 'hello\nname? ada\n');
    await follow.ended; // the run's stream ends after its end, through the forwarding node too
    // every event each stream got had an id one more than the one before (none lost on the way)
    for (const s of [page, follow]) {
      const ids = s.events.filter((e) => e.id !== null).map((e) => e.id);
      for (let i = 1; i < ids.length; i++) assert.ok(ids[i] > ids[i - 1], `ids in order: ${ids}`);
    }
    // the chat stayed with its owner all along: one epoch of its lease, the owner's
    const ownerId = (await req(owner, 'GET', '/v1/node')).json.node_id;
    assert.equal(sql(url, `SELECT node_id || ' ' || count(*) OVER () FROM lease_log WHERE chat_id = '${chat.id}'`), `${ownerId} 1`);
  } finally {
    page?.close(); follow?.close();
    for (const n of nodes) await n.stop();
  }
});

test('the assistant\'s and the tools\' chat routes across nodes: forwarded to the owner; chat keys and page links good on every node sharing chat_key_secret', { skip, timeout: 60000 }, async () => {
  const { url } = newSchema('chatroutes');
  const nodes = await startSharedNodes(3, url);
  const [owner, a, b] = nodes;
  try {
    const r = await req(owner, 'POST', '/v1/chats', { body: {} });
    assert.equal(r.status, 201, r.text);
    const chat = r.json.chat_id;
    const listed = await req(a, 'GET', `/v1/chats/${chat}/messages`);
    assert.equal(listed.status, 200, listed.text);
    // no model on these nodes: the owner's answer, through the forwarder
    const posted = await req(a, 'POST', `/v1/chats/${chat}/messages`, { body: { text: 'hi' } });
    assert.equal(posted.status, 503, posted.text);
    assert.equal(posted.json.error.code, 'no_model');
    const link = await req(a, 'POST', `/v1/chats/${chat}/page_link`);
    assert.equal(link.status, 200, link.text);
    // the link's page token reads the chat on a third node (forwarded; the owner checks it)
    const viaLink = await req(b, 'GET', `/v1/chats/${chat}/messages`, { token: link.json.page_token });
    assert.equal(viaLink.status, 200, viaLink.text);
    const key = await req(a, 'POST', `/v1/chats/${chat}/chat_key`);
    assert.equal(key.status, 201, key.text);
    // the links an owner makes name the host the client reached, not the owner's node URL
    assert.equal(key.json.mcp_url, `${a.base}/mcp`);
    // a tool call through a node that does not hold the chat: its chat key checked there (the
    // shared secret), the call run by the owner
    const call = await req(b, 'POST', '/v1/tools/call', { token: key.json.key, body: { name: 'list_files', arguments: {} } });
    assert.equal(call.status, 200, call.text);
    assert.notEqual(call.json.isError, true, call.text);
    assert.doesNotMatch(call.text, /cannot be loaded/);
    const turn = await req(b, 'POST', '/v1/turns/t0000000000000000000000000000000/cancel');
    assert.equal(turn.status, 404, turn.text);
    const ownerId = (await req(owner, 'GET', '/v1/node')).json.node_id;
    assert.equal(sql(url, `SELECT node_id || ' ' || count(*) OVER () FROM lease_log WHERE chat_id = '${chat}'`), `${ownerId} 1`);
  } finally {
    for (const n of nodes) await n.stop();
  }
});
