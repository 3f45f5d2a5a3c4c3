// settings.js -- the person's settings and what the server says about itself (GET /v1/config):
//   - the "install packages from PyPI" toggle: the signed-in person's, kept by the server (read
//     from GET /v1/me, saved with PATCH /v1/me/settings); someone not signed in (the playground)
//     keeps theirs in this browser.  On by default; hidden and forced off when the operator set
//     CHAT_PYODIDE_PYPI_DISABLED (pypi_disabled); shown disabled, with the reason, when the
//     deployment does not serve micropip (pypi_available false), since nothing could install;
//   - the library set (packages.has / packages.lacks) for the lines the pages show.
// The kernel worker URL follows the toggle: /worker-pypi/ is served with a CSP that adds the PyPI
// hosts to connect-src, /worker/ without them.  This browser's copy ('cerea.settings', {pypi}) is
// also the hint boot.js starts from before /v1/me answers, so a signed-in person's value is
// written there too.  No credential is ever kept here (an API key a former version kept is
// removed on load).
import { me, sessionApi, tell } from './account.js';

const KEY = 'cerea.settings';

export function loadSettings() {
  try { return { pypi: JSON.parse(localStorage.getItem(KEY) || '{}').pypi ?? true }; }
  catch { return { pypi: true }; }
}
export function saveSettings(s) { try { localStorage.setItem(KEY, JSON.stringify({ pypi: !!s.pypi })); } catch { /* storage off */ } }

// What earlier versions of the app kept in this browser: the operator key beside the setting, and
// the chats' page tokens.  Neither belongs in storage.
try {
  if (/apiKey/.test(localStorage.getItem(KEY) || '')) saveSettings(loadSettings());
  localStorage.removeItem('cerea.chats');
} catch { /* storage off */ }

/** The PyPI setting that counts: the signed-in person's (kept in the hint too), else this browser's. */
export async function wantedPypi() {
  let m = null;
  try { m = await me(); } catch { /* the server cannot say: the hint */ }
  if (!m) return loadSettings().pypi;
  const pypi = m.settings?.pypi ?? true;
  if (pypi !== loadSettings().pypi) saveSettings({ pypi });
  return pypi;
}

/** Saves the PyPI setting where it lives (the server for a signed-in person).  Throws ApiError. */
export async function savePypi(pypi) {
  const m = await me().catch(() => null);
  if (m) m.settings = (await sessionApi.call('PATCH', '/v1/me/settings', { pypi }))?.settings || { ...m.settings, pypi };
  saveSettings({ pypi });
}

let configP = null;
const EARLY_CONFIG = '__cereaConfig';
const askConfig = () => fetch('/v1/config', { credentials: 'omit', cache: 'no-store' });
/** Asks for /v1/config now, for serverConfig() to take (the page's first inline script calls it). */
export function prefetchConfig() { globalThis[EARLY_CONFIG] ||= askConfig(); }
/** GET /v1/config (public): {pypi_disabled, pypi_available, packages, limits, …}; defaults when absent. */
export function serverConfig() {
  const early = globalThis[EARLY_CONFIG];
  delete globalThis[EARLY_CONFIG];
  configP ||= (early || askConfig())
    .then((r) => (r.ok ? r.json() : {})).catch(() => ({}))
    .then((c) => ({ pypi_disabled: false, ...c }));
  return configP;
}

/** 'disabled' (the operator's switch), 'unavailable' (no micropip here) or 'available'.  A server
 * that does not say (pypi_available absent) is taken at its word that PyPI is allowed. */
export function pypiState(config) {
  if (config.pypi_disabled) return 'disabled';
  return config.pypi_available === false ? 'unavailable' : 'available';
}

export function pypiAllowed(settings, config) { return pypiState(config) === 'available' && !!settings.pypi; }

export function workerUrl(pypi) {
  return pypi ? '/worker-pypi/kernel-worker.js' : '/worker/kernel-worker.js';
}

/** The library set in two sentences for the person at the page, or '' when the server does not say. */
export function librariesText(config) {
  const p = config.packages;
  if (!p || !Array.isArray(p.has)) return '';
  const has = p.has.map((x) => x.name);
  const lacks = (p.lacks || []).map((x) => x.name).filter((n) => n !== 'micropip');
  const py = p.python ? `Python ${p.python}` : 'Python';
  return `${py} with its standard library${has.length ? ` and ${has.join(', ')}` : ''}.` +
    (lacks.length ? ` Not available on this deployment: ${lacks.join(', ')}.` : '');
}

/** Wire the settings dialog of a page (index.html has one): the PyPI toggle, saved where it lives. */
export async function wireSettingsDialog({ onChange } = {}) {
  const dlg = document.getElementById('settings');
  if (!dlg) return;
  const [cfg, wanted] = await Promise.all([serverConfig(), wantedPypi()]);
  const state = pypiState(cfg);
  const pypi = document.getElementById('pypi');
  const status = document.getElementById('pypi-status');
  document.getElementById('pypi-row').hidden = state === 'disabled';
  document.getElementById('pypi-off').hidden = state !== 'disabled';
  document.getElementById('pypi-unavailable').hidden = state !== 'unavailable';
  pypi.disabled = state !== 'available';
  pypi.checked = state === 'available' && wanted;
  // The button ships disabled and is enabled only here, once the dialog reflects the server's
  // config: a click before that used to land on a button with no handler yet and do nothing.
  const open = document.getElementById('open-settings');
  open.addEventListener('click', () => dlg.showModal());
  open.disabled = false;
  pypi.addEventListener('change', async () => {
    const want = pypi.checked;
    tell(status);
    try { await savePypi(want); onChange?.({ pypi: want }); }
    catch (e) { pypi.checked = !want; tell(status, 'settingNotSaved', e.message); }
  });
}
