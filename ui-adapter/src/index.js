// index.js -- the library's entry point (the package's "." export, docs/ui-adapter.md): what a chat
// page needs to be the kernel host of a chat.  Each name is documented where it is defined.
export { KernelSupervisor, initUrls, NOTE, PHONE, noteCode } from './kernel.js';
export { ChatSession, newPageId } from './session.js';
export { Api, ApiError, pageClient } from './api.js';
export { MessageList, ENDED, segments } from './messages.js';
export { Presence } from './presence.js';
export { WakeLock } from './wakelock.js';
export { startEarlyWorker } from './early-worker.js';
