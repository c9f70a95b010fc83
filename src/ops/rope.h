// Rotary frequencies outside a graph: the IR generator turns a config's
// rope_scaling into per-frequency factors with the same arithmetic the rope
// op uses (transformers' modeling_rope_utils).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

namespace bonfire {

// inv_freq for `rot_dim` rotated channels under `scaling` (a config's
// rope_scaling object, or null), for a sequence of `seq_len` positions;
// *attention receives the cos/sin multiplier. Throws bad_graph on a bad
// scaling object.
std::vector<float> rope_inv_freq(const nlohmann::json& scaling, double base, int64_t rot_dim, int64_t seq_len,
                                 float* attention);

// The rope op's rotation for `rows` rows of x (params as the op takes
// them, offset a number): cos and sin, [rows, rotaryDim / 2] each, with the
// attention factor applied, and the layout. The CPU op and the GPU kernel
// (kernels/gpu_ops.h) both rotate by these. Throws bad_graph on bad params.
struct RopeTables {
  int64_t head_dim = 0, rot_dim = 0;
  bool interleaved = false;
  std::vector<float> cos, sin;
};
RopeTables rope_tables(const nlohmann::json& params, int64_t rows);

}  // namespace bonfire
