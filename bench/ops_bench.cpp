// Decode-shaped kernel throughput beside the machine's own read bandwidth,
// measured in the same process: a 1-row matmul against a packed weight is
// bound by how fast the weight streams from memory, so the honest reference
// is a plain sum over the same number of bytes. q8_0 and q4_0 run twice:
// with f32 activations and with int8 ones (generation steps' default).
//
//   build/ops_bench [--threads N] [--only q8_0] [--cpu-time]
#include "core/bandwidth.h"
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/threads.h"
#include "ops/gemm.h"
#include "ops/int8_gemm.h"
#include "ops/simd.h"

using namespace bonfire;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Best-of-N time of fn, after one warm-up call. With --cpu-time, this
// thread's CPU time instead of the wall clock: with --threads 1 it measures
// the kernel's own cost on a machine busy with other work.
bool g_cpu_time = false;
template <typename F>
double best_time(F fn, int reps) {
  fn();
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    const auto t = Clock::now();
    const double c = thread_cpu_seconds();
    fn();
    best = std::min(best, g_cpu_time ? thread_cpu_seconds() - c : seconds_since(t));
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 0;
  std::string only;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--threads") threads = std::atoi(argv[i + 1]);
    if (std::string(argv[i]) == "--only") only = argv[i + 1];
    std::string why;
    if (std::string(argv[i]) == "--simd" && !simd::limit_simd_target(argv[i + 1], &why)) {
      std::fprintf(stderr, "%s\n", why.c_str());
      return 2;
    }
  }
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--cpu-time") g_cpu_time = true;
  set_num_threads(threads);
  // TinyLlama's feed-forward: [5632, 2048] weights, three per layer.
  const int64_t N = 5632, K = 2048;
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0, 0.02f);
  std::vector<float> w(N * K), x(K), y(N);
  for (auto& v : w) v = nd(rng);
  for (auto& v : x) v = nd(rng);


  const double bw = measure_read_bandwidth();
  std::printf("threads %d, read bandwidth %.1f GB/s (the reference)\n", num_threads(), bw / 1e9);
  std::printf("%-10s %8s %10s %10s %12s\n", "dtype", "weight MB", "us/call", "GB/s", "of bandwidth");

  // Many copies so the weight does not sit in cache between calls.
  const int copies = 24;
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0}) {
    if (!only.empty() && only != dtype_name(t)) continue;
    const int64_t rb = row_bytes(t, K);
    std::vector<std::vector<uint8_t>> packed(copies, std::vector<uint8_t>(N * rb));
    for (auto& p : packed)
      for (int64_t r = 0; r < N; ++r) quantize_row(t, &w[r * K], p.data() + r * rb, K);
    // f32 activations (--exact, and a client's graph call), then int8 ones
    // where the format has them (generation steps: ops/gemm.h).
    for (const bool int8 : {false, true}) {
      if (int8 && t != DType::Q8_0 && t != DType::Q4_0) continue;
      std::optional<Int8Scope> scope;
      if (int8) scope.emplace();
      int which = 0;
      const double sec = best_time(
          [&] {
            WeightRows wr{t, packed[which].data(), N, K};
            gemm_nt(x.data(), 1, K, wr, y.data(), N);
            which = (which + 1) % copies;
          },
          copies * 2);
      const double bytes = (double)N * rb;
      const std::string name = std::string(dtype_name(t)) + (int8 ? " int8" : "");
      std::printf("%-10s %8.1f %10.1f %10.1f %11.0f%%\n", name.c_str(), bytes / 1e6, sec * 1e6, bytes / sec / 1e9,
                  100 * bytes / sec / bw);
    }
  }
  // Batched decode (graph/batch.h): q8_0 against 1 to 8 int8 activation
  // rows, the way a batched call's products run: panels repacked as at load
  // where the CPU has the tiled kernel, streamed from memory (copies).
  {
    const int64_t rb = row_bytes(DType::Q8_0, K);
    const bool tiled = simd::int8_gemm_available(DType::Q8_0, K);
    std::vector<std::vector<uint8_t>> q(copies, std::vector<uint8_t>(N * rb)), panels(copies);
    for (int c = 0; c < copies; ++c) {
      for (int64_t r = 0; r < N; ++r) quantize_row(DType::Q8_0, &w[r * K], q[c].data() + r * rb, K);
      if (!tiled) continue;
      panels[c].resize(simd::int8_packed_bytes(DType::Q8_0, N, K) + 64);
      uint8_t* aligned = panels[c].data() + (64 - reinterpret_cast<uintptr_t>(panels[c].data()) % 64) % 64;
      simd::int8_pack(DType::Q8_0, q[c].data(), rb, N, K, 0, (N + 15) / 16, aligned);
    }
    std::vector<float> xs(8 * K);
    for (auto& v : xs) v = nd(rng);
    std::vector<float> out(N * 8);
    Int8Scope int8;
    BatchRowsScope apart;
    double one = 0;
    for (const int64_t M : {1, 2, 4, 8}) {
      int which = 0;
      const double sec = best_time([&] {
        WeightRows wr{DType::Q8_0, q[which].data(), N, K};
        if (tiled) wr.panels = panels[which].data() + (64 - reinterpret_cast<uintptr_t>(panels[which].data()) % 64) % 64;
        gemm_nt(xs.data(), M, K, wr, out.data(), N);
        which = (which + 1) % copies;
      }, copies * 2);
      if (M == 1) one = sec;
      std::printf("q8_0 int8%s x %lld rows: %.1f us (%.1f GMAC/s, %.2fx one row's time)\n", tiled ? " panels" : "",
                  (long long)M, sec * 1e6, M * N * K / sec / 1e9, sec / one);
    }
  }
  // A prefill's products: 128 rows, f32 through BLAS (--exact) and int8.
  for (const DType t : {DType::Q8_0, DType::Q4_0}) {
    const int64_t M = 128, rb = row_bytes(t, K);
    std::vector<uint8_t> q(N * rb);
    for (int64_t r = 0; r < N; ++r) quantize_row(t, &w[r * K], q.data() + r * rb, K);
    std::vector<float> xs(M * K);
    for (auto& v : xs) v = nd(rng);
    std::vector<float> out(N * M);
    for (const bool int8 : {false, true}) {
      std::optional<Int8Scope> scope;
      if (int8) scope.emplace();
      const double sec = best_time([&] {
        gemm_nt(xs.data(), M, K, WeightRows{t, q.data(), N, K}, out.data(), N);
      }, 5);
      std::printf("%s %s x %lld rows: %.1f us (%.1f GMAC/s)\n", dtype_name(t), int8 ? "int8" : "f32", (long long)M,
                  sec * 1e6, M * N * K / sec / 1e9);
    }
  }
  return 0;
}
