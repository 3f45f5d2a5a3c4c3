#!/usr/bin/env bash
# The Pyodide runtime, synced from the pinned npm package into build/www/pyodide/ (served at
# /pyodide/), with its NOTICE and precompressed variants.
set -euo pipefail
cd "$ROOT"
node scripts/sync_pyodide.mjs
