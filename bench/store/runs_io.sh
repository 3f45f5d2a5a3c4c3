#!/usr/bin/env bash
# bench/store/runs_io.sh -- what the runs benchmark costs the store in system calls and WAL pages,
# per run: the loaded phase of bench/runs (runs_load: 1000 chats, 64 assistants) against one
# orchestrator on a fresh data dir, then
#   - perf's syscall tracepoint counts of pwrite64 / pread64 / fdatasync / fsync, per run;
#   - the writer thread's /proc/PID/task/TID/io (its write and read syscalls and bytes), from which
#     the WAL frames (two pwrites each: header + page) and checkpoint pages (one pwrite each) are
#     estimated, and the other threads' written bytes (the checkpointer's pages);
#   - a second server killed (kill -9) mid-load, and its WAL's current generation mapped to b-trees
#     (as bench/runs/wal_pages.py does), divided by the creates and results that generation holds
#     (row counts with and without the WAL): frames per run by b-tree, which does not depend on how
#     many runs a commit grouped the way frames per commit does.
# What it does not do: measure CPU or latency (bench/runs.sh, bench/runs/callgrind.sh), or build
# anything: it runs the binaries it is given.
#
#   bash bench/store/runs_io.sh      (CEREA_BIN=build/cerea-sandbox, RUNS_LOAD=build/bench/runs/runs_load,
#                                     BENCH_TMP=/dev/shm, DURATION=4, KILL_AT=6 seconds after start)
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CEREA_BIN="${CEREA_BIN:-$ROOT/build/cerea-sandbox}"
RUNS_LOAD="${RUNS_LOAD:-$ROOT/build/bench/runs/runs_load}"
DURATION="${DURATION:-4}"; KILL_AT="${KILL_AT:-6}"
[ -x "$CEREA_BIN" ] && [ -x "$RUNS_LOAD" ] || { echo "build cerea-sandbox and runs_load first"; exit 1; }
command -v perf >/dev/null || { echo "missing perf"; exit 1; }
TMP="$(mktemp -d "${BENCH_TMP:-/dev/shm}/runs-io-XXXXXX")"; PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; rm -rf "$TMP"; }
trap cleanup EXIT
ulimit -n 8192 2>/dev/null || true
KEY=bench-key-0123456789abcdef
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 1 100); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }
serve() { # $1 = name; sets PORT and PID
  PORT="$(free_port)"
  CEREA_API_KEY=$KEY CEREA_LOG=warn "$CEREA_BIN" serve --listen "127.0.0.1:$PORT" --data "$TMP/$1" >"$TMP/$1.log" 2>&1 &
  PID=$!; PIDS+=("$PID")
  wait_port "$PORT" || { echo "server did not start"; cat "$TMP/$1.log"; exit 1; }
}

echo "== syscalls per run (loaded phase ${DURATION}s; data on ${BENCH_TMP:-/dev/shm})"
serve a
perf stat --per-thread -o "$TMP/perf" -p "$PID" -e syscalls:sys_enter_fdatasync,syscalls:sys_enter_fsync,syscalls:sys_enter_pwrite64,syscalls:sys_enter_pread64 &
PERF=$!
sleep 0.3
"$RUNS_LOAD" --port "$PORT" --key "$KEY" --server-pid "$PID" --chats 1000 --assistants 64 \
  --duration "$DURATION" --low 100 >"$TMP/runs.json" || { echo "runs_load failed"; exit 1; }
for t in /proc/"$PID"/task/*; do echo "$(basename "$t") $(tr '\n' ' ' <"$t/io")"; done >"$TMP/io"
kill -INT "$PERF"; wait "$PERF"
python3 - "$TMP" "$PID" <<'PY'
import json, sys
d, pid = sys.argv[1], sys.argv[2]
r = [json.loads(l) for l in open(d + "/runs.json") if l.startswith('{"result')][0]["result"]
runs = r["low"]["runs"] + r["loaded"]["runs"] + 50  # + runs_load's warm-up
cnt = {}
for l in open(d + "/perf"):
    s = l.split()
    if len(s) >= 3 and "sys_enter_" in s[2]:
        k = s[2].split("sys_enter_")[1]
        cnt[k] = cnt.get(k, 0) + int(s[1].replace(",", ""))
io = {}
for l in open(d + "/io"):
    p = l.split()
    io[p[0]] = {k.rstrip(":"): int(v) for k, v in zip(p[1::2], p[2::2])}
w = max((v for t, v in io.items() if t != pid), key=lambda v: v["wchar"])  # the writer thread
pages = w["wchar"] / 4096.0
frames = w["syscw"] - pages  # syscw = 2 frames + 1 checkpoint page; wchar ~ 4 KiB each
ld = r["loaded"]
print(f"loaded: {ld['runs']} runs, {ld['runs_per_s']} runs/s, server CPU {ld['server_cpu_us_per_run']} us/run")
print("per run: " + ", ".join(f"{k} {cnt.get(k, 0) / runs:.2f}" for k in ("pwrite64", "pread64", "fdatasync", "fsync")))
print(f"writer thread per run: ~{frames / runs:.2f} WAL frames, ~{(pages - frames) / runs:.2f} checkpoint pages, "
      f"{w['rchar'] / runs / 1024:.1f} KiB read")
# the checkpointer thread (persistence/checkpoint.c) writes only database pages
ck = sum(v["wchar"] for t, v in io.items() if t != pid and v is not w) / 4096.0
print(f"other threads (the checkpointer) per run: ~{ck / runs:.2f} checkpoint pages; "
      f"all threads: ~{(ck + pages - frames) / runs:.2f}")
PY
kill -9 "$PID"; wait "$PID" 2>/dev/null

echo "== WAL frames per run by b-tree (kill -9 ${KILL_AT}s into a ${DURATION}+s load)"
serve b
"$RUNS_LOAD" --port "$PORT" --key "$KEY" --server-pid "$PID" --chats 1000 --assistants 64 \
  --duration $((DURATION + KILL_AT)) --low 100 >/dev/null 2>&1 &
LOAD=$!; PIDS+=("$LOAD")
sleep "$KILL_AT"
kill -9 "$PID"; wait "$PID" 2>/dev/null; wait "$LOAD" 2>/dev/null
python3 - "$TMP/b/cerea.db" "$ROOT/bench/runs" <<'PY'
import collections, os, shutil, sqlite3, sys, tempfile
sys.path.insert(0, sys.argv[2])
from wal_pages import frames
db = sys.argv[1]
page_size, fr = frames(db + "-wal")
commits = sum(1 for _, c in fr if c)
def rows(path):
    c = sqlite3.connect(path)
    n = [c.execute(q).fetchone()[0] for q in ("SELECT count(*) FROM runs",
                                               "SELECT count(*) FROM runs WHERE state = 'done'")]
    names = {pg: name for name, pg in c.execute("SELECT name, pageno FROM dbstat")}
    c.close()
    return n, names
with tempfile.TemporaryDirectory() as d:
    a, b = os.path.join(d, "a.db"), os.path.join(d, "b.db")
    shutil.copy(db, a); shutil.copy(db + "-wal", a + "-wal"); shutil.copy(db, b)
    full, names = rows(a)
    try:
        base, _ = rows(b)  # the database file alone: what the WAL's generation started from
    except sqlite3.DatabaseError:
        base = None  # a checkpoint was copying this generation when the server died
if base is None:
    print("the database file alone is not readable (killed mid-checkpoint): run again"); sys.exit(0)
creates, results = full[0] - base[0], full[1] - base[1]
per = max(1.0, (creates + results) / 2.0)
by = collections.Counter(names.get(pg, "?") for pg, _ in fr)
print(f"{len(fr)} frames in {commits} commits holding {creates} creates and {results} results: "
      f"{len(fr) / max(1, commits):.1f} frames per commit, {len(fr) / per:.2f} per run")
for name, n in by.most_common():
    print(f"  {name:28s} {n:6d}  {n / max(1, commits):6.2f} per commit  {n / per:6.3f} per run")
PY
