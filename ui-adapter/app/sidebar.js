// sidebar.js -- the chat list beside the playground and every chat page: the signed-in person's
// chats newest first (the one on screen marked), "New chat" that creates one and opens it at
// once, rename in place (Enter saves, Escape gives up), delete after a confirm, who is signed in
// and Sign out.  On a phone the list is a drawer the header's "Chats" button opens (Escape, the
// backdrop or choosing a chat closes it).  Someone not signed in sees why there is no list and the
// way to sign in.  The list is read again when the page comes back to the front, and when a tab of
// this browser renamed, made or deleted a chat (a BroadcastChannel message naming the chat, no
// storage).  The chat calls are chats.js's; the words are worker/notes.js's.
import { h } from './dom.js';
import { listChats, createChat, renameChat, deleteChat, chatPath } from './chats.js';
import { signinPath, signOut, tell, say, toSignin } from './account.js';

const $ = (id) => document.getElementById(id);
const channel = typeof BroadcastChannel === 'function' ? new BroadcastChannel('cerea-chats') : null;
const label = (c) => c.title || `Chat ${c.chat_id.slice(0, 8)}…`;

/**
 * Fills the page's aside#chats.  `person` is me() (null: no one signed in), `current` the chat on
 * screen (or null).  Returns {refresh()}.
 */
export function mountSidebar({ person, current = null }) {
  const side = $('chats');
  const note = $('chats-note');
  const list = $('chat-list');
  let chats = [];
  let editing = null; // chat_id being renamed: a refresh leaves that row alone

  wireDrawer(side);
  if (!person) {
    $('new-chat').hidden = true;
    list.replaceChildren();
    tell(note, 'chatsSignIn');
    $('who').replaceChildren(h('a', { class: 'btn btn-primary', href: signinPath(), 'data-testid': 'sign-in' }, 'Sign in'));
    return { refresh: async () => {} };
  }

  // A call refused for want of a session (signed out elsewhere, expired): the sign-in page, then back.
  const err = (name, ...args) => {
    if (args[0]?.status === 401) { toSignin(); return; }
    tell(note, name, ...(args[0] instanceof Error ? [args[0].message] : args)); note.classList.add('note');
  };
  const clearErr = () => { if (note.classList.contains('note')) { tell(note); note.classList.remove('note'); } };

  function row(c) {
    const here = c.chat_id === current;
    const link = h('a', { href: chatPath(c.chat_id), title: label(c), 'aria-current': here ? 'page' : null }, label(c));
    return h('li', { 'data-chat-id': c.chat_id, class: here ? 'current' : null }, link,
      h('button', { type: 'button', class: 'btn btn-small btn-ghost', 'data-action': 'rename', 'aria-label': `Rename ${label(c)}`, onclick: () => startRename(c) }, 'Rename'),
      h('button', { type: 'button', class: 'btn btn-small btn-ghost', 'data-action': 'delete', 'aria-label': `Delete ${label(c)}`, onclick: () => askDelete(c) }, 'Delete'));
  }
  function render() {
    if (!chats.length && !note.classList.contains('note')) tell(note, 'chatsEmpty');
    else if (chats.length && note.dataset.code === 'chats_empty') tell(note);
    list.replaceChildren(...chats.map((c) => (c.chat_id === editing ? list.querySelector(`li[data-chat-id="${CSS.escape(c.chat_id)}"]`) || row(c) : row(c))));
  }
  async function refresh() {
    try { chats = await listChats(); if (note.dataset.code === 'chats_not_loaded') clearErr(); }
    catch (e) { err('chatsNotLoaded', e); }
    render();
  }

  function startRename(c) {
    const li = list.querySelector(`li[data-chat-id="${CSS.escape(c.chat_id)}"]`);
    if (!li) return;
    editing = c.chat_id;
    const input = h('input', { type: 'text', class: 'rename', value: label(c), 'aria-label': `New name for ${label(c)}` });
    let done = false;
    const finish = async (save) => {
      if (done) return;
      done = true;
      const title = input.value.trim();
      if (save && !title) { err('chatNameEmpty'); }
      else if (save && title !== c.title) {
        try { const r = await renameChat(c.chat_id, title); c.title = r?.title ?? title; clearErr(); channel?.postMessage({ changed: c.chat_id }); }
        catch (e) { err('chatNotRenamed', e); }
      }
      editing = null;
      render();
      list.querySelector(`li[data-chat-id="${CSS.escape(c.chat_id)}"] a`)?.focus();
    };
    input.addEventListener('keydown', (e) => {
      if (e.key === 'Enter') { e.preventDefault(); finish(true); }
      if (e.key === 'Escape') { e.preventDefault(); e.stopPropagation(); finish(false); }
    });
    input.addEventListener('blur', () => finish(true));
    li.replaceChildren(input);
    input.focus();
    input.select();
  }

  const confirmDlg = h('dialog', { id: 'confirm-delete', 'aria-labelledby': 'confirm-delete-text' },
    h('form', { method: 'dialog', class: 'settings' }, h('p', { id: 'confirm-delete-text' }),
      h('div', { class: 'row' }, h('button', { class: 'btn', value: 'cancel' }, 'Cancel'),
        h('button', { class: 'btn btn-danger', value: 'delete', 'data-testid': 'confirm-delete' }, 'Delete'))));
  document.body.append(confirmDlg);
  function askDelete(c) {
    tell(confirmDlg.querySelector('p'), 'chatDeleteAsk', label(c));
    confirmDlg.returnValue = '';
    confirmDlg.onclose = async () => {
      if (confirmDlg.returnValue !== 'delete') return;
      try { await deleteChat(c.chat_id); clearErr(); channel?.postMessage({ changed: c.chat_id }); }
      catch (e) { err('chatNotDeleted', e); return; }
      if (c.chat_id === current) { location.replace('/'); return; }
      chats = chats.filter((x) => x.chat_id !== c.chat_id);
      render();
    };
    confirmDlg.showModal();
  }

  $('new-chat').hidden = false;
  $('new-chat').addEventListener('click', async () => {
    $('new-chat').disabled = true;
    try {
      const c = await createChat(`Chat ${new Date().toLocaleString()}`);
      channel?.postMessage({ changed: c.chat_id });
      location.assign(chatPath(c.chat_id));
    } catch (e) { err('chatNotCreated', e); $('new-chat').disabled = false; }
  });

  const out = h('button', { type: 'button', class: 'btn btn-small', id: 'sign-out' }, 'Sign out');
  out.addEventListener('click', async () => {
    try { await signOut(); } catch (e) { err('signoutFailed', e); }
  });
  $('who').replaceChildren(say('signedInAs', person.person.name), out);

  document.addEventListener('visibilitychange', () => { if (document.visibilityState === 'visible' && !editing) refresh(); });
  onChatChanged(() => { if (!editing) refresh(); });
  refresh();
  return { refresh };
}

/** Calls fn(chat_id) when a page of this browser renamed, made or deleted that chat (this page too). */
export function onChatChanged(fn) {
  if (typeof BroadcastChannel !== 'function') return;
  new BroadcastChannel('cerea-chats').addEventListener('message', (e) => { if (typeof e.data?.changed === 'string') fn(e.data.changed); });
}

/** The phone's drawer: the header's #open-chats toggles aside.open; a backdrop closes it. */
function wireDrawer(side) {
  const btn = $('open-chats');
  if (!btn || btn.dataset.wired) return;
  btn.dataset.wired = '1';
  const backdrop = h('div', { class: 'drawer-backdrop', hidden: true });
  document.body.append(backdrop);
  const set = (open) => {
    side.classList.toggle('open', open);
    backdrop.hidden = !open;
    btn.setAttribute('aria-expanded', String(open));
    if (open) side.querySelector('#new-chat:not([hidden]), a, button')?.focus();
  };
  btn.addEventListener('click', () => set(!side.classList.contains('open')));
  backdrop.addEventListener('click', () => set(false));
  side.addEventListener('keydown', (e) => { if (e.key === 'Escape' && side.classList.contains('open')) { set(false); btn.focus(); } });
  side.addEventListener('click', (e) => { if (e.target.closest('a[href^="/chat/"]')) set(false); });
  set(false);
  btn.disabled = false; // shipped disabled: a tap before this would do nothing
}
