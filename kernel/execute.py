"""execute -- compile and run one cell in the chat's persistent namespace.

Each run is compiled as ``<cell-N>`` (N counts runs of this interpreter) with top-level await
allowed, and its source registered in linecache, so tracebacks show the user's own line numbers
and lines, also for functions defined by an earlier cell.  Errors become {type, message,
traceback}: the traceback starts at the first frame of user code (the kernel's frames are cut).
The namespace lives until ``reset()`` (chat switch).  It does not capture output, load packages or
look at files.
"""
import ast
import builtins
import inspect
import linecache
import traceback

_ns = {}
_count = [0]


def reset():
    _ns.clear()
    _ns.update({"__name__": "__main__", "__builtins__": builtins, "__doc__": None})


reset()


def namespace():
    return _ns


def compile_cell(code):
    """Returns (code_object, filename); raises SyntaxError (compile's own) when it does not parse."""
    _count[0] += 1
    filename = "<cell-%d>" % _count[0]
    lines = code.splitlines(True)
    linecache.cache[filename] = (len(code), None, lines, filename)
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    return compile(code, filename, "exec", flags=flags, dont_inherit=True), filename


async def run(codeobj):
    if codeobj.co_flags & inspect.CO_COROUTINE:
        await eval(codeobj, _ns)
    else:
        exec(codeobj, _ns)


def format_error(exc):
    """{type, message, traceback} for an exception raised by (or while compiling) user code."""
    tb = exc.__traceback__
    while tb is not None and not tb.tb_frame.f_code.co_filename.startswith("<cell-"):
        tb = tb.tb_next
    try:
        if isinstance(exc, SyntaxError):
            text = "".join(traceback.format_exception_only(type(exc), exc))
        else:
            text = "".join(traceback.format_exception(type(exc), exc, tb))
    except Exception as e:  # formatting must not take the result down (MemoryError)
        text = "%s: %s (traceback unavailable: %r)" % (type(exc).__name__, exc, e)
    if isinstance(exc, SyntaxError):
        message = "%s (line %s)" % (exc.msg, exc.lineno)
    else:
        message = str(exc)
    return {"type": type(exc).__name__, "message": message, "traceback": text}
