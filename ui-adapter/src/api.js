// api.js -- a thin client of the orchestrator's HTTP API v1 (docs/api.md) for pages and for the
// reference app.  It holds one bearer credential (a chat's page token, or the operator's API key)
// and sends it in the Authorization header, never as a cookie and never in a URL the page itself
// is loaded from.  It turns the API's `{"error": {code, message}}` replies into ApiError.
// pageClient(api) adapts it to the client worker/session.js (the page protocol) is given.
// It does not retry, queue or cache: callers decide (the event stream has its own reconnect loop).
import { fetchConnect } from './sse.js';

export class ApiError extends Error {
  constructor(status, code, message) {
    super(`${status} ${code}: ${message}`);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
  }
}

export class Api {
  /** @param {{base?: string, token: string, fetch?: typeof fetch}} opts */
  constructor({ base = '', token, fetch: f } = {}) {
    this.base = base.replace(/\/$/, '');
    this.token = token;
    this._fetch = f || globalThis.fetch.bind(globalThis);
  }

  url(path) { return this.base + path; }

  headers(extra = {}) {
    const h = { ...extra };
    if (this.token) h.Authorization = `Bearer ${this.token}`;
    return h;
  }

  /** Raw fetch with the credential; returns the Response (any status). */
  raw(path, init = {}) {
    return this._fetch(this.url(path), { ...init, headers: this.headers(init.headers || {}),
      credentials: 'omit', cache: 'no-store' });
  }

  /** Any call → {status, ok, json (parsed body or null), text}; rejects only on network errors. */
  async send(method, path, body, init = {}) {
    const opt = { method, ...init, headers: { ...(init.headers || {}) } };
    if (body !== undefined && !(body instanceof Blob) && !(body instanceof ArrayBuffer) &&
        !ArrayBuffer.isView(body)) {
      opt.headers['Content-Type'] = 'application/json';
      opt.body = JSON.stringify(body);
    } else if (body !== undefined) {
      opt.headers['Content-Type'] = 'application/octet-stream';
      opt.body = body;
    }
    const res = await this.raw(path, opt);
    const text = await res.text();
    let json = null;
    if (text) { try { json = JSON.parse(text); } catch { json = null; } }
    return { status: res.status, ok: res.ok, json, text };
  }

  /** JSON call: throws ApiError on a non-2xx answer, returns the parsed body (or null). */
  async call(method, path, body, init = {}) {
    const { ok, status, json, text } = await this.send(method, path, body, init);
    if (!ok) {
      const e = json && json.error ? json.error : { code: 'http_' + status, message: text.slice(0, 200) };
      throw new ApiError(status, e.code, e.message);
    }
    return json;
  }

  // Page calls (page token).
  presence(chatId, body, keepalive = false) {
    return this.call('POST', `/v1/chats/${enc(chatId)}/presence`, body, { keepalive });
  }
  started(runId, attempt, pageId) {
    return this.call('POST', `/v1/runs/${enc(runId)}/started`, { attempt, page_id: pageId });
  }
  putRunFile(runId, name, bytes, attempt) {
    // The name may hold '/': it travels URL-encoded as one segment.  `attempt` lets the server
    // refuse (409) a stale attempt's upload.
    const q = attempt ? `?attempt=${attempt}` : '';
    return this.call('PUT', `/v1/runs/${enc(runId)}/files/${encodeURIComponent(name)}${q}`, bytes);
  }
  result(runId, body) { return this.call('POST', `/v1/runs/${enc(runId)}/result`, body); }
  listFiles(chatId) { return this.call('GET', `/v1/chats/${enc(chatId)}/files`); }
  uploadFile(chatId, name, bytes, source = 'attachment') {
    return this.call('POST', `/v1/chats/${enc(chatId)}/files?name=${encodeURIComponent(name)}&source=${source}`, bytes);
  }
  async fileBytes(fileId, init = {}) {
    const res = await this.raw(`/v1/files/${enc(fileId)}`, init);
    if (!res.ok) throw new ApiError(res.status, 'http_' + res.status, `file ${fileId}`);
    return new Uint8Array(await res.arrayBuffer());
  }
  getRun(runId, waitS) {
    return this.call('GET', `/v1/runs/${enc(runId)}` + (waitS ? `?wait_s=${waitS}` : ''));
  }
  /** The chat's runs, newest first (page token or API key): `{runs: [run objects]}`. */
  chatRuns(chatId, limit = 50) { return this.call('GET', `/v1/chats/${enc(chatId)}/runs?limit=${limit}`); }
  /** One chat (its page token or the API key) -> `{chat_id, title, created_at}`. */
  getChat(chatId) { return this.call('GET', `/v1/chats/${enc(chatId)}`); }
  /** Renames a chat (its page token or the API key) -> `{chat_id, title, created_at}`. */
  renameChat(chatId, title) { return this.call('PATCH', `/v1/chats/${enc(chatId)}`, { title }); }
  createRun(chatId, body) { return this.call('POST', `/v1/chats/${enc(chatId)}/runs`, body); }
  cancelRun(runId) { return this.call('POST', `/v1/runs/${enc(runId)}/cancel`, {}); }
  config() { return this.call('GET', '/v1/config'); }
  /** The chat's conversation (page token or API key): `{messages: [message objects]}` in order. */
  messages(chatId) { return this.call('GET', `/v1/chats/${enc(chatId)}/messages`); }
  /** Asks the assistant (page token or API key) -> `{message_id, turn_id}` (201). */
  postMessage(chatId, text, fileIds) {
    return this.call('POST', `/v1/chats/${enc(chatId)}/messages`, fileIds?.length ? { text, file_ids: fileIds } : { text });
  }
  /** Stops a turn: its model request and live runs -> `{turn_id, state}`. */
  cancelTurn(turnId) { return this.call('POST', `/v1/turns/${enc(turnId)}/cancel`, {}); }

  // Backend / operator calls (API key).
  createChat(body = {}) { return this.call('POST', '/v1/chats', body); }
  /** A link that opens an existing chat's page -> `{url, page_token}`. */
  pageLink(chatId) { return this.call('POST', `/v1/chats/${enc(chatId)}/page_link`, {}); }
  adminRuns() { return this.call('GET', '/v1/admin/runs'); }
  adminPages() { return this.call('GET', '/v1/admin/pages'); }
  adminHistory() { return this.call('GET', '/v1/admin/history'); }
  adminSettings() { return this.call('GET', '/v1/admin/settings'); }
  putAdminSettings(body) { return this.call('PUT', '/v1/admin/settings', body); }
}

function enc(s) { return encodeURIComponent(String(s)); }

// The page protocol's client (worker/session.js) over this Api's credential: statuses returned,
// not thrown; downloads read with progress; the event stream through fetch (sse.js).
export function pageClient(api) {
  return {
    async json(method, path, body, { keepalive = false } = {}) {
      const r = await api.send(method, path, body, { keepalive });
      return { status: r.status, data: r.json };
    },
    async upload(path, bytes) {
      const r = await api.send('PUT', path, bytes);
      return { status: r.status, data: r.json };
    },
    /** @param {string} path @param {{signal?: AbortSignal, onProgress?: (got: number, total: number) => void}} [o] */
    async download(path, { signal, onProgress } = {}) {
      const res = await api.raw(path, { signal });
      if (!res.ok || !res.body) return { status: res.status, bytes: res.ok ? new Uint8Array(await res.arrayBuffer()) : null };
      const reader = res.body.getReader();
      const chunks = [];
      let loaded = 0;
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        chunks.push(value); loaded += value.length;
        if (onProgress) onProgress(loaded);
      }
      const bytes = new Uint8Array(loaded);
      let o = 0;
      for (const c of chunks) { bytes.set(c, o); o += c.length; }
      return { status: res.status, bytes };
    },
    connect: fetchConnect({ base: api.base, headers: () => api.headers(), fetch: api._fetch }),
  };
}
