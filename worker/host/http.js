// http.js -- the headless host's HTTP client for the orchestrator, over TCP
// (`http://127.0.0.1:PORT`) or the orchestrator's Unix socket (`unix:/path/hosts.sock`): the
// client a PageSession (worker/session.js) is given — JSON calls, raw uploads and downloads, and
// one event-stream connection at a time for EventStream (worker/event-stream.js), every call with
// the bearer credential.
//
// Why node:http and not fetch: Node's fetch cannot reach a Unix socket without undici's Agent,
// and undici is not importable as a package here unless installed (it ships inside Node only as
// fetch's internals).  node:http takes `socketPath` everywhere, streams response bodies, and
// needs nothing from npm.  A sandboxed host has no TCP at all (bubblewrap network namespace): the
// socket is its one way out.
//
// What it does not do: retry (the session decides), follow redirects (the API never redirects),
// parse SSE (event-stream.js does) or know the page protocol (session.js does).
import http from 'node:http';

export class OrchClient {
  // target: 'unix:/path' or 'http://host:port'; credential: bearer sent on every call.
  constructor(target, credential) {
    this.credential = credential;
    if (target.startsWith('unix:')) {
      this.base = { socketPath: target.slice(5) };
    } else {
      const u = new URL(target);
      if (u.protocol !== 'http:') throw new Error(`unsupported orchestrator URL ${target}`);
      this.base = { host: u.hostname, port: Number(u.port || 80) };
    }
    this.agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
  }

  headers(extra = {}) {
    const h = { ...extra };
    if (this.credential) h.authorization = `Bearer ${this.credential}`;
    return h;
  }

  // → {status, headers, body: Buffer}.  Rejects on connection errors and on timeout.
  // onProgress(loaded) while the body arrives.
  request(method, path, { body = null, headers = {}, timeoutMs = 30000, signal, onProgress } = {}) {
    return new Promise((resolve, reject) => {
      const h = this.headers(headers);
      if (body !== null) h['content-length'] = Buffer.byteLength(body);
      const req = http.request({ ...this.base, agent: this.agent, method, path, headers: h, signal }, (res) => {
        const chunks = [];
        let loaded = 0;
        res.on('data', (c) => { chunks.push(c); loaded += c.length; if (onProgress) onProgress(loaded); });
        res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }));
        res.on('error', reject);
      });
      req.setTimeout(timeoutMs, () => req.destroy(new Error(`${method} ${path}: no answer within ${timeoutMs} ms`)));
      req.on('error', reject);
      req.end(body === null ? undefined : body);
    });
  }

  // JSON in and out → {status, data} (data null when the body is not JSON).
  async json(method, path, obj, opts = {}) {
    const body = obj === undefined ? null : JSON.stringify(obj);
    const r = await this.request(method, path, { timeoutMs: opts.timeoutMs, body,
      headers: body === null ? {} : { 'content-type': 'application/json' } });
    let data = null;
    try { data = JSON.parse(r.body.toString('utf8')); } catch { /* not JSON */ }
    return { status: r.status, data };
  }

  // PUT raw bytes → {status, data}.
  async upload(path, bytes) {
    const body = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length);
    const r = await this.request('PUT', path, { body, headers: { 'content-type': 'application/octet-stream' } });
    let data = null;
    try { data = JSON.parse(r.body.toString('utf8')); } catch { /* not JSON */ }
    return { status: r.status, data };
  }

  // GET raw bytes → {status, bytes: Uint8Array}.
  async download(path, { signal, onProgress } = {}) {
    const r = await this.request('GET', path, { signal, onProgress });
    return { status: r.status, bytes: new Uint8Array(r.body.buffer, r.body.byteOffset, r.body.length) };
  }

  // One event-stream connection (the contract is event-stream.js's): onOpen(status) once the head
  // arrived, onText(chunk) for each decoded chunk of a 200 body; resolves with the status when it
  // ends, rejects on connection errors and when `signal` aborts.
  connect({ path, lastEventId = null, signal, onOpen, onText }) {
    return new Promise((resolve, reject) => {
      const h = this.headers({ accept: 'text/event-stream' });
      if (lastEventId !== null && lastEventId !== undefined) h['last-event-id'] = String(lastEventId);
      const req = http.request({ ...this.base, agent: false, method: 'GET', path, headers: h, signal }, (res) => {
        onOpen(res.statusCode);
        if (res.statusCode !== 200) { res.resume(); res.on('end', () => resolve(res.statusCode)); return; }
        res.setEncoding('utf8');
        res.on('data', (chunk) => { try { onText(chunk); } catch (e) { req.destroy(e); } });
        res.on('end', () => resolve(200));
        res.on('error', reject);
        res.on('close', () => resolve(200));
      });
      req.on('error', reject);
      req.end();
    });
  }

  close() { this.agent.destroy(); }
}
