// files.js -- FileCache: a host's in-memory copies of one chat's mounted files, for the page and the
// headless host alike.  A run's manifest lists {name, file_id, version, sha256, size, url}; the
// cache downloads what it does not hold yet, all downloads of one run sharing ONE deadline (5 s by
// default), and hands back the bytes of every
// file it has.  A download still going at the deadline is aborted and reported skipped; it is tried
// again on the next run.  Because the bytes stay here (in shared memory where it can be had, so a
// kernel takes them without a copy on this thread), remounting into a fresh kernel after a restart
// never downloads again.  Copies are keyed by sha256 (content): the same content under two names
// is held once, and bytes no manifest names any more are dropped after each run's fetch.
//
// The download is injected: client.download(path, {signal, onProgress}) → {status, bytes}
// (fetch with the page token in the browser, node:http over the Unix socket in the host).
//
// It does not decide what is mounted (the orchestrator's manifest does) nor write to the kernel
// (the supervisor does), and it words nothing (notes.js: NOTE.skipped).
import { shareBytes } from './kernel-client.js';

export class FileCache {
  /**
   * @param {{client: {download: Function}, deadlineMs?: number, verify?: boolean}} o
   *   verify: check each download's sha256 against the manifest (a skipped file when it differs)
   */
  constructor({ client, deadlineMs = 5000, verify = true } = {}) {
    this.client = client;
    this.deadlineMs = deadlineMs;
    this.verify = verify;
    this.bySha = new Map();     // sha256 -> Uint8Array
    this.downloads = 0;         // network fetches made (tests assert remounts add none)
  }

  has(m) { return this.bySha.has(m.sha256); }

  /**
   * @param {Array<{name, file_id, version, sha256, size, url}>} mounts
   * @param {{signal?: AbortSignal, onProgress?: (p: {name, loaded, total}) => void}} [o]
   *   signal: the run no longer wants its files (cancelled, superseded): every download stops
   * @returns {Promise<{files: Array<{name, version, sha256, size, data: Uint8Array}>,
   *                    skipped: Array<{name, why: 'deadline' | string}>}>}
   */
  async fetchAll(mounts, { signal, onProgress } = {}) {
    const missing = mounts.filter((m) => !this.bySha.has(m.sha256));
    const skipped = [];
    if (missing.length) {
      const ctrl = new AbortController();
      const timer = setTimeout(() => ctrl.abort(new Error('deadline')), this.deadlineMs);
      const stop = () => ctrl.abort(new Error('cancelled'));
      if (signal) { if (signal.aborted) stop(); else signal.addEventListener('abort', stop, { once: true }); }
      await Promise.all(missing.map(async (m) => {
        try {
          this.downloads++;
          const path = m.url || `/v1/files/${encodeURIComponent(m.file_id)}`;
          const r = await this.client.download(path, { signal: ctrl.signal,
            onProgress: onProgress && ((loaded) => onProgress({ name: m.name, loaded, total: m.size || 0 })) });
          if (r.status !== 200) throw new Error(`HTTP ${r.status}`);
          if (this.verify && m.sha256) {
            const got = await sha256Hex(r.bytes);
            if (got !== m.sha256.toLowerCase()) throw new Error(`sha256 mismatch (got ${got.slice(0, 12)}…)`);
          }
          this.bySha.set(m.sha256, shareBytes(r.bytes));
        } catch (e) {
          skipped.push({ name: m.name, why: ctrl.signal.aborted && !(signal && signal.aborted) ? 'deadline' : String(e && e.message || e) });
        }
      }));
      clearTimeout(timer);
      if (signal) signal.removeEventListener('abort', stop);
    }
    const files = [];
    for (const m of mounts) {
      const data = this.bySha.get(m.sha256);
      if (data) files.push({ name: m.name, version: m.version, sha256: m.sha256, size: m.size ?? data.length, data });
    }
    const named = new Set(mounts.map((m) => m.sha256));
    for (const sha of [...this.bySha.keys()]) if (!named.has(sha)) this.bySha.delete(sha);
    return { files, skipped };
  }

  clear() { this.bySha.clear(); }
}

export function hex(buf) {
  return [...new Uint8Array(buf)].map((b) => b.toString(16).padStart(2, '0')).join('');
}

// Web Crypto: globalThis.crypto in browsers and in Node 20.  Shared memory is copied first
// (digest() does not take a view of a SharedArrayBuffer).
export async function sha256Hex(bytes) {
  const view = typeof SharedArrayBuffer === 'function' && bytes.buffer instanceof SharedArrayBuffer ? bytes.slice() : bytes;
  return hex(await crypto.subtle.digest('SHA-256', view));
}
