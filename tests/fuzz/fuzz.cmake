# libFuzzer targets for every parser of untrusted input (docs/FUZZING.md).
# Included from CMakeLists.txt when BONFIRE_FUZZ=ON and the compiler is Clang.
#
#   CXX=clang++-14 cmake -S . -B build-fuzz -G Ninja -DBONFIRE_FUZZ=ON -DBONFIRE_TESTS=OFF
#   cmake --build build-fuzz -j2 --target fuzz_all
#   ctest --test-dir build-fuzz          # every target, a short run over its corpus,
#                                        # and the parsers' unit tests under the sanitizers
#
# The library sources are compiled once, -O1 with ASan + UBSan and libFuzzer's
# coverage (fuzzer-no-link), into one static archive; each target links only
# the objects it reaches from that archive. The network's server side stays
# out, except net/frame.cpp and net/openai.cpp.

set(FUZZ_FLAGS -O1 -gline-tables-only -fno-omit-frame-pointer
    -fsanitize=address,undefined -fno-sanitize-recover=undefined)
set(FUZZ_DIR ${CMAKE_SOURCE_DIR}/tests/fuzz)

# Of the kernels only the package layer (parse, check, select, scope, the
# device files): the kernels' own code (src/kernels/qmoe/, Highway's
# per-target SIMD) is most of the library's compile time and parses nothing.
set(FUZZ_KERNELS_SRC src/kernels/package.cpp src/kernels/check.cpp src/kernels/select.cpp
    src/kernels/scope.cpp src/kernels/device.cpp)
# Of the model and IR layers the parsers, the family modules (the GGUF
# loader looks tensor names up in them) and the IR's checks: no model
# folders, generation or perplexity. The lowering comes along: the IR op
# table holds each op's check and lowering.
set(FUZZ_MODEL_SRC ${MODEL_SRC})
list(FILTER FUZZ_MODEL_SRC EXCLUDE REGEX "src/model/model_files\\.cpp$")
set(FUZZ_IR_SRC ${IR_SRC})
list(FILTER FUZZ_IR_SRC EXCLUDE REGEX "src/ir/(generation|perplexity)\\.cpp$")
# The network's request parsers (net/request_fields.cpp: shared by the
# OpenAI and generate request parsers).
set(FUZZ_NET_SRC src/net/frame.cpp src/net/openai.cpp)
foreach(f src/net/request_fields.cpp)
  if(EXISTS ${CMAKE_SOURCE_DIR}/${f})
    list(APPEND FUZZ_NET_SRC ${f})
  endif()
endforeach()
add_library(bonfire_fuzz_lib STATIC ${CORE_SRC} ${OPS_SRC} ${GRAPH_SRC} ${FUZZ_MODEL_SRC} ${FUZZ_IR_SRC}
            ${FUZZ_KERNELS_SRC} ${SPEC_CPP} ${FUZZ_NET_SRC})
target_include_directories(bonfire_fuzz_lib PUBLIC src)
target_compile_options(bonfire_fuzz_lib PRIVATE ${FUZZ_FLAGS} -fsanitize=fuzzer-no-link)
target_link_libraries(bonfire_fuzz_lib PUBLIC nlohmann_json::nlohmann_json
                      PkgConfig::HWY PkgConfig::OPENBLAS PkgConfig::PCRE2 PkgConfig::UTF8PROC
                      Boost::system OpenSSL::Crypto Threads::Threads)
# The sanitizers' runtime flags reach whatever links the archive.
target_link_options(bonfire_fuzz_lib INTERFACE -fsanitize=address,undefined)

# The targets: tests/fuzz/<name>_fuzz.cpp, corpus tests/fuzz/corpus/<name>/,
# optional dictionary tests/fuzz/<name>.dict.
set(BONFIRE_FUZZ_TARGETS graph ir safetensors gguf tokenizer chat_template kernel_package frame http)
# How long CI runs each over its committed corpus (scripts/test.sh).
set(BONFIRE_FUZZ_CI_SECONDS 10 CACHE STRING "seconds per fuzz target in ctest")

enable_testing()
add_custom_target(fuzz_all)
foreach(name ${BONFIRE_FUZZ_TARGETS})
  set(exe fuzz_${name})
  add_executable(${exe} ${FUZZ_DIR}/${name}_fuzz.cpp)
  target_compile_options(${exe} PRIVATE ${FUZZ_FLAGS} -fsanitize=fuzzer)
  target_link_options(${exe} PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(${exe} PRIVATE bonfire_fuzz_lib)
  set_target_properties(${exe} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
  add_dependencies(fuzz_all ${exe})
  if(name STREQUAL "gguf")  # gguf_fuzz.cpp is also the older damage test (gguf_fuzz_asan)
    target_compile_definitions(${exe} PRIVATE BONFIRE_LIBFUZZER)
  endif()
  # Inputs up to 4 KiB, more where the committed seeds are whole documents.
  set(max_len 4096)
  if(name STREQUAL "tokenizer")
    set(max_len 8192)
  elseif(name STREQUAL "ir")
    set(max_len 12288)
  elseif(name STREQUAL "kernel_package")
    set(max_len 40000)  # spec/kernels/qmoe.json is 36 KB
  endif()
  set(args -max_total_time=${BONFIRE_FUZZ_CI_SECONDS} -max_len=${max_len} -timeout=10 -rss_limit_mb=2048
           -print_final_stats=1)
  if(EXISTS ${FUZZ_DIR}/${name}.dict)
    list(APPEND args -dict=${FUZZ_DIR}/${name}.dict)
  endif()
  # New inputs go to a scratch folder (listed first, so it receives them);
  # the committed corpus is only read.
  set(scratch ${CMAKE_BINARY_DIR}/fuzz-corpus/${name})
  add_test(NAME fuzz.${name}
           COMMAND ${CMAKE_COMMAND} -E env ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
                   UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
                   $<TARGET_FILE:${exe}> ${args} -artifact_prefix=${CMAKE_BINARY_DIR}/fuzz-artifacts/${name}-
                   ${scratch} ${FUZZ_DIR}/corpus/${name})
  set_tests_properties(fuzz.${name} PROPERTIES TIMEOUT 300)
  file(MAKE_DIRECTORY ${scratch} ${CMAKE_BINARY_DIR}/fuzz-artifacts)
endforeach()

# The parsers' unit tests under the same sanitizers (ASan + UBSan, -O1):
# a truncated or lying file must fail cleanly, never read past a buffer.
# They link the fuzz library plus the few layers it leaves out that these
# tests reach (model folders, generation, the network's URL and model-hash
# helpers), compiled the same way.
option(BONFIRE_ASAN_TESTS "the parsers' unit tests under ASan + UBSan" ON)
if(BONFIRE_ASAN_TESTS)
  find_package(GTest REQUIRED)
  include(GoogleTest)
  set(ASAN_EXTRA_SRC ${MODEL_SRC} ${IR_SRC})
  list(FILTER ASAN_EXTRA_SRC INCLUDE REGEX "src/model/model_files\\.cpp$|src/ir/(generation|perplexity)\\.cpp$")
  list(APPEND ASAN_EXTRA_SRC src/net/model_hash.cpp src/net/model_fingerprint.cpp src/net/url.cpp)
  add_library(bonfire_asan_extra STATIC ${ASAN_EXTRA_SRC})
  target_compile_options(bonfire_asan_extra PRIVATE ${FUZZ_FLAGS} -fsanitize=fuzzer-no-link)
  target_link_libraries(bonfire_asan_extra PUBLIC bonfire_fuzz_lib)
  set(ASAN_TESTS graph_test expr_test safetensors_test gguf_test tokenizer_test chat_template_test
                 ir_validate_test net_frame_test json_parse_test)
  set(ASAN_TEST_SRC "")
  foreach(t ${ASAN_TESTS})
    list(APPEND ASAN_TEST_SRC ${CMAKE_SOURCE_DIR}/tests/${t}.cpp)
  endforeach()
  add_executable(bonfire_asan_tests ${ASAN_TEST_SRC})
  target_compile_options(bonfire_asan_tests PRIVATE ${FUZZ_FLAGS})
  # fuzzer-no-link: the coverage hooks the library's objects call, without
  # libFuzzer's main (GoogleTest has its own).
  target_link_options(bonfire_asan_tests PRIVATE -fsanitize=fuzzer-no-link,address,undefined)
  target_link_libraries(bonfire_asan_tests PRIVATE bonfire_asan_extra bonfire_fuzz_lib GTest::gtest GTest::gtest_main)
  target_compile_definitions(bonfire_asan_tests PRIVATE BONFIRE_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
  set_target_properties(bonfire_asan_tests PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
  add_dependencies(fuzz_all bonfire_asan_tests)
  gtest_discover_tests(bonfire_asan_tests TEST_PREFIX "asan." DISCOVERY_TIMEOUT 120
                       PROPERTIES ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0")

  # The GGUF loader fed 1500 damaged copies of a golden file (gguf_fuzz.cpp
  # without libFuzzer: its own main), under the same sanitizers.
  add_executable(gguf_fuzz_asan ${FUZZ_DIR}/gguf_fuzz.cpp)
  target_compile_options(gguf_fuzz_asan PRIVATE ${FUZZ_FLAGS})
  target_link_options(gguf_fuzz_asan PRIVATE -fsanitize=fuzzer-no-link,address,undefined)
  target_link_libraries(gguf_fuzz_asan PRIVATE bonfire_fuzz_lib)
  set_target_properties(gguf_fuzz_asan PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
  add_dependencies(fuzz_all gguf_fuzz_asan)
  add_test(NAME gguf_fuzz_asan COMMAND gguf_fuzz_asan ${CMAKE_SOURCE_DIR}/goldens/gguf/tiny_llama.gguf 1500)
endif()
