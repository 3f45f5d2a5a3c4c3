// floor.mjs -- what the start-up benchmarks (run.mjs: Chromium; engines.mjs: every engine) share:
// the floor, a bare page on the same server that loads the same runtime with Pyodide's own loader
// in a module worker, and the real orchestrator serving the built tree plus the floor's two files
// (a temporary --data dir; stopped by the caller, by pid: {origin, pid, child}).
import fs from 'node:fs';
import path from 'node:path';
import { spawn } from 'node:child_process';

const BIN = process.env.CEREA_BIN || path.join(path.dirname(new URL(import.meta.url).pathname), '../../build/cerea-sandbox');

// The floor: Pyodide's own loader in a module worker, from the same /pyodide/.
const FLOOR_HTML = `<!doctype html><meta charset="utf-8"><title>floor</title>
<p data-testid="runtime-status">Loading…</p>
<script type="module">
const w = new Worker('/assets/floor-worker.mjs', { type: 'module' });
w.onmessage = (e) => { document.querySelector('p').textContent = e.data; };
</script>`;
const FLOOR_WORKER = `import { loadPyodide } from '/pyodide/pyodide.mjs';
const py = await loadPyodide({ indexURL: location.origin + '/pyodide/' });
py.runPython('1');
postMessage('Python ready');`;

function staticTree(dir, WWW) {
  for (const e of fs.readdirSync(WWW)) if (e !== 'assets') fs.symlinkSync(path.join(WWW, e), path.join(dir, e));
  fs.mkdirSync(path.join(dir, 'assets'));
  for (const e of fs.readdirSync(path.join(WWW, 'assets'))) fs.symlinkSync(path.join(WWW, 'assets', e), path.join(dir, 'assets', e));
  fs.writeFileSync(path.join(dir, 'assets', 'floor.html'), FLOOR_HTML);
  fs.writeFileSync(path.join(dir, 'assets', 'floor-worker.mjs'), FLOOR_WORKER);
}

export async function startServer(tmp, WWW) {
  const www = path.join(tmp, 'www'); fs.mkdirSync(www); staticTree(www, WWW);
  const port = 20000 + Math.floor(Math.random() * 20000);
  const child = spawn(BIN, ['serve', '--listen', `127.0.0.1:${port}`, '--data', path.join(tmp, 'data'), '--static', www],
    { env: { ...process.env, CEREA_API_KEY: 'bench-startup-key-0123456789', CEREA_LOG: 'warn' }, stdio: ['ignore', 'ignore', 'pipe'] });
  let err = ''; child.stderr.on('data', (d) => { err += d; });
  const origin = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 100; i++) {
    if (child.exitCode !== null) throw new Error(`orchestrator exited: ${err.slice(-400)}`);
    try { if ((await fetch(`${origin}/healthz`)).ok) return { origin, pid: child.pid, child }; } catch { /* not yet */ }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`orchestrator did not start: ${err.slice(-400)}`);
}

