#!/usr/bin/env bash
# Stage 30: the Pyodide kernel (worker/ + kernel/) against the real runtime in Node worker_threads
# (node:test; tests/kernel/*.test.mjs).  Needs setup's runtime sync (build/www/pyodide) and the
# wheel sync (50-wheels.sh) for the package tests; prints node's own summary.
set -euo pipefail
cd "$ROOT"
if [ ! -f build/www/pyodide/pyodide.asm.wasm ]; then
  echo "kernel tests: build/www/pyodide is missing: run scripts/setup.sh" >&2
  exit 1
fi
# One test file at a time: each loads its own Pyodide (~3 s of CPU) on a shared 2-core machine.
exec node --test --test-concurrency=1 --test-reporter=spec tests/kernel/
