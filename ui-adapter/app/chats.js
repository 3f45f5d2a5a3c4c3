// chats.js -- the signed-in person's chats, through the API with the session cookie: the list
// (GET /v1/chats: their own, newest first, with titles), create (POST /v1/chats), rename (PATCH),
// delete (DELETE: messages, runs and files go with it), and the page token a chat's page attaches
// with (POST /v1/chats/{chat}/page_link with the session; the same token every time, nothing
// stored by the server).  Page tokens live in this page's memory only: nothing here is kept in
// the browser's storage.  It does not render (sidebar.js) or check a page token from a link.
import { sessionApi } from './account.js';

const enc = encodeURIComponent;
const tokens = new Map(); // chat_id -> page token, this page's memory only

/** The person's chats, newest first: [{chat_id, title, created_at, owner}]. */
export async function listChats() { return (await sessionApi.call('GET', '/v1/chats'))?.chats || []; }

/** A new chat of the person's → the chat object (its page token kept in memory). */
export async function createChat(title) {
  const c = await sessionApi.call('POST', '/v1/chats', title ? { title } : {});
  if (c?.page_token) tokens.set(c.chat_id, c.page_token);
  return c;
}

export const renameChat = (chatId, title) => sessionApi.call('PATCH', `/v1/chats/${enc(chatId)}`, { title });
export async function deleteChat(chatId) { await sessionApi.call('DELETE', `/v1/chats/${enc(chatId)}`); tokens.delete(chatId); }

/** The page token of one of the person's chats (ApiError 404 when it is not theirs or not there). */
export async function pageToken(chatId) {
  if (!tokens.has(chatId)) {
    const r = await sessionApi.call('POST', `/v1/chats/${enc(chatId)}/page_link`, {});
    if (!r?.page_token) throw new Error('the server answered without a page token');
    tokens.set(chatId, r.page_token);
  }
  return tokens.get(chatId);
}

/** A chat's page for its owner (no token in the address: the page asks for one with the session). */
export const chatPath = (chatId) => `/chat/${enc(chatId)}`;
