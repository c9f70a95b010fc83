#!/usr/bin/env bash
# Installs what the browser test of the web page (tests/web/browser.test.mjs)
# drives Debian's chromium with: playwright-core (the library only; it
# downloads no browser). Into refs/web-test (not committed).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
exec "$root/scripts/npm_pin.sh" fetch_web_test_deps "$root/refs/web-test" "playwright-core@1.65.1"
