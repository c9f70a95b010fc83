// ops/int8_dot.h and the run-time dispatch of ops/simd.h: every target this
// machine supports is forced in turn (Highway's SetSupportedTargetsForTest),
// runs its own code, and computes the integer sums the definition gives; the
// int8 path stays within int8 rounding of the f32 path; a target the CPU
// lacks is never offered.
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "ops/gemm.h"
#include "ops/int8_dot.h"
#include "ops/int8_gemm.h"
#include "ops/simd.h"

namespace bonfire {
namespace {

struct Case {
  DType t;
  int64_t n;
};

std::vector<float> random_values(int64_t n, std::mt19937& rng, float scale) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// The definition, in int64 and double: per block, (sum of integer products)
// times the weight's and the activation's scales.
double reference_int8_dot(DType t, const std::vector<uint8_t>& row, const std::vector<simd::ActBlock>& x,
                          int64_t n) {
  double total = 0;
  for (int64_t b = 0; b < n / 32; ++b) {
    int64_t s = 0;
    float dw;
    if (t == DType::Q8_0) {
      const auto& blk = reinterpret_cast<const BlockQ8_0*>(row.data())[b];
      dw = f16_to_f32(blk.d);
      for (int j = 0; j < 32; ++j) s += int64_t(blk.qs[j]) * x[b].qs[j];
    } else {
      const auto& blk = reinterpret_cast<const BlockQ4_0*>(row.data())[b];
      dw = f16_to_f32(blk.d);
      for (int j = 0; j < 16; ++j) {
        s += (int64_t(blk.qs[j] & 15) - 8) * x[b].qs[j];
        s += (int64_t(blk.qs[j] >> 4) - 8) * x[b].qs[j + 16];
      }
    }
    total += double(s) * double(dw) * double(x[b].d);
  }
  return total;
}

std::string target_name(int64_t target) { return hwy::TargetName(target); }

bool is_avx2_or_better(int64_t target) {
  return target == HWY_AVX2 || target == HWY_AVX3 || target == HWY_AVX3_DL;
}

class ForEachTarget : public ::testing::Test {
 protected:
  void TearDown() override { hwy::SetSupportedTargetsForTest(0); }
};

TEST_F(ForEachTarget, OnlyTargetsTheCpuHasAreOffered) {
  const int64_t supported = hwy::SupportedTargets();
  const auto targets = hwy::SupportedAndGeneratedTargets();
  ASSERT_FALSE(targets.empty());
  for (int64_t t : targets) EXPECT_TRUE(supported & t) << target_name(t) << " offered but not supported";
}

TEST_F(ForEachTarget, Int8DotIsTheIntegerSumOnEveryTarget) {
  std::mt19937 rng(7);
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    const std::string path = simd::int8_dot_path();
    EXPECT_EQ(path, is_avx2_or_better(target) ? "avx2" : "portable") << target_name(target);
    for (const Case c : {Case{DType::Q8_0, 32}, Case{DType::Q8_0, 96}, Case{DType::Q8_0, 2048},
                         Case{DType::Q4_0, 32}, Case{DType::Q4_0, 160}, Case{DType::Q4_0, 2048}}) {
      const auto w = random_values(c.n, rng, 0.05f);
      const auto x = random_values(c.n, rng, 2.0f);
      std::vector<uint8_t> row(row_bytes(c.t, c.n));
      quantize_row(c.t, w.data(), row.data(), c.n);
      std::vector<simd::ActBlock> xq(c.n / 32);
      ASSERT_TRUE(simd::quantize_activations(x.data(), c.n, xq.data()));
      const double want = reference_int8_dot(c.t, row, xq, c.n);
      const float got = simd::dot_int8(c.t, row.data(), xq.data(), c.n);
      EXPECT_NEAR(got, want, 1e-5 * (1 + std::fabs(want)))
          << target_name(target) << " " << dtype_name(c.t) << " n=" << c.n;
    }
  }
}

TEST_F(ForEachTarget, QuantizingIsTheScalarDefinitionOnEveryTarget) {
  // Random blocks, and blocks whose largest value is 127 so the scale is 1
  // and values k + 0.5 land exactly on halves (lround: away from zero).
  std::mt19937 rng(9);
  std::vector<float> x = random_values(32 * 40, rng, 3.0f);
  for (int b = 0; b < 8; ++b) {
    float* xb = &x[b * 32];
    xb[0] = (b % 2 ? -127.0f : 127.0f);
    for (int j = 1; j < 32; ++j) xb[j] = float((j * 7 + b) % 120) - 60.0f + 0.5f;
  }
  std::fill(x.begin() + 32 * 9, x.begin() + 32 * 10, 0.0f);  // an all-zero block
  std::vector<simd::ActBlock> want(40);
  for (int b = 0; b < 40; ++b) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[b * 32 + j]));
    want[b].d = amax / 127.0f;
    const float inv = want[b].d > 0 ? 1.0f / want[b].d : 0.0f;
    for (int j = 0; j < 32; ++j) want[b].qs[j] = static_cast<int8_t>(std::lround(x[b * 32 + j] * inv));
  }
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    std::vector<simd::ActBlock> got(40);
    ASSERT_TRUE(simd::quantize_activations(x.data(), 32 * 40, got.data()));
    for (int b = 0; b < 40; ++b) {
      EXPECT_EQ(got[b].d, want[b].d) << target_name(target) << " block " << b;
      for (int j = 0; j < 32; ++j)
        ASSERT_EQ(got[b].qs[j], want[b].qs[j]) << target_name(target) << " block " << b << " value " << j;
    }
    std::vector<float> bad = x;
    bad[32 * 5 + 3] = std::numeric_limits<float>::infinity();
    EXPECT_FALSE(simd::quantize_activations(bad.data(), 32 * 40, got.data())) << target_name(target);
    bad[32 * 5 + 3] = std::nanf("");
    EXPECT_FALSE(simd::quantize_activations(bad.data(), 32 * 40, got.data())) << target_name(target);
  }
}

TEST_F(ForEachTarget, KQuantsAreTheDequantizedSumOnEveryTarget) {
  // q4_k, q5_k and q6_k rows (the k-quant mixes such as llama.cpp's q4_k_m)
  // from random bytes in ggml's layout, with sane super-block scales: the
  // int8 dot must equal the dequantized weights (dequantize_row, ggml's
  // formulas) against the quantized activations, in double.
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> byte(0, 255);
  const int64_t n = 512;
  for (DType t : {DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    std::vector<uint8_t> row(row_bytes(t, n));
    for (auto& b : row) b = static_cast<uint8_t>(byte(rng));
    for (int64_t s = 0; s < n / 256; ++s) {
      if (t == DType::Q6_K) {
        reinterpret_cast<BlockQ6_K*>(row.data())[s].d = f32_to_f16(0.01f * (s + 1));
      } else {  // d and dmin lead both q4_k and q5_k blocks
        uint16_t* d = reinterpret_cast<uint16_t*>(row.data() + s * row_bytes(t, 256));
        d[0] = f32_to_f16(0.002f * (s + 1));
        d[1] = f32_to_f16(0.001f * (s + 2));
      }
    }
    std::vector<float> deq(n);
    dequantize_row(t, row.data(), deq.data(), n);
    const auto x = random_values(n, rng, 1.0f);
    std::vector<simd::ActBlock> xq(n / 32);
    ASSERT_TRUE(simd::quantize_activations(x.data(), n, xq.data()));
    std::vector<int32_t> sums(n / 32);
    simd::activation_sums(xq.data(), n / 32, sums.data());
    double want = 0, mag = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double xi = double(xq[i / 32].d) * xq[i / 32].qs[i % 32];
      want += double(deq[i]) * xi;
      mag += std::fabs(double(deq[i]) * xi);
    }
    EXPECT_TRUE(simd::int8_dot_supported(t, n)) << dtype_name(t);
    EXPECT_FALSE(simd::int8_dot_supported(t, 96)) << dtype_name(t);
    EXPECT_EQ(simd::int8_dot_needs_sums(t), t != DType::Q6_K) << dtype_name(t);
    for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
      hwy::SetSupportedTargetsForTest(target);
      EXPECT_NEAR(simd::dot_int8(t, row.data(), xq.data(), n, sums.data()), want, 1e-5 * mag)
          << target_name(target) << " " << dtype_name(t);
    }
    hwy::SetSupportedTargetsForTest(0);
  }
}

TEST_F(ForEachTarget, RowsAtOnceAreEachRowsOwnDotToTheBit) {
  // dot_int8_rows (a batched step's rows against one weight row) must give
  // each row exactly what dot_int8 gives it alone, for every row count the
  // q6_k kernel tiles (4 at a time, then the rest) and the other formats.
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> byte(0, 255);
  const int64_t n = 512, nb = n / 32;
  for (DType t : {DType::Q6_K, DType::Q4_K, DType::Q5_K, DType::Q8_0}) {
    std::vector<uint8_t> row(row_bytes(t, n));
    if (t == DType::Q8_0) {
      quantize_row(t, random_values(n, rng, 0.05f).data(), row.data(), n);
    } else {
      for (auto& b : row) b = static_cast<uint8_t>(byte(rng));
      for (int64_t s = 0; s < n / 256; ++s) {
        uint16_t* d = reinterpret_cast<uint16_t*>(row.data() + s * row_bytes(t, 256) +
                                                  (t == DType::Q6_K ? offsetof(BlockQ6_K, d) : 0));
        d[0] = f32_to_f16(0.01f * (s + 1));
        if (t != DType::Q6_K) d[1] = f32_to_f16(0.001f * (s + 2));  // dmin of q4_k and q5_k
      }
    }
    const int64_t M = 9;
    const auto x = random_values(M * n, rng, 1.5f);
    std::vector<simd::ActBlock> xq(M * nb);
    ASSERT_TRUE(simd::quantize_activations(x.data(), M * n, xq.data()));
    std::vector<int32_t> sums(M * nb);
    simd::activation_sums(xq.data(), M * nb, sums.data());
    for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
      hwy::SetSupportedTargetsForTest(target);
      for (int64_t rows = 1; rows <= M; ++rows) {
        std::vector<float> got(rows * 3, -1.0f);
        simd::dot_int8_rows(t, row.data(), xq.data(), n, rows, got.data(), 3, sums.data());
        for (int64_t m = 0; m < rows; ++m) {
          const float want = simd::dot_int8(t, row.data(), xq.data() + m * nb, n, sums.data() + m * nb);
          EXPECT_EQ(got[m * 3], want) << target_name(target) << " " << dtype_name(t) << " rows " << rows << " row " << m;
        }
      }
    }
    hwy::SetSupportedTargetsForTest(0);
  }
}

TEST_F(ForEachTarget, ExtremeBytesDoNotSaturate) {
  // q8_0 weights of -128 (a file may hold them) against activations of ±127.
  std::vector<uint8_t> row(row_bytes(DType::Q8_0, 64));
  auto* b = reinterpret_cast<BlockQ8_0*>(row.data());
  std::vector<simd::ActBlock> xq(2);
  for (int k = 0; k < 2; ++k) {
    b[k].d = f32_to_f16(1.0f);
    xq[k].d = 1.0f;
    for (int j = 0; j < 32; ++j) {
      b[k].qs[j] = k == 0 ? -128 : 127;
      xq[k].qs[j] = k == 0 ? -127 : 127;
    }
  }
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    EXPECT_FLOAT_EQ(simd::dot_int8(DType::Q8_0, row.data(), xq.data(), 64), 32 * 128 * 127 + 32 * 127 * 127)
        << target_name(target);
  }
}

// dot_row and dequantize_row (ops/simd.h) of `row` on every target against
// the scalar dequantizer, which holds ggml's values (quant_test): the
// dequantized values bit for bit, the dot within f32 reassociation.
void expect_f32_paths_agree(DType t, const std::vector<uint8_t>& row, const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> deq(n);
  dequantize_row(t, row.data(), deq.data(), n);
  double want = 0, mag = 0;
  for (int64_t i = 0; i < n; ++i) {
    want += double(deq[i]) * x[i];
    mag += std::fabs(double(deq[i]) * x[i]);
  }
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    EXPECT_NEAR(simd::dot_row(t, row.data(), x.data(), n), want, 1e-5 * mag)
        << target_name(target) << " " << dtype_name(t);
    std::vector<float> got(n);
    simd::dequantize_row(t, row.data(), got.data(), n);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(got[i], deq[i]) << target_name(target) << " " << dtype_name(t) << " value " << i;
  }
}

TEST_F(ForEachTarget, F32PathRowsAgreeOnEveryTarget) {
  std::mt19937 rng(11);
  const int64_t n = 512;
  const auto x = random_values(n, rng, 1.0f);
  for (DType t : {DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0}) {
    const auto w = random_values(n, rng, 0.1f);
    std::vector<uint8_t> row(row_bytes(t, n));
    quantize_row(t, w.data(), row.data(), n);
    expect_f32_paths_agree(t, row, x);
  }
}

// A k-quant row (q4_k, q5_k, q6_k) of random blocks: every byte pattern is
// a valid block, so random codes, scales and high bits, with the f16 super-
// block scales set to finite values of either sign.
std::vector<uint8_t> random_kquant_row(DType t, int64_t n, std::mt19937& rng) {
  std::vector<uint8_t> row(row_bytes(t, n));
  for (auto& byte : row) byte = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> scale(-0.02f, 0.02f);
  for (int64_t i = 0; i < n / 256; ++i) {
    uint8_t* block = row.data() + i * row_bytes(t, 256);
    const uint16_t d = f32_to_f16(scale(rng)), dmin = f32_to_f16(scale(rng));
    if (t == DType::Q6_K) {
      std::memcpy(block + offsetof(BlockQ6_K, d), &d, 2);
    } else {
      std::memcpy(block, &d, 2);  // q4_k and q5_k start with d and dmin
      std::memcpy(block + 2, &dmin, 2);
    }
  }
  return row;
}

// The k-quants' vector dequantizer (the --exact path's,
// ops/dequant_kquants-inl.h) on every target.
TEST_F(ForEachTarget, KQuantRowsDequantizeBitForBitOnEveryTarget) {
  std::mt19937 rng(5);
  const auto x = random_values(1024, rng, 1.0f);
  for (DType t : {DType::Q4_K, DType::Q5_K, DType::Q6_K})
    for (int trial = 0; trial < 4; ++trial) expect_f32_paths_agree(t, random_kquant_row(t, 1024, rng), x);
}

TEST(Int8Activations, NonFiniteActivationsAreRefused) {
  std::vector<float> x(64, 1.0f);
  std::vector<simd::ActBlock> xq(2);
  EXPECT_TRUE(simd::quantize_activations(x.data(), 64, xq.data()));
  x[40] = NAN;
  EXPECT_FALSE(simd::quantize_activations(x.data(), 64, xq.data()));
  x[40] = INFINITY;
  EXPECT_FALSE(simd::quantize_activations(x.data(), 64, xq.data()));
}

TEST(Int8Activations, GemvStaysNearTheF32PathAndCarriesNaN) {
  std::mt19937 rng(3);
  const int64_t K = 1024, N = 96;
  for (DType t : {DType::Q8_0, DType::Q4_0}) {
    const auto wf = random_values(N * K, rng, 0.05f);
    std::vector<uint8_t> w(row_bytes(t, K) * N);
    for (int64_t r = 0; r < N; ++r) quantize_row(t, &wf[r * K], &w[r * row_bytes(t, K)], K);
    WeightRows rows{t, w.data(), N, K};
    auto x = random_values(2 * K, rng, 1.0f);
    std::vector<float> exact(2 * N), int8(2 * N);
    set_int8_activations(Int8Activations::Off);
    gemm_nt(x.data(), 2, K, rows, exact.data(), N);
    set_int8_activations(Int8Activations::Small);
    gemm_nt(x.data(), 2, K, rows, int8.data(), N);
    EXPECT_EQ(int8, exact) << "outside an Int8Scope the ops keep f32 activations";
    const Int8Scope scope;
    gemm_nt(x.data(), 2, K, rows, int8.data(), N);
    double err = 0, mag = 0;
    for (int64_t i = 0; i < 2 * N; ++i) {
      err += std::fabs(int8[i] - exact[i]);
      mag += std::fabs(exact[i]);
    }
    EXPECT_GT(err, 0) << "the int8 path did not run for " << dtype_name(t);
    EXPECT_LT(err / mag, 0.01) << dtype_name(t);
    x[5] = NAN;
    gemm_nt(x.data(), 2, K, rows, int8.data(), N);
    for (int64_t n = 0; n < N; ++n) ASSERT_TRUE(std::isnan(int8[n])) << "row 0 must carry the NaN";
    for (int64_t n = 0; n < N; ++n) ASSERT_FALSE(std::isnan(int8[N + n]));
  }
  set_int8_activations(Int8Activations::Small);
}

// The rule a worker announces (ops/gemm.h's Int8Rows, hello "int8Rows") is
// the one its products follow on every target, and a checker's
// Int8RowsScope computes as another CPU's rule does: None is the f32 path,
// Few int8 below 16 rows only, Any int8 at every row count, each row then
// exactly as it comes alone.
TEST_F(ForEachTarget, Int8RowsRuleDecidesEveryProduct) {
  std::mt19937 rng(17);
  const int64_t K = 256, N = 64, M = 20;
  const auto wf = random_values(N * K, rng, 0.05f);
  std::vector<uint8_t> w(row_bytes(DType::Q8_0, K) * N);
  for (int64_t r = 0; r < N; ++r)
    quantize_row(DType::Q8_0, &wf[r * K], &w[r * row_bytes(DType::Q8_0, K)], K);
  const WeightRows weight{DType::Q8_0, w.data(), N, K};
  const auto x = random_values(M * K, rng, 1.0f);
  auto product = [&](int64_t m) {
    std::vector<float> out(m * N);
    gemm_nt(x.data(), m, K, weight, out.data(), N);
    return out;
  };
  set_int8_activations(Int8Activations::Off);
  const auto exact = product(M);
  set_int8_activations(Int8Activations::Small);
  const Int8Scope scope;
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    const std::string name = target_name(target);
    const Int8Rows own = int8_rows_rule();
    EXPECT_EQ(own, simd::int8_gemm_available(DType::Q8_0, K) ? Int8Rows::Any : Int8Rows::Few) << name;
    std::vector<float> alone(M * N);  // each row a one-row int8 product
    {
      const Int8RowsScope any(Int8Rows::Any);
      for (int64_t m = 0; m < M; ++m) gemm_nt(x.data() + m * K, 1, K, weight, alone.data() + m * N, N);
      EXPECT_EQ(product(M), alone) << name << ": Any's rows differ from each row alone";
    }
    EXPECT_NE(alone, exact) << name << ": the int8 path did not run";
    {
      const Int8RowsScope few(Int8Rows::Few);
      EXPECT_EQ(product(M), exact) << name << ": Few took int8 at " << M << " rows";
      const auto three = product(3);
      EXPECT_TRUE(std::equal(three.begin(), three.end(), alone.begin())) << name << ": Few's 3 rows are not int8";
    }
    {
      const Int8RowsScope none(Int8Rows::None);
      EXPECT_EQ(product(M), exact) << name << ": None took int8";
    }
    EXPECT_EQ(product(M), own == Int8Rows::Any ? alone : exact) << name << ": the announced rule is not the one run";
  }
  hwy::SetSupportedTargetsForTest(0);
}

// --simd (limit_simd_target) must reach kernels whose dispatch already
// chose a better target, or a forced target would still run the better one.
TEST(SimdLimit, ReachesKernelsThatAlreadyDispatched) {
  if (!simd::int8_gemm_available(DType::Q8_0, 32) || !(hwy::SupportedTargets() & HWY_SSE4))
    GTEST_SKIP() << "needs a CPU with the tiled int8 kernel (AVX2 or better)";
  EXPECT_EQ(int8_rows_rule(), Int8Rows::Any);
  std::string why;
  ASSERT_TRUE(simd::limit_simd_target("avx2", &why)) << why;
  EXPECT_EQ(simd::simd_target(), "avx2");
  EXPECT_STREQ(simd::int8_dot_path(), "avx2");
  EXPECT_TRUE(simd::int8_gemm_available(DType::Q8_0, 32)) << "AVX2 has its own tiles";
  ASSERT_TRUE(simd::limit_simd_target("sse4", &why)) << why;
  EXPECT_FALSE(simd::int8_gemm_available(DType::Q8_0, 32)) << "the tiles still run under --simd sse4";
  EXPECT_STREQ(simd::int8_dot_path(), "portable");
  EXPECT_EQ(int8_rows_rule(), Int8Rows::Few);
  hwy::DisableTargets(0);
  hwy::SetSupportedTargetsForTest(0);
  EXPECT_TRUE(simd::int8_gemm_available(DType::Q8_0, 32)) << "the best target did not come back";
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// The attention and activation helpers of ops/simd.h on every target: a
// key's dot is the double-precision sum within f32 rounding and the same
// bits whichever keys come with it, the weighted values give exactly the
// one-at-a-time bits, and
// the vector exp and sigmoid stay within a few ulp of the double-precision
// definition, with NaN, infinities and huge values as the scalar code has them.
TEST_F(ForEachTarget, AttentionAndActivationHelpersOnEveryTarget) {
  std::mt19937 rng(9);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    const std::string name = target_name(target);
    for (const int64_t d : {64, 80, 13}) {
      const int64_t n = 11, stride = d + 3;
      const auto q = random_values(d, rng, 1.0f), k = random_values(n * stride, rng, 1.0f);
      std::vector<float> got(n);
      simd::dot_rows(q.data(), k.data(), stride, n, d, got.data());
      for (int64_t i = 0; i < n; ++i) {
        double want = 0, scale = 0;
        for (int64_t j = 0; j < d; ++j) {
          want += double(q[j]) * k[i * stride + j];
          scale += std::fabs(double(q[j]) * k[i * stride + j]);
        }
        EXPECT_NEAR(got[i], want, 1e-6 * scale) << name << " d=" << d << " key " << i;
        // A key's score is its own: alone, or in another group of keys, the same bits.
        float alone;
        simd::dot_rows(q.data(), k.data() + i * stride, stride, 1, d, &alone);
        EXPECT_TRUE(same_bits(got[i], alone)) << name << " d=" << d << " key " << i;
        if (i + 2 < n) {
          float shifted[2];
          simd::dot_rows(q.data(), k.data() + (i + 1) * stride, stride, 2, d, shifted);
          EXPECT_TRUE(same_bits(got[i + 1], shifted[0])) << name << " d=" << d << " key " << i + 1;
        }
      }
      // Three heads over the same rows (a pair and one alone), zero weights
      // skipped, each head exactly its own row-by-row sum.
      const int64_t heads = 3;
      auto w = random_values(heads * n, rng, 1.0f);
      w[3] = 0.0f, w[n + 5] = 0.0f, w[2 * n + 1] = 0.0f;
      w[7] = w[n + 7] = 0.0f;  // a row neither head of the pair weighs
      std::vector<float> acc = random_values(heads * d, rng, 1.0f), want = acc;
      simd::weighted_rows(w.data(), n, heads, k.data(), stride, n, d, acc.data(), d);
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < n; ++i)
          if (w[h * n + i] != 0.0f) simd::axpy_f32(w[h * n + i], k.data() + i * stride, want.data() + h * d, d);
      for (int64_t j = 0; j < heads * d; ++j)
        EXPECT_TRUE(same_bits(acc[j], want[j])) << name << " d=" << d << " at " << j;
    }
    std::vector<float> x = random_values(37, rng, 8.0f);
    for (const float v : {0.0f, -0.0f, 1e-30f, 30.0f, -30.0f, 100.0f, -100.0f, 1e30f, -1e30f, inf, -inf}) x.push_back(v);
    const int64_t n = static_cast<int64_t>(x.size());
    x.push_back(nan);  // apart: a NaN's max is not defined
    for (const bool times_x : {false, true}) {
      std::vector<float> out(x.size());
      simd::sigmoid_f32(x.data(), out.data(), n + 1, 1.0f, times_x);
      for (int64_t i = 0; i < n; ++i) {
        const double s = 1.0 / (1.0 + std::exp(-double(x[i])));
        const double want = times_x ? double(x[i]) * s : s;
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(out[i])) << name << " x=" << x[i];
        } else if (std::isinf(want)) {
          EXPECT_EQ(out[i], want) << name << " x=" << x[i];
        } else {
          EXPECT_NEAR(out[i], want, 4e-7 * std::fabs(want) + 1e-37) << name << " x=" << x[i] << " times_x=" << times_x;
        }
      }
      EXPECT_TRUE(std::isnan(out[n])) << name << ": NaN stays NaN";
    }
    std::vector<float> e(x.begin(), x.begin() + 37);
    for (auto& v : e) v = -std::fabs(v);
    e.push_back(-inf);
    const std::vector<float> before = e;
    const double sum = simd::exp_shifted(e.data(), static_cast<int64_t>(e.size()), 0.5f);
    double want_sum = 0;
    for (size_t i = 0; i < e.size(); ++i) {
      const double want = std::exp(double(before[i] - 0.5f));  // the shift is a float subtraction
      want_sum += want;
      EXPECT_NEAR(e[i], want, 3e-7 * want) << name << " x=" << before[i];
    }
    EXPECT_NEAR(sum, want_sum, 1e-6 * want_sum) << name;
    // A sampled row's weights: every target within 1 ulp of std::exp in
    // double, 1 at the max (+inf too), 0 for -inf; 39 values end in a tail.
    for (const float mx : {8.0f, inf}) {
      std::vector<float> v(x.begin(), x.begin() + 37);
      for (auto& a : v) a = std::min(a, 8.0f);
      v.push_back(-inf), v.push_back(mx);
      std::vector<double> w(v.size(), -1.0);
      simd::softmax_weights_f64(v.data(), static_cast<int64_t>(v.size()), mx, 0.7, w.data());
      for (size_t i = 0; i < v.size(); ++i) {
        const double want = v[i] == mx ? 1.0 : std::exp((double(v[i]) - mx) / 0.7);
        EXPECT_NEAR(w[i], want, 2.3e-16 * want) << name << " v=" << v[i] << " mx=" << mx;
      }
    }
    bool saw_nan = false;
    std::vector<float> sc = {1.0f, -3.0f, 7.5f, 2.0f, 0.25f};
    EXPECT_EQ(simd::scale_max(sc.data(), 5, 2.0f, &saw_nan), 15.0f) << name;
    EXPECT_FALSE(saw_nan);
    EXPECT_EQ(sc[1], -6.0f);
    sc.assign(20, 1.0f);
    sc[2] = nan;  // in a full vector on every target
    simd::scale_max(sc.data(), 20, 1.0f, &saw_nan);
    EXPECT_TRUE(saw_nan) << name;
  }
}

}  // namespace
}  // namespace bonfire
