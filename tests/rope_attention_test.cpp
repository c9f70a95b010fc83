// rope and attention against independent references: attention against a
// naive full-matrix softmax in double; rope frequencies against values that
// transformers' formulas give in PyTorch (computed once with torch 1.13 and
// pasted here); both against goldens/ops/{rope,attention}.json when present.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <random>

#include "op_test_util.h"
#include "ops/op.h"

namespace bonfire {
namespace {

// ---------------------------------------------------------------- attention

struct AttnSpec {
  int64_t H = 2, KV = 2, D = 8, Dv = 8, T = 4, S = 4;
  bool causal = true;
  int64_t pos_offset = 0, window = 0;
  double scale = 0, softcap = 0;  // 0: default / none
  std::vector<float> slopes;      // the slopes the reference uses
  int bias_rank = 0;              // 0: no bias, 2: [T,S], 3: [H,T,S]
};

// Full-matrix softmax in double, masks applied literally per docs/OPS.md.
std::vector<float> naive_attention(const AttnSpec& a, const std::vector<float>& q, const std::vector<float>& k,
                                   const std::vector<float>& v, const std::vector<float>& bias) {
  std::vector<float> out(a.T * a.H * a.Dv, 0.0f);
  const double scale = a.scale ? a.scale : 1.0 / std::sqrt((double)a.D);
  for (int64_t h = 0; h < a.H; ++h) {
    const int64_t g = h / (a.H / a.KV);
    for (int64_t t = 0; t < a.T; ++t) {
      const int64_t p = a.pos_offset + t;
      std::vector<double> sc(a.S);
      std::vector<bool> vis(a.S);
      double mx = -INFINITY;
      for (int64_t s = 0; s < a.S; ++s) {
        double x = 0;
        for (int64_t d = 0; d < a.D; ++d) x += (double)q[t * a.H * a.D + h * a.D + d] * k[s * a.KV * a.D + g * a.D + d];
        x *= scale;
        if (a.softcap) x = a.softcap * std::tanh(x / a.softcap);
        if (!a.slopes.empty()) x += a.slopes[h] * (double)s;  // BLOOM's form: slope * s
        if (a.bias_rank == 2) x += bias[t * a.S + s];
        if (a.bias_rank == 3) x += bias[(h * a.T + t) * a.S + s];
        bool ok = true;
        if (a.causal) ok = s <= p && (!a.window || s > p - a.window);
        else if (a.window) ok = std::llabs(p - s) <= a.window;
        vis[s] = ok;
        sc[s] = x;
        if (ok) mx = std::max(mx, x);
      }
      if (mx == -INFINITY) continue;  // fully masked: zeros
      double sum = 0;
      for (int64_t s = 0; s < a.S; ++s) sum += vis[s] ? std::exp(sc[s] - mx) : 0.0;
      for (int64_t d = 0; d < a.Dv; ++d) {
        double acc = 0;
        for (int64_t s = 0; s < a.S; ++s)
          if (vis[s]) acc += std::exp(sc[s] - mx) / sum * v[s * a.KV * a.Dv + g * a.Dv + d];
        out[t * a.H * a.Dv + h * a.Dv + d] = (float)acc;
      }
    }
  }
  return out;
}

json attn_params(const AttnSpec& a) {
  json p = {{"heads", a.H}, {"headDim", a.D}};
  if (a.KV != a.H) p["kvHeads"] = a.KV;
  if (a.Dv != a.D) p["vHeadDim"] = a.Dv;
  if (!a.causal) p["causal"] = false;
  if (a.pos_offset) p["posOffset"] = a.pos_offset;
  if (a.window) p["window"] = a.window;
  if (a.scale) p["scale"] = a.scale;
  if (a.softcap) p["softcap"] = a.softcap;
  return p;
}

// Runs the op with `params` and compares with the naive reference.
void check_attention(const AttnSpec& a, json params, float tol = 2e-5f) {
  const auto q = randn(a.T * a.H * a.D, 1), k = randn(a.S * a.KV * a.D, 2), v = randn(a.S * a.KV * a.Dv, 3);
  std::vector<float> bias;
  std::vector<Tensor> in = {make({a.T, a.H * a.D}, q), make({a.S, a.KV * a.D}, k), make({a.S, a.KV * a.Dv}, v)};
  if (a.bias_rank == 2) bias = randn(a.T * a.S, 4, 2.0f), in.push_back(make({a.T, a.S}, bias));
  if (a.bias_rank == 3) bias = randn(a.H * a.T * a.S, 4, 2.0f), in.push_back(make({a.H, a.T, a.S}, bias));
  const Tensor out = run_op("attention", in, params);
  ASSERT_EQ(out.shape, (Shape{a.T, a.H * a.Dv}));
  const auto want = naive_attention(a, q, k, v, bias);
  for (int64_t i = 0; i < out.numel(); ++i)
    ASSERT_NEAR(out.f32()[i], want[i], tol * (1 + std::fabs(want[i]))) << "at " << i << " with " << params.dump();
}

TEST(Attention, CausalMultiHead) {
  AttnSpec a;
  a.T = a.S = 5;
  check_attention(a, attn_params(a));
}

TEST(Attention, NonCausal) {
  AttnSpec a;
  a.causal = false, a.T = 3, a.S = 6;
  check_attention(a, attn_params(a));
}

TEST(Attention, GroupedQuery) {
  AttnSpec a;
  a.H = 6, a.KV = 2, a.T = 3, a.S = 7, a.pos_offset = 4;
  check_attention(a, attn_params(a));
  a.KV = 1;  // multi-query
  check_attention(a, attn_params(a));
  a.H = 8, a.KV = 2, a.T = 1, a.S = 9, a.pos_offset = 8;  // decode: head blocks split
  check_attention(a, attn_params(a));
  a.KV = 1, a.S = 200, a.pos_offset = 150;
  check_attention(a, attn_params(a));
}

TEST(Attention, ValueWidthDiffers) {
  AttnSpec a;
  a.H = 4, a.KV = 2, a.D = 12, a.Dv = 4, a.T = 3, a.S = 3;
  check_attention(a, attn_params(a));
}

TEST(Attention, CausalPosOffset) {
  AttnSpec a;
  a.T = 1, a.S = 10, a.pos_offset = 9;  // decode against a cache
  check_attention(a, attn_params(a));
  a.T = 3, a.S = 10, a.pos_offset = 4;  // chunked prefill: keys past pos hidden
  check_attention(a, attn_params(a));
}

TEST(Attention, WindowCausal) {
  AttnSpec a;
  a.T = 6, a.S = 12, a.pos_offset = 6, a.window = 3;
  check_attention(a, attn_params(a));
}

TEST(Attention, WindowNonCausal) {
  AttnSpec a;
  a.causal = false, a.T = 6, a.S = 9, a.pos_offset = 2, a.window = 2;
  check_attention(a, attn_params(a));
}

TEST(Attention, ScaleAndSoftcap) {
  AttnSpec a;
  a.T = a.S = 6, a.scale = 0.9, a.softcap = 2.5;  // large scale so the cap bites
  check_attention(a, attn_params(a));
}

TEST(Attention, AlibiBloom) {
  AttnSpec a;
  a.H = a.KV = 12, a.D = 4, a.Dv = 4, a.T = 5, a.S = 9, a.pos_offset = 4;
  // build_alibi_tensor's slopes for 12 heads (torch, f32)
  a.slopes = {5.000000000e-01f, 2.500000000e-01f, 1.250000000e-01f, 6.250000000e-02f,
              3.125000000e-02f, 1.562500000e-02f, 7.812500000e-03f, 3.906250000e-03f,
              7.071067691e-01f, 3.535533845e-01f, 1.767766774e-01f, 8.838833869e-02f};
  json p = attn_params(a);
  p["alibi"] = true;
  check_attention(a, p);
}

TEST(Attention, AlibiMpt) {
  AttnSpec a;
  a.H = a.KV = 6, a.D = 4, a.Dv = 4, a.T = 4, a.S = 7, a.pos_offset = 3;
  // gen_slopes(6, alibi_bias_max=4): odd-indexed slopes first
  a.slopes = {5.000000000e-01f, 2.500000000e-01f, 1.250000000e-01f, 6.250000000e-02f, 7.071067691e-01f,
              3.535533845e-01f};
  json p = attn_params(a);
  p["alibiMax"] = 4;
  check_attention(a, p);
  a.H = a.KV = 12;  // gen_slopes(12, 8) differs from BLOOM's in the last bits
  a.slopes = {5.000000000e-01f, 2.500000000e-01f, 1.250000000e-01f, 6.250000000e-02f,
              3.125000000e-02f, 1.562500000e-02f, 7.812500000e-03f, 3.906250000e-03f,
              7.071067691e-01f, 3.535533845e-01f, 1.767766923e-01f, 8.838834614e-02f};
  p = attn_params(a);
  p["alibiMax"] = 8;
  check_attention(a, p);
}

TEST(Attention, AlibiExplicitSlopes) {
  AttnSpec a;
  a.H = 3, a.KV = 1, a.T = 4, a.S = 6, a.pos_offset = 2, a.causal = false;
  a.slopes = {0.3f, -0.2f, 1.5f};
  json p = attn_params(a);
  p["alibiSlopes"] = a.slopes;
  p["alibi"] = true;  // explicit slopes win over BLOOM's
  check_attention(a, p);
}

TEST(Attention, BiasPerRow) {
  AttnSpec a;
  a.T = 4, a.S = 6, a.pos_offset = 2, a.bias_rank = 2;
  check_attention(a, attn_params(a));
}

TEST(Attention, BiasPerHead) {
  AttnSpec a;
  a.H = 4, a.KV = 2, a.T = 3, a.S = 5, a.bias_rank = 3, a.causal = false;
  check_attention(a, attn_params(a));
}

TEST(Attention, FullyMaskedRowIsZero) {
  AttnSpec a;
  a.T = 4, a.S = 4, a.pos_offset = -2;  // rows 0 and 1 sit before every key
  check_attention(a, attn_params(a));
  // A bias of -inf on every key also leaves nothing to attend to.
  const OpDef* op = find_op("attention");
  ASSERT_NE(op, nullptr);
  std::vector<float> bias(2 * 3, -INFINITY);
  Tensor out = run_op("attention",
                      {make({2, 4}, randn(8, 5)), make({3, 4}, randn(12, 6)), make({3, 4}, randn(12, 7)),
                       make({2, 3}, bias)},
                      {{"heads", 1}, {"headDim", 4}, {"causal", false}});
  for (int64_t i = 0; i < out.numel(); ++i) EXPECT_EQ(out.f32()[i], 0.0f);
}

TEST(Attention, LongCacheCrossesTiles) {
  AttnSpec a;
  a.H = 4, a.KV = 2, a.D = 16, a.Dv = 16, a.T = 5, a.S = 300, a.pos_offset = 295;
  check_attention(a, attn_params(a));
  a.window = 100;  // window start falls mid-tile
  check_attention(a, attn_params(a));
  a.window = 0, a.T = 300, a.pos_offset = 0;  // full causal prefill
  check_attention(a, attn_params(a));
  a.causal = false, a.T = 7, a.window = 70, a.pos_offset = 150;
  check_attention(a, attn_params(a));
}

TEST(Attention, ManifestEntry) {
  const OpDef* op = find_op("attention");
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(op->min_inputs, 3);
  EXPECT_EQ(op->max_inputs, 4);
  EXPECT_EQ(op->params.size(), 12u);
  ASSERT_NE(op->param("alibiSlopes"), nullptr);
  EXPECT_EQ(op->param("alibiSlopes")->type, ParamType::Array);
  EXPECT_FALSE(op->param("heads")->optional);
  ASSERT_EQ(op->features.size(), 5u);
  EXPECT_EQ(op->features[1].name, "attention.bias");
  EXPECT_EQ(op->features[1].input, 3);
}

TEST(Attention, RefusesBadGraphs) {
  const json p = {{"heads", 4}, {"headDim", 8}, {"kvHeads", 2}};
  const TensorDesc q{DType::F32, {3, 32}}, k{DType::F32, {5, 16}}, v{DType::F32, {5, 16}};
  expect_bad_graph("attention", {q, k, v}, {{"heads", 4}, {"headDim", 8}, {"kvHeads", 3}}, "kvHeads");
  expect_bad_graph("attention", {q, k, v}, {{"headDim", 8}}, "heads");
  expect_bad_graph("attention", {q, k, v}, {{"heads", 0}, {"headDim", 8}}, "heads");
  expect_bad_graph("attention", {q, k, v}, {{"heads", 4}, {"headDim", 8.5}, {"kvHeads", 2}}, "headDim");
  expect_bad_graph("attention", {{DType::F32, {3, 30}}, k, v}, p, "q must be");
  expect_bad_graph("attention", {q, {DType::F32, {5, 8}}, v}, p, "k must be");
  expect_bad_graph("attention", {q, k, {DType::F32, {5, 8}}}, p, "v must be");
  expect_bad_graph("attention", {q, k, {DType::F32, {4, 16}}}, p, "same number of rows");
  expect_bad_graph("attention", {{DType::F32, {1, 3, 32}}, k, v}, p, "rank 2");
  expect_bad_graph("attention", {q, {DType::F16, {5, 16}}, v}, p, "f32");
  expect_bad_graph("attention", {q, k, v, {DType::F32, {3, 4}}}, p, "bias");
  expect_bad_graph("attention", {q, k, v, {DType::F32, {2, 3, 5}}}, p, "bias");
  json bad = p;
  bad["alibiSlopes"] = {0.5, 0.25};
  expect_bad_graph("attention", {q, k, v}, bad, "alibiSlopes");
  bad = p, bad["window"] = 0;
  expect_bad_graph("attention", {q, k, v}, bad, "window");
  bad = p, bad["softcap"] = -1;
  expect_bad_graph("attention", {q, k, v}, bad, "softcap");
  bad = p, bad["alibiMax"] = 0;
  expect_bad_graph("attention", {q, k, v}, bad, "alibiMax");
  // and a good one passes
  EXPECT_EQ(find_op("attention")->infer({q, k, v, {DType::F32, {4, 3, 5}}}, Params(p)), (Shape{3, 32}));
}

// --------------------------------------------------------------------- rope

// Rotation by hand, in double except the f32 angle pos * inv (as HF forms it).
std::vector<float> naive_rope(const std::vector<float>& x, int64_t rows, int64_t C, int64_t D, int64_t R,
                              bool interleaved, double offset, const std::vector<float>& inv, double att = 1.0) {
  std::vector<float> out = x;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < C / D; ++h)
      for (int64_t i = 0; i < R / 2; ++i) {
        const float angle = (float)(offset + r) * inv[i];
        const double c = std::cos((double)angle) * att, s = std::sin((double)angle) * att;
        const int64_t a = r * C + h * D + (interleaved ? 2 * i : i);
        const int64_t b = interleaved ? a + 1 : a + R / 2;
        out[a] = (float)(x[a] * c - x[b] * s);
        out[b] = (float)(x[b] * c + x[a] * s);
      }
  return out;
}

void expect_close(const Tensor& got, const std::vector<float>& want, float tol) {
  ASSERT_EQ(got.numel(), (int64_t)want.size());
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got.f32()[i], want[i], tol) << "at " << i;
}

// 1/(10000^(2i/16)) and 1/(10000^(2i/8)) in f32, from torch
const std::vector<float> kInv16 = {1.000000000e+00f, 3.162277639e-01f, 1.000000015e-01f, 3.162277862e-02f,
                                   9.999999776e-03f, 3.162277862e-03f, 1.000000047e-03f, 3.162277862e-04f};
const std::vector<float> kInv8 = {1.000000000e+00f, 1.000000015e-01f, 9.999999776e-03f, 1.000000047e-03f};

TEST(Rope, DefaultHalfSplit) {
  const int64_t T = 5, C = 48;  // 3 heads of 16
  const auto x = randn(T * C, 11);
  const Tensor out = run_op("rope", {make({T, C}, x)}, {{"headDim", 16}, {"offset", 7}});
  expect_close(out, naive_rope(x, T, C, 16, 16, false, 7, kInv16), 2e-5f);
}

TEST(Rope, Interleaved) {
  const int64_t T = 4, C = 32;
  const auto x = randn(T * C, 12);
  const Tensor out = run_op("rope", {make({T, C}, x)}, {{"headDim", 16}, {"interleaved", true}, {"offset", 3}});
  expect_close(out, naive_rope(x, T, C, 16, 16, true, 3, kInv16), 2e-5f);
}

TEST(Rope, PartialRotary) {
  const int64_t T = 3, C = 32;
  const auto x = randn(T * C, 13);
  for (bool inter : {false, true}) {
    const Tensor out =
        run_op("rope", {make({T, C}, x)}, {{"headDim", 16}, {"rotaryDim", 8}, {"interleaved", inter}, {"offset", 2}});
    expect_close(out, naive_rope(x, T, C, 16, 8, inter, 2, kInv8), 2e-5f);
  }
}

TEST(Rope, LeadingAxesFoldIntoRows) {
  const auto x = randn(2 * 3 * 16, 14);
  const Tensor out = run_op("rope", {make({2, 3, 16}, x)}, {{"headDim", 16}});
  EXPECT_EQ(out.shape, (Shape{2, 3, 16}));
  expect_close(out, naive_rope(x, 6, 16, 16, 16, false, 0, kInv16), 2e-5f);
}

TEST(Rope, LargePosition) {
  const auto x = randn(2 * 16, 15);
  const Tensor out = run_op("rope", {make({2, 16}, x)}, {{"headDim", 16}, {"offset", 40000}});
  expect_close(out, naive_rope(x, 2, 16, 16, 16, false, 40000, kInv16), 2e-5f);
}

// The op keeps its recent tables: calls that repeat, alternate and outrun
// the kept ones (offsets, row counts, layouts, more distinct tables than it
// keeps) each rotate by their own positions.
TEST(Rope, RecentTablesNeverStandInForOthers) {
  const int64_t C = 32;
  const auto x = randn(4 * C, 16);
  for (const int64_t offset : {5, 6, 5, 5, 7, 8, 9, 10, 11, 12, 13, 14, 5, 6}) {
    for (const int64_t T : {1, 4}) {
      const std::vector<float> xt(x.begin(), x.begin() + T * C);
      expect_close(run_op("rope", {make({T, C}, xt)}, {{"headDim", 16}, {"offset", offset}}),
                   naive_rope(xt, T, C, 16, 16, false, offset, kInv16), 2e-5f);
      expect_close(run_op("rope", {make({T, C}, xt)}, {{"headDim", 16}, {"offset", offset}, {"interleaved", true}}),
                   naive_rope(xt, T, C, 16, 16, true, offset, kInv16), 2e-5f);
    }
  }
}

// infer and run remember parsed params that differ only in their offset
// (and tables per offset): params that differ elsewhere, at the same
// offset and alternating, each rotate by their own frequencies, and a bad
// offset is still refused after good ones were remembered.
TEST(Rope, RememberedParamsNeverStandInForOthers) {
  const int64_t T = 2, C = 32;
  const auto x = randn(T * C, 17);
  std::vector<float> doubled(kInv16);
  for (float& f : doubled) f *= 2.0f;
  const std::vector<float>* freqs[] = {&kInv16, &doubled};
  for (int round = 0; round < 3; ++round)
    for (const std::vector<float>* inv : freqs) {
      const json params = {{"headDim", 16}, {"offset", 4 + round % 2}, {"invFreq", *inv}};
      expect_close(run_op("rope", {make({T, C}, x)}, params),
                   naive_rope(x, T, C, 16, 16, false, 4 + round % 2, *inv), 2e-5f);
    }
  const TensorDesc d{DType::F32, {T, C}};
  expect_bad_graph("rope", {d}, {{"headDim", 16}, {"invFreq", kInv16}, {"offset", INFINITY}},
                   "param offset must be a finite number");
  expect_bad_graph("rope", {d}, {{"headDim", 12}, {"invFreq", kInv16}, {"offset", 4}},
                   "param invFreq must have 6 values");
}

// Rotates unit vectors at position 1, where the angle is inv_freq itself, and
// reads back each frequency (atan2) and the cos/sin multiplier (hypot).
void expect_freqs(json params, const std::vector<float>& want_inv, double want_att, int64_t rows = 1) {
  params["headDim"] = 16;
  params["offset"] = 1;
  std::vector<float> x(rows * 16, 0.0f);
  for (int64_t i = 0; i < 8; ++i) x[i] = 1.0f;
  const Tensor out = run_op("rope", {make({rows, 16}, x)}, params);
  for (int64_t i = 0; i < 8; ++i) {
    const double c = out.f32()[i], s = out.f32()[i + 8];
    EXPECT_NEAR(std::atan2(s, c), want_inv[i], 2e-6 * want_inv[i] + 1e-12) << "inv_freq[" << i << "] " << params.dump();
    EXPECT_NEAR(std::hypot(c, s), want_att, 2e-6) << params.dump();
  }
}

TEST(Rope, ScalingDefaultAndBaseFromScaling) {
  expect_freqs({{"scaling", {{"rope_type", "default"}}}}, kInv16, 1.0);
  // rope_parameters (transformers 5) carry rope_theta
  expect_freqs({{"scaling", {{"rope_type", "default"}, {"rope_theta", 1e6}}}},
               {1.000000000e+00f, 1.778279394e-01f, 3.162277862e-02f, 5.623413250e-03f, 1.000000047e-03f,
                1.778279402e-04f, 3.162277426e-05f, 5.623413472e-06f},
               1.0);
}

TEST(Rope, ScalingLinear) {
  expect_freqs({{"scaling", {{"type", "linear"}, {"factor", 4.0}}}},
               {2.500000000e-01f, 7.905694097e-02f, 2.500000037e-02f, 7.905694656e-03f, 2.499999944e-03f,
                7.905694656e-04f, 2.500000119e-04f, 7.905694656e-05f},
               1.0);
}

TEST(Rope, ScalingDynamic) {
  const json s = {{"rope_type", "dynamic"}, {"factor", 2.0}, {"max_position_embeddings", 16}};
  expect_freqs({{"scaling", s}}, kInv16, 1.0);  // within the trained length: unchanged
  // offset 1 + 32 rows = 33 > 16: base grows (torch, f32 like transformers)
  expect_freqs({{"scaling", s}},
               {1.000000000e+00f, 2.687244117e-01f, 7.221281528e-02f, 1.940534636e-02f, 5.214690696e-03f,
                1.401314745e-03f, 3.765675065e-04f, 1.011928834e-04f},
               1.0, 32);
}

TEST(Rope, ScalingLlama3) {
  expect_freqs({{"base", 500000},
                {"scaling",
                 {{"rope_type", "llama3"},
                  {"factor", 8.0},
                  {"low_freq_factor", 1.0},
                  {"high_freq_factor", 4.0},
                  {"original_max_position_embeddings", 8192}}}},
               {1.000000000e+00f, 1.939227581e-01f, 3.760603070e-02f, 7.292665076e-03f, 5.248460220e-04f,
                3.428102355e-05f, 6.647869668e-06f, 1.289173156e-06f},
               1.0);
}

TEST(Rope, ScalingYarn) {
  const std::vector<float> inv = {1.000000000e+00f, 3.162277639e-01f, 1.000000015e-01f, 2.569350600e-02f,
                                  6.249999627e-03f, 1.383496565e-03f, 2.500000119e-04f, 7.905694656e-05f};
  json s = {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 2048}};
  expect_freqs({{"scaling", s}}, inv, 1.138629436);  // 0.1 ln 4 + 1
  // no factor: the ratio of the context lengths
  expect_freqs({{"scaling", {{"rope_type", "yarn"}, {"original_max_position_embeddings", 2048},
                             {"max_position_embeddings", 8192}}}},
               inv, 1.138629436);
  json m = s;
  m["mscale"] = 1.0, m["mscale_all_dim"] = 0.5;
  expect_freqs({{"scaling", m}}, inv, 1.064821625);
  json nt = s;
  nt["truncate"] = false;
  expect_freqs({{"scaling", nt}},
               {1.000000000e+00f, 3.162277639e-01f, 1.000000015e-01f, 2.387019619e-02f, 5.056971684e-03f,
                8.112904616e-04f, 2.500000119e-04f, 7.905694656e-05f},
               1.138629436);
  json b = s;
  b["beta_fast"] = 16, b["beta_slow"] = 2;
  expect_freqs({{"scaling", b}},
               {1.000000000e+00f, 3.162277639e-01f, 1.000000015e-01f, 2.371708304e-02f, 4.999999888e-03f,
                7.905694656e-04f, 2.500000119e-04f, 7.905694656e-05f},
               1.138629436);
  json af = s;
  af["attention_factor"] = 0.5;
  expect_freqs({{"scaling", af}}, inv, 0.5);
  expect_freqs({{"scaling", af}, {"attentionFactor", 2.0}}, inv, 2.0);  // the param wins
}

TEST(Rope, ScalingLongrope) {
  const json s = {{"rope_type", "longrope"},
                  {"long_factor", {1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0}},
                  {"short_factor", {1.0, 1.0, 1.1, 1.2, 1.5, 2.0, 2.5, 3.0}},
                  {"original_max_position_embeddings", 16},
                  {"max_position_embeddings", 64}};
  const double att = 1.224744871;  // sqrt(1 + ln 4 / ln 16)
  expect_freqs({{"scaling", s}},
               {1.000000000e+00f, 3.162277639e-01f, 9.090909362e-02f, 2.635231242e-02f, 6.666666828e-03f,
                1.581138931e-03f, 3.999999899e-04f, 1.054092572e-04f},
               att);
  // offset 1 + 20 rows > 16: long factors
  expect_freqs({{"scaling", s}},
               {1.000000000e+00f, 2.108184993e-01f, 5.000000075e-02f, 1.054092497e-02f, 2.499999944e-03f,
                5.270463298e-04f, 1.250000059e-04f, 2.635231431e-05f},
               att, 20);
}

TEST(Rope, ExplicitFrequencies) {
  const std::vector<float> inv = {0.9f, 0.5f, 0.25f, 0.125f, 0.01f, 0.005f, 0.001f, 0.0001f};
  expect_freqs({{"invFreq", inv}}, inv, 1.0);
  expect_freqs({{"invFreq", inv}, {"attentionFactor", 0.75}}, inv, 0.75);
}

TEST(Rope, ManifestEntry) {
  const OpDef* op = find_op("rope");
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(op->params.size(), 8u);
  EXPECT_EQ(op->param("scaling")->type, ParamType::Object);
  EXPECT_FALSE(op->param("headDim")->optional);
  ASSERT_EQ(op->features.size(), 3u);
  EXPECT_EQ(op->features[2].params, (std::vector<std::string>{"scaling", "invFreq", "attentionFactor"}));
}

TEST(Rope, RefusesBadGraphs) {
  const TensorDesc x{DType::F32, {3, 32}};
  expect_bad_graph("rope", {x}, json::object(), "headDim");
  expect_bad_graph("rope", {x}, {{"headDim", 0}}, "headDim");
  expect_bad_graph("rope", {x}, {{"headDim", 12}}, "multiple of param headDim");
  expect_bad_graph("rope", {x}, {{"headDim", 16}, {"rotaryDim", 7}}, "rotaryDim");
  expect_bad_graph("rope", {x}, {{"headDim", 16}, {"rotaryDim", 18}}, "rotaryDim");
  expect_bad_graph("rope", {x}, {{"headDim", 16}, {"invFreq", {1.0, 0.5}}}, "invFreq");
  expect_bad_graph("rope", {{DType::F32, {32}}}, {{"headDim", 16}}, "rank 2");
  expect_bad_graph("rope", {{DType::Q8_0, {3, 32}}}, {{"headDim", 16}}, "f32");
  expect_bad_graph("rope", {x}, {{"headDim", 16}, {"scaling", "yarn"}}, "scaling");
  expect_bad_graph("rope", {x}, {{"headDim", 16}, {"scaling", {{"rope_type", "ntk-by-parts"}}}}, "ntk-by-parts");
  expect_bad_graph("rope", {x}, {{"headDim", 16}, {"scaling", {{"rope_type", "linear"}}}}, "factor");
  expect_bad_graph("rope", {x}, {{"headDim", 16}, {"scaling", {{"rope_type", "dynamic"}, {"factor", 2}}}},
                   "max_position_embeddings");
  expect_bad_graph("rope", {x},
                   {{"headDim", 16},
                    {"scaling", {{"rope_type", "llama3"}, {"factor", 8}, {"original_max_position_embeddings", 8192}}}},
                   "low_freq_factor");
  expect_bad_graph("rope", {x}, {{"headDim", 16}, {"scaling", {{"rope_type", "yarn"}, {"factor", 4}}}},
                   "original_max_position_embeddings");
  expect_bad_graph("rope", {x},
                   {{"headDim", 16},
                    {"scaling",
                     {{"rope_type", "longrope"}, {"long_factor", {1, 2}}, {"short_factor", {1, 2}},
                      {"original_max_position_embeddings", 16}}}},
                   "long_factor");
  expect_bad_graph("rope", {x}, {{"headDim", 16}, {"scaling", {{"rope_type", "yarn"}, {"factor", "4"},
                                                                {"original_max_position_embeddings", 16}}}},
                   "factor");
  EXPECT_EQ(find_op("rope")->infer({x}, Params(json{{"headDim", 16}})), (Shape{3, 32}));
}

// ------------------------------------------------------------------ goldens

// Cases written by scripts/gen_goldens.py from PyTorch: one-node graphs with
// named inputs, expected outputs by node id and a per-case tolerance.
void run_goldens(const char* op_name) {
  const std::string path = std::string(BONFIRE_SOURCE_DIR) + "/goldens/ops/" + op_name + ".json";
  std::ifstream f(path);
  if (!f) GTEST_SKIP() << path << " not generated yet";
  const json doc = json::parse(f);
  const json& cases = doc.at("cases");
  ASSERT_FALSE(cases.empty());
  for (const auto& c : cases) {
    const std::string name = c.at("name");
    const json& graph = c.at("graph");
    ASSERT_EQ(graph.at("nodes").size(), 1u) << name;
    const json& node = graph.at("nodes").at(0);
    ASSERT_EQ(node.at("op").get<std::string>(), op_name) << name;
    std::vector<Tensor> in;
    for (const auto& ref : node.at("in")) {
      const json& t = graph.at("inputs").at(ref.get<std::string>());
      in.push_back(make(t.at("shape").get<Shape>(), t.at("data").get<std::vector<float>>()));
    }
    // The graph layer evaluates bind expressions; these cases only use a
    // bare name, so substitute it here.
    json params = node.value("params", json::object());
    for (auto& [k, v] : params.items())
      if (v.is_string()) {
        ASSERT_TRUE(graph.contains("bind") && graph["bind"].contains(v.get<std::string>()))
            << name << ": bind expression " << v.dump() << " is more than a name";
        v = graph["bind"][v.get<std::string>()];
      }
    const json& want_t = c.at("expected").at(node.at("id").get<std::string>());
    const std::vector<float> want = want_t.at("data").get<std::vector<float>>();
    const double atol = c.at("tol").value("atol", 0.0), rtol = c.at("tol").value("rtol", 0.0);
    Tensor out;
    try {
      out = run_op(op_name, in, params);
    } catch (const std::exception& e) {
      ADD_FAILURE() << name << ": " << e.what();
      continue;
    }
    EXPECT_EQ(out.shape, want_t.at("shape").get<Shape>()) << name;
    ASSERT_EQ(out.numel(), (int64_t)want.size()) << name;
    int bad = 0;
    for (size_t i = 0; i < want.size() && bad < 5; ++i) {
      const double g = out.f32()[i], w = want[i];
      if (!(std::fabs(g - w) <= atol + rtol * std::fabs(w)))
        ADD_FAILURE() << name << " [" << i << "]: got " << g << ", want " << w, ++bad;
    }
  }
}

TEST(RopeGolden, Cases) { run_goldens("rope"); }
TEST(AttentionGolden, Cases) { run_goldens("attention"); }

}  // namespace
}  // namespace bonfire
