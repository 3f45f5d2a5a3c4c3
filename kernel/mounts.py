"""mounts -- makes /mnt/data match the chat's file manifest, and keeps /mnt/output present.

The worker sends the manifest (name, version, sha256, size for every file the chat mounts) and,
for files that are new or changed, their bytes.  ``plan()`` decides: which files to write (new,
other version, or missing on disk), which to keep, which to remove (no longer in the manifest: the
old chat's files, an older version under another name), and which to refuse (bad name, over the
50 MB per-file cap).  It performs the removals and creates parent folders; the worker then writes
the bytes with the Emscripten FS (data never passes through the Python heap) and calls
``commit()``.  Names are relative paths: one segment for attachments, ``plots/a.png`` for earlier
outputs; absolute names, empty segments, ``.`` and ``..`` are refused.
It does not fetch anything, decide what the chat mounts (the orchestrator does), or name duplicates.
"""
import json
import os
import shutil

DATA = "/mnt/data"
OUTPUT = "/mnt/output"
FILE_CAP = 50 * 1048576

_state = {}      # name -> {"version", "sha256", "size"} of what is on disk now
_pending = {}    # name -> meta, planned writes awaiting commit()


def ensure_dirs():
    os.makedirs(DATA, exist_ok=True)
    os.makedirs(OUTPUT, exist_ok=True)


def safe_name(name):
    """Return the normalized relative path, or raise ValueError saying why it is refused."""
    if not isinstance(name, str) or not name:
        raise ValueError("empty name")
    if "\x00" in name or "\\" in name:
        raise ValueError("name holds NUL or backslash")
    if name.startswith("/"):
        raise ValueError("absolute name")
    parts = name.split("/")
    for p in parts:
        if p in ("", ".", ".."):
            raise ValueError("name has an empty, '.' or '..' segment")
    return "/".join(parts)


def _remove(name):
    path = os.path.join(DATA, name)
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.remove(path)
    except OSError:
        pass
    # prune folders left empty (outputs mounted as a/b.png)
    d = os.path.dirname(path)
    while d.startswith(DATA + "/"):
        try:
            os.rmdir(d)
        except OSError:
            break
        d = os.path.dirname(d)


def plan(manifest_json):
    """manifest_json: {"files": [{name, version, sha256, size, has_data}], "complete": bool}.
    Returns JSON {write, keep, remove, refused: [{name, reason}]}."""
    m = json.loads(manifest_json)
    ensure_dirs()
    write, keep, refused, listed = [], [], [], set()
    _pending.clear()
    cap = int(m.get("file_cap") or FILE_CAP)
    for f in m.get("files", []):
        try:
            name = safe_name(f.get("name"))
        except ValueError as e:
            refused.append({"name": str(f.get("name")), "reason": "bad name: %s" % e})
            continue
        size = int(f.get("size") or 0)
        if size > cap:
            refused.append({"name": name, "reason": "over the %d MB per-file cap" % (cap >> 20)})
            continue
        listed.add(name)
        meta = {"version": f.get("version"), "sha256": f.get("sha256"), "size": size}
        cur = _state.get(name)
        path = os.path.join(DATA, name)
        on_disk = os.path.isfile(path) and (cur is None or os.path.getsize(path) == cur["size"])
        if cur is not None and on_disk and cur["version"] == meta["version"] and cur["sha256"] == meta["sha256"]:
            keep.append(name)
            continue
        if not f.get("has_data"):
            refused.append({"name": name, "reason": "new or changed but no bytes were sent"})
            listed.discard(name)
            continue
        # a file where a folder must go (or the reverse): clear the way
        if os.path.isdir(path):
            _remove(name)
        parent = os.path.dirname(path)
        try:
            os.makedirs(parent, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            refused.append({"name": name, "reason": "a file is in the way of its folder"})
            listed.discard(name)
            continue
        write.append(name)
        _pending[name] = meta
    remove = []
    if m.get("complete", True):
        for name in sorted(_state):
            if name not in listed:
                _remove(name)
                remove.append(name)
                del _state[name]
    return json.dumps({"write": write, "keep": keep, "remove": remove, "refused": refused})


def commit(written_json):
    """Record the files the worker wrote (JSON list of names)."""
    for name in json.loads(written_json):
        meta = _pending.pop(name, None)
        if meta is not None:
            _state[name] = meta
    _pending.clear()


def names():
    return sorted(_state)


def reset():
    """Remove every mounted file (chat switch, dispose)."""
    for name in list(_state):
        _remove(name)
    _state.clear()
    _pending.clear()
