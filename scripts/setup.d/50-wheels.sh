#!/usr/bin/env bash
# The offline office wheels and the merged lock file: builds pure-Python wheels from Debian's
# python3-openpyxl, -et-xmlfile, -xlsxwriter, -pypdf into ./wheelhouse (scripts/build_wheels.py),
# then merges them (and, when PYODIDE_DIST_DIR names a full Pyodide distribution, its packages)
# into build/www/pyodide/ with scripts/sync_pyodide_wheels.mjs, which prints which of the guide's
# packages this deployment has and lacks.  PYODIDE_DIST_DIR is the unpacked pyodide/ folder of the
# release archive pyodide-<version>.tar.bz2 of the npm package's version; every file taken from
# it is checked against the pinned lock's sha256, and a folder that does not fit stops setup
# (docs/configuration.md, "Python packages").  Also copies kernel/*.py to build/www/kernel/ (the
# browser worker reads them from /kernel/ at start-up).  Idempotent: both scripts rewrite only
# what changed.
set -euo pipefail
cd "$ROOT"
python3 scripts/build_wheels.py
node scripts/sync_pyodide_wheels.mjs
mkdir -p build/www/kernel
for f in kernel/*.py; do
  cmp -s "$f" "build/www/kernel/$(basename "$f")" || cp "$f" build/www/kernel/
done
