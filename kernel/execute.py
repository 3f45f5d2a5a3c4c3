"""execute -- compile and run one cell in the chat's persistent namespace.

Each run is compiled as ``<cell-N>`` (N counts runs of this interpreter) with top-level await
allowed, and its source registered in linecache, so tracebacks show the user's own line numbers
and lines, also for functions defined by an earlier cell.  Jupyter's rule gives the cell a value:
when its last statement is an expression (not ended by ``;``), that expression is compiled apart
and evaluated after the rest, and ``run`` returns its value (``NO_VALUE`` otherwise).

User code runs between the host's arm() and disarm() (the window in which the worker hands Python
the interrupt buffer's signals: KeyboardInterrupt, the output flush).  A cell with top-level await
is driven step by step, armed only while its own code runs: while it awaits, the worker's event
loop runs Pyodide's callbacks, and a signal read there would raise outside the user's code.  Before
each await its output is flushed (the worker hands it on when due), and an interrupt that comes
while it awaits (``interrupt_awaiting``, called by the worker on the controller's interrupt
message) cancels the run's task: the cancellation reaches the cell as KeyboardInterrupt at its
await, whatever it awaits (asyncio.sleep, gather, a JS promise).  ``asyncio.run(main())`` from a
cell's synchronous code (Pyodide runs it to completion by suspending the cell, JSPI) is driven the
same way: ``main`` armed only while it runs, flushed before each await, and an interrupt cancels
its task (``install``).

Errors become {type, message, traceback}: the traceback holds the user's frames only (the kernel's
are cut).  The namespace lives until ``reset()`` (chat switch); it holds ``display``.  It does not
capture output, load packages or look at files.
"""
import ast
import asyncio
import builtins
import inspect
import linecache
import traceback
import types

from . import output, values

KERNEL_DIR = "/opt/cerea/"
NO_VALUE = object()
_ns = {}
_count = [0]
_live = {"task": None, "interrupt": False, "inner": []}   # the run's asyncio task; an interrupt
                                                         # owed; tasks of asyncio.run(), innermost last
_orig = {}
_FLAGS = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT


class Cell:
    __slots__ = ("body", "last", "filename")

    def __init__(self, body, last, filename):
        self.body, self.last, self.filename = body, last, filename


def reset():
    _ns.clear()
    _ns.update({"__name__": "__main__", "__builtins__": builtins, "__doc__": None,
                "display": values.display})


reset()


def namespace():
    return _ns


def _suppressed(lines, node):
    """A trailing ``;`` after the last expression: Jupyter shows no value."""
    rest = lines[node.end_lineno - 1][node.end_col_offset:] + "".join(lines[node.end_lineno:])
    return rest.strip().startswith(";")


def compile_cell(code):
    """Returns a Cell; raises SyntaxError (compile's own) when it does not parse."""
    _count[0] += 1
    filename = "<cell-%d>" % _count[0]
    lines = code.splitlines(True)
    linecache.cache[filename] = (len(code), None, lines, filename)
    tree = compile(code, filename, "exec", flags=_FLAGS | ast.PyCF_ONLY_AST, dont_inherit=True)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr) and not _suppressed(lines, tree.body[-1]):
        expr = ast.Expression(tree.body.pop().value)
        last = compile(expr, filename, "eval", flags=_FLAGS, dont_inherit=True)
    body = compile(tree, filename, "exec", flags=_FLAGS, dont_inherit=True)
    return Cell(body, last, filename)


@types.coroutine
def _armed(coro, host, rearm=False):
    """Drive a coroutine, armed only while it runs (not while it awaits); rearm: armed again at
    the end, for the armed code it runs inside (asyncio.run from a cell)."""
    value, exc = None, None
    try:
        while True:
            host.arm()
            try:
                step = coro.throw(exc) if exc is not None else coro.send(value)
            except StopIteration as e:
                return e.value
            finally:
                host.disarm()
            value, exc = None, None
            output.flush_live()
            try:
                value = yield step
            except BaseException as e:   # thrown into the task (a cancel): to the cell
                exc = e
                if isinstance(e, asyncio.CancelledError) and _live["interrupt"]:
                    _live["interrupt"] = False
                    task = asyncio.current_task()
                    if task is not None:
                        task.uncancel()
                    exc = KeyboardInterrupt()
    finally:
        if rearm:
            host.arm()


async def _part(codeobj, host, mode):
    if codeobj.co_flags & inspect.CO_COROUTINE:
        return await _armed(eval(codeobj, _ns), host)
    host.arm()
    try:
        return eval(codeobj, _ns) if mode == "eval" else exec(codeobj, _ns)
    finally:
        host.disarm()


async def run(cell, host):
    """Run the cell → its value (NO_VALUE when its last statement is no expression)."""
    try:
        _live.update(task=asyncio.current_task(), interrupt=False, inner=[])
    except RuntimeError:   # no running loop (plain CPython tests)
        _live.update(task=None, interrupt=False, inner=[])
    try:
        await _part(cell.body, host, "exec")
        if cell.last is None:
            return NO_VALUE
        return await _part(cell.last, host, "eval")
    finally:
        _live.update(task=None, interrupt=False, inner=[])


def interrupt_awaiting():
    """The controller's interrupt, read by the worker while the run awaits → 'woken' (its task is
    cancelled: KeyboardInterrupt at the cell's await), 'stuck' (a step of the task is suspended
    inside a call: nothing reaches it) or 'none' (no cell awaits)."""
    inner = [t for t in _live["inner"] if not t.done()]
    task = inner[-1] if inner else _live["task"]
    if task is None or task.done():
        return "none"
    if not inner and asyncio.current_task(task.get_loop()) is not None:
        return "stuck"
    _live["interrupt"] = True
    task.cancel()
    return "woken"


class _Interrupted:
    """A KeyboardInterrupt carried out of asyncio.run's task as its value: asyncio re-raises a
    KeyboardInterrupt that leaves a task into the event loop (here a JS callback: an error in the
    worker), and any exception that crosses into JS is printed on stderr by Pyodide."""
    def __init__(self, exc):
        self.exc = exc


async def _main_of_run(main, host):
    task = asyncio.current_task()
    _live["inner"].append(task)
    try:
        return await _armed(main, host, rearm=True)
    except KeyboardInterrupt as e:
        return _Interrupted(e)
    finally:
        _live["inner"].remove(task)


def _run(main, *args, **kwargs):
    """asyncio.run: main driven as a cell's own coroutine is (see the module's doc)."""
    host = _host()
    if host is None or not asyncio.iscoroutine(main):
        return _orig["asyncio.run"](main, *args, **kwargs)
    out = _orig["asyncio.run"](_main_of_run(main, host), *args, **kwargs)
    if isinstance(out, _Interrupted):
        raise out.exc
    return out


def _host():
    try:
        import cerea_host
        return cerea_host
    except ImportError:
        return None


def install():
    """asyncio.run through _run (again before each run: user code may rebind it)."""
    if "asyncio.run" not in _orig:
        _orig["asyncio.run"] = asyncio.run
    asyncio.run = _run


def _drop_kernel_frames(te, seen):
    """The user's frames only, in this exception and the ones chained to it."""
    while te is not None and id(te) not in seen:
        seen.add(id(te))
        te.stack = traceback.StackSummary.from_list(
            [f for f in te.stack if not f.filename.startswith(KERNEL_DIR) and "://" not in f.filename])
        for sub in getattr(te, "exceptions", None) or ():
            _drop_kernel_frames(sub, seen)
        _drop_kernel_frames(te.__context__, seen)
        te = te.__cause__


def format_error(exc):
    """{type, message, traceback} for an exception raised by (or while compiling) user code."""
    tb = exc.__traceback__
    while tb is not None and not tb.tb_frame.f_code.co_filename.startswith("<cell-"):
        tb = tb.tb_next
    try:
        if isinstance(exc, SyntaxError):
            text = "".join(traceback.format_exception_only(type(exc), exc))
        else:
            te = traceback.TracebackException(type(exc), exc, tb, capture_locals=False)
            _drop_kernel_frames(te, set())
            text = "".join(te.format())
    except Exception as e:  # formatting must not take the result down (MemoryError)
        text = "%s: %s (traceback unavailable: %r)" % (type(exc).__name__, exc, e)
    if isinstance(exc, SyntaxError):
        message = "%s (line %s)" % (exc.msg, exc.lineno)
    else:
        message = str(exc)
    return {"type": type(exc).__name__, "message": message, "traceback": text}
