// settings.js -- the user's settings kept in this browser (localStorage) and what the server says
// about itself (GET /v1/config):
//   - the "install packages from PyPI" toggle: on by default; hidden and forced off when the
//     operator set CHAT_PYODIDE_PYPI_DISABLED (pypi_disabled); shown disabled, with the reason, when
//     the deployment does not serve micropip (pypi_available false), since nothing could install;
//   - the operator API key the app uses to create chats: the dialog saves what is typed and says at
//     once whether the server accepts it (checkApiKey); the admin page saves a key only once
//     accepted, so a mistyped key there never replaces a working one;
//   - the library set (packages.has / packages.lacks) for the lines the pages show.
// The kernel worker URL follows the toggle: /worker-pypi/ is served with a CSP that adds the PyPI
// hosts to connect-src, /worker/ without them.
import { Api } from '../src/api.js';

const KEY = 'cerea.settings';

export function loadSettings() {
  try { return { pypi: true, apiKey: '', ...JSON.parse(localStorage.getItem(KEY) || '{}') }; }
  catch { return { pypi: true, apiKey: '' }; }
}
export function saveSettings(s) { localStorage.setItem(KEY, JSON.stringify(s)); }

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

/**
 * Does the server accept `key` as the operator API key?  'ok', 'refused' (401/403), or the error
 * message when the server could not be asked.
 */
export async function checkApiKey(key) {
  if (!key) return 'refused';
  try { await new Api({ token: key }).adminSettings(); return 'ok'; }
  catch (e) { return e.status === 401 || e.status === 403 ? 'refused' : e.message; }
}

/** Wire the settings dialog of a page (index.html has one). */
export async function wireSettingsDialog({ onChange } = {}) {
  const dlg = document.getElementById('settings');
  if (!dlg) return;
  const s = loadSettings();
  const cfg = await serverConfig();
  const state = pypiState(cfg);
  const pypi = document.getElementById('pypi');
  document.getElementById('pypi-row').hidden = state === 'disabled';
  document.getElementById('pypi-off').hidden = state !== 'disabled';
  document.getElementById('pypi-unavailable').hidden = state !== 'unavailable';
  pypi.disabled = state !== 'available';
  pypi.checked = state === 'available' && !!s.pypi;
  const key = document.getElementById('apikey');
  const keyStatus = document.getElementById('apikey-status');
  key.value = s.apiKey || '';
  // The button ships disabled and is enabled only here, once the dialog reflects the server's
  // config: a click before that used to land on a button with no handler yet and do nothing.
  const open = document.getElementById('open-settings');
  open.addEventListener('click', () => dlg.showModal());
  open.disabled = false;
  pypi.addEventListener('change', () => { const n = { ...loadSettings(), pypi: pypi.checked }; saveSettings(n); onChange?.(n); });
  // What is typed here is saved (it is this dialog's setting), then checked, and the verdict shown
  // beside it: a refused key says so here instead of failing later.
  key.addEventListener('change', async () => {
    const k = key.value.trim();
    const n = { ...loadSettings(), apiKey: k };
    saveSettings(n);
    onChange?.(n);
    keyStatus.textContent = k ? 'Checking the key…' : '';
    delete keyStatus.dataset.state;
    if (!k) return;
    const verdict = await checkApiKey(k);
    if (key.value.trim() !== k) return; // typed again meanwhile: that change checks itself
    keyStatus.dataset.state = verdict === 'ok' ? 'ok' : 'refused';
    keyStatus.textContent = verdict === 'ok' ? 'The server accepted this key.'
      : verdict === 'refused' ? 'The server refused this key: New chat will not work with it.'
        : `The key could not be checked: ${verdict}`;
  });
}
