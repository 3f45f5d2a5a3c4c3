// emitter.js -- the smallest event emitter the kernel supervisor, the page session and the
// ui-adapter need (browser and Node alike): on/off/once/emit, with a listener's error reported to
// the console instead of breaking the emitter's caller.  Not a general-purpose EventTarget
// replacement (no capture, no bubbling, no async dispatch).
export class Emitter {
  constructor() { this._l = new Map(); }
  on(type, fn) {
    if (!this._l.has(type)) this._l.set(type, new Set());
    this._l.get(type).add(fn);
    return () => this.off(type, fn);
  }
  off(type, fn) { this._l.get(type)?.delete(fn); }
  once(type, fn) {
    const off = this.on(type, (ev) => { off(); fn(ev); });
    return off;
  }
  emit(type, ev) {
    for (const fn of [...(this._l.get(type) || [])]) {
      try { fn(ev); } catch (e) { console.error(`listener for "${type}" threw`, e); }
    }
    for (const fn of [...(this._l.get('*') || [])]) {
      try { fn({ type, ...ev }); } catch (e) { console.error('"*" listener threw', e); }
    }
  }
}
