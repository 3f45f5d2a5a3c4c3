// presence.js -- whether this page is in the foreground, from the DOM: visibilitychange,
// pagehide/pageshow and the Page Lifecycle freeze/resume events.  Each change goes to
// `onChange(visible, why)`; the page session (worker/session.js) reports it to the orchestrator
// (POST presence with a keepalive fetch, which carries the bearer header and survives the page
// being frozen or unloaded right after), so a phone page going to the background keeps its turn
// waiting and gets the run back when it returns.  It posts nothing itself and decides nothing
// about runs.
export class Presence {
  /**
   * @param {{onChange: (visible: boolean, why: string) => void, onLeave?: () => void, doc?: Document, win?: Window}} o
   *   onLeave: pagehide, the page is going away (a reload, a closed tab, a navigation)
   */
  constructor({ onChange, onLeave = () => {}, doc = globalThis.document, win = globalThis.window }) {
    this.onChange = onChange;
    this.onLeave = onLeave;
    this.doc = doc; this.win = win;
    this._h = [];
  }

  get visible() { return this.doc ? this.doc.visibilityState !== 'hidden' : true; }

  start() {
    const on = (t, ev, fn) => { t.addEventListener(ev, fn, { capture: true }); this._h.push([t, ev, fn]); };
    if (this.doc) {
      on(this.doc, 'visibilitychange', () => this.onChange(this.visible, 'visibilitychange'));
      on(this.doc, 'freeze', () => this.onChange(false, 'freeze'));
      on(this.doc, 'resume', () => this.onChange(this.visible, 'resume'));
    }
    if (this.win) {
      on(this.win, 'pagehide', () => { this.onChange(false, 'pagehide'); this.onLeave(); });
      on(this.win, 'pageshow', () => this.onChange(this.visible, 'pageshow'));
    }
  }

  stop() {
    for (const [t, ev, fn] of this._h) t.removeEventListener(ev, fn, { capture: true });
    this._h = [];
  }
}
