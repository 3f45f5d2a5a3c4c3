// crowd.test.mjs -- server mode under a crowd (issue 21 item 8), small enough for CI: one host with
// two kernel slots, 20 new chats posting 3 runs each at once.  Hosts take chats only within their
// slots (orchestrator/hosts/hosts.c); the rest wait in the orchestrator's queue, paused and held there
// (CODE_PAUSED_WAIT_MS is cut to 4 s so that a run waiting for a slot longer than that would be
// abandoned if it were not held), so the host never starts more than its kernels + 1 Pyodide loads
// and no run is left to the watchdog.  Every run must end ok.  The full-size figures (200 chats x
// 5 runs on 2 hosts) are bench/crowd/run.mjs's, recorded in docs/benchmarks.md.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { startStack, hostReady, newChat, call } from './lib.mjs';

const CHATS = 20, RUNS = 3;
let srv;
after(async () => { if (srv) { await srv.stop(); const { rmSync } = await import('node:fs'); rmSync(srv.dataDir, { recursive: true, force: true }); } });

test(`${CHATS} new chats x ${RUNS} runs on one host of 2 kernels: every run ends ok, none waits past the pause limit, no kernel beyond the bound`, { timeout: 600000 }, async (t) => {
  srv = await startStack({ env: { CEREA_HOSTS: '1', CEREA_HOST_KERNELS: '2', CODE_PAUSED_WAIT_MS: '4000', CODE_TIME_LIMIT_S: '10' } });
  await hostReady(srv);
  const t0 = Date.now();
  const chats = await Promise.all(Array.from({ length: CHATS }, () => newChat(srv)));
  const ids = [];
  await Promise.all(chats.map(async (c, i) => {
    for (let j = 0; j < RUNS; j++) {
      const r = await call(srv, 'POST', `/v1/chats/${c.id}/runs`, { body: { code: `x = ${i * 10 + j}\nprint(x)` } });
      assert.equal(r.status, 201, r.buf);
      ids.push([r.json.run_id, `${i * 10 + j}`]);
    }
  }));
  const results = await Promise.all(ids.map(async ([id, want]) => {
    for (;;) {
      const r = await call(srv, 'GET', `/v1/runs/${id}?wait_s=120`);
      if (r.json && r.json.state === 'done') return [r.json, want];
    }
  }));
  const took = Date.now() - t0;
  const bad = results.filter(([r, want]) => r.status !== 'ok' || r.stdout.trim() !== want);
  t.diagnostic(`${results.length} runs in ${(took / 1000).toFixed(1)} s; not ok: ${bad.length}`);
  assert.deepEqual(bad.map(([r]) => `${r.status}: ${r.error && r.error.message}`), []);
  assert.doesNotMatch(srv.log, /beyond the bound/, 'the host never had to exceed its kernel bound');
  assert.doesNotMatch(srv.log, /spare kernel failed to load/);
});
