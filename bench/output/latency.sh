#!/usr/bin/env bash
# bench/output/latency.sh -- latency of live output: from a page's POST /v1/runs/{run}/output to
# the `output` event at a backend following the run (GET /v1/runs/{run}/events) and at the chat's
# page stream, p50/p99, over RUNS x CHUNKS chunks posted one at a time (bench/output/chunks.mjs),
# against the built server with its data on tmpfs.  Prints chunks.mjs's JSON line.
#
#   bash bench/output/latency.sh     (CEREA_BIN=..., RUNS=20, CHUNKS=100, TEXT=40)
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CEREA_BIN="${CEREA_BIN:-$ROOT/build/cerea-sandbox}"
RUNS="${RUNS:-20}"; CHUNKS="${CHUNKS:-100}"; TEXT="${TEXT:-40}"
TMP="$(mktemp -d "${BENCH_TMP:-/dev/shm}/lat-XXXXXX")"; PID=""
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
KEY=bench-key-0123456789abcdef
CEREA_API_KEY=$KEY CEREA_LOG=warn "$CEREA_BIN" serve --listen "127.0.0.1:$port" --data "$TMP/data" >"$TMP/log" 2>&1 &
PID=$!
for _ in $(seq 1 100); do (exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null && break; sleep 0.1; done
node "$ROOT/bench/output/chunks.mjs" --port "$port" --key "$KEY" --runs "$RUNS" --chunks "$CHUNKS" \
  --text "$TEXT" --server-pid "$PID"
