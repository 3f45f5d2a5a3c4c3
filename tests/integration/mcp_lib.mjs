// mcp_lib.mjs -- what the MCP tests share: the official TypeScript SDK's client
// (@modelcontextprotocol/sdk: Client over StreamableHTTPClientTransport) connected to a running
// server with a bearer credential, and raw JSON-RPC POSTs for what the SDK never sends
// (malformed bodies, unknown versions, missing sessions).
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

// An SDK client connected to srv's /mcp.  version: the protocol version its initialize asks for
// (the SDK always asks for its newest; a fetch wrapper rewrites the request for an older one).
export async function mcpClient(srv, { key = srv.key, version, headers = {} } = {}) {
  const fetchAs = version ? async (url, init) => {
    if (init?.body && typeof init.body === 'string' && init.body.includes('"initialize"')) {
      const m = JSON.parse(init.body);
      if (m.method === 'initialize') m.params.protocolVersion = version;
      init = { ...init, body: JSON.stringify(m) };
    }
    return fetch(url, init);
  } : undefined;
  const transport = new StreamableHTTPClientTransport(new URL(`${srv.base}/mcp`), {
    requestInit: { headers: { ...(key ? { authorization: `Bearer ${key}` } : {}), ...headers } },
    ...(fetchAs ? { fetch: fetchAs } : {}),
  });
  const client = new Client({ name: 'cerea-mcp-test', version: '1.0.0' });
  await client.connect(transport);
  return { client, transport, close: () => client.close() };
}

// One raw POST to /mcp: {status, json, headers, text}.
export async function rpc(srv, body, { key = srv.key, session, version, headers = {} } = {}) {
  const h = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers };
  if (key) h.authorization = `Bearer ${key}`;
  if (session) h['mcp-session-id'] = session;
  if (version) h['mcp-protocol-version'] = version;
  const res = await fetch(`${srv.base}/mcp`, { method: 'POST', headers: h, body: typeof body === 'string' ? body : JSON.stringify(body) });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, json, headers: res.headers, text };
}

// A raw initialize: its session id and the version the server chose.
export async function initialize(srv, protocolVersion = '2025-11-25', opts = {}) {
  const r = await rpc(srv, { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion, capabilities: {}, clientInfo: { name: 'raw', version: '1' } } }, opts);
  return { ...r, session: r.headers.get('mcp-session-id'), version: r.json?.result?.protocolVersion };
}

// The text item of a tool result.
export const textOf = (result) => result.content.find((c) => c.type === 'text')?.text ?? '';

// The run id a progress notification names (its _meta), and its state.
export const runOf = (p) => p?._meta?.['cerea-sandbox/run'];
