#!/usr/bin/env bash
# The served memory snapshot of the runtime (scripts/make_snapshot.mjs): made by a Node kernel of
# this build, written beside the runtime in build/www/pyodide/ with .br/.gz copies, and listed with
# its sha256 in the served lock.  Skipped (the lock entry written again) when the image's header
# already holds this build's key, the hash of every input.  After the wheels (they rewrite the
# lock), before the app (it compiles the same key into the browser worker).
set -euo pipefail
cd "$ROOT"
node scripts/make_snapshot.mjs
