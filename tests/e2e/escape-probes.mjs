// escape-probes.mjs -- shared by the Chromium tests that drive the playground page: setting the
// editor's code, running it and reading its card, and the escape probes -- every way from Python
// out of the kernel worker (fetch to the app and to another server, XHR, WebSocket, importScripts,
// dynamic import(), js.eval, js.Function, IndexedDB, caches, BroadcastChannel, sockets, urllib,
// pyfetch), each recorded as blocked or REACHED; escapeProbes takes any engine's page (the
// cross-engine set's too).  No assertions here: the tests assert.

export async function setCode(page, code) {
  await page.evaluate((c) => window.cereaEditor.setCode(c), code);
}

export async function runAndWait(page, { via = 'button' } = {}) {
  const before = await page.locator('.run-card').count();
  if (via === 'keys') { await page.click('.cm-content'); await page.keyboard.press('Control+Enter'); }
  else await page.click('#run');
  await page.waitForFunction((n) => {
    const cards = document.querySelectorAll('.run-card');
    return cards.length > n && !['running', 'queued'].includes(cards[0].dataset.status);
  }, before, { timeout: 90_000, polling: 100 });
  const card = page.locator('.run-card').first();
  return {
    status: await card.getAttribute('data-status'),
    stdout: (await card.locator('[data-testid=stdout]').count()) ? await card.locator('[data-testid=stdout]').textContent() : '',
    text: await card.textContent(),
    card,
  };
}

// The same over the verbs every engine's driver has (evaluate, click, waitForFunction: playwright's
// shapes, tests/e2e/engines/drivers.mjs): the first card's status and output once it is done.
async function runCard(page) {
  const before = await page.evaluate(() => document.querySelectorAll('.run-card').length);
  await page.click('#run');
  await page.waitForFunction((n) => {
    const cards = document.querySelectorAll('.run-card');
    return cards.length > n && !['running', 'queued'].includes(cards[0].dataset.status);
  }, before, { timeout: 90_000, polling: 100 });
  return page.evaluate(() => {
    const c = document.querySelector('.run-card');
    return { status: c.dataset.status, stdout: c.querySelector('[data-testid=stdout]')?.textContent || '', text: c.textContent };
  });
}

/**
 * Runs the escape probes in the page's kernel against `target` (an origin that counts what reaches
 * it) and lets their promises settle.  → {results: {probe: 'blocked …'|'REACHED …'|'pending'},
 * bcGot: messages the page received on the BroadcastChannel Python tried}.
 */
export async function escapeProbes(page, target) {
  await listenForProbe(page);
  await setCode(page, probeCode(target));
  const r = await runCard(page);
  if (!/probes started/.test(r.stdout)) throw new Error(`the probes did not run: ${r.text}`);
  await page.waitForTimeout(1500); // let promises settle
  await setCode(page, PROBE_REPORT);
  const r2 = await runCard(page);
  return { results: JSON.parse(r2.stdout), bcGot: await page.evaluate(() => window.bcGot) };
}

// The page listens on the BroadcastChannel Python will try (what it gets: window.bcGot).
export function listenForProbe(page) {
  return page.evaluate(() => { window.bcGot = []; const bc = new BroadcastChannel('cerea-probe'); bc.onmessage = (e) => window.bcGot.push(e.data); });
}

// The probes' Python (prints "probes started"; the results land in R), and the run that prints R
// as JSON once their promises settled.
export const PROBE_REPORT = 'import json\nprint(json.dumps(R, indent=1))\n';
export function probeCode(target) {
  return `
R = {}
T = ${JSON.stringify(target)}
def mark(name, ok, detail=''):
    R[name] = ('REACHED ' if ok else 'blocked ') + str(detail)[:80]
def sync(name, fn):
    try:
        fn(); mark(name, True, 'no exception')
    except BaseException as e:
        mark(name, False, type(e).__name__)
def promise(name, fn):
    try:
        p = fn()
        R[name] = 'pending'
        p.then(lambda v: mark(name, True, 'resolved'), lambda e: mark(name, False, 'rejected'))
    except BaseException as e:
        mark(name, False, type(e).__name__)
def js():
    import js as j
    return j
promise('fetch app API', lambda: js().fetch('/v1/config'))
promise('fetch other server', lambda: js().fetch(T + '/fetch'))
promise('fetch absolute app origin', lambda: js().fetch(js().location.origin + '/index.html'))
def xhr():
    x = js().XMLHttpRequest.new(); x.open('GET', T + '/xhr', False); x.send()
sync('XMLHttpRequest', xhr)
sync('WebSocket', lambda: js().WebSocket.new(T.replace('http', 'ws') + '/ws'))
sync('importScripts', lambda: js().importScripts(T + '/import.js'))
promise('dynamic import()', lambda: __import__('pyodide.code', fromlist=['run_js']).run_js('import(' + repr(T + '/dyn.js') + ')'))
sync('js.eval', lambda: js().eval('1+1'))
sync('js.Function', lambda: js().Function('return 1')())
def idb():
    r = js().indexedDB.open('cerea-probe')
sync('IndexedDB', idb)
promise('caches', lambda: js().caches.open('cerea-probe'))
sync('BroadcastChannel', lambda: js().BroadcastChannel.new('cerea-probe').postMessage('escaped'))
def sock():
    import socket
    s = socket.create_connection(('127.0.0.1', ${new URL(target).port}), timeout=2); s.send(b'GET /sock HTTP/1.0\\r\\n\\r\\n')
sync('socket', sock)
def urlopen():
    import urllib.request
    urllib.request.urlopen(T + '/urllib', timeout=2).read()
sync('urllib', urlopen)
def pyfetch():
    from pyodide.http import pyfetch as pf
    return pf(T + '/pyfetch')
promise('pyfetch', pyfetch)
print('probes started')
`;
}
