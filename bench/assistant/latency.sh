#!/usr/bin/env bash
# bench/assistant/latency.sh -- the assistant's tool-call round trip: from the model's tool call to
# the run's result reaching the model, p50/p99, with an instant page, over TURNS turns
# (bench/assistant/toolcall.mjs, against the model TEST DOUBLE: no model runs), the built server
# with its data on tmpfs.  Prints toolcall.mjs's JSON line.
#
#   bash bench/assistant/latency.sh     (CEREA_BIN=..., TURNS=200)
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CEREA_BIN="${CEREA_BIN:-$ROOT/build/cerea-sandbox}"
TURNS="${TURNS:-200}"
TMP="$(mktemp -d "${BENCH_TMP:-/dev/shm}/asst-XXXXXX")"; PID=""; NPID=""
cleanup() {
  [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
  [ -n "$NPID" ] && kill "$NPID" 2>/dev/null && wait "$NPID" 2>/dev/null
  rm -rf "$TMP"
}
trap cleanup EXIT
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
KEY=bench-key-0123456789abcdef
node "$ROOT/bench/assistant/toolcall.mjs" --port "$port" --key "$KEY" --turns "$TURNS" \
  --model-port-file "$TMP/model_port" &
NPID=$!
for _ in $(seq 1 100); do [ -s "$TMP/model_port" ] && break; sleep 0.1; done
CEREA_API_KEY=$KEY CEREA_LOG=warn CEREA_LLM_URL="http://127.0.0.1:$(cat "$TMP/model_port")/v1" \
  CEREA_LLM_MODEL=double "$CEREA_BIN" serve --listen "127.0.0.1:$port" --data "$TMP/data" \
  >"$TMP/log" 2>&1 &
PID=$!
wait "$NPID"; rc=$?; NPID=""
exit $rc
