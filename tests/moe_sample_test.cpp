// Tests for moe, sample and the Philox generator behind sample. moe is held
// against a dense double-precision reference (every expert computed, then
// masked by the routing); sample against hand-worked cases and properties;
// Philox against values numpy produced. Golden files from PyTorch, when
// present, are checked at the end.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/rng.h"
#include "core/threads.h"
#include "ops/op.h"

namespace bonfire {
namespace {

// ---- helpers ---------------------------------------------------------------

Tensor f32_tensor(const Shape& shape, const std::vector<float>& v) {
  Tensor t = Tensor::empty(shape);
  EXPECT_EQ((int64_t)v.size(), t.numel());
  std::memcpy(t.f32(), v.data(), v.size() * sizeof(float));
  return t;
}

// Packs f32 rows of `cols` elements as `dt`.
Tensor packed_tensor(DType dt, const Shape& shape, const std::vector<float>& v) {
  const int64_t cols = shape.back(), rows = (int64_t)v.size() / cols;
  auto bytes = std::make_shared<std::vector<uint8_t>>(rows * row_bytes(dt, cols));
  for (int64_t r = 0; r < rows; ++r) quantize_row(dt, &v[r * cols], bytes->data() + r * row_bytes(dt, cols), cols);
  return Tensor::view(dt, shape, bytes->data(), bytes);
}

// What the op computes from a packed tensor: its values after a round trip.
std::vector<float> dequantized(const Tensor& t) {
  std::vector<float> out(t.numel());
  for (int64_t r = 0; r < t.rows(); ++r) dequantize_row(t.dtype, t.row(r), &out[r * t.cols()], t.cols());
  return out;
}

std::vector<float> random_vec(std::mt19937& rng, int64_t n, float lo = -1, float hi = 1) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

Shape infer(const char* op, const std::vector<Tensor>& in, const json& params) {
  std::vector<TensorDesc> d;
  for (const auto& t : in) d.push_back(t.desc());
  return find_op(op)->infer(d, Params(params));
}

Tensor run(const char* op, std::vector<Tensor> in, const json& params) {
  const Shape s = infer(op, in, params);
  Tensor out = Tensor::empty(s);
  OpInputs ptrs;
  for (auto& t : in) ptrs.push_back(&t);
  find_op(op)->run(ptrs, Params(params), out);
  return out;
}

std::vector<float> values(const Tensor& t) { return std::vector<float>(t.f32(), t.f32() + t.numel()); }

// ---- moe reference -----------------------------------------------------------

struct Experts {
  int64_t E, I, C;
  std::vector<std::vector<float>> gate, up, down;  // [I*C], [I*C], [C*I] per expert
};

Experts random_experts(std::mt19937& rng, int64_t E, int64_t I, int64_t C) {
  Experts x{E, I, C, {}, {}, {}};
  for (int64_t e = 0; e < E; ++e) {
    x.gate.push_back(random_vec(rng, I * C));
    x.up.push_back(random_vec(rng, I * C));
    x.down.push_back(random_vec(rng, C * I));
  }
  return x;
}

struct RefOpts {
  int64_t top_k = 2;
  bool sigmoid = false, normalize = false, gelu = false;
  double scale = 1;
  int64_t groups = 1, top_k_groups = 1, group_top_k = 1;
  const std::vector<float>* bias = nullptr;
};

struct RefRoute {
  std::vector<int64_t> chosen;
  std::vector<double> weight;
};

// Routing as docs/OPS.md states it, written independently of the op: a
// linear scan for each pick.
RefRoute ref_route(const float* logit, int64_t E, const RefOpts& o) {
  std::vector<double> score(E), choice(E);
  double mx = -INFINITY, sum = 0;
  for (int64_t e = 0; e < E; ++e) mx = std::max(mx, (double)logit[e]);
  for (int64_t e = 0; e < E; ++e) sum += std::exp(logit[e] - mx);
  for (int64_t e = 0; e < E; ++e) {
    score[e] = o.sigmoid ? 1 / (1 + std::exp(-(double)logit[e])) : std::exp(logit[e] - mx) / sum;
    choice[e] = score[e] + (o.bias ? (*o.bias)[e] : 0.0);
  }
  auto pick = [](const std::vector<double>& v, std::vector<bool>& used) {
    int64_t best = -1;
    for (int64_t i = 0; i < (int64_t)v.size(); ++i)
      if (!used[i] && (best < 0 || v[i] > v[best])) best = i;
    used[best] = true;
    return best;
  };
  if (o.groups > 1) {
    const int64_t G = E / o.groups;
    std::vector<double> gs(o.groups);
    for (int64_t g = 0; g < o.groups; ++g) {
      std::vector<double> v(choice.begin() + g * G, choice.begin() + (g + 1) * G);
      std::vector<bool> used(G, false);
      for (int64_t j = 0; j < o.group_top_k; ++j) gs[g] += v[pick(v, used)];
    }
    std::vector<bool> used(o.groups, false);
    for (int64_t j = 0; j < o.top_k_groups; ++j) pick(gs, used);
    for (int64_t e = 0; e < E; ++e)
      if (!used[e / G]) choice[e] = -INFINITY;
  }
  RefRoute r;
  std::vector<bool> used(E, false);
  double wsum = 0;
  for (int64_t k = 0; k < o.top_k; ++k) {
    r.chosen.push_back(pick(choice, used));
    r.weight.push_back(score[r.chosen.back()]);
    wsum += r.weight.back();
  }
  for (auto& w : r.weight) w = w / (o.normalize ? wsum : 1.0) * o.scale;
  return r;
}

std::vector<double> ref_moe(const std::vector<float>& x, const std::vector<float>& logits, int64_t T, const Experts& w,
                            const RefOpts& o) {
  const int64_t C = w.C, I = w.I, E = w.E;
  std::vector<double> out(T * C, 0.0);
  for (int64_t t = 0; t < T; ++t) {
    const RefRoute r = ref_route(&logits[t * E], E, o);
    std::vector<double> mask(E, 0.0);
    for (size_t k = 0; k < r.chosen.size(); ++k) mask[r.chosen[k]] = r.weight[k];
    for (int64_t e = 0; e < E; ++e) {  // dense: every expert, masked afterwards
      std::vector<double> h(I);
      for (int64_t i = 0; i < I; ++i) {
        double g = 0, u = 0;
        for (int64_t c = 0; c < C; ++c) {
          g += (double)w.gate[e][i * C + c] * x[t * C + c];
          u += (double)w.up[e][i * C + c] * x[t * C + c];
        }
        const double a = o.gelu ? 0.5 * g * (1 + std::tanh(std::sqrt(2 / M_PI) * (g + 0.044715 * g * g * g)))
                                : g / (1 + std::exp(-g));
        h[i] = a * u;
      }
      for (int64_t c = 0; c < C; ++c) {
        double y = 0;
        for (int64_t i = 0; i < I; ++i) y += (double)w.down[e][c * I + i] * h[i];
        out[t * C + c] += mask[e] * y;
      }
    }
  }
  return out;
}

// The weight inputs of `layout`, all f32 or all packed as `dt`.
std::vector<Tensor> weight_inputs(const Experts& w, const std::string& layout, DType dt = DType::F32) {
  const int64_t E = w.E, I = w.I, C = w.C;
  auto make = [&](const Shape& s, const std::vector<float>& v) {
    return dt == DType::F32 ? f32_tensor(s, v) : packed_tensor(dt, s, v);
  };
  auto cat = [&](const std::vector<std::vector<float>>& parts) {
    std::vector<float> v;
    for (const auto& p : parts) v.insert(v.end(), p.begin(), p.end());
    return v;
  };
  std::vector<Tensor> in;
  if (layout == "separate") {
    for (int64_t e = 0; e < E; ++e) {
      in.push_back(make({I, C}, w.gate[e]));
      in.push_back(make({I, C}, w.up[e]));
      in.push_back(make({C, I}, w.down[e]));
    }
  } else if (layout == "fused") {
    std::vector<std::vector<float>> gu;
    for (int64_t e = 0; e < E; ++e) {
      gu.push_back(w.gate[e]);
      gu.push_back(w.up[e]);
    }
    in.push_back(make({E, 2 * I, C}, cat(gu)));
    in.push_back(make({E, C, I}, cat(w.down)));
  } else {
    in.push_back(make({E, I, C}, cat(w.gate)));
    in.push_back(make({E, I, C}, cat(w.up)));
    in.push_back(make({E, C, I}, cat(w.down)));
  }
  return in;
}

json moe_params(const RefOpts& o, const std::string& layout) {
  json p = {{"topK", o.top_k}, {"layout", layout}, {"normalize", o.normalize}, {"scale", o.scale}};
  p["scoring"] = o.sigmoid ? "sigmoid" : "softmax";
  p["activation"] = o.gelu ? "gelu" : "silu";
  if (o.groups > 1) {
    p["nGroup"] = o.groups;
    p["topKGroup"] = o.top_k_groups;
    p["groupTopK"] = o.group_top_k;
  }
  if (o.bias) p["selectionBias"] = true;
  return p;
}

// Runs moe on random x and logits and compares with the reference.
void check_moe(const Experts& w, const std::string& layout, const RefOpts& o, int64_t T, uint32_t seed,
               std::vector<float> logits = {}, DType dt = DType::F32) {
  std::mt19937 rng(seed);
  const std::vector<float> x = random_vec(rng, T * w.C);
  if (logits.empty()) logits = random_vec(rng, T * w.E, -2, 2);
  std::vector<Tensor> in = {f32_tensor({T, w.C}, x), f32_tensor({T, w.E}, logits)};
  if (o.bias) in.push_back(f32_tensor({w.E}, *o.bias));
  for (auto& t : weight_inputs(w, layout, dt)) in.push_back(t);
  const Tensor out = run("moe", in, moe_params(o, layout));
  ASSERT_EQ(out.shape, (Shape{T, w.C}));
  const std::vector<double> want = ref_moe(x, logits, T, w, o);
  for (int64_t i = 0; i < T * w.C; ++i)
    ASSERT_NEAR(out.f32()[i], want[i], 1e-4 + 1e-4 * std::fabs(want[i])) << layout << " element " << i;
}

// ---- moe ---------------------------------------------------------------------

TEST(MoeTest, LayoutsMatchReference) {
  std::mt19937 rng(1);
  const Experts w = random_experts(rng, 4, 6, 8);
  RefOpts o;
  o.normalize = true;
  for (const char* layout : {"separate", "fused", "stacked"}) {
    check_moe(w, layout, o, 3, 2);   // few tokens per expert: the gemv path
    check_moe(w, layout, o, 24, 3);  // many: the tiled path
  }
}

TEST(MoeTest, SigmoidScaleAndNoNormalize) {
  std::mt19937 rng(4);
  const Experts w = random_experts(rng, 6, 5, 7);
  RefOpts o;
  o.top_k = 3;
  o.sigmoid = true;
  o.scale = 2.5;
  check_moe(w, "stacked", o, 9, 5);
  o.normalize = true;
  check_moe(w, "separate", o, 9, 6);
}

TEST(MoeTest, Gelu) {
  std::mt19937 rng(7);
  const Experts w = random_experts(rng, 4, 6, 8);
  RefOpts o;
  o.gelu = true;
  o.normalize = true;
  check_moe(w, "fused", o, 10, 8);
}

TEST(MoeTest, TiesGoToTheLowerExpert) {
  std::mt19937 rng(9);
  const Experts w = random_experts(rng, 4, 3, 5);
  RefOpts o;  // equal logits: experts 0 and 1, 1/4 each
  const RefRoute r = ref_route(std::vector<float>(4, 0.5f).data(), 4, o);
  ASSERT_EQ(r.chosen, (std::vector<int64_t>{0, 1}));
  check_moe(w, "separate", o, 2, 10, std::vector<float>(8, 0.5f));
}

// Choice values sigmoid(l) per group of 2: {0.9, 0.1}, {0.6, 0.55}, {0.2, 0.2},
// {0.1, 0.1}. By the best score group 0 wins; by the sum of the best two,
// group 1 does.
std::vector<float> group_logits() {
  std::vector<float> l;
  for (double p : {0.9, 0.1, 0.6, 0.55, 0.2, 0.2, 0.1, 0.1}) l.push_back((float)std::log(p / (1 - p)));
  return l;
}

TEST(MoeTest, GroupLimitedRouting) {
  std::mt19937 rng(11);
  const Experts w = random_experts(rng, 8, 4, 6);
  RefOpts o;
  o.sigmoid = true;
  o.normalize = true;
  o.groups = 4;
  o.top_k_groups = 1;
  o.top_k = 2;
  const std::vector<float> l = group_logits();
  o.group_top_k = 1;
  EXPECT_EQ(ref_route(l.data(), 8, o).chosen, (std::vector<int64_t>{0, 1}));
  check_moe(w, "stacked", o, 1, 12, l);
  o.group_top_k = 2;
  EXPECT_EQ(ref_route(l.data(), 8, o).chosen, (std::vector<int64_t>{2, 3}));
  check_moe(w, "stacked", o, 1, 12, l);
  // And random tokens with two of four groups kept.
  o.top_k_groups = 2;
  o.top_k = 3;
  check_moe(w, "separate", o, 16, 13);
  o.group_top_k = 1;
  check_moe(w, "fused", o, 16, 14);
}

TEST(MoeTest, SelectionBiasChangesChoiceNotWeight) {
  std::mt19937 rng(15);
  const Experts w = random_experts(rng, 4, 4, 6);
  const std::vector<float> logits = {2.0f, 0.0f, -1.0f, 0.5f};
  const std::vector<float> bias = {0.0f, 0.0f, 1.0f, 0.0f};
  RefOpts o;
  o.top_k = 1;
  o.sigmoid = true;
  o.bias = &bias;
  const RefRoute r = ref_route(logits.data(), 4, o);
  ASSERT_EQ(r.chosen, (std::vector<int64_t>{2}));
  EXPECT_NEAR(r.weight[0], 1 / (1 + std::exp(1.0)), 1e-12);  // sigmoid(-1), unbiased
  check_moe(w, "separate", o, 1, 16, logits);
  check_moe(w, "stacked", o, 12, 17);  // random logits with the same bias
}

TEST(MoeTest, PackedExperts) {
  std::mt19937 rng(18);
  Experts w = random_experts(rng, 4, 64, 32);  // rows split into 32-wide blocks
  // The reference sees what the op sees: the weights after a q8_0 round trip.
  for (auto* set : {&w.gate, &w.up}) {
    for (auto& m : *set) m = dequantized(packed_tensor(DType::Q8_0, {w.I, w.C}, m));
  }
  for (auto& m : w.down) m = dequantized(packed_tensor(DType::Q8_0, {w.C, w.I}, m));
  RefOpts o;
  o.normalize = true;
  check_moe(w, "stacked", o, 2, 19, {}, DType::Q8_0);
  check_moe(w, "fused", o, 20, 20, {}, DType::Q8_0);
  check_moe(w, "separate", o, 6, 21, {}, DType::Q8_0);
}

TEST(MoeTest, RefusesBadGraphs) {
  std::mt19937 rng(22);
  const Experts w = random_experts(rng, 4, 3, 5);
  auto inputs = [&](const std::string& layout) {
    std::vector<Tensor> in = {Tensor::zeros({2, 5}), Tensor::zeros({2, 4})};
    for (auto& t : weight_inputs(w, layout)) in.push_back(t);
    return in;
  };
  auto refused = [&](std::vector<Tensor> in, json p) {
    try {
      infer("moe", in, p);
    } catch (const Error& e) {
      EXPECT_EQ(e.code, ErrorCode::BadGraph);
      return std::string(e.what());
    }
    ADD_FAILURE() << "accepted " << p.dump();
    return std::string();
  };
  const json ok = {{"topK", 2}};
  EXPECT_EQ(infer("moe", inputs("separate"), ok), (Shape{2, 5}));
  EXPECT_NE(refused(inputs("separate"), {{"topK", 0}}).find("topK"), std::string::npos);
  EXPECT_NE(refused(inputs("separate"), {{"topK", 5}}).find("topK"), std::string::npos);
  EXPECT_NE(refused(inputs("separate"), {{"topK", 1.5}}).find("topK"), std::string::npos);
  EXPECT_NE(refused(inputs("separate"), {{"topK", 2}, {"scoring", "relu"}}).find("scoring"), std::string::npos);
  EXPECT_NE(refused(inputs("separate"), {{"topK", 2}, {"activation", "relu"}}).find("activation"), std::string::npos);
  EXPECT_NE(refused(inputs("separate"), {{"topK", 2}, {"layout", "packed"}}).find("layout"), std::string::npos);
  EXPECT_NE(refused(inputs("fused"), ok).find("separate"), std::string::npos);  // wrong input count
  EXPECT_NE(refused(inputs("stacked"), {{"topK", 2}, {"layout", "fused"}}).find("fused"), std::string::npos);
  EXPECT_NE(refused(inputs("fused"), {{"topK", 2}, {"layout", "stacked"}}).find("stacked"), std::string::npos);
  EXPECT_NE(refused(inputs("separate"), {{"topK", 2}, {"nGroup", 3}}).find("nGroup"), std::string::npos);
  EXPECT_NE(refused(inputs("separate"), {{"topK", 2}, {"nGroup", 2}, {"topKGroup", 3}}).find("topKGroup"),
            std::string::npos);
  EXPECT_NE(refused(inputs("separate"), {{"topK", 3}, {"nGroup", 2}, {"topKGroup", 1}}).find("topK"),
            std::string::npos);
  EXPECT_NE(refused(inputs("separate"), {{"topK", 1}, {"nGroup", 2}, {"groupTopK", 3}}).find("groupTopK"),
            std::string::npos);
  {  // selection bias: missing, wrong shape, packed
    auto in = inputs("stacked");
    EXPECT_NE(refused(in, {{"topK", 2}, {"layout", "stacked"}, {"selectionBias", true}}).find("bias"),
              std::string::npos);
    in.insert(in.begin() + 2, Tensor::zeros({3}));
    EXPECT_NE(refused(in, {{"topK", 2}, {"layout", "stacked"}, {"selectionBias", true}}).find("bias"),
              std::string::npos);
    in[2] = packed_tensor(DType::F16, {4}, {0, 0, 0, 0});
    EXPECT_NE(refused(in, {{"topK", 2}, {"layout", "stacked"}, {"selectionBias", true}}).find("f32"),
              std::string::npos);
    in[2] = Tensor::zeros({4});
    EXPECT_EQ(infer("moe", in, {{"topK", 2}, {"layout", "stacked"}, {"selectionBias", true}}), (Shape{2, 5}));
  }
  {  // shapes
    auto in = inputs("separate");
    in[1] = Tensor::zeros({3, 4});
    EXPECT_NE(refused(in, ok).find("logits"), std::string::npos);
    in = inputs("separate");
    in[0] = Tensor::zeros({10});
    EXPECT_NE(refused(in, ok).find("x"), std::string::npos);
    in = inputs("separate");
    in[2 + 3 * 2 + 2] = Tensor::zeros({5, 4});  // down_2
    EXPECT_NE(refused(in, ok).find("down_2"), std::string::npos);
    in = inputs("stacked");
    in[3] = Tensor::zeros({4, 2, 5});  // up with the wrong I
    EXPECT_NE(refused(in, {{"topK", 2}, {"layout", "stacked"}}).find("up"), std::string::npos);
  }
}

// ---- Philox ------------------------------------------------------------------

// Produced with numpy 1.24.2 (/usr/bin/python3):
//   bg = numpy.random.Philox(key=numpy.array([seed, 0], dtype=numpy.uint64),
//                            counter=numpy.array([step, row, 0, 0], dtype=numpy.uint64))
//   raw = bg.random_raw()                      # first output
//   u = numpy.random.Generator(fresh bg).random()  # == (raw >> 11) * 2^-53
struct PhiloxCase {
  uint64_t seed, step, row, raw;
  double u;
};
const PhiloxCase kNumpyPhilox[] = {
    {0x0ull, 0x0ull, 0x0ull, 0x2f4ba6408e4d89bull, 0x1.7a5d3204726c0p-7},
    {0x1ull, 0x0ull, 0x0ull, 0x4db6a27b756282dfull, 0x1.36da89edd58a0p-2},
    {0x2aull, 0x7ull, 0x3ull, 0xa8dcdfb0ad1fac55ull, 0x1.51b9bf615a3f5p-1},
    {0x3039ull, 0x0ull, 0x1ull, 0x4a289b6749cb1610ull, 0x1.28a26d9d272c4p-2},
    {0xffffffffffffffffull, 0xffffffffffffffffull, 0x5ull, 0x4f6e7269ef8e9452ull, 0x1.3db9c9a7be3a4p-2},
    {0x8000000000000000ull, 0x75bcd15ull, 0x0ull, 0x1ce0299b986a500bull, 0x1.ce0299b986a50p-4},
    {0x7ull, 0xffffffffffffffffull, 0xffffffffffffffffull, 0x9100defdcb972961ull, 0x1.2201bdfb972e5p-1},
    {0x0ull, 0xffffffffffffffffull, 0x0ull, 0xe85facf8b3b067d6ull, 0x1.d0bf59f16760cp-1},
    {0x3e7ull, 0x10000000000ull, 0x11ull, 0x3180ef95f4444e36ull, 0x1.8c077cafa2224p-3},
    {0xfffffffffffffffbull, 0x3ull, 0x2ull, 0xccaaf81c96909a3ull, 0x1.9955f0392d210p-5},
};

TEST(PhiloxTest, MatchesNumpy) {
  for (const auto& c : kNumpyPhilox) {
    EXPECT_EQ(philox_first(c.seed, c.step, c.row), c.raw) << c.seed << " " << c.step << " " << c.row;
    EXPECT_EQ(uniform01(c.seed, c.step, c.row), c.u);
  }
}

// ---- sample ------------------------------------------------------------------

int64_t sample1(const std::vector<float>& logits, const json& p, const std::vector<float>* history = nullptr) {
  std::vector<Tensor> in = {f32_tensor({(int64_t)logits.size()}, logits)};
  if (history) in.push_back(f32_tensor({(int64_t)history->size()}, *history));
  const Tensor out = run("sample", in, p);
  EXPECT_EQ(out.shape, Shape{1});
  return (int64_t)out.f32()[0];
}

TEST(SampleTest, GreedyTiesAndNaN) {
  EXPECT_EQ(sample1({1, 3, 3, 2}, json::object()), 1);
  EXPECT_EQ(sample1({1, 3, 3, 2}, {{"temperature", 0}}), 1);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(sample1({nan, 1, 5, nan}, json::object()), 2);
  EXPECT_EQ(sample1({nan, -INFINITY, -INFINITY}, json::object()), 1);
  EXPECT_EQ(sample1({nan, 1, 5, nan}, {{"temperature", 1}, {"seed", 3}}), 2);  // NaN has no mass
}

TEST(SampleTest, ShapesAndRows) {
  std::mt19937 rng(30);
  const std::vector<float> l = random_vec(rng, 2 * 3 * 5);
  const Tensor out = run("sample", {f32_tensor({2, 3, 5}, l)}, json::object());
  ASSERT_EQ(out.shape, (Shape{2, 3}));
  for (int r = 0; r < 6; ++r) EXPECT_EQ(out.f32()[r], (float)(std::max_element(&l[r * 5], &l[r * 5 + 5]) - &l[r * 5]));
}

TEST(SampleTest, TopKOneAndTinyTopPAreArgmax) {
  std::mt19937 rng(31);
  const int64_t R = 50, V = 40;
  const std::vector<float> l = random_vec(rng, R * V, -3, 3);
  for (double temp : {0.1, 1.0, 100.0}) {
    for (int seed : {0, 1, 2}) {
      const json pk = {{"temperature", temp}, {"topK", 1}, {"seed", seed}};
      const json pp = {{"temperature", temp}, {"topP", 1e-9}, {"seed", seed}};
      const Tensor a = run("sample", {f32_tensor({R, V}, l)}, pk);
      const Tensor b = run("sample", {f32_tensor({R, V}, l)}, pp);
      for (int64_t r = 0; r < R; ++r) {
        const float want = (float)(std::max_element(&l[r * V], &l[r * V + V]) - &l[r * V]);
        EXPECT_EQ(a.f32()[r], want);
        EXPECT_EQ(b.f32()[r], want);
      }
    }
  }
}

TEST(SampleTest, DrawFollowsPhilox) {
  // Two equal logits: sorted order {0, 1}, so id 0 iff u < 1/2.
  for (uint64_t step = 0; step < 20; ++step) {
    const int64_t want = uniform01(5, step, 0) < 0.5 ? 0 : 1;
    EXPECT_EQ(sample1({0, 0}, {{"temperature", 1}, {"seed", 5}, {"step", step}}), want);
  }
  // Negative seeds are their two's complement.
  const int64_t want = uniform01(~0ull, 0, 0) < 0.5 ? 0 : 1;
  EXPECT_EQ(sample1({0, 0}, {{"temperature", 1}, {"seed", -1}}), want);
  EXPECT_EQ(sample1({0, 0}, {{"temperature", 1}, {"seed", 18446744073709551615.0 - 4096}}),
            uniform01(0xFFFFFFFFFFFFF000ull, 0, 0) < 0.5 ? 0 : 1);
}

TEST(SampleTest, Distribution) {
  // 20000 rows of probabilities {.2, .3, .5}: one draw each.
  const int64_t R = 20000;
  std::vector<float> l;
  for (int64_t r = 0; r < R; ++r)
    for (double p : {0.2, 0.3, 0.5}) l.push_back((float)std::log(p));
  const Tensor out = run("sample", {f32_tensor({R, 3}, l)}, {{"temperature", 1}, {"seed", 77}});
  std::vector<int> n(3, 0);
  for (int64_t r = 0; r < R; ++r) ++n[(int)out.f32()[r]];
  EXPECT_NEAR(n[0] / (double)R, 0.2, 0.015);
  EXPECT_NEAR(n[1] / (double)R, 0.3, 0.015);
  EXPECT_NEAR(n[2] / (double)R, 0.5, 0.015);
  // topK 2 drops id 0; topP 0.5 keeps id 2 alone, 0.6 keeps {2, 1}.
  const Tensor k2 = run("sample", {f32_tensor({R, 3}, l)}, {{"temperature", 1}, {"seed", 77}, {"topK", 2}});
  const Tensor p6 = run("sample", {f32_tensor({R, 3}, l)}, {{"temperature", 1}, {"seed", 77}, {"topP", 0.6}});
  int k2_ids1 = 0;
  for (int64_t r = 0; r < R; ++r) {
    EXPECT_NE(k2.f32()[r], 0.0f);
    EXPECT_NE(p6.f32()[r], 0.0f);
    k2_ids1 += k2.f32()[r] == 1.0f;
  }
  EXPECT_NEAR(k2_ids1 / (double)R, 0.3 / 0.8, 0.015);
  EXPECT_EQ(sample1({(float)std::log(0.2), (float)std::log(0.3), (float)std::log(0.5)},
                    {{"temperature", 1}, {"topP", 0.5}, {"seed", 1}}),
            2);
  // topP 0 keeps the most likely token alone, as transformers' top-p keeps one.
  const Tensor p0 = run("sample", {f32_tensor({R, 3}, l)}, {{"temperature", 1}, {"seed", 77}, {"topP", 0}});
  for (int64_t r = 0; r < R; ++r) ASSERT_EQ(p0.f32()[r], 2.0f) << r;
}

// The definition with a full sort of the candidates: topK's k best logits,
// weights exp((l - max) / T) in double, the total in vocabulary order, topP's
// shortest prefix in probability order, then the walk to u * kept.
int64_t sample_by_full_sort(const float* l, int64_t V, uint64_t row, double T, int64_t top_k, double top_p,
                            uint64_t seed, uint64_t step) {
  std::vector<int32_t> idx(V);
  for (int64_t i = 0; i < V; ++i) idx[i] = static_cast<int32_t>(i);
  auto by_logit = [&](int32_t a, int32_t b) { return l[a] != l[b] ? l[a] > l[b] : a < b; };
  std::sort(idx.begin(), idx.end(), by_logit);
  if (top_k > 0 && top_k < V) idx.resize(top_k);
  std::sort(idx.begin(), idx.end());
  const float mx = l[*std::max_element(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return by_logit(b, a); })];
  std::vector<double> w(V);
  double total = 0;
  for (int32_t i : idx) total += (w[i] = std::exp(((double)l[i] - mx) / T));
  std::sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return w[a] != w[b] ? w[a] > w[b] : a < b; });
  size_t n = idx.size();
  double kept = total;
  if (top_p < 1) {
    kept = 0;
    size_t j = 0;
    while (j < n && (kept += w[idx[j++]]) < top_p * total) {
    }
    n = j;
  }
  const double target = uniform01(seed, step, row) * kept;
  double cum = 0;
  for (size_t j = 0; j < n; ++j)
    if ((cum += w[idx[j]]) > target) return idx[j];
  return idx[n - 1];
}

// Flat distributions put the topP cut and the draw deep into a large
// vocabulary, where sample walks buckets of weights and sorts only one: every
// draw is the full sort's (a target within rounding of a boundary could
// differ; none of these is). T = 0.01 puts most weights below 2^-63 (the
// bottom bucket) or at 0, where ties go to the lower id whatever the logits;
// -inf logits weigh 0.
TEST(SampleTest, SelectionByMassDrawsWhatAFullSortDraws) {
  std::mt19937 rng(41);
  const int64_t R = 40, V = 5000;
  std::vector<float> l = random_vec(rng, R * V, -3, 3);
  for (int64_t i = 0; i < V; i += 97) l[i] = l[i + 1];  // ties
  for (int64_t i = 5; i < R * V; i += 331) l[i] = -INFINITY;
  for (const double T : {0.01, 0.3, 1.0, 20.0})
    for (const int64_t k : {0, 300})
      for (const double top_p : {1.0, 0.97, 0.4}) {
        const json p = {{"temperature", T}, {"topK", k}, {"topP", top_p}, {"seed", 99}, {"step", 4}};
        const std::vector<float> got = values(run("sample", {f32_tensor({R, V}, l)}, p));
        for (int64_t r = 0; r < R; ++r)
          ASSERT_EQ(got[r], (float)sample_by_full_sort(&l[r * V], V, r, T, k, top_p, 99, 4))
              << "T=" << T << " topK=" << k << " topP=" << top_p << " row " << r;
      }
}

TEST(SampleTest, Penalties) {
  const std::vector<float> hist0 = {0};
  EXPECT_EQ(sample1({2.0f, 1.9f, 0.0f}, json::object(), &hist0), 0);  // penalties off
  EXPECT_EQ(sample1({2.0f, 1.9f, 0.0f}, {{"repetitionPenalty", 1.5}}, &hist0), 1);
  EXPECT_EQ(sample1({2.0f, 1.9f, 0.0f}, {{"presencePenalty", 0.5}}, &hist0), 1);
  EXPECT_EQ(sample1({-1.0f, -1.2f}, {{"repetitionPenalty", 1.5}}, &hist0), 1);  // negative: multiplied
  // Distinct ids: a repeated id is penalised once.
  const std::vector<float> rep = {0, 0, 0};
  EXPECT_EQ(sample1({2.0f, 1.9f}, {{"presencePenalty", 0.05}}, &rep), 0);
  // Empty slots (negative, out of vocabulary) and the window.
  const std::vector<float> h = {0, 1, -1, 99};
  EXPECT_EQ(sample1({2.0f, 1.9f, 1.8f}, {{"presencePenalty", 1}}, &h), 2);
  EXPECT_EQ(sample1({2.0f, 1.9f, 1.8f}, {{"presencePenalty", 1}, {"penaltyEnd", 1}}, &h), 1);
  EXPECT_EQ(sample1({2.0f, 1.9f, 1.8f}, {{"presencePenalty", 1}, {"penaltyWindow", 3}}, &h), 0);  // [1, 4)
  EXPECT_EQ(sample1({2.0f, 1.9f, 1.8f}, {{"presencePenalty", 1}, {"penaltyWindow", 0}}, &h), 0);
  // [N, 1] histories work too.
  const Tensor out =
      run("sample", {f32_tensor({3}, {2.0f, 1.9f, 0.0f}), f32_tensor({1, 1}, {0})}, {{"repetitionPenalty", 1.5}});
  EXPECT_EQ(out.f32()[0], 1.0f);
}

TEST(SampleTest, DeterministicAndIndependentOfOtherRows) {
  std::mt19937 rng(40);
  const int64_t R = 64, V = 300;
  std::vector<float> l = random_vec(rng, R * V, -2, 2);
  const json p = {{"temperature", 0.8}, {"topK", 50}, {"topP", 0.9}, {"seed", 1234}, {"step", 9}};
  const std::vector<float> a = values(run("sample", {f32_tensor({R, V}, l)}, p));
  EXPECT_EQ(a, values(run("sample", {f32_tensor({R, V}, l)}, p)));
  const int saved = num_threads();
  set_num_threads(1);
  EXPECT_EQ(a, values(run("sample", {f32_tensor({R, V}, l)}, p)));
  set_num_threads(saved);
  // Shuffle every row but row 7: row 7's draw does not move.
  std::vector<float> m = l;
  for (int64_t r = 0; r < R; ++r)
    if (r != 7) std::shuffle(m.begin() + r * V, m.begin() + r * V + V, rng);
  EXPECT_EQ(values(run("sample", {f32_tensor({R, V}, m)}, p))[7], a[7]);
  // Another step draws differently somewhere.
  json q = p;
  q["step"] = 10;
  EXPECT_NE(a, values(run("sample", {f32_tensor({R, V}, l)}, q)));
}

TEST(SampleTest, RefusesBadParams) {
  const std::vector<Tensor> in = {Tensor::zeros({4})};
  auto refused = [&](const std::vector<Tensor>& in, const json& p, const char* word) {
    try {
      infer("sample", in, p);
      ADD_FAILURE() << "accepted " << p.dump();
    } catch (const Error& e) {
      EXPECT_EQ(e.code, ErrorCode::BadGraph);
      EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
    }
  };
  refused(in, {{"temperature", -1}}, "temperature");
  refused(in, {{"topK", -1}}, "topK");
  refused(in, {{"topK", 1.5}}, "topK");
  refused(in, {{"topP", -0.1}}, "topP");
  refused(in, {{"topP", 1.5}}, "topP");
  refused(in, {{"repetitionPenalty", 0}}, "repetitionPenalty");
  refused(in, {{"seed", 1.5}}, "seed");
  refused(in, {{"step", 1e30}}, "step");
  refused(in, {{"penaltyWindow", -1}}, "penaltyWindow");
  refused({Tensor::zeros({4}), Tensor::zeros({2, 2})}, json::object(), "history");
  refused({Tensor::zeros({4}), Tensor::zeros({3})}, {{"penaltyEnd", 4}}, "penaltyEnd");
  refused({Tensor::zeros({4, 0})}, json::object(), "logits");
  refused({packed_tensor(DType::F16, {4}, {0, 0, 0, 0})}, json::object(), "f32");
  EXPECT_EQ(infer("sample", {Tensor::zeros({4}), Tensor::zeros({3, 1})}, {{"penaltyEnd", 3}}), Shape{1});
}

// ---- goldens (scripts/gen_goldens.py, PyTorch/numpy references) ---------------
// Each case is a one-node graph; here its node runs straight through the op
// table, so a failure points at the op rather than the graph layer.

json read_golden(const std::string& rel) {
  std::ifstream f(std::string(BONFIRE_SOURCE_DIR) + "/" + rel);
  if (!f) return json();
  return json::parse(f);
}

std::string base64_bytes(const std::string& in) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char ch : in) {
    int v;
    if (ch >= 'A' && ch <= 'Z')
      v = ch - 'A';
    else if (ch >= 'a' && ch <= 'z')
      v = ch - 'a' + 26;
    else if (ch >= '0' && ch <= '9')
      v = ch - '0' + 52;
    else if (ch == '+')
      v = 62;
    else if (ch == '/')
      v = 63;
    else
      continue;  // '=' padding
    acc = acc << 6 | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back((char)(acc >> bits & 0xFF));
    }
  }
  return out;
}

Tensor json_tensor(const json& j) { return f32_tensor(j["shape"].get<Shape>(), j["data"].get<std::vector<float>>()); }

// Resolves a graph input name: inline inputs, inline f32 weights ("w:name")
// or packed weights stored as base64 bytes.
Tensor golden_input(const json& c, const std::string& name) {
  const json& g = c["graph"];
  if (name.rfind("w:", 0) != 0) return json_tensor(g["inputs"][name]);
  const std::string w = name.substr(2);
  if (g.contains("weights") && g["weights"].contains(w)) return json_tensor(g["weights"][w]);
  const json& p = c["packed"][w];
  DType dt;
  EXPECT_TRUE(dtype_from_name(p["dtype"].get<std::string>(), &dt));
  auto bytes = std::make_shared<std::string>(base64_bytes(p["b64"].get<std::string>()));
  Tensor t = Tensor::view(dt, p["shape"].get<Shape>(), bytes->data(), bytes);
  EXPECT_EQ(t.nbytes(), (int64_t)bytes->size()) << w;
  return t;
}

// Bind expressions in the goldens are "name", "name + k" or "name - k".
json golden_params(const json& c) {
  json p = c["graph"]["nodes"][0].value("params", json::object());
  const json bind = c["graph"].value("bind", json::object());
  for (auto& [k, v] : p.items()) {
    if (!v.is_string() || k == "scoring" || k == "layout" || k == "activation") continue;
    std::istringstream in(v.get<std::string>());
    std::string name, op;
    double rhs = 0;
    in >> name >> op >> rhs;
    const double base = bind.at(name).get<double>();
    v = op == "-" ? base - rhs : base + rhs;
  }
  return p;
}

void check_golden_file(const char* op) {
  const json j = read_golden(std::string("goldens/ops/") + op + ".json");
  if (j.is_null()) GTEST_SKIP() << "no goldens/ops/" << op << ".json";
  int n = 0;
  for (const json& c : j["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const json& node = c["graph"]["nodes"][0];
    ASSERT_EQ(node["op"], op);
    std::vector<Tensor> in;
    for (const auto& name : node["in"]) in.push_back(golden_input(c, name.get<std::string>()));
    const Tensor got = run(op, in, golden_params(c));
    const json& want = c["expected"][node["id"].get<std::string>()];
    ASSERT_EQ(got.shape, want["shape"].get<Shape>());
    const auto w = want["data"].get<std::vector<double>>();
    const double atol = c["tol"]["atol"], rtol = c["tol"]["rtol"];
    for (size_t i = 0; i < w.size(); ++i)
      ASSERT_LE(std::fabs(got.f32()[i] - w[i]), atol + rtol * std::fabs(w[i])) << "element " << i;
    ++n;
  }
  EXPECT_GT(n, 0);
}

TEST(MoeGolden, MatchesPyTorch) { check_golden_file("moe"); }
TEST(SampleGolden, MatchesNumpyReference) { check_golden_file("sample"); }

TEST(PhiloxGolden, MatchesRngJson) {
  const json j = read_golden("goldens/rng.json");
  if (j.is_null()) GTEST_SKIP() << "no goldens/rng.json";
  for (const json& c : j) {
    const uint64_t seed = c["seed"], step = c["step"], row = c["row"];
    EXPECT_EQ(philox_first(seed, step, row), std::stoull(c["raw"].get<std::string>())) << c.dump();
    EXPECT_EQ(uniform01(seed, step, row), c["u"].get<double>()) << c.dump();
  }
}

}  // namespace
}  // namespace bonfire
