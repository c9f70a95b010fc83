// Scaled dot-product attention with grouped-query heads, causal and sliding
// window masks, softcapping, ALiBi and an additive bias (docs/OPS.md).
//
// Each (head, query row) is independent: its visible keys are walked in
// tiles with an online softmax (running max, running sum, accumulator
// rescaled when the max grows), as flash attention does. No score matrix is
// ever materialised, and masked tiles are never touched, so one decode step
// against a long cache costs only the keys it can see. The query heads that
// share a kv head run together, so K and V are read once per group.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "core/threads.h"
#include "ops/op.h"
#include "ops/simd.h"

namespace bonfire {

namespace {

constexpr int64_t kKeyTile = 64;

struct AttnConfig {
  int64_t heads = 0, head_dim = 0, kv_heads = 0, v_head_dim = 0;
  bool causal = true;
  int64_t pos_offset = 0;
  float scale = 1;
  float softcap = 0;   // 0: none
  int64_t window = 0;  // 0: none
  std::vector<float> slopes;  // per head; empty: no ALiBi
};

// dflt < 0: the param is required.
int64_t positive_int(const Params& p, const char* name, int64_t dflt) {
  check(dflt >= 0 || p.has(name), std::string("param ") + name + " is required");
  const int64_t v = p.int_(name, dflt);
  check(v > 0, std::string("param ") + name + " must be a positive integer, got " + std::to_string(v));
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

AttnConfig parse_attention(const Params& p) {
  AttnConfig c;
  c.heads = positive_int(p, "heads", -1);
  c.head_dim = positive_int(p, "headDim", -1);
  c.kv_heads = positive_int(p, "kvHeads", c.heads);
  c.v_head_dim = positive_int(p, "vHeadDim", c.head_dim);
  check(c.heads % c.kv_heads == 0, "param heads (" + std::to_string(c.heads) +
                                       ") must be a multiple of param kvHeads (" + std::to_string(c.kv_heads) + ")");
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
    check(c.window > 0, "param window must be a positive integer, got " + std::to_string(c.window));
  }
  if (const json* a = p.get("alibiSlopes")) {
    check(a->is_array() && (int64_t)a->size() == c.heads,
          "param alibiSlopes must be an array of " + std::to_string(c.heads) + " numbers (one per head)");
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
  const AttnConfig c = parse_attention(p);
  for (size_t i = 0; i < 3; ++i)
    check(in[i].shape.size() == 2,
          std::string(names[i]) + " must have rank 2 (rows, heads*headDim), got " + shape_str(in[i].shape));
  const int64_t T = in[0].shape[0], S = in[1].shape[0];
  auto width = [](int64_t h, int64_t d, const char* what) {
    return std::to_string(h * d) + " (" + what + ")";
  };
  check(in[0].shape[1] == c.heads * c.head_dim,
        "q must be " + width(c.heads, c.head_dim, "heads*headDim") + " wide, got " + shape_str(in[0].shape));
  check(in[1].shape[1] == c.kv_heads * c.head_dim,
        "k must be " + width(c.kv_heads, c.head_dim, "kvHeads*headDim") + " wide, got " + shape_str(in[1].shape));
  check(in[2].shape[1] == c.kv_heads * c.v_head_dim,
        "v must be " + width(c.kv_heads, c.v_head_dim, "kvHeads*vHeadDim") + " wide, got " + shape_str(in[2].shape));
  check(in[2].shape[0] == S, "k and v must have the same number of rows, got " + shape_str(in[1].shape) + " and " +
                                 shape_str(in[2].shape));
  if (in.size() > 3) {
    const Shape& b = in[3].shape;
    const bool ok = (b.size() == 2 && b[0] == T && b[1] == S) ||
                    (b.size() == 3 && b[0] == c.heads && b[1] == T && b[2] == S);
    check(ok, "bias must be [T, S] = " + shape_str({T, S}) + " or [heads, T, S] = " + shape_str({c.heads, T, S}) +
                  ", got " + shape_str(b));
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

// Online-softmax state of one query row of one head.
struct RowState {
  float max;   // running max of the scores seen
  double sum;  // running sum of exp(score - max)
  bool nan;    // a NaN score poisons the row, as it would the softmax
  float* acc;  // running sum of exp(score - max) * v, Dv wide
};

void run_attention(const OpInputs& in, const Params& p, Tensor& out) {
  const AttnConfig c = parse_attention(p);
  const int64_t H = c.heads, D = c.head_dim, KV = c.kv_heads, Dv = c.v_head_dim;
  const int64_t T = in[0]->shape[0], S = in[1]->shape[0];
  const int64_t group = H / KV;
  const float *q = in[0]->f32(), *k = in[1]->f32(), *v = in[2]->f32();
  const float* bias = in.size() > 3 ? in[3]->f32() : nullptr;
  const bool bias_per_head = in.size() > 3 && in[3]->shape.size() == 3;
  float* o = out.f32();
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();

  // A job is one query row of a block of `hb` query heads sharing one kv
  // head, so each K/V row is fetched once for the whole block: decode
  // against a long cache is bound by that traffic. Blocks shrink (down to
  // one head) when there would be too few jobs to occupy the threads.
  int64_t hb = group;
  while (hb % 2 == 0 && (H / hb) * T < 2 * num_threads()) hb /= 2;
  const int64_t blocks = H / hb;
  const int64_t grain = std::max<int64_t>(1, 16384 / (S * hb * (D + Dv) + 1));
  parallel_for(blocks * T, grain, [&](int64_t j0, int64_t j1) {
    std::vector<float> acc_buf(hb * Dv);
    std::vector<RowState> st(hb);
    std::vector<float> score(hb * kKeyTile);  // [head][key in tile]
    for (int64_t j = j0; j < j1; ++j) {
      // Rows innermost: neighbouring jobs read the same kv head.
      const int64_t h0 = (j / T) * hb, t = j % T, g = h0 / group;
      const int64_t pos = c.pos_offset + t;
      const float* kh = k + g * D;
      const float* vh = v + g * Dv;
      for (int64_t b = 0; b < hb; ++b) st[b] = {kNegInf, 0.0, false, &acc_buf[b * Dv]};
      std::fill(acc_buf.begin(), acc_buf.end(), 0.0f);

      int64_t lo, hi;
      visible_keys(c, pos, S, &lo, &hi);
      for (int64_t s0 = lo; s0 <= hi; s0 += kKeyTile) {
        const int64_t n = std::min(kKeyTile, hi + 1 - s0);
        for (int64_t b = 0; b < hb; ++b) {
          const int64_t h = h0 + b;
          const float* qr = q + t * H * D + h * D;
          const float* brow = bias ? bias + ((bias_per_head ? h * T : 0) + t) * S : nullptr;
          const float slope = c.slopes.empty() ? 0.0f : c.slopes[h];
          float* sc = &score[b * kKeyTile];
          RowState& r = st[b];
          float tile_max = kNegInf;
          simd::dot_rows(qr, kh + s0 * KV * D, KV * D, n, D, sc);
          if (c.softcap == 0 && slope == 0.0f && !brow) {  // the common case, vectorized
            tile_max = simd::scale_max(sc, n, c.scale, &r.nan);
          } else {
            for (int64_t i = 0; i < n; ++i) {
              const int64_t s = s0 + i;
              float x = sc[i] * c.scale;
              if (c.softcap > 0) x = c.softcap * std::tanh(x / c.softcap);
              // ALiBi relative to the query: BLOOM's slope*s shifted per row.
              if (slope != 0.0f) x += slope * (float)(s - pos);
              if (brow) x += brow[s];
              r.nan |= std::isnan(x);
              sc[i] = x;
              tile_max = std::max(tile_max, x);
            }
          }
          if (tile_max > r.max) {
            // The terms so far were relative to a smaller max: shrink them.
            const float corr = std::exp(r.max - tile_max);
            r.sum *= corr;
            simd::scale_f32(corr, r.acc, Dv);
            r.max = tile_max;
          }
          // Turn scores into weights now; -inf (every key biased away)
          // gives 0 and is skipped below.
          if (r.max == kNegInf)
            std::fill(sc, sc + n, 0.0f);
          else
            r.sum += simd::exp_shifted(sc, n, r.max);
        }
        simd::weighted_rows(score.data(), kKeyTile, hb, vh + s0 * KV * Dv, KV * Dv, n, Dv, acc_buf.data(), Dv);
      }
      for (int64_t b = 0; b < hb; ++b) {
        const RowState& r = st[b];
        float* orow = o + t * H * Dv + (h0 + b) * Dv;
        if (r.nan) {
          std::fill(orow, orow + Dv, std::numeric_limits<float>::quiet_NaN());
        } else if (r.max == kNegInf) {
          std::fill(orow, orow + Dv, 0.0f);  // no key visible: zeros, by decision
        } else {
          const float inv = (float)(1.0 / r.sum);
          for (int64_t d = 0; d < Dv; ++d) orow[d] = r.acc[d] * inv;
        }
      }
    }
  });
}

}  // namespace

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
      {.name = "attention.alibi", .params = {"alibi", "alibiMax", "alibiSlopes"}},
      {.name = "attention.bias", .params = {}, .input = 3},
      {.name = "attention.scale", .params = {"scale"}},
      {.name = "attention.softcap", .params = {"softcap"}},
      {.name = "attention.window", .params = {"window"}},
  };
  op.infer = infer_attention;
  op.run = run_attention;
  ops.push_back(std::move(op));
}

}  // namespace bonfire
