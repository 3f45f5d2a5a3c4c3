// http.js -- the headless host's HTTP client for the orchestrator: JSON calls, raw uploads and
// downloads, and an SSE reader, over TCP (`http://127.0.0.1:PORT`) or the orchestrator's Unix
// socket (`unix:/path/hosts.sock`).
//
// Why node:http and not fetch: Node's fetch cannot reach a Unix socket without undici's Agent,
// and undici is not importable as a package here unless installed (it ships inside Node only as
// fetch's internals).  node:http takes `socketPath` everywhere, streams response bodies, and
// needs nothing from npm.  A sandboxed host has no TCP at all (bubblewrap network namespace): the
// socket is its one way out.
//
// What it does not do: retry (callers decide), follow redirects (the API never redirects), or
// know the page protocol (chat.js does).
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

  // → {status, headers, body: Buffer}.  Rejects on connection errors and on timeout.
  request(method, path, { body = null, headers = {}, timeoutMs = 30000, signal } = {}) {
    return new Promise((resolve, reject) => {
      const h = { ...headers };
      if (this.credential) h.authorization = `Bearer ${this.credential}`;
      if (body !== null) h['content-length'] = Buffer.byteLength(body);
      const req = http.request({ ...this.base, agent: this.agent, method, path, headers: h, signal }, (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
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
    const r = await this.request(method, path, { ...opts, body,
      headers: body === null ? {} : { 'content-type': 'application/json' } });
    let data = null;
    try { data = JSON.parse(r.body.toString('utf8')); } catch { /* not JSON */ }
    return { status: r.status, data };
  }

  // Reads an SSE stream until it ends or `signal` aborts.  onEvent({id, event, data}) for each
  // event; onOpen(status) once the head arrived.  Resolves with the HTTP status when the stream
  // ends; rejects on connection errors.
  stream(path, { lastEventId = null, onEvent, onOpen, signal } = {}) {
    return new Promise((resolve, reject) => {
      const h = { accept: 'text/event-stream' };
      if (this.credential) h.authorization = `Bearer ${this.credential}`;
      if (lastEventId !== null && lastEventId !== undefined) h['last-event-id'] = String(lastEventId);
      const req = http.request({ ...this.base, agent: false, method: 'GET', path, headers: h, signal }, (res) => {
        if (onOpen) onOpen(res.statusCode);
        if (res.statusCode !== 200) { res.resume(); res.on('end', () => resolve(res.statusCode)); return; }
        res.setEncoding('utf8');
        let buf = '', ev = { id: null, event: 'message', data: [] };
        res.on('data', (chunk) => {
          buf += chunk;
          let nl;
          while ((nl = buf.indexOf('\n')) >= 0) {
            let line = buf.slice(0, nl);
            buf = buf.slice(nl + 1);
            if (line.endsWith('\r')) line = line.slice(0, -1);
            if (line === '') {
              if (ev.data.length) {
                try { onEvent({ id: ev.id, event: ev.event, data: ev.data.join('\n') }); } catch { /* the handler reports */ }
              }
              ev = { id: null, event: 'message', data: [] };
              continue;
            }
            if (line.startsWith(':')) continue;
            const c = line.indexOf(':');
            const field = c < 0 ? line : line.slice(0, c);
            let value = c < 0 ? '' : line.slice(c + 1);
            if (value.startsWith(' ')) value = value.slice(1);
            if (field === 'id') ev.id = value;
            else if (field === 'event') ev.event = value;
            else if (field === 'data') ev.data.push(value);
          }
        });
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
