// The QMoE passes around the experts: routing (QMoE.RouteStage), the grouping
// of a chunk's slots by expert (QMoE.GroupStage), the weighted sum of the
// slots' outputs (QMoE.MixStage) and the output of an empty expert
// (QMoE.OutputStageZeroInter).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/threads.h"
#include "kernels/qmoe/qmoe.h"
#include "ops/simd.h"

namespace bonfire::kernels::qmoe {

// ORT's routing, step for step in float:
// - the k largest logits by std::partial_sort of (logit, index) pairs under
//   std::greater: larger logit first, and on equal logits the larger index;
//   NaN compares as neither larger nor smaller, so where it lands is what
//   that sort does with it, and the same sort is run here;
// - a softmax over only those k: exp(l - l_best) summed in order, each
//   multiplied by 1 / sum (by 0 if the sum is 0);
// - a slot whose weight is not > 1e-8f is skipped (never computed), which
//   also skips every NaN weight: a row of all -inf logits (-inf - -inf) or
//   with a +inf among the chosen (inf - inf) contributes nothing.
void route_stage(PassArgs& a) {
  const Problem p = problem_of(a, false);
  const int64_t T = p.tokens, E = p.experts, K = p.topk;
  if (K < 1 || K > E) throw Error(ErrorCode::Internal, "QMoE.RouteStage: k out of range");
  const float* logits = buffer<float>(a, "router_probs", "float32", T * E);
  uint32_t* expert = buffer<uint32_t>(a, "routeExpert", "uint32", T * K);
  float* mix = buffer<float>(a, "routeMix", "float32", T * K);
  parallel_for(T, grain_for(4 * E), [&](int64_t t0, int64_t t1) {
    std::vector<std::pair<float, int64_t>> sorted(E);
    std::vector<float> top_exp(K);
    for (int64_t t = t0; t < t1; ++t) {
      const float* l = logits + t * E;
      for (int64_t e = 0; e < E; ++e) sorted[e] = {l[e], e};
      std::partial_sort(sorted.begin(), sorted.begin() + K, sorted.end(), std::greater<>());
      const float max_logit = sorted[0].first;
      float sum = 0.0f;
      for (int64_t j = 0; j < K; ++j) {
        top_exp[j] = std::exp(sorted[j].first - max_logit);
        sum += top_exp[j];
      }
      const float inv_sum = sum == 0.0f ? 0.0f : 1.0f / sum;
      for (int64_t j = 0; j < K; ++j) {
        const float w = top_exp[j] * inv_sum;
        const bool used = w > kMinRouteWeight;
        expert[t * K + j] = used ? (uint32_t)sorted[j].second : kNoExpert;
        mix[t * K + j] = used ? w : 0.0f;
      }
    }
  });
}

// The chunk's active slots by expert (a counting sort: slot order within an
// expert), cut into tiles of at most groupTileM slots of one expert.
void group_stage(PassArgs& a) {
  const Problem p = problem_of(a, false);
  const int64_t K = p.topk, E = p.experts, n = p.token_count * K, first = p.token_offset * K;
  const uint32_t* expert = buffer<uint32_t>(a, "routeExpert", "uint32", p.tokens * K);
  Buffer& list_buf = bound(a, "slotList", "uint32", std::max<int64_t>(1, n));
  Buffer& meta_buf = bound(a, "tileMeta", "uint32", 1);
  uint32_t* list = list_buf.as<uint32_t>();
  uint32_t* meta = meta_buf.as<uint32_t>();
  const int64_t tile_m = std::max<int64_t>(1, (int64_t)a.num("groupTileM"));

  std::vector<int64_t> start(E + 1, 0);
  for (int64_t s = 0; s < n; ++s)
    if (expert[first + s] != kNoExpert) ++start[expert[first + s] + 1];
  for (int64_t e = 0; e < E; ++e) start[e + 1] += start[e];
  std::vector<int64_t> fill(start.begin(), start.end() - 1);
  for (int64_t s = 0; s < n; ++s)
    if (expert[first + s] != kNoExpert) list[fill[expert[first + s]]++] = (uint32_t)s;

  const int64_t meta_cap = (int64_t)meta_buf.bytes.size() / 4;
  int64_t tiles = 0;
  for (int64_t e = 0; e < E; ++e) {
    for (int64_t b = start[e]; b < start[e + 1]; b += tile_m) {
      if (1 + 3 * (tiles + 1) > meta_cap) throw Error(ErrorCode::Internal, "QMoE.GroupStage: tileMeta too small");
      uint32_t* m = meta + 1 + 3 * tiles++;
      m[0] = (uint32_t)e;
      m[1] = (uint32_t)b;
      m[2] = (uint32_t)std::min(tile_m, start[e + 1] - b);
    }
  }
  meta[0] = (uint32_t)tiles;
}

// Mixes the chunk's slot outputs into its output rows: 0, then each active
// slot's output times its routing weight, in slot order.
void mix_rows(const Problem& p, const float* mix, const float* slot_out, float* output) {
  const int64_t K = p.topk, H = p.hidden;
  parallel_for(p.token_count, grain_for(K * H), [&](int64_t t0, int64_t t1) {
    for (int64_t lt = t0; lt < t1; ++lt) {
      const int64_t t = p.token_offset + lt;
      float* o = output + t * H;
      std::memset(o, 0, H * sizeof(float));
      for (int64_t j = 0; j < K; ++j) {
        const float w = mix[t * K + j];
        if (w > 0.0f) simd::axpy_f32(w, slot_out + (lt * K + j) * H, o, H);
      }
    }
  });
}

void mix_stage(PassArgs& a) {
  const Problem p = problem_of(a, false);
  const float* mix = buffer<float>(a, "routeMix", "float32", p.tokens * p.topk);
  const float* slot_out = buffer<float>(a, "slotOut", "float32", p.token_count * p.topk * p.hidden);
  float* output = buffer<float>(a, "output", "float32", p.tokens * p.hidden);
  mix_rows(p, mix, slot_out, output);
}

// With no intermediate columns every expert's FC2 output is 0, and so is
// the mix (ORT gives 0 too).
void output_zero_inter(PassArgs& a) {
  Buffer& out = bound(a, "output", "float32", 0);
  std::memset(out.bytes.data(), 0, out.bytes.size());
}

}  // namespace bonfire::kernels::qmoe
