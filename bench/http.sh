#!/usr/bin/env bash
# bench/http.sh -- the transport under load, beside Debian's nghttpd serving the same file in the
# same run.
#
#   bash bench/http.sh   (CEREA_BIN=... picks a binary; DURATION=4 s per load; ROUNDS=3)
#
# What it runs, each for DURATION seconds after a 1 s warm-up, ROUNDS times alternating ours and
# nghttpd (the best round of each is kept), client and server on loopback:
#   h2load -t1 -c100 -m10   h2c and h2 over TLS: our /healthz, our small static file
#                            (/pyodide/NOTICE.txt), nghttpd's copy of the same file
#   wrk -t1 -c100            HTTP/1.1: our /healthz and the static file (nghttpd has no HTTP/1.1)
#   1,000 idle HTTP/2 connections (and 1,000 idle keep-alive HTTP/1.1 ones): server RSS delta
#                            per connection, ours and nghttpd's (bench/http/idle_conns.py)
# and prints req/s, mean latency, and our/nghttpd ratios.  One instance of ours (TLS and plain on
# one port) and two of nghttpd (--no-tls, TLS), all single-threaded.  Processes are started and
# stopped by pid.  The machine is shared and small: read ranges, not single figures.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 1
DURATION="${DURATION:-4}"
if [ -z "${CEREA_BIN:-}" ]; then
  cmake --build build --target cerea-sandbox -j2 2>&1 | grep -E "warning|error|Error" || true
  CEREA_BIN="$ROOT/build/cerea-sandbox"
fi
WWW="$ROOT/build/www"
FILE=/pyodide/NOTICE.txt
[ -f "$WWW$FILE" ] || { echo "no $WWW$FILE: run scripts/setup.sh"; exit 1; }
for t in h2load wrk nghttpd openssl python3; do
  command -v "$t" >/dev/null || { echo "missing $t (Debian: nghttp2-client, wrk, nghttp2-server)"; exit 1; }
done
ulimit -n 8192 2>/dev/null || ulimit -n 4096

TMP="$(mktemp -d /tmp/tp-bench-XXXXXX)"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
  rm -rf "$TMP"
}
trap cleanup EXIT
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
  -subj /CN=localhost -keyout "$TMP/key.pem" -out "$TMP/cert.pem" >/dev/null 2>&1

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 1 100); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }

OURS_PORT="$(free_port)"
"$CEREA_BIN" serve --listen "127.0.0.1:$OURS_PORT" --data "$TMP/data" \
  --tls-cert "$TMP/cert.pem" --tls-key "$TMP/key.pem" >"$TMP/ours.log" 2>&1 &
OURS_PID=$!; PIDS+=("$OURS_PID")
NG_PORT="$(free_port)"
nghttpd --no-tls -d "$WWW" "$NG_PORT" >"$TMP/ng.log" 2>&1 &
NG_PID=$!; PIDS+=("$NG_PID")
NGT_PORT="$(free_port)"
nghttpd -d "$WWW" "$NGT_PORT" "$TMP/key.pem" "$TMP/cert.pem" >"$TMP/ngt.log" 2>&1 &
NGT_PID=$!; PIDS+=("$NGT_PID")
for p in "$OURS_PORT" "$NG_PORT" "$NGT_PORT"; do
  wait_port "$p" || { echo "a server did not start"; cat "$TMP"/*.log; exit 1; }
done
sleep 0.5

declare -A RPS LAT CPU
ROUNDS="${ROUNDS:-3}"
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; } # user + system, in clock ticks
HZ="$(getconf CLK_TCK)"
# h2 NAME URL PID: h2load; keeps the best req/s over the rounds it is called (with that round's
# mean request time) -- on a shared machine the best round is the least disturbed -- and the
# server's CPU time per request (its own user + system time over the requests done), the figure
# least sensitive to other load.
h2() {
  local out rps lat failed t0 t1 done_n
  t0="$(ticks "$3")"
  out="$(h2load -t1 -c100 -m10 --warm-up-time=1 -D "$DURATION" "$2" 2>&1)"
  t1="$(ticks "$3")"
  rps="$(sed -n 's/^finished in .*, \([0-9.]*\) req\/s.*/\1/p' <<<"$out" | cut -d. -f1)"
  lat="$(awk '/^time for request:/ {print $6}' <<<"$out")"
  failed="$(sed -n 's/^requests: .* \([0-9]*\) failed.*/\1/p' <<<"$out")"
  done_n="$(sed -n 's/^requests: [0-9]* total, [0-9]* started, \([0-9]*\) done.*/\1/p' <<<"$out")"
  [ "${failed:-1}" = "0" ] || echo "  ($1: ${failed:-?} failed requests)"
  if [ "${rps:-0}" -gt "${RPS[$1]:-0}" ]; then RPS[$1]=$rps; LAT[$1]=$lat; fi
  # CPU per request in nanoseconds (the warm-up's requests are not counted: a slight overstatement)
  local us=$(( (t1 - t0) * 1000000000 / HZ / (${done_n:-0} > 0 ? done_n : 1) ))
  if [ -z "${CPU[$1]:-}" ] || [ "$us" -lt "${CPU[$1]}" ]; then CPU[$1]=$us; fi
}
# h1 NAME URL PID: wrk, best of the rounds as well.
h1() {
  local out rps t0 t1 n us
  t0="$(ticks "$3")"
  out="$(wrk -t1 -c100 -d"${DURATION}s" "$2" 2>&1)"
  t1="$(ticks "$3")"
  rps="$(awk '/^Requests\/sec:/ {print int($2)}' <<<"$out")"
  n="$(awk '/requests in/ {print $1}' <<<"$out")"
  us=$(( (t1 - t0) * 1000000000 / HZ / (${n:-0} > 0 ? n : 1) ))
  if [ "${rps:-0}" -gt "${RPS[$1]:-0}" ]; then RPS[$1]=$rps; LAT[$1]="$(awk '/^ *Latency/ {print $2}' <<<"$out")"; fi
  if [ -z "${CPU[$1]:-}" ] || [ "$us" -lt "${CPU[$1]}" ]; then CPU[$1]=$us; fi
}

echo "== load (${DURATION}s each, best of $ROUNDS alternating rounds; h2load -t1 -c100 -m10, wrk -t1 -c100)"
for _ in $(seq 1 "$ROUNDS"); do
  h2 ours_h2c_file "http://127.0.0.1:$OURS_PORT$FILE" "$OURS_PID"
  h2 ng_h2c_file "http://127.0.0.1:$NG_PORT$FILE" "$NG_PID"
  h2 ours_h2c_healthz "http://127.0.0.1:$OURS_PORT/healthz" "$OURS_PID"
  h2 ours_tls_file "https://127.0.0.1:$OURS_PORT$FILE" "$OURS_PID"
  h2 ng_tls_file "https://127.0.0.1:$NGT_PORT$FILE" "$NGT_PID"
  h2 ours_tls_healthz "https://127.0.0.1:$OURS_PORT/healthz" "$OURS_PID"
  h1 ours_h1_healthz "http://127.0.0.1:$OURS_PORT/healthz" "$OURS_PID"
  h1 ours_h1_file "http://127.0.0.1:$OURS_PORT$FILE" "$OURS_PID"
done

printf '%-22s %12s %14s %18s\n' load req/s "mean latency" "server CPU/req"
for k in ours_h2c_healthz ours_h2c_file ng_h2c_file ours_tls_healthz ours_tls_file ng_tls_file \
         ours_h1_healthz ours_h1_file; do
  printf '%-22s %12s %14s %16sus\n' "$k" "${RPS[$k]:-?}" "${LAT[$k]:-?}" \
    "$(awk -v n="${CPU[$k]:-0}" 'BEGIN {printf "%.1f", n / 1000}')"
done
ratio() { python3 -c "import sys; a,b=float(sys.argv[1] or 0),float(sys.argv[2] or 0); print(f'{a/b:.2f}' if b else '?')" "$1" "$2"; }
echo "ratio ours/nghttpd, static file, h2c: $(ratio "${RPS[ours_h2c_file]:-0}" "${RPS[ng_h2c_file]:-0}")"
echo "ratio ours/nghttpd, static file, TLS: $(ratio "${RPS[ours_tls_file]:-0}" "${RPS[ng_tls_file]:-0}")"
echo "ratio ours /healthz / nghttpd file, h2c: $(ratio "${RPS[ours_h2c_healthz]:-0}" "${RPS[ng_h2c_file]:-0}")"
echo "CPU per request, nghttpd/ours (1.0 = as cheap), static file, h2c: $(ratio "${CPU[ng_h2c_file]:-0}" "${CPU[ours_h2c_file]:-0}"), TLS: $(ratio "${CPU[ng_tls_file]:-0}" "${CPU[ours_tls_file]:-0}")"

echo "== idle connections (1,000 each, on a fresh server each; server RSS delta / connection)"
# fresh NAME CMD...: starts a server on a new port for one measurement; sets FPORT and FPID.
fresh() {
  FPORT="$(free_port)"
  "$@" >"$TMP/fresh.log" 2>&1 &
  FPID=$!; PIDS+=("$FPID")
  wait_port "$FPORT" || { echo "fresh server did not start"; cat "$TMP/fresh.log"; }
  sleep 0.3
}
stop_fresh() { kill "$FPID" 2>/dev/null; wait "$FPID" 2>/dev/null; }
ours_cmd() { exec "$CEREA_BIN" serve --listen "127.0.0.1:$FPORT" --data "$TMP/data-idle-$FPORT"; }
fresh ours_cmd
echo "ours h2c:      $(python3 bench/http/idle_conns.py --port "$FPORT" --pid "$FPID" --n 1000 --proto h2)"
stop_fresh
fresh ours_cmd
echo "ours http/1.1: $(python3 bench/http/idle_conns.py --port "$FPORT" --pid "$FPID" --n 1000 --proto h1)"
stop_fresh
ng_cmd() { exec nghttpd --no-tls -d "$WWW" "$FPORT"; }
fresh ng_cmd
echo "nghttpd h2c:   $(python3 bench/http/idle_conns.py --port "$FPORT" --pid "$FPID" --n 1000 --proto h2)"
stop_fresh

kill -TERM "$OURS_PID"
wait "$OURS_PID"; echo "our server exit code after SIGTERM: $?"
