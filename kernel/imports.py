"""imports -- what a run imports, and why an import may fail here.

``scan(code)`` lists the top-level modules the code imports (Pyodide's find_imports; call it only
after the code compiled: on a syntax error find_imports returns nothing, silently).  The worker
maps them to packages of the served lock file and loads those before the run.  ``set_lacking``
receives the guide's packages this deployment does not ship (from build/www/pyodide/
deployment.json, written by scripts/sync_pyodide_wheels.mjs); ``note_for(exc)`` turns a
ModuleNotFoundError for one of them into a note naming the reason.  The exception itself stays
the ordinary ModuleNotFoundError.  It loads nothing and installs nothing.
"""
import re

_lacking = {}   # import name -> (package name, reason)
_MPL = re.compile(r"matplotlib|pylab|seaborn")


def set_lacking(items):
    """items: [{name, imports: [...], reason}]"""
    _lacking.clear()
    for it in items or []:
        for imp in it.get("imports") or [it["name"]]:
            _lacking[imp] = (it["name"], it.get("reason") or "not shipped by this deployment")


def scan(code):
    try:
        from pyodide.code import find_imports
        return sorted(set(find_imports(code)))
    except Exception:
        return []


def mentions_matplotlib(code):
    return bool(_MPL.search(code))


def note_for(exc):
    if not isinstance(exc, ModuleNotFoundError):
        return None
    top = (exc.name or "").split(".")[0]
    hit = _lacking.get(top)
    if hit is None:
        return None
    return "%s: the package %s is not available in this deployment (%s)" % (top, hit[0], hit[1])
