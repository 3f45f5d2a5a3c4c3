// lib.mjs -- what the full-stack tests share: the real orchestrator binary in `server` execution
// mode (real SQLite files in a temp data dir, real headless hosts under bubblewrap and Node's
// permission model, real Pyodide), started on 127.0.0.1 with a free port and stopped by pid; the
// processes it spawned found through /proc by parent pid (never by name).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, readdirSync, readlinkSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { startServer, call, newChat, upload, sleep, tempDir, ROOT } from '../integration/lib.mjs';

export { call, newChat, upload, sleep, tempDir, ROOT };

// bubblewrap usable here (root or user namespaces)?  Without it the hosts run TRUSTED and the
// tests that prove the sandbox skip with that reason (fail, in CI: needTool).
export const BWRAP = (() => {
  const r = spawnSync('bwrap', ['--unshare-net', '--die-with-parent', '--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc', 'true'], { stdio: 'ignore' });
  return r.status === 0;
})();

export const NO_BWRAP = 'bubblewrap cannot create namespaces on this machine: hosts run trusted';

// In CI (CI set, as CI services set it) setup has installed every tool, so one found missing is a
// broken setup: a test that would skip for it fails instead, saying why.
export const inCI = () => !!process.env.CI && !/^(0|false|no)$/i.test(process.env.CI);
export function needTool(t, missing) {
  if (!missing) return true;
  if (inCI()) assert.fail(`${missing} (CI is set: setup installs it, so this fails instead of skipping)`);
  t.skip(missing);
  return false;
}

export const sha256 = (b) => createHash('sha256').update(b).digest('hex');

export async function startStack({ dataDir, env = {} } = {}) {
  // Without bubblewrap the hosts run trusted, which proves no sandbox: not in CI.
  if (!BWRAP && inCI() && env.CEREA_SERVER_TRUSTED !== '1')
    assert.fail(`${NO_BWRAP} (CI is set: setup installs it, so the full-stack tests fail instead of running unsandboxed)`);
  const srv = await startServer({
    dataDir,
    env: {
      CHAT_CODE_EXECUTION: 'server', CODE_TIME_LIMIT_S: '3', PAGE_GRACE_MS: '1000', CEREA_LOG: 'info',
      CEREA_HOSTS: '1', CEREA_HOST_KERNELS: '3', ...(BWRAP ? {} : { CEREA_SERVER_TRUSTED: '1' }), ...env,
    },
  });
  return srv;
}

// Resolves once the n-th "host S ... ready" line appeared in the server's log.
export async function hostReady(srv, n = 1, timeoutMs = 180000) {
  const t0 = Date.now();
  for (;;) {
    const count = (srv.log.match(/host \d+ \(pid \d+\) ready/g) || []).length;
    if (count >= n) return;
    if (Date.now() - t0 > timeoutMs) throw new Error(`no host ready within ${timeoutMs} ms:\n${srv.log.slice(-3000)}`);
    await sleep(100);
  }
}

function ppidOf(pid) {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(s.slice(s.lastIndexOf(')') + 2).split(' ')[1]);
  } catch { return -1; }
}

// Every live descendant of pid, found through /proc by parent pid.
export function descendants(pid) {
  const all = readdirSync('/proc').filter((d) => /^\d+$/.test(d)).map(Number);
  const out = [];
  let frontier = [pid];
  while (frontier.length) {
    const next = [];
    for (const p of all) if (frontier.includes(ppidOf(p))) { out.push(p); next.push(p); }
    frontier = next;
  }
  return out;
}

export function cmdline(pid) {
  try { return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0'); } catch { return []; }
}

// The node process of the host (inside bwrap when sandboxed).
export function hostNodePids(srv) {
  return descendants(srv.pid).filter((p) => cmdline(p).some((a) => a.endsWith('headless-host.js')) && /node/.test(cmdline(p)[0]));
}

export function netns(pid) { try { return readlinkSync(`/proc/${pid}/ns/net`); } catch { return null; } }

export async function run(srv, chat, code, extra = {}) {
  const r = await call(srv, 'POST', `/v1/chats/${chat.id}/runs`, { body: { code, wait_s: 240, ...extra } });
  if (r.status !== 201 && r.status !== 200) throw new Error(`run: ${r.status} ${r.buf}`);
  return r.json;
}

export async function waitRun(srv, runId, wait = 240) {
  const r = await call(srv, 'GET', `/v1/runs/${runId}?wait_s=${wait}`);
  return r.json;
}

export async function waitState(srv, runId, state, timeoutMs = 120000) {
  const t0 = Date.now();
  for (;;) {
    const r = await call(srv, 'GET', `/v1/runs/${runId}`);
    if (r.json && r.json.state === state) return r.json;
    if (Date.now() - t0 > timeoutMs) throw new Error(`run ${runId} not ${state} within ${timeoutMs} ms: ${JSON.stringify(r.json)}`);
    await sleep(50);
  }
}

// Follows a run's own event stream (GET /v1/runs/{run}/events, SSE) until `end`:
// [{type, data, at}] with `at` in ms since the stream was asked for; onEvent(ev) as each comes.
export async function runEvents(srv, runId, onEvent = () => {}) {
  const t0 = performance.now();
  const res = await fetch(`${srv.base}/v1/runs/${runId}/events`, { headers: { authorization: `Bearer ${srv.key}` } });
  if (res.status !== 200) throw new Error(`run stream: ${res.status} ${await res.text()}`);
  const out = [];
  let buf = '';
  for await (const chunk of res.body) {
    buf += Buffer.from(chunk).toString('utf8');
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, i); buf = buf.slice(i + 2);
      const type = /^event: (.*)$/m.exec(block)?.[1];
      const data = /^data: (.*)$/m.exec(block)?.[1];
      if (!type) continue;
      const ev = { type, data: data ? JSON.parse(data) : null, at: performance.now() - t0 };
      out.push(ev);
      onEvent(ev);
      if (type === 'end') return out;
    }
  }
  return out;
}
