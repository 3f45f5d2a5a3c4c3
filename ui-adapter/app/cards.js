// cards.js -- run cards and artifact cards, shared by the playground and the chat page.  A run card
// shows the code, stdout and stderr with truncation notes (once), status, duration, notes, the restart
// notice with the remounted files, and the run's files as artifact cards (download + preview).
// When a run produced files, the file is the answer: the code folds behind a disclosure.  While a
// run goes on a phone the card says to keep the page open.  Figures redrawn under one name show as
// versions of one artifact (the card shows "v2", "v3"…).  It renders a run object (DESIGN.md's
// shape); it does not fetch runs or talk to the kernel: `getBytes(file)` is supplied by the page.
import { h, fmtBytes, fmtMs, isPhone } from './dom.js';
import { renderPreview, previewKind, mimeOf } from './previews.js';
import { NOTE } from '../src/kernel.js';

const STATUS_TEXT = { ok: 'Done', error: 'Error', timeout: 'Time limit: sandbox restarted', crashed: 'Sandbox crashed: restarted',
  abandoned: 'Abandoned', cancelled: 'Cancelled', rejected: 'Code execution is off' };
const STATE_TEXT = { queued: 'Queued', dispatched: 'Starting…', running: 'Running…', paused: 'Paused: waiting for this page to be visible',
  preparing: 'Loading files…' };

// The kernel's note about a stream it cut ("stdout was cut at 8,000 characters") says what the
// card's own truncation line says: the card shows it once, in its own words.
const CUT_NOTE = /^(stdout|stderr)\b.*\b(cut|truncated)\b/i;
function saysCut(note, run) {
  const m = CUT_NOTE.exec(note);
  return !!m && !!(m[1].toLowerCase() === 'stdout' ? run.stdout_truncated : run.stderr_truncated);
}

export class RunCard {
  /**
   * @param {{getBytes: (file: object) => Promise<Uint8Array>, onCancel?: () => void}} o
   */
  constructor({ getBytes, onCancel, title }) {
    this.getBytes = getBytes;
    this.onCancel = onCancel;
    this.el = h('article', { class: 'card run-card', 'aria-live': 'polite' });
    this.title = title;
    this.run = null;
    this._filesKey = '';
  }

  update(run) {
    this.run = run;
    const r = run;
    const done = !!r.status;
    const st = done ? r.status : (r.state || 'queued');
    this.el.dataset.status = st;
    this.el.dataset.runId = r.run_id || '';
    const hasFiles = (r.files || []).length > 0;
    const head = h('header', { class: 'card-head' },
      h('span', { class: `badge badge-${st}`, 'data-testid': 'run-status' }, done ? (STATUS_TEXT[st] || st) : (STATE_TEXT[st] || st)),
      r.origin ? h('span', { class: 'muted' }, this.title || `${r.origin} run`) : null,
      r.duration_ms != null ? h('span', { class: 'muted', 'data-testid': 'run-duration' }, fmtMs(r.duration_ms)) : null,
      r.attempts > 1 ? h('span', { class: 'muted' }, `attempt ${r.attempts}`) : null,
      !done && this.onCancel ? h('button', { class: 'btn btn-small', type: 'button', onclick: () => this.onCancel() }, 'Cancel') : null);
    const parts = [head];
    if (!done && isPhone()) {
      parts.push(h('p', { class: 'keep-open', role: 'status' }, 'Keep this page open: the code runs on this device, and stops while the page is in the background.'));
    }
    if (r.code != null) {
      const code = h('pre', { class: 'code' }, h('code', {}, r.code));
      parts.push(hasFiles ? h('details', { class: 'code-fold' }, h('summary', {}, 'Code'), code) : code);
    }
    if (r.restarted) parts.push(h('p', { class: 'notice', 'data-testid': 'restart-note' }, NOTE.restarted(r.remounted || [])));
    if (r.stdout) parts.push(h('pre', { class: 'stdout', 'data-testid': 'stdout', 'aria-label': 'Output' }, r.stdout));
    if (r.stdout_truncated) parts.push(h('p', { class: 'note' }, 'Output truncated at 8,000 characters.'));
    if (r.stderr) parts.push(h('pre', { class: 'stderr', 'data-testid': 'stderr', 'aria-label': 'Errors' }, r.stderr));
    if (r.stderr_truncated) parts.push(h('p', { class: 'note' }, 'Error output truncated at 8,000 characters.'));
    if (r.error && (r.error.type || r.error.message)) {
      const tb = r.error.traceback && !(r.stderr || '').includes(r.error.traceback) ? r.error.traceback : '';
      parts.push(h('div', { class: 'error', 'data-testid': 'error' }, h('strong', {}, `${r.error.type || 'Error'}: `), r.error.message || '',
        tb ? h('pre', { class: 'stderr' }, tb) : null));
    }
    for (const n of (r.notes || []).filter((x) => !saysCut(x, r))) parts.push(h('p', { class: 'note', 'data-testid': 'note' }, n));
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
