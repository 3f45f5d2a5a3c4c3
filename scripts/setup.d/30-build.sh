#!/usr/bin/env bash
# The C side: build/cerea-sandbox (RelWithDebInfo).  The ASan/UBSan build for unit tests is made
# by the test command (scripts/test.d), not here, so the run command stays quick.
set -euo pipefail
cd "$ROOT"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" 2>&1 | grep -E "warning|error|Error" || true
test -x build/cerea-sandbox
