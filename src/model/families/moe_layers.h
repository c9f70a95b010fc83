// Which layers of a sparse mixture-of-experts model have experts: all but
// mlp_only_layers, and with decoder_sparse_step every step-th layer only.
#pragma once
#include <algorithm>
#include <vector>

#include "model/config.h"

namespace bonfire::families {

inline std::vector<bool> moe_layers(const ModelConfig& c) {
  std::vector<bool> on(c.n_layers, false);
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const bool dense = std::count(c.mlp_only_layers.begin(), c.mlp_only_layers.end(), l) > 0 ||
                       (c.moe_layer_freq > 1 && (l + 1) % c.moe_layer_freq != 0);
    on[l] = c.n_experts > 0 && !dense;
  }
  return on;
}

}  // namespace bonfire::families
