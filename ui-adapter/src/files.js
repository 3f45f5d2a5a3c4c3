// files.js -- the page's in-memory copies of a chat's mounted files.  A run's manifest lists
// {name, file_id, version, sha256, size, url}; this cache downloads what it does not hold yet
// (with the page token), all downloads of one run sharing ONE deadline (5 s by default, DESIGN.md:
// "each run waits at most 5 s for files"), and hands back the bytes of every file it has.  A
// download still going at the deadline is aborted and reported as skipped with a note; it is tried
// again on the next run.  Because the bytes stay here, remounting into a fresh kernel after a
// restart never downloads again.  Copies are keyed by sha256 (content), so the same content under
// two names is held once.  clear() drops everything (chat switch).
//
// It does not decide what is mounted (the orchestrator's manifest does) nor write to the kernel.
export class FileCache {
  constructor({ api, deadlineMs = 5000 } = {}) {
    this.api = api;
    this.deadlineMs = deadlineMs;
    this.bySha = new Map();     // sha256 -> Uint8Array
    this.downloads = 0;         // network fetches made (tests assert remounts add none)
  }

  has(m) { return this.bySha.has(m.sha256); }

  /**
   * @param {Array<{name:string,file_id:string,version:number,sha256:string,size:number,url:string}>} mounts
   * @param {(p: {name: string, loaded: number, total: number}) => void} [onProgress]
   * @returns {Promise<{files: Array<{name:string, bytes:Uint8Array, sha256:string}>, skipped: Array<{name:string, reason:string}>}>}
   */
  async fetchAll(mounts, onProgress) {
    const missing = mounts.filter((m) => !this.bySha.has(m.sha256));
    const skipped = [];
    if (missing.length) {
      const ctrl = new AbortController();
      const timer = setTimeout(() => ctrl.abort(new Error('deadline')), this.deadlineMs);
      await Promise.all(missing.map(async (m) => {
        try {
          const bytes = await this._download(m, ctrl.signal, onProgress);
          if (m.sha256 && typeof crypto !== 'undefined' && crypto.subtle) {
            const got = hex(await crypto.subtle.digest('SHA-256', bytes));
            if (got !== m.sha256.toLowerCase()) throw new Error(`sha256 mismatch (got ${got.slice(0, 12)}…)`);
          }
          this.bySha.set(m.sha256, bytes);
        } catch (e) {
          const stalled = ctrl.signal.aborted;
          skipped.push({ name: m.name, reason: stalled
            ? `download did not finish within ${this.deadlineMs / 1000} s: skipped for this run, tried again next run`
            : `download failed (${e.message || e}): skipped for this run, tried again next run` });
        }
      }));
      clearTimeout(timer);
    }
    const files = [];
    for (const m of mounts) {
      const bytes = this.bySha.get(m.sha256);
      if (bytes) files.push({ name: m.name, bytes, sha256: m.sha256 });
    }
    return { files, skipped };
  }

  async _download(m, signal, onProgress) {
    this.downloads++;
    const path = m.url || `/v1/files/${encodeURIComponent(m.file_id)}`;
    const res = await this.api.raw(path, { signal });
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    const total = m.size || Number(res.headers.get('Content-Length')) || 0;
    if (!res.body || !onProgress) return new Uint8Array(await res.arrayBuffer());
    const reader = res.body.getReader();
    const chunks = []; let loaded = 0;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      chunks.push(value); loaded += value.length;
      onProgress({ name: m.name, loaded, total });
    }
    const out = new Uint8Array(loaded); let o = 0;
    for (const c of chunks) { out.set(c, o); o += c.length; }
    return out;
  }

  clear() { this.bySha.clear(); }
}

export function hex(buf) {
  return [...new Uint8Array(buf)].map((b) => b.toString(16).padStart(2, '0')).join('');
}

export async function sha256Hex(bytes) {
  return hex(await crypto.subtle.digest('SHA-256', bytes));
}
