// previews.js -- artifact previews for the reference app: text, image, PDF (pdf.js, rendered to
// canvases), Word (docx-preview) and HTML in a sandboxed frame.  pdf.js and docx-preview are loaded
// on demand from our own origin (esbuild chunks).  An HTML artifact is shown in an
// <iframe sandbox="allow-scripts"> (opaque origin: no cookies, storage or access to the page) whose
// document carries the CSP `connect-src 'none'; form-action 'none'; img-src data: blob:` (plus
// default-src 'none'); the few libraries a preview may load by their CDN address (Tailwind, React,
// Mermaid) are swapped for the copies bundled from npm, inlined, so nothing is fetched from a CDN
// and the frame needs no network at all.  htmlFrame() is that frame for any HTML (the run cards'
// text/html values and displays use it too).  It does not download anything itself: the caller
// hands bytes (or a function returning them).

export const PREVIEW_CSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; " +
  "img-src data: blob:; font-src data:; media-src data: blob:; connect-src 'none'; form-action 'none'; " +
  "frame-src 'none'; worker-src 'none'; base-uri 'none'";

const TEXT_EXT = /\.(txt|csv|tsv|json|md|py|log|xml|ya?ml|ini|toml|sql|js|css|r|rb|lua|sh)$/i;
const IMAGE_EXT = /\.(png|jpe?g|gif|webp|bmp|svg)$/i;
const MIME = { png: 'image/png', jpg: 'image/jpeg', jpeg: 'image/jpeg', gif: 'image/gif', webp: 'image/webp',
  bmp: 'image/bmp', svg: 'image/svg+xml', pdf: 'application/pdf', html: 'text/html', htm: 'text/html',
  csv: 'text/csv', txt: 'text/plain', json: 'application/json',
  docx: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
  xlsx: 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet' };

export function mimeOf(name) {
  const ext = (name.split('.').pop() || '').toLowerCase();
  return MIME[ext] || 'application/octet-stream';
}

/** Which preview a file gets, by name: 'text' | 'image' | 'pdf' | 'docx' | 'html' | null. */
export function previewKind(name) {
  if (IMAGE_EXT.test(name)) return 'image';
  if (/\.pdf$/i.test(name)) return 'pdf';
  if (/\.docx$/i.test(name)) return 'docx';
  if (/\.html?$/i.test(name)) return 'html';
  if (TEXT_EXT.test(name)) return 'text';
  return null;
}

const libCache = new Map();
async function libText(name) {
  if (!libCache.has(name)) {
    libCache.set(name, fetch(`/assets/preview/${name}.js`, { credentials: 'omit' }).then((r) => {
      if (!r.ok) throw new Error(`preview library ${name}: HTTP ${r.status}`);
      return r.text();
    }));
  }
  return libCache.get(name);
}

/** Map a script URL an artifact names to one of our bundled libraries, or null. */
export function bundledLibFor(src) {
  const s = src.toLowerCase();
  if (/tailwind/.test(s)) return 'tailwind';
  if (/mermaid/.test(s)) return 'mermaid';
  if (/react(-dom)?(@|\/|\.|$)/.test(s) || /\breact-dom\b/.test(s)) return 'react';
  return null;
}

/**
 * Build the sandboxed frame's document from an HTML artifact: CSP meta first in <head>, known
 * library <script src> swapped for inline bundled copies, any other external script removed (the
 * CSP would block it anyway; removing it avoids console noise).
 */
export async function buildPreviewDocument(html) {
  const doc = new DOMParser().parseFromString(html, 'text/html');
  const used = new Set();
  for (const s of [...doc.querySelectorAll('script[src]')]) {
    const lib = bundledLibFor(s.getAttribute('src') || '');
    if (lib && !used.has(lib)) {
      used.add(lib);
      const inline = doc.createElement('script');
      inline.textContent = (await libText(lib)).replace(/<\/script/gi, '<\\/script');
      s.replaceWith(inline);
    } else {
      s.remove();
    }
  }
  for (const l of [...doc.querySelectorAll('link[href], base')]) l.remove();
  const meta = doc.createElement('meta');
  meta.setAttribute('http-equiv', 'Content-Security-Policy');
  meta.setAttribute('content', PREVIEW_CSP);
  doc.head.prepend(meta);
  return '<!doctype html>\n' + doc.documentElement.outerHTML;
}

/**
 * Render a preview of `bytes` (Uint8Array) named `name` into `container`.
 * @returns {Promise<string|null>} the preview kind rendered, or null when there is none.
 */
export async function renderPreview(container, name, bytes) {
  const kind = previewKind(name);
  container.replaceChildren();
  if (!kind) return null;
  container.dataset.preview = kind;
  if (kind === 'text') {
    const pre = document.createElement('pre');
    pre.className = 'preview-text';
    const max = 100_000;
    const text = new TextDecoder().decode(bytes.subarray(0, max));
    pre.textContent = text + (bytes.length > max ? `\n… (${bytes.length - max} more bytes: download to see all)` : '');
    container.append(pre);
  } else if (kind === 'image') {
    const img = document.createElement('img');
    img.alt = `Preview of ${name}`;
    img.src = URL.createObjectURL(new Blob([bytes], { type: mimeOf(name) }));
    img.className = 'preview-image';
    container.append(img);
  } else if (kind === 'pdf') {
    const pdfjs = await import('pdfjs-dist/build/pdf.mjs');
    pdfjs.GlobalWorkerOptions.workerSrc = '/assets/pdf.worker.mjs';
    const pdf = await pdfjs.getDocument({ data: bytes.slice(), isEvalSupported: false }).promise;
    const pages = Math.min(pdf.numPages, 5);
    for (let i = 1; i <= pages; i++) {
      const page = await pdf.getPage(i);
      const vp = page.getViewport({ scale: 1.2 });
      const canvas = document.createElement('canvas');
      canvas.width = vp.width; canvas.height = vp.height;
      canvas.className = 'preview-pdf-page';
      canvas.setAttribute('role', 'img');
      canvas.setAttribute('aria-label', `${name}, page ${i} of ${pdf.numPages}`);
      container.append(canvas);
      await page.render({ canvasContext: canvas.getContext('2d'), viewport: vp, canvas }).promise;
    }
    if (pdf.numPages > pages) {
      const p = document.createElement('p'); p.className = 'note';
      p.textContent = `Showing ${pages} of ${pdf.numPages} pages: download to see all.`;
      container.append(p);
    }
  } else if (kind === 'docx') {
    const { renderAsync } = await import('docx-preview');
    const box = document.createElement('div');
    box.className = 'preview-docx';
    container.append(box);
    await renderAsync(new Blob([bytes]), box, undefined, { inWrapper: true, ignoreWidth: true, breakPages: false });
  } else if (kind === 'html') {
    const frame = htmlFrame(new TextDecoder().decode(bytes), `Preview of ${name}`);
    await frame.ready;
    container.append(frame);
  }
  return kind;
}

/**
 * The sandboxed frame for HTML (an artifact, or a run's text/html value or display): an
 * <iframe sandbox="allow-scripts"> (opaque origin) whose document carries PREVIEW_CSP.  Returned
 * at once; its document is set when built (`frame.ready`).
 */
export function htmlFrame(html, title) {
  const frame = document.createElement('iframe');
  frame.setAttribute('sandbox', 'allow-scripts');
  frame.setAttribute('referrerpolicy', 'no-referrer');
  frame.setAttribute('title', `${title} (sandboxed)`);
  frame.className = 'preview-html';
  frame.ready = buildPreviewDocument(html).then((doc) => { frame.srcdoc = doc; },
    (e) => { frame.srcdoc = `<!doctype html><meta http-equiv="Content-Security-Policy" content="${PREVIEW_CSP}"><p>No preview: ${String(e.message).replace(/[<&]/g, '')}</p>`; });
  return frame;
}
