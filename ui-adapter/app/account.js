// account.js -- the person at this browser, as the server knows them by the session cookie
// (docs/api.md, "People and sessions"): who is signed in (GET /v1/me, asked once per page load),
// the API client that calls with the cookie, the way to the sign-in page and back, sign-out, and
// the re-check when a page comes back from the back/forward cache, so a page someone left by
// signing out never shows its private parts again.
// The cookie is HttpOnly: this script never sees it, and nothing of a session, a password or a
// key is kept in the browser's storage.  It does not render the sign-in form (signin.js).
import { Api } from '../src/api.js';
import { h } from './dom.js';
import { UI, UI_CODE } from '../../worker/notes.js';

// Api sends `credentials: 'omit'` (its bearer is the credential); these calls are the cookie's.
const withCookie = (url, init) => fetch(url, { ...init, credentials: 'same-origin' });

/** The API as the signed-in person (no bearer: the session cookie). */
export const sessionApi = new Api({ token: '', fetch: withCookie });

// A chat page opened from a page link (#token=…) works with that token alone, as an integrator
// embeds it: it does not ask who is signed in.
const fromPageLink = () => location.pathname.startsWith('/chat/') && new URLSearchParams(location.hash.slice(1)).has('token');

let meP = null;
/** GET /v1/me → {person, settings}, or null when no one is signed in (401) or the page came from a
 * page link.  Asked once per page. */
export function me() {
  if (fromPageLink()) return Promise.resolve(null);
  meP ||= sessionApi.call('GET', '/v1/me').catch((e) => { if (e.status === 401) return null; meP = null; throw e; });
  return meP;
}

/** A path on this origin to come back to after signing in ('/' for anything else). */
export function safeNext(next) {
  if (typeof next !== 'string' || !next.startsWith('/') || next.startsWith('//') || next.startsWith('/\\')) return '/';
  try { const u = new URL(next, location.origin); return u.origin === location.origin ? u.pathname + u.search : '/'; }
  catch { return '/'; }
}

/** The sign-in page, coming back to `back` (this page's path by default; never its fragment). */
export const signinPath = (back = location.pathname + location.search) => `/signin?next=${encodeURIComponent(safeNext(back))}`;

/** Goes to the sign-in page (replacing this one in the history); the promise never settles. */
export function toSignin(back) {
  location.replace(signinPath(back));
  return new Promise(() => {});
}

/** The person, or off to the sign-in page when no one is signed in (a private page's first call). */
export async function requirePerson() {
  const m = await me();
  return m || toSignin();
}

/** POST /v1/signout, then the sign-in page.  Throws ApiError when the server could not be reached.
 * The page signed out of stays in the history: going back to it shows nothing (recheckOnShow). */
export async function signOut() {
  await sessionApi.call('POST', '/v1/signout', {});
  location.assign('/signin');
}

/**
 * A page shown again from the back/forward cache asks /v1/me again: signed out (or another
 * person) since, its content goes at once and `gone` runs (a private page: the sign-in page
 * replaces it).  `person` is what me() gave when the page was rendered.
 */
export function recheckOnShow(person, gone = () => { document.body.replaceChildren(); toSignin(); }) {
  addEventListener('pageshow', async (e) => {
    if (!e.persisted) return;
    // Hidden until the server answers: the restored page must not show a signed-out person's chats.
    document.documentElement.style.visibility = 'hidden';
    meP = null;
    let now = null;
    try { now = await me(); } catch { now = person; /* the server cannot say: the page stays as it was */ }
    if (now?.person?.id === person.person.id) { document.documentElement.style.visibility = ''; return; }
    gone();
    document.documentElement.style.visibility = '';
  });
}

/** A paragraph saying a sentence of worker/notes.js's UI table, its code on it. */
export const say = (name, ...args) => h('p', { 'data-code': UI_CODE[name] }, UI[name](...args));

/** Sets an element's text to a sentence (with its code), or clears it with no name. */
export function tell(el, name, ...args) {
  if (!name) { el.textContent = ''; delete el.dataset.code; return; }
  el.textContent = UI[name](...args);
  el.dataset.code = UI_CODE[name];
}
