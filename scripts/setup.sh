#!/usr/bin/env bash
# Installs every Debian package that bonfire's build, tests and golden
# generators need. Idempotent: safe to run again; skips apt when all is there.
set -euo pipefail

BUILD_PKGS=(
  build-essential cmake ninja-build ccache pkg-config python3 python3-numpy
  nlohmann-json3-dev libvalijson-dev
  libboost-dev libboost-system-dev libssl-dev
  libhwy-dev libopenblas-dev
  libpcre2-dev libutf8proc-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev libomp-dev
  emscripten  # the browser worker (scripts/build_wasm.sh), served at /lend
)
# Only the golden generators need these; CI reads the committed goldens.
# (python3-numpy above is for scripts/write_test_model.py, which tests run.)
# tools/train_demo.py reads the King James Bible through bible-kjv's program.
REF_PKGS=(python3 python3-numpy python3-torch python3-jsonschema bible-kjv bible-kjv-text)
# The test command adds what only tests use: the browser for the web page's
# test, Clang with its sanitizer/libFuzzer runtimes for the fuzz targets, and
# the openssl command, which makes the TLS tests' certificates (ca-certificates:
# the system CAs a worker trusts by default).
TEST_PKGS=(chromium clang-14 libclang-rt-14-dev openssl ca-certificates)

want=("${BUILD_PKGS[@]}")
for arg in "$@"; do
  case "$arg" in
    --with-references) want+=("${REF_PKGS[@]}") ;;
    --with-tests) want+=("${TEST_PKGS[@]}") ;;
    *) echo "setup.sh: unknown option $arg (--with-references, --with-tests)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node runs the test-data fetch (npm); install Debian's only when none is there.
command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq "${missing[@]}"
fi
