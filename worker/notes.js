// notes.js -- every sentence about a run that a user (or the assistant reading a result) reads,
// worded once: the result's `notes`, the errors the kernel host writes itself (time limit, crash,
// memory, a sandbox that cannot start), the restart notice a card shows, what a phone's card says,
// and the runtime's loading labels.  Browser and headless hosts, the kernel core and the web app's
// cards all take their words from here, so a message never appears twice in two wordings.
//
// Stable codes: every note has a code (NOTE_CODE below: `output_cut`, `restart_stale`, …) that
// apps key on instead of the English text.  Notes travel as plain strings (the API's `notes` is a
// list of strings), so noteCode(text) gives a note's code back: each entry's pattern sits beside
// its wording, and tests/kernel/notes.test.mjs checks that every wording is recognised.
//
// How the words divide up (so nothing is said twice): a restart is told by the result's fields
// `restarted` + `remounted`, and in words only by NOTE.restarted(remounted), which the card shows
// once; a note says why the sandbox was restarted when nothing else does (eviction, a kernel that
// stopped between runs), never that it was; the time limit and a crash are told by the error.
//
// What it is not: the words Python itself writes (kernel/: figures dropped, files unlisted) live
// with their code.  The C orchestrator's (its watchdog's errors, SERVER below) are worded here and
// reach C through a header made at build time (scripts/notes_header.mjs).

const n = (x) => Number(x).toLocaleString('en-US');
const s = (ms) => `${+(ms / 1000).toFixed(3)} s`;
const plural = (k, one, many = `${one}s`) => `${n(k)} ${k === 1 ? one : many}`;

// name → [code, wording, pattern that recognises the wording].
const NOTES = {
  // The restart notice: what was lost and what came back.  Shown once per restarted run.
  restarted: ['restarted', (remounted = []) => 'The sandbox was restarted: variables and files written outside /mnt/output are gone.' +
    (remounted.length ? ` Files back in /mnt/data: ${remounted.join(', ')}.` : ' No files to remount.'), /^The sandbox was restarted: variables/],

  // Why the sandbox was fresh for this run, when the restart did not come from this run.
  evicted: ['restart_evicted', () => "Before this run, the chat's kernel was stopped to make room for other chats.", /^Before this run, the chat's kernel was stopped to make room/],
  detached: ['restart_detached', () => "Before this run, the chat's kernel was stopped while the chat was detached from this host.", /^Before this run, the chat's kernel was stopped while the chat was detached/],
  diedIdle: ['restart_died', (why) => `Before this run, the kernel stopped by itself (${why}).`, /^Before this run, the kernel stopped by itself/],
  restartedForStale: ['restart_stale', () => 'Before this run, the sandbox was restarted to stop an earlier attempt that no longer counted.', /^Before this run, the sandbox was restarted to stop an earlier attempt/],

  // Cancel: the ladder's two outcomes, and a cancel that came before Python started.
  cancelKept: ['cancel_kept', () => 'Cancelled: Python was interrupted; variables are kept.', /^Cancelled: Python was interrupted; variables are kept\.$/],
  cancelReplaced: ['cancel_replaced', (graceMs) => `Cancelled: Python did not stop within ${s(graceMs)} of the interrupt.`, /^Cancelled: Python did not stop within /],
  cancelNoInterrupt: ['cancel_no_interrupt', () => 'Stopped by restarting the sandbox: this browser gives the page no shared memory (SharedArrayBuffer), so running Python cannot be interrupted.', /^Stopped by restarting the sandbox: this browser gives the page no shared memory/],
  cancelledBeforeStart: ['cancel_before_start', () => 'Cancelled before it started.', /^Cancelled before it started\.$/],
  notRestarted: ['restart_failed', (why) => `The sandbox could not be restarted: ${why}`, /^The sandbox could not be restarted: /],

  // Files.
  skipped: ['file_skipped', (name, why, deadlineMs) => (why === 'deadline'
    ? `${name}: download did not finish within ${s(deadlineMs)}; skipped for this run, tried again on the next.`
    : `${name}: download failed (${why}); skipped for this run, tried again on the next.`), /: download (did not finish within .*|failed \(.*\)); skipped for this run, tried again on the next\.$/],
  notMounted: ['file_not_mounted', (name, reason) => `${name} was not mounted: ${reason}`, / was not mounted: /],
  notSaved: ['file_not_saved', (name, why) => `${name} could not be saved (${why}).`, / could not be saved \(.*\)\.$/],
  notReadBack: ['file_not_read_back', (name, why) => `${name} could not be read back: ${why}`, / could not be read back: /],

  // Output, values, input and packages (the kernel core, the supervisor).
  cut: ['output_cut', (stream, chars) => `${stream} was cut to ${n(chars)} characters: its start and its end are kept, the middle left out`, /^(stdout|stderr) was cut to [\d,]+ characters: its start and its end are kept/],
  // The line a long stream keeps in place of its middle (output.js), on a line of its own.
  outputGap: ['output_gap', (k) => `\n[… ${plural(k, 'character')} left out …]\n`, /^\n\[… [\d,]+ characters? left out …\]\n$/],
  textOnly: ['bundle_text_only', (what, kib, run) => `${what}: shown as text only: its rich forms take ${n(kib)} KiB, ${run
    ? "more than the 1,024 KiB a run's values and displays may take together"
    : 'more than the 256 KiB a bundle may'}.`, /: shown as text only: its rich forms take /],
  displaysDropped: ['displays_dropped', (k, limit) => `${plural(k, 'display')} left out: at most ${n(limit)} per run.`, /^[\d,]+ displays? left out: at most [\d,]+ per run\.$/],
  clearOutputIgnored: ['clear_output', () => "clear_output() changes nothing here: a run's output and displays are kept as they came.", /^clear_output\(\) changes nothing here/],
  inputUnavailable: ['input_unavailable', () => 'input() cannot wait for an answer in this browser (it gives the page no shared memory, SharedArrayBuffer, to wait on): it raised EOFError at once.', /^input\(\) cannot wait for an answer/],
  inputTimedOut: ['input_timeout', (waitS) => `input() had no answer within ${n(waitS)} s: it raised EOFError.`, /^input\(\) had no answer within /],
  inputUnanswered: ['input_unanswered', (waitS) => `input() had no answer from the kernel host within ${n(waitS)} s: it raised EOFError.`, /^input\(\) had no answer from the kernel host/],
  packageFailed: ['package_failed', (name, why) => `package ${name} could not be loaded: ${why || 'unknown error'}`, /^package .* could not be loaded: /],
  outOfMemory: ['out_of_memory', (limitMb, heldMb) => `${ERROR_TEXT.outOfMemory(limitMb)}${heldMb ? ` (it held ${heldMb} MiB)` : ''}`, /^the sandbox ran out of memory/],
};

const ERROR_TEXT = {
  outOfMemory: (limitMb) => `the sandbox ran out of memory (${limitMb ? `limit ${limitMb} MiB` : 'its JavaScript heap'}) and was restarted`,
};

/** @type {Readonly<Record<string, (...args: any[]) => string>>} each sentence by its name */
export const NOTE = Object.freeze(Object.fromEntries(Object.entries(NOTES).map(([name, [, say]]) => [name, say])));
/** @type {Readonly<Record<string, string>>} each sentence's stable code by its name */
export const NOTE_CODE = Object.freeze(Object.fromEntries(Object.entries(NOTES).map(([name, [code]]) => [name, code])));

// The code of a note's text (as a result or run object carries it), or null for a note not worded
// here (Python's own, the orchestrator's).
export function noteCode(text) {
  if (typeof text !== 'string') return null;
  for (const [code, , like] of Object.values(NOTES)) if (like.test(text)) return code;
  return null;
}

// The errors a kernel host writes into a result itself ({type, message, traceback}).
export const ERROR = Object.freeze({
  timeout: (limitS) => ({ type: 'TimeoutError', message: `The run did not finish within its time limit of ${limitS} s.`, traceback: '' }),
  crashed: (why) => ({ type: 'KernelCrashed', message: `The sandbox stopped (${why}).`, traceback: '' }),
  loadFailed: (why) => ({ type: 'KernelCrashed', message: `The sandbox could not start: ${why}`, traceback: '' }),
  outOfMemory: (limitMb) => ({ type: 'MemoryError', message: ERROR_TEXT.outOfMemory(limitMb), traceback: '' }),
});

// Why a run's attempt > 1 came, as the page that runs it knows (worker/session.js `rerun`).
const RERUN_WHY = {
  hidden: 'this page went to the background, and code runs only while the page is open and in front.',
  silent: 'this page stopped answering the server (a phone can freeze a page in the background).',
  lost: 'the server lost track of this page (its connection dropped).',
};

// What a run's card says on a phone, and after the page came back (the run started again).
export const PHONE = Object.freeze({
  keepOpen: () => 'Keep this page open and in front: the code runs on this device, and it stops while the page is in the background or the screen is off.',
  rerun: (attempt, why) => (why === 'reloaded'
    ? `The page was reloaded while this ran: it is running again from the start — attempt ${attempt}.`
    : why === 'switched'
      ? `This page went to another chat while this ran: it is running again from the start — attempt ${attempt}.`
      : `This run started again from the beginning (attempt ${attempt}): ${RERUN_WHY[why] || RERUN_WHY.lost}`),
});

// The runtime's start as the kernel core reports it (its `runtime` progress message), so the
// progress line says which path ran: a restore from a memory snapshot (the image the server made
// at setup, or the one this browser kept) or a load of Python from scratch.
export const START = Object.freeze({
  loading: () => 'loading the Python runtime',
  restoring: (from) => (from === 'kept'
    ? 'restoring the Python runtime from the snapshot kept in this browser'
    : "restoring the Python runtime from the server's snapshot"),
  loadingInstead: () => 'loading the Python runtime (its snapshot could not be used)',
  loadingFaster: () => 'loading the Python runtime (faster than downloading its snapshot on this connection)',
});

// The runtime's loading labels, by the stage the kernel core reports.
const STAGE = { runtime: 'Loading the Python runtime…', kernel: 'Loading the kernel…', lockdown: 'Locking the sandbox down…', packages: 'Loading packages…' };
/** @param {{stage?: string, message?: string}} [p] */
export function progressLabel({ stage, message } = {}) {
  if (message) return `${message[0].toUpperCase()}${message.slice(1)}${message.endsWith('…') ? '' : '…'}`;
  return STAGE[stage] || 'Loading…';
}

// The web app's shell (ui-adapter/app/: sign-in, the chat list, people, connecting an assistant):
// each sentence once, by name → [stable code, wording].  Pages put the code on the element that
// shows the sentence (data-code), so tests and styles key on it rather than on the English.
const UI_TEXT = {
  // Sign-in and passwords (signin.js).
  signinWrong: ['signin_wrong', () => 'That name and password do not match an account here.'],
  signinThrottled: ['signin_throttled', (waitS) => `Too many attempts: try again in ${plural(waitS, 'second')}.`],
  signinInvalid: ['signin_invalid', () => 'Enter a name and a password, each at most 1,024 bytes.'],
  signinFailed: ['signin_failed', (why) => `Could not sign in: ${why}`],
  mustChange: ['password_must_change', () => 'You signed in with a password someone gave you: choose your own to go on.'],
  passwordMismatch: ['password_mismatch', () => 'The two new passwords differ.'],
  passwordWrong: ['password_wrong_current', () => 'The current password is wrong.'],
  passwordFailed: ['password_failed', (why) => `The password was not changed: ${why}`],
  passwordChanged: ['password_changed', () => 'Password changed.'],
  signinHelp: ['signin_help', () => 'No account? The administrator of this deployment makes them. The playground runs Python in your browser without one.'],
  signedInAs: ['signed_in_as', (name) => `Signed in as ${name}.`],
  signedOut: ['signed_out', () => 'You are signed out.'],
  signoutFailed: ['signout_failed', (why) => `Could not sign out: ${why}`],
  // The chat list (sidebar.js) and a chat page's link (main-chat.js).
  chatsSignIn: ['chats_sign_in', () => 'Sign in to keep your chats. The playground works without an account and keeps nothing on the server.'],
  chatsEmpty: ['chats_empty', () => 'No chats yet: New chat starts one.'],
  chatsNotLoaded: ['chats_not_loaded', (why) => `The chat list did not load: ${why}`],
  chatNotCreated: ['chat_not_created', (why) => `Could not create a chat: ${why}`],
  chatNameEmpty: ['chat_name_empty', () => 'A chat name cannot be empty.'],
  chatNotRenamed: ['chat_not_renamed', (why) => `Could not rename the chat: ${why}`],
  chatDeleteAsk: ['chat_delete_ask', (title) => `Delete “${title}”? Its messages, runs and files are removed for good.`],
  chatNotDeleted: ['chat_not_deleted', (why) => `Could not delete the chat: ${why}`],
  linkNoToken: ['link_no_token', () => 'This link has no page token: the part after #token= is missing.'],
  linkRefused: ['link_token_refused', () => 'The page token in this link is wrong or incomplete: the server did not accept it.'],
  linkOtherChat: ['link_other_chat', () => 'The page token in this link belongs to another chat.'],
  linkNoChat: ['link_no_chat', () => 'There is no such chat on this server, or it is not yours.'],
  linkOther: ['link_refused', (why) => `The server refused this link (${why}).`],
  linkHelp: ['link_help', () => 'A chat opens from your chat list once you sign in, or from the link the app that created it gave you (it ends in #token=…).'],
  // Settings (settings.js).
  settingNotSaved: ['setting_not_saved', (why) => `The setting was not saved: ${why}`],
  // People (main-admin.js).
  adminOnly: ['admin_only', (name) => `${name} is signed in; this page is for administrators.`],
  personCreated: ['person_created', (name) => `${name} can sign in with this password once, then chooses their own. It is shown only now: pass it on.`],
  personReset: ['person_reset', (name) => `${name}'s new one-time password, shown only now: pass it on. Their open sessions have ended.`],
  personTaken: ['person_taken', (name) => `There is already someone called ${name}.`],
  personNotSaved: ['person_not_saved', (why) => `Not saved: ${why}`],
  personDisabled: ['person_disabled', (name) => `${name} is disabled: they cannot sign in, and their sessions have ended.`],
  personEnabled: ['person_enabled', (name) => `${name} can sign in again.`],
  // Connecting an assistant to a chat (connect.js).
  connectIntro: ['connect_intro', () => 'An assistant that speaks MCP (Open WebUI, LibreChat, a desktop app) can run Python in this chat with this key. The key reaches this chat only. Keep this page open while the assistant runs code: the code runs here.'],
  connectFailed: ['connect_failed', (why) => `No key was made: ${why}`],
  connectOpenWebui: ['connect_open_webui', (url) => `Open WebUI (0.6.31 or later): Admin Settings → External Tools → + → type MCP (Streamable HTTP), URL ${url}, authentication Bearer with the chat key.`],
  connectLibrechat: ['connect_librechat', () => 'LibreChat: add this to librechat.yaml; each person then enters the chat key in LibreChat as "Cerea chat key".'],
  // The snippet itself (docs/mcp.md, "LibreChat"), with this server's URL.
  librechatYaml: ['librechat_yaml', (url) => `mcpServers:
  cerea:
    type: streamable-http
    url: ${url}
    requiresOAuth: false            # a static bearer key: no OAuth detection
    headers:
      Authorization: "Bearer {{CEREA_CHAT_KEY}}"
    customUserVars:
      CEREA_CHAT_KEY:
        title: "Cerea chat key"
        description: "From your chat's page: Connect an assistant"
    timeout: 300000                 # ms; LibreChat's default 30 s is shorter than a run may take
    serverInstructions: true
`],
  copied: ['copied', () => 'Copied.'],
  copyFailed: ['copy_failed', () => 'This browser did not allow copying: select the text and copy it.'],
};

/** @type {Readonly<Record<string, (...args: any[]) => string>>} the app shell's sentences by name */
export const UI = Object.freeze(Object.fromEntries(Object.entries(UI_TEXT).map(([name, [, say]]) => [name, say])));
/** @type {Readonly<Record<string, string>>} their stable codes by name */
export const UI_CODE = Object.freeze(Object.fromEntries(Object.entries(UI_TEXT).map(([name, [code]]) => [name, code])));

// The C orchestrator's own sentences (its watchdog's and scheduler's errors, the command line's),
// worded here like the rest: orchestrator/ reads them from a header made from this table at build
// time (scripts/notes_header.mjs), so they are not kept twice.  name → [stable code, wording, the
// C conversion of each argument ('d', 'llu', 's')]; a wording is plain text around its arguments
// (no number formatting: C prints them).  The restart notice above (NOTE.restarted) goes to C too.
const SERVER_TEXT = {
  attemptsLost: ['attempts_lost', (lost, max) => `The run was not sent again: ${lost} of its attempts were lost with their page or kernel host while the code ran (it crashed, was killed or was closed mid-run; CODE_MAX_ATTEMPTS=${max}). The code may take the sandbox down, for instance by using too much memory; change it before running it again.`, ['d', 'd']],
  abandonedPaused: ['abandoned_paused', (waitS) => `The run did not finish: its page went to the background or stopped answering, and no page of this chat was open and in the foreground for ${waitS} s (CODE_PAUSED_WAIT_MS). Ask the user to keep the chat open, then run it again.`, ['llu']],
  abandonedNeverRan: ['abandoned_never_ran', (waitS) => `The code did not run: no page of this chat was open and in the foreground for ${waitS} s (CODE_PAUSED_WAIT_MS). Ask the user to keep the chat open, then run it again.`, ['llu']],
  watchdogTimeout: ['watchdog_timeout', (limitS) => `The run did not finish within its time limit of ${limitS} s; the sandbox was restarted.`, ['d']],
  watchdogUnreported: ['watchdog_unreported', (limitS) => `The page never reported this run (within ${limitS} s plus a grace); the sandbox was restarted.`, ['d']],
  cancelRestarted: ['cancel_restarted', () => 'The run was cancelled; the sandbox was restarted.', []],
  cancelPaused: ['cancel_paused', () => 'The run was cancelled while it waited for its page to come back.', []],
  cancelQueued: ['cancel_queued', () => 'The run was cancelled before it started.', []],
  cliRerun: ['cli_rerun', (attempt) => `the run started again as attempt ${attempt} (its page went away or stopped answering); its output follows from the start`, ['d']],
};

/** @type {Readonly<Record<string, (...args: any[]) => string>>} the orchestrator's sentences by name */
export const SERVER = Object.freeze(Object.fromEntries(Object.entries(SERVER_TEXT).map(([name, [, say]]) => [name, say])));
/** @type {Readonly<Record<string, string>>} their stable codes by name */
export const SERVER_CODE = Object.freeze(Object.fromEntries(Object.entries(SERVER_TEXT).map(([name, [code]]) => [name, code])));
/** @type {Readonly<Record<string, readonly string[]>>} the C conversion of each one's arguments */
export const SERVER_ARGS = Object.freeze(Object.fromEntries(Object.entries(SERVER_TEXT).map(([name, [, , args]]) => [name, Object.freeze(args)])));
