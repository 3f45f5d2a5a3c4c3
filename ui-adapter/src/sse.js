// sse.js -- the browser's event-stream connection for worker/event-stream.js: one `fetch` of the
// stream with the bearer credential in the Authorization header (never in the URL) and
// `Last-Event-ID` when resuming, its body decoded and handed on chunk by chunk.  The reconnect loop,
// the backoff and the SSE parsing are worker/event-stream.js's, shared with the headless host.
//
// It does not interpret events, reconnect or parse: it is the `connect` that EventStream is given.

/**
 * @param {{base?: string, headers: () => Record<string,string>, fetch?: typeof fetch}} o
 * @returns the `connect` of worker/event-stream.js
 */
export function fetchConnect({ base = '', headers, fetch: f }) {
  const fetchFn = f || globalThis.fetch.bind(globalThis);
  return async ({ path, lastEventId, signal, onOpen, onText }) => {
    const h = { Accept: 'text/event-stream', ...headers() };
    if (lastEventId !== null && lastEventId !== undefined) h['Last-Event-ID'] = lastEventId;
    const res = await fetchFn(base + path, { headers: h, signal, cache: 'no-store', credentials: 'omit' });
    onOpen(res.status);
    if (res.status !== 200 || !res.body) { try { await res.body?.cancel(); } catch { /* gone */ } return res.status; }
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return 200;
      onText(dec.decode(value, { stream: true }));
    }
  };
}
