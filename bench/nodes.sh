#!/usr/bin/env bash
# bench/nodes.sh -- runs end to end (bench/runs/run_bench.mjs: pages answering at once, assistants
# posting runs with wait_s, every write durable before it is acknowledged) in one run on three
# stores: SQLite (one orchestrator), PostgreSQL (one orchestrator, CEREA_DATABASE_URL) and
# PostgreSQL with three nodes (CEREA_NODE_URL; chat i created on node i mod 3 and its page and runs
# sent there: a balancer hashing on the chat id that reaches the owner, docs/scale.md).  Prints
# each one's low-load p50 and loaded runs/s, p50, p99, the orchestrators' CPU per run and the
# PostgreSQL server's (its postmaster and backends, from /proc).
#
#   bash bench/nodes.sh     (CEREA_BIN=..., CHATS=300, ASSISTANTS=32, DURATION=10, LOW=500,
#                            BENCH_TMP=/tmp for the data dirs)
#
# PostgreSQL: a throwaway server of scripts/pg-test.sh (fsync on, over its Unix socket), a fresh
# schema per configuration, stopped by pid at the end with every orchestrator this script started.
# The machine is small and shared (three nodes, the database and the load generator on the same
# cores): read ranges, not single figures, and the three nodes' figure as what the coordination
# costs, not as scaling.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 1
CHATS="${CHATS:-300}"; ASSISTANTS="${ASSISTANTS:-32}"; DURATION="${DURATION:-10}"; LOW="${LOW:-500}"
if [ -z "${CEREA_BIN:-}" ]; then
  cmake --build build --target cerea-sandbox -j2 2>&1 | grep -E "warning|error|Error" || true
  CEREA_BIN="$ROOT/build/cerea-sandbox"
fi
for t in node psql curl python3; do command -v "$t" >/dev/null || { echo "missing $t"; exit 1; }; done
ulimit -n 8192 2>/dev/null || true
eval "$(bash scripts/pg-test.sh start)" || { echo "no PostgreSQL server"; exit 1; }
TMP="$(mktemp -d "${BENCH_TMP:-/tmp}/nodes-bench-XXXXXX")"; PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
  bash scripts/pg-test.sh stop "$PGTEST_DIR"; rm -rf "$TMP"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
KEY=bench-key-0123456789abcdef

# serve NAME PORT [VAR=VALUE...]: one orchestrator on a fresh data dir; its pid in $SERVED
serve() {
  local name="$1" port="$2"; shift 2
  env CEREA_API_KEY=$KEY CEREA_LOG=warn "$@" "$CEREA_BIN" serve --listen "127.0.0.1:$port" \
    --data "$TMP/$name" >"$TMP/$name.log" 2>&1 &
  SERVED=$!; PIDS+=("$SERVED")
}
# ready PORT PATH: until GET PATH answers (and, for a node, says it serves)
ready() {
  for _ in $(seq 1 200); do
    curl -sf "http://127.0.0.1:$1$2" 2>/dev/null | grep -qv '"ready":false' && return 0
    sleep 0.1
  done
  return 1
}
schema_url() {
  psql "$PGTEST_URL" -qXc "SET client_min_messages = warning; CREATE SCHEMA $1" || exit 1
  case "$PGTEST_URL" in *\?*) echo "$PGTEST_URL&options=-csearch_path%3D$1" ;;
                        *) echo "$PGTEST_URL?options=-csearch_path%3D$1" ;; esac
}
# bench LABEL PORTS PIDS [DB_PID]: the load generator, its result line kept
bench() {
  echo "== $1 (ports $2)"
  node bench/runs/run_bench.mjs --port "$2" --server-pid "$3" ${4:+--db-pid "$4"} --key "$KEY" \
    --chats "$CHATS" --assistants "$ASSISTANTS" --duration "$DURATION" --low "$LOW" \
    | tee "$TMP/out.txt" | grep -v '^{"result"'
  grep '^{"result"' "$TMP/out.txt" | sed "s/^/$1 /" >>"$TMP/results.txt" || echo "$1: no result"
}
stop_all() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
  PIDS=()
}

port="$(free_port)"; serve sqlite "$port"
ready "$port" /healthz || { echo "sqlite: did not start"; cat "$TMP/sqlite.log"; exit 1; }
bench sqlite "$port" "$SERVED"; stop_all

port="$(free_port)"; serve pg1 "$port" CEREA_DATABASE_URL="$(schema_url bench_pg1_$$)"
ready "$port" /healthz || { echo "pg1: did not start"; cat "$TMP/pg1.log"; exit 1; }
bench postgresql_1 "$port" "$SERVED" "$PGTEST_PID"; stop_all

url="$(schema_url bench_pg3_$$)"; ports=(); pids=()
for i in 1 2 3; do
  p="$(free_port)"; ports+=("$p")
  serve "node$i" "$p" CEREA_DATABASE_URL="$url" CEREA_NODE_URL="http://127.0.0.1:$p"
  pids+=("$SERVED")
done
for i in 0 1 2; do
  ready "${ports[$i]}" /v1/node || { echo "node$((i + 1)): did not start"; cat "$TMP/node$((i + 1)).log"; exit 1; }
done
bench postgresql_3_nodes "$(IFS=,; echo "${ports[*]}")" "$(IFS=,; echo "${pids[*]}")" "$PGTEST_PID"
stop_all

echo "== summary (low load: 1 assistant; loaded: $ASSISTANTS assistants, $CHATS chats, ${DURATION}s; load $(cut -d' ' -f1-3 /proc/loadavg))"
python3 - "$TMP/results.txt" <<'EOF'
import json, sys
print(f"{'store':<20} {'low p50 ms':>10} {'runs/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'cpu us/run':>10} {'db cpu us/run':>13}")
for line in open(sys.argv[1]):
    label, js = line.split(' ', 1)
    r = json.loads(js)['result']; lo, ld = r['low'], r['loaded']
    print(f"{label:<20} {lo['p50_ms']:>10} {ld['runs_per_s']:>8} {ld['p50_ms']:>8} {ld['p99_ms']:>8} "
          f"{ld['server_cpu_us_per_run']:>10} {str(ld.get('db_cpu_us_per_run', '-')):>13}")
EOF
