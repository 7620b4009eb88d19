#!/usr/bin/env bash
# Installs Debian's chromium + chromium-driver for the browser tests (tests/web) when they
# are missing. Needs apt-get and root (or sudo without a password); exits 1 if it cannot.
set -uo pipefail
if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then
  exit 0
fi
if ! command -v apt-get >/dev/null; then
  echo "install_browser: no apt-get here; install chromium and its chromedriver yourself" >&2
  exit 1
fi
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo -n"
echo "installing chromium + chromium-driver (browser tests)..." >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y -q --no-install-recommends chromium chromium-driver >/dev/null 2>&1 || {
  $SUDO apt-get update -q >/dev/null &&
  $SUDO apt-get install -y -q --no-install-recommends chromium chromium-driver >/dev/null
} || { echo "install_browser: apt-get could not install chromium chromium-driver" >&2; exit 1; }
