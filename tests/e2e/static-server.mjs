// static-server.mjs -- a small static server for the browser tests that do not need the
// orchestrator (the playground runs the user's code in a local kernel).  It serves build/www/ the
// way the orchestrator does (DESIGN.md's web routes and the served-tree contract): /, /playground
// -> index.html, /chat/{id} -> chat.html, /admin -> admin.html, /assets/, /pyodide/, and the
// kernel worker under /worker/ and /worker-pypi/ with the worker's own CSP; every response carries
// COOP same-origin + COEP require-corp, so the page is cross-origin isolated (SharedArrayBuffer
// interrupts).  GET /v1/config answers {pypi_disabled} from its options.  Binds 127.0.0.1 on a free
// port.  Not a production server: no compression, no ranges, no caching headers.
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';

const TYPES = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.mjs': 'text/javascript',
  '.css': 'text/css', '.wasm': 'application/wasm', '.json': 'application/json', '.zip': 'application/zip',
  '.txt': 'text/plain', '.whl': 'application/zip', '.png': 'image/png' };

export function workerCsp(origin, pypi) {
  return `default-src 'none'; script-src 'self' 'wasm-unsafe-eval'; connect-src ${origin}/pyodide/` +
    (pypi ? ' https://pypi.org https://files.pythonhosted.org' : '');
}

export function startStaticServer({ root, pypiDisabled = false, extra } = {}) {
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://x');
    let p = decodeURIComponent(url.pathname);
    const host = `http://${req.headers.host}`;
    const headers = { 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp',
      'Cross-Origin-Resource-Policy': 'same-origin', 'Cache-Control': 'no-store', 'X-Content-Type-Options': 'nosniff' };
    if (extra && extra(req, res, headers)) return;
    if (p === '/v1/config') {
      res.writeHead(200, { ...headers, 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ pypi_disabled: pypiDisabled, execution: 'browser', time_limit_s: 60 }));
      return;
    }
    if (p === '/v1/me') { // no one is signed in here (the playground's chat list asks)
      res.writeHead(401, { ...headers, 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ error: { code: 'unauthorized', message: 'not signed in' } }));
      return;
    }
    if (p.startsWith('/v1/')) {
      res.writeHead(404, { ...headers, 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ error: { code: 'not_found', message: 'static test server has no API' } }));
      return;
    }
    if (p === '/' || p === '/playground') p = '/index.html';
    else if (p === '/admin') p = '/admin.html';
    else if (p === '/signin') p = '/signin.html';
    else if (/^\/chat\/[^/]+$/.test(p)) p = '/chat.html';
    else if (p.startsWith('/worker-pypi/') || p.startsWith('/worker/')) {
      const pypi = p.startsWith('/worker-pypi/') && !pypiDisabled;
      headers['Content-Security-Policy'] = workerCsp(host, pypi);
      p = '/worker/' + p.split('/').slice(2).join('/');
    }
    const file = path.join(root, path.normalize(p).replace(/^(\.\.[/\\])+/, ''));
    if (!file.startsWith(root) || !fs.existsSync(file) || fs.statSync(file).isDirectory()) {
      res.writeHead(404, headers); res.end('not found'); return;
    }
    res.writeHead(200, { ...headers, 'Content-Type': TYPES[path.extname(file)] || 'application/octet-stream',
      'Content-Length': fs.statSync(file).size });
    fs.createReadStream(file).pipe(res);
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => {
    const { port } = server.address();
    resolve({ server, port, origin: `http://127.0.0.1:${port}`, close: () => new Promise((r) => { server.closeAllConnections?.(); server.close(r); }) });
  }));
}

// Run alone: node tests/e2e/static-server.mjs [port]  (for looking at the app by hand)
if (import.meta.url === `file://${process.argv[1]}`) {
  const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../build/www');
  startStaticServer({ root }).then(({ origin }) => console.log(`serving ${root} at ${origin}`));
}
