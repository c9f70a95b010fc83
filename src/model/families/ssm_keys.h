// The GGUF keys of Mamba's layers (Jamba's and Mamba-2's): ssm.conv_kernel,
// inner_size, state_size, time_step_rank, group_count.
#pragma once
#include "model/config.h"
#include "model/config_keys.h"

namespace bonfire::families {

inline void read_ssm_keys(const GgufKeys& k, ModelConfig& c) {
  c.conv_kernel = k.integer("ssm.conv_kernel", 4);
  c.ssm_inner = k.integer("ssm.inner_size", 0);
  c.ssm_state = k.integer("ssm.state_size", 0);
  c.ssm_dt_rank = k.integer("ssm.time_step_rank", 0);
  c.ssm_groups = k.integer("ssm.group_count", 1);
}

}  // namespace bonfire::families
