#!/usr/bin/env bash
# Transport integration: the real binary (`cerea-sandbox serve`) on a free 127.0.0.1 port, driven
# by curl over HTTP/1.1, h2c (prior knowledge), h2 and HTTP/1.1 over TLS (a certificate made here
# with the openssl CLI), and a unix socket: /healthz, /metrics by protocol, /pyodide/ static files
# (MIME, precompressed br/gzip, Range, ETag -> 304, no redirects), TLS configuration errors, and a
# graceful stop on SIGTERM; then protocol abuse against the same binary with Debian's python3-h2
# (tests/integration/transport_abuse.py: HPACK bomb, zero-window streams, slow uploads, HTTP/2
# uploads past the header timeout).  Every process is started and stopped by its pid.
# CEREA_BIN picks another binary (e.g. build-asan/cerea-sandbox).
set -uo pipefail
cd "$ROOT" || exit 1
if [ -z "${CEREA_BIN:-}" ]; then
  cmake --build build --target cerea-sandbox -j2 2>&1 | grep -E "warning|error|Error" || true
  CEREA_BIN="$ROOT/build/cerea-sandbox"
fi
WWW="$ROOT/build/www/pyodide"
[ -f "$WWW/pyodide.asm.wasm" ] || { echo "no $WWW/pyodide.asm.wasm: run scripts/setup.sh"; exit 1; }

TMP="$(mktemp -d /tmp/tp-int-XXXXXX)"
PIDS=()
pass=0; fail=0
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  rm -rf "$TMP"
}
trap cleanup EXIT

ok() { pass=$((pass + 1)); echo "ok   $1"; }
ko() { fail=$((fail + 1)); echo "FAIL $1${2:+: $2}"; }
check() { # name, command...
  local name="$1"; shift
  if "$@" >/dev/null 2>&1; then ok "$name"; else ko "$name"; fi
}

# start NAME ARGS...: starts the server, waits for its port; sets PORT and PID.
start() {
  local name="$1"; shift
  local log="$TMP/$name.log"
  "$CEREA_BIN" serve --data "$TMP/data-$name" "$@" >"$log" 2>&1 &
  PID=$!
  PIDS+=("$PID")
  PORT=""
  for _ in $(seq 1 100); do
    PORT="$(sed -n 's/.*(port \([0-9]*\)).*/\1/p' "$log" | head -1)"
    [ -n "$PORT" ] && [ "$PORT" != "-1" ] && curl -s -o /dev/null "http://127.0.0.1:$PORT/healthz" && return 0
    kill -0 "$PID" 2>/dev/null || break
    sleep 0.1
  done
  echo "server $name did not start:"; cat "$log"
  return 1
}

# stop PID: SIGTERM, expect a clean exit within 5 s.
stop() {
  local pid="$1" rc
  kill -TERM "$pid"
  for _ in $(seq 1 50); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid"; wait "$pid" 2>/dev/null; return 1; fi
  wait "$pid"; rc=$?
  return "$rc"
}

# ---- plain listener (HTTP/1.1, h2c) + unix socket ----------------------------------------------
SOCK="$TMP/orch.sock"
start plain --listen 127.0.0.1:0 --listen "unix:$SOCK" || { echo "0 passed, 1 failed"; exit 1; }
U="http://127.0.0.1:$PORT"
SPID=$PID

h="$(curl -s -D - -o "$TMP/hz" "$U/healthz")"
check "http/1.1 /healthz 200" grep -q "^HTTP/1.1 200" <<<"$h"
check "http/1.1 /healthz json" grep -qi "^content-type: application/json" <<<"$h"
v="$(curl -s --http2-prior-knowledge -o /dev/null -w '%{http_version} %{http_code}' "$U/healthz")"
[ "$v" = "2 200" ] && ok "h2c /healthz" || ko "h2c /healthz" "$v"
if [ -S "$SOCK" ]; then
  v="$(curl -s --unix-socket "$SOCK" -o /dev/null -w '%{http_code}' http://x/healthz)"
  [ "$v" = "200" ] && ok "unix socket /healthz" || ko "unix socket /healthz" "$v"
  v="$(curl -s --http2-prior-knowledge --unix-socket "$SOCK" -o /dev/null -w '%{http_version}' http://x/healthz)"
  [ "$v" = "2" ] && ok "unix socket h2c" || ko "unix socket h2c" "$v"
else
  ko "unix socket listener" "no socket at $SOCK"
fi

# Static files under /pyodide/.
W="$U/pyodide/pyodide.asm.wasm"
size="$(stat -c %s "$WWW/pyodide.asm.wasm")"
h="$(curl -s -D - -o "$TMP/w" "$W")"
check "wasm 200" grep -q "^HTTP/1.1 200" <<<"$h"
check "wasm application/wasm" grep -qi "^content-type: application/wasm" <<<"$h"
check "wasm long-lived cache" grep -qi "^cache-control: .*max-age=31536000" <<<"$h"
check "wasm bytes identical" cmp -s "$TMP/w" "$WWW/pyodide.asm.wasm"
if [ -f "$WWW/pyodide.asm.wasm.br" ]; then
  h="$(curl -s -D - -o "$TMP/wbr" -H 'Accept-Encoding: br' "$W")"
  check "wasm br variant" grep -qi "^content-encoding: br" <<<"$h"
  check "wasm br bytes" cmp -s "$TMP/wbr" "$WWW/pyodide.asm.wasm.br"
  check "wasm vary" grep -qi "^vary: accept-encoding" <<<"$h"
fi
if [ -f "$WWW/pyodide.asm.wasm.gz" ]; then
  v="$(curl -s --compressed -H 'Accept-Encoding: gzip' -o "$TMP/wgz" -w '%{size_download}' "$W")"
  check "wasm gzip decodes to the file" cmp -s "$TMP/wgz" "$WWW/pyodide.asm.wasm"
  [ "$v" -lt "$size" ] && ok "wasm gzip smaller on the wire" || ko "wasm gzip smaller" "$v >= $size"
fi
v="$(curl -s -r 100-199 -o "$TMP/r" -w '%{http_code} %{size_download}' "$W")"
[ "$v" = "206 100" ] && ok "range 206" || ko "range 206" "$v"
check "range bytes" cmp -s "$TMP/r" <(tail -c +101 "$WWW/pyodide.asm.wasm" | head -c 100)
v="$(curl -s -r "$size-" -o /dev/null -w '%{http_code}' "$W")"
[ "$v" = "416" ] && ok "range 416" || ko "range 416" "$v"
etag="$(curl -s -D - -o /dev/null "$W" | sed -n 's/^[Ee][Tt][Aa][Gg]: *\(.*\)\r$/\1/p')"
v="$(curl -s -o /dev/null -w '%{http_code}' -H "If-None-Match: $etag" "$W")"
[ -n "$etag" ] && [ "$v" = "304" ] && ok "etag 304" || ko "etag 304" "etag '$etag' -> $v"
v="$(curl -s --http2-prior-knowledge -o /dev/null -w '%{http_code}' -H "If-None-Match: $etag" "$W")"
[ "$v" = "304" ] && ok "etag 304 over h2c" || ko "etag 304 over h2c" "$v"
v="$(curl -s --http2-prior-knowledge -o "$TMP/w2" -w '%{http_version}' "$W")"
[ "$v" = "2" ] && cmp -s "$TMP/w2" "$WWW/pyodide.asm.wasm" && ok "wasm over h2c" || ko "wasm over h2c" "$v"
v="$(curl -s -o /dev/null -w '%{http_code}' "$U/pyodide/pyodide.mjs")"
h="$(curl -s -D - -o /dev/null "$U/pyodide/pyodide.mjs")"
check "mjs javascript" grep -qi "^content-type: text/javascript" <<<"$h"
for p in /pyodide /pyodide/ /pyodide/nonexistent /pyodide/../README.md /pyodide/%2e%2e/README.md; do
  v="$(curl -s -o /dev/null -w '%{http_code}' --path-as-is "$U$p")"
  case "$v" in 3*) ko "no redirect under $p" "$v" ;; *) ok "no redirect under $p ($v)" ;; esac
done
v="$(curl -s -o /dev/null -w '%{http_code}' --path-as-is "$U/pyodide/../README.md")"
[ "$v" = "404" ] && ok "traversal refused" || ko "traversal refused" "$v"

# Limits on the real binary.
v="$(curl -s -o /dev/null -w '%{http_code}' -H "X-Big: $(head -c 20000 /dev/zero | tr '\0' a)" "$U/healthz")"
[ "$v" = "431" ] && ok "431 header limit" || ko "431 header limit" "$v"
v="$(curl -s -o /dev/null -w '%{http_code}' "$U/$(head -c 9000 /dev/zero | tr '\0' a)")"
[ "$v" = "414" ] && ok "414 request line" || ko "414 request line" "$v"

m="$(curl -s "$U/metrics")"
check "metrics http/1.1 connections" grep -Eq '^cerea_http_connections_total\{protocol="http/1.1"\} [1-9]' <<<"$m"
check "metrics h2c connections" grep -Eq '^cerea_http_connections_total\{protocol="h2c"\} [1-9]' <<<"$m"
check "metrics responses by code" grep -Eq '^cerea_http_responses_total\{code="200"\} [1-9]' <<<"$m"

stop "$SPID" && ok "SIGTERM: clean exit" || ko "SIGTERM: clean exit"
[ ! -S "$SOCK" ] && ok "unix socket removed" || ko "unix socket removed"

# ---- TLS ------------------------------------------------------------------------------------------
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
  -subj /CN=localhost -keyout "$TMP/key.pem" -out "$TMP/cert.pem" >/dev/null 2>&1
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
  -subj /CN=other -keyout "$TMP/key2.pem" -out "$TMP/cert2.pem" >/dev/null 2>&1
if start tls --listen 127.0.0.1:0 --tls-cert "$TMP/cert.pem" --tls-key "$TMP/key.pem"; then
  U="127.0.0.1:$PORT"
  v="$(curl -sk --http2 -o /dev/null -w '%{http_version} %{http_code}' "https://$U/healthz")"
  [ "$v" = "2 200" ] && ok "h2 over TLS (ALPN)" || ko "h2 over TLS" "$v"
  v="$(curl -sk --http1.1 -o /dev/null -w '%{http_version} %{http_code}' "https://$U/healthz")"
  [ "$v" = "1.1 200" ] && ok "http/1.1 over TLS" || ko "http/1.1 over TLS" "$v"
  v="$(curl -sk --http2 -o "$TMP/wt" -w '%{http_code}' "https://$U/pyodide/pyodide.asm.wasm")"
  [ "$v" = "200" ] && cmp -s "$TMP/wt" "$WWW/pyodide.asm.wasm" && ok "wasm over h2+TLS" || ko "wasm over h2+TLS" "$v"
  v="$(curl -s -o /dev/null -w '%{http_code}' "http://$U/healthz")"
  [ "$v" = "200" ] && ok "plain http beside TLS" || ko "plain http beside TLS" "$v"
  m="$(curl -s "http://$U/metrics")"
  check "metrics h2 connections" grep -Eq '^cerea_http_connections_total\{protocol="h2"\} [1-9]' <<<"$m"
  stop "$PID" && ok "TLS server: clean exit" || ko "TLS server: clean exit"
else
  ko "TLS server start"
fi
# Clear errors for bad TLS files.
# (timeout stops the binary should it start anyway; it is a child of this shell, by pid)
out="$(timeout 5 "$CEREA_BIN" serve --listen 127.0.0.1:0 --data "$TMP/d3" --tls-cert "$TMP/nope.pem" --tls-key "$TMP/key.pem" 2>&1)"
grep -q "cannot read TLS certificate" <<<"$out" && ok "unreadable cert: clear error" || ko "unreadable cert" "$out"
out="$(timeout 5 "$CEREA_BIN" serve --listen 127.0.0.1:0 --data "$TMP/d4" --tls-cert "$TMP/cert.pem" --tls-key "$TMP/key2.pem" 2>&1)"
grep -q "does not match" <<<"$out" && ok "mismatched key: clear error" || ko "mismatched key" "$out"

# Protocol abuse (issue 21): its own servers, its own lines; its counts join ours.
if /usr/bin/python3 -c 'import h2' 2>/dev/null; then
  out="$(CEREA_BIN="$CEREA_BIN" /usr/bin/python3 tests/integration/transport_abuse.py 2>&1)"
  echo "$out"
  line="$(grep -E '^transport abuse: [0-9]+ passed, [0-9]+ failed' <<<"$out" | tail -1)"
  if [ -n "$line" ]; then
    pass=$((pass + $(sed 's/.*: \([0-9]*\) passed.*/\1/' <<<"$line")))
    fail=$((fail + $(sed 's/.* \([0-9]*\) failed.*/\1/' <<<"$line")))
  else
    ko "transport abuse" "no result line"
  fi
else
  ko "transport abuse" "python3-h2 is missing (scripts/setup.d/10-apt.sh installs it)"
fi

echo "transport integration: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
