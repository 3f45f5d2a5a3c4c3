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
# One test file at a time: each starts its own Pyodide on a shared 2-core machine.  Kernels restore
# the served memory snapshot (setup's 55-snapshot.sh) by default; the kernel's own tests and the
# escape probes run again on kernels that load Python from scratch (CEREA_KERNEL_SNAPSHOT=0), so
# both start paths are held to the same lock-down.
node --test --test-force-exit --test-timeout=900000 --test-concurrency=1 --test-reporter=spec tests/kernel/
echo "kernel tests again, on kernels loaded without the memory snapshot:"
CEREA_KERNEL_SNAPSHOT=0 exec node --test --test-force-exit --test-timeout=900000 --test-concurrency=1 --test-reporter=spec \
  tests/kernel/basic.test.mjs tests/kernel/lockdown.test.mjs tests/kernel/lockdown-node.test.mjs tests/kernel/files.test.mjs
