// chats.js -- the chats this browser can open: their page tokens kept in localStorage
// ('cerea.chats', newest first: {chat_id, page_token, title}), for the chat list (main-index.js) and
// the chat page (main-chat.js).  The API never shows a chat's token again after it made it, so a
// chat created elsewhere (through the API, the CLI, another browser) gets one here from the
// operator key: POST /v1/chats/{chat}/page_link mints a link to that chat's page.
// It does not list the server's chats (GET /v1/chats, main-index.js) or check a token.
import { Api } from '../src/api.js';

const CHATS = 'cerea.chats';
const MAX_CHATS = 500;   // kept in this browser (the oldest go first)

export const loadChats = () => { try { return JSON.parse(localStorage.getItem(CHATS) || '[]'); } catch { return []; } };
export const saveChats = (c) => localStorage.setItem(CHATS, JSON.stringify(c.slice(0, MAX_CHATS)));

/** The page token this browser holds for a chat, or ''. */
export const storedToken = (chatId) => loadChats().find((c) => c.chat_id === chatId)?.page_token || '';

/** Keeps (or refreshes) a chat's token and title in this browser. */
export function rememberChat({ chat_id: chatId, page_token: pageToken, title }) {
  const chats = loadChats().filter((c) => c.chat_id !== chatId);
  chats.unshift({ chat_id: chatId, page_token: pageToken, title: title ?? null });
  try { saveChats(chats); } catch { /* storage full: the link still opens this time */ }
}

/** The path of a chat's page with its token in the fragment (never sent to the server). */
export const chatPath = (chatId, pageToken) => `/chat/${encodeURIComponent(chatId)}#token=${encodeURIComponent(pageToken)}`;

/**
 * A page token for a chat created elsewhere, minted with the operator key and kept here.
 * Resolves the chat's path; throws ApiError (404 when this server cannot mint links, 401 for a
 * refused key).
 */
export async function linkChat(chatId, apiKey, title) {
  const r = await new Api({ token: apiKey }).pageLink(chatId);
  if (!r?.page_token) throw new Error('the server answered without a page token');
  rememberChat({ chat_id: chatId, page_token: r.page_token, title });
  return chatPath(chatId, r.page_token);
}
