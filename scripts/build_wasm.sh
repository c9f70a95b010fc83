#!/usr/bin/env bash
# Builds the browser worker (WebAssembly) with Debian's emscripten into
# build/wasm/, beside build/bonfire, where `bonfire serve` finds it for /lend.
# Usage: scripts/build_wasm.sh [OUT_DIR]   (scripts/setup.sh installs emscripten)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="$(realpath -m "${1:-build/wasm}")"
command -v emcmake >/dev/null || { echo "build_wasm.sh: emscripten is missing: scripts/setup.sh installs it" >&2; exit 1; }
# Debian's emscripten runs its JS optimizer with the system's node; its
# acorn lives in Debian's node module folder.
export NODE_PATH="/usr/share/nodejs${NODE_PATH:+:$NODE_PATH}"
# emscripten builds its C/C++ runtime into its cache on first use; a user
# who cannot write the system's cache gets one of their own.
if [ -z "${EM_CACHE:-}" ] && [ ! -w /usr/share/emscripten/cache ]; then
  export EM_CACHE="$HOME/.cache/emscripten"
fi
emcmake cmake -S . -B build-wasm -G Ninja -DCMAKE_BUILD_TYPE=Release -DBONFIRE_WASM_OUT="$OUT" >/dev/null
cmake --build build-wasm -j"${JOBS:-2}"
ls -l "$OUT"/bonfire-worker.*
