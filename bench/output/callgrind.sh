#!/usr/bin/env bash
# bench/output/callgrind.sh -- server instructions per live output chunk (the figure that does not
# move with the load of a shared machine).  Runs the orchestrator under callgrind twice (data dir
# on tmpfs), driven by bench/output/chunks.mjs with the same runs (one chat, a page stream and a
# backend's run stream following each run): once with CHUNKS_A chunks per run, once with CHUNKS_B,
# and prints (instructions_B - instructions_A) / (chunks_B - chunks_A): start-up, the chat, the
# runs and their results cancel out, what is left is a chunk: its POST (HTTP/1.1, the page token
# checked, the body parsed), holding it, and publishing it on the two streams.  Both of the
# server's threads are counted; the kernel's work (system calls) is not.
#
#   bash bench/output/callgrind.sh     (CEREA_BIN=..., RUNS=20, CHUNKS_A=10, CHUNKS_B=150, TEXT=40,
#                                       KEEP=DIR keeps the callgrind.out files)
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CEREA_BIN="${CEREA_BIN:-$ROOT/build/cerea-sandbox}"
RUNS="${RUNS:-20}"; CHUNKS_A="${CHUNKS_A:-10}"; CHUNKS_B="${CHUNKS_B:-150}"; TEXT="${TEXT:-40}"
. "$ROOT/bench/runs/callgrind_lib.sh"

one() { # $1 = chunks per run; prints "instructions chunks"
  cg_serve "$1"
  node "$ROOT/bench/output/chunks.mjs" --port "$PORT" --key "$KEY" --runs "$RUNS" --chunks "$1" \
    --text "$TEXT" >"$TMP/chunks-$1.json" || { echo "chunks.mjs failed"; cat "$TMP/chunks-$1.json"; exit 1; }
  cg_stop
  echo "$CG_TOTAL $((RUNS * $1))"
}
read -r IA NA < <(one "$CHUNKS_A")
read -r IB NB < <(one "$CHUNKS_B")
python3 - "$IA" "$NA" "$IB" "$NB" <<'PY'
import sys
ia, na, ib, nb = map(int, sys.argv[1:])
print(f"server instructions per output chunk (callgrind): {(ib - ia) / (nb - na):,.0f} "
      f"({ib - ia:,} instructions over {nb - na} chunks)")
PY
