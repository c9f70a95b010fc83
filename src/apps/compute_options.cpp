#include "apps/compute_options.h"

#include <climits>
#include <iostream>
#include <stdexcept>

#include "core/threads.h"
#include "ops/gemm.h"
#include "ops/simd.h"

namespace bonfire {

namespace {

constexpr int kNotGiven = INT_MIN;
int g_threads = kNotGiven;
bool g_background = false;
bool g_exact = false;
bool g_int8_everywhere = false;
std::string g_simd;

}  // namespace

void add_compute_options(CLI::App& cmd, bool background) {
  cmd.add_option("--threads", g_threads, "compute threads, the caller included (default: all cores)");
  cmd.add_flag("--exact", g_exact,
               "f32 activations against quantized weights everywhere (default in generation steps: int8 against q8_0, q4_0 "
               "and k-quant weights, in every product on CPUs with AVX2, in products of < 16 rows on older ones)");
  cmd.add_option("--simd", g_simd,
                 "run the kernels on this SIMD target or a lesser one (avx3, avx2, sse4, ...; default: the best the CPU has)");
  if (background)
    cmd.add_flag("--background", g_background,
                 "lend only idle time: lowest scheduling priority, and fewer threads while the machine's "
                 "other load is high (adapts before each step)");
}

void add_int8_everywhere_option(CLI::App& cmd) {
  cmd.add_flag("--int8-everywhere", g_int8_everywhere,
               "int8 activations in every product, prefill included (measures their accuracy; the default on CPUs with "
               "AVX2; on older ones products of < 16 rows only)");
}

bool apply_compute_options() {
  if (g_exact && g_int8_everywhere) {
    std::cerr << "bonfire: --exact and --int8-everywhere contradict each other\n";
    return false;
  }
  if (!g_simd.empty()) {
    std::string why;
    if (!simd::limit_simd_target(g_simd, &why)) {
      std::cerr << "bonfire: --simd: " << why << "\n";
      return false;
    }
  }
  set_int8_activations(g_exact ? Int8Activations::Off
                               : g_int8_everywhere ? Int8Activations::All : Int8Activations::Small);
  int threads = 0;
  if (g_threads != kNotGiven) {
    try {
      std::string warning;
      threads = checked_thread_count(g_threads, &warning);
      if (!warning.empty()) std::cerr << "bonfire: " << warning << "\n";
    } catch (const std::invalid_argument& e) {
      std::cerr << "bonfire: " << e.what() << "\n";
      return false;
    }
  }
  set_num_threads(threads);
  if (g_background) {
    std::string why;
    if (!set_background(true, &why)) std::cerr << "bonfire: --background ignored: " << why << "\n";
  }
  return true;
}

}  // namespace bonfire
