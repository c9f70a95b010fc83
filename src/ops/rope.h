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

}  // namespace bonfire
