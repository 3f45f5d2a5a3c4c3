"""output -- the Python half of output capture.

sys.stdout and sys.stderr become block-buffered text streams over file descriptors 1 and 2 (64 KiB
buffers), so a loop of 1e5 prints costs about what writing to a StringIO costs: the worker's write
handler (worker/output.js, OutputSink) is called once per full buffer, not once per line, keeps the
first characters up to the cap, counts the rest, and hands the kept text on as the run goes.

Live output without Python's cooperation: while a run executes, the controller posts a FLUSH
signal (SIGUSR1) into the interrupt buffer every ~50 ms; Pyodide turns it into this module's
signal handler, which flushes both streams and lets the worker hand the text on (``flush_live``).
The same happens before a sleep and an input() (kernel/waits.py) and at the end of every run
(``flush``, a partial last line included).  A flush that lands while Python is inside one of our
streams' own writes is skipped (the write in progress delivers the bytes; a reentrant flush would
raise inside the user's print).

The cap itself (8,000 characters per stream), the truncation flags and their notes live in the
worker's sink: this module never drops output.  It does not capture anything written by JS or by
the worker itself.
"""
import io
import signal
import sys

BUFFER = 1 << 16
FLUSH_SIGNAL = signal.SIGUSR1   # protocol.js FLUSH
_streams = {}


def _make(fd):
    raw = io.FileIO(fd, "w", closefd=False)
    buf = io.BufferedWriter(raw, buffer_size=BUFFER)
    return io.TextIOWrapper(buf, encoding="utf-8", errors="backslashreplace",
                            line_buffering=False, write_through=False)


def _host():
    try:
        import cerea_host
        return cerea_host
    except ImportError:
        return None


def _on_flush(_signum, _frame):
    flush_live()


def install():
    """Create the two streams (once) and make them sys.stdout / sys.stderr."""
    if not _streams:
        _streams["stdout"] = _make(1)
        _streams["stderr"] = _make(2)
    restore()


def restore():
    """Put our streams back in case the previous run replaced sys.stdout (redirect_stdout left
    open, an assignment), and our flush handler in case it replaced that.  Called before each run."""
    sys.stdout = _streams["stdout"]
    sys.stderr = _streams["stderr"]
    try:
        signal.signal(FLUSH_SIGNAL, _on_flush)
    except (ValueError, OSError):   # not the main thread: live output then waits for the end
        pass


def _flush_ours():
    for s in (_streams.get("stdout"), _streams.get("stderr")):
        try:
            if s is not None and not s.closed:
                s.flush()
        except Exception:   # RuntimeError: reentrant (a write of this stream is in progress)
            pass


def flush_live(now=False):
    """Flush our streams and let the worker hand their text on: now (an input() prompt, a
    display), or when its batch is due (a flush signal, a sleep: the worker then wakes the sleep
    for it)."""
    _flush_ours()
    host = _host()
    if host is not None:
        host.tick(bool(now))


def flush():
    """Flush whatever the run wrote, including a trailing partial line.  A stream the user code
    closed or replaced is flushed through ours anyway; errors here never hide the run's result."""
    for s in (sys.stdout, sys.stderr, _streams.get("stdout"), _streams.get("stderr")):
        try:
            if s is not None and not s.closed:
                s.flush()
        except Exception:
            pass
