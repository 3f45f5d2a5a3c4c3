// openapi.mjs -- holds every response the integration tests receive to docs/openapi.yaml: lib.mjs's
// call() hands each one here.  The path (by its template), the method and the status must be in
// the document (or its operation's `default`), the content type one the document gives for that
// answer, and a JSON body must match its schema (ajv, JSON Schema 2020-12 as OpenAPI 3.1 uses it).
// A path the document does not know may only be answered 404/405 with the API's error shape (what
// the server says to an unknown path); the web app's pages and static files are not checked.  A mismatch throws, so the test that received it fails,
// naming the call and what did not match.  OPENAPI_CHECK=0 turns it off (a look at an old server).
import { readFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';
import Ajv2020 from 'ajv/dist/2020.js';

export const OPENAPI_FILE = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'docs', 'openapi.yaml');
export const doc = YAML.parse(readFileSync(OPENAPI_FILE, 'utf8'));
const ajv = new Ajv2020({ strict: false, allErrors: true });
ajv.addSchema(doc, 'openapi');

const esc = (s) => s.replace(/~/g, '~0').replace(/\//g, '~1');
// The path templates as regular expressions, the most literal first.
const templates = Object.keys(doc.paths).map((t) => ({
  t,
  re: new RegExp(`^${t.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{name\}$/, '.+').replace(/\{[^}]+\}/g, '[^/]+')}$`),
  literal: t.replace(/\{[^}]+\}/g, '').length,
})).sort((a, b) => b.literal - a.literal);

// An OpenAPI `$ref` inside the document (responses), followed: [the object, its JSON pointer].
function deref(obj, pointer) {
  let seen = 0;
  while (obj && obj.$ref && seen++ < 10) {
    pointer = obj.$ref;
    obj = pointer.slice(2).split('/').map((k) => k.replace(/~1/g, '/').replace(/~0/g, '~')).reduce((o, k) => o?.[k], doc);
  }
  return [obj, pointer];
}

const validators = new Map();
function validator(pointer) {
  if (!validators.has(pointer)) validators.set(pointer, ajv.compile({ $ref: `openapi${pointer}` }));
  return validators.get(pointer);
}

// The web app's pages and static files are not the API (docs/api.md, "Static routes").
const STATIC = /^\/($|playground$|admin$|signin$|chat\/|worker\/|worker-pypi\/|pyodide\/|assets\/)/;

const isError = (j) => j && typeof j === 'object' && j.error && typeof j.error.code === 'string' && typeof j.error.message === 'string';

/**
 * Checks one response; throws when it is not what docs/openapi.yaml says.
 * @param {{method: string, path: string, status: number, contentType: string|null, json: any, buf: Buffer}} r
 */
export function checkResponse({ method, path, status, contentType, json }) {
  if (process.env.OPENAPI_CHECK === '0') return;
  const where = `${method} ${path} -> ${status}`;
  const bare = path.split('?')[0];
  if (STATIC.test(bare)) return;
  const m = templates.find((x) => x.re.test(bare));
  const op = m && doc.paths[m.t][method.toLowerCase()];
  if (!op) {
    if ((status === 404 || status === 405) && isError(json)) return; // an unknown path or method, said so
    if (m && status === 405) return; // a known path, another method: the transport's 405
    throw new Error(`${where}: not in docs/openapi.yaml`);
  }
  const key = op.responses[String(status)] ? String(status) : 'default';
  const base = `#/paths/${esc(m.t)}/${method.toLowerCase()}/responses/${key}`;
  const [resp, ptr] = deref(op.responses[key], base);
  if (!resp) throw new Error(`${where}: status ${status} not in docs/openapi.yaml for ${m.t}`);
  if (!resp.content) return; // no body described (202, 304, ...)
  const type = (contentType || '').split(';')[0].trim().toLowerCase();
  const types = Object.keys(resp.content);
  const mt = types.find((t) => t === type) || types.find((t) => t === '*/*');
  if (!mt) throw new Error(`${where}: content type ${type || '(none)'} not in docs/openapi.yaml (${types.join(', ')})`);
  if (mt !== 'application/json') return;
  if (json === null) throw new Error(`${where}: the body is not JSON`);
  const v = validator(`${ptr}/content/${esc(mt)}/schema`);
  if (!v(json)) {
    const errs = v.errors.slice(0, 5).map((e) => `${e.instancePath || '/'} ${e.message}${e.params?.allowedValues ? ` ${JSON.stringify(e.params.allowedValues)}` : ''}`).join('; ');
    throw new Error(`${where}: the body does not match docs/openapi.yaml: ${errs}\n${JSON.stringify(json).slice(0, 600)}`);
  }
}
