#!/usr/bin/env bash
# bench/runs.sh -- runs end to end (create -> dispatch to a page -> result -> answer), every run and
# result durable before it is acknowledged, over HTTP/2, with h2load against nghttpd's small file
# in the same run for scale.
#
#   bash bench/runs.sh     (CEREA_BIN=..., CHATS=1000, ASSISTANTS=64, DURATION=10, LOW=2000,
#                           BENCH_TMP=/dev/shm puts the data dir on tmpfs: fsync costs nothing,
#                           CLIENT=node uses the Node load generator instead of the C one)
#
# Starts one orchestrator (fresh data dir) and nghttpd on free loopback ports (stopped by pid),
# runs the load generator (bench/runs/runs_load.c, or bench/runs/run_bench.mjs with CLIENT=node:
# N pages answering instantly, M assistants posting runs with wait_s), then h2load -t1 -c100 -m10
# on nghttpd for DURATION s, and prints the ratio runs/s : nghttpd req/s, and the same ratio in
# server CPU (nghttpd CPU per request / our CPU per run), which does not depend on how much of the
# shared machine each server got.  The machine is small and shared: read ranges, not single figures.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 1
DURATION="${DURATION:-10}"; CHATS="${CHATS:-1000}"; ASSISTANTS="${ASSISTANTS:-64}"; LOW="${LOW:-2000}"
CLIENT="${CLIENT:-c}"
if [ -z "${CEREA_BIN:-}" ]; then
  cmake --build build --target cerea-sandbox -j2 2>&1 | grep -E "warning|error|Error" || true
  CEREA_BIN="$ROOT/build/cerea-sandbox"
fi
if [ "$CLIENT" = c ] && [ -z "${RUNS_LOAD:-}" ]; then
  cmake --build build --target runs_load -j2 2>&1 | grep -E "warning|error|Error" || true
  RUNS_LOAD="$ROOT/build/bench/runs/runs_load"
fi
WWW="$ROOT/build/www"; FILE=/pyodide/NOTICE.txt
[ -f "$WWW$FILE" ] || { echo "no $WWW$FILE: run scripts/setup.sh"; exit 1; }
for t in h2load nghttpd node python3; do command -v "$t" >/dev/null || { echo "missing $t"; exit 1; }; done
ulimit -n 8192 2>/dev/null || true
TMP="$(mktemp -d "${BENCH_TMP:-/tmp}/runs-bench-XXXXXX")"; PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done; rm -rf "$TMP"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 1 100); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }
KEY=bench-key-0123456789abcdef
PORT="$(free_port)"
CEREA_API_KEY=$KEY CEREA_LOG=warn "$CEREA_BIN" serve --listen "127.0.0.1:$PORT" --data "$TMP/data" >"$TMP/ours.log" 2>&1 &
OURS=$!; PIDS+=("$OURS")
NGP="$(free_port)"
nghttpd --no-tls -d "$WWW" "$NGP" >"$TMP/ng.log" 2>&1 &
PIDS+=("$!")
wait_port "$PORT" && wait_port "$NGP" || { echo "a server did not start"; cat "$TMP"/*.log; exit 1; }
echo "== runs ($CLIENT client): $CHATS chats/pages, $ASSISTANTS assistants, ${DURATION}s loaded, $LOW sequential at low load; $(uptime | sed 's/.*load/load/')"
GEN=(node bench/runs/run_bench.mjs); [ "$CLIENT" = c ] && GEN=("$RUNS_LOAD")
"${GEN[@]}" --port "$PORT" --key "$KEY" --server-pid "$OURS" --chats "$CHATS" \
  --assistants "$ASSISTANTS" --duration "$DURATION" --low "$LOW" | tee "$TMP/runs.json" || { cat "$TMP/ours.log"; exit 1; }
NGPID="${PIDS[1]}"
ticks() { python3 -c 'import sys; f=open("/proc/%s/stat" % sys.argv[1]).read(); r=f[f.rindex(")")+2:].split(); print(int(r[11])+int(r[12]))' "$1"; }
NG_T0="$(ticks "$NGPID")"
echo "== nghttpd small file, h2load -t1 -c100 -m10 -D $DURATION"
h2load -t1 -c100 -m10 -D "$DURATION" "http://127.0.0.1:$NGP$FILE" 2>&1 | tee "$TMP/h2load.txt" | grep -E "finished in|requests:"
NG_T1="$(ticks "$NGPID")"
NG_RPS="$(grep -oE 'finished in [0-9.]+s, [0-9.]+ req/s' "$TMP/h2load.txt" | grep -oE '[0-9.]+ req/s' | cut -d' ' -f1)"
NG_REQS="$(grep -oE 'requests: [0-9]+ total' "$TMP/h2load.txt" | grep -oE '[0-9]+')"
python3 - "$TMP/runs.json" "$NG_RPS" "$NG_REQS" "$NG_T0" "$NG_T1" <<'PY'
import json, os, sys
res = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{"result"')][0]["result"]["loaded"]
ng, reqs, t0, t1 = float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
ng_us = (t1 - t0) * 1e6 / os.sysconf("SC_CLK_TCK") / max(1, reqs)
runs, ours_us = res["runs_per_s"], res["server_cpu_us_per_run"]
print(f"== runs/s {runs:.0f} vs nghttpd {ng:.0f} req/s: ratio {runs/ng:.3f} (target >= 0.25)")
print(f"== server CPU: ours {ours_us:.1f} us/run, nghttpd {ng_us:.2f} us/req: "
      f"CPU-normalised ratio {ng_us/ours_us:.3f} (runs per core-second / nghttpd requests per core-second)")
PY
