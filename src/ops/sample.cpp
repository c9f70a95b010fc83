// sample: draws one token id per row of logits. Every step is a pure function
// of the row, the params and (seed, step, row) so a draw is reproducible on any
// worker and thread count, and by a client with numpy. Semantics: docs/OPS.md.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/rng.h"
#include "core/threads.h"
#include "ops/simd.h"
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
        [&] { return std::string("sample: ") + name + " must be an integer in [-2^63, 2^64)"; });
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
  check(c.top_p >= 0 && c.top_p <= 1, "sample: topP must be in [0, 1] (1 = off)");
  // topP 0 keeps the most likely token alone (transformers' top-p keeps at
  // least one): top-k 1.
  if (c.top_p == 0) c.top_p = 1, c.top_k = 1;
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
    check(end <= hist, [&] {
      return "sample: penaltyEnd (" + std::to_string(end) + ") is past the end of the history (" +
             std::to_string(hist) + " rows)";
    });
  c.window_end = std::min(end, N);
  c.window_begin = std::max<int64_t>(0, c.window_end - window);
  return c;
}

Shape infer_sample(const std::vector<TensorDesc>& in, const Params& p) {
  check(in.size() == 1 || in.size() == 2, "sample takes logits and an optional history");
  check_f32(in, 0, "sample: logits");
  const Shape& ls = in[0].shape;
  check(!ls.empty() && ls.back() >= 1,
        [&] { return "sample: logits must have rank >= 1 and a non-empty last axis, got " + shape_str(ls); });
  int64_t hist = -1;
  if (in.size() == 2) {
    check_f32(in, 1, "sample: history");
    const Shape& hs = in[1].shape;
    check(hs.size() == 1 || (hs.size() == 2 && hs[1] == 1),
          [&] { return "sample: history must be [N] or [N, 1], got " + shape_str(hs); });
    hist = hs[0];
  }
  parse_params(p, hist);
  Shape out(ls.begin(), ls.end() - 1);
  if (out.empty()) out = {1};
  return out;
}

// Larger first, NaN last, ties to the lower index: the order argmax, topK and
// the draw (Candidate below) all share.
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

// The candidates' weights in buckets of probability order: a weight's
// bucket is its octave and the top 6 bits of its mantissa (64 buckets an
// octave from 2^-63 up; the weight 1 alone in the top bucket; everything
// below 2^-63 in bucket 0), so a larger weight is never in a lower bucket.
// The topP cut and the draw walk the buckets' masses from the top and sort
// only the bucket their target falls in: a sampled row of a 32000-token
// vocabulary keeps most of it, and selecting by partitioning (a quickselect
// by mass) cost 0.25-0.5 ms a row, a full sort ~2 ms.
constexpr int kOctaves = 63, kBucketsPerOctave = 64;
constexpr int kBuckets = kOctaves * kBucketsPerOctave + 2;

inline int bucket_of(double w) {  // w in [0, 1]
  uint64_t bits;
  std::memcpy(&bits, &w, sizeof bits);
  const int64_t octave = static_cast<int64_t>(bits >> 52) - (1023 - kOctaves);  // 2^-63 is octave 0, 1 is 63
  if (octave < 0) return 0;
  return static_cast<int>(std::min<int64_t>(octave * kBucketsPerOctave + ((bits >> 46) & 63) + 1, kBuckets - 1));
}

// Per-thread buffers, kept between calls: sized afresh every call they
// were 768 KB a row for a 32000-token vocabulary, which malloc maps and
// unmaps, and the page faults of touching them again cost a batched
// decode step more than the draws themselves.
struct Scratch {
  std::vector<float> logits;
  std::vector<int32_t> idx;
  std::vector<float> values;    // the candidates' logits
  std::vector<double> weights;  // and their weights
  std::vector<Candidate> candidates;
  std::vector<uint16_t> bucket;    // each candidate's
  std::vector<double> mass;        // each bucket's, summed in candidate order
  std::vector<int32_t> count;      // each bucket's candidates
  std::vector<Candidate> members;  // one bucket's candidates, sorted
  int members_of = -1;             // that bucket
};

// A candidate's place in probability order: its bucket, and its index
// among the bucket's candidates sorted.
struct Place {
  int bucket;
  int64_t index;
};

// s.members = bucket b's candidates of w[0, n), sorted.
void gather(Scratch& s, const Candidate* w, int64_t n, int b) {
  if (s.members_of == b) return;
  s.members.clear();
  for (int64_t j = 0; j < n; ++j)
    if (s.bucket[j] == b) s.members.push_back(w[j]);
  std::sort(s.members.begin(), s.members.end());
  s.members_of = b;
}

// Walks w[0, n) in probability order, up to and including `last`, until
// the running mass reaches `target` (exceeds it when `strict`); returns
// that candidate's place (`last` when rounding keeps the whole walk short
// of the target) and sets *mass to the running mass there. A bucket wholly
// before `last` whose mass leaves the target unreached is passed in one
// step; only the bucket where the target falls is sorted. So the running
// mass adds whole buckets' masses (each summed in vocabulary order), then
// candidates one by one: a target within rounding of a boundary may fall on
// the other side than a one-by-one walk's.
Place walk_by_mass(Scratch& s, const Candidate* w, int64_t n, double target, bool strict, Place last,
                   double* mass) {
  auto reaches = [&](double m) { return strict ? m > target : m >= target; };
  double before = 0;
  for (int b = kBuckets - 1; b >= last.bucket; --b) {
    if (s.count[b] == 0) continue;
    if (b != last.bucket && !reaches(before + s.mass[b])) {
      before += s.mass[b];
      continue;
    }
    gather(s, w, n, b);
    const int64_t end = b == last.bucket ? last.index + 1 : s.count[b];
    for (int64_t j = 0; j < end; ++j) {
      before += s.members[j].weight;
      if (reaches(before)) {
        *mass = before;
        return {b, j};
      }
    }
  }
  *mass = before;
  return last;
}

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
  // is still in it).
  Candidate* w = s.candidates.data();
  double total = 0;
  std::fill(s.mass.begin(), s.mass.end(), 0.0);
  std::fill(s.count.begin(), s.count.end(), 0);
  int lowest = kBuckets - 1;
  // The candidates' logits side by side (already so when every token is one).
  const float* v = l;
  if (n < V) {
    for (int64_t j = 0; j < n; ++j) s.values[j] = l[idx[j]];
    v = s.values.data();
  }
  simd::softmax_weights_f64(v, n, mx, c.temperature, s.weights.data());
  for (int64_t j = 0; j < n; ++j) {
    w[j] = {s.weights[j], idx[j]};
    total += w[j].weight;
    const int b = bucket_of(w[j].weight);
    s.bucket[j] = static_cast<uint16_t>(b);
    s.mass[b] += w[j].weight;
    ++s.count[b];
    lowest = std::min(lowest, b);
  }
  s.members_of = -1;
  // topP: the shortest prefix (in probability order) whose mass reaches
  // topP of the total; then the draw: the first kept token at which the
  // running mass exceeds u * kept.
  Place last{lowest, s.count[lowest] - 1};
  double kept = total;
  if (c.top_p < 1) last = walk_by_mass(s, w, n, c.top_p * total, false, last, &kept);
  double unused;
  const Place drawn = walk_by_mass(s, w, n, uniform01(c.seed, c.step, row) * kept, true, last, &unused);
  gather(s, w, n, drawn.bucket);
  return s.members[drawn.index].id;
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
    thread_local Scratch s;
    if (static_cast<int64_t>(s.logits.size()) < V) s.logits.resize(V);
    if (c.temperature > 0 && static_cast<int64_t>(s.idx.size()) < V) {
      s.idx.resize(V);
      s.values.resize(V);
      s.weights.resize(V);
      s.candidates.resize(V);
      s.bucket.resize(V);
    }
    if (c.temperature > 0 && s.mass.empty()) {
      s.mass.resize(kBuckets);
      s.count.resize(kBuckets);
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
