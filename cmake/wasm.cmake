# The browser worker (issue: browser volunteers): the worker's layers
# compiled to WebAssembly by Debian's emscripten, configured by
# scripts/build_wasm.sh (emcmake). Outputs bonfire-worker.{js,wasm,worker.js},
# which `bonfire serve` serves under /wasm/ and web/lend-worker.js runs.
#
# What differs from the native build, and why:
# - one SIMD target, WASM SIMD128 (HWY_COMPILE_ONLY_STATIC): a browser has
#   nothing to choose between at run time;
# - no BLAS (BONFIRE_NO_BLAS): ops/gemm.cpp's products come from the SIMD
#   kernels;
# - no PCRE2/utf8proc (src/apps/wasm/text_unavailable.cpp): the coordinator
#   tokenizes; a worker only runs graphs;
# - no Boost/OpenSSL: the page owns the WebSocket and hashes with crypto.subtle;
# - WebAssembly's exceptions with a landing-pad context of our own (see WASM_FLAGS).
# Header-only libraries come from the system's include folder through a
# folder of links, so emscripten's sysroot never sees the host's libc headers.
set(BONFIRE_WASM_OUT ${CMAKE_BINARY_DIR}/wasm CACHE PATH "where bonfire-worker.{js,wasm,worker.js} go")
set(WASM_INCLUDE ${CMAKE_BINARY_DIR}/host-headers)
file(MAKE_DIRECTORY ${WASM_INCLUDE})
foreach(h nlohmann hwy valijson pcre2.h utf8proc.h)
  if(NOT EXISTS /usr/include/${h})
    message(FATAL_ERROR "/usr/include/${h} is missing: run scripts/setup.sh (apt-get install the -dev packages)")
  endif()
  file(CREATE_LINK /usr/include/${h} ${WASM_INCLUDE}/${h} SYMBOLIC)
endforeach()

include(cmake/spec_source.cmake)

file(GLOB WASM_SRC CONFIGURE_DEPENDS
     src/spec/*.cpp src/core/*.cpp src/ops/*.cpp src/graph/*.cpp src/kernels/*.cpp src/kernels/*/*.cpp
     src/model/*.cpp src/model/*/*.cpp src/ir/*.cpp src/ir/*/*.cpp src/apps/wasm/*.cpp)
list(APPEND WASM_SRC src/net/frame.cpp src/net/worker_core.cpp src/net/worker_fault.cpp src/net/token_check.cpp
     src/net/model_fingerprint.cpp ${SPEC_CPP} ${WGSL_CPP})

# Exceptions: WebAssembly's (-fwasm-exceptions; emscripten's own, in JS,
# cost the tab about a third of its decode speed). Under -pthread, Debian's
# clang 14 and emscripten 3.1.6 disagree on whether __wasm_lpad_context is
# thread-local, and then no typed catch matches: src/apps/wasm/lpad_context.cpp
# supplies the context as clang expects it. bf_start checks that a typed
# catch matches before it joins anyone.
set(WASM_FLAGS -pthread -msimd128 -fwasm-exceptions)
add_executable(bonfire-worker ${WASM_SRC})
target_include_directories(bonfire-worker PRIVATE src ${WASM_INCLUDE})
target_compile_definitions(bonfire-worker PRIVATE HWY_COMPILE_ONLY_STATIC BONFIRE_NO_BLAS)
target_compile_options(bonfire-worker PRIVATE ${WASM_FLAGS} -Wall -Wextra -Wno-unused-parameter)
# Memory: grows on demand up to 4 GiB (the most 32-bit WebAssembly holds);
# the page's limit is what the worker announces and enforces.
# Threads: the compute pool's helpers and the core's lanes are started
# from the lend worker's own thread, which cannot wait for a new Web Worker
# to load, so the module starts them all up front (Module.bfThreads, set by
# web/lend-worker.js, plus the lanes and one spare).
target_link_options(bonfire-worker PRIVATE ${WASM_FLAGS}
  -sALLOW_MEMORY_GROWTH=1 -sINITIAL_MEMORY=64MB -sMAXIMUM_MEMORY=4GB
  "-sPTHREAD_POOL_SIZE=(Module.bfThreads||1)+4" -sDEFAULT_PTHREAD_STACK_SIZE=1MB -sTOTAL_STACK=4MB
  -sENVIRONMENT=worker -sEXIT_RUNTIME=0
  "-sEXPORTED_FUNCTIONS=[_main,_malloc,_free]"
  "-sEXPORTED_RUNTIME_METHODS=[FS,UTF8ToString]")
set_target_properties(bonfire-worker PROPERTIES SUFFIX ".js" RUNTIME_OUTPUT_DIRECTORY ${BONFIRE_WASM_OUT})
