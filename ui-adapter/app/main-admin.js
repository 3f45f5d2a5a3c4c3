// main-admin.js -- the operator's page at /admin: with the API key (kept in this browser, sent as
// a bearer header) it shows live pages and runs (paused ones with the time left before they are
// abandoned), recent runs, restarts and storage used (from /metrics), and edits the retention
// setting (Administration → Storage) through PUT /v1/admin/settings.  Refreshes every 2 s while
// visible.  It changes nothing else.
import { Api } from '../src/api.js';
import { h, fmtBytes, fmtMs } from './dom.js';
import { loadSettings, saveSettings } from './settings.js';

const $ = (id) => document.getElementById(id);
let api = null;
let timer = null;

function metricsValue(text, name, labels = '') {
  const re = new RegExp(`^${name}${labels ? `\\{${labels}\\}` : ''}\\s+([0-9.eE+-]+)$`, 'm');
  const m = re.exec(text);
  return m ? Number(m[1]) : null;
}

// Ids share a time-ordered prefix: the END tells them apart.  The full id is in the tooltip.
const short = (id) => h('code', { title: id }, id.length > 10 ? `…${id.slice(-10)}` : id);

function rows(tbody, list, cells) {
  tbody.replaceChildren(...(list.length ? list.map((x) => h('tr', {}, cells(x).map((c) => h('td', {}, c))))
    : [h('tr', {}, h('td', { colspan: 9, class: 'muted' }, 'None'))]));
}

async function refresh() {
  try {
    const [runs, pages, settings, metrics] = await Promise.all([api.adminRuns(), api.adminPages(), api.adminSettings(),
      api.raw('/metrics').then((r) => (r.ok ? r.text() : ''))]);
    $('admin-status').textContent = `Connected · updated ${new Date().toLocaleTimeString()}`;
    rows($('pages').tBodies[0], pages.pages || [], (p) => [short(p.chat_id), short(p.page_id), p.state, p.kernel, p.active ? 'yes' : '']);
    const live = runs.live || [];
    const recent = (runs.recent || []).filter((r) => !live.some((l) => l.run_id === r.run_id));
    const paused = live.filter((r) => r.state === 'paused');
    rows($('runs').tBodies[0], [...live, ...recent].slice(0, 100), (r) => [
      short(r.run_id), short(r.chat_id), r.origin || '',
      r.state + (r.state === 'paused' && r.abandon_in_ms != null ? ` (abandoned in ${fmtMs(r.abandon_in_ms)})` : ''),
      r.status || '', String(r.attempts ?? ''), r.restarted ? 'yes' : '', r.duration_ms != null ? fmtMs(r.duration_ms) : '']);
    const bytes = metricsValue(metrics, 'cerea_bytes_stored');
    const restarts = metricsValue(metrics, 'cerea_kernel_restarts_total');
    const pauses = metricsValue(metrics, 'cerea_runs_paused_total');
    $('runs-summary').textContent = `${live.length} live (${paused.length} paused turns waiting for their page)` +
      (restarts != null ? ` · ${restarts} kernel restarts` : '') + (pauses != null ? ` · ${pauses} pauses` : '');
    $('storage-used').textContent = bytes != null ? `Storage used: ${fmtBytes(bytes)} in the blob store.` : 'Storage used: not reported.';
    if (document.activeElement !== $('retention')) $('retention').value = settings.retention_days;
  } catch (e) {
    $('admin-status').textContent = e.status === 401 || e.status === 403 ? 'The API key was refused.' : `Cannot reach the API: ${e.message}`;
  }
}

function connect() {
  const key = $('apikey').value.trim();
  saveSettings({ ...loadSettings(), apiKey: key });
  api = new Api({ token: key });
  clearInterval(timer);
  refresh();
  timer = setInterval(() => { if (document.visibilityState === 'visible') refresh(); }, 2000);
}

$('apikey').value = loadSettings().apiKey || '';
$('key-form').addEventListener('submit', (e) => { e.preventDefault(); connect(); });
$('save-retention').addEventListener('click', async () => {
  const days = Number($('retention').value);
  if (!Number.isInteger(days) || days < 1) { $('retention-status').textContent = 'Enter a whole number of days.'; return; }
  try {
    const s = await api.putAdminSettings({ retention_days: days });
    $('retention-status').textContent = `Saved: run files are kept ${s.retention_days} days.`;
  } catch (e) { $('retention-status').textContent = `Not saved: ${e.message}`; }
});
if ($('apikey').value) connect();
