#!/usr/bin/env bash
# run.sh -- set up, then run the orchestrator with its web app (`cerea-sandbox serve`: by default
# on 127.0.0.1:8080 with data in ./var, or CEREA_LISTEN / CEREA_DATA_DIR).  Extra arguments go to
# `serve` and replace those defaults: `bash scripts/run.sh --listen 127.0.0.1:9000` listens on
# 9000 alone (for when 8080 is taken).  RUN_NO_SETUP=1 skips the (idempotent) setup step.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
[ -n "${RUN_NO_SETUP:-}" ] || bash scripts/setup.sh
exec ./build/cerea-sandbox serve "$@"
