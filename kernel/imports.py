"""imports -- what a run imports, and what the person reads when an import cannot work here.

``scan(code)`` lists the top-level modules the code imports (Pyodide's find_imports; call it only
after the code compiled: on a syntax error find_imports returns nothing, silently).  The worker
maps them to packages of the served lock file and loads those before the run.  ``set_lacking``
receives the guide's packages this deployment does not ship (from build/www/pyodide/
deployment.json, written by scripts/sync_pyodide_wheels.mjs).  ``note_for(exc)`` turns a
ModuleNotFoundError for one of them into a note in plain words for the person at the page: what
is not available here and what the code can do instead.  The reason deployment.json gives is
meant for the operator (how to add the package) and is left out of it.  ``capture_note(exc)``
words a figure capture that could not start, and is None when the cause is a lacking matplotlib
that the code itself imports (the import's own note says it).  The exception itself stays the
ordinary ModuleNotFoundError.  It loads nothing and installs nothing.
"""
import re

_lacking = {}   # import name -> package name
_MPL = re.compile(r"matplotlib|pylab|seaborn")

# What code can use instead, from Python's standard library (always there).
_INSTEAD = {
    "numpy": "plain Python lists with the math and statistics modules",
    "pandas": "the csv module (and openpyxl for Excel files, when this deployment has it)",
    "matplotlib": None,
    "seaborn": None,
    "python-docx": "a plain text, CSV or HTML file in /mnt/output",
    "python-pptx": "a plain text or HTML file in /mnt/output",
    "reportlab": "a plain text or HTML file in /mnt/output",
    "micropip": None,
}
_CANNOT = {
    "matplotlib": "charts cannot be drawn here",
    "seaborn": "charts cannot be drawn here",
    "micropip": "packages cannot be installed here",
}


def set_lacking(items):
    """items: [{name, imports: [...], reason}] (the reason is the operator's, not shown)."""
    _lacking.clear()
    for it in items or []:
        for imp in it.get("imports") or [it["name"]]:
            _lacking[imp] = it["name"]


def scan(code):
    try:
        from pyodide.code import find_imports
        return sorted(set(find_imports(code)))
    except Exception:
        return []


def mentions_matplotlib(code):
    return bool(_MPL.search(code))


def _lacking_package(exc):
    if not isinstance(exc, ModuleNotFoundError):
        return None
    return _lacking.get((exc.name or "").split(".")[0])


def note_for(exc):
    pkg = _lacking_package(exc)
    if pkg is None:
        return None
    note = "%s is not available on this deployment: it is not installed and cannot be installed from code" % pkg
    if _CANNOT.get(pkg):
        note += ", so %s" % _CANNOT[pkg]
    if _INSTEAD.get(pkg):
        note += ". Instead, use %s" % _INSTEAD[pkg]
    return note + "."


def capture_note(exc):
    """The note for a figure capture that could not start (exc: why), or None when it is a
    lacking matplotlib: then nothing can draw a chart, and a failed import explains itself."""
    pkg = _lacking_package(exc)
    if pkg is not None:
        return ("figure capture could not start: %s is not available on this deployment, so no "
                "chart can appear from this run" % pkg)
    return ("figure capture could not start in this run (%s: %s): charts do not appear by "
            "themselves; save a chart with savefig to /mnt/output to get it back"
            % (type(exc).__name__, exc))
