// ops/int8_gemm.h and ops/half_gemm.h, the kernels over weight panels. The
// tiled int8 kernel (VNNI or AVX2) computes exactly the arithmetic its header promises (bit
// for bit against reference_int8_gemm) at every row count, panel remainder
// and weight format; a row does not depend on the rows beside it; and the
// promised arithmetic is the integer definition within float rounding. The
// f16/bf16 kernel matches its reference likewise, from weights repacked the
// way a model load repacks them. The int8 kernels' tests skip on CPUs
// without AVX2 and the f16 kernel's without AVX-512 (the dispatch never
// offers them there); the references' run everywhere.
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "model/weights.h"
#include "ops/gemm.h"
#include "ops/half_gemm.h"
#include "ops/int8_dot.h"
#include "ops/int8_gemm.h"

namespace bonfire {
namespace {

struct Weights {
  DType t;
  int64_t n, k, stride;
  std::vector<uint8_t> bytes;
};

// Quantized from random floats; for q8_0 some bytes are then set to -128,
// which no honest quantizer writes but a file may hold.
Weights random_weights(DType t, int64_t n, int64_t k, std::mt19937& rng) {
  std::normal_distribution<float> d(0.0f, 0.05f);
  std::vector<float> f(n * k);
  for (auto& v : f) v = d(rng);
  Weights w{t, n, k, row_bytes(t, k), {}};
  w.bytes.resize(w.stride * n);
  for (int64_t r = 0; r < n; ++r) quantize_row(t, f.data() + r * k, w.bytes.data() + r * w.stride, k);
  if (t == DType::Q8_0) {
    std::uniform_int_distribution<int64_t> pick(0, n * (k / 32) - 1);
    for (int i = 0; i < 8; ++i) {
      const int64_t blk = pick(rng);
      auto* b = reinterpret_cast<BlockQ8_0*>(w.bytes.data() + (blk / (k / 32)) * w.stride) + blk % (k / 32);
      b->qs[i * 3 % 32] = -128;
    }
  }
  return w;
}

std::vector<simd::ActBlock> random_activations(int64_t m, int64_t k, std::mt19937& rng) {
  std::normal_distribution<float> d(0.0f, 2.0f);
  std::vector<float> x(m * k);
  for (auto& v : x) v = d(rng);
  for (int64_t i = 0; i < k; i += 7) x[i] = 0;  // zero runs, and one all-zero block below
  if (k >= 64) std::fill(x.begin() + 32, x.begin() + 64, 0.0f);
  std::vector<simd::ActBlock> q(m * k / 32);
  for (int64_t r = 0; r < m; ++r) EXPECT_TRUE(simd::quantize_activations(x.data() + r * k, k, &q[r * k / 32]));
  return q;
}

std::vector<float> run_kernel(const Weights& w, const std::vector<simd::ActBlock>& x, int64_t M, int64_t ldo,
                              const float* bias) {
  std::vector<int32_t> sums(x.size());
  simd::int8_block_sums(x.data(), static_cast<int64_t>(x.size()), sums.data());
  std::vector<float> out(M * ldo, -7.0f);  // the pad columns must stay untouched
  simd::int8_gemm(w.t, w.bytes.data(), w.stride, w.n, w.k, {x.data(), sums.data(), M}, out.data(), ldo, bias);
  return out;
}

WeightRows weight_rows_of(const Weights& w) { return WeightRows{w.t, w.bytes.data(), w.n, w.k}; }

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

TEST(Int8Gemm, KernelIsTheReferenceBitForBit) {
  if (!simd::int8_gemm_available(DType::Q8_0, 32)) GTEST_SKIP() << "no tiled int8 kernel on this CPU (AVX2 or AVX-512 VNNI)";
  std::mt19937 rng(11);
  int checked = 0;
  for (DType t : {DType::Q8_0, DType::Q4_0})
    for (int64_t N : {1, 15, 16, 17, 33, 64})
      for (int64_t K : {32, 96, 2048})
        for (int64_t M : {1, 3, 4, 6, 8, 9, 13})
          for (bool with_bias : {false, true}) {
            const Weights w = random_weights(t, N, K, rng);
            const auto x = random_activations(M, K, rng);
            std::vector<float> bias(N);
            for (int64_t n = 0; n < N; ++n) bias[n] = 0.1f * float(n) - 1.0f;
            const int64_t ldo = N + 3;
            const auto got = run_kernel(w, x, M, ldo, with_bias ? bias.data() : nullptr);
            std::vector<float> want(M * ldo, -7.0f);
            simd::reference_int8_gemm(t, w.bytes.data(), w.stride, N, K, x.data(), M, want.data(), ldo,
                                      with_bias ? bias.data() : nullptr);
            for (int64_t i = 0; i < M * ldo; ++i) {
              ASSERT_TRUE(same_bits(got[i], want[i]))
                  << dtype_name(t) << " N=" << N << " K=" << K << " M=" << M << " bias=" << with_bias << " at row "
                  << i / ldo << " col " << i % ldo << ": " << got[i] << " vs " << want[i];
            }
            ++checked;
          }
  EXPECT_EQ(checked, 2 * 6 * 3 * 7 * 2);
}

// q4_k, q5_k or q6_k rows as llama.cpp lays them out, from random bytes with
// sane super-block scales (the project writes no k-quants; the KQuantGolden
// test reads llama.cpp's own files).
Weights random_kquant_weights(DType t, int64_t n, int64_t k, std::mt19937& rng) {
  std::uniform_int_distribution<int> byte(0, 255);
  Weights w{t, n, k, row_bytes(t, k), {}};
  w.bytes.resize(w.stride * n);
  for (auto& b : w.bytes) b = static_cast<uint8_t>(byte(rng));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t sb = 0; sb < k / 256; ++sb) {
      if (t == DType::Q6_K) {
        reinterpret_cast<BlockQ6_K*>(w.bytes.data() + r * w.stride)[sb].d = f32_to_f16(0.0002f * (1 + (r + sb) % 5));
        continue;
      }
      // d and dmin lead both q4_k and q5_k blocks
      uint16_t* d = reinterpret_cast<uint16_t*>(w.bytes.data() + r * w.stride + sb * row_bytes(t, 256));
      d[0] = f32_to_f16(0.001f * (1 + (r + sb) % 5));
      d[1] = f32_to_f16(0.0005f * (1 + (r * 3 + sb) % 7));
    }
  return w;
}

// q4_k, q5_k and q6_k panels: the kernel (packed at load, or two panels packed
// per call) is the reference bit for bit, and the reference is ggml's
// dequantized weights against the int8 activations within float rounding.
TEST(Int8Gemm, KQuantPanelsAreTheReferenceBitForBit) {
  if (!simd::int8_gemm_available(DType::Q4_K, 256)) GTEST_SKIP() << "no tiled int8 kernel on this CPU (AVX2 or AVX-512 VNNI)";
  std::mt19937 rng(21);
  for (DType t : {DType::Q4_K, DType::Q5_K, DType::Q6_K})
  for (int64_t N : {16, 37, 80})
    for (int64_t K : {256, 768})
      for (int64_t M : {1, 3, 5, 11}) {
        const Weights w = random_kquant_weights(t, N, K, rng);
        const auto x = random_activations(M, K, rng);
        std::vector<float> want(M * N);
        simd::reference_int8_gemm(t, w.bytes.data(), w.stride, N, K, x.data(), M, want.data(), N, nullptr);
        const auto got = run_kernel(w, x, M, N, nullptr);
        std::vector<uint8_t> packed(simd::int8_packed_bytes(t, N, K) + 64);
        uint8_t* aligned = packed.data() + (64 - reinterpret_cast<uintptr_t>(packed.data()) % 64) % 64;
        simd::int8_pack(t, w.bytes.data(), w.stride, N, K, 0, (N + 15) / 16, aligned);
        std::vector<int32_t> sums(x.size());
        simd::int8_block_sums(x.data(), static_cast<int64_t>(x.size()), sums.data());
        std::vector<float> from_packed(M * N);
        simd::int8_gemm_packed(t, aligned, N, K, {x.data(), sums.data(), M}, from_packed.data(), N, nullptr);
        for (int64_t i = 0; i < M * N; ++i) {
          ASSERT_TRUE(same_bits(got[i], want[i])) << dtype_name(t) << " N " << N << " K " << K << " M " << M << " at "
                                                  << i << ": " << got[i] << " vs " << want[i];
          ASSERT_TRUE(same_bits(from_packed[i], want[i])) << "packed, " << dtype_name(t) << " N " << N << " K " << K
                                                          << " M " << M;
        }
        // The reference against the definition: dequantized weights (ggml's
        // formulas, dequantize_row) times the quantized activations, in double.
        std::vector<float> deq(K);
        for (int64_t n = 0; n < N; n += 7) {
          dequantize_row(t, w.bytes.data() + n * w.stride, deq.data(), K);
          for (int64_t m = 0; m < M; ++m) {
            double exact = 0, mag = 0;
            for (int64_t k = 0; k < K; ++k) {
              const simd::ActBlock& b = x[m * (K / 32) + k / 32];
              exact += double(deq[k]) * b.d * b.qs[k % 32];
              mag += std::fabs(double(deq[k]) * b.d * b.qs[k % 32]);
            }
            EXPECT_NEAR(want[m * N + n], exact, 1e-5 * mag + 1e-6) << dtype_name(t) << " row " << n << " m " << m;
          }
        }
      }
}

// Every code of w at its largest (q8_0: -128) and every activation at 127
// with the sign that makes the products largest: the 16-bit sums of the
// AVX2 kernels are closest to saturating here.
void make_extreme(Weights& w, std::vector<simd::ActBlock>& x) {
  for (int64_t r = 0; r < w.n; ++r) {
    uint8_t* row = w.bytes.data() + r * w.stride;
    for (int64_t b = 0; b < w.k / (w.t == DType::Q8_0 || w.t == DType::Q4_0 ? 32 : 256); ++b) {
      if (w.t == DType::Q8_0) std::memset(reinterpret_cast<BlockQ8_0*>(row)[b].qs, 0x80, 32);
      if (w.t == DType::Q4_0) std::memset(reinterpret_cast<BlockQ4_0*>(row)[b].qs, 0xff, 16);
      if (w.t == DType::Q4_K) std::memset(reinterpret_cast<BlockQ4_K*>(row)[b].qs, 0xff, 128);
      if (w.t == DType::Q5_K) {
        std::memset(reinterpret_cast<BlockQ5_K*>(row)[b].qs, 0xff, 128);
        std::memset(reinterpret_cast<BlockQ5_K*>(row)[b].qh, 0xff, 32);
      }
      if (w.t == DType::Q6_K) {
        std::memset(reinterpret_cast<BlockQ6_K*>(row)[b].ql, 0xff, 128);
        std::memset(reinterpret_cast<BlockQ6_K*>(row)[b].qh, 0xff, 64);
      }
    }
  }
  for (auto& blk : x) std::memset(blk.qs, w.t == DType::Q8_0 ? -127 : 127, 32);
}

// Every tiled target this CPU has (AVX3_DL's VNNI tiles; AVX3's and AVX2's
// byte multiply-adds), forced in turn: each is the reference bit for bit in
// every format, with random and with extreme bytes. (The tests above run
// the best target only.)
TEST(Int8Gemm, EveryTiledTargetIsTheReferenceBitForBit) {
  int targets = 0, checked = 0;
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    if (!simd::int8_gemm_available(DType::Q8_0, 32)) continue;
    ++targets;
    std::mt19937 rng(23);
    for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q5_K, DType::Q6_K})
      for (bool extreme : {false, true})
        for (int64_t M : {1, 2, 5}) {
          const int64_t N = 24, K = 512;
          const bool blocks = t == DType::Q8_0 || t == DType::Q4_0;
          Weights w = blocks ? random_weights(t, N, K, rng) : random_kquant_weights(t, N, K, rng);
          auto x = random_activations(M, K, rng);
          if (extreme) make_extreme(w, x);
          const auto got = run_kernel(w, x, M, N, nullptr);
          std::vector<float> want(M * N);
          simd::reference_int8_gemm(t, w.bytes.data(), w.stride, N, K, x.data(), M, want.data(), N, nullptr);
          for (int64_t i = 0; i < M * N; ++i)
            ASSERT_TRUE(same_bits(got[i], want[i]))
                << hwy::TargetName(target) << " " << dtype_name(t) << " extreme=" << extreme << " M=" << M << " at "
                << i << ": " << got[i] << " vs " << want[i];
          ++checked;
        }
  }
  hwy::SetSupportedTargetsForTest(0);
  if (targets == 0) GTEST_SKIP() << "no tiled int8 kernel on this CPU (AVX2 or AVX-512 VNNI)";
  EXPECT_EQ(checked, targets * 5 * 2 * 3);
}

TEST(Int8Gemm, ARowDoesNotDependOnTheRowsBesideIt) {
  if (!simd::int8_gemm_available(DType::Q8_0, 32)) GTEST_SKIP() << "no tiled int8 kernel on this CPU (AVX2 or AVX-512 VNNI)";
  std::mt19937 rng(12);
  const int64_t N = 80, K = 512, M = 11;
  const Weights w = random_weights(DType::Q8_0, N, K, rng);
  const auto x = random_activations(M, K, rng);
  const auto all = run_kernel(w, x, M, N, nullptr);
  for (int64_t m = 0; m < M; ++m) {
    const std::vector<simd::ActBlock> one(x.begin() + m * K / 32, x.begin() + (m + 1) * K / 32);
    const auto alone = run_kernel(w, one, 1, N, nullptr);
    for (int64_t n = 0; n < N; ++n) ASSERT_TRUE(same_bits(alone[n], all[m * N + n])) << "row " << m << " col " << n;
  }
}

TEST(Int8Gemm, ProductsThroughGemmNtTakeTheKernelAtAnyRowCount) {
  if (!simd::int8_gemm_available(DType::Q8_0, 32)) GTEST_SKIP() << "no tiled int8 kernel on this CPU (AVX2 or AVX-512 VNNI)";
  std::mt19937 rng(13);
  const int64_t N = 96, K = 256, M = 40;  // past the 16 rows where AVX2 machines go to BLAS
  const Weights w = random_weights(DType::Q4_0, N, K, rng);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> x(M * K);
  for (auto& v : x) v = d(rng);
  std::vector<simd::ActBlock> q(M * K / 32);
  for (int64_t m = 0; m < M; ++m) ASSERT_TRUE(simd::quantize_activations(x.data() + m * K, K, &q[m * K / 32]));
  std::vector<float> want(M * N), got(M * N);
  simd::reference_int8_gemm(DType::Q4_0, w.bytes.data(), w.stride, N, K, q.data(), M, want.data(), N, nullptr);
  {
    Int8Scope scope;
    gemm_nt(x.data(), M, K, weight_rows_of(w), got.data(), N);
  }
  for (int64_t i = 0; i < M * N; ++i) ASSERT_TRUE(same_bits(got[i], want[i])) << i;
  // Outside a generation's scope the product keeps its f32 meaning.
  gemm_nt(x.data(), M, K, weight_rows_of(w), got.data(), N);
  int differ = 0;
  for (int64_t i = 0; i < M * N; ++i) differ += !same_bits(got[i], want[i]);
  EXPECT_GT(differ, M * N / 2);
}

TEST(Int8Gemm, WeightsRepackedAtLoadGiveTheSameBits) {
  if (!simd::int8_gemm_available(DType::Q8_0, 32)) GTEST_SKIP() << "no tiled int8 kernel on this CPU (AVX2 or AVX-512 VNNI)";
  std::mt19937 rng(15);
  // 3-D like a mixture's experts: [4, 48, 256], each expert's rows
  // starting a panel, so each expert's product reads its own panels.
  const int64_t E = 4, C = 48, K = 256;
  for (const DType dt : {DType::Q8_0, DType::Q4_0}) {
    const Weights w = random_weights(dt, E * C, K, rng);
    WeightStore store;
    store.add("w", Tensor::view(dt, {E, C, K}, const_cast<uint8_t*>(w.bytes.data()), nullptr), "test");
    EXPECT_EQ(store.repack_for_cpu(), simd::int8_packed_bytes(dt, E * C, K));
    const Tensor& t = *store.find("w");
    ASSERT_TRUE(t.repacked);
    for (const int64_t M : {1, 3, 7, 8, 12}) {
      const auto x = random_activations(M, K, rng);
      std::vector<int32_t> sums(x.size());
      simd::int8_block_sums(x.data(), static_cast<int64_t>(x.size()), sums.data());
      for (int64_t e = 0; e < E; ++e) {
        const WeightRows rows = weight_rows(t, e * C, C);
        ASSERT_NE(rows.panels, nullptr) << "expert " << e << " starts a panel";
        std::vector<float> got(M * C), want(M * C);
        simd::int8_gemm_packed(dt, rows.panels, C, K, {x.data(), sums.data(), M}, got.data(), C, nullptr);
        simd::reference_int8_gemm(dt, rows.data, w.stride, C, K, x.data(), M, want.data(), C, nullptr);
        for (int64_t i = 0; i < M * C; ++i)
          ASSERT_TRUE(same_bits(got[i], want[i])) << dtype_name(dt) << " M=" << M << " e=" << e << " " << i;
      }
    }
    EXPECT_EQ(weight_rows(t, 8, 16).panels, nullptr) << "rows that do not start a panel have none";
  }
  // Formats no kernel takes are left alone.
  WeightStore store;
  std::vector<uint8_t> f32(16 * 64 * 4);
  store.add("f", Tensor::view(DType::F32, {16, 64}, f32.data(), nullptr), "test");
  EXPECT_EQ(store.repack_for_cpu(), 0);
  EXPECT_FALSE(store.find("f")->repacked);
}

// gemm_nt_siblings (a layer's q, k and v in one split over the threads)
// gives each product gemm_nt's bits, with weights of different heights
// (one not a multiple of 32 rows), a non-finite x (every product then goes
// on in f32, one by one), and outside a generation's scope.
TEST(Int8Gemm, SiblingProductsAreEachProductsBits) {
  if (!simd::int8_gemm_available(DType::Q8_0, 32)) GTEST_SKIP() << "no tiled int8 kernel on this CPU (AVX2 or AVX-512 VNNI)";
  std::mt19937 rng(17);
  const int64_t K = 256;
  const int64_t heights[] = {96, 48, 16};
  WeightStore store;
  std::vector<Weights> ws;
  for (size_t i = 0; i < 3; ++i) {
    ws.push_back(random_weights(DType::Q8_0, heights[i], K, rng));
    store.add("w" + std::to_string(i),
              Tensor::view(DType::Q8_0, {heights[i], K}, const_cast<uint8_t*>(ws[i].bytes.data()), nullptr), "test");
  }
  store.repack_for_cpu();
  std::vector<WeightRows> rows;
  for (size_t i = 0; i < 3; ++i) rows.push_back(weight_rows(*store.find("w" + std::to_string(i))));
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (const int64_t M : {1, 5, 8}) {
    for (const bool finite : {true, false}) {
      for (const bool scoped : {true, false}) {
        std::vector<float> x(M * K);
        for (auto& v : x) v = d(rng);
        if (!finite) x[K + 3 < M * K ? K + 3 : 3] = NAN;
        std::vector<std::vector<float>> want(3), got(3);
        std::vector<float*> outs;
        for (size_t i = 0; i < 3; ++i) {
          want[i].resize(M * heights[i]);
          got[i].assign(M * heights[i], -1.0f);
          outs.push_back(got[i].data());
        }
        {
          std::optional<Int8Scope> scope;
          if (scoped) scope.emplace();
          for (size_t i = 0; i < 3; ++i) gemm_nt(x.data(), M, K, rows[i], want[i].data(), heights[i]);
          gemm_nt_siblings(x.data(), M, K, rows, outs);
        }
        for (size_t i = 0; i < 3; ++i)
          for (int64_t j = 0; j < M * heights[i]; ++j)
            ASSERT_TRUE(same_bits(got[i][j], want[i][j]))
                << "product " << i << " M=" << M << " finite=" << finite << " scoped=" << scoped << " at " << j;
      }
    }
  }
}

TEST(HalfGemm, PackedKernelIsTheReferenceBitForBit) {
  if (!simd::half_gemm_available(DType::F16)) GTEST_SKIP() << "no AVX-512 on this CPU";
  std::mt19937 rng(16);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (DType t : {DType::F16, DType::BF16})
    for (int64_t N : {1, 16, 17, 40})
      for (int64_t K : {1, 7, 64})
        for (int64_t M : {1, 4, 5, 9}) {
          std::vector<float> wf(N * K), x(M * (K + 2));
          for (auto& v : wf) v = d(rng);
          for (auto& v : x) v = d(rng);
          const int64_t stride = row_bytes(t, K);
          std::vector<uint8_t> w(N * stride);
          for (int64_t r = 0; r < N; ++r) quantize_row(t, &wf[r * K], &w[r * stride], K);
          WeightStore store;
          store.add("w", Tensor::view(t, {N, K}, w.data(), nullptr), "test");
          store.repack_for_cpu();
          const WeightRows rows = weight_rows(*store.find("w"));
          if (N < 16) {
            EXPECT_EQ(rows.panels, nullptr) << "a matrix under one panel is not repacked";
            continue;
          }
          ASSERT_NE(rows.panels, nullptr);
          std::vector<float> bias(N, 0.25f), got(M * N, -7), want(M * N, -7);
          simd::half_gemm_packed(t, rows.panels, N, K, x.data(), M, K + 2, got.data(), N, bias.data());
          simd::reference_half_gemm(t, w.data(), stride, N, K, x.data(), M, K + 2, want.data(), N, bias.data());
          for (int64_t i = 0; i < M * N; ++i)
            ASSERT_TRUE(same_bits(got[i], want[i]))
                << dtype_name(t) << " N=" << N << " K=" << K << " M=" << M << " " << i;
          // gemm_nt takes the packed panels, in and out of a generation's scope alike.
          gemm_nt(x.data(), M, K + 2, rows, got.data(), N, bias.data());
          for (int64_t i = 0; i < M * N; ++i) ASSERT_TRUE(same_bits(got[i], want[i])) << "gemm_nt " << i;
        }
}

TEST(Int8Gemm, TheReferenceIsTheIntegerDefinition) {
  std::mt19937 rng(14);
  for (DType t : {DType::Q8_0, DType::Q4_0}) {
    const int64_t N = 5, K = 1024, M = 3;
    const Weights w = random_weights(t, N, K, rng);
    const auto x = random_activations(M, K, rng);
    std::vector<float> out(M * N);
    simd::reference_int8_gemm(t, w.bytes.data(), w.stride, N, K, x.data(), M, out.data(), N, nullptr);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        std::vector<float> deq(K);
        dequantize_row(t, w.bytes.data() + n * w.stride, deq.data(), K);
        double want = 0;
        for (int64_t b = 0; b < K / 32; ++b)
          for (int j = 0; j < 32; ++j) want += double(deq[b * 32 + j]) * x[m * K / 32 + b].qs[j] * x[m * K / 32 + b].d;
        EXPECT_NEAR(out[m * N + n], want, 1e-5 * (1 + std::fabs(want))) << dtype_name(t) << " " << m << "," << n;
      }
  }
}

}  // namespace
}  // namespace bonfire
