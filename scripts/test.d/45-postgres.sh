#!/usr/bin/env bash
# Stage 45: the PostgreSQL backend, against a real server this stage starts itself
# (scripts/pg-test.sh: Debian's postgresql 15, initdb in a temporary directory as the postgres
# user, a Unix socket there and a free port on 127.0.0.1) and stops by pid at the end:
#   - the persistence Check suites of stage 10 again, under ASan/UBSan, with STORE_TEST_PG set:
#     the same suites on PostgreSQL (SQLite-only tests print why they are skipped), plus the
#     PostgreSQL-only ones (test_store_pg, test_store_chunks);
#   - the orchestrator integration tests of stage 40 with CEREA_TEST_PG set: every server they
#     start keeps its store in that database (tests/integration/lib.mjs);
#   - tests/nodes/: several orchestrators on one database (bad configuration refused; a node
#     SIGKILLed under load and its chats taken over; the lease log checked).
# PG_STAGE_ONLY=unit runs the Check suites alone.
set -euo pipefail
cd "$ROOT"
eval "$(bash scripts/pg-test.sh start)"
trap 'bash scripts/pg-test.sh stop "$PGTEST_DIR"' EXIT
echo "postgres: pid $PGTEST_PID, port $PGTEST_PORT, $("${PG_BIN:-/usr/lib/postgresql/15/bin}/postgres" --version)"
export STORE_TEST_PG="$PGTEST_URL" STORE_TEST_PG_TCP="$PGTEST_TCP_URL" STORE_TEST_PG_PORT="$PGTEST_PORT"

cmake -S . -B build-asan -DSBX_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build build-asan -j2 2>&1 | grep -E "warning|error|Error" || true
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j2 -R '^test_store_'
[ "${PG_STAGE_ONLY:-}" = unit ] && exit 0

if [ -z "${CEREA_BIN:-}" ]; then
  cmake --build build --target cerea-sandbox -j2 2>&1 | grep -E "warning|error|Error" || true
  export CEREA_BIN="$ROOT/build/cerea-sandbox"
fi
CEREA_TEST_PG="$PGTEST_URL" CEREA_TEST_PG_TCP="$PGTEST_TCP_URL" node --test --test-force-exit --test-timeout=900000 --test-concurrency=1 \
  --test-reporter=spec tests/integration/orchestrator*.test.mjs tests/integration/cli.test.mjs \
  tests/nodes/*.test.mjs
