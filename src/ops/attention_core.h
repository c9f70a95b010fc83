// The attention kernel shared by the ops that attend: `attention` (keys are
// the rows of one cache, row s at position s) and the extension
// `ring_attention` (a sliding window's ring of rows plus the step's own
// keys, ops/ring_attention.cpp). Each (head block, query row) job walks the
// runs of keys its query may see in tiles with an online softmax (running
// max, running sum, accumulator rescaled when the max grows), as flash
// attention does: no score matrix is materialised and masked keys are never
// touched. The query heads that share a kv head run together, so K and V
// are read once per group.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "ops/op.h"

namespace bonfire {

struct AttnConfig {
  int64_t heads = 0, head_dim = 0, kv_heads = 0, v_head_dim = 0;
  bool causal = true;
  int64_t pos_offset = 0;
  float scale = 1;
  float softcap = 0;   // 0: none
  int64_t window = 0;  // 0: none
  std::vector<float> slopes;  // per head; empty: no ALiBi
};

// The attention op's params (docs/OPS.md), checked; throws bad_graph.
AttnConfig parse_attention(const Params& p);

// Consecutive key rows holding consecutive positions: row i of the run is at
// k + i*kvHeads*headDim (v + i*kvHeads*vHeadDim) and position first_pos + i.
struct KeyRun {
  const float* k;
  const float* v;
  int64_t rows;
  int64_t first_pos;
  int64_t bias_col;  // the run's first column in the bias rows (attention's optional input)
};

struct AttendBias {
  const float* data = nullptr;  // [T, S] or [heads, T, S]; null: none
  bool per_head = false;
  int64_t cols = 0;  // S
};

// The keys the query at absolute position `pos` sees, appended to `runs`.
using VisibleRuns = std::function<void(int64_t pos, std::vector<KeyRun>& runs)>;

// out [T, heads*vHeadDim] for q [T, heads*headDim], query row t at position
// c.pos_offset + t. `keys` sizes the work split (the longest a row may see).
void attend(const AttnConfig& c, const float* q, int64_t T, int64_t keys, const AttendBias& bias, float* out,
            const VisibleRuns& visible);

}  // namespace bonfire
