// notes.js -- every sentence about a run that a user (or the assistant reading a result) reads,
// worded once: the result's `notes`, the errors the kernel host writes itself (time limit, crash,
// a sandbox that cannot start), the restart notice a card shows, and the runtime's loading labels.
// Browser and headless hosts, the kernel core and the web app's cards all take their words from
// here, so a message never appears twice in two wordings.
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

export const NOTE = Object.freeze({
  // The restart notice: what was lost and what came back.  Shown once per restarted run.
  restarted: (remounted = []) => 'The sandbox was restarted: variables and files written outside /mnt/output are gone.' +
    (remounted.length ? ` Files back in /mnt/data: ${remounted.join(', ')}.` : ' No files to remount.'),

  // Why the sandbox was fresh for this run, when the restart did not come from this run.
  evicted: () => "Before this run, the chat's kernel was stopped to make room for other chats.",
  detached: () => "Before this run, the chat's kernel was stopped while the chat was detached from this host.",
  diedIdle: (why) => `Before this run, the kernel stopped by itself (${why}).`,
  restartedForStale: () => 'Before this run, the sandbox was restarted to stop an earlier attempt that no longer counted.',

  // Cancel: the ladder's two outcomes, and a cancel that came before Python started.
  cancelKept: () => 'Cancelled: Python was interrupted; variables are kept.',
  cancelReplaced: (graceMs) => `Cancelled: Python did not stop within ${s(graceMs)} of the interrupt.`,
  cancelledBeforeStart: () => 'Cancelled before it started.',
  notRestarted: (why) => `The sandbox could not be restarted: ${why}`,

  // Files.
  skipped: (name, why, deadlineMs) => (why === 'deadline'
    ? `${name}: download did not finish within ${s(deadlineMs)}; skipped for this run, tried again on the next.`
    : `${name}: download failed (${why}); skipped for this run, tried again on the next.`),
  notMounted: (name, reason) => `${name} was not mounted: ${reason}`,
  notSaved: (name, why) => `${name} could not be saved (${why}).`,
  notReadBack: (name, why) => `${name} could not be read back: ${why}`,

  // Output and packages (the kernel core).
  cut: (stream, chars) => `${stream} was cut at ${n(chars)} characters`,
  packageFailed: (name, why) => `package ${name} could not be loaded: ${why || 'unknown error'}`,
});

// The errors a kernel host writes into a result itself ({type, message, traceback}).
export const ERROR = Object.freeze({
  timeout: (limitS) => ({ type: 'TimeoutError', message: `The run did not finish within its time limit of ${limitS} s.`, traceback: '' }),
  crashed: (why) => ({ type: 'KernelCrashed', message: `The sandbox stopped (${why}).`, traceback: '' }),
  loadFailed: (why) => ({ type: 'KernelCrashed', message: `The sandbox could not start: ${why}`, traceback: '' }),
});

// The runtime's loading labels, by the stage the kernel core reports.
const STAGE = { runtime: 'Loading the Python runtime…', kernel: 'Loading the kernel…', lockdown: 'Locking the sandbox down…', packages: 'Loading packages…' };
export function progressLabel({ stage, message } = {}) {
  if (message) return `${message[0].toUpperCase()}${message.slice(1)}${message.endsWith('…') ? '' : '…'}`;
  return STAGE[stage] || 'Loading…';
}
