// ipython.test.mjs -- the kernel's small IPython.display (kernel/ipython.py) over a real Pyodide
// kernel: Jupyter's imports work, each class maps onto the run's MIME bundles (values and
// displays), clear_output() changes nothing and says so once, and url= is refused in words.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { newNodeKernel, run } from './helpers.mjs';
import { NOTE, noteCode } from '../../worker/notes.js';

let k;
before(async () => { k = newNodeKernel(); await k.ready; });
after(() => k?.terminate('cancelled'));

test('from IPython.display import display, HTML: the HTML goes out as a display bundle with its text/plain fallback', async () => {
  const r = await run(k, 'from IPython.display import display, HTML\ndisplay(HTML("<b>x</b>"))');
  assert.equal(r.status, 'ok', JSON.stringify(r.error));
  assert.deepEqual(r.displays, [{ 'text/plain': '<IPython.core.display.HTML object>', 'text/html': '<b>x</b>' }]);
  assert.deepEqual(r.notes, []);
});

test('import IPython; IPython.display.display(...): Markdown (its source as text/plain), SVG, JSON, in order', async () => {
  const code = 'import IPython\nd = IPython.display\nd.display(d.Markdown("# Title\\n\\n*x*"), d.SVG("<svg xmlns=\\"http://www.w3.org/2000/svg\\"/>"))\nd.display(d.JSON({"a": [1, 2]}))';
  const r = await run(k, code);
  assert.equal(r.status, 'ok', JSON.stringify(r.error));
  assert.deepEqual(r.displays, [
    { 'text/plain': '# Title\n\n*x*', 'text/markdown': '# Title\n\n*x*' },
    { 'text/plain': '<IPython.core.display.SVG object>', 'image/svg+xml': '<svg xmlns="http://www.w3.org/2000/svg"/>' },
    { 'text/plain': '{\n  "a": [\n    1,\n    2\n  ]\n}', 'application/json': { a: [1, 2] } },
  ]);
});

test('Image: PNG bytes, a JPEG file by name; a display object as the cell\'s value', async () => {
  const png = '\\x89PNG\\r\\n\\x1a\\n' + 'rest';
  const code = `from IPython.display import Image, HTML, display\nopen("/tmp/p.jpg", "wb").write(b"\\xff\\xd8\\xff\\xe0jpeg")\ndisplay(Image(b"${png}"), Image(filename="/tmp/p.jpg"), Image("/tmp/p.jpg"))\nHTML("<i>v</i>")`;
  const r = await run(k, code);
  assert.equal(r.status, 'ok', JSON.stringify(r.error));
  const b64 = (s) => Buffer.from(s, 'latin1').toString('base64');
  assert.deepEqual(r.displays, [
    { 'text/plain': '<IPython.core.display.Image object>', 'image/png': b64('\x89PNG\r\n\x1a\nrest') },
    { 'text/plain': '<IPython.core.display.Image object>', 'image/jpeg': b64('\xff\xd8\xff\xe0jpeg') },
    { 'text/plain': '<IPython.core.display.Image object>', 'image/jpeg': b64('\xff\xd8\xff\xe0jpeg') },
  ]);
  assert.deepEqual(r.value, { 'text/plain': '<IPython.core.display.HTML object>', 'text/html': '<i>v</i>' });
});

test('clear_output() changes nothing and says so once; IPython.core.display and get_ipython() as libraries look for them', async () => {
  const code = 'from IPython.display import clear_output\nfrom IPython.core.display import HTML, display\nfrom IPython import get_ipython\nprint("kept")\nclear_output()\nclear_output(wait=True)\ndisplay(HTML("<p>1</p>"), display_id=True).update(HTML("<p>2</p>"))\nprint(get_ipython())';
  const r = await run(k, code);
  assert.equal(r.status, 'ok', JSON.stringify(r.error));
  assert.equal(r.stdout, 'kept\nNone\n');
  assert.deepEqual(r.displays.map((d) => d['text/html']), ['<p>1</p>', '<p>2</p>']);
  assert.deepEqual(r.notes, [NOTE.clearOutputIgnored()]);
  assert.equal(noteCode(r.notes[0]), 'clear_output');
});

test('url= cannot be fetched here: a ValueError that says why', async () => {
  const r = await run(k, 'from IPython.display import Image\nImage(url="https://example.com/a.png")');
  assert.equal(r.status, 'error');
  assert.equal(r.error.type, 'ValueError');
  assert.match(r.error.message, /nothing can be fetched here \(the sandbox has no network\)/);
});
