// The tiled int8 kernel of ops/int8_gemm.cpp for CPUs with AVX2 but no
// AVX-512 VNNI (Zen 2/3, Haswell to Alder Lake, and AVX-512 CPUs without
// VNNI): q8_0 and q4_0 panels here, the k-quants' in
// int8_gemm_kquants_avx2-inl.h. Highway compiles int8_gemm.cpp once per
// target, and that file includes this one inside the AVX2 and AVX3 targets'
// namespaces; it defines the same four functions the VNNI section does.
//
// The panels are the VNNI kernel's, byte for byte (int8_gemm.h): a block's
// register j there is 64 bytes, 4 bytes of each of 16 rows, so its two
// 32-byte halves are 8 rows each here, one row per 32-bit lane. Without
// vpdpbusd, a 4-byte group's products are summed with maddubs (unsigned ×
// signed bytes into saturating 16-bit pair sums) and madd (pairs into 32 bits):
// - q8_0 keeps w + 128, which maddubs could saturate on (2 × 255 × 127), so
//   the weight byte is made signed again and its sign moved onto x (llama.cpp's
//   AVX2 dot does the same): |w| × ±x, at most 2 × 128 × 127 per pair.
// - q4_0's raw nibbles (w + 8, at most 15) sum a whole block's 8 maddubs in
//   16 bits (8 × 2 × 15 × 128 < 32768) before one madd, and take 8 × the
//   block's activation sum off at the end.
// The integer sums are exact, and each block meets its scales as the
// promise says, so every output is the VNNI kernel's and the reference's to
// the bit, on any of these CPUs.

namespace {  // per target, as in the VNNI section

constexpr int kLanes = 16;        // rows per panel (the layout's)
constexpr int kHalf = 8;          // rows per 256-bit register here
constexpr int kPanelBlock = 512;  // bytes of one q8_0 panel block
constexpr int kNibbleBlock = 256; // the same for q4_0

HWY_INLINE __m256i Broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  return _mm256_set1_epi32(v);
}

// GCC regroups a chain of integer adds into a tree, which computes every
// product of a block first and spills most of them to the stack (32 stores
// a block at 4 rows); an empty asm on the running sum keeps the chain.
HWY_INLINE void KeepInRegister(__m256i& v) { asm("" : "+x"(v)); }

// Block `block` (its bytes and its 16 f16 scales) of one panel, for the
// halves [0, H) (H = 2: both, rows 0..15; H = 1: the half `half0` only),
// against MR activation rows (row m's block at x[m * stride], its sum at
// sum[m * sum_stride]); acc[h][m] gains the block's fma.
template <int H, int MR, bool kNibbles>
HWY_INLINE void AccumulateBlock(const uint8_t* block, const uint16_t* scales, int half0, const ActBlock* x,
                                int64_t stride, const int32_t* sum, int64_t sum_stride, __m256 (*acc)[MR]) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i dot[H][MR];
#pragma GCC unroll 2
  for (int h = 0; h < H; ++h)
#pragma GCC unroll 4
    for (int m = 0; m < MR; ++m) dot[h][m] = _mm256_setzero_si256();
  if constexpr (kNibbles) {
    const __m256i low = _mm256_set1_epi8(0x0f);
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      __m256i lo[H], hi[H];
#pragma GCC unroll 2
      for (int h = 0; h < H; ++h) {
        const __m256i r = _mm256_load_si256(reinterpret_cast<const __m256i*>(block + 64 * j + 32 * (half0 + h)));
        lo[h] = _mm256_and_si256(r, low);
        hi[h] = _mm256_and_si256(_mm256_srli_epi16(r, 4), low);
      }
#pragma GCC unroll 4
      for (int m = 0; m < MR; ++m) {
        const __m256i xl = Broadcast4(x[m * stride].qs + 4 * j), xh = Broadcast4(x[m * stride].qs + 16 + 4 * j);
#pragma GCC unroll 2
        for (int h = 0; h < H; ++h) {  // 16-bit sums of the whole block: see the top of the file
          dot[h][m] = _mm256_add_epi16(
              dot[h][m], _mm256_add_epi16(_mm256_maddubs_epi16(lo[h], xl), _mm256_maddubs_epi16(hi[h], xh)));
          KeepInRegister(dot[h][m]);
        }
      }
    }
#pragma GCC unroll 2
    for (int h = 0; h < H; ++h)
#pragma GCC unroll 4
      for (int m = 0; m < MR; ++m)
        dot[h][m] = _mm256_sub_epi32(_mm256_madd_epi16(dot[h][m], ones), _mm256_set1_epi32(sum[m * sum_stride] >> 4));
  } else {
    const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      __m256i w[H], aw[H];
#pragma GCC unroll 2
      for (int h = 0; h < H; ++h) {
        w[h] = _mm256_xor_si256(
            _mm256_load_si256(reinterpret_cast<const __m256i*>(block + 64 * j + 32 * (half0 + h))), flip);
        aw[h] = _mm256_abs_epi8(w[h]);
      }
#pragma GCC unroll 4
      for (int m = 0; m < MR; ++m) {
        const __m256i xb = Broadcast4(x[m * stride].qs + 4 * j);
#pragma GCC unroll 2
        for (int h = 0; h < H; ++h) {
          dot[h][m] = _mm256_add_epi32(
              dot[h][m], _mm256_madd_epi16(_mm256_maddubs_epi16(aw[h], _mm256_sign_epi8(xb, w[h])), ones));
          KeepInRegister(dot[h][m]);
        }
      }
    }
  }
#pragma GCC unroll 2
  for (int h = 0; h < H; ++h) {
    const __m256 dw = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(scales + kHalf * (half0 + h))));
#pragma GCC unroll 4
    for (int m = 0; m < MR; ++m)
      acc[h][m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[h][m]), _mm256_mul_ps(dw, _mm256_set1_ps(x[m * stride].d)),
                                  acc[h][m]);
  }
}

// Sums of MR activation rows over H halves of a panel, all zero.
template <int H, int MR>
HWY_INLINE void ZeroSums(__m256 (*sums)[MR]) {
#pragma GCC unroll 2
  for (int h = 0; h < H; ++h)
#pragma GCC unroll 4
    for (int m = 0; m < MR; ++m) sums[h][m] = _mm256_setzero_ps();
}

// Writes MR rows' outputs of halves [half0, half0 + H) of a panel (their
// lanes below `lanes`): acc (+ more, a second set of sums, when given) +
// bias; out and bias are at the panel's first row.
template <int H, int MR>
HWY_INLINE void StoreHalves(const __m256 (*acc)[MR], int half0, float* out, int64_t ldo, const float* bias,
                            int64_t lanes, const __m256 (*more)[MR] = nullptr) {
#pragma GCC unroll 2
  for (int h = 0; h < H; ++h) {
    const int64_t first = kHalf * (half0 + h), n = std::min<int64_t>(kHalf, lanes - first);
#pragma GCC unroll 4
    for (int m = 0; m < MR; ++m) {
      alignas(32) float v[kHalf];
      _mm256_store_ps(v, more ? _mm256_add_ps(acc[h][m], more[h][m]) : acc[h][m]);
      float* o = out + m * ldo + first;
      for (int64_t i = 0; i < n; ++i) o[i] = bias ? v[i] + bias[first + i] : v[i];
    }
  }
}

HWY_INLINE void FetchLines(const uint8_t* p, int64_t bytes) {
  for (int64_t l = 0; l < bytes; l += 64) _mm_prefetch(reinterpret_cast<const char*>(p + l), _MM_HINT_T0);
}

// Block b of the panel at `panel` (its bytes and, every other block, the
// line of f16 scales) asked into the caches: a pass over one panel that
// comes after its first, which left the memory idle, fetches the next.
HWY_INLINE void FetchBlock(const uint8_t* panel, int64_t b, int64_t nb, int64_t block) {
  FetchLines(panel + b * block, block);
  if (b % 2 == 0) FetchLines(panel + nb * block + b * kLanes * 2, 64);
}

// What a pass over one panel asks the caches for besides its own reads:
// kAhead, the stream kAheadBytes ahead of it, for the one pass of 1-2 rows,
// whose panel comes from memory (on Zen 3 the hardware's prefetch alone left
// those at 0.78-0.85 of a plain read's speed; 1024 bytes ahead took 4-11% off
// their time, 512 and 2048 less; the first of several passes measured no
// better with it); kNextPanel, the next panel, for a pass that finds its
// panel in cache; or nothing.
enum class Fetch { kNothing, kAhead, kNextPanel };
constexpr int64_t kAheadBytes = 1024;

// MR activation rows against halves [half0, half0 + H) of one panel, all nb
// blocks; writes the first `lanes` of those rows' outputs (plus bias).
// `next` is the next panel (null after the last), for Fetch::kNextPanel.
template <int H, int MR, bool kNibbles>
HWY_INLINE void HalfTile(const uint8_t* panel, int64_t nb, int half0, const ActBlock* x, const int32_t* sums,
                         float* out, int64_t ldo, const float* bias, int64_t lanes, Fetch fetch,
                         const uint8_t* next) {
  const int64_t block = kNibbles ? kNibbleBlock : kPanelBlock;
  const auto* scales = reinterpret_cast<const uint16_t*>(panel + nb * block);
  __m256 acc[H][MR];
  ZeroSums<H, MR>(acc);
  for (int64_t b = 0; b < nb; ++b) {
    if (fetch == Fetch::kAhead)  // past the last block: the scales, then the next panel
      FetchLines(panel + b * block + kAheadBytes, block);
    else if (fetch == Fetch::kNextPanel && next)
      FetchBlock(next, b, nb, block);
    AccumulateBlock<H, MR, kNibbles>(panel + b * block, scales + b * kLanes, half0, x + b, nb, sums + b, nb, acc);
  }
  StoreHalves<H, MR>(acc, half0, out, ldo, bias, lanes);
}

// All M rows against one panel. Up to 2 rows take both halves at once (each
// 64-byte line read once, the activations broadcast once for 16 rows); more
// rows go 4 at a time over one half, where the registers hold 4 rows' sums.
// (Taking each block to every row while it is in L1, the sums waiting in
// memory, measured the same in ops_bench; pairs of rows over both halves
// were slower for prefills, 55 against 100 GMAC/s.)
template <bool kNibbles>
void PanelRowsProduct(const uint8_t* panel, const uint8_t* next, int64_t nb, const ActBlock* x, const int32_t* sums,
                      int64_t M, float* out, int64_t ldo, const float* bias, int64_t lanes) {
  if (M <= 2) {
    if (M == 2)
      HalfTile<2, 2, kNibbles>(panel, nb, 0, x, sums, out, ldo, bias, lanes, Fetch::kAhead, next);
    else
      HalfTile<2, 1, kNibbles>(panel, nb, 0, x, sums, out, ldo, bias, lanes, Fetch::kAhead, next);
    return;
  }
  // The first pass reads the panel from memory; the second (the second
  // tile of a half, or the other half) fetches the next panel meanwhile.
  int pass = 0;
  for (int half = 0; half < 2 && kHalf * half < lanes; ++half)
    for_row_tiles(M, [&](auto mr, int64_t m) {
      const int p = pass++;
      const Fetch fetch = p == 1 ? Fetch::kNextPanel : Fetch::kNothing;
      HalfTile<1, decltype(mr)::value, kNibbles>(panel, nb, half, x + m * nb, sums + m * nb, out + m * ldo, ldo, bias,
                                                  lanes, fetch, next);
    });
}

// Block `b` of 8 rows (rows[i] + off: each row's block) as the panel's
// half: register j (stored at out + 64 j) holds bytes 4j..4j+3 of each
// row's values, an 8 × 8 transpose of 4-byte groups for q8_0's 32 bytes,
// 8 × 4 for q4_0's 16.
template <bool kQ8>
HWY_INLINE void PackHalfBlock(const uint8_t* const* rows, int64_t off, uint8_t* out) {
  auto store = [&](int j, __m256i v) { _mm256_store_si256(reinterpret_cast<__m256i*>(out + 64 * j), v); };
  if constexpr (kQ8) {
    __m256i a[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i)
      a[i] = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[i] + off + 2)),
                              _mm256_set1_epi8(static_cast<char>(0x80)));
    __m256i t[8], u[8];
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      t[2 * i] = _mm256_unpacklo_epi32(a[2 * i], a[2 * i + 1]);      // groups 0, 1 | 4, 5
      t[2 * i + 1] = _mm256_unpackhi_epi32(a[2 * i], a[2 * i + 1]);  // groups 2, 3 | 6, 7
    }
#pragma GCC unroll 2
    for (int q = 0; q < 2; ++q) {  // rows 4q..4q+3
      u[4 * q] = _mm256_unpacklo_epi64(t[4 * q], t[4 * q + 2]);          // group 0 | 4
      u[4 * q + 1] = _mm256_unpackhi_epi64(t[4 * q], t[4 * q + 2]);      // group 1 | 5
      u[4 * q + 2] = _mm256_unpacklo_epi64(t[4 * q + 1], t[4 * q + 3]);  // group 2 | 6
      u[4 * q + 3] = _mm256_unpackhi_epi64(t[4 * q + 1], t[4 * q + 3]);  // group 3 | 7
    }
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      store(j, _mm256_permute2x128_si256(u[j], u[4 + j], 0x20));
      store(j + 4, _mm256_permute2x128_si256(u[j], u[4 + j], 0x31));
    }
  } else {
    __m256i a[4];  // rows i and i + 4 side by side
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i)
      a[i] = _mm256_inserti128_si256(
          _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[i] + off + 2))),
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[i + 4] + off + 2)), 1);
    const __m256i t0 = _mm256_unpacklo_epi32(a[0], a[1]), t1 = _mm256_unpackhi_epi32(a[0], a[1]);
    const __m256i t2 = _mm256_unpacklo_epi32(a[2], a[3]), t3 = _mm256_unpackhi_epi32(a[2], a[3]);
    store(0, _mm256_unpacklo_epi64(t0, t2));
    store(1, _mm256_unpackhi_epi64(t0, t2));
    store(2, _mm256_unpacklo_epi64(t1, t3));
    store(3, _mm256_unpackhi_epi64(t1, t3));
  }
}

template <bool kQ8>
void PackPanels(const uint8_t* w, int64_t stride, int64_t N, int64_t nb, int64_t first, int64_t last, int64_t panel,
                uint8_t* out) {
  constexpr int64_t kBytes = kQ8 ? sizeof(BlockQ8_0) : sizeof(BlockQ4_0);
  constexpr int64_t kBlock = kQ8 ? kPanelBlock : kNibbleBlock;
  for (int64_t p = first; p < last; ++p) {
    const uint8_t* rows[kLanes];  // rows past N repeat the last one
    for (int i = 0; i < kLanes; ++i) rows[i] = w + std::min<int64_t>(p * kLanes + i, N - 1) * stride;
    uint8_t* base = out + p * panel;
    auto* scales = reinterpret_cast<uint16_t*>(base + nb * kBlock);
    for (int64_t b = 0; b < nb; ++b) {
      PackHalfBlock<kQ8>(rows, b * kBytes, base + b * kBlock);
      PackHalfBlock<kQ8>(rows + kHalf, b * kBytes, base + b * kBlock + 32);
      for (int i = 0; i < kLanes; ++i) std::memcpy(&scales[b * kLanes + i], rows[i] + b * kBytes, 2);
    }
  }
}

#include "ops/int8_gemm_kquants_avx2-inl.h"  // q4_k, q5_k and q6_k panels

}  // namespace

bool Int8Available(DType) { return true; }

// The VNNI section's layout (int8_gemm.h): for each block, register j's
// 4-byte group of each of the 16 rows, then the rows' f16 scales.
void Int8Pack(DType t, const uint8_t* w, int64_t stride, int64_t N, int64_t K, int64_t first, int64_t last,
              uint8_t* out) {
  const int64_t panel = int8_panel_stride(t, K);
  if (t == DType::Q4_K) return PackK4Panels<false>(w, stride, N, K / 256, first, last, panel, out);
  if (t == DType::Q5_K) return PackK4Panels<true>(w, stride, N, K / 256, first, last, panel, out);
  if (t == DType::Q6_K) return PackK6Panels(w, stride, N, K / 256, first, last, panel, out);
  (t == DType::Q8_0 ? PackPanels<true> : PackPanels<false>)(w, stride, N, K / 32, first, last, panel, out);
}

void Int8GemmPacked(DType t, const uint8_t* packed, int64_t N, int64_t K, const ActBlock* x, const int32_t* sums,
                    int64_t M, float* out, int64_t ldo, const float* bias) {
  if (t == DType::Q4_K) return GemmK4Panels<false>(packed, N, K, x, sums, M, out, ldo, bias);
  if (t == DType::Q5_K) return GemmK4Panels<true>(packed, N, K, x, sums, M, out, ldo, bias);
  if (t == DType::Q6_K) return GemmK6Panels(packed, N, K, x, M, out, ldo, bias);
  const int64_t nb = K / 32, panel = int8_panel_stride(t, K);
  for (int64_t n0 = 0; n0 < N; n0 += kLanes) {
    const uint8_t* base = packed + n0 / kLanes * panel;
    const float* bn = bias ? bias + n0 : nullptr;
    const int64_t lanes = std::min<int64_t>(kLanes, N - n0);
    const uint8_t* next = n0 + kLanes < N ? base + panel : nullptr;
    (t == DType::Q8_0 ? PanelRowsProduct<false> : PanelRowsProduct<true>)(base, next, nb, x, sums, M, out + n0, ldo,
                                                                          bn, lanes);
  }
}

// Unpacked weights: int8_gemm packs them two panels at a time.
bool Int8Stream(DType, const uint8_t*, int64_t, int64_t, int64_t, const ActBlock*, const int32_t*, int64_t, float*,
                int64_t, const float*) {
  return false;
}
