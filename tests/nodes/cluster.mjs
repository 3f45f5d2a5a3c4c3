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
    exited: new Promise((r) => proc.on('exit', (code, sig) => r({ code, sig }))),
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
