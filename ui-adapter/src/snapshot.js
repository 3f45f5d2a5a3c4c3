// snapshot.js -- the page's copy of the kernel runtime's memory snapshot (worker/protocol.js
// SNAPSHOTS): the image the server made at setup and serves beside the runtime
// (worker/snapshot.js).  A first visit's kernel restores the served image when that is faster on
// this connection (the worker measures the download and loads Python instead when not) and hands
// the file to the page, which keeps it; later kernels of the page and repeat visits restore the
// kept copy.  It lives in this origin's IndexedDB, one record under this build's key
// (worker/snapshot-key.js, compiled in by ui-adapter/build.mjs).
//
// Provenance: the worker restores a kept image only when its bytes hash to the sha256 the served
// lock lists (it reads the lock from the server at each start), so a kept image is only ever a
// copy of the server's.  A script on our origin can write this IndexedDB (it runs as the page),
// but it cannot plant an image of its own: one that is not the served file is refused.  (Signing
// would not help: a key the page holds is a key any script of the origin holds.)  Sandboxed
// Python cannot even reach the storage: the locked worker has no storage API, cannot post to the
// page once Python could run, and the page accepts the file only while that kernel is loading.
//
//   store.initFields() → Promise<init fields for one kernel>: {snapshot: {key, sha256, bytes}}
//                        when an image of this build is kept, else {servedSnapshot, makeSnapshot:
//                        key} (restore the served image, and send it to be kept): for the page's
//                        first kernel only when faster than a load, for later ones (the spare)
//                        whatever the link
//   store.watch(client, fields)   keeps the file that kernel sends, drops a kept image the worker
//                        refused or could not restore (the next kernel restores the served one),
//                        and says on the console which start ran.
//
// What it does not do: check the image (the worker does, against the served lock).  Every failure
// of the storage means the served image or a normal load, never a broken kernel.
import { EVENT } from '../../worker/protocol.js';

// This build's key (ui-adapter/build.mjs defines it; '' unbundled: no snapshots).
const SNAPSHOT_KEY = typeof CEREA_SNAPSHOT_KEY === 'string' ? CEREA_SNAPSHOT_KEY : '';
const DB = 'cerea-kernel', STORE = 'snapshots', ID = 'runtime';
const OPEN_WAIT_MS = 3000; // storage that does not answer by then: a normal load
const LATER_BUDGET_MS = 3_600_000; // a kernel after the page's first waits for the image

function request(r) {
  return new Promise((resolve, reject) => { r.onsuccess = () => resolve(r.result); r.onerror = () => reject(r.error); });
}

export class SnapshotStore {
  constructor({ key = SNAPSHOT_KEY, storage = globalThis.indexedDB, log = console } = {}) {
    this.key = key;
    this.storage = key ? storage : null;
    this.log = log;
    this.kept = null;    // Promise of {sha256, data: Blob | ArrayBuffer} | null: the image kernels restore
    this.kernels = 0;    // kernels that asked for their init fields
    this.db = null;
  }

  open() {
    this.db ||= new Promise((resolve, reject) => {
      const r = this.storage.open(DB, 1);
      r.onupgradeneeded = () => r.result.createObjectStore(STORE);
      r.onsuccess = () => resolve(r.result);
      r.onerror = () => reject(r.error);
      r.onblocked = () => reject(new Error('storage blocked by another tab'));
      setTimeout(() => reject(new Error(`storage did not open within ${OPEN_WAIT_MS} ms`)), OPEN_WAIT_MS);
    });
    return this.db;
  }

  async tx(mode, fn) {
    const db = await this.open();
    const t = db.transaction(STORE, mode);
    const done = new Promise((resolve, reject) => { t.oncomplete = resolve; t.onerror = () => reject(t.error); t.onabort = () => reject(t.error); });
    const out = await fn(t.objectStore(STORE));
    await done;
    return out;
  }

  // The kept record when it is this build's, else null (another build's is left for save to replace).
  read() {
    this.kept ||= this.tx('readonly', (s) => request(s.get(ID)))
      .then((rec) => {
        const data = rec && (rec.blob instanceof Blob ? rec.blob : rec.bytes instanceof ArrayBuffer ? rec.bytes : null);
        if (rec && rec.key === this.key && data && typeof rec.sha256 === 'string') return { sha256: rec.sha256, data };
        if (rec) this.log.info('kernel: the memory snapshot kept here is another build\'s: the served one instead (kept in its place)');
        return null;
      })
      .catch((e) => { this.log.warn(`kernel: the kept memory snapshot is unreadable (${e.message}): the served one instead`); return null; });
    return this.kept;
  }

  async initFields() {
    if (!this.storage) return this.key ? { servedSnapshot: true } : {};
    // The page's first kernel restores the served image only when that is faster than a load on
    // this link (the worker measures it); a later one (the spare, loaded once the first is ready:
    // off the visit's start) takes it whatever the link, so that the page keeps it for the next
    // visit even on a slow one.
    const first = this.kernels++ === 0;
    const served = first ? true : { budgetMs: LATER_BUDGET_MS };
    const rec = await this.read();
    if (rec) {
      try {
        const bytes = new Uint8Array(rec.data instanceof Blob ? await rec.data.arrayBuffer() : rec.data.slice(0));
        return { snapshot: { key: this.key, sha256: rec.sha256, bytes } };
      } catch (e) {
        this.log.warn(`kernel: the kept memory snapshot is unreadable (${e.message}): the served one instead`);
        this.drop();
        return { servedSnapshot: served };
      }
    }
    return { servedSnapshot: served, makeSnapshot: this.key };
  }

  watch(client, fields) {
    if (!this.storage) return;
    Promise.resolve(fields).then((f) => {
      if (f.makeSnapshot) {
        const off = client.onEvent((e) => {
          if (e.event !== EVENT.SNAPSHOT) return;
          off();
          if (client.state === 'loading' && e.key === this.key && e.bytes instanceof Uint8Array) this.save(e.bytes);
        });
        client.ready.finally(off).catch(() => {});
      }
      client.onEvent((e) => { if (e.event === EVENT.LOG && /snapshot/.test(e.message)) this.log.warn(`kernel: ${e.message}`); });
      client.ready.then((info) => {
        const how = info && info.snapshot;
        if (how === 'restored') this.log.info('kernel: started from the memory snapshot');
        else if (how === 'served') this.log.info("kernel: started from the server's memory snapshot");
        else this.log.info(`kernel: Python loaded (memory snapshot: ${how})`);
        if (how !== 'restored' && f.snapshot) this.drop();
      }, () => { if (f.snapshot) this.drop(); });
    });
  }

  // Hashed here, off the kernel's start (the worker checks the hash before it restores).
  save(bytes) {
    const blob = new Blob([bytes]);
    this.kept = crypto.subtle.digest('SHA-256', bytes).then((d) => {
      const sha256 = Array.from(new Uint8Array(d), (b) => b.toString(16).padStart(2, '0')).join('');
      const put = (rec) => this.tx('readwrite', (s) => request(s.put({ key: this.key, sha256, size: bytes.length, saved: Date.now(), ...rec }, ID)));
      // WebKit's ephemeral sessions (private browsing, automation) refuse a Blob in IndexedDB
      // ("Error preparing Blob/File data to be stored"): the bytes go in as an ArrayBuffer then.
      put({ blob }).catch(() => put({ bytes: bytes.slice().buffer }))
        .catch((e) => this.log.warn(`kernel: memory snapshot not kept (${e.message})`));
      return { sha256, data: blob };
    }, (e) => { this.log.warn(`kernel: memory snapshot not kept (${e.message})`); return null; });
  }

  // A kept image the worker would not or could not restore: forgotten (the next kernel restores
  // the served one, and the page keeps that).
  drop() {
    this.kept = Promise.resolve(null);
    this.tx('readwrite', (s) => request(s.delete(ID))).catch(() => {});
  }
}

let shared = null;
/** The page's one store (every kernel supervisor of the page shares it). */
export function pageSnapshots() { shared ||= new SnapshotStore(); return shared; }
