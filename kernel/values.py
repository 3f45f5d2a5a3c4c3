"""values -- what a run shows besides its output: the cell's value and ``display(obj)``.

A value or a displayed object becomes a MIME bundle, Jupyter's way: ``text/plain`` (its repr, cut
at the stream cap, 8,000 characters), and what its own methods offer — ``text/html`` from
``_repr_html_``, ``text/markdown`` from ``_repr_markdown_``, ``image/png`` and ``image/jpeg``
(base64) from ``_repr_png_`` and ``_repr_jpeg_``, ``image/svg+xml`` from ``_repr_svg_``,
``application/json`` from ``_repr_json_`` (or the same keys from ``_repr_mimebundle_``) — plus
``application/json`` (the value itself) when it is plainly JSON: dicts with string keys, lists, strings, finite numbers, booleans and None,
whose JSON text fits the same cap as text/plain.  A ``_repr_*_`` that raises is left out with one
line on stderr (the object's own fault, shown where the user looks).

Bounds, the orchestrator's (docs/api.md, the run object), so a result always fits its body limit:
the rich parts of one bundle (every entry but text/plain, as JSON text) at most 256 KiB, and of a
run's displays and value together at most 1 MiB; a bundle past either is kept as text/plain only,
and the run says so (``end_run``'s text-only list; the worker words the note).

``display(*objs)`` is put in every chat's namespace: each call sends its bundles to the worker at
once (in order, at most 20 per run; the rest are counted, and the worker words the note), and the
run's result lists them.  Which value a cell has (its last statement, when an expression) is
execute.py's; this module only turns objects into bundles.
"""
import base64
import json
import sys

from . import output

BUNDLE_RICH = 256 << 10   # characters of one bundle's rich parts, as JSON text
RUN_RICH = 1 << 20        # of a run's value and displays together
_REPRS = (("text/html", "_repr_html_"), ("text/markdown", "_repr_markdown_"),
          ("image/png", "_repr_png_"), ("image/jpeg", "_repr_jpeg_"),
          ("image/svg+xml", "_repr_svg_"), ("application/json", "_repr_json_"))
_TEXT = ("text/html", "text/markdown", "image/png", "image/jpeg", "image/svg+xml")
_KEYS = ("text/plain",) + _TEXT + ("application/json",)
_run = {"limit": 20, "cap": 8000, "shown": [], "dropped": 0, "rich": 0, "text_only": [],
        "cleared": 0}


def _host():
    try:
        import cerea_host
        return cerea_host
    except ImportError:
        return None


def _plain_json(obj, depth=0):
    if depth > 32:
        return False
    if obj is None or type(obj) in (str, bool, int):
        return True
    if type(obj) is float:
        return obj == obj and obj not in (float("inf"), float("-inf"))
    if type(obj) is list:
        return all(_plain_json(x, depth + 1) for x in obj)
    if type(obj) is dict:
        return all(type(k) is str and _plain_json(v, depth + 1) for k, v in obj.items())
    return False


def _say(what, e):
    try:
        sys.stderr.write("display: %s failed: %s: %s\n" % (what, type(e).__name__, e))
    except Exception:
        pass


def _rich(key, data):
    """A bundle entry as text, or None when it is not usable."""
    if data is None:
        return None
    if key in ("image/png", "image/jpeg"):
        if isinstance(data, (bytes, bytearray, memoryview)):
            data = base64.b64encode(bytes(data)).decode("ascii")
        elif not isinstance(data, str):
            return None
    elif not isinstance(data, str):
        return None
    return data


def _bounded(out, label):
    """out within the bounds: its rich parts dropped (and said) when they are too big."""
    rich = {k: v for k, v in out.items() if k != "text/plain"}
    if not rich:
        return out
    size = len(json.dumps(rich, ensure_ascii=False))
    if size > BUNDLE_RICH or _run["rich"] + size > RUN_RICH:
        _run["text_only"].append({"what": label, "kib": -(-size // 1024), "run": size <= BUNDLE_RICH})
        return {"text/plain": out["text/plain"]}
    _run["rich"] += size
    return out


def _clean(plain, offered, obj=None):
    """A bundle from a repr and the entries an object offered, each checked."""
    out = {"text/plain": str(plain)[:_run["cap"]]}
    for key in _TEXT:
        entry = _rich(key, offered.get(key))
        if entry is not None:
            out[key] = entry
    for value in ([offered["application/json"]] if "application/json" in offered else []) + [obj]:
        if value is not None and _plain_json(value):
            try:
                if len(json.dumps(value, allow_nan=False, ensure_ascii=False)) <= _run["cap"]:
                    out["application/json"] = value
                    break
            except (ValueError, TypeError, RecursionError):
                pass
    return out


def bundle(obj):
    """The MIME bundle of obj (a dict of str → str, and application/json → the value)."""
    try:
        plain = repr(obj)
    except Exception as e:   # the object's repr itself is broken
        plain = "<%s object (repr failed: %s: %s)>" % (type(obj).__name__, type(e).__name__, e)
    offered = {}
    meth = getattr(type(obj), "_repr_mimebundle_", None)
    if meth is not None:
        try:
            got = obj._repr_mimebundle_(include=None, exclude=None)
            if isinstance(got, tuple):
                got = got[0]
            if isinstance(got, dict):
                offered.update({k: v for k, v in got.items() if k in _KEYS and k != "text/plain"})
        except Exception as e:
            _say("_repr_mimebundle_", e)
    for key, name in _REPRS:
        if key in offered or getattr(type(obj), name, None) is None:
            continue
        try:
            offered[key] = getattr(obj, name)()
        except Exception as e:
            _say(name, e)
    return _clean(plain, offered, obj)


def value(obj):
    """The bundle of the cell's value, within what the run's displays left."""
    return _bounded(bundle(obj), "the value")


def begin_run(limit, cap):
    _run.update(limit=int(limit), cap=int(cap), shown=[], dropped=0, rich=0, text_only=[],
                cleared=0)


def end_run():
    """(bundles shown, bundles dropped, [{what, kib, run}] shown as text only, clear_output
    calls) of the run."""
    out = _run["shown"], _run["dropped"], _run["text_only"], _run["cleared"]
    _run.update(shown=[], dropped=0, rich=0, text_only=[], cleared=0)
    return out


def clear_asked():
    """IPython's clear_output(): a run's output stays as printed; counted for the run's note."""
    _run["cleared"] += 1


def display(*objs, raw=False, **_ignored):
    """Jupyter's display(): each object's bundle is shown under the run (raw=True: the objects
    are bundles already)."""
    for obj in objs:
        if len(_run["shown"]) >= _run["limit"]:
            _run["dropped"] += 1
            continue
        index = len(_run["shown"])
        if raw and isinstance(obj, dict):
            data = _clean(obj.get("text/plain", ""), obj)
        else:
            data = bundle(obj)
        data = _bounded(data, "display %d" % (index + 1))
        _run["shown"].append(data)
        host = _host()
        if host is not None:
            try:
                output.flush_live(True)   # what was printed before comes first
                host.display(index, json.dumps(data))
            except Exception as e:   # a bundle that will not serialise: shown in the result only
                _say("sending", e)
