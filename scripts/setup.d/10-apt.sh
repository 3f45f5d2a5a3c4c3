#!/usr/bin/env bash
# Debian packages: build tools and libraries of the orchestrator, test and benchmark tools (clang
# with libFuzzer for tests/fuzz/; python3-h2, an HTTP/2 client for the abuse tests, run with
# /usr/bin/python3), the browsers for end-to-end tests (Chromium; Firefox ESR and WebKitGTK's
# WebDriver with its MiniBrowser, under Xvfb, for the cross-engine set), and the Debian Python packages the offline
# office wheels are built from.  PostgreSQL: libpq for the store's second backend, the server for
# its tests (stage 45 starts a throwaway one; Debian's own cluster is not used); libcurl for the
# requests one node forwards to another; libargon2 for people's passwords (Argon2id).  Installs only
# what is missing.
set -euo pipefail
pkgs=(
  build-essential cmake pkg-config git curl ca-certificates
  libuv1-dev libnghttp2-dev libjansson-dev libsqlite3-dev sqlite3 libssl-dev openssl
  libhttp-parser-dev check libsubunit-dev
  libutf8proc-dev libargon2-dev
  libcurl4-openssl-dev
  libpq-dev postgresql
  brotli gzip
  nghttp2-client nghttp2-server wrk valgrind
  clang libclang-rt-dev python3-h2
  bubblewrap libseccomp-dev util-linux systemd
  chromium firefox-esr webkit2gtk-driver xvfb libgl1-mesa-dri
  python3 python3-openpyxl python3-et-xmlfile python3-xlsxwriter python3-pypdf
)
command -v node >/dev/null 2>&1 || pkgs+=(nodejs)
command -v npm >/dev/null 2>&1 || pkgs+=(npm)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "apt: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "apt: all ${#pkgs[@]} packages present"
fi
