// helpers.mjs -- shared plumbing of the kernel tests (tests/kernel/*.test.mjs): one real Pyodide
// kernel per test file in a worker_threads Worker (a load costs ~3 s of CPU: files reuse their
// kernel where the behaviour allows), or one supervisor over its own pool (a kernel and a spare),
// and small helpers to read results.  Not a test itself.
import { newNodeKernel, newNodeSupervisor, PYODIDE_DIR, RESTORE_SNAPSHOT } from '../../worker/node-kernel.js';
import fs from 'node:fs';
import path from 'node:path';

export { newNodeKernel, newNodeSupervisor, PYODIDE_DIR, RESTORE_SNAPSHOT };

// How a kernel of these tests started: 'served' (restored from the served memory snapshot, the
// default) or 'none' (loaded; CEREA_KERNEL_SNAPSHOT=0).  Tests assert it, so each run of the
// suite proves which path it held to its checks.
export const EXPECTED_START = RESTORE_SNAPSHOT ? 'served' : 'none';

export function deployment() {
  try { return JSON.parse(fs.readFileSync(path.join(PYODIDE_DIR, 'deployment.json'), 'utf8')); } catch { return { has: [], lacks: [] }; }
}
export function hasPackage(name) { return deployment().has.some((p) => p.name === name); }

let seq = 0;
export async function run(k, code, extra = {}) {
  return k.run({ run_id: `t${++seq}`, code, ...extra });
}
export const text = (s) => new TextEncoder().encode(s);
export const names = (r) => r.files.map((f) => f.name);
