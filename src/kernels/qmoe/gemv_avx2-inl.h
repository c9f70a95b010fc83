// The 4-bit dot kernel of kernels/qmoe/simd.cpp for AVX2 CPUs. Highway
// compiles simd.cpp once per target, and that file includes this one inside
// the AVX2 target's namespace.
//
// Why a kernel of its own: on AVX2 the generic kernel widens 8 bytes at a
// time (vpmovzxbd, about one a cycle on Zen 3) and spends a mask, a
// subtraction and a conversion on each 8 weights, so it ran at 6-7 GB/s a
// core, half the memory bandwidth two cores share. Here a row is read 32
// bytes at a time as 8 32-bit words, each 8 consecutive columns' nibbles,
// and nibble t of every word is one mask away: (word & 15 << 4t) converts to
// q × 16^t exactly (four significant bits), and meets x's column 8i + t
// scaled by 16^-t, which the prepared x holds in that order. No widening, no
// shifts but one, no subtraction: the midpoint comes off once a row, as
// midpoint × Σ_b scale_b × Σ_{j in b} x_j, with the blocks' sums of x kept
// after the prepared columns. 10 GB/s a core in the same harness.
//
// The numbers are not ORT's to the bit (ORT dequantizes (q - midpoint) ×
// scale and multiplies in f32); they are within the package's tolerance like
// the other dot kernels' (tests/qmoe_passes_test.cpp checks every target).
// Scaling x by 16^-t (at most 2^-24) leaves values above about 1e-31
// normal; smaller activations lose low bits of a term that rounds away. An
// infinite activation gives NaN here (inf minus the midpoint's inf) where
// ORT gives an infinity; NaN gives NaN in both.

namespace {  // per target

constexpr int64_t kWordCols = 64;  // columns a 32-byte step covers

// Whether w's rows take this kernel (and x the layout below): 4 bits, whole
// 32-byte steps, and blocks of 8, 16 or 32 columns or a multiple of 64 (a
// step's 8 lanes then need 8, 4, 2 or 1 scales).
bool WordLayout(const QMatrix& w) {
  if (w.bits != 4 || w.cols <= 0 || w.scale_blocks <= 0 || w.cols % kWordCols != 0) return false;
  const int64_t block_cols = w.cols / w.scale_blocks;
  return block_cols % kWordCols == 0 || block_cols == 8 || block_cols == 16 || block_cols == 32;
}

// out[64c + 8t + i] = x[64c + 8i + t] × 16^-t for t < 7 (the top nibble is
// shifted down instead); then out[cols + b] = Σ x over block b.
void PrepareWords(const QMatrix& w, const float* x, float* out) {
  const int64_t cols = w.cols, block_cols = cols / w.scale_blocks;
  for (int64_t c = 0; c < cols; c += kWordCols)
    for (int t = 0; t < 8; ++t) {
      const float unit = t < 7 ? 1.0f / static_cast<float>(1 << (4 * t)) : 1.0f;  // 16^-t, exact
      for (int i = 0; i < 8; ++i) out[c + 8 * t + i] = x[c + 8 * i + t] * unit;
    }
  for (int64_t b = 0; b < w.scale_blocks; ++b) {
    float sum = 0.0f;
    for (int64_t j = b * block_cols; j < (b + 1) * block_cols; ++j) sum += x[j];
    out[cols + b] = sum;
  }
}

// The scales of a step's 8 words (lane i: columns 8i .. 8i + 7 of the step).
template <int kScales>
HWY_INLINE __m256 StepScales(const float* sc, int64_t step, int64_t steps_a_block) {
  if constexpr (kScales == 8) return _mm256_loadu_ps(sc + 8 * step);
  if constexpr (kScales == 4)
    return _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(sc + 4 * step)),
                                    _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3));
  if constexpr (kScales == 2)
    return _mm256_permutevar8x32_ps(
        _mm256_castps128_ps256(_mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(sc + 2 * step)))),
        _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));
  return _mm256_broadcast_ss(sc + step / steps_a_block);
}

HWY_INLINE float SumLanes(__m256 v) {
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
}

// Σ_b sc[b] × sums[b].
HWY_INLINE float ScaledBlockSums(const float* sc, const float* sums, int64_t blocks) {
  __m256 a = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + 8 <= blocks; b += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(sc + b), _mm256_loadu_ps(sums + b), a);
  float t = SumLanes(a);
  for (; b < blocks; ++b) t += sc[b] * sums[b];
  return t;
}

template <int NX, int kScales>
void DotRowsWords(const QMatrix& w, int64_t r0, int64_t nr, const float* xs, int64_t ldx, float* out, int64_t ldo) {
  const int64_t steps = w.cols / kWordCols, blocks = w.scale_blocks;
  const int64_t steps_a_block = std::max<int64_t>(1, w.cols / blocks / kWordCols);
  const float midpoint = (float)w.midpoint;
  for (int64_t i = 0; i < nr; ++i) {
    const uint8_t* row = w.data + (r0 + i) * w.row_bytes;
    const float* sc = w.scales + (r0 + i) * blocks;
    __m256 acc[NX];
    HWY_UNROLL(4)
    for (int m = 0; m < NX; ++m) acc[m] = _mm256_setzero_ps();
    for (int64_t c = 0; c < steps; ++c) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 32 * c));
      __m256 even[NX], odd[NX];  // two chains of sums a step
      HWY_UNROLL(8)
      for (int t = 0; t < 8; ++t) {
        const __m256i q = t < 7 ? _mm256_and_si256(v, _mm256_set1_epi32(15 << (4 * t))) : _mm256_srli_epi32(v, 28);
        const __m256 code = _mm256_cvtepi32_ps(q);
        HWY_UNROLL(4)
        for (int m = 0; m < NX; ++m) {
          const __m256 x = _mm256_loadu_ps(xs + m * ldx + kWordCols * c + 8 * t);
          __m256& sum = t % 2 ? odd[m] : even[m];
          sum = t < 2 ? _mm256_mul_ps(code, x) : _mm256_fmadd_ps(code, x, sum);
        }
      }
      const __m256 scale = StepScales<kScales>(sc, c, steps_a_block);
      HWY_UNROLL(4)
      for (int m = 0; m < NX; ++m) acc[m] = _mm256_fmadd_ps(_mm256_add_ps(even[m], odd[m]), scale, acc[m]);
    }
    HWY_UNROLL(4)
    for (int m = 0; m < NX; ++m) {
      const float* x = xs + m * ldx;
      out[m * ldo + i] = SumLanes(acc[m]) - midpoint * ScaledBlockSums(sc, x + w.cols, blocks);
    }
  }
}

template <int kScales>
void DotRowsWordsN(const QMatrix& w, int64_t r0, int64_t nr, const float* xs, int64_t ldx, int nx, float* out,
                   int64_t ldo) {
  switch (nx) {
    case 1: return DotRowsWords<1, kScales>(w, r0, nr, xs, ldx, out, ldo);
    case 2: return DotRowsWords<2, kScales>(w, r0, nr, xs, ldx, out, ldo);
    case 3: return DotRowsWords<3, kScales>(w, r0, nr, xs, ldx, out, ldo);
    default: return DotRowsWords<4, kScales>(w, r0, nr, xs, ldx, out, ldo);
  }
}

}  // namespace

// The rows' dots when WordLayout(w) holds.
void QGemvWords(const QMatrix& w, int64_t r0, int64_t nr, const float* xs, int64_t ldx, int nx, float* out,
                int64_t ldo) {
  switch (kWordCols / std::min(kWordCols, w.cols / w.scale_blocks)) {
    case 8: return DotRowsWordsN<8>(w, r0, nr, xs, ldx, nx, out, ldo);
    case 4: return DotRowsWordsN<4>(w, r0, nr, xs, ldx, nx, out, ldo);
    case 2: return DotRowsWordsN<2>(w, r0, nr, xs, ldx, nx, out, ldo);
    default: return DotRowsWordsN<1>(w, r0, nr, xs, ldx, nx, out, ldo);
  }
}
