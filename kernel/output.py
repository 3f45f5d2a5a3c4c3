"""output -- the Python half of output capture.

sys.stdout and sys.stderr become block-buffered text streams over file descriptors 1 and 2 (64 KiB
buffers), so a loop of 1e5 prints costs about what writing to a StringIO costs: the worker's write
handler (worker/core.js, OutputSink) is called once per full buffer, not once per line, keeps the
first bytes up to the cap and counts the rest.  ``flush()`` runs at the end of every run, so a
partial last line is delivered too.  The cap itself (8,000 characters per stream), the truncation
flags and their notes live in the worker's sink: this module never drops output.
It does not capture anything written by JS or by the worker itself.
"""
import io
import sys

BUFFER = 1 << 16
_streams = {}


def _make(fd):
    raw = io.FileIO(fd, "w", closefd=False)
    buf = io.BufferedWriter(raw, buffer_size=BUFFER)
    return io.TextIOWrapper(buf, encoding="utf-8", errors="backslashreplace",
                            line_buffering=False, write_through=False)


def install():
    """Create the two streams (once) and make them sys.stdout / sys.stderr."""
    if not _streams:
        _streams["stdout"] = _make(1)
        _streams["stderr"] = _make(2)
    restore()


def restore():
    """Put our streams back in case the previous run replaced sys.stdout (redirect_stdout left
    open, an assignment).  Called before each run."""
    sys.stdout = _streams["stdout"]
    sys.stderr = _streams["stderr"]


def flush():
    """Flush whatever the run wrote, including a trailing partial line.  A stream the user code
    closed or replaced is flushed through ours anyway; errors here never hide the run's result."""
    for s in (sys.stdout, sys.stderr, _streams.get("stdout"), _streams.get("stderr")):
        try:
            if s is not None and not s.closed:
                s.flush()
        except Exception:
            pass
