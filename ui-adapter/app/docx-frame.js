// docx-frame.js -- the Word preview's code, run INSIDE its sandboxed frame (previews.js docxFrame:
// <iframe sandbox="allow-scripts">, opaque origin, PREVIEW_CSP), never in the page: a .docx is
// untrusted input, and what docx-preview builds from it (altChunk HTML, hyperlink targets, CSS
// from the document's styles) must not run where the page token and the operator key are.  In
// Chromium an opaque-origin sandboxed frame also runs in its own process, so a heavy document
// does not stall the page; other browsers share the thread, which is why the work is bounded
// first.  Bundled as a classic script (build.mjs → assets/preview/docx.js) that the page inlines
// into the frame's document.
//
// Protocol (window messages, `cerea` names the kind): the frame says {cerea: 'ready'}; the page
// answers once with {cerea: 'docx', bytes, limits}; the frame answers {cerea: 'rendered'},
// {cerea: 'refused', what} (over a limit: nothing rendered) or {cerea: 'failed', message}.
import { renderAsync } from 'docx-preview';
import { unzipSync } from 'fflate';

/**
 * Over a limit before anything is parsed?  The XML parts' sizes come from the zip's directory
 * (nothing inflated when they are over), then the elements are counted in the inflated bytes
 * (docx-preview makes DOM nodes per element, whatever their namespace prefix).
 * @returns {string|null} what is over, in words, or null.
 */
export function overBudget(bytes, limits) {
  let xmlBytes = 0;
  const parts = unzipSync(bytes, { filter: (f) => {
    if (!/\.(xml|rels)$/i.test(f.name)) return false;
    xmlBytes += f.originalSize;
    return xmlBytes <= limits.xmlBytes;
  } });
  if (xmlBytes > limits.xmlBytes) return `${(xmlBytes / 1048576).toFixed(1)} MB of XML`;
  let elements = 0;
  for (const data of Object.values(parts)) {
    for (let i = data.indexOf(60); i >= 0 && i < data.length - 1; i = data.indexOf(60, i + 1)) {
      const c = data[i + 1];
      if (c !== 47 && c !== 63 && c !== 33) elements++;   // not </, <? or <!
    }
  }
  if (elements > limits.elements) return `${elements.toLocaleString('en-US')} elements`;
  return null;
}

const SAFE_SCHEMES = new Set(['http:', 'https:', 'mailto:']);

/** Drop what could run or load: scripts, frames, objects, on* handlers, links to other schemes. */
export function defang(root) {
  for (const el of root.querySelectorAll('script, iframe, frame, object, embed, form, base, meta, link')) el.remove();
  for (const el of root.querySelectorAll('*')) {
    for (const a of [...el.attributes]) if (/^on/i.test(a.name) || a.name === 'formaction' || a.name === 'srcdoc') el.removeAttribute(a.name);
  }
  for (const a of root.querySelectorAll('a[href], area[href]')) {
    const href = a.getAttribute('href').trim();
    let ok = href.startsWith('#');
    if (!ok) { try { ok = SAFE_SCHEMES.has(new URL(href).protocol); } catch { ok = false; } }
    if (!ok) { a.removeAttribute('href'); continue; }
    // A sandbox without allow-popups opens nothing; the address stays readable on hover.
    a.target = '_blank'; a.rel = 'noopener noreferrer';
    if (!href.startsWith('#')) a.title = href;
  }
}

let started = false;
addEventListener('message', async (e) => {
  if (e.source !== parent || !e.data || e.data.cerea !== 'docx' || started) return;
  started = true;
  const say = (m) => parent.postMessage(m, '*');
  try {
    const bytes = new Uint8Array(e.data.bytes);
    const over = overBudget(bytes, e.data.limits);
    if (over) { say({ cerea: 'refused', what: over }); return; }
    const box = document.getElementById('doc');
    await renderAsync(bytes, box, undefined, { inWrapper: true, ignoreWidth: true, breakPages: false,
      renderAltChunks: false, experimental: false });
    defang(document.body);
    say({ cerea: 'rendered' });
  } catch (err) {
    say({ cerea: 'failed', message: String(err && err.message || err) });
  }
});
parent.postMessage({ cerea: 'ready' }, '*');
