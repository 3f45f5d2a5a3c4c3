// kernel-worker-fallback.js -- a MINIMAL stand-in kernel worker, used only while the real one
// (worker/browser-worker.js over worker/core.js, owned by the kernel) is not in the tree, so the
// page side can be built and tested in Chromium.  It loads Pyodide from /pyodide/, mounts files at
// /mnt/data, runs code in one persistent namespace with capped stdout/stderr, reports the files
// created or changed under /mnt/output, and honours the SharedArrayBuffer interrupt.  It has NONE
// of the kernel's lock-down patches beyond what the worker script's CSP gives, no figure capture
// and no import resolution: build.mjs prefers the real entry as soon as it exists.
import { loadPyodide } from '/pyodide/pyodide.mjs';

let py = null;
const send = (m, t) => postMessage(m, t || []);

const RUN_PY = `
import sys, io, os, traceback, hashlib
def __cerea_run(code, cap):
    out, err = io.StringIO(), io.StringIO()
    so, se = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    error = None
    before = {}
    os.makedirs('/mnt/output', exist_ok=True)
    for d, _, fs in os.walk('/mnt/output'):
        for f in fs:
            p = os.path.join(d, f); st = os.stat(p); before[p] = (st.st_mtime_ns, st.st_size)
            os.utime(p, ns=(0, 0)); before[p] = (0, st.st_size)
    try:
        exec(compile(code, '<cell>', 'exec'), __cerea_ns)
    except BaseException as e:
        error = {'type': type(e).__name__, 'message': str(e), 'traceback': traceback.format_exc()}
        print(traceback.format_exc(), file=err, end='')
    finally:
        sys.stdout, sys.stderr = so, se
    files = []
    for d, _, fs in os.walk('/mnt/output'):
        for f in sorted(fs):
            p = os.path.join(d, f); st = os.stat(p)
            if before.get(p) != (st.st_mtime_ns, st.st_size) or p not in before:
                files.append(os.path.relpath(p, '/mnt/output'))
    o, e2 = out.getvalue(), err.getvalue()
    return {'stdout': o[:cap], 'stderr': e2[:cap], 'stdout_truncated': len(o) > cap, 'stderr_truncated': len(e2) > cap,
            'error': error, 'files': files}
__cerea_ns = {'__name__': '__main__'}
`;

onmessage = async (ev) => {
  const m = ev.data;
  try {
    if (m.cmd === 'init') {
      py = await loadPyodide({ indexURL: new URL('/pyodide/', location.origin).href,
        lockFileURL: new URL('/pyodide/pyodide-lock.json', location.origin).href,
        packageBaseUrl: new URL('/pyodide/', location.origin).href });
      if (m.interruptBuffer) py.setInterruptBuffer(new Int32Array(m.interruptBuffer));
      py.FS.mkdirTree('/mnt/data'); py.FS.mkdirTree('/mnt/output');
      py.runPython(RUN_PY);
      send({ id: m.id, type: 'ready' });
    } else if (m.cmd === 'mount') {
      for (const f of m.files) py.FS.writeFile(`/mnt/data/${f.name}`, f.bytes);
      send({ id: m.id, type: 'mounted' });
    } else if (m.cmd === 'unmount') {
      for (const n of m.names) { try { py.FS.unlink(`/mnt/data/${n}`); } catch { /* gone */ } }
      send({ id: m.id, type: 'unmounted' });
    } else if (m.cmd === 'run') {
      send({ id: m.id, type: 'executing' });
      const t0 = performance.now();
      const r = py.globals.get('__cerea_run')(m.code, m.limits?.out_chars || 8000).toJs({ dict_converter: Object.fromEntries });
      const files = [];
      for (const name of r.files) {
        const bytes = py.FS.readFile(`/mnt/output/${name}`);
        files.push({ name, bytes, size: bytes.length, kind: 'file' });
      }
      send({ id: m.id, type: 'result', result: { ...r, status: r.error ? 'error' : 'ok', files,
        duration_ms: Math.round(performance.now() - t0), notes: [] } });
    }
  } catch (e) {
    send({ id: m.id, type: 'error', message: String(e && e.message || e) });
  }
};
