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
# The PostgreSQL databases earlier runs of the tests and benches created (disparo_test_<n>,
# disparo_load_<pid>): the tests do not drop theirs, and ~150 per run would fill the
# disk over many runs. Dropped here, before a run, when nothing uses them.
if [ -n "${DISPARO_TEST_POSTGRES_URL:-}" ] && command -v psql >/dev/null 2>&1; then
  psql "$DISPARO_TEST_POSTGRES_URL" -Atc \
    "SELECT datname FROM pg_database WHERE datname ~ '^disparo_(test|load)_[0-9]+$'" 2>/dev/null |
    while read -r db; do
      psql "$DISPARO_TEST_POSTGRES_URL" -qc "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" >/dev/null 2>&1 || true
    done || true
fi
