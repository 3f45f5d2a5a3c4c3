// previews.js -- artifact previews for the reference app: text, image, PDF (pdf.js, rendered to
// canvases), Word (docx-preview, inside a sandboxed frame), spreadsheets (.xlsx by read-excel-file
// in a Worker; .csv/.tsv parsed here) as tables, and HTML in a sandboxed frame.  The libraries are
// served from our own origin (esbuild chunks and assets/preview/*.js), loaded on demand.
//
// What runs where: nothing a file holds ever runs in the page (which keeps the page token and the
// operator key).  HTML, and the Word preview's whole code (app/docx-frame.js), run in an
// <iframe sandbox="allow-scripts"> (opaque origin: no cookies, storage or access to the page; in
// Chromium its own process) whose document carries the CSP `connect-src 'none'; form-action
// 'none'; img-src data: blob:` (plus default-src 'none'); the few libraries an HTML preview may load
// by their CDN address (Tailwind, React, Mermaid) are swapped for the copies bundled from npm,
// inlined, so the frame needs no network at all.  Spreadsheet cells reach the page as strings and
// are shown as text.  Every preview is bounded (LIMITS): past a bound it shows a part, or says it
// is too large, instead of holding the page.
//
// Frames talk to the page by postMessage; the page takes a message only when its `source` is that
// very frame's window: {cerea: 'height'} sizes the frame to its content (clamped), and the Word
// frame's protocol is in docx-frame.js.  htmlFrame() is the frame for any HTML (the run cards'
// text/html values and displays use it too).  Nothing here downloads a file: the caller hands bytes.

export const PREVIEW_CSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; " +
  "img-src data: blob:; font-src data:; media-src data: blob:; connect-src 'none'; form-action 'none'; " +
  "frame-src 'none'; worker-src 'none'; base-uri 'none'";

/** The bounds of every preview (bytes of the file, what a parser may take, what is shown). */
export const LIMITS = {
  text: { bytes: 100_000 },
  table: { bytes: 2 * 1048576, rows: 200, cols: 50 },                  // .csv / .tsv, parsed here
  xlsx: { bytes: 32 * 1048576, xmlBytes: 48 * 1048576, sheets: 20, rows: 200, cols: 50, ms: 20_000 },
  docx: { bytes: 32 * 1048576, xmlBytes: 24 * 1048576, elements: 100_000, ms: 20_000 },
  frame: { minHeight: 40, maxHeight: 800 },
};

/** What a preview says, worded once. */
export const PREVIEW_TEXT = {
  tooLarge: (what) => `Too large to preview (${what}): download it to see it.`,
  tooSlow: (s) => `The preview took longer than ${s} s and was stopped: download the file to see it.`,
  moreBytes: (n) => `… (${n.toLocaleString('en-US')} more bytes: download to see all)`,
  rowsShown: (shown, total, cols) => `Showing ${shown.toLocaleString('en-US')} of ${total.toLocaleString('en-US')} rows` +
    (cols ? ` and the first ${cols} columns` : '') + ': download to see all.',
  rowsFirst: (shown, cols) => `Showing the first ${shown.toLocaleString('en-US')} rows` + (cols ? ` and the first ${cols} columns` : '') + ': download to see all.',
  sheetsShown: (shown, total) => `Showing ${shown} of ${total} sheets: download to see all.`,
  emptySheet: 'This sheet is empty.',
  pages: (shown, total) => `Showing ${shown} of ${total} pages: download to see all.`,
};

const TEXT_EXT = /\.(txt|json|md|py|log|xml|ya?ml|ini|toml|sql|js|css|r|rb|lua|sh)$/i;
const IMAGE_EXT = /\.(png|jpe?g|gif|webp|bmp|svg)$/i;
const MIME = { png: 'image/png', jpg: 'image/jpeg', jpeg: 'image/jpeg', gif: 'image/gif', webp: 'image/webp',
  bmp: 'image/bmp', svg: 'image/svg+xml', pdf: 'application/pdf', html: 'text/html', htm: 'text/html',
  csv: 'text/csv', tsv: 'text/tab-separated-values', txt: 'text/plain', json: 'application/json',
  docx: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
  xlsx: 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet' };

export function mimeOf(name) {
  const ext = (name.split('.').pop() || '').toLowerCase();
  return MIME[ext] || 'application/octet-stream';
}

/** Which preview a file gets, by name: 'text' | 'table' | 'xlsx' | 'image' | 'pdf' | 'docx' | 'html' | null. */
export function previewKind(name) {
  if (IMAGE_EXT.test(name)) return 'image';
  if (/\.pdf$/i.test(name)) return 'pdf';
  if (/\.docx$/i.test(name)) return 'docx';
  if (/\.xlsx$/i.test(name)) return 'xlsx';
  if (/\.(csv|tsv)$/i.test(name)) return 'table';
  if (/\.html?$/i.test(name)) return 'html';
  if (TEXT_EXT.test(name)) return 'text';
  return null;
}

/**
 * The first `maxRows` records of delimited text (RFC 4180: fields in double quotes may hold the
 * delimiter, line breaks and "" for a quote; records end at CRLF, LF or CR; a BOM is dropped).
 * Blank lines are skipped.  `more` says records were left after maxRows.  Written here because no bundled library parses
 * CSV; it stops at maxRows, so the cost is bounded by what is shown.
 * @returns {{rows: string[][], more: boolean}}
 */
export function parseDelimited(text, delimiter = ',', maxRows = Infinity) {
  const rows = [];
  let row = [], field = '', i = text.charCodeAt(0) === 0xfeff ? 1 : 0, quoted = false, any = false;
  const n = text.length;
  const endRow = () => { row.push(field); rows.push(row); row = []; field = ''; any = false; };
  while (i < n) {
    if (rows.length >= maxRows) return { rows, more: true };
    const c = text[i];
    if (quoted) {
      if (c === '"') {
        if (text[i + 1] === '"') { field += '"'; i += 2; continue; }
        quoted = false; i++; continue;
      }
      field += c; i++; continue;
    }
    if (c === '"' && field === '') { quoted = true; any = true; i++; continue; }
    if (c === delimiter) { row.push(field); field = ''; any = true; i++; continue; }
    if (c === '\r' || c === '\n') {
      if (any || row.length) endRow();                  // a blank line is no record
      i += c === '\r' && text[i + 1] === '\n' ? 2 : 1;
      continue;
    }
    field += c; any = true; i++;
  }
  if (any || field !== '' || row.length) endRow();
  return { rows, more: false };
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

// The script every frame document gets first: it tells the page its content's height (the page
// sizes the frame to it, clamped to LIMITS.frame); nothing while there is no content.  Chromium
// runs no resize observers in an off-screen frame of another process: such a frame may keep its
// first height until it is scrolled into view.
const SIZE_REPORTER = "(()=>{const post=()=>{const h=Math.ceil(document.documentElement.getBoundingClientRect().height);" +
  "if(document.body&&h>0)parent.postMessage({cerea:'height',height:h},'*')};new ResizeObserver(post)" +
  ".observe(document.documentElement);addEventListener('DOMContentLoaded',post);addEventListener('load',post);})();";

/**
 * Build the sandboxed frame's document from an HTML artifact: CSP meta first in <head>, then the
 * size reporter, known library <script src> swapped for inline bundled copies, any other external
 * script removed (the CSP would block it anyway; removing it avoids console noise).
 */
export async function buildPreviewDocument(html) {
  const doc = new DOMParser().parseFromString(html, 'text/html');
  const used = new Set();
  for (const s of [...doc.querySelectorAll('script[src]')]) {
    const lib = bundledLibFor(s.getAttribute('src') || '');
    if (lib && !used.has(lib)) {
      used.add(lib);
      const inline = doc.createElement('script');
      inline.textContent = inlineScript(await libText(lib));
      s.replaceWith(inline);
    } else {
      s.remove();
    }
  }
  for (const l of [...doc.querySelectorAll('link[href], base')]) l.remove();
  const meta = doc.createElement('meta');
  meta.setAttribute('http-equiv', 'Content-Security-Policy');
  meta.setAttribute('content', PREVIEW_CSP);
  const sizer = doc.createElement('script');
  sizer.textContent = SIZE_REPORTER;
  doc.head.prepend(meta, sizer);
  return '<!doctype html>\n' + doc.documentElement.outerHTML;
}

const inlineScript = (js) => js.replace(/<\/script/gi, '<\\/script');

// Messages from frames: each frame's handler, found by the message's source (a frame's own
// window, never the page or another frame: their messages are dropped).
const frameHandlers = new WeakMap();
let listening = false;
function onFrameMessage(frame, handler) {
  frameHandlers.set(frame, handler);
  if (listening) return;
  listening = true;
  window.addEventListener('message', (e) => {
    if (!e.source || e.source === window) return;
    for (const f of document.querySelectorAll('iframe')) {
      if (f.contentWindow === e.source) { if (e.data && typeof e.data === 'object') frameHandlers.get(f)?.(e.data); return; }
    }
  });
}

/** Size `frame` to the height its document reports, within LIMITS.frame. */
function sizeTo(frame, height) {
  if (typeof height !== 'number' || !Number.isFinite(height)) return;
  const { minHeight, maxHeight } = LIMITS.frame;
  frame.style.height = `${Math.round(Math.min(maxHeight, Math.max(minHeight, height + 2)))}px`;   // + its border
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
  const note = (text) => { const p = document.createElement('p'); p.className = 'note'; p.textContent = text; return p; };
  if (kind === 'text') {
    const pre = document.createElement('pre');
    pre.className = 'preview-text';
    const max = LIMITS.text.bytes;
    const text = new TextDecoder().decode(bytes.subarray(0, max));
    pre.textContent = text + (bytes.length > max ? `\n${PREVIEW_TEXT.moreBytes(bytes.length - max)}` : '');
    container.append(pre);
  } else if (kind === 'table') {
    const { bytes: maxBytes, rows: maxRows, cols } = LIMITS.table;
    const cut = bytes.length > maxBytes;
    const text = new TextDecoder().decode(bytes.subarray(0, maxBytes));
    const { rows, more } = parseDelimited(text, /\.tsv$/i.test(name) ? '\t' : ',', maxRows);
    // A cut file's last record may be cut too: it is not shown.
    if (cut && !more) rows.pop();
    const wide = rows.some((r) => r.length > cols);
    container.append(sheetTable(rows, cols, `${name}`));
    if (more || cut || wide) container.append(note(PREVIEW_TEXT.rowsFirst(rows.length, wide ? cols : 0)));
  } else if (kind === 'xlsx') {
    await renderWorkbook(container, name, bytes, note);
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
    if (pdf.numPages > pages) container.append(note(PREVIEW_TEXT.pages(pages, pdf.numPages)));
  } else if (kind === 'docx') {
    if (bytes.length > LIMITS.docx.bytes) { container.append(note(PREVIEW_TEXT.tooLarge(`${(bytes.length / 1048576).toFixed(1)} MB`))); return kind; }
    const frame = docxFrame(bytes, `Preview of ${name}`);
    container.append(frame);
    const outcome = await frame.done;
    if (outcome !== 'rendered') { frame.remove(); container.append(note(outcome)); }
  } else if (kind === 'html') {
    const frame = htmlFrame(new TextDecoder().decode(bytes), `Preview of ${name}`);
    await frame.ready;
    container.append(frame);
  }
  return kind;
}

/** Rows of strings as a table; every cell set as text. */
function sheetTable(rows, cols, label) {
  const table = document.createElement('table');
  table.className = 'preview-table';
  table.setAttribute('aria-label', label);
  const body = table.createTBody();
  for (const r of rows) {
    const tr = body.insertRow();
    for (const v of r.slice(0, cols)) tr.insertCell().textContent = v;
  }
  return table;
}

/** An .xlsx: parsed in sheet-worker.js (stopped after LIMITS.xlsx.ms), one tab per sheet. */
async function renderWorkbook(container, name, bytes, note) {
  const L = LIMITS.xlsx;
  if (bytes.length > L.bytes) { container.append(note(PREVIEW_TEXT.tooLarge(`${(bytes.length / 1048576).toFixed(1)} MB`))); return; }
  const worker = new Worker('/assets/sheet-worker.js', { type: 'module', name: 'xlsx preview' });
  let timer;
  const answer = await new Promise((resolve, reject) => {
    timer = setTimeout(() => resolve({ slow: true }), L.ms);
    worker.onmessage = (e) => resolve(e.data);
    worker.onerror = (e) => { e.preventDefault(); reject(new Error(e.message || 'the spreadsheet reader failed')); };
    const copy = bytes.slice();
    worker.postMessage({ bytes: copy.buffer, limits: { xmlBytes: L.xmlBytes, sheets: L.sheets, rows: L.rows, cols: L.cols } }, [copy.buffer]);
  }).finally(() => { clearTimeout(timer); worker.terminate(); });
  if (answer.slow) { container.append(note(PREVIEW_TEXT.tooSlow(L.ms / 1000))); return; }
  if (answer.refused) { container.append(note(PREVIEW_TEXT.tooLarge(answer.refused))); return; }
  if (answer.error) throw new Error(answer.error);
  const tabs = document.createElement('div');
  tabs.className = 'sheet-tabs';
  tabs.setAttribute('role', 'tablist');
  tabs.setAttribute('aria-label', `Sheets of ${name}`);
  const panels = answer.sheets.map((sh, i) => {
    const panel = document.createElement('div');
    panel.className = 'sheet';
    panel.setAttribute('role', 'tabpanel');
    panel.dataset.sheet = sh.name;
    panel.hidden = i > 0;
    if (!sh.rows.length) panel.append(note(PREVIEW_TEXT.emptySheet));
    else panel.append(sheetTable(sh.rows, L.cols, `Sheet ${sh.name} of ${name}`));
    const wide = sh.totalCols > L.cols;
    if (sh.totalRows > sh.rows.length || wide) panel.append(note(PREVIEW_TEXT.rowsShown(sh.rows.length, sh.totalRows, wide ? L.cols : 0)));
    return panel;
  });
  const buttons = answer.sheets.map((sh, i) => {
    const b = document.createElement('button');
    b.type = 'button';
    b.className = 'sheet-tab';
    b.setAttribute('role', 'tab');
    b.setAttribute('aria-selected', String(i === 0));
    b.textContent = sh.name;
    b.addEventListener('click', () => {
      buttons.forEach((x, j) => x.setAttribute('aria-selected', String(j === i)));
      panels.forEach((p, j) => { p.hidden = j !== i; });
    });
    return b;
  });
  tabs.append(...buttons);
  container.append(tabs, ...panels);
  if (answer.totalSheets > answer.sheets.length) container.append(note(PREVIEW_TEXT.sheetsShown(answer.sheets.length, answer.totalSheets)));
}

/**
 * The Word preview: docx-preview run inside a sandboxed frame (app/docx-frame.js), which gets the
 * bytes when it says it is ready.  `frame.done` resolves to 'rendered', or to the sentence to show
 * instead (over a limit, failed, or no answer within LIMITS.docx.ms).
 */
function docxFrame(bytes, title) {
  const L = LIMITS.docx;
  const frame = document.createElement('iframe');
  frame.setAttribute('sandbox', 'allow-scripts');
  frame.setAttribute('referrerpolicy', 'no-referrer');
  frame.setAttribute('title', `${title} (sandboxed)`);
  frame.className = 'preview-html preview-docx';
  frame.done = new Promise((resolve) => {
    const timer = setTimeout(() => resolve(PREVIEW_TEXT.tooSlow(L.ms / 1000)), L.ms);
    const end = (v) => { clearTimeout(timer); resolve(v); };
    onFrameMessage(frame, (d) => {
      if (d.cerea === 'height') sizeTo(frame, d.height);
      else if (d.cerea === 'ready') {
        // Each document the frame loads asks (a frame moved in the page loads its document again).
        const copy = bytes.slice();
        frame.contentWindow.postMessage({ cerea: 'docx', bytes: copy.buffer, limits: { xmlBytes: L.xmlBytes, elements: L.elements } }, '*', [copy.buffer]);
      } else if (d.cerea === 'rendered') end('rendered');
      else if (d.cerea === 'refused') end(PREVIEW_TEXT.tooLarge(String(d.what)));
      else if (d.cerea === 'failed') end(`No preview: ${String(d.message)}`);
    });
    libText('docx').then((js) => {
      frame.srcdoc = `<!doctype html><html><head><meta http-equiv="Content-Security-Policy" content="${PREVIEW_CSP}">` +
        `<script>${SIZE_REPORTER}</script><style>body{margin:0;background:#eee}.docx-wrapper{padding:10px!important}</style></head>` +
        `<body><div id="doc"></div><script>${inlineScript(js)}</script></body></html>`;
    }, (e) => end(`No preview: ${e.message}`));
  });
  return frame;
}

/**
 * The sandboxed frame for HTML (an artifact, or a run's text/html value or display): an
 * <iframe sandbox="allow-scripts"> (opaque origin) whose document carries PREVIEW_CSP, sized to
 * its content.  Returned at once; its document is set when built (`frame.ready`).
 */
export function htmlFrame(html, title) {
  const frame = document.createElement('iframe');
  frame.setAttribute('sandbox', 'allow-scripts');
  frame.setAttribute('referrerpolicy', 'no-referrer');
  frame.setAttribute('title', `${title} (sandboxed)`);
  frame.className = 'preview-html';
  onFrameMessage(frame, (d) => { if (d.cerea === 'height') sizeTo(frame, d.height); });
  frame.ready = buildPreviewDocument(html).then((doc) => { frame.srcdoc = doc; },
    (e) => { frame.srcdoc = `<!doctype html><meta http-equiv="Content-Security-Policy" content="${PREVIEW_CSP}"><p>No preview: ${String(e.message).replace(/[<&]/g, '')}</p>`; });
  return frame;
}
