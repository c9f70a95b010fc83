// The QMoE inner loops, compiled by Highway once per instruction-set target;
// the best one the CPU supports is picked on the first call.
//
// Activations stay f32: ORT 1.30 dequantizes the expert weights to f32 and
// multiplies in f32 (MLAS SGEMM), so an integer dot product would need the
// activations quantized and could not give ORT's numbers. The weights widen
// to f32 lanes a vector at a time instead: q - midpoint is exact in f32, a
// block's sum is scaled once, and the activations are read as stored.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/qmoe/simd.cpp"
#include <hwy/foreach_target.h>  // must come before highway.h
#include <hwy/highway.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/qmoe/qmoe.h"
#include "ops/row_tiles.h"  // for_row_tiles: the tile kernels' last rows

// A lambda the compiler must inline (its arrays of vectors then stay in
// registers).
#define HWY_INLINE_LAMBDA __attribute__((always_inline))

HWY_BEFORE_NAMESPACE();
namespace bonfire::kernels::qmoe {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET == HWY_AVX2
#include "kernels/qmoe/gemv_avx2-inl.h"  // 4-bit rows a 32-bit word at a time
#else
bool WordLayout(const QMatrix&) { return false; }
void PrepareWords(const QMatrix&, const float*, float*) {}
void QGemvWords(const QMatrix&, int64_t, int64_t, const float*, int64_t, int, float*, int64_t) {}
#endif

int64_t PreparedXSize(const QMatrix& w) { return WordLayout(w) ? w.cols + w.scale_blocks : w.cols; }

void PrepareX(const QMatrix& w, const float* x, float* out) {
  const int64_t n = w.cols;
  if (WordLayout(w)) return PrepareWords(w, x, out);
  if (w.bits == 8) {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i];
    return;
  }
  const int64_t half = n / 2;
  for (int64_t i = 0; i < half; ++i) {
    out[i] = x[2 * i];
    out[half + i] = x[2 * i + 1];
  }
}

// Dots of rows [r0, r0 + nr) with NX prepared activation vectors. A block's
// bytes are a whole number of vectors (the caller picks D so), except in a
// column-wise row, whose tail runs scalar.
template <int NX, class D>
void DotRows(D d, const QMatrix& w, int64_t r0, int64_t nr, const float* xs, int64_t ldx, float* out,
             int64_t ldo) {
  using V = hn::Vec<D>;
  const hn::RebindToSigned<D> di;
  const hn::RebindToUnsigned<D> du;
  const hn::Rebind<uint8_t, D> d8;
  const int64_t N = hn::Lanes(d);
  const bool four = w.bits == 4;
  const int64_t row_vals = four ? w.cols / 2 : w.cols;  // bytes a row
  const int64_t bb = row_vals / w.scale_blocks;          // bytes a block
  const int64_t odd = four ? row_vals : 0;               // where x's odd columns start
  const auto mask = hn::Set(di, 15), mid = hn::Set(di, w.midpoint);
  const int midpoint = w.midpoint;

  for (int64_t i = 0; i < nr; ++i) {
    const uint8_t* row = w.data + (r0 + i) * w.row_bytes;
    const float* sc = w.scales + (r0 + i) * w.scale_blocks;
    float tail[NX];
    HWY_UNROLL(4)
    for (int m = 0; m < NX; ++m) tail[m] = 0.0f;
    // Block b's scaled sum goes into acc[m]: two sets of sums for even and
    // odd blocks, as a block of 32 4-bit columns is a single vector step and
    // one chain would wait on each scale FMA's latency.
    const auto block = [&](int64_t b, V* acc) HWY_INLINE_LAMBDA {
      const int64_t base = b * bb;
      const uint8_t* p = row + base;
      V s0[NX], s1[NX];
      HWY_UNROLL(4)
      for (int m = 0; m < NX; ++m) s0[m] = hn::Zero(d), s1[m] = hn::Zero(d);
      int64_t j = 0;
      if (four) {
        for (; j + N <= bb; j += N) {
          const auto q = hn::BitCast(di, hn::PromoteTo(du, hn::LoadU(d8, p + j)));
          const V lo = hn::ConvertTo(d, hn::Sub(hn::And(q, mask), mid));
          const V hi = hn::ConvertTo(d, hn::Sub(hn::ShiftRight<4>(q), mid));
          HWY_UNROLL(4)
          for (int m = 0; m < NX; ++m) {
            const float* x = xs + m * ldx + base + j;
            s0[m] = hn::MulAdd(lo, hn::LoadU(d, x), s0[m]);
            s1[m] = hn::MulAdd(hi, hn::LoadU(d, x + odd), s1[m]);
          }
        }
      } else {
        // Two vectors a step into separate sums, for the same reason.
        for (; j + 2 * N <= bb; j += 2 * N) {
          const V w0 = hn::ConvertTo(d, hn::Sub(hn::BitCast(di, hn::PromoteTo(du, hn::LoadU(d8, p + j))), mid));
          const V w1 = hn::ConvertTo(d, hn::Sub(hn::BitCast(di, hn::PromoteTo(du, hn::LoadU(d8, p + j + N))), mid));
          HWY_UNROLL(4)
          for (int m = 0; m < NX; ++m) {
            const float* x = xs + m * ldx + base + j;
            s0[m] = hn::MulAdd(w0, hn::LoadU(d, x), s0[m]);
            s1[m] = hn::MulAdd(w1, hn::LoadU(d, x + N), s1[m]);
          }
        }
        for (; j + N <= bb; j += N) {
          const V w0 = hn::ConvertTo(d, hn::Sub(hn::BitCast(di, hn::PromoteTo(du, hn::LoadU(d8, p + j))), mid));
          HWY_UNROLL(4)
          for (int m = 0; m < NX; ++m) s0[m] = hn::MulAdd(w0, hn::LoadU(d, xs + m * ldx + base + j), s0[m]);
        }
      }
      const V scale = hn::Set(d, sc[b]);
      HWY_UNROLL(4)
      for (int m = 0; m < NX; ++m) acc[m] = hn::MulAdd(hn::Add(s0[m], s1[m]), scale, acc[m]);
      if (j < bb) {  // column-wise rows only
        for (int m = 0; m < NX; ++m) {
          const float* x = xs + m * ldx + base;
          float t = 0.0f;
          for (int64_t k = j; k < bb; ++k) {
            if (four)
              t += (float)((p[k] & 15) - midpoint) * x[k] + (float)((p[k] >> 4) - midpoint) * x[k + odd];
            else
              t += (float)(p[k] - midpoint) * x[k];
          }
          tail[m] += sc[b] * t;
        }
      }
    };
    V even[NX], odd_acc[NX];
    HWY_UNROLL(4)
    for (int m = 0; m < NX; ++m) even[m] = hn::Zero(d), odd_acc[m] = hn::Zero(d);
    int64_t b = 0;
    for (; b + 2 <= w.scale_blocks; b += 2) {
      block(b, even);
      block(b + 1, odd_acc);
    }
    if (b < w.scale_blocks) block(b, even);
    HWY_UNROLL(4)
    for (int m = 0; m < NX; ++m)
      out[m * ldo + i] = hn::GetLane(hn::SumOfLanes(d, hn::Add(even[m], odd_acc[m]))) + tail[m];
  }
}

// Block-wise rows whose blocks are exactly VPB vectors (the common case:
// 4-bit blocks of 32 are one AVX-512 vector): straight-line code, even and
// odd steps into separate sums, each block's sum scaled into one of two
// accumulators that alternate, so no chain waits on one FMA after another.
template <int NX, int VPB, bool FOUR, class D>
void DotRowsBlocked(D d, const QMatrix& w, int64_t r0, int64_t nr, const float* xs, int64_t ldx, float* out,
                    int64_t ldo) {
  using V = hn::Vec<D>;
  const hn::RebindToSigned<D> di;
  const hn::RebindToUnsigned<D> du;
  const hn::Rebind<uint8_t, D> d8;
  const int64_t N = hn::Lanes(d);
  const int64_t row_vals = FOUR ? w.cols / 2 : w.cols;
  const int64_t blocks = w.scale_blocks, bb = row_vals / blocks;  // bb == VPB * N
  const int64_t odd = FOUR ? row_vals : 0;
  const auto mask = hn::Set(di, 15), mid = hn::Set(di, w.midpoint);
  // On AVX-512, a nibble's value as a float, (float)(q - midpoint), looked
  // up in one 16-lane permute (which reads only an index's low 4 bits)
  // instead of a mask, a subtraction and a conversion: the same values in
  // fewer instructions (docs/PERFORMANCE.md, session 24, for what it gave).
  constexpr bool kLookup = FOUR && HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3 && HWY_MAX_BYTES == 64;
  HWY_ALIGN float nibble_values[16];
  for (int k = 0; k < 16; ++k) nibble_values[k] = static_cast<float>(k - w.midpoint);
  [[maybe_unused]] const V table = hn::LoadU(d, nibble_values);
  for (int64_t i = 0; i < nr; ++i) {
    const uint8_t* row = w.data + (r0 + i) * w.row_bytes;
    const float* sc = w.scales + (r0 + i) * blocks;
    const auto block = [&](int64_t b, V* acc) HWY_INLINE_LAMBDA {
      const int64_t base = b * bb;
      V s0[NX], s1[NX];
      HWY_UNROLL(8)
      for (int v = 0; v < VPB; ++v) {
        const int64_t j = base + v * N;
        const auto q = hn::BitCast(di, hn::PromoteTo(du, hn::LoadU(d8, row + j)));
        if constexpr (FOUR) {
          V lo, hi;
          if constexpr (kLookup && sizeof(V) == 64) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
            lo = V{_mm512_permutexvar_ps(q.raw, table.raw)};
            hi = V{_mm512_permutexvar_ps(_mm512_srli_epi32(q.raw, 4), table.raw)};
#endif
          } else {
            lo = hn::ConvertTo(d, hn::Sub(hn::And(q, mask), mid));
            hi = hn::ConvertTo(d, hn::Sub(hn::ShiftRight<4>(q), mid));
          }
          HWY_UNROLL(4)
          for (int m = 0; m < NX; ++m) {
            const float* x = xs + m * ldx + j;
            if (v == 0) s0[m] = hn::Mul(lo, hn::LoadU(d, x)), s1[m] = hn::Mul(hi, hn::LoadU(d, x + odd));
            else s0[m] = hn::MulAdd(lo, hn::LoadU(d, x), s0[m]), s1[m] = hn::MulAdd(hi, hn::LoadU(d, x + odd), s1[m]);
          }
        } else {
          const V wv = hn::ConvertTo(d, hn::Sub(q, mid));
          HWY_UNROLL(4)
          for (int m = 0; m < NX; ++m) {
            const V x = hn::LoadU(d, xs + m * ldx + j);
            if (v == 0) s0[m] = hn::Mul(wv, x);
            else if (v == 1) s1[m] = hn::Mul(wv, x);
            else if (v % 2 == 0) s0[m] = hn::MulAdd(wv, x, s0[m]);
            else s1[m] = hn::MulAdd(wv, x, s1[m]);
          }
        }
      }
      const V scale = hn::Set(d, sc[b]);
      HWY_UNROLL(4)
      for (int m = 0; m < NX; ++m) {
        const V sum = (FOUR || VPB > 1) ? hn::Add(s0[m], s1[m]) : s0[m];
        acc[m] = hn::MulAdd(sum, scale, acc[m]);
      }
    };
    V even[NX], odd_acc[NX];
    HWY_UNROLL(4)
    for (int m = 0; m < NX; ++m) even[m] = hn::Zero(d), odd_acc[m] = hn::Zero(d);
    int64_t b = 0;
    for (; b + 2 <= blocks; b += 2) {
      block(b, even);
      block(b + 1, odd_acc);
    }
    if (b < blocks) block(b, even);
    HWY_UNROLL(4)
    for (int m = 0; m < NX; ++m) out[m * ldo + i] = hn::GetLane(hn::SumOfLanes(d, hn::Add(even[m], odd_acc[m])));
  }
}

template <int VPB, bool FOUR, class D>
void DotRowsBlockedN(D d, const QMatrix& w, int64_t r0, int64_t nr, const float* xs, int64_t ldx, int nx, float* out,
                     int64_t ldo) {
  switch (nx) {
    case 1: return DotRowsBlocked<1, VPB, FOUR>(d, w, r0, nr, xs, ldx, out, ldo);
    case 2: return DotRowsBlocked<2, VPB, FOUR>(d, w, r0, nr, xs, ldx, out, ldo);
    case 3: return DotRowsBlocked<3, VPB, FOUR>(d, w, r0, nr, xs, ldx, out, ldo);
    default: return DotRowsBlocked<4, VPB, FOUR>(d, w, r0, nr, xs, ldx, out, ldo);
  }
}

// The blocked kernel when a block is 1, 2, 4 or 8 vectors of D; false if not.
template <class D>
bool TryBlocked(D d, const QMatrix& w, int64_t r0, int64_t nr, const float* xs, int64_t ldx, int nx, float* out,
                int64_t ldo) {
  const int64_t bb = (w.bits == 4 ? w.cols / 2 : w.cols) / w.scale_blocks, N = hn::Lanes(d);
  if (w.scale_blocks < 2 || bb % N != 0) return false;
  const bool four = w.bits == 4;
  switch (bb / N) {
    case 1: four ? DotRowsBlockedN<1, true>(d, w, r0, nr, xs, ldx, nx, out, ldo)
                 : DotRowsBlockedN<1, false>(d, w, r0, nr, xs, ldx, nx, out, ldo);
      return true;
    case 2: four ? DotRowsBlockedN<2, true>(d, w, r0, nr, xs, ldx, nx, out, ldo)
                 : DotRowsBlockedN<2, false>(d, w, r0, nr, xs, ldx, nx, out, ldo);
      return true;
    case 4: four ? DotRowsBlockedN<4, true>(d, w, r0, nr, xs, ldx, nx, out, ldo)
                 : DotRowsBlockedN<4, false>(d, w, r0, nr, xs, ldx, nx, out, ldo);
      return true;
    case 8: four ? DotRowsBlockedN<8, true>(d, w, r0, nr, xs, ldx, nx, out, ldo)
                 : DotRowsBlockedN<8, false>(d, w, r0, nr, xs, ldx, nx, out, ldo);
      return true;
    default: return false;
  }
}

template <class D>
void DotRowsN(D d, const QMatrix& w, int64_t r0, int64_t nr, const float* xs, int64_t ldx, int nx, float* out,
              int64_t ldo) {
  switch (nx) {
    case 1: return DotRows<1>(d, w, r0, nr, xs, ldx, out, ldo);
    case 2: return DotRows<2>(d, w, r0, nr, xs, ldx, out, ldo);
    case 3: return DotRows<3>(d, w, r0, nr, xs, ldx, out, ldo);
    default: return DotRows<4>(d, w, r0, nr, xs, ldx, out, ldo);
  }
}

void QGemv(const QMatrix& w, int64_t r0, int64_t nr, const float* xs, int64_t ldx, int nx, float* out,
           int64_t ldo) {
  if (WordLayout(w)) return QGemvWords(w, r0, nr, xs, ldx, nx, out, ldo);
  const int64_t bb = (w.bits == 4 ? w.cols / 2 : w.cols) / w.scale_blocks;
  const hn::ScalableTag<float> d;
  // Block-wise rows need whole vectors in a block: 8 bytes for 4-bit blocks
  // of 16, less than an AVX-512 vector.
  const hn::CappedTag<float, 8> d8;
  if (TryBlocked(d, w, r0, nr, xs, ldx, nx, out, ldo) || TryBlocked(d8, w, r0, nr, xs, ldx, nx, out, ldo)) return;
  if (w.scale_blocks == 1 || bb >= (int64_t)hn::Lanes(d)) return DotRowsN(d, w, r0, nr, xs, ldx, nx, out, ldo);
  if (bb >= (int64_t)hn::Lanes(d8)) return DotRowsN(d8, w, r0, nr, xs, ldx, nx, out, ldo);
  const hn::CappedTag<float, 4> d4;
  DotRowsN(d4, w, r0, nr, xs, ldx, nx, out, ldo);
}

// Rows to f32 exactly as ORT dequantizes: (float)(q - midpoint) * scale.
void DequantRows(const QMatrix& w, int64_t r0, int64_t nr, float* out, int64_t ldo) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const hn::RebindToUnsigned<decltype(d)> du;
  const hn::Rebind<uint8_t, decltype(d)> d8;
  const hn::Rebind<uint16_t, decltype(d)> d16;
  const hn::Repartition<uint8_t, decltype(d16)> d8x2;
  const int64_t N = hn::Lanes(d);
  const int64_t cols = w.cols, bc = cols / w.scale_blocks;  // columns a block
  const auto mid = hn::Set(di, w.midpoint);
  std::vector<uint8_t> nib(w.bits == 4 ? cols + 2 * N : 0);
  for (int64_t i = 0; i < nr; ++i) {
    const uint8_t* row = w.data + (r0 + i) * w.row_bytes;
    const float* sc = w.scales + (r0 + i) * w.scale_blocks;
    float* o = out + i * ldo;
    const uint8_t* q8 = row;
    if (w.bits == 4) {
      // Bytes to one nibble a byte in column order: in a u16 lane the low
      // nibble goes to the low byte and the high nibble to the high byte.
      const int64_t half = cols / 2;
      int64_t j = 0;
#if HWY_TARGET != HWY_SCALAR  // one lane cannot be split in two
      for (; j + N <= half; j += N) {
        const auto v = hn::PromoteTo(d16, hn::LoadU(d8, row + j));
        const auto n = hn::Or(hn::And(v, hn::Set(d16, 15)), hn::ShiftLeft<8>(hn::ShiftRight<4>(v)));
        hn::StoreU(hn::BitCast(d8x2, n), d8x2, nib.data() + 2 * j);
      }
#else
      (void)d8x2;
#endif
      for (; j < half; ++j) {
        nib[2 * j] = row[j] & 15;
        nib[2 * j + 1] = row[j] >> 4;
      }
      q8 = nib.data();
    }
    for (int64_t b = 0; b < w.scale_blocks; ++b) {
      const float s = sc[b];
      const auto scale = hn::Set(d, s);
      int64_t c = b * bc;
      const int64_t end = c + bc;
      for (; c + N <= end; c += N) {
        const auto q = hn::BitCast(di, hn::PromoteTo(du, hn::LoadU(d8, q8 + c)));
        hn::StoreU(hn::Mul(hn::ConvertTo(d, hn::Sub(q, mid)), scale), d, o + c);
      }
      for (; c < end; ++c) o[c] = (float)((int)q8[c] - w.midpoint) * s;
    }
  }
}

// C[m * ldc + r] = A_m · B_r for an MR x NR block: vectors run along K, one
// accumulator per (m, r), reduced once at the end. 4 x 4 keeps 16 sums and
// 8 operands in AVX-512's 32 registers; AVX2 has 16, so 2 x 4 there.
template <int MR, int NR, class D>
HWY_INLINE void GemmBlock(D d, const float* A, int64_t lda, const float* B, int64_t ldb, int64_t K, float* C,
                          int64_t ldc) {
  using V = hn::Vec<D>;
  const int64_t N = hn::Lanes(d);
  V acc[MR][NR];
  HWY_UNROLL(4)
  for (int m = 0; m < MR; ++m)
    HWY_UNROLL(4)
    for (int r = 0; r < NR; ++r) acc[m][r] = hn::Zero(d);
  int64_t k = 0;
  for (; k + N <= K; k += N) {
    V b[NR];
    HWY_UNROLL(4)
    for (int r = 0; r < NR; ++r) b[r] = hn::LoadU(d, B + r * ldb + k);
    HWY_UNROLL(4)
    for (int m = 0; m < MR; ++m) {
      const V a = hn::LoadU(d, A + m * lda + k);
      HWY_UNROLL(4)
      for (int r = 0; r < NR; ++r) acc[m][r] = hn::MulAdd(a, b[r], acc[m][r]);
    }
  }
  HWY_UNROLL(4)
  for (int m = 0; m < MR; ++m)
    HWY_UNROLL(4)
    for (int r = 0; r < NR; ++r) {
      float t = 0.0f;
      for (int64_t j = k; j < K; ++j) t += A[m * lda + j] * B[r * ldb + j];
      C[m * ldc + r] = hn::GetLane(hn::SumOfLanes(d, acc[m][r])) + t;
    }
}

#if HWY_TARGET <= HWY_AVX3
constexpr int kGemmMR = 4;
#else
constexpr int kGemmMR = 2;
#endif
constexpr int kGemmNR = 4;

template <int MR, class D>
HWY_INLINE void GemmRowsN(D d, int nr, const float* A, int64_t lda, const float* B, int64_t ldb, int64_t K,
                          float* C, int64_t ldc) {
  switch (nr) {
    case 4: return GemmBlock<MR, 4>(d, A, lda, B, ldb, K, C, ldc);
    case 3: return GemmBlock<MR, 3>(d, A, lda, B, ldb, K, C, ldc);
    case 2: return GemmBlock<MR, 2>(d, A, lda, B, ldb, K, C, ldc);
    default: return GemmBlock<MR, 1>(d, A, lda, B, ldb, K, C, ldc);
  }
}

// C [M, R] = A [M, K] · B [R, K]^T, all f32, row strides lda, ldb, ldc. Each
// group of NR rows of B is used for every group of MR rows of A while it is
// in cache.
void GemmNT(const float* A, int64_t M, int64_t lda, const float* B, int64_t R, int64_t ldb, int64_t K, float* C,
            int64_t ldc) {
  const hn::ScalableTag<float> d;
  for (int64_t r0 = 0; r0 < R; r0 += kGemmNR) {
    const int nr = (int)std::min<int64_t>(kGemmNR, R - r0);
    int64_t m0 = 0;
    for (; m0 + kGemmMR <= M; m0 += kGemmMR)
      GemmRowsN<kGemmMR>(d, nr, A + m0 * lda, lda, B + r0 * ldb, ldb, K, C + m0 * ldc + r0, ldc);
    for (; m0 < M; ++m0) GemmRowsN<1>(d, nr, A + m0 * lda, lda, B + r0 * ldb, ldb, K, C + m0 * ldc + r0, ldc);
  }
}

// C [M, R] = A [M, K] . W_e [r0, r0 + R)^T, the grouped form's GEMM over a
// tile of one expert's rows. On x86 the tile is dequantized into k-major
// order so that a vector lane is an output column, and multiplied by an
// outer-product kernel (PackedTileGemm, one file per target); elsewhere, and
// for tiles that kernel does not take, the tile is dequantized row by row
// and multiplied in dot form (GemmNT).
#if HWY_TARGET <= HWY_AVX3
#include "kernels/qmoe/tile_gemm_avx3-inl.h"
#elif HWY_TARGET == HWY_AVX2
#include "kernels/qmoe/tile_gemm_avx2-inl.h"
#else
bool PackedTileGemm(const QMatrix&, int64_t, int64_t, const float*, int64_t, int64_t, float*, int64_t) {
  return false;
}
#endif

void ExpertTileGemm(const QMatrix& w, int64_t r0, int64_t R, const float* A, int64_t M, int64_t lda, float* C,
                    int64_t ldc) {
  if (PackedTileGemm(w, r0, R, A, M, lda, C, ldc)) return;
  // Rows a cache line more than K apart: rows 4 KiB apart alias in the
  // load-store checks.
  const int64_t K = w.cols;
  static thread_local std::vector<float> tile;
  const int64_t ldt = K + 16;
  tile.resize(R * ldt);
  DequantRows(w, r0, R, tile.data(), ldt);
  GemmNT(A, M, lda, tile.data(), R, ldt, K, C, ldc);
}

}  // namespace HWY_NAMESPACE
}  // namespace bonfire::kernels::qmoe
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace bonfire::kernels::qmoe {
HWY_EXPORT(PreparedXSize);
HWY_EXPORT(PrepareX);
HWY_EXPORT(QGemv);
HWY_EXPORT(ExpertTileGemm);

int64_t prepared_x_size(const QMatrix& w) { return HWY_DYNAMIC_DISPATCH(PreparedXSize)(w); }
void prepare_x(const QMatrix& w, const float* x, float* out) { HWY_DYNAMIC_DISPATCH(PrepareX)(w, x, out); }
void qgemv(const QMatrix& w, int64_t r0, int64_t nr, const float* xs, int64_t ldx, int nx, float* out,
           int64_t ldo) {
  HWY_DYNAMIC_DISPATCH(QGemv)(w, r0, nr, xs, ldx, nx, out, ldo);
}
void expert_tile_gemm(const QMatrix& w, int64_t r0, int64_t r, const float* a, int64_t m, int64_t lda, float* c,
                      int64_t ldc) {
  HWY_DYNAMIC_DISPATCH(ExpertTileGemm)(w, r0, r, a, m, lda, c, ldc);
}
}  // namespace bonfire::kernels::qmoe
#endif
