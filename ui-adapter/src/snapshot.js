// snapshot.js -- the page's copy of the kernel runtime's memory snapshot (worker/protocol.js
// SNAPSHOTS): a kernel worker made on a repeat visit restores Pyodide's memory from it instead of
// starting Pyodide again.  The image lives in this origin's IndexedDB, one record under this
// build's key (ui-adapter/build.mjs: the runtime's files and the worker's and kernel's sources).
// The page, not the worker, reads and writes it: the locked kernel worker has no storage API at
// all, and it cannot post to the page once Python could run (postMessage is gone from its scope),
// so sandboxed Python never writes the image a later kernel restores.  An image is taken only
// when the page asks a kernel for one in its init, and accepted only while that kernel is still
// loading (before any user code could run in it).
//
//   store.initFields() → Promise<init fields for one kernel>: {snapshot: {key, sha256, bytes}}
//                        when an image of this build is kept, else {makeSnapshot: key} once,
//                        for a kernel after the page's first (the spare, loaded once the first
//                        is ready: the first visit's start never waits for an image), else {}
//   store.watch(client, fields)   keeps the image that kernel sends, drops a kept image the
//                        worker refused or could not restore (the next kernel makes a new one),
//                        and says so on the console.
//
// What it does not do: check the image (the worker hashes it and restores only this build's), or
// hold one for the headless host (Node kernels start without snapshots).  Every failure of the
// storage means a normal load, never a broken kernel.
import { EVENT } from '../../worker/protocol.js';

// This build's key (ui-adapter/build.mjs defines it; '' unbundled: no snapshots).
const SNAPSHOT_KEY = typeof CEREA_SNAPSHOT_KEY === 'string' ? CEREA_SNAPSHOT_KEY : '';
const DB = 'cerea-kernel', STORE = 'snapshots', ID = 'runtime';
const OPEN_WAIT_MS = 3000; // storage that does not answer by then: a normal load

function request(r) {
  return new Promise((resolve, reject) => { r.onsuccess = () => resolve(r.result); r.onerror = () => reject(r.error); });
}

export class SnapshotStore {
  constructor({ key = SNAPSHOT_KEY, storage = globalThis.indexedDB, log = console } = {}) {
    this.key = key;
    this.storage = key ? storage : null;
    this.log = log;
    this.kept = null;    // Promise of {sha256, data: Blob | ArrayBuffer} | null: the image kernels restore
    this.asked = false;  // a kernel of this page was asked to make one
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
        if (rec) this.log.info('kernel: the memory snapshot kept here is another build\'s: a normal load (and a new snapshot)');
        return null;
      })
      .catch((e) => { this.log.warn(`kernel: memory snapshot unreadable (${e.message}): a normal load`); return null; });
    return this.kept;
  }

  async initFields() {
    if (!this.storage) return {};
    const first = this.kernels++ === 0;
    const rec = await this.read();
    if (rec) {
      try {
        const bytes = new Uint8Array(rec.data instanceof Blob ? await rec.data.arrayBuffer() : rec.data.slice(0));
        return { snapshot: { key: this.key, sha256: rec.sha256, bytes } };
      } catch (e) {
        this.log.warn(`kernel: memory snapshot unreadable (${e.message}): a normal load`);
        this.drop();
        return {};
      }
    }
    if (this.asked || first) return {};
    this.asked = true;
    return { makeSnapshot: this.key };
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
        if (info && info.snapshot === 'restored') this.log.info('kernel: started from the memory snapshot');
        else if (f.snapshot) this.drop();
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

  // A kept image the worker would not or could not restore: forgotten, and the next kernel makes one.
  drop() {
    this.kept = Promise.resolve(null);
    this.asked = false;
    this.tx('readwrite', (s) => request(s.delete(ID))).catch(() => {});
  }
}

let shared = null;
/** The page's one store (every kernel supervisor of the page shares it). */
export function pageSnapshots() { shared ||= new SnapshotStore(); return shared; }
