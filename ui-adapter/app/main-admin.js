// main-admin.js -- the operator's page at /admin: with the API key (sent as a bearer header, and
// kept in this browser only once the server accepted it, since the playground creates chats with
// the same saved key) it shows live pages and runs (paused ones with the time left before they
// are abandoned), recent runs, restarts and storage used (from /metrics), the Python packages this
// deployment serves and lacks (GET /v1/config), and edits the retention setting
// (Administration → Storage) through PUT /v1/admin/settings.  Refreshes every 2 s while visible.
// GET /v1/admin/runs lists finished runs without their origin or restart: those come from each
// run's own object (GET /v1/runs/{run}), fetched once per run (a finished run does not change).
// Charts of the last minutes of activity (charts.js) from GET /v1/admin/history.  It changes
// nothing else.
import { Api } from '../src/api.js';
import { drawHistory } from './charts.js';
import { h, fmtBytes, fmtMs } from './dom.js';
import { loadSettings, saveSettings, serverConfig, pypiState } from './settings.js';

const $ = (id) => document.getElementById(id);
let api = null;
let timer = null;
const finished = new Map(); // run_id -> {origin, restarted} of a finished run
const DETAILS_PER_REFRESH = 10;

function metricsValue(text, name, labels = '') {
  const re = new RegExp(`^${name}${labels ? `\\{${labels}\\}` : ''}\\s+([0-9.eE+-]+)$`, 'm');
  const m = re.exec(text);
  return m ? Number(m[1]) : null;
}

const plural = (n, one, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

// Ids share a time-ordered prefix: the END tells them apart.  The full id is in the tooltip.
const short = (id) => h('code', { title: id }, id.length > 10 ? `…${id.slice(-10)}` : id);

function rows(tbody, list, cells) {
  tbody.replaceChildren(...(list.length ? list.map((x) => h('tr', {}, cells(x).map((c) => h('td', {}, c))))
    : [h('tr', {}, h('td', { colspan: 9, class: 'muted' }, 'None'))]));
}

/** Origin and restart of finished runs not seen yet (a few per refresh), from their run objects. */
async function fillFinished(recent) {
  const todo = recent.filter((r) => r.state === 'done' && !finished.has(r.run_id)).slice(0, DETAILS_PER_REFRESH);
  await Promise.all(todo.map(async (r) => {
    try { const full = await api.getRun(r.run_id); finished.set(r.run_id, { origin: full.origin, restarted: !!full.restarted }); }
    catch { /* shown blank until a later refresh gets it */ }
  }));
}

async function refresh() {
  try {
    const [runs, pages, settings, metrics, history] = await Promise.all([api.adminRuns(), api.adminPages(), api.adminSettings(),
      api.raw('/metrics').then((r) => (r.ok ? r.text() : '')), api.adminHistory().catch(() => null)]);
    $('admin-status').textContent = `Connected · updated ${new Date().toLocaleTimeString()}`;
    $('admin-status').dataset.state = 'ok';
    rows($('pages').tBodies[0], pages.pages || [], (p) => [short(p.chat_id), short(p.page_id), p.state, p.kernel, p.active ? 'yes' : '']);
    const live = runs.live || [];
    const recent = (runs.recent || []).filter((r) => !live.some((l) => l.run_id === r.run_id));
    await fillFinished(recent);
    const paused = live.filter((r) => r.state === 'paused');
    rows($('runs').tBodies[0], [...live, ...recent].slice(0, 100), (r) => {
      const more = finished.get(r.run_id) || {};
      const origin = r.origin || more.origin || '';
      const restarted = r.restarted ?? more.restarted;
      return [short(r.run_id), short(r.chat_id), origin,
        r.state + (r.state === 'paused' && r.abandon_in_ms != null ? ` (abandoned in ${fmtMs(r.abandon_in_ms)})` : ''),
        r.status || '', String(r.attempts ?? ''), restarted ? 'yes' : restarted === false ? 'no' : '', r.duration_ms != null ? fmtMs(r.duration_ms) : ''];
    });
    const bytes = metricsValue(metrics, 'cerea_bytes_stored');
    const restarts = metricsValue(metrics, 'cerea_kernel_restarts_total');
    const pauses = metricsValue(metrics, 'cerea_runs_paused_total');
    $('runs-summary').textContent = `${live.length} live (${plural(paused.length, 'paused turn')} waiting for their page)` +
      (restarts != null ? ` · ${plural(restarts, 'kernel restart')}` : '') + (pauses != null ? ` · ${plural(pauses, 'pause')}` : '');
    $('storage-used').textContent = bytes != null ? `Storage used: ${fmtBytes(bytes)} in the blob store.` : 'Storage used: not reported.';
    if (document.activeElement !== $('retention')) $('retention').value = settings.retention_days;
    const n = history?.samples?.length || 0;
    $('activity-note').textContent = history ? (n ? `${n} intervals of ${history.interval_s} s, newest ${new Date(history.samples.at(-1).at).toLocaleTimeString()}.`
      : `No interval yet: the server samples every ${history.interval_s} s.`) : 'The server does not report its history.';
    drawHistory($('charts'), history).catch((e) => { $('activity-note').textContent = `Charts not drawn: ${e.message}`; });
    return 'ok';
  } catch (e) {
    const refused = e.status === 401 || e.status === 403;
    $('admin-status').textContent = refused ? 'The API key was refused.' : `Cannot reach the API: ${e.message}`;
    $('admin-status').dataset.state = 'refused';
    return refused ? 'refused' : 'error';
  }
}

async function connect() {
  const key = $('apikey').value.trim();
  clearInterval(timer);
  timer = null;
  api = new Api({ token: key });
  finished.clear();
  const verdict = await refresh();
  if (verdict === 'refused') { api = null; return; } // not saved: the playground keeps its key
  saveSettings({ ...loadSettings(), apiKey: key });
  timer = setInterval(() => { if (document.visibilityState === 'visible') refresh(); }, 2000);
}

/** What the deployment serves and lacks, and whether PyPI installs can work (public config). */
async function showPackages() {
  const cfg = await serverConfig();
  const p = cfg.packages;
  if (!p) { $('packages-summary').textContent = 'The server does not report its packages (pyodide/deployment.json is missing: run scripts/setup.sh).'; return; }
  $('packages-summary').textContent = `Python ${p.python || '?'}: ${plural(p.has.length, 'package')} of the user guide's set served, ${p.lacks.length} lacking.`;
  rows($('packages-has').tBodies[0], p.has, (x) => [x.name, x.version || '']);
  rows($('packages-lacks').tBodies[0], p.lacks, (x) => [x.name, x.reason || '']);
  const pypi = pypiState(cfg);
  $('pypi-state').textContent = pypi === 'disabled' ? 'PyPI installs: switched off (CHAT_PYODIDE_PYPI_DISABLED); users do not see the option.'
    : pypi === 'unavailable' ? 'PyPI installs: not possible (micropip is not served); users see the option disabled, with the reason.'
      : 'PyPI installs: allowed; each user can turn them off.';
}

$('apikey').value = loadSettings().apiKey || '';
$('key-form').addEventListener('submit', (e) => { e.preventDefault(); connect(); });
$('save-retention').addEventListener('click', async () => {
  if (!api) { $('retention-status').textContent = 'Connect with the operator API key first.'; return; }
  const days = Number($('retention').value);
  if (!Number.isInteger(days) || days < 1) { $('retention-status').textContent = 'Enter a whole number of days.'; return; }
  try {
    const s = await api.putAdminSettings({ retention_days: days });
    $('retention-status').textContent = `Saved: run files are kept ${s.retention_days} days.`;
  } catch (e) { $('retention-status').textContent = `Not saved: ${e.message}`; }
});
showPackages();
if ($('apikey').value) connect();
