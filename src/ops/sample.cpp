// sample: draws one token id per row of logits. Every step is a pure function
// of the row, the params and (seed, step, row) so a draw is reproducible on any
// worker and thread count, and by a client with numpy. Semantics: docs/OPS.md.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/rng.h"
#include "core/threads.h"
#include "ops/op.h"

namespace bonfire {

namespace {

struct SampleConfig {
  double temperature = 0;  // 0 = argmax
  int64_t top_k = 0;       // 0 = all
  double top_p = 1;        // 1 = off
  uint64_t seed = 0, step = 0;
  float repetition = 1;  // penalties apply only with a history input
  float presence = 0;
  int64_t window_begin = 0, window_end = 0;  // history rows that count
};

// A JSON number as a 64-bit counter word: integers in [-2^63, 2^64), negative
// ones as their two's complement, so a client may pass a seed either way.
uint64_t to_u64(const Params& p, const char* name) {
  if (!p.has(name)) return 0;
  const double v = p.num(name);
  check(std::isfinite(v) && v == std::floor(v) && v >= -0x1p63 && v < 0x1p64,
        std::string("sample: ") + name + " must be an integer in [-2^63, 2^64)");
  return v < 0 ? (uint64_t)(int64_t)v : (uint64_t)v;
}

// Validates the params; `hist` is the history length N, or -1 without one.
SampleConfig parse_params(const Params& p, int64_t hist) {
  SampleConfig c;
  c.temperature = p.num("temperature", 0.0);
  check(std::isfinite(c.temperature) && c.temperature >= 0,
        "sample: temperature must be a finite number >= 0 (0 = argmax)");
  c.top_k = p.int_("topK", 0);
  check(c.top_k >= 0, "sample: topK must be >= 0 (0 = off)");
  c.top_p = p.num("topP", 1.0);
  check(c.top_p > 0 && c.top_p <= 1, "sample: topP must be in (0, 1] (1 = off)");
  c.seed = to_u64(p, "seed");
  c.step = to_u64(p, "step");
  const double rep = p.num("repetitionPenalty", 1.0);
  check(std::isfinite(rep) && rep > 0, "sample: repetitionPenalty must be a finite number > 0 (1 = off)");
  const double pres = p.num("presencePenalty", 0.0);
  check(std::isfinite(pres), "sample: presencePenalty must be a finite number (0 = off)");
  c.repetition = (float)rep;
  c.presence = (float)pres;

  const int64_t N = std::max<int64_t>(hist, 0);
  const int64_t window = p.int_("penaltyWindow", N);
  check(window >= 0, "sample: penaltyWindow must be >= 0");
  const int64_t end = p.int_("penaltyEnd", N);
  check(end >= 0, "sample: penaltyEnd must be >= 0");
  if (hist >= 0)
    check(end <= hist, "sample: penaltyEnd (" + std::to_string(end) + ") is past the end of the history (" +
                           std::to_string(hist) + " rows)");
  c.window_end = std::min(end, N);
  c.window_begin = std::max<int64_t>(0, c.window_end - window);
  return c;
}

Shape infer_sample(const std::vector<TensorDesc>& in, const Params& p) {
  check(in.size() == 1 || in.size() == 2, "sample takes logits and an optional history");
  check_f32(in, 0, "sample: logits");
  const Shape& ls = in[0].shape;
  check(!ls.empty() && ls.back() >= 1,
        "sample: logits must have rank >= 1 and a non-empty last axis, got " + shape_str(ls));
  int64_t hist = -1;
  if (in.size() == 2) {
    check_f32(in, 1, "sample: history");
    const Shape& hs = in[1].shape;
    check(hs.size() == 1 || (hs.size() == 2 && hs[1] == 1),
          "sample: history must be [N] or [N, 1], got " + shape_str(hs));
    hist = hs[0];
  }
  parse_params(p, hist);
  Shape out(ls.begin(), ls.end() - 1);
  if (out.empty()) out = {1};
  return out;
}

// Larger first, NaN last, ties to the lower index: the order argmax, topK and
// the probability sort all share.
template <typename T>
struct RanksBefore {
  const T* v;
  bool operator()(int32_t a, int32_t b) const {
    const bool na = std::isnan(v[a]), nb = std::isnan(v[b]);
    if (na != nb) return nb;
    if (!na && v[a] != v[b]) return v[a] > v[b];
    return a < b;
  }
};

int64_t argmax(const float* l, int64_t V) {
  int64_t best = -1;
  for (int64_t i = 0; i < V; ++i)
    if (!std::isnan(l[i]) && (best < 0 || l[i] > l[best])) best = i;
  return best < 0 ? 0 : best;  // every logit NaN: id 0
}

// A candidate token and its unnormalised probability, ordered as the draw
// walks them: larger first, ties to the lower id (RanksBefore's order; the
// weights are never NaN).
struct Candidate {
  double weight;
  int32_t id;
  bool operator<(const Candidate& o) const { return weight != o.weight ? weight > o.weight : id < o.id; }
};

// Per-thread buffers, sized V once.
struct Scratch {
  std::vector<float> logits;
  std::vector<int32_t> idx;
  std::vector<Candidate> candidates;
};

int64_t sample_row(const float* row_logits, int64_t V, uint64_t row, const SampleConfig& c,
                   const std::vector<int64_t>& penalized, Scratch& s) {
  float* l = s.logits.data();
  std::copy(row_logits, row_logits + V, l);
  for (int64_t id : penalized) {
    float& v = l[id];
    if (v > 0)
      v /= c.repetition;
    else if (v < 0)
      v *= c.repetition;
    v -= c.presence;
  }
  if (c.temperature == 0) return argmax(l, V);

  // topK: the k best logits (partial sort), NaN ranking last.
  int32_t* idx = s.idx.data();
  for (int64_t i = 0; i < V; ++i) idx[i] = (int32_t)i;
  int64_t n = c.top_k > 0 && c.top_k < V ? c.top_k : V;
  if (n < V) std::nth_element(idx, idx + n, idx + V, RanksBefore<float>{l});
  // A NaN logit has no probability; drop it from the candidates.
  n = std::remove_if(idx, idx + n, [&](int32_t i) { return std::isnan(l[i]); }) - idx;
  // Vocabulary order, whatever nth_element left: the total below is summed
  // in it, the same on every standard library.
  if (n < V) std::sort(idx, idx + n);
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j) mx = std::max(mx, l[idx[j]]);
  if (n == 0 || mx == -std::numeric_limits<float>::infinity()) return argmax(l, V);

  // Softmax weights of l / temperature, unnormalised (mass compares against
  // the total instead), in double, and their total in vocabulary order (idx
  // is still in it). v == mx is spelled out so +inf works.
  Candidate* w = s.candidates.data();
  double total = 0;
  for (int64_t j = 0; j < n; ++j) {
    const float v = l[idx[j]];
    w[j] = {v == mx ? 1.0 : std::exp(((double)v - mx) / c.temperature), idx[j]};
    total += w[j].weight;
  }
  // The candidates in probability order, as the walks below reach them: the
  // first 64 alone (a trained model's distribution is peaked, and sorting a
  // 32000-token vocabulary took about 2 ms a row), then all the rest. The
  // order is the full sort's.
  int64_t sorted = 0;
  auto sorted_to = [&](int64_t j) {  // w[0, j] in final order
    if (j < sorted) return;
    const int64_t end = sorted == 0 ? std::min<int64_t>(n, 64) : n;
    if (end < n) std::nth_element(w + sorted, w + end, w + n);
    std::sort(w + sorted, w + end);
    sorted = end;
  };

  // topP: the shortest prefix (in probability order) whose mass reaches topP of the total.
  double kept = total;
  if (c.top_p < 1) {
    const double target = c.top_p * total;
    kept = 0;
    int64_t j = 0;
    while (j < n) {
      sorted_to(j);
      kept += w[j++].weight;
      if (kept >= target) break;
    }
    n = j;
  }

  // Walk the kept tokens until the running mass exceeds u * kept.
  const double target = uniform01(c.seed, c.step, row) * kept;
  double cum = 0;
  for (int64_t j = 0; j < n; ++j) {
    sorted_to(j);
    cum += w[j].weight;
    if (cum > target) return w[j].id;
  }
  return w[n - 1].id;  // unreachable unless rounding: u < 1
}

void run_sample(const OpInputs& in, const Params& p, Tensor& out) {
  const Tensor& logits = *in[0];
  const Tensor* history = in.size() > 1 ? in[1] : nullptr;
  const int64_t V = logits.cols(), rows = logits.rows();
  const SampleConfig c = parse_params(p, history ? history->shape[0] : -1);

  // The distinct ids in the history window, shared by every row. Ids are
  // integers held in f32; negative or out-of-vocabulary ones are empty slots.
  std::vector<int64_t> penalized;
  if (history && (c.repetition != 1 || c.presence != 0)) {
    for (int64_t i = c.window_begin; i < c.window_end; ++i) {
      const float v = history->f32()[i];
      if (!(v >= 0)) continue;  // negative or NaN
      const int64_t id = std::llround(v);
      if (id < V) penalized.push_back(id);
    }
    std::sort(penalized.begin(), penalized.end());
    penalized.erase(std::unique(penalized.begin(), penalized.end()), penalized.end());
  }

  float* o = out.f32();
  parallel_for(rows, 1, [&](int64_t r0, int64_t r1) {
    Scratch s;
    s.logits.resize(V);
    if (c.temperature > 0) {
      s.idx.resize(V);
      s.candidates.resize(V);
    }
    for (int64_t r = r0; r < r1; ++r) o[r] = (float)sample_row(logits.f32() + r * V, V, r, c, penalized, s);
  });
}

}  // namespace

void register_sample_ops(std::vector<OpDef>& ops) {
  OpDef d;
  d.name = "sample";
  d.min_inputs = 1;
  d.max_inputs = 2;
  for (const char* name : {"temperature", "topK", "topP", "seed", "step", "repetitionPenalty", "presencePenalty",
                           "penaltyWindow", "penaltyEnd"})
    d.params.push_back({name, ParamType::Number, true});
  d.features = {FeatureDef{"sample.penalty", {}, 1}};
  d.infer = infer_sample;
  d.run = run_sample;
  ops.push_back(std::move(d));
}

}  // namespace bonfire
