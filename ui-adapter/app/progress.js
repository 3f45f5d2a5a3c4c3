// progress.js -- the runtime download bar: shows what the kernel supervisor reports while Python
// loads (bytes of the runtime when known, else the phase), then "Python ready" with the load time,
// and restarts ("sandbox restarted") as they happen.  Display only.
import { h, fmtBytes, fmtMs } from './dom.js';

export function runtimeProgress(el, sup) {
  const bar = h('progress', { max: 1, value: 0, 'aria-label': 'Python runtime download' });
  const label = h('span', { 'data-testid': 'runtime-status' }, 'Loading the Python runtime…');
  el.replaceChildren(bar, label);
  el.dataset.state = 'loading';
  sup.on('progress', (p) => {
    if (p.total) { bar.max = p.total; bar.value = p.loaded; label.textContent = `Loading the Python runtime: ${fmtBytes(p.loaded)} of ${fmtBytes(p.total)}`; }
    else if (p.message) { bar.removeAttribute('value'); label.textContent = p.message; }
  });
  sup.on('state', ({ state, loadMs }) => {
    el.dataset.state = state;
    if (state === 'ready' || state === 'busy') {
      bar.hidden = true;
      label.textContent = state === 'busy' ? 'Python is running…' : `Python ready${loadMs ? ` (loaded in ${fmtMs(loadMs)})` : ''}`;
    } else if (state === 'dead') {
      bar.hidden = true; label.textContent = 'The Python sandbox stopped: starting a fresh one…';
    }
  });
  sup.on('restart', ({ reason, ms }) => { label.textContent = `Sandbox restarted (${reason}) in ${fmtMs(ms)}`; });
}
