#!/usr/bin/env bash
# C unit tests (Check, fork mode) built and run under AddressSanitizer + UndefinedBehaviorSanitizer.
set -euo pipefail
cd "$ROOT"
cmake -S . -B build-asan -DSBX_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build build-asan -j"$(nproc)" 2>&1 | grep -E "warning|error|Error" || true
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j2
