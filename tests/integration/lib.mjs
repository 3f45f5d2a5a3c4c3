// lib.mjs -- what the orchestrator integration tests share: start the real binary on 127.0.0.1
// with a free port and its own data dir (tracked and stopped by pid), call the API (each answer
// checked against docs/openapi.yaml: openapi.mjs), read event
// streams (an SSE reader over fetch that carries the bearer token), and act as a scripted page
// (its event stream plus the page's reports, output and heartbeat).
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { checkResponse } from './openapi.mjs';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const BIN = process.env.CEREA_BIN || join(ROOT, 'build', 'cerea-sandbox');
export const API_KEY = 'integration-test-key-0123456789abcdef';

export function tempDir(tag = 'orch') {
  return mkdtempSync(join(tmpdir(), `cerea-${tag}-`));
}

// With CEREA_TEST_PG (a PostgreSQL server's URL: scripts/test.d/45-postgres.sh), a server's
// store is in that database, in a schema of its own named after its data dir (so a restart on
// the same data dir finds its rows, as with SQLite).  Otherwise null: SQLite in the data dir.
export const PG = process.env.CEREA_TEST_PG || null;
export function databaseUrl(dataDir) {
  if (!PG) return null;
  const schema = 't_' + Buffer.from(dataDir.split('/').pop()).toString('hex');
  execFileSync('psql', [PG, '-qXc', `SET client_min_messages = warning; CREATE SCHEMA IF NOT EXISTS ${schema}`]);
  return `${PG}${PG.includes('?') ? '&' : '?'}options=-csearch_path%3D${schema}`;
}

// Raw SQL on a server's database beside it (the sqlite3 CLI on DATA/cerea.db, or psql on its
// schema): the rows as text, one per line, columns joined by '|'.
export function sqlQuery(dataDir, q) {
  if (PG) return execFileSync('psql', [databaseUrl(dataDir), '-tAqX', '-c', q], { encoding: 'utf8' }).trim();
  return execFileSync('sqlite3', ['-cmd', '.timeout 5000', join(dataDir, 'cerea.db'), q], { encoding: 'utf8' }).trim();
}

// Starts the server; resolves once it printed its port.  env adds settings; port 0: a free one
// (a restart that clients must find again passes the port it had).
export async function startServer({ dataDir = tempDir(), env = {}, apiKey = API_KEY, port: want = 0 } = {}) {
  if (!existsSync(BIN)) throw new Error(`${BIN} not built (run bash scripts/setup.sh)`);
  const fullEnv = { ...process.env, CEREA_LOG: process.env.CEREA_LOG || 'warn', ...env };
  if (PG && !fullEnv.CEREA_DATABASE_URL) fullEnv.CEREA_DATABASE_URL = databaseUrl(dataDir);
  if (apiKey) fullEnv.CEREA_API_KEY = apiKey;
  const proc = spawn(BIN, ['serve', '--listen', `127.0.0.1:${want}`, '--data', dataDir], {
    cwd: ROOT, env: fullEnv, stdio: ['ignore', 'ignore', 'pipe'],
  });
  let log = '';
  const port = await new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`server did not start:\n${log}`)), 10000);
    proc.stderr.on('data', (d) => {
      log += d;
      const m = /port (\d+)\)/.exec(log);
      if (m) { clearTimeout(t); resolve(Number(m[1])); }
    });
    proc.on('exit', (code) => { clearTimeout(t); reject(new Error(`server exited ${code}:\n${log}`)); });
  });
  proc.removeAllListeners('exit');
  const srv = {
    proc, pid: proc.pid, port, dataDir, base: `http://127.0.0.1:${port}`, key: apiKey,
    get log() { return log; },
    exited: new Promise((r) => proc.on('exit', (code, sig) => r({ code, sig }))),
    async stop(sig = 'SIGTERM') {
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      srv.stopping = true;
      process.kill(proc.pid, sig);
      const r = await srv.exited;
      // A sanitizer build (CEREA_BIN=build-asan/...) reports on exit: make it a failure.
      if (/ERROR: (Address|Leak)Sanitizer|runtime error:/.test(log)) throw new Error(`sanitizer report:\n${log.slice(-6000)}`);
      return r;
    },
  };
  proc.stderr.on('data', (d) => { log += d; });
  proc.on('exit', (code, sig) => {
    if (!srv.stopping) console.error(`server ${proc.pid} exited unexpectedly (${code ?? sig}):\n${log.slice(-4000)}`);
  });
  return srv;
}

export async function call(srv, method, path, { token, body, raw, headers = {} } = {}) {
  const h = { ...headers };
  const auth = token === undefined ? srv.key : token;
  if (auth) h.authorization = `Bearer ${auth}`;
  let payload;
  if (raw !== undefined) payload = raw;
  else if (body !== undefined) { payload = typeof body === 'string' ? body : JSON.stringify(body); h['content-type'] = 'application/json'; }
  const res = await fetch(srv.base + path, { method, headers: h, body: payload });
  const buf = Buffer.from(await res.arrayBuffer());
  let json = null;
  try { json = JSON.parse(buf.toString('utf8')); } catch { /* not JSON */ }
  // Every answer held to docs/openapi.yaml (openapi.mjs): a mismatch fails the test that got it.
  checkResponse({ method, path, status: res.status, contentType: res.headers.get('content-type'), json, buf });
  return { status: res.status, json, buf, headers: res.headers };
}

export async function newChat(srv) {
  const r = await call(srv, 'POST', '/v1/chats', { body: {} });
  if (r.status !== 201) throw new Error(`create chat: ${r.status} ${r.buf}`);
  return { id: r.json.chat_id, token: r.json.page_token };
}

export async function upload(srv, chat, name, data, { token, source, text_of } = {}) {
  const q = new URLSearchParams();
  if (name !== null) q.set('name', name);
  if (source) q.set('source', source);
  if (text_of) q.set('text_of', text_of);
  return call(srv, 'POST', `/v1/chats/${chat.id}/files?${q}`, { raw: data, token });
}

// An event stream read over fetch: its events ({id, event, data, at}) kept in order; next(pred)
// waits for one.  `ended` resolves when the server ends the stream.
export class EventStream {
  constructor(srv, path, { token, lastEventId } = {}) {
    this.events = [];
    this.waiters = [];
    this.lastId = null;
    this.ctrl = new AbortController();
    const headers = { authorization: `Bearer ${token ?? srv.key}` };
    if (lastEventId !== undefined) headers['last-event-id'] = String(lastEventId);
    let done;
    this.ended = new Promise((r) => { done = r; });
    this.opened = fetch(`${srv.base}${path}`, { headers, signal: this.ctrl.signal })
      .then((res) => { this.status = res.status; if (res.ok) this.pump(res.body).then(done); else done(); return res; });
  }

  async pump(body) {
    const dec = new TextDecoder();
    let buf = '';
    try {
      for await (const chunk of body) {
        buf += dec.decode(chunk, { stream: true });
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, i); buf = buf.slice(i + 2);
          const ev = { id: null, event: 'message', data: '' };
          const data = [];
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) continue;
            const c = line.indexOf(':');
            const k = c < 0 ? line : line.slice(0, c);
            const v = c < 0 ? '' : line.slice(c + 1).replace(/^ /, '');
            if (k === 'id') ev.id = Number(v); else if (k === 'event') ev.event = v; else if (k === 'data') data.push(v);
          }
          if (!data.length && ev.id === null) continue;
          ev.data = data.length ? JSON.parse(data.join('\n')) : null;
          ev.at = Date.now();
          if (ev.id !== null) this.lastId = ev.id;
          this.events.push(ev);
          this.waiters = this.waiters.filter((w) => !w(ev));
        }
      }
    } catch { /* aborted */ }
  }

  // Resolves with the next event matching pred (or already received and not yet taken).
  next(pred = () => true, timeoutMs = 5000) {
    const p = typeof pred === 'string' ? ((e) => e.event === pred) : pred;
    const idx = this.events.findIndex((e) => !e.taken && p(e));
    if (idx >= 0) { this.events[idx].taken = true; return Promise.resolve(this.events[idx]); }
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`${this.name ?? 'stream'}: no matching event in ${timeoutMs} ms; got ${JSON.stringify(this.events.map((e) => e.event))}`)), timeoutMs);
      this.waiters.push((ev) => { if (!p(ev)) return false; ev.taken = true; clearTimeout(t); resolve(ev); return true; });
    });
  }

  // The text of a stream put together from `output` events as a page does: each chunk taken from
  // the length held on (by offset), a new attempt starting again.
  text(stream = 'stdout', runId) {
    let attempt = 0, out = '';
    for (const e of this.events) {
      if (e.event !== 'output' || e.data.stream !== stream || (runId && e.data.run_id !== runId)) continue;
      if (e.data.attempt !== attempt) { attempt = e.data.attempt; out = ''; }
      const have = [...out].length;
      if (e.data.offset > have) throw new Error(`a gap in ${stream}: offset ${e.data.offset}, held ${have}`);
      out += [...e.data.text].slice(have - e.data.offset).join('');
    }
    return out;
  }

  close() { this.ctrl.abort(); }
}

// A run's own event stream (GET /v1/runs/{run}/events).
export const runEvents = (srv, runId, opts) => new EventStream(srv, `/v1/runs/${runId}/events`, opts);

// A scripted page: attaches to a chat's event stream and answers runs as told.
export class Page extends EventStream {
  constructor(srv, chat, pageId, { token, lastEventId, visible } = {}) {
    const q = new URLSearchParams({ page_id: pageId });
    if (visible === false) q.set('visible', '0');
    super(srv, `/v1/chats/${chat.id}/events?${q}`, { token: token ?? chat.token, lastEventId });
    Object.assign(this, { srv, chat, pageId, token: token ?? chat.token, name: `page ${pageId}` });
  }

  nextRun(timeoutMs) { return this.next((e) => e.event === 'run' && e.data.page_id === this.pageId, timeoutMs); }

  presence(visible, kernel) {
    return call(this.srv, 'POST', `/v1/chats/${this.chat.id}/presence`, { token: this.token, body: { page_id: this.pageId, visible, ...(kernel ? { kernel } : {}) } });
  }
  started(run) {
    return call(this.srv, 'POST', `/v1/runs/${run.run_id}/started`, { token: this.token, body: { attempt: run.attempt, page_id: this.pageId } });
  }
  putFile(run, name, data, attempt = run.attempt) {
    const enc = name.split('/').map(encodeURIComponent).join('/');
    return call(this.srv, 'PUT', `/v1/runs/${run.run_id}/files/${enc}?attempt=${attempt}`, { token: this.token, raw: data });
  }
  result(run, extra = {}) {
    return call(this.srv, 'POST', `/v1/runs/${run.run_id}/result`, { token: this.token, body: { attempt: run.attempt, status: 'ok', stdout: '', stderr: '', files: [], ...extra } });
  }
  // POST output {attempt, chunks?, displays?, input_request?}; body adds or replaces fields.
  output(run, body = {}) {
    return call(this.srv, 'POST', `/v1/runs/${run.run_id}/output`, { token: this.token, body: { attempt: run.attempt, ...body } });
  }
  // A sign of life every ms (presence, visible), as a page holding a run sends from its own timers.
  heartbeat(ms) {
    this.stopHeartbeat();
    this.beats = 0;
    this.hb = setInterval(() => { this.beats++; this.lastBeat = Date.now(); this.presence(true).catch(() => {}); }, ms);
  }
  stopHeartbeat() { if (this.hb) clearInterval(this.hb); this.hb = null; }
  close() { this.stopHeartbeat(); super.close(); }
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// The calls most tests make, bound to the server `srvOf()` gives (a test file's server is made in
// its before hook): createRun(chat, body) (code 'x' unless given), getRun(id, waitS), and
// openPage(chat, pageId, opts), a scripted page whose event stream is open.
export function helpers(srvOf) {
  return {
    createRun: (chat, body = {}) => call(srvOf(), 'POST', `/v1/chats/${chat.id}/runs`, { body: { code: 'x', ...body } }),
    getRun: (id, wait) => call(srvOf(), 'GET', `/v1/runs/${id}${wait ? `?wait_s=${wait}` : ''}`),
    openPage: async (chat, pageId = 'tab', opts) => {
      const p = new Page(srvOf(), chat, pageId, opts);
      await p.opened;
      return p;
    },
  };
}
