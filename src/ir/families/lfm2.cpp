// LFM2 (Liquid AI): gated short-convolution layers and attention layers
// (per-head q/k RMSNorm) in one stack, a SwiGLU feed-forward after each, and
// the final norm named embedding_norm. The two kinds of layer need the IR
// extension layer_apply (docs/IR.md §17).
#include "core/error.h"
#include "ir/families/decoder.h"
#include "ir/families/families.h"

namespace bonfire::ir {

nlohmann::json lfm2_ir(const ModelConfig& c) {
  DecoderSpec s = llama_like(c);
  if (c.layer_types.size() != size_t(c.n_layers))
    throw Error(ErrorCode::BadGraph, c.source + ": LFM2 needs one layer type per layer (layer_types or full_attn_idxs), got " +
                                         std::to_string(c.layer_types.size()) + " for " + std::to_string(c.n_layers) + " layers");
  if (c.conv_kernel < 2)
    throw Error(ErrorCode::BadGraph, c.source + ": LFM2's conv_L_cache must be at least 2, got " + std::to_string(c.conv_kernel));
  for (const auto& t : c.layer_types) s.conv_layer.push_back(t == "conv");
  s.conv_kernel = c.conv_kernel;
  s.attn_norm = "operator_norm";
  s.ffn_norm = "ffn_norm";
  s.o = "self_attn.out_proj";
  s.q_norm = "self_attn.q_layernorm", s.k_norm = "self_attn.k_layernorm";
  s.gate = "feed_forward.w1", s.up = "feed_forward.w3", s.down = "feed_forward.w2";
  s.final_norm = "model.embedding_norm";
  return build_decoder_ir(s, c);
}

}  // namespace bonfire::ir
