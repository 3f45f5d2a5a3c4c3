#!/usr/bin/env bash
# bench/http/callgrind.sh -- server instructions per HTTP/2 request, the figure that does not move
# with the load of a shared machine.  Runs cerea-sandbox under callgrind twice (data dir on tmpfs),
# driven by h2load ($H2LOAD, default -t1 -c100 -m10) on GET $URLPATH (default /healthz): once with N_A requests, once
# with N_B, and prints (instructions_B - instructions_A) / (N_B - N_A): start-up, connection set-up
# and shutdown cancel out.  The kernel's work (system calls) is not counted.
#
#   bash bench/http/callgrind.sh     (CEREA_BIN=..., N_A=2000, N_B=22000, URLPATH=/healthz,
#                                     H2LOAD="-t1 -c100 -m10",
#                                     KEEP=DIR keeps the callgrind.out files for callgrind_annotate)
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CEREA_BIN="${CEREA_BIN:-$ROOT/build/cerea-sandbox}"
N_A="${N_A:-2000}"; N_B="${N_B:-22000}"; URLPATH="${URLPATH:-/healthz}"
H2LOAD="${H2LOAD:--t1 -c100 -m10}"
for t in valgrind h2load python3; do command -v "$t" >/dev/null || { echo "missing $t"; exit 1; }; done
[ -x "$CEREA_BIN" ] || { echo "build cerea-sandbox first"; exit 1; }
TMP="$(mktemp -d "${BENCH_TMP:-/dev/shm}/cgh-XXXXXX")"; PID=""
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 1 300); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }

one() { # $1 = requests; prints "instructions requests_done"
  local port out done_n
  port="$(free_port)"; out="$TMP/callgrind.$1.out"
  CEREA_LOG=warn valgrind --tool=callgrind --callgrind-out-file="$out" \
    "$CEREA_BIN" serve --listen "127.0.0.1:$port" --data "$TMP/data-$1" >"$TMP/log-$1" 2>&1 &
  PID=$!
  wait_port "$port" || { echo "server did not start" >&2; cat "$TMP/log-$1" >&2; echo "0 0"; return; }
  # shellcheck disable=SC2086
  done_n="$(h2load $H2LOAD -n "$1" "http://127.0.0.1:$port$URLPATH" 2>&1 |
    sed -n 's/^requests: [0-9]* total, [0-9]* started, \([0-9]*\) done, \([0-9]*\) succeeded.*/\2/p')"
  kill -TERM "$PID"; wait "$PID" 2>/dev/null; PID=""
  echo "$(grep -E '^(summary|totals):' "$out" | head -1 | awk '{print $2}') ${done_n:-0}"
  if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp "$out" "$KEEP/"; fi
}
read -r IA RA < <(one "$N_A")
read -r IB RB < <(one "$N_B")
python3 - "$IA" "$RA" "$IB" "$RB" "$URLPATH" "$H2LOAD" <<'PY'
import sys
ia, ra, ib, rb = map(int, sys.argv[1:5])
if rb <= ra or ia == 0:
    sys.exit(f"a run failed ({ra} and {rb} requests succeeded)")
print(f"server instructions per request (h2load {sys.argv[6]} GET {sys.argv[5]}, callgrind): "
      f"{(ib - ia) / (rb - ra):,.0f} ({ib - ia:,} instructions over {rb - ra} requests)")
PY
