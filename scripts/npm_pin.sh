#!/usr/bin/env bash
# Usage: scripts/npm_pin.sh NAME DEST PKG@VERSION...
# Installs npm packages at exact versions into DEST/node_modules (a folder of
# refs/, not committed), with their install scripts off. Does nothing when
# every pinned version is there already. The fetch_*.sh scripts call it.
set -euo pipefail
name="$1"; dest="$2"; shift 2
pkgs=("$@")

mkdir -p "$dest"
have_all=1
for spec in "${pkgs[@]}"; do
  pkg="${spec%@*}"; version="${spec##*@}"
  pj="$dest/node_modules/$pkg/package.json"
  if [[ ! -f "$pj" ]] || ! grep -q "\"version\": \"$version\"" "$pj"; then have_all=0; fi
done
if [[ $have_all == 1 ]]; then
  echo "$name: $dest is up to date"
  exit 0
fi
command -v npm >/dev/null || { echo "$name: npm not found (apt-get install npm)" >&2; exit 1; }
cd "$dest"
[[ -f package.json ]] || echo "{\"name\":\"bonfire-$name\",\"private\":true,\"type\":\"module\"}" > package.json
npm install --no-audit --no-fund --ignore-scripts --save-exact "${pkgs[@]}" >/dev/null
echo "$name: installed ${pkgs[*]}"
