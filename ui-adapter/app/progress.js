// progress.js -- the runtime download bar: one bar over the runtime's total bytes while Python
// loads, labelled with the percentage and the bytes ("Loading the Python runtime: 42 % (5.1 of
// 12.1 MB)"; the bytes alone when the total is unknown), then the later phases' words with the
// bar kept where the download left it, then "Python ready" with the load time, and restarts
// ("sandbox restarted") as they happen.  The percentage is rounded down, so 100 % means every
// byte is in.  Display only.
import { h, fmtBytes, fmtMs } from './dom.js';

export function runtimeProgress(el, sup) {
  const bar = h('progress', { max: 1, 'aria-label': 'Python runtime download' });
  const label = h('span', { 'data-testid': 'runtime-status' }, 'Loading the Python runtime…');
  el.replaceChildren(bar, label);
  el.dataset.state = 'loading';
  let counted = false; // the bar shows bytes (until then it is indeterminate)
  sup.on('progress', (p) => {
    if (p.stage === 'download' && p.total) {
      counted = true;
      bar.max = p.total; bar.value = p.loaded;
      const pct = Math.floor((100 * p.loaded) / p.total);
      label.textContent = `Loading the Python runtime: ${pct} % (${fmtBytes(p.loaded)} of ${fmtBytes(p.total)})`;
    } else if (p.stage === 'download') {
      label.textContent = `Loading the Python runtime: ${fmtBytes(p.loaded)}`;
    } else if (p.message) {
      if (!counted) bar.removeAttribute('value');
      label.textContent = p.message;
    }
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
