// moe: a sparse mixture-of-experts feed-forward (Mixtral, Qwen-MoE, OLMoE,
// DeepSeek-V3). Each token is routed to topK experts; only chosen experts
// run, each over all of its tokens at once, so an expert's weights are read
// once per call however many tokens picked it. Semantics: docs/OPS.md.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/threads.h"
#include "ops/gemm.h"
#include "ops/moe_qmoe_internal.h"
#include "ops/op.h"
#include "ops/simd.h"

namespace bonfire {

namespace {

enum class Layout { Separate, Fused, Stacked };

// Params after validation, with the manifest's defaults filled in.
struct MoeConfig {
  int64_t experts = 0;       // E
  int64_t top_k = 0;         // topK
  int64_t groups = 1;        // nGroup
  int64_t top_k_groups = 1;  // topKGroup
  int64_t group_top_k = 1;   // groupTopK
  bool sigmoid = false;
  bool normalize = false;
  bool has_bias = false;
  bool gelu = false;
  float scale = 1.0f;
  Layout layout = Layout::Separate;
  int first_weight = 2;  // index of the first expert weight input
};

MoeConfig parse_params(const Params& p, int64_t E) {
  MoeConfig c;
  c.experts = E;
  c.top_k = p.int_("topK");
  check(c.top_k >= 1 && c.top_k <= E, [&] {
    return "moe: topK must be between 1 and the number of experts (" + std::to_string(E) + "), got " +
           std::to_string(c.top_k);
  });

  const std::string scoring = p.str("scoring", "softmax");
  check(scoring == "softmax" || scoring == "sigmoid",
        [&] { return "moe: scoring must be \"softmax\" or \"sigmoid\", got \"" + scoring + "\""; });
  c.sigmoid = scoring == "sigmoid";

  const std::string act = p.str("activation", "silu");
  check(act == "silu" || act == "gelu",
        [&] { return "moe: activation must be \"silu\" or \"gelu\", got \"" + act + "\""; });
  c.gelu = act == "gelu";

  const std::string layout = p.str("layout", "separate");
  if (layout == "separate")
    c.layout = Layout::Separate;
  else if (layout == "fused")
    c.layout = Layout::Fused;
  else if (layout == "stacked")
    c.layout = Layout::Stacked;
  else
    bad_graph("moe: layout must be \"separate\", \"fused\" or \"stacked\", got \"" + layout + "\"");

  c.normalize = p.flag("normalize", false);
  c.has_bias = p.flag("selectionBias", false);
  c.first_weight = c.has_bias ? 3 : 2;
  const double scale = p.num("scale", 1.0);
  check(std::isfinite(scale), "moe: scale must be a finite number");
  c.scale = (float)scale;

  c.groups = p.int_("nGroup", 1);
  check(c.groups >= 1 && E % c.groups == 0, [&] {
    return "moe: nGroup must be a positive divisor of the number of experts (" + std::to_string(E) + "), got " +
           std::to_string(c.groups);
  });
  const int64_t group_size = E / c.groups;
  c.top_k_groups = p.int_("topKGroup", c.groups);
  check(c.top_k_groups >= 1 && c.top_k_groups <= c.groups, [&] {
    return "moe: topKGroup must be between 1 and nGroup (" + std::to_string(c.groups) + "), got " +
           std::to_string(c.top_k_groups);
  });
  check(c.top_k <= c.top_k_groups * group_size, [&] {
    return "moe: topK (" + std::to_string(c.top_k) + ") exceeds the experts left in topKGroup groups (" +
           std::to_string(c.top_k_groups * group_size) + ")";
  });
  c.group_top_k = p.int_("groupTopK", 1);
  check(c.group_top_k >= 1 && c.group_top_k <= group_size, [&] {
    return "moe: groupTopK must be between 1 and the group size E/nGroup (" + std::to_string(group_size) + "), got " +
           std::to_string(c.group_top_k);
  });
  return c;
}

// Checks one expert weight input: its shape, and that a packed one splits into
// whole blocks along its rows.
void check_weight(const std::vector<TensorDesc>& in, size_t i, const std::string& name, const Shape& want) {
  const TensorDesc& d = in[i];
  const std::string what = "moe: " + name + " (input " + std::to_string(i) + ")";
  check(d.shape == want, [&] { return what + " must be " + shape_str(want) + ", got " + shape_str(d.shape); });
  check(d.cols() % dtype_block(d.dtype) == 0, [&] {
    return what + " is " + dtype_name(d.dtype) + " but its last axis " + std::to_string(d.cols()) +
           " is not a multiple of the block size " + std::to_string(dtype_block(d.dtype));
  });
}

bool is_qmoe(const Params& p) { return p.str("layout", "separate") == "qmoe"; }

Shape infer_moe(const std::vector<TensorDesc>& in, const Params& p) {
  // An extension value (feature ext.moe.qmoe): ONNX Runtime's QMoE layout,
  // run by the QMoE kernel package (ops/moe_qmoe.h).
  if (is_qmoe(p)) return infer_moe_qmoe(in, p);
  check(in.size() >= 2, "moe takes x and the router logits");
  check_f32(in, 0, "moe: x");
  check_f32(in, 1, "moe: router logits");
  const Shape& xs = in[0].shape;
  const Shape& ls = in[1].shape;
  check(xs.size() == 2 && xs[1] >= 1, [&] { return "moe: x must be [T, C] with C >= 1, got " + shape_str(xs); });
  check(ls.size() == 2 && ls[0] == xs[0] && ls[1] >= 1, [&] {
    return "moe: router logits must be [T, E] with T = " + std::to_string(xs[0]) + " rows of x, got " + shape_str(ls);
  });
  const int64_t C = xs[1], E = ls[1];
  const MoeConfig c = parse_params(p, E);

  if (c.has_bias) {
    check(in.size() > 2, "moe: selectionBias needs a bias input after the logits");
    check_f32(in, 2, "moe: selection bias (input 2)");
    check(in[2].shape == Shape{E}, [&] {
      return "moe: selection bias (input 2) must be [" + std::to_string(E) + "], got " + shape_str(in[2].shape);
    });
  }

  const size_t w0 = c.first_weight, nw = in.size() - w0;
  switch (c.layout) {
    case Layout::Separate: {
      check(nw == (size_t)(3 * E), [&] {
        return "moe: layout \"separate\" with " + std::to_string(E) + " experts takes " + std::to_string(3 * E) +
               " weight inputs (gate_e, up_e, down_e per expert), got " + std::to_string(nw);
      });
      for (int64_t e = 0; e < E; ++e) {
        const size_t g = w0 + 3 * e;
        const std::string es = std::to_string(e);
        check(in[g].shape.size() == 2 && in[g].shape[0] >= 1, [&] {
          return "moe: gate_" + es + " (input " + std::to_string(g) + ") must be [I, " + std::to_string(C) + "], got " +
                 shape_str(in[g].shape);
        });
        const int64_t I = in[g].shape[0];
        check_weight(in, g, "gate_" + es, {I, C});
        check_weight(in, g + 1, "up_" + es, {I, C});
        check_weight(in, g + 2, "down_" + es, {C, I});
      }
      break;
    }
    case Layout::Fused: {
      check(nw == 2,
            [&] { return "moe: layout \"fused\" takes 2 weight inputs (gate_up, down), got " + std::to_string(nw); });
      const Shape& gu = in[w0].shape;
      check(gu.size() == 3 && gu[0] == E && gu[1] >= 2 && gu[1] % 2 == 0, [&] {
        return "moe: gate_up (input " + std::to_string(w0) + ") must be [" + std::to_string(E) + ", 2I, " +
               std::to_string(C) + "], got " + shape_str(gu);
      });
      const int64_t I = gu[1] / 2;
      check_weight(in, w0, "gate_up", {E, 2 * I, C});
      check_weight(in, w0 + 1, "down", {E, C, I});
      break;
    }
    case Layout::Stacked: {
      check(nw == 3, [&] {
        return "moe: layout \"stacked\" takes 3 weight inputs (gate, up, down), got " + std::to_string(nw);
      });
      const Shape& gs = in[w0].shape;
      check(gs.size() == 3 && gs[1] >= 1, [&] {
        return "moe: gate (input " + std::to_string(w0) + ") must be [" + std::to_string(E) + ", I, " +
               std::to_string(C) + "], got " + shape_str(gs);
      });
      const int64_t I = gs[1];
      check_weight(in, w0, "gate", {E, I, C});
      check_weight(in, w0 + 1, "up", {E, I, C});
      check_weight(in, w0 + 2, "down", {E, C, I});
      break;
    }
  }
  return {xs[0], C};
}

// ---- Routing ---------------------------------------------------------------

// Strict weak order "a ranks before b": larger value first, NaN last, ties to
// the lower index. Routing and the tests rely on the tie rule.
struct RanksBefore {
  const float* v;
  bool operator()(int32_t a, int32_t b) const {
    const bool na = std::isnan(v[a]), nb = std::isnan(v[b]);
    if (na != nb) return nb;
    if (!na && v[a] != v[b]) return v[a] > v[b];
    return a < b;
  }
};

// The k best of v[idx[0..n)], best first, left in idx[0..k).
void top_k(const float* v, int32_t* idx, int64_t n, int64_t k) {
  std::partial_sort(idx, idx + k, idx + n, RanksBefore{v});
}

// Routes one token: chosen experts (best first) and their weights.
void route(const float* logits, const float* bias, const MoeConfig& c, int32_t* chosen, float* weight,
           std::vector<float>& score, std::vector<float>& choice, std::vector<int32_t>& idx) {
  const int64_t E = c.experts;
  if (c.sigmoid) {
    for (int64_t e = 0; e < E; ++e) score[e] = 1.0f / (1.0f + std::exp(-logits[e]));
  } else {
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t e = 0; e < E; ++e) mx = std::max(mx, logits[e]);
    double sum = 0;
    for (int64_t e = 0; e < E; ++e) sum += score[e] = std::exp(logits[e] - mx);
    const float inv = (float)(1.0 / sum);
    for (int64_t e = 0; e < E; ++e) score[e] *= inv;
  }
  // The bias steers which experts are chosen; the weights stay unbiased.
  for (int64_t e = 0; e < E; ++e) choice[e] = score[e] + (bias ? bias[e] : 0.0f);

  if (c.groups > 1 && c.top_k_groups < c.groups) {
    // Group-limited routing: a group's score is the sum of its best
    // groupTopK choice values; only the best topKGroup groups stay eligible.
    const int64_t G = E / c.groups;
    std::vector<float> group_score(c.groups);
    for (int64_t g = 0; g < c.groups; ++g) {
      for (int64_t j = 0; j < G; ++j) idx[j] = (int32_t)(g * G + j);
      top_k(choice.data(), idx.data(), G, c.group_top_k);
      float s = 0;
      for (int64_t j = 0; j < c.group_top_k; ++j) s += choice[idx[j]];
      group_score[g] = s;
    }
    for (int64_t g = 0; g < c.groups; ++g) idx[g] = (int32_t)g;
    top_k(group_score.data(), idx.data(), c.groups, c.top_k_groups);
    std::vector<char> keep(c.groups, 0);
    for (int64_t g = 0; g < c.top_k_groups; ++g) keep[idx[g]] = 1;
    for (int64_t e = 0; e < E; ++e)
      if (!keep[e / G]) choice[e] = -std::numeric_limits<float>::infinity();
  }

  for (int64_t e = 0; e < E; ++e) idx[e] = (int32_t)e;
  top_k(choice.data(), idx.data(), E, c.top_k);
  float sum = 0;
  for (int64_t k = 0; k < c.top_k; ++k) {
    chosen[k] = idx[k];
    weight[k] = score[idx[k]];
    sum += weight[k];
  }
  // An all-zero choice (sigmoid underflow) stays zero rather than NaN.
  const float norm = c.normalize && sum > 0 ? 1.0f / sum : 1.0f;
  for (int64_t k = 0; k < c.top_k; ++k) weight[k] *= norm * c.scale;
}

// ---- Experts ---------------------------------------------------------------

// One expert's weights as row views: gate and up [I, C] (adjacent when the
// layout fuses them), down [C, I].
struct Expert {
  WeightRows gate, up, down;
  bool fused = false;  // gate and up are one [2I, C] view in `gate`
  int64_t inter = 0;   // I
};

Expert expert_weights(const OpInputs& in, const MoeConfig& c, int64_t e, int64_t C) {
  const int w0 = c.first_weight;
  Expert x;
  switch (c.layout) {
    case Layout::Separate:
      x.gate = weight_rows(*in[w0 + 3 * e]);
      x.up = weight_rows(*in[w0 + 3 * e + 1]);
      x.down = weight_rows(*in[w0 + 3 * e + 2]);
      x.inter = x.gate.rows;
      break;
    case Layout::Fused:
      x.inter = in[w0]->shape[1] / 2;
      x.gate = weight_rows(*in[w0], e * 2 * x.inter, 2 * x.inter);
      x.down = weight_rows(*in[w0 + 1], e * C, C);
      x.fused = true;
      break;
    case Layout::Stacked:
      x.inter = in[w0]->shape[1];
      x.gate = weight_rows(*in[w0], e * x.inter, x.inter);
      x.up = weight_rows(*in[w0 + 1], e * x.inter, x.inter);
      x.down = weight_rows(*in[w0 + 2], e * C, C);
      break;
  }
  return x;
}

inline float silu(float g) { return g / (1.0f + std::exp(-g)); }
inline float gelu_tanh(float g) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * g * (1.0f + std::tanh(kSqrt2OverPi * (g + 0.044715f * g * g * g)));
}

// Runs expert `w` over the n gathered rows xs [n, C] into ys [n, C].
// h [n, 2I] is scratch: gate in columns [0, I), up in [I, 2I).
void run_expert(const Expert& w, const MoeConfig& c, const float* xs, int64_t n, int64_t C, float* h, float* ys) {
  const int64_t I = w.inter;
  if (w.fused) {
    gemm_nt(xs, n, C, w.gate, h, 2 * I);
  } else {
    gemm_nt(xs, n, C, w.gate, h, 2 * I);
    gemm_nt(xs, n, C, w.up, h + I, 2 * I);
  }
  parallel_for(n, 4, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* g = h + r * 2 * I;
      const float* u = g + I;
      if (c.gelu)
        for (int64_t i = 0; i < I; ++i) g[i] = gelu_tanh(g[i]) * u[i];
      else
        for (int64_t i = 0; i < I; ++i) g[i] = silu(g[i]) * u[i];
    }
  });
  gemm_nt(h, n, 2 * I, w.down, ys, C);
}

void run_moe(const OpInputs& in, const Params& p, Tensor& out) {
  if (is_qmoe(p)) return run_moe_qmoe(in, p, out);
  const Tensor& x = *in[0];
  const Tensor& logits = *in[1];
  const int64_t T = x.shape[0], C = x.shape[1], E = logits.shape[1];
  const MoeConfig c = parse_params(p, E);
  const int64_t K = c.top_k;
  const float* bias = c.has_bias ? in[2]->f32() : nullptr;
  if (T == 0) return;

  // 1. Route every token.
  std::vector<int32_t> chosen(T * K);
  std::vector<float> weight(T * K);
  parallel_for(T, 8, [&](int64_t t0, int64_t t1) {
    std::vector<float> score(E), choice(E);
    std::vector<int32_t> idx(E);
    for (int64_t t = t0; t < t1; ++t)
      route(logits.f32() + t * E, bias, c, &chosen[t * K], &weight[t * K], score, choice, idx);
  });

  // 2. Bucket the (token, slot) pairs by expert (a counting sort keeps each
  // expert's tokens in token order).
  std::vector<int64_t> start(E + 1, 0);
  for (int64_t s = 0; s < T * K; ++s) ++start[chosen[s] + 1];
  for (int64_t e = 0; e < E; ++e) start[e + 1] += start[e];
  std::vector<int64_t> slots(T * K), fill(start.begin(), start.end() - 1);
  for (int64_t s = 0; s < T * K; ++s) slots[fill[chosen[s]]++] = s;

  // 3. Run each chosen expert once over its tokens and add the weighted
  // result. Experts go one after another: gemm_nt splits each over the
  // threads, and a token appears at most once per expert, so the scatter of
  // one expert's rows is race-free.
  int64_t max_rows = 0, max_inter = 0;
  for (int64_t e = 0; e < E; ++e) {
    if (start[e + 1] == start[e]) continue;
    max_rows = std::max(max_rows, start[e + 1] - start[e]);
    max_inter = std::max(max_inter, expert_weights(in, c, e, C).inter);
  }
  std::vector<float> xs(max_rows * C), ys(max_rows * C), h(max_rows * 2 * max_inter);
  float* o = out.f32();
  std::memset(o, 0, T * C * sizeof(float));
  for (int64_t e = 0; e < E; ++e) {
    const int64_t n = start[e + 1] - start[e];
    if (n == 0) continue;
    const int64_t* sl = &slots[start[e]];
    for (int64_t r = 0; r < n; ++r) std::memcpy(&xs[r * C], x.f32() + (sl[r] / K) * C, C * sizeof(float));
    run_expert(expert_weights(in, c, e, C), c, xs.data(), n, C, h.data(), ys.data());
    parallel_for(n, 16, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) simd::axpy_f32(weight[sl[r]], &ys[r * C], o + (sl[r] / K) * C, C);
    });
  }
}

}  // namespace

void register_moe_ops(std::vector<OpDef>& ops) {
  OpDef d;
  d.name = "moe";
  d.min_inputs = 2;
  d.max_inputs = 1539;
  d.params = {
      {"topK", ParamType::Number, false},     {"scoring", ParamType::String, true},
      {"normalize", ParamType::Bool, true},   {"scale", ParamType::Number, true},
      {"nGroup", ParamType::Number, true},    {"topKGroup", ParamType::Number, true},
      {"groupTopK", ParamType::Number, true}, {"selectionBias", ParamType::Bool, true},
      {"layout", ParamType::String, true},    {"activation", ParamType::String, true},
  };
  // Not in the manifest: layout "qmoe" (docs/PROTOCOL-EXTENSIONS.md).
  FeatureDef q;
  q.name = "ext.moe.qmoe";
  q.params = {"layout"};
  q.value = "qmoe";
  d.features = {q};
  d.infer = infer_moe;
  d.run = run_moe;
  d.packed_inputs = ~0u << 2;  // expert weights; infer holds the selection bias to f32
  ops.push_back(std::move(d));
}

}  // namespace bonfire
