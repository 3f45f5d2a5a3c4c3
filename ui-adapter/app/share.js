// share.js -- share links for the playground: /playground#lang=<language>&code=<base64url of the
// UTF-8 code>.  Both travel in the fragment, so they are never sent to the server; opening the
// link puts the code in the editor in its language, ready to run (a link without lang= is
// Python, as the first links were).  Decoding failures return null (a broken link opens an empty
// editor); an unknown language is ignored.
export function encodeShare(code) {
  const bytes = new TextEncoder().encode(code);
  let bin = '';
  for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(bin).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

export function decodeShare(s) {
  try {
    const b64 = s.replace(/-/g, '+').replace(/_/g, '/');
    const bin = atob(b64 + '='.repeat((4 - (b64.length % 4)) % 4));
    return new TextDecoder('utf-8', { fatal: true }).decode(Uint8Array.from(bin, (c) => c.charCodeAt(0)));
  } catch { return null; }
}

export function shareUrl(code, lang = 'python', origin = location.origin) {
  return `${origin}/playground#lang=${encodeURIComponent(lang)}&code=${encodeShare(code)}`;
}

export function codeFromHash(hash = location.hash) {
  const m = /^#(?:.*&)?code=([^&]*)/.exec(hash);
  return m ? decodeShare(m[1]) : null;
}

/** The language a share link names, when it is one of `known`; else null. */
export function langFromHash(known, hash = location.hash) {
  const m = /^#(?:.*&)?lang=([^&]*)/.exec(hash);
  let l = null;
  try { l = m ? decodeURIComponent(m[1]) : null; } catch { /* a broken link: no language */ }
  return l && Object.hasOwn(known, l) ? l : null;
}
