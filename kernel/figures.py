"""figures -- matplotlib capture: plt.show() and the end-of-run sweep.

``install(plt, Figure)`` replaces ``plt.show`` with "save every open figure as figure-<n>.png in
/mnt/output, then close it", and wraps ``Figure.savefig`` so a figure the code saved itself is
marked and left out of the sweep (its own file is its card; it is closed, not saved again).
``end_run()`` sweeps the figures still open when the run ends, even after an error.  n restarts at
1 every run; past the cap (20) the rest are closed unsaved and counted, with a note on stderr.
Works against any object with pyplot's registry shape (get_fignums, figure(num), close(fig)) so
a test double can exercise the logic when real matplotlib is absent.  It does not import
matplotlib itself (runner.start_matplotlib does) and does not decide what is listed (outputs_diff).
"""
import os
import sys

OUTPUT = "/mnt/output"
MARK = "_cerea_saved_by_code"

_plt = [None]
_orig_savefig = [None]
_run = {"n": 0, "dropped": 0, "cap": 20, "swept": []}


def install(plt, figure_cls):
    """Patch plt.show and Figure.savefig (once per interpreter)."""
    if _plt[0] is plt:
        return
    orig = figure_cls.savefig
    if getattr(orig, "_cerea_wrapped", False):
        orig = orig._cerea_orig

    def savefig(self, *args, **kwargs):
        try:
            setattr(self, MARK, True)
        except Exception:
            pass
        return orig(self, *args, **kwargs)
    savefig._cerea_wrapped = True
    savefig._cerea_orig = orig
    figure_cls.savefig = savefig
    _orig_savefig[0] = orig

    def show(*args, **kwargs):
        sweep()
    plt.show = show
    _plt[0] = plt


def installed():
    return _plt[0] is not None


def begin_run(cap=20):
    _run.update(n=0, dropped=0, cap=int(cap), swept=[])


def sweep():
    """Save every open figure not saved by the code as figure-<n>.png, close all of them."""
    plt = _plt[0]
    if plt is None:
        return
    for num in list(plt.get_fignums()):
        fig = plt.figure(num)
        try:
            if getattr(fig, MARK, False):
                continue
            if _run["n"] >= _run["cap"]:
                _run["dropped"] += 1
                continue
            _run["n"] += 1
            name = "figure-%d.png" % _run["n"]
            os.makedirs(OUTPUT, exist_ok=True)
            _orig_savefig[0](fig, os.path.join(OUTPUT, name), format="png")
            _run["swept"].append(name)
        finally:
            plt.close(fig)


def end_run():
    """Sweep what is still open; write the dropped note on stderr.  Returns (swept, dropped)."""
    try:
        sweep()
    finally:
        if _run["dropped"]:
            sys.stderr.write("[%d figure(s) dropped: at most %d figures are saved per run]\n"
                             % (_run["dropped"], _run["cap"]))
    return list(_run["swept"]), _run["dropped"]


def uninstall():
    _plt[0] = None
