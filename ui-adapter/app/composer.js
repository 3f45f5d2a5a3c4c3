// composer.js -- the chat page's message box: Enter sends (Shift+Enter is a new line; Enter while an
// input method composes is the method's).  While a turn is open (one turn at a time per chat: this
// tab's or another's; from the send until its answer shows) the box stays editable, so the next
// message can be drafted, and Send waits: it is disabled, and Enter says why, until the answer is
// done.  Stop ends the open turn (POST /v1/turns/{turn}/cancel), and a refused message stays in
// the box with the reason in plain words.
// It does not draw the conversation (conversation.js) and decides nothing about the turn: the
// orchestrator does.
import { codePoints } from '../../worker/output.js';

export const MAX_TEXT = 32_000;   // characters a message may have (POST /v1/chats/{chat}/messages)

const REFUSED = {
  turn_open: 'An answer is still being written in this chat (perhaps in another tab): wait for it, or stop it.',
  drafting: 'The answer is still being written: your message stays here, and Send works again once it is done (or Stop it).',
  no_model: 'No model is configured on this deployment, so there is no assistant to ask.',
};

/**
 * @param {{form: HTMLFormElement, text: HTMLTextAreaElement, send: HTMLButtonElement, stop: HTMLButtonElement,
 *   status: HTMLElement, session: import('../src/session.js').ChatSession}} o
 */
export function wireComposer({ form, text, send, stop, status, session }) {
  let sending = false;
  // The turn just opened, until its answer shows (its events may come after the POST's answer);
  // at most AWAIT_MS, so a stream that is down does not keep the box disabled.
  let awaiting = null;
  const AWAIT_MS = 10_000;
  const say = (msg, refused = false) => { status.textContent = msg; if (refused) status.dataset.state = 'refused'; else delete status.dataset.state; };
  const sync = () => {
    const open = session.messages.open();
    if (awaiting && session.messages.list().some((m) => m.turn_id === awaiting.turn && m.role === 'assistant')) { clearTimeout(awaiting.timer); awaiting = null; }
    const busy = sending || !!open || !!awaiting;
    text.readOnly = sending; // only while the POST is out: its success empties the box
    send.disabled = busy;
    send.title = busy && !sending ? 'Waits for the answer being written (or Stop it)' : '';
    if (!busy && status.dataset.state === 'waiting') say('');
    stop.hidden = !open;
    form.dataset.state = open ? 'open' : sending ? 'sending' : 'idle';
    if (document.activeElement === document.body) text.focus();
  };
  session.on('message', sync);
  session.on('switched', sync);

  async function submit() {
    const q = text.value.trim();
    if (!q || sending) return;
    if (session.messages.open() || awaiting) { say(REFUSED.drafting); status.dataset.state = 'waiting'; return; }
    const n = codePoints(q);
    if (n > MAX_TEXT) { say(`This message has ${n.toLocaleString('en')} characters; at most ${MAX_TEXT.toLocaleString('en')} can be sent.`, true); return; }
    sending = true; sync(); say('');
    try {
      const r = await session.sendMessage(q);
      text.value = '';
      if (r?.turn_id) awaiting = { turn: r.turn_id, timer: setTimeout(() => { awaiting = null; sync(); }, AWAIT_MS) };
    } catch (e) {
      say(`Not sent: ${REFUSED[e.code] || (e.status ? e.message.replace(/^\d+ \w+: /, '') : e.message)}`, true);
    } finally { sending = false; sync(); }
  }

  form.addEventListener('submit', (e) => { e.preventDefault(); submit(); });
  text.addEventListener('keydown', (e) => {
    if (e.key !== 'Enter' || e.shiftKey || e.isComposing || e.keyCode === 229) return;
    e.preventDefault();
    submit();
  });
  stop.addEventListener('click', async () => {
    const open = session.messages.open();
    if (!open) return;
    stop.disabled = true;
    try { await session.stopTurn(open.turn_id); say(''); }
    catch (e) { if (e.status !== 409) say(`Could not stop: ${e.message}`, true); }
    finally { stop.disabled = false; }
  });
  sync();
  return { sync, submit };
}
