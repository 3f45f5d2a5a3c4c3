// wakelock.js -- keeps the screen on while a run goes (a phone that sleeps freezes the page and the
// run).  Reference-counted: acquire() per run, release() when it ends; the sentinel is re-taken
// when the page becomes visible again, because browsers drop it on hide.  Where the Wake Lock API
// is missing or refused (no user gesture, insecure context) it records why and does nothing.
export class WakeLock {
  constructor(nav = globalThis.navigator, doc = globalThis.document) {
    this.nav = nav; this.doc = doc;
    this.count = 0; this.sentinel = null; this.lastError = null;
    this._onVis = () => { if (this.count > 0 && this.doc.visibilityState === 'visible') this._take(); };
    doc?.addEventListener('visibilitychange', this._onVis);
  }
  get held() { return !!this.sentinel && !this.sentinel.released; }
  acquire() { this.count++; if (this.count === 1) this._take(); }
  release() {
    if (this.count === 0) return;
    this.count--;
    if (this.count === 0 && this.sentinel) { const s = this.sentinel; this.sentinel = null; s.release().catch(() => {}); }
  }
  async _take() {
    if (!this.nav?.wakeLock) { this.lastError = 'Wake Lock API unavailable'; return; }
    if (this.held) return;
    try {
      const s = await this.nav.wakeLock.request('screen');
      if (this.count === 0) { s.release().catch(() => {}); return; }
      this.sentinel = s;
      this.lastError = null;
    } catch (e) {
      this.lastError = e.message || String(e);
    }
  }
  dispose() { this.doc?.removeEventListener('visibilitychange', this._onVis); this.count = 1; this.release(); }
}
