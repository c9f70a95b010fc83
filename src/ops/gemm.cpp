#include "ops/gemm.h"

#ifndef BONFIRE_NO_BLAS
#include <cblas.h>
#endif

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <vector>

#include "core/threads.h"
#include "ops/int8_dot.h"
#include "ops/half_gemm.h"
#include "ops/int8_gemm.h"
#include "ops/simd.h"

namespace bonfire {

namespace {

#ifndef BONFIRE_NO_BLAS
// OpenBLAS runs single-threaded inside our own split, so the worker's thread
// count is the one knob and nothing oversubscribes the cores.
void pin_blas_threads() {
  static const bool once = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)once;
}

// Row-major C = A·op(B) + beta·C, op(B) = Bᵀ when trans_b.
void sgemm(bool trans_b, int64_t M, int64_t N, int64_t K, const float* a, int64_t lda, const float* b, int64_t ldb,
           float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K, 1.0f, a,
              (int)lda, b, (int)ldb, beta, c, (int)ldc);
}
#else
void pin_blas_threads() {}

// The browser worker has no BLAS (none builds for WebAssembly from Debian's
// packages): the same product from the SIMD dot and axpy kernels. Each
// output row streams op(B) once; callers split the work over threads.
void sgemm(bool trans_b, int64_t M, int64_t N, int64_t K, const float* a, int64_t lda, const float* b, int64_t ldb,
           float beta, float* c, int64_t ldc) {
  for (int64_t m = 0; m < M; ++m) {
    float* cm = c + m * ldc;
    const float* am = a + m * lda;
    if (trans_b) {
      for (int64_t n = 0; n < N; ++n) cm[n] = (beta == 0 ? 0.0f : beta * cm[n]) + simd::dot_f32(am, b + n * ldb, K);
      continue;
    }
    if (beta == 0) std::memset(cm, 0, N * sizeof(float));
    else if (beta != 1) simd::scale_f32(beta, cm, N);
    for (int64_t k = 0; k < K; ++k)
      if (am[k] != 0) simd::axpy_f32(am[k], b + k * ldb, cm, N);
  }
}
#endif

// Below this many activation rows a weight row is streamed once per output
// with a fused dequantize-dot; above it a dequantized tile feeds BLAS.
constexpr int64_t kGemvRows = 4;
// Int8Activations::Small covers products of fewer rows than this: streaming
// the weight once with integer dots beats dequantized tiles through BLAS up
// to between 16 and 32 rows on AVX2 (1.1B q8_0, 2 threads: 15-token prompts
// ~1.5x faster, 32-token ones 1.14x slower; docs/PERFORMANCE.md).
constexpr int64_t kInt8Rows = 16;
constexpr int64_t kTile = 64;  // weight rows per tile

std::atomic<Int8Activations> g_int8{Int8Activations::Small};
constexpr uint32_t kInt8Allowed = 1u << 0;  // a thread_flags() bit
constexpr uint32_t kRowsApart = 1u << 1;    // a thread_flags() bit: BatchRowsScope
// Int8RowsScope's thread_flags() bits: a rule is set; it is Few; it is Any.
constexpr uint32_t kRuleSet = 1u << 2, kRuleFew = 1u << 3, kRuleAny = 1u << 4;

// The rule this thread's products follow: its Int8RowsScope's, else the process's.
Int8Rows thread_rule() {
  const uint32_t f = thread_flags();
  if (!(f & kRuleSet)) return int8_rows_rule();
  return (f & kRuleAny) ? Int8Rows::Any : (f & kRuleFew) ? Int8Rows::Few : Int8Rows::None;
}

// Whether a product of M rows with w uses int8 activations on this thread.
bool int8_for(const WeightRows& w, int64_t M) {
  if (!(thread_flags() & kInt8Allowed) || !simd::int8_dot_supported(w.dtype, w.cols)) return false;
  const Int8Rows rule = thread_rule();
  return rule == Int8Rows::Any || (rule == Int8Rows::Few && M < kInt8Rows);
}

// Weight rows [n0, n1) split over the threads in whole pairs of 16-row
// panels, the unit the panel kernels (ops/int8_gemm.h, ops/half_gemm.h) take.
void for_panel_chunks(int64_t N, const std::function<void(int64_t, int64_t)>& fn) {
  constexpr int64_t kPanels = 32;
  parallel_for((N + kPanels - 1) / kPanels, 1,
               [&](int64_t p0, int64_t p1) { fn(p0 * kPanels, std::min(N, p1 * kPanels)); });
}

// x's M rows of K quantized to int8 blocks in this thread's reusable
// buffer (valid until its next call); null when x holds a non-finite value.
const simd::ActBlock* quantized_rows(const float* x, int64_t M, int64_t ldx, int64_t K) {
  thread_local std::vector<simd::ActBlock> xq;
  const int64_t blocks = K / 32;
  xq.resize(static_cast<size_t>(M * blocks));
  for (int64_t m = 0; m < M; ++m)
    if (!simd::quantize_activations(x + m * ldx, K, &xq[m * blocks])) return nullptr;
  return xq.data();
}

// quantized_rows' blocks with their sums, as the tiled kernel takes them
// (the sums in this thread's buffer, valid until its next call).
simd::Int8Rows int8_rows(const simd::ActBlock* q, int64_t M, int64_t K) {
  thread_local std::vector<int32_t> sums;
  sums.resize(static_cast<size_t>(M * (K / 32)));
  simd::int8_block_sums(q, M * (K / 32), sums.data());
  return {q, sums.data(), M};
}

// Whether a product of M rows with w runs on the tiled int8 kernel from
// packed panels on this thread.
bool int8_panels(const WeightRows& w, int64_t M) {
  return w.panels && int8_for(w, M) && simd::int8_gemm_available(w.dtype, w.cols);
}

// The int8 path: x's rows quantized once (into this thread's reusable
// buffer), then every weight row dotted with each, or, where the CPU has the
// tiled kernel (ops/int8_gemm.h), panels of weight rows against tiles of x.
// False when x holds a non-finite value or the weight has no int8 kernel:
// the caller goes on in f32.
bool gemm_nt_int8(const float* x, int64_t M, int64_t ldx, const WeightRows& w, float* out, int64_t ldo,
                  const float* bias) {
  const int64_t N = w.rows, K = w.cols;
  if (!int8_for(w, M)) return false;
  const bool tiled = simd::int8_gemm_available(w.dtype, K);
  const simd::ActBlock* q = quantized_rows(x, M, ldx, K);
  if (!q) return false;
  const int64_t blocks = K / 32;
  const int64_t stride = row_bytes(w.dtype, K);
  if (tiled) {
    const simd::Int8Rows rows = int8_rows(q, M, K);
    for_panel_chunks(N, [&](int64_t n0, int64_t n1) {
      if (w.panels)
        simd::int8_gemm_packed(w.dtype, w.panels + n0 / 16 * simd::int8_panel_stride(w.dtype, K), n1 - n0, K, rows,
                               out + n0, ldo, bias ? bias + n0 : nullptr);
      else
        simd::int8_gemm(w.dtype, w.data + n0 * stride, stride, n1 - n0, K, rows, out + n0, ldo,
                        bias ? bias + n0 : nullptr);
    });
    return true;
  }
  thread_local std::vector<int32_t> sums;  // k-quants' dots take the plain sums
  const int32_t* xsums = nullptr;
  if (simd::int8_dot_needs_sums(w.dtype)) {
    sums.resize(static_cast<size_t>(M * blocks));
    simd::activation_sums(q, M * blocks, sums.data());
    xsums = sums.data();
  }
  parallel_for(N, 16, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      simd::dot_int8_rows(w.dtype, w.data + n * stride, q, K, M, out + n, ldo, xsums);
      if (bias)
        for (int64_t m = 0; m < M; ++m) out[m * ldo + n] += bias[n];
    }
  });
  return true;
}

void fill_bias(float* out, int64_t M, int64_t ldo, int64_t N, const float* bias) {
  for (int64_t m = 0; m < M; ++m) {
    if (bias)
      std::memcpy(out + m * ldo, bias, N * sizeof(float));
    else
      std::memset(out + m * ldo, 0, N * sizeof(float));
  }
}

}  // namespace

void set_int8_activations(Int8Activations mode) { g_int8 = mode; }
Int8Activations int8_activations() { return g_int8; }

Int8Scope::Int8Scope() : ThreadFlagsScope(kInt8Allowed) {}
BatchRowsScope::BatchRowsScope() : ThreadFlagsScope(kRowsApart) {}
Int8RowsScope::Int8RowsScope(Int8Rows rule)
    : ThreadFlagsScope(kRuleSet | (rule == Int8Rows::Few ? kRuleFew : 0) | (rule == Int8Rows::Any ? kRuleAny : 0),
                       kRuleSet | kRuleFew | kRuleAny) {}

Int8Rows int8_rows_rule() {
  switch (g_int8.load(std::memory_order_relaxed)) {
    case Int8Activations::Off: return Int8Rows::None;
    case Int8Activations::All: return Int8Rows::Any;
    case Int8Activations::Small: break;
  }
  // The tiled kernel's rows do not depend on how many come together, and it
  // beats f32 tiles through BLAS at every row count: Small does not limit it.
  return simd::int8_gemm_available(DType::Q8_0, 32) ? Int8Rows::Any : Int8Rows::Few;
}

const char* int8_rows_name(Int8Rows rule) {
  return rule == Int8Rows::None ? "none" : rule == Int8Rows::Few ? "few" : "any";
}

bool parse_int8_rows(const std::string& name, Int8Rows* rule) {
  for (Int8Rows r : {Int8Rows::None, Int8Rows::Few, Int8Rows::Any})
    if (name == int8_rows_name(r)) {
      *rule = r;
      return true;
    }
  return false;
}

static bool is_half(DType t) { return t == DType::F16 || t == DType::BF16; }

WeightRows weight_rows(const Tensor& t, int64_t first, int64_t count) {
  WeightRows w;
  w.dtype = t.dtype;
  w.cols = t.cols();
  w.rows = count;
  w.data = t.row(first);
  if (t.repacked && first % 16 == 0)
    w.panels = t.repacked.get() + first / 16 * (is_half(t.dtype) ? simd::half_panel_stride(w.cols)
                                                                  : simd::int8_panel_stride(t.dtype, w.cols));
  return w;
}

void gemm_nt_siblings(const float* x, int64_t M, int64_t ldx, const std::vector<WeightRows>& w,
                      const std::vector<float*>& out) {
  bool together = w.size() > 1;
  for (const WeightRows& wi : w) together = together && int8_panels(wi, M) && wi.cols == w[0].cols;
  const int64_t K = w.empty() ? 0 : w[0].cols;
  const simd::ActBlock* q = together ? quantized_rows(x, M, ldx, K) : nullptr;
  if (!q) {  // one by one, each as gemm_nt decides (a non-finite x goes on in f32)
    for (size_t i = 0; i < w.size(); ++i) gemm_nt(x, M, ldx, w[i], out[i], w[i].rows);
    return;
  }
  const simd::Int8Rows rows = int8_rows(q, M, K);
  // Every product's pairs of 16-row panels, numbered one after another, so
  // one split over the threads covers them all.
  std::vector<int64_t> first(w.size() + 1, 0);
  for (size_t i = 0; i < w.size(); ++i) first[i + 1] = first[i] + (w[i].rows + 31) / 32;
  parallel_for(first.back(), 1, [&](int64_t p0, int64_t p1) {
    for (size_t i = 0; i < w.size(); ++i) {
      const int64_t a = std::max(p0, first[i]), b = std::min(p1, first[i + 1]);
      if (a >= b) continue;
      const int64_t n0 = (a - first[i]) * 32, n1 = std::min(w[i].rows, (b - first[i]) * 32);
      simd::int8_gemm_packed(w[i].dtype, w[i].panels + n0 / 16 * simd::int8_panel_stride(w[i].dtype, K), n1 - n0, K,
                             rows, out[i] + n0, w[i].rows, nullptr);
    }
  });
}

void gemm_nt(const float* x, int64_t M, int64_t ldx, const WeightRows& w, float* out, int64_t ldo,
             const float* bias) {
  pin_blas_threads();
  const int64_t N = w.rows, K = w.cols;
  const int64_t stride = row_bytes(w.dtype, K);
  if (gemm_nt_int8(x, M, ldx, w, out, ldo, bias)) return;
  if (w.panels && simd::half_gemm_available(w.dtype)) {
    for_panel_chunks(N, [&](int64_t n0, int64_t n1) {  // f16/bf16 repacked at load
      simd::half_gemm_packed(w.dtype, w.panels + n0 / 16 * simd::half_panel_stride(K), n1 - n0, K, x, M, ldx,
                             out + n0, ldo, bias ? bias + n0 : nullptr);
    });
    return;
  }
  if (M < kGemvRows || (M < kInt8Rows && (thread_flags() & kRowsApart))) {
    parallel_for(N, 16, [&](int64_t n0, int64_t n1) {
      for (int64_t n = n0; n < n1; ++n) {
        const uint8_t* row = w.data + n * stride;
        for (int64_t m = 0; m < M; ++m)
          out[m * ldo + n] = simd::dot_row(w.dtype, row, x + m * ldx, K) + (bias ? bias[n] : 0.0f);
      }
    });
    return;
  }
  const int64_t tiles = (N + kTile - 1) / kTile;
  parallel_for(tiles, 1, [&](int64_t t0, int64_t t1) {
    std::vector<float> tile;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t n0 = t * kTile, nn = std::min(kTile, N - n0);
      const float* wt;
      if (w.dtype == DType::F32) {
        wt = reinterpret_cast<const float*>(w.data + n0 * stride);
      } else {
        tile.resize(nn * K);
        for (int64_t r = 0; r < nn; ++r) simd::dequantize_row(w.dtype, w.data + (n0 + r) * stride, &tile[r * K], K);
        wt = tile.data();
      }
      for (int64_t m = 0; m < M; ++m) {
        if (bias)
          std::memcpy(out + m * ldo + n0, bias + n0, nn * sizeof(float));
      }
      sgemm(true, M, nn, K, x, ldx, wt, K, bias ? 1.0f : 0.0f, out + n0, ldo);
    }
  });
}

void gemm_nn(const float* x, int64_t M, int64_t ldx, const WeightRows& w, float* out, int64_t ldo,
             const float* bias) {
  pin_blas_threads();
  const int64_t K = w.rows, N = w.cols;
  const int64_t stride = row_bytes(w.dtype, N);
  if (w.dtype == DType::F32) {
    // Split output columns over threads; each slab is one BLAS call.
    const int64_t tiles = (N + kTile - 1) / kTile;
    fill_bias(out, M, ldo, N, bias);
    const float* wf = reinterpret_cast<const float*>(w.data);
    parallel_for(tiles, 1, [&](int64_t t0, int64_t t1) {
      const int64_t c0 = t0 * kTile, c1 = std::min(N, t1 * kTile);
      sgemm(false, M, c1 - c0, K, x, ldx, wf + c0, N, 1.0f, out + c0, ldo);
    });
    return;
  }
  // Packed [K, N]: blocks run along N, so dequantize a band of K rows at a
  // time and accumulate; split the M rows over threads.
  fill_bias(out, M, ldo, N, bias);
  std::vector<float> band;
  for (int64_t k0 = 0; k0 < K; k0 += kTile) {
    const int64_t kk = std::min(kTile, K - k0);
    band.resize(kk * N);
    for (int64_t r = 0; r < kk; ++r) simd::dequantize_row(w.dtype, w.data + (k0 + r) * stride, &band[r * N], N);
    parallel_for(M, 1, [&](int64_t m0, int64_t m1) {
      sgemm(false, m1 - m0, N, kk, x + m0 * ldx + k0, ldx, band.data(), N, 1.0f, out + m0 * ldo, ldo);
    });
  }
}

}  // namespace bonfire
