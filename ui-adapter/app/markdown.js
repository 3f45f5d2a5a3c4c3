// markdown.js -- the assistant's answer as HTML: marked (GitHub-flavoured markdown) turns the text
// into HTML and DOMPurify sanitizes it before it reaches the page, so nothing in an answer (a
// document the model read, a prompt injection) can run script, add a form, a frame or a style, or
// make the browser fetch anything: images load only from data: URLs (a remote one is shown as its
// link, never fetched), links open in a new tab without a referrer.  Both libraries are bundled
// (npm, pinned); nothing is fetched at run time.
//
// It renders text only: code blocks stay text (the run cards under the answer show the runs).
import { Marked } from 'marked';
import DOMPurify from 'dompurify';

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

/** Markdown text → a sanitized DocumentFragment. */
export function renderMarkdown(text) {
  const html = marked.parse(text || '');
  return purify.sanitize(html, { ...CONFIG, RETURN_DOM_FRAGMENT: true });
}
