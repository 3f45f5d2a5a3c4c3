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
// What it is not: the words Python itself writes (kernel/: figures dropped, files unlisted) and
// those of the C orchestrator (its watchdog's errors) live with their code.

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
