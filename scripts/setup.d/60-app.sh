#!/usr/bin/env bash
# The web app and the kernel worker, bundled with esbuild from the pinned npm packages into the
# served tree build/www/ (index.html, chat.html, admin.html, assets/, worker/kernel-worker.js).
# Nothing is fetched from a CDN; build/www/ is never committed.  See ui-adapter/build.mjs.
set -euo pipefail
cd "$ROOT"
node ui-adapter/build.mjs
test -s build/www/index.html && test -s build/www/assets/app.js && test -s build/www/worker/kernel-worker.js
