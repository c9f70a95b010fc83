// Expert matrix products over groups of slots that share an expert. A group
// of a few slots streams each weight row once through the dequantizing dot
// kernel for all of them (qgemv); a larger one dequantizes a tile of rows to
// f32 exactly as ORT does (as ORT multiplies its dequantized experts with
// MLAS SGEMM) and multiplies it in f32 (expert_tile_gemm). Work items are
// (group, row tile), split over the worker's threads.
#include <algorithm>
#include <cstring>

#include "core/threads.h"
#include "kernels/qmoe/qmoe.h"

namespace bonfire::kernels::qmoe {

namespace {

constexpr int64_t kGemvTile = 32;  // weight rows an item of the dot kernel
constexpr int64_t kGemmTile = 64;  // weight rows a dequantized tile
constexpr int64_t kGemmSlots = 8;  // slots of one expert from which a GEMM pays

struct Item {
  int64_t group, r0, rows;
};

}  // namespace

void run_groups(const Problem& p, Layer layer, const std::vector<SlotGroup>& groups, int64_t batch_limit) {
  if (groups.empty()) return;
  const bool fc1 = layer == Layer::FC1;
  const int64_t cols = fc1 ? p.hidden : p.inter;
  const int64_t rows = fc1 ? p.fc1_rows : p.hidden;
  if (rows == 0) return;

  // Each group's activations, gathered once: prepared for the dot kernel, or
  // as stored for the tile GEMM, ldx floats apart.
  const QMatrix shape = fc1 ? p.fc1_of(0) : p.fc2_of(0);  // every expert's
  const int64_t ldx = prepared_x_size(shape);  // at least cols
  std::vector<int64_t> first(groups.size() + 1, 0);
  std::vector<char> gemm(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    const int64_t n = (int64_t)groups[g].x_rows.size();
    gemm[g] = n >= kGemmSlots && batch_limit >= kGemmSlots;
    first[g + 1] = first[g] + n;
  }
  // Kept between calls: fresh pages of a large buffer cost a fault each.
  // (The threads below use the calling thread's buffer through `xs`.)
  static thread_local std::vector<float> xs_buffer;
  if (xs_buffer.size() < (size_t)(first.back() * ldx)) xs_buffer.resize(first.back() * ldx);
  float* const xs = xs_buffer.data();
  std::vector<std::pair<int64_t, int64_t>> slots;  // (group, index)
  slots.reserve(first.back());
  for (size_t g = 0; g < groups.size(); ++g)
    for (size_t i = 0; i < groups[g].x_rows.size(); ++i) slots.emplace_back(g, i);
  parallel_for((int64_t)slots.size(), grain_for(cols), [&](int64_t s0, int64_t s1) {
    for (int64_t s = s0; s < s1; ++s) {
      const auto [g, i] = slots[s];
      float* dst = xs + (first[g] + i) * ldx;
      if (gemm[g])
        std::memcpy(dst, groups[g].x_rows[i], cols * sizeof(float));
      else
        prepare_x(shape, groups[g].x_rows[i], dst);
    }
  });

  std::vector<Item> items;
  for (size_t g = 0; g < groups.size(); ++g) {
    const int64_t tile = gemm[g] ? kGemmTile : kGemvTile;
    for (int64_t r0 = 0; r0 < rows; r0 += tile) items.push_back({(int64_t)g, r0, std::min(tile, rows - r0)});
  }
  const int64_t work = first.back() * rows * cols;  // multiply-adds in all

  const int64_t batch = std::clamp<int64_t>(batch_limit, 1, 4);
  parallel_for((int64_t)items.size(), grain_for(work / (int64_t)items.size()), [&](int64_t i0, int64_t i1) {
    static thread_local std::vector<float> out;  // each thread's own
    for (int64_t it = i0; it < i1; ++it) {
      const Item& item = items[it];
      const SlotGroup& group = groups[item.group];
      const QMatrix w = fc1 ? p.fc1_of(group.expert) : p.fc2_of(group.expert);
      const int64_t n = (int64_t)group.x_rows.size();
      const float* x = xs + first[item.group] * ldx;
      out.resize(n * item.rows);
      if (gemm[item.group]) {
        expert_tile_gemm(w, item.r0, item.rows, x, n, ldx, out.data(), item.rows);
      } else {
        for (int64_t b = 0; b < n; b += batch) {
          const int nx = (int)std::min(batch, n - b);
          qgemv(w, item.r0, item.rows, x + b * ldx, ldx, nx, out.data() + b * item.rows, item.rows);
        }
      }
      for (int64_t i = 0; i < n; ++i) {
        const float* o = out.data() + i * item.rows;
        if (fc1)
          activate(p, o, item.r0, item.rows, group.y_rows[i]);
        else
          std::memcpy(group.y_rows[i] + item.r0, o, item.rows * sizeof(float));
      }
    }
  });
}

}  // namespace bonfire::kernels::qmoe
