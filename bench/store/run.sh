#!/usr/bin/env bash
# bench/store/run.sh -- builds bench_store (release build in build-bench/) and runs it:
# durable run-result writes per second, one transaction per write against group commit, in the
# same run, with p50/p99 latency (submit -> durable callback).  Extra arguments go to the bench:
#   bash bench/store/run.sh [--dir DIR] [--group N] [--single N] [--inflight W]
# BENCH_PG=1 runs it on PostgreSQL too, right after SQLite in the same run: a throwaway server
# (scripts/pg-test.sh, fsync on, its data beside the SQLite one under TMPDIR) over its Unix
# socket, stopped by pid at the end, with the server's CPU time per write.
# Figures and the machine they came from: docs/benchmarks.md.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-bench --target bench_store -j2 >/dev/null
BENCH="$ROOT/build-bench/tests/unit/persistence/bench_store"
echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(uname -sr)"
if [ -z "${BENCH_PG:-}" ]; then
  exec "$BENCH" "$@"
fi
"$BENCH" "$@"
eval "$(bash scripts/pg-test.sh start)"
trap 'bash scripts/pg-test.sh stop "$PGTEST_DIR"' EXIT
# the server's CPU: the postmaster and every backend (children of it), in clock ticks
server_ticks() {
  python3 - "$PGTEST_PID" <<'PY'
import os, sys
root, total = sys.argv[1], 0
kids = {}
for p in os.listdir('/proc'):
    if p.isdigit():
        try: f = open(f'/proc/{p}/stat').read()
        except OSError: continue
        r = f[f.rindex(')') + 2:].split()
        kids.setdefault(r[1], []).append((p, int(r[11]) + int(r[12]) + int(r[13]) + int(r[14])))
def walk(pid):
    return sum(t + walk(c) for c, t in kids.get(pid, []))
own = open(f'/proc/{root}/stat').read()
r = own[own.rindex(')') + 2:].split()
print(int(r[11]) + int(r[12]) + int(r[13]) + int(r[14]) + walk(root))
PY
}
T0="$(server_ticks)"
"$BENCH" --database "$PGTEST_URL" "$@" | tee "$PGTEST_DIR/bench.txt"
T1="$(server_ticks)"
python3 - "$T0" "$T1" "$PGTEST_DIR/bench.txt" <<'PY'
import os, re, sys
t0, t1, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
writes = sum(int(m) for m in re.findall(r'writes=(\d+)', open(path).read()))
hz = os.sysconf('SC_CLK_TCK')
print(f"PostgreSQL server CPU: {(t1 - t0) / hz:.2f} s for {writes} writes, "
      f"{(t1 - t0) / hz / max(1, writes) * 1e6:.1f} us per write (all modes)")
PY
