// Highway compiles this file once per instruction-set target and picks the
// best one the CPU supports on the first call.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/simd.cpp"
#include <hwy/foreach_target.h>  // must come before highway.h
#include <hwy/highway.h>
#include <hwy/cache_control.h>
#include <hwy/contrib/math/math-inl.h>

#include "ops/simd.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

HWY_BEFORE_NAMESPACE();
namespace bonfire::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

float DotF32(const float* a, const float* b, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t N = hn::Lanes(d);
  auto s0 = hn::Zero(d), s1 = hn::Zero(d);
  int64_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    s0 = hn::MulAdd(hn::LoadU(d, a + i), hn::LoadU(d, b + i), s0);
    s1 = hn::MulAdd(hn::LoadU(d, a + i + N), hn::LoadU(d, b + i + N), s1);
  }
  for (; i + N <= n; i += N) s0 = hn::MulAdd(hn::LoadU(d, a + i), hn::LoadU(d, b + i), s0);
  float s = hn::GetLane(hn::SumOfLanes(d, hn::Add(s0, s1)));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

void AxpyF32(float a, const float* x, float* y, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t N = hn::Lanes(d);
  const auto va = hn::Set(d, a);
  int64_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(hn::MulAdd(va, hn::LoadU(d, x + i), hn::LoadU(d, y + i)), d, y + i);
  for (; i < n; ++i) y[i] += a * x[i];
}

// o[i] = a[i] (op) b[i], or (op) b[0] when b_scalar. Each lane rounds as
// the scalar expression does, so the values are the same on every target.
// `op` takes two vectors or two floats.
template <class Op>
HWY_INLINE void BinaryLanes(const float* a, const float* b, bool b_scalar, float* o, int64_t n, Op op) {
  const hn::ScalableTag<float> d;
  const int64_t N = hn::Lanes(d);
  const auto b0 = hn::Set(d, b[0]);
  int64_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(op(hn::LoadU(d, a + i), b_scalar ? b0 : hn::LoadU(d, b + i)), d, o + i);
  for (; i < n; ++i) o[i] = op(a[i], b_scalar ? b[0] : b[i]);
}

void BinaryF32(int op, const float* a, const float* b, bool b_scalar, float* o, int64_t n) {
  switch (op) {
    case 0: return BinaryLanes(a, b, b_scalar, o, n, [](auto x, auto y) { return x + y; });
    case 1: return BinaryLanes(a, b, b_scalar, o, n, [](auto x, auto y) { return x - y; });
    default: return BinaryLanes(a, b, b_scalar, o, n, [](auto x, auto y) { return x * y; });
  }
}

// o[i] = (x[i] * s) * (g[i] + offset): a normalised row times its gain.
void ScaleGainF32(const float* x, float s, const float* g, float offset, float* o, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t N = hn::Lanes(d);
  const auto vs = hn::Set(d, s), voff = hn::Set(d, offset);
  int64_t i = 0;
  for (; i + N <= n; i += N)
    hn::StoreU(hn::Mul(hn::Mul(hn::LoadU(d, x + i), vs), hn::Add(hn::LoadU(d, g + i), voff)), d, o + i);
  for (; i < n; ++i) o[i] = x[i] * s * (g[i] + offset);
}

// NeoX/Llama rotary pairs (i, i + half): o[i] = a c - b s, o[i + half] =
// b c + a s with a = x[i], b = x[i + half]. Products and sums rounded
// apart (no fused multiply-add), as the scalar expression is on a baseline
// build, so every target rotates to the same bits.
void RotateHalves(const float* x, const float* cs, const float* sn, int64_t half, float* o) {
  const hn::ScalableTag<float> d;
  const int64_t N = hn::Lanes(d);
  int64_t i = 0;
  for (; i + N <= half; i += N) {
    const auto a = hn::LoadU(d, x + i), b = hn::LoadU(d, x + half + i);
    const auto c = hn::LoadU(d, cs + i), s = hn::LoadU(d, sn + i);
    hn::StoreU(hn::Sub(hn::Mul(a, c), hn::Mul(b, s)), d, o + i);
    hn::StoreU(hn::Add(hn::Mul(b, c), hn::Mul(a, s)), d, o + half + i);
  }
  for (; i < half; ++i) {
    const float a = x[i], b = x[i + half], ac = a * cs[i], bs = b * sn[i], bc = b * cs[i], as = a * sn[i];
    o[i] = ac - bs;
    o[i + half] = bc + as;
  }
}

// Four chains of double lanes: the sum's rounding is a double's (the serial
// loop it replaces waited ~4 cycles per value on one chain).
double SumSquaresF64(const float* x, int64_t n) {
  double s = 0;
  int64_t i = 0;
#if HWY_HAVE_FLOAT64
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;  // half as many floats, promoted
  const int64_t N = hn::Lanes(dd);
  auto s0 = hn::Zero(dd), s1 = hn::Zero(dd), s2 = hn::Zero(dd), s3 = hn::Zero(dd);
  for (; i + 4 * N <= n; i += 4 * N) {
    const auto a = hn::PromoteTo(dd, hn::LoadU(df, x + i)), b = hn::PromoteTo(dd, hn::LoadU(df, x + i + N));
    const auto c = hn::PromoteTo(dd, hn::LoadU(df, x + i + 2 * N)), e = hn::PromoteTo(dd, hn::LoadU(df, x + i + 3 * N));
    s0 = hn::MulAdd(a, a, s0), s1 = hn::MulAdd(b, b, s1), s2 = hn::MulAdd(c, c, s2), s3 = hn::MulAdd(e, e, s3);
  }
  s = hn::GetLane(hn::SumOfLanes(dd, hn::Add(hn::Add(s0, s1), hn::Add(s2, s3))));
#endif
  for (; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return s;
}

void ScaleF32(float a, float* y, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t N = hn::Lanes(d);
  const auto va = hn::Set(d, a);
  int64_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(hn::Mul(va, hn::LoadU(d, y + i)), d, y + i);
  for (; i < n; ++i) y[i] *= a;
}

#if HWY_TARGET != HWY_SCALAR
// The four 128-bit-block sums of a vector's lanes, added block to block:
// lane m of the result is the sum of lane m of every block.
template <class D, class V>
HWY_INLINE hn::Vec<hn::Full128<float>> SumBlocks(D d, V v) {
  if constexpr (hn::MaxLanes(d) <= 4) {
    return v;
  } else {
    const hn::Half<D> dh;
    return SumBlocks(dh, hn::Add(hn::LowerHalf(dh, v), hn::UpperHalf(dh, v)));
  }
}

// Four keys at a time: four chains of multiply-adds, then one tree that
// reduces all four at once (two interleaves per level within each 128-bit
// block, then the blocks added), instead of a full horizontal sum per key.
// A key's score depends only on its own row: the tail of fewer than four
// keys runs the same code with the last key repeated.
void DotRows(const float* q, const float* k, int64_t stride, int64_t n, int64_t d, float* out) {
  const hn::ScalableTag<float> df;
  const int64_t N = hn::Lanes(df);
  const hn::Repartition<uint64_t, decltype(df)> d64;
  const hn::Full128<float> d4;
  for (int64_t i = 0; i < n; i += 4) {
    const float* r[4];
    for (int m = 0; m < 4; ++m) r[m] = k + std::min(i + m, n - 1) * stride;
    auto a0 = hn::Zero(df), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
    auto b0 = hn::Zero(df), b1 = hn::Zero(df), b2 = hn::Zero(df), b3 = hn::Zero(df);
    int64_t j = 0;
    for (; j + 2 * N <= d; j += 2 * N) {
      const auto q0 = hn::LoadU(df, q + j), q1 = hn::LoadU(df, q + j + N);
      a0 = hn::MulAdd(q0, hn::LoadU(df, r[0] + j), a0), b0 = hn::MulAdd(q1, hn::LoadU(df, r[0] + j + N), b0);
      a1 = hn::MulAdd(q0, hn::LoadU(df, r[1] + j), a1), b1 = hn::MulAdd(q1, hn::LoadU(df, r[1] + j + N), b1);
      a2 = hn::MulAdd(q0, hn::LoadU(df, r[2] + j), a2), b2 = hn::MulAdd(q1, hn::LoadU(df, r[2] + j + N), b2);
      a3 = hn::MulAdd(q0, hn::LoadU(df, r[3] + j), a3), b3 = hn::MulAdd(q1, hn::LoadU(df, r[3] + j + N), b3);
    }
    for (; j + N <= d; j += N) {
      const auto q0 = hn::LoadU(df, q + j);
      a0 = hn::MulAdd(q0, hn::LoadU(df, r[0] + j), a0);
      a1 = hn::MulAdd(q0, hn::LoadU(df, r[1] + j), a1);
      a2 = hn::MulAdd(q0, hn::LoadU(df, r[2] + j), a2);
      a3 = hn::MulAdd(q0, hn::LoadU(df, r[3] + j), a3);
    }
    a0 = hn::Add(a0, b0), a1 = hn::Add(a1, b1), a2 = hn::Add(a2, b2), a3 = hn::Add(a3, b3);
    // Per block: [a0 a1 a0 a1] pair sums, then [a0 a1 a2 a3] block sums.
    const auto v01 = hn::Add(hn::InterleaveLower(df, a0, a1), hn::InterleaveUpper(df, a0, a1));
    const auto v23 = hn::Add(hn::InterleaveLower(df, a2, a3), hn::InterleaveUpper(df, a2, a3));
    const auto w = hn::Add(hn::BitCast(df, hn::InterleaveLower(d64, hn::BitCast(d64, v01), hn::BitCast(d64, v23))),
                           hn::BitCast(df, hn::InterleaveUpper(d64, hn::BitCast(d64, v01), hn::BitCast(d64, v23))));
    HWY_ALIGN float s[4];
    hn::Store(SumBlocks(df, w), d4, s);
    for (int m = 0; m < 4 && i + m < n; ++m) {
      for (int64_t t = j; t < d; ++t) s[m] += q[t] * r[m][t];
      out[i + m] = s[m];
    }
  }
}
#else   // one lane: nothing to reduce
void DotRows(const float* q, const float* k, int64_t stride, int64_t n, int64_t d, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = DotF32(q, k + i * stride, d);
}
#endif

// H heads (1 or 2) over the same rows: each head's accumulator stays in
// registers over all n rows, four vectors at a time, and each element still
// gets acc = fma(w, v, acc) in row order, so the bits are AxpyF32's row
// after row. Two heads load each row once, and their chains overlap (one
// alone waits on its multiply-adds' latency).
template <int H>
HWY_INLINE void WeightedRowsHeads(const float* const* w, const float* v, int64_t stride, int64_t n, int64_t d,
                                  float* const* acc) {
  const hn::ScalableTag<float> df;
  const int64_t N = hn::Lanes(df);
  int64_t j = 0;
  for (; j + 4 * N <= d; j += 4 * N) {
    hn::Vec<decltype(df)> a[H][4];
#pragma GCC unroll 2
    for (int h = 0; h < H; ++h)
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) a[h][c] = hn::LoadU(df, acc[h] + j + c * N);
    for (int64_t i = 0; i < n; ++i) {
      bool any = false;
#pragma GCC unroll 2
      for (int h = 0; h < H; ++h) any |= w[h][i] != 0.0f;
      if (!any) continue;
      const float* r = v + i * stride + j;
      hn::Vec<decltype(df)> row[4];
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) row[c] = hn::LoadU(df, r + c * N);
#pragma GCC unroll 2
      for (int h = 0; h < H; ++h) {
        if (w[h][i] == 0.0f) continue;
        const auto wi = hn::Set(df, w[h][i]);
#pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) a[h][c] = hn::MulAdd(wi, row[c], a[h][c]);
      }
    }
#pragma GCC unroll 2
    for (int h = 0; h < H; ++h)
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) hn::StoreU(a[h][c], df, acc[h] + j + c * N);
  }
  if (j < d)
    for (int64_t i = 0; i < n; ++i)
      for (int h = 0; h < H; ++h)
        if (w[h][i] != 0.0f) AxpyF32(w[h][i], v + i * stride + j, acc[h] + j, d - j);
}

void WeightedRows(const float* w, int64_t w_stride, int64_t heads, const float* v, int64_t stride, int64_t n,
                  int64_t d, float* acc, int64_t acc_stride) {
  int64_t h = 0;
  for (; h + 2 <= heads; h += 2) {
    const float* wp[2] = {w + h * w_stride, w + (h + 1) * w_stride};
    float* ap[2] = {acc + h * acc_stride, acc + (h + 1) * acc_stride};
    WeightedRowsHeads<2>(wp, v, stride, n, d, ap);
  }
  if (h < heads) {
    const float* wp[1] = {w + h * w_stride};
    float* ap[1] = {acc + h * acc_stride};
    WeightedRowsHeads<1>(wp, v, stride, n, d, ap);
  }
}

// x[i] = exp(x[i] - shift); -inf gives 0. Returns their sum.
double ExpShifted(float* x, int64_t n, float shift) {
  const hn::ScalableTag<float> df;
  const int64_t N = hn::Lanes(df);
  const auto vs = hn::Set(df, shift);
  auto sum = hn::Zero(df);
  int64_t i = 0;
  for (; i + N <= n; i += N) {
    const auto e = hn::Exp(df, hn::Sub(hn::LoadU(df, x + i), vs));
    hn::StoreU(e, df, x + i);
    sum = hn::Add(sum, e);
  }
#if !HWY_MEM_OPS_MIGHT_FAULT
  if (i < n) {  // the tail in one masked vector (AVX-512 masks suppress faults)
    const auto m = hn::FirstN(df, static_cast<size_t>(n - i));
    const auto e = hn::IfThenElseZero(m, hn::Exp(df, hn::Sub(hn::MaskedLoad(m, df, x + i), vs)));
    hn::BlendedStore(e, m, df, x + i);
    sum = hn::Add(sum, e);
  }
#else
  if (i < n) {  // the tail through a padded vector (Highway 1.0.3 has no LoadN)
    HWY_ALIGN float tail[hn::MaxLanes(df)];
    std::fill(tail, tail + hn::MaxLanes(df), -std::numeric_limits<float>::infinity());
    std::copy(x + i, x + n, tail);
    const auto e = hn::Exp(df, hn::Sub(hn::Load(df, tail), vs));
    hn::Store(e, df, tail);
    sum = hn::Add(sum, e);
    std::copy(tail, tail + (n - i), x + i);
  }
#endif
  return hn::GetLane(hn::SumOfLanes(df, sum));
}

// w[i] = exp(((double)v[i] - mx) / temperature), 1 where v[i] == mx.
void SoftmaxWeightsF64(const float* v, int64_t n, float mx, double temperature, double* w) {
#if HWY_HAVE_FLOAT64
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;  // half as many floats, promoted
  const int64_t N = hn::Lanes(dd);
  const auto vmx = hn::Set(dd, static_cast<double>(mx)), vt = hn::Set(dd, temperature), one = hn::Set(dd, 1.0);
  auto weights = [&](hn::Vec<decltype(dd)> x) {
    // v == mx spelled out: +inf - +inf would be NaN.
    return hn::IfThenElse(hn::Eq(x, vmx), one, hn::Exp(dd, hn::Div(hn::Sub(x, vmx), vt)));
  };
  int64_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(weights(hn::PromoteTo(dd, hn::LoadU(df, v + i))), dd, w + i);
  if (i < n) {  // the tail through a padded vector, the same arithmetic
    HWY_ALIGN double tail[hn::MaxLanes(dd)];
    std::fill(tail, tail + hn::MaxLanes(dd), static_cast<double>(mx));
    std::copy(v + i, v + n, tail);
    hn::Store(weights(hn::Load(dd, tail)), dd, tail);
    std::copy(tail, tail + (n - i), w + i);
  }
#else  // no f64 vectors (Highway 1.0.3's WASM target)
  for (int64_t i = 0; i < n; ++i) w[i] = v[i] == mx ? 1.0 : std::exp((static_cast<double>(v[i]) - mx) / temperature);
#endif
}

// x[i] *= scale; returns the largest, and sets *nan when one is NaN.
float ScaleMax(float* x, int64_t n, float scale, bool* nan) {
  const hn::ScalableTag<float> df;
  const int64_t N = hn::Lanes(df);
  const auto vs = hn::Set(df, scale);
  auto best = hn::Set(df, -std::numeric_limits<float>::infinity());
  auto bad = hn::FirstN(df, 0);
  int64_t i = 0;
  for (; i + N <= n; i += N) {
    const auto v = hn::Mul(hn::LoadU(df, x + i), vs);
    hn::StoreU(v, df, x + i);
    bad = hn::Or(bad, hn::IsNaN(v));
    best = hn::Max(best, v);
  }
#if !HWY_MEM_OPS_MIGHT_FAULT
  if (i < n) {  // the tail in one masked vector: a tile of 44 keys paid 12 scalar steps
    const auto m = hn::FirstN(df, static_cast<size_t>(n - i));
    const auto v = hn::Mul(hn::MaskedLoad(m, df, x + i), vs);
    hn::BlendedStore(v, m, df, x + i);
    bad = hn::Or(bad, hn::And(m, hn::IsNaN(v)));
    best = hn::Max(best, hn::IfThenElse(m, v, hn::Set(df, -std::numeric_limits<float>::infinity())));
    i = n;
  }
#endif
  float m = hn::GetLane(hn::MaxOfLanes(df, best));
  bool any = !hn::AllFalse(df, bad);
  for (; i < n; ++i) {
    x[i] *= scale;
    any |= std::isnan(x[i]);
    m = std::max(m, x[i]);
  }
  *nan |= any;
  return m;
}

// out[i] = sigmoid(alpha * x[i]), times x[i] when times_x. exp is taken of
// -|alpha x| only, so it never overflows; NaN stays NaN.
void Sigmoid(const float* x, float* out, int64_t n, float alpha, bool times_x) {
  const hn::ScalableTag<float> df;
  const int64_t N = hn::Lanes(df);
  const auto va = hn::Set(df, alpha), one = hn::Set(df, 1.0f);
  auto at = [&](auto v) {
    const auto ax = hn::Mul(va, v);
    const auto e = hn::Exp(df, hn::Neg(hn::Abs(ax)));
    const auto pos = hn::Div(one, hn::Add(one, e));  // sigmoid(|ax|)
    auto sig = hn::IfThenElse(hn::Ge(ax, hn::Zero(df)), pos, hn::Mul(e, pos));
    sig = hn::IfThenElse(hn::IsNaN(ax), ax, sig);
    return times_x ? hn::Mul(v, sig) : sig;
  };
  int64_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(at(hn::LoadU(df, x + i)), df, out + i);
  if (i < n) {
    HWY_ALIGN float tail[hn::MaxLanes(df)] = {};
    std::copy(x + i, x + n, tail);
    hn::Store(at(hn::Load(df, tail)), df, tail);
    std::copy(tail, tail + (n - i), out + i);
  }
}

// f16/bf16 rows: widen a vector at a time. A decode step streams the
// rows from memory, and the hardware's prefetch alone kept this at 0.82-0.89
// of a plain read's speed on Zen 3; asking for the bytes 1 KiB ahead (the
// next row near a row's end) took 4-6% off in 4 of 5 paired runs.
constexpr int64_t kDotAheadBytes = 1024;
template <typename T>
float DotHalf(const T* w, const float* x, int64_t n) {
  const hn::ScalableTag<float> d;
  const hn::Rebind<T, decltype(d)> dh;
  const int64_t N = hn::Lanes(d);
  // Four independent sums: one chain would wait on each FMA's latency.
  auto s0 = hn::Zero(d), s1 = hn::Zero(d), s2 = hn::Zero(d), s3 = hn::Zero(d);
  int64_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    const char* ahead = reinterpret_cast<const char*>(w + i) + kDotAheadBytes;
    for (size_t l = 0; l < 4 * N * sizeof(T); l += 64) hwy::Prefetch(ahead + l);
    s0 = hn::MulAdd(hn::PromoteTo(d, hn::LoadU(dh, w + i)), hn::LoadU(d, x + i), s0);
    s1 = hn::MulAdd(hn::PromoteTo(d, hn::LoadU(dh, w + i + N)), hn::LoadU(d, x + i + N), s1);
    s2 = hn::MulAdd(hn::PromoteTo(d, hn::LoadU(dh, w + i + 2 * N)), hn::LoadU(d, x + i + 2 * N), s2);
    s3 = hn::MulAdd(hn::PromoteTo(d, hn::LoadU(dh, w + i + 3 * N)), hn::LoadU(d, x + i + 3 * N), s3);
  }
  for (; i + N <= n; i += N) s0 = hn::MulAdd(hn::PromoteTo(d, hn::LoadU(dh, w + i)), hn::LoadU(d, x + i), s0);
  float r = hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(s0, s1), hn::Add(s2, s3))));
  const uint16_t* bits = reinterpret_cast<const uint16_t*>(w);
  for (; i < n; ++i)
    r += (std::is_same_v<T, hwy::float16_t> ? f16_to_f32(bits[i]) : bf16_to_f32(bits[i])) * x[i];
  return r;
}

float DotExpanded(DType t, const uint8_t* row, const float* x, int64_t n);

// One f16 block scale to f32 with the target's conversion instruction
// (F16C on x86) instead of the portable bit manipulation: the scale is read
// once per 32 weights, so in a decode GEMV it costs as much as the block.
HWY_INLINE float HalfToFloat(const uint16_t* h) {
  const hn::CappedTag<float, 1> d1;
  const hn::Rebind<hwy::float16_t, decltype(d1)> dh1;
  return hn::GetLane(hn::PromoteTo(d1, hn::LoadU(dh1, reinterpret_cast<const hwy::float16_t*>(h))));
}

// q8_0 and q4_0 keep activations in f32 (exact against the dequantized
// weight): each block's integers widen to f32 lanes and meet x in a per-block
// sum, which is scaled once per block; the row's horizontal sum happens once.
// A vector must not be wider than half a block (16 f32 lanes: AVX-512).
float DotQ8_0(const BlockQ8_0* b, const float* x, int64_t n) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const hn::Rebind<int8_t, decltype(d)> d8;
  const int64_t N = hn::Lanes(d);
  if (N > 16) return DotExpanded(DType::Q8_0, reinterpret_cast<const uint8_t*>(b), x, n);
  // Two blocks per step into separate sums: each block's scaled sum is one
  // FMA into its accumulator, and a single chain would wait on its latency.
  const auto block_sum = [&](const BlockQ8_0& blk, const float* xb) {
    auto s0 = hn::Zero(d), s1 = hn::Zero(d);
    for (int64_t j = 0; j < 32; j += 2 * N) {
      s0 = hn::MulAdd(hn::ConvertTo(d, hn::PromoteTo(di, hn::LoadU(d8, blk.qs + j))), hn::LoadU(d, xb + j), s0);
      s1 = hn::MulAdd(hn::ConvertTo(d, hn::PromoteTo(di, hn::LoadU(d8, blk.qs + j + N))), hn::LoadU(d, xb + j + N), s1);
    }
    return hn::Add(s0, s1);
  };
  auto acc0 = hn::Zero(d), acc1 = hn::Zero(d);
  const int64_t nb = n / 32;
  int64_t blk = 0;
  for (; blk + 2 <= nb; blk += 2) {
    acc0 = hn::MulAdd(block_sum(b[blk], x + blk * 32), hn::Set(d, HalfToFloat(&b[blk].d)), acc0);
    acc1 = hn::MulAdd(block_sum(b[blk + 1], x + blk * 32 + 32), hn::Set(d, HalfToFloat(&b[blk + 1].d)), acc1);
  }
  if (blk < nb) acc0 = hn::MulAdd(block_sum(b[blk], x + blk * 32), hn::Set(d, HalfToFloat(&b[blk].d)), acc0);
  return hn::GetLane(hn::SumOfLanes(d, hn::Add(acc0, acc1)));
}

float DotQ4_0(const BlockQ4_0* b, const float* x, int64_t n) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const hn::Rebind<uint8_t, decltype(d)> d8;
  const int64_t N = hn::Lanes(d);
  if (N > 16) return DotExpanded(DType::Q4_0, reinterpret_cast<const uint8_t*>(b), x, n);
  const auto mask = hn::Set(di, 0x0f), eight = hn::Set(di, 8);
  auto acc = hn::Zero(d);
  for (int64_t blk = 0; blk < n / 32; ++blk) {
    const float* xb = x + blk * 32;
    auto s = hn::Zero(d);
    for (int64_t j = 0; j < 16; j += N) {
      // Byte j holds element j (low nibble) and element j + 16 (high nibble).
      const auto q = hn::BitCast(di, hn::PromoteTo(hn::RebindToUnsigned<decltype(d)>(), hn::LoadU(d8, b[blk].qs + j)));
      const auto lo = hn::ConvertTo(d, hn::Sub(hn::And(q, mask), eight));
      const auto hi = hn::ConvertTo(d, hn::Sub(hn::ShiftRight<4>(q), eight));
      s = hn::MulAdd(lo, hn::LoadU(d, xb + j), s);
      s = hn::MulAdd(hi, hn::LoadU(d, xb + j + 16), s);
    }
    acc = hn::MulAdd(s, hn::Set(d, HalfToFloat(&b[blk].d)), acc);
  }
  return hn::GetLane(hn::SumOfLanes(d, acc));
}

#include "ops/dequant_kquants-inl.h"  // q4_k, q5_k and q6_k rows a vector at a time

void DequantRow(DType t, const void* row, float* out, int64_t n);

// Every other format (and the raw integer types): expand 256 elements at a
// time (DequantRow: vectors for the k-quants, else the scalar dequantizer,
// bit-identical to ggml's) and dot the floats. 256 is a whole number of
// blocks of every format.
// Out of line so the compiler does not reason about tmp's bounds in DotF32's
// scalar tail (a false -Waggressive-loop-optimizations warning).
HWY_NOINLINE float DotBuffer(const float* a, const float* b, int64_t n) { return DotF32(a, b, n); }

float DotExpanded(DType t, const uint8_t* row, const float* x, int64_t n) {
  constexpr int64_t kChunk = 256;
  HWY_ALIGN float tmp[kChunk];
  const int64_t chunk_bytes = row_bytes(t, kChunk);
  float total = 0;
  int64_t i = 0;
  for (; i + kChunk <= n; i += kChunk, row += chunk_bytes) {
    DequantRow(t, row, tmp, kChunk);
    total += DotBuffer(tmp, x + i, kChunk);
  }
  if (i < n) {
    bonfire::dequantize_row(t, row, tmp, n - i);
    total += DotBuffer(tmp, x + i, n - i);
  }
  return total;
}

// Rows to f32 for the GEMM tiles (prefill): widened a vector at a time for
// the formats models ship in; the scalar dequantizer for the rest.
void DequantRow(DType t, const void* row, float* out, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t N = hn::Lanes(d);
  if (n % 256 == 0 && DequantKQuant(d, t, row, out, n)) return;
  if (t == DType::F16 || t == DType::BF16) {
    int64_t i = 0;
    if (t == DType::F16) {
      const hn::Rebind<hwy::float16_t, decltype(d)> dh;
      const auto* w = static_cast<const hwy::float16_t*>(row);
      for (; i + N <= n; i += N) hn::StoreU(hn::PromoteTo(d, hn::LoadU(dh, w + i)), d, out + i);
    } else {
      const hn::Rebind<hwy::bfloat16_t, decltype(d)> dh;
      const auto* w = static_cast<const hwy::bfloat16_t*>(row);
      for (; i + N <= n; i += N) hn::StoreU(hn::PromoteTo(d, hn::LoadU(dh, w + i)), d, out + i);
    }
    if (i < n) bonfire::dequantize_row(t, static_cast<const uint16_t*>(row) + i, out + i, n - i);
    return;
  }
  if (t == DType::Q8_0 && N <= 32) {
    const hn::RebindToSigned<decltype(d)> di;
    const hn::Rebind<int8_t, decltype(d)> d8;
    const auto* b = static_cast<const BlockQ8_0*>(row);
    for (int64_t blk = 0; blk < n / 32; ++blk) {
      const auto scale = hn::Set(d, HalfToFloat(&b[blk].d));
      for (int64_t j = 0; j < 32; j += N)
        hn::StoreU(hn::Mul(hn::ConvertTo(d, hn::PromoteTo(di, hn::LoadU(d8, b[blk].qs + j))), scale), d,
                   out + blk * 32 + j);
    }
    return;
  }
  bonfire::dequantize_row(t, row, out, n);
}

float DotRow(DType t, const void* row, const float* x, int64_t n) {
  switch (t) {
    case DType::F32: return DotF32(static_cast<const float*>(row), x, n);
    case DType::F16: return DotHalf(static_cast<const hwy::float16_t*>(row), x, n);
    case DType::BF16: return DotHalf(static_cast<const hwy::bfloat16_t*>(row), x, n);
    case DType::Q8_0: return DotQ8_0(static_cast<const BlockQ8_0*>(row), x, n);
    case DType::Q4_0: return DotQ4_0(static_cast<const BlockQ4_0*>(row), x, n);
    default: return DotExpanded(t, static_cast<const uint8_t*>(row), x, n);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace bonfire::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace bonfire::simd {
HWY_EXPORT(DotF32);
HWY_EXPORT(AxpyF32);
HWY_EXPORT(ScaleF32);
HWY_EXPORT(SumSquaresF64);
HWY_EXPORT(BinaryF32);
HWY_EXPORT(ScaleGainF32);
HWY_EXPORT(RotateHalves);
HWY_EXPORT(DotRows);
HWY_EXPORT(WeightedRows);
HWY_EXPORT(ExpShifted);
HWY_EXPORT(ScaleMax);
HWY_EXPORT(SoftmaxWeightsF64);
HWY_EXPORT(Sigmoid);
HWY_EXPORT(DotRow);
HWY_EXPORT(DequantRow);

float dot_f32(const float* a, const float* b, int64_t n) { return HWY_DYNAMIC_DISPATCH(DotF32)(a, b, n); }
void axpy_f32(float a, const float* x, float* y, int64_t n) { HWY_DYNAMIC_DISPATCH(AxpyF32)(a, x, y, n); }
void scale_f32(float a, float* y, int64_t n) { HWY_DYNAMIC_DISPATCH(ScaleF32)(a, y, n); }
void binary_f32(Binary op, const float* a, const float* b, bool b_scalar, float* o, int64_t n) {
  HWY_DYNAMIC_DISPATCH(BinaryF32)(static_cast<int>(op), a, b, b_scalar, o, n);
}
void softmax_weights_f64(const float* v, int64_t n, float mx, double temperature, double* w) {
  HWY_DYNAMIC_DISPATCH(SoftmaxWeightsF64)(v, n, mx, temperature, w);
}
void scale_gain_f32(const float* x, float s, const float* g, float offset, float* o, int64_t n) {
  HWY_DYNAMIC_DISPATCH(ScaleGainF32)(x, s, g, offset, o, n);
}
void rotate_halves(const float* x, const float* cs, const float* sn, int64_t half, float* o) {
  HWY_DYNAMIC_DISPATCH(RotateHalves)(x, cs, sn, half, o);
}
double sum_squares_f64(const float* x, int64_t n) { return HWY_DYNAMIC_DISPATCH(SumSquaresF64)(x, n); }
void dot_rows(const float* q, const float* k, int64_t stride, int64_t n, int64_t d, float* out) {
  HWY_DYNAMIC_DISPATCH(DotRows)(q, k, stride, n, d, out);
}
void weighted_rows(const float* w, int64_t w_stride, int64_t heads, const float* v, int64_t stride, int64_t n,
                   int64_t d, float* acc, int64_t acc_stride) {
  HWY_DYNAMIC_DISPATCH(WeightedRows)(w, w_stride, heads, v, stride, n, d, acc, acc_stride);
}
double exp_shifted(float* x, int64_t n, float shift) { return HWY_DYNAMIC_DISPATCH(ExpShifted)(x, n, shift); }
void sigmoid_f32(const float* x, float* out, int64_t n, float alpha, bool times_x) {
  HWY_DYNAMIC_DISPATCH(Sigmoid)(x, out, n, alpha, times_x);
}
float scale_max(float* x, int64_t n, float scale, bool* nan) { return HWY_DYNAMIC_DISPATCH(ScaleMax)(x, n, scale, nan); }
void dequantize_row(DType t, const void* row, float* out, int64_t n) { HWY_DYNAMIC_DISPATCH(DequantRow)(t, row, out, n); }
float dot_row(DType t, const void* row, const float* x, int64_t n) {
  return HWY_DYNAMIC_DISPATCH(DotRow)(t, row, x, n);
}
#ifdef __EMSCRIPTEN__
// The browser worker is built for one target (WASM SIMD128, HWY_COMPILE_ONLY_STATIC):
// a browser has nothing to choose between at run time.
bool limit_simd_target(const std::string& name, std::string* why) {
  if (name == simd_target()) return true;
  if (why) *why = "the browser worker runs " + simd_target() + " only";
  return false;
}

std::string simd_target() {
  std::string n = hwy::TargetName(HWY_STATIC_TARGET);
  for (auto& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return n;
}
#else
bool limit_simd_target(const std::string& name, std::string* why) {
  // Highway's x86 targets: a lower bit is a better target.
  static const std::pair<const char*, int64_t> kTargets[] = {
      {"avx3", HWY_AVX3}, {"avx2", HWY_AVX2}, {"sse4", HWY_SSE4}, {"ssse3", HWY_SSSE3},
      {"emu128", HWY_EMU128}};
  for (const auto& [n, bit] : kTargets)
    if (name == n) {
      hwy::DisableTargets(bit - 1);  // every better target
      // Highway 1.0.3's DisableTargets leaves dispatch tables that were
      // already resolved on the better target; this resets every table so
      // each kernel's next call chooses again among the remaining targets.
      hwy::SetSupportedTargetsForTest(hwy::SupportedTargets());
      if (simd_target() != name && (hwy::SupportedTargets() & bit) == 0) {
        if (why) *why = "this CPU or build cannot run " + name + "; it runs " + simd_target();
        return false;
      }
      return true;
    }
  if (why) *why = "unknown SIMD target \"" + name.substr(0, 16) + "\" (avx3, avx2, sse4, ssse3, emu128)";
  return false;
}

std::string simd_target() {
  std::string n = hwy::TargetName(static_cast<int64_t>(1) << hwy::Num0BitsBelowLS1Bit_Nonzero64(
                                      static_cast<uint64_t>(hwy::SupportedTargets())));
  for (auto& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return n;
}
#endif

}  // namespace bonfire::simd
#endif
