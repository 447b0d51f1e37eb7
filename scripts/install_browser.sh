#!/usr/bin/env bash
# Installs Debian's Chromium and its matching chromedriver, for the Wordle page's browser test
# (tests/wordle/test_wordle_web.py). `make test` runs it first (the `browser` target).
#
# It never fails the build: when it cannot install (no apt-get, not root and no password-less sudo, no network), it
# says why here and in .browser-install.log, and the browser test skips with that reason.
set -u
cd "$(dirname "$0")/.."
LOG=.browser-install.log

say() { echo "browser: $*"; echo "$*" > "$LOG"; }

if command -v chromedriver >/dev/null 2>&1 && { command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; }; then
  say "chromium and chromedriver are installed ($(command -v chromedriver))"
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  say "no apt-get on this machine: install Chromium and chromedriver (matching versions) to run the browser test"
  exit 0
fi
SUDO=()
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO=(sudo -n)
  else
    say "not root and no password-less sudo: run 'sudo apt-get install chromium chromium-driver' to run the browser test"
    exit 0
  fi
fi
install() { "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium chromium-driver; }
echo "browser: installing Debian's chromium and chromium-driver (once; about 85 MB)"
if install >/tmp/rolloutlab-apt.log 2>&1 || { "${SUDO[@]}" apt-get update -q >>/tmp/rolloutlab-apt.log 2>&1 && install >>/tmp/rolloutlab-apt.log 2>&1; }; then
  say "installed chromium and chromium-driver from Debian"
else
  say "apt-get could not install chromium chromium-driver (see /tmp/rolloutlab-apt.log): $(tail -n 1 /tmp/rolloutlab-apt.log)"
fi
exit 0
