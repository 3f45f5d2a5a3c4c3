#!/usr/bin/env bash
# bench/store/run.sh -- builds bench_store (release build in build-bench/) and runs it:
# durable run-result writes per second, one transaction per write against group commit, in the
# same run, with p50/p99 latency (submit -> durable callback).  Extra arguments go to the bench:
#   bash bench/store/run.sh [--dir DIR] [--group N] [--single N] [--inflight W]
# Figures and the machine they came from: docs/benchmarks.md.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-bench --target bench_store -j2 >/dev/null
echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(uname -sr)"
exec ./build-bench/tests/unit/persistence/bench_store "$@"
