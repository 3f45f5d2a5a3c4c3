#!/usr/bin/env bash
# JS packages from the one package.json + lock at the root.  `npm ci` only when node_modules is
# missing or older than the lock file.
set -euo pipefail
cd "$ROOT"
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error
else
  echo "npm: node_modules up to date"
fi
