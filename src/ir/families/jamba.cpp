// Jamba (AI21): Mamba layers and attention layers (no positional encoding)
// in one stack, a mixture of experts (softmax routing, no renormalisation)
// on every other layer. The two mixers need the IR extension layer_apply
// (docs/IR.md §17).
#include "core/error.h"
#include "ir/families/decoder.h"
#include "ir/families/families.h"
#include "ir/families/moe_layers.h"

namespace bonfire::ir {

nlohmann::json jamba_ir(const ModelConfig& c) {
  DecoderSpec s = llama_like(c);
  if (c.layer_types.size() != size_t(c.n_layers))
    throw Error(ErrorCode::BadGraph, c.source + ": Jamba needs one layer type per layer, got " +
                                         std::to_string(c.layer_types.size()) + " for " + std::to_string(c.n_layers));
  if (c.ssm_inner < 1 || c.ssm_state < 1 || c.ssm_dt_rank < 1 || c.conv_kernel < 2)
    throw Error(ErrorCode::BadGraph, c.source + ": Jamba's Mamba sizes (inner " + std::to_string(c.ssm_inner) + ", state " +
                                         std::to_string(c.ssm_state) + ", dt rank " + std::to_string(c.ssm_dt_rank) +
                                         ", conv " + std::to_string(c.conv_kernel) + ") must be positive (conv >= 2)");
  for (const auto& t : c.layer_types) s.mamba_layer.push_back(t == "mamba");
  s.ssm_inner = c.ssm_inner, s.ssm_state = c.ssm_state, s.ssm_dt_rank = c.ssm_dt_rank, s.ssm_conv = c.conv_kernel;
  s.mamba_norms = true;
  s.n_rot = 0;  // no positional encoding
  s.ffn_norm = "pre_ff_layernorm";
  s.gate = "feed_forward.gate_proj", s.up = "feed_forward.up_proj", s.down = "feed_forward.down_proj";
  s.final_norm = "model.final_layernorm";
  s.n_experts = c.n_experts;
  s.top_k = c.n_experts_per_tok;
  s.renorm = false;
  s.moe_layer = moe_layers(c);
  s.router = "feed_forward.router";
  s.expert_gate = "feed_forward.experts.{e}.gate_proj";
  s.expert_up = "feed_forward.experts.{e}.up_proj";
  s.expert_down = "feed_forward.experts.{e}.down_proj";
  return build_decoder_ir(s, c);
}

}  // namespace bonfire::ir
