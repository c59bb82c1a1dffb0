#!/usr/bin/env bash
# What the tests need besides cargo: the Python test clients (tests/requirements.txt, among
# them Playwright, which drives Debian's Chromium for tests/browser.rs), axe-core from npm
# (the browser tests' accessibility check) and Debian's
# Prometheus (tests/ops.rs runs a real one against the gateway). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q -r tests/requirements.txt
need=()
command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1 || need+=(prometheus)
[ -x /usr/bin/chromium ] || need+=(chromium)
command -v npm >/dev/null 2>&1 || need+=(npm)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# axe-core (pinned in tests/browser/package-lock.json), injected by the panel's browser test.
npm ci --prefix tests/browser --no-audit --no-fund --loglevel=error
