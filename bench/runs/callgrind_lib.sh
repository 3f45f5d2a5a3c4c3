# bench/runs/callgrind_lib.sh -- what the orchestrator's callgrind benches share (sourced, not run):
# a temporary directory on tmpfs removed at exit with the server stopped by pid, a free port, and
# one server started under callgrind; each bench drives it with its own load and takes the
# difference of two runs (bench/runs/callgrind.sh per run, bench/output/callgrind.sh per chunk).
#   cg_serve TAG      starts CEREA_BIN under callgrind on a free port (PORT, PID, CG_OUT set)
#   cg_stop           stops it (SIGTERM), waits for it, and sets CG_TOTAL to its instructions (call
#                     it in the shell that started the server, not in $(...)); KEEP=DIR keeps the file
KEY=bench-key-0123456789abcdef
command -v valgrind >/dev/null || { echo "missing valgrind"; exit 1; }
[ -x "$CEREA_BIN" ] || { echo "build cerea-sandbox first ($CEREA_BIN)"; exit 1; }
TMP="$(mktemp -d "${BENCH_TMP:-/dev/shm}/cg-XXXXXX")"; PID=""
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 1 1200); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }

cg_serve() {
  PORT="$(free_port)"; CG_OUT="$TMP/callgrind.$1.out"
  CEREA_API_KEY=$KEY CEREA_LOG=warn valgrind --tool=callgrind --callgrind-out-file="$CG_OUT" \
    "$CEREA_BIN" serve --listen "127.0.0.1:$PORT" --data "$TMP/data-$1" >"$TMP/log-$1" 2>&1 &
  PID=$!
  wait_port "$PORT" || { echo "server did not start"; cat "$TMP/log-$1"; exit 1; }
}

cg_stop() {
  kill -TERM "$PID"; wait "$PID" 2>/dev/null; PID=""
  CG_TOTAL="$(grep -E '^(summary|totals):' "$CG_OUT" | head -1 | awk '{print $2}')"
  if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp "$CG_OUT" "$KEEP/"; fi
}
