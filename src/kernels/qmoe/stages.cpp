// The expert passes of QMoE in the three forms the package's variants name:
//  - split (QMoE.FC1ActivationStage, QMoE.OutputStage): token by token, each
//    slot's rows dotted on their own; the output stage writes the mixed
//    output rows directly. The fallback for any shape.
//  - GEMV (QMoE.FC1ActivationStageGemv, QMoE.OutputStageGemv), for decode:
//    the chunk's slots grouped by expert so that slots sharing an expert
//    share one pass over its weight (up to 4 at a time).
//  - grouped (QMoE.FC1ActivationStageGrouped[Sgmat],
//    QMoE.OutputStageGrouped[Sgmat]), for prefill: the groups of
//    QMoE.GroupStage (slotList, tileMeta); an expert with enough slots goes
//    through a dequantized tile and a GEMM. The output stage writes slotOut
//    and QMoE.MixStage mixes it.
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/threads.h"
#include "kernels/qmoe/qmoe.h"
#include "ops/simd.h"

namespace bonfire::kernels::qmoe {

namespace {

constexpr int64_t kSplitTile = 32;  // weight rows an item of the split form

struct Bound {
  const uint32_t* expert = nullptr;  // routeExpert
  const float* mix = nullptr;        // routeMix
  float* hidden = nullptr;           // hiddenAct
};

Bound bind_routes(PassArgs& a, const Problem& p, bool with_mix) {
  Bound b;
  const int64_t slots = p.tokens * p.topk;
  b.expert = buffer<uint32_t>(a, "routeExpert", "uint32", slots);
  if (with_mix) b.mix = buffer<float>(a, "routeMix", "float32", slots);
  b.hidden = buffer<float>(a, "hiddenAct", "float32", p.token_count * p.topk * p.inter);
  return b;
}

// (expert, local slots) lists: which slots of the chunk use which expert.
using SlotLists = std::vector<std::pair<int64_t, std::vector<int64_t>>>;

// The chunk's active slots by expert, in slot order within each.
SlotLists lists_by_expert(const Problem& p, const uint32_t* expert) {
  const int64_t K = p.topk, first = p.token_offset * K, n = p.token_count * K;
  std::vector<int64_t> index(p.experts, -1);
  SlotLists out;
  for (int64_t s = 0; s < n; ++s) {
    const uint32_t e = expert[first + s];
    if (e == kNoExpert) continue;
    if (e >= p.experts) throw Error(ErrorCode::Internal, "QMoE: expert index out of range");
    if (index[e] < 0) index[e] = (int64_t)out.size(), out.push_back({(int64_t)e, {}});
    out[index[e]].second.push_back(s);
  }
  return out;
}

// The groups of QMoE.GroupStage: consecutive tiles of one expert as one list.
SlotLists lists_from_tiles(PassArgs& a, const Problem& p) {
  const int64_t n = p.token_count * p.topk;
  const uint32_t* list = buffer<uint32_t>(a, "slotList", "uint32", std::max<int64_t>(1, n));
  const Buffer& meta_buf = bound(a, "tileMeta", "uint32", 1);
  const uint32_t* meta = meta_buf.as<uint32_t>();
  const int64_t tiles = meta[0];
  if (1 + 3 * tiles > (int64_t)meta_buf.bytes.size() / 4) throw Error(ErrorCode::Internal, "QMoE: tileMeta overrun");
  SlotLists out;
  for (int64_t t = 0; t < tiles; ++t) {
    const uint32_t* m = meta + 1 + 3 * t;
    if (m[0] >= p.experts || (int64_t)m[1] + m[2] > n) throw Error(ErrorCode::Internal, "QMoE: bad tile");
    if (out.empty() || out.back().first != m[0]) out.push_back({m[0], {}});
    for (uint32_t i = 0; i < m[2]; ++i) {
      const int64_t s = list[m[1] + i];
      if (s >= n) throw Error(ErrorCode::Internal, "QMoE: bad slot in slotList");
      out.back().second.push_back(s);
    }
  }
  return out;
}

// The lists as groups: slot s reads x_of(s) and writes y_of(s).
template <class X, class Y>
std::vector<SlotGroup> make_groups(const SlotLists& lists, X x_of, Y y_of) {
  std::vector<SlotGroup> groups;
  for (const auto& [e, slots] : lists) {
    SlotGroup g{e, {}, {}};
    for (int64_t s : slots) g.x_rows.push_back(x_of(s)), g.y_rows.push_back(y_of(s));
    groups.push_back(std::move(g));
  }
  return groups;
}

// ---- split form --------------------------------------------------------------

void fc1_split(PassArgs& a) {
  const Problem p = problem_of(a, true);
  const Bound b = bind_routes(a, p, false);
  const int64_t K = p.topk, H = p.hidden, rows = p.fc1_rows;
  const int64_t tiles = (rows + kSplitTile - 1) / kSplitTile;
  // Items: (token, tile of FC1 rows); each dots its token's slots alone.
  const QMatrix shape = p.fc1_of(0);  // every expert's
  const int64_t ldx = prepared_x_size(shape);
  parallel_for(p.token_count * tiles, grain_for(K * kSplitTile * H), [&](int64_t i0, int64_t i1) {
    std::vector<float> x(ldx), out(kSplitTile);
    int64_t prepared = -1;
    for (int64_t it = i0; it < i1; ++it) {
      const int64_t lt = it / tiles, r0 = (it % tiles) * kSplitTile, nr = std::min(kSplitTile, rows - r0);
      const int64_t t = p.token_offset + lt;
      if (prepared != t) prepare_x(shape, p.input + t * H, x.data()), prepared = t;
      for (int64_t j = 0; j < K; ++j) {
        const uint32_t e = b.expert[t * K + j];
        if (e == kNoExpert) continue;
        qgemv(p.fc1_of(e), r0, nr, x.data(), ldx, 1, out.data(), nr);
        activate(p, out.data(), r0, nr, b.hidden + (lt * K + j) * p.inter);
      }
    }
  });
}

void output_split(PassArgs& a) {
  const Problem p = problem_of(a, true);
  const Bound b = bind_routes(a, p, true);
  float* output = buffer<float>(a, "output", "float32", p.tokens * p.hidden);
  const int64_t K = p.topk, H = p.hidden, I = p.inter;
  const int64_t tiles = (H + kSplitTile - 1) / kSplitTile;
  // The chunk's hidden rows prepared for the dot kernel once.
  const QMatrix shape = p.fc2_of(0);  // every expert's
  const int64_t ldx = prepared_x_size(shape);
  std::vector<float> hx(p.token_count * K * ldx);
  parallel_for(p.token_count * K, grain_for(I), [&](int64_t s0, int64_t s1) {
    for (int64_t s = s0; s < s1; ++s)
      if (b.expert[p.token_offset * K + s] != kNoExpert) prepare_x(shape, b.hidden + s * I, &hx[s * ldx]);
  });
  // Items: (token, tile of output columns), which they own: 0, then each
  // active slot's FC2 rows times its weight, in slot order.
  parallel_for(p.token_count * tiles, grain_for(K * kSplitTile * I), [&](int64_t i0, int64_t i1) {
    std::vector<float> y(kSplitTile);
    for (int64_t it = i0; it < i1; ++it) {
      const int64_t lt = it / tiles, r0 = (it % tiles) * kSplitTile, nr = std::min(kSplitTile, H - r0);
      const int64_t t = p.token_offset + lt;
      float* o = output + t * H + r0;
      std::memset(o, 0, nr * sizeof(float));
      for (int64_t j = 0; j < K; ++j) {
        const uint32_t e = b.expert[t * K + j];
        if (e == kNoExpert) continue;
        qgemv(p.fc2_of(e), r0, nr, &hx[(lt * K + j) * ldx], ldx, 1, y.data(), nr);
        simd::axpy_f32(b.mix[t * K + j], y.data(), o, nr);
      }
    }
  });
}

// ---- GEMV form ---------------------------------------------------------------

void fc1_gemv(PassArgs& a) {
  const Problem p = problem_of(a, true);
  const Bound b = bind_routes(a, p, false);
  const auto groups = make_groups(
      lists_by_expert(p, b.expert), [&](int64_t s) { return p.input + (p.token_offset + s / p.topk) * p.hidden; },
      [&](int64_t s) { return b.hidden + s * p.inter; });
  run_groups(p, Layer::FC1, groups, 4);
}

void output_gemv(PassArgs& a) {
  const Problem p = problem_of(a, true);
  const Bound b = bind_routes(a, p, true);
  float* output = buffer<float>(a, "output", "float32", p.tokens * p.hidden);
  std::vector<float> slot_out(p.token_count * p.topk * p.hidden);
  const auto groups = make_groups(
      lists_by_expert(p, b.expert), [&](int64_t s) { return (const float*)b.hidden + s * p.inter; },
      [&](int64_t s) { return slot_out.data() + s * p.hidden; });
  run_groups(p, Layer::FC2, groups, 4);
  mix_rows(p, b.mix, slot_out.data(), output);
}

// ---- grouped form ------------------------------------------------------------

constexpr int64_t kAnyBatch = int64_t(1) << 40;

void fc1_grouped(PassArgs& a) {
  const Problem p = problem_of(a, true);
  float* hidden = buffer<float>(a, "hiddenAct", "float32", p.token_count * p.topk * p.inter);
  const auto groups = make_groups(
      lists_from_tiles(a, p), [&](int64_t s) { return p.input + (p.token_offset + s / p.topk) * p.hidden; },
      [&](int64_t s) { return hidden + s * p.inter; });
  run_groups(p, Layer::FC1, groups, kAnyBatch);
}

void output_grouped(PassArgs& a) {
  const Problem p = problem_of(a, true);
  const float* hidden = buffer<float>(a, "hiddenAct", "float32", p.token_count * p.topk * p.inter);
  float* slot_out = buffer<float>(a, "slotOut", "float32", p.token_count * p.topk * p.hidden);
  const auto groups = make_groups(
      lists_from_tiles(a, p), [&](int64_t s) { return hidden + s * p.inter; },
      [&](int64_t s) { return slot_out + s * p.hidden; });
  run_groups(p, Layer::FC2, groups, kAnyBatch);
}

}  // namespace

void register_stage_passes(void (*add)(const std::string&, PassFn)) {
  add("QMoE.FC1ActivationStage", fc1_split);
  add("QMoE.OutputStage", output_split);
  add("QMoE.FC1ActivationStageGemv", fc1_gemv);
  add("QMoE.OutputStageGemv", output_gemv);
  add("QMoE.FC1ActivationStageGrouped", fc1_grouped);
  add("QMoE.OutputStageGrouped", output_grouped);
  // On a CPU the subgroup-matrix variant's stages are the grouped ones: same
  // intermediates, same numbers.
  add("QMoE.FC1ActivationStageGroupedSgmat", fc1_grouped);
  add("QMoE.OutputStageGroupedSgmat", output_grouped);
}

}  // namespace bonfire::kernels::qmoe
