#!/usr/bin/env bash
# bench/fuzz.sh -- builds the libFuzzer targets of tests/fuzz/ (build-fuzz/: clang, ASan + UBSan,
# SBX_DEBUG state checks) and runs them, printing per target the executions reached and the
# findings.
#
#   bash bench/fuzz.sh                   every target, 60 s each
#   bash bench/fuzz.sh TARGET SECONDS    one target (http1, h2, ...: tests/fuzz/fuzz_TARGET.c)
#   bash bench/fuzz.sh all SECONDS       every target, SECONDS each, one after the other
#   bash bench/fuzz.sh long [TARGET...]  the long campaign: each target (api and mcp by default)
#                                        to FUZZ_RUNS executions (10^7) with no time bound, side
#                                        by side, at NICE=19 unless NICE is set
#   (NICE=19 runs them at the lowest priority; FUZZ_ARGS adds libFuzzer flags; FUZZ_TIMEOUT is
#   the seconds one input may take, 20, or 120 in the long campaign)
#
# Each target runs on its working corpus build-fuzz/corpus/TARGET (kept between runs, seeded
# from the committed tests/fuzz/corpus/TARGET) with tests/fuzz/TARGET.dict when there is one;
# findings (crash-*, leak-*, timeout-*, oom-*) land in build-fuzz/findings/TARGET/.  A finding,
# once fixed, goes to tests/fuzz/corpus/TARGET/regress-NAME so every later run replays it.  Exits
# non-zero when a target found something; the last line is "fuzz: N passed, N failed".
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 1
WHICH="${1:-all}"
SECONDS_EACH="${2:-60}"
B="$ROOT/build-fuzz"
if [ "$WHICH" = long ]; then
  shift
  long=("$@"); ((${#long[@]})) || long=(api mcp)
  # FUZZ_TIMEOUT 120: a loaded machine starves a NICE=19 fuzzer of the CPU for 20 s at a time (an
  # ordinary api input that replays in 2 s was taken for a hang at load 39)
  export NICE="${NICE:-19}" FUZZ_ARGS="-runs=${FUZZ_RUNS:-10000000} ${FUZZ_ARGS:-}" \
    FUZZ_TIMEOUT="${FUZZ_TIMEOUT:-120}"
  # one build first, so the parallel runs below never configure or build the same tree at once
  FUZZ_BUILD_ONLY=1 bash "$0" all 0 || exit 1
  pids=()
  for t in "${long[@]}"; do
    FUZZ_NO_BUILD=1 bash "$0" "$t" 0 >"$B/long-$t.out" 2>&1 &
    pids+=("$!")
  done
  rc=0
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || rc=1
    grep "^fuzz ${long[$i]}" "$B/long-${long[$i]}.out"
  done
  echo "fuzz long: $([ "$rc" -eq 0 ] && echo passed || echo FAILED)"
  exit "$rc"
fi
command -v clang >/dev/null || { echo "fuzz: clang is missing (Debian: clang, libclang-rt-dev)"; exit 1; }
if [ -z "${FUZZ_NO_BUILD:-}" ]; then
  cmake -S . -B "$B" -DCMAKE_C_COMPILER=clang -DSBX_FUZZ=ON -DSBX_SANITIZE=ON -DSBX_TESTS=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || exit 1
fi
targets=()
for f in tests/fuzz/fuzz_*.c; do
  t="$(basename "$f" .c)"; t="${t#fuzz_}"
  [ "$t" = tp ] && continue # the transport's support file, not a target
  if [ "$WHICH" = all ] || [ "$WHICH" = "$t" ]; then targets+=("$t"); fi
done
((${#targets[@]})) || { echo "fuzz: no target named $WHICH"; exit 1; }
if [ -z "${FUZZ_NO_BUILD:-}" ]; then
  nice cmake --build "$B" -j2 --target "${targets[@]/#/fuzz_}" 2>&1 | grep -E "error|warning: " || true
fi
[ -z "${FUZZ_BUILD_ONLY:-}" ] || exit 0
# What counts as a finding: not libFuzzer's slow-unit-* (an input past 10 s, which a loaded machine
# makes of an ordinary one; kept beside them for a look).
found_in() { find "$1" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l; }
pass=0; fail=0
for t in "${targets[@]}"; do
  bin="$B/tests/fuzz/fuzz_$t"
  [ -x "$bin" ] || { echo "fuzz $t: not built"; fail=$((fail + 1)); continue; }
  corpus="$B/corpus/$t" findings="$B/findings/$t"
  mkdir -p "$corpus" "$findings"
  dict=(); [ -f "tests/fuzz/$t.dict" ] && dict=("-dict=tests/fuzz/$t.dict")
  seeds=(); [ -d "tests/fuzz/corpus/$t" ] && seeds=("tests/fuzz/corpus/$t")
  before="$(found_in "$findings")"
  log="$B/fuzz-$t.log"
  # shellcheck disable=SC2086
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    nice -n "${NICE:-0}" "$bin" -max_total_time="$SECONDS_EACH" -max_len=20000 -timeout="${FUZZ_TIMEOUT:-20}" \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$findings/" "${dict[@]}" \
    ${FUZZ_ARGS:-} "$corpus" "${seeds[@]}" >"$log" 2>&1
  rc=$?
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)"
  [ -n "$execs" ] || execs="$(grep -o '^#[0-9]*' "$log" | tail -1 | tr -d '#')"
  secs="$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -1)"
  rate="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)"
  cov="$(grep -o 'cov: [0-9]*' "$log" | tail -1)"
  after="$(found_in "$findings")"
  found=$((after - before))
  echo "fuzz $t: ${execs:-0} executions in ${secs:-$SECONDS_EACH} s (${rate:-?}/s), ${cov:-cov: ?}," \
       "corpus $(find "$corpus" -type f | wc -l), findings $found"
  if [ "$rc" -ne 0 ] || [ "$found" -gt 0 ]; then
    fail=$((fail + 1))
    echo "fuzz $t: FAILED (exit $rc); see $log and $findings/"
    grep -E "ERROR|SUMMARY|runtime error|fuzz_tp:" "$log" | head -20
  else
    pass=$((pass + 1))
  fi
done
echo "fuzz: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
