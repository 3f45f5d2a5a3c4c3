#!/usr/bin/env bash
# setup.sh -- make this checkout ready to run and test, on a fresh Debian 12 machine or again on
# a ready one (idempotent: each step skips what is already done).
#
# The steps are the files scripts/setup.d/NN-*.sh, run in order, each in its own bash with
# ROOT (the repository) exported.  Add a step by adding a file; keep each step idempotent.
#   SETUP_SKIP="40 60"  skips the steps whose numbers are listed (for quick local iteration).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export ROOT
cd "$ROOT"
for step in scripts/setup.d/*.sh; do
  num="$(basename "$step" | cut -d- -f1)"
  if [[ " ${SETUP_SKIP:-} " == *" $num "* ]]; then
    echo "setup: skip $(basename "$step")"
    continue
  fi
  echo "setup: $(basename "$step")"
  start=$(date +%s)
  bash "$step"
  echo "setup: $(basename "$step") done in $(( $(date +%s) - start ))s"
done
