#!/usr/bin/env node
// notes_header.mjs -- the C orchestrator's sentences, made from worker/notes.js at build time
// (orchestrator/CMakeLists.txt runs it), so C reads the table the JavaScript side words them in
// instead of keeping copies.  Prints a header: for each entry of SERVER (and the restart notice,
// NOTE.restarted) a printf format ORCH_NOTE_<NAME> with `%d`/`%llu`/`%s` where its arguments go,
// and its stable code ORCH_NOTE_<NAME>_CODE.
//
//   node scripts/notes_header.mjs [worker/notes.js [OUT.h]]     (no OUT: to stdout)
import { writeFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import path from 'node:path';

const here = path.dirname(new URL(import.meta.url).pathname);
const src = path.resolve(process.argv[2] || path.join(here, '../worker/notes.js'));
const { NOTE, NOTE_CODE, SERVER, SERVER_CODE, SERVER_ARGS } = await import(pathToFileURL(src).href);

const macro = (name) => `ORCH_NOTE_${name.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase()}`;
const cString = (s) => `"${s.replace(/[\\"]/g, (c) => `\\${c}`).replace(/\n/g, '\\n')}"`;
// Each argument is a marker the wording carries through unchanged; the text's own `%` are doubled.
const mark = (i) => String.fromCharCode(0xe000 + i);
function format(say, convs) {
  const text = say(...convs.map((_, i) => mark(i))).replace(/%/g, '%%');
  return convs.reduce((t, conv, i) => {
    if (!t.includes(mark(i))) throw new Error(`argument ${i} does not appear in ${JSON.stringify(t)}`);
    return t.replace(mark(i), `%${conv}`);
  }, text);
}

const rows = Object.keys(SERVER).map((name) => [name, format(SERVER[name], SERVER_ARGS[name]), SERVER_CODE[name]]);
// The restart notice without files, and with their list (one %s: the names joined by ", ").
rows.push(['restarted', NOTE.restarted([]), NOTE_CODE.restarted]);
rows.push(['restartedFiles', format((x) => NOTE.restarted([x]), ['s']), NOTE_CODE.restarted]);

const out = [
  '/* orch_notes.h -- made by scripts/notes_header.mjs from worker/notes.js: do not edit. */',
  '#ifndef ORCH_NOTES_H',
  '#define ORCH_NOTES_H',
  ...rows.flatMap(([name, fmt, code]) => [`#define ${macro(name)} ${cString(fmt)}`, `#define ${macro(name)}_CODE ${cString(code)}`]),
  '#endif',
  '',
];
if (process.argv[3]) writeFileSync(process.argv[3], out.join('\n'));
else process.stdout.write(out.join('\n'));
