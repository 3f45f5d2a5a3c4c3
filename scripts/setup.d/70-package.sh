#!/usr/bin/env bash
# The ui-adapter library as an npm package: build/ui-adapter/cerea-ui-adapter-V.tgz (npm pack;
# TypeScript declarations generated from the JSDoc by tsc).  After 60-app.sh: it ships the kernel
# worker that build made.  See ui-adapter/pack.mjs.
set -euo pipefail
cd "$ROOT"
node ui-adapter/pack.mjs
