#!/usr/bin/env bash
# The network's end-to-end tests (tests/net/*.test.mjs) against a
# ThreadSanitizer build of bonfire: every serve and worker process they start
# aborts at the first data race it sees (halt_on_error), so a race fails the
# test that provoked it, and the reports are kept in build-tsan/logs.
# Usage: scripts/tsan.sh [TEST ...]   (default: every tests/net/*.test.mjs)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBONFIRE_TESTS=OFF \
  -DCMAKE_CXX_FLAGS="-fsanitize=thread -fno-omit-frame-pointer" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" \
  >/dev/null
cmake --build build-tsan -j2 --target bonfire
mkdir -p build-tsan/logs
# OpenBLAS is not built with TSan, so its own threads' synchronisation is
# invisible to it: it runs on one thread (bonfire's pool splits the work
# anyway), and what remains of it is suppressed. bonfire's own thread pool
# (core/thread_pool.h) is built with TSan and checked like the rest.
export OPENBLAS_NUM_THREADS=1
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$ROOT/scripts/tsan.supp log_path=$ROOT/build-tsan/logs/tsan"
export BONFIRE_BINARY=$ROOT/build-tsan/bonfire BONFIRE_SOURCE_DIR=$ROOT
tests=("$@")
[ ${#tests[@]} -gt 0 ] || tests=(tests/net/*.test.mjs)
rm -f build-tsan/logs/tsan.*
failed=0
for t in "${tests[@]}"; do
  echo "== $t"
  if ! node "$t"; then failed=$((failed + 1)); fi
done
reports=$(find build-tsan/logs -name "tsan.*" | wc -l)
echo "tsan: ${#tests[@]} tests, $failed failed, $reports race reports (build-tsan/logs)"
[ "$failed" -eq 0 ] && [ "$reports" -eq 0 ]
