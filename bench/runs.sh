#!/usr/bin/env bash
# bench/runs.sh -- runs end to end (create -> dispatch to a page -> result -> answer), every run and
# result durable before it is acknowledged, over HTTP/2, with h2load against nghttpd's small file
# in the same run for scale.
#
#   bash bench/runs.sh     (CEREA_BIN=..., CHATS=1000, ASSISTANTS=64, DURATION=10, LOW=2000,
#                           BENCH_TMP=/dev/shm puts the data dir on tmpfs: fsync costs nothing,
#                           CLIENT=node uses the Node load generator instead of the C one)
#   BASE_BIN=old/cerea-sandbox ROUNDS=5 bash bench/runs.sh
#                          before/after: ROUNDS rounds, each the load generator against a fresh
#                          BASE_BIN server then a fresh CEREA_BIN one (alternated, so both see the
#                          same machine), then each one's median low-load p50 and loaded runs/s and
#                          the ratio after/before; nghttpd and the floors are not run
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
if [ -z "${SQLITE_FLOOR:-}" ]; then
  cmake --build build --target sqlite_floor -j2 2>&1 | grep -E "warning|error|Error" || true
  SQLITE_FLOOR="$ROOT/build/bench/runs/sqlite_floor"
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
GEN=(node bench/runs/run_bench.mjs); [ "$CLIENT" = c ] && GEN=("$RUNS_LOAD")

if [ -n "${BASE_BIN:-}" ]; then
  ROUNDS="${ROUNDS:-5}"
  # one_run BIN LABEL: a fresh server on a fresh data dir, the load generator, its result line
  one_run() {
    local port pid
    port="$(free_port)"; rm -rf "$TMP/data"
    CEREA_API_KEY=$KEY CEREA_LOG=warn "$1" serve --listen "127.0.0.1:$port" --data "$TMP/data" >"$TMP/$2.log" 2>&1 &
    pid=$!; PIDS+=("$pid")
    wait_port "$port" || { echo "$2: the server did not start"; cat "$TMP/$2.log"; exit 1; }
    "${GEN[@]}" --port "$port" --key "$KEY" --server-pid "$pid" --chats "$CHATS" \
      --assistants "$ASSISTANTS" --duration "$DURATION" --low "$LOW" | grep '^{"result"' | sed "s/^/$2 /" >>"$TMP/ab.txt"
    kill "$pid"; wait "$pid" 2>/dev/null
    tail -n 1 "$TMP/ab.txt"
  }
  echo "== before/after: $ROUNDS rounds alternating $BASE_BIN (base) and $CEREA_BIN (after); $CHATS chats, $ASSISTANTS assistants, ${DURATION}s loaded, $LOW sequential; data in ${BENCH_TMP:-/tmp}; $(uptime | sed 's/.*load/load/')"
  for r in $(seq 1 "$ROUNDS"); do one_run "$BASE_BIN" base; one_run "$CEREA_BIN" after; done
  echo "== $(uptime | sed 's/.*load/load/')"
  python3 - "$TMP/ab.txt" <<'PY'
import json, statistics, sys
rows = {"base": [], "after": []}
for line in open(sys.argv[1]):
    label, text = line.split(" ", 1)
    rows[label].append(json.loads(text)["result"])
med = {}
for label, rs in rows.items():
    low = statistics.median(r["low"]["p50_ms"] for r in rs)
    rps = statistics.median(r["loaded"]["runs_per_s"] for r in rs)
    cpu = statistics.median(r["loaded"]["server_cpu_us_per_run"] for r in rs)
    med[label] = (low, rps, cpu)
    print(f"== {label:5s}: low-load p50 {low:.3f} ms, loaded {rps:.0f} runs/s, server CPU {cpu:.1f} us/run "
          f"(medians of {len(rs)}; low p50s {[r['low']['p50_ms'] for r in rs]}, runs/s {[round(r['loaded']['runs_per_s']) for r in rs]})")
print(f"== after/base: loaded runs/s {med['after'][1] / med['base'][1]:.3f}, "
      f"server CPU per run {med['after'][2] / med['base'][2]:.3f}, low-load p50 {med['after'][0]:.3f} ms (target <= 1 ms)")
PY
  exit 0
fi

PORT="$(free_port)"
CEREA_API_KEY=$KEY CEREA_LOG=warn "$CEREA_BIN" serve --listen "127.0.0.1:$PORT" --data "$TMP/data" >"$TMP/ours.log" 2>&1 &
OURS=$!; PIDS+=("$OURS")
NGP="$(free_port)"
nghttpd --no-tls -d "$WWW" "$NGP" >"$TMP/ng.log" 2>&1 &
PIDS+=("$!")
wait_port "$PORT" && wait_port "$NGP" || { echo "a server did not start"; cat "$TMP"/*.log; exit 1; }
echo "== runs ($CLIENT client): $CHATS chats/pages, $ASSISTANTS assistants, ${DURATION}s loaded, $LOW sequential at low load; $(uptime | sed 's/.*load/load/')"
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
# The floor: the same h2load on our cheapest exchange (GET /healthz: no body, no auth, no SQL),
# and the least CPU SQLite needs for one run's rows (bench/runs/sqlite_floor.c), on the same medium
OURS_T0="$(ticks "$OURS")"
echo "== ours /healthz, h2load -t1 -c100 -m10 -D $DURATION"
h2load -t1 -c100 -m10 -D "$DURATION" "http://127.0.0.1:$PORT/healthz" 2>&1 | tee "$TMP/h2load-ours.txt" | grep -E "finished in|requests:"
OURS_T1="$(ticks "$OURS")"
HZ_REQS="$(grep -oE 'requests: [0-9]+ total' "$TMP/h2load-ours.txt" | grep -oE '[0-9]+')"
echo "== SQLite floor (sqlite_floor, synchronous=OFF, groups of 8 runs, data dir beside ours)"
"$SQLITE_FLOOR" "$TMP/floor-schema" --runs 100000 --group 8 | tee "$TMP/floor.json"
"$SQLITE_FLOOR" "$TMP/floor-bare" --runs 100000 --group 8 --bare | tee -a "$TMP/floor.json"
python3 - "$TMP/runs.json" "$NG_RPS" "$NG_REQS" "$NG_T0" "$NG_T1" "$HZ_REQS" "$OURS_T0" "$OURS_T1" "$TMP/floor.json" "$(nproc)" <<'PY'
import json, os, sys
res = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{"result"')][0]["result"]["loaded"]
ng, reqs, t0, t1 = float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
hz_reqs, o0, o1 = int(sys.argv[6]), int(sys.argv[7]), int(sys.argv[8])
tck = os.sysconf("SC_CLK_TCK")
ng_us = (t1 - t0) * 1e6 / tck / max(1, reqs)
hz_us = (o1 - o0) * 1e6 / tck / max(1, hz_reqs)
fl = {d["mode"]: d["cpu_us_per_run"] for d in map(json.loads, open(sys.argv[9]))}
cores = int(sys.argv[10])
runs, ours_us, client_us = res["runs_per_s"], res["server_cpu_us_per_run"], res["client_cpu_us_per_run"]
print(f"== runs/s {runs:.0f} vs nghttpd {ng:.0f} req/s: ratio {runs/ng:.3f} (target >= 0.25)")
print(f"== server CPU: ours {ours_us:.1f} us/run, nghttpd {ng_us:.2f} us/req: "
      f"CPU-normalised ratio {ng_us/ours_us:.3f} (runs per core-second / nghttpd requests per core-second)")
budget = 4 * ng_us
print(f"== budget and floors, server CPU per run (a run = 3 HTTP exchanges + 1 event + 2 durable commits):")
print(f"   budget for 0.25x CPU-normalised: 4 x nghttpd's request = {budget:.1f} us")
print(f"   floor A: 3 exchanges at nghttpd's cost + SQLite's bare 2 rows = "
      f"{3 * ng_us:.1f} + {fl['bare']:.1f} = {3 * ng_us + fl['bare']:.1f} us")
print(f"   floor B: 3 exchanges at our /healthz cost ({hz_us:.2f} us) + SQLite with this schema = "
      f"{3 * hz_us:.1f} + {fl['schema']:.1f} = {3 * hz_us + fl['schema']:.1f} us")
print(f"   measured: {ours_us:.1f} us; load generator {client_us:.1f} us/run, so on {cores} cores "
      f"runs/s <= {cores * 1e6 / client_us:.0f} even with a free server (0.25x = {0.25 * ng:.0f})")
PY
