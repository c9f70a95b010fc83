#!/bin/sh
# Installs llama.cpp's prebuilt libraries (libggml-base, libllama) from npm
# under refs/llama so scripts/gen_gguf_goldens.py can call the real quantizers
# and the real GGUF reader. Only the golden generator needs them; CI reads the
# committed goldens, and the source of the same release (for gguf-py and the
# converter). --ignore-scripts: the package's postinstall would try to
# download or build a binary, which we do not want; the linux-x64 prebuilt
# ships inside the optional @node-llama-cpp/linux-x64 package.
set -eu
VERSION=3.21.1
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEST="$ROOT/refs/llama"
mkdir -p "$DEST"
cd "$DEST"
[ -f package.json ] || echo '{"name":"bonfire-llama-refs","private":true}' > package.json
npm install --no-audit --no-fund --ignore-scripts "node-llama-cpp@$VERSION"
LIB=$(find "$DEST/node_modules/@node-llama-cpp" -path '*linux-x64/bins/linux-x64/libggml-base.so' | head -n 1)
if [ -z "$LIB" ]; then
  echo "fetch_llama_cpp.sh: libggml-base.so not found under $DEST/node_modules/@node-llama-cpp" >&2
  exit 1
fi
# The same release's source (gguf-py, the converter) ships as a git bundle:
# the golden script reads llama.cpp's own tensor-name map and rope permutation.
BUNDLE="$DEST/node_modules/node-llama-cpp/llama/gitRelease.bundle"
if [ ! -d "$DEST/llama.cpp" ]; then
  git clone --quiet "$BUNDLE" "$DEST/llama.cpp"
fi
echo "$(dirname "$LIB")"
