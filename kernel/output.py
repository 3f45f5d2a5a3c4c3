"""output -- the Python half of output capture.

sys.stdout and sys.stderr become block-buffered text streams over file descriptors 1 and 2 (64 KiB
buffers), so a loop of 1e5 prints costs about what writing to a StringIO costs: the worker's write
handler (worker/output.js, OutputSink) is called once per full buffer, not once per line, keeps
what the run keeps of the stream (its start and its end, within the cap), and hands the kept text
on as the run goes.

When the text is handed on:
  - an explicit flush (``print(..., flush=True)``, ``sys.stdout.flush()``): at once, so a line
    flushed just before the kernel dies is not lost with it;
  - with a flush signal (the page shares memory with the worker): while a run executes, the
    controller posts FLUSH (SIGUSR1) into the interrupt buffer every ~50 ms; Pyodide turns it into
    this module's signal handler, which flushes both streams and lets the worker hand the text on
    (``flush_live``) -- live output without Python's cooperation;
  - without one (a page that is not cross-origin isolated: no SharedArrayBuffer): from the write
    path itself -- a write flushes both streams when the last hand-over is ~50 ms old (the first
    write of a run at once).  Text written just before a long computation that writes nothing
    waits for the next write or the run's end;
  - before a sleep and an input() (kernel/waits.py) and at the end of every run (``flush``, a
    partial last line included).
A flush that lands while Python is inside one of our streams' own writes is skipped (the write in
progress delivers the bytes; a reentrant flush would raise inside the user's print).

The cap itself (8,000 characters per stream), the truncation flags and their notes live in the
worker's sink: this module never drops output.  It does not capture anything written by JS or by
the worker itself.
"""
import io
import signal
import sys
import time

BUFFER = 1 << 16
FLUSH_SIGNAL = signal.SIGUSR1   # protocol.js FLUSH
BATCH_S = 0.05                  # protocol.js OUTPUT_BATCH.ms
_streams = {}
_next = [0.0]                   # without a flush signal: when a write flushes (time.monotonic)


class Stream(io.TextIOWrapper):
    """Our sys.stdout / sys.stderr: an explicit flush hands the text on at once."""

    def flush(self):
        io.TextIOWrapper.flush(self)
        host = _host()
        if host is not None:
            host.tick(True)


class TimedStream(Stream):
    """Without a flush signal: a write flushes both streams when the last hand-over is BATCH_S
    old, and the worker hands the text on."""

    def write(self, s):
        n = io.TextIOWrapper.write(self, s)
        if time.monotonic() >= _next[0]:
            flush_live(True)
        return n


def _make(fd, timed):
    raw = io.FileIO(fd, "w", closefd=False)
    buf = io.BufferedWriter(raw, buffer_size=BUFFER)
    return (TimedStream if timed else Stream)(buf, encoding="utf-8", errors="backslashreplace",
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
    """Create the two streams (once) and make them sys.stdout / sys.stderr.  They flush from
    their write path when the worker has no flush signal (it cannot share memory)."""
    if not _streams:
        host = _host()
        timed = host is not None and not host.can_wait()
        _streams["stdout"] = _make(1, timed)
        _streams["stderr"] = _make(2, timed)
    restore()


def restore():
    """Put our streams back in case the previous run replaced sys.stdout (redirect_stdout left
    open, an assignment), and our flush handler in case it replaced that.  Called before each run."""
    sys.stdout = _streams["stdout"]
    sys.stderr = _streams["stderr"]
    _next[0] = 0.0   # the run's first write hands its text on at once
    try:
        signal.signal(FLUSH_SIGNAL, _on_flush)
    except (ValueError, OSError):   # not the main thread: live output then waits for the end
        pass


def _flush_ours():
    for s in (_streams.get("stdout"), _streams.get("stderr")):
        try:
            if s is not None and not s.closed:
                io.TextIOWrapper.flush(s)
        except Exception:   # RuntimeError: reentrant (a write of this stream is in progress)
            pass


def flush_live(now=False):
    """Flush our streams and let the worker hand their text on: now (an input() prompt, a
    display), or when its batch is due (a flush signal, a sleep: the worker then wakes the sleep
    for it)."""
    _flush_ours()
    _next[0] = time.monotonic() + BATCH_S
    host = _host()
    if host is not None:
        host.tick(bool(now))


def flush():
    """Flush whatever the run wrote, including a trailing partial line.  A stream the user code
    closed or replaced is flushed through ours anyway; errors here never hide the run's result."""
    ours = [_streams.get("stdout"), _streams.get("stderr")]
    for s in [sys.stdout, sys.stderr] + ours:
        try:
            if s is None or s.closed:
                continue
            if any(s is o for o in ours):
                io.TextIOWrapper.flush(s)   # the worker hands it on at the run's end
            else:
                s.flush()
        except Exception:
            pass
