// cards.js -- run cards and artifact cards, shared by the playground and the chat page.  A run card
// shows the code; while the run goes, its output as it comes, the time used against its limit, the
// field that answers its input() and, on a phone, that the page must stay open; then stdout and
// stderr with truncation notes (once), the cell's value and its display() bundles, status,
// duration, notes, the restart notice with the remounted files, why a re-run came, and the run's
// files as artifact cards (download + preview).  When a run produced files, the file is the
// answer: the code folds behind a disclosure.  Figures redrawn under one name show as versions of
// one artifact (the card shows "v2", "v3"…).  A value or display shows its richest part, in
// Jupyter's order: HTML only inside a sandboxed frame with the artifacts' CSP (previews.js),
// markdown (IPython's Markdown, `_repr_markdown_`) as the answers' sanitized markdown
// (markdown.js), SVG, PNG and JPEG as images (an image runs no script), else its text.
// It renders a run view (docs/api.md's run object plus the live parts ui-adapter/src/session.js
// adds); it does not fetch runs or talk to the kernel: `getBytes(file)` and `onInput(text)` are
// supplied by the page.
import { h, fmtBytes, fmtMs, isPhone } from './dom.js';
import { renderPreview, previewKind, mimeOf, htmlFrame } from './previews.js';
import { NOTE, PHONE, noteCode } from '../src/kernel.js';
import { renderMarkdown } from './markdown.js';

const STATUS_TEXT = { ok: 'Done', error: 'Error', timeout: 'Time limit: sandbox restarted', crashed: 'Sandbox crashed: restarted',
  abandoned: 'Abandoned', cancelled: 'Cancelled', rejected: 'Code execution is off' };
const STATE_TEXT = { queued: 'Queued', dispatched: 'Starting…', running: 'Running…', paused: 'Paused: waiting for this page to be visible',
  preparing: 'Loading files…', waiting_input: 'Waiting for input…' };

// The bytes of a string as base64 (an SVG as a data: URL).
const b64 = (s) => { let bin = ''; for (const b of new TextEncoder().encode(s)) bin += String.fromCharCode(b); return btoa(bin); };

/** One MIME bundle (a value or a display), its richest part: html, markdown, svg, png, jpeg, else text. */
export function bundleView(bundle, label) {
  if (bundle['text/html']) return htmlFrame(bundle['text/html'], label);
  if (typeof bundle['text/markdown'] === 'string') return h('div', { class: 'bundle-markdown', 'aria-label': label }, renderMarkdown(bundle['text/markdown']));
  if (bundle['image/svg+xml']) return h('img', { class: 'bundle-image', alt: label, src: `data:image/svg+xml;base64,${b64(bundle['image/svg+xml'])}` });
  if (bundle['image/png']) return h('img', { class: 'bundle-image', alt: label, src: `data:image/png;base64,${bundle['image/png']}` });
  if (bundle['image/jpeg']) return h('img', { class: 'bundle-image', alt: label, src: `data:image/jpeg;base64,${bundle['image/jpeg']}` });
  return h('pre', { class: 'value' }, bundle['text/plain'] ?? '');
}

// Seconds as the card shows elapsed time.
const secs = (ms) => `${Math.max(0, Math.floor(ms / 1000))} s`;

export class RunCard {
  /**
   * @param {{getBytes: (file: object) => Promise<Uint8Array>, onCancel?: () => void,
   *   onInput?: (text: string) => Promise<unknown>, title?: string}} o
   */
  constructor({ getBytes, onCancel, onInput, title }) {
    this.getBytes = getBytes;
    this.onCancel = onCancel;
    this.onInput = onInput;
    this.el = h('article', { class: 'card run-card', 'aria-live': 'polite' });
    this.title = title;
    this.run = null;
    this._filesKey = '';
    this._bundles = new Map();   // key → element (frames are not rebuilt on every update)
    this._clock = null;
    this._inputKey = '';
    this._inputForm = null;
  }

  // ms of the time limit used so far (input() waits do not count).
  elapsed(r) {
    if (!r.started_at) return 0;
    const waiting = r.input && r.input.since ? Date.now() - r.input.since : 0;
    return Date.now() - r.started_at - (r.input_ms || 0) - waiting;
  }

  clock(on) {
    if (on && !this._clock) this._clock = setInterval(() => this.tick(), 1000);
    if (!on && this._clock) { clearInterval(this._clock); this._clock = null; }
  }

  tick() {
    const el = this.el.querySelector('[data-testid=run-elapsed]');
    if (el && this.run) el.textContent = `${secs(this.elapsed(this.run))} of ${this.run.timeout_s || 60} s`;
  }

  bundle(key, data, label) {
    const k = `${key}:${JSON.stringify(data).length}:${(data['text/plain'] || '').slice(0, 64)}`;
    if (!this._bundles.has(k)) this._bundles.set(k, h('div', { class: 'bundle', 'data-testid': key.startsWith('display') ? 'display' : 'value' }, bundleView(data, label)));
    return this._bundles.get(k);
  }

  // The field that answers input(): kept across updates so typing is not lost.
  inputField(r) {
    const key = `${r.run_id}:${r.attempts}:${r.input.since}`;
    if (key !== this._inputKey) {
      this._inputKey = key;
      const field = h('input', { type: 'text', class: 'input-field', 'data-testid': 'input-field', 'aria-label': `Answer to ${r.input.prompt || 'input()'}`, autocomplete: 'off' });
      const status = h('span', { class: 'muted small', role: 'status' });
      const send = h('button', { class: 'btn btn-small btn-primary', type: 'submit', 'data-testid': 'input-send' }, 'Send');
      this._inputForm = h('form', { class: 'input-form', 'data-testid': 'input-form',
        onsubmit: async (e) => {
          e.preventDefault();
          if (!this.onInput) return;
          send.disabled = true; field.disabled = true;
          try { await this.onInput(field.value); status.textContent = ''; }
          catch (err) { status.textContent = `Not sent: ${err.message}`; send.disabled = false; field.disabled = false; }
        } },
      // The prompt itself is in the output above (input() prints it, as Python does): not again.
      h('label', { class: 'input-prompt' }, 'input() waits for an answer:'), field, send, status);
      queueMicrotask(() => field.focus());
    }
    return this._inputForm;
  }

  update(run) {
    this.run = run;
    const r = run;
    const done = !!r.status;
    const st = done ? r.status : (r.state || 'queued');
    const waiting = !done && !!r.input;
    this.el.dataset.status = st;
    this.el.dataset.runId = r.run_id || '';
    if (waiting) this.el.dataset.input = 'waiting'; else delete this.el.dataset.input;
    // The time used against the limit, only for a run this page executes: a run the server says is
    // running elsewhere (a page that went away, another device) shows no clock of its own.
    const running = !done && st === 'running' && !!r.started_at && !!r.running_here;
    this.clock(running);
    const hasFiles = (r.files || []).length > 0;
    const head = h('header', { class: 'card-head' },
      h('span', { class: `badge badge-${st}`, 'data-testid': 'run-status' }, done ? (STATUS_TEXT[st] || st) : (STATE_TEXT[waiting ? 'waiting_input' : st] || st)),
      r.origin ? h('span', { class: 'muted' }, this.title || `${r.origin} run`) : null,
      running ? h('span', { class: 'muted', 'data-testid': 'run-elapsed', title: 'time used against the limit (input() waits do not count)' },
        `${secs(this.elapsed(r))} of ${r.timeout_s || 60} s`) : null,
      r.duration_ms != null && done ? h('span', { class: 'muted', 'data-testid': 'run-duration' }, fmtMs(r.duration_ms)) : null,
      r.attempts > 1 ? h('span', { class: 'muted' }, `attempt ${r.attempts}`) : null,
      !done && this.onCancel ? h('button', { class: 'btn btn-small', type: 'button', 'data-testid': 'cancel', onclick: () => this.onCancel() }, 'Cancel') : null);
    const parts = [head];
    if (!done && isPhone()) parts.push(h('p', { class: 'keep-open', role: 'status' }, PHONE.keepOpen()));
    if (r.rerun && r.attempts > 1) parts.push(h('p', { class: 'notice', 'data-testid': 'rerun-note' }, PHONE.rerun(r.attempts, r.rerun)));
    if (r.code != null) {
      const code = h('pre', { class: 'code' }, h('code', {}, r.code));
      parts.push(hasFiles ? h('details', { class: 'code-fold' }, h('summary', {}, 'Code'), code) : code);
    }
    if (r.restarted) parts.push(h('p', { class: 'notice', 'data-testid': 'restart-note' }, NOTE.restarted(r.remounted || [])));
    if (r.stdout) parts.push(h('pre', { class: 'stdout', 'data-testid': 'stdout', 'aria-label': 'Output' }, r.stdout));
    if (r.stdout_truncated) parts.push(h('p', { class: 'note' }, 'Output truncated at 8,000 characters.'));
    if (waiting) parts.push(this.inputField(r));
    if (r.stderr) parts.push(h('pre', { class: 'stderr', 'data-testid': 'stderr', 'aria-label': 'Errors' }, r.stderr));
    if (r.stderr_truncated) parts.push(h('p', { class: 'note' }, 'Error output truncated at 8,000 characters.'));
    (r.displays || []).forEach((d, i) => parts.push(this.bundle(`display-${i}`, d, `Display ${i + 1} of this run`)));
    if (r.value) parts.push(this.bundle('value', r.value, 'The value of the cell'));
    if (r.error && (r.error.type || r.error.message)) {
      const tb = r.error.traceback && !(r.stderr || '').includes(r.error.traceback) ? r.error.traceback : '';
      parts.push(h('div', { class: 'error', 'data-testid': 'error' }, h('strong', {}, `${r.error.type || 'Error'}: `), r.error.message || '',
        tb ? h('pre', { class: 'stderr' }, tb) : null));
    }
    // The kernel's cut notes say what the card's own truncation lines say: shown once, here.
    for (const n of (r.notes || []).filter((x) => noteCode(x) !== 'output_cut')) parts.push(h('p', { class: 'note', 'data-testid': 'note' }, n));
    if (r.files_unlisted) parts.push(h('p', { class: 'note' }, `${r.files_unlisted} more files were not listed (200 per run).`));
    if (r.figures_dropped) parts.push(h('p', { class: 'note' }, `${r.figures_dropped} figures dropped (20 per run).`));
    // Artifact cards are kept across updates so open previews do not flicker.
    const key = JSON.stringify((r.files || []).map((f) => [f.name, f.sha256]));
    if (key !== this._filesKey) {
      this._filesKey = key;
      this._files = h('div', { class: 'artifacts' }, (r.files || []).map((f, i) => artifactCard(f, this.getBytes, i === 0)));
    }
    if (hasFiles) parts.push(this._files);
    this.el.replaceChildren(...parts);
  }
}

/** One artifact: name, kind, size, version, Download, and a preview (the first opens by itself). */
export function artifactCard(file, getBytes, open = false) {
  const kind = previewKind(file.name);
  const body = h('div', { class: 'preview', 'data-testid': 'preview' });
  let bytesP = null;
  const bytes = () => (bytesP ||= getBytes(file));
  const status = h('span', { class: 'muted', role: 'status' });
  const download = h('button', { class: 'btn btn-small', type: 'button', 'data-testid': 'download',
    'aria-label': `Download ${file.name}`,
    onclick: async () => {
      try {
        const b = await bytes();
        const url = URL.createObjectURL(new Blob([b], { type: mimeOf(file.name) }));
        const a = h('a', { href: url, download: file.name.split('/').pop() });
        document.body.append(a); a.click(); a.remove();
        setTimeout(() => URL.revokeObjectURL(url), 60_000);
      } catch (e) { status.textContent = `Download failed: ${e.message}`; }
    } }, 'Download');
  const card = h('section', { class: 'artifact', 'data-name': file.name, 'aria-label': `File ${file.name}` },
    h('header', { class: 'artifact-head' },
      h('span', { class: 'artifact-name' }, file.name),
      file.kind === 'figure' ? h('span', { class: 'badge' }, 'figure') : null,
      file.version > 1 ? h('span', { class: 'badge', title: 'A newer version of the same artifact' }, `v${file.version}`) : null,
      h('span', { class: 'muted' }, fmtBytes(file.size)),
      download, status));
  if (kind) {
    const det = h('details', { class: 'preview-fold' }, h('summary', {}, `Preview (${kind})`), body);
    let shown = false;
    det.addEventListener('toggle', async () => {
      if (!det.open || shown) return;
      shown = true;
      body.textContent = 'Loading preview…';
      try { await renderPreview(body, file.name, await bytes()); }
      catch (e) { body.textContent = `No preview: ${e.message}`; shown = false; }
    });
    card.append(det);
    if (open) queueMicrotask(() => { det.open = true; });
  }
  return card;
}
