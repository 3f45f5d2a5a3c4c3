#!/usr/bin/env bash
# run.sh -- set up, then run the orchestrator with its web app on 127.0.0.1:8080, data in ./var.
# Extra arguments go to `cerea-sandbox serve` (e.g. --listen 127.0.0.1:9000).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/setup.sh
exec ./build/cerea-sandbox serve --listen 127.0.0.1:8080 --data ./var "$@"
