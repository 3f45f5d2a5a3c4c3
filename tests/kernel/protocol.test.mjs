// protocol.test.mjs -- worker/protocol.js's RunResult without Pyodide: the one constructor
// (runResult) every layer builds a result with, and the result message the page posts
// (resultMessage): the fields docs/api.md's POST /v1/runs/{run}/result takes, no more.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { runResult, resultMessage } from '../../worker/protocol.js';

const FIELDS = ['status', 'stdout', 'stderr', 'stdout_truncated', 'stderr_truncated', 'error', 'files',
  'files_unlisted', 'figures_dropped', 'notes', 'restarted', 'remounted', 'value', 'displays'];

test('runResult: every field, as for a run that showed nothing; the given ones over them, the status last', () => {
  const r = runResult('cancelled');
  assert.deepEqual(Object.keys(r).sort(), [...FIELDS].sort());
  assert.deepEqual(r, { status: 'cancelled', stdout: '', stderr: '', stdout_truncated: false, stderr_truncated: false,
    error: null, files: [], files_unlisted: 0, figures_dropped: 0, notes: [], restarted: false, remounted: [],
    value: null, displays: [] });
  const g = runResult('error', { stdout: 'x', status: 'ok', exit: 'killed' });
  assert.equal(g.status, 'error');
  assert.equal(g.stdout, 'x');
  assert.equal(g.exit, 'killed');
  runResult('ok').notes.push('n');
  assert.deepEqual(runResult('ok').notes, [], 'each result has lists of its own');
});

test('resultMessage: the attempt and the result fields, the listed files and notes; no timing, no bytes', () => {
  const r = runResult('ok', { stdout: 'hi', timing: { exec_ms: 3 }, exit: 'x', restart_ms: 9, restarted: true,
    remounted: ['a.csv'], files: [{ name: 'o.png', data: new Uint8Array(3) }] });
  const m = resultMessage(2, r, [{ name: 'o.png', size: 3 }], ['a note']);
  assert.deepEqual(Object.keys(m).sort(), ['attempt', ...FIELDS].sort());
  assert.equal(m.attempt, 2);
  assert.equal(m.stdout, 'hi');
  assert.deepEqual(m.files, [{ name: 'o.png', size: 3 }]);
  assert.deepEqual(m.notes, ['a note']);
  assert.equal(m.restarted, true);
  assert.deepEqual(m.remounted, ['a.csv']);
  const bare = resultMessage(1, { status: 'crashed' }, [], []);
  assert.deepEqual(bare, { attempt: 1, ...runResult('crashed') });
});

test('no other worker file spells a result out: they call runResult', () => {
  const dir = new URL('../../worker/', import.meta.url);
  const spelled = readdirSync(dir).filter((f) => f.endsWith('.js') && f !== 'protocol.js')
    .filter((f) => /stdout_truncated: false, stderr_truncated: false/.test(readFileSync(new URL(f, dir), 'utf8')));
  assert.deepEqual(spelled, []);
});
