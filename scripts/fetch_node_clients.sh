#!/usr/bin/env bash
# Installs the real clients the network tests drive bonfire with: the
# official OpenAI client for Node (the /v1 API must work with it unchanged).
# Into refs/node-clients (not committed). Does nothing when the pinned
# versions are there already.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="$root/refs/node-clients"
pkgs=("openai@6.49.0")

mkdir -p "$dest"
have_all=1
for spec in "${pkgs[@]}"; do
  name="${spec%@*}"; version="${spec##*@}"
  pj="$dest/node_modules/$name/package.json"
  if [[ ! -f "$pj" ]] || ! grep -q "\"version\": \"$version\"" "$pj"; then have_all=0; fi
done
if [[ $have_all == 1 ]]; then
  echo "fetch_node_clients: refs/node-clients is up to date"
  exit 0
fi
command -v npm >/dev/null || { echo "fetch_node_clients: npm not found (apt-get install npm)" >&2; exit 1; }
cd "$dest"
[[ -f package.json ]] || echo '{"name":"bonfire-node-clients","private":true,"type":"module"}' > package.json
npm install --no-audit --no-fund --ignore-scripts "${pkgs[@]}" >/dev/null
echo "fetch_node_clients: installed ${pkgs[*]}"
