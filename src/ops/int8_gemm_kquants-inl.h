// The k-quant panel kernels of ops/int8_gemm.cpp (q4_k, q5_k and q6_k): their
// panel layouts, packing, tiles and products. Highway compiles int8_gemm.cpp
// once per target, and that file includes this one inside its per-target
// anonymous namespace, after the helpers every kernel shares (kLanes,
// PanelRows, Accumulate, Store): there is no other way to include it.
//
// Each output follows the arithmetic reference_int8_gemm writes out (and
// int8_gemm.h's promise: a row's bits do not depend on the rows beside it).

// A q4_k panel's super-block (16 rows, 256 values), 2432 bytes:
//   [0, 2048)     the nibbles: pair j (0..3), register g (0..7) holds bytes
//                 4g..4g+3 of each row's qs[32j .. 32j + 32): low nibbles are
//                 sub-block 2j's values 4g.., high ones sub-block 2j + 1's
//   [2048, 2112)  d of each row, f32;  [2112, 2176) dmin of each row
//   [2176, 2304)  the 6-bit scales, [sub-block][row];  [2304, 2432) the mins
// (the file's 16 x 144 bytes take 2304: 5.5% more to stream).
// A q5_k panel's super-block is q4_k's, then the fifth bits:
//   [2432, 2944)  register g (0..7) holds bytes 4g..4g+3 of each row's
//                 qh[0 .. 32) (bit s of qh[l]: value l of sub-block s)
// (the file's 16 x 176 bytes take 2816: 4.5% more to stream).
constexpr int kK4Block = 2432, kK5Block = 2944;
constexpr int kK4D = 2048, kK4Dmin = 2112, kK4Scales = 2176, kK4Mins = 2304, kK5Qh = 2432;
// A q6_k panel's super-block (16 rows, 256 values), 3392 bytes:
//   [0, 2048)     the low nibbles: chunk c (0..3), register g (0..7) holds
//                 bytes 4g..4g+3 of each row's ql[32c .. 32c + 32)
//   [2048, 3072)  the high bit pairs: half h (0..1), register g holds bytes
//                 4g..4g+3 of each row's qh[32h .. 32h + 32)
//   [3072, 3328)  the int8 scales, [sub-block][row];  [3328, 3392) d, f32
// (the file's 16 x 210 bytes take 3360: 1% more to stream).
constexpr int kK6Block = 3392;
constexpr int kK6Qh = 2048, kK6Scales = 3072, kK6D = 3328;

// q4_k (or q5_k: kFive) rows into panels (kK4Block's layout, kK5Block's),
// nsb super-blocks. Both blocks start with d, dmin and the 12 scale bytes.
template <bool kFive>
void PackK4Panel(const PanelRows& p, int64_t nsb, uint8_t* out) {
  using Block = std::conditional_t<kFive, BlockQ5_K, BlockQ4_K>;
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* block = p.rows[0] + sb * sizeof(Block);
    uint8_t* o = out + sb * (kFive ? kK5Block : kK4Block);
    for (int j = 0; j < 4; ++j)
      for (int g = 0; g < 8; ++g)
        _mm512_store_si512(o + 64 * (8 * j + g),
                           _mm512_i32gather_epi32(p.scale_at, block + offsetof(Block, qs) + 32 * j + 4 * g, 1));
    if constexpr (kFive)
      for (int g = 0; g < 8; ++g)
        _mm512_store_si512(o + kK5Qh + 64 * g,
                           _mm512_i32gather_epi32(p.scale_at, block + offsetof(Block, qh) + 4 * g, 1));
    const __m512i dd = _mm512_i32gather_epi32(p.scale_at, block, 1);  // d, then dmin in the high half
    _mm512_store_ps(o + kK4D, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dd)));
    _mm512_store_ps(o + kK4Dmin, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16))));
    for (int i = 0; i < kLanes; ++i) {
      const auto* b = reinterpret_cast<const Block*>(p.rows[i] + sb * sizeof(Block));
      for (int sub = 0; sub < 8; ++sub)
        k4_scale_min(sub, b->scales, o + kK4Scales + kLanes * sub + i, o + kK4Mins + kLanes * sub + i);
    }
  }
}

// One sub-block of a q4_k panel's super-block (`base`) against MR rows' x
// blocks: k holds its codes (kK4Block's layout), d and dmin the rows' scales.
template <int MR>
HWY_INLINE void K4SubBlock(const uint8_t* base, int sub, const __m512i* k, __m512 d, __m512 dmin, const ActBlock* x,
                           const float* xmins, int64_t nb, __m512* acc, __m512* mins) {
  const __m512 sc = _mm512_cvtepi32_ps(
      _mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(base + kK4Scales + kLanes * sub))));
  const __m512 mn = _mm512_cvtepi32_ps(
      _mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(base + kK4Mins + kLanes * sub))));
  static const int32_t kNoOffset = 0;  // the codes are unsigned as stored: the dots start at 0
  Accumulate<MR>(k, _mm512_mul_ps(d, sc), x + sub, nb, &kNoOffset, 0, acc);
  const __m512 dm = _mm512_mul_ps(dmin, mn);
#pragma GCC unroll 4
  for (int m = 0; m < MR; ++m) mins[m] = _mm512_fmadd_ps(dm, _mm512_set1_ps(xmins[m * nb + sub]), mins[m]);
}

// q5_k's fifth bits of sub-block s to bit 4 of each code in k (kK5Qh's
// registers): a 16-bit shift, then a mask that keeps each byte's own bit.
HWY_INLINE void K5FifthBits(const uint8_t* base, int s, __m512i* k) {
  const auto* qh = reinterpret_cast<const __m512i*>(base + kK5Qh);
  const __m128i count = _mm_cvtsi32_si128(s);
  const __m512i one = _mm512_set1_epi8(1);
#pragma GCC unroll 8
  for (int g = 0; g < 8; ++g)
    k[g] = _mm512_or_si512(
        k[g], _mm512_slli_epi16(_mm512_and_si512(_mm512_srl_epi16(_mm512_load_si512(qh + g), count), one), 4));
}

// MR activation rows × NP q4_k (or q5_k: kFive) panels: per sub-block s of
// 32 values, the integer dot of the raw codes (0..15; q5_k 0..31) with x's block, then
//   acc = fma(float(dot), (d·sc_s)·dx, acc);  mins = fma(dmin·m_s, -(dx·Σx), mins)
// and acc + mins at the end, as reference_int8_gemm writes it out. `xmins`
// holds -(dx·Σx) of every activation block.
// kFirstPass: the panels come from memory (the first tile of rows), and each
// super-block prefetches the next. The hardware prefetchers alone left a
// one-row q4_k product at 23-27 GB/s (q8_0's, which prefetches, 42-44) and
// a decode step of the 1.1B Q4_K_M bench model at 34.6-40.5 tokens/s; with
// the hints 36-41 GB/s and 46-52 tokens/s (2 or 4 super-blocks ahead did
// less). Later tiles find the panels in cache.
template <int MR, int NP, bool kFive, bool kFirstPass>
HWY_INLINE void K4Tile(const uint8_t* const* panels, const ActBlock* x, const float* xmins, int64_t nsb, float* out,
                       int64_t ldo, const float* bias, int64_t n_valid) {
  const int64_t nb = nsb * 8;
  // The mins go to their own sums (added at the end), so that no chain
  // waits on two dependent FMAs a sub-block.
  __m512 acc[NP][MR], mins[NP][MR];
#pragma GCC unroll 4
  for (int p = 0; p < NP; ++p)
#pragma GCC unroll 4
    for (int m = 0; m < MR; ++m) acc[p][m] = mins[p][m] = _mm512_setzero_ps();
  const __m512i low = _mm512_set1_epi8(0x0f);
  for (int64_t sb = 0; sb < nsb; ++sb) {
#pragma GCC unroll 2
    for (int p = 0; p < NP; ++p) {
      constexpr int kBlock = kFive ? kK5Block : kK4Block;
      const uint8_t* base = panels[p] + sb * kBlock;
      if constexpr (kFirstPass) {  // the panel's next super-block
        const char* next = reinterpret_cast<const char*>(base + kBlock);
        for (int l = 0; l < kBlock; l += 64) _mm_prefetch(next + l, _MM_HINT_T0);
      }
      const __m512 d = _mm512_load_ps(reinterpret_cast<const float*>(base + kK4D));
      const __m512 dmin = _mm512_load_ps(reinterpret_cast<const float*>(base + kK4Dmin));
      for (int pair = 0; pair < 4; ++pair) {
        const auto* src = reinterpret_cast<const __m512i*>(base) + 8 * pair;
        __m512i lo[8], hi[8];
        // Both nibbles of a load at once where the registers allow (one or
        // two activation rows); more rows load the bytes again from L1.
        if constexpr (MR <= 2) {
#pragma GCC unroll 8
          for (int g = 0; g < 8; ++g) {
            const __m512i r = _mm512_load_si512(src + g);
            lo[g] = _mm512_and_si512(r, low);
            hi[g] = _mm512_and_si512(_mm512_srli_epi16(r, 4), low);
          }
          if constexpr (kFive) K5FifthBits(base, 2 * pair, lo), K5FifthBits(base, 2 * pair + 1, hi);
          K4SubBlock<MR>(base, 2 * pair, lo, d, dmin, x + sb * 8, xmins + sb * 8, nb, acc[p], mins[p]);
          K4SubBlock<MR>(base, 2 * pair + 1, hi, d, dmin, x + sb * 8, xmins + sb * 8, nb, acc[p], mins[p]);
        } else {
#pragma GCC unroll 8
          for (int g = 0; g < 8; ++g) lo[g] = _mm512_and_si512(_mm512_load_si512(src + g), low);
          if constexpr (kFive) K5FifthBits(base, 2 * pair, lo);
          K4SubBlock<MR>(base, 2 * pair, lo, d, dmin, x + sb * 8, xmins + sb * 8, nb, acc[p], mins[p]);
#pragma GCC unroll 8
          for (int g = 0; g < 8; ++g) hi[g] = _mm512_and_si512(_mm512_srli_epi16(_mm512_load_si512(src + g), 4), low);
          if constexpr (kFive) K5FifthBits(base, 2 * pair + 1, hi);
          K4SubBlock<MR>(base, 2 * pair + 1, hi, d, dmin, x + sb * 8, xmins + sb * 8, nb, acc[p], mins[p]);
        }
      }
    }
  }
#pragma GCC unroll 2
  for (int p = 0; p < NP; ++p)
#pragma GCC unroll 4
    for (int m = 0; m < MR; ++m) acc[p][m] = _mm512_add_ps(acc[p][m], mins[p][m]);
#pragma GCC unroll 2
  for (int p = 0; p < NP && p * kLanes < n_valid; ++p)
    Store<MR>(acc[p], out + p * kLanes, ldo, bias ? bias + p * kLanes : nullptr,
              std::min<int64_t>(kLanes, n_valid - p * kLanes));
}

// q6_k rows into panels (kK6Block's layout), nsb super-blocks.
void PackK6Panel(const PanelRows& p, int64_t nsb, uint8_t* out) {
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* block = p.rows[0] + sb * sizeof(BlockQ6_K);
    uint8_t* o = out + sb * kK6Block;
    for (int c = 0; c < 4; ++c)
      for (int g = 0; g < 8; ++g)
        _mm512_store_si512(o + 64 * (8 * c + g),
                           _mm512_i32gather_epi32(p.scale_at, block + offsetof(BlockQ6_K, ql) + 32 * c + 4 * g, 1));
    for (int h = 0; h < 2; ++h)
      for (int g = 0; g < 8; ++g)
        _mm512_store_si512(o + kK6Qh + 64 * (8 * h + g),
                           _mm512_i32gather_epi32(p.scale_at, block + offsetof(BlockQ6_K, qh) + 32 * h + 4 * g, 1));
    // d is the block's last 2 bytes: gathered with the two scales before it,
    // so no read passes the block.
    const __m512i dd = _mm512_i32gather_epi32(p.scale_at, block + offsetof(BlockQ6_K, d) - 2, 1);
    _mm512_store_ps(o + kK6D, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16))));
    for (int i = 0; i < kLanes; ++i) {
      const auto* b = reinterpret_cast<const BlockQ6_K*>(p.rows[i] + sb * sizeof(BlockQ6_K));
      for (int sub = 0; sub < 16; ++sub) o[kK6Scales + kLanes * sub + i] = static_cast<uint8_t>(b->scales[sub]);
    }
  }
}

// The codes (q + 32, 0..63) of activation block j (0..7) of a q6_k panel's
// super-block `base`: register g holds values 4g..4g+3 of each row. Block j
// is half h = j / 4, quarter q = j % 4: low nibbles of ql chunk 2h + q % 2
// (high nibbles for q >= 2) and bits 2q, 2q + 1 of qh half h. The shifts are
// 16-bit; each mask keeps the bits its own byte supplies.
template <int J>
HWY_INLINE void K6Codes(const uint8_t* base, __m512i* k) {
  constexpr int h = J / 4, q = J % 4, c = 2 * h + q % 2;
  const __m512i low = _mm512_set1_epi8(0x0f), high = _mm512_set1_epi8(0x30);
  const auto* ql = reinterpret_cast<const __m512i*>(base) + 8 * c;
  const auto* qh = reinterpret_cast<const __m512i*>(base + kK6Qh) + 8 * h;
#pragma GCC unroll 8
  for (int g = 0; g < 8; ++g) {
    const __m512i l = _mm512_load_si512(ql + g), b = _mm512_load_si512(qh + g);
    const __m512i nib = q >= 2 ? _mm512_and_si512(_mm512_srli_epi16(l, 4), low) : _mm512_and_si512(l, low);
    // bits 2q, 2q + 1 to bits 4, 5
    const __m512i two = q == 0   ? _mm512_slli_epi16(b, 4)
                        : q == 1 ? _mm512_slli_epi16(b, 2)
                        : q == 2 ? b
                                 : _mm512_srli_epi16(b, 2);
    k[g] = _mm512_or_si512(nib, _mm512_and_si512(two, high));
  }
}

// One activation block (j) of a q6_k panel against MR rows: its two
// sub-blocks of 16 values have their own scales, so registers 0-3 and 4-7
// make two integer dots, each less 32 x its half's activation sum (`half`:
// 32 x the sums of values 0..15 and 16..31 of every x block).
template <int MR>
HWY_INLINE void K6Block(const uint8_t* base, int j, const __m512i* k, __m512 d, const ActBlock* x, const int32_t* half,
                        int64_t nb, __m512* even, __m512* odd) {
  const auto scales = [&](int sub) {
    return _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
                                _mm_load_si128(reinterpret_cast<const __m128i*>(base + kK6Scales + kLanes * sub)))));
  };
  const __m512 da = scales(2 * j), db = scales(2 * j + 1);
  __m512i dot_a[MR], dot_b[MR];
#pragma GCC unroll 4
  for (int m = 0; m < MR; ++m) {
    dot_a[m] = _mm512_set1_epi32(-half[2 * m * nb]);
    dot_b[m] = _mm512_set1_epi32(-half[2 * m * nb + 1]);
  }
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g)
#pragma GCC unroll 4
    for (int m = 0; m < MR; ++m) {
      int32_t four[2];
      std::memcpy(&four[0], x[m * nb].qs + 4 * g, sizeof four[0]);
      std::memcpy(&four[1], x[m * nb].qs + 4 * (g + 4), sizeof four[1]);
      dot_a[m] = _mm512_dpbusd_epi32(dot_a[m], k[g], _mm512_set1_epi32(four[0]));
      dot_b[m] = _mm512_dpbusd_epi32(dot_b[m], k[g + 4], _mm512_set1_epi32(four[1]));
    }
#pragma GCC unroll 4
  for (int m = 0; m < MR; ++m) {
    const __m512 dx = _mm512_set1_ps(x[m * nb].d);
    even[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot_a[m]), _mm512_mul_ps(da, dx), even[m]);
    odd[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot_b[m]), _mm512_mul_ps(db, dx), odd[m]);
  }
}

// MR activation rows × one q6_k panel: per sub-block s of 16 values, the
// integer dot of (q - 32) with x, then
//   even/odd = fma(float(dot), (d·sc_s)·dx, even/odd)   (s even / s odd)
// and even + odd at the end, as reference_int8_gemm writes it out.
// kFirstPass: each super-block prefetches the next (q4_k's panels gained
// 36-41 from 23-27 GB/s that way).
template <int MR, bool kFirstPass>
HWY_INLINE void K6Tile(const uint8_t* panel, const ActBlock* x, const int32_t* half, int64_t nsb, float* out,
                       int64_t ldo, const float* bias, int64_t n_valid) {
  const int64_t nb = nsb * 8;
  __m512 even[MR], odd[MR];
#pragma GCC unroll 4
  for (int m = 0; m < MR; ++m) even[m] = odd[m] = _mm512_setzero_ps();
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* base = panel + sb * kK6Block;
    if constexpr (kFirstPass) {
      const char* next = reinterpret_cast<const char*>(base + kK6Block);
      for (int l = 0; l < kK6Block; l += 64) _mm_prefetch(next + l, _MM_HINT_T0);
    }
    const __m512 d = _mm512_load_ps(reinterpret_cast<const float*>(base + kK6D));
    const ActBlock* xs = x + sb * 8;
    const int32_t* hs = half + 2 * sb * 8;
    __m512i k[8];
    [&]<int... J>(std::integer_sequence<int, J...>) {  // blocks 0..7, each with its own constant shifts
      ((K6Codes<J>(base, k), K6Block<MR>(base, J, k, d, xs + J, hs + 2 * J, nb, even, odd)), ...);
    }(std::make_integer_sequence<int, 8>{});
  }
#pragma GCC unroll 4
  for (int m = 0; m < MR; ++m) even[m] = _mm512_add_ps(even[m], odd[m]);
  Store<MR>(even, out, ldo, bias, std::min<int64_t>(kLanes, n_valid));
}

template <bool kFive>
void GemmK4Panels(const uint8_t* packed, int64_t N, int64_t K, const ActBlock* x, const int32_t* sums, int64_t M,
                  float* out, int64_t ldo, const float* bias) {
  const int64_t nsb = K / 256, panel = int8_panel_stride(kFive ? DType::Q5_K : DType::Q4_K, K), nb = K / 32;
  const float* xmins = int8_k4_mins(x, sums, M * nb);  // once a call
  for (int64_t n0 = 0; n0 < N; n0 += 2 * kLanes) {
    const uint8_t* panels[2] = {packed + n0 / kLanes * panel, packed + (n0 / kLanes + 1) * panel};
    const float* bn = bias ? bias + n0 : nullptr;
    const bool two = N - n0 > kLanes;
    for_row_tiles_first(M, [&](auto mr, int64_t m, auto first) {
      constexpr int MR = decltype(mr)::value;
      const ActBlock* xm = x + m * nb;
      const float* mm = xmins + m * nb;
      if (two)
        K4Tile<MR, 2, kFive, first.value>(panels, xm, mm, nsb, out + n0 + m * ldo, ldo, bn, N - n0);
      else
        K4Tile<MR, 1, kFive, first.value>(panels, xm, mm, nsb, out + n0 + m * ldo, ldo, bn, N - n0);
    });
  }
}

void GemmK6Panels(const uint8_t* packed, int64_t N, int64_t K, const ActBlock* x, int64_t M, float* out, int64_t ldo,
                  const float* bias) {
  const int64_t nsb = K / 256, panel = int8_panel_stride(DType::Q6_K, K), nb = K / 32;
  const int32_t* half = int8_k6_half_sums(x, M * nb);  // once a call
  for (int64_t n0 = 0; n0 < N; n0 += kLanes) {
    const uint8_t* p = packed + n0 / kLanes * panel;
    const float* bn = bias ? bias + n0 : nullptr;
    for_row_tiles_first(M, [&](auto mr, int64_t m, auto first) {
      K6Tile<decltype(mr)::value, first.value>(p, x + m * nb, half + 2 * m * nb, nsb, out + n0 + m * ldo, ldo,
                                               bn, N - n0);
    });
  }
}
