// signin.js -- the sign-in page at /signin?next=<path>: name and password (POST /v1/signin, which
// sets the HttpOnly session cookie), the reasons a sign-in fails said plainly (a wrong name or
// password, one answer for both as the server gives it; too many attempts, with the wait the
// server's Retry-After names, counted down; a name or password the server refuses), then the
// step a first sign-in with a given password needs (POST /v1/me/password), then back to `next`
// (a path on this origin only).  Someone already signed in sees who, with Continue and Sign out.
// The password stays in this page's memory for the one step that needs it again, nowhere else.
import { sessionApi, me, safeNext, signOut, tell } from './account.js';

const $ = (id) => document.getElementById(id);
const next = safeNext(new URLSearchParams(location.search).get('next') || '/');
let typed = ''; // the password just signed in with: the change step's "current"
let countdown = null;

function show(which) {
  for (const id of ['signin', 'change', 'already']) $(id).hidden = id !== which;
  const first = { signin: 'name', change: typed ? 'new1' : 'current', already: 'continue' }[which];
  $(first)?.focus();
}

function go() { location.replace(next); }

function waitOut(seconds) {
  clearInterval(countdown);
  let left = Math.max(1, Math.ceil(seconds));
  $('signin-go').disabled = true;
  tell($('signin-error'), 'signinThrottled', left);
  countdown = setInterval(() => {
    left -= 1;
    if (left > 0) { tell($('signin-error'), 'signinThrottled', left); return; }
    clearInterval(countdown);
    $('signin-go').disabled = false;
    tell($('signin-error'));
  }, 1000);
}

async function signIn(e) {
  e.preventDefault();
  const name = $('name').value.trim(), password = $('password').value;
  if (!name || !password) { tell($('signin-error'), 'signinInvalid'); return; }
  $('signin-go').disabled = true;
  tell($('signin-error'));
  let res, body = null;
  try {
    res = await sessionApi.raw('/v1/signin', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ name, password }) });
    body = await res.json().catch(() => null);
  } catch (err) {
    tell($('signin-error'), 'signinFailed', err.message);
    $('signin-go').disabled = false;
    return;
  }
  if (res.status === 429) { waitOut(Number(res.headers.get('Retry-After')) || 1); return; }
  $('signin-go').disabled = false;
  if (res.status === 401) { tell($('signin-error'), 'signinWrong'); $('password').select(); return; }
  if (res.status === 400) { tell($('signin-error'), 'signinInvalid'); return; }
  if (!res.ok || !body?.person) { tell($('signin-error'), 'signinFailed', body?.error?.message || `HTTP ${res.status}`); return; }
  $('password').value = '';
  if (body.person.must_change_password) { typed = password; askNewPassword(); return; }
  go();
}

function askNewPassword() {
  tell($('change-why'), 'mustChange');
  $('current-row').hidden = !!typed;
  show('change');
}

async function changePassword(e) {
  e.preventDefault();
  const current = typed || $('current').value, n1 = $('new1').value, n2 = $('new2').value;
  if (!n1 || !current) { tell($('change-error'), 'signinInvalid'); return; }
  if (n1 !== n2) { tell($('change-error'), 'passwordMismatch'); return; }
  $('change-go').disabled = true;
  tell($('change-error'));
  try {
    await sessionApi.call('POST', '/v1/me/password', { current, new: n1 });
    typed = '';
    go();
  } catch (err) {
    $('change-go').disabled = false;
    if (err.status === 401) { typed = ''; $('current-row').hidden = false; tell($('change-error'), 'passwordWrong'); return; }
    tell($('change-error'), 'passwordFailed', err.message);
  }
}

$('signin').addEventListener('submit', signIn);
$('change').addEventListener('submit', changePassword);
$('signout').addEventListener('click', async () => {
  try { await signOut(); } catch (err) { tell($('already-error'), 'signoutFailed', err.message); }
});
$('continue').href = next;
tell($('signin-help'), 'signinHelp');

me().then((m) => {
  if (!m) { show('signin'); return; }
  if (m.person.must_change_password) { askNewPassword(); return; }
  tell($('already-who'), 'signedInAs', m.person.name);
  show('already');
}).catch(() => show('signin'));
