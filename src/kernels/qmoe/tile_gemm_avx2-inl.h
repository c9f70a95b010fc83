// The packed expert-tile GEMM of kernels/qmoe/simd.cpp for AVX2 CPUs (Zen 2/3,
// Haswell to Alder Lake). Highway compiles simd.cpp once per target, and that
// file includes this one inside the AVX2 target's namespace; it defines
// PackedTileGemm, as tile_gemm_avx3-inl.h does for AVX-512.
//
// The same idea with 16 registers: the 64-row tile is taken 16 rows at a
// time, dequantized into k-major order (16 floats a k) and multiplied by a 6 x 16
// outer-product kernel (12 accumulators, two tile vectors and one broadcast a
// step of k). A 16-row slice of K = 2,048 columns is 128 KiB, so it stays in
// L2 while every 6 activation rows stream over it. Each output is one FMA
// chain over k in order on the values ORT dequantizes, so this kernel gives
// the AVX-512 one's outputs bit for bit.

namespace {  // per target

constexpr int kTileRows = 64;  // weight rows a tile (experts.cpp's)
constexpr int kSlice = 16;     // of them dequantized and multiplied at once
constexpr int kPackedMR = 6;   // activation rows a step: 12 accumulators

// Rows [r0, r0 + 16) of w dequantized as ORT does, (float)(q - midpoint) *
// scale, into packed [K][16]. Eight rows' 16 bytes at a time are transposed
// as 32-bit words, so that a register holds one word of each row, and each
// of the word's codes (8 nibbles or 4 bytes, in column order) is then a shift
// and a mask away from 8 rows' values at one column: no per-row widening and
// no float transposes. (On Zen 3 this took Qwen's prefill from 393 to 335 ms
// against widening each row and transposing 8 x 8 floats; on Zen 5 the same
// idea had measured slower for AVX-512, see tile_gemm_avx3-inl.h.) Requires
// K to be a multiple of 16 bytes and blocks of a multiple of 8 columns (a
// word's columns share a scale).
template <bool FOUR>
void DequantSlice(const QMatrix& w, int64_t r0, float* packed) {
  constexpr int kBits = FOUR ? 4 : 8, kCodes = 32 / kBits;  // codes a word
  const int64_t K = w.cols, blocks = w.scale_blocks, block_cols = K / blocks;
  // The slice's scales by block, 16 rows a block, so that 8 rows' scales are
  // one load.
  static thread_local std::vector<float> scales;
  scales.resize(blocks * kSlice);
  for (int64_t i = 0; i < kSlice; ++i)
    for (int64_t b = 0; b < blocks; ++b) scales[b * kSlice + i] = w.scales[(r0 + i) * blocks + b];
  const __m256i mid = _mm256_set1_epi32(w.midpoint), mask = _mm256_set1_epi32((1 << kBits) - 1);
  const uint8_t* rows = w.data + r0 * w.row_bytes;
  const int64_t rb = w.row_bytes;
  for (int64_t byte = 0; byte < K * kBits / 8; byte += 16)
    for (int64_t half = 0; half < kSlice; half += 8) {
      const uint8_t* p = rows + half * rb + byte;
      __m256i y[4];  // rows i and i + 4
      HWY_UNROLL(4)
      for (int i = 0; i < 4; ++i)
        y[i] = _mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i * rb))),
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + (i + 4) * rb)), 1);
      const __m256i t0 = _mm256_unpacklo_epi32(y[0], y[1]), t1 = _mm256_unpackhi_epi32(y[0], y[1]);
      const __m256i t2 = _mm256_unpacklo_epi32(y[2], y[3]), t3 = _mm256_unpackhi_epi32(y[2], y[3]);
      const __m256i words[4] = {_mm256_unpacklo_epi64(t0, t2), _mm256_unpackhi_epi64(t0, t2),
                                _mm256_unpacklo_epi64(t1, t3), _mm256_unpackhi_epi64(t1, t3)};
      HWY_UNROLL(4)
      for (int wi = 0; wi < 4; ++wi) {
        const int64_t k0 = (byte + 4 * wi) * 8 / kBits;  // the word's first column
        const __m256 s = _mm256_loadu_ps(scales.data() + (k0 / block_cols) * kSlice + half);
        HWY_UNROLL(8)
        for (int j = 0; j < kCodes; ++j) {
          const __m256i q = _mm256_and_si256(_mm256_srli_epi32(words[wi], j * kBits), mask);
          const __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(q, mid)), s);
          _mm256_storeu_ps(packed + (k0 + j) * kSlice + half, v);
        }
      }
    }
}

// C [MR, 16] = A [MR, K] . packed [K, 16].
template <int MR>
HWY_INLINE void PackedRows(const float* A, int64_t lda, const float* packed, int64_t K, float* C, int64_t ldc) {
  __m256 acc[MR][2];
  HWY_UNROLL(6)
  for (int m = 0; m < MR; ++m) acc[m][0] = acc[m][1] = _mm256_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    const float* b = packed + k * kSlice;
    const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
    HWY_UNROLL(6)
    for (int m = 0; m < MR; ++m) {
      const __m256 a = _mm256_broadcast_ss(A + m * lda + k);
      acc[m][0] = _mm256_fmadd_ps(a, b0, acc[m][0]);
      acc[m][1] = _mm256_fmadd_ps(a, b1, acc[m][1]);
    }
  }
  HWY_UNROLL(6)
  for (int m = 0; m < MR; ++m) {
    _mm256_storeu_ps(C + m * ldc, acc[m][0]);
    _mm256_storeu_ps(C + m * ldc + 8, acc[m][1]);
  }
}

}  // namespace

// C [M, 64] = A [M, K] . W [r0, r0 + 64)^T; false (nothing written) when the
// tile is not 64 rows, a row not a multiple of 16 bytes or a scale block not
// a multiple of 8 columns.
bool PackedTileGemm(const QMatrix& w, int64_t r0, int64_t R, const float* A, int64_t M, int64_t lda, float* C,
                    int64_t ldc) {
  const int64_t K = w.cols;
  if (R != kTileRows || (K * w.bits / 8) % 16 != 0 || (K / w.scale_blocks) % 8 != 0) return false;
  static thread_local std::vector<float> packed;
  packed.resize(K * kSlice);
  for (int64_t s = 0; s < kTileRows; s += kSlice) {
    if (w.bits == 4) DequantSlice<true>(w, r0 + s, packed.data());
    else DequantSlice<false>(w, r0 + s, packed.data());
    // The next 16 rows (the next tile's first, on the last slice) are
    // fetched into L2 while these are multiplied: 16 short streams a slice
    // are too many for the hardware prefetcher to pick up in time, and the
    // dequantizing loop otherwise waits on memory.
    const int64_t next = std::min(r0 + s + kSlice, w.rows), next_end = std::min(next + kSlice, w.rows);
    const char* ahead = reinterpret_cast<const char*>(w.data + next * w.row_bytes);
    const int64_t lines = (next_end - next) * w.row_bytes / 64, parts = (M + kPackedMR - 1) / kPackedMR;
    int64_t line = 0;
    simd::for_row_tiles<kPackedMR>(M, [&](auto mr, int64_t m) {
      const int64_t part = m / kPackedMR + 1;  // this tile's share of the lines, spread over the tiles
      for (const int64_t end = lines * part / parts; line < end; ++line) _mm_prefetch(ahead + 64 * line, _MM_HINT_T1);
      PackedRows<decltype(mr)::value>(A + m * lda, lda, packed.data(), K, C + m * ldc + s, ldc);
    });
  }
  return true;
}
