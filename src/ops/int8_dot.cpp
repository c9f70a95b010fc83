// Highway compiles this file once per instruction-set target (see simd.cpp).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/int8_dot.cpp"
#include <hwy/foreach_target.h>  // must come before highway.h
#include <hwy/highway.h>

#include "ops/int8_dot.h"
#include "ops/row_tiles.h"

#include <cmath>

#if HWY_ARCH_X86
#include <immintrin.h>
#endif

HWY_BEFORE_NAMESPACE();
namespace bonfire::simd {
namespace HWY_NAMESPACE {

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
#define BONFIRE_INT8_AVX2 1
#endif

// q6_k's 256 six-bit values of one super-block as signed bytes (q - 32), in
// element order; element e has scale scales[e / 16]. (ggml's layout: two
// halves of 128, each from 64 bytes of low nibbles and 32 of high bit pairs.)
HWY_INLINE void UnpackQ6K(const BlockQ6_K& b, int8_t* q) {
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = b.ql + 64 * h;
    const uint8_t* qh = b.qh + 32 * h;
    int8_t* y = q + 128 * h;
    for (int l = 0; l < 32; ++l) {
      y[l] = static_cast<int8_t>(((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
      y[l + 32] = static_cast<int8_t>(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
      y[l + 64] = static_cast<int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
      y[l + 96] = static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
    }
  }
}

#ifdef BONFIRE_INT8_AVX2

HWY_INLINE float HalfScale(uint16_t h) { return _cvtsh_ss(h); }

// Sum of the 32 products of signed bytes w and x, as 8 int32 lanes turned to
// f32. maddubs multiplies unsigned by signed bytes, so w's sign moves onto x
// first; no pair sum can saturate (|w| <= 128, |x| <= 127 → 32,512).
HWY_INLINE __m256 DotBytes(__m256i w, __m256i x) {
  const __m256i aw = _mm256_sign_epi8(w, w);
  const __m256i sx = _mm256_sign_epi8(x, w);
  const __m256i pairs = _mm256_maddubs_epi16(aw, sx);
  return _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
}

HWY_INLINE float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// q4_0's 16 bytes → 32 signed values: low nibbles are elements 0..15, high
// nibbles 16..31, each minus 8.
HWY_INLINE __m256i UnpackQ4(const uint8_t* qs) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i m = _mm_set1_epi8(0x0f);
  const __m256i v = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), m), _mm_and_si128(b, m));
  return _mm256_sub_epi8(v, _mm256_set1_epi8(8));
}

float DotQ8(const BlockQ8_0* w, const ActBlock* x, int64_t nb) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 2 <= nb; i += 2) {
    const __m256 p0 = DotBytes(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i].qs)),
                               _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qs)));
    const __m256 p1 = DotBytes(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i + 1].qs)),
                               _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i + 1].qs)));
    acc0 = _mm256_fmadd_ps(p0, _mm256_set1_ps(HalfScale(w[i].d) * x[i].d), acc0);
    acc1 = _mm256_fmadd_ps(p1, _mm256_set1_ps(HalfScale(w[i + 1].d) * x[i + 1].d), acc1);
  }
  if (i < nb) {
    const __m256 p = DotBytes(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i].qs)),
                              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qs)));
    acc0 = _mm256_fmadd_ps(p, _mm256_set1_ps(HalfScale(w[i].d) * x[i].d), acc0);
  }
  return HorizontalSum(_mm256_add_ps(acc0, acc1));
}

float DotQ4(const BlockQ4_0* w, const ActBlock* x, int64_t nb) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 2 <= nb; i += 2) {
    const __m256 p0 = DotBytes(UnpackQ4(w[i].qs), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qs)));
    const __m256 p1 =
        DotBytes(UnpackQ4(w[i + 1].qs), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i + 1].qs)));
    acc0 = _mm256_fmadd_ps(p0, _mm256_set1_ps(HalfScale(w[i].d) * x[i].d), acc0);
    acc1 = _mm256_fmadd_ps(p1, _mm256_set1_ps(HalfScale(w[i + 1].d) * x[i + 1].d), acc1);
  }
  if (i < nb) {
    const __m256 p = DotBytes(UnpackQ4(w[i].qs), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qs)));
    acc0 = _mm256_fmadd_ps(p, _mm256_set1_ps(HalfScale(w[i].d) * x[i].d), acc0);
  }
  return HorizontalSum(_mm256_add_ps(acc0, acc1));
}

// UnpackQ6K for one half of a super-block, in registers: y[k] holds the
// half's elements 32k..32k+31 as signed bytes (q - 32). (The byte-by-byte
// unpack into memory took most of a q6_k product's time: 11-24 GB/s in a
// Q4_K_M decode profile.) Shifts are 16-bit, so each result is masked to the
// bits its own byte supplies.
HWY_INLINE void UnpackQ6KHalf(const uint8_t* ql, const uint8_t* qh, __m256i* y) {
  const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
  const __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh));
  const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(0x03), m30 = _mm256_set1_epi8(0x30);
  const __m256i k32 = _mm256_set1_epi8(32);
  y[0] = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(h, m2), 4)), k32);
  y[1] = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(h, 2), m30)), k32);
  y[2] = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(h, m30)), k32);
  y[3] = _mm256_sub_epi8(
      _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), _mm256_and_si256(_mm256_srli_epi16(h, 2), m30)),
      k32);
}

// q6_k rows against MR activation rows (row m's blocks at x + m * nb).
// Per 32 activations: 8 int32 lanes, lanes 0-3 the first 16 products (one
// q6_k scale), lanes 4-7 the next 16 (the next scale). The super-block's 16
// scales are widened once (d * scale, as f32), and block b takes its pair
// with one permute. Each half super-block is unpacked once for all MR rows,
// and each row's sums run the same way for any MR, so a row's result does
// not depend on the rows batched with it (DotQ6K is MR = 1). The unpack was
// a third of a row's work: 8 rows of a batched step redid it 8 times.
template <int MR>
void DotQ6KRows(const BlockQ6_K* w, const ActBlock* x, int64_t nb, int64_t nsb, float* out, int64_t ldo) {
  __m256 acc0[MR], acc1[MR];
#pragma GCC unroll 4
  for (int m = 0; m < MR; ++m) acc0[m] = acc1[m] = _mm256_setzero_ps();
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const __m256 d = _mm256_set1_ps(HalfScale(w[sb].d));
    const __m128i s8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[sb].scales));
    const __m256 scales[2] = {_mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(s8))),
                              _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(s8, 8))))};
#pragma GCC unroll 2
    for (int half = 0; half < 2; ++half) {
      __m256i y[4];
      UnpackQ6KHalf(w[sb].ql + 64 * half, w[sb].qh + 32 * half, y);
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const int b = 4 * half + k;
        const __m256i pair = _mm256_setr_epi32(2 * k, 2 * k, 2 * k, 2 * k, 2 * k + 1, 2 * k + 1, 2 * k + 1, 2 * k + 1);
        const __m256 sk = _mm256_permutevar8x32_ps(scales[half], pair);
#pragma GCC unroll 4
        for (int m = 0; m < MR; ++m) {
          const ActBlock& xb = x[m * nb + sb * 8 + b];
          const __m256 p = DotBytes(y[k], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs)));
          const __m256 scale = _mm256_mul_ps(sk, _mm256_set1_ps(xb.d));
          if (k % 2) acc1[m] = _mm256_fmadd_ps(p, scale, acc1[m]);
          else acc0[m] = _mm256_fmadd_ps(p, scale, acc0[m]);
        }
      }
    }
  }
#pragma GCC unroll 4
  for (int m = 0; m < MR; ++m) out[m * ldo] = HorizontalSum(_mm256_add_ps(acc0[m], acc1[m]));
}

float DotQ6K(const BlockQ6_K* w, const ActBlock* x, int64_t nsb) {
  float out;
  DotQ6KRows<1>(w, x, nsb * 8, nsb, &out, 0);
  return out;
}

// q4_k and q5_k: per sub-block j of 32 values, d * sc_j * sum q x over the
// unsigned codes, less dmin * m_j * sum x (`sums`, the activation block's
// sum, computed once per product). The codes are unsigned (q5_k: 0..31), so
// maddubs takes them as they are and no pair sum saturates (31 * 127 * 2).
HWY_INLINE __m256 DotCodes(__m256i q, __m256i x) {
  return _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_maddubs_epi16(q, x), _mm256_set1_epi16(1)));
}

// q4_k and q5_k rows against MR activation rows (row m's blocks at x +
// m * nb, its sums at sums + m * nb): each sub-block pair's codes are
// unpacked once for all MR rows, and each row's sums run the same way for
// any MR (DotK4 is MR = 1), as for q6_k above.
template <bool FIVE, int MR, class Block>
void DotK4Rows(const Block* w, const ActBlock* x, const int32_t* sums, int64_t nb, int64_t nsb, float* out,
               int64_t ldo) {
  __m256 acc0[MR], acc1[MR];
  float mins[MR];
#pragma GCC unroll 4
  for (int m = 0; m < MR; ++m) acc0[m] = acc1[m] = _mm256_setzero_ps(), mins[m] = 0;
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const float d = HalfScale(w[sb].d), dmin = HalfScale(w[sb].dmin);
    __m256i high = _mm256_setzero_si256();
    if constexpr (FIVE) high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[sb].qh));
    for (int j = 0; j < 4; ++j) {
      const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[sb].qs + 32 * j));
      __m256i lo = _mm256_and_si256(bytes, nibble);
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), nibble);
      if constexpr (FIVE) {  // bit 2j of qh[l] is element l's fifth bit in sub-block 2j, bit 2j + 1 in 2j + 1
        const __m256i blo = _mm256_set1_epi8(static_cast<char>(1 << (2 * j)));
        const __m256i bhi = _mm256_set1_epi8(static_cast<char>(2 << (2 * j)));
        const __m256i sixteen = _mm256_set1_epi8(16);
        lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(high, blo), blo), sixteen));
        hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(high, bhi), bhi), sixteen));
      }
      uint8_t sc0, m0, sc1, m1;
      k4_scale_min(2 * j, w[sb].scales, &sc0, &m0);
      k4_scale_min(2 * j + 1, w[sb].scales, &sc1, &m1);
#pragma GCC unroll 4
      for (int m = 0; m < MR; ++m) {
        const ActBlock& x0 = x[m * nb + sb * 8 + 2 * j];
        const ActBlock& x1 = x[m * nb + sb * 8 + 2 * j + 1];
        const int32_t* xs = sums + m * nb + sb * 8;
        acc0[m] = _mm256_fmadd_ps(DotCodes(lo, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x0.qs))),
                                  _mm256_set1_ps(d * sc0 * x0.d), acc0[m]);
        acc1[m] = _mm256_fmadd_ps(DotCodes(hi, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x1.qs))),
                                  _mm256_set1_ps(d * sc1 * x1.d), acc1[m]);
        // The FMAs written out: left to the compiler's contraction, two
        // instantiations could round differently.
        const float both =
            std::fma(m0 * x0.d, static_cast<float>(xs[2 * j]), m1 * x1.d * static_cast<float>(xs[2 * j + 1]));
        mins[m] = std::fma(dmin, both, mins[m]);
      }
    }
  }
#pragma GCC unroll 4
  for (int m = 0; m < MR; ++m) out[m * ldo] = HorizontalSum(_mm256_add_ps(acc0[m], acc1[m])) - mins[m];
}

template <bool FIVE, class Block>
float DotK4(const Block* w, const ActBlock* x, const int32_t* sums, int64_t nsb) {
  float out;
  DotK4Rows<FIVE, 1>(w, x, sums, nsb * 8, nsb, &out, 0);
  return out;
}

#else  // portable: the same integer sums, one block at a time

float DotQ6K(const BlockQ6_K* w, const ActBlock* x, int64_t nsb) {
  float acc = 0;
  int8_t q[256];
  for (int64_t sb = 0; sb < nsb; ++sb) {
    UnpackQ6K(w[sb], q);
    const float d = f16_to_f32(w[sb].d);
    for (int sub = 0; sub < 16; ++sub) {
      const ActBlock& xb = x[sb * 8 + sub / 2];
      int32_t s = 0;
      for (int j = 0; j < 16; ++j) s += int32_t(q[sub * 16 + j]) * int32_t(xb.qs[(sub % 2) * 16 + j]);
      acc += static_cast<float>(s) * (d * xb.d * w[sb].scales[sub]);
    }
  }
  return acc;
}

float DotQ8(const BlockQ8_0* w, const ActBlock* x, int64_t nb) {
  float acc = 0;
  for (int64_t i = 0; i < nb; ++i) {
    int32_t s = 0;
    for (int j = 0; j < 32; ++j) s += int32_t(w[i].qs[j]) * int32_t(x[i].qs[j]);
    acc += static_cast<float>(s) * (f16_to_f32(w[i].d) * x[i].d);
  }
  return acc;
}

float DotQ4(const BlockQ4_0* w, const ActBlock* x, int64_t nb) {
  float acc = 0;
  for (int64_t i = 0; i < nb; ++i) {
    int32_t s = 0;
    for (int j = 0; j < 16; ++j) {
      s += (int32_t(w[i].qs[j] & 0x0f) - 8) * int32_t(x[i].qs[j]);
      s += (int32_t(w[i].qs[j] >> 4) - 8) * int32_t(x[i].qs[j + 16]);
    }
    acc += static_cast<float>(s) * (f16_to_f32(w[i].d) * x[i].d);
  }
  return acc;
}

template <bool FIVE, class Block>
float DotK4(const Block* w, const ActBlock* x, const int32_t* sums, int64_t nsb) {
  float acc = 0;
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const float d = f16_to_f32(w[sb].d), dmin = f16_to_f32(w[sb].dmin);
    for (int sub = 0; sub < 8; ++sub) {
      const ActBlock& xb = x[sb * 8 + sub];
      uint8_t sc, mn;
      k4_scale_min(sub, w[sb].scales, &sc, &mn);
      const uint8_t* q = w[sb].qs + 32 * (sub / 2);
      int32_t s = 0;
      for (int l = 0; l < 32; ++l) {
        int32_t code = sub % 2 ? q[l] >> 4 : q[l] & 0x0f;
        if constexpr (FIVE) code |= ((w[sb].qh[l] >> sub) & 1) << 4;
        s += code * int32_t(xb.qs[l]);
      }
      acc += static_cast<float>(s) * (d * sc * xb.d) - dmin * mn * xb.d * static_cast<float>(sums[sb * 8 + sub]);
    }
  }
  return acc;
}

#endif

// quantize_activations per target: the same values as the scalar
// definition (scale = max|x| / 127, each value rounded to nearest with
// halves away from zero, as lround does), without a libm call per value.
bool QuantizeActivations(const float* x, int64_t n, ActBlock* out) {
  namespace hn = hwy::HWY_NAMESPACE;
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const int64_t L = static_cast<int64_t>(hn::Lanes(d));
  HWY_ALIGN int32_t q[32];  // lanes divide 32 on every target
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* xb = x + b * 32;
    auto vmax = hn::Zero(d);
    for (int64_t j = 0; j < 32; j += L) {
      const auto v = hn::LoadU(d, xb + j);
      if (!hn::AllTrue(d, hn::IsFinite(v))) return false;
      vmax = hn::Max(vmax, hn::Abs(v));
    }
    const float amax = hn::GetLane(hn::MaxOfLanes(d, vmax));
    const float scale = amax / 127.0f;
    const auto inv = hn::Set(d, scale > 0 ? 1.0f / scale : 0.0f);
    for (int64_t j = 0; j < 32; j += L) {
      const auto v = hn::Mul(hn::LoadU(d, xb + j), inv);
      const auto t = hn::Trunc(v);
      const auto up = hn::Ge(hn::Abs(hn::Sub(v, t)), hn::Set(d, 0.5f));  // exact: v - t loses nothing
      const auto r = hn::Add(t, hn::IfThenElseZero(up, hn::CopySign(hn::Set(d, 1.0f), v)));
      hn::Store(hn::ConvertTo(di, r), di, q + j);
    }
    out[b].d = scale;
    for (int j = 0; j < 32; ++j) out[b].qs[j] = static_cast<int8_t>(q[j]);
  }
  return true;
}

float DotInt8(DType t, const void* row, const ActBlock* x, const int32_t* sums, int64_t n) {
  if (t == DType::Q8_0) return DotQ8(static_cast<const BlockQ8_0*>(row), x, n / 32);
  if (t == DType::Q6_K) return DotQ6K(static_cast<const BlockQ6_K*>(row), x, n / 256);
  if (t == DType::Q4_K) return DotK4<false>(static_cast<const BlockQ4_K*>(row), x, sums, n / 256);
  if (t == DType::Q5_K) return DotK4<true>(static_cast<const BlockQ5_K*>(row), x, sums, n / 256);
  return DotQ4(static_cast<const BlockQ4_0*>(row), x, n / 32);
}

// M activation rows (row m's blocks at x + m * n / 32, its sums likewise)
// against one weight row, out[m * ldo] = DotInt8 of row m.
void DotInt8Rows(DType t, const void* row, const ActBlock* x, const int32_t* sums, int64_t n, int64_t M, float* out,
                 int64_t ldo) {
  const int64_t nb = n / 32;
#ifdef BONFIRE_INT8_AVX2
  // Tiles of up to 4 rows (ops/row_tiles.h).
  const int64_t nsb = n / 256;
  if (t == DType::Q6_K)
    return for_row_tiles(M, [&](auto mr, int64_t m) {
      DotQ6KRows<decltype(mr)::value>(static_cast<const BlockQ6_K*>(row), x + m * nb, nb, nsb, out + m * ldo, ldo);
    });
  if (t == DType::Q4_K)
    return for_row_tiles(M, [&](auto mr, int64_t m) {
      DotK4Rows<false, decltype(mr)::value>(static_cast<const BlockQ4_K*>(row), x + m * nb, sums + m * nb, nb, nsb,
                                            out + m * ldo, ldo);
    });
  if (t == DType::Q5_K)
    return for_row_tiles(M, [&](auto mr, int64_t m) {
      DotK4Rows<true, decltype(mr)::value>(static_cast<const BlockQ5_K*>(row), x + m * nb, sums + m * nb, nb, nsb,
                                           out + m * ldo, ldo);
    });
#endif
  for (int64_t m = 0; m < M; ++m) out[m * ldo] = DotInt8(t, row, x + m * nb, sums ? sums + m * nb : nullptr, n);
}

// Which code DotInt8 runs on this target: the dispatch test checks that a
// forced target runs its own code.
const char* Int8Path() {
#ifdef BONFIRE_INT8_AVX2
  return "avx2";
#else
  return "portable";
#endif
}

#undef BONFIRE_INT8_AVX2

}  // namespace HWY_NAMESPACE
}  // namespace bonfire::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace bonfire::simd {
HWY_EXPORT(DotInt8);
HWY_EXPORT(DotInt8Rows);
HWY_EXPORT(QuantizeActivations);
HWY_EXPORT(Int8Path);

bool int8_dot_supported(DType weight, int64_t n) {
  if (weight == DType::Q6_K || weight == DType::Q4_K || weight == DType::Q5_K) return n % 256 == 0;
  return (weight == DType::Q8_0 || weight == DType::Q4_0) && n % 32 == 0;
}

bool quantize_activations(const float* x, int64_t n, ActBlock* out) {
  return HWY_DYNAMIC_DISPATCH(QuantizeActivations)(x, n, out);
}

bool int8_dot_needs_sums(DType weight) { return weight == DType::Q4_K || weight == DType::Q5_K; }

void activation_sums(const ActBlock* x, int64_t count, int32_t* sums) {
  for (int64_t i = 0; i < count; ++i) {
    int32_t s = 0;
    for (int j = 0; j < 32; ++j) s += x[i].qs[j];
    sums[i] = s;
  }
}

float dot_int8(DType weight, const void* row, const ActBlock* x, int64_t n, const int32_t* sums) {
  return HWY_DYNAMIC_DISPATCH(DotInt8)(weight, row, x, sums, n);
}

void dot_int8_rows(DType weight, const void* row, const ActBlock* x, int64_t n, int64_t M, float* out, int64_t ldo,
                   const int32_t* sums) {
  HWY_DYNAMIC_DISPATCH(DotInt8Rows)(weight, row, x, sums, n, M, out, ldo);
}

const char* int8_dot_path() { return HWY_DYNAMIC_DISPATCH(Int8Path)(); }
}  // namespace bonfire::simd
#endif
