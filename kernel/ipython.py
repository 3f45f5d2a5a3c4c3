"""ipython -- a small ``IPython.display`` for Jupyter habits: ``from IPython.display import
display, HTML`` works, and so do ``import IPython; IPython.display.display(...)`` and
``IPython.core.display``.  IPython itself is not here; these modules are made in memory
(``install``, once, by runner.init) and map onto the run's MIME bundles (values.py):

    display(*objs, raw=False, display_id=None, ...)  values.display; with display_id a handle
                                  whose update() and display() show the object again (a run's
                                  displays are a list: nothing is replaced in place)
    HTML, Markdown, SVG, JSON     text/html, text/markdown, image/svg+xml, application/json;
                                  each with a text/plain fallback (Markdown's is its source,
                                  JSON's the indented text, the others IPython's own
                                  "<IPython.core.display.HTML object>")
    Image(data | filename, format=None)   image/png or image/jpeg (base64), from bytes or a file
    display_html / display_markdown / display_svg / display_json (raw=True: the strings are the
                                  data)
    clear_output(wait=False)      nothing: a run's output is kept as it was printed; the run is
                                  told so once in its notes (values.clear_asked; the worker words
                                  it, notes.js clear_output)
    get_ipython()                 None (no IPython shell: libraries that look for one fall back)

``url=`` cannot be fetched (no network from the sandbox): ValueError.  Nothing else of IPython
(magics, the shell, widgets) is offered.
"""
import base64
import json
import sys
import types

from . import values


def _read(filename, binary):
    with open(filename, "rb" if binary else "r") as f:
        return f.read()


class DisplayObject:
    """What the display classes share: data from `data` or a file; no URL fetching here."""
    _binary = False

    def __init__(self, data=None, url=None, filename=None, metadata=None):
        if url is not None:
            raise ValueError("%s(url=...): nothing can be fetched here (the sandbox has no network);"
                             " pass the data or a file's name" % type(self).__name__)
        if filename is not None:
            data = _read(filename, self._binary)
        self.data = data
        self.filename = filename
        self.metadata = metadata or {}

    def __repr__(self):
        return "<IPython.core.display.%s object>" % type(self).__name__


class TextDisplayObject(DisplayObject):
    def __init__(self, data=None, url=None, filename=None, metadata=None):
        super().__init__(data, url, filename, metadata)
        if self.data is not None and not isinstance(self.data, str):
            self.data = str(self.data)


class HTML(TextDisplayObject):
    def _repr_html_(self):
        return self.data or ""


class Markdown(TextDisplayObject):
    def _repr_markdown_(self):
        return self.data or ""

    def __repr__(self):
        return self.data or ""


class SVG(TextDisplayObject):
    def _repr_svg_(self):
        return self.data or ""


class JSON(DisplayObject):
    def __init__(self, data=None, url=None, filename=None, expanded=False, metadata=None,
                 root="root", **kwargs):
        super().__init__(data, url, filename, metadata)
        if isinstance(self.data, (str, bytes)):
            self.data = json.loads(self.data)

    def _repr_json_(self):
        return self.data

    def __repr__(self):
        try:
            return json.dumps(self.data, indent=2, ensure_ascii=False, default=repr)
        except (TypeError, ValueError):
            return repr(self.data)


_MAGIC = ((b"\x89PNG\r\n\x1a\n", "png"), (b"\xff\xd8", "jpeg"))


class Image(DisplayObject):
    _binary = True

    def __init__(self, data=None, url=None, filename=None, format=None, embed=None, width=None,
                 height=None, retina=False, unconfined=False, metadata=None, alt=None):
        if isinstance(data, str) and filename is None and url is None:
            filename, data = data, None   # IPython's Image("chart.png")
        super().__init__(data, url, filename, metadata)
        if isinstance(self.data, str):
            self.data = base64.b64decode(self.data)
        fmt = (format or "").lower().replace("jpg", "jpeg")
        if not fmt and filename:
            fmt = filename.rsplit(".", 1)[-1].lower().replace("jpg", "jpeg")
        if fmt not in ("png", "jpeg"):
            fmt = next((f for magic, f in _MAGIC if bytes(self.data or b"").startswith(magic)), "png")
        self.format = fmt
        self.width, self.height, self.alt = width, height, alt

    def _repr_png_(self):
        return self.data if self.format == "png" else None

    def _repr_jpeg_(self):
        return self.data if self.format == "jpeg" else None


class DisplayHandle:
    """display(obj, display_id=...)'s handle: the run's displays are a list, so an update shows
    the object again below the first."""

    def __init__(self, display_id=None):
        self.display_id = display_id

    def display(self, obj, **kwargs):
        display(obj, **kwargs)

    def update(self, obj, **kwargs):
        display(obj, **kwargs)

    def __repr__(self):
        return "<DisplayHandle display_id=%s>" % self.display_id


def display(*objs, include=None, exclude=None, metadata=None, transient=None, display_id=None,
            raw=False, clear=False, **kwargs):
    if clear:
        clear_output()
    values.display(*objs, raw=raw)
    if display_id:
        return DisplayHandle(None if display_id is True else display_id)
    return None


def _raw_display(cls):
    def show(*objs, raw=False, **kwargs):
        display(*(cls(o) if raw else o for o in objs))
    return show


display_html = _raw_display(HTML)
display_markdown = _raw_display(Markdown)
display_svg = _raw_display(SVG)
display_json = _raw_display(JSON)


def clear_output(wait=False):
    values.clear_asked()


def get_ipython():
    return None


def install():
    """IPython, IPython.display, IPython.core, IPython.core.display and IPython.core.getipython
    in sys.modules (user code cannot tell them from a real import)."""
    disp = types.ModuleType("IPython.display", "IPython.display as this sandbox offers it")
    for name in ("display", "HTML", "Markdown", "SVG", "JSON", "Image", "DisplayObject",
                 "TextDisplayObject", "DisplayHandle", "display_html", "display_markdown",
                 "display_svg", "display_json", "clear_output"):
        setattr(disp, name, globals()[name])
    getip = types.ModuleType("IPython.core.getipython")
    getip.get_ipython = get_ipython
    core = types.ModuleType("IPython.core")
    core.display = disp
    core.getipython = getip
    top = types.ModuleType("IPython", "A small IPython.display (cerea-sandbox): no shell, no magics")
    top.display = disp
    top.core = core
    top.get_ipython = get_ipython
    top.__version__ = "0+cerea.display"
    top.__path__ = []   # a package, so that `import IPython.display` resolves in sys.modules
    core.__path__ = []
    for name, mod in (("IPython", top), ("IPython.display", disp), ("IPython.core", core),
                      ("IPython.core.display", disp), ("IPython.core.getipython", getip)):
        sys.modules[name] = mod
