// The packed expert-tile GEMM of kernels/qmoe/simd.cpp for AVX-512 CPUs.
// Highway compiles simd.cpp once per target, and that file includes this one
// inside the AVX-512 targets' namespaces; it defines PackedTileGemm.
//
// A tile of 64 weight rows is dequantized straight into k-major order (64
// floats a k, each 16 x 16 block transposed in registers) so that a vector
// lane is an output column: each step of k loads 4 vectors of the tile,
// broadcasts one value of each of MR activation rows and does 4 MR FMAs,
// with no reduction across lanes at the end. (GemmNT's dot form, the
// fallback, loads as many values as it multiplies and ran at a third of this
// on Zen 5.) Each output is one FMA chain over k in order.

namespace {  // per target

constexpr int kTileCols = 64;  // the tile's rows, as columns of C
constexpr int kPackedMR = 6;   // activation rows a step: 24 accumulators

// 16 rows of 16 floats transposed in registers.
HWY_INLINE void Transpose16(__m512 r[16]) {
  __m512 t[16];
  HWY_UNROLL(8)
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // r[4i + j], 128-bit lane L: column 4L + j of rows 4i .. 4i + 3.
  HWY_UNROLL(4)
  for (int i = 0; i < 4; ++i) {
    r[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  // Column 4L + j gathers lane L of r[j], r[4 + j], r[8 + j], r[12 + j].
  HWY_UNROLL(4)
  for (int j = 0; j < 4; ++j) {
    const __m512 a0 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x88), a1 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xDD);
    const __m512 b0 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x88);
    const __m512 b1 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xDD);
    t[j] = _mm512_shuffle_f32x4(a0, b0, 0x88);
    t[8 + j] = _mm512_shuffle_f32x4(a0, b0, 0xDD);
    t[4 + j] = _mm512_shuffle_f32x4(a1, b1, 0x88);
    t[12 + j] = _mm512_shuffle_f32x4(a1, b1, 0xDD);
  }
  HWY_UNROLL(16)
  for (int i = 0; i < 16; ++i) r[i] = t[i];
}

// Rows [r0, r0 + 64) of w dequantized as ORT does, (float)(q - midpoint) *
// scale, 16 columns of 16 rows at a time, each 16 x 16 block transposed into
// packed [K][64]. Requires K % 16 == 0 and blocks of a multiple of 16
// columns (16 columns then share one scale). (Transposing the packed bytes
// as 32-bit words instead, 8 columns a word, did fewer operations but ran
// 10% slower on Zen 5.)
template <bool FOUR>
void DequantPack(const QMatrix& w, int64_t r0, float* packed) {
  const int64_t K = w.cols, block_cols = K / w.scale_blocks;
  const __m512i mid = _mm512_set1_epi32(w.midpoint), nibble = _mm512_set1_epi32(15);
  // 4 bits: each byte twice, then the even lanes keep the low nibble and the
  // odd ones the high.
  const __m128i twice = _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
  const __m512i shift = _mm512_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4);
  for (int64_t rb = 0; rb < kTileCols; rb += 16)
    for (int64_t k0 = 0; k0 < K; k0 += 16) {
      __m512 v[16];
      HWY_UNROLL(16)
      for (int i = 0; i < 16; ++i) {
        const int64_t r = r0 + rb + i;
        const uint8_t* row = w.data + r * w.row_bytes;
        __m512i q;
        if constexpr (FOUR) {
          const __m128i b = _mm_shuffle_epi8(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + k0 / 2)), twice);
          q = _mm512_and_si512(_mm512_srlv_epi32(_mm512_cvtepu8_epi32(b), shift), nibble);
        } else {
          q = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + k0)));
        }
        const __m512 s = _mm512_set1_ps(w.scales[r * w.scale_blocks + k0 / block_cols]);
        v[i] = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(q, mid)), s);
      }
      Transpose16(v);
      HWY_UNROLL(16)
      for (int i = 0; i < 16; ++i) _mm512_storeu_ps(packed + (k0 + i) * kTileCols + rb, v[i]);
    }
}

template <int MR>
HWY_INLINE void PackedRows(const float* A, int64_t lda, const float* packed, int64_t K, float* C, int64_t ldc) {
  __m512 acc[MR][4];
  HWY_UNROLL(6)
  for (int m = 0; m < MR; ++m)
    HWY_UNROLL(4)
    for (int j = 0; j < 4; ++j) acc[m][j] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    const float* b = packed + k * kTileCols;
    const __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16), b2 = _mm512_loadu_ps(b + 32),
                 b3 = _mm512_loadu_ps(b + 48);
    HWY_UNROLL(6)
    for (int m = 0; m < MR; ++m) {
      const __m512 a = _mm512_set1_ps(A[m * lda + k]);
      acc[m][0] = _mm512_fmadd_ps(a, b0, acc[m][0]);
      acc[m][1] = _mm512_fmadd_ps(a, b1, acc[m][1]);
      acc[m][2] = _mm512_fmadd_ps(a, b2, acc[m][2]);
      acc[m][3] = _mm512_fmadd_ps(a, b3, acc[m][3]);
    }
  }
  HWY_UNROLL(6)
  for (int m = 0; m < MR; ++m)
    HWY_UNROLL(4)
    for (int j = 0; j < 4; ++j) _mm512_storeu_ps(C + m * ldc + 16 * j, acc[m][j]);
}

}  // namespace

// C [M, 64] = A [M, K] . W [r0, r0 + 64)^T; false (nothing written) when the
// tile is not 64 rows or K or a scale block is not a multiple of 16.
bool PackedTileGemm(const QMatrix& w, int64_t r0, int64_t R, const float* A, int64_t M, int64_t lda, float* C,
                    int64_t ldc) {
  const int64_t K = w.cols;
  if (R != kTileCols || K % 16 != 0 || (K / w.scale_blocks) % 16 != 0) return false;
  static thread_local std::vector<float> packed;
  packed.resize(K * kTileCols);
  if (w.bits == 4) DequantPack<true>(w, r0, packed.data());
  else DequantPack<false>(w, r0, packed.data());
  simd::for_row_tiles<kPackedMR>(M, [&](auto mr, int64_t m) {
    PackedRows<decltype(mr)::value>(A + m * lda, lda, packed.data(), K, C + m * ldc, ldc);
  });
  return true;
}
