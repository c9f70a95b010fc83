// Highway compiles this file once per instruction-set target (see simd.cpp).
// The AVX3_DL target (Ice Lake and later, Zen 4 and later) has the VNNI
// kernel below: Highway leaves that target out unless asked, so this file
// asks. The AVX2 and AVX3 targets run the same panels with AVX2's byte
// multiply-adds (int8_gemm_avx2-inl.h); other targets have no kernel.
#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL
#endif
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/int8_gemm.cpp"
#include "ops/int8_gemm.h"
#include "ops/row_tiles.h"

#include <hwy/foreach_target.h>  // must come before highway.h
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#if HWY_ARCH_X86
#include <immintrin.h>
#endif

HWY_BEFORE_NAMESPACE();
namespace bonfire::simd {
namespace HWY_NAMESPACE {

#if HWY_TARGET == HWY_AVX3_DL
// Highway 1.0.3's AVX3_DL target string names the VEX VNNI only; the
// functions below add the EVEX one (GCC and clang spell that differently).
#if defined(__clang__)  // replaces Highway's push (HWY_BEFORE_NAMESPACE) until the end
#pragma clang attribute pop
#pragma clang attribute push(__attribute__((target(HWY_TARGET_STR ",avx512vnni"))), apply_to = function)
#else
#pragma GCC target("avx512vnni")
#endif
// GCC 12's AVX-512 headers fill unused inputs with _mm512_undefined_*(),
// which -Wmaybe-uninitialized then reports inside every insert and cast.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace {  // per target: each file's helpers stay its own

constexpr int kLanes = 16;         // weight rows per panel: one int32 per lane
constexpr int kPanelBlock = 512;   // bytes of one block of a panel: 8 × 4 bytes × 16 rows
constexpr int kNibbleBlock = 256;  // the same for q4_0's panels, two values a byte
constexpr int kAhead = 256;        // bytes of each weight row prefetched ahead
constexpr int kStreamRows = 4;     // up to this many activation rows skip the packed copy
constexpr int kWideRows = 8;       // activation rows of the widest tile
constexpr int kPrefetchBlocks = 8; // blocks ahead a first pass over panels prefetches into L1
constexpr int kFarBlocks = 128;    // and into L2 (68 KiB of q8_0 panels ahead, scales included)
// A panel's block b: kPanelBlock bytes (register k4 holds bytes 4·k4..4·k4+3
// of the block for each of the 16 rows, as unsigned w + 128) and 16 scales,
// kept as the file's f16 (widened as they are used: exact, and 32 bytes a
// block less to stream than f32).
struct Panel {
  const uint8_t* bytes;
  const uint16_t* scales;
  const uint8_t* end;  // the end of the panels this call streams (far prefetches stop there)
};

// Rows i and i + 8 of a panel's block, as unsigned bytes w + 128, in one
// register: [row i's 32 values | row i + 8's 32 values].
HWY_INLINE __m512i RowPairQ8(const uint8_t* ri, const uint8_t* rj) {
  const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ri + 2));
  const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rj + 2));
  return _mm512_xor_si512(_mm512_inserti64x4(_mm512_zextsi256_si512(a), b, 1), _mm512_set1_epi8(char(0x80)));
}

// q4_0: 16 bytes, low nibbles are values 0..15, high nibbles 16..31, each
// minus 8; shifted by 128 that is nibble + 120.
HWY_INLINE __m512i RowPairQ4(const uint8_t* ri, const uint8_t* rj) {
  const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(ri + 2));
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rj + 2));
  const __m256i ab = _mm256_inserti128_si256(_mm256_zextsi128_si256(a), b, 1);
  const __m512i v = _mm512_inserti64x4(_mm512_zextsi256_si512(ab), _mm256_srli_epi16(ab, 4), 1);
  // [a, b, a>>4, b>>4] → [a, a>>4, b, b>>4]
  const __m512i ordered = _mm512_shuffle_i64x2(v, v, _MM_SHUFFLE(3, 1, 2, 0));
  return _mm512_add_epi8(_mm512_and_si512(ordered, _mm512_set1_epi8(0x0f)), _mm512_set1_epi8(120));
}

// Block b of a panel of 16 weight rows, transposed into registers: k[j]
// holds bytes 4j..4j+3 of the block for each row (as unsigned w + 128), and
// `scale` the rows' scales.
struct PanelBlock {
  __m512i k[8];
  __m512 scale;
};

// The rows of one panel: rows past N repeat the last one (their lanes are
// never stored), and `scale_at` holds each row's offset from the first for
// the gather of the scales.
struct PanelRows {
  const uint8_t* rows[kLanes];
  __m512i scale_at;
  int64_t stride;
};

HWY_INLINE void PanelRowsAt(const uint8_t* w, int64_t stride, int64_t n0, int64_t N, PanelRows& p) {
  alignas(64) int32_t offsets[kLanes];
#pragma GCC unroll 16
  for (int i = 0; i < kLanes; ++i) {
    p.rows[i] = w + std::min(n0 + i, N - 1) * stride;
    offsets[i] = static_cast<int32_t>(p.rows[i] - p.rows[0]);
  }
  p.scale_at = _mm512_load_si512(offsets);
  p.stride = stride;
}

template <bool kQ8>
HWY_INLINE void LoadPanelBlock(const PanelRows& p, int64_t b, PanelBlock& out) {
  const int64_t off = b * (kQ8 ? sizeof(BlockQ8_0) : sizeof(BlockQ4_0));
  const uint8_t* const* rows = p.rows;
  // 16 rows are read side by side, which the hardware prefetchers follow
  // poorly. Two hints (each alone gained less, measured on Zen 5): each row's
  // bytes a few blocks ahead into L1, and the next panel's rows, the bytes
  // that follow this panel's, into L2 one block's share at a time.
#pragma GCC unroll 16
  for (int i = 0; i < kLanes; ++i) _mm_prefetch(reinterpret_cast<const char*>(rows[i] + off + kAhead), _MM_HINT_T0);
  const uint8_t* next = rows[0] + kLanes * p.stride + kLanes * off;
#pragma GCC unroll 16
  for (int i = 0; i < kLanes * (kQ8 ? 34 : 18); i += 64)
    _mm_prefetch(reinterpret_cast<const char*>(next + i), _MM_HINT_T1);
  __m512i z[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i)
    z[i] = kQ8 ? RowPairQ8(rows[i] + off, rows[i + 8] + off) : RowPairQ4(rows[i] + off, rows[i + 8] + off);
  // An 8 × 8 transpose of 4-byte groups within each 256-bit half: output
  // j holds group j of rows 0..7, then of rows 8..15.
  const __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]);
  const __m512i t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
  const __m512i t4 = _mm512_unpacklo_epi32(z[4], z[5]), t5 = _mm512_unpackhi_epi32(z[4], z[5]);
  const __m512i t6 = _mm512_unpacklo_epi32(z[6], z[7]), t7 = _mm512_unpackhi_epi32(z[6], z[7]);
  const __m512i u0 = _mm512_unpacklo_epi64(t0, t2), u1 = _mm512_unpackhi_epi64(t0, t2);
  const __m512i u2 = _mm512_unpacklo_epi64(t1, t3), u3 = _mm512_unpackhi_epi64(t1, t3);
  const __m512i u4 = _mm512_unpacklo_epi64(t4, t6), u5 = _mm512_unpackhi_epi64(t4, t6);
  const __m512i u6 = _mm512_unpacklo_epi64(t5, t7), u7 = _mm512_unpackhi_epi64(t5, t7);
  const __m512i lo = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
  const __m512i hi = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
  out.k[0] = _mm512_permutex2var_epi64(u0, lo, u4);
  out.k[1] = _mm512_permutex2var_epi64(u1, lo, u5);
  out.k[2] = _mm512_permutex2var_epi64(u2, lo, u6);
  out.k[3] = _mm512_permutex2var_epi64(u3, lo, u7);
  out.k[4] = _mm512_permutex2var_epi64(u0, hi, u4);
  out.k[5] = _mm512_permutex2var_epi64(u1, hi, u5);
  out.k[6] = _mm512_permutex2var_epi64(u2, hi, u6);
  out.k[7] = _mm512_permutex2var_epi64(u3, hi, u7);
  // Each block starts with its f16 scale: gather 4 bytes per row, keep the low 2.
  const __m512i words = _mm512_i32gather_epi32(p.scale_at, rows[0] + off, 1);
  out.scale = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(words));
}

// q4_0 rows into nibble panels: each block's 16 bytes transposed in groups
// of 4 (register j: bytes 4j..4j+3 of the 16 rows), and the scales.
void PackNibblePanel(const PanelRows& p, int64_t nb, uint8_t* bytes, uint16_t* scales) {
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* block = p.rows[0] + b * sizeof(BlockQ4_0);
    for (int j = 0; j < 4; ++j)
      _mm512_store_si512(bytes + b * kNibbleBlock + 64 * j, _mm512_i32gather_epi32(p.scale_at, block + 2 + 4 * j, 1));
    const __m512i words = _mm512_i32gather_epi32(p.scale_at, block, 1);
    _mm256_store_si256(reinterpret_cast<__m256i*>(scales + b * kLanes), _mm512_cvtepi32_epi16(words));
  }
}

// Repacks a panel's K / 32 blocks into `bytes` and `scales` (Panel's layout).
template <bool kQ8>
void PackPanel(const PanelRows& p, int64_t nb, uint8_t* bytes, uint16_t* scales) {
  PanelBlock r;
  for (int64_t b = 0; b < nb; ++b) {
    LoadPanelBlock<kQ8>(p, b, r);
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) _mm512_store_si512(bytes + b * kPanelBlock + 64 * j, r.k[j]);
    // Back to the f16 it was widened from: exact.
    _mm256_store_si256(reinterpret_cast<__m256i*>(scales + b * kLanes), _mm512_cvtps_ph(r.scale, _MM_FROUND_TO_NEAREST_INT));
  }
}

// The per-block step every path shares: MR activation rows against one
// panel block, into acc — the arithmetic int8_gemm.h promises.
// k holds unsigned bytes w + (128 >> kShift): w + 128 for bytes, the raw
// nibble (w + 8) for q4_0 panels, so the start subtracts sum >> kShift.
// Row m's activation block is x[m * stride] and its sum sum[m * sum_stride]:
// one base pointer and a stride, not an array of row pointers, which GCC
// packed into vector registers and took apart again every block (about 40
// instructions a block for 8 rows).
template <int MR, int kShift = 0>
HWY_INLINE void Accumulate(const __m512i* k, __m512 dw, const ActBlock* x, int64_t stride, const int32_t* sum,
                           int64_t sum_stride, __m512* acc) {
  // Up to four rows, two chains per row (groups 0-3 and 4-7), added at the
  // end: integer sums, so the result is the same, and a one-row step does not
  // wait on eight dependent multiply-adds per block. More rows hide that
  // latency themselves and need the registers.
  constexpr bool kTwoChains = MR <= 4;
  __m512i dot[MR], tail[MR];
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m)
    dot[m] = _mm512_set1_epi32(-(sum[m * sum_stride] >> kShift)), tail[m] = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j)
#pragma GCC unroll 8
    for (int m = 0; m < MR; ++m) {
      int32_t four[2];
      std::memcpy(&four[0], x[m * stride].qs + 4 * j, sizeof four[0]);
      std::memcpy(&four[1], x[m * stride].qs + 4 * (j + 4), sizeof four[1]);
      dot[m] = _mm512_dpbusd_epi32(dot[m], k[j], _mm512_set1_epi32(four[0]));
      if constexpr (kTwoChains)
        tail[m] = _mm512_dpbusd_epi32(tail[m], k[j + 4], _mm512_set1_epi32(four[1]));
      else
        dot[m] = _mm512_dpbusd_epi32(dot[m], k[j + 4], _mm512_set1_epi32(four[1]));
    }
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m) {
    const __m512i total = kTwoChains ? _mm512_add_epi32(dot[m], tail[m]) : dot[m];
    acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(total), _mm512_mul_ps(dw, _mm512_set1_ps(x[m * stride].d)), acc[m]);
  }
}

// Writes MR rows of one panel's outputs (the first `lanes` of 16), plus bias.
template <int MR>
HWY_INLINE void Store(const __m512* acc, float* out, int64_t ldo, const float* bias, int64_t lanes) {
  const __mmask16 keep = static_cast<__mmask16>((1u << lanes) - 1);
  const __m512 bv = bias ? _mm512_maskz_loadu_ps(keep, bias) : _mm512_setzero_ps();
#pragma GCC unroll 4
  for (int m = 0; m < MR; ++m) _mm512_mask_storeu_ps(out + m * ldo, keep, bias ? _mm512_add_ps(acc[m], bv) : acc[m]);
}

#include "ops/int8_gemm_kquants-inl.h"  // q4_k, q5_k and q6_k panels: packing, tiles, products

// MR activation rows × NP packed panels, all blocks. kNibbles: q4_0's
// panels, which keep the file's nibbles (register j holds bytes 4j..4j+3 of
// each row's 16; low nibbles are values 4j.., high ones 16 + 4j..).
// kFirstPass: the panels come from memory, not cache. The hardware
// prefetchers then fall behind while the core computes (4 rows took 1.5x one
// row's time on Zen 5; 1.1x with the prefetches), and a later pass over the
// same panels finds them in cache and would only pay for the hints. 5 to 8
// rows keep the load ports so busy (8 activation broadcasts per weight register)
// that the L1 prefetches alone still left them at 1.4-1.6x one row's time
// (ops_bench q8_0); prefetching kFarBlocks ahead into L2 as well took that
// to 1.0-1.3x, and a batched 8-row decode step of the 1.1B bench model from
// 52.6-54.2 to 50.4-50.8 ms (batch_bench; 32 blocks ahead helped less, 512
// hurt).
template <int MR, int NP, bool kNibbles, bool kFirstPass>
HWY_INLINE void Tile(const Panel* panels, const ActBlock* x, const int32_t* sums, int64_t nb, float* out, int64_t ldo,
                     const float* bias, int64_t n_valid) {
  __m512 acc[NP][MR];
#pragma GCC unroll 4
  for (int p = 0; p < NP; ++p)
#pragma GCC unroll 4
    for (int m = 0; m < MR; ++m) acc[p][m] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) {
      if constexpr (kFirstPass) {
        constexpr int kBlock = kNibbles ? kNibbleBlock : kPanelBlock;
        const char* ahead = reinterpret_cast<const char*>(panels[p].bytes) + (b + kPrefetchBlocks) * kBlock;
#pragma GCC unroll 8
        for (int l = 0; l < kBlock; l += 64) _mm_prefetch(ahead + l, _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(panels[p].scales + (b + kPrefetchBlocks) * kLanes), _MM_HINT_T0);
        // Not for 1-4 rows: the hardware keeps up there, and the hints only
        // cost (1 row: 232-258 µs without them, 257-264 with).
        if constexpr (MR > 4) {
          // Along the call's panels as they lie in memory (the scales
          // included), and not past them: the next panels there are another
          // thread's chunk, which it has streamed already.
          constexpr int kStep = kBlock + 2 * kLanes;  // a panel's bytes a block
          const char* far = reinterpret_cast<const char*>(panels[p].bytes) + (b + kFarBlocks) * kStep;
          if (far + kStep <= reinterpret_cast<const char*>(panels[p].end)) {
#pragma GCC unroll 9
            for (int l = 0; l < kStep; l += 64) _mm_prefetch(far + l, _MM_HINT_T1);
          }
        }
      }
      const __m512 dw =
          _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(panels[p].scales + b * kLanes)));
      if (kNibbles) {
        const auto* src = reinterpret_cast<const __m512i*>(panels[p].bytes + b * kNibbleBlock);
        const __m512i low = _mm512_set1_epi8(0x0f);
        __m512i k[8];
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
          const __m512i r = _mm512_load_si512(src + j);
          k[j] = _mm512_and_si512(r, low);
          k[j + 4] = _mm512_and_si512(_mm512_srli_epi16(r, 4), low);
        }
        Accumulate<MR, 4>(k, dw, x + b, nb, sums + b, nb, acc[p]);
      } else {
        Accumulate<MR>(reinterpret_cast<const __m512i*>(panels[p].bytes + b * kPanelBlock), dw, x + b, nb, sums + b, nb,
                       acc[p]);
      }
    }
  }
#pragma GCC unroll 4
  for (int p = 0; p < NP && p * kLanes < n_valid; ++p)
    Store<MR>(acc[p], out + p * kLanes, ldo, bias ? bias + p * kLanes : nullptr,
              std::min<int64_t>(kLanes, n_valid - p * kLanes));
}

// MR (<= kStreamRows) activation rows against one panel read straight from the
// weight, each block transposed in registers and used at once: with few rows
// (decode steps) a packed copy would cost more than it saves.
template <bool kQ8, int MR>
void Stream(const PanelRows& rows, const ActBlock* x, const int32_t* sums, int64_t nb, float* out, int64_t ldo,
            const float* bias, int64_t lanes) {
  __m512 acc[MR];
#pragma GCC unroll 4
  for (int m = 0; m < MR; ++m) acc[m] = _mm512_setzero_ps();
  PanelBlock r;
  for (int64_t b = 0; b < nb; ++b) {
    LoadPanelBlock<kQ8>(rows, b, r);
    Accumulate<MR>(r.k, r.scale, x + b, nb, sums + b, nb, acc);
  }
  Store<MR>(acc, out, ldo, bias, lanes);
}

template <bool kQ8>
void StreamRows(const uint8_t* w, int64_t stride, int64_t N, int64_t nb, const ActBlock* x, const int32_t* sums,
                int64_t M, float* out, int64_t ldo, const float* bias) {
  PanelRows rows;
  for (int64_t n0 = 0; n0 < N; n0 += kLanes) {
    PanelRowsAt(w, stride, n0, N, rows);
    const int64_t lanes = std::min<int64_t>(kLanes, N - n0);
    const float* bn = bias ? bias + n0 : nullptr;
    for_row_tiles(M, [&](auto mr, int64_t m) {
      Stream<kQ8, decltype(mr)::value>(rows, x + m * nb, sums + m * nb, nb, out + n0 + m * ldo, ldo, bn, lanes);
    });
  }
}

// All M rows against NP panels: tiles of up to kWideRows rows, each
// reading a panel once and using every weight register MR times (5 to 8
// rows: one panel a tile, for the registers); up to 4 rows take both panels
// at once. Only the first tile streams the panels from memory.
template <int NP, bool kNibbles = false>
void Rows(const Panel* panels, const ActBlock* x, const int32_t* sums, int64_t M, int64_t nb, float* out, int64_t ldo,
          const float* bias, int64_t n_valid) {
  for_row_tiles_first<kWideRows>(M, [&](auto mr, int64_t m, auto first) {
    constexpr int MR = decltype(mr)::value;
    const ActBlock* xm = x + m * nb;
    const int32_t* sm = sums + m * nb;
    float* om = out + m * ldo;
    if constexpr (MR <= 4) {
      Tile<MR, NP, kNibbles, first.value>(panels, xm, sm, nb, om, ldo, bias, n_valid);
    } else {
      for (int p = 0; p < NP && p * kLanes < n_valid; ++p)
        Tile<MR, 1, kNibbles, first.value>(panels + p, xm, sm, nb, om + p * kLanes, ldo,
                                           bias ? bias + p * kLanes : nullptr, n_valid - p * kLanes);
    }
  });
}

}  // namespace

bool Int8Available(DType) { return __builtin_cpu_supports("avx512vnni"); }

int64_t PanelBlockBytes(DType t) { return t == DType::Q8_0 ? kPanelBlock : kNibbleBlock; }

void Int8Pack(DType t, const uint8_t* w, int64_t stride, int64_t N, int64_t K, int64_t first, int64_t last,
              uint8_t* out) {
  const int64_t nb = K / 32;
  const int64_t block = PanelBlockBytes(t), panel = int8_panel_stride(t, K);
  PanelRows rows;
  for (int64_t p = first; p < last; ++p) {
    PanelRowsAt(w, stride, p * kLanes, N, rows);
    uint8_t* base = out + p * panel;
    auto* scales = reinterpret_cast<uint16_t*>(base + nb * block);
    if (t == DType::Q4_K)
      PackK4Panel<false>(rows, K / 256, base);
    else if (t == DType::Q5_K)
      PackK4Panel<true>(rows, K / 256, base);
    else if (t == DType::Q6_K)
      PackK6Panel(rows, K / 256, base);
    else if (t == DType::Q8_0)
      PackPanel<true>(rows, nb, base, scales);
    else
      PackNibblePanel(rows, nb, base, scales);
  }
}

template <bool kNibbles>
void GemmPanels(const uint8_t* packed, int64_t N, int64_t K, const ActBlock* x, const int32_t* sums, int64_t M,
                float* out, int64_t ldo, const float* bias) {
  const int64_t nb = K / 32;
  const int64_t block = kNibbles ? kNibbleBlock : kPanelBlock;
  const int64_t panel = int8_panel_stride(kNibbles ? DType::Q4_0 : DType::Q8_0, K);
  Panel panels[2];
  const uint8_t* end = packed + (N + kLanes - 1) / kLanes * panel;
  for (int64_t n0 = 0; n0 < N; n0 += 2 * kLanes) {
    const int np = N - n0 > kLanes ? 2 : 1;
    for (int p = 0; p < np; ++p) {
      const uint8_t* base = packed + (n0 / kLanes + p) * panel;
      panels[p] = {base, reinterpret_cast<const uint16_t*>(base + nb * block), end};
    }
    const float* bn = bias ? bias + n0 : nullptr;
    if (np == 2)
      Rows<2, kNibbles>(panels, x, sums, M, nb, out + n0, ldo, bn, N - n0);
    else
      Rows<1, kNibbles>(panels, x, sums, M, nb, out + n0, ldo, bn, N - n0);
  }
}

void Int8GemmPacked(DType t, const uint8_t* packed, int64_t N, int64_t K, const ActBlock* x, const int32_t* sums,
                    int64_t M, float* out, int64_t ldo, const float* bias) {
  if (t == DType::Q4_K) return GemmK4Panels<false>(packed, N, K, x, sums, M, out, ldo, bias);
  if (t == DType::Q5_K) return GemmK4Panels<true>(packed, N, K, x, sums, M, out, ldo, bias);
  if (t == DType::Q6_K) return GemmK6Panels(packed, N, K, x, M, out, ldo, bias);
  (t == DType::Q8_0 ? GemmPanels<false> : GemmPanels<true>)(packed, N, K, x, sums, M, out, ldo, bias);
}

// Few rows (decode steps) of q8_0 and q4_0 straight from the unpacked
// weight, each block transposed in registers: a packed copy would cost more
// than it saves. False for the rest, which int8_gemm packs first.
bool Int8Stream(DType t, const uint8_t* w, int64_t stride, int64_t N, int64_t K, const ActBlock* x, const int32_t* sums,
                int64_t M, float* out, int64_t ldo, const float* bias) {
  if (M > kStreamRows || (t != DType::Q8_0 && t != DType::Q4_0)) return false;
  (t == DType::Q8_0 ? StreamRows<true> : StreamRows<false>)(w, stride, N, K / 32, x, sums, M, out, ldo, bias);
  return true;
}

#pragma GCC diagnostic pop
#if defined(__clang__)
#pragma clang attribute pop
#pragma clang attribute push(__attribute__((target(HWY_TARGET_STR))), apply_to = function)
#endif

#elif HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3

#include "ops/int8_gemm_avx2-inl.h"  // the same panels with AVX2's byte multiply-adds

#else  // no AVX2: int8_gemm_available() says so, Int8Stream declines, nothing calls the rest

bool Int8Available(DType) { return false; }
void Int8Pack(DType, const uint8_t*, int64_t, int64_t, int64_t, int64_t, int64_t, uint8_t*) {}
void Int8GemmPacked(DType, const uint8_t*, int64_t, int64_t, const ActBlock*, const int32_t*, int64_t, float*, int64_t,
                    const float*) {}
bool Int8Stream(DType, const uint8_t*, int64_t, int64_t, int64_t, const ActBlock*, const int32_t*, int64_t, float*,
                int64_t, const float*) {
  return false;
}

#endif

}  // namespace HWY_NAMESPACE
}  // namespace bonfire::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace bonfire::simd {
HWY_EXPORT(Int8Available);
HWY_EXPORT(Int8Stream);
HWY_EXPORT(Int8Pack);
HWY_EXPORT(Int8GemmPacked);

int64_t int8_panel_stride(DType weight, int64_t k) {
  if (weight == DType::Q4_K) return k / 256 * 2432;
  if (weight == DType::Q5_K) return k / 256 * 2944;
  if (weight == DType::Q6_K) return k / 256 * 3392;
  // The blocks (512 or 256 bytes each), then their f16 scales padded to 64.
  const int64_t nb = k / 32;
  return nb * (weight == DType::Q8_0 ? 512 : 256) + (nb * 16 * 2 + 63) / 64 * 64;
}
int64_t int8_packed_bytes(DType weight, int64_t n, int64_t k) { return (n + 15) / 16 * int8_panel_stride(weight, k); }

void int8_pack(DType weight, const uint8_t* w, int64_t stride, int64_t N, int64_t K, int64_t first, int64_t last,
               uint8_t* out) {
  HWY_DYNAMIC_DISPATCH(Int8Pack)(weight, w, stride, N, K, first, last, out);
}

void int8_gemm_packed(DType weight, const uint8_t* panels, int64_t N, int64_t K, const Int8Rows& x, float* out,
                      int64_t ldo, const float* bias) {
  HWY_DYNAMIC_DISPATCH(Int8GemmPacked)(weight, panels, N, K, x.blocks, x.sums, x.rows, out, ldo, bias);
}

bool int8_gemm_available(DType weight, int64_t k) {
  const bool blocks = weight == DType::Q8_0 || weight == DType::Q4_0;
  const bool k_quant = weight == DType::Q4_K || weight == DType::Q5_K || weight == DType::Q6_K;
  const bool shape = k > 0 && ((blocks && k % 32 == 0) || (k_quant && k % 256 == 0));
  return shape && HWY_DYNAMIC_DISPATCH(Int8Available)(weight);
}

void int8_block_sums(const ActBlock* x, int64_t count, int32_t* sums) {
  activation_sums(x, count, sums);
  for (int64_t i = 0; i < count; ++i) sums[i] *= 128;
}

void int8_gemm(DType weight, const uint8_t* w, int64_t stride, int64_t N, int64_t K, const Int8Rows& x, float* out,
               int64_t ldo, const float* bias) {
  if (HWY_DYNAMIC_DISPATCH(Int8Stream)(weight, w, stride, N, K, x.blocks, x.sums, x.rows, out, ldo, bias)) return;
  // Two panels (32 weight rows) at a time, packed into this thread's buffer
  // the way a load packs them, then the packed product.
  struct alignas(64) Line {
    uint8_t bytes[64];
  };
  thread_local std::vector<Line> buffer;  // aligned for the kernels' aligned loads
  const int64_t panel = int8_panel_stride(weight, K);
  if (buffer.size() < static_cast<size_t>(2 * panel / 64)) buffer.resize(2 * panel / 64);
  uint8_t* packed = reinterpret_cast<uint8_t*>(buffer.data());
  for (int64_t n0 = 0; n0 < N; n0 += 32) {
    const int64_t nn = std::min<int64_t>(32, N - n0);
    int8_pack(weight, w + n0 * stride, stride, nn, K, 0, (nn + 15) / 16, packed);
    int8_gemm_packed(weight, packed, nn, K, x, out + n0, ldo, bias ? bias + n0 : nullptr);
  }
}

const float* int8_k4_mins(const ActBlock* x, const int32_t* sums, int64_t count) {
  thread_local std::vector<float> mins;
  mins.resize(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) mins[i] = -(x[i].d * static_cast<float>(sums[i] >> 7));
  return mins.data();
}

const int32_t* int8_k6_half_sums(const ActBlock* x, int64_t count) {
  thread_local std::vector<int32_t> halves;
  halves.resize(static_cast<size_t>(2 * count));
  for (int64_t i = 0; i < count; ++i) {
    int32_t a = 0, b = 0;
    for (int l = 0; l < 16; ++l) a += x[i].qs[l], b += x[i].qs[16 + l];
    halves[2 * i] = 32 * a;
    halves[2 * i + 1] = 32 * b;
  }
  return halves.data();
}

}  // namespace bonfire::simd
#endif
