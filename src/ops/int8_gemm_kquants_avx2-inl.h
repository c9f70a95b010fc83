// The k-quant panels (q4_k, q5_k, q6_k) of the AVX2 section of
// ops/int8_gemm.cpp: int8_gemm_avx2-inl.h includes this inside its per-target
// anonymous namespace, after its helpers (kLanes, kHalf, Broadcast4,
// KeepInRegister). The panel layouts are int8_gemm_kquants-inl.h's, byte for
// byte (its comments describe them); a 64-byte register there is two 8-row
// halves here. Each output follows reference_int8_gemm's arithmetic.
//
// The codes are unsigned (q4_k 0..15, q5_k 0..31, q6_k 0..63), so maddubs
// takes them as they are; its 16-bit pair sums (at most 2 × 63 × 128) are
// added in 16 bits for as many groups of 4 values as cannot overflow
// (kGroupsIn16), then widened by madd.

constexpr int kK4Block = 2432, kK5Block = 2944;
constexpr int kK4D = 2048, kK4Dmin = 2112, kK4Scales = 2176, kK4Mins = 2304, kK5Qh = 2432;
constexpr int kK6Block = 3392;
constexpr int kK6Qh = 2048, kK6Scales = 3072, kK6D = 3328;

// Groups of 4 codes whose maddubs sums stay below 32768 in 16 bits.
constexpr int kGroupsIn16(int max_code) { return 32767 / (2 * max_code * 128); }

// For each of H halves and MR activation rows, Σ over groups g in [g0,
// g0 + G) of code(h, g) · x_m's bytes 4g..4g+3, exact, per lane (row):
// code(h, g) gives group g's 4 codes of each of half h's 8 rows, and xq[m]
// is row m's block. Each group of x is broadcast once and meets every
// half's codes as they are made; unpacking a block's 8 code registers
// before the products kept 16 registers live, and the spills were a quarter
// of a q6_k tile's instructions (one row took twice q4_k's time). In L2,
// this way, a q6_k row of [1024, 2048] took 72-75 µs instead of 87-89, and
// 8 rows 1.26-1.31x less time; q4_k measured the same or faster.
template <int G, int kMaxCode, int H, int MR, class Code>
HWY_INLINE void DotGroups(const Code& code, const int8_t* const* xq, int g0, __m256i (*total)[MR]) {
  constexpr int kRun = kGroupsIn16(kMaxCode);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i run[H][MR];
#pragma GCC unroll 8
  for (int i = 0; i < G; ++i) {
    const int g = g0 + i;
    __m256i xs[MR];
#pragma GCC unroll 4
    for (int m = 0; m < MR; ++m) xs[m] = Broadcast4(xq[m] + 4 * g);
#pragma GCC unroll 2
    for (int h = 0; h < H; ++h) {
      const __m256i k = code(h, g);
#pragma GCC unroll 4
      for (int m = 0; m < MR; ++m) {
        const __m256i p = _mm256_maddubs_epi16(k, xs[m]);
        run[h][m] = i % kRun == 0 ? p : _mm256_add_epi16(run[h][m], p);
        KeepInRegister(run[h][m]);
        if (i % kRun == kRun - 1 || i == G - 1) {
          const __m256i wide = _mm256_madd_epi16(run[h][m], ones);
          total[h][m] = i < kRun ? wide : _mm256_add_epi32(total[h][m], wide);
        }
      }
    }
  }
}

// The first pass over a panel (half 0, the first rows) comes from memory,
// where the hardware prefetchers alone fall behind the k-quants' longer
// arithmetic, so each super-block asks for the next (the VNNI kernels do the
// same), an eighth of it a step. All of it at once (38-53 lines) left a lone
// product from memory at 1.36-1.37x a plain read's time for q4_k (2 rows
// 1.59x) and 2x for q6_k; eighths, 1.19-1.21x (1.29x) and 1.1-1.3x. In
// decode steps (alternating `generate --profile` runs on Q4_K_M): q6_k
// [2048, 5632] 0.59-0.61 -> 0.39-0.42 ms, q4_k [5632, 2048] 0.33-0.40 ->
// 0.27-0.30 ms. (Session 27 measured q4_k slower with eighths, most
// likely because the compiler had moved them; see Untraced.) The super-block
// after the next measured the same.
//
// p, hidden from the compiler's tracking of values: loads through it are
// not merged with the same loads in an earlier step of an unrolled loop.
// Left to itself, GCC kept q6_k's code bytes (each read by two or four of a
// super-block's steps) in registers across steps and spilled them to the
// stack: 492 of the one- and two-row tiles' 4342 instructions a super-block
// were stores there (126 of 3709 with this). The bytes are in L1; loading
// them again costs less: in L2, one row 65-67 -> 62-64 µs, two rows
// 114-126 -> 92-93 µs ([1024, 2048], one thread). q5_k's high bits (the
// same 16 registers for all eight steps of a super-block) spilled the same
// way: one row 119-136 -> 94-108 µs, two rows 206-229 -> 137-161 µs. q4_k's
// tiles, which reuse a load for two steps and spill little, measured the
// same or slower with it.
HWY_INLINE const uint8_t* Untraced(const uint8_t* p) {
  asm("" : "+r"(p));
  return p;
}

// The same, and to the compiler p depends on `after`, a sum the previous
// step wrote, so that a fetch through it stays between the steps. Without
// that, GCC hoisted all eight parts of q4_k's unrolled super-block to its
// start, and a lone q4_k row from memory took 1.6-2.2x a read, worse than
// one fetch of the whole.
HWY_INLINE const uint8_t* Untraced(const uint8_t* p, __m256 after) {
  asm("" : "+r"(p) : "x"(after));
  return p;
}

// Part `part` of kFetchParts of the super-block after the one at `base`
// (`block` bytes each), asked into L1 after the step that wrote `after`.
constexpr int kFetchParts = 8;
HWY_INLINE void FetchPartOfNext(const uint8_t* base, int block, int part, __m256 after) {
  FetchLines(Untraced(base, after) + block + part * (block / kFetchParts), block / kFetchParts);
}

HWY_INLINE __m256 LoadBytesAsFloat(const uint8_t* p, bool is_signed) {
  const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  return _mm256_cvtepi32_ps(is_signed ? _mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b));
}

// Copies 4-byte groups of 16 rows into panel registers: out + 64 g + 4 i
// gets bytes src_offset + 4 g .. of row i, for g < groups.
HWY_INLINE void PackGroups(const uint8_t* const* rows, int64_t src_offset, int groups, uint8_t* out) {
  for (int g = 0; g < groups; ++g)
    for (int i = 0; i < kLanes; ++i) std::memcpy(out + 64 * g + 4 * i, rows[i] + src_offset + 4 * g, 4);
}

template <bool kFive>
void PackK4Panels(const uint8_t* w, int64_t stride, int64_t N, int64_t nsb, int64_t first, int64_t last,
                  int64_t panel, uint8_t* out) {
  using Block = std::conditional_t<kFive, BlockQ5_K, BlockQ4_K>;
  for (int64_t p = first; p < last; ++p) {
    const uint8_t* rows[kLanes];
    for (int i = 0; i < kLanes; ++i) rows[i] = w + std::min<int64_t>(p * kLanes + i, N - 1) * stride;
    for (int64_t sb = 0; sb < nsb; ++sb) {
      const int64_t at = sb * static_cast<int64_t>(sizeof(Block));
      uint8_t* o = out + p * panel + sb * (kFive ? kK5Block : kK4Block);
      for (int j = 0; j < 4; ++j) PackGroups(rows, at + offsetof(Block, qs) + 32 * j, 8, o + 64 * 8 * j);
      if constexpr (kFive) PackGroups(rows, at + offsetof(Block, qh), 8, o + kK5Qh);
      for (int i = 0; i < kLanes; ++i) {
        const auto* b = reinterpret_cast<const Block*>(rows[i] + at);
        const float d = f16_to_f32(b->d), dmin = f16_to_f32(b->dmin);
        std::memcpy(o + kK4D + 4 * i, &d, 4);
        std::memcpy(o + kK4Dmin + 4 * i, &dmin, 4);
        for (int sub = 0; sub < 8; ++sub)
          k4_scale_min(sub, b->scales, o + kK4Scales + kLanes * sub + i, o + kK4Mins + kLanes * sub + i);
      }
    }
  }
}

void PackK6Panels(const uint8_t* w, int64_t stride, int64_t N, int64_t nsb, int64_t first, int64_t last, int64_t panel,
                  uint8_t* out) {
  for (int64_t p = first; p < last; ++p) {
    const uint8_t* rows[kLanes];
    for (int i = 0; i < kLanes; ++i) rows[i] = w + std::min<int64_t>(p * kLanes + i, N - 1) * stride;
    for (int64_t sb = 0; sb < nsb; ++sb) {
      const int64_t at = sb * static_cast<int64_t>(sizeof(BlockQ6_K));
      uint8_t* o = out + p * panel + sb * kK6Block;
      for (int c = 0; c < 4; ++c) PackGroups(rows, at + offsetof(BlockQ6_K, ql) + 32 * c, 8, o + 64 * 8 * c);
      for (int h = 0; h < 2; ++h) PackGroups(rows, at + offsetof(BlockQ6_K, qh) + 32 * h, 8, o + kK6Qh + 64 * 8 * h);
      for (int i = 0; i < kLanes; ++i) {
        const auto* b = reinterpret_cast<const BlockQ6_K*>(rows[i] + at);
        const float d = f16_to_f32(b->d);
        std::memcpy(o + kK6D + 4 * i, &d, 4);
        for (int sub = 0; sub < 16; ++sub) o[kK6Scales + kLanes * sub + i] = static_cast<uint8_t>(b->scales[sub]);
      }
    }
  }
}

// MR activation rows × halves [half0, half0 + H) of one q4_k (q5_k: kFive)
// panel, all super-blocks: per sub-block s, acc = fma(float(dot),
// (d·sc_s)·dx, acc) and mins = fma(dmin·m_s, -(dx·Σx), mins); acc + mins at
// the end.
template <int H, int MR, bool kFive>
HWY_INLINE void K4HalfTile(const uint8_t* panel, int64_t nsb, int half0, bool stream, const ActBlock* x,
                           const float* xmins, float* out, int64_t ldo, const float* bias, int64_t lanes) {
  const int64_t nb = nsb * 8;
  const __m256i low = _mm256_set1_epi8(0x0f), one = _mm256_set1_epi8(1);
  __m256 acc[H][MR], mins[H][MR];
  ZeroSums<H, MR>(acc);
  ZeroSums<H, MR>(mins);
  for (int64_t sb = 0; sb < nsb; ++sb) {
    constexpr int kBlock = kFive ? kK5Block : kK4Block;
    const uint8_t* base = panel + sb * kBlock;
#pragma GCC unroll 8
    for (int sub = 0; sub < 8; ++sub) {
      if (stream) FetchPartOfNext(base, kBlock, sub, acc[0][0]);
      const int8_t* xq[MR];
#pragma GCC unroll 4
      for (int m = 0; m < MR; ++m) xq[m] = x[m * nb + sb * 8 + sub].qs;
      const uint8_t* codes = kFive ? Untraced(base) : base;
      const auto code = [&](int h, int g) {
        const int half = half0 + h;
        const __m256i r =
            _mm256_load_si256(reinterpret_cast<const __m256i*>(codes + 64 * (8 * (sub / 2) + g) + 32 * half));
        const __m256i k = _mm256_and_si256(sub % 2 ? _mm256_srli_epi16(r, 4) : r, low);
        if constexpr (!kFive) return k;
        // bit `sub` of qh to bit 4 of each code
        const __m256i qh = _mm256_load_si256(reinterpret_cast<const __m256i*>(codes + kK5Qh + 64 * g + 32 * half));
        const __m256i bit = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(sub)), one);
        return _mm256_or_si256(k, _mm256_slli_epi16(bit, 4));
      };
      __m256i dot[H][MR];
      DotGroups<8, kFive ? 31 : 15, H, MR>(code, xq, 0, dot);
#pragma GCC unroll 2
      for (int h = 0; h < H; ++h) {
        const int half = half0 + h;
        const __m256 d = _mm256_load_ps(reinterpret_cast<const float*>(base + kK4D) + kHalf * half);
        const __m256 dmin = _mm256_load_ps(reinterpret_cast<const float*>(base + kK4Dmin) + kHalf * half);
        const __m256 ds = _mm256_mul_ps(d, LoadBytesAsFloat(base + kK4Scales + kLanes * sub + kHalf * half, false));
        const __m256 dm =
            _mm256_mul_ps(dmin, LoadBytesAsFloat(base + kK4Mins + kLanes * sub + kHalf * half, false));
#pragma GCC unroll 4
        for (int m = 0; m < MR; ++m) {
          const ActBlock& xb = x[m * nb + sb * 8 + sub];
          acc[h][m] =
              _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[h][m]), _mm256_mul_ps(ds, _mm256_set1_ps(xb.d)), acc[h][m]);
          mins[h][m] = _mm256_fmadd_ps(dm, _mm256_set1_ps(xmins[m * nb + sb * 8 + sub]), mins[h][m]);
        }
      }
    }
  }
  StoreHalves<H, MR>(acc, half0, out, ldo, bias, lanes, mins);
}

// MR activation rows × halves [half0, half0 + H) of one q6_k panel: per
// sub-block s of 16 values, the dot of (q - 32) with x, then even/odd =
// fma(float(dot), (d·sc_s)·dx, even/odd) for s even/odd; even + odd at the
// end. `halfsums` holds 32 × the sums of values 0..15 and 16..31 of every x
// block.
template <int H, int MR>
HWY_INLINE void K6HalfTile(const uint8_t* panel, int64_t nsb, int half0, bool stream, const ActBlock* x,
                           const int32_t* halfsums, float* out, int64_t ldo, const float* bias, int64_t lanes) {
  const int64_t nb = nsb * 8;
  const __m256i low = _mm256_set1_epi8(0x0f), high = _mm256_set1_epi8(0x30);
  __m256 even[H][MR], odd[H][MR];
  ZeroSums<H, MR>(even);
  ZeroSums<H, MR>(odd);
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* base = panel + sb * kK6Block;
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {  // block j: half h = j / 4, quarter q = j % 4
      if (stream) FetchPartOfNext(base, kK6Block, j, even[0][0]);
      const int hq = j / 4, q = j % 4, c = 2 * hq + q % 2;
      const int8_t* xq[MR];
#pragma GCC unroll 4
      for (int m = 0; m < MR; ++m) xq[m] = x[m * nb + sb * 8 + j].qs;
      const uint8_t* codes = Untraced(base);
      const auto code = [&](int h, int g) {
        const int half = half0 + h;
        const __m256i l = _mm256_load_si256(reinterpret_cast<const __m256i*>(codes + 64 * (8 * c + g) + 32 * half));
        const __m256i b =
            _mm256_load_si256(reinterpret_cast<const __m256i*>(codes + kK6Qh + 64 * (8 * hq + g) + 32 * half));
        const __m256i nib = _mm256_and_si256(q >= 2 ? _mm256_srli_epi16(l, 4) : l, low);
        // bits 2q, 2q + 1 of qh to bits 4, 5 (a 16-bit shift; the mask keeps each byte's own)
        const __m256i moved = q == 0   ? _mm256_slli_epi16(b, 4)
                              : q == 1 ? _mm256_slli_epi16(b, 2)
                              : q == 2 ? b
                                       : _mm256_srli_epi16(b, 2);
        return _mm256_or_si256(nib, _mm256_and_si256(moved, high));
      };
#pragma GCC unroll 2
      for (int s = 0; s < 2; ++s) {  // sub-block 2j + s: groups 4s..4s+3 (values 16s..16s+15)
        __m256i total[H][MR];
        DotGroups<4, 63, H, MR>(code, xq, 4 * s, total);
#pragma GCC unroll 2
        for (int h = 0; h < H; ++h) {
          const int half = half0 + h;
          const __m256 d = _mm256_load_ps(reinterpret_cast<const float*>(base + kK6D) + kHalf * half);
          const __m256 dsc =
              _mm256_mul_ps(d, LoadBytesAsFloat(base + kK6Scales + kLanes * (2 * j + s) + kHalf * half, true));
#pragma GCC unroll 4
          for (int m = 0; m < MR; ++m) {
            const ActBlock& xb = x[m * nb + sb * 8 + j];
            const __m256i dot =
                _mm256_sub_epi32(total[h][m], _mm256_set1_epi32(halfsums[2 * (m * nb + sb * 8 + j) + s]));
            __m256& acc = s == 0 ? even[h][m] : odd[h][m];
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(dsc, _mm256_set1_ps(xb.d)), acc);
          }
        }
      }
    }
  }
  StoreHalves<H, MR>(even, half0, out, ldo, bias, lanes, odd);
}

// tile(halves, mr, panel, half, stream, m, n0, lanes) over each 16-row
// panel of N: up to 2 activation rows take both halves in one pass (as
// PanelRowsProduct does, so the panel streams in while both halves' sums
// are worked, instead of the second pass leaving memory idle); more go in
// tiles of MR rows over each half, `stream` true for the first pass over a
// panel, which reads it from memory.
template <class Tile>
void ForEachHalfTile(const uint8_t* packed, int64_t panel, int64_t N, int64_t M, Tile&& tile) {
  using One = std::integral_constant<int, 1>;
  using Two = std::integral_constant<int, 2>;
  for (int64_t n0 = 0; n0 < N; n0 += kLanes) {
    const uint8_t* p = packed + n0 / kLanes * panel;
    const int64_t lanes = std::min<int64_t>(kLanes, N - n0);
    if (M <= 2) {
      if (M == 2) tile(Two(), Two(), p, 0, true, 0, n0, lanes);
      else tile(Two(), One(), p, 0, true, 0, n0, lanes);
      continue;
    }
    for (int half = 0; half < 2 && kHalf * half < lanes; ++half)
      for_row_tiles(M, [&](auto mr, int64_t m) { tile(One(), mr, p, half, half == 0 && m == 0, m, n0, lanes); });
  }
}

template <bool kFive>
void GemmK4Panels(const uint8_t* packed, int64_t N, int64_t K, const ActBlock* x, const int32_t* sums, int64_t M,
                  float* out, int64_t ldo, const float* bias) {
  const int64_t nsb = K / 256, nb = K / 32;
  const float* xmins = int8_k4_mins(x, sums, M * nb);  // once a call
  ForEachHalfTile(packed, int8_panel_stride(kFive ? DType::Q5_K : DType::Q4_K, K), N, M,
                  [&](auto halves, auto mr, const uint8_t* p, int half, bool stream, int64_t m, int64_t n0,
                      int64_t lanes) {
                    K4HalfTile<decltype(halves)::value, decltype(mr)::value, kFive>(
                        p, nsb, half, stream, x + m * nb, xmins + m * nb, out + n0 + m * ldo, ldo,
                        bias ? bias + n0 : nullptr, lanes);
                  });
}

void GemmK6Panels(const uint8_t* packed, int64_t N, int64_t K, const ActBlock* x, int64_t M, float* out, int64_t ldo,
                  const float* bias) {
  const int64_t nsb = K / 256, nb = K / 32;
  const int32_t* halves = int8_k6_half_sums(x, M * nb);  // once a call
  ForEachHalfTile(packed, int8_panel_stride(DType::Q6_K, K), N, M,
                  [&](auto count, auto mr, const uint8_t* p, int half, bool stream, int64_t m, int64_t n0,
                      int64_t lanes) {
                    K6HalfTile<decltype(count)::value, decltype(mr)::value>(
                        p, nsb, half, stream, x + m * nb, halves + 2 * m * nb, out + n0 + m * ldo, ldo,
                        bias ? bias + n0 : nullptr, lanes);
                  });
}
