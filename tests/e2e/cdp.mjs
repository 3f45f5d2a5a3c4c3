// cdp.mjs -- Debian's Chromium started by pid with a DevTools port and a temp profile, Playwright
// attached with connectOverCDP(…, {noDefaults: true}), for the tests that need Chromium's own page
// lifecycle (lifecycle.test.mjs, phone.test.mjs).  Why not harness.launch(): Playwright turns on
// Emulation.setFocusEmulationEnabled for every page it drives, and while that is on Chromium keeps
// the page "visible" (a second tab in front does not hide it) and Page.setWebLifecycleState
// 'frozen' does nothing; attached with noDefaults it leaves that override off.  Not a test itself.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { chromium } from 'playwright-core';
import { CHROMIUM } from './harness.mjs';

/** → {browser, stop()} or {skip: reason}.  stop() closes the browser, kills it by pid, removes the profile. */
export async function launchCdp() {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'cerea-e2e-cdp-'));
  const child = spawn(CHROMIUM, ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync',
    `--user-data-dir=${profile}`, '--remote-debugging-port=0', 'about:blank'], { stdio: 'ignore' });
  let exited = false;
  child.on('exit', () => { exited = true; });
  let browser = null;
  const stop = async () => {
    await browser?.close().catch(() => {});
    if (!exited) {
      process.kill(child.pid, 'SIGTERM');
      for (let i = 0; i < 50 && !exited; i++) await new Promise((r) => setTimeout(r, 100));
      if (!exited) process.kill(child.pid, 'SIGKILL');
    }
    fs.rmSync(profile, { recursive: true, force: true });
  };
  const portFile = path.join(profile, 'DevToolsActivePort');
  for (let i = 0; i < 150 && !fs.existsSync(portFile) && !exited; i++) await new Promise((r) => setTimeout(r, 100));
  if (!fs.existsSync(portFile)) { await stop(); return { skip: `chromium did not open a DevTools port (${CHROMIUM})` }; }
  await new Promise((r) => setTimeout(r, 100));   // the file is written before the port is listed in it
  const port = fs.readFileSync(portFile, 'utf8').split('\n')[0];
  browser = await chromium.connectOverCDP(`http://127.0.0.1:${port}`, { noDefaults: true });
  return { browser, stop };
}
