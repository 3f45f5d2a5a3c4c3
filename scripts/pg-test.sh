#!/usr/bin/env bash
# scripts/pg-test.sh -- a throwaway PostgreSQL server for tests and benchmarks: Debian's
# postgresql 15 (initdb and pg_ctl) in a fresh temporary directory, run as the unprivileged
# `postgres` user when started as root (CI runs as root; initdb refuses root), listening on a Unix
# socket in that directory and on 127.0.0.1 at a free port.  Local (socket) connections are
# trusted; TCP ones need the generated password (scram-sha-256), so a wrong one can be tested.
#
#   eval "$(bash scripts/pg-test.sh start)"   starts one; prints shell assignments:
#        PGTEST_DIR       the directory (its data, socket, log)
#        PGTEST_PID       the postmaster's pid
#        PGTEST_URL       postgresql:// over the socket, user postgres (trusted)
#        PGTEST_TCP_URL   postgresql:// over 127.0.0.1 with the password
#        PGTEST_PORT, PGTEST_PASSWORD
#   bash scripts/pg-test.sh stop DIR          stops that server by its pid (fast shutdown, then
#                                             SIGKILL after 30 s) and removes DIR
#
# PGTEST_FSYNC=off (default on) starts it without fsync, for tests that measure nothing durable.
# What it does not do: touch the machine's own clusters (pg_ctlcluster, /var/lib/postgresql), or
# leave anything running after `stop`.
set -euo pipefail
BIN="${PG_BIN:-/usr/lib/postgresql/15/bin}"
cmd="${1:-}"

as_pg() { # runs a command as the postgres user when we are root
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case "$cmd" in
start)
  [ -x "$BIN/initdb" ] || { echo "pg-test: no $BIN/initdb (apt-get install postgresql)" >&2; exit 1; }
  DIR="$(mktemp -d "${TMPDIR:-/tmp}/sbx-pg-XXXXXX")"
  chmod 700 "$DIR"
  [ "$(id -u)" -eq 0 ] && chown postgres:postgres "$DIR"
  PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  PW="$(head -c 18 /dev/urandom | base64 | tr -d '/+=')"
  as_pg sh -c "umask 077; printf '%s\n' '$PW' > '$DIR/pw'"
  as_pg "$BIN/initdb" -D "$DIR/data" -U postgres -E UTF8 --locale=C --auth-local=trust \
    --auth-host=scram-sha-256 --pwfile="$DIR/pw" >"$DIR/initdb.log" 2>&1 ||
    { cat "$DIR/initdb.log" >&2; rm -rf "$DIR"; exit 1; }
  as_pg rm -f "$DIR/pw"
  OPTS="-c listen_addresses=127.0.0.1 -c port=$PORT -c unix_socket_directories=$DIR"
  OPTS="$OPTS -c max_connections=300 -c shared_buffers=64MB -c fsync=${PGTEST_FSYNC:-on}"
  as_pg "$BIN/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w -t 60 -o "$OPTS" start >/dev/null ||
    { cat "$DIR/server.log" >&2; rm -rf "$DIR"; exit 1; }
  PID="$(head -1 "$DIR/data/postmaster.pid")"
  echo "PGTEST_DIR='$DIR'"
  echo "PGTEST_PID='$PID'"
  echo "PGTEST_PORT='$PORT'"
  echo "PGTEST_PASSWORD='$PW'"
  echo "PGTEST_URL='postgresql:///postgres?host=$DIR&port=$PORT&user=postgres'"
  echo "PGTEST_TCP_URL='postgresql://postgres:$PW@127.0.0.1:$PORT/postgres'"
  ;;
stop)
  DIR="${2:?usage: pg-test.sh stop DIR}"
  case "$DIR" in */sbx-pg-*) ;; *) echo "pg-test: $DIR is not a pg-test directory" >&2; exit 1 ;; esac
  if [ -f "$DIR/data/postmaster.pid" ]; then
    PID="$(head -1 "$DIR/data/postmaster.pid")"
    kill -INT "$PID" 2>/dev/null || true # fast shutdown: the backends end, the server exits
    for _ in $(seq 1 300); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$PID" 2>/dev/null && kill -KILL "$PID" 2>/dev/null || true
  fi
  rm -rf "$DIR"
  ;;
*)
  echo "usage: pg-test.sh start | stop DIR" >&2
  exit 2
  ;;
esac
