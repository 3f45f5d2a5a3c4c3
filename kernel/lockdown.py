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
