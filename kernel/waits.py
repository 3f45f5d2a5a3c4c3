"""waits -- a run's blocking waits that a Stop must end at once: ``time.sleep`` and ``input()``.

time.sleep(s): Pyodide's own either busy-waits (Node) or suspends the WebAssembly stack and returns
to the worker's event loop (browsers with JSPI), where an interrupt cannot reach it, and where a
second attempt of the run can meet a kernel whose first one is still suspended (a Pyodide fatal
error).  Here the worker blocks in ``Atomics.wait`` on the interrupt buffer (worker/control.js)
with the time as its timeout: a cancel or a newer attempt writes SIGINT there and wakes it, and
KeyboardInterrupt is raised at the sleep.  Output written before the sleep is
delivered first (and any that comes due while it sleeps: the worker wakes to hand it on).

asyncio.sleep(s) stays asyncio's own (other tasks go on meanwhile): while the run awaits, the
worker's event loop is idle and reads the controller's interrupt message at once; execute.py then
cancels the run's task and the cell gets KeyboardInterrupt at its await.

input(prompt): the prompt goes to stdout, then the worker posts an input request and blocks on the
interrupt buffer until the controller writes the answer (or EOF: past the input wait, or where
the page cannot share memory, EOFError).  The answer is echoed to stdout, as a terminal shows it.

Installed once by runner.init and again before each run (user code may rebind them).  Outside a
run these still work (a plain timed wait, EOFError for input).  It does not decide how long input()
may wait (the supervisor does) and raises no KeyboardInterrupt of its own: the worker raises the
pending one (Pyodide's checkInterrupt).
"""
import builtins
import math
import operator
import sys
import time

from . import output

_orig = {}


def _host():
    try:
        import cerea_host
        return cerea_host
    except ImportError:
        return None


def _seconds(secs):
    """time.sleep's own argument rules: a real number (int, float, __index__), not NaN, not < 0."""
    if isinstance(secs, float):
        s = secs
    else:
        try:
            s = operator.index(secs)
        except TypeError:
            raise TypeError("'%s' object cannot be interpreted as an integer or float"
                            % type(secs).__name__) from None
    if math.isnan(s):
        raise ValueError("Invalid value NaN (not a number)")
    if s < 0:
        raise ValueError("sleep length must be non-negative")
    return s


def sleep(secs):
    s = _seconds(secs)
    host = _host()
    if host is None or not host.can_wait():
        output.flush_live(True)   # no wait to wake for it: what came before goes out first
        if host is not None:
            # CPython's own (a busy wait), not Pyodide's, which with JSPI would suspend the cell
            # (see above): the same wait in every engine, and never a suspended run that a second
            # attempt of it could meet.
            return _orig["time.sleep.c"](s)
        return _orig["time.sleep"](s)
    output.flush_live()
    if host.sleep(s * 1000.0):   # woken by an interrupt (the worker took the signal)
        raise KeyboardInterrupt


def read_input(prompt=""):
    out = sys.stdout
    if prompt != "":
        try:
            out.write(str(prompt))
            out.flush()
        except Exception:
            pass
    host = _host()
    text = None
    if host is not None:
        output.flush_live(True)
        text = host.ask(str(prompt))   # None: EOF; False: interrupted (the worker took the signal)
        if text is False:
            raise KeyboardInterrupt
    if text is None:
        raise EOFError("EOF when reading a line")
    if text.endswith("\n"):
        text = text[:-1]
        if text.endswith("\r"):
            text = text[:-1]
    try:
        out.write(text + "\n")
    except Exception:
        pass
    return text


def install():
    """Put the interruptible waits in place (keeping the originals for the fallback)."""
    if not _orig:
        _orig["time.sleep"] = time.sleep
        webloop = sys.modules.get("pyodide.webloop")
        _orig["time.sleep.c"] = getattr(webloop, "_orig_sleep", time.sleep)
    time.sleep = sleep
    builtins.input = read_input
