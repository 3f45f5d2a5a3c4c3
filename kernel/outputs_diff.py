"""outputs_diff -- which files under /mnt/output a run created or changed, in the order written.

Before a run every file's mtime is set to 0 (MEMFS keeps 1 ms mtimes, too coarse to compare
before/after: a same-size rewrite within the same millisecond would be missed).  After the run a
file is a candidate when its mtime is no longer 0, its size changed, or it is new; candidates are
hashed and compared with the hash known from before, so an identical rewrite is not listed.
Deleted files drop out of the known set and are never listed.  Order: by mtime, ties broken by the
order in which the run opened the files for writing (seen through an audit hook), then by name.
At most ``limit`` files are listed; the count of the rest is returned.  Files over the 50 MB cap
per returned file are left out with a note.  It does not read the bytes for the worker (the worker
reads them with the Emscripten FS) and knows nothing of figures except the set it is handed.
"""
import hashlib
import os
import sys

OUTPUT = "/mnt/output"
FILE_CAP = 50 * 1048576

_known = {}        # relative path -> (size, sha256)
_write_seq = {}    # absolute path -> sequence number of the last open-for-write in this run
_seq = [0]
_hook = [False]
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def _audit(event, args):
    if event != "open":
        return
    try:
        path, mode, flags = args
        if not isinstance(path, str):
            return
        if mode is not None:
            if not any(c in mode for c in "wax+"):
                return
        elif not (flags & _WRITE_FLAGS):
            return
        p = os.path.abspath(path)
        if p.startswith(OUTPUT + "/"):
            _seq[0] += 1
            _write_seq[p] = _seq[0]
    except Exception:
        pass


def _walk():
    for d, dirs, files in os.walk(OUTPUT):
        dirs.sort()
        for f in files:
            full = os.path.join(d, f)
            if os.path.isfile(full) and not os.path.islink(full):
                yield full, os.path.relpath(full, OUTPUT)


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while True:
            b = fh.read(1 << 20)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def before_run():
    """Mark the state of /mnt/output: hash files never seen, zero every mtime."""
    if not _hook[0]:
        sys.addaudithook(_audit)
        _hook[0] = True
    os.makedirs(OUTPUT, exist_ok=True)
    _write_seq.clear()
    present = set()
    for full, rel in _walk():
        present.add(rel)
        st = os.stat(full)
        if rel not in _known or _known[rel][0] != st.st_size or st.st_mtime_ns != 0:
            _known[rel] = (st.st_size, sha256_file(full))
        os.utime(full, ns=(0, 0))
    for rel in list(_known):
        if rel not in present:
            del _known[rel]


def after_run(limit=200, figure_paths=(), file_cap=FILE_CAP):
    """Returns (files, unlisted, notes); files = [{name, size, sha256, kind}] in order written."""
    changed, notes, present = [], [], set()
    figure_paths = set(figure_paths)
    if not os.path.isdir(OUTPUT):
        os.makedirs(OUTPUT, exist_ok=True)
    for full, rel in _walk():
        present.add(rel)
        st = os.stat(full)
        old = _known.get(rel)
        if old is not None and st.st_mtime_ns == 0 and old[0] == st.st_size:
            continue
        digest = sha256_file(full)
        _known[rel] = (st.st_size, digest)
        try:
            os.utime(full, ns=(0, 0))   # known now: the next before_run need not hash it again
        except OSError:
            pass
        if old is not None and old == (st.st_size, digest):
            continue  # rewritten with identical bytes: not changed
        changed.append((st.st_mtime_ns, _write_seq.get(full, 0), rel, st.st_size, digest))
    for rel in list(_known):
        if rel not in present:
            del _known[rel]
    changed.sort()
    files = []
    for _m, _s, rel, size, digest in changed:
        if size > file_cap:
            notes.append("%s is %.1f MB, over the %d MB cap per file: it stays in /mnt/output "
                         "but is not kept as an artifact" % (rel, size / 1048576, file_cap >> 20))
            continue
        files.append({"name": rel, "size": size, "sha256": digest,
                      "kind": "figure" if rel in figure_paths else "file"})
    unlisted = max(0, len(files) - limit)
    if unlisted:
        notes.append("%d files were written to /mnt/output; only the first %d are listed"
                     % (len(files), limit))
        files = files[:limit]
    _write_seq.clear()
    return files, unlisted, notes


def reset():
    _known.clear()
    _write_seq.clear()
