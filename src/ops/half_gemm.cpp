// Highway compiles this file once per instruction-set target (see simd.cpp);
// the kernel exists on the AVX-512 targets only.
#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL
#endif
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/half_gemm.cpp"
#include "ops/half_gemm.h"
#include "ops/row_tiles.h"

#include <hwy/foreach_target.h>  // must come before highway.h
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#if HWY_ARCH_X86
#include <immintrin.h>
#endif

HWY_BEFORE_NAMESPACE();
namespace bonfire::simd {
namespace HWY_NAMESPACE {

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// GCC 12's AVX-512 headers fill unused inputs with _mm512_undefined_*(),
// which -Wmaybe-uninitialized then reports inside every insert and cast (as
// in int8_gemm.cpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace {  // per target: each file's helpers stay its own

constexpr int kLanes = 16;   // weight rows per panel
// How far ahead (in k, 32 bytes of a panel each) the first pass over a
// panel prefetches it. Two panels stream side by side, 32 bytes a k each,
// and the hardware prefetchers alone left one-row products at 33-37 GB/s
// against the q8_0 kernel's 42-44 on the same machine; 128 k (4 KiB of each
// panel) ahead took them to 40-43 and a decode step of the 1.1B f16 bench
// model from 16-17 to 18.5-19.9 tokens/s (32, 64, 192 and 512 did less).
constexpr int64_t kAheadK = 128;

// 16 rows' values at one k, widened to f32.
template <bool kF16>
HWY_INLINE __m512 Widen(const uint8_t* p) {
  const __m256i h = _mm256_load_si256(reinterpret_cast<const __m256i*>(p));
  if (kF16) return _mm512_cvtph_ps(h);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// MR activation rows × NP panels over all K: the arithmetic half_gemm.h promises.
// kFirstPass: the panels come from memory (the first tile of rows); later
// tiles find them in cache and would only pay for the hints.
template <bool kF16, int MR, int NP, bool kFirstPass>
HWY_INLINE void Tile(const uint8_t* const* panels, int64_t K, const float* x, int64_t ldx, float* out, int64_t ldo,
                     const float* bias, int64_t n_valid) {
  __m512 acc[NP][MR];
#pragma GCC unroll 4
  for (int p = 0; p < NP; ++p)
#pragma GCC unroll 4
    for (int m = 0; m < MR; ++m) acc[p][m] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    if (kFirstPass && (k & 1) == 0) {  // one 64-byte line holds two k
#pragma GCC unroll 4
      for (int p = 0; p < NP; ++p)
        _mm_prefetch(reinterpret_cast<const char*>(panels[p] + (k + kAheadK) * 2 * kLanes), _MM_HINT_T0);
    }
    __m512 w[NP];
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) w[p] = Widen<kF16>(panels[p] + k * 2 * kLanes);
#pragma GCC unroll 4
    for (int m = 0; m < MR; ++m) {
      const __m512 xv = _mm512_set1_ps(x[m * ldx + k]);
#pragma GCC unroll 4
      for (int p = 0; p < NP; ++p) acc[p][m] = _mm512_fmadd_ps(w[p], xv, acc[p][m]);
    }
  }
#pragma GCC unroll 4
  for (int p = 0; p < NP && p * kLanes < n_valid; ++p) {
    const int64_t lanes = std::min<int64_t>(kLanes, n_valid - p * kLanes);
    const __mmask16 keep = static_cast<__mmask16>((1u << lanes) - 1);
    const __m512 bv = bias ? _mm512_maskz_loadu_ps(keep, bias + p * kLanes) : _mm512_setzero_ps();
#pragma GCC unroll 4
    for (int m = 0; m < MR; ++m)
      _mm512_mask_storeu_ps(out + m * ldo + p * kLanes, keep, bias ? _mm512_add_ps(acc[p][m], bv) : acc[p][m]);
  }
}

template <bool kF16, int NP>
void Rows(const uint8_t* const* panels, int64_t K, const float* x, int64_t M, int64_t ldx, float* out, int64_t ldo,
          const float* bias, int64_t n_valid) {
  for_row_tiles_first(M, [&](auto mr, int64_t m, auto first) {
    Tile<kF16, decltype(mr)::value, NP, first.value>(panels, K, x + m * ldx, ldx, out + m * ldo, ldo, bias, n_valid);
  });
}

template <bool kF16>
void Panels(const uint8_t* packed, int64_t N, int64_t K, const float* x, int64_t M, int64_t ldx, float* out,
            int64_t ldo, const float* bias) {
  const int64_t stride = K * 2 * kLanes;
  for (int64_t n0 = 0; n0 < N; n0 += 2 * kLanes) {
    const uint8_t* panels[2] = {packed + n0 / kLanes * stride, packed + (n0 / kLanes + 1) * stride};
    const float* bn = bias ? bias + n0 : nullptr;
    if (N - n0 > kLanes)
      Rows<kF16, 2>(panels, K, x, M, ldx, out + n0, ldo, bn, N - n0);
    else
      Rows<kF16, 1>(panels, K, x, M, ldx, out + n0, ldo, bn, N - n0);
  }
}

}  // namespace

bool HalfAvailable() { return true; }

void HalfGemmPacked(DType t, const uint8_t* packed, int64_t N, int64_t K, const float* x, int64_t M, int64_t ldx,
                    float* out, int64_t ldo, const float* bias) {
  (t == DType::F16 ? Panels<true> : Panels<false>)(packed, N, K, x, M, ldx, out, ldo, bias);
}

#pragma GCC diagnostic pop

#else  // no AVX-512: half_gemm_available() says so and nothing calls HalfGemmPacked

bool HalfAvailable() { return false; }
void HalfGemmPacked(DType, const uint8_t*, int64_t, int64_t, const float*, int64_t, int64_t, float*, int64_t,
                    const float*) {}

#endif

}  // namespace HWY_NAMESPACE
}  // namespace bonfire::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace bonfire::simd {
HWY_EXPORT(HalfAvailable);
HWY_EXPORT(HalfGemmPacked);

bool half_gemm_available(DType weight) {
  return (weight == DType::F16 || weight == DType::BF16) && HWY_DYNAMIC_DISPATCH(HalfAvailable)();
}

int64_t half_panel_stride(int64_t k) { return k * 2 * 16; }
int64_t half_packed_bytes(int64_t n, int64_t k) { return (n + 15) / 16 * half_panel_stride(k); }

void half_pack(const uint8_t* w, int64_t stride, int64_t N, int64_t K, int64_t first, int64_t last, uint8_t* out) {
  for (int64_t p = first; p < last; ++p) {
    auto* dst = reinterpret_cast<uint16_t*>(out + p * half_panel_stride(K));
    for (int i = 0; i < 16; ++i) {
      const auto* row = reinterpret_cast<const uint16_t*>(w + std::min(p * 16 + i, N - 1) * stride);
      for (int64_t k = 0; k < K; ++k) dst[k * 16 + i] = row[k];
    }
  }
}

void half_gemm_packed(DType weight, const uint8_t* panels, int64_t N, int64_t K, const float* x, int64_t M, int64_t ldx,
                      float* out, int64_t ldo, const float* bias) {
  HWY_DYNAMIC_DISPATCH(HalfGemmPacked)(weight, panels, N, K, x, M, ldx, out, ldo, bias);
}

void reference_half_gemm(DType weight, const uint8_t* w, int64_t stride, int64_t N, int64_t K, const float* x,
                         int64_t M, int64_t ldx, float* out, int64_t ldo, const float* bias) {
  for (int64_t n = 0; n < N; ++n) {
    const auto* row = reinterpret_cast<const uint16_t*>(w + n * stride);
    for (int64_t m = 0; m < M; ++m) {
      float acc = 0;
      for (int64_t k = 0; k < K; ++k)
        acc = std::fma(weight == DType::F16 ? f16_to_f32(row[k]) : bf16_to_f32(row[k]), x[m * ldx + k], acc);
      out[m * ldo + n] = bias ? acc + bias[n] : acc;
    }
  }
}
}  // namespace bonfire::simd
#endif
