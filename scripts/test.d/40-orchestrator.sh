#!/usr/bin/env bash
# Orchestrator integration tests: the real binary on 127.0.0.1 (free ports, own data dirs under
# /tmp, processes tracked and stopped by pid) driven over HTTP by scripted pages written in Node
# (node:test + fetch), the MCP server through the official SDK (mcp*.test.mjs), and the
# command-line clients (cli.test.mjs).  CEREA_BIN picks another binary (e.g.
# build-asan/cerea-sandbox).
set -euo pipefail
cd "$ROOT"
if [ -z "${CEREA_BIN:-}" ]; then
  cmake --build build --target cerea-sandbox -j2 2>&1 | grep -E "warning|error|Error" || true
  export CEREA_BIN="$ROOT/build/cerea-sandbox"
fi
node --test --test-force-exit --test-timeout=900000 --test-concurrency=1 --test-reporter=spec tests/integration/orchestrator*.test.mjs tests/integration/mcp*.test.mjs \
  tests/integration/cli.test.mjs tests/integration/deploy.test.mjs tests/integration/backup.test.mjs \
  tests/integration/upgrade.test.mjs tests/integration/openapi.test.mjs
