// drivers.mjs -- the browser engines people use, each behind the same few verbs, for the cross-engine
// e2e set (engines.test.mjs): Debian's Chromium over playwright-core (as harness.mjs launches it),
// Debian's Firefox ESR over WebDriver BiDi with puppeteer-core, and Debian's WebKitGTK (MiniBrowser
// with --automation, driven by WebKitWebDriver under its own Xvfb display) with selenium-webdriver,
// once with SharedArrayBuffer switched on as Safari has it (JSC_useSharedArrayBuffer=1 in the
// driver's environment) and once as WebKitGTK ships (no SharedArrayBuffer even when cross-origin
// isolated).  Never a downloaded browser.  Processes started here (Xvfb, WebKitWebDriver) are
// stopped by pid.
//
// API
//   ENGINES                  the configurations: [{id, label, sab}] (sab: SharedArrayBuffer expected);
//                            CEREA_ENGINES (ids, space- or comma-separated) keeps only those
//   missing(id)              → null, or why this machine cannot run that engine (a binary lacking)
//   open(id, {profile})      → Promise<Page> (one browser, one page; one WebKit session at a time).
//                            profile: a directory to keep the browser's profile in (Chromium,
//                            Firefox: a repeat visit is a new browser on it; the caller removes it)
// Page (playwright's shapes, so helpers written for Chromium take any engine):
//   goto(url)  reload()  evaluate(fn, arg) → its value (a promise is awaited)
//   waitForFunction(fn, arg, {timeout, polling})  → its truthy value; polled from here every 100 ms
//   waitForSelector(css, {timeout})  waitForText(css, text, {timeout})
//   click(css)  fill(css, text) (sets an input's value and fires input + change)  waitForTimeout(ms)
//   close()    the browser and what was started for it
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn, execFileSync } from 'node:child_process';
import { launch, freePort } from '../harness.mjs';

const ALL = [
  { id: 'chromium', label: 'Chromium (playwright-core)', sab: true },
  { id: 'firefox', label: 'Firefox ESR (puppeteer-core, WebDriver BiDi)', sab: true },
  { id: 'webkit-sab', label: 'WebKitGTK with SharedArrayBuffer (selenium-webdriver)', sab: true },
  { id: 'webkit', label: 'WebKitGTK without SharedArrayBuffer (selenium-webdriver)', sab: false },
];
// CEREA_ENGINES="webkit firefox" picks configurations on a developer machine (all by default).
const picked = (process.env.CEREA_ENGINES || '').split(/[\s,]+/).filter(Boolean);
export const ENGINES = picked.length ? ALL.filter((e) => picked.includes(e.id)) : ALL;

const FIREFOX = process.env.FIREFOX || '/usr/bin/firefox-esr';
const WEBKIT_DRIVER = '/usr/bin/WebKitWebDriver';
const XVFB = '/usr/bin/Xvfb';
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';

// MiniBrowser is not on PATH: libwebkit2gtk-4.1-0 ships it in its own directory.
function miniBrowser() {
  try {
    return execFileSync('dpkg', ['-L', 'libwebkit2gtk-4.1-0'], { encoding: 'utf8' }).split('\n').find((l) => l.endsWith('/MiniBrowser')) || null;
  } catch { return null; }
}

export function missing(id) {
  const need = id === 'chromium' ? [CHROMIUM] : id === 'firefox' ? [FIREFOX] : [WEBKIT_DRIVER, XVFB];
  const lacking = need.filter((p) => !fs.existsSync(p));
  if (id.startsWith('webkit') && !miniBrowser()) lacking.push('MiniBrowser (libwebkit2gtk-4.1-0)');
  return lacking.length ? `${lacking.join(', ')} not installed (scripts/setup.d/10-apt.sh installs it)` : null;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// The verbs every engine shares, over evaluate() and the engine's own click/goto.
class Page {
  async waitForFunction(fn, arg = null, { timeout = 30_000, polling = 100 } = {}) {
    const t0 = Date.now();
    let last = null;
    for (;;) {
      try { const v = await this.evaluate(fn, arg); if (v) return v; } catch (e) { last = e; }
      if (Date.now() - t0 > timeout) throw new Error(`timed out after ${timeout} ms waiting for ${String(fn).slice(0, 160)}${last ? ` (last error: ${last.message})` : ''}`);
      await sleep(polling);
    }
  }
  waitForSelector(css, { timeout } = {}) {
    return this.waitForFunction((s) => !!document.querySelector(s), css, { timeout });
  }
  waitForText(css, text, { timeout } = {}) {
    return this.waitForFunction(([s, t]) => [...document.querySelectorAll(s)].some((el) => el.textContent.includes(t)), [css, text], { timeout });
  }
  async fill(css, text) {
    await this.waitForSelector(css);
    await this.evaluate(([s, t]) => {
      const el = document.querySelector(s);
      el.focus(); el.value = t;
      el.dispatchEvent(new Event('input', { bubbles: true }));
      el.dispatchEvent(new Event('change', { bubbles: true }));
    }, [css, text]);
  }
  waitForTimeout(ms) { return sleep(ms); }
}

class PlaywrightPage extends Page {
  constructor(browser, page) { super(); this.browser = browser; this.page = page; }
  goto(url) { return this.page.goto(url); }
  reload() { return this.page.reload(); }
  evaluate(fn, arg) { return this.page.evaluate(fn, arg); }
  click(css) { return this.page.click(css); }
  close() { return this.browser.close(); }
}

class PuppeteerPage extends Page {
  constructor(browser, page, dir, keep) { super(); this.browser = browser; this.page = page; this.dir = dir; this.keep = keep; }
  goto(url) { return this.page.goto(url); }
  reload() { return this.page.reload(); }
  evaluate(fn, arg) { return this.page.evaluate(fn, arg); }
  click(css) { return this.page.click(css); }
  async close() { await this.browser.close().catch(() => {}); if (!this.keep) fs.rmSync(this.dir, { recursive: true, force: true }); }
}

// selenium's executeScript runs a function body: the function is passed as text and awaited (a
// returned promise is awaited by WebDriver itself).
class SeleniumPage extends Page {
  constructor(driver, By, stop) { super(); this.driver = driver; this.By = By; this.stop = stop; }
  goto(url) { return this.driver.get(url); }
  reload() { return this.driver.navigate().refresh(); }
  evaluate(fn, arg = null) { return this.driver.executeScript(`return (${fn})(arguments[0]);`, arg); }
  async click(css) { await this.waitForSelector(css); await (await this.driver.findElement(this.By.css(css))).click(); }
  async close() { await this.driver.quit().catch(() => {}); await this.stop(); }
}

async function openChromium(profile) {
  const b = await launch({ profile });
  return new PlaywrightPage(b, await b.ctx.newPage());
}

async function openFirefox(profile) {
  const { default: puppeteer } = await import('puppeteer-core');
  const dir = profile || fs.mkdtempSync(path.join(os.tmpdir(), 'cerea-e2e-firefox-'));
  const browser = await puppeteer.launch({ browser: 'firefox', executablePath: FIREFOX, headless: true, userDataDir: dir,
    extraPrefsFirefox: { 'browser.shell.checkDefaultBrowser': false, 'app.update.enabled': false, 'network.captive-portal-service.enabled': false } });
  const pages = await browser.pages();
  return new PuppeteerPage(browser, pages[0] || await browser.newPage(), dir, !!profile);
}

// A child process stopped by its pid.
function child(bin, args, env) {
  const log = [];
  const p = spawn(bin, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  p.stdout.on('data', (d) => log.push(String(d)));
  p.stderr.on('data', (d) => log.push(String(d)));
  let exited = false;
  p.on('exit', () => { exited = true; });
  const stop = async () => {
    if (exited) return;
    process.kill(p.pid, 'SIGTERM');
    for (let i = 0; i < 50 && !exited; i++) await sleep(100);
    if (!exited) process.kill(p.pid, 'SIGKILL');
  };
  return { p, log, stop, get exited() { return exited; } };
}

// A display number no X server holds here.
function freeDisplay() {
  for (let d = 90 + Math.floor(Math.random() * 100); d < 400; d++) {
    if (!fs.existsSync(`/tmp/.X11-unix/X${d}`) && !fs.existsSync(`/tmp/.X${d}-lock`)) return d;
  }
  throw new Error('no free X display number');
}

async function openWebKit(sab) {
  const { Builder, By } = await import('selenium-webdriver');
  const display = freeDisplay();
  const xvfb = child(XVFB, [`:${display}`, '-screen', '0', '1280x900x24', '-nolisten', 'tcp']);
  for (let i = 0; i < 100 && !fs.existsSync(`/tmp/.X11-unix/X${display}`); i++) await sleep(50);
  const port = await freePort();
  const env = { DISPLAY: `:${display}`, JSC_useSharedArrayBuffer: sab ? '1' : '0' };
  const driverProc = child(WEBKIT_DRIVER, [`--port=${port}`], env);
  const stop = async () => { await driverProc.stop(); await xvfb.stop(); };
  try {
    const url = `http://127.0.0.1:${port}`;
    for (let i = 0; i < 100; i++) {
      if (driverProc.exited) throw new Error(`WebKitWebDriver exited: ${driverProc.log.join('').slice(-400)}`);
      try { if ((await fetch(`${url}/status`)).ok) break; } catch { /* not yet */ }
      await sleep(100);
    }
    const driver = await new Builder().usingServer(url).withCapabilities({
      browserName: 'MiniBrowser',
      'webkitgtk:browserOptions': { binary: miniBrowser(), args: ['--automation'] },
    }).build();
    await driver.manage().setTimeouts({ script: 60_000, pageLoad: 60_000 });
    return new SeleniumPage(driver, By, stop);
  } catch (e) { await stop(); throw e; }
}

export function open(id, { profile = null } = {}) {
  if (id === 'chromium') return openChromium(profile);
  if (id === 'firefox') return openFirefox(profile);
  if (id === 'webkit-sab') return openWebKit(true);
  if (id === 'webkit') return openWebKit(false);
  throw new Error(`unknown engine ${id}`);
}
