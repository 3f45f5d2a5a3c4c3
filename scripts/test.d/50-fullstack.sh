#!/usr/bin/env bash
# Stage 50: full-stack tests (tests/fullstack/): the real orchestrator binary in `server` execution
# mode with real SQLite files, its headless kernel hosts (worker/headless-host.js under bubblewrap
# and Node's permission model) and real Pyodide.  Processes are tracked and stopped by pid.
# CEREA_BIN picks another binary (e.g. build-asan/cerea-sandbox).
set -euo pipefail
cd "$ROOT"
if [ ! -f build/www/pyodide/pyodide.asm.wasm ]; then
  echo "full-stack tests: build/www/pyodide is missing: run scripts/setup.sh" >&2
  exit 1
fi
if [ -z "${CEREA_BIN:-}" ]; then
  cmake --build build --target cerea-sandbox -j2 2>&1 | grep -E "warning|error|Error" || true
  export CEREA_BIN="$ROOT/build/cerea-sandbox"
fi
# One file at a time: each starts its own server and hosts, and a Pyodide load costs ~3 s of CPU.
exec node --test --test-force-exit --test-timeout=900000 --test-concurrency=1 --test-reporter=spec tests/fullstack/
