#!/usr/bin/env bash
# Runs the dashboard's browser test: installs playwright-core (pinned by package-lock.json)
# into WORK_DIR once, then drives Debian's chromium against a fresh `delayq serve`.
#   run.sh DELAYQ_BINARY WORK_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$1 work=$2
mkdir -p "$work"
if ! cmp -s "$here/package-lock.json" "$work/package-lock.json" || [ ! -d "$work/node_modules/playwright-core" ]; then
  cp "$here/package.json" "$here/package-lock.json" "$work/"
  (cd "$work" && npm ci --no-audit --no-fund --silent)
fi
cp "$here/dashboard_e2e.js" "$work/"
cd "$work" && exec node dashboard_e2e.js "$bin" "$work/screenshots"
