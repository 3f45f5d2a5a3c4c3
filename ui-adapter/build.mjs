// build.mjs -- bundles the reference web app and the kernel worker into the served static tree
// build/www/ (never committed) with esbuild, from the pinned npm packages only: nothing is fetched
// from a CDN at build or run time.  Run by scripts/setup.d/60-app.sh; idempotent (rewrites the
// outputs; esbuild is fast enough that no freshness check is needed).
//
// Output:
//   build/www/index.html, chat.html, admin.html,     the pages (/, /playground; /chat/{id}; /admin;
//     signin.html                                    /signin),
//                                                     first-worker.js and boot.js inlined, modulepreload
//                                                     links for boot.js's chunks
//   build/www/assets/*.js, *.css                      the app bundles (ESM, code-split: pdf.js loads
//                                                     only when a preview needs it)
//   build/www/assets/chunks/*-[hash].js               their shared chunks, named by content (served immutable)
//   build/www/assets/pdf.worker.mjs                   pdf.js's own worker
//   build/www/assets/preview/{tailwind,react,mermaid}.js   libraries an HTML artifact preview may load
//   build/www/assets/preview/docx.js                  the Word preview (docx-preview), run inside its
//                                                     sandboxed frame, never in the page
//   build/www/assets/sheet-worker.js                  the .xlsx preview's parser (read-excel-file), a
//                                                     module Worker
//   build/www/worker/kernel-worker.js                 the kernel Web Worker (module worker)
//   build/www/openapi.json                            docs/openapi.yaml as JSON (GET /v1/openapi.json)
// It does not copy the Pyodide runtime (scripts/sync_pyodide.mjs does, into build/www/pyodide/).
import * as esbuild from 'esbuild';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';
import { snapshotKey as computeSnapshotKey } from '../worker/snapshot-key.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const www = path.join(root, 'build', 'www');
const assets = path.join(www, 'assets');
const nm = (p) => path.join(root, 'node_modules', p);
const dev = process.argv.includes('--dev');

fs.mkdirSync(path.join(assets, 'preview'), { recursive: true });
fs.mkdirSync(path.join(www, 'worker'), { recursive: true });

const common = {
  bundle: true, format: 'esm', target: ['chrome110', 'firefox115', 'safari16'],
  minify: !dev, sourcemap: dev ? 'inline' : false, legalComments: 'linked', logLevel: 'warning',
  define: { 'process.env.NODE_ENV': dev ? '"development"' : '"production"' },
};

// The memory-snapshot key (worker/protocol.js SNAPSHOTS; worker/snapshot-key.js computes it):
// SHA-256 over the runtime's files and the sources of the worker and the kernel, so that a page
// restores only an image this very build made (the served one names its key in its header, the
// page's kept one is stored under it; the worker refuses any other).  '' when the runtime is not
// synced: no snapshots.  The global CEREA_SNAPSHOT_KEY is that string, in the page and in the
// worker (an esbuild define; code run unbundled, as in Node tests, sees none).
const snapshotKey = computeSnapshotKey(root, path.join(www, 'pyodide'));
common.define.CEREA_SNAPSHOT_KEY = JSON.stringify(snapshotKey);

// 1. The app: three page entries sharing chunks, and boot.js, the first script of the index and
//    chat pages (it starts the kernel before the page's bundle runs; its chunk holds only the
//    kernel supervisor, the settings and the progress bar, never the editor).
const app = await esbuild.build({
  ...common, metafile: true,
  entryPoints: {
    boot: path.join(root, 'ui-adapter/app/boot.js'),
    app: path.join(root, 'ui-adapter/app/main-index.js'),
    chat: path.join(root, 'ui-adapter/app/main-chat.js'),
    admin: path.join(root, 'ui-adapter/app/main-admin.js'),
    signin: path.join(root, 'ui-adapter/app/signin.js'),
    style: path.join(root, 'ui-adapter/app/style.css'),
  },
  outdir: assets, splitting: true, chunkNames: 'chunks/[name]-[hash]',
  loader: { '.py': 'text' },
});

// 2. pdf.js's worker, served from our origin.
fs.copyFileSync(nm('pdfjs-dist/build/pdf.worker.min.mjs'), path.join(assets, 'pdf.worker.mjs'));

// 3. Libraries an HTML artifact preview may use, as classic scripts that set globals the way their
//    CDN builds do (inlined into the sandboxed frame by the preview code, see app/previews.js).
fs.copyFileSync(nm('@tailwindcss/browser/dist/index.global.js'), path.join(assets, 'preview/tailwind.js'));
fs.writeFileSync(path.join(www, 'openapi.json'), JSON.stringify(YAML.parse(fs.readFileSync(path.join(root, 'docs', 'openapi.yaml'), 'utf8'))));
fs.copyFileSync(nm('mermaid/dist/mermaid.min.js'), path.join(assets, 'preview/mermaid.js'));
await esbuild.build({
  ...common, format: 'iife', minify: true,
  stdin: { contents: "import * as React from 'react'; import * as ReactDOM from 'react-dom'; " +
    "import * as ReactDOMClient from 'react-dom/client'; globalThis.React = React; " +
    "globalThis.ReactDOM = Object.assign({}, ReactDOM, ReactDOMClient);", resolveDir: root },
  outfile: path.join(assets, 'preview/react.js'),
});
// The Word preview runs inside its sandboxed frame (app/docx-frame.js says why), inlined there.
await esbuild.build({ ...common, format: 'iife', minify: true, entryPoints: [path.join(root, 'ui-adapter/app/docx-frame.js')],
  outfile: path.join(assets, 'preview/docx.js') });
// The .xlsx parser, a module Worker of the page (app/sheet-worker.js).
await esbuild.build({ ...common, entryPoints: [path.join(root, 'ui-adapter/app/sheet-worker.js')],
  outfile: path.join(assets, 'sheet-worker.js'), splitting: false });

// 4. The kernel worker: the browser's one entry (ui-adapter/src/kernel-worker.js over
//    worker/core.js); kernel Python sources are bundled as text so the worker needs no fetch
//    outside /pyodide/.  Pyodide itself stays external (loaded from /pyodide/ at run time).
const workerEntry = path.join(root, 'ui-adapter/src/kernel-worker.js');
// `cerea:kernel-sources` → {module name: Python source} of every kernel/*.py.
// `cerea:runtime-bytes` → {file name: size} of the runtime files Pyodide fetches while it loads,
// as synced into build/www/pyodide/ (the download progress's total; {} when not synced yet: the
// page then shows bytes without a percentage).  setup.sh builds the app after every sync.
const RUNTIME_FETCHED = ['pyodide.asm.wasm', 'python_stdlib.zip'];
const kernelSources = {
  name: 'cerea-kernel-sources',
  setup(b) {
    b.onResolve({ filter: /^cerea:(kernel-sources|runtime-bytes)$/ }, (a) => ({ path: a.path.slice(6), namespace: 'cerea' }));
    b.onLoad({ filter: /^kernel-sources$/, namespace: 'cerea' }, () => {
      const dir = path.join(root, 'kernel');
      const files = fs.readdirSync(dir).filter((f) => f.endsWith('.py')).sort();
      const map = Object.fromEntries(files.map((f) => [f.slice(0, -3), fs.readFileSync(path.join(dir, f), 'utf8')]));
      return { contents: `export default ${JSON.stringify(map)};`, loader: 'js', watchFiles: files.map((f) => path.join(dir, f)) };
    });
    b.onLoad({ filter: /^runtime-bytes$/, namespace: 'cerea' }, () => {
      const files = RUNTIME_FETCHED.map((f) => path.join(www, 'pyodide', f));
      const sizes = files.every((f) => fs.existsSync(f))
        ? Object.fromEntries(RUNTIME_FETCHED.map((f, i) => [f, fs.statSync(files[i]).size])) : {};
      if (!Object.keys(sizes).length) console.warn('build: build/www/pyodide/ is not synced: the runtime download shows no percentage');
      return { contents: `export default ${JSON.stringify(sizes)};`, loader: 'js', watchFiles: files };
    });
  },
};
{
  await esbuild.build({
    ...common, entryPoints: [workerEntry], outfile: path.join(www, 'worker/kernel-worker.js'),
    loader: { '.py': 'text' }, external: ['/pyodide/*'], splitting: false, plugins: [kernelSources],
  });

}

// 5. The pages: boot.js's tag becomes the boot entry's own code, inline (its imports made absolute:
//    the pages live at /, /playground and /chat/{id}), with a modulepreload link for each chunk it
//    imports.  The browser asks for those chunks while it parses the page, and on a repeat visit
//    takes them from its cache without asking (/assets/chunks/ is immutable): nothing is
//    revalidated before the kernel worker is made.
const bootOut = Object.entries(app.metafile.outputs).find(([, o]) => o.entryPoint && o.entryPoint.endsWith('app/boot.js'));
if (!bootOut) throw new Error('build: no output for ui-adapter/app/boot.js');
const bootCode = fs.readFileSync(path.resolve(root, bootOut[0]), 'utf8').trim().replace(/(["'])\.\/chunks\//g, '$1/assets/chunks/');
if (/<\/script|<!--/i.test(bootCode) || /["']\.\.?\//.test(bootCode)) throw new Error('build: boot.js cannot be inlined as it is');
const preload = bootOut[1].imports.filter((i) => i.kind === 'import-statement')
  .map((i) => `<link rel="modulepreload" href="/assets/${path.relative(assets, path.resolve(root, i.path))}">\n`).join('');
// Before them, the page's first script (classic, so it runs as the parser reaches it): the strict
// kernel worker made at once when it is the answer (app/first-worker.js).
const first = await esbuild.build({
  ...common, format: 'iife', write: false, minify: true, legalComments: 'none',
  stdin: { contents: "import { prestart } from './ui-adapter/app/first-worker.js'; prestart();", resolveDir: root },
});
const firstCode = first.outputFiles[0].text.trim();
if (/<\/script|<!--/i.test(firstCode)) throw new Error('build: first-worker.js cannot be inlined as it is');
const BOOT_TAG = /<script type="module" async src="\/assets\/boot\.js"( data-page="\w+")><\/script>/;
for (const f of ['index.html', 'chat.html', 'admin.html', 'signin.html']) {
  const html = fs.readFileSync(path.join(root, 'ui-adapter/app', f), 'utf8');
  fs.writeFileSync(path.join(www, f), html.replace(BOOT_TAG, (_, page) => `<script>${firstCode}</script>\n${preload}<script type="module" async${page}>${bootCode}</script>`));
}
const n = fs.readdirSync(assets).length;
console.log(`build: web app -> ${path.relative(root, www)} (${n} entries in assets/), worker from ${path.relative(root, workerEntry)}`);
