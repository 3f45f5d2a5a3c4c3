#!/usr/bin/env bash
# The cross-engine e2e set (tests/e2e/engines/): the engine-independent checks once per engine --
# Chromium (playwright-core), Firefox ESR (puppeteer-core over WebDriver BiDi), WebKitGTK
# (selenium-webdriver against WebKitWebDriver under its own Xvfb display) with SharedArrayBuffer
# and without -- against the real orchestrator.  Debian's browsers only (scripts/setup.d/10-apt.sh);
# one missing is a printed skip on a developer machine and a failure where CI is set.
set -euo pipefail
cd "$ROOT"
test -s build/www/index.html || node ui-adapter/build.mjs
node --test --test-force-exit --test-timeout=900000 --test-concurrency=1 --test-reporter=spec tests/e2e/engines/*.test.mjs
