// markdown.js -- the assistant's answer as HTML: marked (GitHub-flavoured markdown) turns the text
// into HTML and DOMPurify sanitizes it before it reaches the page, so nothing in an answer (a
// document the model read, a prompt injection) can run script, add a form, a frame or a style, or
// make the browser fetch anything: images load only from data: URLs (a remote one is shown as its
// link, never fetched), links open in a new tab without a referrer.  Both libraries are bundled
// (npm, pinned); nothing is fetched at run time.
//
// Python code blocks get syntax colours after sanitizing: the block's text is parsed with the Lezer
// Python grammar the editor already bundles and rebuilt as text nodes in <span class="tok-…">
// (classHighlighter's names), so colouring adds no markup the answer itself could inject.
// Other code blocks stay plain text.
import { Marked } from 'marked';
import DOMPurify from 'dompurify';
import { parser as pythonParser } from '@lezer/python';
import { highlightCode, classHighlighter } from '@lezer/highlight';

const marked = new Marked({ gfm: true, breaks: false, async: false });

const purify = DOMPurify(window);
purify.addHook('afterSanitizeAttributes', (node) => {
  if (node.tagName === 'A' && node.hasAttribute('href')) {
    node.setAttribute('target', '_blank');
    node.setAttribute('rel', 'noopener noreferrer');
  }
});
purify.addHook('uponSanitizeElement', (node, data) => {
  if (data.tagName !== 'img') return;
  const src = node.getAttribute('src') || '';
  if (/^data:image\/(png|jpeg|gif|webp);/i.test(src)) return;
  // A remote image would be a request out of the page: show where it points instead.
  const a = node.ownerDocument.createElement('a');
  a.setAttribute('href', src);
  a.textContent = `[image not loaded: ${node.getAttribute('alt') || src}]`;
  node.replaceWith(a);
});

const CONFIG = { USE_PROFILES: { html: true }, FORBID_TAGS: ['style', 'form', 'input', 'button', 'textarea', 'select', 'iframe', 'object', 'embed'],
  FORBID_ATTR: ['style'], ALLOW_DATA_ATTR: false };

const PYTHON_BLOCK = /(^|\s)language-(python|py|python3)(\s|$)/;
const HIGHLIGHT_MAX = 100_000; // characters: a longer block stays plain (parsing it would stall the page)

/** Colours a <code> element's Python text in place, from its own text content. */
export function highlightPython(code) {
  const src = code.textContent;
  if (src.length > HIGHLIGHT_MAX) return;
  const doc = code.ownerDocument, out = doc.createDocumentFragment();
  highlightCode(src, pythonParser.parse(src), classHighlighter, (piece, classes) => {
    if (!classes) { out.append(piece); return; }
    const span = doc.createElement('span');
    span.className = classes;
    span.textContent = piece;
    out.append(span);
  }, () => out.append('\n'));
  code.replaceChildren(out);
  code.classList.add('highlighted');
}

/** Markdown text → a sanitized DocumentFragment, its Python blocks coloured. */
export function renderMarkdown(text) {
  const html = marked.parse(text || '');
  const frag = purify.sanitize(html, { ...CONFIG, RETURN_DOM_FRAGMENT: true });
  for (const code of frag.querySelectorAll('pre > code')) if (PYTHON_BLOCK.test(code.className)) highlightPython(code);
  return frag;
}
