// presence.js -- tells the orchestrator whether this page is in the foreground, so a phone page
// going to the background keeps its turn waiting and gets the run back when it returns.  Listens to
// visibilitychange, pagehide/pageshow and the Page Lifecycle freeze/resume events, and posts
// `{page_id, visible, kernel}` with a keepalive fetch (unlike sendBeacon it carries the bearer
// header, and it survives the page being frozen or unloaded right after).  Repeated identical
// reports are not re-sent.  It does not decide anything about runs: the session does.
export class Presence {
  /**
   * @param {{api: import('./api.js').Api, chatId: string, pageId: string,
   *          kernelState: () => string, onChange?: (visible: boolean, why: string) => void}} o
   */
  constructor({ api, chatId, pageId, kernelState, onChange, doc = globalThis.document,
    win = globalThis.window }) {
    this.api = api; this.chatId = chatId; this.pageId = pageId;
    this.kernelState = kernelState; this.onChange = onChange || (() => {});
    this.doc = doc; this.win = win;
    this.visible = doc ? doc.visibilityState !== 'hidden' : true;
    this._last = null;
    this._h = [];
  }

  start() {
    const on = (t, ev, fn) => { t.addEventListener(ev, fn, { capture: true }); this._h.push([t, ev, fn]); };
    if (this.doc) {
      on(this.doc, 'visibilitychange', () => this.set(this.doc.visibilityState !== 'hidden', 'visibilitychange'));
      on(this.doc, 'freeze', () => this.set(false, 'freeze'));
      on(this.doc, 'resume', () => this.set(this.doc.visibilityState !== 'hidden', 'resume'));
    }
    if (this.win) {
      on(this.win, 'pagehide', () => this.set(false, 'pagehide'));
      on(this.win, 'pageshow', () => this.set(this.doc ? this.doc.visibilityState !== 'hidden' : true, 'pageshow'));
    }
    return this.report('start');
  }

  stop() {
    for (const [t, ev, fn] of this._h) t.removeEventListener(ev, fn, { capture: true });
    this._h = [];
  }

  set(visible, why) {
    const changed = visible !== this.visible;
    this.visible = visible;
    if (changed) this.onChange(visible, why);
    return this.report(why);
  }

  /** Send the current state (also used when the kernel state changes). */
  report(why, force = false) {
    const body = { page_id: this.pageId, visible: this.visible, kernel: this.kernelState() };
    const key = JSON.stringify(body);
    if (!force && key === this._last) return Promise.resolve(null);
    this._last = key;
    return this.api.presence(this.chatId, body, true).catch((e) => {
      this._last = null; // try again on the next report
      console.warn(`ui-adapter: presence (${why}) failed: ${e.message}`);
      return null;
    });
  }
}
