// main-admin.js -- the administrators' page at /admin, with an admin's session (the sign-in page
// first when no one is signed in; a person who is not an admin is told so): people (add one, with
// the one-time password the server made shown once; disable, enable; a new one-time password),
// live pages and runs (paused ones with the time left before they
// are abandoned), recent runs, restarts and storage used (from /metrics), the Python packages this
// deployment serves and lacks (GET /v1/config), and edits the retention setting
// (Administration → Storage) through PUT /v1/admin/settings.  Refreshes every 2 s while visible.
// GET /v1/admin/runs lists finished runs without their origin or restart: those come from each
// run's own object (GET /v1/runs/{run}), fetched once per run (a finished run does not change).
// Charts of the last minutes of activity (charts.js) from GET /v1/admin/history.  It changes
// nothing else.  No page asks for or keeps the API key: it is for backends and the CLI.
import { drawHistory } from './charts.js';
import { h, fmtBytes, fmtMs } from './dom.js';
import { serverConfig, pypiState } from './settings.js';
import { requirePerson, recheckOnShow, sessionApi, signOut, tell } from './account.js';
import { UI, UI_CODE } from '../../worker/notes.js';

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
    if (e.status === 401) { location.reload(); return 'refused'; } // the session ended: sign in again
    $('admin-status').textContent = `Cannot reach the API: ${e.message}`;
    $('admin-status').dataset.state = 'refused';
    return refused ? 'refused' : 'error';
  }
}

// ---- People -------------------------------------------------------------------------------------
const when = (t) => (t ? new Date(t).toLocaleString() : '');

/** The one-time password the server made, shown once with what it is for; Done forgets it. */
function showSecret(name, sentence, password) {
  const box = $('person-secret');
  const code = h('code', { 'data-testid': 'one-time-password' }, password);
  const copy = h('button', { type: 'button', class: 'btn btn-small' }, 'Copy');
  const status = h('span', { class: 'small muted', role: 'status' });
  copy.addEventListener('click', async () => {
    try { await navigator.clipboard.writeText(password); tell(status, 'copied'); } catch { tell(status, 'copyFailed'); }
  });
  const done = h('button', { type: 'button', class: 'btn btn-small' }, 'Done');
  done.addEventListener('click', () => { box.replaceChildren(); box.hidden = true; });
  box.replaceChildren(h('p', { 'data-code': UI_CODE[sentence] }, UI[sentence](name)), h('div', { class: 'row' }, code, copy, done, status));
  box.hidden = false;
}

async function loadPeople() {
  let people;
  try { people = (await api.call('GET', '/v1/admin/people'))?.people || []; }
  catch (e) { tell($('people-status'), 'personNotSaved', e.message); return; }
  rows($('people').tBodies[0], people, (p) => [p.name + (p.id === self.id ? ' (you)' : ''), p.role, p.disabled ? 'disabled' : 'active', when(p.last_seen_at),
    h('span', { class: 'row' },
      h('button', { type: 'button', class: 'btn btn-small', 'data-action': p.disabled ? 'enable' : 'disable', onclick: () => changePerson(p, { disabled: !p.disabled }) }, p.disabled ? 'Enable' : 'Disable'),
      h('button', { type: 'button', class: 'btn btn-small', 'data-action': 'reset', onclick: () => changePerson(p, { reset_password: true }) }, 'New password'))]);
  for (const tr of $('people').tBodies[0].rows) tr.dataset.name = tr.cells[0].textContent.replace(/ \(you\)$/, '');
}

async function changePerson(p, change) {
  tell($('people-status'));
  try {
    const r = await api.call('PATCH', `/v1/admin/people/${encodeURIComponent(p.id)}`, change);
    if (r?.password) showSecret(p.name, 'personReset', r.password);
    else if ('disabled' in change) tell($('people-status'), change.disabled ? 'personDisabled' : 'personEnabled', p.name);
  } catch (e) { tell($('people-status'), 'personNotSaved', e.message); }
  loadPeople();
}

async function addPerson(e) {
  e.preventDefault();
  const name = $('person-name').value.trim();
  tell($('people-status'));
  if (!name) { tell($('people-status'), 'signinInvalid'); return; }
  try {
    const r = await api.call('POST', '/v1/admin/people', { name, role: $('person-role').value });
    $('person-name').value = '';
    if (r?.password) showSecret(r.person?.name || name, 'personCreated', r.password);
  } catch (err) {
    tell($('people-status'), ...(err.status === 409 ? ['personTaken', name] : ['personNotSaved', err.message]));
  }
  loadPeople();
}

// ---- Start: an admin's session ------------------------------------------------------------------
let self = null;
async function start() {
  const m = await requirePerson();
  self = m.person;
  recheckOnShow(m);
  $('who').textContent = UI.signedInAs(self.name);
  const out = h('button', { type: 'button', class: 'btn btn-small', id: 'sign-out' }, 'Sign out');
  out.addEventListener('click', () => signOut().catch((e) => tell($('admin-status'), 'signoutFailed', e.message)));
  $('who').after(' ', out);
  if (self.role !== 'admin') {
    for (const el of document.querySelectorAll('main > section.panel:not(#packages-panel)')) el.hidden = true;
    tell($('admin-status'), 'adminOnly', self.name);
    return;
  }
  api = sessionApi;
  $('person-form').addEventListener('submit', addPerson);
  loadPeople();
  await refresh();
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

$('save-retention').addEventListener('click', async () => {
  if (!api) return; // not an administrator: the section is hidden
  const days = Number($('retention').value);
  if (!Number.isInteger(days) || days < 1) { $('retention-status').textContent = 'Enter a whole number of days.'; return; }
  try {
    const s = await api.putAdminSettings({ retention_days: days });
    $('retention-status').textContent = `Saved: run files are kept ${s.retention_days} days.`;
  } catch (e) { $('retention-status').textContent = `Not saved: ${e.message}`; }
});
showPackages();
start();
