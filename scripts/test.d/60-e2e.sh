#!/usr/bin/env bash
# Browser end-to-end tests: playwright-core driving Debian's /usr/bin/chromium (headless, fresh
# profile per launch, never a downloaded browser) against the static test server (playground) and
# the real orchestrator binary (chat page, admin).  Test files run one at a time (2 cores).
# Screenshots of the main views land in test-results/ (git-ignored).
set -euo pipefail
cd "$ROOT"
test -s build/www/index.html || node ui-adapter/build.mjs
node --test --test-force-exit --test-timeout=900000 --test-concurrency=1 --test-reporter=spec tests/e2e/*.test.mjs
