#!/usr/bin/env bash
# What the tests need besides cargo: the Python test clients (tests/requirements.txt) and
# Debian's Prometheus (tests/ops.rs runs a real one against the gateway). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q -r tests/requirements.txt
if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi
