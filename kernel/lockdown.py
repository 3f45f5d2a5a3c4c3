"""lockdown -- the Python-side refusals that complete the worker's JS lock-down.

The worker (worker/core.js) removes XHR, WebSocket, importScripts, storage APIs and the rest from
the JS global scope and pins a guarded fetch; that already stops js.fetch, pyfetch and micropip
beyond the allowed paths.  Here the Python entry points that would reach the network through other
routes are replaced with ones that raise at once with a clear message: socket connections
(Emscripten would tunnel them over a WebSocket) and pyodide.http.open_url (a synchronous XHR).
Each patch is applied in its own try block and reported; none fails silently.  This is no
sandbox on its own (ctypes reaches Emscripten): the worker's CSP and globals are what hold.
"""
import errno

MESSAGE = "network access is disabled in this sandbox"


def _refuse(*_a, **_k):
    raise PermissionError(errno.EACCES, MESSAGE)


def apply():
    """Returns a list of notes for patches that could not be applied."""
    failed = []

    def patch(label, fn):
        try:
            fn()
        except Exception as e:  # reported, never silent
            failed.append("lock-down: %s not applied: %r" % (label, e))

    def sockets():
        import socket
        for attr in ("connect", "connect_ex", "sendto", "bind", "listen"):
            setattr(socket.socket, attr, _refuse)
        socket.create_connection = _refuse
        socket.getaddrinfo = _refuse
        socket.gethostbyname = _refuse
    patch("socket", sockets)

    def open_url():
        import pyodide.http as ph
        ph.open_url = _refuse
    patch("pyodide.http.open_url", open_url)

    def urllib():
        import urllib.request as ur
        ur.urlopen = _refuse
    patch("urllib.request.urlopen", urllib)
    return failed


def hide_js_api():
    """Takes the Pyodide JS API (`pyodide_js`: _api, _module, FS, useNodeSockFS, loadPackage, ...)
    out of Python's reach: the JS module is unregistered and its entries leave sys.modules, so
    `import pyodide_js` and `from pyodide_js._api import _nodeSock` fail.  Pyodide's own Python
    reads three things from it at run time (asyncio.run and the WebLoop read
    _api.config.enableRunUntilComplete, the WebLoop schedules with _api.scheduleCallback, pyfetch
    combines signals with _api.abortSignalAny): a stand-in module answers those, with copies or
    the plain functions, and nothing else.  Called by the Node headless host's kernel worker
    (worker/host/sandbox-worker.js) once the kernel loaded.  Returns notes for what could not be
    done, and for any object still leading to the API (a check over every container Python's
    garbage collector tracks)."""
    import gc
    import sys
    import types

    notes = []
    try:
        from pyodide.ffi import JsProxy, unregister_js_module

        real = sys.modules.get("pyodide_js")
        api = getattr(real, "_api", None)
        stand_api = types.ModuleType("pyodide_js._api", "what Pyodide's own Python reads, nothing else")
        stand_api.config = types.SimpleNamespace(
            enableRunUntilComplete=bool(getattr(getattr(api, "config", None), "enableRunUntilComplete", False)))
        for name in ("scheduleCallback", "abortSignalAny"):
            fn = getattr(api, name, None)
            if fn is not None:
                setattr(stand_api, name, fn)
        stand = types.ModuleType("pyodide_js", "a stand-in: the Pyodide JS API is not reachable here")
        stand._api = stand_api
        unregister_js_module("pyodide_js")
        for name in [m for m in sys.modules if m == "pyodide_js" or m.startswith("pyodide_js.")]:
            del sys.modules[name]
        sys.modules["pyodide_js"] = stand
        sys.modules["pyodide_js._api"] = stand_api
        del real, api
    except Exception as e:  # reported, never silent
        return ["lock-down: the Pyodide JS API could not be hidden: %r" % (e,)]

    marks = ("useNodeSockFS", "_module", "_nodeSock", "runPythonAsync", "registerJsModule", "pyodide_py")
    for o in gc.get_objects():
        if isinstance(o, dict):
            values = list(o.values())
        elif isinstance(o, (list, tuple)):
            values = list(o)
        else:
            continue
        for v in values:
            if isinstance(v, JsProxy):
                try:
                    found = [m for m in marks if hasattr(v, m)]
                except Exception:
                    found = []
                if found:
                    notes.append("lock-down: the Pyodide JS API is still reachable from Python (%s)" % ", ".join(found))
                    return notes
    return notes
