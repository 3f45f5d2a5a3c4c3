// openapi.test.mjs -- docs/openapi.yaml itself: a valid OpenAPI 3.1 document (swagger-parser, the
// validator from npm), served as JSON at GET /v1/openapi.json, naming every route the server has
// (the handlers' tp_route calls, read from the source); and the checker the other tests run on
// every answer refuses what is outside it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import SwaggerParser from '@apidevtools/swagger-parser';
import { ROOT, startServer, call } from './lib.mjs';
import { doc, checkResponse } from './openapi.mjs';

let srv;
before(async () => { srv = await startServer(); });
after(async () => { await srv?.stop(); });

test('docs/openapi.yaml is a valid OpenAPI 3.1 document', async () => {
  const api = await SwaggerParser.validate(structuredClone(doc));
  assert.equal(api.openapi, '3.1.0');
});

test('GET /v1/openapi.json serves the same document', async () => {
  const r = await call(srv, 'GET', '/v1/openapi.json', { token: null });
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type'), /^application\/json/);
  assert.deepEqual(r.json, doc);
});

test('every route the server has is in the document', () => {
  const files = [];
  const walk = (d) => { for (const f of readdirSync(d)) { const p = join(d, f); if (statSync(p).isDirectory()) walk(p); else if (f.endsWith('.c')) files.push(p); } };
  walk(join(ROOT, 'orchestrator'));
  const routes = new Set();
  for (const f of files) for (const m of readFileSync(f, 'utf8').matchAll(/tp_route(?:_streamed)?\(o->tp, "([A-Z]+)", "([^"]+)"/g)) routes.add(`${m[1]} ${m[2].replace("{name*}", "{name}")}`);
  // The web app's pages and the worker scripts are static files, not the API.
  const pages = /^GET (\/|\/playground|\/admin|\/signin|\/chat\/\{chat\}|\/worker\/\{path\*\}|\/worker-pypi\/\{path\*\})$/;
  const missing = [...routes].filter((r) => !pages.test(r)).filter((r) => {
    const [method, path] = r.split(' ');
    return !doc.paths[path]?.[method.toLowerCase()];
  });
  assert.ok(routes.size > 30, `read ${routes.size} routes from the source`);
  assert.deepEqual(missing, [], 'routes the document does not describe');
});

test('every error code in the source is in the document', () => {
  const files = [];
  const walk = (d) => { for (const f of readdirSync(d)) { const p = join(d, f); if (statSync(p).isDirectory()) walk(p); else if (f.endsWith('.c')) files.push(p); } };
  walk(join(ROOT, 'orchestrator'));
  walk(join(ROOT, 'transport'));
  const codes = new Set();
  for (const f of files) {
    const src = readFileSync(f, 'utf8');
    // The first string literal of each error answer's arguments is its code...
    for (const m of src.matchAll(/(?:orch__api_error|api_error_v|tp_respond_error(?:_h)?)\s*\(([^;]*?)\)\s*;/gs)) {
      const lit = /"([a-z][a-z0-9_]*)"/.exec(m[1]);
      if (lit) codes.add(lit[1]);
    }
    // ...and the transport's refusal table gives {status, flags, code, message}.
    for (const m of src.matchAll(/\{\s*\d{3},\s*\d+,\s*"([a-z_]+)"/g)) codes.add(m[1]);
  }
  const known = new Set(doc.components.schemas.ErrorCode.enum);
  assert.ok(codes.size > 20, `read ${codes.size} codes`);
  assert.deepEqual([...codes].filter((c) => !known.has(c)).sort(), [], 'codes the document does not list');
});

test('the checker refuses an answer outside the document', () => {
  const ok = { method: 'GET', path: '/v1/chats', status: 200, contentType: 'application/json', json: { chats: [] } };
  checkResponse(ok);
  assert.throws(() => checkResponse({ ...ok, json: { chats: [{ chat_id: 'not-an-id', title: null, created_at: 1 }] } }), /does not match/);
  assert.throws(() => checkResponse({ ...ok, json: {} }), /does not match/);
  assert.throws(() => checkResponse({ ...ok, contentType: 'text/html' }), /content type text\/html/);
  assert.throws(() => checkResponse({ ...ok, path: '/v1/nowhere', status: 200 }), /not in docs\/openapi.yaml/);
  assert.throws(() => checkResponse({ ...ok, status: 500, json: { oops: 1 } }), /does not match/);
  assert.throws(() => checkResponse({ ...ok, status: 400, json: { error: { code: 'made_up', message: 'x' } } }), /does not match/);
  checkResponse({ ...ok, path: '/v1/nowhere', status: 404, json: { error: { code: 'not_found', message: 'no such path' } } });
});
