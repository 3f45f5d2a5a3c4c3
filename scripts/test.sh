#!/usr/bin/env bash
# test.sh -- set up (scripts/setup.sh) and run every test: the stages scripts/test.d/NN-*.sh in
# order.  Each stage prints its own results; this script prints one closing line
# "N passed, N failed" counting stages, and exits non-zero when any stage failed.
#   TEST_ONLY="10 20"  runs only the listed stages;  TEST_NO_SETUP=1 skips setup.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export ROOT
cd "$ROOT"
if [ -z "${TEST_NO_SETUP:-}" ]; then
  bash scripts/setup.sh || { echo "setup failed"; echo "0 passed, 1 failed"; exit 1; }
fi
passed=0; failed=0; failed_names=()
for stage in scripts/test.d/*.sh; do
  num="$(basename "$stage" | cut -d- -f1)"
  if [ -n "${TEST_ONLY:-}" ] && [[ " $TEST_ONLY " != *" $num "* ]]; then continue; fi
  echo "=== test stage $(basename "$stage")"
  start=$(date +%s)
  if bash "$stage"; then
    passed=$((passed + 1)); echo "=== stage $(basename "$stage") passed in $(( $(date +%s) - start ))s"
  else
    failed=$((failed + 1)); failed_names+=("$(basename "$stage")")
    echo "=== stage $(basename "$stage") FAILED in $(( $(date +%s) - start ))s"
  fi
done
[ "$failed" -eq 0 ] || echo "failed stages: ${failed_names[*]}"
echo "stages: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
