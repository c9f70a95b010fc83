// The QMoE pass functions (src/kernels/qmoe/) against a float64 reference
// written here from ONNX Runtime's CPU QMoE rules (docs/QMOE.md): per pass,
// and end to end for every variant a CPU device can run, with the passes
// called in the order spec/kernels/qmoe.json lists them (repeat blocks
// unrolled, intermediates filled with NaN first so a read of an unwritten
// value shows).
//
// Tolerance: the passes accumulate in f32, the reference in f64 with the
// same dequantized weights. An f32 dot of n terms is off by about
// sqrt(n) * 2^-24 of the sum of the terms' magnitudes; through FC1, the
// activation, FC2 and the mix (n <= 256 here) that stays below 1e-6 of the
// output's largest magnitude. The check allows 2e-5 of it (plus 2e-5 of the
// element); the worst error measured is printed (QMOE_WORST): 3.5e-7.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <hwy/targets.h>

#include "core/threads.h"
#include "kernels/pass.h"

namespace bonfire::kernels {
namespace {

using json = nlohmann::json;
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr uint32_t kNoExpert = 0xFFFFFFFFu;

// ---- a problem and its data ------------------------------------------------

struct Spec {
  int bits = 4;
  std::string act = "relu";
  float alpha = 1.0f, beta = 0.0f;
  std::optional<float> limit;
  int64_t block = 0;  // 0: column-wise scales
  int64_t k = 1, tokens = 1, experts = 8, hidden = 128, inter = 128;
  int rank = 2;
  bool swiglu() const { return act == "swiglu"; }
  int64_t fc1_rows() const { return inter * (swiglu() ? 2 : 1); }
  int64_t pack() const { return bits == 4 ? 2 : 1; }
  std::string name() const {
    return std::to_string(bits) + "bit " + act + (limit ? " limit " + std::to_string(*limit) : "") +
           (alpha != 1.0f || beta != 0.0f ? " alpha/beta" : "") +
           (block ? " block " + std::to_string(block) : " column-wise") + " k" + std::to_string(k) + " T" +
           std::to_string(tokens) + " rank" + std::to_string(rank) + " H" + std::to_string(hidden) + " I" +
           std::to_string(inter);
  }
};

struct Data {
  std::vector<float> input, router, s1, s2;
  std::vector<uint8_t> w1, w2;
};

Data make_data(const Spec& s, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1), sc(0.01f, 0.05f);
  std::normal_distribution<float> n(0, 1.5f);
  std::uniform_int_distribution<int> byte(0, 255);
  Data d;
  d.input.resize(s.tokens * s.hidden);
  for (auto& v : d.input) v = u(rng);
  d.router.resize(s.tokens * s.experts);
  for (auto& v : d.router) v = n(rng);
  const int64_t b1 = s.block ? s.hidden / s.block : 1, b2 = s.block ? s.inter / s.block : 1;
  d.w1.resize(s.experts * s.fc1_rows() * s.hidden / s.pack());
  d.w2.resize(s.experts * s.hidden * s.inter / s.pack());
  for (auto& v : d.w1) v = (uint8_t)byte(rng);
  for (auto& v : d.w2) v = (uint8_t)byte(rng);
  const float shrink = s.bits == 8 ? 1.0f / 16 : 1.0f;  // 8-bit values are 16x larger
  d.s1.resize(s.experts * s.fc1_rows() * b1);
  d.s2.resize(s.experts * s.hidden * b2);
  for (auto& v : d.s1) v = sc(rng) * shrink * (u(rng) < 0 ? -1 : 1);
  for (auto& v : d.s2) v = sc(rng) * shrink * (u(rng) < 0 ? -1 : 1);
  return d;
}

// ---- the float64 reference ---------------------------------------------------

// The routing (ORT: top k by logit, larger index first on ties; softmax over
// the k chosen; a weight not > 1e-8 skips its slot), for finite logits.
struct Route {
  std::vector<int64_t> expert;  // -1: skipped
  std::vector<double> weight;
};

Route ref_route(const Spec& s, const Data& d) {
  Route r;
  for (int64_t t = 0; t < s.tokens; ++t) {
    std::vector<int64_t> idx(s.experts);
    for (int64_t e = 0; e < s.experts; ++e) idx[e] = e;
    const float* l = &d.router[t * s.experts];
    std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return l[a] != l[b] ? l[a] > l[b] : a > b; });
    double sum = 0;
    for (int64_t j = 0; j < s.k; ++j) sum += std::exp((double)l[idx[j]] - l[idx[0]]);
    for (int64_t j = 0; j < s.k; ++j) {
      const double w = std::exp((double)l[idx[j]] - l[idx[0]]) / sum;
      r.expert.push_back(w > 1e-8 ? idx[j] : -1);
      r.weight.push_back(w);
    }
  }
  return r;
}

// One weight as ORT dequantizes it: scale * (q - midpoint).
double weight(const Spec& s, const std::vector<uint8_t>& w, const std::vector<float>& scales, int64_t e,
              int64_t rows, int64_t cols, int64_t r, int64_t c) {
  const int64_t row_bytes = cols / s.pack();
  const uint8_t byte = w[(e * rows + r) * row_bytes + c / s.pack()];
  const int q = s.bits == 8 ? byte : (c % 2 == 0 ? byte & 15 : byte >> 4);  // even column: low nibble
  const int64_t blocks = s.block ? cols / s.block : 1;
  const float scale = scales[(e * rows + r) * blocks + (s.block ? c / s.block : 0)];
  return (double)scale * (q - (s.bits == 8 ? 128 : 8));
}

// Every expert's weights dequantized once: W1 [experts, fc1_rows, hidden],
// W2 [experts, hidden, inter].
struct Dense {
  std::vector<double> w1, w2;
};

Dense dense(const Spec& s, const Data& d) {
  Dense m;
  m.w1.resize(s.experts * s.fc1_rows() * s.hidden);
  m.w2.resize(s.experts * s.hidden * s.inter);
  for (int64_t e = 0; e < s.experts; ++e) {
    for (int64_t r = 0; r < s.fc1_rows(); ++r)
      for (int64_t c = 0; c < s.hidden; ++c)
        m.w1[(e * s.fc1_rows() + r) * s.hidden + c] = weight(s, d.w1, d.s1, e, s.fc1_rows(), s.hidden, r, c);
    for (int64_t r = 0; r < s.hidden; ++r)
      for (int64_t c = 0; c < s.inter; ++c)
        m.w2[(e * s.hidden + r) * s.inter + c] = weight(s, d.w2, d.s2, e, s.hidden, s.inter, r, c);
  }
  return m;
}

// The activated FC1 output of token t through expert e.
std::vector<double> ref_hidden(const Spec& s, const Data& d, const Dense& m, int64_t t, int64_t e) {
  std::vector<double> fc1(s.fc1_rows()), h(s.inter);
  for (int64_t r = 0; r < s.fc1_rows(); ++r) {
    const double* w = &m.w1[(e * s.fc1_rows() + r) * s.hidden];
    double acc = 0;
    for (int64_t c = 0; c < s.hidden; ++c) acc += w[c] * d.input[t * s.hidden + c];
    fc1[r] = acc;
  }
  for (int64_t i = 0; i < s.inter; ++i) {
    if (!s.swiglu()) {
      h[i] = std::max(0.0, fc1[i]);
      continue;
    }
    // Interleaved: gate even, linear odd; the gate clamped from above, the
    // linear part on both sides; alpha inside the sigmoid, beta on linear.
    const double L = s.limit ? (double)*s.limit : INFINITY;
    const double g = std::min(fc1[2 * i], L), l = std::clamp(fc1[2 * i + 1], -L, L);
    h[i] = g / (1 + std::exp(-(double)s.alpha * g)) * (l + s.beta);
  }
  return h;
}

std::vector<double> ref_fc2(const Spec& s, const Dense& m, int64_t e, const std::vector<double>& h) {
  std::vector<double> y(s.hidden);
  for (int64_t r = 0; r < s.hidden; ++r) {
    const double* w = &m.w2[(e * s.hidden + r) * s.inter];
    double acc = 0;
    for (int64_t c = 0; c < s.inter; ++c) acc += w[c] * h[c];
    y[r] = acc;
  }
  return y;
}

std::vector<double> reference(const Spec& s, const Data& d) {
  const Route r = ref_route(s, d);
  const Dense m = dense(s, d);
  std::vector<double> out(s.tokens * s.hidden, 0.0);
  for (int64_t t = 0; t < s.tokens; ++t)
    for (int64_t j = 0; j < s.k; ++j) {
      const int64_t e = r.expert[t * s.k + j];
      if (e < 0) continue;
      const auto y = ref_fc2(s, m, e, ref_hidden(s, d, m, t, e));
      for (int64_t i = 0; i < s.hidden; ++i) out[t * s.hidden + i] += r.weight[t * s.k + j] * y[i];
    }
  return out;
}

// ---- running the package's passes ------------------------------------------

const json& package() {
  static const json p = [] {
    std::ifstream f(std::string(BONFIRE_SOURCE_DIR) + "/spec/kernels/qmoe.json");
    return json::parse(f);
  }();
  return p;
}

json attrs_of(const Spec& s) {
  json a = package()["attributes"];
  a["k"] = s.k;
  a["expert_weight_bits"] = s.bits;
  a["activation_type"] = s.act;
  a["swiglu_fusion"] = s.swiglu() ? 1 : 0;
  a["activation_alpha"] = s.alpha;
  a["activation_beta"] = s.beta;
  if (s.limit) a["swiglu_limit"] = *s.limit;
  if (s.block) a["block_size"] = s.block;
  return a;
}

template <class T>
Buffer make_buffer(const std::string& dtype, std::vector<int64_t> shape, const std::vector<T>& v) {
  Buffer b{dtype, std::move(shape), {}};
  b.bytes.resize(v.size() * sizeof(T));
  std::memcpy(b.bytes.data(), v.data(), b.bytes.size());
  return b;
}

// Filled with NaN bytes, as if left over from another call.
Buffer garbage(const std::string& dtype, int64_t n) {
  Buffer b{dtype, {n}, std::vector<uint8_t>(n * 4, 0xFF)};
  return b;
}

std::map<std::string, Buffer> buffers_of(const Spec& s, const Data& d) {
  std::map<std::string, Buffer> m;
  std::vector<int64_t> in_shape = {s.tokens, s.hidden};
  if (s.rank == 3) in_shape = s.tokens % 4 == 0 ? std::vector<int64_t>{4, s.tokens / 4, s.hidden}
                                                : std::vector<int64_t>{1, s.tokens, s.hidden};
  m["input"] = make_buffer("float32", in_shape, d.input);
  m["router_probs"] = make_buffer("float32", {s.tokens, s.experts}, d.router);
  m["fc1_experts_weights"] = make_buffer("uint8", {s.experts, s.fc1_rows(), s.hidden / s.pack()}, d.w1);
  m["fc2_experts_weights"] = make_buffer("uint8", {s.experts, s.hidden, s.inter / s.pack()}, d.w2);
  if (s.block) {
    m["fc1_scales"] = make_buffer("float32", {s.experts, s.fc1_rows(), s.hidden / s.block}, d.s1);
    m["fc2_scales"] = make_buffer("float32", {s.experts, s.hidden, s.inter / s.block}, d.s2);
  } else {
    m["fc1_scales"] = make_buffer("float32", {s.experts, s.fc1_rows()}, d.s1);
    m["fc2_scales"] = make_buffer("float32", {s.experts, s.hidden}, d.s2);
  }
  Buffer out = garbage("float32", s.tokens * s.hidden);
  out.shape = in_shape;
  m["output"] = out;
  return m;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Runs one variant's passes as the package lists them. `chunk`: the token
// chunk (hiddenChunkTokens), the whole call when 0. The intermediates are
// sized by the package's shape expressions, evaluated here by hand.
std::vector<float> run_variant(const Spec& s, const Data& d, const std::string& variant, int64_t chunk = 0,
                               std::map<std::string, Buffer>* keep = nullptr) {
  const json* v = nullptr;
  for (const auto& x : package()["variants"])
    if (x["id"] == variant) v = &x;
  if (!v) throw std::runtime_error("no variant " + variant);
  const int64_t T = s.tokens, K = s.k;
  chunk = chunk > 0 ? std::min(chunk, T) : T;
  const int64_t tile_m = 8 * 4;  // tunables.groupThreads * groupRegM
  const int64_t group_slots = chunk * K, max_tiles = ceil_div(group_slots, tile_m) + s.experts;
  std::map<std::string, int64_t> sizes = {
      {"routeExpert", T * K},
      {"routeMix", T * K},
      {"hiddenAct", chunk * K * s.inter},
      {"slotList", std::max<int64_t>(1, group_slots)},
      {"tileMeta", 1 + 3 * max_tiles},
      {"slotOut", std::max<int64_t>(1, chunk * K * s.hidden)},
  };
  std::map<std::string, Buffer> bufs = buffers_of(s, d);
  if (v->contains("intermediates"))
    for (const auto& im : (*v)["intermediates"]) bufs[im["id"]] = garbage(im["dtype"], sizes.at(im["id"]));
  const json attrs = attrs_of(s);
  auto num = [&](const std::string& name) -> double {
    if (name == "hiddenChunkTokens") return (double)chunk;
    if (name == "groupTileM") return (double)tile_m;
    if (name == "numTokens") return (double)T;
    if (name == "topK") return (double)K;
    throw std::runtime_error("num(" + name + ") not known to the test driver");
  };
  const auto run_pass = [&](const json& pass, int64_t repeat) {
    PassFn fn = find_pass(pass["name"]);
    if (!fn) throw std::runtime_error("no pass " + pass["name"].get<std::string>());
    PassArgs args{attrs, num, bufs, repeat, {1, 1, 1}, variant};
    fn(args);
  };
  for (const auto& pass : (*v)["passes"]) {
    if (pass.contains("repeat")) {
      for (int64_t c = 0; c < std::max<int64_t>(1, ceil_div(T, chunk)); ++c)
        for (const auto& inner : pass["passes"]) run_pass(inner, c);
    } else {
      run_pass(pass, -1);
    }
  }
  const Buffer& out = bufs.at("output");
  std::vector<float> r(s.tokens * s.hidden);
  std::memcpy(r.data(), out.bytes.data(), r.size() * sizeof(float));
  if (keep) *keep = std::move(bufs);
  return r;
}

// The CPU-runnable variants with intermediate columns (the sgmat one runs the
// grouped functions on a CPU; its device requirements are the runtime's).
const std::vector<std::string> kVariants = {"quant_split_routed", "quant_gemv_routed", "quant_grouped_routed",
                                            "quant_grouped_sgmat_routed"};

double g_worst = 0;  // worst error / output scale over the whole run

::testing::AssertionResult close(const std::vector<float>& got, const std::vector<double>& want,
                                 double rel = 2e-5) {
  double scale = 1e-30, worst = 0;
  for (double w : want) scale = std::max(scale, std::fabs(w));
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs((double)got[i] - want[i]);
    if (!(err <= rel * scale + rel * std::fabs(want[i])))
      return ::testing::AssertionFailure() << "element " << i << ": got " << got[i] << ", want " << want[i]
                                           << " (output scale " << scale << ")";
    worst = std::max(worst, err / scale);
  }
  g_worst = std::max(g_worst, worst);
  return ::testing::AssertionSuccess();
}

// ---- end to end over the combinations ---------------------------------------

struct Act {
  std::string act;
  std::optional<float> limit;
  float alpha, beta;
};

TEST(QmoePasses, EveryVariantMatchesTheReferenceOverTheMatrix) {
  set_num_threads(2);
  const std::vector<Act> acts = {{"relu", {}, 1.0f, 0.0f},
                                 {"swiglu", {}, 1.0f, 0.0f},
                                 {"swiglu", 0.6f, 1.0f, 0.0f},
                                 {"swiglu", 0.6f, 1.702f, 1.0f}};
  int runs = 0;
  uint32_t seed = 1;
  for (int bits : {4, 8})
    for (const Act& act : acts)
      for (int64_t block : {0, 16, 32, 64, 128})
        for (int64_t k : {1, 2, 4})
          for (int64_t tokens : {1, 7, 64})
            for (int rank : {2, 3}) {
              Spec s;
              s.bits = bits;
              s.act = act.act;
              s.limit = act.limit;
              s.alpha = act.alpha;
              s.beta = act.beta;
              s.block = block;
              s.k = k;
              s.tokens = tokens;
              s.rank = rank;
              const Data d = make_data(s, seed++);
              const auto want = reference(s, d);
              for (const auto& v : kVariants) {
                EXPECT_TRUE(close(run_variant(s, d, v), want)) << v << ": " << s.name();
                ++runs;
              }
            }
  std::printf("QMOE_WORST passes %d runs: worst |error| / max|output| = %.3g\n", runs, g_worst);
}

TEST(QmoePasses, TokenChunksGiveTheSameOutput) {
  set_num_threads(2);
  for (int64_t chunk : {1, 5, 16})
    for (int bits : {4, 8}) {
      Spec s;
      s.bits = bits;
      s.act = "swiglu";
      s.limit = 0.6f;
      s.block = 32;
      s.k = 2;
      s.tokens = 37;
      const Data d = make_data(s, 100 + chunk);
      const auto want = reference(s, d);
      for (const auto& v : kVariants) EXPECT_TRUE(close(run_variant(s, d, v, chunk), want)) << v << " chunk " << chunk;
    }
}

// Shapes whose rows are not a whole number of vectors (column-wise scales),
// one expert, k equal to the expert count, and larger experts that take the
// GEMM path in the grouped form.
TEST(QmoePasses, OddShapesAndLargeGroups) {
  set_num_threads(2);
  std::vector<Spec> specs;
  for (int bits : {4, 8}) {
    Spec a;
    a.bits = bits, a.hidden = 42, a.inter = 18, a.experts = 3, a.k = 3, a.tokens = 9, a.act = "swiglu";
    specs.push_back(a);
    Spec b;
    b.bits = bits, b.hidden = 2, b.inter = 2, b.experts = 1, b.k = 1, b.tokens = 3;
    specs.push_back(b);
    Spec c;
    c.bits = bits, c.hidden = 512, c.inter = 256, c.experts = 4, c.k = 2, c.tokens = 48, c.act = "swiglu";
    c.block = 128, c.limit = 2.0f;
    specs.push_back(c);
    Spec e = c;
    e.block = 0, e.act = "relu", e.limit.reset(), e.hidden = 520, e.inter = 264;
    specs.push_back(e);
  }
  uint32_t seed = 500;
  for (const Spec& s : specs) {
    const Data d = make_data(s, seed++);
    const auto want = reference(s, d);
    for (const auto& v : kVariants) EXPECT_TRUE(close(run_variant(s, d, v), want)) << v << ": " << s.name();
  }
}

// The SIMD kernels of every instruction set the build compiled and this CPU
// runs (AVX-512 and AVX2 kernels differ in their register blocking, and
// AVX2's 4-bit dot reads words), on a part of the matrix. Block 0 is
// column-wise scales, once with rows of whole 64-column steps and once with
// rows that end in part of a vector.
TEST(QmoePasses, EverySimdTargetGivesTheReferenceNumbers) {
  set_num_threads(2);
  uint32_t seed = 900;
  std::string names;
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    names += std::string(" ") + hwy::TargetName(target);
    for (int bits : {4, 8})
      for (const auto& [block, part_vector] : std::initializer_list<std::pair<int64_t, bool>>{
               {0, false}, {0, true}, {8, false}, {16, false}, {32, false}, {128, false}})
        for (const char* act : {"relu", "swiglu"}) {
          Spec s;
          s.bits = bits;
          s.block = block;
          s.act = act;
          if (s.swiglu()) s.limit = 0.6f;
          s.k = 2;
          s.tokens = 40;
          s.experts = 4;
          if (part_vector) s.hidden = 136, s.inter = 40;
          const Data d = make_data(s, seed++);
          const auto want = reference(s, d);
          for (const auto& v : kVariants)
            EXPECT_TRUE(close(run_variant(s, d, v), want)) << hwy::TargetName(target) << " " << v << ": " << s.name();
        }
  }
  hwy::SetSupportedTargetsForTest(0);
  std::printf("QMOE targets:%s\n", names.c_str());
}

TEST(QmoePasses, ZeroInterGivesZeros) {
  Spec s;
  s.inter = 0;
  s.tokens = 5;
  s.k = 2;
  const Data d = make_data(s, 7);
  const auto got = run_variant(s, d, "quant_zero_inter");
  for (float v : got) EXPECT_EQ(v, 0.0f);
}

// ---- per pass -----------------------------------------------------------------

// The route stage alone on logits given as rows of E = 3.
struct Routed {
  std::vector<uint32_t> expert;
  std::vector<float> mix;
};

Routed route(const std::vector<float>& logits, int64_t k) {
  Spec s;
  s.experts = 3;
  s.k = k;
  s.tokens = (int64_t)logits.size() / 3;
  s.hidden = 2;
  s.inter = 2;
  Data d = make_data(s, 1);
  d.router = logits;
  std::map<std::string, Buffer> bufs = buffers_of(s, d);
  bufs["routeExpert"] = garbage("uint32", s.tokens * k);
  bufs["routeMix"] = garbage("float32", s.tokens * k);
  const json attrs = attrs_of(s);
  auto no_num = [](const std::string& n) -> double { throw std::runtime_error("num(" + n + ")"); };
  PassArgs args{attrs, no_num, bufs, -1, {1, 1, 1}, ""};
  find_pass("QMoE.RouteStage")(args);
  Routed r;
  r.expert.resize(s.tokens * k);
  r.mix.resize(s.tokens * k);
  std::memcpy(r.expert.data(), bufs["routeExpert"].bytes.data(), r.expert.size() * 4);
  std::memcpy(r.mix.data(), bufs["routeMix"].bytes.data(), r.mix.size() * 4);
  return r;
}

// Which experts ORT 1.30 chose (in order, skipped slots left out), probed
// with one-hot experts: equal logits go to the larger index; a NaN logit
// lands where std::partial_sort under std::greater leaves it; -inf - -inf
// and inf - inf make every weight NaN, so the token gets nothing.
TEST(QmoePasses, RouteStageFollowsOrtOnTiesInfinitiesAndNaN) {
  struct Probe {
    std::vector<float> logits;
    int64_t k;
    std::vector<uint32_t> experts;  // the active slots' experts, in slot order
  };
  const std::vector<Probe> probes = {
      {{0, 0, 0}, 1, {2}},
      {{0, 0, 0}, 2, {2, 1}},
      {{1, 1, 0}, 1, {1}},
      {{1, 1, 0}, 2, {1, 0}},
      {{0, 1, 1}, 2, {2, 1}},
      {{kInf, 0, 0}, 1, {}},
      {{0, kInf, kInf}, 2, {}},
      {{-kInf, -kInf, -kInf}, 3, {}},
      {{0, -kInf, -kInf}, 3, {0}},
      {{kNaN, 0, 1}, 1, {}},
      {{0, kNaN, 1}, 1, {2}},
      {{0, kNaN, 1}, 2, {}},
      {{1, 0, kNaN}, 1, {0}},
      {{1, 0, kNaN}, 2, {0, 1}},
      {{1, 0, kNaN}, 3, {}},
      {{-100, 0, -100}, 2, {1}},
  };
  for (const Probe& p : probes) {
    const Routed r = route(p.logits, p.k);
    std::vector<uint32_t> active;
    for (int64_t j = 0; j < p.k; ++j) {
      if (r.expert[j] == kNoExpert) {
        EXPECT_EQ(r.mix[j], 0.0f);
        continue;
      }
      EXPECT_GT(r.mix[j], 1e-8f);
      active.push_back(r.expert[j]);
    }
    EXPECT_EQ(active, p.experts) << "logits " << p.logits[0] << " " << p.logits[1] << " " << p.logits[2] << " k "
                                 << p.k;
  }
  // The weights are ORT's float softmax over the chosen: 1 / (1 + e^-1).
  const Routed r = route({1, 0, kNaN}, 2);
  EXPECT_EQ(r.mix[0], 1.0f / (1.0f + std::exp(-1.0f)));
  EXPECT_EQ(r.mix[1], std::exp(-1.0f) * (1.0f / (1.0f + std::exp(-1.0f))));
}

TEST(QmoePasses, GroupStageListsActiveSlotsByExpertInTiles) {
  Spec s;
  s.tokens = 100;
  s.k = 3;
  s.experts = 5;
  const Data d = make_data(s, 3);
  std::map<std::string, Buffer> bufs;
  (void)run_variant(s, d, "quant_grouped_routed", 40, &bufs);  // keeps the last chunk's lists
  const int64_t offset = 80, count = 20, n = count * s.k;
  const uint32_t* expert = bufs["routeExpert"].as<uint32_t>();
  const uint32_t* list = bufs["slotList"].as<uint32_t>();
  const uint32_t* meta = bufs["tileMeta"].as<uint32_t>();
  std::vector<int64_t> seen;
  int64_t prev_e = -1, prev_slot = -1;
  for (uint32_t t = 0; t < meta[0]; ++t) {
    const uint32_t e = meta[1 + 3 * t], first = meta[2 + 3 * t], cnt = meta[3 + 3 * t];
    EXPECT_GE(cnt, 1u);
    EXPECT_LE(cnt, 32u);
    EXPECT_EQ(first, (uint32_t)seen.size());
    EXPECT_GE((int64_t)e, prev_e);
    if ((int64_t)e != prev_e) prev_slot = -1;
    prev_e = e;
    for (uint32_t i = 0; i < cnt; ++i) {
      const uint32_t ls = list[first + i];
      EXPECT_EQ(expert[offset * s.k + ls], e);
      EXPECT_GT((int64_t)ls, prev_slot);
      prev_slot = ls;
      seen.push_back(ls);
    }
  }
  int64_t active = 0;
  for (int64_t ls = 0; ls < n; ++ls) active += expert[offset * s.k + ls] != kNoExpert;
  EXPECT_EQ((int64_t)seen.size(), active);
}

// FC1 + activation of every form against the reference's hidden rows.
TEST(QmoePasses, Fc1StagesWriteTheActivatedHiddenRows) {
  set_num_threads(2);
  for (int bits : {4, 8})
    for (const char* act : {"relu", "swiglu"}) {
      Spec s;
      s.bits = bits;
      s.act = act;
      s.limit = 0.5f;
      s.alpha = 1.5f;
      s.beta = 0.5f;
      if (!s.swiglu()) s.limit.reset(), s.alpha = 1, s.beta = 0;
      s.block = 16;
      s.k = 2;
      s.tokens = 40;
      const Data d = make_data(s, 11);
      const Route r = ref_route(s, d);
      const Dense m = dense(s, d);
      for (const auto& v : kVariants) {
        std::map<std::string, Buffer> bufs;
        (void)run_variant(s, d, v, 0, &bufs);
        const float* hidden = bufs["hiddenAct"].as<float>();
        std::vector<float> got;
        std::vector<double> want;
        for (int64_t slot = 0; slot < s.tokens * s.k; ++slot) {
          if (r.expert[slot] < 0) continue;
          const auto h = ref_hidden(s, d, m, slot / s.k, r.expert[slot]);
          want.insert(want.end(), h.begin(), h.end());
          got.insert(got.end(), hidden + slot * s.inter, hidden + (slot + 1) * s.inter);
        }
        EXPECT_TRUE(close(got, want)) << v << " " << s.name();
      }
    }
}

// The output stages of the split and GEMV forms, and the grouped output stage
// with the mix stage, from the same hidden rows (the reference's own).
TEST(QmoePasses, OutputAndMixStagesFromGivenHiddenRows) {
  set_num_threads(2);
  Spec s;
  s.bits = 4;
  s.block = 64;
  s.k = 4;
  s.tokens = 24;
  const Data d = make_data(s, 21);
  const Route r = ref_route(s, d);
  const Dense m = dense(s, d);
  std::vector<float> hidden(s.tokens * s.k * s.inter, kNaN);
  std::vector<double> want(s.tokens * s.hidden, 0.0);
  for (int64_t slot = 0; slot < s.tokens * s.k; ++slot) {
    if (r.expert[slot] < 0) continue;
    std::vector<double> h(s.inter);
    for (int64_t i = 0; i < s.inter; ++i) h[i] = hidden[slot * s.inter + i] = (float)std::sin(0.37 * (slot + i));
    const auto y = ref_fc2(s, m, r.expert[slot], h);
    for (int64_t i = 0; i < s.hidden; ++i) want[(slot / s.k) * s.hidden + i] += r.weight[slot] * y[i];
  }
  const json attrs = attrs_of(s);
  auto num = [&](const std::string& n) -> double {
    if (n == "hiddenChunkTokens") return (double)s.tokens;
    if (n == "groupTileM") return 32;
    throw std::runtime_error(n);
  };
  for (const auto& v : kVariants) {
    std::map<std::string, Buffer> bufs;
    (void)run_variant(s, d, v, 0, &bufs);  // routes, groups
    bufs["hiddenAct"] = make_buffer("float32", {(int64_t)hidden.size()}, hidden);
    bufs["output"] = garbage("float32", s.tokens * s.hidden);
    const bool grouped = v.find("grouped") != std::string::npos;
    std::vector<std::string> passes;
    if (v == "quant_split_routed") passes = {"QMoE.OutputStage"};
    if (v == "quant_gemv_routed") passes = {"QMoE.OutputStageGemv"};
    if (grouped) passes = {"QMoE.OutputStageGrouped", "QMoE.MixStage"};
    for (const auto& name : passes) {
      PassArgs args{attrs, num, bufs, 0, {1, 1, 1}, v};
      find_pass(name)(args);
    }
    std::vector<float> got(s.tokens * s.hidden);
    std::memcpy(got.data(), bufs["output"].bytes.data(), got.size() * 4);
    EXPECT_TRUE(close(got, want)) << v;
  }
}

TEST(QmoePasses, EveryPassNameOfThePackageIsRegistered) {
  for (const auto& v : package()["variants"])
    for (const auto& pass : v["passes"]) {
      if (pass.contains("repeat")) {
        for (const auto& inner : pass["passes"]) EXPECT_NE(find_pass(inner["name"]), nullptr) << inner["name"];
      } else {
        EXPECT_NE(find_pass(pass["name"]), nullptr) << pass["name"];
      }
    }
}

}  // namespace
}  // namespace bonfire::kernels
