#!/usr/bin/env bash
# Stage 15: a smoke run of every libFuzzer target of tests/fuzz/ (FUZZ_SECONDS each, 20 by
# default) through bench/fuzz.sh, on its seeds and the regression inputs committed beside them;
# fails on any finding.  The long runs and their figures are in docs/benchmarks.md.
set -euo pipefail
cd "$ROOT"
exec bash bench/fuzz.sh all "${FUZZ_SECONDS:-20}"
