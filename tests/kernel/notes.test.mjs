// notes.test.mjs -- worker/notes.js without Pyodide: every note's wording is recognised by its
// stable code (noteCode), and no wording is taken for another's, so apps can key on the codes
// (the run cards do: the kernel's cut note, `output_cut`, is not shown twice).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { NOTE, NOTE_CODE, noteCode, PHONE } from '../../worker/notes.js';

// Arguments that make each wording as it appears in results (its branches included).
const SAMPLES = {
  restarted: [[[]], [['a.csv', 'b.txt']]],
  evicted: [[]], detached: [[]], diedIdle: [['worker exited (1)']], restartedForStale: [[]],
  cancelKept: [[]], cancelReplaced: [[1000]], cancelNoInterrupt: [[]], cancelledBeforeStart: [[]], notRestarted: [['no spare']],
  skipped: [['slow.csv', 'deadline', 5000], ['bad.csv', 'HTTP 500', 5000]],
  notMounted: [['x.bin', 'over 20 MB']], notSaved: [['out.png', 'HTTP 500']], notReadBack: [['o.txt', 'EIO']],
  cut: [['stdout', 8000], ['stderr', 100]], outputGap: [[1], [12345]], displaysDropped: [[1, 20], [5, 20]], textOnly: [['display 2', 300, false], ['the value', 200, true]],
  clearOutputIgnored: [[]], inputUnavailable: [[]], inputTimedOut: [[300]], inputUnanswered: [[300]],
  packageFailed: [['numpy', 'no wheel'], ['x', '']], outOfMemory: [[1024, 1100], []],
};

test('every note has a code, and its every wording is recognised as that code and no other', () => {
  assert.deepEqual(Object.keys(SAMPLES).sort(), Object.keys(NOTE).sort(), 'a sample for every note');
  const codes = Object.values(NOTE_CODE);
  assert.equal(new Set(codes).size, codes.length, 'codes are distinct');
  for (const [name, calls] of Object.entries(SAMPLES)) {
    for (const args of calls) {
      const text = NOTE[name](...args);
      assert.equal(noteCode(text), NOTE_CODE[name], `${name}(${JSON.stringify(args)}) → ${JSON.stringify(text)}`);
    }
  }
});

test('text worded elsewhere (Python, the orchestrator) has no code', () => {
  for (const text of ['3 figures dropped', 'matplotlib is not available on this deployment', '', 'stdout was cut somewhere', null])
    assert.equal(noteCode(text), null, JSON.stringify(text));
});

test('a phone card says why a run started again, for each reason', () => {
  assert.match(PHONE.rerun(2, 'hidden'), /attempt 2\): this page went to the background/);
  assert.match(PHONE.rerun(3, 'silent'), /stopped answering the server/);
  assert.match(PHONE.rerun(2, 'lost'), /lost track of this page/);
  assert.match(PHONE.keepOpen(), /Keep this page open/);
});

test('the web app shell\'s sentences: one distinct code each, every wording a non-empty sentence', async () => {
  const { UI, UI_CODE } = await import('../../worker/notes.js');
  assert.deepEqual(Object.keys(UI).sort(), Object.keys(UI_CODE).sort());
  const codes = Object.values(UI_CODE);
  assert.equal(new Set(codes).size, codes.length, 'codes are distinct');
  assert.ok(!codes.some((c) => Object.values(NOTE_CODE).includes(c)), 'no code shared with the run notes');
  for (const [name, say] of Object.entries(UI)) assert.match(say('x', 'y'), /\S/, name);
  assert.equal(UI.signinThrottled(1), 'Too many attempts: try again in 1 second.');
  assert.equal(UI.signinThrottled(30), 'Too many attempts: try again in 30 seconds.');
});

// The C orchestrator reads its sentences from orch_notes.h, made from this table at build time
// (scripts/notes_header.mjs): every ORCH_NOTE_* the C code names is one the table makes, each of
// the orchestrator's codes is distinct from the notes', and no C file keeps a wording of its own.
test('every sentence C names (ORCH_NOTE_*) is made from worker/notes.js, and C keeps no copy', async () => {
  const { execFileSync } = await import('node:child_process');
  const { readFileSync, readdirSync } = await import('node:fs');
  const path = await import('node:path');
  const { SERVER, SERVER_CODE } = await import('../../worker/notes.js');
  const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
  const header = execFileSync(process.execPath, [path.join(root, 'scripts/notes_header.mjs')], { encoding: 'utf8' });
  const made = new Set([...header.matchAll(/^#define (ORCH_NOTE_\w+) /gm)].map((m) => m[1]));
  const sources = readdirSync(path.join(root, 'orchestrator'), { recursive: true })
    .filter((f) => f.endsWith('.c') || f.endsWith('.h'))
    .map((f) => [f, readFileSync(path.join(root, 'orchestrator', f), 'utf8')]);
  const named = new Set(sources.flatMap(([, text]) => [...text.matchAll(/\bORCH_NOTE_\w+/g)].map((m) => m[0])));
  assert.ok(named.size >= 8, `C names the table's sentences (${[...named].join(', ')})`);
  for (const name of named) assert.ok(made.has(name), `${name} is made from worker/notes.js`);
  const codes = [...Object.values(SERVER_CODE), ...Object.values(NOTE_CODE)];
  assert.equal(new Set(codes).size, codes.length, 'codes are distinct');
  // A wording's fixed start (up to its first argument) appears in no C file: C has no copy.
  for (const [name, say] of Object.entries(SERVER)) {
    const start = say('\u0001', '\u0001').split('\u0001')[0].slice(0, 40);
    for (const [f, text] of sources) assert.ok(!text.includes(start), `${f} keeps its own copy of ${name}: ${start}`);
  }
  const restart = NOTE.restarted([]).slice(0, 40);
  for (const [f, text] of sources) assert.ok(!text.includes(restart), `${f} keeps its own copy of the restart notice`);
});
