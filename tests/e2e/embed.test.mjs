// embed.test.mjs -- the ui-adapter as a package, used by a chat page that is not ours
// (tests/embed/: its own package.json, its own page), as an integrator would: the tarball setup
// packs (build/ui-adapter/, ui-adapter/pack.mjs) installed from the file, the page bundled with
// esbuild, its TypeScript use of the API checked by tsc against the package's declarations, then
// in Chromium: the page, served by a small server of its own that puts the orchestrator's /v1/,
// /worker/ and /pyodide/ behind the same origin (what docs/ui-adapter.md says to do), attaches to
// a chat its backend created, runs the chat's runs with their output live, and shows an output
// file that downloads with its bytes.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { ROOT, launch, orchestrator, backend, screenshot, watchConsole } from './harness.mjs';

const EMBED = path.join(ROOT, 'tests', 'embed');
const META = JSON.parse(fs.readFileSync(path.join(ROOT, 'ui-adapter', 'package.json'), 'utf8'));
const TARBALL = path.join(ROOT, 'build', 'ui-adapter', `cerea-ui-adapter-${META.version}.tgz`);
let orch, api, browser, site;

// The integrator's site: its page and bundle, and the orchestrator's paths proxied as they are.
function startSite(target) {
  const proxied = /^\/(v1|worker|worker-pypi|pyodide)\//;
  const server = http.createServer((req, res) => {
    if (proxied.test(req.url)) {
      const up = http.request(`${target}${req.url}`, { method: req.method, headers: req.headers }, (r) => {
        res.writeHead(r.statusCode, r.headers);
        r.pipe(res);
      });
      up.on('error', () => { res.writeHead(502).end(); });
      req.pipe(up);
      return;
    }
    const file = req.url === '/' || req.url.startsWith('/#') ? 'index.html' : req.url.split('?')[0].slice(1);
    const p = path.join(EMBED, file === 'index.html' ? '' : 'dist', file);
    if (!p.startsWith(EMBED) || !fs.existsSync(p)) { res.writeHead(404).end(); return; }
    res.writeHead(200, { 'content-type': p.endsWith('.js') ? 'text/javascript' : 'text/html',
      // Cross-origin isolated, as the kernel wants (SharedArrayBuffer: interrupts, input()).
      'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp' });
    fs.createReadStream(p).pipe(res);
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ server, origin: `http://127.0.0.1:${server.address().port}` })));
}

before(async () => {
  if (!fs.existsSync(TARBALL)) throw new Error(`${TARBALL} is missing: run bash scripts/setup.sh (70-package.sh packs it)`);
  // A fresh install each time: npm keeps an installed file: tarball whose version did not change.
  fs.rmSync(path.join(EMBED, 'node_modules'), { recursive: true, force: true });
  execFileSync('npm', ['install', '--no-package-lock', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: EMBED, stdio: 'inherit' });
  execFileSync(path.join(ROOT, 'node_modules', '.bin', 'esbuild'), [path.join(EMBED, 'src', 'main.js'), '--bundle', '--format=esm',
    `--outfile=${path.join(EMBED, 'dist', 'main.js')}`, '--log-level=warning'], { stdio: 'inherit' });
  orch = await orchestrator();
  if (orch.skip) throw new Error(orch.skip);
  api = backend(orch.origin, orch.apiKey);
  site = await startSite(orch.origin);
  browser = await launch();
});
after(async () => {
  await browser?.close();
  site?.server.close();
  if (orch && !orch.skip) await orch.stop();
});

test('docs/ui-adapter.md\'s quickstart is the page this test runs', () => {
  const doc = fs.readFileSync(path.join(ROOT, 'docs', 'ui-adapter.md'), 'utf8');
  const section = doc.slice(doc.indexOf('## Embedding it'));
  const block = /```js\n([\s\S]*?)```/.exec(section)?.[1];
  assert.equal(block, fs.readFileSync(path.join(EMBED, 'src', 'main.js'), 'utf8'));
});

test('the package installs from its tarball with its declarations, and the documented API type-checks', () => {
  const installed = JSON.parse(fs.readFileSync(path.join(EMBED, 'node_modules', '@cerea', 'ui-adapter', 'package.json'), 'utf8'));
  assert.equal(installed.name, '@cerea/ui-adapter');
  assert.equal(installed.version, META.version);
  assert.ok(fs.existsSync(path.join(EMBED, 'node_modules', '@cerea', 'ui-adapter', installed.types)), 'the declarations are in it');
  execFileSync(path.join(ROOT, 'node_modules', '.bin', 'tsc'), ['-p', path.join(EMBED, 'tsconfig.json')], { stdio: 'inherit' });
  // And a wrong use is a compile error, so the check has teeth.
  const bad = path.join(EMBED, 'bad.ts');
  fs.writeFileSync(bad, "import { ChatSession } from '@cerea/ui-adapter';\nnew ChatSession({ chatId: 1 });\n");
  try {
    assert.throws(() => execFileSync(path.join(ROOT, 'node_modules', '.bin', 'tsc'), ['--noEmit', '--strict', '--module', 'esnext',
      '--moduleResolution', 'bundler', '--target', 'es2022', '--skipLibCheck', bad], { stdio: 'pipe' }),
    (e) => /bad\.ts\(2,.*(chatId|not assignable)/.test(String(e.stdout)));
  } finally { fs.rmSync(bad, { force: true }); }
});

test('a chat page of another app runs the chat\'s code with live output and an output file, on the package alone', async () => {
  const chat = (await api('POST', '/v1/chats', {})).json;   // the integrator's backend
  const page = await browser.ctx.newPage();
  const errors = watchConsole(page);
  await page.goto(`${site.origin}/#chat=${chat.chat_id}&token=${chat.page_token}`);
  await page.waitForFunction(() => /ready/.test(document.getElementById('kernel').textContent), null, { timeout: 120_000 });
  const code = 'import time\nprint("early", flush=True)\ntime.sleep(2)\nopen("/mnt/output/report.txt", "w").write("made in the page")\nprint("late")';
  const run = (await api('POST', `/v1/chats/${chat.chat_id}/runs`, { code, origin: 'user' })).json;
  const card = page.locator(`.card[data-run-id="${run.run_id}"]`);
  // Live: "early" shows while the run still sleeps.
  await page.waitForFunction((id) => {
    const c = document.querySelector(`.card[data-run-id="${id}"]`);
    return c && /early/.test(c.querySelector('.stdout')?.textContent || '') && !c.dataset.status.match(/^(ok|error)$/);
  }, run.run_id, { timeout: 60_000 });
  await page.waitForFunction((id) => document.querySelector(`.card[data-run-id="${id}"]`)?.dataset.status === 'ok', run.run_id, { timeout: 60_000 });
  assert.equal((await card.locator('.stdout').textContent()).trim(), 'early\nlate');
  assert.equal((await card.locator('.code').textContent()), code);
  const file = card.locator('a.file[data-name="report.txt"]');
  assert.match(await file.textContent(), /report\.txt \(16 bytes\)/);
  await file.click();
  await page.waitForFunction(() => document.querySelector('a.file')?.dataset.loaded, null, { timeout: 20_000 });
  assert.equal(await file.getAttribute('data-loaded'), 'made in the page');
  const done = (await api('GET', `/v1/runs/${run.run_id}`)).json;
  assert.equal(done.status, 'ok');
  assert.equal(done.files[0].name, 'report.txt');
  assert.deepEqual(errors.filter((e) => /pageerror/.test(e)), [], 'no uncaught errors');
  await screenshot(page, 'embed-quickstart');
  await page.close();
});
