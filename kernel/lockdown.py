"""lockdown -- the Python-side refusals that complete the worker's JS lock-down.

The worker (worker/core.js) removes XHR, WebSocket, importScripts, storage APIs and the rest from
the JS global scope and pins a guarded fetch; that already stops js.fetch, pyfetch and micropip
beyond the allowed paths.  Here the Python entry points that would reach the network through other
routes are replaced with ones that raise at once with a clear message: socket connections
(Emscripten would tunnel them over a WebSocket) and pyodide.http.open_url (a synchronous XHR).
Each patch is applied in its own try block and reported; none fails silently.  A module not
imported yet is patched when it is first imported (an import hook), so start-up does not pay for
importing it; a patch that fails then fails the import.  This is no sandbox on its own (ctypes
reaches Emscripten): the worker's CSP and globals are what hold.
"""
import errno
import sys

MESSAGE = "network access is disabled in this sandbox"


def _refuse(*_a, **_k):
    # errno set for code that checks it, but not in the message: Emscripten's EACCES is 2, which
    # people read as ENOENT ("[Errno 2] network access is disabled").
    e = PermissionError(MESSAGE)
    e.errno = errno.EACCES
    raise e


class _PatchOnImport:
    """A sys.meta_path finder placed first: a watched module not imported yet is patched right
    after its own code ran, before the import returns it to anyone (also on importlib.reload).
    A patch that fails there fails the import (ImportError): the module is never handed out
    unpatched."""

    def __init__(self, patches):
        self.patches = patches   # module name -> (label, fn(module))

    def find_spec(self, name, path=None, target=None):
        if name not in self.patches:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None) if finder is not self else None
            spec = find(name, path, target) if find else None
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and not isinstance(spec.loader, _PatchingLoader):
            spec.loader = _PatchingLoader(spec.loader, *self.patches[name])
        return spec


class _PatchingLoader:
    """The module's own loader, with its patch applied once the module's code ran."""

    def __init__(self, loader, label, fn):
        self._loader, self._label, self._fn = loader, label, fn

    def __getattr__(self, attr):   # get_source, is_package, ... of the real loader
        return getattr(self._loader, attr)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        try:
            self._fn(module)
        except Exception as e:
            raise ImportError("lock-down: %s not applied: %r" % (self._label, e)) from e


def _sockets(socket):
    for attr in ("connect", "connect_ex", "sendto", "bind", "listen"):
        setattr(socket.socket, attr, _refuse)
    socket.create_connection = _refuse
    socket.getaddrinfo = _refuse
    socket.gethostbyname = _refuse


def _open_url(ph):
    ph.open_url = _refuse


def _urlopen(ur):
    ur.urlopen = _refuse


# module -> (what the note calls it, the patch).  pyodide.http and urllib.request cost a few hundred
# ms to import (email, http.client, hashlib): patched when first imported, not at start-up.
PATCHES = {
    "socket": ("socket", _sockets),
    "pyodide.http": ("pyodide.http.open_url", _open_url),
    "urllib.request": ("urllib.request.urlopen", _urlopen),
}


def apply():
    """Patches the modules in PATCHES that are imported already, and puts the finder that
    patches the others on import first in sys.meta_path.  Returns a list of notes for patches
    that could not be applied (or the finder, not installed)."""
    failed, later = [], {}
    for name, (label, fn) in PATCHES.items():
        module = sys.modules.get(name)
        if module is None:
            later[name] = (label, fn)
            continue
        try:
            fn(module)
        except Exception as e:  # reported, never silent
            failed.append("lock-down: %s not applied: %r" % (label, e))
    if later:
        try:
            sys.meta_path.insert(0, _PatchOnImport(later))
        except Exception as e:
            failed.append("lock-down: %s not applied: %r" % (", ".join(l for l, _ in later.values()), e))
    return failed


def hide_js_api(scan=True):
    """Takes the Pyodide JS API (`pyodide_js`: _api, _module, FS, useNodeSockFS, loadPackage, ...)
    out of Python's reach: the JS module is unregistered and its entries leave sys.modules, so
    `import pyodide_js` and `from pyodide_js._api import _nodeSock` fail.  Pyodide's own Python
    reads three things from it at run time (asyncio.run and the WebLoop read
    _api.config.enableRunUntilComplete, the WebLoop schedules with _api.scheduleCallback, pyfetch
    combines signals with _api.abortSignalAny): a stand-in module answers those, with copies or
    the plain functions, and nothing else.  Called by the Node headless host's kernel worker
    (worker/host/sandbox-worker.js) once the kernel loaded.  Returns notes for what could not be
    done, and for any object still leading to the API (_scan_for_api; skipped when `scan` is
    false: the host knows the scan's answer for this kernel's image already, sandbox-worker.js)."""
    import sys
    import types

    try:
        from pyodide.ffi import unregister_js_module

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
            # The loader that imported it keeps the JS object (JsLoader.jsproxy), and Python finds
            # loaders among every object its collector tracks (gc.get_objects): it lets go.
            module = sys.modules.pop(name)
            for loader in {id(x): x for x in (getattr(module, "__loader__", None),
                                               getattr(getattr(module, "__spec__", None), "loader", None))}.values():
                if loader is not None and hasattr(loader, "jsproxy"):
                    loader.jsproxy = None
            del module
        sys.modules["pyodide_js"] = stand
        sys.modules["pyodide_js._api"] = stand_api
        del real, api
    except Exception as e:  # reported, never silent
        return ["lock-down: the Pyodide JS API could not be hidden: %r" % (e,)]

    return _scan_for_api() if scan else []


# What a JS object still leading to the Pyodide JS API has (the API module, its _api or _module).
_API_MARKS = ("useNodeSockFS", "_module", "_nodeSock", "runPythonAsync", "registerJsModule", "pyodide_py")


def _scan_for_api():
    """Notes for any JS object (a JsProxy) referred to by an object Python's garbage collector
    tracks that still leads to the API: every value of every tracked dict, list and tuple, and
    every other tracked object's referents (closure cells, instances, frames) too.  The walk and
    the type test run in C (gc.get_referents, map, itertools.compress), and JsProxy's own check
    once per type seen: isinstance(v, JsProxy) runs JsProxy's metaclass, Python code, and once per
    value it was the bulk of a kernel's lock-down.  A type the check cannot answer for counts as
    a JsProxy type: its objects are then asked for the marks."""
    import gc
    from itertools import compress

    from pyodide.ffi import JsProxy

    def is_proxy_type(t):
        try:
            return issubclass(t, JsProxy)
        except Exception:
            return True

    gc.collect()   # what no one holds any more: neither Python code nor this scan can see it then
    referents = gc.get_referents(*gc.get_objects())
    proxy_types = {t for t in set(map(type, referents)) if is_proxy_type(t)}
    if not proxy_types:
        return []
    proxies = {id(v): v for v in compress(referents, map(proxy_types.__contains__, map(type, referents)))}
    del referents
    for v in proxies.values():
        try:
            found = [m for m in _API_MARKS if hasattr(v, m)]
        except Exception:
            found = []
        if found:
            return ["lock-down: the Pyodide JS API is still reachable from Python (%s)" % ", ".join(found)]
    return []
