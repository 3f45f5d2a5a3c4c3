// previews-unit.test.mjs -- the .csv/.tsv parser of the previews (ui-adapter/app/previews.js
// parseDelimited) in Node: RFC 4180 quoting, every line ending, a BOM, blank lines, and the row
// bound that keeps a preview's cost to what it shows.  (The Chromium side is previews.test.mjs.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseDelimited, previewKind } from '../../ui-adapter/app/previews.js';

test('quoted fields hold the delimiter, line breaks and doubled quotes', () => {
  const text = 'id,name,remark\r\n1,"Smith, Jo","said ""hi""\nthen left"\r\n2,plain,\r\n';
  assert.deepEqual(parseDelimited(text).rows, [
    ['id', 'name', 'remark'], ['1', 'Smith, Jo', 'said "hi"\nthen left'], ['2', 'plain', '']]);
});

test('LF, CR and CRLF end records; a BOM is dropped; blank lines are no records; no final newline', () => {
  assert.deepEqual(parseDelimited('\ufeffa,b\rc,d\n\ne,f\r\n\r\ng,h').rows, [['a', 'b'], ['c', 'd'], ['e', 'f'], ['g', 'h']]);
});

test('empty fields: between delimiters, at the end, quoted', () => {
  assert.deepEqual(parseDelimited('a,,b,\n"",x\n,\n').rows, [['a', '', 'b', ''], ['', 'x'], ['', '']]);
});

test('a quote inside an unquoted field is a character; tab-separated', () => {
  assert.deepEqual(parseDelimited('5" disk\t"a\tb"\tc\n', '\t').rows, [['5" disk', 'a\tb', 'c']]);
});

test('stops after maxRows and says more were left; exactly maxRows says none', () => {
  const text = Array.from({ length: 1000 }, (_, i) => `${i},"v\n${i}"`).join('\n');
  const r = parseDelimited(text, ',', 200);
  assert.equal(r.rows.length, 200);
  assert.equal(r.more, true);
  assert.deepEqual(r.rows[199], ['199', 'v\n199']);
  assert.deepEqual(parseDelimited('a\nb\n', ',', 2), { rows: [['a'], ['b']], more: false });
});

test('an unclosed quote keeps the rest as one field (the bytes were cut)', () => {
  assert.deepEqual(parseDelimited('a,"b\nc').rows, [['a', 'b\nc']]);
});

test('which files get which preview', () => {
  assert.deepEqual(['a.csv', 'b.TSV', 'c.xlsx', 'd.docx', 'e.html', 'f.txt', 'g.xls', 'h.bin'].map(previewKind),
    ['table', 'table', 'xlsx', 'docx', 'html', 'text', null, null]);
});
