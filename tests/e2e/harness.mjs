// harness.mjs -- shared set-up of the browser end-to-end tests: Debian's /usr/bin/chromium driven
// by playwright-core (never a downloaded browser), headless, with a fresh user-data-dir per
// launch; the static test server or the real orchestrator binary (build/cerea-sandbox serve on a
// free 127.0.0.1 port with a temp --data dir, started and stopped by pid); screenshots saved under
// test-results/ (git-ignored).  It does not assert anything itself.
import { chromium } from 'playwright-core';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import net from 'node:net';
import https from 'node:https';
import { spawn, execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { startStaticServer } from './static-server.mjs';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const WWW = path.join(ROOT, 'build', 'www');
export const RESULTS = path.join(ROOT, 'test-results');
export const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';

export const DESKTOP = { width: 1280, height: 860 };
export const PHONE = { width: 390, height: 844 };

/**
 * A browser context on a fresh profile ({ctx, close, dir}).  close() removes the profile, unless
 * `profile` named one to reuse (a repeat visit: the same profile in a new browser process), which
 * the caller removes.
 */
export async function launch({ viewport = DESKTOP, isMobile = false, ignoreHTTPSErrors = false, profile = null } = {}) {
  const dir = profile || fs.mkdtempSync(path.join(os.tmpdir(), 'cerea-e2e-profile-'));
  const ctx = await chromium.launchPersistentContext(dir, {
    executablePath: CHROMIUM, headless: true, viewport, isMobile, hasTouch: isMobile, acceptDownloads: true,
    ignoreHTTPSErrors,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
  const close = async () => { await ctx.close().catch(() => {}); if (!profile) fs.rmSync(dir, { recursive: true, force: true }); };
  return { ctx, close, dir };
}

export async function staticServer(opts = {}) {
  if (!fs.existsSync(path.join(WWW, 'index.html'))) throw new Error('build/www is not built: run node ui-adapter/build.mjs');
  return startStaticServer({ root: WWW, ...opts });
}

export async function screenshot(page, name) {
  fs.mkdirSync(RESULTS, { recursive: true });
  const file = path.join(RESULTS, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  return file;
}

/** Collect console errors and page errors of a page (tests assert on them or print them). */
export function watchConsole(page, sink = []) {
  page.on('console', (m) => { if (m.type() === 'error') sink.push(`console: ${m.text()}`); });
  page.on('pageerror', (e) => sink.push(`pageerror: ${e.message}`));
  page.on('response', (r) => { if (r.status() >= 400) sink.push(`http ${r.status()} ${r.request().method()} ${new URL(r.url()).pathname}`); });
  return sink;
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
    s.on('error', reject);
  });
}

/**
 * Start the real orchestrator.  Resolves {origin, apiKey, pid, stop()} once /healthz answers, or
 * {skip: reason} when the binary is missing or does not come up (the caller skips with the reason).
 */
export async function orchestrator({ env = {}, timeoutMs = 15000, args = [], scheme = 'http' } = {}) {
  const bin = process.env.CEREA_BIN || path.join(ROOT, 'build', 'cerea-sandbox');
  if (!fs.existsSync(bin)) return { skip: 'build/cerea-sandbox is not built' };
  const data = fs.mkdtempSync(path.join(os.tmpdir(), 'cerea-e2e-data-'));
  const port = await freePort();
  const apiKey = 'e2e-key-' + Math.random().toString(36).slice(2);
  const log = [];
  const child = spawn(bin, ['serve', '--listen', `127.0.0.1:${port}`, '--data', data, ...args], {
    cwd: ROOT, env: { ...process.env, CEREA_API_KEY: apiKey, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout.on('data', (d) => log.push(String(d)));
  child.stderr.on('data', (d) => log.push(String(d)));
  let exited = null;
  child.on('exit', (code, sig) => { exited = { code, sig }; });
  const origin = `${scheme}://127.0.0.1:${port}`;
  const stop = async () => {
    if (exited === null) {
      process.kill(child.pid, 'SIGTERM');
      const t = Date.now();
      while (exited === null && Date.now() - t < 5000) await new Promise((r) => setTimeout(r, 50));
      if (exited === null) process.kill(child.pid, 'SIGKILL');
    }
    fs.rmSync(data, { recursive: true, force: true });
  };
  const t0 = Date.now();
  while (Date.now() - t0 < timeoutMs) {
    if (exited !== null) { await stop(); return { skip: `orchestrator exited at start (${JSON.stringify(exited)}): ${log.join('').slice(-400)}` }; }
    try {
      const r = scheme === 'https' ? await insecureGet(`${origin}/healthz`) : await fetch(`${origin}/healthz`);
      if (r.ok) return { origin, apiKey, pid: child.pid, stop, log };
    } catch { /* not yet */ }
    await new Promise((r) => setTimeout(r, 100));
  }
  await stop();
  return { skip: `orchestrator did not answer /healthz within ${timeoutMs} ms: ${log.join('').slice(-400)}` };
}

/** GET over TLS accepting the test's self-signed certificate: {ok, status, text}. */
export function insecureGet(url, headers = {}) {
  return new Promise((resolve, reject) => {
    const req = https.get(url, { rejectUnauthorized: false, headers }, (res) => {
      let body = '';
      res.on('data', (d) => { body += d; });
      res.on('end', () => resolve({ ok: res.statusCode < 300, status: res.statusCode, text: body, headers: res.headers }));
    });
    req.on('error', reject);
  });
}

/** A self-signed certificate for 127.0.0.1 made with openssl: {cert, key, dir}. */
export function selfSignedCert() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cerea-e2e-tls-'));
  const cert = path.join(dir, 'cert.pem'), key = path.join(dir, 'key.pem');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1',
    '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', key, '-out', cert], { stdio: 'ignore' });
  return { cert, key, dir };
}

/** The first administrator's one-time password, as the server printed it at its first start. */
export async function firstAdminPassword(orch, timeoutMs = 10_000) {
  const t0 = Date.now();
  for (;;) {
    const line = orch.log.join('').split('\n').find((l) => /password/i.test(l) && /\badmin\b/i.test(l));
    const m = line && /one-time password (\S+)/i.exec(line); // …the administrator "admin" with the one-time password X (…
    if (m) return m[1];
    if (Date.now() - t0 > timeoutMs) throw new Error(`no first administrator's password in the server's output: ${orch.log.join('').slice(-600)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * Signs `page` in at /signin as a person would; when the server asks for a password of their own
 * (a first sign-in with a given one), chooses `newPassword`.  Resolves the password that holds
 * afterwards.  Waits until the page has left /signin for `next`.
 */
export async function signIn(page, origin, { name, password, newPassword = `${password}-own`, next = '/' }) {
  await page.goto(`${origin}/signin?next=${encodeURIComponent(next)}`);
  await page.fill('#name', name);
  await page.fill('#password', password);
  await page.click('#signin-go');
  const left = (u) => !new URL(u).pathname.startsWith('/signin');
  const outcome = await Promise.race([
    page.waitForURL(left, { timeout: 15_000 }).then(() => 'in', () => null),
    page.locator('#change:not([hidden])').waitFor({ timeout: 15_000 }).then(() => 'change', () => null),
    page.locator('#signin-error:not(:empty)').waitFor({ timeout: 15_000 }).then(() => 'error', () => null),
  ]);
  if (outcome === 'error') throw new Error(`sign-in as ${name} refused: ${await page.textContent('#signin-error')}`);
  if (outcome !== 'change') return password;
  await page.fill('#new1', newPassword);
  await page.fill('#new2', newPassword);
  await page.click('#change-go');
  await page.waitForURL(left, { timeout: 15_000 });
  return newPassword;
}

/** Is someone signed in in this page's browser context (GET /v1/me with its cookie)? */
export const signedIn = (page, origin) => page.evaluate((o) => fetch(`${o}/v1/me`).then((r) => r.ok), origin);

/**
 * The first administrator's session in this page's browser context: the first time on a server,
 * signed in with the printed password and a new one chosen (kept on `orch` for the next).
 */
export async function signInAdmin(page, orch, next = '/') {
  if (!page.url().startsWith(orch.origin)) await page.goto(`${orch.origin}/healthz`); // a document of the origin, to ask from
  if (await signedIn(page, orch.origin)) { await page.goto(orch.origin + next); return; }
  if (!orch.adminPassword) orch.adminPassword = await signIn(page, orch.origin, { name: 'admin', password: await firstAdminPassword(orch), newPassword: `e2e-admin-${Math.random().toString(36).slice(2)}`, next });
  else await signIn(page, orch.origin, { name: 'admin', password: orch.adminPassword, next });
}

/** A person made with the API key (POST /v1/admin/people) → {name, password (one-time), person}. */
export async function addPerson(orch, name, role = 'user') {
  const r = await backend(orch.origin, orch.apiKey)('POST', '/v1/admin/people', { name, role });
  if (r.status !== 201) throw new Error(`POST /v1/admin/people ${r.status}: ${r.text}`);
  return { name, password: r.json.password, person: r.json.person };
}

/**
 * In the app at orch.origin, signed in as the administrator: press "New chat", which opens the
 * new chat's page at once.  Resolves once the page is at /chat/{id}.
 */
export async function newChatInApp(page, orch) {
  await signInAdmin(page, orch, '/');
  await page.click('#new-chat');
  await page.waitForURL(/\/chat\//, { timeout: 15_000 });
}

/** Backend API helper with the operator key. */
export function backend(origin, apiKey) {
  return async (method, p, body, headers = {}) => {
    const init = { method, headers: { Authorization: `Bearer ${apiKey}`, ...headers } };
    if (body instanceof Uint8Array || Buffer.isBuffer(body)) init.body = body;
    else if (body !== undefined) { init.body = JSON.stringify(body); init.headers['Content-Type'] = 'application/json'; }
    const r = await fetch(origin + p, init);
    const text = await r.text();
    let json = null; try { json = JSON.parse(text); } catch { /* not json */ }
    return { status: r.status, json, text };
  };
}

/**
 * What a phone's OS does to a page sent to the background: the CDP freeze, visibilityState
 * 'hidden', then visibilitychange and freeze (Playwright's focus emulation keeps a page visible
 * otherwise: docs/ui-adapter.md); foreground() undoes it (resume, visibilitychange 'visible').
 */
export async function background(page, cdp) {
  await cdp.send('Page.setWebLifecycleState', { state: 'frozen' }).catch(() => {});
  await page.evaluate(() => {
    Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => 'hidden' });
    document.dispatchEvent(new Event('visibilitychange'));
    document.dispatchEvent(new Event('freeze'));
  });
}
export async function foreground(page, cdp) {
  await cdp.send('Page.setWebLifecycleState', { state: 'active' }).catch(() => {});
  await page.evaluate(() => {
    delete document.visibilityState;
    document.dispatchEvent(new Event('resume'));
    document.dispatchEvent(new Event('visibilitychange'));
  });
}
