#!/usr/bin/env bash
# Builds one libFuzzer target (tests/fuzz/<TARGET>_fuzz.cpp) in build-fuzz/
# with clang++-14, ASan and UBSan, and runs it over its committed corpus for as
# long as the arguments say (docs/FUZZING.md).
#
#   scripts/fuzz.sh TARGET [libFuzzer args...]
#   scripts/fuzz.sh graph -runs=1000000
#   scripts/fuzz.sh gguf -max_total_time=600
#   scripts/fuzz.sh http build-fuzz/fuzz-artifacts/http-crash-123   # reproduce one input
#
# TARGET: graph ir safetensors gguf tokenizer chat_template kernel_package frame http.
# New inputs libFuzzer finds go to build-fuzz/fuzz-corpus/TARGET/ (not the
# committed corpus), crashes to build-fuzz/fuzz-artifacts/TARGET-*. Jobs:
# FUZZ_JOBS (default 2) for the build.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 1 ]; then
  sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
target=$1
shift
if [ ! -f "tests/fuzz/${target}_fuzz.cpp" ]; then
  echo "fuzz.sh: no target '$target' (tests/fuzz/${target}_fuzz.cpp)" >&2
  exit 2
fi
if [ ! -f build-fuzz/build.ninja ]; then
  CXX=clang++-14 cmake -S . -B build-fuzz -G Ninja -DBONFIRE_FUZZ=ON -DBONFIRE_TESTS=OFF >/dev/null
fi
cmake --build build-fuzz -j"${FUZZ_JOBS:-2}" --target "fuzz_${target}"
case "$target" in
  tokenizer) max_len=8192 ;;
  ir) max_len=12288 ;;
  kernel_package) max_len=40000 ;;
  *) max_len=4096 ;;
esac
args=(-max_len="$max_len" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
      -artifact_prefix="build-fuzz/fuzz-artifacts/${target}-")
[ -f "tests/fuzz/${target}.dict" ] && args+=(-dict="tests/fuzz/${target}.dict")
mkdir -p "build-fuzz/fuzz-corpus/${target}" build-fuzz/fuzz-artifacts
# A file argument reproduces that input; otherwise fuzz from the corpus.
for a in "$@"; do
  if [ -f "$a" ]; then
    exec env ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}" "build-fuzz/fuzz_${target}" "${args[@]}" "$@"
  fi
done
exec env ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}" "build-fuzz/fuzz_${target}" "${args[@]}" "$@" \
  "build-fuzz/fuzz-corpus/${target}" "tests/fuzz/corpus/${target}"
