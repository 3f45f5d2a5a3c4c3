// settings.js -- the user's settings kept in this browser (localStorage): the "install packages
// from PyPI" toggle (on by default, hidden and forced off when the operator set
// CHAT_PYODIDE_PYPI_DISABLED, which GET /v1/config reports as pypi_disabled) and the operator API
// key the app uses to create chats.  The kernel worker URL follows the toggle: /worker-pypi/ is
// served with a CSP that adds the PyPI hosts to connect-src, /worker/ without them.
const KEY = 'cerea.settings';

export function loadSettings() {
  try { return { pypi: true, apiKey: '', ...JSON.parse(localStorage.getItem(KEY) || '{}') }; }
  catch { return { pypi: true, apiKey: '' }; }
}
export function saveSettings(s) { localStorage.setItem(KEY, JSON.stringify(s)); }

let configP = null;
/** GET /v1/config (public): {pypi_disabled, execution, time_limit_s, …}; defaults when absent. */
export function serverConfig() {
  configP ||= fetch('/v1/config', { credentials: 'omit', cache: 'no-store' })
    .then((r) => (r.ok ? r.json() : {})).catch(() => ({}))
    .then((c) => ({ pypi_disabled: false, ...c }));
  return configP;
}

export function pypiAllowed(settings, config) { return !config.pypi_disabled && !!settings.pypi; }

export function workerUrl(pypi) {
  return pypi ? '/worker-pypi/kernel-worker.js' : '/worker/kernel-worker.js';
}

/** Wire the settings dialog of a page (index.html has one). */
export async function wireSettingsDialog({ onChange } = {}) {
  const dlg = document.getElementById('settings');
  if (!dlg) return;
  const s = loadSettings();
  const cfg = await serverConfig();
  const pypi = document.getElementById('pypi');
  document.getElementById('pypi-row').hidden = !!cfg.pypi_disabled;
  document.getElementById('pypi-off').hidden = !cfg.pypi_disabled;
  pypi.checked = !!s.pypi;
  const key = document.getElementById('apikey');
  key.value = s.apiKey || '';
  // The button ships disabled and is enabled only here, once the dialog reflects the server's
  // config: a click before that used to land on a button with no handler yet and do nothing.
  const open = document.getElementById('open-settings');
  open.addEventListener('click', () => dlg.showModal());
  open.disabled = false;
  pypi.addEventListener('change', () => { const n = { ...loadSettings(), pypi: pypi.checked }; saveSettings(n); onChange?.(n); });
  key.addEventListener('change', () => { const n = { ...loadSettings(), apiKey: key.value.trim() }; saveSettings(n); onChange?.(n); });
}
