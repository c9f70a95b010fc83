#!/usr/bin/env bash
# Installs the QMoE reference: ONNX Runtime's Node package (its CPU build runs
# com.microsoft QMoE) into refs/ort (not committed; /refs/ is gitignored), and
# Debian's python3-onnx + python3-numpy, which scripts/qmoe/gen_cases.py uses
# to build single-node models.
#
#   scripts/qmoe/setup_ort.sh          # install if missing, then check it loads
#
# --ignore-scripts: the package's postinstall only downloads GPU/extra
# binaries; the CPU binding for linux x64 (bin/napi-v6/linux/x64/
# onnxruntime_binding.node + libonnxruntime.so.1) ships inside the npm
# tarball, so nothing else is fetched. Idempotent.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dest="$root/refs/ort"
version="1.30.0"

if ! /usr/bin/python3 -c 'import onnx, numpy' 2>/dev/null; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get install -y -qq python3-onnx python3-numpy >/dev/null 2>&1 || {
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq python3-onnx python3-numpy
  }
fi

pj="$dest/node_modules/onnxruntime-node/package.json"
if [[ ! -f "$pj" ]] || ! grep -q "\"version\": \"$version\"" "$pj"; then
  command -v npm >/dev/null || { echo "setup_ort: npm not found (apt-get install npm)" >&2; exit 1; }
  mkdir -p "$dest"
  [[ -f "$dest/package.json" ]] || echo '{"name":"bonfire-ort","private":true,"type":"module"}' > "$dest/package.json"
  (cd "$dest" && npm install --no-audit --no-fund --ignore-scripts "onnxruntime-node@$version" >/dev/null)
  echo "setup_ort: installed onnxruntime-node@$version into refs/ort"
fi

binding="$dest/node_modules/onnxruntime-node/bin/napi-v6/linux/x64/onnxruntime_binding.node"
[[ -f "$binding" ]] || { echo "setup_ort: missing $binding (the npm package should ship it)" >&2; exit 1; }
# Load the binding and list the CPU provider: fails loudly if the .node cannot load.
(cd "$dest" && node -e "
const ort = require('onnxruntime-node');
const eps = ort.listSupportedBackends ? ort.listSupportedBackends().map(b => b.name) : ['cpu'];
if (!eps.includes('cpu')) { console.error('setup_ort: no cpu backend in', eps); process.exit(1); }
console.log('setup_ort: onnxruntime-node', ort.env.versions.node, 'loads; backends:', eps.join(','));
")
