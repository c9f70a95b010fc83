// Scaled dot-product attention with grouped-query heads, causal and sliding
// window masks, softcapping, ALiBi and an additive bias (docs/OPS.md): the
// params and the visible keys; the kernel is attention_core.h's, so one
// decode step against a long cache costs only the keys it can see.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "core/threads.h"
#include "ops/attention_core.h"
#include "ops/op.h"
#include "ops/simd.h"

namespace bonfire {

namespace {

// dflt < 0: the param is required.
int64_t positive_int(const Params& p, const char* name, int64_t dflt) {
  check(dflt >= 0 || p.has(name), [&] { return std::string("param ") + name + " is required"; });
  const int64_t v = p.int_(name, dflt);
  check(v > 0, [&] { return std::string("param ") + name + " must be a positive integer, got " + std::to_string(v); });
  return v;
}

// BLOOM (build_alibi_tensor): geometric slopes 2^(-8k/n) for the largest
// power of two n <= H, then every other slope of the 2n sequence for the
// remaining heads. f32 as transformers computes them.
std::vector<float> bloom_slopes(int64_t H) {
  int64_t n = 1;
  while (n * 2 <= H) n *= 2;
  auto base_of = [](int64_t m) { return (float)std::pow(2.0, -std::pow(2.0, -(std::log2((double)m) - 3))); };
  std::vector<float> s;
  const float base = base_of(n);
  for (int64_t k = 1; k <= n; ++k) s.push_back((float)std::pow((double)base, (double)k));
  const float extra = base_of(2 * n);
  for (int64_t k = 1; (int64_t)s.size() < H; k += 2) s.push_back((float)std::pow((double)extra, (double)k));
  return s;
}

// MPT (gen_slopes): 2^-(m * maxBias / n) for m = 1..n, n the next power of
// two >= H; when H < n the odd-indexed slopes come first, then the even ones.
std::vector<float> mpt_slopes(int64_t H, double max_bias) {
  int64_t n = 1;
  while (n < H) n *= 2;
  std::vector<float> all;
  const float step = (float)(max_bias / (double)n);
  for (int64_t m = 1; m <= n; ++m) all.push_back(1.0f / (float)std::exp2((double)((float)m * step)));
  if (n == H) return all;
  std::vector<float> s;
  for (int64_t i = 1; i < n; i += 2) s.push_back(all[i]);
  for (int64_t i = 0; i < n; i += 2) s.push_back(all[i]);
  s.resize(H);
  return s;
}

AttnConfig parse_config(const Params& p) {
  AttnConfig c;
  c.heads = positive_int(p, "heads", -1);
  c.head_dim = positive_int(p, "headDim", -1);
  c.kv_heads = positive_int(p, "kvHeads", c.heads);
  c.v_head_dim = positive_int(p, "vHeadDim", c.head_dim);
  check(c.heads % c.kv_heads == 0, [&] {
    return "param heads (" + std::to_string(c.heads) + ") must be a multiple of param kvHeads (" +
           std::to_string(c.kv_heads) + ")";
  });
  c.causal = p.flag("causal", true);
  c.pos_offset = p.int_("posOffset", 0);
  const double scale = p.num("scale", 1.0 / std::sqrt((double)c.head_dim));
  check(std::isfinite(scale), "param scale must be a finite number");
  c.scale = (float)scale;
  if (p.has("softcap")) {
    const double cap = p.num("softcap");
    check(std::isfinite(cap) && cap > 0, "param softcap must be a positive number");
    c.softcap = (float)cap;
  }
  if (p.has("window")) {
    c.window = p.int_("window");
    check(c.window > 0, [&] { return "param window must be a positive integer, got " + std::to_string(c.window); });
  }
  if (const json* a = p.get("alibiSlopes")) {
    check(a->is_array() && (int64_t)a->size() == c.heads, [&] {
      return "param alibiSlopes must be an array of " + std::to_string(c.heads) + " numbers (one per head)";
    });
    for (const auto& v : *a) {
      check(v.is_number() && std::isfinite(v.get<double>()), "param alibiSlopes must hold finite numbers only");
      c.slopes.push_back((float)v.get<double>());
    }
  } else if (p.has("alibiMax")) {
    const double m = p.num("alibiMax");
    check(std::isfinite(m) && m > 0, "param alibiMax must be a positive number");
    c.slopes = mpt_slopes(c.heads, m);
  } else if (p.flag("alibi", false)) {
    c.slopes = bloom_slopes(c.heads);
  }
  return c;
}

Shape infer_attention(const std::vector<TensorDesc>& in, const Params& p) {
  const char* names[] = {"q", "k", "v", "bias"};
  for (size_t i = 0; i < in.size() && i < 4; ++i) check_f32(in, i, names[i]);
  const AttnConfig c = parse_config(p);
  for (size_t i = 0; i < 3; ++i)
    check(in[i].shape.size() == 2, [&] {
      return std::string(names[i]) + " must have rank 2 (rows, heads*headDim), got " + shape_str(in[i].shape);
    });
  const int64_t T = in[0].shape[0], S = in[1].shape[0];
  auto width = [](int64_t h, int64_t d, const char* what) {
    return std::to_string(h * d) + " (" + what + ")";
  };
  check(in[0].shape[1] == c.heads * c.head_dim, [&] {
    return "q must be " + width(c.heads, c.head_dim, "heads*headDim") + " wide, got " + shape_str(in[0].shape);
  });
  check(in[1].shape[1] == c.kv_heads * c.head_dim, [&] {
    return "k must be " + width(c.kv_heads, c.head_dim, "kvHeads*headDim") + " wide, got " + shape_str(in[1].shape);
  });
  check(in[2].shape[1] == c.kv_heads * c.v_head_dim, [&] {
    return "v must be " + width(c.kv_heads, c.v_head_dim, "kvHeads*vHeadDim") + " wide, got " + shape_str(in[2].shape);
  });
  check(in[2].shape[0] == S, [&] {
    return "k and v must have the same number of rows, got " + shape_str(in[1].shape) + " and " +
           shape_str(in[2].shape);
  });
  if (in.size() > 3) {
    const Shape& b = in[3].shape;
    const bool ok = (b.size() == 2 && b[0] == T && b[1] == S) ||
                    (b.size() == 3 && b[0] == c.heads && b[1] == T && b[2] == S);
    check(ok, [&] {
      return "bias must be [T, S] = " + shape_str({T, S}) + " or [heads, T, S] = " + shape_str({c.heads, T, S}) +
             ", got " + shape_str(b);
    });
  }
  return {T, c.heads * c.v_head_dim};
}

// The keys query position `pos` may see, as an inclusive range [lo, hi]
// (empty when lo > hi).
void visible_keys(const AttnConfig& c, int64_t pos, int64_t S, int64_t* lo, int64_t* hi) {
  int64_t a = 0, b = S - 1;
  if (c.causal) {
    b = std::min(b, pos);
    if (c.window) a = std::max(a, pos - c.window + 1);
  } else if (c.window) {
    a = std::max(a, pos - c.window);
    b = std::min(b, pos + c.window);
  }
  *lo = a;
  *hi = b;
}

void run_attention(const OpInputs& in, const Params& p, Tensor& out) {
  const AttnConfig c = parse_config(p);
  const int64_t T = in[0]->shape[0], S = in[1]->shape[0];
  const float *k = in[1]->f32(), *v = in[2]->f32();
  const int64_t ks = c.kv_heads * c.head_dim, vs = c.kv_heads * c.v_head_dim;
  AttendBias bias;
  if (in.size() > 3) bias = {in[3]->f32(), in[3]->shape.size() == 3, S};
  // Key row s is position s.
  attend(c, in[0]->f32(), T, S, bias, out.f32(), [&](int64_t pos, std::vector<KeyRun>& runs) {
    int64_t lo, hi;
    visible_keys(c, pos, S, &lo, &hi);
    if (lo <= hi) runs.push_back({k + lo * ks, v + lo * vs, hi - lo + 1, lo, lo});
  });
}

}  // namespace

AttnConfig parse_attention(const Params& p) { return parse_config(p); }

void register_attention_ops(std::vector<OpDef>& ops) {
  OpDef op;
  op.name = "attention";
  op.min_inputs = 3;
  op.max_inputs = 4;
  op.params = {
      {"heads", ParamType::Number, false},   {"headDim", ParamType::Number, false},
      {"kvHeads", ParamType::Number, true},  {"vHeadDim", ParamType::Number, true},
      {"causal", ParamType::Bool, true},     {"posOffset", ParamType::Number, true},
      {"scale", ParamType::Number, true},    {"softcap", ParamType::Number, true},
      {"window", ParamType::Number, true},   {"alibi", ParamType::Bool, true},
      {"alibiMax", ParamType::Number, true}, {"alibiSlopes", ParamType::Array, true},
  };
  op.features = {
      {.name = "attention.alibi", .params = {"alibi", "alibiMax", "alibiSlopes"},
       .neutral = [](const nlohmann::json& p) {
         return p.value("alibi", true) == false && !p.contains("alibiMax") && !p.contains("alibiSlopes");
       }},
      {.name = "attention.bias", .params = {}, .input = 3},
      // 1/sqrt(headDim) as an f32 would round it: what any worker uses.
      {.name = "attention.scale", .params = {"scale"},
       .neutral = [](const nlohmann::json& p) {
         const nlohmann::json& s = p["scale"];
         const nlohmann::json* hd = p.contains("headDim") ? &p["headDim"] : nullptr;
         return s.is_number() && hd && hd->is_number() && hd->get<double>() > 0 &&
                (float)s.get<double>() == (float)(1.0 / std::sqrt(hd->get<double>()));
       }},
      {.name = "attention.softcap", .params = {"softcap"}},
      {.name = "attention.window", .params = {"window"}},
  };
  op.infer = infer_attention;
  op.run = run_attention;
  ops.push_back(std::move(op));
}

}  // namespace bonfire
