// cluster.mjs -- what the node tests share: a schema of their own in the PostgreSQL server the
// stage started (CEREA_TEST_PG), orchestrators started as nodes of it on fixed free ports of
// 127.0.0.1 (CEREA_NODE_URL must be known before a node starts), tracked and stopped (or
// SIGKILLed) by pid, and raw SQL on the cluster's schema (psql).
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, existsSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BIN, ROOT, API_KEY } from '../integration/lib.mjs';

export const PG = process.env.CEREA_TEST_PG || null;
export const PG_TCP = process.env.CEREA_TEST_PG_TCP || null;

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

// A fresh schema and the URL that puts it first in the search path.
export function newSchema(tag) {
  const name = `n_${tag}_${process.pid}_${Date.now() % 1e6}`;
  execFileSync('psql', [PG, '-qXc', `SET client_min_messages = warning; CREATE SCHEMA ${name}`]);
  return { name, url: `${PG}${PG.includes('?') ? '&' : '?'}options=-csearch_path%3D${name}` };
}

export function sql(url, q) {
  return execFileSync('psql', [url, '-tAqX', '-c', q], { encoding: 'utf8' }).trim();
}

// Starts one node; resolves once it says it serves (its node URL checked) or rejects with its
// log when it exits first.  `wait: false` resolves at once (for nodes that must fail).
export async function startNode({ schemaUrl, port, dataDir, env = {}, wait = true } = {}) {
  if (!existsSync(BIN)) throw new Error(`${BIN} not built`);
  port = port || await freePort();
  dataDir = dataDir || mkdtempSync(join(tmpdir(), 'cerea-node-'));
  const fullEnv = {
    ...process.env, CEREA_LOG: 'info', CEREA_API_KEY: API_KEY, CEREA_DATABASE_URL: schemaUrl,
    CEREA_NODE_URL: `http://127.0.0.1:${port}`, CEREA_LEASE_MS: '2000', ...env,
  };
  for (const k of Object.keys(fullEnv)) if (fullEnv[k] === null) delete fullEnv[k]; // unset
  const proc = spawn(BIN, ['serve', '--listen', `127.0.0.1:${port}`, '--data', dataDir],
    { cwd: ROOT, env: fullEnv, stdio: ['ignore', 'ignore', 'pipe'] });
  const node = {
    proc, pid: proc.pid, port, dataDir, base: `http://127.0.0.1:${port}`, key: API_KEY, log: '',
    exited: new Promise((r) => proc.on('close', (code, sig) => r({ code, sig }))), // its stderr read to the end
    alive: true,
    async kill() { if (!node.alive) return; node.alive = false; process.kill(proc.pid, 'SIGKILL'); await node.exited; },
    async stop() {
      if (!node.alive) return;
      node.alive = false;
      process.kill(proc.pid, 'SIGTERM');
      const r = await node.exited;
      if (/ERROR: (Address|Leak)Sanitizer|runtime error:/.test(node.log)) throw new Error(`sanitizer report:\n${node.log.slice(-6000)}`);
      return r;
    },
  };
  proc.stderr.on('data', (d) => { node.log += d; });
  node.exited.then(() => { node.alive = false; });
  if (!wait) return node;
  await new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`node did not start:\n${node.log}`)), 20000);
    const check = () => { if (/serving at http/.test(node.log)) { clearTimeout(t); resolve(); } };
    proc.stderr.on('data', check);
    node.exited.then(({ code, sig }) => { clearTimeout(t); reject(new Error(`node exited ${code ?? sig}:\n${node.log}`)); });
  });
  return node;
}

// n nodes on one schema sharing one DATA/chat_key_secret (what an operator copies to every node,
// docs/scale.md), so that chat keys, page links and MCP sessions made on one are good on all.
export async function startSharedNodes(n, schemaUrl) {
  const secret = randomBytes(32).toString('hex');
  const nodes = [];
  for (let i = 0; i < n; i++) {
    const dataDir = mkdtempSync(join(tmpdir(), 'cerea-node-'));
    writeFileSync(join(dataDir, 'chat_key_secret'), `${secret}\n`, { mode: 0o600 });
    nodes.push(await startNode({ schemaUrl, dataDir }));
  }
  return nodes;
}

// fetch with a timeout; never throws for the network (status 0 with the error instead).
export async function req(node, method, path, { token, body, headers = {}, timeoutMs = 10000 } = {}) {
  const h = { ...headers, authorization: `Bearer ${token ?? node.key}` };
  let payload;
  if (body !== undefined) { payload = JSON.stringify(body); h['content-type'] = 'application/json'; }
  try {
    const res = await fetch(node.base + path, { method, headers: h, body: payload, signal: AbortSignal.timeout(timeoutMs) });
    const text = await res.text();
    let json = null;
    try { json = JSON.parse(text); } catch { /* not JSON */ }
    return { status: res.status, json, text, headers: res.headers };
  } catch (e) {
    return { status: 0, json: null, text: String(e), headers: new Headers() };
  }
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// The lease log of a schema: the pairs of epochs of one chat whose holdings overlap (none, ever).
export function overlappingLeases(url) {
  return Number(sql(url, 'SELECT count(*) FROM lease_log a JOIN lease_log b ON b.chat_id = a.chat_id ' +
    'AND b.epoch > a.epoch WHERE b.taken_at < a.until_at'));
}

// A scripted page of one chat that follows its chat across nodes: it reads the chat's event
// stream through `via` (another node than the owner), answers every run dispatched to it, and
// when the stream ends or cannot be opened, tries the next live node with Last-Event-ID.
export class RoamingPage {
  constructor(nodes, chat, via, log) {
    Object.assign(this, { nodes, chat, via, log, ids: new Set(), stop: false, reconnects: 0 });
    this.pageId = `page-${chat.id.slice(-6)}`;
    this.done = this.loop();
  }
  node() { return this.nodes[this.via % this.nodes.length]; }
  async loop() {
    let last;
    while (!this.stop) {
      const node = this.node();
      if (!node.alive) { // the next node; with none alive, a pause (a loop that never waits would
        this.via++;      // hold the event loop, and the test's own timeout with it)
        if (this.nodes.every((n) => !n.alive)) await sleep(200);
        continue;
      }
      const headers = { authorization: `Bearer ${this.chat.token}` };
      if (last !== undefined) headers['last-event-id'] = String(last);
      this.ctrl = new AbortController();
      let res;
      try {
        res = await fetch(`${node.base}/v1/chats/${this.chat.id}/events?page_id=${this.pageId}`, { headers, signal: this.ctrl.signal });
      } catch { res = null; }
      if (!res || res.status !== 200) { // 503 while the lease of a dead owner runs out
        if (res) await res.body?.cancel();
        this.via += res ? 0 : 1;
        await sleep(150);
        continue;
      }
      try {
        const dec = new TextDecoder();
        let buf = '';
        for await (const chunk of res.body) {
          buf += dec.decode(chunk, { stream: true });
          let i;
          while ((i = buf.indexOf('\n\n')) >= 0) {
            const block = buf.slice(0, i); buf = buf.slice(i + 2);
            let id = null, ev = null, data = '';
            for (const line of block.split('\n')) {
              if (line.startsWith('id: ')) id = Number(line.slice(4));
              else if (line.startsWith('event: ')) ev = line.slice(7);
              else if (line.startsWith('data: ')) data += line.slice(6);
            }
            if (id !== null) { this.ids.add(id); last = id; }
            if (ev === 'run') this.answer(node, JSON.parse(data));
          }
        }
      } catch { /* the stream broke */ }
      if (!this.stop) { this.reconnects++; this.via++; }
    }
  }
  // Reports a run started and its result, as a page does: a report that reached no node (its
  // node died, or the chat's new node is not serving yet) is sent again, through the node of the
  // stream now, until a node answers it (200, or 409 when that attempt is no longer current).
  async answer(node, run) {
    if (run.page_id !== this.pageId) return;
    const t = this.chat.token;
    await req(node, 'POST', `/v1/runs/${run.run_id}/started`, { token: t, body: { attempt: run.attempt, page_id: this.pageId } });
    const stdout = `out ${run.run_id} ${run.attempt}\n`;
    const body = { attempt: run.attempt, status: 'ok', stdout, stderr: '', files: [] };
    for (let tries = 0; tries < 200 && !this.stop; tries++) {
      const r = await req(tries ? this.node() : node, 'POST', `/v1/runs/${run.run_id}/result`, { token: t, body });
      if (r.status === 200) { this.log.acked.push({ run: run.run_id, stdout }); return; }
      if (r.status === 409 || r.status === 404) return;
      await sleep(150);
    }
  }
  close() { this.stop = true; this.ctrl?.abort(); }
}
