// GGUF keys of the hybrid families (Jamba, LFM2, Mamba-2): which layers
// attend, and the sizes of Mamba's layers.
#pragma once
#include "model/config.h"
#include "model/config_keys.h"

namespace bonfire::families {

// ssm.conv_kernel, inner_size, state_size, time_step_rank, group_count.
inline void read_ssm_keys(const GgufKeys& k, ModelConfig& c) {
  c.conv_kernel = k.integer("ssm.conv_kernel", 4);
  c.ssm_inner = k.integer("ssm.inner_size", 0);
  c.ssm_state = k.integer("ssm.state_size", 0);
  c.ssm_dt_rank = k.integer("ssm.time_step_rank", 0);
  c.ssm_groups = k.integer("ssm.group_count", 1);
}

// The converter writes head_count_kv per layer, 0 on the layers that do not
// attend: those become `other` ("conv", "mamba") in layer_types.
inline void layer_types_from_kv_heads(const GgufKeys& k, ModelConfig& c, const char* other) {
  if (const nlohmann::json* per = k.find("attention.head_count_kv"); per && per->is_array())
    for (const auto& h : *per) c.layer_types.push_back(h.is_number() && h.get<int64_t>() > 0 ? "full_attention" : other);
}

}  // namespace bonfire::families
