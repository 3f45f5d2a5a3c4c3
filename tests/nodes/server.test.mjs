// server.test.mjs -- `server` execution mode with several nodes (docs/scale.md, "What stays per
// node"): each node runs its own headless kernel hosts for the chats it holds.  Real PostgreSQL
// (CEREA_TEST_PG, started by scripts/test.d/45-postgres.sh), real orchestrators on loopback:
//  - the hosts' key of a node reaches only the chats that node holds: a call with it for a chat
//    another node holds, or for a free one, is answered 409 by the node it reached, never
//    forwarded (the owner would refuse a key it never made) and never taking a lease.  The key is
//    random per start and reaches a host only through its stdin, so this case runs a stand-in
//    host (a shell script in CEREA_NODE, trusted mode) that records what it is told: the one way
//    to hold the key from outside;
//  - two nodes with real hosts (worker/headless-host.js under bubblewrap, real Pyodide, as
//    tests/fullstack): a run created through node B for a chat A holds is run by A's host (its
//    output back, its output file downloadable through B); then A is SIGKILLed with a run running
//    and one queued: its hosts die with it, the chat's lease expires, B takes the chat on the next
//    request, and B's own host runs both as new attempts, the chat's uploaded file mounted again
//    from the shared store; no lease is ever held twice.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, writeFileSync, chmodSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { PG, newSchema, startNode, req, sleep, sql, overlappingLeases } from './cluster.mjs';
import { BWRAP, hostReady, hostNodePids, inCI, needTool, upload, call, sha256, ROOT } from '../fullstack/lib.mjs';

const PYODIDE = existsSync(join(ROOT, 'build/www/pyodide/pyodide.asm.wasm'));
const skip = PG ? false : 'set CEREA_TEST_PG (scripts/test.d/45-postgres.sh starts a server)';
// A tool setup installs, missing: skipped with the reason, failed in CI (needTool).
const toolMissing = (!PYODIDE && 'build/www/pyodide is missing: run scripts/setup.sh') ||
  (!BWRAP && 'bubblewrap is unusable here (bwrap --unshare-net failed: no user namespaces?): the hosts cannot be sandboxed');
const skipHosts = skip || (!inCI() && toolMissing);
if (skipHosts && !skip) console.log(`# server mode with nodes: skipped: ${skipHosts}`);

const nodeId = async (n) => (await req(n, 'GET', '/v1/node')).json.node_id;

// A request tried again while the chat's node is changing hands (503 with Retry-After, or no
// answer from a node just killed), until `until` ms have passed.
async function settled(node, method, path, opts = {}, until = 120000) {
  const end = Date.now() + until;
  for (;;) {
    const r = await req(node, method, path, { timeoutMs: 250000, ...opts });
    if ((r.status !== 503 && r.status !== 0) || Date.now() > end) return r;
    await sleep(250);
  }
}

test("a node's hosts' key reaches only the chats it holds: 409 elsewhere, never forwarded, no lease taken", { skip, timeout: 120000 }, async () => {
  const { url } = newSchema('hostkey');
  const dir = mkdtempSync(join(tmpdir(), 'cerea-standin-'));
  const told = join(dir, 'told.log');
  const script = join(dir, 'stand-in-host.sh');
  // the stand-in host: records each control line (the first is `key K`), never attaches
  writeFileSync(script, `#!/bin/sh\nwhile read -r l; do echo "$l" >> '${told}'; done\n`);
  chmodSync(script, 0o755);
  const nodes = [];
  try {
    const A = await startNode({ schemaUrl: url });
    nodes.push(A);
    const C = await startNode({
      schemaUrl: url,
      env: { CHAT_CODE_EXECUTION: 'server', CEREA_NODE: script, CEREA_SERVER_TRUSTED: '1', CEREA_ROOT: ROOT },
    });
    nodes.push(C);
    let key = null;
    for (const end = Date.now() + 20000; !key && Date.now() < end; await sleep(100))
      key = existsSync(told) ? (/^key (\S+)$/m.exec(readFileSync(told, 'utf8')) || [])[1] : null;
    assert.ok(key, `the stand-in host was given no key:\n${C.log}`);
    const cId = await nodeId(C);

    // a chat C holds: its hosts' key opens the chat's stream there (the key is real)
    const own = await req(C, 'POST', '/v1/chats', { body: {} });
    assert.equal(own.status, 201, own.text);
    const ctrl = new AbortController();
    const open = await fetch(`${C.base}/v1/chats/${own.json.chat_id}/events?page_id=host-probe`,
      { headers: { authorization: `Bearer ${key}` }, signal: ctrl.signal });
    assert.equal(open.status, 200);
    ctrl.abort();

    // a chat A holds, with a run waiting for a page
    const made = await req(A, 'POST', '/v1/chats', { body: {} });
    assert.equal(made.status, 201, made.text);
    const chat = made.json.chat_id;
    const run = await req(A, 'POST', `/v1/chats/${chat}/runs`, { body: { code: 'print(1)' } });
    assert.equal(run.status, 201, run.text);
    const calls = () => [
      req(C, 'GET', `/v1/chats/${chat}/events?page_id=host-probe`, { token: key }),
      req(C, 'POST', `/v1/chats/${chat}/presence`, { token: key, body: { page_id: 'host-probe', visible: true } }),
      req(C, 'POST', `/v1/runs/${run.json.run_id}/started`, { token: key, body: { attempt: 1, page_id: 'host-probe' } }),
      req(C, 'POST', `/v1/runs/${run.json.run_id}/result`, { token: key, body: { attempt: 1, status: 'ok', stdout: 'x', stderr: '', files: [] } }),
    ];
    for (const r of await Promise.all(calls())) {
      assert.equal(r.status, 409, r.text); // forwarded, A would have answered 401 (a key it never made)
      assert.match(r.json.error.message, /not held by this node/);
    }
    assert.equal(Number(sql(url, `SELECT count(*) FROM lease_log WHERE chat_id = '${chat}' AND node_id = '${cId}'`)), 0);

    // the same chat once A let it go (stopped: its leases released): still 409, no lease taken
    await A.stop();
    const held = () => Number(sql(url, `SELECT count(*) FROM chat_leases WHERE chat_id = '${chat}' AND expires_at > now()`));
    assert.equal(held(), 0);
    for (const r of await Promise.all(calls())) assert.equal(r.status, 409, r.text);
    assert.equal(Number(sql(url, `SELECT count(*) FROM lease_log WHERE chat_id = '${chat}' AND node_id = '${cId}'`)), 0);
    assert.equal(held(), 0);
    // the API key still takes it, as any request does
    const api = await req(C, 'GET', `/v1/runs/${run.json.run_id}`);
    assert.equal(api.status, 200, api.text);
    assert.equal(sql(url, `SELECT node_id FROM chat_leases WHERE chat_id = '${chat}'`), cId);
    assert.equal(overlappingLeases(url), 0);
  } finally {
    for (const n of nodes) await n.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

const SERVER_ENV = {
  CHAT_CODE_EXECUTION: 'server', CEREA_HOSTS: '1', CEREA_HOST_KERNELS: '2', PAGE_GRACE_MS: '1000',
  CEREA_LEASE_MS: '4000',
};

test('server mode on two nodes: a chat\'s runs go to its node\'s hosts, and to the next node\'s hosts after a SIGKILL', { skip: skipHosts, timeout: 600000 }, async (t) => {
  needTool(t, toolMissing);
  const { url } = newSchema('srv');
  const nodes = [];
  try {
    const A = await startNode({ schemaUrl: url, env: SERVER_ENV });
    nodes.push(A);
    const B = await startNode({ schemaUrl: url, env: SERVER_ENV });
    nodes.push(B);
    await hostReady(A, 1, 240000);
    await hostReady(B, 1, 240000);
    const [aId, bId] = [await nodeId(A), await nodeId(B)];
    const aHost = `host-${aId.slice(0, 8)}-0`, bHost = `host-${bId.slice(0, 8)}-0`;
    // the page each attempt of a run was sent to, from the chat's event log (`run` events)
    const pageOf = (run, attempt) => {
      const rows = sql(url, `SELECT payload FROM events WHERE chat_id = '${chat.id}' AND type = 'run' ORDER BY seq`)
        .split('\n').filter(Boolean).map((l) => JSON.parse(l)).filter((e) => e.run_id === run);
      return rows.find((e) => e.attempt === attempt)?.page_id;
    };

    // a chat of A's, its attachment uploaded through B (forwarded to A)
    const made = await req(A, 'POST', '/v1/chats', { body: {} });
    assert.equal(made.status, 201, made.text);
    const chat = { id: made.json.chat_id, token: made.json.page_token };
    const data = randomBytes(64 * 1024);
    const up = await upload(B, chat, 'in.bin', data);
    assert.equal(up.status, 201, up.buf.toString());
    const digest = sha256(data);

    // a run created through B: run by A's host, its output and file back through B
    const r1 = await req(B, 'POST', `/v1/chats/${chat.id}/runs`, {
      body: {
        code: ['import hashlib', "d = open('/mnt/data/in.bin','rb').read()", 'print(len(d), hashlib.sha256(d).hexdigest())',
          "open('/mnt/output/out.txt','w').write('made on ' + str(len(d)))"].join('\n'),
        wait_s: 240,
      },
      timeoutMs: 250000,
    });
    assert.equal(r1.status, 201, r1.text);
    assert.equal(r1.json.status, 'ok', r1.text);
    assert.equal(r1.json.stdout.trim(), `${data.length} ${digest}`);
    assert.equal(pageOf(r1.json.run_id, r1.json.attempts), aHost, "A's host ran it");
    const out = r1.json.files.find((f) => f.name === 'out.txt');
    assert.ok(out, r1.text);
    const dl = await call(B, 'GET', `/v1/files/${out.artifact_id}`);
    assert.equal(dl.status, 200);
    assert.equal(dl.buf.toString(), `made on ${data.length}`);

    // a run running on A's host and one queued behind it; then A is SIGKILLed
    const slow = ['import hashlib, time', 'time.sleep(6)', "d = open('/mnt/data/in.bin','rb').read()",
      "print('slow', hashlib.sha256(d).hexdigest())"].join('\n');
    const r2 = await req(B, 'POST', `/v1/chats/${chat.id}/runs`, { body: { code: slow } });
    assert.equal(r2.status, 201, r2.text);
    const r3 = await req(B, 'POST', `/v1/chats/${chat.id}/runs`, {
      body: { code: "print('queued', open('/mnt/data/in.bin','rb').read()[:4].hex())" },
    });
    assert.equal(r3.status, 201, r3.text);
    for (const end = Date.now() + 120000; ; await sleep(100)) {
      const s = await req(B, 'GET', `/v1/runs/${r2.json.run_id}`);
      if (s.json?.state === 'running') break;
      assert.ok(Date.now() < end, `run 2 never ran on A: ${s.text}`);
    }
    assert.equal((await req(B, 'GET', `/v1/runs/${r3.json.run_id}`)).json.state, 'queued');
    const aHosts = hostNodePids(A);
    assert.ok(aHosts.length >= 1, 'A has a host process');
    await A.kill();
    // its hosts die with it (--die-with-parent)
    for (const end = Date.now() + 20000; aHosts.some((p) => existsSync(`/proc/${p}`)); await sleep(100))
      assert.ok(Date.now() < end, `A's hosts outlived it: ${aHosts}`);

    // through B: 503 until A's lease ran out, then B takes the chat and its host runs both
    const e2 = await settled(B, 'GET', `/v1/runs/${r2.json.run_id}?wait_s=240`);
    assert.equal(e2.status, 200, e2.text);
    assert.equal(e2.json.status, 'ok', e2.text);
    assert.equal(e2.json.stdout.trim(), `slow ${digest}`, 'the attachment mounted again on B');
    assert.ok(e2.json.attempts >= 2, `a new attempt: ${e2.text}`);
    assert.equal(pageOf(r2.json.run_id, e2.json.attempts), bHost, "B's host ran its last attempt");
    const e3 = await settled(B, 'GET', `/v1/runs/${r3.json.run_id}?wait_s=240`);
    assert.equal(e3.json.status, 'ok', e3.text);
    assert.equal(e3.json.stdout.trim(), `queued ${data.subarray(0, 4).toString('hex')}`);
    assert.equal(pageOf(r3.json.run_id, e3.json.attempts), bHost);
    assert.equal(sql(url, `SELECT node_id FROM chat_leases WHERE chat_id = '${chat.id}'`), bId);
    assert.equal(overlappingLeases(url), 0);

    // and a new run of the chat, through B, on B's host
    const r4 = await req(B, 'POST', `/v1/chats/${chat.id}/runs`, { body: { code: 'print(6 * 7)', wait_s: 240 }, timeoutMs: 250000 });
    assert.equal(r4.json?.status, 'ok', r4.text);
    assert.equal(r4.json.stdout.trim(), '42');
  } catch (e) { // the nodes' logs (their hosts' lines included) say what happened
    for (const [i, n] of nodes.entries()) console.log(`# node ${'AB'[i]} log:\n${n.log.slice(-5000).replace(/^/gm, '# ')}`);
    throw e;
  } finally {
    for (const n of nodes) if (n.alive) await n.stop();
    for (const n of nodes) rmSync(n.dataDir, { recursive: true, force: true });
  }
});
