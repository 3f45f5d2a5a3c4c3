#!/usr/bin/env python3
"""wal_pages.py -- which b-trees a SQLite WAL's frames belong to, per commit.

    python3 bench/runs/wal_pages.py DB [WAL]      (WAL defaults to DB-wal)

Reads the frames of the WAL's current generation (those whose salt matches the header), maps each
page number to its table or index through the `dbstat` virtual table of a copy of the database
(the copy is opened with the WAL beside it, so pages new in the WAL are mapped too), and prints the
frames per commit, by b-tree.  Every frame is a full page written to the WAL (and later again, by
the checkpoint, to the database file), so frames per run is the write volume a run costs.  Use it
on a data dir left by a `kill -9`ed server, so the WAL is not checkpointed away.  It does not
change the files it reads.
"""
import collections
import os
import shutil
import sqlite3
import struct
import sys
import tempfile


def frames(wal_path):
    w = open(wal_path, "rb").read()
    if len(w) < 32:
        return 0, []
    page_size = struct.unpack(">I", w[8:12])[0]
    salt = w[16:24]
    out, off = [], 32
    while off + 24 + page_size <= len(w):
        pgno, commit = struct.unpack(">II", w[off:off + 8])
        if w[off + 8:off + 16] != salt:
            break
        out.append((pgno, commit))
        off += 24 + page_size
    return page_size, out


def main():
    if len(sys.argv) < 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    db = sys.argv[1]
    wal = sys.argv[2] if len(sys.argv) > 2 else db + "-wal"
    page_size, fr = frames(wal)
    commits = sum(1 for _, c in fr if c)
    with tempfile.TemporaryDirectory() as d:
        copy = os.path.join(d, "copy.db")
        shutil.copy(db, copy)
        shutil.copy(wal, copy + "-wal")
        c = sqlite3.connect(copy)
        names = {pg: name for name, pg in c.execute("SELECT name, pageno FROM dbstat")}
        c.close()
    by = collections.Counter(names.get(pg, "?") for pg, _ in fr)
    print(f"page size {page_size}, {len(fr)} frames in {commits} commits: "
          f"{len(fr) / max(1, commits):.1f} frames per commit")
    for name, n in by.most_common():
        print(f"  {name:28s} {n:6d}  {n / max(1, commits):6.2f} per commit")
    return 0


if __name__ == "__main__":
    sys.exit(main())
