#!/usr/bin/env bash
# bench/runs/callgrind.sh -- server instructions per run, the figure that does not move with the
# load of a shared machine.  Runs the orchestrator under callgrind twice (data dir on tmpfs), driven
# by runs_load with 100 chats and one assistant: once with LOW_A sequential runs, once with LOW_B,
# and prints (instructions_B - instructions_A) / (runs_B - runs_A): start-up, chat creation and page
# attach cancel out.  Both of the server's threads (loop and writer) are counted; the kernel's work
# (system calls, fsync) is not -- see bench/runs/wal_pages.py for the write volume.
#
#   bash bench/runs/callgrind.sh         (CEREA_BIN=..., RUNS_LOAD=..., LOW_A=100, LOW_B=600,
#                                         KEEP=DIR keeps the callgrind.out files for callgrind_annotate)
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CEREA_BIN="${CEREA_BIN:-$ROOT/build/cerea-sandbox}"
RUNS_LOAD="${RUNS_LOAD:-$ROOT/build/bench/runs/runs_load}"
LOW_A="${LOW_A:-100}"; LOW_B="${LOW_B:-600}"
[ -x "$RUNS_LOAD" ] || { echo "build runs_load first"; exit 1; }
. "$ROOT/bench/runs/callgrind_lib.sh"

one() { # $1 = low runs; prints "instructions runs"
  local runs
  cg_serve "$1"
  "$RUNS_LOAD" --port "$PORT" --key "$KEY" --server-pid "$PID" --chats 100 --assistants 1 \
    --duration 0 --low "$1" >"$TMP/runs-$1.json" || { echo "runs_load failed"; exit 1; }
  runs="$(python3 -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1]) if l.startswith("{\"result")][0]["result"]; print(50 + r["low"]["runs"] + r["loaded"]["runs"])' "$TMP/runs-$1.json")"
  cg_stop
  echo "$CG_TOTAL $runs"
}
read -r IA RA < <(one "$LOW_A")
read -r IB RB < <(one "$LOW_B")
python3 - "$IA" "$RA" "$IB" "$RB" <<'PY'
import sys
ia, ra, ib, rb = map(int, sys.argv[1:])
print(f"server instructions per run (sequential, callgrind): {(ib - ia) / (rb - ra):,.0f} "
      f"({ib - ia:,} instructions over {rb - ra} runs)")
PY
