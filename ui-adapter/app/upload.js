// upload.js -- a chat attachment sent to POST /v1/chats/{chat}/files with upload progress: the
// size is checked against the server's limit (GET /v1/config limits.upload_bytes) before a byte
// is sent, then the file goes with XMLHttpRequest, whose upload events give progress (fetch
// reports none for a request body).  The credential travels as a bearer header, never a cookie
// (withCredentials stays false).  It does not retry; the page shows what it reports.
import { fmtBytes } from './dom.js';

export class UploadError extends Error {
  constructor(status, message) { super(message); this.name = 'UploadError'; this.status = status; }
}

/** Why `file` cannot be uploaded (a sentence), or null.  `limit` in bytes (null: unknown). */
export function tooLarge(file, limit) {
  if (!limit || file.size <= limit) return null;
  return `${file.name} is ${fmtBytes(file.size)}: over the ${fmtBytes(limit)} upload limit of this deployment, so it was not sent.`;
}

/**
 * Upload `file` (a File or Blob) as `name`.  onProgress(loaded, total) as the bytes go out.
 * Resolves with the API's answer ({file_id, name, mounted, left_out_reason, path, …}); rejects
 * with UploadError (status 0 when the server could not be reached).
 */
export function uploadFile({ chatId, token, name, file, onProgress }) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open('POST', `/v1/chats/${encodeURIComponent(chatId)}/files?name=${encodeURIComponent(name)}&source=attachment`);
    xhr.setRequestHeader('Authorization', `Bearer ${token}`);
    xhr.setRequestHeader('Content-Type', 'application/octet-stream');
    xhr.responseType = 'text';
    xhr.upload.onprogress = (e) => { if (e.lengthComputable) onProgress?.(e.loaded, e.total); };
    xhr.onload = () => {
      let json = null;
      try { json = JSON.parse(xhr.responseText); } catch { /* not JSON */ }
      if (xhr.status >= 200 && xhr.status < 300 && json) resolve(json);
      else reject(new UploadError(xhr.status, json?.error?.message || `the server answered ${xhr.status}`));
    };
    xhr.onerror = () => reject(new UploadError(0, 'the server could not be reached'));
    xhr.onabort = () => reject(new UploadError(0, 'the upload was stopped'));
    xhr.send(file);
  });
}
