// share.js -- share links for the playground: /playground#code=<base64url of the UTF-8 code>.  The
// code travels in the fragment, so it is never sent to the server; opening the link puts the code in
// the editor, ready to run.  Decoding failures return null (a broken link opens an empty editor).
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

export function shareUrl(code, origin = location.origin) { return `${origin}/playground#code=${encodeShare(code)}`; }

export function codeFromHash(hash = location.hash) {
  const m = /^#(?:.*&)?code=([^&]*)/.exec(hash);
  return m ? decodeShare(m[1]) : null;
}
