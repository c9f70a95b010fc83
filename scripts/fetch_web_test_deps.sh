#!/usr/bin/env bash
# Installs what the browser test of the web page (tests/web/browser.test.mjs)
# drives Debian's chromium with: playwright-core (the library only; it
# downloads no browser). Into refs/web-test (not committed). Does nothing
# when the pinned versions are there already.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="$root/refs/web-test"
pkgs=("playwright-core@1.65.1")

mkdir -p "$dest"
have_all=1
for spec in "${pkgs[@]}"; do
  name="${spec%@*}"; version="${spec##*@}"
  pj="$dest/node_modules/$name/package.json"
  if [[ ! -f "$pj" ]] || ! grep -q "\"version\": \"$version\"" "$pj"; then have_all=0; fi
done
if [[ $have_all == 1 ]]; then
  echo "fetch_web_test_deps: refs/web-test is up to date"
  exit 0
fi
command -v npm >/dev/null || { echo "fetch_web_test_deps: npm not found (apt-get install npm)" >&2; exit 1; }
cd "$dest"
[[ -f package.json ]] || echo '{"name":"bonfire-web-test","private":true,"type":"module"}' > package.json
npm install --no-audit --no-fund --ignore-scripts "${pkgs[@]}" >/dev/null
echo "fetch_web_test_deps: installed ${pkgs[*]}"
