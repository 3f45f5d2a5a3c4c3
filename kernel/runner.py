"""runner -- the entry points worker/core.js calls, in the order of a run.

    init(config)        once, after Pyodide loaded: lock-down patches, output streams, the small
                        IPython.display (ipython.py), folders, the list of guide packages this
                        deployment lacks.
    prepare(code)       compile (a SyntaxError is returned here, before any package loads), scan
                        imports, say whether matplotlib is wanted.  The worker then loads packages.
    execute(options)    (async) figures and /mnt/output marked, matplotlib on Agg when the code
                        mentions it, the interruptible waits and the flush handler in place, the
                        cell run in the persistent namespace inside the interrupt window
                        (execute.py arms it around user code), its value made a MIME bundle,
                        figures swept (also after an error), streams flushed, changed files
                        collected.  Returns the result as JSON (without stdout/stderr: the
                        worker's sinks hold them; with value, displays and displays_dropped).
    interrupt_awaiting()  the controller's interrupt reached the worker while the run awaits:
                        its task cancelled, KeyboardInterrupt at the cell's await → 'woken',
                        'stuck' or 'none' (execute.py).
    dispose()           forget namespace, mounts, known outputs (a chat switch on a warm kernel).

Everything crosses the JS boundary as JSON strings: no proxies to leak.  It does not move file
bytes (the worker does) or enforce the time limit (the page does).
"""
import json
import os
import sys
import time

from . import execute, figures, imports, ipython, lockdown, mounts, output, outputs_diff, values, waits

_pending = {"code": None, "source": None, "matplotlib": False}
_mpl = {"tried": False, "error": None}


class _NoHost:
    """Outside the worker (plain CPython): nothing to arm."""
    def arm(self):
        pass

    def disarm(self):
        pass


def _host():
    try:
        import cerea_host
        return cerea_host
    except ImportError:
        return None


def init(config_json):
    cfg = json.loads(config_json or "{}")
    notes = lockdown.apply()
    output.install()
    waits.install()
    execute.install()
    ipython.install()
    mounts.ensure_dirs()
    imports.set_lacking(cfg.get("lacks"))
    if os.path.isdir("/home/pyodide"):
        os.chdir("/home/pyodide")   # scratch files land here, never in /mnt/output
    return json.dumps({"notes": notes})


def prepare(code):
    """JSON {ok: true, imports, matplotlib} or {ok: false, error}."""
    _pending.update(code=None, source=code, matplotlib=False)
    try:
        cell = execute.compile_cell(code)
    except (SyntaxError, ValueError, OverflowError) as e:   # ValueError: NUL bytes in source
        return json.dumps({"ok": False, "error": execute.format_error(e)})
    _pending["code"] = cell
    want = imports.mentions_matplotlib(code)
    _pending["matplotlib"] = want
    return json.dumps({"ok": True, "imports": imports.scan(code), "matplotlib": want})


def start_matplotlib():
    """Import matplotlib on Agg and install the figure capture.  Raises when it cannot."""
    if figures.installed():
        return
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.figure
    import matplotlib.pyplot as plt
    figures.install(plt, matplotlib.figure.Figure)


async def execute_run(options_json):
    opts = json.loads(options_json or "{}")
    limits = opts.get("limits") or {}
    notes, t = [], {}
    cell = _pending["code"]
    _pending["code"] = None
    if cell is None:
        return json.dumps({"status": "error", "notes": ["internal: execute without prepare"],
                           "error": None, "files": [], "files_unlisted": 0, "figures_dropped": 0})
    t0 = time.perf_counter()
    output.restore()
    waits.install()
    execute.install()
    values.begin_run(limits.get("displays", 20), limits.get("out_chars", 8000))
    figures.begin_run(limits.get("figures", 20))
    try:
        outputs_diff.before_run()
    except Exception as e:
        notes.append("output change detection could not start: %r" % (e,))
    capture_error = None
    if _pending["matplotlib"]:
        try:
            start_matplotlib()
        except BaseException as e:
            capture_error, capture_at = e, len(notes)
    status, error, value = "ok", None, None
    host = _host() or _NoHost()
    t1 = time.perf_counter()
    try:
        v = await execute.run(cell, host)
        if v is not execute.NO_VALUE and v is not None:
            host.arm()   # its _repr_*_ methods are user code: interruptible, time-limited
            try:
                value = values.value(v)
            finally:
                host.disarm()
        v = None
    except KeyboardInterrupt as e:
        status, error = "cancelled", execute.format_error(e)
    except BaseException as e:   # SystemExit and MemoryError included: the kernel stays usable
        status, error = "error", execute.format_error(e)
        n = imports.note_for(e)
        if n:
            notes.append(n)
        if n and capture_error is not None and imports.note_for(capture_error) == n:
            capture_error = None   # the code's own import of matplotlib failed: its note says it
        e = None
    if capture_error is not None:
        notes.insert(capture_at, imports.capture_note(capture_error))
        capture_error = None
    t2 = time.perf_counter()
    swept, dropped = [], 0
    if not figures.installed() and "matplotlib.pyplot" in sys.modules:
        # pyplot came in without the code naming it (pandas' .plot()): capture from now on,
        # without switching the backend (that would close the figures we are about to save).
        try:
            import matplotlib.figure
            figures.install(sys.modules["matplotlib.pyplot"], matplotlib.figure.Figure)
        except BaseException as e:
            notes.append("figure capture could not start in this run (%s: %s)" % (type(e).__name__, e))
    if figures.installed():
        try:
            swept, dropped = figures.end_run()
        except BaseException as e:
            notes.append("figures still open could not be saved: %s: %s" % (type(e).__name__, e))
            swept, dropped = list(figures._run["swept"]), figures._run["dropped"]
    output.flush()
    shown, shown_dropped, text_only, cleared = values.end_run()
    files, unlisted = [], 0
    try:
        files, unlisted, fnotes = outputs_diff.after_run(
            limit=int(limits.get("files_listed", 200)), figure_paths=swept,
            file_cap=int(limits.get("file_load_bytes", outputs_diff.FILE_CAP)))
        notes.extend(fnotes)
    except Exception as e:
        notes.append("output files could not be collected: %r" % (e,))
    t3 = time.perf_counter()
    return json.dumps({"status": status, "error": error, "files": files,
                       "files_unlisted": unlisted, "figures_dropped": dropped, "notes": notes,
                       "value": value, "displays": shown, "displays_dropped": shown_dropped,
                       "text_only": text_only, "clear_output": cleared,
                       "timing": {"prepare_ms": round((t1 - t0) * 1000, 3),
                                  "exec_ms": round((t2 - t1) * 1000, 3),
                                  "collect_ms": round((t3 - t2) * 1000, 3)}})


def _empty(folder):
    import shutil
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        p = os.path.join(folder, name)
        try:
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p)
            else:
                os.remove(p)
        except OSError:
            pass


def dispose():
    """Forget the chat: namespace, mounted files, outputs, scratch files (cwd and /tmp).
    Installed packages stay (they are the deployment's, not the chat's)."""
    execute.reset()
    mounts.reset()
    outputs_diff.reset()
    for folder in (mounts.OUTPUT, "/tmp", os.getcwd()):
        _empty(folder)
    if figures.installed():
        try:
            figures._plt[0].close("all")
        except Exception:
            pass
    return "{}"


def interrupt_awaiting():
    return execute.interrupt_awaiting()


def plan_mount(manifest_json):
    return mounts.plan(manifest_json)


def commit_mount(written_json):
    mounts.commit(written_json)
    return "{}"
