// connect.js -- the chat page's "Connect an assistant" control: mints the chat's key (POST
// /v1/chats/{chat}/chat_key with the page's token: the same key every time, nothing stored, see
// docs/mcp.md) when the person opens it, and shows the MCP URL and the key with copy buttons and
// what to enter in Open WebUI and LibreChat.  The key is shown in the dialog only: never put in
// the address, the title or the browser's storage, and the dialog forgets it when it closes.
import { Api } from '../src/api.js';
import { h } from './dom.js';
import { tell, say } from './account.js';
import { UI } from '../../worker/notes.js';

function copyRow(id, labelText, value, multiline = false) {
  const field = multiline ? h('textarea', { id, readonly: true, rows: value.split('\n').length, spellcheck: 'false', class: 'copy-field snippet' }, value)
    : h('input', { type: 'text', id, readonly: true, value, spellcheck: 'false', class: 'copy-field' });
  const status = h('span', { class: 'small muted', role: 'status' });
  const btn = h('button', { type: 'button', class: 'btn btn-small', 'data-copy': id }, 'Copy');
  btn.addEventListener('click', async () => {
    try { await navigator.clipboard.writeText(field.value); tell(status, 'copied'); }
    catch { field.select(); tell(status, 'copyFailed'); }
  });
  return h('div', { class: 'copy-row' }, h('label', { for: id }, labelText), h('div', { class: 'row' }, field, btn), status);
}

/** Wires #connect for a chat reached with `token` (its page token). */
export function wireConnect({ button, chatId, token }) {
  const dlg = h('dialog', { id: 'connect-dialog', class: 'wide', 'aria-labelledby': 'connect-h' });
  document.body.append(dlg);
  const body = h('div', { class: 'settings' });
  dlg.append(h('form', { method: 'dialog' }, body));
  dlg.addEventListener('close', () => body.replaceChildren());
  button.hidden = false;
  button.addEventListener('click', async () => {
    body.replaceChildren(h('h2', { id: 'connect-h' }, 'Connect an assistant'), say('connectIntro'));
    dlg.showModal();
    let k;
    try { k = await new Api({ token }).call('POST', `/v1/chats/${encodeURIComponent(chatId)}/chat_key`, {}); }
    catch (e) {
      body.append(say('connectFailed', e.message), h('div', { class: 'row' }, h('button', { class: 'btn', value: 'close' }, 'Close')));
      return;
    }
    const url = k.mcp_url || `${location.origin}/mcp`;
    const yaml = UI.librechatYaml(url);
    body.append(copyRow('mcp-url', 'MCP URL (Streamable HTTP)', url), copyRow('chat-key', 'Chat key (Bearer)', k.key),
      h('details', {}, h('summary', {}, 'Open WebUI'), say('connectOpenWebui', url)),
      h('details', {}, h('summary', {}, 'LibreChat'), say('connectLibrechat'),
        copyRow('librechat-yaml', 'librechat.yaml', yaml, true)),
      h('div', { class: 'row' }, h('button', { class: 'btn btn-primary', value: 'close' }, 'Close')));
  });
}
